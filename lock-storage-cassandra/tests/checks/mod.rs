//! Storage-semantics checks over any `impl LockStorage`, shared by the run against a real
//! cluster (`cluster.rs`) and the run against the simulator's CQL endpoint
//! (`endpoint.rs`). Each check returns a description of the first mismatch.

#![allow(
    dead_code,
    reason = "each test binary uses its own subset of the checks"
)]

use std::fmt::Debug;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::storage::{CellDelete, CellWrite, LockStorage, RowKey, RowKind, RowRead, Ttl};
use lock_core::{ColumnName, LockId, Timestamp};
use lock_storage_cassandra::{CassandraConfig, CassandraError, CassandraStorage};

/// The wall clock in microseconds, for write timestamps.
pub fn wall_clock() -> Timestamp {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros())
        .unwrap_or_default();
    Timestamp::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

pub fn row(kind: RowKind, lock: &str) -> RowKey {
    RowKey::new(kind, LockId::new(lock).expect("valid lock id"))
}

pub fn write(row: &RowKey, column: &str, value: &[u8], micros: u64, ttl: Option<u32>) -> CellWrite {
    CellWrite {
        row: row.clone(),
        column: ColumnName::new(column),
        value: value.to_vec(),
        timestamp: Timestamp::from_micros(micros),
        ttl: ttl.map(|seconds| Ttl::from_secs(seconds).expect("valid TTL")),
    }
}

pub fn delete(row: &RowKey, column: &str, micros: u64) -> CellDelete {
    CellDelete {
        row: row.clone(),
        column: ColumnName::new(column),
        timestamp: Timestamp::from_micros(micros),
    }
}

pub fn expect_eq<G: PartialEq<W> + Debug, W: Debug>(
    what: &str,
    got: G,
    want: W,
) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

pub async fn columns(
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

pub async fn expect_row(
    storage: &impl LockStorage,
    row: &RowKey,
    what: &str,
    want: &[&str],
) -> Result<(), String> {
    expect_eq(what, columns(storage, row, None, 10).await?, want)
}

pub async fn apply_writes(
    storage: &impl LockStorage,
    writes: Vec<CellWrite>,
) -> Result<(), String> {
    for cell in writes {
        storage.write_cell(cell).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub async fn remove(storage: &impl LockStorage, cell: CellDelete) -> Result<(), String> {
    storage.delete_cell(cell).await.map_err(|e| e.to_string())
}

pub async fn check_write_then_read(storage: &impl LockStorage, now: u64) -> Result<(), String> {
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

pub async fn check_order_limit_and_start(
    storage: &impl LockStorage,
    now: u64,
) -> Result<(), String> {
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

pub async fn check_rows_are_separate(storage: &impl LockStorage, now: u64) -> Result<(), String> {
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

pub async fn check_timestamps_decide(storage: &impl LockStorage, now: u64) -> Result<(), String> {
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

pub async fn check_ttls(storage: &impl LockStorage, now: u64) -> Result<(), String> {
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

pub async fn run_checks(storage: &impl LockStorage) -> Result<(), String> {
    let now = wall_clock().as_micros();
    check_write_then_read(storage, now).await?;
    check_order_limit_and_start(storage, now).await?;
    check_rows_are_separate(storage, now).await?;
    check_timestamps_decide(storage, now).await?;
    check_ttls(storage, now).await
}

pub async fn check_missing_table_is_reported(config: &CassandraConfig) -> Result<(), String> {
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
