//! The time service's `TryUpdateGlobalTime` (docs/algorithm.md, section 12.1).

use crate::column::ColumnName;
use crate::error::Error;
use crate::id::LockId;
use crate::storage::{CellWrite, RowKey, RowKind, RowRead, StorageRequest, StorageResponse};
use crate::time::{Instant, Now, Timestamp};

use super::{Io, Machine, Outgoing, RequestId};

/// How one `TryUpdateGlobalTime` ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GlobalTimeOutcome {
    /// Our local time was ahead: `GlobalTime` was written with it.
    Advanced(Timestamp),
    /// `GlobalTime` was already at or beyond our local time.
    AlreadyAhead(Timestamp),
    /// A read or write failed; the next period will try again.
    Failed(Error),
}

/// One run of `TryUpdateGlobalTime`: take the local time `l`, read `GlobalTime` `g`, and if
/// `l > g` write `GlobalTime = l` with write timestamp `l`.
///
/// Because the cell's value always equals its write timestamp and storage keeps the version
/// with the highest timestamp, the value never decreases (Theorem 5), whichever replicas of
/// the service run concurrently and however their clocks disagree. The value is stored as
/// 8 big-endian bytes; [`UpdateGlobalTime::decode`] reads it back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpdateGlobalTime {
    row: RowKey,
    local: Timestamp,
    io: Io,
    read: Option<RequestId>,
    write: Option<(RequestId, Timestamp)>,
    outcome: Option<GlobalTimeOutcome>,
}

impl UpdateGlobalTime {
    /// The column of the `GlobalTime` cell.
    pub const COLUMN: &'static str = "global_time";

    /// Starts a run in time domain `domain`; `now.timestamp` is the local time `l`.
    pub fn new(now: Now, domain: LockId) -> Self {
        let row = RowKey::new(RowKind::GlobalTime, domain);
        let mut update = UpdateGlobalTime {
            local: now.timestamp,
            io: Io::default(),
            read: None,
            write: None,
            outcome: None,
            row,
        };
        let read = RowRead::single(update.row.clone(), ColumnName::new(Self::COLUMN));
        update.read = Some(update.io.send(StorageRequest::Read(read)));
        update
    }

    /// The time stored in a `GlobalTime` cell value, or `None` if it is not 8 bytes.
    pub fn decode(value: &[u8]) -> Option<Timestamp> {
        let bytes: [u8; 8] = value.try_into().ok()?;
        Some(Timestamp::from_micros(u64::from_be_bytes(bytes)))
    }

    /// The value to store for `time`.
    pub fn encode(time: Timestamp) -> Vec<u8> {
        time.as_micros().to_be_bytes().to_vec()
    }

    /// The request that reads the current `GlobalTime` of `domain`.
    pub fn read_request(domain: LockId) -> RowRead {
        RowRead::single(
            RowKey::new(RowKind::GlobalTime, domain),
            ColumnName::new(Self::COLUMN),
        )
    }

    /// The global time found in a read's cells (zero if the cell is absent or malformed).
    pub fn global_time(cells: &[crate::storage::Cell]) -> Timestamp {
        cells
            .iter()
            .find(|cell| cell.column.as_str() == Self::COLUMN)
            .and_then(|cell| Self::decode(&cell.value))
            .unwrap_or(Timestamp::ZERO)
    }
}

impl Machine for UpdateGlobalTime {
    type Outcome = GlobalTimeOutcome;

    fn handle_response(
        &mut self,
        _now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        if self.read == Some(id) {
            self.read = None;
            let global = match response {
                Ok(StorageResponse::Cells(cells)) => Self::global_time(&cells),
                Ok(StorageResponse::Done) => Timestamp::ZERO,
                Err(error) => {
                    self.outcome = Some(GlobalTimeOutcome::Failed(error));
                    return;
                }
            };
            if self.local > global {
                let write = CellWrite {
                    row: self.row.clone(),
                    column: ColumnName::new(Self::COLUMN),
                    value: Self::encode(self.local),
                    timestamp: self.local,
                    ttl: None,
                };
                let id = self.io.send(StorageRequest::Write(write));
                self.write = Some((id, self.local));
            } else {
                self.outcome = Some(GlobalTimeOutcome::AlreadyAhead(global));
            }
        } else if let Some((expected, written)) = self.write
            && expected == id
        {
            self.write = None;
            self.outcome = Some(match response {
                Ok(_) => GlobalTimeOutcome::Advanced(written),
                Err(error) => GlobalTimeOutcome::Failed(error),
            });
        }
    }

    fn handle_timeout(&mut self, _now: Now) {}

    fn poll_request(&mut self) -> Option<Outgoing> {
        self.io.poll()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn poll_outcome(&mut self) -> Option<GlobalTimeOutcome> {
        self.outcome.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Cell;

    fn now(micros: u64) -> Now {
        Now::new(Instant::from_micros(micros), Timestamp::from_micros(micros))
    }

    fn cell(time: u64) -> Cell {
        Cell {
            column: ColumnName::new(UpdateGlobalTime::COLUMN),
            value: UpdateGlobalTime::encode(Timestamp::from_micros(time)),
            write_timestamp: Timestamp::from_micros(time),
        }
    }

    #[test]
    fn advances_when_local_time_is_ahead_with_value_equal_to_timestamp() {
        let mut update = UpdateGlobalTime::new(now(500), LockId::new("time").unwrap());
        let read = update.poll_request().unwrap();
        update.handle_response(
            now(501),
            read.id,
            Ok(StorageResponse::Cells(vec![cell(400)])),
        );
        let write = update.poll_request().unwrap();
        let StorageRequest::Write(cell_write) = &write.request else {
            panic!("expected a write, got {write:?}");
        };
        assert_eq!(cell_write.timestamp, Timestamp::from_micros(500));
        assert_eq!(
            UpdateGlobalTime::decode(&cell_write.value),
            Some(cell_write.timestamp)
        );
        assert_eq!(cell_write.ttl, None);
        update.handle_response(now(502), write.id, Ok(StorageResponse::Done));
        assert_eq!(
            update.poll_outcome(),
            Some(GlobalTimeOutcome::Advanced(Timestamp::from_micros(500)))
        );
    }

    #[test]
    fn leaves_a_later_global_time_alone() {
        let mut update = UpdateGlobalTime::new(now(500), LockId::new("time").unwrap());
        let read = update.poll_request().unwrap();
        update.handle_response(
            now(501),
            read.id,
            Ok(StorageResponse::Cells(vec![cell(900)])),
        );
        assert!(update.poll_request().is_none());
        assert_eq!(
            update.poll_outcome(),
            Some(GlobalTimeOutcome::AlreadyAhead(Timestamp::from_micros(900)))
        );
    }

    #[test]
    fn an_empty_cell_counts_as_the_epoch_and_failures_are_reported() {
        let mut update = UpdateGlobalTime::new(now(5), LockId::new("time").unwrap());
        let read = update.poll_request().unwrap();
        update.handle_response(now(6), read.id, Ok(StorageResponse::Cells(vec![])));
        let write = update.poll_request().unwrap();
        let error = Error::outcome_unknown("write", "timeout");
        update.handle_response(now(7), write.id, Err(error.clone()));
        assert_eq!(
            update.poll_outcome(),
            Some(GlobalTimeOutcome::Failed(error))
        );
        assert_eq!(UpdateGlobalTime::decode(&[1, 2, 3]), None);
    }
}
