//! Helpers shared by the integration tests.

use lock_core::storage::{Cell, CellDelete, CellWrite, RowKey, RowKind, RowRead, Ttl};
use lock_core::{ColumnName, LockId, LockStorage, Timestamp};
use lock_storage_memory::{CellState, CellVersion, MemoryClient, MemoryCluster, ReplicaId};

pub fn row(lock: &str) -> RowKey {
    RowKey::new(RowKind::Queue, LockId::new(lock).unwrap())
}

pub fn write(row: &RowKey, column: &str, timestamp: u64) -> CellWrite {
    CellWrite {
        row: row.clone(),
        column: ColumnName::new(column),
        value: column.as_bytes().to_vec(),
        timestamp: Timestamp::from_micros(timestamp),
        ttl: None,
    }
}

pub fn write_with_ttl(row: &RowKey, column: &str, timestamp: u64, ttl_secs: u32) -> CellWrite {
    CellWrite {
        ttl: Some(Ttl::from_secs(ttl_secs).unwrap()),
        ..write(row, column, timestamp)
    }
}

pub fn delete(row: &RowKey, column: &str, timestamp: u64) -> CellDelete {
    CellDelete {
        row: row.clone(),
        column: ColumnName::new(column),
        timestamp: Timestamp::from_micros(timestamp),
    }
}

pub fn names(cells: &[Cell]) -> Vec<&str> {
    cells.iter().map(|cell| cell.column.as_str()).collect()
}

/// The live columns of a whole row, as `client` reads them.
pub async fn read_names(client: &MemoryClient, row: &RowKey) -> Vec<String> {
    let cells = client
        .read_row(RowRead::first(row.clone(), 1000))
        .await
        .unwrap();
    cells
        .iter()
        .map(|cell| cell.column.as_str().to_owned())
        .collect()
}

/// What `replica` stores for `column` of `row`, if anything.
pub fn stored(
    cluster: &MemoryCluster,
    replica: usize,
    row: &RowKey,
    column: &str,
) -> Option<CellVersion> {
    cluster
        .replica_row(ReplicaId(replica), row)
        .unwrap()
        .into_iter()
        .find(|(name, _)| name.as_str() == column)
        .map(|(_, version)| version)
}

/// Whether `replica` stores a live-looking (not tombstone) version of `column`.
pub fn holds_value(cluster: &MemoryCluster, replica: usize, row: &RowKey, column: &str) -> bool {
    matches!(
        stored(cluster, replica, row, column),
        Some(CellVersion {
            state: CellState::Live { .. },
            ..
        })
    )
}
