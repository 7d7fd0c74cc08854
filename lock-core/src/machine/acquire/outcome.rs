//! What an acquisition ends with: its outcome, its counters, and what a holder holds.

use super::*;

/// How an acquisition ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AcquireOutcome {
    /// The lock is ours.
    Acquired(Box<Holding>),
    /// Soft lock only: another owner holds the lock or is ahead in the queue. Our cells
    /// have been deleted.
    Busy,
    /// The give-up deadline passed first. Our cells have been deleted (or left to their TTL
    /// if the deletes failed).
    TimedOut,
    /// The caller abandoned the acquisition. Our cells have been deleted (or left to their
    /// TTL if the deletes failed).
    Abandoned,
    /// Storage failed more times in a row than `storage_retries` allows, or refused a
    /// request. Our cells have been deleted where possible.
    Failed(Error),
}

/// Counters of one acquisition, for benchmarks and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AcquireStats {
    /// Storage requests issued, cleanup included.
    pub requests: u32,
    /// Reads of the queue row.
    pub queue_reads: u32,
    /// Times the main row held another owner's cell when we checked it.
    pub conflicts: u32,
    /// Storage requests that failed.
    pub storage_failures: u32,
    /// Times our queue cell's first write was acknowledged more than `request_timeout`
    /// after the time in its name, so that we deleted it and enqueued again (a sign of
    /// storage timeouts or of a paused process).
    pub requeues: u32,
    /// Times a main read, sent when our queue reads showed us first, found the cell of an
    /// owner with a later queue column that had seen itself first, so that our queue cell
    /// was hidden from it, and we joined the queue again under that owner's time (only with
    /// a [`crate::PollConfig::queue_margin`] shorter than the default).
    pub rejoins: u32,
    /// The hand-off time estimated from the owners seen leaving the queue ahead, or the
    /// poll hint's if none was seen (zero without either); the locker's next acquisition
    /// of the lock starts from it (`AcquireOptions::poll_hint`).
    pub handoff_estimate: Duration,
    /// Main-row reads that found only the cells of owners ahead of us, after which we
    /// waited in the main row ([`crate::LockConfig::wait_in_main_row`]).
    pub main_row_waits: u32,
    /// How many owners the queue read that found us first showed queued behind us (within
    /// the read's slice).
    pub behind_at_turn: u32,
    /// How many owners will be ahead of this locker if it joins the queue again at once
    /// after the release: those queued behind us at our turn, and one more for the owner
    /// that held before us if there was one (an earlier read showed owners ahead) and it
    /// had not joined again by then (no cell behind us was enqueued within half a hand-off
    /// and a round trip of the read). The locker's
    /// next acquisition skips its read on arrival when there are any (`PollHint::ahead`).
    pub ahead_at_return: u32,
    /// The moving average of the queue reads' round trips (zero before the first).
    pub round_trip: Duration,
    /// Reads sent before their planned time because a wake-up hint arrived
    /// ([`Machine::handle_wake_hint`]).
    pub hinted_reads: u32,
    /// The time between the lock's acquisitions as this acquisition last measured it
    /// (zero before any measurement, and always zero unless the margin adapts,
    /// [`crate::LockConfig::adapts_queue_margin`]): the spread of the live queue cells its last read
    /// that showed two or more of them, over their number less one; before such a read, the
    /// previous acquisition's figure (`AcquireOptions::lock_interval`, unless older than
    /// the margin it sets) or the time since the queue floor it was given, whichever is
    /// shorter. It sets the margin of queue reads
    /// ([`crate::LockConfig::queue_margin_for`]).
    pub lock_interval: Duration,
    /// [`crate::hint::HintKind::Wanted`] hints sent: next in line, we asked the owner first
    /// in the queue not to linger, once per owner we saw there.
    pub wanted_hints: u32,
}

impl AcquireStats {
    /// [`AcquireStats::lock_interval`] if the acquisition measured one (zero means none).
    pub fn measured_lock_interval(&self) -> Option<Duration> {
        Some(self.lock_interval).filter(|interval| !interval.is_zero())
    }

    /// Whether the acquisition found the lock idle: it held after its first queue read,
    /// without a conflict, a wait in the main row or a re-enqueue, and nobody was queued
    /// behind it. The locker then tries the fast path on its next acquisition of the lock
    /// (`AcquireOptions::fast_path`).
    pub fn found_idle(&self) -> bool {
        self.queue_reads == 1
            && self.conflicts == 0
            && self.main_row_waits == 0
            && self.requeues == 0
            && self.behind_at_turn == 0
    }
}

/// What an owner holds after a successful acquisition: everything needed to renew the
/// lease and to release.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holding {
    /// The lock.
    pub lock_id: LockId,
    /// The owner id of this acquisition.
    pub owner: OwnerId,
    /// Our cell in the main row; it is what excludes others.
    pub main: HeldCell,
    /// Our cell in the queue row (the baseline algorithm has none).
    pub queue: Option<HeldCell>,
    /// Our cell in the shadow row (only in the combined migration mode).
    pub shadow: Option<HeldCell>,
    /// When the queue cell, written while waiting with the shorter
    /// [`crate::LockConfig::waiter_ttl`], is due for a rewrite: [`crate::machine::Lease`] makes its
    /// first renewal no later, and from then on every cell carries `lease_ttl`. `None`
    /// when there is no such cell (the baseline algorithm).
    pub queue_renew_by: Option<MonotonicTime>,
    /// What becomes of the queue cell now that the lock is held.
    pub queue_exit: QueueExit,
    /// When the lease runs out unless renewed: `main.written_at + effective lease`.
    pub lease_deadline: MonotonicTime,
    /// The fencing token, if the configuration asks for one.
    pub fencing_token: Option<FencingToken>,
    /// The highest write timestamp used so far; later writes and deletes go above it.
    pub last_timestamp: Timestamp,
    /// When the acquisition started.
    pub started_at: MonotonicTime,
    /// When the lock became ours.
    pub acquired_at: MonotonicTime,
    /// Counters of the acquisition.
    pub stats: AcquireStats,
    /// The owners queued right behind us at our turn whose queue cells named a wake-up
    /// hint listener, at most [`crate::hint::SUCCESSORS_HINTED`], first in line first:
    /// whom to hint when the lock is taken and when it is released (docs/algorithm.md,
    /// section "Wake-up hints"). Empty unless the acquisition listened for hints.
    pub successors: Vec<Successor>,
}

impl Holding {
    /// The wake-up hints to send now that the lock is taken: one to each of
    /// [`Holding::successors`], who moved up a place.
    pub fn wake_hints(&self) -> Vec<(SocketAddr, WakeHint)> {
        hint::addressed(&self.lock_id, &self.successors)
    }

    /// How long the acquisition took.
    pub fn wait(&self) -> Duration {
        self.acquired_at.saturating_duration_since(self.started_at)
    }

    /// Every cell we hold: the main cell first, then the queue cell (unless the acquisition
    /// already deleted it, [`QueueExit::Done`]) and the shadow cell.
    pub fn held_cells(&self) -> impl Iterator<Item = &HeldCell> {
        let queue = self
            .queue
            .iter()
            .filter(|_| self.queue_exit != QueueExit::Done);
        std::iter::once(&self.main)
            .chain(queue)
            .chain(self.shadow.iter())
    }

    /// The cells to delete on release.
    pub fn cells(&self) -> Vec<(RowKey, ColumnName)> {
        self.held_cells()
            .map(|cell| (cell.row.clone(), cell.column.clone()))
            .collect()
    }
}

/// What becomes of a holder's queue cell ([`Holding::queue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueExit {
    /// It is renewed with the lease and deleted on release.
    AtRelease,
    /// The holder leaves the queue at once, so that the owner behind it can wait in the
    /// main row ([`crate::LockConfig::wait_in_main_row`]): [`crate::machine::Lease`] deletes it
    /// when it starts, and the release deletes it again if that delete failed.
    Now,
    /// The acquisition already deleted it (with its fence read); it is named only to tell
    /// the next acquisition where the queue's head was.
    Done,
}
