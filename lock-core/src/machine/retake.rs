//! Taking a lock again that this locker has just released and still holds in storage
//! (docs/algorithm.md, section "Lingering after a release").

use crate::config::{Algorithm, ValidConfig};
use crate::error::Error;
use crate::storage::{RowKey, RowKind, RowRead, StorageRequest, StorageResponse};
use crate::time::{MonotonicTime, Now};

use super::{AcquireStats, Io, Lease, LeaseStatus, Machine, Outgoing, RequestId};

/// How a retake ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RetakeOutcome {
    /// Nobody waits: the lease is ours again, as it was, with the retake's counters.
    Held(Lease, AcquireStats),
    /// Someone waits, the lease is too short to keep, or a read failed: release the lease
    /// ([`Lease::release`]) and acquire afresh, behind whoever is queued.
    GiveBack(Lease),
}

/// Decides whether a lingering lease may be held again.
///
/// A holder whose acquisition saw nobody queued behind it may keep its cells for
/// [`crate::LockConfig::linger`] after its user released it: its main cell still excludes
/// everyone else, so keeping it longer is only holding longer. If this locker wants the lock
/// again meanwhile, `Retake` reads the queue and the main row together (one round trip):
/// with no live queue cell but ours from the margin before our own queue column on, and no
/// main cell but ours, nobody enqueued before the read was sent, so holding again passes
/// nobody that a fresh acquisition would have had to wait for. Anything else gives the lease
/// back, to be released at once.
///
/// The lease is not driven while the reads are out; they take at most `request_timeout`,
/// and the lease is kept only if it could still be renewed when the answers are in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Retake {
    config: ValidConfig,
    lease: Option<Lease>,
    queue_read: Option<RequestId>,
    main_read: Option<RequestId>,
    io: Io,
    outcome: Option<RetakeOutcome>,
    sent_at: MonotonicTime,
}

impl Retake {
    /// Whether a lease released at `now` may linger: a non-zero `linger`, the queue
    /// algorithm, a lease still held with a queue column to read from and renewable until
    /// the linger is over, and a lock its holder found idle (`stats` of the acquisition or
    /// retake, [`AcquireStats::found_idle`]: nobody ahead and nobody queued behind). A
    /// lock taken after waiting is released at once: whoever held it before is likely to
    /// want it back. So is a lock whose holder was told, by `wanted`, that an owner waits
    /// behind it (a [`crate::hint::HintKind::Wanted`] hint; it may be forged, which costs
    /// only the linger).
    pub fn lingers(
        config: &ValidConfig,
        lease: &Lease,
        stats: &AcquireStats,
        now: MonotonicTime,
        wanted: bool,
    ) -> bool {
        let settings = config.config();
        !wanted
            && !settings.linger.is_zero()
            && settings.algorithm == Algorithm::Queue
            && stats.found_idle()
            && lease.queue_column().is_some()
            && lease.status() == LeaseStatus::Held
            && config.renewable(now + settings.linger, lease.deadline())
    }

    /// Starts a retake of `lease`: reads its lock's queue and main rows, or gives the lease
    /// back at once if it could not be kept anyway.
    pub fn new(now: Now, config: ValidConfig, lease: Lease) -> Self {
        let mut retake = Retake {
            config,
            lease: None,
            queue_read: None,
            main_read: None,
            io: Io::default(),
            outcome: None,
            sent_at: now.instant,
        };
        let (Some(queue_column), LeaseStatus::Held) = (lease.queue_column(), lease.status()) else {
            retake.outcome = Some(RetakeOutcome::GiveBack(lease));
            return retake;
        };
        if !retake.config.renewable(now.instant, lease.deadline()) {
            retake.outcome = Some(RetakeOutcome::GiveBack(lease));
            return retake;
        }
        let margin = lease.queue_margin();
        let start = crate::column::QueueColumn::time_prefix(queue_column.timestamp - margin);
        let queue = RowRead {
            row: RowKey::new(RowKind::Queue, lease.lock_id().clone()),
            start: Some(start),
            limit: std::num::NonZeroU32::MIN.saturating_add(1),
        };
        let main = RowRead::first(lease.main_row().clone(), 2);
        retake.queue_read = Some(retake.io.send(StorageRequest::Read(queue)));
        retake.main_read = Some(retake.io.send(StorageRequest::Read(main)));
        retake.lease = Some(lease);
        retake
    }

    /// The lease, whatever the retake has come to: for a driver that stops before the
    /// outcome, to release it.
    pub fn into_lease(self) -> Option<Lease> {
        match (self.lease, self.outcome) {
            (Some(lease), _)
            | (None, Some(RetakeOutcome::Held(lease, _) | RetakeOutcome::GiveBack(lease))) => {
                Some(lease)
            }
            (None, None) => None,
        }
    }

    fn give_back(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.outcome = Some(RetakeOutcome::GiveBack(lease));
        }
    }

    fn decide(&mut self, now: Now) {
        if self.queue_read.is_some() || self.main_read.is_some() {
            return;
        }
        let Some(lease) = self.lease.take() else {
            return;
        };
        if !self.config.renewable(now.instant, lease.deadline()) {
            self.outcome = Some(RetakeOutcome::GiveBack(lease));
            return;
        }
        let stats = AcquireStats {
            requests: 2,
            queue_reads: 1,
            round_trip: now.instant.saturating_duration_since(self.sent_at),
            ..AcquireStats::default()
        };
        self.outcome = Some(RetakeOutcome::Held(lease, stats));
    }
}

impl Machine for Retake {
    type Outcome = RetakeOutcome;

    fn handle_response(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        let Some(lease) = &self.lease else {
            return;
        };
        let cells = match response {
            Ok(StorageResponse::Cells(cells)) => cells,
            Ok(_) | Err(_) => {
                if self.queue_read == Some(id) || self.main_read == Some(id) {
                    self.give_back();
                }
                return;
            }
        };
        if self.queue_read == Some(id) {
            self.queue_read = None;
            let ours = lease.queue_column().map(|column| column.encode());
            if cells.iter().any(|cell| Some(&cell.column) != ours.as_ref()) {
                self.give_back();
                return;
            }
        } else if self.main_read == Some(id) {
            self.main_read = None;
            let only_ours = matches!(cells.as_slice(), [cell] if lease.holds_main_cell(cell));
            if !only_ours {
                self.give_back();
                return;
            }
        } else {
            return;
        }
        self.decide(now);
    }

    fn handle_timeout(&mut self, _now: Now) {}

    fn poll_request(&mut self) -> Option<Outgoing> {
        self.io.poll()
    }

    fn poll_timeout(&self) -> Option<MonotonicTime> {
        None
    }

    fn poll_outcome(&mut self) -> Option<RetakeOutcome> {
        self.outcome.take()
    }
}
