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
mod fine_timer;
mod guard;
mod keeper;
mod linger;
#[cfg(test)]
mod linger_rules_tests;
#[cfg(test)]
mod linger_tests;
mod local_line;
mod locker;
mod metrics;
#[cfg(test)]
mod regression_tests;
mod run;
mod seats;
#[cfg(test)]
mod shutdown_tests;
mod tasks;
#[cfg(test)]
mod test_client;
mod time_service;
mod wake;
#[cfg(test)]
mod wake_tests;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use guard::LockGuard;
pub use locker::{Locker, LockerBuilder};
#[cfg(feature = "metrics")]
pub use metrics::MetricsFacade;
pub use metrics::{LockMetrics, NotAcquired, RequestKind};
pub use time_service::{GlobalTimeClock, TimeService, TimeServiceConfig};
pub use wake::{UdpWakeHints, WakeHintInbox, WakeHintTransport};
