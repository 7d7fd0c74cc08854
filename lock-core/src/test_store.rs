//! Test support, not a stable API: a deterministic single-node store for the machines' tests
//! and the driver's (`fair-lock`): last-write-wins cells with tombstones and TTLs, judged at
//! timestamps the test passes in. It is public only so that the driver's crate can test
//! against the same store; it may change in any release. The full quorum simulator is
//! `lock-storage-memory`.

use std::collections::BTreeMap;

use crate::column::ColumnName;
use crate::storage::{
    Cell, CellDelete, CellWrite, Expiry, RowKey, RowRead, StorageRequest, StorageResponse,
    VersionRef,
};
use crate::time::Timestamp;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Version {
    value: Vec<u8>,
    timestamp: Timestamp,
    tombstone: bool,
    expiry: Option<Expiry>,
}

impl Version {
    fn live(&self, now: Timestamp) -> bool {
        !self.tombstone && self.expiry.is_none_or(|expiry| now.as_micros() < expiry.at)
    }

    /// The version as the merge rule sees it (expiry in microseconds of the store's clock,
    /// tombstones without a deletion time).
    fn as_merged(&self) -> VersionRef<'_> {
        if self.tombstone {
            VersionRef::tombstone(self.timestamp, 0)
        } else {
            VersionRef::live(self.timestamp, &self.value, self.expiry)
        }
    }

    /// True if `self` replaces `other` by lock-core's merge rule ([`crate::storage::merge`]).
    fn beats(&self, other: &Version) -> bool {
        self.as_merged().supersedes(&other.as_merged())
    }
}

/// The cells, keyed by row and column.
#[derive(Debug, Default)]
pub struct Cells(BTreeMap<(RowKey, ColumnName), Version>);

impl Cells {
    fn put(&mut self, row: RowKey, column: ColumnName, version: Version) {
        let key = (row, column);
        if self.0.get(&key).is_none_or(|old| version.beats(old)) {
            self.0.insert(key, version);
        }
    }

    /// Applies one request at wall time `now`.
    pub fn apply(&mut self, request: StorageRequest, now: Timestamp) -> StorageResponse {
        match request {
            StorageRequest::Write(CellWrite {
                row,
                column,
                value,
                timestamp,
                ttl,
            }) => {
                let expiry = ttl.map(|ttl| {
                    let micros = u64::try_from(ttl.as_duration().as_micros()).unwrap_or(u64::MAX);
                    Expiry::after(now.as_micros(), micros)
                });
                let version = Version {
                    value,
                    timestamp,
                    tombstone: false,
                    expiry,
                };
                self.put(row, column, version);
                StorageResponse::Done
            }
            StorageRequest::Delete(CellDelete {
                row,
                column,
                timestamp,
            }) => {
                let version = Version {
                    value: Vec::new(),
                    timestamp,
                    tombstone: true,
                    expiry: None,
                };
                self.put(row, column, version);
                StorageResponse::Done
            }
            StorageRequest::Read(read) => StorageResponse::Cells(self.read(&read, now)),
        }
    }

    pub fn read(&self, read: &RowRead, now: Timestamp) -> Vec<Cell> {
        self.0
            .iter()
            .filter(|((row, column), _)| {
                *row == read.row && read.start.as_ref().is_none_or(|start| column >= start)
            })
            .filter(|(_, version)| version.live(now))
            .take(read.limit.get() as usize)
            .map(|((_, column), version)| Cell {
                column: column.clone(),
                value: version.value.clone(),
                write_timestamp: version.timestamp,
            })
            .collect()
    }

    /// Live cells of `row`, whatever their number.
    pub fn live_columns(&self, row: &RowKey, now: Timestamp) -> Vec<ColumnName> {
        self.0
            .iter()
            .filter(|((cell_row, _), version)| cell_row == row && version.live(now))
            .map(|((_, column), _)| column.clone())
            .collect()
    }
}
