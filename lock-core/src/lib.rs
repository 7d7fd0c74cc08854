//! A fair distributed lock over Cassandra-like storage: the sans-IO core.
#![doc = include_str!("../README.md")]

pub mod column;
pub mod config;
pub mod error;
pub mod hint;
pub mod id;
pub mod machine;
pub mod storage;
#[doc(hidden)]
pub mod test_store;
pub mod time;

pub use column::{ColumnName, MainCellValue, QueueColumn};
pub use config::{Algorithm, BaselineConfig, Fraction, LockConfig, PollConfig, ValidConfig};
pub use error::{Error, ErrorSource};
pub use id::{IntoLockId, LockId, OwnerId};
pub use machine::{FencingToken, LeaseStatus};
pub use storage::LockStorage;
pub use time::{MonotonicTime, Now, Timestamp};
