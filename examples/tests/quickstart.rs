//! The quickstart example as a new user runs it: on the embedded simulator, and on a real
//! local one-node Apache Cassandra 5.0 (started by lock-storage-cassandra's harness, or the
//! cluster in `LOCK_CASSANDRA_CONTACT_POINTS`). Without `java` or `mvn` the Cassandra test
//! says it was skipped; under `CI=true` that is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use lock_local_cluster::test_target;

fn quickstart(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("cannot run the quickstart example")
}

/// Checks that the story was told to its end: the lock kept the balance, the holder that
/// was force-released learnt it, and its late write was refused by its stale token.
fn assert_told(output: &Output) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for line in [
        "balance now 40 (100 - 6 x 10)",
        "operator: force-released A's cells (removed)",
        "status Lost: A must stop touching the account",
        "refused, the ledger has seen token",
        "balance now 30 (100 - 7 x 10)",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(
        !stdout.contains("REFUSED"),
        "a holder was refused:\n{stdout}"
    );
}

#[test]
fn the_story_runs_on_the_simulator() {
    assert_told(&quickstart(&[]));
}

#[test]
fn bad_arguments_are_refused_with_the_usage() {
    for (args, word) in [
        (&["--cassandra"][..], "contact points"),
        (&["--cassandra", ","], "at least one"),
        (&["--replication-factor", "3"], "with --cassandra only"),
        (
            &["--cassandra", "h:1", "--replication-factor", "0"],
            "at least 1",
        ),
        (
            &["--cassandra", "h:1", "--replication-factor", "x"],
            "whole number",
        ),
        (&["--frobnicate"], "unknown argument"),
    ] {
        let output = quickstart(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(word), "{args:?}: {stderr}");
        assert!(stderr.contains("usage:"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn the_story_runs_on_a_local_cassandra() {
    let test = "the_story_runs_on_a_local_cassandra";
    let Some(target) = test_target(test, 1).unwrap_or_else(|error| panic!("{test}: {error}"))
    else {
        return;
    };
    let points = target.contact_points.join(",");
    let factor = target.replication_factor.to_string();
    assert_told(&quickstart(&[
        "--cassandra",
        &points,
        "--replication-factor",
        &factor,
    ]));
}
