//! Unit tests of the work queue: its pure helpers, and the driver on the in-crate store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::VirtualClock;
use super::test_client::{TestClient, TestStore};
use super::work_queue::{IdleBackoff, bucket_closed, bucket_of};
use crate::config::LockConfig;
use crate::driver::{Locker, WorkQueue, WorkQueueConfig};
use crate::error::Error;
use crate::time::Timestamp;

const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

fn queue(store: &TestStore, clock: &VirtualClock, seed: u64) -> WorkQueue<TestClient> {
    let locker = Locker::builder(store.client())
        .clock(Arc::new(clock.clone()))
        .seed(seed)
        .build()
        .unwrap();
    WorkQueue::new(locker, "jobs", WorkQueueConfig::default()).unwrap()
}

#[test]
fn buckets_are_whole_widths_and_close_a_margin_after_their_end() {
    let minute = 60_000_000;
    assert_eq!(bucket_of(Timestamp::from_micros(0), minute), 0);
    assert_eq!(bucket_of(Timestamp::from_micros(minute - 1), minute), 0);
    assert_eq!(bucket_of(Timestamp::from_micros(minute), minute), 1);
    let margin = Duration::from_secs(3);
    // Bucket 0 ends at one minute; it closes three seconds later.
    assert!(!bucket_closed(
        0,
        minute,
        Timestamp::from_micros(minute),
        margin
    ));
    assert!(!bucket_closed(
        0,
        minute,
        Timestamp::from_micros(minute + 2_999_999),
        margin
    ));
    assert!(bucket_closed(
        0,
        minute,
        Timestamp::from_micros(minute + 3_000_000),
        margin
    ));
    assert!(!bucket_closed(u64::MAX, minute, Timestamp::MAX, margin));
}

#[test]
fn idle_backoff_doubles_to_its_cap_and_only_shortens() {
    let config = WorkQueueConfig {
        idle_backoff_min: Duration::from_millis(10),
        idle_backoff_max: Duration::from_millis(70),
        idle_jitter_percent: 0,
        ..WorkQueueConfig::default()
    };
    let mut backoff = IdleBackoff::new(&config);
    let pauses: Vec<_> = (0..5).map(|_| backoff.next_pause(12345)).collect();
    assert_eq!(
        pauses,
        [10, 20, 40, 70, 70].map(Duration::from_millis).to_vec()
    );
    let mut jittered = IdleBackoff::new(&WorkQueueConfig {
        idle_jitter_percent: 20,
        ..config
    });
    for random in [0, 1, 999, u64::MAX] {
        let pause = jittered.next_pause(random);
        assert!(pause <= Duration::from_millis(70), "{pause:?}");
    }
    assert!(jittered.next_pause(u64::MAX) >= Duration::from_millis(56));
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
    let store = TestStore::new(VirtualClock::starting_at(EPOCH));
    let locker = Locker::new(store.client(), LockConfig::default()).unwrap();
    assert!(matches!(
        WorkQueue::new(locker.clone(), "x".repeat(200), WorkQueueConfig::default()),
        Err(Error::InvalidLockId { .. })
    ));
    assert!(matches!(
        WorkQueue::new(locker, "", WorkQueueConfig::default()),
        Err(Error::InvalidLockId { .. })
    ));
    let unfenced = Locker::new(
        store.client(),
        LockConfig {
            fencing: false,
            ..LockConfig::default()
        },
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
    crate::watchdog::in_virtual_time(
        "a_large_payload_is_refused_before_anything_is_written",
        async {
            let clock = VirtualClock::starting_at(EPOCH);
            let store = TestStore::new(clock.clone());
            let queue = queue(&store, &clock, 1);
            let too_large = vec![0u8; super::MAX_PAYLOAD_LEN + 1];
            assert!(matches!(
                queue.enqueue(too_large).await,
                Err(Error::InvalidWorkItem { .. })
            ));
            assert!(queue.try_claim().await.unwrap().is_none());
        },
    );
}

/// Items come out oldest first across buckets, each claim holds its item against other
/// workers, and a completed item is never claimed again.
#[test]
fn claims_come_oldest_first_and_completed_items_stay_completed() {
    crate::watchdog::in_virtual_time(
        "claims_come_oldest_first_and_completed_items_stay_completed",
        async {
            let clock = VirtualClock::starting_at(EPOCH);
            let store = TestStore::new(clock.clone());
            let producer = queue(&store, &clock, 1);
            let worker = queue(&store, &clock, 2);
            let other = queue(&store, &clock, 3);
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
    crate::watchdog::in_virtual_time("an_abandoned_or_lapsed_claim_is_delivered_again", async {
        let clock = VirtualClock::starting_at(EPOCH);
        let store = TestStore::new(clock.clone());
        let first = queue(&store, &clock, 1);
        let second = queue(&store, &clock, 2);
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
        use futures::FutureExt;
        let _ = tokio::time::advance(Duration::from_secs(30)).now_or_never();
        assert!(!again.is_held());
        let third = first.claim().await.unwrap();
        assert_eq!(third.id(), &id);
        assert!(third.fencing_token() > again_token);
        assert!(matches!(
            again.complete().await,
            Err(Error::LockLost { .. })
        ));
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
    crate::watchdog::in_virtual_time(
        "a_closed_handle_stops_its_idle_workers_and_claims_nothing_more",
        async {
            let clock = VirtualClock::starting_at(EPOCH);
            let store = TestStore::new(clock.clone());
            let producer = queue(&store, &clock, 1);
            let worker = queue(&store, &clock, 2);
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
