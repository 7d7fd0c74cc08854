//! The driver's side of lingering after a release (docs/algorithm.md, section "Lingering
//! after a release"): a release asked not to linger is an ordinary release, which returns
//! only once its cells are deleted and reports a delete that failed.

use std::sync::Arc;
use std::time::Duration;

use crate::driver_tests::store;
use crate::test_client::Link;
use crate::wake_tests::{TestHints, TestNetwork};
use crate::{Locker, WakeHintTransport};
use lock_core::config::LockConfig;
use lock_core::error::Error;
use lock_core::hint::HintKind;
use lock_core::id::LockId;
use lock_core::storage::{RowKey, RowKind};

const LOCK: &str = "account:42";

/// Longer than the test lets pass before the release, so that only a `Wanted` hint can
/// keep the release from lingering.
const LINGER: Duration = Duration::from_millis(400);

/// What one run of [`release_after_the_link_is_cut`] saw.
struct Released {
    /// What A's release returned.
    result: Result<(), Error>,
    /// Whether B sent A a `Wanted` hint.
    asked: bool,
    /// A's main cell was still in storage when the release returned.
    main_cell_left: bool,
}

/// A takes the idle lock; with `waiter`, B (listening for hints too) asks for it 10 ms
/// later and waits. 50 ms after the lock was taken, A's link to storage is refused and A
/// releases.
async fn release_after_the_link_is_cut(waiter: bool) -> Released {
    let (store, clock) = store();
    let network = TestNetwork::default();
    let build = |client, seed, hints: Arc<TestHints>| {
        Locker::builder(client)
            .config(LockConfig {
                linger: LINGER,
                ..LockConfig::default()
            })
            .clock(Arc::new(clock.clone()))
            .seed(seed)
            .wake_hints(hints)
            .build()
            .unwrap()
    };
    let a_client = store.client();
    let a = build(a_client.clone(), 1, network.endpoint(1));
    let b_hints = network.endpoint(2);
    let b = build(store.client(), 2, b_hints.clone());
    let held = a.lock(LOCK).await.unwrap();
    assert!(held.stats().found_idle());
    let waiting = waiter.then(|| {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            b.lock(LOCK).await
        })
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    a_client.set_link(Link::Refused);
    let result = held.release().await;
    let main_row = RowKey::new(RowKind::Main, LockId::new(LOCK).unwrap());
    let main_cell_left = !store.live_columns(&main_row).is_empty();
    if let Some(waiting) = waiting {
        waiting.abort();
    }
    let asked = b_hints
        .sent()
        .iter()
        .any(|(_, hint)| hint.kind == HintKind::Wanted);
    Released {
        result,
        asked,
        main_cell_left,
    }
}

/// Asked by an owner waiting behind not to linger, a release deletes its cells before it
/// returns, like any release that does not linger: a delete that fails is the release's
/// result, not something a background task shrugs off. Unasked, the same release lingers
/// and returns at once.
#[test]
fn a_release_asked_not_to_linger_waits_for_its_deletes_and_reports_their_failure() {
    crate::watchdog::in_virtual_time(
        "a_release_asked_not_to_linger_waits_for_its_deletes_and_reports_their_failure",
        async {
            let asked = release_after_the_link_is_cut(true).await;
            assert!(asked.asked, "B asked A not to linger");
            assert!(
                matches!(asked.result, Err(Error::StorageUnavailable { .. })),
                "the failed delete is the release's result: {:?}",
                asked.result
            );
            assert!(asked.main_cell_left);
            let unasked = release_after_the_link_is_cut(false).await;
            assert!(!unasked.asked);
            assert!(
                unasked.result.is_ok(),
                "a lingering release returns at once: {:?}",
                unasked.result
            );
        },
    );
}

/// A lingering lock ended early by a `Wanted` hint is released as one with an owner
/// waiting behind: the release reads the queue with its deletes and sends the owner that
/// asked a hint once its cells are gone, so that it need not wait for its next poll.
#[test]
fn a_linger_ended_by_a_wanted_hint_hints_the_owner_that_asked() {
    crate::watchdog::in_virtual_time(
        "a_linger_ended_by_a_wanted_hint_hints_the_owner_that_asked",
        async {
            let (store, clock) = store();
            let network = TestNetwork::default();
            let build = |hints: Arc<TestHints>, seed| {
                Locker::builder(store.client())
                    .config(LockConfig {
                        linger: LINGER,
                        ..LockConfig::default()
                    })
                    .clock(Arc::new(clock.clone()))
                    .seed(seed)
                    .wake_hints(hints)
                    .build()
                    .unwrap()
            };
            let a_hints = network.endpoint(1);
            let b_hints = network.endpoint(2);
            let (a, b) = (build(a_hints.clone(), 1), build(b_hints.clone(), 2));
            let held = a.lock(LOCK).await.unwrap();
            assert!(held.stats().found_idle());
            held.release().await.unwrap();
            let released_at = tokio::time::Instant::now();
            tokio::time::sleep(Duration::from_millis(10)).await;
            let guard = b.lock(LOCK).await.unwrap();
            let took = released_at.elapsed();
            assert_eq!(guard.stats().wanted_hints, 1, "B asked A to let go");
            assert!(took < LINGER, "B held {took:?} after A's release");
            let to_b: Vec<HintKind> = a_hints
                .sent()
                .iter()
                .filter(|(to, hint)| *to == b_hints.listener() && &hint.owner == guard.owner_id())
                .map(|(_, hint)| hint.kind)
                .collect();
            assert_eq!(to_b, [HintKind::Moved], "A's hints to B");
            guard.release().await.unwrap();
        },
    );
}
