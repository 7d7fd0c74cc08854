//! Every option of `lock-bench` fed hostile values: each run must end with a usage or
//! configuration error that says what is wrong (exit code 1 or 2, a message on stderr),
//! never a panic, and never run an experiment.

use std::process::Command;

use lock_cli_support::testing::refusal_problem;

/// Options with values that cannot work, and a word the error message must contain.
const HOSTILE: &[(&[&str], &str)] = &[
    (&["-p", "0"], "processes"),
    (&["-p", "65"], "processes"),
    (&["-p", "1,,3"], "processes"),
    (&["-p", "-1"], "-1"),
    (&["-p", "99999999999999999999"], "processes"),
    (&["-n", "0"], "acquisitions"),
    (&["-n", "-5"], "-5"),
    (&["-n", "4294967296"], "acquisitions"),
    (&["--critical-section", "-1ms"], "negative"),
    (
        &["--critical-section", "99999999999999999999h"],
        "critical-section",
    ),
    (&["--critical-section", "1 fortnight"], "critical-section"),
    (&["--pause", "NaNs"], "pause"),
    (&["--linger", "5s"], "linger"),
    (&["--linger", "-1ms"], "negative"),
    (&["scale", "--linger", "2s"], "linger"),
    (&["--pause", "5"], "unit needed"),
    (&["--round-trip-warm-up", "2 fortnights"], "e.g. 250us"),
    (&["--dead-cell-cost", "366days"], "longer than a year"),
    (&["--gc-grace", "soon"], "gc-grace"),
    (&["--poll-min-interval", "0"], "min_interval"),
    (&["--poll-jitter-percent", "4294967295"], "jitter"),
    (&["--margin-acquisitions", "1001"], "margin_acquisitions"),
    (&["--margin-acquisitions", "-1"], "-1"),
    (
        &["tombstones", "--margin-acquisitions", "5000"],
        "margin_acquisitions",
    ),
    (&["--latency", "lognormal:-1ms,2ms"], "latency"),
    (&["--latency", "uniform:5ms,1ms"], "latency"),
    (&["--lock-id", "bad\u{202e}id"], "lock"),
    (&["--lock-id", "ctl\u{1}id"], "lock"),
    (&["--cassandra", ""], "cassandra"),
    (&["--cassandra", "local", "--local-nodes", "2"], "nodes"),
    (
        &[
            "--create-schema",
            "--replication-factor",
            "0",
            "--cassandra",
            "127.0.0.1:1",
        ],
        "replication",
    ),
    (
        &["--keyspace", "Robert'); DROP", "--cassandra", "127.0.0.1:1"],
        "keyspace",
    ),
    (&["--seed", "x"], "seed"),
    (&["--fencing", "sometimes"], "fencing"),
    (&["--algorithms", "paxos"], "algorithms"),
    (&["inspect", "account:1"], "inspect"),
    (&["cluster", "start"], "cluster"),
    (&["tombstones", "-n", "0"], "acquisitions"),
    (&["tombstones", "--window", "0"], "window"),
    (
        &["tombstones", "--cassandra", "local", "--gc-grace", "5"],
        "gc_grace_seconds",
    ),
    (
        &["tombstones", "--cassandra", "local", "--gc-grace", "999999"],
        "gc_grace_seconds",
    ),
    (
        &["tombstones", "--cassandra", "local", "--latency", "zero"],
        "--latency",
    ),
    (&["compare-lwt"], "paxos"),
    (&["compare-lwt", "-n", "0"], "acquisitions"),
    (&["compare-lwt", "--uncontended", "0"], "uncontended"),
    (&["compare-lwt", "-p", "3,0"], "processes"),
    (&["compare-lwt", "--warm-up", "5"], "unit needed"),
    (
        &[
            "compare-lwt",
            "--cassandra",
            "local",
            "--paxos-variant",
            "v3",
        ],
        "has v1 and v2",
    ),
    (
        &[
            "compare-lwt",
            "--cassandra",
            "127.0.0.1:1",
            "--paxos-variant",
            "v2",
        ],
        "runs its own",
    ),
    (
        &[
            "compare-lwt",
            "--lock-id",
            "bad\u{202e}id",
            "--cassandra",
            "local",
        ],
        "lock",
    ),
    (
        &["compare-lwt", "--cassandra", "local", "--local-nodes", "2"],
        "nodes",
    ),
    (
        &[
            "compare-lwt",
            "--cassandra",
            "127.0.0.1:1",
            "--latency",
            "zero",
        ],
        "latency",
    ),
    (&["cluster-cost"], "--cassandra local"),
    (
        &["cluster-cost", "--cassandra", "127.0.0.1"],
        "--cassandra local",
    ),
    (&["cluster-cost", "--rate", "0"], "rate"),
    (&["cluster-cost", "--rate", "NaN"], "rate"),
    (&["cluster-cost", "--rate", "1e9"], "rate"),
    (&["cluster-cost", "-p", "0"], "processes"),
    (&["cluster-cost", "--duration", "5"], "unit needed"),
    (
        &["cluster-cost", "--cassandra", "local", "--duration", "0s"],
        "duration",
    ),
    (
        &["cluster-cost", "--cassandra", "local", "--idle", "0s"],
        "idle",
    ),
    (
        &[
            "cluster-cost",
            "--cassandra",
            "local",
            "--lock-id",
            "bad\u{202e}id",
        ],
        "lock",
    ),
    (
        &["cluster-cost", "--cassandra", "local", "--local-nodes", "2"],
        "nodes",
    ),
    (
        &[
            "cluster-cost",
            "--cassandra",
            "local",
            "--paxos-variant",
            "v3",
        ],
        "has v1 and v2",
    ),
    (
        &["cluster-cost", "--cassandra", "local", "--latency", "zero"],
        "latency",
    ),
    (&["local-lines", "--tasks", "4"], "tasks"),
    (&["local-lines", "--tasks", "201"], "tasks"),
    (&["local-lines", "--tasks", "-1"], "-1"),
    (&["local-lines", "--run-time", "0s"], "run-time"),
    (&["local-lines", "--run-time", "11min"], "run-time"),
    (&["local-lines", "--run-time", "5"], "unit needed"),
    (&["local-lines", "--acquisitions", "0"], "acquisitions"),
    (&["local-lines", "--acquisitions", "1s"], "acquisitions"),
    (
        &["local-lines", "--acquisitions", "5", "--run-time", "1s"],
        "cannot be used with",
    ),
    (&["local-lines", "--lock-id", "bad\u{202e}id"], "lock-id"),
    (&["local-lines", "--latency", "uniform:5ms,1ms"], "latency"),
    (&["soak", "--duration", "0s"], "--duration"),
    (&["soak", "--duration", "25h"], "--duration"),
    (&["soak", "--duration", "5"], "unit needed"),
    (&["soak", "--duration", "-1m"], "negative"),
    (&["soak", "--window", "0s"], "--window"),
    (&["soak", "--window", "9s"], "--window"),
    (&["soak", "--window", "50m"], "--window"),
    (&["soak", "--duration", "24h", "--window", "10s"], "windows"),
    (&["soak", "--restart-every", "0s"], "--restart-every"),
    (&["soak", "--restart-every", "29s"], "--restart-every"),
    (&["soak", "--critical-section", "1h"], "--critical-section"),
    (&["soak", "-p", "0"], "processes"),
    (&["soak", "-p", "65"], "processes"),
    (&["soak", "--local-nodes", "2"], "nodes"),
    (&["soak", "--lock-id", "bad\u{202e}id"], "--lock-id"),
    (&["soak", "--cassandra", "local"], "--cassandra"),
];

#[test]
fn hostile_options_give_errors_not_panics() {
    let binary = env!("CARGO_BIN_EXE_lock-bench");
    let problems: Vec<String> = HOSTILE
        .iter()
        .filter_map(|(args, word)| {
            let mut command = Command::new(binary);
            command.args(*args);
            refusal_problem(command, args, word).err()
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `scale` and `local-lines` fed hostile values. `local-lines --cassandra local` starts a
/// local Cassandra cluster when its options are good, so these runs get a `PATH` without
/// `java` or `mvn`: an option that slipped through would fail on the missing tools (and the
/// message would not name the option) instead of starting a cluster.
const HOSTILE_SWEEPS: &[(&[&str], &str)] = &[
    (&["scale", "-p", "0"], "processes"),
    (&["scale", "-p", "65"], "processes"),
    (&["scale", "-p", "99999999999999999999"], "processes"),
    (&["scale", "-p", "1,,3"], "processes"),
    (&["scale", "-p", ","], "processes"),
    (&["scale", "-p", ""], "processes"),
    (&["scale", "-p", "two"], "processes"),
    (&["scale", "-p", "1.5"], "processes"),
    (&["scale", "-p", "1,2,1"], "processes"),
    (&["scale", "-p", "-1"], "-1"),
    (&["scale", "-n", "0"], "acquisitions"),
    (&["scale", "-n", "4294967296"], "acquisitions"),
    (&["scale", "-n", "-5"], "-5"),
    (&["scale", "--algorithms", "paxos"], "algorithms"),
    (&["scale", "--algorithms", "queue,,baseline"], "algorithms"),
    (&["scale", "--algorithms", ","], "algorithms"),
    (&["scale", "--algorithms", "queue,queue"], "algorithms"),
    (&["scale", "--seed", "18446744073709551616"], "seed"),
    (&["scale", "--seed", "x"], "seed"),
    (&["scale", "--cassandra", "local"], "cassandra"),
    (
        &["scale", "-p", "1", "-n", "1", "--out", "/dev/null/x"],
        "/dev/null/x",
    ),
    (
        &["local-lines", "--cassandra", "local", "--local-nodes", "2"],
        "nodes",
    ),
    (
        &["local-lines", "--cassandra", "local", "--latency", "zero"],
        "latency",
    ),
    (
        &["local-lines", "--cassandra", "local", "--run-time", "0s"],
        "run-time",
    ),
    (
        &[
            "local-lines",
            "--cassandra",
            "local",
            "--lock-id",
            "bad\u{202e}id",
        ],
        "lock-id",
    ),
    (
        &[
            "local-lines",
            "--cassandra",
            "local",
            "--out",
            "/dev/null/x",
        ],
        "/dev/null/x",
    ),
    (&["many-locks", "--keys", "0"], "keys"),
    (&["many-locks", "--keys", "10000001"], "keys"),
    (&["many-locks", "--keys", "10,,20"], "keys"),
    (&["many-locks", "--distribution", "pareto"], "distribution"),
    (&["many-locks", "--zipf-exponent", "0"], "zipf-exponent"),
    (&["many-locks", "--zipf-exponent", "NaN"], "zipf-exponent"),
    (&["many-locks", "--zipf-exponent", "5"], "zipf-exponent"),
    (&["many-locks", "--lockers", "0"], "lockers"),
    (&["many-locks", "--lockers", "4097"], "lockers"),
    (&["many-locks", "--processes", "0"], "processes"),
    (
        &["many-locks", "--lockers", "4", "--processes", "5"],
        "processes",
    ),
    (&["many-locks", "--run-time", "10ms"], "run-time"),
    (&["many-locks", "--run-time", "2h"], "run-time"),
    (
        &["many-locks", "--acquire-timeout", "0s"],
        "acquire-timeout",
    ),
    (&["many-locks", "--hot-ids", "0"], "hot-ids"),
    (&["many-locks", "--algorithms", "lwt"], "real cluster"),
    (&["many-locks", "--algorithms", "paxos"], "algorithms"),
    (&["many-locks", "--lock-id", "bad\u{202e}id"], "lock-id"),
    (
        &[
            "many-locks",
            "--cassandra",
            "local",
            "--paxos-variant",
            "v3",
        ],
        "paxos-variant",
    ),
    (
        &["many-locks", "--cassandra", "local", "--latency", "zero"],
        "latency",
    ),
    (
        &["many-locks", "--cassandra", "local", "--local-nodes", "2"],
        "nodes",
    ),
];

#[test]
fn hostile_scale_and_local_lines_options_give_errors_without_starting_anything() {
    let binary = env!("CARGO_BIN_EXE_lock-bench");
    let no_tools = std::env::temp_dir().join(format!("lock-bench-no-tools-{}", std::process::id()));
    std::fs::create_dir_all(&no_tools).unwrap();
    let problems: Vec<String> = HOSTILE_SWEEPS
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
