//! Every option of `lockctl` fed hostile values: each run must end with a usage error (exit
//! code 2) or a refusal (exit code 1) whose message names the problem, never a panic, and
//! never connect to a cluster or start one.

use std::process::Command;

/// A contact point where nothing listens: a command whose options slipped through would
/// fail to connect there, and its message would not name the option.
const NOWHERE: &str = "127.0.0.1:1";

/// Arguments that cannot work, and a word the (lowercased) error message must contain.
const HOSTILE: &[(&[&str], &str)] = &[
    (&[], "usage"),
    (&["frobnicate"], "frobnicate"),
    (&["inspect"], "lock_id"),
    (&["inspect", ""], "lock id"),
    (&["inspect", "bad\u{200b}id"], "lock id"),
    (&["inspect", "bad\u{202e}id"], "lock id"),
    (&["inspect", "ctl\u{1}id"], "lock id"),
    (&["inspect", "account:1", "--limit", "0"], "limit"),
    (&["inspect", "account:1", "--waiters", "101"], "waiters"),
    (&["inspect", "account:1", "--waiters", "-1"], "-1"),
    (&["inspect", "account:1", "--waiters", "many"], "waiters"),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            "",
            "--keyspace",
            "locks",
        ],
        "cassandra",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            ",",
            "--keyspace",
            "locks",
        ],
        "cassandra",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            "local",
            "--keyspace",
            "locks",
        ],
        "cluster start",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            "127.0.0.1:99999",
            "--keyspace",
            "locks",
        ],
        "cassandra",
    ),
    (
        &["inspect", "account:1", "--keyspace", "locks"],
        "--cassandra",
    ),
    (
        &["inspect", "account:1", "--username", "ops"],
        "--cassandra",
    ),
    (
        &["inspect", "account:1", "--local-dc", "dc1"],
        "--cassandra",
    ),
    (
        &["inspect", "account:1", "--tls-ca", "/dev/null"],
        "--cassandra",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--tls-ca",
            "",
        ],
        "--tls-ca",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--tls-ca",
            "/nonexistent/ca.pem",
        ],
        "/nonexistent/ca.pem",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--tls-ca",
            "/dev/null",
        ],
        "--tls-ca",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--tls-ca",
            concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        ],
        "no certificate",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--tls-ca",
            "/dev/null",
            "--tls-key",
            "/dev/null",
        ],
        "--tls-cert",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--tls-ca",
            "/dev/null",
            "--tls-cert",
            "/dev/null",
        ],
        "--tls-key",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--tls-no-hostname-check",
        ],
        "--tls-ca",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--crashed",
        ],
        "--crashed",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--waiters",
            "2",
        ],
        "--waiters",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "Robert'); DROP",
        ],
        "--keyspace",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "system_auth",
        ],
        "--keyspace",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "",
        ],
        "--keyspace",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--local-dc",
            "",
        ],
        "--local-dc",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--username",
            "ops",
        ],
        "lockctl_cassandra_password",
    ),
    (
        &[
            "inspect",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "locks",
            "--password",
            "x",
        ],
        "--password",
    ),
    (
        &["inspect", "account:1", "--cassandra", NOWHERE],
        "--keyspace",
    ),
    (
        &[
            "watch",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--every",
            "2s",
        ],
        "--keyspace",
    ),
    (&["watch", "account:1", "--full-every", "0"], "--full-every"),
    (
        &["watch", "account:1", "--full-every", "some"],
        "--full-every",
    ),
    (&["force-release", "account:1"], "--owner"),
    (
        &["force-release", "account:1", "--owner", "not an owner id"],
        "owner",
    ),
    (&["force-release", "account:1", "--owner", ""], "owner"),
    (
        &["force-release", "account:1", "positional-owner"],
        "positional-owner",
    ),
    (
        &["force-release", "bad\u{200b}id", "--owner", "web-1"],
        "lock id",
    ),
    (&["watch", "account:1", "--every", "0"], "every"),
    (&["watch", "account:1", "--every", "0s"], "zero"),
    (
        &["watch", "account:1", "--every", "2h"],
        "longer than an hour",
    ),
    (&["watch", "account:1", "--every", "-1s"], "negative"),
    (&["watch", "account:1", "--every", "5"], "every"),
    (&["watch", "account:1", "--every", "soon"], "every"),
    (
        &["watch", "account:1", "--every", "99999999999999999999h"],
        "every",
    ),
    (&["watch", "account:1", "--count", "0"], "count"),
    (&["watch", "account:1", "--count", "-3"], "-3"),
    (&["watch", "account:1", "--count", "many"], "count"),
    (
        &["watch", "account:1", "--count", "99999999999999999999"],
        "count",
    ),
    (
        &[
            "watch",
            "account:1",
            "--cassandra",
            NOWHERE,
            "--keyspace",
            "Bad",
        ],
        "--keyspace",
    ),
    (&["cluster"], "usage"),
    (&["cluster", "fly"], "fly"),
    (&["cluster", "start", "--nodes", "2"], "nodes"),
    (&["cluster", "start", "--nodes", "4"], "nodes"),
    (&["cluster", "start", "--nodes", "x"], "nodes"),
    (
        &["cluster", "start", "--nodes", "1", "--data-centers", "2"],
        "--data-centers",
    ),
    (
        &["cluster", "start", "--data-centers", "3"],
        "--data-centers",
    ),
    (&["cluster", "start", "--heap-mib", "1"], "--heap-mib"),
    (
        &["cluster", "start", "--heap-mib", "99999999999"],
        "heap-mib",
    ),
    (&["cluster", "start", "--paxos-variant", "v0"], "v1 and v2"),
    (&["cluster", "stop", "--now"], "--now"),
];

#[test]
fn hostile_options_give_errors_not_panics() {
    let binary = env!("CARGO_BIN_EXE_lockctl");
    // Without `java` and `mvn` on the PATH, a `cluster start` whose options slipped through
    // fails on the missing tools (a message that names no option) instead of starting a
    // cluster.
    let no_tools = std::env::temp_dir().join(format!("lockctl-no-tools-{}", std::process::id()));
    std::fs::create_dir_all(&no_tools).expect("a directory without tools");
    let problems: Vec<String> = HOSTILE
        .iter()
        .filter_map(|(args, word)| {
            let mut command = Command::new(binary);
            command
                .args(*args)
                .env("PATH", &no_tools)
                .env_remove("LOCKCTL_CASSANDRA_PASSWORD");
            refusal_problem(command, args, word).err()
        })
        .collect();
    let _ = std::fs::remove_dir(&no_tools);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Runs `command` (lockctl with `args`) and checks that it refused as a tool should (see
/// [`lock_cli_support::testing::refusal_problem`]) and did not get as far as a cluster.
fn refusal_problem(command: Command, args: &[&str], word: &str) -> Result<String, String> {
    let stderr = lock_cli_support::testing::refusal_problem(command, args, word)?;
    if ["is needed to run", "starting a", "could not connect"]
        .iter()
        .any(|sign| stderr.contains(sign))
    {
        Err(format!(
            "{args:?}: got as far as a cluster before refusing: {stderr}"
        ))
    } else {
        Ok(stderr)
    }
}
