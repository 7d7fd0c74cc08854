//! The README's samples of the demonstration are lockctl's real output: each sample whose
//! `$ lockctl ...` line runs the demonstration (no `--cassandra`) is run, and its standard
//! output must equal the rest of the sample byte for byte, so that the two cannot drift
//! apart. The demonstration is seeded and runs on a paused clock, so its output is the same
//! on every run.

use std::process::{Command, Output};

/// lockctl's README, as this test was built with it.
const README: &str = include_str!("../README.md");

/// The commands that run the demonstration without `--cassandra`.
const DEMONSTRATED: [&str; 3] = ["inspect", "watch", "force-release"];

/// The operator the samples were run as (`$USER`), named in the force release's log line.
const OPERATOR: &str = "alice";

/// One sample: the arguments of its `$ lockctl` line and the output shown below it.
struct Sample {
    args: Vec<&'static str>,
    output: String,
}

/// The contents of every ```` ```text ```` block of the README.
fn text_blocks() -> Vec<&'static str> {
    README
        .split("```text\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .collect()
}

/// The samples that run the demonstration, in the README's order.
fn samples() -> Vec<Sample> {
    text_blocks()
        .into_iter()
        .filter_map(|block| {
            let (command, output) = block.split_once('\n')?;
            let args: Vec<&str> = command
                .strip_prefix("$ lockctl ")?
                .split_whitespace()
                .collect();
            let demonstrated = DEMONSTRATED.contains(args.first()?)
                && !args.iter().any(|arg| arg.starts_with("--cassandra"));
            demonstrated.then(|| Sample {
                args,
                output: output.to_owned(),
            })
        })
        .collect()
}

/// Runs `lockctl args` as [`OPERATOR`], asserts that it succeeded, and returns its
/// standard output and standard error.
fn lockctl(args: &[&str]) -> (String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_lockctl"))
        .args(args)
        .env("USER", OPERATOR)
        .output()
        .expect("run lockctl");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    );
    assert!(
        status.success(),
        "lockctl {args:?} failed ({status}):\n{stderr}\n{stdout}"
    );
    (stdout, stderr)
}

/// Where `actual` first differs from `expected`, line by line, for the failure message.
fn first_difference(expected: &str, actual: &str) -> String {
    let mut expected_lines = expected.split_inclusive('\n');
    let mut actual_lines = actual.split_inclusive('\n');
    for line in 1.. {
        match (expected_lines.next(), actual_lines.next()) {
            (None, None) => break,
            (wanted, got) if wanted != got => {
                return format!("line {line}:\n  README: {wanted:?}\n  actual: {got:?}");
            }
            _ => {}
        }
    }
    "no line differs".to_owned()
}

#[test]
fn the_readme_shows_the_demonstrations_real_output_byte_for_byte() {
    let samples = samples();
    let commands: Vec<&str> = samples.iter().map(|sample| sample.args[0]).collect();
    assert_eq!(
        commands, DEMONSTRATED,
        "the README has one sample of each demonstrated command, in this order"
    );
    // The watch sample waits the wall clock between inspections: run the three at once.
    let outputs: Vec<(String, String)> = std::thread::scope(|scope| {
        let running: Vec<_> = samples
            .iter()
            .map(|sample| scope.spawn(|| lockctl(&sample.args)))
            .collect();
        running
            .into_iter()
            .map(|run| run.join().expect("a sample's thread"))
            .collect()
    });
    let mut drifted = Vec::new();
    for (sample, (stdout, _)) in samples.iter().zip(&outputs) {
        if stdout != &sample.output {
            drifted.push(format!(
                "`lockctl {}`: {}\nthe whole output:\n{stdout}",
                sample.args.join(" "),
                first_difference(&sample.output, stdout)
            ));
        }
    }
    assert!(drifted.is_empty(), "{}", drifted.join("\n\n"));

    // The log line of the force release, shown in a block of its own.
    let (_, log) = &outputs[2];
    let shown = text_blocks()
        .into_iter()
        .find(|block| block.contains(" lockctl force-release: operator="))
        .expect("the README shows the log line of a force release");
    assert_eq!(log, shown, "{}", first_difference(shown, log));
}
