//! `lock-jepsen`: the lock across separate OS processes on a real Cassandra cluster, under
//! faults, checked from the processes' own logs.
#![doc = include_str!("../README.md")]

pub mod check;
pub mod cli;
pub mod clocks;
pub mod harness;
pub mod worker;

/// The error type of the tool: anything, with a message for the operator.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The registers' table, in the lock's keyspace.
pub const REGISTER_TABLE: &str = "jepsen_register";

pub use lock_cli_support::{emit, note};

/// Microseconds of `CLOCK_MONOTONIC`: one time line for every process on the machine.
pub fn monotonic_us() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    seconds * 1_000_000 + nanos / 1_000
}

/// The Tokio runtime of the parent and of each worker: two worker threads, I/O and time.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}
