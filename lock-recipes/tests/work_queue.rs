//! The work queue on the simulated cluster, in virtual time: typed errors for bad input,
//! claims oldest first, redelivery of abandoned and lapsed claims, and closing a handle.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use lock_core::LockConfig;
use lock_recipes::{Error, MAX_PAYLOAD_LEN, WorkQueue, WorkQueueConfig};
use lock_storage_memory::MemoryCluster;

use common::{Linked, cluster};

fn queue(cluster: &MemoryCluster, seed: u64) -> WorkQueue<Linked> {
    let locker = Linked::new(cluster)
        .locker(LockConfig::default(), seed)
        .unwrap();
    WorkQueue::new(locker, "jobs", WorkQueueConfig::default()).unwrap()
}

/// Jumps the paused clock forward without yielding, as if the process had been frozen:
/// no task runs before the caller's next await.
fn freeze_for(duration: Duration) {
    let _ = tokio::time::advance(duration).now_or_never();
}

/// Whether `result` is the lock-core error that says the lease was lost.
fn lock_lost<T>(result: &Result<T, Error>) -> bool {
    matches!(result, Err(Error::Lock(lock_core::Error::LockLost { .. })))
}

#[test]
fn bad_configurations_and_names_are_typed_errors() {
    let bad = [
        WorkQueueConfig {
            bucket_width: Duration::from_millis(500),
            ..WorkQueueConfig::default()
        },
        WorkQueueConfig {
            read_limit: 1,
            ..WorkQueueConfig::default()
        },
        WorkQueueConfig {
            idle_backoff_max: Duration::from_millis(1),
            ..WorkQueueConfig::default()
        },
        WorkQueueConfig {
            idle_jitter_percent: 101,
            ..WorkQueueConfig::default()
        },
        WorkQueueConfig {
            completed_ttl: Duration::from_millis(90_500),
            ..WorkQueueConfig::default()
        },
    ];
    for config in bad {
        assert!(
            matches!(config.validate(), Err(Error::InvalidConfig { .. })),
            "{config:?}"
        );
    }
    let cluster = cluster();
    let client = Linked::new(&cluster);
    let locker = client.locker(LockConfig::default(), 1).unwrap();
    assert!(matches!(
        WorkQueue::new(locker.clone(), "x".repeat(200), WorkQueueConfig::default()),
        Err(Error::QueueNameTooLong { len: 200, .. })
    ));
    assert!(matches!(
        WorkQueue::new(locker, "", WorkQueueConfig::default()),
        Err(Error::Lock(lock_core::Error::InvalidLockId { .. }))
    ));
    let unfenced = client
        .locker(
            LockConfig {
                fencing: false,
                ..LockConfig::default()
            },
            2,
        )
        .unwrap();
    assert!(matches!(
        WorkQueue::new(unfenced, "jobs", WorkQueueConfig::default()),
        Err(Error::InvalidConfig {
            field: "fencing",
            ..
        })
    ));
}

#[test]
fn a_large_payload_is_refused_before_anything_is_written() {
    fair_lock::testing::in_virtual_time(
        "a_large_payload_is_refused_before_anything_is_written",
        async {
            let cluster = cluster();
            let queue = queue(&cluster, 1);
            let too_large = vec![0u8; MAX_PAYLOAD_LEN + 1];
            assert!(matches!(
                queue.enqueue(too_large).await,
                Err(Error::PayloadTooLarge { len }) if len == MAX_PAYLOAD_LEN + 1
            ));
            assert!(queue.try_claim().await.unwrap().is_none());
        },
    );
}

/// Items come out oldest first across buckets, each claim holds its item against other
/// workers, and a completed item is never claimed again.
#[test]
fn claims_come_oldest_first_and_completed_items_stay_completed() {
    fair_lock::testing::in_virtual_time(
        "claims_come_oldest_first_and_completed_items_stay_completed",
        async {
            let cluster = cluster();
            let producer = queue(&cluster, 1);
            let worker = queue(&cluster, 2);
            let other = queue(&cluster, 3);
            let mut ids = Vec::new();
            for index in 0..5u8 {
                ids.push(producer.enqueue(vec![index]).await.unwrap());
                // Across three one-minute buckets.
                tokio::time::sleep(Duration::from_secs(40)).await;
            }
            let mut claims = worker.claims();
            for (index, id) in ids.iter().enumerate() {
                let claim = claims.next().await.unwrap().unwrap();
                assert_eq!(claim.id(), id);
                assert_eq!(claim.payload(), [u8::try_from(index).unwrap()]);
                if let Some(next) = other.try_claim().await.unwrap() {
                    assert_ne!(next.id(), id, "an item claimed twice at once");
                    next.abandon().await.unwrap();
                }
                let token = claim.fencing_token();
                claim.complete().await.unwrap();
                assert_eq!(worker.completed_by(id).await.unwrap(), Some(token));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(worker.try_claim().await.unwrap().is_none());
            assert!(other.try_claim().await.unwrap().is_none());
        },
    );
}

/// A claim dropped without completion gives its item back at once; a claim whose lease
/// lapsed cannot complete, and the item goes to the next worker.
#[test]
fn an_abandoned_or_lapsed_claim_is_delivered_again() {
    fair_lock::testing::in_virtual_time("an_abandoned_or_lapsed_claim_is_delivered_again", async {
        let cluster = cluster();
        let first = queue(&cluster, 1);
        let second = queue(&cluster, 2);
        let id = first.enqueue("job").await.unwrap();
        let claim = first.claim().await.unwrap();
        claim.abandon().await.unwrap();
        let again = second
            .try_claim()
            .await
            .unwrap()
            .expect("given back at once");
        assert_eq!(again.id(), &id);
        let again_token = again.fencing_token();
        // The process freezes past its lease: nothing runs, not even its renewals.
        freeze_for(Duration::from_secs(30));
        assert!(!again.is_held());
        let third = first.claim().await.unwrap();
        assert_eq!(third.id(), &id);
        assert!(third.fencing_token() > again_token);
        assert!(lock_lost(&again.complete().await));
        let token = third.fencing_token();
        third.complete().await.unwrap();
        assert_eq!(first.completed_by(&id).await.unwrap(), Some(token));
    });
}

/// Closing a handle wakes a worker waiting on an empty queue with `WorkQueueClosed`, ends
/// its claims stream, refuses new claims on every clone, and leaves claims already made,
/// producers and other handles of the queue working.
#[test]
fn a_closed_handle_stops_its_idle_workers_and_claims_nothing_more() {
    fair_lock::testing::in_virtual_time(
        "a_closed_handle_stops_its_idle_workers_and_claims_nothing_more",
        async {
            let cluster = cluster();
            let producer = queue(&cluster, 1);
            let worker = queue(&cluster, 2);
            let first = producer.enqueue(vec![1]).await.unwrap();
            let held = worker.claim().await.unwrap();
            assert_eq!(held.id(), &first);

            let waiting = {
                let worker = worker.clone();
                tokio::spawn(async move { worker.claim().await })
            };
            let mut stream = worker.claims();
            let streaming = tokio::spawn(async move { stream.next().await.is_none() });
            // Both wait through several idle pauses on the empty queue.
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert!(!waiting.is_finished() && !streaming.is_finished());
            let closed_at = tokio::time::Instant::now();
            worker.clone().close();
            assert!(matches!(
                waiting.await.unwrap(),
                Err(Error::WorkQueueClosed { queue }) if queue.as_str() == "jobs"
            ));
            assert!(streaming.await.unwrap(), "the stream ends");
            assert_eq!(tokio::time::Instant::now(), closed_at, "woken at once");
            assert!(worker.is_closed() && !producer.is_closed());

            let second = producer.enqueue(vec![2]).await.unwrap();
            assert!(matches!(
                worker.try_claim().await,
                Err(Error::WorkQueueClosed { .. })
            ));
            held.complete().await.unwrap();
            let other = producer.try_claim().await.unwrap().unwrap();
            assert_eq!(other.id(), &second);
            other.complete().await.unwrap();
        },
    );
}

/// The completion rule: a claim with less than the lock's `request_timeout` of its lease
/// left refuses to complete, though its lease is still held, and writes no completion
/// record (one sent then could land after another worker claimed the item); the item goes
/// to the next worker. With exactly the request timeout left, a claim completes.
#[test]
fn a_claim_with_less_than_the_request_timeout_left_is_not_completed() {
    fair_lock::testing::in_virtual_time(
        "a_claim_with_less_than_the_request_timeout_left_is_not_completed",
        async {
            let cluster = cluster();
            let request_timeout = LockConfig::default().request_timeout;
            let first = queue(&cluster, 1);
            let second = queue(&cluster, 2);
            for (index, short_by) in [Duration::from_millis(1), Duration::ZERO]
                .into_iter()
                .enumerate()
            {
                let id = first
                    .enqueue(vec![u8::try_from(index).unwrap()])
                    .await
                    .unwrap();
                let claim = first.claim().await.unwrap();
                assert_eq!(claim.id(), &id);
                // The process freezes (not even its renewals run) until the lease has the
                // request timeout left, less `short_by`.
                freeze_for(claim.time_left() - request_timeout + short_by);
                assert!(claim.is_held(), "the lease is still held");
                assert_eq!(claim.time_left(), request_timeout - short_by);
                if short_by.is_zero() {
                    let token = claim.fencing_token();
                    claim.complete().await.unwrap();
                    assert_eq!(first.completed_by(&id).await.unwrap(), Some(token));
                    continue;
                }
                assert!(
                    lock_lost(&claim.complete().await),
                    "a claim completed with less than request_timeout of its lease left"
                );
                assert_eq!(
                    first.completed_by(&id).await.unwrap(),
                    None,
                    "a record was written"
                );
                let again = second.claim().await.unwrap();
                assert_eq!(again.id(), &id, "the item is delivered again");
                let token = again.fencing_token();
                again.complete().await.unwrap();
                assert_eq!(first.completed_by(&id).await.unwrap(), Some(token));
            }
        },
    );
}
