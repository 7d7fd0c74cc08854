//! The scheduled job on a real Apache Cassandra 5.0 (the shared local cluster that
//! lock-storage-cassandra's harness starts from Maven jars, or the cluster named in
//! `LOCK_CASSANDRA_CONTACT_POINTS`): two instances with their own sessions take turns, the
//! one that asks while the other runs the job skips it, the lock is kept at least
//! `at_least_for`, and the fencing tokens grow. Without `java`
//! or `mvn` the test says it was skipped; under `CI=true` that is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use fair_lock::Locker;
use lock_core::LockConfig;
use lock_local_cluster::test_target;
use lock_recipes::{JobLimits, JobRun, ScheduledJob};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage, Replication, SchemaConfig};
use tokio::sync::oneshot;

const KEYSPACE: &str = "lock_recipes_test";

#[test]
fn one_instance_runs_each_interval_on_a_real_cassandra() {
    let test = "one_instance_runs_each_interval_on_a_real_cassandra";
    let Some(target) = test_target(test, 1).unwrap_or_else(|error| panic!("{test}: {error}"))
    else {
        return;
    };
    let config = CassandraConfig {
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor: target.replication_factor,
        })),
        ..CassandraConfig::new(target.contact_points.iter().map(String::as_str), KEYSPACE)
    };
    config.check_lock_config(&LockConfig::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let limits = JobLimits {
            at_least_for: Duration::from_secs(2),
            at_most_for: Duration::from_secs(30),
        };
        let mut jobs = Vec::new();
        for _ in 0..2 {
            let storage = CassandraStorage::connect(config.clone()).await.unwrap();
            let locker = Locker::new(storage, LockConfig::default()).unwrap();
            let lock_id = format!("jobs:report-{}", std::process::id());
            jobs.push(ScheduledJob::new(locker, lock_id, limits).unwrap());
        }
        let mut tokens = Vec::new();
        for round in 0..2 {
            let started = Instant::now();
            let first = jobs[round].clone();
            let (taken, taken_seen) = oneshot::channel();
            let (asked, asked_seen) = oneshot::channel::<()>();
            // The job holds the lock until the other instance has asked for it, so that
            // the test does not depend on how fast either instance reaches the cluster.
            let running = tokio::spawn(async move {
                first
                    .run_once(async move |guard| {
                        let _ = taken.send(());
                        let _ = asked_seen.await;
                        guard.fencing_token()
                    })
                    .await
            });
            taken_seen.await.unwrap();
            let other = jobs[1 - round].run_once(async |_guard| ()).await.unwrap();
            assert_eq!(other, JobRun::Skipped, "round {round}");
            asked.send(()).unwrap();
            let ran = running.await.unwrap().unwrap();
            assert!(
                started.elapsed() >= limits.at_least_for,
                "round {round}: released after {:?}, before at_least_for",
                started.elapsed()
            );
            let JobRun::Ran {
                value,
                fencing_token,
                kept_at_least_for,
            } = ran
            else {
                panic!("round {round}: the lock was free, so the job ran: {ran:?}");
            };
            assert!(kept_at_least_for);
            assert_eq!(value, fencing_token);
            tokens.push(fencing_token.expect("lock-core takes fencing tokens by default"));
        }
        assert!(tokens[1] > tokens[0], "{tokens:?}");
    });
}
