//! Local lines: the tasks of one locker that want the same lock wait for it in the process,
//! in order, and only the first of them stands in the distributed queue.
//!
//! Fifty tasks of one process waiting for one lock would otherwise write fifty queue cells
//! and poll the queue fifty times over, for a lock only one of them can hold. With a local
//! line the process costs the storage what one waiter costs.
//!
//! **Fairness between processes.** The task at the head of a line takes the lock through
//! the distributed queue like any other owner. When it releases (its cells deleted), the
//! next task of the line starts a new acquisition and enqueues behind every owner of
//! another process that enqueued meanwhile. So a busy process gets one turn per pass of the
//! distributed queue, never several in a row while others wait: it cannot starve them.
//! Within the process, tasks take their turns in the order they called (Tokio's semaphore
//! is first in, first out).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use lock_core::id::LockId;

/// A locker's local lines, by lock id; shared by its clones.
#[derive(Debug, Default)]
pub(crate) struct LocalLines {
    lines: Mutex<HashMap<LockId, Line>>,
}

/// One lock's line: its one turn, and the Tokio task that took it, while that task's
/// acquisition or guard lives.
#[derive(Debug)]
struct Line {
    turn: Arc<Semaphore>,
    claimed_by: Option<(tokio::task::Id, Weak<()>)>,
}

/// Marks the head of a line as the task that took it, until dropped: kept by the
/// acquisition and then by its guard, so that the same task asking for the lock again is
/// told instead of waiting for itself ([`LocalLines::claimed_by_this_task`]).
#[derive(Debug)]
pub(crate) struct TaskClaim {
    _alive: Arc<()>,
}

/// The head of a local line: held from the start of a distributed acquisition until the
/// lock it took is released (or the acquisition ended without it). Dropping it lets the next
/// task of the line go.
#[derive(Debug)]
pub(crate) struct LocalTurn {
    permit: Option<OwnedSemaphorePermit>,
    lines: Arc<LocalLines>,
    lock_id: LockId,
}

impl LocalLines {
    fn lines(&self) -> MutexGuard<'_, HashMap<LockId, Line>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn line(&self, lock_id: &LockId) -> Arc<Semaphore> {
        self.lines()
            .entry(lock_id.clone())
            .or_insert_with(|| Line {
                turn: Arc::new(Semaphore::new(1)),
                claimed_by: None,
            })
            .turn
            .clone()
    }

    /// Whether the task calling holds the head of `lock_id`'s line, through an acquisition
    /// or a guard still alive: waiting for the lock, it would wait for itself. Always false
    /// outside a Tokio task.
    pub(crate) fn claimed_by_this_task(&self, lock_id: &LockId) -> bool {
        let Some(this_task) = tokio::task::try_id() else {
            return false;
        };
        self.lines().get(lock_id).is_some_and(|line| {
            line.claimed_by
                .as_ref()
                .is_some_and(|(task, alive)| *task == this_task && alive.strong_count() > 0)
        })
    }

    /// Claims the head of `lock_id`'s line, which `_turn` holds, for the task calling (if
    /// it runs on a Tokio task), until the claim is dropped.
    pub(crate) fn claim(&self, lock_id: &LockId, _turn: &LocalTurn) -> Option<TaskClaim> {
        let task = tokio::task::try_id()?;
        let claim = Arc::new(());
        if let Some(line) = self.lines().get_mut(lock_id) {
            line.claimed_by = Some((task, Arc::downgrade(&claim)));
        }
        Some(TaskClaim { _alive: claim })
    }

    /// Waits for this task's turn on `lock_id`.
    pub(crate) async fn join(self: &Arc<Self>, lock_id: &LockId) -> LocalTurn {
        let line = self.line(lock_id);
        // The semaphore is never closed, so acquiring only fails if it were.
        let permit = line.acquire_owned().await.ok();
        self.turn(lock_id, permit)
    }

    /// This task's turn on `lock_id` if nobody of this locker holds or waits for it.
    pub(crate) fn try_join(self: &Arc<Self>, lock_id: &LockId) -> Option<LocalTurn> {
        let line = self.line(lock_id);
        match line.try_acquire_owned() {
            Ok(permit) => Some(self.turn(lock_id, Some(permit))),
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => {
                self.forget_if_idle(lock_id);
                None
            }
        }
    }

    fn turn(self: &Arc<Self>, lock_id: &LockId, permit: Option<OwnedSemaphorePermit>) -> LocalTurn {
        LocalTurn {
            permit,
            lines: self.clone(),
            lock_id: lock_id.clone(),
        }
    }

    /// Drops the line of `lock_id` once nobody holds or waits for it, so that a locker
    /// that touches many locks keeps no memory for the idle ones.
    fn forget_if_idle(&self, lock_id: &LockId) {
        let mut lines = self.lines();
        // Only the map's own reference left: no holder, no waiter.
        if lines
            .get(lock_id)
            .is_some_and(|line| Arc::strong_count(&line.turn) == 1)
        {
            lines.remove(lock_id);
        }
    }

    /// How many lock ids have a line (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lines().len()
    }
}

impl Drop for LocalTurn {
    fn drop(&mut self) {
        if let Some(line) = self.lines.lines().get_mut(&self.lock_id) {
            line.claimed_by = None;
        }
        drop(self.permit.take());
        self.lines.forget_if_idle(&self.lock_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_take_their_turns_in_order_and_idle_lines_are_forgotten() {
        crate::watchdog::in_virtual_time(
            "tasks_take_their_turns_in_order_and_idle_lines_are_forgotten",
            async {
                let lines = Arc::new(LocalLines::default());
                let lock = LockId::new("l").unwrap();
                let first = lines.join(&lock).await;
                assert!(lines.try_join(&lock).is_none(), "the line is taken");
                let order = Arc::new(Mutex::new(Vec::new()));
                let mut waiters = Vec::new();
                for index in 0..3 {
                    let (lines, lock, order) = (lines.clone(), lock.clone(), order.clone());
                    waiters.push(tokio::spawn(async move {
                        let turn = lines.join(&lock).await;
                        order.lock().unwrap().push(index);
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        drop(turn);
                    }));
                    tokio::task::yield_now().await;
                }
                drop(first);
                for waiter in waiters {
                    waiter.await.unwrap();
                }
                assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
                assert_eq!(lines.len(), 0, "an idle line is forgotten");
                let other = LockId::new("m").unwrap();
                let alone = lines.try_join(&other).expect("a free line");
                assert_eq!(lines.len(), 1);
                drop(alone);
                assert_eq!(lines.len(), 0);
            },
        );
    }
}
