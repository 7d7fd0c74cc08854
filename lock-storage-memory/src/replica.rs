//! What one replica keeps on its "disk": rows of cell versions sorted by column name.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

use lock_core::ColumnName;
use lock_core::storage::{RowKey, RowRead};

use crate::cells::RowCells;
use crate::version::{CellVersion, merge_into};

/// One replica's answer to a read: its versions of the row's cells from the read's start
/// column to the end of the row, in column order, judged by its own clock (expired values
/// appear as tombstones).
pub(crate) type RowSlice = Vec<(ColumnName, CellVersion)>;

/// The rows one replica stores. Rows are found by key, never walked in order, so a hash
/// map does (with Fx, an unkeyed hasher: nothing about it varies from run to run, and it
/// costs a fraction of SipHash on every request).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReplicaStore {
    rows: HashMap<RowKey, StoredRow, FxBuildHasher>,
}

/// One replica's row as a read at second `now` of the replica's clock sees it, borrowed:
/// what [`ReplicaStore::read`] would copy out, for a coordinator that only needs to walk it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowView<'a> {
    stored: Option<&'a StoredRow>,
    /// The replica's clock, in seconds, by which expiry is judged.
    pub(crate) now: u64,
}

impl<'a> RowView<'a> {
    /// The row's versions from `start` (or its first column) on, in column order, unjudged.
    pub(crate) fn walk_from(
        self,
        start: Option<&ColumnName>,
    ) -> impl Iterator<Item = (&'a ColumnName, &'a CellVersion)> {
        self.stored
            .map(|stored| stored.cells.walk_from(start))
            .into_iter()
            .flatten()
    }
}

#[derive(Clone, Debug)]
struct StoredRow {
    cells: RowCells,
    /// The earliest second after which some version of the row may be purged.
    purge_after: u64,
}

impl Default for StoredRow {
    fn default() -> Self {
        StoredRow {
            cells: RowCells::default(),
            purge_after: u64::MAX,
        }
    }
}

impl StoredRow {
    /// Drops the tombstones and expired values whose grace period is over at second `now`
    /// (Cassandra does this in compaction; the simulator does it whenever it touches a row).
    fn purge(&mut self, now: u64, gc_grace_secs: u64) {
        if now <= self.purge_after {
            return;
        }
        self.cells
            .retain(|version| now <= version.kept_until(gc_grace_secs));
        self.purge_after = self
            .cells
            .iter()
            .map(|(_, version)| version.kept_until(gc_grace_secs))
            .min()
            .unwrap_or(u64::MAX);
    }
}

impl StoredRow {
    /// Merges `incoming` into the stored version as written, expired or not: like a
    /// Cassandra memtable, which reconciles cells without looking at a clock (an expired
    /// value becomes a tombstone only when read, or compacted).
    fn apply(&mut self, column: &ColumnName, incoming: CellVersion, now: u64, gc_grace_secs: u64) {
        self.purge(now, gc_grace_secs);
        let stored = self.cells.merge(column, incoming, merge_into);
        let kept_until = stored.kept_until(gc_grace_secs);
        self.purge_after = self.purge_after.min(kept_until);
    }
}

impl ReplicaStore {
    /// Merges `incoming` into the stored version of the cell (purging first what this
    /// replica's clock, second `now`, allows).
    pub(crate) fn apply(
        &mut self,
        row: &RowKey,
        column: &ColumnName,
        incoming: CellVersion,
        now: u64,
        gc_grace_secs: u64,
    ) {
        if let Some(stored) = self.rows.get_mut(row) {
            stored.apply(column, incoming, now, gc_grace_secs);
            return;
        }
        let mut stored = StoredRow::default();
        stored.apply(column, incoming, now, gc_grace_secs);
        self.rows.insert(row.clone(), stored);
    }

    /// Answers a read at second `now`: the whole rest of the row from the start column
    /// (so that the coordinator can merge exactly, as perfect short-read protection would),
    /// and how many dead cells this replica scanned before it had found `limit` live ones.
    pub(crate) fn read(&mut self, read: &RowRead, now: u64, gc_grace_secs: u64) -> (RowSlice, u64) {
        self.purge_row(&read.row, now, gc_grace_secs);
        let limit = u64::from(read.limit.get());
        let (mut live, mut dead) = (0_u64, 0_u64);
        let slice = self
            .view(&read.row, now)
            .walk_from(read.start.as_ref())
            .map(|(column, version)| {
                let version = version.clone().judged_at(now);
                if live < limit {
                    if version.is_tombstone() {
                        dead += 1;
                    } else {
                        live += 1;
                    }
                }
                (column.clone(), version)
            })
            .collect();
        (slice, dead)
    }

    /// Drops what `row` may purge at second `now`, as [`ReplicaStore::read`] does first;
    /// then [`ReplicaStore::view`] sees what a read would.
    pub(crate) fn purge_row(&mut self, row: &RowKey, now: u64, gc_grace_secs: u64) {
        if let Some(stored) = self.rows.get_mut(row) {
            stored.purge(now, gc_grace_secs);
        }
    }

    /// `row` as a read at second `now` sees it (after [`ReplicaStore::purge_row`]).
    pub(crate) fn view(&self, row: &RowKey, now: u64) -> RowView<'_> {
        RowView {
            stored: self.rows.get(row),
            now,
        }
    }

    /// The stored versions of a row, unjudged, in column order.
    pub(crate) fn row(&self, row: &RowKey) -> RowSlice {
        self.rows
            .get(row)
            .map(|stored| {
                stored
                    .cells
                    .iter()
                    .map(|(column, version)| (column.clone(), version.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets everything, as a replaced node with an empty disk.
    pub(crate) fn wipe(&mut self) {
        self.rows.clear();
    }

    /// Forgets when each row may next be purged, so that the next touch recomputes it: for
    /// a change of `gc_grace`.
    pub(crate) fn reschedule_purges(&mut self) {
        for row in self.rows.values_mut() {
            row.purge_after = 0;
        }
    }
}
