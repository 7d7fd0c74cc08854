//! Recipes on the fair Cassandra lock ([`lock_core`]): what services take a lock for.
//!
//! * [`ScheduledJob`]: a job that runs at most once per interval across every process that
//!   schedules it, with ShedLock's "lock at least for" and "lock at most for"
//!   ([`JobLimits`]), and the lock's fencing token handed to the job.
//!
//! Everything here uses lock-core's public API only, and times everything on the
//! locker's clock ([`lock_core::Locker::clock`]), so that it runs on virtual time in tests.

mod error;
mod scheduled;

pub use error::Error;
pub use scheduled::{JobLimits, JobRun, ScheduledJob};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
