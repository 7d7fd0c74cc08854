#![doc = include_str!("../README.md")]

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
#[cfg(feature = "testing")]
pub mod testing;
mod time_service;
mod wake;
#[cfg(test)]
mod wake_tests;
#[cfg(any(test, feature = "testing"))]
mod watchdog;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use guard::LockGuard;
pub use locker::{Locker, LockerBuilder};
#[cfg(feature = "metrics")]
pub use metrics::MetricsFacade;
pub use metrics::{LockMetrics, NotAcquired, RequestKind};
pub use time_service::{GlobalTimeClock, TimeService, TimeServiceConfig};
pub use wake::{UdpWakeHints, WakeHintInbox, WakeHintTransport};

// The vocabulary of the lock, from the machines' crate: what a user of `Locker` names.
pub use lock_core::machine::{AcquireStats, LockReport};
pub use lock_core::{
    Error, ErrorSource, FencingToken, IntoLockId, LeaseStatus, LockConfig, LockId, LockStorage,
    MonotonicTime, OwnerId, PollConfig, Timestamp, ValidConfig,
};
