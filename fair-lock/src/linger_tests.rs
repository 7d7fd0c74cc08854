//! Lingering after a release, and the retake (docs/algorithm.md, section "Lingering after a
//! release"), on the single-node test store and Tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use crate::driver_tests::{locker_with, store};
use crate::test_client::TestClient;
use crate::{Clock, Locker, VirtualClock};
use lock_core::config::LockConfig;
use lock_core::error::Error;
use lock_core::id::LockId;
use lock_core::storage::{RowKey, RowKind, StorageRequest};

const LINGER: Duration = Duration::from_millis(50);
const LOCK: &str = "account:42";

fn lingering() -> LockConfig {
    LockConfig {
        linger: LINGER,
        ..LockConfig::default()
    }
}

fn locker(client: TestClient, clock: &VirtualClock, seed: u64) -> Locker<TestClient> {
    locker_with(client, clock, seed, lingering())
}

fn main_row() -> RowKey {
    RowKey::new(RowKind::Main, LockId::new(LOCK).unwrap())
}

/// A lock released with nobody queued stays in storage for `linger`; the same locker takes
/// it again with one queue read and one main read, as the same owner with the same token;
/// another locker finds it taken until the linger is over, then free.
#[test]
fn a_lock_released_with_nobody_queued_is_retaken_with_two_reads() {
    crate::watchdog::in_virtual_time(
        "a_lock_released_with_nobody_queued_is_retaken_with_two_reads",
        async {
            let (store, clock) = store();
            let client = store.client();
            let a = locker(client.clone(), &clock, 1);
            let b = locker(store.client(), &clock, 2);
            let first = a.lock(LOCK).await.unwrap();
            let (owner, token) = (first.owner_id().clone(), first.fencing_token());
            first.release().await.unwrap();
            assert_eq!(
                store.live_columns(&main_row()).len(),
                1,
                "the main cell lingers"
            );
            let sent_before = client.sent().len();
            let again = a.lock(LOCK).await.unwrap();
            let retake: Vec<StorageRequest> = client.sent()[sent_before..].to_vec();
            assert_eq!(retake.len(), 2, "a retake is two reads: {retake:?}");
            assert!(
                retake
                    .iter()
                    .all(|request| matches!(request, StorageRequest::Read(_)))
            );
            assert_eq!(again.owner_id(), &owner);
            assert_eq!(again.fencing_token(), token);
            assert_eq!(again.stats().requests, 2);
            assert!(b.try_lock(LOCK).await.unwrap().is_none(), "held again");
            again.release().await.unwrap();
            assert!(b.try_lock(LOCK).await.unwrap().is_none(), "lingering");
            tokio::time::sleep(LINGER + Duration::from_millis(1)).await;
            assert!(
                store.live_columns(&main_row()).is_empty(),
                "deleted after the linger"
            );
            assert!(b.try_lock(LOCK).await.unwrap().is_some());
        },
    );
}

/// An owner that queued while the lock lingered goes first: the retake sees its queue cell,
/// deletes the lingering cells at once and joins the queue behind it.
#[test]
fn a_retake_gives_way_to_an_owner_that_queued_meanwhile() {
    crate::watchdog::in_virtual_time(
        "a_retake_gives_way_to_an_owner_that_queued_meanwhile",
        async {
            let (store, clock) = store();
            let a = locker(store.client(), &clock, 1);
            let b = locker(store.client(), &clock, 2);
            a.lock(LOCK).await.unwrap().release().await.unwrap();
            let order = Arc::new(std::sync::Mutex::new(Vec::new()));
            let b_order = order.clone();
            let b_task = tokio::spawn(async move {
                let guard = b.lock(LOCK).await.unwrap();
                b_order.lock().unwrap().push("b");
                tokio::time::sleep(Duration::from_millis(5)).await;
                guard.release().await.unwrap();
            });
            // b is queued (and waits in the main row) well within the linger.
            tokio::time::sleep(Duration::from_millis(10)).await;
            let before = clock.now().instant;
            let guard = a.lock(LOCK).await.unwrap();
            order.lock().unwrap().push("a");
            b_task.await.unwrap();
            assert_eq!(*order.lock().unwrap(), ["b", "a"]);
            assert!(
                clock.now().instant.saturating_duration_since(before) < LINGER,
                "b held before the linger would have run out"
            );
            guard.release().await.unwrap();
        },
    );
}

/// A holder whose acquisition saw an owner queued behind it releases at once.
#[test]
fn a_holder_that_saw_owners_behind_it_does_not_linger() {
    crate::watchdog::in_virtual_time(
        "a_holder_that_saw_owners_behind_it_does_not_linger",
        async {
            let (store, clock) = store();
            let a = locker(store.client(), &clock, 1);
            let b = locker(store.client(), &clock, 2);
            let c = locker(store.client(), &clock, 3);
            let held = c.lock(LOCK).await.unwrap();
            let a_task = tokio::spawn(async move { a.lock(LOCK).await.unwrap() });
            tokio::time::sleep(Duration::from_millis(5)).await;
            let b_task = tokio::spawn(async move { b.lock(LOCK).await.unwrap() });
            tokio::time::sleep(Duration::from_millis(5)).await;
            held.release().await.unwrap();
            let a_guard = a_task.await.unwrap();
            assert_eq!(a_guard.stats().behind_at_turn, 1);
            a_guard.release().await.unwrap();
            let released = clock.now().instant;
            let b_guard = b_task.await.unwrap();
            assert!(
                clock.now().instant.saturating_duration_since(released) < LINGER,
                "the lock did not linger"
            );
            b_guard.release().await.unwrap();
        },
    );
}

/// `release_lingering` frees every lingering lock at once, as a process about to exit must.
#[test]
fn releasing_the_lingering_locks_frees_them_at_once() {
    crate::watchdog::in_virtual_time("releasing_the_lingering_locks_frees_them_at_once", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        a.lock(LOCK).await.unwrap().release().await.unwrap();
        a.lock("account:7").await.unwrap().release().await.unwrap();
        assert!(b.try_lock(LOCK).await.unwrap().is_none(), "lingering");
        let before = clock.now().instant;
        assert_eq!(a.release_lingering().await.unwrap(), 2);
        assert!(store.live_columns(&main_row()).is_empty());
        assert!(b.try_lock(LOCK).await.unwrap().is_some());
        assert!(b.try_lock("account:7").await.unwrap().is_some());
        assert!(clock.now().instant.saturating_duration_since(before) < LINGER);
        assert_eq!(a.release_lingering().await.unwrap(), 0);
    });
}

#[test]
fn a_linger_out_of_range_is_refused() {
    for linger in [Duration::from_millis(1500), Duration::from_secs(5)] {
        let config = LockConfig {
            linger,
            ..LockConfig::default()
        };
        assert!(
            matches!(
                config.validate(),
                Err(Error::InvalidConfig {
                    field: "linger",
                    ..
                })
            ),
            "{linger:?} accepted"
        );
    }
    let short_renewals = LockConfig {
        lease_ttl: Duration::from_secs(4),
        waiter_ttl: Duration::from_secs(3),
        renew_fraction: lock_core::config::Fraction::new(1, 100),
        request_timeout: Duration::from_millis(500),
        linger: Duration::from_millis(100),
        ..LockConfig::default()
    };
    assert!(matches!(
        short_renewals.validate(),
        Err(Error::InvalidConfig {
            field: "linger",
            ..
        })
    ));
    assert!(lingering().validate().is_ok());
}
