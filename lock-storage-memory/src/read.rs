//! How a read's coordinator merges the replicas' answers and decides what to repair.

use lock_core::ColumnName;
use lock_core::storage::{Cell, RowRead};
use smallvec::SmallVec;

use crate::id::ReplicaId;
use crate::replica::{RowSlice, RowView};
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

/// What a read finds when every replica asked agrees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AgreedRead {
    /// The first `limit` live cells, in column order.
    pub(crate) cells: Vec<Cell>,
    /// The dead cells each replica scanned before it had them.
    pub(crate) dead: u64,
}

/// The answer to `read` if the replicas' rows (each judged by its own clock) hold the same
/// versions up to the read's last cell, walking them in step without copying them; `None`
/// as soon as two differ. Where it answers, [`resolve`] of the copied slices answers the
/// same and repairs nothing (it merges no further than that last cell either), and every
/// replica scanned `dead` dead cells; so a zero-latency read can take this path first.
pub(crate) fn read_agreed<'a>(
    mut views: impl Iterator<Item = RowView<'a>>,
    read: &RowRead,
) -> Option<AgreedRead> {
    let limit = usize::try_from(read.limit.get()).unwrap_or(usize::MAX);
    let lead_view = views.next()?;
    let mut lead = lead_view.walk_from(read.start.as_ref());
    let mut others: SmallVec<[_; 4]> = views
        .map(|view| (view.now, view.walk_from(read.start.as_ref())))
        .collect();
    let mut agreed = AgreedRead {
        cells: Vec::new(),
        dead: 0,
    };
    while agreed.cells.len() < limit {
        let next = lead.next();
        for (now, walk) in &mut others {
            let same = match (next, walk.next()) {
                (None, None) => true,
                (Some((column, version)), Some((other_column, other_version))) => {
                    column == other_column
                        && version.same_when_judged(lead_view.now, other_version, *now)
                }
                _ => false,
            };
            if !same {
                return None;
            }
        }
        let Some((column, version)) = next else {
            break;
        };
        match &version.state {
            CellState::Live { value, .. } if version.is_live_at(lead_view.now) => {
                agreed.cells.push(Cell {
                    column: column.clone(),
                    value: value.to_vec(),
                    write_timestamp: version.timestamp,
                });
            }
            _ => agreed.dead += 1,
        }
    }
    Some(agreed)
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
    use crate::replica::ReplicaStore;
    use lock_core::storage::{Expiry, RowKey, RowKind};
    use lock_core::{LockId, Timestamp};
    use proptest::prelude::*;

    fn live(column: &str, timestamp: u64, value: &str) -> (ColumnName, CellVersion) {
        (
            ColumnName::new(column),
            CellVersion {
                timestamp: Timestamp::from_micros(timestamp),
                state: CellState::Live {
                    value: value.as_bytes().into(),
                    expiry: None,
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

    /// One write a replica may or may not have received: column, timestamp, and a value
    /// (with an expiry second) or a delete.
    type Write = (u8, u64, Option<(u8, Option<Expiry>)>);

    fn version_of(&(_, timestamp, value): &Write, now: u64) -> CellVersion {
        CellVersion {
            timestamp: Timestamp::from_micros(timestamp),
            state: match value {
                Some((byte, expiry)) => CellState::Live {
                    value: vec![byte].into(),
                    expiry,
                },
                None => CellState::Tombstone { deleted_at: now },
            },
        }
    }

    fn row() -> RowKey {
        RowKey::new(RowKind::Queue, LockId::new("l").unwrap())
    }

    /// Replicas that each received some of `writes` (all of them where `everything`), at
    /// their own clock second.
    fn replicas(
        writes: &[Write],
        received: &[Vec<bool>],
        clocks: &[u64],
        gc_grace: u64,
    ) -> Vec<ReplicaStore> {
        let columns: Vec<ColumnName> = (0..8).map(|n| ColumnName::new(format!("c{n}"))).collect();
        received
            .iter()
            .zip(clocks)
            .map(|(mask, &now)| {
                let mut store = ReplicaStore::default();
                for (write, _) in writes.iter().zip(mask).filter(|(_, got)| **got) {
                    let column = &columns[usize::from(write.0 % 8)];
                    store.apply(&row(), column, version_of(write, now), now, gc_grace);
                }
                store
            })
            .collect()
    }

    proptest! {
        /// Where the in-step walk answers, copying every replica's slice and resolving it
        /// answers the same, repairs nothing, and scanned as many dead cells per replica;
        /// and replicas that received the same writes on the same second always agree.
        #[test]
        fn an_agreed_read_answers_as_the_full_merge_would(
            writes in prop::collection::vec(
                (
                    0u8..8,
                    1u64..6,
                    prop::option::of((
                        0u8..3,
                        prop::option::of((0u64..4, 1u64..4).prop_map(|(at, ttl)| Expiry::after(at, ttl))),
                    )),
                ),
                0..24,
            ),
            received in prop::collection::vec(prop::collection::vec(prop::bool::weighted(0.9), 24), 1..4),
            clocks in prop::collection::vec(0u64..10, 3),
            same_everywhere in any::<bool>(),
            gc_grace in 0u64..4,
            start in prop::option::of(0u8..8),
            limit in 1u32..5,
        ) {
            let (received, clocks) = if same_everywhere {
                (vec![vec![true; 24]; received.len()], vec![clocks[0]; received.len()])
            } else {
                (received.clone(), clocks[..received.len()].to_vec())
            };
            let read = RowRead {
                row: row(),
                start: start.map(|n| ColumnName::new(format!("c{n}"))),
                limit: std::num::NonZeroU32::new(limit).unwrap(),
            };
            let mut stores = replicas(&writes, &received, &clocks, gc_grace);
            let read_at: Vec<u64> = clocks.iter().map(|now| now + 1).collect();
            let mut slices = Vec::new();
            let mut dead_counts = Vec::new();
            for (index, (store, &now)) in stores.clone().iter_mut().zip(&read_at).enumerate() {
                let (slice, dead) = store.read(&read, now, gc_grace);
                slices.push((ReplicaId(index), slice));
                dead_counts.push(dead);
            }
            for (store, &now) in stores.iter_mut().zip(&read_at) {
                store.purge_row(&read.row, now, gc_grace);
            }
            let views: Vec<_> = stores.iter().zip(&read_at).map(|(store, &now)| store.view(&read.row, now)).collect();
            let agreed = read_agreed(views.into_iter(), &read);
            if same_everywhere {
                prop_assert!(agreed.is_some());
            }
            if let Some(agreed) = agreed {
                let resolution = resolve(&slices, limit);
                prop_assert_eq!(&agreed.cells, &resolution.cells);
                prop_assert!(resolution.repairs.is_empty());
                prop_assert!(dead_counts.iter().all(|&dead| dead == agreed.dead), "{:?} vs {}", dead_counts, agreed.dead);
            }
        }
    }
}
