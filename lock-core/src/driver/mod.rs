//! The thin async driver: runs the machines against a [`crate::LockStorage`] on Tokio.

mod clock;

pub use clock::{Clock, SystemClock, VirtualClock};
