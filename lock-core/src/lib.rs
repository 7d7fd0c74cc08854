//! A fair distributed lock over Cassandra-like storage: the sans-IO core.
#![doc = include_str!("../README.md")]

pub mod column;
pub mod config;
pub mod error;
pub mod id;
pub mod machine;
pub mod storage;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;

#[cfg(test)]
mod test_store;
#[cfg(all(feature = "driver", any(test, feature = "testing")))]
mod watchdog;

pub use column::{ColumnName, MainCellValue, QueueColumn};
pub use config::{Algorithm, BaselineConfig, Fraction, LockConfig, PollConfig, ValidConfig};
pub use error::{Error, ErrorSource};
pub use id::{IntoLockId, LockId, OwnerId};
pub use storage::LockStorage;
pub use time::{MonotonicTime, Now, Timestamp};
#[cfg(feature = "driver")]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the driver is the one layer that reads clocks, draws ambient randomness and \
              keeps hashed indexes; lock-core/clippy.toml forbids them everywhere else"
)]
pub mod driver;
#[cfg(feature = "driver")]
pub use driver::{
    Clock, GlobalTimeClock, LockGuard, Locker, LockerBuilder, SystemClock, TimeService,
    TimeServiceConfig, VirtualClock,
};
pub use machine::{FencingToken, LeaseStatus};
