//! Released locks that linger with their locker for a quick retake
//! ([`crate::LockConfig::linger`], [`lock_core::machine::Retake`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use lock_core::id::{LockId, OwnerId};
use lock_core::machine::{FencingToken, Lease};
use lock_core::storage::LockStorage;

use super::locker::Shared;
use super::seats::SeatTicket;
use super::wake::WakeRegistration;

/// A released lease whose cells are still in storage, and what its guard knew.
pub(crate) struct Lingering {
    pub(crate) lease: Lease,
    pub(crate) seat: Option<SeatTicket>,
    pub(crate) owner: OwnerId,
    pub(crate) fencing_token: Option<FencingToken>,
    /// Where a [`lock_core::hint::HintKind::Wanted`] hint reaches the owner, with wake-up hints
    /// on: it ends the linger at once.
    pub(crate) hints: Option<WakeRegistration>,
}

/// A locker's lingering leases, at most one per lock (its tasks take a lock one at a time).
#[derive(Default)]
pub(crate) struct Lingers {
    state: Mutex<LingerState>,
}

#[derive(Default)]
struct LingerState {
    by_lock: BTreeMap<LockId, (u64, Lingering)>,
    next_generation: u64,
}

impl Lingers {
    /// Keeps `lingering` until `linger` has passed, or until an owner waiting behind it
    /// says so ([`lock_core::hint::HintKind::Wanted`]), then deletes its cells, unless
    /// [`Lingers::take`] took it first.
    pub(crate) fn keep<S: LockStorage>(shared: &Arc<Shared<S>>, lingering: Lingering) {
        let lock_id = lingering.lease.lock_id().clone();
        let wanted = lingering.hints.as_ref().map(WakeRegistration::wanted);
        let generation = {
            let mut state = shared.lingers.lock();
            let generation = state.next_generation;
            state.next_generation += 1;
            let previous = state
                .by_lock
                .insert(lock_id.clone(), (generation, lingering));
            if let Some((_, previous)) = previous {
                spawn_end(shared, previous);
            }
            generation
        };
        let shared = shared.clone();
        let tasks = shared.tasks.clone();
        tasks.spawn(async move {
            let linger = shared.config.config().linger;
            let lingered = super::clock::sleep_for(&*shared.clock, linger);
            let wanted = async {
                match &wanted {
                    Some(wanted) => wanted.arrived().await,
                    None => std::future::pending().await,
                }
            };
            // At a shutdown, Locker::shutdown ends the lingering lease itself.
            tokio::select! {
                biased;
                () = shared.tasks.closed() => return,
                () = wanted => {}
                () = lingered => {}
            }
            let expired = {
                let mut state = shared.lingers.lock();
                match state.by_lock.get(&lock_id) {
                    Some((kept, _)) if *kept == generation => state.by_lock.remove(&lock_id),
                    _ => None,
                }
            };
            if let Some((_, lingering)) = expired {
                end(&shared, lingering).await;
            }
        });
    }

    /// Takes the lingering lease of `lock_id`, if there is one.
    pub(crate) fn take(&self, lock_id: &LockId) -> Option<Lingering> {
        self.lock()
            .by_lock
            .remove(lock_id)
            .map(|(_, lingering)| lingering)
    }

    /// Takes every lingering lease.
    pub(crate) fn take_all(&self) -> Vec<Lingering> {
        std::mem::take(&mut self.lock().by_lock)
            .into_values()
            .map(|(_, lingering)| lingering)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LingerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Deletes a lingering lease's cells and gives its seat back.
pub(crate) async fn end<S: LockStorage>(shared: &Shared<S>, lingering: Lingering) {
    let Lingering {
        mut lease,
        seat,
        hints,
        ..
    } = lingering;
    // Asked to let go: the owner that asked waits, and the release's read hints it.
    if hints.as_ref().is_some_and(WakeRegistration::is_wanted) {
        lease.note_waiter();
    }
    // Its user saw the release succeed; a failed delete only leaves the cells to their TTL.
    let _ = super::guard::delete_cells(shared, lease, seat, None).await;
}

/// [`end`] on a task of its own.
pub(crate) fn spawn_end<S: LockStorage>(shared: &Arc<Shared<S>>, lingering: Lingering) {
    if tokio::runtime::Handle::try_current().is_ok() {
        let shared = shared.clone();
        let tasks = shared.tasks.clone();
        tasks.spawn(async move { end(&shared, lingering).await });
    }
}
