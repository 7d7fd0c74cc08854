//! Running a command-line tool from a test as a person does. These helpers panic with what
//! went wrong, as a test should; they are for tests only.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `binary` with `args` and `--out <out>` (emptied first), waits at most `limit`,
/// asserts that it succeeded and returns its standard output. A run that outlives `limit`
/// is killed (a local cluster it started dies with it, by its nodes' watchdogs) and fails
/// the test with the command line.
pub fn run_to_success(binary: &Path, args: &[&str], out: &Path, limit: Duration) -> String {
    let name = binary.file_name().map_or_else(
        || binary.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    let _ = std::fs::remove_dir_all(out);
    let mut child = Command::new(binary)
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {name}: {error}"));
    let deadline = Instant::now() + limit;
    while child
        .try_wait()
        .unwrap_or_else(|error| panic!("cannot poll {name}: {error}"))
        .is_none()
    {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "{name} {} did not finish within {} s",
                args.join(" "),
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = child
        .wait_with_output()
        .unwrap_or_else(|error| panic!("cannot read {name}'s output: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{name} {} failed ({}):\n{stderr}\n{stdout}",
        args.join(" "),
        output.status
    );
    stdout
}

/// Runs `command` (a tool with `args`, for the message) and checks that it refused as a
/// tool should: no panic, exit code 1 or 2, and a message on standard error that names
/// `word`. Returns the message (lower-cased), or what was wrong.
pub fn refusal_problem(mut command: Command, args: &[&str], word: &str) -> Result<String, String> {
    let output = command
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    let stderr = String::from_utf8_lossy(&output.stderr).to_lowercase();
    let code = output.status.code();
    if stderr.contains("panicked") {
        Err(format!("{args:?}: panicked: {stderr}"))
    } else if !matches!(code, Some(1 | 2)) {
        Err(format!("{args:?}: exit {code:?}, stderr: {stderr}"))
    } else if !stderr.contains(word) {
        Err(format!(
            "{args:?}: the message does not mention {word:?}: {stderr}"
        ))
    } else {
        Ok(stderr)
    }
}
