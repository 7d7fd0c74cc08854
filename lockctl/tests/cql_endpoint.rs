//! `inspect`, `watch` and `force-release` with `--cassandra`, against the workspace's CQL
//! endpoint: the simulated cluster served over the CQL native protocol on loopback. The
//! path an operator takes on a real cluster (the `scylla` driver, the lock table in the
//! keyspace `--keyspace` names, a lock held by another process) then runs in every `cargo test`,
//! without Java; the endpoint also lets the test take replicas down while `watch` runs.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cql_endpoint::CqlServer;
use fair_lock::Locker;
use lock_core::{LockConfig, Timestamp};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage, Replication, SchemaConfig};
use lock_storage_memory::{ClusterConfig, MemoryCluster, ReplicaId};

/// How long the test waits for anything: long, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// A `lockctl` process that is killed if the test ends before it does.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `lockctl args` to its end, asserts that it succeeded, and returns its standard
/// output and standard error.
fn lockctl(args: &[&str]) -> (String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_lockctl"))
        .args(args)
        .output()
        .expect("run lockctl");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "lockctl {args:?} failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    (stdout, stderr)
}

/// Reads lines from `lines` until one satisfies `wanted`, and returns it; panics, with the
/// lines read, after [`PATIENCE`].
fn wait_for(lines: &mpsc::Receiver<String>, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if wanted(&line) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no {what} within {PATIENCE:?}; read:\n{}", seen.join("\n")),
        }
    }
}

fn wall_clock() -> Timestamp {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros())
        .unwrap_or_default();
    Timestamp::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

#[test]
fn inspect_watch_and_force_release_a_lock_held_over_cql() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(async {
        let cluster = MemoryCluster::new(ClusterConfig {
            epoch: wall_clock(),
            ..ClusterConfig::default()
        })
        .unwrap();
        CqlServer::start(cluster, "127.0.0.1:0").await.unwrap()
    });
    let contact_point = server.contact_point();
    // Another process holds account:42 and one waits: the lock table is in lock-bench's
    // keyspace, created as lock-bench's `--create-schema` creates it.
    let (holder, waiter) = runtime.block_on(async {
        let config = CassandraConfig {
            schema: Some(SchemaConfig::new(Replication::Simple {
                replication_factor: 3,
            })),
            ..CassandraConfig::new([contact_point.as_str()], "lock_bench")
        };
        let storage = CassandraStorage::connect(config).await.unwrap();
        let holder_locker = Locker::new(storage.clone(), LockConfig::default()).unwrap();
        let holder = holder_locker.lock("account:42").await.unwrap();
        let waiter_locker = Locker::new(storage, LockConfig::default()).unwrap();
        // The outage below fails the waiter's polls too; it asks again, as an
        // application would.
        let waiter = tokio::spawn(async move {
            loop {
                match waiter_locker.lock("account:42").await {
                    Ok(guard) => return guard,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
        let queued = Instant::now();
        while holder_locker
            .inspect("account:42", 10)
            .await
            .unwrap()
            .queue
            .is_empty()
        {
            assert!(queued.elapsed() < PATIENCE, "the waiter never queued");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (holder, waiter)
    });
    let holder_line = format!("  holder: {}", holder.owner_id());

    let (report, _) = lockctl(&[
        "inspect",
        "account:42",
        "--cassandra",
        &contact_point,
        "--keyspace",
        "lock_bench",
    ]);
    assert!(!report.contains("DEMONSTRATION"), "{report}");
    assert!(report.contains(&holder_line), "{report}");
    assert!(
        // The waiter; the holder left the queue as it took the lock.
        report.contains("  queue: 1 waiting or holding, in order"),
        "{report}"
    );

    // `watch` goes on through an outage: two replicas of three down fail its inspections
    // (QUORUM cannot be reached), and once they are back it reports the lock in full.
    let mut watch = Running(
        Command::new(env!("CARGO_BIN_EXE_lockctl"))
            .args([
                "watch",
                "account:42",
                "--cassandra",
                &contact_point,
                "--keyspace",
                "lock_bench",
            ])
            .args(["--every", "100ms"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run lockctl watch"),
    );
    let stdout = watch.0.stdout.take().expect("watch's standard output");
    let (line_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    let header = wait_for(&lines, "header", |line| line.starts_with("Watching "));
    assert!(
        header.contains(&format!(
            "Cassandra at {contact_point} (keyspace lock_bench"
        )),
        "{header}"
    );
    wait_for(&lines, "report", |line| line == holder_line);
    let faults = server.cluster().faults();
    faults.stop_replica(ReplicaId(1)).unwrap();
    faults.stop_replica(ReplicaId(2)).unwrap();
    let failed = wait_for(&lines, "failed inspection", |line| {
        line.contains(" inspection failed: ")
    });
    assert!(failed.ends_with("; still watching"), "{failed}");
    faults.start_replica(ReplicaId(1)).unwrap();
    faults.start_replica(ReplicaId(2)).unwrap();
    wait_for(&lines, "report after the outage", |line| {
        line == holder_line
    });
    assert_eq!(
        watch.0.try_wait().expect("poll lockctl watch"),
        None,
        "the watch is still running"
    );
    drop(watch);

    let owner = holder.owner_id().to_string();
    let (released, log) = lockctl(&[
        "force-release",
        "account:42",
        "--owner",
        &owner,
        "--cassandra",
        &contact_point,
        "--keyspace",
        "lock_bench",
    ]);
    assert!(
        released.contains(&holder_line),
        "the lock before:\n{released}"
    );
    assert!(
        released.contains(&format!("force-released {owner}: its cells are deleted")),
        "{released}"
    );
    let audit = log
        .lines()
        .find(|line| line.contains(" lockctl force-release: "))
        .unwrap_or_else(|| panic!("no audit line:\n{log}"));
    assert!(audit.contains(&format!("owner={owner}")), "{audit}");
    assert!(audit.contains("outcome=\"released\""), "{audit}");
    assert!(
        audit.contains(&format!(
            "backend=\"Cassandra at {contact_point} (keyspace lock_bench, table lock_cells)\""
        )),
        "{audit}"
    );
    // The waiter, which would have waited for the holder's lease, takes the lock now.
    let next = runtime
        .block_on(async { tokio::time::timeout(PATIENCE, waiter).await })
        .expect("the waiter took the lock in time")
        .expect("the waiter's task");
    let (after, _) = lockctl(&[
        "inspect",
        "account:42",
        "--cassandra",
        &contact_point,
        "--keyspace",
        "lock_bench",
    ]);
    assert!(
        after.contains(&format!("  holder: {}", next.owner_id())),
        "{after}"
    );
    drop((holder, next));
    runtime.block_on(server.shutdown());
}
