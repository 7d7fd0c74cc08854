//! The lease keeper: one task per locker that starts each held lock's lease task only when
//! its first renewal is due.
//!
//! Most locks are released long before `renew_every`; for them a task of their own (spawned,
//! polled, woken to release, torn down) cost more than the whole acquisition on a fast
//! backend. Such a lease waits here instead, and its guard releases it inline. A lease still
//! held when its renewal comes is handed its own task, as before.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use tokio::sync::Notify;

use lock_core::error::Error;
use lock_core::time::MonotonicTime;

use super::clock::Clock;
use super::tasks::Tasks;

/// A held lock's lease, parked until `start` or `take_release`, whichever comes first.
pub(crate) trait ParkedLease: Send + Sync {
    /// Spawns the lease's task, unless its guard took it back first.
    fn start(&self);

    /// Takes the lease back, if its task has not started: the future that releases it.
    fn take_release(&self) -> Option<BoxFuture<'static, Result<(), Error>>>;

    /// Takes the lease back for [`super::Locker::shutdown`], if its task has not started:
    /// the future that releases it and tells its guard the lock is gone.
    fn shut_down(&self) -> Option<BoxFuture<'static, Result<(), Error>>>;
}

/// Where a parked lease waits: by the instant its task must start.
pub(crate) type KeeperKey = (MonotonicTime, u64);

/// A locker's parked leases, and whether the task that starts them is running.
#[derive(Default)]
pub(crate) struct LeaseKeeper {
    state: Mutex<KeeperState>,
    /// Told when a lease parks ahead of all the others.
    earlier: Notify,
}

#[derive(Default)]
struct KeeperState {
    parked: BTreeMap<KeeperKey, Arc<dyn ParkedLease>>,
    next_key: u64,
    running: bool,
    /// When the keeper task wakes next (it looks at the parked leases then).
    wakes_at: Option<MonotonicTime>,
}

impl LeaseKeeper {
    /// Parks `lease` until `until` (of `clock`), spawning the keeper task if none runs, or
    /// waking it if it sleeps past `until`. (Leases parked in turn are due in turn, so the
    /// keeper seldom needs waking: it wakes when the lease it slept for was due, released or
    /// not, and sleeps on until the next.)
    pub(crate) fn park(
        self: &Arc<Self>,
        until: MonotonicTime,
        lease: Arc<dyn ParkedLease>,
        clock: &Arc<dyn Clock>,
        tasks: &Arc<Tasks>,
    ) -> KeeperKey {
        let mut state = self.lock();
        let key = (until, state.next_key);
        state.next_key += 1;
        state.parked.insert(key, lease);
        if !state.running {
            state.running = true;
            state.wakes_at = None;
            tasks.spawn(keep(self.clone(), clock.clone()));
        } else if state.wakes_at.is_some_and(|wakes_at| until < wakes_at) {
            self.earlier.notify_one();
        }
        key
    }

    /// Takes every parked lease, and wakes the keeper task so that it ends.
    pub(crate) fn take_all(&self) -> Vec<Arc<dyn ParkedLease>> {
        let parked = std::mem::take(&mut self.lock().parked);
        self.earlier.notify_one();
        parked.into_values().collect()
    }

    /// Forgets a parked lease its guard took back.
    pub(crate) fn forget(&self, key: KeeperKey) {
        self.lock().parked.remove(&key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeeperState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts each parked lease when it is due; ends when none is left.
async fn keep(keeper: Arc<LeaseKeeper>, clock: Arc<dyn Clock>) {
    let mut cancelled = Cancelled(Some(&keeper));
    loop {
        let next = {
            let mut state = keeper.lock();
            let now = clock.now().instant;
            loop {
                match state.parked.first_entry() {
                    Some(due) if due.key().0 <= now => due.remove().start(),
                    Some(later) => {
                        let next = later.key().0;
                        state.wakes_at = Some(next);
                        break next;
                    }
                    None => {
                        state.running = false;
                        cancelled.0 = None;
                        return;
                    }
                }
            }
        };
        let pause = next.saturating_duration_since(clock.now().instant);
        tokio::select! {
            () = super::clock::sleep_for(&*clock, pause) => {}
            () = keeper.earlier.notified() => {}
        }
    }
}

/// Marks the keeper task as gone if it is dropped before it ends by itself (its runtime
/// shut down), so that the next lease to park spawns a new one.
struct Cancelled<'a>(Option<&'a LeaseKeeper>);

impl Drop for Cancelled<'_> {
    fn drop(&mut self) {
        if let Some(keeper) = self.0 {
            keeper.lock().running = false;
        }
    }
}
