//! A job that runs at most once per interval across a fleet.

use std::time::Duration;

use fair_lock::{Clock, LockGuard, Locker};
use lock_core::{FencingToken, IntoLockId, LockId, LockStorage};

use crate::Error;
use crate::support::sleep;

/// How long a [`ScheduledJob`] keeps its lock (ShedLock's "lock at least for" and "lock at
/// most for").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JobLimits {
    /// How long the lock is kept from the job's start even if the job ends sooner, so that
    /// an instance whose schedule fires a little later (its clock a little behind, its
    /// timer late) finds the lock held and skips the run instead of running the job a
    /// second time. Make it longer than the clocks of the instances can disagree and
    /// shorter than the interval.
    pub at_least_for: Duration,
    /// How long the job may run holding the lock. A job still running then is stopped (its
    /// future dropped at its current `.await`) and the lock released, so that a hung job in
    /// a live process does not keep every later run from starting. (A process that dies
    /// needs no limit: its lease expires after `lease_ttl`.) At least `at_least_for`.
    pub at_most_for: Duration,
}

impl JobLimits {
    /// Checks that the limits can be kept: `at_most_for` above zero and at least
    /// `at_least_for`.
    pub fn validate(&self) -> Result<(), Error> {
        if self.at_most_for.is_zero() {
            return Err(Error::InvalidLimits {
                reason: "at_most_for is zero, so no job could ever run; give the longest the \
                         job may take"
                    .to_owned(),
            });
        }
        if self.at_least_for > self.at_most_for {
            return Err(Error::InvalidLimits {
                reason: format!(
                    "at_least_for ({:?}) is longer than at_most_for ({:?}); the lock cannot be \
                     kept longer than the job may hold it",
                    self.at_least_for, self.at_most_for
                ),
            });
        }
        Ok(())
    }
}

/// What one [`ScheduledJob::run_once`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobRun<T> {
    /// This instance took the lock and ran the job to its end.
    Ran {
        /// What the job returned.
        value: T,
        /// The lock's fencing token for this run, if the locker takes tokens (lock-core's
        /// default): pass it with every write the job makes, so that storage can refuse a
        /// write from an earlier run that outlived its lock.
        fencing_token: Option<FencingToken>,
        /// Whether the lock was kept until [`JobLimits::at_least_for`] after the start.
        /// `false` if the lease was lost after the job ended: another instance may then
        /// have run the job again within that time.
        kept_at_least_for: bool,
    },
    /// Another instance held the lock, or was taking it: the job did not run here.
    Skipped,
}

/// A job that runs at most once per interval across every process that schedules it: each
/// instance calls [`ScheduledJob::run_once`] (or [`ScheduledJob::run_at_next`]) on its own
/// schedule, and only the one that takes the lock runs the job; the others skip the run.
///
/// It is the recipe of Java's ShedLock on the fair lock: the lock is taken with
/// [`Locker::try_lock`] (never waiting for another instance), kept at least
/// [`JobLimits::at_least_for`] from the start of the job, and at most
/// [`JobLimits::at_most_for`]. The job gets the [`LockGuard`], whose fencing token it
/// should pass with its writes, and is stopped if the lease is lost while it runs.
///
/// ```
/// use std::time::Duration;
/// use lock_core::LockStorage;
/// use fair_lock::Locker;
/// use lock_recipes::{Error, JobLimits, JobRun, ScheduledJob};
///
/// async fn send_the_daily_report<S: LockStorage>(locker: Locker<S>) -> Result<(), Error> {
///     let limits = JobLimits {
///         at_least_for: Duration::from_secs(30),
///         at_most_for: Duration::from_secs(600),
///     };
///     let job = ScheduledJob::new(locker, "jobs:daily-report", limits)?;
///     loop {
///         let run = job
///             .run_at_next(Duration::from_secs(24 * 3600), async |guard| {
///                 // write the report, passing guard.fencing_token() with every write
///                 guard.fencing_token()
///             })
///             .await?;
///         if let JobRun::Skipped = run {
///             // another instance sent it
///         }
///     }
/// }
/// ```
#[derive(Clone, Debug)]
pub struct ScheduledJob<S: LockStorage> {
    locker: Locker<S>,
    lock_id: LockId,
    limits: JobLimits,
}

/// How a job's run under the lock ended.
enum Stop<T> {
    Done(T),
    Lost,
    Overran,
}

impl<S: LockStorage> ScheduledJob<S> {
    /// A job under the lock `lock_id` (one lock per job), taken with `locker`, kept within
    /// `limits`. Fails on a bad lock id or limits that cannot be kept.
    pub fn new(
        locker: Locker<S>,
        lock_id: impl IntoLockId,
        limits: JobLimits,
    ) -> Result<Self, Error> {
        limits.validate()?;
        Ok(ScheduledJob {
            locker,
            lock_id: lock_id.into_lock_id()?,
            limits,
        })
    }

    /// The job's lock.
    pub fn lock_id(&self) -> &LockId {
        &self.lock_id
    }

    /// The job's limits.
    pub fn limits(&self) -> JobLimits {
        self.limits
    }

    /// Runs the job now if no other instance holds its lock: takes the lock without
    /// waiting, runs `job` with the guard, keeps the lock until
    /// [`JobLimits::at_least_for`] after the start, and releases it.
    ///
    /// Returns [`JobRun::Skipped`] if another instance held the lock or was taking it;
    /// [`Error::Overran`] if the job was still running after [`JobLimits::at_most_for`]
    /// (it is stopped and the lock released); [`lock_core::Error::LockLost`] (as
    /// [`Error::Lock`]) if the lease was lost while the job ran (the job is stopped: another
    /// instance may run it now); other lock errors as they come.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the job's future is dropped with it and the lock is released in the
    /// background, as for a dropped [`LockGuard`].
    pub async fn run_once<T>(
        &self,
        job: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<JobRun<T>, Error> {
        let Some(guard) = self.locker.try_lock(self.lock_id.clone()).await? else {
            return Ok(JobRun::Skipped);
        };
        let clock = self.locker.clock().clone();
        let started = clock.now().instant;
        let fencing_token = guard.fencing_token();
        let stop = {
            let lost = guard.lost();
            let job = job(&guard);
            tokio::select! {
                biased;
                () = lost => Stop::Lost,
                () = sleep(&*clock, self.limits.at_most_for) => Stop::Overran,
                value = job => Stop::Done(value),
            }
        };
        let value = match stop {
            Stop::Done(value) => value,
            Stop::Lost => {
                // The lease is gone: the release only deletes what may be left of our
                // cells, and reports the loss, which is the error to give.
                guard.release().await?;
                return Err(lock_core::Error::LockLost {
                    lock_id: self.lock_id.clone(),
                    reason: "the lease was lost while the job ran; the job was stopped".to_owned(),
                }
                .into());
            }
            Stop::Overran => {
                guard.release().await?;
                return Err(Error::Overran {
                    lock_id: self.lock_id.clone(),
                    at_most_for: self.limits.at_most_for,
                });
            }
        };
        let keep =
            (started + self.limits.at_least_for).saturating_duration_since(clock.now().instant);
        let kept_at_least_for = tokio::select! {
            biased;
            () = guard.lost() => false,
            () = sleep(&*clock, keep) => true,
        };
        match guard.release().await {
            Ok(()) => {}
            Err(lock_core::Error::LockLost { .. }) if !kept_at_least_for => {}
            Err(error) => return Err(error.into()),
        }
        Ok(JobRun::Ran {
            value,
            fencing_token,
            kept_at_least_for,
        })
    }

    /// Waits until the locker's wall clock reaches the next multiple of `interval` (counted
    /// from the Unix epoch, so that every instance aims at the same moments), then does
    /// [`ScheduledJob::run_once`]. Call it in a loop for a job every `interval`.
    pub async fn run_at_next<T>(
        &self,
        interval: Duration,
        job: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<JobRun<T>, Error> {
        let clock = self.locker.clock().clone();
        sleep(&*clock, until_next(&*clock, interval)?).await;
        self.run_once(job).await
    }
}

/// How long until `clock`'s wall time reaches the next multiple of `interval` after now.
fn until_next(clock: &dyn Clock, interval: Duration) -> Result<Duration, Error> {
    let interval_micros = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
    if interval_micros == 0 {
        return Err(Error::InvalidLimits {
            reason: "the interval is shorter than a microsecond; give how often the job runs"
                .to_owned(),
        });
    }
    let now = clock.now().timestamp.as_micros();
    let into_interval = now % interval_micros;
    Ok(Duration::from_micros(interval_micros - into_interval))
}

#[cfg(test)]
mod tests {
    use lock_core::{MonotonicTime, Now, Timestamp};

    use super::*;

    struct At(u64);

    impl Clock for At {
        fn now(&self) -> Now {
            Now::new(
                MonotonicTime::from_micros(0),
                Timestamp::from_micros(self.0),
            )
        }
    }

    #[test]
    fn the_next_run_is_at_the_next_multiple_of_the_interval() {
        let minute = Duration::from_secs(60);
        assert_eq!(until_next(&At(0), minute).unwrap(), minute);
        assert_eq!(
            until_next(&At(59_999_999), minute).unwrap(),
            Duration::from_micros(1)
        );
        assert_eq!(
            until_next(&At(90_000_000), minute).unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(until_next(&At(120_000_000), minute).unwrap(), minute);
        assert!(matches!(
            until_next(&At(5), Duration::from_nanos(10)),
            Err(Error::InvalidLimits { .. })
        ));
    }

    #[test]
    fn limits_that_cannot_be_kept_are_refused() {
        for limits in [
            JobLimits {
                at_least_for: Duration::ZERO,
                at_most_for: Duration::ZERO,
            },
            JobLimits {
                at_least_for: Duration::from_secs(2),
                at_most_for: Duration::from_secs(1),
            },
        ] {
            assert!(
                matches!(limits.validate(), Err(Error::InvalidLimits { .. })),
                "{limits:?}"
            );
        }
        JobLimits {
            at_least_for: Duration::from_secs(1),
            at_most_for: Duration::from_secs(1),
        }
        .validate()
        .unwrap();
    }
}
