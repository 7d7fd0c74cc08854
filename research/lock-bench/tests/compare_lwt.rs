//! `lock-bench compare-lwt --cassandra local` end to end, as a person runs it: the binary
//! starts a one-node Apache Cassandra on this machine with Paxos v2 (and the report reads
//! the setting back from the node), times both locks uncontended, runs
//! the queue lock and the lightweight-transaction lock at P = 1 and 3, stops the cluster,
//! and prints the comparison table with both locks' rows, no exclusion violation, and the
//! files.
//!
//! Without `java` (or, before the jars are cached, `mvn`) the test says it was skipped and
//! passes, except under `CI=true`, where a skipped real-Cassandra test is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

const TEST: &str = "compare_lwt_prints_both_locks_on_a_local_cluster";

#[test]
fn compare_lwt_prints_both_locks_on_a_local_cluster() {
    if !common::local_cassandra_available(TEST, 1) {
        return;
    }
    let (stdout, out) = common::run_lock_bench(
        &[
            "compare-lwt",
            "--cassandra",
            "local",
            "--local-nodes",
            "1",
            "-p",
            "1,3",
            "-n",
            "20",
            "--uncontended",
            "20",
            "--warm-up",
            "2s",
            "--paxos-variant",
            "v2",
            "--keyspace",
            "lock_bench_lwt_test",
            "--quiet",
        ],
        "compare-lwt",
    );
    for expected in [
        "Queue lock against the lightweight-transaction (LWT) lock on Paxos v2",
        "Setup: Cassandra at 127.0.",
        ":9042 v2",
        "each conditional one a Paxos v2 round of 2 coordinator-replica round trips",
        "load average (1, 5, 15 min)",
        "Uncontended: one process takes and releases each lock in turn (20 times each)",
        "Under contention: P processes, 20 acquisitions each",
        "mutual exclusion violations: 0",
        "Goals:",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    // One uncontended row per lock, with positive times and requests.
    let uncontended: Vec<Vec<&str>> = stdout
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.len() == 9 && ["queue", "lwt"].contains(&cells[0]))
        .collect();
    assert_eq!(uncontended.len(), 2, "{stdout}");
    for cells in &uncontended {
        for cell in &cells[1..] {
            assert!(cell.parse::<f64>().unwrap() > 0.0, "{cells:?}");
        }
    }
    // One contended row per lock and P: 20 acquisitions each, all waits positive.
    let contended: Vec<Vec<&str>> = stdout
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.len() == 13 && ["queue", "lwt"].contains(&cells[0]))
        .collect();
    let keys: Vec<(&str, &str)> = contended.iter().map(|cells| (cells[0], cells[1])).collect();
    assert_eq!(
        keys,
        [("queue", "1"), ("lwt", "1"), ("queue", "3"), ("lwt", "3")],
        "{stdout}"
    );
    for cells in &contended {
        let mean: f64 = cells[2].parse().unwrap();
        let max: f64 = cells[4].parse().unwrap();
        assert!(mean > 0.0 && max >= mean, "{cells:?}");
    }

    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("lwt-comparison-paxos-v2.json")).unwrap(),
    )
    .unwrap();
    let runs = json["contended"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "2 locks × 2 P");
    for run in runs {
        assert_eq!(run["exclusion_violations"], 0, "{run}");
        let processes = run["processes"].as_u64().unwrap();
        assert_eq!(run["wait_ms"]["count"].as_u64().unwrap(), 20 * processes);
    }
    assert_eq!(json["paxos_variant"], "v2", "{json}");
    assert!(out.join("lwt-wait-distribution-paxos-v2.png").is_file());
}
