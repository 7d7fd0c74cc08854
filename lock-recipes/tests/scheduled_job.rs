//! The scheduled job on the simulated cluster, in virtual time: one run per interval
//! across instances, the limits, the fencing token and a lost lease.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use fair_lock::{Clock, Locker};
use lock_core::LockConfig;
use lock_recipes::{Error, JobLimits, JobRun, ScheduledJob};
use lock_storage_memory::{ClusterConfig, Latency, MemoryClient, MemoryCluster};

/// `count` instances of the job `jobs:report`, each with a locker of its own on one
/// simulated cluster.
fn instances(
    cluster: &MemoryCluster,
    count: u64,
    limits: JobLimits,
) -> Vec<ScheduledJob<MemoryClient>> {
    (0..count)
        .map(|index| {
            let client = cluster.client();
            let locker = Locker::builder(client.clone())
                .config(LockConfig::default())
                .clock(Arc::new(client.clock()))
                .replay_owner_ids_unsafe(index)
                .build()
                .unwrap();
            ScheduledJob::new(locker, "jobs:report", limits).unwrap()
        })
        .collect()
}

fn cluster() -> MemoryCluster {
    MemoryCluster::new(ClusterConfig {
        latency: Latency::Fixed(Duration::from_micros(300)),
        ..ClusterConfig::default()
    })
    .unwrap()
}

const LIMITS: JobLimits = JobLimits {
    at_least_for: Duration::from_secs(5),
    at_most_for: Duration::from_secs(60),
};

/// What `run` says, with the fencing token of a run.
fn token_of<T>(run: &JobRun<T>) -> Option<lock_core::FencingToken> {
    match run {
        JobRun::Ran { fencing_token, .. } => *fencing_token,
        JobRun::Skipped => None,
    }
}

#[test]
fn only_one_instance_runs_a_job_and_the_lock_is_kept_at_least_for_the_minimum() {
    fair_lock::testing::in_virtual_time(
        "only_one_instance_runs_a_job_and_the_lock_is_kept_at_least_for_the_minimum",
        async {
            let cluster = cluster();
            let jobs = instances(&cluster, 2, LIMITS);
            let clock = cluster.client().clock();
            let started = clock.now().instant;
            let first = jobs[0].clone();
            // A job of 10 ms: the lock is still kept until 5 s after its start.
            let running = tokio::spawn(async move {
                first
                    .run_once(async |_guard| {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        "sent"
                    })
                    .await
            });
            for at in [Duration::from_secs(1), Duration::from_millis(4_900)] {
                let elapsed = clock.now().instant.saturating_duration_since(started);
                tokio::time::sleep(at.saturating_sub(elapsed)).await;
                let skipped = jobs[1].run_once(async |_guard| "sent twice").await.unwrap();
                assert_eq!(skipped, JobRun::Skipped, "at {at:?}");
            }
            let ran = running.await.unwrap().unwrap();
            let took = clock.now().instant.saturating_duration_since(started);
            assert!(
                took >= LIMITS.at_least_for
                    && took < LIMITS.at_least_for + Duration::from_millis(50),
                "the run ends when at_least_for has passed: {took:?}"
            );
            let JobRun::Ran {
                value,
                kept_at_least_for,
                ..
            } = &ran
            else {
                panic!("the first instance ran the job: {ran:?}");
            };
            assert_eq!((*value, *kept_at_least_for), ("sent", true));
            // The next interval: the other instance runs it, with a later token.
            let next = jobs[1].run_once(async |_guard| "sent again").await.unwrap();
            assert!(
                matches!(
                    next,
                    JobRun::Ran {
                        value: "sent again",
                        ..
                    }
                ),
                "{next:?}"
            );
            assert!(token_of(&next).unwrap() > token_of(&ran).unwrap());
        },
    );
}

#[test]
fn the_job_gets_the_guard_and_its_fencing_token() {
    fair_lock::testing::in_virtual_time("the_job_gets_the_guard_and_its_fencing_token", async {
        let cluster = cluster();
        let jobs = instances(&cluster, 1, LIMITS);
        let run = jobs[0]
            .run_once(async |guard| (guard.lock_id().to_string(), guard.fencing_token()))
            .await
            .unwrap();
        let JobRun::Ran {
            value: (lock_id, token_seen),
            fencing_token,
            ..
        } = run
        else {
            panic!("an idle job runs: {run:?}");
        };
        assert_eq!(lock_id, "jobs:report");
        assert!(fencing_token.is_some());
        assert_eq!(token_seen, fencing_token);
    });
}

#[test]
fn a_job_still_running_after_at_most_for_is_stopped_and_the_lock_freed() {
    fair_lock::testing::in_virtual_time(
        "a_job_still_running_after_at_most_for_is_stopped_and_the_lock_freed",
        async {
            let cluster = cluster();
            let limits = JobLimits {
                at_least_for: Duration::from_secs(1),
                at_most_for: Duration::from_secs(3),
            };
            let jobs = instances(&cluster, 2, limits);
            let clock = cluster.client().clock();
            let started = clock.now().instant;
            let hung = jobs[0]
                .run_once(async |_guard| std::future::pending::<()>().await)
                .await;
            let took = clock.now().instant.saturating_duration_since(started);
            assert!(
                matches!(&hung, Err(Error::Overran { at_most_for, .. }) if *at_most_for == limits.at_most_for),
                "{hung:?}"
            );
            assert!(
                took >= limits.at_most_for && took < limits.at_most_for + Duration::from_millis(50),
                "{took:?}"
            );
            let next = jobs[1].run_once(async |_guard| ()).await.unwrap();
            assert!(
                matches!(next, JobRun::Ran { .. }),
                "the lock was released: {next:?}"
            );
        },
    );
}

#[test]
fn a_job_whose_lease_is_lost_is_stopped_and_reports_the_loss() {
    fair_lock::testing::in_virtual_time(
        "a_job_whose_lease_is_lost_is_stopped_and_reports_the_loss",
        async {
            let cluster = cluster();
            let jobs = instances(&cluster, 1, LIMITS);
            let operator = Locker::builder(cluster.client())
                .clock(Arc::new(cluster.client().clock()))
                .replay_owner_ids_unsafe(9)
                .build()
                .unwrap();
            let job = jobs[0].clone();
            let running = tokio::spawn(async move {
                job.run_once(async |_guard| std::future::pending::<()>().await)
                    .await
            });
            // Let it take the lock, then force it out as an operator would.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let report = operator.inspect("jobs:report", 8).await.unwrap();
            let holder = report.holder.expect("the job holds its lock");
            operator
                .force_release("jobs:report", &holder)
                .await
                .unwrap();
            let lost = running.await.unwrap();
            assert!(
                matches!(lost, Err(Error::Lock(lock_core::Error::LockLost { .. }))),
                "{lost:?}"
            );
        },
    );
}

/// A job whose lease is lost is stopped within about a lease of the loss, not left running
/// until `at_most_for` while another instance, finding the lock free, may run it too.
#[test]
fn a_job_whose_lease_is_lost_stops_within_a_lease_of_the_loss() {
    fair_lock::testing::in_virtual_time(
        "a_job_whose_lease_is_lost_stops_within_a_lease_of_the_loss",
        async {
            let cluster = cluster();
            let jobs = instances(&cluster, 1, LIMITS);
            let clock = cluster.client().clock();
            let operator = Locker::builder(cluster.client())
                .clock(Arc::new(cluster.client().clock()))
                .seed(9)
                .build()
                .unwrap();
            let job = jobs[0].clone();
            let job_clock = clock.clone();
            let running = tokio::spawn(async move {
                let mut last_step = None;
                let result: Result<JobRun<()>, Error> = job
                    .run_once(async |_guard| {
                        loop {
                            last_step = Some(job_clock.now().instant);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    })
                    .await;
                (result, last_step)
            });
            tokio::time::sleep(Duration::from_secs(1)).await;
            let report = operator.inspect("jobs:report", 8).await.unwrap();
            let holder = report.holder.expect("the job holds its lock");
            operator
                .force_release("jobs:report", &holder)
                .await
                .unwrap();
            let forced_at = clock.now().instant;
            let (result, last_step) = running.await.unwrap();
            assert!(
                matches!(result, Err(Error::Lock(lock_core::Error::LockLost { .. }))),
                "{result:?}"
            );
            let ran_on = last_step
                .expect("the job ran")
                .saturating_duration_since(forced_at);
            let lease = LockConfig::default().lease_ttl;
            assert!(
                ran_on < lease,
                "the job ran on {ran_on:?} after its lease was lost, more than a lease ({lease:?})"
            );
        },
    );
}

/// A lease lost after the job ended, while the lock is kept until `at_least_for`, ends
/// the wait at once: the run reports the job's value with `kept_at_least_for` false (another
/// instance may run the job again within `at_least_for`), not the loss as an error, and
/// not only when `at_least_for` is over.
#[test]
fn a_lease_lost_after_the_job_ended_is_reported_as_not_kept_at_least_for() {
    fair_lock::testing::in_virtual_time(
        "a_lease_lost_after_the_job_ended_is_reported_as_not_kept_at_least_for",
        async {
            let cluster = cluster();
            let limits = JobLimits {
                at_least_for: Duration::from_secs(40),
                at_most_for: Duration::from_secs(60),
            };
            let jobs = instances(&cluster, 1, limits);
            let clock = cluster.client().clock();
            let operator = Locker::builder(cluster.client())
                .clock(Arc::new(cluster.client().clock()))
                .seed(9)
                .build()
                .unwrap();
            let job = jobs[0].clone();
            let running = tokio::spawn(async move { job.run_once(async |_guard| "sent").await });
            tokio::time::sleep(Duration::from_secs(1)).await;
            let report = operator.inspect("jobs:report", 8).await.unwrap();
            let holder = report.holder.expect("the lock is kept after the job");
            operator
                .force_release("jobs:report", &holder)
                .await
                .unwrap();
            let forced_at = clock.now().instant;
            let run = running.await.unwrap();
            let returned_after = clock.now().instant.saturating_duration_since(forced_at);
            let Ok(JobRun::Ran {
                value,
                kept_at_least_for,
                ..
            }) = &run
            else {
                panic!("the job ran, and a loss after it is no error: {run:?}");
            };
            assert_eq!((*value, *kept_at_least_for), ("sent", false));
            let lease = LockConfig::default().lease_ttl;
            assert!(
                returned_after < lease,
                "the run returned {returned_after:?} after the loss, more than a lease ({lease:?})"
            );
        },
    );
}

#[test]
fn run_at_next_starts_at_the_next_multiple_of_the_interval() {
    fair_lock::testing::in_virtual_time(
        "run_at_next_starts_at_the_next_multiple_of_the_interval",
        async {
            let cluster = cluster();
            let jobs = instances(&cluster, 1, LIMITS);
            let clock = cluster.client().clock();
            let minute = Duration::from_secs(60);
            for _ in 0..2 {
                let run = jobs[0]
                    .run_at_next(minute, async |_guard| clock.now().timestamp)
                    .await
                    .unwrap();
                let JobRun::Ran { value: started, .. } = run else {
                    panic!("an idle job runs: {run:?}");
                };
                let into_minute = started.as_micros() % 60_000_000;
                assert!(
                    into_minute < 20_000,
                    "the job started {into_minute} µs into its minute"
                );
            }
        },
    );
}

#[test]
fn bad_limits_and_lock_ids_are_refused() {
    let cluster = MemoryCluster::new(ClusterConfig::default()).unwrap();
    let locker = || Locker::new(cluster.client(), LockConfig::default()).unwrap();
    let backwards = JobLimits {
        at_least_for: Duration::from_secs(10),
        at_most_for: Duration::from_secs(5),
    };
    assert!(matches!(
        ScheduledJob::new(locker(), "jobs:report", backwards),
        Err(Error::InvalidLimits { .. })
    ));
    assert!(matches!(
        ScheduledJob::new(locker(), "", LIMITS),
        Err(Error::Lock(lock_core::Error::InvalidLockId { .. }))
    ));
}
