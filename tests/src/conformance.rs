//! The conformance scenarios: written once, run on every backend.
//!
//! The kit has two halves: [`storage_semantics`] runs lock-core's storage checks
//! ([`fair_lock::testing::StorageChecks`]) on a raw client of the backend, and every other
//! scenario drives whole lockers over it.
//!
//! Each scenario is a `pub async fn` over `&impl Backend` that panics on a failure. The
//! [`crate::conformance_suite!`] macro turns the whole list into one `#[test]` per scenario
//! for a backend. Timing assertions are derived from the backend's [`LockConfig`] plus the
//! backend's [`Backend::slack`]:
//!
//! * a *hand-off* (a release, a drop or a give-up followed by the next owner's grant) takes
//!   at most `poll.max_interval` (the longest pause of a waiter between two queue polls)
//!   plus slack for the round trips of the acquisition;
//! * a waiter that dies first in line keeps a free lock from the next owner for at most
//!   its queue cell's TTL, `min(waiter_ttl, lease_ttl)`, plus a hand-off;
//! * recovery from a crashed holder takes at most `lease_ttl` (its cells expire) plus a
//!   hand-off, and at least `effective lease − renew_every` (its last renewal may have
//!   been that long before the crash, and nobody may enter before the holder's own deadline).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fair_lock::{Clock as _, LockGuard, Locker};
use lock_core::storage::{RowKey, RowKind, RowRead};
use lock_core::time::Timestamp;
use lock_core::{
    Algorithm, Error, LeaseStatus, LockConfig, LockId, LockStorage, OwnerId, QueueColumn,
};
use tokio::time::Instant;

use crate::backend::{Backend, Contender};
use crate::gate::{Gate, GateMode, Operation};

type GatedLocker<B> = Locker<Gate<<B as Backend>::Storage>>;

fn contender<B: Backend>(backend: &B, seed: u64) -> Contender<B::Storage> {
    Contender::new(backend, seed)
}

/// The longest a hand-off may take on `backend`.
fn handoff<B: Backend>(backend: &B) -> Duration {
    backend.lock_config().poll.max_interval + backend.slack()
}

/// Whether owners of `config` wait in the main row: the queue algorithm's option
/// (`wait_in_main_row`, on by default), which the bakery ignores.
fn waits_in_main_row(config: &LockConfig) -> bool {
    config.wait_in_main_row && config.algorithm == Algorithm::Queue
}

/// The queue entries a holder keeps while it holds: its own, or none when holders leave
/// the queue as they take the lock (`wait_in_main_row`, docs/algorithm.md section "Waiting in the main row").
fn held_entries<B: Backend>(backend: &B, holder: &str) -> Vec<String> {
    if waits_in_main_row(&backend.lock_config()) {
        Vec::new()
    } else {
        vec![holder.to_owned()]
    }
}

fn config<B: Backend>(backend: &B) -> (LockConfig, Duration, Duration) {
    let config = backend.lock_config();
    let valid = config
        .clone()
        .validate()
        .unwrap_or_else(|error| panic!("{}: invalid lock config: {error}", backend.name()));
    (config, valid.effective_lease(), valid.renew_every())
}

async fn must_lock<S: LockStorage>(locker: &Locker<S>, lock_id: &str) -> LockGuard {
    locker
        .lock(lock_id)
        .await
        .unwrap_or_else(|error| panic!("lock({lock_id}) failed: {error}"))
}

async fn must_try<S: LockStorage>(locker: &Locker<S>, lock_id: &str) -> Option<LockGuard> {
    locker
        .try_lock(lock_id)
        .await
        .unwrap_or_else(|error| panic!("try_lock({lock_id}) failed: {error}"))
}

async fn must_release(guard: LockGuard) {
    let lock_id = guard.lock_id().clone();
    guard
        .release()
        .await
        .unwrap_or_else(|error| panic!("release of {lock_id} failed: {error}"));
}

/// The owners waiting for or holding `lock_id`, in order: for the queue algorithms the
/// queue as `locker` inspects it; for the bakery the owners of the live number cells, in
/// client-id order, read from a raw client of the backend (the bakery keeps no queue, and
/// an inspection does not parse its cells).
async fn queued<B: Backend, S: LockStorage>(
    backend: &B,
    locker: &Locker<S>,
    lock_id: &str,
) -> Vec<String> {
    if backend.lock_config().algorithm == Algorithm::Bakery {
        return bakery_numbers(backend, lock_id).await;
    }
    let report = locker
        .inspect(lock_id, 100)
        .await
        .unwrap_or_else(|error| panic!("inspect({lock_id}) failed: {error}"));
    report
        .queue
        .iter()
        .map(|entry| entry.owner.as_str().to_owned())
        .collect()
}

/// The owners of the live bakery number cells of `lock_id` (docs/algorithm.md, section
/// 19.1: the main row, one cell per client, the number in 8 bytes and then the owner id).
async fn bakery_numbers<B: Backend>(backend: &B, lock_id: &str) -> Vec<String> {
    let (storage, _) = backend.client();
    let lock = LockId::new(lock_id).unwrap_or_else(|error| panic!("{lock_id}: {error}"));
    let read = RowRead::first(RowKey::new(RowKind::Main, lock), 100);
    let cells = storage
        .read_row(read)
        .await
        .unwrap_or_else(|error| panic!("reading the bakery numbers of {lock_id}: {error}"));
    cells
        .iter()
        .map(|cell| {
            let owner = cell.value.get(8..).unwrap_or_default();
            String::from_utf8_lossy(owner).into_owned()
        })
        .collect()
}

fn spawn_lock<B: Backend>(
    locker: &GatedLocker<B>,
    lock_id: &str,
) -> tokio::task::JoinHandle<(LockGuard, Instant)> {
    let locker = locker.clone();
    let lock_id = lock_id.to_owned();
    tokio::spawn(async move {
        let guard = must_lock(&locker, &lock_id).await;
        (guard, Instant::now())
    })
}

async fn join<T>(task: tokio::task::JoinHandle<T>) -> T {
    task.await
        .unwrap_or_else(|error| panic!("a contender task failed: {error}"))
}

/// Waits (polling) until `condition` holds, for at most `limit`.
async fn eventually(limit: Duration, what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !condition().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Single lock id, four owners, five rounds each: never two holders at once, and every
/// holder's lease reads as held inside its critical section.
pub async fn one_owner_at_a_time<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("one-owner");
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..4)
        .map(|seed| {
            let locker = contender(backend, seed).locker;
            let (inside, done, lock_id) = (inside.clone(), done.clone(), lock_id.clone());
            tokio::spawn(async move {
                for _ in 0..5 {
                    let guard = must_lock(&locker, &lock_id).await;
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    assert!(guard.is_held(), "the lease lapsed inside a short section");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    must_release(guard).await;
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for task in tasks {
        join(task).await;
    }
    assert_eq!(done.load(Ordering::SeqCst), 20);
}

/// Holding one lock id neither blocks nor is disturbed by another.
pub async fn lock_ids_are_independent<B: Backend>(backend: &B) {
    let (x, y) = (
        backend.lock_id("independent-x"),
        backend.lock_id("independent-y"),
    );
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    let held_x = must_lock(&a, &x).await;
    let started = Instant::now();
    let held_y = must_try(&b, &y)
        .await
        .expect("another lock id must be free");
    assert!(
        started.elapsed() <= backend.slack(),
        "took {:?}",
        started.elapsed()
    );
    assert!(must_try(&b, &x).await.is_none(), "x is still held");
    assert!(must_try(&a, &y).await.is_none(), "y is held by b");
    must_release(held_x).await;
    assert!(held_y.is_held(), "releasing x disturbed y");
    let again = must_try(&b, &x).await.expect("x was released");
    must_release(again).await;
    must_release(held_y).await;
}

/// A soft lock on a held lock answers `None` at once and leaves no queue entry behind.
pub async fn try_lock_while_held_returns_none<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("try-while-held");
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    let guard = must_lock(&a, &lock_id).await;
    for _ in 0..3 {
        let started = Instant::now();
        assert!(must_try(&b, &lock_id).await.is_none(), "taken twice");
        assert!(
            started.elapsed() <= backend.slack(),
            "took {:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        queued(backend, &b, &lock_id).await,
        held_entries(backend, guard.owner_id().as_str()),
        "a failed soft lock left a queue entry"
    );
    must_release(guard).await;
    let next = must_try(&b, &lock_id)
        .await
        .expect("free after the release");
    must_release(next).await;
}

/// A mandatory lock waits while another owner holds, and gets the lock within a hand-off
/// of the release.
pub async fn mandatory_lock_waits_then_gets_it<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("waits");
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    let guard = must_lock(&a, &lock_id).await;
    let waiter = spawn_lock::<B>(&b, &lock_id);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiter.is_finished(), "the waiter got a held lock");
    assert!(guard.is_held());
    let released_at = Instant::now();
    must_release(guard).await;
    let (next, granted_at) = join(waiter).await;
    let handoff_took = granted_at.saturating_duration_since(released_at);
    assert!(
        handoff_took <= handoff(backend),
        "hand-off took {handoff_took:?}, bound {:?}",
        handoff(backend)
    );
    assert!(
        next.wait() >= Duration::from_secs(1),
        "waited {:?}",
        next.wait()
    );
    must_release(next).await;
}

/// A held lock stays held across four TTLs: renewals keep it, nobody else gets it, and its
/// status stays `Held` (not merely `InDoubt`).
pub async fn lease_kept_alive_across_many_ttls<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("kept-alive");
    let (config, _, renew_every) = config(backend);
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    let guard = must_lock(&a, &lock_id).await;
    let lost = tokio::spawn(guard.lost());
    let until = Instant::now() + config.lease_ttl * 4;
    while Instant::now() < until {
        tokio::time::sleep(renew_every / 2).await;
        assert_eq!(guard.status(), LeaseStatus::Held);
        assert!(guard.time_left() > Duration::ZERO);
        assert!(
            must_try(&b, &lock_id).await.is_none(),
            "taken while renewed"
        );
    }
    assert!(!lost.is_finished(), "lost() fired while renewals succeeded");
    lost.abort();
    must_release(guard).await;
}

/// A holder that crashes (stops renewing) frees the lock after its cells expire: the next
/// waiter gets it within `lease_ttl` plus a hand-off of the crash, never before the
/// holder's own lease deadline, and the crashed holder's guard reports the loss before the
/// waiter enters.
pub async fn lease_expires_after_holder_crash<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("crash");
    let (config, effective_lease, renew_every) = config(backend);
    let a = contender(backend, 1);
    let b = contender(backend, 2).locker;
    let guard = must_lock(&a.locker, &lock_id).await;
    let lost = guard.lost();
    let lost_at = tokio::spawn(async move {
        lost.await;
        Instant::now()
    });
    let waiter = spawn_lock::<B>(&b, &lock_id);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let crashed_at = Instant::now();
    a.gate.set(GateMode::Crashed);
    let (next, granted_at) = join(waiter).await;
    let recovery = granted_at.saturating_duration_since(crashed_at);
    let bound = config.lease_ttl + handoff(backend);
    assert!(
        recovery <= bound,
        "recovery took {recovery:?}, bound {bound:?}"
    );
    assert!(
        recovery + renew_every >= effective_lease,
        "the next owner entered {recovery:?} after the crash, before the holder's lease ran out"
    );
    assert!(
        !guard.is_held(),
        "the crashed holder still believes it holds"
    );
    let lost_at = join(lost_at).await;
    assert!(
        lost_at <= granted_at,
        "lost() fired at {lost_at:?}, after the next owner entered at {granted_at:?}"
    );
    drop(guard);
    must_release(next).await;
}

/// After `release` returns, the lock is free at once.
pub async fn release_frees_at_once<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("release");
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    for _ in 0..3 {
        let guard = must_lock(&a, &lock_id).await;
        must_release(guard).await;
        let started = Instant::now();
        let next = must_try(&b, &lock_id).await.expect("free after release");
        assert!(
            started.elapsed() <= backend.slack(),
            "took {:?}",
            started.elapsed()
        );
        must_release(next).await;
    }
}

/// Dropping a guard without `release` frees the lock in the background, within a hand-off
/// (not after the TTL).
pub async fn dropping_a_guard_releases<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("drop");
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    let guard = must_lock(&a, &lock_id).await;
    let waiter = spawn_lock::<B>(&b, &lock_id);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let dropped_at = Instant::now();
    drop(guard);
    let (next, granted_at) = join(waiter).await;
    let took = granted_at.saturating_duration_since(dropped_at);
    assert!(took <= handoff(backend), "took {took:?} after the drop");
    must_release(next).await;
    let a_again = must_try(&a, &lock_id).await.expect("free again");
    must_release(a_again).await;
}

/// An acquisition cancelled midway (its future dropped while it waits) deletes its queue
/// entry: the owner behind it gets the lock within a hand-off of the release, and the
/// entry is gone from the queue.
pub async fn cancelled_acquire_leaves_no_stuck_entry<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("cancelled");
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    let c = contender(backend, 3).locker;
    let guard = must_lock(&a, &lock_id).await;
    let cancelled =
        tokio::time::timeout(Duration::from_millis(300), b.lock(lock_id.as_str())).await;
    assert!(cancelled.is_err(), "b got a held lock");
    let held = held_entries(backend, guard.owner_id().as_str());
    eventually(handoff(backend), "b's queue entry deleted", async || {
        queued(backend, &a, &lock_id).await == held
    })
    .await;
    let waiter = spawn_lock::<B>(&c, &lock_id);
    eventually(handoff(backend), "c queued", async || {
        queued(backend, &a, &lock_id).await.len() == held.len() + 1
    })
    .await;
    let released_at = Instant::now();
    must_release(guard).await;
    let (next, granted_at) = join(waiter).await;
    let took = granted_at.saturating_duration_since(released_at);
    assert!(
        took <= handoff(backend),
        "took {took:?}: a cancelled entry was in the way"
    );
    assert_eq!(
        queued(backend, &a, &lock_id).await,
        held_entries(backend, next.owner_id().as_str())
    );
    must_release(next).await;
}

/// A waiter that crashes while first in line, soon after it queued (so its cleanup never
/// runs), blocks the queue no longer than its entry's TTL, the waiter TTL, plus a hand-off.
pub async fn crashed_waiter_entry_expires_after_ttl<B: Backend>(backend: &B) {
    assert_dead_head_waiter_bound(backend, Duration::ZERO).await;
}

/// The common part of the dead-waiter scenarios: `b` dies `settle` after both waiters
/// queued, and `c` must get the lock within the waiter TTL plus a hand-off.
async fn assert_dead_head_waiter_bound<B: Backend>(backend: &B, settle: Duration) {
    let config = backend.lock_config();
    let valid = config
        .clone()
        .validate()
        .unwrap_or_else(|error| panic!("{}: invalid lock config: {error}", backend.name()));
    let took = dead_head_waiter_delay(backend, &config, settle).await;
    // Waiting in the main row, the dead waiter had written its main cell, which carries the
    // waiter TTL while it waits, like its queue cell (docs/algorithm.md section "Waiting in
    // the main row"); the replicas' clocks may run up to the skew ahead of its own.
    let ttl = if waits_in_main_row(&config) {
        valid.waiter_ttl().as_duration() + config.max_clock_skew
    } else {
        valid.waiter_ttl().as_duration()
    };
    let bound = ttl + handoff(backend);
    assert!(
        took <= bound,
        "a dead head waiter kept a free lock {took:?}, bound {bound:?} (lease_ttl {:?}, \
         died {settle:?} after queueing)",
        config.lease_ttl
    );
}

/// How long a waiter that dies first in line keeps a free lock from the owner behind it,
/// with every locker on `config`: `a` holds, `b` and then `c` queue behind it, both wait
/// `settle`, `b` dies (no request of it reaches storage any more, so its cleanup never runs)
/// and `a` releases at once. Returns the time from `b`'s death to `c`'s grant.
pub async fn dead_head_waiter_delay<B: Backend>(
    backend: &B,
    config: &LockConfig,
    settle: Duration,
) -> Duration {
    let lock_id = backend.lock_id("dead-head-waiter");
    let a = Contender::with_config(backend, 1, config.clone()).locker;
    let b = Contender::with_config(backend, 2, config.clone());
    let c = Contender::with_config(backend, 3, config.clone()).locker;
    let guard = must_lock(&a, &lock_id).await;
    let held = held_entries(backend, guard.owner_id().as_str()).len();
    let b_waiter = spawn_lock::<B>(&b.locker, &lock_id);
    eventually(handoff(backend), "b queued", async || {
        queued(backend, &a, &lock_id).await.len() == held + 1
    })
    .await;
    let c_waiter = spawn_lock::<B>(&c, &lock_id);
    eventually(handoff(backend), "c queued", async || {
        queued(backend, &a, &lock_id).await.len() == held + 2
    })
    .await;
    if waits_in_main_row(config) {
        // b waits in the main row: it rewrites its main cell with the waiter TTL one main
        // read after its first main write, which carries lease_ttl (docs/algorithm.md
        // section "Waiting in the main row"). Let it die after a rewrite, not in those few
        // round trips, whose cost is a holder's.
        let renew_every = config
            .clone()
            .validate()
            .unwrap_or_else(|error| panic!("invalid lock config: {error}"))
            .waiter_renew_every();
        let holder = guard.owner_id().clone();
        let mut first_seen = None;
        eventually(
            renew_every + handoff(backend) * 2,
            "b's main cell rewritten while it waits",
            async || {
                let written = waiter_main_write(&a, &lock_id, &holder).await;
                match (first_seen, written) {
                    (Some(first), Some(written)) => written > first,
                    (None, written) => {
                        first_seen = written;
                        false
                    }
                    (Some(_), None) => false,
                }
            },
        )
        .await;
    }
    tokio::time::sleep(settle).await;
    b.gate.set(GateMode::Crashed);
    let died_at = Instant::now();
    b_waiter.abort();
    must_release(guard).await;
    let (next, granted_at) = join(c_waiter).await;
    let took = granted_at.saturating_duration_since(died_at);
    assert_eq!(
        queued(backend, &a, &lock_id).await,
        held_entries(backend, next.owner_id().as_str())
    );
    must_release(next).await;
    took
}

/// When the main cell of an owner other than `holder` was last written, if there is one.
async fn waiter_main_write<S: LockStorage>(
    locker: &Locker<S>,
    lock_id: &str,
    holder: &OwnerId,
) -> Option<Timestamp> {
    let report = locker
        .inspect(lock_id, 100)
        .await
        .unwrap_or_else(|error| panic!("inspect({lock_id}) failed: {error}"));
    report
        .main
        .iter()
        .find(|cell| cell.owner != *holder)
        .map(|cell| cell.last_write)
}

/// A waiter that dies first in line after waiting long enough for several rewrites of its
/// queue cell (its cleanup never runs) delays the owner behind it by at most its queue
/// cell's waiter TTL (`min(waiter_ttl, lease_ttl)`) plus a hand-off, not by `lease_ttl`.
pub async fn dead_head_waiter_blocks_at_most_the_waiter_ttl<B: Backend>(backend: &B) {
    assert_dead_head_waiter_bound(backend, Duration::from_secs(2)).await;
}

/// Six owners on four lock ids at once: per lock, never two holders; everyone finishes.
pub async fn many_locks_many_owners<B: Backend>(backend: &B) {
    const LOCKS: usize = 4;
    const OWNERS: usize = 6;
    const ROUNDS: usize = 4;
    let ids: Vec<String> = (0..LOCKS)
        .map(|lock| backend.lock_id(&format!("many-{lock}")))
        .collect();
    let inside: Arc<Vec<AtomicUsize>> = Arc::new((0..LOCKS).map(|_| AtomicUsize::new(0)).collect());
    let tasks: Vec<_> = (0..OWNERS)
        .map(|owner| {
            let locker = contender(backend, owner as u64).locker;
            let (ids, inside) = (ids.clone(), inside.clone());
            tokio::spawn(async move {
                let mut taken = BTreeMap::new();
                for round in 0..ROUNDS {
                    let lock = (owner + round) % LOCKS;
                    let guard = must_lock(&locker, &ids[lock]).await;
                    assert_eq!(
                        inside[lock].fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders"
                    );
                    tokio::time::sleep(Duration::from_millis(5 + 3 * owner as u64)).await;
                    inside[lock].fetch_sub(1, Ordering::SeqCst);
                    *taken.entry(lock).or_insert(0) += 1;
                    must_release(guard).await;
                }
                taken.values().sum::<usize>()
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += join(task).await;
    }
    assert_eq!(total, OWNERS * ROUNDS);
}

/// Bad lock ids are refused with [`Error::InvalidLockId`] by every entry point, before any
/// storage request is made.
pub async fn bad_lock_ids_rejected<B: Backend>(backend: &B) {
    let a = contender(backend, 1);
    let locker = &a.locker;
    let too_long = "x".repeat(lock_core::LockId::MAX_LEN + 1);
    for bad in ["", too_long.as_str(), "line\nbreak", "nul\0", "tab\there"] {
        let invalid = |result: Result<(), Error>| {
            assert!(
                matches!(result, Err(Error::InvalidLockId { .. })),
                "{bad:?} gave {result:?}"
            );
        };
        invalid(locker.lock(bad).await.map(drop));
        invalid(locker.try_lock(bad).await.map(drop));
        invalid(
            locker
                .lock_timeout(bad, Duration::from_millis(10))
                .await
                .map(drop),
        );
        invalid(locker.inspect(bad, 10).await.map(drop));
    }
    assert_eq!(a.gate.requests(), 0, "a bad lock id reached storage");
    let longest = "y".repeat(lock_core::LockId::MAX_LEN);
    let fine = must_lock(
        locker,
        &backend.lock_id(&longest[..lock_core::LockId::MAX_LEN - 16]),
    )
    .await;
    must_release(fine).await;
}

/// `lock_timeout` on a held lock gives up after its timeout (within a poll interval) and
/// deletes its queue entry.
pub async fn lock_timeout_gives_up_and_leaves_no_entry<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("timeout");
    let a = contender(backend, 1).locker;
    let b = contender(backend, 2).locker;
    let guard = must_lock(&a, &lock_id).await;
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let gave_up = b
        .lock_timeout(lock_id.as_str(), timeout)
        .await
        .unwrap_or_else(|error| panic!("lock_timeout failed: {error}"));
    let took = started.elapsed();
    assert!(gave_up.is_none(), "got a held lock");
    assert!(took >= timeout, "gave up early, after {took:?}");
    assert!(
        took <= timeout + backend.slack(),
        "gave up late, after {took:?}"
    );
    assert_eq!(
        queued(backend, &a, &lock_id).await,
        held_entries(backend, guard.owner_id().as_str())
    );
    must_release(guard).await;
}

/// Each holder's fencing token is above the previous holder's, and inspection shows the
/// current holder's token as the fence.
pub async fn fencing_tokens_grow_with_each_holder<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("fence");
    let lockers: Vec<_> = (0..3).map(|seed| contender(backend, seed).locker).collect();
    let mut previous = None;
    for round in 0..9 {
        let locker = &lockers[round % lockers.len()];
        let guard = must_lock(locker, &lock_id).await;
        let token = guard.fencing_token().expect("fencing is on by default");
        assert!(previous < Some(token), "token {token} after {previous:?}");
        let report = locker
            .inspect(lock_id.as_str(), 10)
            .await
            .unwrap_or_else(|error| panic!("inspect failed: {error}"));
        assert_eq!(report.fence, Some(token));
        assert_eq!(report.holder.as_ref(), Some(guard.owner_id()));
        previous = Some(token);
        must_release(guard).await;
    }
}

/// A locker's first acquisition of a lock starts its queue reads at the head the holder's
/// main cell names, less the floor margin, rather than `poll.cold_lookback` back
/// (docs/algorithm.md, section "Queue floors and tombstones"): the head mark in the value survives the backend.
/// Both lockers have the fast path off: a lock they know nothing of would take it, whose
/// main cells name no head and whose first read starts the cold lookback back.
pub async fn a_new_lockers_first_read_starts_at_the_holders_head<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("floor-from-main");
    let (config, _, _) = config(backend);
    let slow_path = LockConfig {
        fast_path: false,
        ..backend.locker_config()
    };
    let (_, clock) = backend.client();
    let before_holder = clock.now().timestamp;
    let holder = Contender::with_config(backend, 1, slow_path.clone()).locker;
    let guard = must_lock(&holder, &lock_id).await;
    let newcomer = Contender::logged_with_config(backend, 2, slow_path);
    let waiter = spawn_lock::<B>(&newcomer.locker, &lock_id);
    let first_queue_read = async || {
        newcomer
            .gate
            .log()
            .into_iter()
            .find(|record| record.operation == Operation::Read && record.row == RowKind::Queue)
    };
    eventually(
        handoff(backend),
        "the newcomer reads the queue",
        async || first_queue_read().await.is_some(),
    )
    .await;
    let start = first_queue_read()
        .await
        .and_then(|record| record.read_start)
        .expect("a queue read starts at a floor");
    let start = QueueColumn::decode_timestamp(start.as_str())
        .unwrap_or_else(|error| panic!("the read's start {start:?}: {error}"));
    // The holder's queue time, by its clock, is at most the skew before ours.
    let margin = 2 * config.max_clock_skew + config.request_timeout;
    let lowest = before_holder - margin - config.max_clock_skew;
    assert!(
        start >= lowest,
        "the newcomer's first queue read started at {start:?}, before the holder's head \
         less the margin ({lowest:?} at the earliest): it did not take its floor from the \
         main row (the cold floor is {:?} back)",
        config.poll.cold_lookback
    );
    must_release(guard).await;
    let (next, _) = join(waiter).await;
    must_release(next).await;
}

/// A lock released with nobody queued lingers with its locker (docs/algorithm.md, section
/// "Lingering after a release"): that locker takes it again with two reads as the same
/// owner with the same token, nobody else can take it meanwhile, an owner that queues
/// while it lingers goes before the next retake, and a linger that runs out frees it.
pub async fn a_lingering_lock_is_retaken_and_yields_to_a_waiter<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("linger");
    let linger = backend
        .slack()
        .max(Duration::from_millis(200))
        .min(Duration::from_secs(1));
    let lingering = LockConfig {
        linger,
        ..backend.locker_config()
    };
    let holder = Contender::logged_with_config(backend, 1, lingering.clone());
    let other = Contender::with_config(backend, 2, lingering).locker;
    let first = must_lock(&holder.locker, &lock_id).await;
    let (owner, token) = (first.owner_id().clone(), first.fencing_token());
    must_release(first).await;
    let requests_before = holder.gate.log().len();
    let again = must_lock(&holder.locker, &lock_id).await;
    let retake: Vec<Operation> = holder.gate.log()[requests_before..]
        .iter()
        .map(|record| record.operation)
        .collect();
    assert_eq!(
        retake,
        [Operation::Read, Operation::Read],
        "a retake is two reads"
    );
    assert_eq!(again.owner_id(), &owner);
    assert_eq!(again.fencing_token(), token);
    assert!(must_try(&other, &lock_id).await.is_none(), "held again");
    must_release(again).await;
    // Another owner queues while the lock lingers; the holder's next retake sees it.
    let waiter = spawn_lock::<B>(&other, &lock_id);
    let queued_with_holder = 1 + held_entries(backend, "holder").len();
    eventually(handoff(backend), "the other owner queues", async || {
        queued(backend, &holder.locker, &lock_id).await.len() == queued_with_holder
    })
    .await;
    let mine = spawn_lock::<B>(&holder.locker, &lock_id);
    let (theirs, theirs_at) = join(waiter).await;
    assert_ne!(theirs.owner_id(), &owner);
    tokio::time::sleep(Duration::from_millis(20)).await;
    must_release(theirs).await;
    let (mine, mine_at) = join(mine).await;
    assert!(theirs_at < mine_at, "the owner queued meanwhile went first");
    // Taken after a wait, the lock is released at once; taken idle, it lingers.
    must_release(mine).await;
    let idle = must_lock(&holder.locker, &lock_id).await;
    let (_, clock) = backend.client();
    let released = clock.now().instant;
    must_release(idle).await;
    assert!(must_try(&other, &lock_id).await.is_none(), "lingering");
    eventually(
        linger + handoff(backend),
        "the linger runs out",
        async || match must_try(&other, &lock_id).await {
            Some(guard) => {
                must_release(guard).await;
                true
            }
            None => false,
        },
    )
    .await;
    assert!(
        clock.now().instant.saturating_duration_since(released) >= linger,
        "freed before the linger ran out"
    );
}

/// `lost()` never completes after a clean release, even long after the lease would have
/// run out.
pub async fn lost_never_fires_after_a_clean_release<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("clean-release");
    let (config, _, _) = config(backend);
    let a = contender(backend, 1).locker;
    let guard = must_lock(&a, &lock_id).await;
    let lost = guard.lost();
    must_release(guard).await;
    let fired = tokio::time::timeout(config.lease_ttl + Duration::from_secs(1), lost).await;
    assert!(fired.is_err(), "lost() fired after a clean release");
}

/// Soft locks started together on a free lock: at most one wins (Theorem 3), and whoever
/// wins holds alone.
pub async fn concurrent_try_locks_admit_at_most_one<B: Backend>(backend: &B) {
    let lock_id = backend.lock_id("soft-race");
    let lockers: Vec<_> = (0..5).map(|seed| contender(backend, seed).locker).collect();
    for _ in 0..5 {
        let tasks: Vec<_> = lockers
            .iter()
            .map(|locker| {
                let (locker, lock_id) = (locker.clone(), lock_id.clone());
                tokio::spawn(async move { must_try(&locker, &lock_id).await })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            if let Some(guard) = join(task).await {
                winners.push(guard);
            }
        }
        assert!(
            winners.len() <= 1,
            "{} soft locks won at once",
            winners.len()
        );
        for guard in winners {
            must_release(guard).await;
        }
    }
}

/// The storage checks of [`fair_lock::testing`] on a raw client of the backend: reads, column
/// order, limits, timestamps, tombstones and TTLs, as the lock needs them.
pub async fn storage_semantics<B: Backend>(backend: &B) {
    let (storage, clock) = backend.client();
    let prefix = backend.lock_id("storage");
    let checks = fair_lock::testing::StorageChecks::new(prefix, clock.now().timestamp)
        .unwrap_or_else(|error| panic!("{}: {error}", backend.name()));
    if let Err(failure) = checks.run(&storage).await {
        panic!("{}: {failure}", backend.name());
    }
}
