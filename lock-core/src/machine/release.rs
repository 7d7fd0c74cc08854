//! Release (docs/algorithm.md, section "Release"): delete the owner's cells.

use std::time::Duration;

use crate::column::ColumnName;
use crate::config::ValidConfig;
use crate::error::Error;
use crate::hint::{self, Successor};
use crate::storage::{CellDelete, RowKey, RowRead, StorageRequest, StorageResponse};
use crate::time::{MonotonicTime, Now, Timestamp};

use super::{Failures, Io, Machine, Outgoing, RequestId, Stamps};

/// Deletes a set of cells, all at once, each with a tombstone timestamp above every write
/// the owner made before, so that no renewal still in flight can bring a cell back.
///
/// A failed delete is retried after `retry_backoff` (doubling) at least `storage_retries`
/// times and for `storage_retry_window` since its first failure (no longer than the lease
/// it frees, when the release comes from a held lease: past that the cell is expiring
/// anyway); if it still fails, the outcome is that error and the cell is left to its TTL.
///
/// ```
/// use lock_core::machine::{Machine, Release};
/// use lock_core::storage::{RowKey, RowKind, StorageResponse};
/// use lock_core::{ColumnName, LockConfig, LockId, Now, MonotonicTime, Timestamp};
///
/// let config = LockConfig::default().validate().unwrap();
/// let row = RowKey::new(RowKind::Main, LockId::new("l").unwrap());
/// let now = Now::new(MonotonicTime::ZERO, Timestamp::from_micros(10));
/// let mut release = Release::new(now, config, [(row, ColumnName::new("owner"))], Timestamp::ZERO);
/// let delete = release.poll_request().unwrap();
/// release.handle_response(now, delete.id, Ok(StorageResponse::Done));
/// assert_eq!(release.poll_outcome(), Some(Ok(())));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    config: ValidConfig,
    deletes: Vec<Delete>,
    /// A queue read sent with the deletes to find whom to hint ([`Release::find_successors`]).
    /// Boxed: most releases have none.
    successor_read: Option<Box<SuccessorRead>>,
    stamps: Stamps,
    io: Io,
    outcome: Option<Result<(), Error>>,
    finished: bool,
    /// When retries of failed deletes stop, past `storage_retries`, at the latest (the end
    /// of the lease being released); `None` for the whole retry window. Kept only with a
    /// retry window, which alone reads it.
    retries_end: Option<MonotonicTime>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Delete {
    row: RowKey,
    column: ColumnName,
    state: DeleteState,
    failures: Failures,
}

/// The queue read of a release that wakes the owners behind it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SuccessorRead {
    /// The read, until it is answered.
    in_flight: Option<RequestId>,
    /// The releasing owner's queue column, passed over in the answer.
    own: ColumnName,
    found: Vec<Successor>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum DeleteState {
    InFlight(RequestId),
    RetryAt(MonotonicTime),
    Done,
    Failed(Error),
}

impl Release {
    /// Starts deleting `cells`, with timestamps above `after` (the owner's last write).
    pub fn new(
        now: Now,
        config: ValidConfig,
        cells: impl IntoIterator<Item = (RowKey, ColumnName)>,
        after: Timestamp,
    ) -> Self {
        let mut release = Release {
            config,
            deletes: Vec::new(),
            successor_read: None,
            stamps: Stamps::after(after),
            io: Io::default(),
            outcome: None,
            finished: false,
            retries_end: None,
        };
        for (row, column) in cells {
            let id = release.send_delete(now, &row, &column);
            release.deletes.push(Delete {
                row,
                column,
                state: DeleteState::InFlight(id),
                failures: Failures::default(),
            });
        }
        release.settle();
        release
    }

    /// Stops retrying failed deletes, past `storage_retries`, at `until` if the retry
    /// window would end later: the end of the lease being released (its cells expire then
    /// whatever the release does), or now for a cleanup that its caller waits for.
    pub(crate) fn retrying_until(mut self, until: MonotonicTime) -> Self {
        if !self.config.config().storage_retry_window.is_zero() {
            self.retries_end = Some(until);
        }
        self
    }

    /// Also reads the queue with `read` (sent now, with the deletes) to find the first
    /// [`hint::SUCCESSORS_HINTED`] owners queued that listen for wake-up hints, passing
    /// over `own`, the releasing owner's queue column ([`Release::successors_found`]). The
    /// outcome then waits for its answer too; a failed read finds nobody and is not
    /// retried.
    pub fn find_successors(&mut self, read: RowRead, own: ColumnName) {
        let in_flight = Some(self.io.send(StorageRequest::Read(read)));
        self.successor_read = Some(Box::new(SuccessorRead {
            in_flight,
            own,
            found: Vec::new(),
        }));
    }

    /// The owners the queue read of [`Release::find_successors`] found, first in line
    /// first: whom to send wake-up hints once the outcome is in.
    pub fn successors_found(&self) -> &[Successor] {
        self.successor_read
            .as_ref()
            .map_or(&[], |read| read.found.as_slice())
    }

    /// How many requests this release has issued.
    pub fn requests_sent(&self) -> u32 {
        self.io.sent()
    }

    /// The last timestamp this release used.
    pub fn last_timestamp(&self) -> Timestamp {
        self.stamps.last()
    }

    fn send_delete(&mut self, now: Now, row: &RowKey, column: &ColumnName) -> RequestId {
        let timestamp = self.stamps.next(now.timestamp);
        self.io.send(StorageRequest::Delete(CellDelete {
            row: row.clone(),
            column: column.clone(),
            timestamp,
        }))
    }

    fn settle(&mut self) {
        if self.outcome.is_some() || self.finished {
            return;
        }
        if self
            .successor_read
            .as_ref()
            .is_some_and(|read| read.in_flight.is_some())
        {
            return;
        }
        let mut result = Ok(());
        for delete in &self.deletes {
            match &delete.state {
                DeleteState::Done => {}
                DeleteState::Failed(error) => result = Err(error.clone()),
                DeleteState::InFlight(_) | DeleteState::RetryAt(_) => return,
            }
        }
        self.outcome = Some(result);
    }

    fn retry_cap(&self) -> Duration {
        self.config.effective_lease()
    }
}

impl Machine for Release {
    type Outcome = Result<(), Error>;

    fn handle_response(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        if let Some(read) = &mut self.successor_read
            && read.in_flight == Some(id)
        {
            read.in_flight = None;
            if let Ok(StorageResponse::Cells(cells)) = response {
                read.found = hint::listeners_queued(&cells, Some(&read.own))
                    .take(hint::SUCCESSORS_HINTED)
                    .collect();
            }
            self.settle();
            return;
        }
        let cap = self.retry_cap();
        let config = self.config.config();
        let Some(delete) = self
            .deletes
            .iter_mut()
            .find(|delete| delete.state == DeleteState::InFlight(id))
        else {
            return;
        };
        delete.state = match response {
            Ok(_) => DeleteState::Done,
            Err(error) => {
                match delete
                    .failures
                    .record(now.instant, &error, config, cap, self.retries_end)
                {
                    Some(pause) => DeleteState::RetryAt(now.instant + pause),
                    None => DeleteState::Failed(error),
                }
            }
        };
        self.settle();
    }

    fn handle_timeout(&mut self, now: Now) {
        let due: Vec<usize> = self
            .deletes
            .iter()
            .enumerate()
            .filter(
                |(_, delete)| matches!(delete.state, DeleteState::RetryAt(at) if at <= now.instant),
            )
            .map(|(index, _)| index)
            .collect();
        for index in due {
            let (row, column) = (
                self.deletes[index].row.clone(),
                self.deletes[index].column.clone(),
            );
            let id = self.send_delete(now, &row, &column);
            self.deletes[index].state = DeleteState::InFlight(id);
        }
    }

    fn poll_request(&mut self) -> Option<Outgoing> {
        self.io.poll()
    }

    /// The earliest retry of a failed delete. Once an outcome is set every delete has
    /// ended, so there is none.
    fn poll_timeout(&self) -> Option<MonotonicTime> {
        self.deletes
            .iter()
            .filter_map(|delete| match delete.state {
                DeleteState::RetryAt(at) => Some(at),
                _ => None,
            })
            .min()
    }

    fn poll_outcome(&mut self) -> Option<Result<(), Error>> {
        let outcome = self.outcome.take();
        if outcome.is_some() {
            self.finished = true;
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockConfig;
    use crate::id::LockId;
    use crate::storage::RowKind;

    fn cells() -> Vec<(RowKey, ColumnName)> {
        let lock = LockId::new("l").unwrap();
        vec![
            (
                RowKey::new(RowKind::Queue, lock.clone()),
                ColumnName::new("q"),
            ),
            (RowKey::new(RowKind::Main, lock), ColumnName::new("m")),
        ]
    }

    fn now(micros: u64) -> Now {
        Now::new(
            MonotonicTime::from_micros(micros),
            Timestamp::from_micros(micros),
        )
    }

    #[test]
    fn deletes_all_cells_at_once_above_the_last_write() {
        let config = LockConfig::default().validate().unwrap();
        let mut release = Release::new(now(5), config, cells(), Timestamp::from_micros(1_000));
        let first = release.poll_request().unwrap();
        let second = release.poll_request().unwrap();
        assert!(release.poll_request().is_none());
        for outgoing in [&first, &second] {
            let StorageRequest::Delete(delete) = &outgoing.request else {
                panic!("expected a delete, got {outgoing:?}");
            };
            assert!(delete.timestamp > Timestamp::from_micros(1_000));
        }
        release.handle_response(now(6), second.id, Ok(StorageResponse::Done));
        assert_eq!(release.poll_outcome(), None);
        release.handle_response(now(6), first.id, Ok(StorageResponse::Done));
        assert_eq!(release.poll_outcome(), Some(Ok(())));
        assert_eq!(release.poll_outcome(), None);
        // A late duplicate answer after the outcome was taken gives no second outcome.
        release.handle_response(now(7), first.id, Ok(StorageResponse::Done));
        assert_eq!(release.poll_outcome(), None);
        assert_eq!(release.poll_timeout(), None);
        assert_eq!(release.requests_sent(), 2);
        let stamps = [&first, &second].map(|outgoing| match &outgoing.request {
            StorageRequest::Delete(delete) => delete.timestamp,
            other => panic!("expected a delete, got {other:?}"),
        });
        assert_eq!(release.last_timestamp(), stamps[0].max(stamps[1]));
    }

    #[test]
    fn retries_then_reports_the_last_error() {
        let config = LockConfig {
            storage_retries: 1,
            storage_retry_window: Duration::ZERO,
            ..LockConfig::default()
        }
        .validate()
        .unwrap();
        let mut release =
            Release::new(now(0), config, cells().into_iter().take(1), Timestamp::ZERO);
        let first = release.poll_request().unwrap();
        release.handle_response(
            now(1),
            first.id,
            Err(Error::outcome_unknown("delete", "timeout")),
        );
        assert_eq!(release.poll_outcome(), None);
        let retry_at = release.poll_timeout().unwrap();
        release.handle_timeout(now(retry_at.as_micros() - 1));
        assert!(release.poll_request().is_none(), "retried early");
        release.handle_timeout(Now::new(
            retry_at,
            Timestamp::from_micros(retry_at.as_micros()),
        ));
        let second = release.poll_request().unwrap();
        let error = Error::unavailable("delete", "replicas down");
        release.handle_response(now(20_000), second.id, Err(error.clone()));
        assert_eq!(release.poll_outcome(), Some(Err(error)));
    }

    #[test]
    fn stale_responses_are_ignored() {
        let config = LockConfig::default().validate().unwrap();
        let mut release =
            Release::new(now(0), config, cells().into_iter().take(1), Timestamp::ZERO);
        let only = release.poll_request().unwrap();
        release.handle_response(now(1), RequestId(99), Ok(StorageResponse::Done));
        assert_eq!(release.poll_outcome(), None);
        release.handle_response(now(1), only.id, Ok(StorageResponse::Done));
        assert_eq!(release.poll_outcome(), Some(Ok(())));
    }
}
