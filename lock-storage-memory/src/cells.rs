//! A stored row's cells in column order, kept in the shape that suits how many there are.
//!
//! Most rows hold a cell or two (a main row, a fence, a queue of one), and a B-tree spends a
//! node of eleven slots on each of them: with millions of rows that is most of the
//! simulator's memory, and the page faults that fill it are most of its time. A row is a
//! sorted vector instead, which also suits a queue row holding the tombstones of recent
//! acquisitions: its new columns go last, and a read walks it from its first column, both
//! without touching the cold middle (and walking a vector is several times faster than
//! walking a tree). A row that grows past [`FEW_CELLS`] becomes a B-tree, where inserting
//! in the middle stays cheap (a vector's insert moves up to 224 KiB before that, some tens
//! of microseconds), and goes back to a vector once purging has shrunk it to half that.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::collections::btree_map;
use std::ops::Bound;
use std::slice;

use lock_core::ColumnName;

use crate::version::CellVersion;

/// The most cells a row keeps in a sorted vector: enough for the queue-read margin's
/// tombstones of a lock taken a thousand times a second.
const FEW_CELLS: usize = 4096;

/// One row's cell versions, sorted by column name, each column at most once. `FEW` is
/// [`FEW_CELLS`] but for tests, which change shape sooner.
#[derive(Clone, Debug)]
pub(crate) enum RowCells<const FEW: usize = FEW_CELLS> {
    /// Sorted by column, at most `FEW` long.
    Few(Vec<(ColumnName, CellVersion)>),
    /// More than `FEW / 2` cells.
    Many(BTreeMap<ColumnName, CellVersion>),
}

impl<const FEW: usize> Default for RowCells<FEW> {
    fn default() -> Self {
        RowCells::Few(Vec::new())
    }
}

impl<const FEW: usize> RowCells<FEW> {
    /// Stores `incoming` as the version of `column` if the row has none; otherwise lets
    /// `merge` combine it into the stored version. Returns the version stored afterwards.
    pub(crate) fn merge(
        &mut self,
        column: &ColumnName,
        incoming: CellVersion,
        merge: impl FnOnce(&mut CellVersion, CellVersion),
    ) -> &CellVersion {
        if let RowCells::Few(cells) = self
            && cells.len() == FEW
            && position(cells, column).is_err()
        {
            let many = std::mem::take(cells).into_iter().collect();
            *self = RowCells::Many(many);
        }
        match self {
            RowCells::Few(cells) => {
                let index = match position(cells, column) {
                    Ok(index) => {
                        merge(&mut cells[index].1, incoming);
                        index
                    }
                    Err(index) => {
                        if cells.capacity() == 0 {
                            // A new row's first cell: room for it alone (most rows stay so).
                            cells.reserve_exact(1);
                        }
                        cells.insert(index, (column.clone(), incoming));
                        index
                    }
                };
                &cells[index].1
            }
            RowCells::Many(cells) => match cells.entry(column.clone()) {
                btree_map::Entry::Occupied(entry) => {
                    let stored = entry.into_mut();
                    merge(stored, incoming);
                    stored
                }
                btree_map::Entry::Vacant(entry) => entry.insert(incoming),
            },
        }
    }

    /// Keeps only the versions for which `keep` is true.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&CellVersion) -> bool) {
        match self {
            RowCells::Few(cells) => cells.retain(|(_, version)| keep(version)),
            RowCells::Many(cells) => {
                cells.retain(|_, version| keep(version));
                if cells.len() <= FEW / 2 {
                    *self = RowCells::Few(std::mem::take(cells).into_iter().collect());
                }
            }
        }
    }

    /// The versions from `start` (or the first column) on, in column order.
    pub(crate) fn walk_from(&self, start: Option<&ColumnName>) -> Walk<'_> {
        match self {
            RowCells::Few(cells) => {
                // A queue read's start (its floor) mostly precedes the whole row: look at the
                // first column before searching the row's cold middle.
                let from = match (start, cells.first()) {
                    (Some(start), Some((first, _))) if first < start => {
                        cells.partition_point(|(column, _)| column < start)
                    }
                    _ => 0,
                };
                Walk::Few(cells[from..].iter())
            }
            RowCells::Many(cells) => {
                let from = start.map_or(Bound::Unbounded, Bound::Included);
                Walk::Many(cells.range::<ColumnName, _>((from, Bound::Unbounded)))
            }
        }
    }

    /// All versions, in column order.
    pub(crate) fn iter(&self) -> Walk<'_> {
        self.walk_from(None)
    }
}

/// Where `column` is in `cells` (`Ok`), or where it would go (`Err`). New columns mostly
/// sort last (queue columns are named by their time), so the last one is looked at first:
/// a binary search would touch the row's cold middle to find that out.
fn position(cells: &[(ColumnName, CellVersion)], column: &ColumnName) -> Result<usize, usize> {
    let Some((last, _)) = cells.last() else {
        return Err(0);
    };
    match last.cmp(column) {
        Ordering::Less => Err(cells.len()),
        Ordering::Equal => Ok(cells.len() - 1),
        Ordering::Greater => cells.binary_search_by(|(stored, _)| stored.cmp(column)),
    }
}

/// The iterator of [`RowCells::walk_from`].
pub(crate) enum Walk<'a> {
    Few(slice::Iter<'a, (ColumnName, CellVersion)>),
    Many(btree_map::Range<'a, ColumnName, CellVersion>),
}

impl<'a> Iterator for Walk<'a> {
    type Item = (&'a ColumnName, &'a CellVersion);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Walk::Few(cells) => cells.next().map(|(column, version)| (column, version)),
            Walk::Many(cells) => cells.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{CellState, merge_into};
    use lock_core::Timestamp;
    use proptest::prelude::*;

    /// Column names drawn at random; appended ones come after them, as a queue's do.
    const COLUMNS: u16 = FEW as u16;

    /// The tests' vector limit: small, so that rows change shape within a few steps.
    const FEW: usize = 16;

    type Row = RowCells<FEW>;

    #[derive(Clone, Debug)]
    enum Step {
        Append { timestamp: u64 },
        Merge { column: u16, timestamp: u64 },
        RetainAfter(u64),
        WalkFrom(u16),
    }

    fn any_step() -> impl Strategy<Value = Step> {
        prop_oneof![
            30 => (0u64..1000).prop_map(|timestamp| Step::Append { timestamp }),
            10 => (0..COLUMNS, 0u64..1000).prop_map(|(column, timestamp)| Step::Merge { column, timestamp }),
            // Mostly light purges, so that rows grow past a vector; sometimes one that
            // shrinks them back.
            2 => (0u64..50).prop_map(Step::RetainAfter),
            1 => (500u64..1000).prop_map(Step::RetainAfter),
            4 => (0..COLUMNS * 4).prop_map(Step::WalkFrom),
        ]
    }

    fn name(column: u16) -> ColumnName {
        ColumnName::new(format!("c{column:05}"))
    }

    fn tombstone(timestamp: u64) -> CellVersion {
        CellVersion {
            timestamp: Timestamp::from_micros(timestamp),
            state: CellState::Tombstone { deleted_at: 0 },
        }
    }

    fn is_small(cells: &Row) -> bool {
        matches!(cells, RowCells::Few(_))
    }

    proptest! {
        /// Whatever its shape, a row answers as a B-tree map of its cells would.
        #[test]
        fn a_row_answers_as_a_btree_would(steps in prop::collection::vec(any_step(), 0..400)) {
            let mut row = Row::default();
            let mut model = BTreeMap::new();
            let mut appended = COLUMNS;
            for step in steps {
                let step = match step {
                    Step::Append { timestamp } => {
                        appended += 1;
                        Step::Merge { column: appended, timestamp }
                    }
                    step => step,
                };
                match step {
                    Step::Append { .. } => {}
                    Step::Merge { column, timestamp } => {
                        let stored = row.merge(&name(column), tombstone(timestamp), merge_into).clone();
                        let expected = model.entry(name(column)).or_insert_with(|| tombstone(timestamp));
                        merge_into(expected, tombstone(timestamp));
                        prop_assert_eq!(&stored, expected);
                    }
                    Step::RetainAfter(timestamp) => {
                        let keep = |version: &CellVersion| version.timestamp.as_micros() > timestamp;
                        row.retain(keep);
                        model.retain(|_, version| keep(version));
                    }
                    Step::WalkFrom(column) => {
                        let walked: Vec<_> = row.walk_from(Some(&name(column))).collect();
                        let expected: Vec<_> = model.range(name(column)..).collect();
                        prop_assert_eq!(walked, expected);
                    }
                }
                prop_assert_eq!(row.iter().collect::<Vec<_>>(), model.iter().collect::<Vec<_>>());
                match &row {
                    RowCells::Few(cells) => prop_assert!(cells.len() <= FEW),
                    RowCells::Many(cells) => prop_assert!(cells.len() > FEW / 2),
                }
            }
        }
    }

    /// Most rows keep one cell for good: a new row's vector has room for that cell alone,
    /// not the few slots a growing vector would reserve (with millions of rows, that is
    /// most of the simulator's memory).
    #[test]
    fn a_new_row_holds_room_for_its_one_cell_only() {
        let mut row = Row::default();
        row.merge(&name(1), tombstone(1), merge_into);
        let RowCells::Few(cells) = &row else {
            panic!("a row of one cell is a vector");
        };
        assert_eq!(cells.capacity(), 1);
        row.merge(&name(2), tombstone(2), merge_into);
        assert_eq!(row.iter().count(), 2);
    }

    #[test]
    fn a_row_grows_into_a_tree_and_shrinks_back() {
        let mut row = Row::default();
        for column in 0..=FEW as u16 {
            row.merge(&name(column), tombstone(u64::from(column)), merge_into);
        }
        assert!(!is_small(&row));
        row.retain(|version| version.timestamp.as_micros() < 3);
        assert!(is_small(&row));
        let columns: Vec<_> = row
            .iter()
            .map(|(column, _)| column.as_str().to_owned())
            .collect();
        assert_eq!(columns, ["c00000", "c00001", "c00002"]);
    }
}
