//! Sleeps that end within a fraction of a millisecond of their deadline.
//!
//! Tokio's timer ticks every millisecond and wakes a sleeper up to two milliseconds after
//! its deadline (0.95 ms late on average, measured on loopback). A waiter's pause is timed
//! to the queue's hand-offs, which take a few round trips: a fraction of a millisecond on a
//! fast network. So the driver races Tokio's sleep against this timer: one thread per
//! process, started on first use, that keeps the deadlines in order and parks until the
//! earliest (the operating system wakes a parked thread within tens of microseconds).
//!
//! The timer only wakes the sleeping task; the sleep ends early only if the driver's clock
//! has reached the deadline by then. It is used only with a clock that follows real time
//! ([`super::Clock::follows_real_time`]): on Tokio's paused time its real-time wakes would
//! come at moments a run cannot replay.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// The deadlines waited for, each with the task to wake.
#[derive(Default)]
struct Sleepers {
    by_deadline: BTreeMap<(Instant, u64), Waker>,
    next_key: u64,
}

/// The timer thread's shared state.
#[derive(Default)]
struct FineTimer {
    sleepers: Mutex<Sleepers>,
    earliest_changed: Condvar,
}

impl FineTimer {
    /// The process's timer, its thread started on first use; none if the thread could not
    /// be started (the driver then sleeps on Tokio's timer alone).
    fn get() -> Option<&'static FineTimer> {
        static TIMER: OnceLock<Option<Arc<FineTimer>>> = OnceLock::new();
        TIMER
            .get_or_init(|| {
                let timer = Arc::new(FineTimer::default());
                let worker = Arc::clone(&timer);
                std::thread::Builder::new()
                    .name("lock-core-fine-timer".to_owned())
                    .spawn(move || worker.run())
                    .ok()
                    .map(|_| timer)
            })
            .as_deref()
    }

    fn sleepers(&self) -> MutexGuard<'_, Sleepers> {
        self.sleepers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes each sleeper whose deadline has passed (outside the lock, so that a task
    /// polled at once by its waker can re-register), then waits for the next deadline or
    /// for an earlier one to be added. Never returns.
    fn run(&self) {
        let mut due = Vec::new();
        loop {
            let mut sleepers = self.sleepers();
            let now = Instant::now();
            while let Some(entry) = sleepers.by_deadline.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            if due.is_empty() {
                // Waiting releases the lock atomically, so an earlier deadline added from
                // now on is not missed.
                let next = sleepers
                    .by_deadline
                    .keys()
                    .next()
                    .map(|&(deadline, _)| deadline);
                drop(match next {
                    Some(deadline) => {
                        self.earliest_changed
                            .wait_timeout(sleepers, deadline.saturating_duration_since(now))
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                    None => self
                        .earliest_changed
                        .wait(sleepers)
                        .unwrap_or_else(PoisonError::into_inner),
                });
                continue;
            }
            drop(sleepers);
            due.drain(..).for_each(Waker::wake);
        }
    }

    /// Wakes `waker` at `deadline`; returns the key that [`FineTimer::cancel`] takes.
    fn add(&self, deadline: Instant, waker: Waker) -> (Instant, u64) {
        let mut sleepers = self.sleepers();
        let key = (deadline, sleepers.next_key);
        sleepers.next_key = sleepers.next_key.wrapping_add(1);
        let earliest = sleepers
            .by_deadline
            .keys()
            .next()
            .is_none_or(|first| key < *first);
        sleepers.by_deadline.insert(key, waker);
        if earliest {
            self.earliest_changed.notify_one();
        }
        key
    }

    fn cancel(&self, key: (Instant, u64)) {
        self.sleepers().by_deadline.remove(&key);
    }
}

/// A future ready at `deadline` by the process's clock, or never if the timer thread could
/// not be started (the caller races it against Tokio's timer).
pub(crate) struct FineSleep {
    deadline: Instant,
    /// This sleep's entry in the timer, while it has one.
    key: Option<(Instant, u64)>,
}

impl FineSleep {
    pub(crate) fn until(deadline: Instant) -> Self {
        FineSleep {
            deadline,
            key: None,
        }
    }

    /// Takes this sleep's entry, if any, out of the timer.
    fn unregister(&mut self) {
        if let (Some(key), Some(timer)) = (self.key.take(), FineTimer::get()) {
            timer.cancel(key);
        }
    }
}

impl Future for FineSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.unregister();
        if Instant::now() >= this.deadline {
            return Poll::Ready(());
        }
        if let Some(timer) = FineTimer::get() {
            this.key = Some(timer.add(this.deadline, cx.waker().clone()));
        }
        Poll::Pending
    }
}

impl Drop for FineSleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;
    use std::time::Duration;

    use super::*;

    fn registered(key: (Instant, u64)) -> bool {
        FineTimer::get()
            .expect("the timer thread starts")
            .sleepers()
            .by_deadline
            .contains_key(&key)
    }

    /// Sleeps of several lengths, waited for together on one task, each end at or after
    /// its own deadline (and do end: the test times out otherwise).
    #[tokio::test]
    async fn sleeps_end_at_or_after_their_deadlines() {
        let start = Instant::now();
        let deadlines: Vec<Instant> = [900, 100, 2_500, 400, 100]
            .into_iter()
            .map(|micros| start + Duration::from_micros(micros))
            .collect();
        let sleeps = deadlines.iter().map(|&deadline| async move {
            FineSleep::until(deadline).await;
            (deadline, Instant::now())
        });
        let ended =
            tokio::time::timeout(Duration::from_secs(10), futures::future::join_all(sleeps))
                .await
                .expect("every sleep ends");
        for (deadline, at) in ended {
            assert!(at >= deadline, "ended {:?} early", deadline - at);
        }
    }

    /// A sleep dropped before its deadline takes its entry out of the timer, and one
    /// polled again re-registers under a new key rather than piling up entries.
    #[test]
    fn a_dropped_or_repolled_sleep_leaves_no_entry_behind() {
        let mut context = Context::from_waker(Waker::noop());
        let mut sleep = Box::pin(FineSleep::until(Instant::now() + Duration::from_secs(60)));
        assert_eq!(sleep.as_mut().poll(&mut context), Poll::Pending);
        let first = sleep.key.expect("registered on its first poll");
        assert!(registered(first));
        assert_eq!(sleep.as_mut().poll(&mut context), Poll::Pending);
        let second = sleep.key.expect("still registered");
        assert!(!registered(first));
        assert!(registered(second));
        drop(sleep);
        assert!(!registered(second));
    }

    /// A deadline already past is ready at once, without the timer.
    #[test]
    fn a_past_deadline_is_ready_at_once() {
        let mut context = Context::from_waker(Waker::noop());
        let mut sleep = Box::pin(FineSleep::until(Instant::now()));
        assert_eq!(sleep.as_mut().poll(&mut context), Poll::Ready(()));
        assert!(sleep.key.is_none());
    }
}
