//! `lock-bench tombstones --cassandra local` end to end, in miniature: the binary starts a
//! one-node Apache Cassandra, takes one lock 300 times with two processes while every fifth
//! read is repeated with CQL tracing, reads Cassandra's own count of the tombstones each
//! traced read stepped over, greps the node's log for tombstone warnings, stops the
//! cluster and runs the simulator beside it.
//!
//! Without `java` (or, before the jars are cached, `mvn`) the test says it was skipped and
//! passes, except under `CI=true`, where a skipped real-Cassandra test is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

const TEST: &str = "tombstones_reads_cassandras_own_counts_on_a_local_cluster";

#[test]
fn tombstones_reads_cassandras_own_counts_on_a_local_cluster() {
    if !common::local_cassandra_available(TEST, 1) {
        return;
    }
    let (stdout, out) = common::run_lock_bench(
        &[
            "tombstones",
            "--cassandra",
            "local",
            "--local-nodes",
            "1",
            "-p",
            "2",
            "-n",
            "300",
            "--window",
            "100",
            "--trace-every",
            "5",
            "--keyspace",
            "lock_bench_tombstones_test",
            "--quiet",
        ],
        "tombstones-local",
    );
    for expected in [
        "Tombstones on Cassandra and on the simulator: 300 acquisitions",
        "load average (1, 5, 15 min)",
        "tomb/queue",
        "201-300",
        "no tombstone warning or failure and no large-partition warning in the 1 node log(s)",
        "lock table, from every node's system_views",
        "memtable_flush_period_in_ms 60000",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tombstones.json")).unwrap())
            .unwrap();
    assert_eq!(json["logs"]["logs"], 1, "{json}");
    let traced = json["traced"].as_array().unwrap();
    assert_eq!(traced.len(), 3, "{json}");
    for window in traced {
        assert!(window["queue_reads"].as_u64().unwrap() > 0, "{window}");
        assert!(window["queue_tombstones_mean"].is_f64(), "{window}");
    }
    // Every acquisition leaves a queue tombstone, and nothing is purged within gc_grace:
    // by the last window, Cassandra's own count of what a queue read steps over has grown.
    let first = traced[0]["queue_tombstones_mean"].as_f64().unwrap();
    let last = traced[2]["queue_tombstones_mean"].as_f64().unwrap();
    assert!(last > first && last >= 50.0, "first {first}, last {last}");
    // The node's own figures for the table were read: its histogram counted our reads.
    let samples = json["table"].as_array().unwrap();
    let last = &samples.last().unwrap()["nodes"];
    assert_eq!(last.as_array().unwrap().len(), 1, "{last}");
    assert!(last[0]["error"].is_null(), "{last}");
    assert!(
        last[0]["tombstones_per_read"]["reads"].as_i64().unwrap() > 0,
        "{last}"
    );
    let simulated = json["simulated"]["windows"].as_array().unwrap();
    assert_eq!(simulated.len(), 3);
    assert!(simulated[2]["dead_cells_per_read"].as_f64().unwrap() > 0.0);
    assert_eq!(
        json["real"]["windows"].as_array().unwrap().len(),
        3,
        "{json}"
    );
}
