//! `lock-bench`: the thesis's experiment, reproduced side by side for the queue lock and the
//! old baseline lock.
#![doc = include_str!("../README.md")]

pub mod cli;
pub mod cluster_cost;
pub mod experiment;
pub mod handoff;
pub mod local;
pub mod local_lines;
pub mod lwt_compare;
pub mod many_locks;
pub mod options;
pub mod plot;
pub mod progress;
pub mod report;
pub mod scale;
pub mod soak;
pub mod stats;
pub mod table_stats;
pub mod tasks;
pub mod timeline;
pub mod tombstones;
pub mod units;
pub mod work_queue;

/// The error type of the tool: anything, with a message for the operator.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use lock_cli_support::{emit, note};
