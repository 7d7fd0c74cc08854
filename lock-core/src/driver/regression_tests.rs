//! Regression tests for defects found through the public API, on Tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use crate::config::LockConfig;
use crate::driver::{RemoteLocker, VirtualClock};
use crate::error::Error;
use crate::machine::LeaseStatus;
use crate::test_store::{TestClient, TestStore};
use crate::time::Timestamp;

const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

fn store() -> (TestStore, VirtualClock) {
    let clock = VirtualClock::starting_at(EPOCH);
    (TestStore::new(clock.clone()), clock)
}

fn locker(client: TestClient, clock: &VirtualClock, seed: u64) -> RemoteLocker<TestClient> {
    RemoteLocker::builder(client)
        .clock(Arc::new(clock.clone()))
        .seed(seed)
        .build()
        .unwrap()
}

/// Jumps the paused clock forward without yielding, as if the process had been frozen:
/// no task (not the lease keeper either) runs before the caller's next await.
fn freeze_for(duration: Duration) {
    // `advance` moves the clock on its first poll, then yields; dropping it there skips
    // the yield.
    let _ = tokio::time::advance(duration).now_or_never();
}

#[tokio::test(start_paused = true)]
async fn a_release_after_the_lease_lapsed_before_its_first_renewal_reports_the_loss() {
    let (store, clock) = store();
    let first = locker(store.client(), &clock, 1);
    let second = locker(store.client(), &clock, 2);
    let guard = first.lock("account:42").await.unwrap();
    assert_eq!(guard.status(), LeaseStatus::Held);
    let config = LockConfig::default();
    // Frozen right after acquiring, past the lease TTL (so the cells expired too).
    freeze_for(config.lease_ttl + Duration::from_secs(1));
    assert_eq!(guard.status(), LeaseStatus::Lost);
    assert!(!guard.is_held());
    assert_eq!(guard.time_left(), Duration::ZERO);
    // Another owner takes the lock meanwhile and lets it go.
    let other = second
        .try_lock("account:42")
        .await
        .unwrap()
        .expect("the lapsed lock is free");
    other.release().await.unwrap();
    assert_eq!(guard.status(), LeaseStatus::Lost);
    match guard.release().await {
        Err(Error::LockLost { lock_id, .. }) => assert_eq!(lock_id.as_str(), "account:42"),
        other => panic!("a lapsed lease must release with LockLost, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_release_after_a_started_lease_lapsed_unnoticed_reports_the_loss() {
    let (store, clock) = store();
    let first = locker(store.client(), &clock, 1);
    let guard = first.lock("account:42").await.unwrap();
    let config = LockConfig::default();
    // The lease task starts and renews once.
    tokio::time::sleep(config.lease_ttl).await;
    assert_eq!(guard.status(), LeaseStatus::Held);
    freeze_for(config.lease_ttl * 2);
    assert_eq!(guard.status(), LeaseStatus::Lost);
    assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_locker_and_its_guards_stops_all_background_work() {
    let (store, clock) = store();
    let client = store.client();
    let first = locker(client.clone(), &clock, 1);
    let ttl = LockConfig::default().lease_ttl;
    // One lease that will have its own task, one still parked in the keeper, one dropped
    // while acquiring.
    let renewed = first.lock("account:1").await.unwrap();
    tokio::time::sleep(ttl).await;
    let parked = first.lock("account:2").await.unwrap();
    let waiting = {
        let blocker = locker(store.client(), &clock, 2);
        let held = blocker.lock("account:3").await.unwrap();
        let waiter = first.clone();
        let pending = tokio::spawn(async move { waiter.lock("account:3").await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        pending.abort();
        held
    };
    drop(waiting);
    drop(renewed);
    drop(parked);
    drop(first);
    // Let the background releases finish, then count.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = client.sent().len();
    for _ in 0..10 {
        tokio::time::sleep(ttl).await;
    }
    assert_eq!(
        client.sent().len(),
        settled,
        "requests after the locker and every guard were dropped: {:?}",
        &client.sent()[settled..]
    );
}
