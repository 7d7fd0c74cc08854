//! `lock-jepsen --cassandra local` end to end, in miniature: three worker processes
//! take one lock on a local 3-node Apache Cassandra through one cycle of the nemesis (a node
//! killed and restarted, a node frozen past the request timeout, a worker paused past its
//! lease while holding the lock), and the checker must pass: no overlap within the
//! assumptions, every overlap after the paused holder's lost signal, the plain register at
//! its acknowledged increments (or below them only if a plain write had an attempt fail,
//! which may run after its retry), and the paused holder's late fenced write refused.
//!
//! Without `java` (or, before the jars are cached, `mvn`) the test says it was skipped and
//! passes, except under `CI=true`, where a skipped real-Cassandra test is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use lock_storage_cassandra::local_cluster;

const TEST: &str = "jepsen_passes_one_cycle_of_faults_on_a_local_cluster";

#[test]
fn jepsen_passes_one_cycle_of_faults_on_a_local_cluster() {
    if !local_cassandra_available(TEST, 3) {
        return;
    }
    let (stdout, out) = run_lock_jepsen(
        &[
            "--cassandra",
            "local",
            "-p",
            "3",
            "--duration",
            "10s",
            "--keyspace",
            "lock_bench_jepsen_test",
            "--quiet",
        ],
        "jepsen-local",
    );
    assert!(stdout.contains("Checker: PASS"), "{stdout}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("jepsen").join("jepsen.json")).unwrap(),
    )
    .unwrap();
    let verdict = &json["verdict"];
    assert_eq!(
        verdict["failures"].as_array().unwrap().len(),
        0,
        "{verdict}"
    );
    assert!(verdict["acquisitions"].as_u64().unwrap() > 10, "{verdict}");
    assert_eq!(verdict["overlaps_within"].as_array().unwrap().len(), 0);
    let kinds: Vec<&str> = json["faults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fault| fault["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["kill", "freeze", "pause"], "{json}");
    let registers = &verdict["registers"];
    let acked = verdict["plain_acked"].as_i64().unwrap();
    let unknown = verdict["plain_unknown"].as_i64().unwrap();
    let plain = registers["plain"].as_i64().unwrap();
    let set_back_possible = verdict["plain_failed_attempts"].as_i64().unwrap() > 0
        || verdict["plain_late"].as_i64().unwrap() > 0;
    assert!(
        (plain >= acked || set_back_possible) && plain <= acked + unknown,
        "plain {plain}, acked {acked}, unknown {unknown}: {verdict}"
    );
    // The pause caught a holder: it wrote its fenced register late, after another holder
    // had written, and the register refused it.
    if json["faults"][2]["while_holding"] == true {
        assert_eq!(verdict["paused_holdings"], 1, "{verdict}");
        assert!(
            verdict["late_writes"].as_array().unwrap().len() == 1 && verdict["late_refused"] == 1,
            "{verdict}"
        );
        for overlap in verdict["overlaps_beyond"].as_array().unwrap() {
            assert!(overlap["after_lost_us"].as_i64().unwrap() > 0, "{overlap}");
        }
    }
    for worker in 0..3 {
        assert!(
            out.join("jepsen")
                .join(format!("worker-{worker}.jsonl"))
                .is_file()
        );
    }
}

/// Runs `lock-jepsen <args> --out <dir>` with a fresh `dir` named `out_name` under Cargo's
/// test directory, waits at most 10 minutes, asserts that it succeeded and returns its
/// standard output and the output directory.
fn run_lock_jepsen(args: &[&str], out_name: &str) -> (String, PathBuf) {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(out_name);
    let stdout = lock_cli_support::testing::run_to_success(
        std::path::Path::new(env!("CARGO_BIN_EXE_lock-jepsen")),
        args,
        &out,
        Duration::from_secs(600),
    );
    (stdout, out)
}

/// Whether test `test` may run on a local cluster of `nodes` nodes: `false` (after a line
/// saying it was skipped and why) when `java` or `mvn` is missing, a panic when that happens
/// under `CI=true`, where a real-Cassandra test may not be skipped.
fn local_cassandra_available(test: &str, nodes: usize) -> bool {
    match local_cluster::ran_or_skipped(test, nodes) {
        Ok(ran) => ran,
        Err(missing) => {
            panic!("{test}: a real-Cassandra test may not be skipped under CI=true: {missing}")
        }
    }
}
