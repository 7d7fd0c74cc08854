//! The jar cache and the per-node configuration files.

use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::version::{CassandraVersion, ReleaseLine};
use crate::ClusterError;

/// The Apache Cassandra release a local cluster runs unless told otherwise
/// ([`CassandraVersion::DEFAULT`], as text).
pub const CASSANDRA_VERSION: &str = "5.0.6";

/// Pinned so that an old Maven does not fall back to a plugin version without
/// `copy-dependencies` options.
const DEPENDENCY_PLUGIN_VERSION: &str = "3.6.1";

/// Balanced single tokens of a 3-node Murmur3 ring, one per node.
const THREE_NODE_TOKENS: [&str; 3] = [
    "-9223372036854775808",
    "-3074457345618258603",
    "3074457345618258602",
];

/// Where the jars are cached: `LOCK_CASSANDRA_CACHE` if set; otherwise `cassandra` in the
/// Cargo target directory of the running executable (found by the `CACHEDIR.TAG` Cargo
/// puts there, or `CARGO_TARGET_DIR`); otherwise the system's temporary directory.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LOCK_CASSANDRA_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("cassandra");
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|dir| dir.join("CACHEDIR.TAG").is_file())
                .map(|target| target.join("cassandra"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("lock-cassandra-cache"))
}

/// Each release's jars have a directory of their own, `cassandra-<version>`.
fn release_dir(cache: &Path, version: CassandraVersion) -> PathBuf {
    cache.join(format!("cassandra-{version}"))
}

/// Whether the jars of `version` are complete in `cache`.
pub(super) fn jars_cached(cache: &Path, version: CassandraVersion) -> bool {
    release_dir(cache, version).join("complete").is_file()
}

/// The directory holding `cassandra-all` `version` and its runtime dependencies under
/// `cache`, fetched with Maven first if it is not complete there. Maven runs on the
/// system's `java` whatever Java the nodes run on. It keeps its own copy in `~/.m2`, so a
/// second fetch needs no network either.
pub fn fetch_jars(cache: &Path, version: CassandraVersion) -> Result<PathBuf, ClusterError> {
    let release = release_dir(cache, version);
    let lib = release.join("lib");
    if jars_cached(cache, version) {
        return Ok(lib);
    }
    let io = |what: &str, error: io::Error| ClusterError::Io {
        what: format!("{what} in {}", release.display()),
        error,
    };
    fs::create_dir_all(&release).map_err(|error| io("create the jar cache", error))?;
    let pom = release.join("pom.xml");
    fs::write(&pom, pom_xml(version)).map_err(|error| io("write pom.xml", error))?;
    let partial = release.join(format!("lib.partial-{}", std::process::id()));
    let _ = fs::remove_dir_all(&partial);
    let log_path = release.join("maven.log");
    let log = fs::File::create(&log_path).map_err(|error| io("create maven.log", error))?;
    let status = Command::new("mvn")
        .arg("-B")
        .arg("-f")
        .arg(&pom)
        .arg("dependency:copy-dependencies")
        .arg("-DincludeScope=runtime")
        .arg(format!("-DoutputDirectory={}", partial.display()))
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|error| io("open maven.log", error))?,
        )
        .stderr(log)
        .status()
        .map_err(|error| ClusterError::ToolMissing {
            tool: "mvn",
            detail: error.to_string(),
            hint: "install Maven 3 (Debian: maven)",
        })?;
    let main_jar = partial.join(format!("cassandra-all-{version}.jar"));
    if !status.success() || !main_jar.is_file() {
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        let lines = text.lines().collect::<Vec<_>>();
        let _ = fs::remove_dir_all(&partial);
        return Err(ClusterError::Fetch {
            detail: format!(
                "`mvn dependency:copy-dependencies` for cassandra-all {version} {}; \
                 check that Maven can reach its central repository (or has the artifacts in \
                 ~/.m2) and serves that release. Maven's output is in {}; its last lines:\n{}",
                if status.success() {
                    "did not produce the cassandra-all jar".to_owned()
                } else {
                    format!("exited with {status}")
                },
                log_path.display(),
                lines[lines.len().saturating_sub(15)..].join("\n")
            ),
        });
    }
    if fs::rename(&partial, &lib).is_err() {
        // Another process completed the same fetch first; its copy is as good.
        let _ = fs::remove_dir_all(&partial);
    }
    fs::write(release.join("complete"), version.to_string())
        .map_err(|error| io("mark the jars complete", error))?;
    Ok(lib)
}

fn pom_xml(version: CassandraVersion) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.lock-tests</groupId>
  <artifactId>cassandra-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>{DEPENDENCY_PLUGIN_VERSION}</version>
      </plugin>
    </plugins>
  </build>
</project>
"#
    )
}

/// What one node's configuration files say of it.
pub(super) struct NodeFiles<'a> {
    /// Where it listens.
    pub(super) address: Ipv4Addr,
    /// Its index in the cluster, from 0.
    pub(super) index: usize,
    /// Every node's address, comma-separated: all are seeds.
    pub(super) seeds: &'a str,
    /// Its data centre. In [`super::ONE_DATA_CENTER`] the node uses `SimpleSnitch`, which
    /// names that data centre itself; in any other, `GossipingPropertyFileSnitch` with
    /// `conf/cassandra-rackdc.properties` (`conf` is first on the node's classpath, where
    /// the snitch looks for it).
    pub(super) data_center: &'a str,
    /// The Cassandra release it runs, whose yaml keys it gets.
    pub(super) version: CassandraVersion,
}

impl NodeFiles<'_> {
    /// Writes `conf/cassandra.yaml` and `conf/logback.xml` (and the data centre's
    /// properties) of this node of a cluster started with `config` into `dir`.
    pub(super) fn write(&self, dir: &Path, config: &super::LocalClusterConfig) -> io::Result<()> {
        let (address, index, seeds, data_center) =
            (self.address, self.index, self.seeds, self.data_center);
        let nodes = config.nodes;
        let conf = dir.join("conf");
        fs::create_dir_all(&conf)?;
        fs::create_dir_all(dir.join("logs"))?;
        let token = if nodes == 1 {
            "0"
        } else {
            THREE_NODE_TOKENS.get(index).copied().unwrap_or("0")
        };
        let snitch = if data_center == super::ONE_DATA_CENTER {
            "SimpleSnitch"
        } else {
            fs::write(
                conf.join("cassandra-rackdc.properties"),
                format!("dc={data_center}\nrack=rack1\n"),
            )?;
            "GossipingPropertyFileSnitch"
        };
        let authentication = if config.password_authentication {
            "authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
"
        } else {
            ""
        };
        let encryption = match &config.client_encryption {
            Some(encryption) => client_encryption_yaml(&conf, encryption)?,
            None => String::new(),
        };
        let version_keys = version_yaml(self.version, config.paxos_variant);
        let yaml = format!(
            "cluster_name: lock_local
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: {snitch}
num_tokens: 1
initial_token: \"{token}\"
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: \"{seeds}\"
listen_address: {address}
rpc_address: {address}
storage_port: {storage_port}
native_transport_port: {cql_port}
start_native_transport: true
auto_bootstrap: false
auto_snapshot: false
commitlog_sync: periodic
phi_convict_threshold: 5
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 8
concurrent_compactors: 1
memtable_flush_writers: 1
{version_keys}{authentication}{encryption}",
            storage_port = super::STORAGE_PORT,
            cql_port = super::CQL_PORT,
        );
        fs::write(conf.join("cassandra.yaml"), yaml)?;
        fs::write(
            conf.join("logback.xml"),
            r#"<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %logger{20} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"#,
        )
    }
}

/// The yaml lines whose keys differ between release lines. Cassandra refuses a yaml with
/// a key it does not know, so 4.0 gets the old `_in_ms` style key and no `paxos_variant`
/// (it has Paxos v1 only; [`super::LocalClusterConfig::validate`] refuses v2 there); 4.1
/// and 5.0 take the new style with units and the Paxos variant.
fn version_yaml(version: CassandraVersion, paxos_variant: super::PaxosVariant) -> String {
    match version.line() {
        ReleaseLine::V4_0 => "commitlog_sync_period_in_ms: 10000\n".to_owned(),
        ReleaseLine::V4_1 | ReleaseLine::V5_0 => {
            format!("commitlog_sync_period: 10000ms\npaxos_variant: {paxos_variant}\n")
        }
    }
}

/// Writes the node's PEM keystore (key and certificate chain in one file, as
/// `PEMBasedSslContextFactory` reads it) and, for mutual TLS, its PEM truststore into
/// `conf`, and returns the `client_encryption_options` that use them.
fn client_encryption_yaml(conf: &Path, encryption: &super::ClientEncryption) -> io::Result<String> {
    let keystore = conf.join("client-keystore.pem");
    let mut pem = encryption.private_key_pem.trim_end().to_owned();
    pem.push('\n');
    pem.push_str(encryption.certificate_chain_pem.trim_end());
    pem.push('\n');
    write_private(&keystore, &pem)?;
    let mut yaml = format!(
        "client_encryption_options:
  enabled: true
  optional: false
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: {}
",
        yaml_path(&keystore)?
    );
    match &encryption.client_ca_pem {
        Some(ca) => {
            let truststore = conf.join("client-truststore.pem");
            fs::write(&truststore, ca)?;
            yaml.push_str(&format!(
                "  require_client_auth: true\n  truststore: {}\n",
                yaml_path(&truststore)?
            ));
        }
        None => yaml.push_str("  require_client_auth: false\n"),
    }
    Ok(yaml)
}

/// A path as a double-quoted YAML scalar; the node directories are this crate's own, so a
/// quote, backslash or control character in one is refused rather than escaped.
fn yaml_path(path: &Path) -> io::Result<String> {
    let text = path.to_str().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{path:?} is not UTF-8"),
        )
    })?;
    if text
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_control())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{path:?} has a character that YAML would need escaped"),
        ));
    }
    Ok(format!("\"{text}\""))
}

/// Writes `contents` to a new file at `path` readable by its owner only (it holds a key).
fn write_private(path: &Path, contents: &str) -> io::Result<()> {
    use std::io::Write as _;
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)?.write_all(contents.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PaxosVariant;

    #[test]
    fn each_line_gets_the_commit_log_key_it_knows_and_4_0_no_paxos_variant() {
        let v4_0 = version_yaml(ReleaseLine::V4_0.tested_release(), PaxosVariant::V1);
        assert_eq!(v4_0, "commitlog_sync_period_in_ms: 10000\n");
        for line in [ReleaseLine::V4_1, ReleaseLine::V5_0] {
            let yaml = version_yaml(line.tested_release(), PaxosVariant::V2);
            assert_eq!(
                yaml, "commitlog_sync_period: 10000ms\npaxos_variant: v2\n",
                "{line}"
            );
        }
    }

    #[test]
    fn each_release_has_a_jar_directory_of_its_own() {
        let cache = Path::new("/cache");
        let dirs = ReleaseLine::ALL.map(|line| release_dir(cache, line.tested_release()));
        assert_eq!(
            dirs.map(|dir| dir.display().to_string()),
            [
                "/cache/cassandra-4.0.19",
                "/cache/cassandra-4.1.10",
                "/cache/cassandra-5.0.6"
            ]
        );
        assert_eq!(CASSANDRA_VERSION, CassandraVersion::DEFAULT.to_string());
    }
}
