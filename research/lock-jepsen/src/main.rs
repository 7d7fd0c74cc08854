//! `lock-jepsen`: a Jepsen-style run of the lock; see the crate's README.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = lock_jepsen::cli::Cli::parse();
    match lock_jepsen::cli::main(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            lock_jepsen::note(&format!("lock-jepsen: {error}"));
            std::process::ExitCode::FAILURE
        }
    }
}
