//! The command line: a run by default, and the hidden `worker` subcommand of the processes
//! a run spawns.

use clap::{Parser, Subcommand};

use crate::BoxError;
use crate::harness::JepsenArgs;
use crate::worker::WorkerArgs;

/// A Jepsen-style run: separate worker processes take one lock and increment two registers
/// (plain, and written with the fencing token as timestamp) on a local 3-node Cassandra
/// while nodes are killed and frozen and workers are paused past their lease; then a
/// checker reads every process's log. Needs `--cassandra local`.
#[derive(Debug, Parser)]
#[command(
    name = "lock-jepsen",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// The hidden worker subcommand, which only the run itself gives.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The run's options.
    #[command(flatten)]
    pub run: JepsenArgs,
}

/// The subcommands: only the worker, which the run spawns.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// One worker process of a run (the run spawns them).
    #[command(name = crate::worker::COMMAND, hide = true)]
    Worker(WorkerArgs),
}

/// Runs the command line.
pub fn main(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        None => crate::harness::run(&cli.run),
        Some(Command::Worker(args)) => crate::worker::run(&args),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    fn parse(arguments: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lock-jepsen").chain(arguments.iter().copied()))
    }

    #[test]
    fn a_run_checks_its_input_before_starting_anything() {
        let cli = parse(&["--cassandra", "local"]).unwrap();
        assert!(cli.command.is_none(), "a run, not a worker");
        assert_eq!(
            (cli.run.processes, cli.run.duration),
            (5, Duration::from_secs(120))
        );
        assert!(parse(&[]).is_err(), "--cassandra is required");
        for processes in ["1", "17", "x"] {
            assert!(
                parse(&["--cassandra", "local", "-p", processes]).is_err(),
                "{processes}"
            );
        }
        for (arguments, expected) in [
            (&["--cassandra", "10.0.0.1"][..], "--cassandra local"),
            (&["--cassandra", "local", "--duration", "5s"], "--duration"),
            (&["--cassandra", "local", "--lock-id", ""], "--lock-id"),
        ] {
            let error = main(parse(arguments).unwrap()).unwrap_err().to_string();
            assert!(error.contains(expected), "{arguments:?}: {error}");
        }
    }

    #[test]
    fn the_worker_subcommand_needs_no_run_options() {
        let cli = parse(&[
            crate::worker::COMMAND,
            "--worker",
            "0",
            "--contact-points",
            "127.0.0.1",
            "--keyspace",
            "k",
            "--lock-id",
            "l",
            "--log",
            "w.jsonl",
            "--stop",
            "stop",
        ])
        .unwrap();
        let Some(Command::Worker(args)) = cli.command else {
            panic!("not the worker");
        };
        assert_eq!((args.worker, args.seed), (0, 1));
    }
}
