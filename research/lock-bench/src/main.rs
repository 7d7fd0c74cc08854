//! The main command: `cargo run --release -p lock-bench` reproduces the thesis's experiment.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = lock_bench::cli::Cli::parse();
    match lock_bench::cli::main(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            lock_bench::note(&format!("lock-bench: {error}"));
            std::process::ExitCode::FAILURE
        }
    }
}
