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
    /// A recipe cannot work with the configuration it was given: the locker's (an
    /// [`crate::Election`] and a [`crate::WorkQueue`] need `fencing: true`) or its own
    /// ([`crate::WorkQueueConfig::validate`]).
    #[error("invalid configuration: `{field}` {reason}")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// What is wrong, and what would be accepted.
        reason: String,
    },
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
    /// A work item was refused before anything was written: its payload is larger than
    /// [`crate::MAX_PAYLOAD_LEN`].
    #[error(
        "invalid work item: the payload is {len} bytes, at most {max} are accepted; store large \
         data elsewhere and enqueue its key",
        max = crate::MAX_PAYLOAD_LEN
    )]
    PayloadTooLarge {
        /// The payload's length in bytes.
        len: usize,
    },
    /// A work queue's name is longer than [`crate::MAX_QUEUE_NAME_LEN`] bytes: an item's
    /// lock id is the name and the item's id, and lock ids have at most
    /// [`LockId::MAX_LEN`] bytes.
    #[error(
        "invalid work queue name {name:?}: it is {len} bytes, at most {max} are accepted",
        max = crate::MAX_QUEUE_NAME_LEN
    )]
    QueueNameTooLong {
        /// The start of the rejected name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The work queue handle was closed ([`crate::WorkQueue::close`]): it claims nothing
    /// more.
    #[error("work queue {queue} is closed: it claims nothing more; stop the worker")]
    WorkQueueClosed {
        /// The queue's name.
        queue: LockId,
    },
    /// A bug in lock-recipes: lock-core broke a promise a recipe relies on. Please report
    /// it.
    #[error("internal error in lock-recipes: {0}; please report it")]
    Internal(&'static str),
}
