//! `lock-bench`: the thesis's experiment, reproduced side by side for the queue lock and the
//! old baseline lock.
#![doc = include_str!("../README.md")]

pub mod admin;
pub mod cli;
pub mod experiment;
pub mod plot;
pub mod report;
pub mod stats;
pub mod tombstones;
pub mod units;

/// The error type of the tool: anything, with a message for the operator.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
