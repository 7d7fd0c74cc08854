//! `inspect`, `force-release` and `watch` without `--cassandra`, run as an operator runs
//! them: the demonstration on a simulated cluster, with one owner holding the lock and
//! others queued behind it.

use std::process::{Command, Output};

/// Runs `lockctl args`, asserts that it succeeded, and returns its standard output and
/// standard error.
fn lockctl(args: &[&str]) -> (String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_lockctl"))
        .args(args)
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

/// The owner ids a report lists: the holder, then the queue in order.
fn holder_and_queue(report: &str) -> (String, Vec<String>) {
    let holder = report
        .lines()
        .find_map(|line| line.strip_prefix("  holder: "))
        .unwrap_or_else(|| panic!("no holder in:\n{report}"))
        .to_owned();
    let queue = report
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix('#'))
        .map(|entry| {
            entry
                .split_whitespace()
                .nth(1)
                .unwrap_or_else(|| panic!("no owner in queue entry {entry:?}"))
                .to_owned()
        })
        .collect();
    (holder, queue)
}

#[test]
fn inspect_shows_the_holder_and_the_queue_in_order_and_says_it_is_a_simulation() {
    let (out, _) = lockctl(&["inspect", "account:42", "--waiters", "2"]);
    assert!(out.starts_with("DEMONSTRATION on a simulated"), "{out}");
    assert!(
        out.contains("nothing is read from or written to Cassandra"),
        "{out}"
    );
    assert!(out.contains("lock account:42\n"), "{out}");
    assert!(
        // The two waiters; the holder left the queue as it took the lock.
        out.contains("  queue: 2 waiting or holding, in order"),
        "{out}"
    );
    assert!(out.contains("  fence: "), "{out}");
    let (holder, queue) = holder_and_queue(&out);
    assert_eq!(queue.len(), 2, "{out}");
    assert!(
        !queue.contains(&holder),
        "the holder left the queue:\n{out}"
    );
    assert!(
        out.contains(&format!("{holder} holds account:42, 2 more wait.")),
        "{out}"
    );
    assert!(!out.contains("STALE"), "a live holder:\n{out}");

    let (crashed, _) = lockctl(&["inspect", "account:42", "--waiters", "2", "--crashed"]);
    assert!(crashed.contains("as if it had crashed"), "{crashed}");
    let stale = crashed
        .lines()
        .find(|line| line.contains("STALE"))
        .unwrap_or_else(|| panic!("nothing stale:\n{crashed}"));
    assert!(
        stale.contains(&holder),
        "the holder's cell is stale:\n{crashed}"
    );
}

#[test]
fn force_release_frees_a_crashed_holder_and_logs_it() {
    let (before, _) = lockctl(&["inspect", "account:42", "--waiters", "2", "--crashed"]);
    let (holder, queue) = holder_and_queue(&before);
    let (out, log) = lockctl(&[
        "force-release",
        "account:42",
        "--owner",
        &holder,
        "--waiters",
        "2",
        "--crashed",
    ]);
    assert!(out.starts_with("DEMONSTRATION"), "{out}");
    assert!(
        out.contains(&format!("force-released {holder}: its cells are deleted")),
        "{out}"
    );
    let after = out
        .split("the lock now:")
        .nth(1)
        .unwrap_or_else(|| panic!("nobody took the lock:\n{out}"));
    let (next, _) = holder_and_queue(after);
    assert_ne!(next, holder, "{out}");
    assert!(queue.contains(&next), "a waiter took over:\n{out}");
    let audit = log
        .lines()
        .find(|line| line.contains(" lockctl force-release: "))
        .unwrap_or_else(|| panic!("no audit line on stderr:\n{log}"));
    assert!(audit.starts_with("2025-01-01T00:00:"), "{audit}");
    for field in [
        "operator=".to_owned(),
        "lock=\"account:42\"".to_owned(),
        format!("owner={holder}"),
        "outcome=\"released\"".to_owned(),
        "backend=\"simulated cluster (demonstration)\"".to_owned(),
    ] {
        assert!(audit.contains(&field), "{field} in {audit}");
    }

    let (nothing, _) = lockctl(&["force-release", "account:42", "--owner", "nobody"]);
    assert!(
        nothing.contains("nobody has no cell on account:42: nothing to release"),
        "{nothing}"
    );
}

#[test]
fn watch_prints_the_holder_and_queue_with_the_time_and_stops_after_its_count() {
    let (out, _) = lockctl(&["watch", "account:42", "--count", "2", "--every", "10ms"]);
    assert!(out.starts_with("DEMONSTRATION"), "{out}");
    assert!(
        out.contains("Watching account:42 on simulated cluster (demonstration), every 10ms, for 2 inspection(s)."),
        "{out}"
    );
    let inspections: Vec<&str> = out
        .lines()
        .filter(|line| line.starts_with("2025-01-01T"))
        .collect();
    assert_eq!(inspections.len(), 2, "two timestamped inspections:\n{out}");
    let (holder, queue) = holder_and_queue(&out);
    // The 3 waiters; the holder left the queue as it took the lock (waiting in the main
    // row, on by default).
    assert_eq!(queue.len(), 3, "3 waiters:\n{out}");
    assert!(!queue.contains(&holder), "{out}");
    // The second is the whole report again or, as nothing changed, one line.
    let second = inspections[1];
    assert!(
        second.ends_with("Z")
            || second.ends_with(&format!("unchanged: holder {holder}, queue 3 waiting")),
        "{second}"
    );
    assert!(!out.contains("stopped by Ctrl-C"), "{out}");
}
