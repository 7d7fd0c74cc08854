//! The simulator proven faithful by differential tests: random sequences of `write_cell`,
//! `delete_cell` and `read_row` (explicit timestamps, ties of equal timestamps, TTLs of 1
//! and 2 s that expire during the case, slice reads with a start column and a `LIMIT`
//! across tombstones, every consistency level) are played on
//!
//! 1. `CassandraStorage` on a real local 3-node Apache Cassandra 5.0 (keyspace replication
//!    factor 3), or the cluster in `LOCK_CASSANDRA_CONTACT_POINTS`;
//! 2. the memory cluster's client, directly;
//! 3. `CassandraStorage` over the memory cluster's CQL endpoint;
//!
//! and every answer of 2 and 3 must equal Cassandra's (see `lock_tests::differential` for
//! how the wall seconds are kept comparable). Each case uses a fresh lock id.
//!
//! `LOCK_DIFFERENTIAL_CASES` sets the number of cases compared (default 120, about a minute
//! and a half on top of the cluster's start). A case whose phase overran its wall second is
//! inconclusive and replaced by a fresh one; more inconclusive cases than that fail the test. Failing cases shrink and are kept in
//! `proptest-regressions/differential.txt`, replayed first on the next run. Without `java`
//! or `mvn` the test says it was skipped (a failure under `CI=true`). The divergences this
//! test found are replayed without a real cluster by the tests at the end of this file.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::sync::Mutex;
use std::time::Instant;

use fair_lock::Clock as _;
use lock_local_cluster::test_target;
use lock_storage_memory::Latency;
use lock_tests::differential;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner};

/// Says something past the test harness's output capture, so it shows in every run.
fn announce(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn cases() -> u32 {
    std::env::var("LOCK_DIFFERENTIAL_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(120)
}

#[derive(Default)]
struct Tally {
    played: u32,
    inconclusive: u32,
    operations: usize,
}

#[test]
fn simulator_and_endpoint_answer_as_cassandra() {
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let name = "differential";
    // The harness blocks: call it on this plain thread, outside the runtime.
    let Some(target) = test_target(name, 3).unwrap_or_else(|error| panic!("{name}: {error}"))
    else {
        return;
    };
    let dc = std::env::var("LOCK_CASSANDRA_LOCAL_DC").unwrap_or_else(|_| "datacenter1".into());
    let (targets, server) = runtime.block_on(async {
        let cassandra = differential::cassandra_target(
            "cassandra",
            target.contact_points,
            target.replication_factor,
            &dc,
        )
        .await
        .unwrap_or_else(|error| panic!("cannot use the real cluster: {error}"));
        let memory = differential::memory_target(
            "memory",
            fair_lock::SystemClock::new().now().timestamp,
            Latency::Zero,
        );
        let (cql, server) = differential::cql_target("cql-endpoint")
            .await
            .unwrap_or_else(|error| panic!("cannot start the CQL endpoint: {error}"));
        (vec![cassandra, memory, cql], server)
    });
    let ready = started.elapsed();

    // The hand-written cases first: every rule, on all three, against Cassandra's answers.
    for (rule, case, expected) in differential::known_cases() {
        let played = (0..3)
            .map(|_| runtime.block_on(differential::play(&case, &targets)))
            .find(|played| played.conclusive)
            .unwrap_or_else(|| panic!("{rule}: no run fitted in its wall seconds"));
        if let Some(report) = played.divergence(&case, &targets) {
            panic!("{rule}: {report}");
        }
        let answers = differential::read_answers(&case, &played.answers[0]);
        assert_eq!(answers, expected, "{rule}: Cassandra answered otherwise");
    }

    let cases = cases();
    let tally = Mutex::new(Tally::default());
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/differential.txt"
        )))),
        max_shrink_iters: 64,
        // An inconclusive case (a phase overran its wall second, so its answers cannot be
        // compared) is replaced by a fresh one, so that `cases` cases are always compared
        // however loaded the machine is; more inconclusive cases than that fail the test.
        max_global_rejects: cases,
        ..Config::default()
    });
    let result = runner.run(&differential::case(10, 4), |case| {
        let played = runtime.block_on(differential::play(&case, &targets));
        let mut tally = tally.lock().unwrap();
        tally.played += 1;
        tally.operations += case.ops.len() + 1;
        if !played.conclusive {
            tally.inconclusive += 1;
            return Err(TestCaseError::reject("a phase overran its wall second"));
        }
        match played.divergence(&case, &targets) {
            None => Ok(()),
            Some(report) => Err(TestCaseError::fail(report)),
        }
    });
    runtime.block_on(async {
        for target in &targets {
            target.cleanup().await;
        }
        server.shutdown().await;
    });
    let tally = tally.into_inner().unwrap();
    announce(&format!(
        "differential: {} cases played ({} operations, {} inconclusive, not compared) on \
         Cassandra, the memory cluster and its CQL endpoint in {:?} ({:?} to start)",
        tally.played,
        tally.operations,
        tally.inconclusive,
        started.elapsed(),
        ready
    ));
    match result {
        // The cases kept in the regressions file are replayed on top of `cases`.
        Ok(()) => assert!(
            tally.played - tally.inconclusive >= cases,
            "{} of {} cases compared, fewer than {cases}",
            tally.played - tally.inconclusive,
            tally.played
        ),
        Err(TestError::Abort(reason)) => panic!(
            "{reason}: {} of {} cases were inconclusive, their phases did not fit in their \
             wall seconds (is the machine or the cluster overloaded?)",
            tally.inconclusive, tally.played
        ),
        Err(error) => panic!("{error}"),
    }
}

/// The hand-written cases on the memory cluster alone, in virtual time, against the answers
/// the real Cassandra gave: the divergences found, replayed without Java.
#[test]
fn the_simulator_answers_the_known_cases_as_cassandra_did() {
    lock_tests::virtual_time(
        "the_simulator_answers_the_known_cases_as_cassandra_did",
        async {
            let memory = differential::memory_target(
                "memory",
                lock_storage_memory::ClusterConfig::DEFAULT_EPOCH,
                Latency::Zero,
            );
            let targets = [memory];
            let mut wrong = Vec::new();
            for (rule, case, expected) in differential::known_cases() {
                let played = differential::play(&case, &targets).await;
                assert!(played.conclusive, "{rule}: virtual time overran a second");
                let answers = differential::read_answers(&case, &played.answers[0]);
                if answers != expected {
                    wrong.push(format!(
                        "{rule}:\n  Cassandra: {expected:?}\n  simulator: {answers:?}"
                    ));
                }
            }
            assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        },
    );
}
