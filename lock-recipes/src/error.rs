//! The crate's error.

use std::time::Duration;

use lock_core::LockId;

/// What went wrong with a recipe.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock failed: storage errors, a lost lease, a bad lock id (see
    /// [`lock_core::Error`] for what to do about each).
    #[error(transparent)]
    Lock(#[from] lock_core::Error),
    /// The limits given to [`crate::ScheduledJob::new`] cannot be kept.
    #[error("invalid job limits: {reason}")]
    InvalidLimits {
        /// What is wrong, and what to change.
        reason: String,
    },
    /// The job was still running when [`crate::JobLimits::at_most_for`] had passed since
    /// it started: it was stopped (its future dropped at its current `.await`) and the lock
    /// released, so that the next run can start. Raise `at_most_for` if the job needs
    /// longer, or find out why it hung.
    #[error(
        "the job under lock {lock_id} was still running after at_most_for ({at_most_for:?}); \
         it was stopped and the lock released"
    )]
    Overran {
        /// The job's lock.
        lock_id: LockId,
        /// The limit it ran into.
        at_most_for: Duration,
    },
}
