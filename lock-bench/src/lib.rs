//! `lock-bench`: the thesis's experiment, reproduced side by side for the queue lock and the
//! old baseline lock.
#![doc = include_str!("../README.md")]

pub mod cli;
pub mod cluster_cost;
pub mod experiment;
pub mod handoff;
pub mod local;
pub mod local_lines;
pub mod lwt;
pub mod lwt_compare;
pub mod plot;
pub mod progress;
pub mod report;
pub mod scale;
pub mod stats;
pub mod tombstones;
pub mod units;
pub mod work_queue;
pub mod work_queue_plot;

/// The error type of the tool: anything, with a message for the operator.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Writes `text` to stdout. A closed stdout (as in `lock-bench | head`) is not an error:
/// the rest of the output is dropped, and the command still writes its files.
pub fn emit(text: &str) -> Result<(), BoxError> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(()),
    }
}

/// Writes a line to stderr, ignoring failure: progress and log lines never stop a run.
pub fn note(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
