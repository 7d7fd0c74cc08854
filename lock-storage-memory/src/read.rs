//! How a read's coordinator merges the replicas' answers and decides what to repair.

use lock_core::ColumnName;
use lock_core::storage::Cell;

use crate::id::ReplicaId;
use crate::replica::RowSlice;
use crate::version::{CellState, CellVersion, best};

/// The outcome of merging the answers of a read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resolution {
    /// The first `limit` live cells of the merged row, in column order.
    pub(crate) cells: Vec<Cell>,
    /// For each answering replica that was missing a merged version (or held a worse one),
    /// the versions to send it.
    pub(crate) repairs: Vec<(ReplicaId, RowSlice)>,
}

/// Merges the replicas' slices column by column with [`best`], stopping after the `limit`-th
/// live cell. Only the columns walked so far are considered for repair, as Cassandra repairs
/// what it read.
pub(crate) fn resolve(slices: &[(ReplicaId, RowSlice)], limit: u32) -> Resolution {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if let Some(((_, first), others)) = slices.split_first()
        && others.iter().all(|(_, slice)| slice == first)
    {
        return Resolution {
            cells: live_cells(first, limit),
            repairs: Vec::new(),
        };
    }
    let mut cursors = vec![0_usize; slices.len()];
    let mut resolution = Resolution::default();
    while resolution.cells.len() < limit {
        let Some(column) = next_column(slices, &cursors) else {
            break;
        };
        let mut winner: Option<CellVersion> = None;
        for ((_, slice), &cursor) in slices.iter().zip(&cursors) {
            if let Some(version) = version_at(slice, cursor, &column) {
                winner = Some(match winner {
                    Some(best_so_far) => best(best_so_far, version.clone()),
                    None => version.clone(),
                });
            }
        }
        let Some(winner) = winner else {
            break;
        };
        for ((replica, slice), cursor) in slices.iter().zip(cursors.iter_mut()) {
            let held = version_at(slice, *cursor, &column);
            if held.is_some() {
                *cursor += 1;
            }
            if held != Some(&winner) {
                add_repair(&mut resolution.repairs, *replica, &column, &winner);
            }
        }
        if let CellState::Live { value, .. } = &winner.state {
            resolution.cells.push(Cell {
                column,
                value: value.to_vec(),
                write_timestamp: winner.timestamp,
            });
        }
    }
    resolution
}

/// The first `limit` live cells of a slice that every replica agrees on.
fn live_cells(slice: &RowSlice, limit: usize) -> Vec<Cell> {
    slice
        .iter()
        .filter_map(|(column, version)| match &version.state {
            CellState::Live { value, .. } => Some(Cell {
                column: column.clone(),
                value: value.to_vec(),
                write_timestamp: version.timestamp,
            }),
            CellState::Tombstone { .. } => None,
        })
        .take(limit)
        .collect()
}

/// The smallest column name under the cursors.
fn next_column(slices: &[(ReplicaId, RowSlice)], cursors: &[usize]) -> Option<ColumnName> {
    slices
        .iter()
        .zip(cursors)
        .filter_map(|((_, slice), &cursor)| slice.get(cursor).map(|(column, _)| column))
        .min()
        .cloned()
}

/// The version under `cursor` if it is the one of `column`.
fn version_at<'a>(
    slice: &'a RowSlice,
    cursor: usize,
    column: &ColumnName,
) -> Option<&'a CellVersion> {
    slice
        .get(cursor)
        .filter(|(held, _)| held == column)
        .map(|(_, version)| version)
}

fn add_repair(
    repairs: &mut Vec<(ReplicaId, RowSlice)>,
    replica: ReplicaId,
    column: &ColumnName,
    winner: &CellVersion,
) {
    let cell = (column.clone(), winner.clone());
    match repairs.iter_mut().find(|(target, _)| *target == replica) {
        Some((_, cells)) => cells.push(cell),
        None => repairs.push((replica, vec![cell])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::Timestamp;

    fn live(column: &str, timestamp: u64, value: &str) -> (ColumnName, CellVersion) {
        (
            ColumnName::new(column),
            CellVersion {
                timestamp: Timestamp::from_micros(timestamp),
                state: CellState::Live {
                    value: value.as_bytes().into(),
                    expires_at: None,
                },
            },
        )
    }

    fn dead(column: &str, timestamp: u64) -> (ColumnName, CellVersion) {
        (
            ColumnName::new(column),
            CellVersion {
                timestamp: Timestamp::from_micros(timestamp),
                state: CellState::Tombstone { deleted_at: 0 },
            },
        )
    }

    fn columns(resolution: &Resolution) -> Vec<&str> {
        resolution
            .cells
            .iter()
            .map(|cell| cell.column.as_str())
            .collect()
    }

    #[test]
    fn a_newer_tombstone_on_one_replica_hides_the_cell_and_the_read_goes_on() {
        let slices = vec![
            (ReplicaId(0), vec![live("a", 1, "x"), live("b", 1, "y")]),
            (ReplicaId(1), vec![dead("a", 2)]),
        ];
        let resolution = resolve(&slices, 1);
        assert_eq!(columns(&resolution), ["b"]);
        assert_eq!(
            resolution.repairs,
            vec![
                (ReplicaId(0), vec![dead("a", 2)]),
                (ReplicaId(1), vec![live("b", 1, "y")]),
            ]
        );
    }

    #[test]
    fn agreeing_replicas_need_no_repair_and_the_limit_is_respected() {
        let row = vec![live("a", 1, "x"), live("b", 1, "y"), live("c", 1, "z")];
        let slices = vec![(ReplicaId(0), row.clone()), (ReplicaId(2), row)];
        let resolution = resolve(&slices, 2);
        assert_eq!(columns(&resolution), ["a", "b"]);
        assert!(resolution.repairs.is_empty());
    }

    #[test]
    fn only_columns_up_to_the_limit_are_repaired() {
        let slices = vec![
            (ReplicaId(0), vec![live("a", 1, "x"), live("b", 1, "y")]),
            (ReplicaId(1), vec![]),
        ];
        let resolution = resolve(&slices, 1);
        assert_eq!(columns(&resolution), ["a"]);
        assert_eq!(
            resolution.repairs,
            vec![(ReplicaId(1), vec![live("a", 1, "x")])]
        );
    }
}
