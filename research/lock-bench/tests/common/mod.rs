//! What the real-Cassandra end-to-end tests of lock-bench share: run the binary as a person
//! does, against a local cluster it starts itself.

use std::path::PathBuf;

use std::time::Duration;

/// Runs `lock-bench <args> --out <dir>` with a fresh `dir` named `out_name` under Cargo's
/// test directory, waits at most 10 minutes, asserts that it succeeded and returns its
/// standard output and the output directory.
pub fn run_lock_bench(args: &[&str], out_name: &str) -> (String, PathBuf) {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(out_name);
    let stdout = lock_cli_support::testing::run_to_success(
        std::path::Path::new(env!("CARGO_BIN_EXE_lock-bench")),
        args,
        &out,
        Duration::from_secs(600),
    );
    (stdout, out)
}

/// Whether test `test` may run on a local cluster of `nodes` nodes: `false` (after a line
/// saying it was skipped and why) when `java` or `mvn` is missing, a panic when that happens
/// under `CI=true`, where a real-Cassandra test may not be skipped.
pub fn local_cassandra_available(test: &str, nodes: usize) -> bool {
    match lock_local_cluster::ran_or_skipped(test, nodes) {
        Ok(ran) => ran,
        Err(missing) => {
            panic!("{test}: a real-Cassandra test may not be skipped under CI=true: {missing}")
        }
    }
}
