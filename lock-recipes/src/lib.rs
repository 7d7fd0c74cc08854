//! Recipes on the fair Cassandra lock ([`lock_core`]): what services take a lock for.
//!
//! * [`Election`]: leader election, one active instance of a service at a time, whose
//!   term is the lock's fencing token.
//! * [`ScheduledJob`]: a job that runs at most once per interval across every process that
//!   schedules it, with ShedLock's "lock at least for" and "lock at most for"
//!   ([`JobLimits`]), and the lock's fencing token handed to the job.
//! * [`WorkQueue`]: a leased work queue. Producers enqueue items, workers claim the oldest
//!   item no one holds with a lease ([`Claim`]), and at most one claim of an item
//!   completes it.
//!
//! Everything here uses lock-core's public API only, and times everything on the
//! locker's clock ([`fair_lock::Locker::clock`]), so that it runs on virtual time in tests.

mod election;
mod error;
mod scheduled;
mod support;
mod work_queue;

pub use election::{Election, Leader, Leadership};
pub use error::Error;
pub use scheduled::{JobLimits, JobRun, ScheduledJob};
pub use work_queue::{
    Claim, Claims, MAX_PAYLOAD_LEN, MAX_QUEUE_NAME_LEN, WorkItemId, WorkQueue, WorkQueueConfig,
};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
