//! `lock-bench local-lines --cassandra local` end to end, as a person runs it: the binary
//! starts a one-node Apache Cassandra on this machine, runs the three scenarios on it until
//! 40 acquisitions each (a count, not a time, so that a loaded machine makes them slower but
//! never fewer), stops it, and writes `local-lines.json`. On the real database, one process's
//! tasks cost what one uncontended owner costs, and a busy process among one-task
//! processes gets one turn per pass of the queue.
//!
//! Without `java` (or, before the jars are cached, `mvn`) the test says it was skipped and
//! passes, except under `CI=true`, where a skipped real-Cassandra test is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

const TEST: &str = "local_lines_run_on_a_local_cassandra";

#[test]
fn local_lines_run_on_a_local_cassandra() {
    if !common::local_cassandra_available(TEST, 1) {
        return;
    }
    let (stdout, out) = common::run_lock_bench(
        &[
            "local-lines",
            "--cassandra",
            "local",
            "--local-nodes",
            "1",
            "--tasks",
            "10",
            "--acquisitions",
            "40",
            "--keyspace",
            "lock_bench_test",
        ],
        "local-lines-cassandra",
    );
    for expected in [
        "Local lines: Cassandra at 127.0.",
        "10 processes x 1 task",
        "1 process x 10 tasks",
        "1 process x 2 tasks + 2 processes x 1 task",
        "mutual exclusion violations: 0",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("local-lines.json")).unwrap())
            .unwrap();
    let scenarios = json.as_array().unwrap();
    assert_eq!(scenarios.len(), 3, "{json}");
    let figure = |scenario: usize, name: &str| scenarios[scenario][name].as_f64().unwrap();
    for scenario in scenarios {
        let acquisitions: u64 = scenario["acquisitions_per_process"]
            .as_array()
            .unwrap()
            .iter()
            .map(|count| count.as_u64().unwrap())
            .sum();
        assert!(acquisitions >= 40, "{scenario}");
        assert_eq!(scenario["exclusion_violations"], 0, "{scenario}");
    }
    // Ten processes poll the distributed queue; ten tasks of one process wait in it, and
    // their lock is idle for each (six requests, the release included).
    assert!(figure(0, "requests_per_acquisition") > 7.0, "{json}");
    assert!(figure(1, "requests_per_acquisition") < 6.5, "{json}");
    // The busy process with two tasks beside two one-task processes: a third of the turns,
    // not half.
    let share = figure(2, "first_share");
    assert!((0.2..=0.45).contains(&share), "busy share {share}: {json}");
    assert!(figure(2, "jain") > 0.9, "{json}");
}
