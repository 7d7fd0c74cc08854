//! Wall clocks of their own for workers and nodes, with libfaketime.
//!
//! A process started with `LD_PRELOAD` naming libfaketime and `FAKETIME_TIMESTAMP_FILE`
//! naming a file reads its wall clock (`clock_gettime(CLOCK_REALTIME)`, which Rust's
//! `SystemTime` and the JVM's `System.currentTimeMillis` both call through the C library)
//! offset by what the file says, e.g. `+0.250000` or `-1.500000` seconds. The nemesis
//! rewrites the file (a new file renamed over the old one, so that no reader sees half of
//! it) to set the clock off, to make it drift, and to set it right.
//!
//! A worker runs with `FAKETIME_DONT_FAKE_MONOTONIC=1`: its monotonic clock stays true, so
//! the lock's deadlines, Tokio's timers and the logs' time line (`CLOCK_MONOTONIC`) are not
//! touched. It reads the file at every wall-clock read (`FAKETIME_NO_CACHE=1`; lock-core's
//! `SystemClock` reads the wall clock at most once a millisecond, and a read costs a few
//! microseconds).
//!
//! A node's JVM cannot run that way: with libfaketime 0.9.10 and
//! `FAKETIME_DONT_FAKE_MONOTONIC=1`, OpenJDK 17's timed waits break (100
//! `LockSupport.parkNanos(10 ms)` or `Object.wait(10)` return at once, 100
//! `Thread.sleep(10)` take 6.3 s and 2.6 s of CPU), and a node spins in them. So its
//! monotonic clock is offset with its wall clock (a JVM uses `System.nanoTime` only for
//! differences; a change of offset is a step of both). It re-reads the file at most once a
//! second (`FAKETIME_CACHE_DURATION=1`): a JVM reads its clocks far more often.
//!
//! Drift is made by the nemesis rewriting the offset every [`DRIFT_STEP`], not with
//! libfaketime's own rate (`x1.01`): that rate counts from the start of the process, so
//! setting it in the middle of a run steps the clock by the whole time already run, and
//! once set it stays when the file no longer names it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How often the nemesis rewrites a drifting clock's offset.
pub const DRIFT_STEP: Duration = Duration::from_millis(100);

/// libfaketime is not there and could not be installed.
#[derive(Debug, thiserror::Error)]
#[error(
    "the clock faults need libfaketime (Debian's package libfaketime, which lock-jepsen \
     installs itself when it runs as root): {detail}"
)]
pub struct FaketimeMissing {
    /// What was tried, and what happened.
    pub detail: String,
}

/// The library's name in Debian's package.
const LIBRARY: &str = "libfaketime.so.1";

/// libfaketime's library, installed first with `apt-get` if it is missing and this
/// process runs as root.
pub fn library() -> Result<PathBuf, FaketimeMissing> {
    if let Some(found) = find_library() {
        return Ok(found);
    }
    if !rustix::process::geteuid().is_root() {
        return Err(FaketimeMissing {
            detail: format!(
                "{LIBRARY} is not installed, and this process does not run as root to install it"
            ),
        });
    }
    let install = || {
        Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "libfaketime",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    if !install().is_ok_and(|out| out.status.success()) {
        // A fresh machine's package lists may be missing: fetch them once and try again.
        let _ = Command::new("apt-get").args(["update", "-q"]).output();
        let out = install().map_err(|error| FaketimeMissing {
            detail: format!("apt-get could not run: {error}"),
        })?;
        if !out.status.success() {
            return Err(FaketimeMissing {
                detail: format!(
                    "apt-get install libfaketime failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
    }
    find_library().ok_or_else(|| FaketimeMissing {
        detail: format!("installed, but {LIBRARY} is in no faketime directory under /usr/lib"),
    })
}

/// `/usr/lib/<arch>/faketime/libfaketime.so.1` (Debian's multiarch path) or
/// `/usr/lib/faketime/libfaketime.so.1`.
fn find_library() -> Option<PathBuf> {
    let lib = Path::new("/usr/lib");
    let arch_dirs = std::fs::read_dir(lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path());
    std::iter::once(lib.to_path_buf())
        .chain(arch_dirs)
        .map(|dir| dir.join("faketime").join(LIBRARY))
        .find(|candidate| candidate.is_file())
}

/// How a process runs on its clock file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reread {
    /// A worker: re-reads it at every wall-clock read; its monotonic clock stays true.
    Always,
    /// A node's JVM: re-reads it at most once a second; its monotonic clock is offset too.
    EverySecond,
}

/// One process's clock: the file its libfaketime reads its offset from.
#[derive(Clone, Debug)]
pub struct ClockFile {
    path: PathBuf,
}

impl ClockFile {
    /// Creates the file at `path`, with the clock right.
    pub fn create(path: PathBuf) -> std::io::Result<Self> {
        let file = ClockFile { path };
        file.set(0)?;
        Ok(file)
    }

    /// Sets the clock `offset_us` off (positive: ahead).
    pub fn set(&self, offset_us: i64) -> std::io::Result<()> {
        let staged = self.path.with_extension("next");
        std::fs::write(&staged, offset_text(offset_us))?;
        std::fs::rename(&staged, &self.path)
    }

    /// The environment that runs a process on this clock, with `library` preloaded.
    pub fn environment(&self, library: &Path, reread: Reread) -> Vec<(String, String)> {
        let mut environment = vec![
            ("LD_PRELOAD".to_owned(), library.display().to_string()),
            (
                "FAKETIME_TIMESTAMP_FILE".to_owned(),
                self.path.display().to_string(),
            ),
        ];
        let settings: &[(&str, &str)] = match reread {
            Reread::Always => &[
                ("FAKETIME_NO_CACHE", "1"),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ],
            Reread::EverySecond => &[("FAKETIME_CACHE_DURATION", "1")],
        };
        environment.extend(
            settings
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
        );
        environment
    }
}

/// libfaketime's relative offset: a sign, seconds, and six decimals.
fn offset_text(offset_us: i64) -> String {
    let sign = if offset_us < 0 { '-' } else { '+' };
    let magnitude = offset_us.unsigned_abs();
    format!(
        "{sign}{}.{:06}\n",
        magnitude / 1_000_000,
        magnitude % 1_000_000
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn offsets_are_written_as_libfaketime_reads_them() {
        assert_eq!(offset_text(0), "+0.000000\n");
        assert_eq!(offset_text(250_000), "+0.250000\n");
        assert_eq!(offset_text(-1_500_001), "-1.500001\n");
    }

    #[test]
    fn a_clock_file_is_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("lock-jepsen-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = ClockFile::create(dir.join("worker-0.faketime")).unwrap();
        file.set(-2_000_000).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("worker-0.faketime")).unwrap(),
            "-2.000000\n"
        );
        let environment = file.environment(Path::new("/lib/libfaketime.so.1"), Reread::Always);
        assert!(environment.contains(&("FAKETIME_NO_CACHE".to_owned(), "1".to_owned())));
        assert!(environment.contains(&("FAKETIME_DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned())));
        let jvm = file.environment(Path::new("/lib/libfaketime.so.1"), Reread::EverySecond);
        assert!(
            jvm.iter()
                .all(|(name, _)| name != "FAKETIME_DONT_FAKE_MONOTONIC")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
