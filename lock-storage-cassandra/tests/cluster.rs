//! The storage checks against a real Cassandra or ScyllaDB cluster.
//!
//! Set `LOCK_CASSANDRA_CONTACT_POINTS` to a comma-separated list of `host:port` to run
//! them; each run creates a throwaway keyspace (`SimpleStrategy`, replication factor
//! `LOCK_CASSANDRA_REPLICATION_FACTOR`, default 1) and drops it afterwards. Set
//! `LOCK_CASSANDRA_LOCAL_DC` if the cluster's data centre should be preferred. Without the
//! contact points the cluster checks report that they were skipped, and pass.

use std::fmt::Debug;
use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::storage::{CellDelete, CellWrite, LockStorage, RowKey, RowKind, RowRead, Ttl};
use lock_core::{ColumnName, LockId, Timestamp};
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, Replication, SchemaConfig,
};

const CONTACT_POINTS: &str = "LOCK_CASSANDRA_CONTACT_POINTS";

/// Writes past the test harness's output capture, so that a skip is visible in every run.
fn announce(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn wall_clock() -> Timestamp {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros())
        .unwrap_or_default();
    Timestamp::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// The cluster's configuration, or `None` (and a note) when no cluster is configured.
fn cluster_config(test: &str) -> Option<CassandraConfig> {
    let points: Vec<String> = std::env::var(CONTACT_POINTS)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|point| !point.is_empty())
        .map(str::to_owned)
        .collect();
    if points.is_empty() {
        announce(&format!(
            "{test}: skipped, no cluster (set {CONTACT_POINTS}=host:port[,host:port] to run it)"
        ));
        return None;
    }
    let replication_factor = std::env::var("LOCK_CASSANDRA_REPLICATION_FACTOR")
        .ok()
        .and_then(|factor| factor.parse().ok())
        .unwrap_or(1);
    let keyspace = format!(
        "lock_test_{}_{}",
        std::process::id(),
        wall_clock().as_micros() % 1_000_000_000
    );
    Some(CassandraConfig {
        local_dc: std::env::var("LOCK_CASSANDRA_LOCAL_DC").ok(),
        request_timeout: Duration::from_secs(10),
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor,
        })),
        ..CassandraConfig::new(points, keyspace)
    })
}

fn row(kind: RowKind, lock: &str) -> RowKey {
    RowKey::new(kind, LockId::new(lock).expect("valid lock id"))
}

fn write(row: &RowKey, column: &str, value: &[u8], micros: u64, ttl: Option<u32>) -> CellWrite {
    CellWrite {
        row: row.clone(),
        column: ColumnName::new(column),
        value: value.to_vec(),
        timestamp: Timestamp::from_micros(micros),
        ttl: ttl.map(|seconds| Ttl::from_secs(seconds).expect("valid TTL")),
    }
}

fn delete(row: &RowKey, column: &str, micros: u64) -> CellDelete {
    CellDelete {
        row: row.clone(),
        column: ColumnName::new(column),
        timestamp: Timestamp::from_micros(micros),
    }
}

fn expect_eq<G: PartialEq<W> + Debug, W: Debug>(what: &str, got: G, want: W) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

async fn columns(
    storage: &impl LockStorage,
    row: &RowKey,
    start: Option<&str>,
    limit: u32,
) -> Result<Vec<String>, String> {
    let read = RowRead {
        start: start.map(ColumnName::new),
        ..RowRead::first(row.clone(), limit)
    };
    let cells = storage.read_row(read).await.map_err(|e| e.to_string())?;
    Ok(cells
        .into_iter()
        .map(|cell| cell.column.as_str().to_owned())
        .collect())
}

async fn expect_row(
    storage: &impl LockStorage,
    row: &RowKey,
    what: &str,
    want: &[&str],
) -> Result<(), String> {
    expect_eq(what, columns(storage, row, None, 10).await?, want)
}

async fn apply_writes(storage: &impl LockStorage, writes: Vec<CellWrite>) -> Result<(), String> {
    for cell in writes {
        storage.write_cell(cell).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

async fn remove(storage: &impl LockStorage, cell: CellDelete) -> Result<(), String> {
    storage.delete_cell(cell).await.map_err(|e| e.to_string())
}

async fn check_write_then_read(storage: &impl LockStorage, now: u64) -> Result<(), String> {
    let main = row(RowKind::Main, "read-back");
    apply_writes(
        storage,
        vec![write(&main, "owner-1", b"\x00v\xff", now, Some(60))],
    )
    .await?;
    let cells = storage
        .read_row(RowRead::first(main, 10))
        .await
        .map_err(|e| e.to_string())?;
    expect_eq("cells after one write", cells.len(), 1)?;
    expect_eq("column", cells[0].column.as_str(), "owner-1")?;
    expect_eq("value", cells[0].value.as_slice(), b"\x00v\xff".as_slice())?;
    expect_eq(
        "write timestamp",
        cells[0].write_timestamp,
        Timestamp::from_micros(now),
    )
}

async fn check_order_limit_and_start(storage: &impl LockStorage, now: u64) -> Result<(), String> {
    let queue = row(RowKind::Queue, "ordering");
    let names = ["b", "é", "aa", "B", "a"];
    let writes = names
        .iter()
        .map(|name| write(&queue, name, b"", now, Some(60)))
        .collect();
    apply_writes(storage, writes).await?;
    expect_row(storage, &queue, "whole row", &["B", "a", "aa", "b", "é"]).await?;
    expect_eq(
        "first two",
        columns(storage, &queue, None, 2).await?,
        vec!["B", "a"],
    )?;
    expect_eq(
        "two from \"aa\" (inclusive)",
        columns(storage, &queue, Some("aa"), 2).await?,
        vec!["aa", "b"],
    )?;
    expect_eq(
        "from between two names",
        columns(storage, &queue, Some("ab"), 10).await?,
        vec!["b", "é"],
    )?;
    expect_eq(
        "from past the end",
        columns(storage, &queue, Some("\u{10ffff}"), 10).await?,
        Vec::<String>::new(),
    )
}

async fn check_rows_are_separate(storage: &impl LockStorage, now: u64) -> Result<(), String> {
    let queue = row(RowKind::Queue, "separate");
    let main = row(RowKind::Main, "separate");
    let other = row(RowKind::Queue, "separate-2");
    apply_writes(
        storage,
        vec![
            write(&queue, "q", b"", now, Some(60)),
            write(&main, "m", b"", now, Some(60)),
        ],
    )
    .await?;
    expect_row(storage, &queue, "queue row", &["q"]).await?;
    expect_row(storage, &main, "main row", &["m"]).await?;
    expect_row(storage, &other, "another lock's queue row", &[]).await
}

async fn check_timestamps_decide(storage: &impl LockStorage, now: u64) -> Result<(), String> {
    let main = row(RowKind::Main, "timestamps");
    // An older write does not replace a newer one.
    apply_writes(
        storage,
        vec![
            write(&main, "c", b"new", now + 10, Some(60)),
            write(&main, "c", b"old", now, Some(60)),
        ],
    )
    .await?;
    let cells = storage
        .read_row(RowRead::first(main.clone(), 10))
        .await
        .map_err(|e| e.to_string())?;
    let kept: Vec<(&[u8], Timestamp)> = cells
        .iter()
        .map(|cell| (cell.value.as_slice(), cell.write_timestamp))
        .collect();
    expect_eq(
        "cells after an older write",
        kept,
        [(b"new".as_slice(), Timestamp::from_micros(now + 10))],
    )?;
    // A delete older than the write leaves the cell alive.
    remove(storage, delete(&main, "c", now + 5)).await?;
    expect_row(storage, &main, "after an older delete", &["c"]).await?;
    // A delete with the write's own timestamp wins.
    remove(storage, delete(&main, "c", now + 10)).await?;
    expect_row(
        storage,
        &main,
        "after a delete at the write's timestamp",
        &[],
    )
    .await?;
    // A write no newer than the tombstone stays deleted; a newer one revives the cell.
    apply_writes(
        storage,
        vec![write(&main, "c", b"late", now + 10, Some(60))],
    )
    .await?;
    expect_row(
        storage,
        &main,
        "after a write at the tombstone's timestamp",
        &[],
    )
    .await?;
    apply_writes(
        storage,
        vec![write(&main, "c", b"again", now + 11, Some(60))],
    )
    .await?;
    expect_row(storage, &main, "after a newer write", &["c"]).await?;
    // Deleting a cell that was never written succeeds and leaves the row alone.
    remove(storage, delete(&main, "never-written", now + 20)).await?;
    expect_row(storage, &main, "after deleting nothing", &["c"]).await
}

async fn check_ttls(storage: &impl LockStorage, now: u64) -> Result<(), String> {
    let queue = row(RowKind::Queue, "ttl");
    let time = row(RowKind::GlobalTime, "ttl");
    apply_writes(
        storage,
        vec![
            write(&queue, "short", b"", now, Some(1)),
            write(&queue, "long", b"", now, Some(600)),
            write(&time, "now", b"", now, None),
        ],
    )
    .await?;
    expect_row(storage, &queue, "right after writing", &["long", "short"]).await?;
    // TTLs count whole seconds on the replica's clock: wait well past one.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    expect_row(storage, &queue, "after the 1 s TTL ran out", &["long"]).await?;
    expect_row(storage, &time, "a cell without TTL", &["now"]).await
}

async fn run_checks(storage: &CassandraStorage) -> Result<(), String> {
    let now = wall_clock().as_micros();
    check_write_then_read(storage, now).await?;
    check_order_limit_and_start(storage, now).await?;
    check_rows_are_separate(storage, now).await?;
    check_timestamps_decide(storage, now).await?;
    check_ttls(storage, now).await
}

async fn check_missing_table_is_reported(config: &CassandraConfig) -> Result<(), String> {
    let missing = CassandraConfig {
        table: "no_such_table".into(),
        schema: None,
        ..config.clone()
    };
    match CassandraStorage::connect(missing).await {
        Err(CassandraError::Prepare { .. }) => Ok(()),
        Err(other) => Err(format!("a missing table gave {other}")),
        Ok(_) => Err("a missing table was accepted".into()),
    }
}

#[tokio::test]
async fn storage_conformance_on_a_real_cluster() {
    let Some(config) = cluster_config("storage_conformance_on_a_real_cluster") else {
        return;
    };
    let keyspace = config.keyspace.clone();
    let storage = CassandraStorage::connect(config.clone())
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let outcome = match run_checks(&storage).await {
        Ok(()) => check_missing_table_is_reported(&config).await,
        failed => failed,
    };
    let drop = format!("DROP KEYSPACE IF EXISTS {keyspace}");
    if let Err(error) = storage.session().query_unpaged(drop, ()).await {
        announce(&format!(
            "could not drop the test keyspace {keyspace}: {error}"
        ));
    }
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

#[tokio::test]
async fn connecting_to_nothing_fails_with_a_connect_error() {
    let config = CassandraConfig {
        connection_timeout: Duration::from_secs(2),
        ..CassandraConfig::new(["127.0.0.1:1"], "locks")
    };
    let outcome = tokio::time::timeout(Duration::from_secs(60), CassandraStorage::connect(config))
        .await
        .expect("connect gave up within a minute");
    match outcome {
        Err(error @ CassandraError::Connect { .. }) => {
            let message = error.to_string();
            assert!(message.contains("127.0.0.1:1"), "{message}");
        }
        Err(other) => panic!("expected a connect error, got {other}"),
        Ok(storage) => panic!("connected to nothing: {storage:?}"),
    }
}

#[tokio::test]
async fn invalid_configurations_fail_before_any_connection() {
    let config = CassandraConfig {
        keyspace: "Bad Name".into(),
        ..CassandraConfig::new(["127.0.0.1:1"], "locks")
    };
    match CassandraStorage::connect(config).await {
        Err(CassandraError::InvalidConfig { field, .. }) => assert_eq!(field, "keyspace"),
        other => panic!("expected a config error, got {other:?}"),
    }
}
