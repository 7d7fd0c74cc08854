//! Stateright models of the fair lock.
#![doc = "TODO"]

pub mod clock;
pub mod global_time;
pub mod lease;
pub mod liveness;
pub mod lock;
pub mod store;
pub mod trace;
