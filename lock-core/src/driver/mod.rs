//! The thin async driver: runs the machines against a [`crate::LockStorage`] on Tokio.
//!
//! [`Locker`] runs an acquisition machine to its outcome, sending each storage request
//! with `request_timeout` (a timeout becomes [`crate::Error::StorageOutcomeUnknown`]). A held
//! lock is a [`LockGuard`] guard whose background task runs the [`crate::machine::Lease`]
//! machine and, on release or drop, the [`crate::machine::Release`] machine; that task is
//! started only when the first renewal is due (a lock released sooner is released inline by
//! its guard). The time comes from an injected [`Clock`].

mod clock;
#[cfg(test)]
mod driver_tests;
mod election;
mod fine_timer;
mod guard;
mod keeper;
mod local_line;
mod locker;
mod metrics;
#[cfg(test)]
mod regression_tests;
mod run;
mod seats;
#[cfg(test)]
mod test_client;
mod time_service;
mod work_queue;
#[cfg(test)]
mod work_queue_tests;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use election::{Election, Leader, Leadership};
pub use guard::LockGuard;
pub use locker::{Locker, LockerBuilder};
#[cfg(feature = "metrics")]
pub use metrics::MetricsFacade;
pub use metrics::{LockMetrics, NotAcquired, RequestKind};
pub use time_service::{GlobalTimeClock, TimeService, TimeServiceConfig};
pub use work_queue::{
    Claim, Claims, MAX_PAYLOAD_LEN, MAX_QUEUE_NAME_LEN, WorkItemId, WorkQueue, WorkQueueConfig,
};
