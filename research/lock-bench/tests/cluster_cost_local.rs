//! `lock-bench cluster-cost --cassandra local` end to end, in miniature: the binary starts
//! a one-node Apache Cassandra with Paxos v2, measures the idle node, offers both locks the
//! same open-loop load uncontended and shared by two lockers, reads the node's CPU time
//! and disk writes from /proc, stops the node, and prints one row per lock and locker
//! count, with a JSON file of the same figures.
//!
//! Without `java` (or, before the jars are cached, `mvn`) the test says it was skipped and
//! passes, except under `CI=true`, where a skipped real-Cassandra test is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

const TEST: &str = "cluster_cost_measures_both_locks_on_a_local_cluster";

#[test]
fn cluster_cost_measures_both_locks_on_a_local_cluster() {
    if !common::local_cassandra_available(TEST, 1) {
        return;
    }
    let (stdout, out) = common::run_lock_bench(
        &[
            "cluster-cost",
            "--cassandra",
            "local",
            "--local-nodes",
            "1",
            "-p",
            "1,2",
            "--rate",
            "20",
            "--duration",
            "2s",
            "--idle",
            "1s",
            "--warm-up",
            "1s",
            "--paxos-variant",
            "v2",
            "--keyspace",
            "lock_bench_cost_test",
            "--quiet",
        ],
        "cluster-cost",
    );
    for expected in [
        "Cluster cost on a local 1-node Apache Cassandra",
        "Paxos v2",
        "Offered 20 acquisitions/s open loop",
        "| lock | P | acquisitions (offered) |",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("cluster-cost.json")).unwrap())
            .unwrap();
    let clusters = json.as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{json}");
    assert_eq!(clusters[0]["paxos_variant"], "v2");
    assert!(clusters[0]["idle_cpu_ms_per_second"].as_f64().unwrap() > 0.0);
    let scenarios = clusters[0]["scenarios"].as_array().unwrap();
    let seen: Vec<(String, u64)> = scenarios
        .iter()
        .map(|scenario| {
            (
                scenario["lock"].as_str().unwrap().to_owned(),
                scenario["processes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("queue".to_owned(), 1),
            ("lwt".to_owned(), 1),
            ("queue".to_owned(), 2),
            ("lwt".to_owned(), 2)
        ]
    );
    for scenario in scenarios {
        // 2 s at 20/s: 40 offered, each either made or counted as an error.
        let offered = scenario["offered"].as_u64().unwrap();
        let made = scenario["acquisitions"].as_u64().unwrap();
        assert_eq!(offered, 40, "{scenario}");
        assert_eq!(
            made + scenario["errors"].as_u64().unwrap(),
            offered,
            "{scenario}"
        );
        assert!(made > 0, "{scenario}");
        assert!(scenario["cpu_ms"].as_f64().unwrap() > 0.0, "{scenario}");
        assert!(
            scenario["requests_per_acquisition"].as_f64().unwrap() >= 2.0,
            "{scenario}"
        );
    }
}
