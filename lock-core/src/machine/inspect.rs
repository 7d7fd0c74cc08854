//! Inspection of one lock's rows, for operators.

use std::time::Duration;

use crate::column::{ColumnName, MainCellValue, QueueColumn};
use crate::config::ValidConfig;
use crate::error::Error;
use crate::id::{LockId, OwnerId};
use crate::storage::{Cell, RowKey, RowKind, RowRead, StorageRequest, StorageResponse};
use crate::time::{MonotonicTime, Now, Timestamp};

use super::{FencingToken, Io, Machine, Outgoing, Release, RequestId};

/// What an operator sees of one lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockReport {
    /// The lock.
    pub lock_id: LockId,
    /// The owner holding it: the owner of the only live main cell (a dead holder's too,
    /// until that cell expires: see [`CellReport::stale`]), or, among several, of the only
    /// one whose owner is not in the queue (waiters waiting in the main row keep their
    /// queue cells, a holder leaves the queue: [`crate::LockConfig::wait_in_main_row`]).
    /// Otherwise an acquisition is being decided, and no holder is named.
    pub holder: Option<OwnerId>,
    /// Every live main cell (more than one means an acquisition is being decided, or owners
    /// waiting in the main row).
    pub main: Vec<CellReport>,
    /// Live queue cells in queue order.
    pub queue: Vec<QueueEntry>,
    /// Live shadow cells (baseline and combined modes).
    pub shadow: Vec<CellReport>,
    /// The fence's value: the highest fencing token handed out so far.
    pub fence: Option<FencingToken>,
    /// Cells whose names (or, for main and shadow cells, values) cannot be owner ids or queue
    /// columns: written by something else.
    pub malformed: Vec<ColumnName>,
    /// True if a row had more live cells than the inspection reads.
    pub truncated: bool,
}

impl LockReport {
    /// A release that deletes every cell of `owner` found in this report, or `None` if it
    /// has none. Meant for an administrator removing a stuck owner.
    ///
    /// The tombstones are dated `lease_ttl + 2 × max_clock_skew` into the future, above any
    /// renewal the owner can still send before its own deadline, so a live but stuck owner
    /// cannot revive its cells; its next renewal's read-back finds them gone and it reports
    /// [`super::LeaseStatus::Lost`]. Queue columns carry fresh owner ids, so their future
    /// tombstones affect no one else; a main cell's seat is retired by its locker once the
    /// lease is lost, so no later acquisition writes under that future tombstone either.
    pub fn force_release(&self, now: Now, config: ValidConfig, owner: &OwnerId) -> Option<Release> {
        let mut cells = Vec::new();
        for (kind, cells_of_kind) in [(RowKind::Main, &self.main), (RowKind::Shadow, &self.shadow)]
        {
            for cell in cells_of_kind.iter().filter(|cell| cell.owner == *owner) {
                cells.push((RowKey::new(kind, self.lock_id.clone()), cell.column.clone()));
            }
        }
        for entry in self.queue.iter().filter(|entry| entry.owner == *owner) {
            let queue_column = QueueColumn::new(entry.enqueued_at, entry.owner.clone());
            cells.push((
                RowKey::new(RowKind::Queue, self.lock_id.clone()),
                queue_column.encode(),
            ));
        }
        if cells.is_empty() {
            return None;
        }
        let margin = (config.config().lease_ttl)
            .saturating_add(config.config().max_clock_skew.saturating_mul(2));
        let floor = now.timestamp + margin;
        Some(Release::new(now, config, cells, floor))
    }
}

/// One live main or shadow cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CellReport {
    /// Its column: the seat of the acquisition that wrote it (for the queue algorithm) or
    /// its owner id (for the baseline algorithm).
    pub column: ColumnName,
    /// Whose cell it is: the owner id in its value, or its column if it has no value.
    pub owner: OwnerId,
    /// The queue column its value carries ([`MainCellValue::queue_column`]): its owner's
    /// place in the queue when it wrote the cell, which tells an owner waiting in the main
    /// row from a competing one ([`crate::LockConfig::wait_in_main_row`]: an owner waits
    /// only for cells whose columns sort before its own). `None` for a value that is a bare
    /// owner id, and for a cell without a value (the baseline algorithm's).
    pub queue_column: Option<QueueColumn>,
    /// When it was last written (acquired or renewed).
    pub last_write: Timestamp,
    /// True if it has not been renewed for longer than a live owner would let pass: its
    /// owner is probably dead, and the cell will expire within `lease_ttl`.
    pub stale: bool,
}

/// One live queue cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueEntry {
    /// 0 for the head of the queue.
    pub position: usize,
    /// Whose place it is.
    pub owner: OwnerId,
    /// When the owner took its place.
    pub enqueued_at: Timestamp,
    /// How long ago that was, by the inspecting clock.
    pub age: Duration,
    /// When the cell was last written (enqueued or renewed).
    pub last_write: Timestamp,
    /// As for [`CellReport::stale`].
    pub stale: bool,
}

/// Reads a lock's main, queue and shadow rows and its fence, all at once, and reports.
///
/// A cell counts as *stale* when its last write is older than `renew_every +
/// request_timeout + max_clock_skew`: a live owner would have rewritten it by then.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inspect {
    config: ValidConfig,
    lock_id: LockId,
    limit: u32,
    now: Timestamp,
    io: Io,
    pending: Vec<(RequestId, RowKind)>,
    rows: Vec<(RowKind, Vec<Cell>)>,
    outcome: Option<Result<LockReport, Error>>,
}

impl Inspect {
    /// Starts inspecting `lock_id`, reading at most `limit` cells per row.
    pub fn new(now: Now, config: ValidConfig, lock_id: LockId, limit: u32) -> Self {
        let mut inspect = Inspect {
            config,
            limit: limit.max(2),
            now: now.timestamp,
            io: Io::default(),
            pending: Vec::new(),
            rows: Vec::new(),
            outcome: None,
            lock_id,
        };
        for kind in [RowKind::Main, RowKind::Queue, RowKind::Shadow] {
            let read = RowRead::first(RowKey::new(kind, inspect.lock_id.clone()), inspect.limit);
            let id = inspect.io.send(StorageRequest::Read(read));
            inspect.pending.push((id, kind));
        }
        let fence = inspect
            .io
            .send(StorageRequest::Read(FencingToken::read(&inspect.lock_id)));
        inspect.pending.push((fence, RowKind::Fence));
        inspect
    }

    fn stale(&self, last_write: Timestamp) -> bool {
        let config = self.config.config();
        let patience = self
            .config
            .renew_every()
            .saturating_add(config.request_timeout)
            .saturating_add(config.max_clock_skew);
        self.now.saturating_duration_since(last_write) > patience
    }

    fn cells(&self, kind: RowKind) -> &[Cell] {
        self.rows
            .iter()
            .find(|(row, _)| *row == kind)
            .map_or(&[], |(_, cells)| cells.as_slice())
    }

    fn owner_cells(&self, kind: RowKind, malformed: &mut Vec<ColumnName>) -> Vec<CellReport> {
        let mut reports = Vec::new();
        for cell in self.cells(kind) {
            // A cell without a value is named by its owner id; a main or shadow cell's value
            // names its owner ([`MainCellValue`]).
            let owner = if cell.value.is_empty() {
                OwnerId::new(cell.column.as_str())
                    .ok()
                    .map(|owner| (owner, None))
            } else {
                MainCellValue::decode(&cell.value)
                    .ok()
                    .map(|value| (value.owner().clone(), value.queue_column().cloned()))
            };
            match owner {
                Some((owner, queue_column)) => reports.push(CellReport {
                    column: cell.column.clone(),
                    owner,
                    queue_column,
                    last_write: cell.write_timestamp,
                    stale: self.stale(cell.write_timestamp),
                }),
                None => malformed.push(cell.column.clone()),
            }
        }
        reports
    }

    fn report(&self) -> LockReport {
        let mut malformed = Vec::new();
        let main = self.owner_cells(RowKind::Main, &mut malformed);
        let shadow = self.owner_cells(RowKind::Shadow, &mut malformed);
        let mut queue = Vec::new();
        for cell in self.cells(RowKind::Queue) {
            match QueueColumn::decode(cell.column.as_str()) {
                Ok(column) => queue.push(QueueEntry {
                    position: queue.len(),
                    age: self.now.saturating_duration_since(column.timestamp),
                    owner: column.owner,
                    enqueued_at: column.timestamp,
                    last_write: cell.write_timestamp,
                    stale: self.stale(cell.write_timestamp),
                }),
                Err(_) => malformed.push(cell.column.clone()),
            }
        }
        // Not necessarily the head of the queue: a waiter whose queue timestamp ties with
        // (or, delayed, precedes) the holder's sorts ahead of it. Nor necessarily queued at
        // all: a holder that died before its first renewal keeps its main cell for the lease
        // TTL but its queue cell only for the shorter waiter TTL.
        let holder = match main.as_slice() {
            [only] => Some(only.owner.clone()),
            // Waiting in the main row, owners first in the queue keep their main cells next
            // to the holder's, and the holder has left the queue: the one main cell whose
            // owner is not queued is the holder's.
            _ => {
                let mut unqueued = main
                    .iter()
                    .filter(|cell| queue.iter().all(|entry| entry.owner != cell.owner));
                match (unqueued.next(), unqueued.next()) {
                    (Some(holder), None) => Some(holder.owner.clone()),
                    _ => None,
                }
            }
        };
        let truncated = [RowKind::Main, RowKind::Queue, RowKind::Shadow]
            .iter()
            .any(|kind| self.cells(*kind).len() >= self.limit as usize);
        LockReport {
            lock_id: self.lock_id.clone(),
            holder,
            main,
            queue,
            shadow,
            fence: FencingToken::seen(self.cells(RowKind::Fence)),
            malformed,
            truncated,
        }
    }
}

impl Machine for Inspect {
    type Outcome = Result<LockReport, Error>;

    fn handle_response(
        &mut self,
        _now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        let Some(index) = self.pending.iter().position(|(pending, _)| *pending == id) else {
            return;
        };
        let (_, kind) = self.pending.swap_remove(index);
        match response {
            Ok(StorageResponse::Cells(cells)) => self.rows.push((kind, cells)),
            Ok(StorageResponse::Done) => self.rows.push((kind, Vec::new())),
            Err(error) => {
                self.pending.clear();
                self.outcome = Some(Err(error));
                return;
            }
        }
        if self.pending.is_empty() {
            self.outcome = Some(Ok(self.report()));
        }
    }

    fn handle_timeout(&mut self, _now: Now) {}

    fn poll_request(&mut self) -> Option<Outgoing> {
        self.io.poll()
    }

    fn poll_timeout(&self) -> Option<MonotonicTime> {
        None
    }

    fn poll_outcome(&mut self) -> Option<Self::Outcome> {
        self.outcome.take()
    }
}
