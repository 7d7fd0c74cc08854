//! Every option of `lock-jepsen` fed hostile values: each run must end with a usage or
//! configuration error that says what is wrong (exit code 1 or 2, a message on stderr),
//! never a panic, and never start a cluster. A run starts a local Cassandra cluster when
//! its options are good, so these runs get a `PATH` without `java` or `mvn`: an option that
//! slipped through would fail on the missing tools (and the message would not name the
//! option) instead of starting a cluster.

use std::process::Command;

use lock_cli_support::testing::refusal_problem;

/// Options with values that cannot work, and a word the error message must contain.
const HOSTILE: &[(&[&str], &str)] = &[
    (&[], "cassandra"),
    (&["--cassandra", "127.0.0.1"], "local"),
    (&["--cassandra", ""], "local"),
    (&["--cassandra", "local,127.0.0.1"], "local"),
    (&["--cassandra", "local", "-p", "0"], "processes"),
    (&["--cassandra", "local", "-p", "1"], "processes"),
    (&["--cassandra", "local", "-p", "17"], "processes"),
    (&["--cassandra", "local", "-p", "65536"], "processes"),
    (&["--cassandra", "local", "-p", "2,3"], "processes"),
    (&["--cassandra", "local", "-p", "x"], "processes"),
    (&["--cassandra", "local", "--duration", "0"], "duration"),
    (&["--cassandra", "local", "--duration", "9s"], "duration"),
    (&["--cassandra", "local", "--duration", "2h"], "duration"),
    (&["--cassandra", "local", "--duration", "10"], "unit needed"),
    (&["--cassandra", "local", "--duration", "-1s"], "-1"),
    (
        &[
            "--cassandra",
            "local",
            "--duration",
            "99999999999999999999h",
        ],
        "duration",
    ),
    (&["--cassandra", "local", "--keyspace", ""], "keyspace"),
    (
        &["--cassandra", "local", "--keyspace", "Robert'); DROP"],
        "keyspace",
    ),
    (&["--cassandra", "local", "--lock-id", ""], "lock"),
    (
        &["--cassandra", "local", "--lock-id", "bad\u{202e}id"],
        "lock",
    ),
    (&["--cassandra", "local", "--seed", "-1"], "-1"),
    (
        &["--cassandra", "local", "--out", "/dev/null/x"],
        "/dev/null/x",
    ),
    (&["worker"], "required"),
    (
        &[
            "worker",
            "--worker",
            "-1",
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
        ],
        "-1",
    ),
    (&["worker", "--cassandra", "local"], "cassandra"),
];

#[test]
fn hostile_options_give_errors_without_starting_anything() {
    let binary = env!("CARGO_BIN_EXE_lock-jepsen");
    let no_tools =
        std::env::temp_dir().join(format!("lock-jepsen-no-tools-{}", std::process::id()));
    std::fs::create_dir_all(&no_tools).unwrap_or_else(|error| panic!("{error}"));
    let problems: Vec<String> = HOSTILE
        .iter()
        .filter_map(|(args, word)| {
            let mut command = Command::new(binary);
            command.args(*args).env("PATH", &no_tools);
            match refusal_problem(command, args, word) {
                Err(problem) => Some(problem),
                Ok(stderr) if stderr.contains("java") || stderr.contains("starting a local") => {
                    Some(format!(
                        "{args:?}: got as far as the cluster before refusing: {stderr}"
                    ))
                }
                Ok(_) => None,
            }
        })
        .collect();
    let _ = std::fs::remove_dir(&no_tools);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
