//! The time service: `TryUpdateGlobalTime` (docs/algorithm.md, section "`TryUpdateGlobalTime`") and the rule
//! by which a client's clock follows `GlobalTime` (section "The clock that follows `GlobalTime`").

use crate::column::ColumnName;
use crate::error::Error;
use crate::id::LockId;
use crate::storage::{CellWrite, RowKey, RowKind, RowRead, StorageRequest, StorageResponse};
use crate::time::{MonotonicTime, Now, Timestamp};

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

    fn poll_timeout(&self) -> Option<MonotonicTime> {
        None
    }

    fn poll_outcome(&mut self) -> Option<GlobalTimeOutcome> {
        self.outcome.take()
    }
}

/// The rule by which a client's clock follows `GlobalTime`, as a plain value (the driver's
/// `GlobalTimeClock` keeps one behind a mutex; a model can embed one per client).
///
/// The thesis reads `GlobalTime` for every timestamp. That would put a storage read in every
/// acquisition, and when the replica whose clock ran ahead dies, `GlobalTime` freezes and
/// every owner gets the same time, so the queue degrades to owner-id order. A follower
/// instead takes in a `GlobalTime` value now and then ([`GlobalTimeFollower::observe`]) and
/// hands out `max(previous, global + monotonic time since it held, local)`
/// ([`GlobalTimeFollower::now`]): never decreasing, never behind the global time it last
/// saw, and advancing at the monotonic rate while `GlobalTime` is frozen.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GlobalTimeFollower {
    /// The anchor: a `GlobalTime` value (or our extrapolation) and when it held.
    anchor: Timestamp,
    anchored_at: MonotonicTime,
    /// The largest `GlobalTime` value taken in.
    seen: Timestamp,
    /// The last timestamp handed out.
    last: Timestamp,
}

impl GlobalTimeFollower {
    /// A follower that has seen no `GlobalTime` yet, starting from the local reading
    /// `start`.
    pub fn new(start: Now) -> Self {
        GlobalTimeFollower {
            anchor: Timestamp::ZERO,
            anchored_at: start.instant,
            seen: Timestamp::ZERO,
            last: start.timestamp,
        }
    }

    /// Takes in a `GlobalTime` value known by `as_of` (the instant its read returned, or
    /// its own write was acknowledged; anchoring it earlier would run the clock ahead of
    /// every local clock by up to the request's latency, for good). The anchor only moves
    /// when the value is ahead of where the follower would be by then, so re-reading a
    /// frozen value changes nothing and the clock keeps moving.
    pub fn observe(&mut self, global: Timestamp, as_of: MonotonicTime) {
        let followed = self.anchor + as_of.saturating_duration_since(self.anchored_at);
        if global > followed {
            self.anchor = global;
            self.anchored_at = as_of;
        }
        self.seen = self.seen.max(global);
    }

    /// The time to use now, given the local clock's reading `local`: its instant, and the
    /// largest of the followed `GlobalTime`, the local timestamp and the last timestamp
    /// handed out.
    pub fn now(&mut self, local: Now) -> Now {
        let followed = self.anchor + local.instant.saturating_duration_since(self.anchored_at);
        let timestamp = followed.max(local.timestamp).max(self.last);
        self.last = timestamp;
        Now::new(local.instant, timestamp)
    }

    /// The largest `GlobalTime` value taken in.
    pub fn last_global(&self) -> Timestamp {
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Cell;

    fn now(micros: u64) -> Now {
        Now::new(
            MonotonicTime::from_micros(micros),
            Timestamp::from_micros(micros),
        )
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

#[cfg(test)]
mod follower_tests {
    use super::*;
    use std::time::Duration;

    fn at(instant: u64, timestamp: u64) -> Now {
        Now::new(
            MonotonicTime::from_micros(instant),
            Timestamp::from_micros(timestamp),
        )
    }

    #[test]
    fn a_follower_jumps_to_a_global_time_ahead_and_moves_on_at_the_monotonic_rate() {
        let mut follower = GlobalTimeFollower::new(at(0, 1_000));
        assert_eq!(follower.now(at(10, 1_010)).timestamp.as_micros(), 1_010);
        follower.observe(
            Timestamp::from_micros(50_000),
            MonotonicTime::from_micros(20),
        );
        assert_eq!(follower.last_global().as_micros(), 50_000);
        // 30 µs after the anchor; the local clock is far behind.
        assert_eq!(follower.now(at(50, 1_050)).timestamp.as_micros(), 50_030);
        // The same frozen value read again moves nothing: the clock keeps going.
        follower.observe(
            Timestamp::from_micros(50_000),
            MonotonicTime::from_micros(1_000),
        );
        assert_eq!(follower.now(at(1_020, 2_020)).timestamp.as_micros(), 51_000);
        // A local clock that overtakes the global time wins.
        assert_eq!(
            follower.now(at(1_030, 90_000)).timestamp.as_micros(),
            90_000
        );
    }

    #[test]
    fn a_follower_never_goes_back() {
        let mut follower = GlobalTimeFollower::new(at(0, 5_000));
        follower.observe(Timestamp::from_micros(9_000), MonotonicTime::from_micros(0));
        let first = follower.now(at(100, 5_100)).timestamp;
        // A smaller GlobalTime, and a local clock stepped back: still no step back.
        follower.observe(Timestamp::from_micros(1), MonotonicTime::from_micros(200));
        let second = follower.now(at(100, 10)).timestamp;
        assert!(second >= first, "{second:?} after {first:?}");
        assert_eq!(follower.last_global().as_micros(), 9_000);
        let later = follower.now(at(100 + 1_000, 10)).timestamp;
        assert_eq!(later, first + Duration::from_micros(1_000));
    }
}
