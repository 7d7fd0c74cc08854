//! `lockctl`: the operator's tool for the fair Cassandra lock. The binary's commands are
//! functions of this library, for tools that want them without a shell.
#![doc = include_str!("../README.md")]

pub mod admin;
pub mod cli;
pub mod cluster;
pub mod connection;
pub mod demo;
pub mod error;
pub mod report;
pub mod watch;

pub use error::Error;

/// The environment variable the password of `--username` is read from.
pub const PASSWORD_VARIABLE: &str = "LOCKCTL_CASSANDRA_PASSWORD";

/// Writes `text` to standard output. A closed standard output (as in `lockctl inspect ... |
/// head -n 3`) is not an error: the rest of the text is dropped.
pub fn emit(text: &str) -> Result<(), Error> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(source) if source.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Io {
            what: "cannot write to standard output",
            source,
        }),
        _ => Ok(()),
    }
}

/// Writes a line to standard error, ignoring failure: progress and log lines never stop a
/// command.
pub fn note(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
