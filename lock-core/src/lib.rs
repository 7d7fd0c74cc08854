//! A fair distributed lock over Cassandra-like storage: the sans-IO core.
#![cfg_attr(feature = "driver", doc = include_str!("../README.md"))]
// The README links to the driver's items, which a build without it does not have.
#![cfg_attr(
    not(feature = "driver"),
    doc = "Built without the `driver` feature: the sans-IO machines ([`machine`]), the \
           storage vocabulary they speak ([`storage`]) and the configuration ([`LockConfig`]), \
           with no Tokio among the dependencies. The crate's README describes the whole \
           crate, the async `Locker` included."
)]

pub mod column;
pub mod config;
pub mod error;
pub mod hint;
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
