//! `lockctl`: inspect, watch and force-release locks, and run a local Cassandra cluster.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = lockctl::cli::Cli::parse();
    match lockctl::cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            lockctl::note(&format!("lockctl: {error}"));
            std::process::ExitCode::FAILURE
        }
    }
}
