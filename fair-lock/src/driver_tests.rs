//! The async locker on the single-node test store, on Tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::test_client::{Link, TestClient, TestStore};
use crate::{Clock, Locker, VirtualClock};
use lock_core::config::{Algorithm, LockConfig};
use lock_core::error::Error;
use lock_core::id::LockId;
use lock_core::machine::LeaseStatus;
use lock_core::storage::{RowKey, RowKind};
use lock_core::time::Timestamp;

const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

/// The default configuration with waiting in the main row off: these tests follow the
/// queue's steps of docs/algorithm.md section 6, and those of section 6.2 turn it on.
fn without_waiting_in_main() -> LockConfig {
    LockConfig {
        wait_in_main_row: false,
        ..LockConfig::default()
    }
}

pub(super) fn store() -> (TestStore, VirtualClock) {
    let clock = VirtualClock::starting_at(EPOCH);
    (TestStore::new(clock.clone()), clock)
}

fn locker(client: TestClient, clock: &VirtualClock, seed: u64) -> Locker<TestClient> {
    locker_with(client, clock, seed, without_waiting_in_main())
}

pub(super) fn locker_with(
    client: TestClient,
    clock: &VirtualClock,
    seed: u64,
    config: LockConfig,
) -> Locker<TestClient> {
    Locker::builder(client)
        .config(config)
        .clock(Arc::new(clock.clone()))
        .replay_owner_ids_unsafe(seed)
        .build()
        .unwrap()
}

fn queue_row() -> RowKey {
    RowKey::new(RowKind::Queue, LockId::new("account:42").unwrap())
}

/// Where each queue read `client` sent started, in order.
fn queue_read_starts(client: &TestClient) -> Vec<Timestamp> {
    client
        .sent()
        .iter()
        .filter_map(|request| match request {
            lock_core::storage::StorageRequest::Read(read) if read.row == queue_row() => {
                let start = read
                    .start
                    .as_ref()
                    .expect("queue reads never start at the row's beginning");
                Some(Timestamp::from_micros(start.as_str().parse().unwrap()))
            }
            _ => None,
        })
        .collect()
}

async fn contend(algorithm: Algorithm, contenders: usize, rounds: usize) {
    let (store, clock) = store();
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let config = LockConfig {
        algorithm,
        fencing: algorithm != Algorithm::Baseline,
        ..without_waiting_in_main()
    };
    let tasks: Vec<_> = (0..contenders)
        .map(|index| {
            let locker = locker_with(store.client(), &clock, index as u64, config.clone());
            let (inside, done) = (inside.clone(), done.clone());
            tokio::spawn(async move {
                for _ in 0..rounds {
                    let guard = locker.lock("account:42").await.unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders at once"
                    );
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), contenders * rounds);
}

#[test]
fn contenders_never_both_hold_and_all_finish() {
    crate::watchdog::in_virtual_time("contenders_never_both_hold_and_all_finish", async {
        contend(Algorithm::Queue, 3, 20).await;
    });
}

#[test]
fn baseline_contenders_never_both_hold_and_all_finish() {
    crate::watchdog::in_virtual_time(
        "baseline_contenders_never_both_hold_and_all_finish",
        async {
            contend(Algorithm::Baseline, 3, 5).await;
        },
    );
}

#[test]
fn a_try_lock_while_held_returns_none_and_release_frees_at_once() {
    crate::watchdog::in_virtual_time(
        "a_try_lock_while_held_returns_none_and_release_frees_at_once",
        async {
            let (store, clock) = store();
            let a = locker(store.client(), &clock, 1);
            let b = locker(store.client(), &clock, 2);
            let guard = a.lock("account:42").await.unwrap();
            assert_eq!(guard.lock_id().as_str(), "account:42");
            assert!(b.try_lock("account:42").await.unwrap().is_none());
            assert!(
                b.try_lock("account:7").await.unwrap().is_some(),
                "other ids are independent"
            );
            guard.release().await.unwrap();
            let before = clock.now().instant;
            let next = b.try_lock("account:42").await.unwrap();
            assert!(next.is_some());
            assert_eq!(
                clock.now().instant,
                before,
                "the release freed the lock at once"
            );
        },
    );
}

#[test]
fn a_holder_that_stops_renewing_is_told_before_anyone_else_gets_the_lock() {
    crate::watchdog::in_virtual_time(
        "a_holder_that_stops_renewing_is_told_before_anyone_else_gets_the_lock",
        async {
            let (store, clock) = store();
            let holder_link = store.client();
            let holder = locker(holder_link.clone(), &clock, 1);
            let waiter = locker(store.client(), &clock, 2);
            let guard = holder.lock("account:42").await.unwrap();
            let lost = guard.lost();
            let lost_at = tokio::spawn({
                let clock = clock.clone();
                async move {
                    lost.await;
                    clock.now().instant
                }
            });
            tokio::time::sleep(Duration::from_secs(12)).await;
            assert_eq!(guard.status(), LeaseStatus::Held, "renewals keep it held");
            holder_link.set_link(Link::Refused);
            let cut_at = clock.now().instant;
            let next = waiter.lock("account:42").await.unwrap();
            let acquired_at = clock.now().instant;
            let lost_at = lost_at.await.unwrap();
            assert!(
                lost_at <= acquired_at,
                "lost at {lost_at:?}, next owner at {acquired_at:?}"
            );
            assert_eq!(guard.status(), LeaseStatus::Lost);
            assert!(!guard.is_held());
            assert_eq!(guard.time_left(), Duration::ZERO);
            let ttl = LockConfig::default().lease_ttl;
            let recovery = acquired_at.saturating_duration_since(cut_at);
            assert!(
                recovery <= ttl + Duration::from_millis(300),
                "took {recovery:?}"
            );
            assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
            next.release().await.unwrap();
        },
    );
}

#[test]
fn a_lease_lives_across_many_ttls_while_held() {
    crate::watchdog::in_virtual_time("a_lease_lives_across_many_ttls_while_held", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        let guard = a.lock("account:42").await.unwrap();
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_secs(7)).await;
            assert_eq!(guard.status(), LeaseStatus::Held);
            assert!(guard.time_left() > Duration::from_secs(2));
            assert!(b.try_lock("account:42").await.unwrap().is_none());
        }
        guard.release().await.unwrap();
    });
}

/// `in_doubt` fires at the first failed renewal, while the lock is still ours; a doubt
/// that was over before the future was polled still counts; a new future waits for a new
/// doubt; and none fires after a clean release.
#[test]
fn in_doubt_fires_at_the_first_failed_renewal() {
    crate::watchdog::in_virtual_time("in_doubt_fires_at_the_first_failed_renewal", async {
        let (store, clock) = store();
        let link = store.client();
        let a = locker(link.clone(), &clock, 1);
        let guard = a.lock("account:42").await.unwrap();
        let doubted = guard.in_doubt();
        tokio::time::sleep(Duration::from_secs(12)).await;
        let mut doubted = Box::pin(doubted);
        assert!(
            futures::poll!(doubted.as_mut()).is_pending(),
            "renewals succeed"
        );
        link.set_link(Link::Refused);
        let cut_at = clock.now().instant;
        tokio::time::timeout(Duration::from_secs(10), doubted)
            .await
            .expect("no doubt before the deadline");
        assert_eq!(guard.status(), LeaseStatus::InDoubt, "still ours, in doubt");
        assert!(clock.now().instant.saturating_duration_since(cut_at) < Duration::from_secs(5));
        link.set_link(Link::Up);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            guard.status(),
            LeaseStatus::Held,
            "a renewal ended the doubt"
        );
        let fresh = guard.in_doubt();
        let quiet = tokio::time::timeout(Duration::from_secs(30), fresh).await;
        assert!(quiet.is_err(), "a new future fired without a new doubt");
        // A doubt over before the future is polled is not missed.
        let mut brief = Box::pin(guard.in_doubt());
        link.set_link(Link::Refused);
        while guard.status() == LeaseStatus::Held {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        link.set_link(Link::Up);
        while guard.status() != LeaseStatus::Held {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            futures::poll!(brief.as_mut()).is_ready(),
            "a brief doubt was missed"
        );
        let after = guard.in_doubt();
        guard.release().await.unwrap();
        let fired = tokio::time::timeout(Duration::from_secs(60), after).await;
        assert!(fired.is_err(), "in_doubt fired after a clean release");
    });
}

/// A task that asks again for a lock it holds is told at once, by `lock` and
/// `lock_timeout`; `try_lock` says `None`; another task waits its turn as before; and once
/// the guard is gone, or the acquisition that timed out, the task takes the lock again.
#[test]
fn a_task_asking_again_for_its_own_lock_is_told_at_once() {
    crate::watchdog::in_virtual_time(
        "a_task_asking_again_for_its_own_lock_is_told_at_once",
        async {
            // Outside a Tokio task (the body of `block_on`) there is no task to tell apart.
            tokio::spawn(asks_again_for_its_own_lock()).await.unwrap();
        },
    );
}

async fn asks_again_for_its_own_lock() {
    {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let guard = a.lock("account:42").await.unwrap();
        let again = a.clone().lock("account:42").await;
        assert!(
            matches!(&again, Err(Error::ReentrantLock { lock_id }) if lock_id.as_str() == "account:42"),
            "{again:?}"
        );
        let timed = a.lock_timeout("account:42", Duration::from_secs(1)).await;
        assert!(
            matches!(timed, Err(Error::ReentrantLock { .. })),
            "{timed:?}"
        );
        assert!(a.try_lock("account:42").await.unwrap().is_none());
        assert!(
            a.lock("account:43").await.is_ok(),
            "another lock is not the same"
        );
        let other_task = tokio::spawn({
            let a = a.clone();
            async move {
                a.lock("account:42")
                    .await
                    .map(|guard| guard.owner_id().clone())
            }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!other_task.is_finished(), "another task waits its turn");
        drop(guard);
        let owner = other_task.await.unwrap().unwrap();
        let guard = a.lock("account:42").await.unwrap();
        assert_ne!(guard.owner_id(), &owner);
        // Held by another task, the lock is waited for, not refused: a lock_timeout
        // that gives up leaves no claim behind.
        let holder = tokio::spawn({
            let a = a.clone();
            async move {
                let guard = a.lock("account:44").await.unwrap();
                tokio::time::sleep(Duration::from_secs(5)).await;
                guard.release().await.unwrap();
            }
        });
        tokio::task::yield_now().await;
        let waited = a.lock_timeout("account:44", Duration::from_secs(1)).await;
        assert!(matches!(waited, Ok(None)), "{waited:?}");
        holder.await.unwrap();
        a.lock("account:44").await.unwrap().release().await.unwrap();
        guard.release().await.unwrap();
    }
}

#[test]
fn lost_never_fires_after_a_clean_release() {
    crate::watchdog::in_virtual_time("lost_never_fires_after_a_clean_release", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let guard = a.lock("account:42").await.unwrap();
        let lost = guard.lost();
        guard.release().await.unwrap();
        let fired = tokio::time::timeout(Duration::from_secs(60), lost).await;
        assert!(fired.is_err(), "lost fired after a clean release");
    });
}

#[test]
fn lock_timeout_gives_up_and_leaves_no_queue_cell() {
    crate::watchdog::in_virtual_time("lock_timeout_gives_up_and_leaves_no_queue_cell", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        let _guard = a.lock("account:42").await.unwrap();
        let started = clock.now().instant;
        let gave_up = b
            .lock_timeout("account:42", Duration::from_secs(2))
            .await
            .unwrap();
        assert!(gave_up.is_none());
        assert_eq!(
            clock.now().instant.saturating_duration_since(started),
            Duration::from_secs(2)
        );
        assert_eq!(
            store.live_columns(&queue_row()).len(),
            1,
            "only the holder is queued"
        );
    });
}

#[test]
fn a_dropped_acquisition_cleans_up_its_queue_cell() {
    crate::watchdog::in_virtual_time("a_dropped_acquisition_cleans_up_its_queue_cell", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        let _guard = a.lock("account:42").await.unwrap();
        let cancelled =
            tokio::time::timeout(Duration::from_millis(100), b.lock("account:42")).await;
        assert!(cancelled.is_err());
        assert_eq!(
            store.live_columns(&queue_row()).len(),
            2,
            "b is still queued"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(
            store.live_columns(&queue_row()).len(),
            1,
            "b's entry was deleted"
        );
    });
}

#[test]
fn dropping_a_guard_releases_in_the_background() {
    crate::watchdog::in_virtual_time("dropping_a_guard_releases_in_the_background", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        drop(a.lock("account:42").await.unwrap());
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(b.try_lock("account:42").await.unwrap().is_some());
    });
}

#[test]
fn a_guard_dropped_after_its_lease_task_started_releases_in_the_background() {
    crate::watchdog::in_virtual_time(
        "a_guard_dropped_after_its_lease_task_started_releases_in_the_background",
        async {
            let (store, clock) = store();
            let a = locker(store.client(), &clock, 1);
            let b = locker(store.client(), &clock, 2);
            let guard = a.lock("account:42").await.unwrap();
            tokio::time::sleep(LockConfig::default().lease_ttl).await;
            assert_eq!(guard.status(), LeaseStatus::Held, "renewed by its own task");
            drop(guard);
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(b.try_lock("account:42").await.unwrap().is_some());
        },
    );
}

#[test]
fn leases_are_renewed_after_the_keeper_ran_out_of_work() {
    crate::watchdog::in_virtual_time(
        "leases_are_renewed_after_the_keeper_ran_out_of_work",
        async {
            let (store, clock) = store();
            let a = locker(store.client(), &clock, 1);
            let b = locker(store.client(), &clock, 2);
            let ttl = LockConfig::default().lease_ttl;
            // Released before its renewal: the keeper task finds nothing left and ends.
            a.lock("account:1").await.unwrap().release().await.unwrap();
            tokio::time::sleep(ttl * 2).await;
            let guards = [
                a.lock("account:2").await.unwrap(),
                a.lock("account:3").await.unwrap(),
            ];
            tokio::time::sleep(ttl * 3).await;
            for guard in &guards {
                assert_eq!(guard.status(), LeaseStatus::Held);
                assert!(b.try_lock(guard.lock_id().clone()).await.unwrap().is_none());
            }
            for guard in guards {
                guard.release().await.unwrap();
            }
        },
    );
}

#[test]
fn bad_input_is_rejected_with_typed_errors() {
    crate::watchdog::in_virtual_time("bad_input_is_rejected_with_typed_errors", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        assert!(matches!(a.lock("").await, Err(Error::InvalidLockId { .. })));
        assert!(matches!(
            a.try_lock("x".repeat(1000)).await,
            Err(Error::InvalidLockId { .. })
        ));
        let bad = LockConfig {
            lease_ttl: Duration::from_millis(1500),
            ..without_waiting_in_main()
        };
        assert!(matches!(
            Locker::new(store.client(), bad),
            Err(Error::InvalidConfig {
                field: "lease_ttl",
                ..
            })
        ));
    });
}

#[test]
fn storage_that_refuses_fails_the_lock_instead_of_hanging() {
    crate::watchdog::in_virtual_time(
        "storage_that_refuses_fails_the_lock_instead_of_hanging",
        async {
            let (store, clock) = store();
            let client = store.client();
            client.set_link(Link::Refused);
            let a = locker(client, &clock, 1);
            assert!(matches!(
                a.lock("account:42").await,
                Err(Error::StorageUnavailable { .. })
            ));
        },
    );
}

#[test]
fn storage_that_never_answers_fails_with_outcome_unknown() {
    crate::watchdog::in_virtual_time(
        "storage_that_never_answers_fails_with_outcome_unknown",
        async {
            let (store, clock) = store();
            let client = store.client();
            client.set_link(Link::Silent);
            let a = locker(client, &clock, 1);
            let started = clock.now().instant;
            let result = a.lock("account:42").await;
            assert!(
                matches!(result, Err(Error::StorageOutcomeUnknown { .. })),
                "{result:?}"
            );
            let request_timeout = LockConfig::default().request_timeout;
            let retries = LockConfig::default().storage_retries;
            let elapsed = clock.now().instant.saturating_duration_since(started);
            assert!(elapsed >= request_timeout * (retries + 1), "{elapsed:?}");
        },
    );
}

#[test]
fn owner_ids_are_fresh_and_carry_the_prefix() {
    crate::watchdog::in_virtual_time("owner_ids_are_fresh_and_carry_the_prefix", async {
        let (store, clock) = store();
        let config = LockConfig {
            owner_prefix: Some("web-1".into()),
            ..without_waiting_in_main()
        };
        let a = locker_with(store.client(), &clock, 1, config);
        let first = a.lock("account:42").await.unwrap();
        let first_owner = first.owner_id().clone();
        first.release().await.unwrap();
        let second = a.lock("account:42").await.unwrap();
        assert!(first_owner.as_str().starts_with("web-1-"));
        assert_ne!(&first_owner, second.owner_id());
    });
}

#[test]
fn inspection_shows_the_holder_the_queue_in_order_and_stale_cells() {
    crate::watchdog::in_virtual_time(
        "inspection_shows_the_holder_the_queue_in_order_and_stale_cells",
        async {
            let (store, clock) = store();
            let a_link = store.client();
            let a = locker(a_link.clone(), &clock, 1);
            let guard = a.lock("account:42").await.unwrap();
            // Later queue timestamps than the holder's (with equal ones, owner ids decide the order).
            tokio::time::sleep(Duration::from_millis(1)).await;
            let waiters: Vec<_> = (2..4)
                .map(|seed| {
                    let waiter = locker(store.client(), &clock, seed);
                    tokio::spawn(async move { waiter.lock("account:42").await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let report = a.inspect("account:42", 100).await.unwrap();
            assert_eq!(report.holder.as_ref(), Some(guard.owner_id()));
            assert_eq!(report.queue.len(), 3);
            assert_eq!(report.queue[0].owner, *guard.owner_id());
            assert!(
                report
                    .queue
                    .windows(2)
                    .all(|pair| pair[0].enqueued_at <= pair[1].enqueued_at)
            );
            assert!(report.queue.iter().all(|entry| !entry.stale));
            assert_eq!(report.fence, guard.fencing_token());
            assert!(!report.truncated && report.malformed.is_empty());

            a_link.set_link(Link::Silent);
            tokio::time::sleep(Duration::from_secs(9)).await;
            let report = locker(store.client(), &clock, 9)
                .inspect("account:42", 100)
                .await
                .unwrap();
            let holder = report
                .main
                .iter()
                .find(|cell| cell.owner == *guard.owner_id());
            assert!(holder.is_some_and(|cell| cell.stale), "{report:?}");
            assert!(
                report.queue[1..].iter().all(|entry| !entry.stale),
                "waiters keep renewing"
            );
            for waiter in waiters {
                waiter.await.unwrap().unwrap().release().await.unwrap();
            }
        },
    );
}

#[test]
fn force_release_frees_a_stuck_lock_and_the_stuck_owner_learns_it_lost() {
    crate::watchdog::in_virtual_time(
        "force_release_frees_a_stuck_lock_and_the_stuck_owner_learns_it_lost",
        async {
            let (store, clock) = store();
            let a = locker(store.client(), &clock, 1);
            let admin = locker(store.client(), &clock, 2);
            let guard = a.lock("account:42").await.unwrap();
            let owner = guard.owner_id().clone();
            let waiter = {
                let b = locker(store.client(), &clock, 3);
                tokio::spawn(async move { b.lock("account:42").await })
            };
            tokio::time::sleep(Duration::from_millis(10)).await;
            let started = clock.now().instant;
            assert!(admin.force_release("account:42", &owner).await.unwrap());
            let next = waiter.await.unwrap().unwrap();
            let took = clock.now().instant.saturating_duration_since(started);
            assert!(took < Duration::from_secs(1), "took {took:?}");
            tokio::time::timeout(LockConfig::default().lease_ttl, guard.lost())
                .await
                .expect("the stuck owner must learn at its next renewal that it lost the lock");
            let report = admin.inspect("account:42", 100).await.unwrap();
            assert_eq!(report.holder.as_ref(), Some(next.owner_id()));
            assert!(
                report.main.iter().all(|cell| cell.owner != owner),
                "a renewal revived the cell"
            );
            assert!(!admin.force_release("account:42", &owner).await.unwrap());
        },
    );
}

#[derive(Default)]
struct Counts {
    events: std::sync::Mutex<Vec<String>>,
    requests: AtomicUsize,
}

impl crate::LockMetrics for Counts {
    fn acquired(
        &self,
        lock_id: &LockId,
        _wait: Duration,
        stats: &lock_core::machine::AcquireStats,
    ) {
        self.push(format!(
            "acquired {lock_id} after {} requests",
            stats.requests
        ));
    }

    fn not_acquired(&self, lock_id: &LockId, reason: crate::NotAcquired) {
        self.push(format!("{} {lock_id}", reason.as_str()));
    }

    fn released(&self, lock_id: &LockId, held: Duration) {
        self.push(format!("released {lock_id} after {}s", held.as_secs()));
    }

    fn renewed(&self, lock_id: &LockId) {
        self.push(format!("renewed {lock_id}"));
    }

    fn renewal_failed(&self, lock_id: &LockId) {
        self.push(format!("renewal failed {lock_id}"));
    }

    fn lost(&self, lock_id: &LockId) {
        self.push(format!("lost {lock_id}"));
    }

    fn storage_request(&self, _: crate::RequestKind, _: Duration, _: Option<&Error>) {
        self.requests.fetch_add(1, Ordering::SeqCst);
    }
}

impl Counts {
    fn push(&self, event: String) {
        self.events.lock().unwrap().push(event);
    }

    fn count(&self, prefix: &str) -> usize {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|event| event.starts_with(prefix))
            .count()
    }
}

#[test]
fn metrics_hear_about_acquisitions_renewals_losses_and_requests() {
    crate::watchdog::in_virtual_time(
        "metrics_hear_about_acquisitions_renewals_losses_and_requests",
        async {
            let (store, clock) = store();
            let counts = Arc::new(Counts::default());
            let link = store.client();
            let a = Locker::builder(link.clone())
                .clock(Arc::new(clock.clone()))
                .replay_owner_ids_unsafe(1)
                .metrics(counts.clone())
                .build()
                .unwrap();
            let guard = a.lock("account:42").await.unwrap();
            assert!(a.try_lock("account:42").await.unwrap().is_none());
            tokio::time::sleep(Duration::from_secs(21)).await;
            guard.release().await.unwrap();
            let second = a.lock("account:42").await.unwrap();
            link.set_link(Link::Refused);
            second.lost().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            // Both on the fast path, the first because nothing was known of the lock: two
            // writes, two reads, the fence's read with the delete of the queue cell (a
            // holder leaves the queue, waiting in the main row being on), and the fence's
            // write.
            assert_eq!(counts.count("acquired account:42 after 7 requests"), 2);
            assert_eq!(counts.count("busy account:42"), 1);
            // 21 s held: one renewal every 5 s. The holder left the queue as it took the
            // lock (waiting in the main row, on by default), so no queue cell with the short
            // waiter TTL asks for an early one.
            assert_eq!(counts.count("renewed account:42"), 4);
            assert!(counts.count("renewal failed account:42") >= 1);
            assert_eq!(counts.count("lost account:42"), 1);
            assert_eq!(counts.count("released account:42 after 21s"), 1);
            assert!(counts.requests.load(Ordering::SeqCst) > 20);
        },
    );
}

#[test]
fn tasks_sharing_one_locker_never_both_hold() {
    crate::watchdog::in_virtual_time("tasks_sharing_one_locker_never_both_hold", async {
        let (store, clock) = store();
        let locker = locker(store.client(), &clock, 1);
        let inside = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let (locker, inside) = (locker.clone(), inside.clone());
                tokio::spawn(async move {
                    for _ in 0..5 {
                        let guard = locker.lock("account:42").await.unwrap();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        inside.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[test]
fn a_second_task_of_the_locker_waits_locally_then_reuses_the_seat() {
    crate::watchdog::in_virtual_time(
        "a_second_task_of_the_locker_waits_locally_then_reuses_the_seat",
        async {
            let (store, clock) = store();
            let client = store.client();
            let locker = locker(client.clone(), &clock, 1);
            let seat_of = |report: &lock_core::machine::LockReport| {
                let [cell] = report.main.as_slice() else {
                    panic!("expected one main cell: {report:?}");
                };
                cell.column.clone()
            };
            let first = locker.lock("account:42").await.unwrap();
            let first_seat = seat_of(&locker.inspect("account:42", 10).await.unwrap());
            let waiting = {
                let locker = locker.clone();
                tokio::spawn(async move { locker.lock("account:42").await })
            };
            let requests_before = client.sent().len();
            tokio::time::sleep(Duration::from_millis(500)).await;
            // The second task waits in the process: no polling while the first holds (only the
            // holder's renewal, two writes and a read-back, in half a second), and no queue cell.
            let sent = client.sent().len() - requests_before;
            assert!(
                sent <= 3,
                "the local waiter polled the storage: {sent} requests"
            );
            let report = locker.inspect("account:42", 10).await.unwrap();
            assert_eq!(
                report.queue.len(),
                1,
                "one queue entry per locker: {report:?}"
            );
            // A soft lock of the same locker does not even ask the storage.
            assert!(locker.try_lock("account:42").await.unwrap().is_none());
            first.release().await.unwrap();
            let second = waiting.await.unwrap().unwrap();
            let second_seat = seat_of(&locker.inspect("account:42", 10).await.unwrap());
            assert_eq!(first_seat, second_seat, "the seat is free again");
            second.release().await.unwrap();
            for _ in 0..3 {
                let again = locker.lock("account:42").await.unwrap();
                let seat = seat_of(&locker.inspect("account:42", 10).await.unwrap());
                assert_eq!(seat, first_seat);
                again.release().await.unwrap();
            }
        },
    );
}

/// One locker whose eight tasks all want the lock, and another locker with one task: the
/// busy locker's tasks take their turns through the distributed queue one at a time, so
/// the other locker's task, once enqueued, waits for at most one of them.
#[test]
fn a_busy_locker_cannot_starve_another_locker() {
    crate::watchdog::in_virtual_time("a_busy_locker_cannot_starve_another_locker", async {
        let (store, clock) = store();
        let busy = locker(store.client(), &clock, 1);
        let other = locker(store.client(), &clock, 2);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let first = busy.lock("account:42").await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|task| {
                let (busy, order) = (busy.clone(), order.clone());
                tokio::spawn(async move {
                    let guard = busy.lock("account:42").await.unwrap();
                    order.lock().unwrap().push(format!("busy-{task}"));
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    guard.release().await.unwrap();
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let lone = {
            let (other, order) = (other.clone(), order.clone());
            tokio::spawn(async move {
                let guard = other.lock("account:42").await.unwrap();
                order.lock().unwrap().push("other".to_owned());
                guard.release().await.unwrap();
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        first.release().await.unwrap();
        lone.await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let position = order.iter().position(|who| who == "other").unwrap();
        assert!(
            position <= 1,
            "the other locker waited for {position} turns of the busy one: {order:?}"
        );
        assert_eq!(order.len(), 9);
    });
}

#[test]
fn queue_reads_start_near_the_head_the_last_acquisition_saw() {
    crate::watchdog::in_virtual_time(
        "queue_reads_start_near_the_head_the_last_acquisition_saw",
        async {
            let (store, clock) = store();
            let client = store.client();
            let config = LockConfig::default();
            let locker = locker(client.clone(), &clock, 1);
            let margin = lock_core::machine::Acquire::floor_margin(&config);
            let first_at = clock.now().timestamp;
            let guard = locker.lock("account:42").await.unwrap();
            guard.release().await.unwrap();
            assert_eq!(
                queue_read_starts(&client),
                [first_at - config.poll.cold_lookback - margin]
            );

            tokio::time::sleep(Duration::from_secs(30)).await;
            locker
                .lock("account:42")
                .await
                .unwrap()
                .release()
                .await
                .unwrap();
            assert_eq!(
                queue_read_starts(&client)[1],
                first_at - margin,
                "the second read starts at the first acquisition's own queue time, less the margin"
            );
        },
    );
}

#[test]
fn a_first_acquisition_starts_its_reads_near_the_head_the_holders_main_cell_names() {
    crate::watchdog::in_virtual_time(
        "a_first_acquisition_starts_its_reads_near_the_head_the_holders_main_cell_names",
        async {
            let (store, clock) = store();
            // The fast path's main cells name no head, and its first read starts the cold
            // lookback back: this is the path without it.
            let config = LockConfig {
                fast_path: false,
                ..without_waiting_in_main()
            };
            let margin = lock_core::machine::Acquire::floor_margin(&config);
            let holder = locker_with(store.client(), &clock, 1, config.clone());
            let holder_at = clock.now().timestamp;
            let guard = holder.lock("account:42").await.unwrap();
            let waiter_link = store.client();
            let waiter = locker_with(waiter_link.clone(), &clock, 2, config.clone());
            let waiter_at = clock.now().timestamp;
            let waiting =
                tokio::spawn(
                    async move { waiter.lock("account:42").await.unwrap().release().await },
                );
            tokio::time::sleep(Duration::from_millis(200)).await;
            guard.release().await.unwrap();
            waiting.await.unwrap().unwrap();

            let starts = queue_read_starts(&waiter_link);
            assert!(
                starts.len() >= 3,
                "the waiter polled through the hold: {starts:?}"
            );
            assert!(
                starts.iter().all(|start| *start == holder_at - margin),
                "the first read starts the margin before the head the holder's main cell names, \
             not the cold lookback back, and so does every later one: {starts:?}, head at \
             {holder_at:?}"
            );
            assert!(holder_at - margin > waiter_at - config.poll.cold_lookback - margin);
        },
    );
}

#[test]
fn with_lock_returns_the_sections_value_and_releases() {
    crate::watchdog::in_virtual_time("with_lock_returns_the_sections_value_and_releases", async {
        let (store, clock) = store();
        let a = locker_with(
            store.client(),
            &clock,
            1,
            LockConfig {
                fencing: true,
                ..without_waiting_in_main()
            },
        );
        let b = locker(store.client(), &clock, 2);
        let value = a
            .with_lock("account:42", async |guard| {
                assert!(guard.is_held());
                assert!(
                    guard.fencing_token().is_some(),
                    "the section sees the token"
                );
                tokio::time::sleep(Duration::from_secs(15)).await;
                assert!(guard.is_held(), "renewed while the section runs");
                42
            })
            .await
            .unwrap();
        assert_eq!(value, 42);
        let before = clock.now().instant;
        assert!(
            b.try_lock("account:42").await.unwrap().is_some(),
            "released on the way out"
        );
        assert_eq!(clock.now().instant, before);
    });
}

#[test]
fn with_lock_stops_a_section_that_outlives_its_lease() {
    crate::watchdog::in_virtual_time("with_lock_stops_a_section_that_outlives_its_lease", async {
        let (store, clock) = store();
        let holder_link = store.client();
        let a = locker(holder_link.clone(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        let finished = Arc::new(AtomicUsize::new(0));
        let started = clock.now().instant;
        let result = a
            .with_lock("account:42", async |_guard| {
                holder_link.set_link(Link::Refused);
                tokio::time::sleep(Duration::from_secs(60)).await;
                finished.fetch_add(1, Ordering::SeqCst);
            })
            .await;
        let stopped_after = clock.now().instant.saturating_duration_since(started);
        assert!(
            matches!(&result, Err(Error::LockLost { lock_id, .. }) if lock_id.as_str() == "account:42"),
            "{result:?}"
        );
        assert_eq!(
            finished.load(Ordering::SeqCst),
            0,
            "the section was stopped"
        );
        assert!(
            stopped_after < LockConfig::default().lease_ttl,
            "stopped after {stopped_after:?}"
        );
        let next = b.lock("account:42").await.unwrap();
        assert!(next.is_held(), "another owner takes the lock afterwards");
        next.release().await.unwrap();
    });
}

#[test]
fn a_release_dropped_midway_still_frees_the_lock() {
    crate::watchdog::in_virtual_time("a_release_dropped_midway_still_frees_the_lock", async {
        let (store, clock) = store();
        let link = store.client();
        let a = locker(link.clone(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        let guard = a.lock("account:42").await.unwrap();
        link.set_link(Link::Refused);
        let dropped = tokio::time::timeout(Duration::from_millis(1), guard.release()).await;
        assert!(dropped.is_err(), "the release was still retrying");
        link.set_link(Link::Up);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            b.try_lock("account:42").await.unwrap().is_some(),
            "the release went on in the background, well before lease_ttl"
        );
    });
}

/// Three lockers on one store, each over `link`, take `rounds` turns at "account:42",
/// holding each for `hold`; per locker, every acquisition's queue reads and wait.
async fn take_turns(link: Link, hold: Duration, rounds: usize) -> Vec<Vec<(u32, Duration)>> {
    let (store, clock) = store();
    let tasks: Vec<_> = (0..3u64)
        .map(|seed| {
            let client = store.client();
            client.set_link(link);
            let locker = locker(client, &clock, seed + 1);
            tokio::spawn(async move {
                let mut turns = Vec::new();
                for _ in 0..rounds {
                    let guard = locker.lock("account:42").await.unwrap();
                    turns.push((guard.stats().queue_reads, guard.wait()));
                    if !hold.is_zero() {
                        tokio::time::sleep(hold).await;
                    }
                    guard.release().await.unwrap();
                }
                turns
            })
        })
        .collect();
    let mut lockers = Vec::new();
    for task in tasks {
        lockers.push(task.await.unwrap());
    }
    lockers
}

#[test]
fn on_a_network_slower_than_the_minimum_interval_the_hand_off_estimate_carries_over() {
    crate::watchdog::in_virtual_time(
        "on_a_network_slower_than_the_minimum_interval_the_hand_off_estimate_carries_over",
        async {
            // Three lockers take turns without a critical section over a 3 ms round trip, three
            // times `poll.min_interval`. The first guess of a hand-off is capped at four intervals,
            // 4 ms, while a hand-off with fencing takes five round trips and more. Each
            // acquisition starts from the estimate the last one ended with, up to the locker's own
            // turn (its main and fence requests) and two round trips, so the estimate climbs to
            // the real hand-off over the rounds and the waiters stop waking early. Capped at the
            // first guess, each acquisition read the queue 9 times to the end.
            const ROUNDS: usize = 24;
            let lockers = take_turns(
                Link::Delayed(Duration::from_millis(3)),
                Duration::ZERO,
                ROUNDS,
            )
            .await;
            for turns in lockers {
                let last_eight = &turns[ROUNDS - 8..];
                let reads: u32 = last_eight.iter().map(|(reads, _)| reads).sum();
                assert!(
                    reads <= 32,
                    "the last eight acquisitions read the queue {reads} times: {turns:?}"
                );
                // Waking late instead would leave the lock idle: the waits stay those of three
                // owners taking turns (48 to 49 ms with the capped estimate).
                let longest = last_eight.iter().map(|(_, wait)| *wait).max().unwrap();
                assert!(
                    longest <= Duration::from_millis(55),
                    "a wait of {longest:?}: {turns:?}"
                );
            }
        },
    );
}

#[test]
fn a_locker_that_held_long_waits_its_next_turn_with_few_reads() {
    crate::watchdog::in_virtual_time(
        "a_locker_that_held_long_waits_its_next_turn_with_few_reads",
        async {
            // Three lockers take turns holding for 40 ms, far longer than the network explains
            // (the test store answers at once). Each acquisition's hand-off estimate starts where
            // the last one's ended, up to the locker's own turn (its hold and its requests) and
            // two round trips, so the estimate climbs to the real hand-off over a few rounds and a
            // waiter reads a few times per turn. Started from the first guess every time, it
            // stayed near an eighth of the hold, and the waiters read about 60 times per
            // acquisition.
            const ROUNDS: usize = 12;
            let lockers = take_turns(Link::Up, Duration::from_millis(40), ROUNDS).await;
            for turns in lockers {
                let reads: Vec<u32> = turns.iter().map(|(reads, _)| *reads).collect();
                let last_four: u32 = reads[ROUNDS - 4..].iter().sum();
                assert!(
                    last_four <= 40,
                    "the last four acquisitions read the queue {last_four} times: {reads:?}"
                );
            }
        },
    );
}

#[test]
fn a_locker_that_joins_again_behind_owners_it_left_waiting_skips_the_read_on_arrival() {
    crate::watchdog::in_virtual_time(
        "a_locker_that_joins_again_behind_owners_it_left_waiting_skips_the_read_on_arrival",
        async {
            // Three lockers take turns over a 1 ms round trip. The read that finds an owner first
            // shows the two behind it, and the owner that held before joins again at once: so a
            // locker that joins again after its release knows that two are ahead, and sleeps from
            // its release to their turns' end without the read that only finds its place. Each
            // acquisition then reads the queue about twice (the one that sees the last owner
            // ahead, the one that finds itself first); with the read on arrival it read three
            // times, and waited as long (17 ms).
            const ROUNDS: usize = 30;
            let lockers = take_turns(
                Link::Delayed(Duration::from_millis(1)),
                Duration::ZERO,
                ROUNDS,
            )
            .await;
            for turns in lockers {
                let last_ten = &turns[ROUNDS - 10..];
                let reads: u32 = last_ten.iter().map(|(reads, _)| reads).sum();
                assert!(
                    reads <= 24,
                    "the last ten acquisitions read the queue {reads} times: {turns:?}"
                );
                // Sleeping through the turn instead would leave the lock idle: the waits stay
                // those of three owners taking turns.
                let longest = last_ten.iter().map(|(_, wait)| *wait).max().unwrap();
                assert!(
                    longest <= Duration::from_millis(18),
                    "a wait of {longest:?}: {turns:?}"
                );
            }
        },
    );
}

#[test]
fn the_five_settings_apply_over_the_advanced_config_whichever_comes_first() {
    let (store, clock) = store();
    let tuned = LockConfig {
        waiter_ttl: Duration::from_secs(4),
        lease_ttl: Duration::from_secs(60),
        ..LockConfig::default()
    };
    let settings_first = Locker::builder(store.client())
        .lease_ttl(Duration::from_secs(20))
        .max_clock_skew(Duration::from_millis(500))
        .request_timeout(Duration::from_secs(1))
        .fencing(false)
        .owner_name("billing-1")
        .config(tuned.clone())
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let config_first = Locker::builder(store.client())
        .config(tuned)
        .lease_ttl(Duration::from_secs(20))
        .max_clock_skew(Duration::from_millis(500))
        .request_timeout(Duration::from_secs(1))
        .fencing(false)
        .owner_name("billing-1")
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    for locker in [settings_first, config_first] {
        let config = locker.config().config();
        assert_eq!(config.lease_ttl, Duration::from_secs(20));
        assert_eq!(config.max_clock_skew, Duration::from_millis(500));
        assert_eq!(config.request_timeout, Duration::from_secs(1));
        assert!(!config.fencing);
        assert_eq!(config.owner_prefix.as_deref(), Some("billing-1"));
        assert_eq!(config.waiter_ttl, Duration::from_secs(4), "tuning kept");
    }
}

#[test]
fn a_lease_too_short_for_the_settings_is_refused_naming_the_lease() {
    let (store, clock) = store();
    let refused = Locker::builder(store.client())
        .lease_ttl(Duration::from_secs(3))
        .clock(Arc::new(clock.clone()))
        .build();
    assert!(
        matches!(
            &refused,
            Err(Error::InvalidConfig {
                field: "lease_ttl",
                ..
            })
        ),
        "{:?}",
        refused.err()
    );
    let bad_name = Locker::builder(store.client())
        .owner_name("no spaces")
        .clock(Arc::new(clock))
        .build();
    assert!(
        matches!(
            &bad_name,
            Err(Error::InvalidConfig {
                field: "owner_prefix",
                ..
            })
        ),
        "{:?}",
        bad_name.err()
    );
}
