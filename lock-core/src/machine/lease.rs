//! The lease of a held lock, made truthful (docs/algorithm.md, section "Leases, renewal and release").

use std::net::SocketAddr;
use std::time::Duration;

use crate::column::QueueColumn;
use crate::config::ValidConfig;
use crate::error::Error;
use crate::hint::{self, Successor, WakeHint};
use crate::id::LockId;
use crate::storage::{
    Cell, CellDelete, CellWrite, RowKey, RowKind, RowRead, StorageRequest, StorageResponse,
};
use crate::time::{MonotonicTime, Now};

use super::{
    HeldCell, Holding, Io, Machine, Outgoing, QueueExit, Release, RequestId, Stamps, doubled,
};

/// What the holder may believe about its lock right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseStatus {
    /// The last renewal succeeded and the deadline is ahead.
    Held,
    /// A renewal failed (or cannot be sent in time) but the deadline has not passed: the lock
    /// is still ours, but may not stay so.
    InDoubt,
    /// The deadline passed without a renewal, or our cell disappeared: another owner may
    /// hold the lock. Stop touching the resource.
    Lost,
}

/// Keeps a held lock's cells alive and tells the truth about it.
///
/// All our cells (main, queue, and shadow in the combined mode) are rewritten together every `renew_every`, counted from
/// when the previous successful write was *sent*, with `lease_ttl`; the first renewal comes
/// no later than [`Holding::queue_renew_by`], because the queue cell was written with the
/// shorter waiter TTL while we waited; then the main cell is read back, so that a
/// cell removed by an administrator (a tombstone that outranks our write) is noticed. A
/// renewal that succeeds moves the deadline to `sent + effective lease`. A renewal that fails
/// makes the status [`LeaseStatus::InDoubt`] and is retried after `retry_backoff`
/// (doubling, at most `renew_every`). No renewal is sent once less than `request_timeout`
/// remains before the deadline, because a write acknowledged after the cells may already
/// have expired could revive them next to a new holder's. When the deadline passes the
/// status becomes [`LeaseStatus::Lost`] and the outcome is [`Error::LockLost`]; nothing is
/// ever renewed after that.
///
/// A holding that [leaves the queue now](QueueExit::Now) has its queue cell deleted at
/// once, and only the other cells renewed; should that delete fail, the release deletes the
/// cell again (until then it lapses with its waiter TTL).
///
/// To release, call [`Lease::release`]: it stops renewing and deletes the cells with
/// timestamps above every renewal, so a renewal still in flight cannot revive them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    config: ValidConfig,
    lock_id: LockId,
    main: HeldCell,
    /// The holder's queue column (none for the baseline algorithm): a retake reads the
    /// queue from the margin before it ([`super::Retake`]).
    queue_column: Option<QueueColumn>,
    /// How far before our queue column a retake's or a release's queue read starts: the
    /// margin for the time between the lock's acquisitions the acquisition measured
    /// ([`super::AcquireStats::lock_interval`]).
    queue_margin: Duration,
    /// The queue and shadow cells, renewed and released with the main cell.
    side_cells: Vec<HeldCell>,
    /// The listening owner next in line at our turn ([`Holding::successors`]).
    successors: Vec<Successor>,
    /// Whether a release that finds successors reads the queue: the acquisition listened
    /// for hints (its queue cell names a listener) and did not find the lock idle
    /// ([`super::AcquireStats::found_idle`]). Always false without hints, so that leases
    /// are the same values as without them. [`Lease::note_waiter`] sets it for a lock found
    /// idle.
    reads_successors: bool,
    /// Whether the acquisition listened for hints (its queue cell names a listener).
    listens: bool,
    /// The queue cell of a holding that leaves the queue, and the delete sent for it; the
    /// release deletes it again unless that delete was acknowledged.
    leaving: Option<(HeldCell, RequestId)>,
    stamps: Stamps,
    io: Io,
    deadline: MonotonicTime,
    next_renewal: MonotonicTime,
    status: LeaseStatus,
    round: Option<Round>,
    failures: u32,
    renewals: u32,
    failed_renewals: u32,
    outcome: Option<Error>,
}

/// One renewal: the writes in flight, then the read-back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Round {
    sent_at: MonotonicTime,
    writes: Vec<RequestId>,
    verify: Option<RequestId>,
}

impl Lease {
    /// Starts the lease of a lock just acquired.
    pub fn new(now: Now, config: ValidConfig, holding: Holding) -> Self {
        let exit = holding.queue_exit;
        let listens = holding
            .queue
            .as_ref()
            .is_some_and(|cell| hint::listener_in_queue_value(&cell.value).is_some());
        let left = holding.queue.clone().filter(|_| exit == QueueExit::Now);
        let side_cells: Vec<HeldCell> = std::iter::once(&holding.queue)
            .filter(|_| exit == QueueExit::AtRelease)
            .chain(std::iter::once(&holding.shadow))
            .flatten()
            .cloned()
            .collect();
        let earliest_write = side_cells
            .iter()
            .map(|cell| cell.written_at)
            .fold(holding.main.written_at, MonotonicTime::min);
        let next_renewal = (earliest_write + config.renew_every())
            .min(holding.queue_renew_by.unwrap_or(MonotonicTime::MAX));
        let mut stamps = Stamps::after(holding.last_timestamp);
        let mut io = Io::default();
        let leaving = left.map(|cell| {
            let delete = CellDelete {
                row: cell.row.clone(),
                column: cell.column.clone(),
                timestamp: stamps.next(now.timestamp),
            };
            let request = io.send(StorageRequest::Delete(delete));
            (cell, request)
        });
        let queue_column = holding
            .queue
            .as_ref()
            .and_then(|cell| QueueColumn::decode(cell.column.as_str()).ok());
        let queue_margin = config
            .config()
            .queue_margin_for(holding.stats.measured_lock_interval());
        let mut lease = Lease {
            next_renewal,
            config,
            lock_id: holding.lock_id,
            main: holding.main,
            queue_column,
            queue_margin,
            side_cells,
            successors: holding.successors,
            reads_successors: !holding.stats.found_idle() && listens,
            listens,
            leaving,
            stamps,
            io,
            deadline: holding.lease_deadline,
            status: LeaseStatus::Held,
            round: None,
            failures: 0,
            renewals: 0,
            failed_renewals: 0,
            outcome: None,
        };
        lease.handle_timeout(now);
        lease
    }

    /// The instant before which this lease needs nothing from its driver, if it is quiet:
    /// held, with no request waiting to be sent and no renewal in flight. A driver may
    /// leave it alone until then (and start driving it only if it is still held).
    pub fn quiet_until(&self) -> Option<MonotonicTime> {
        let quiet = self.status == LeaseStatus::Held && self.round.is_none() && self.io.is_empty();
        quiet.then(|| self.next_renewal.min(self.deadline))
    }

    /// The current status.
    pub fn status(&self) -> LeaseStatus {
        self.status
    }

    /// When the lease counts as lost unless renewed first.
    pub fn deadline(&self) -> MonotonicTime {
        self.deadline
    }

    /// How long the lock is certainly ours from `now` (zero once lost).
    pub fn time_left(&self, now: MonotonicTime) -> Duration {
        if self.status == LeaseStatus::Lost {
            return Duration::ZERO;
        }
        self.deadline.saturating_duration_since(now)
    }

    /// Successful and failed renewals so far.
    pub fn renewal_counts(&self) -> (u32, u32) {
        (self.renewals, self.failed_renewals)
    }

    /// The lock this lease is for.
    pub fn lock_id(&self) -> &LockId {
        &self.lock_id
    }

    /// The holder's queue column, the time its acquisition enqueued (none for the baseline
    /// algorithm).
    pub fn queue_column(&self) -> Option<&QueueColumn> {
        self.queue_column.as_ref()
    }

    /// How far before [`Lease::queue_column`] a retake's or a release's queue read starts
    /// ([`crate::LockConfig::queue_margin_for`] of the time between the lock's
    /// acquisitions the acquisition measured).
    pub fn queue_margin(&self) -> Duration {
        self.queue_margin
    }

    /// The row of the holder's main cell.
    pub fn main_row(&self) -> &RowKey {
        &self.main.row
    }

    /// Whether `cell` is the holder's main cell as it wrote it.
    pub fn holds_main_cell(&self, cell: &Cell) -> bool {
        cell.column == self.main.column && cell.value == self.main.value
    }

    /// Marks the lease [`LeaseStatus::Lost`] if its deadline has passed at `now`, and
    /// returns the [`Error::LockLost`] it was lost with, if it is lost and that was not yet
    /// taken with [`Machine::poll_outcome`]. A driver calls it before releasing: a lease can
    /// lapse while nothing drives it (its driver was frozen, or had not started), and the
    /// release must report that.
    pub fn check_lapsed(&mut self, now: MonotonicTime) -> Option<Error> {
        if self.status != LeaseStatus::Lost && now >= self.deadline {
            self.lose("the lease deadline passed before a renewal succeeded");
        }
        self.outcome.take()
    }

    /// The wake-up hints to send as the release's deletes go out: to the listening owner
    /// that was next in line at our turn ([`Holding::successors`]), who most likely takes
    /// the lock next. By the time it arrives and that owner's read reaches the replicas,
    /// the deletes have most likely landed; if not, the hints after the release
    /// ([`Lease::release_finding_successors`]) make it read again.
    pub fn wake_hints(&self) -> Vec<(SocketAddr, WakeHint)> {
        hint::addressed(&self.lock_id, &self.successors)
    }

    /// An owner asked us not to linger ([`crate::hint::HintKind::Wanted`]; docs/algorithm.md,
    /// section "Lingering after a release"): it waits behind us, so a release that finds
    /// successors reads the queue even though we found the lock idle, and hints it.
    pub fn note_waiter(&mut self) {
        self.reads_successors = self.listens;
    }

    /// [`Lease::release`], also reading the queue, with the deletes, for the owners to
    /// send wake-up hints to once the release is over ([`Release::find_successors`]): from
    /// the floor margin before our queue column, as a retake does. A holding that found the
    /// lock idle reads nothing (a lock seldom contended would pay a read a release for
    /// little), nor does one that did not listen for hints or has no queue column (the
    /// baseline algorithm's).
    pub fn release_finding_successors(self, now: Now) -> Release {
        let queue_column = self.queue_column.as_ref().filter(|_| self.reads_successors);
        let read = queue_column.map(|column| {
            let margin = self.queue_margin();
            // Our own cell may still be there: one more.
            let limit = u32::try_from(hint::SUCCESSORS_HINTED + 1).unwrap_or(u32::MAX);
            let mut read = RowRead::first(RowKey::new(RowKind::Queue, self.lock_id.clone()), limit);
            read.start = Some(QueueColumn::time_prefix(column.timestamp - margin));
            (read, column.encode())
        });
        let mut release = self.release(now);
        if let Some((read, own)) = read {
            release.find_successors(read, own);
        }
        release
    }

    /// Stops renewing and starts deleting the cells.
    pub fn release(self, now: Now) -> Release {
        let cells = std::iter::once(&self.main)
            .chain(self.side_cells.iter())
            .chain(self.leaving.iter().map(|(cell, _)| cell))
            .map(|cell| (cell.row.clone(), cell.column.clone()));
        Release::new(now, self.config.clone(), cells, self.stamps.last())
            .retrying_until(self.deadline)
    }

    fn lose(&mut self, reason: &str) {
        if self.status == LeaseStatus::Lost {
            return;
        }
        self.status = LeaseStatus::Lost;
        self.round = None;
        self.outcome = Some(Error::LockLost {
            lock_id: self.lock_id.clone(),
            reason: reason.to_owned(),
        });
    }

    fn start_round(&mut self, now: Now) {
        let ttl = Some(self.config.ttl());
        let mut writes = Vec::new();
        for cell in std::iter::once(&self.main).chain(self.side_cells.iter()) {
            let write = CellWrite {
                row: cell.row.clone(),
                column: cell.column.clone(),
                value: cell.value.clone(),
                timestamp: self.stamps.next(now.timestamp),
                ttl,
            };
            writes.push(self.io.send(StorageRequest::Write(write)));
        }
        self.round = Some(Round {
            sent_at: now.instant,
            writes,
            verify: None,
        });
    }

    fn fail_round(&mut self, now: Now) {
        self.round = None;
        self.status = LeaseStatus::InDoubt;
        self.failed_renewals = self.failed_renewals.saturating_add(1);
        let pause = doubled(
            self.config.config().retry_backoff,
            self.failures,
            self.config.renew_every(),
        );
        self.failures = self.failures.saturating_add(1);
        self.next_renewal = now.instant + pause;
    }

    fn succeed_round(&mut self, sent_at: MonotonicTime) {
        self.round = None;
        self.status = LeaseStatus::Held;
        self.failures = 0;
        self.renewals = self.renewals.saturating_add(1);
        self.deadline = self.deadline.max(self.config.lease_deadline(sent_at));
        self.next_renewal = sent_at + self.config.renew_every();
        self.main.written_at = sent_at;
        for cell in &mut self.side_cells {
            cell.written_at = sent_at;
        }
    }
}

impl Machine for Lease {
    type Outcome = Error;

    fn handle_response(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        if self
            .leaving
            .as_ref()
            .is_some_and(|(_, request)| *request == id)
        {
            if response.is_ok() {
                self.leaving = None;
            }
            return;
        }
        if self.status == LeaseStatus::Lost {
            return;
        }
        if now.instant >= self.deadline {
            // An answer handled late (its driver was frozen) cannot bring a lapsed lease
            // back: the status already read `Lost` at the deadline.
            self.lose("the lease deadline passed before a renewal succeeded");
            return;
        }
        let Some(round) = &mut self.round else {
            return;
        };
        if round.verify == Some(id) {
            match response {
                Ok(StorageResponse::Cells(cells))
                    if cells.iter().any(|cell| {
                        cell.column == self.main.column && cell.value == self.main.value
                    }) =>
                {
                    let sent_at = round.sent_at;
                    self.succeed_round(sent_at);
                }
                Ok(_) => self.lose(
                    "our main cell is gone although its renewal was acknowledged: it expired \
                     or an administrator force-released the lock",
                ),
                Err(_) => self.fail_round(now),
            }
            return;
        }
        let Some(index) = round.writes.iter().position(|write| *write == id) else {
            return;
        };
        if response.is_err() {
            self.fail_round(now);
            return;
        }
        round.writes.swap_remove(index);
        if round.writes.is_empty() {
            let read = RowRead::single(self.main.row.clone(), self.main.column.clone());
            round.verify = Some(self.io.send(StorageRequest::Read(read)));
        }
    }

    fn handle_timeout(&mut self, now: Now) {
        if self.status == LeaseStatus::Lost {
            return;
        }
        if now.instant >= self.deadline {
            self.lose("the lease deadline passed before a renewal succeeded");
            return;
        }
        if self.round.is_some() || now.instant < self.next_renewal {
            return;
        }
        if !self.config.renewable(now.instant, self.deadline) {
            self.status = LeaseStatus::InDoubt;
            self.next_renewal = self.deadline;
            return;
        }
        self.start_round(now);
    }

    fn poll_request(&mut self) -> Option<Outgoing> {
        self.io.poll()
    }

    fn poll_timeout(&self) -> Option<MonotonicTime> {
        match (self.status, &self.round) {
            (LeaseStatus::Lost, _) => None,
            (_, Some(_)) => Some(self.deadline),
            (_, None) => Some(self.next_renewal.min(self.deadline)),
        }
    }

    fn poll_outcome(&mut self) -> Option<Error> {
        self.outcome.take()
    }
}
