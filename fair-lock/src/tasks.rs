//! A locker's background tasks, counted, and the signal that shuts the locker down
//! ([`super::Locker::shutdown`]).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, watch};

/// Counts a locker's background tasks (lease tasks, the lease keeper, linger timers,
/// releases and clean-ups run in the background) and carries its shutdown signal.
#[derive(Debug)]
pub(crate) struct Tasks {
    running: Mutex<usize>,
    /// Told when the last counted task ends.
    idle: Notify,
    closed: watch::Sender<bool>,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks {
            running: Mutex::new(0),
            idle: Notify::new(),
            closed: watch::Sender::new(false),
        }
    }
}

/// One counted task: dropped when the task ends (or its runtime drops it).
#[derive(Debug)]
pub(crate) struct TaskToken(Arc<Tasks>);

impl Drop for TaskToken {
    fn drop(&mut self) {
        let mut running = self.0.running();
        *running = running.saturating_sub(1);
        if *running == 0 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Tasks {
    fn running(&self) -> std::sync::MutexGuard<'_, usize> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more task until the token is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> TaskToken {
        *self.running() += 1;
        TaskToken(self.clone())
    }

    /// Spawns `future` on the current runtime, counted.
    pub(crate) fn spawn(self: &Arc<Self>, future: impl Future<Output = ()> + Send + 'static) {
        let token = self.enter();
        tokio::spawn(async move {
            future.await;
            drop(token);
        });
    }

    /// Waits until no counted task runs.
    pub(crate) async fn all_ended(&self) {
        loop {
            let idle = self.idle.notified();
            let mut idle = std::pin::pin!(idle);
            idle.as_mut().enable();
            if *self.running() == 0 {
                return;
            }
            idle.await;
        }
    }

    /// How many counted tasks run (for tests).
    #[cfg(test)]
    pub(crate) fn running_count(&self) -> usize {
        *self.running()
    }

    /// Shuts the locker down: every [`Tasks::closed`] future completes.
    pub(crate) fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Whether the locker has been shut down.
    pub(crate) fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Completes once the locker is shut down.
    pub(crate) fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut closed = self.closed.subscribe();
        async move {
            // The sender lives as long as the locker; without it, nothing is left to shut.
            let _ = closed.wait_for(|closed| *closed).await;
        }
    }
}
