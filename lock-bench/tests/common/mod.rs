//! What the real-Cassandra end-to-end tests of lock-bench share: run the binary as a person
//! does, against a local cluster it starts itself.

use std::path::PathBuf;

use lock_storage_cassandra::local_cluster;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `lock-bench <args> --out <dir>` with a fresh `dir` named `out_name` under Cargo's
/// test directory, waits at most 10 minutes, asserts that it succeeded and returns its
/// standard output and the output directory. The child's nodes die with it (their
/// watchdogs), so killing it on a timeout leaves no JVM behind.
pub fn run_lock_bench(args: &[&str], out_name: &str) -> (String, PathBuf) {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(out_name);
    let _ = std::fs::remove_dir_all(&out);
    let mut child = Command::new(env!("CARGO_BIN_EXE_lock-bench"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lock-bench");
    let deadline = Instant::now() + Duration::from_secs(600);
    while child.try_wait().expect("poll lock-bench").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "lock-bench {} did not finish within 10 minutes",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = child.wait_with_output().expect("lock-bench's output");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "lock-bench failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    (stdout, out)
}

/// Whether test `test` may run on a local cluster of `nodes` nodes: `false` (after a line
/// saying it was skipped and why) when `java` or `mvn` is missing, a panic when that happens
/// under `CI=true`, where a real-Cassandra test may not be skipped.
pub fn local_cassandra_available(test: &str, nodes: usize) -> bool {
    match local_cluster::ran_or_skipped(test, nodes) {
        Ok(ran) => ran,
        Err(missing) => {
            panic!("{test}: a real-Cassandra test may not be skipped under CI=true: {missing}")
        }
    }
}
