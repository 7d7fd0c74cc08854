//! The conformance suite on `CassandraStorage`, through the real `scylla` driver and the
//! CQL native protocol on loopback, against the memory simulator's CQL endpoint, which
//! each test starts in-process on an ephemeral port and stops at its end. Real time, with
//! 3 s leases ([`CassandraBackend::lock_config`](lock_tests::backend::CassandraBackend::lock_config)).
//! Every scenario runs; none is skipped. Module `bakery` runs the scenarios that apply to
//! the bakery algorithm, and module `no_wait_in_main_row` the queue's with waiters that never
//! wait in the main row (they do by default).
//!
//! Below the suite, the lock over the wire with replicas of the simulated cluster taken
//! down while the driver is connected.

lock_tests::conformance_suite!(real_time, |scenario: &'static str| async move {
    match lock_tests::backend::CqlBackend::start(scenario).await {
        Ok(backend) => Some(backend),
        Err(error) => panic!("{scenario}: {error}"),
    }
});

/// The bakery algorithm over the same endpoint, every locker with its own client id.
mod bakery {
    lock_tests::conformance_suite!(bakery, real_time, |scenario: &'static str| async move {
        match lock_tests::backend::CqlBackend::start(scenario).await {
            Ok(backend) => Some(backend),
            Err(error) => panic!("{scenario}: {error}"),
        }
    });
}

/// The queue algorithm with waiters that never wait in the main row, over the same endpoint.
mod no_wait_in_main_row {
    lock_tests::conformance_suite!(
        no_wait_in_main_row,
        real_time,
        |scenario: &'static str| async move {
            match lock_tests::backend::CqlBackend::start(scenario).await {
                Ok(backend) => Some(backend),
                Err(error) => panic!("{scenario}: {error}"),
            }
        }
    );
}

#[allow(
    clippy::unwrap_used,
    reason = "a failed unwrap in a test is a failed test"
)]
mod replicas_down {
    use std::time::Duration;

    use lock_core::{Error, LeaseStatus};
    use lock_storage_memory::ReplicaId;
    use lock_tests::backend::{Backend, Contender, CqlBackend};
    use lock_tests::{conformance, real_time};

    async fn start(test: &str) -> CqlBackend {
        CqlBackend::start(test)
            .await
            .unwrap_or_else(|error| panic!("{test}: {error}"))
    }

    /// One replica of three down before the lock is used: QUORUM still has a majority, so
    /// the suite's exclusion and release scenarios pass unchanged. Two down: every
    /// request is refused as `Unavailable`, which the locker reports after its retries as
    /// `StorageUnavailable` (not as an unknown outcome), and no lock is granted.
    #[test]
    fn one_replica_down_the_lock_works_two_down_it_is_unavailable() {
        real_time(
            "one_replica_down_the_lock_works_two_down_it_is_unavailable",
            async {
                let backend = start("one-down").await;
                let faults = backend.cluster().faults();
                faults.stop_replica(ReplicaId(2)).unwrap();
                conformance::one_owner_at_a_time(&backend).await;
                conformance::release_frees_at_once(&backend).await;

                faults.stop_replica(ReplicaId(0)).unwrap();
                let contender = Contender::new(&backend, 9);
                let lock_id = backend.lock_id("two-down");
                match contender.locker.try_lock(lock_id.as_str()).await {
                    Err(Error::StorageUnavailable {
                        operation, message, ..
                    }) => assert!(
                        message.contains("required: 2, alive: 1"),
                        "{operation}: {message}"
                    ),
                    other => panic!("with two replicas of three down, try_lock gave {other:?}"),
                }
                let error = contender
                    .locker
                    .lock_timeout(lock_id.as_str(), Duration::from_millis(500))
                    .await
                    .unwrap_err();
                assert!(
                    matches!(error, Error::StorageUnavailable { .. }),
                    "lock_timeout gave {error:?}"
                );

                // Back to a majority: the same lock is free (nothing was applied meanwhile).
                faults.start_replica(ReplicaId(0)).unwrap();
                let guard = contender
                    .locker
                    .try_lock(lock_id.as_str())
                    .await
                    .unwrap()
                    .expect("free once a majority is back");
                guard.release().await.unwrap();
                backend.cleanup().await;
            },
        );
    }

    /// A replica taken down while a holder is connected and holding: renewals keep
    /// reaching a quorum, so the lease stays `Held` across more than a TTL and nobody else
    /// gets the lock; the replica comes back and the lock is handed on after release.
    #[test]
    fn a_replica_lost_while_holding_does_not_lose_the_lease() {
        real_time(
            "a_replica_lost_while_holding_does_not_lose_the_lease",
            async {
                let backend = start("lost-while-holding").await;
                let faults = backend.cluster().faults();
                let lock_id = backend.lock_id("holding");
                let holder = Contender::new(&backend, 1).locker;
                let other = Contender::new(&backend, 2).locker;
                let guard = holder.lock(lock_id.as_str()).await.unwrap();
                faults.stop_replica(ReplicaId(1)).unwrap();
                let ttl = backend.lock_config().lease_ttl;
                let until = tokio::time::Instant::now() + ttl + ttl / 2;
                while tokio::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    assert_eq!(guard.status(), LeaseStatus::Held);
                    assert!(
                        other.try_lock(lock_id.as_str()).await.unwrap().is_none(),
                        "taken while the holder renewed on a quorum"
                    );
                }
                faults.start_replica(ReplicaId(1)).unwrap();
                guard.release().await.unwrap();
                let next = other
                    .try_lock(lock_id.as_str())
                    .await
                    .unwrap()
                    .expect("free after the release");
                next.release().await.unwrap();
                backend.cleanup().await;
            },
        );
    }
}
