//! The queue algorithm: mandatory lock and soft lock (docs/algorithm.md, sections "The mandatory lock" and "The soft lock").

use std::net::SocketAddr;
use std::time::Duration;

use crate::column::{ColumnName, MainCellValue, QueueColumn};
use crate::config::{Algorithm, LockConfig, MIN_NEXT_IN_LINE_PERIOD, ValidConfig};
use crate::error::Error;
use crate::hint::{self, HintKind, Successor, WakeHint};
use crate::id::{LockId, OwnerId};
use crate::storage::{Cell, RowKey, RowKind, RowRead, StorageRequest, StorageResponse, Ttl};
use crate::time::{MonotonicTime, Now, Timestamp};

use super::attempt::{Attempt, Ending, Response, Wake};
use super::poll::{PollHint, PollTracker};
use super::{FencingToken, HeldCell, Machine, Outgoing, RequestId, SplitMix64, Stamps, doubled};

/// How many cells a main-row read fetches: enough to tell "only ours" from "not only
/// ours".
const MAIN_READ_LIMIT: u32 = 2;

/// Which strategy an acquisition follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Wait as long as needed (thesis `GetLock`).
    Mandatory,
    /// Take the lock now or report it busy (thesis `TryGetLock`).
    Soft,
}

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
    /// [`crate::LockConfig::waiter_ttl`], is due for a rewrite: [`super::Lease`] makes its
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
    /// main row ([`crate::LockConfig::wait_in_main_row`]): [`super::Lease`] deletes it
    /// when it starts, and the release deletes it again if that delete failed.
    Now,
    /// The acquisition already deleted it (with its fence read); it is named only to tell
    /// the next acquisition where the queue's head was.
    Done,
}

/// The main-row column an acquisition writes under: the thesis's `threadId`.
///
/// In the thesis a thread's id names its main cell, and a thread takes one lock at a time,
/// so a lock's main row only ever holds as many columns as there are threads. Our owner ids
/// are fresh per acquisition; naming main cells by them would leave one more tombstone in
/// the main row with every acquisition, and every main-row read would walk them all (on
/// Cassandra, until compaction after `gc_grace_seconds`). A seat restores the thesis's
/// bound: the locker hands each acquisition a seat that no other acquisition of the same lock
/// uses at the same time, and reuses it afterwards, so a lock's main row has at most one
/// column per seat ever used. The cell's *value* is the acquisition's owner id, and a main
/// cell counts as ours only if both its column and its value match, so a cell left by an
/// earlier acquisition in the same seat is never mistaken for ours.
///
/// `after` must be at least every write timestamp an earlier acquisition used in this seat:
/// this acquisition's timestamps start above it, so that a late delete of the earlier
/// acquisition (a tombstone wins a timestamp tie) can never remove this one's cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Seat {
    /// The column name.
    pub column: ColumnName,
    /// Every timestamp this acquisition writes is above this one.
    pub after: Timestamp,
}

/// Settings of an acquisition beyond the required ones; `Default` gives none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AcquireOptions {
    /// When to stop trying, clean up and report [`AcquireOutcome::TimedOut`].
    pub give_up_at: Option<MonotonicTime>,
    /// The main-row column to use; without one, the owner id names the main cell (a fresh
    /// column per acquisition, as a model checker wants, but see [`Seat`]).
    pub seat: Option<Seat>,
    /// Where queue reads start: the enqueue time of a queue head seen earlier (the locker
    /// passes the one its previous acquisition of the lock saw, [`Acquire::queue_head`]),
    /// or a time before which no live queue cell is expected. Reads start
    /// [`Acquire::floor_margin`] before it. Without one, the first queue read starts at the
    /// beginning of the row. Later reads start the margin before the head the last read
    /// saw, if that is later. See [`Acquire`] on tombstones.
    pub queue_floor: Option<Timestamp>,
    /// Try the two-round-trip fast path first (docs/algorithm.md, section "The two-round-trip fast path"): write the
    /// queue and main cells together, then read both rows together, and hold if the queue
    /// shows our cell first and the main row shows only ours; on anything else delete the
    /// main cell and go on as without it. Used only by a mandatory acquisition outside the
    /// combined mode; the locker sets it when its previous acquisition of the lock found the
    /// lock idle.
    pub fast_path: bool,
    /// When this locker last released the lock and the hand-off time it then estimated,
    /// to time the first pause (docs/algorithm.md, section "When a waiter polls"). The locker passes the
    /// one its previous acquisition of the lock left.
    pub poll_hint: Option<PollHint>,
    /// The time between the lock's acquisitions the locker's previous acquisition of it
    /// measured ([`AcquireStats::lock_interval`]): with the adaptive margin
    /// ([`crate::PollConfig::margin_acquisitions`]) the first queue read starts that many
    /// of them before the floor. The locker passes the one its previous acquisition left.
    pub lock_interval: Option<Duration>,
    /// Read the main row with the first queue write, and start queue reads from the latest
    /// queue head a main cell names ([`MainCellValue::Head`]) less the margin, if that is
    /// later than `queue_floor` (docs/algorithm.md, section "Queue floors and tombstones"). The locker sets it on its
    /// first acquisition of a lock, whose `queue_floor` is `cold_lookback` back, so that the
    /// first read need not step over that long of a busy lock's tombstones. Used only by a
    /// mandatory acquisition; costs one read, sent with the queue write.
    pub floor_from_main: bool,
    /// The address of this locker's wake-up hint listener (docs/algorithm.md, section
    /// "Wake-up hints"), written as the queue cell's value so that the owners ahead can
    /// hint us. With one, the acquisition records the owners queued behind it at its turn
    /// ([`Holding::successors`]), sends its next read at once on a hint
    /// ([`Machine::handle_wake_hint`]), and, while [`crate::hint::RELAXED_PLACES`] or more
    /// places back, polls no more often than [`crate::hint::FALLBACK_POLL`]: the owners
    /// ahead hint it as its turn nears.
    pub wake_hint_listener: Option<SocketAddr>,
}

/// One acquisition by the queue algorithm.
///
/// # Steps
///
/// Mandatory (docs/algorithm.md, section "The mandatory lock"): write our queue cell; read the first `queue_read_limit` queue
/// cells; if ours is first, write our main cell and read the main row's first two cells; if
/// ours is the only one the lock is ours, otherwise delete our main cell, pause and check the
/// queue again. If we are not first, pause and check again. With `fencing` on, the lock then
/// takes a [`FencingToken`]: read the fence, write the next token, and only then hold. A queue
/// cell whose first write is acknowledged more than `request_timeout` after the time in its
/// name is deleted and written again under the current time (see Tombstones below).
///
/// In the combined migration mode ([`Algorithm::Combined`]), an owner first in the queue
/// also passes the old algorithm's gate before writing its main cell: write its shadow cell
/// and read the shadow row; if another shadow cell is there, delete ours and back off as
/// after a conflict. The shadow cell is kept (and renewed) until release, so a client still
/// on the old algorithm sees a concurrent attempt and backs off.
///
/// Soft (section "The soft lock"): read the main row first and report [`AcquireOutcome::Busy`] if it holds
/// any cell; otherwise proceed as above, but report `Busy` (after deleting our cells) as soon
/// as we are not first, or after `soft_attempts` main-row conflicts. (The thesis retries
/// without bound while first in the queue; we bound it so that a soft lock never waits long
/// for a cell that will only go away with its TTL.)
///
/// # Waiting in the main row
///
/// With [`LockConfig::wait_in_main_row`] (docs/algorithm.md, section "Waiting in the main row") a holder deletes
/// its queue cell once it holds (with its fence read, or through [`super::Lease`] without
/// fencing), and main cells carry queue columns. An owner first in the queue whose main read
/// shows, besides its own cell, only cells with earlier queue columns keeps its cell and
/// reads the main row again, paced as the owner next in line reads the queue, until it
/// finds its cell alone; it never waits for a later column, so no two owners wait for each
/// other. When its queue cell is due for a rewrite it rewrites it, reads the queue again and
/// either writes its main cell again (still first) or deletes it (behind).
///
/// While it waits, its main cell carries the waiter TTL (when shorter than `lease_ttl`): it
/// rewrites the cell with it as soon as it decides to wait, and every later rewrite carries
/// it too, so that a waiter that dies first in line blocks the owners behind it for about
/// the waiter TTL, not the lease. Before it holds, it renews the cell with `lease_ttl` (with
/// fencing, in the fence read's round trip; without, one more round trip) and holds only if
/// that renewal is acknowledged within [`ValidConfig::waiter_effective`] of the send of the
/// latest acknowledged short write: the cell was then live on a quorum without a gap, as a
/// holder's is between renewals. A renewal acknowledged later is a conflict. The lease then
/// counts from the renewal's send.
///
/// # Waiting policy
///
/// A waiter estimates the hand-off time `h` from how fast it has seen owners ahead of it
/// leave, and the round trip `r` of its queue reads. Only the owner next in line polls
/// fast: it sends a read every `h / 8`, or every `r` if that is longer (then it does not
/// pause at all and keeps one read in flight), never more often than
/// [`crate::config::MIN_NEXT_IN_LINE_PERIOD`]; once the holder has held longer than `h`,
/// the period grows by a quarter of the overrun, and a pause never exceeds
/// `poll.max_interval`. Its pace thus follows the network, so a release is seen within
/// about one round trip. An owner `k` places back pauses for about `(k - 1.5) · h`, the
/// time it expects to take to become next in line (the holder has held for half a
/// hand-off on average), clamped between the round trip and `max_interval` (owners beyond
/// the read's slice, who all take its length for their place, shorten it at random by up
/// to `poll.jitter_percent`; never lengthen it: waking late would leave the lock free with
/// nobody polling); when `h` is only a guess or longer than five round
/// trips, an owner more than eight places back plans for half the places beyond the
/// eighth, and looks again about halfway (docs/algorithm.md, section "When a waiter polls").
/// After a main-row conflict the pause starts at `min_interval` and doubles per conflict,
/// jittered by ±`poll.jitter_percent`. A waiter
/// rewrites its queue cell every [`ValidConfig::waiter_renew_every`] so that a long wait
/// never lets it expire (see Dead waiters below).
///
/// # Dead waiters
///
/// A waiter's queue cell is written with the short [`ValidConfig::waiter_ttl`]
/// (`min(waiter_ttl, lease_ttl)`, 3 s by default) rather than `lease_ttl`, so that a waiter
/// that dies, or whose acquisition fails while its cleanup cannot reach storage, blocks the
/// owners behind it for about `waiter_ttl`, not `lease_ttl`. The timings, with `W` the waiter
/// TTL, `S` = `max_clock_skew`, `f` = `renew_fraction`, `P` = `poll.max_interval`:
///
/// * A write sent at `s` is applied no earlier than `s`, and a replica counts its TTL from
///   its own clock, truncated to the second: the cell lives at least until
///   `s + W − 1 s − S` ([`ValidConfig::waiter_effective`], `E_w`; 1 s by default) and at
///   most until about `a + W + S`, with `a` the time it was applied.
/// * A live waiter rewrites every `f × E_w` (0.5 s by default). If a rewrite is
///   acknowledged later than `E_w` after the previous acknowledged write was sent, the cell
///   may have been gone in between, and an owner behind may have seen itself first and
///   taken the lock: the waiter does not assume its old place. It deletes the cell and
///   enqueues again under the current time, exactly as after a late first write (counted in
///   [`AcquireStats::requeues`], and sharing its `storage_retries` budget). A cell that is
///   missing from a queue read is rewritten, and so goes through the same test.
/// * A dead waiter's last write was sent at most `f × E_w` before it died; its cell is gone
///   from every replica by `W + S` after that write was applied, and the owner behind it
///   polls at most `P` later, then takes the lock in one hand-off. So the lock is free with
///   nobody taking it for at most about `W + S + P` plus a hand-off's round trips after the
///   death (at most 4.25 s with the defaults; in practice `W − f × E_w` to `W`, 2.5–3 s, when
///   clocks agree), where it was `lease_ttl + S + P` before.
/// * Once granted, the cell must live as long as the lease: [`Holding::queue_renew_by`]
///   asks [`super::Lease`] for its first renewal no later than `f × E_w` after the queue
///   cell's last write, and every renewal writes `lease_ttl`. A lock released before that
///   (most are) costs no extra request; a longer one renews once early. Should the queue
///   cell lapse under a live holder (that renewal failing), the owner behind sees itself
///   first and meets the holder's main cell, so it backs off: exclusion rests on the main
///   row alone (Theorem 1), never on queue cells.
///
/// A waiter that dies while it holds a main cell written with `lease_ttl` (during the one to
/// four round trips of an attempt to take the lock, after which it either holds, deletes the
/// cell or, waiting in the main row, rewrites it with the waiter TTL) blocks the lock for
/// `lease_ttl`, like a holder: the main cell is the lease.
///
/// # Tombstones
///
/// Every acquisition leaves a tombstone in the queue row (its queue cell, deleted on
/// release), and queue column names begin with the enqueue time, so the dead cells pile up
/// at the front of the row, before every live one. A read of "the first cells of the queue"
/// would walk them all. Given a queue floor, queue reads instead start
/// at the floor (or at our own column, if that is earlier), skipping every tombstone before
/// it; the locker passes the head of the queue seen by its previous acquisition of the same
/// lock. Reads start [`Acquire::floor_margin`] before the floor's time, to still see a
/// queue cell that sorts before the head seen but was not visible then (a slower clock, a
/// slow write). Each queue read moves the floor up to the head it saw, by the same
/// argument, so that a waiter's later polls start near the head even when its first read
/// started far back (a locker's first acquisition of a lock starts `cold_lookback` before
/// now). A read so walks only the tombstones of the acquisitions since the floor and
/// of those within the margin before it, however many acquisitions the row has seen. The floor only
/// decides which queue cells we see, never whether we hold the lock: exclusion rests on the
/// main row alone (Theorem 1).
///
/// The margin holds only if every queue cell becomes visible soon after the time in its
/// name. A write can take longer than one `request_timeout`: retried after timeouts, or held
/// up by a paused process before it is sent. So an acquisition keeps a queue cell only if its
/// first write was acknowledged within `request_timeout` of the time in its name; otherwise
/// it deletes the cell and enqueues again under the current time, which is also when it
/// really joined the queue. Waiters that enqueued while the late cell was not yet visible keep
/// their places ahead of it. It does so at most `storage_retries` times, then keeps its cell
/// however late: storage that keeps failing first writes may then let others pass it, but
/// the acquisition goes on. A queue cell more than the margin behind a floor (a clock skewed
/// beyond `max_clock_skew`) is not seen by the waiters reading from that floor; its owner
/// still sees itself first and competes through the main row. Main cells are named by
/// seats, which bounds the main row's dead cells by the number of seats.
///
/// # Leases
///
/// The lock is only reported acquired if, when the main-row read returns, there is still
/// `request_timeout` left before `effective lease` after the main write was *sent* (the
/// renewal's, after waiting in the main row with a short cell): a lock that could no longer
/// be renewed in time is given back instead.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire {
    attempt: Attempt,
    mode: Mode,
    lock_id: LockId,
    /// The main (and, in the combined mode, shadow) column: the seat's, or the owner id.
    seat: ColumnName,
    queue_column: QueueColumn,
    /// `queue_column` encoded, built once: it is written, read past and deleted by name.
    queue_name: ColumnName,
    /// Where queue reads start, if not at the beginning of the row (or at our own column,
    /// if that is earlier): the margin before the floor given, then before the latest head
    /// seen.
    queue_floor: Option<ColumnName>,
    /// The first live queue cell of the last queue read.
    queue_head: Option<QueueColumn>,
    /// Whether the first queue write still has to carry a main read for a floor
    /// (`AcquireOptions::floor_from_main`).
    floor_from_main: bool,
    queue_row: RowKey,
    main_row: RowKey,
    /// The old algorithm's shadow row, used only in the combined migration mode.
    shadow_row: RowKey,
    combined: bool,
    /// Whether the owner first in the queue waits in the main row for the owners that were
    /// ahead of it ([`crate::LockConfig::wait_in_main_row`]).
    waits_in_main: bool,
    /// Whether our queue cell was deleted once the lock was ours (with the fence read).
    queue_left: bool,
    /// Whether we are waiting in the main row: from the main read that showed only the
    /// cells of owners ahead of us until our main cell is deleted or renewed to hold, our
    /// main writes carry the waiter TTL if it is shorter than `lease_ttl`.
    waiting_in_main: bool,
    /// When the latest acknowledged write of our main cell was sent, if it carried the
    /// waiter TTL: the lock is then ours only after a rewrite with `lease_ttl` acknowledged
    /// before this instant plus the waiter's effective life.
    short_main_sent: Option<MonotonicTime>,
    /// The value of our last main (and shadow) write: tells our cell from one an earlier
    /// acquisition left in the same seat.
    main_value: Vec<u8>,
    rng: SplitMix64,
    step: Step,
    started_at: MonotonicTime,
    conflicts: u32,
    missing: u32,
    queue_written: Written,
    /// When the last acknowledged write of our current queue column was sent.
    queue_acked: Option<MonotonicTime>,
    main_written: Written,
    shadow_written: Written,
    poll: PollTracker,
    stats: AcquireStats,
    /// The value of our queue cell: the hint listener's address, or empty.
    queue_value: Vec<u8>,
    /// Whether we listen for wake-up hints.
    hinted: bool,
    /// The owners behind us at our turn, to hint ([`Holding::successors`]).
    successors: Vec<Successor>,
    /// The end of the current poll pause, the only kind of sleep a hint may cut short (a
    /// retry's backoff is kept).
    poll_pause_until: Option<MonotonicTime>,
    /// When a hint last made us read early: at most one such read per round trip.
    last_hinted_read: Option<MonotonicTime>,
    /// When a hint came while a request was in flight: the next poll pause is skipped.
    hint_pending: Option<MonotonicTime>,
    /// The owner first in the queue we last asked not to linger ([`HintKind::Wanted`]):
    /// each owner is asked once.
    asked_head: Option<OwnerId>,
    /// The hint we want sent, until the driver takes it ([`Machine::poll_wake_hint`]).
    hint_out: Option<(SocketAddr, WakeHint)>,
    /// The latest queue column, later than ours, of an owner that saw itself first while
    /// our cell was hidden from it: once our main cell is deleted, we join the queue again
    /// under its time ([`crate::PollConfig::queue_margin`]).
    rejoin_behind: Option<QueueColumn>,
}

/// The request a step sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    /// Soft lock: is the main row empty?
    CheckMain,
    /// Write our queue cell for the first time. The cell is kept only if the write is
    /// acknowledged by the instant given: `request_timeout` after the time in its name was
    /// taken.
    Enqueue(MonotonicTime),
    /// Rewrite our queue cell (it vanished, or it is due for renewal).
    WriteQueue,
    /// Delete our queue cell, whose first write was acknowledged too late, to enqueue again.
    Requeue,
    /// Read the head of the queue.
    ReadQueue,
    /// Write our main cell.
    WriteMain,
    /// Read the main row.
    ReadMain,
    /// Delete our main cell after a conflict.
    DeleteMain,
    /// We wait in the main row: rewrite our main cell with the waiter TTL, then read the
    /// main row again at the instant given.
    ShortenMain {
        /// When to read the main row again.
        read_at: MonotonicTime,
    },
    /// Without fencing: our main cell, last written with the waiter TTL, is alone in the
    /// main row; rewrite it with `lease_ttl` before holding. (With fencing the rewrite goes
    /// with the fence read.)
    RenewMain,
    /// Read the fence, to pick our fencing token.
    ReadFence,
    /// Publish our fencing token.
    WriteFence(FencingToken),
    /// Combined mode: write our shadow cell (the old algorithm's gate).
    WriteShadow,
    /// Combined mode: is ours the only shadow cell?
    ReadShadow,
    /// Combined mode: delete our shadow cell after a conflict.
    DeleteShadow,
    /// Fast path: write our queue cell (kept only if acknowledged by the instant given, as
    /// for `Enqueue`) and our main cell together.
    FastWrite(MonotonicTime),
    /// Fast path: read the head of the queue and the main row together.
    FastRead,
    /// Fast path given up: delete our main cell, then go on as without the fast path
    /// (enqueueing again first if the queue cell was acknowledged too late).
    LeaveFastPath {
        /// Whether the queue cell must be enqueued again.
        requeue: bool,
    },
}

/// What we know of one of our cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Written {
    /// Never written, or deleted.
    No,
    /// A write was sent but not acknowledged; it may have landed.
    Maybe,
    /// Acknowledged; the write was sent at this instant.
    At(MonotonicTime),
}

impl Written {
    pub(crate) fn maybe(self) -> bool {
        self != Written::No
    }
}

/// What one queue read told us.
#[derive(Debug, PartialEq, Eq)]
enum QueueView {
    First,
    /// `position` cells precede ours (at least, if ours was beyond the slice).
    Behind {
        position: usize,
        ahead: Vec<QueueColumn>,
        /// Ours was beyond the slice, so `position` is the slice's length.
        beyond_slice: bool,
    },
    /// Our cell is not there although it should be (expired or removed).
    Missing,
}

impl Acquire {
    /// Starts acquiring `lock_id` as `owner`, with the owner id naming the main cell and
    /// queue reads from the beginning of the row.
    ///
    /// `seed` drives the poll jitter; `give_up_at`, if set, is when to stop trying, clean up
    /// and report [`AcquireOutcome::TimedOut`]. The queue timestamp is `now.timestamp`.
    pub fn new(
        now: Now,
        config: ValidConfig,
        mode: Mode,
        lock_id: LockId,
        owner: OwnerId,
        seed: u64,
        give_up_at: Option<MonotonicTime>,
    ) -> Self {
        let options = AcquireOptions {
            give_up_at,
            ..AcquireOptions::default()
        };
        Self::with_options(now, config, mode, lock_id, owner, seed, options)
    }

    /// Starts acquiring `lock_id` as `owner` with `options` (a seat, a queue floor, a
    /// give-up deadline). `seed` drives the poll jitter. The queue timestamp is
    /// `now.timestamp`.
    pub(crate) fn with_options(
        now: Now,
        config: ValidConfig,
        mode: Mode,
        lock_id: LockId,
        owner: OwnerId,
        seed: u64,
        options: AcquireOptions,
    ) -> Self {
        let mut attempt = Attempt::new(config.clone(), options.give_up_at);
        let lock_interval = config
            .config()
            .adapts_queue_margin()
            .then(|| {
                first_lock_interval(
                    now.timestamp,
                    &options,
                    config.config().poll.margin_acquisitions,
                )
            })
            .flatten();
        let seat = match options.seat {
            Some(seat) => {
                attempt.stamps = Stamps::after(seat.after);
                seat.column
            }
            None => ColumnName::from(&owner),
        };
        let queue_column = QueueColumn::new(now.timestamp, owner);
        let queue_name = queue_column.encode();
        let margin = config.config().queue_margin_for(lock_interval);
        let queue_floor = options
            .queue_floor
            .map(|floor| QueueColumn::time_prefix(floor - margin));
        let mut acquire = Acquire {
            attempt,
            seat,
            queue_floor,
            queue_head: None,
            floor_from_main: options.floor_from_main && mode == Mode::Mandatory,
            queue_column,
            queue_name,
            queue_row: RowKey::new(RowKind::Queue, lock_id.clone()),
            main_row: RowKey::new(RowKind::Main, lock_id.clone()),
            shadow_row: RowKey::new(RowKind::Shadow, lock_id.clone()),
            combined: config.config().algorithm == Algorithm::Combined,
            waits_in_main: config.config().wait_in_main_row
                && config.config().algorithm == Algorithm::Queue,
            queue_left: false,
            waiting_in_main: false,
            short_main_sent: None,
            main_value: Vec::new(),
            mode,
            lock_id,
            rng: SplitMix64::new(seed),
            step: Step::WriteQueue,
            started_at: now.instant,
            conflicts: 0,
            missing: 0,
            queue_written: Written::No,
            queue_acked: None,
            main_written: Written::No,
            shadow_written: Written::No,
            poll: PollTracker::new(now.instant, options.poll_hint),
            stats: AcquireStats {
                lock_interval: lock_interval.unwrap_or_default(),
                ..AcquireStats::default()
            },
            queue_value: options
                .wake_hint_listener
                .map(hint::queue_value)
                .unwrap_or_default(),
            hinted: options.wake_hint_listener.is_some(),
            successors: Vec::new(),
            poll_pause_until: None,
            last_hinted_read: None,
            hint_pending: None,
            asked_head: None,
            hint_out: None,
            rejoin_behind: None,
        };
        let first = match mode {
            Mode::Mandatory if options.fast_path && !acquire.combined => {
                Step::FastWrite(now.instant + acquire.config().request_timeout)
            }
            Mode::Mandatory => acquire.enqueue_step(now.instant),
            Mode::Soft => Step::CheckMain,
        };
        acquire.issue(now, first);
        acquire
    }

    /// The lock being acquired.
    pub fn lock_id(&self) -> &LockId {
        &self.lock_id
    }

    /// The owner id of this acquisition.
    pub fn owner(&self) -> &OwnerId {
        &self.queue_column.owner
    }

    /// Our queue column.
    pub fn queue_column(&self) -> &QueueColumn {
        &self.queue_column
    }

    /// Our main-row column (the seat).
    pub fn seat(&self) -> &ColumnName {
        &self.seat
    }

    /// How far before a `AcquireOptions::queue_floor`'s time queue reads start when the
    /// locker has not measured the time between the lock's acquisitions:
    /// [`LockConfig::queue_margin_for`] of none, by default `2 × max_clock_skew +
    /// request_timeout`. A queue cell can sort before a head that was already seen by at
    /// most that default: by the skew between two owners' clocks, or by how long its write
    /// took to become visible, which an acquisition keeps within `request_timeout` by
    /// enqueueing again when its first queue write was acknowledged later (see [`Acquire`]
    /// on tombstones). A shorter margin may hide a late cell; its owner joins again under
    /// the time of the owner that passed it ([`crate::PollConfig::queue_margin`]).
    pub fn floor_margin(config: &LockConfig) -> Duration {
        config.queue_margin_for(None)
    }

    /// How far before the latest head seen this acquisition's queue reads start now: the
    /// margin for the time between the lock's acquisitions it measured
    /// ([`AcquireStats::lock_interval`], [`LockConfig::queue_margin_for`]).
    pub fn queue_margin(&self) -> Duration {
        self.config()
            .queue_margin_for(self.stats.measured_lock_interval())
    }

    /// The first live queue cell of the last queue read (none before the first read): its
    /// time is a good `AcquireOptions::queue_floor` for the next acquisition of the lock.
    pub fn queue_head(&self) -> Option<&QueueColumn> {
        self.queue_head.as_ref()
    }

    /// The highest write timestamp used so far (including the cleanup's deletes); a later
    /// acquisition in the same seat must start above it (`Seat::after`).
    pub fn last_timestamp(&self) -> Timestamp {
        self.attempt.last_timestamp()
    }

    /// Counters so far.
    pub fn stats(&self) -> AcquireStats {
        AcquireStats {
            requests: self.attempt.requests_sent(),
            storage_failures: self.attempt.storage_failures,
            handoff_estimate: self.poll.handoff_estimate().unwrap_or_default(),
            round_trip: self.poll.round_trip(),
            ..self.stats
        }
    }

    /// Gives up: deletes whatever cells we may have written, then reports
    /// [`AcquireOutcome::Abandoned`]. Does nothing if the acquisition is already ending.
    pub fn abandon(&mut self, now: Now) {
        if !self.attempt.is_over() {
            self.finish(now, Ending::Abandoned);
        }
    }

    fn config(&self) -> &LockConfig {
        self.attempt.config.config()
    }

    /// The value of a main (or shadow) write, kept to recognise our cell: our queue column,
    /// which holds the owner id (telling our cell from one an earlier acquisition left in
    /// the same seat) and tells owners waiting in the main row whether we were ahead of
    /// them; marked as a queue head when a queue read has shown us first, that is, on every
    /// main write but the fast path's, which goes out before the queue is read.
    fn main_value_to_write(&mut self, head_seen: bool) -> Vec<u8> {
        let column = self.queue_column.clone();
        self.main_value = if head_seen {
            MainCellValue::Head(column)
        } else {
            MainCellValue::Queued(column)
        }
        .encode();
        self.main_value.clone()
    }

    fn only_ours(&self, cells: &[Cell]) -> bool {
        matches!(cells, [cell] if self.is_ours(cell))
    }

    fn is_ours(&self, cell: &Cell) -> bool {
        cell.column == self.seat && cell.value == self.main_value
    }

    /// Whether a main read that holds more than our cell lets us wait in the main row
    /// rather than back off (docs/algorithm.md, section "Waiting in the main row"): we are a mandatory owner
    /// first in the queue, the read shows our cell (or is a full slice), and every other
    /// cell carries a queue column that sorts before ours. Those owners were ahead of us and
    /// have left the queue: a holder leaves it once it holds. An owner never waits for a
    /// later column, so no two owners wait for each other.
    fn may_wait_in_main(&self, cells: &[Cell]) -> bool {
        if !self.waits_in_main || self.mode != Mode::Mandatory {
            return false;
        }
        let shows_ours = cells.iter().any(|cell| self.is_ours(cell));
        (shows_ours || cells.len() >= MAIN_READ_LIMIT as usize)
            && cells.iter().filter(|cell| !self.is_ours(cell)).all(|cell| {
                MainCellValue::decode(&cell.value)
                    .ok()
                    .and_then(|value| value.queue_column().cloned())
                    .is_some_and(|column| column < self.queue_column)
            })
    }

    fn issue(&mut self, now: Now, step: Step) {
        let (request, rest) = self.requests(now, step);
        self.step = step;
        self.attempt.send_group(now, request, rest);
    }

    /// The request `step` sends, and those sent with it (the fast path's second request, a
    /// main read for a floor, the queue delete and main renewal of the fence read).
    fn requests(&mut self, now: Now, step: Step) -> (StorageRequest, Vec<StorageRequest>) {
        let main_column = self.seat.clone();
        let request = match step {
            Step::CheckMain => StorageRequest::Read(RowRead::first(self.main_row.clone(), 1)),
            Step::Enqueue(_) | Step::WriteQueue => {
                self.queue_written = Written::Maybe;
                self.queue_left = false;
                let ttl = self.attempt.config.waiter_ttl();
                let write = self.attempt.write_with_ttl(
                    now,
                    self.queue_row.clone(),
                    self.queue_name.clone(),
                    self.queue_value.clone(),
                    ttl,
                );
                if matches!(step, Step::Enqueue(_)) && self.floor_from_main {
                    let (main, _) = self.requests(now, Step::ReadMain);
                    return (write, vec![main]);
                }
                write
            }
            Step::ReadQueue => {
                let mut read =
                    RowRead::first(self.queue_row.clone(), self.config().poll.queue_read_limit);
                read.start = self
                    .queue_floor
                    .as_ref()
                    .map(|floor| floor.min(&self.queue_name).clone());
                StorageRequest::Read(read)
            }
            Step::Requeue => self.queue_delete(now),
            Step::WriteMain | Step::ShortenMain { .. } | Step::RenewMain => {
                self.main_written = Written::Maybe;
                let value = self.main_value_to_write(true);
                let ttl = match step {
                    Step::RenewMain => self.attempt.config.ttl(),
                    _ => self.main_ttl(),
                };
                self.attempt
                    .write_with_ttl(now, self.main_row.clone(), main_column, value, ttl)
            }
            Step::ReadMain => {
                StorageRequest::Read(RowRead::first(self.main_row.clone(), MAIN_READ_LIMIT))
            }
            Step::DeleteMain => self.attempt.delete(now, self.main_row.clone(), main_column),
            Step::WriteShadow => {
                self.shadow_written = Written::Maybe;
                let value = self.main_value_to_write(true);
                self.attempt
                    .write(now, self.shadow_row.clone(), main_column, value)
            }
            Step::ReadShadow => StorageRequest::Read(RowRead::first(self.shadow_row.clone(), 2)),
            Step::DeleteShadow => self
                .attempt
                .delete(now, self.shadow_row.clone(), main_column),
            Step::FastWrite(_) => {
                let (queue, _) = self.requests(now, Step::WriteQueue);
                self.main_written = Written::Maybe;
                let value = self.main_value_to_write(false);
                let main = self
                    .attempt
                    .write(now, self.main_row.clone(), main_column, value);
                return (queue, vec![main]);
            }
            Step::FastRead => {
                let (queue, _) = self.requests(now, Step::ReadQueue);
                let (main, _) = self.requests(now, Step::ReadMain);
                return (queue, vec![main]);
            }
            Step::LeaveFastPath { .. } => {
                self.attempt.delete(now, self.main_row.clone(), main_column)
            }
            Step::ReadFence => {
                let read = StorageRequest::Read(FencingToken::read(&self.lock_id));
                let mut rest = Vec::new();
                // Our main cell was last written with the waiter TTL: renew it with
                // `lease_ttl` now, in the fence read's round trip.
                if self.short_main_sent.is_some() {
                    let (renewal, _) = self.requests(now, Step::RenewMain);
                    rest.push(renewal);
                }
                // The main row is ours: leave the queue now, so that the owner behind us
                // can wait in the main row while we take the token.
                if self.leaves_queue_with_fence_read() {
                    rest.push(self.queue_delete(now));
                }
                return (read, rest);
            }
            Step::WriteFence(token) => {
                let write = StorageRequest::Write(token.write(&self.lock_id));
                // We kept our queue cell through the renewal of a short main cell: leave the
                // queue now that the renewal made the main row ours.
                if self.leaves_queue_with_fence() {
                    return (write, vec![self.queue_delete(now)]);
                }
                write
            }
        };
        (request, Vec::new())
    }

    /// Whether a fence request goes with a delete of our queue cell: the main row is ours,
    /// and we leave the queue so that the owner behind us can wait in the main row. Not
    /// when our release may linger and we listen for hints: then the owner behind sees our
    /// cell, with our listener, first in the queue, and asks us not to linger
    /// ([`HintKind::Wanted`]).
    fn leaves_queue_with_fence(&self) -> bool {
        self.waits_in_main && self.queue_written.maybe() && !self.stays_queued_to_be_asked()
    }

    /// Whether we keep our queue cell while we hold so that an owner behind can ask us not
    /// to linger: we listen for hints, the configuration lingers, and the lock was idle when
    /// we came (as [`AcquireStats::found_idle`] says; only then may the release linger).
    fn stays_queued_to_be_asked(&self) -> bool {
        self.hinted && !self.config().linger.is_zero() && self.stats.found_idle()
    }

    /// Whether the fence read goes with the queue delete: not when it also renews a short
    /// main cell, since a renewal acknowledged too late gives the main row back and we
    /// then wait on in our place in the queue; the fence write takes the delete instead.
    fn leaves_queue_with_fence_read(&self) -> bool {
        self.leaves_queue_with_fence() && self.short_main_sent.is_none()
    }

    /// The delete of our queue cell.
    fn queue_delete(&mut self, now: Now) -> StorageRequest {
        self.attempt
            .delete(now, self.queue_row.clone(), self.queue_name.clone())
    }

    /// Our queue cell's delete, sent with a fence request, was acknowledged.
    fn left_queue(&mut self) {
        self.queue_written = Written::No;
        self.queue_acked = None;
        self.queue_left = true;
    }

    /// Whether an owner waiting in the main row writes its main cell with the waiter TTL:
    /// only if that is shorter than `lease_ttl` (docs/algorithm.md, section "Waiting in the
    /// main row").
    fn shortens_main(&self) -> bool {
        self.waits_in_main && self.attempt.config.waiter_ttl() < self.attempt.config.ttl()
    }

    /// The TTL of our next main write (other than the renewal before holding): the waiter
    /// TTL while we wait in the main row, `lease_ttl` otherwise.
    fn main_ttl(&self) -> Ttl {
        if self.waiting_in_main && self.shortens_main() {
            self.attempt.config.waiter_ttl()
        } else {
            self.attempt.config.ttl()
        }
    }

    /// The instant by which a renewal of our main cell, last written with the waiter TTL,
    /// must be acknowledged for the lock to be ours: the send of that write plus the
    /// waiter's effective life. Until then the cell is live on a quorum without a gap, as a
    /// holder's is between lease renewals. `None` when the cell carries `lease_ttl`.
    fn renewal_due_by(&self) -> Option<MonotonicTime> {
        self.short_main_sent
            .map(|sent_at| sent_at + self.attempt.config.waiter_effective())
    }

    /// True when a renewal of our short main cell is acknowledged (or would be sent) too
    /// late: the cell may have expired before it, and another owner taken the lock.
    fn renewal_late(&self, now: Now) -> bool {
        self.renewal_due_by().is_some_and(|due| now.instant >= due)
    }

    /// Our main cell was acknowledged as deleted, or never written: we wait in the main
    /// row no more.
    fn main_gone(&mut self) {
        self.main_written = Written::No;
        self.waiting_in_main = false;
        self.short_main_sent = None;
    }

    /// A write of our main cell sent at `sent_at`, with `lease_ttl` or not, was
    /// acknowledged.
    fn main_acked(&mut self, sent_at: MonotonicTime, short: bool) {
        self.main_written = Written::At(sent_at);
        self.short_main_sent = short.then_some(sent_at);
    }

    /// Pauses before sending `step`'s request at `until`: a poll pause, which a wake-up
    /// hint may cut short (when we listen for hints; otherwise nothing is recorded, so that
    /// the machine's states are those without hints).
    fn sleep(&mut self, step: Step, until: MonotonicTime) {
        if !self.hinted {
            self.back_off(step, until);
            return;
        }
        self.step = step;
        // A hint that came while the last request was in flight ends the pause at once:
        // one read more, after the answer, so still one a round trip.
        let until = match self.hint_pending.take() {
            Some(hinted_at) => {
                self.last_hinted_read = Some(hinted_at);
                self.stats.hinted_reads += 1;
                hinted_at.min(until)
            }
            None => until,
        };
        self.poll_pause_until = Some(until);
        self.attempt.sleep_until(until);
    }

    /// Pauses before sending `step`'s request at `until`, with no hint cutting it short:
    /// the pause after a conflict, which lets the other owner's delete land before we look
    /// again (cut short by hints, two owners could meet in the main row tick after tick,
    /// as the model checker found).
    fn back_off(&mut self, step: Step, until: MonotonicTime) {
        self.step = step;
        self.poll_pause_until = None;
        self.attempt.sleep_until(until);
    }

    /// A wake-up hint for this acquisition arrived (docs/algorithm.md, section "Wake-up
    /// hints"): the lock has moved ahead of us. If we are in a poll pause, the read it
    /// ends with is sent now, at most once a round trip (never more often than
    /// [`MIN_NEXT_IN_LINE_PERIOD`]). Anything else (a request in flight, a retry's backoff,
    /// a hint too soon after the last, an acquisition that does not listen) ignores it. A
    /// hint decides nothing: the read it brings forward is the one the pause would have
    /// sent, and what that read finds decides as always.
    fn on_wake_hint(&mut self, now: Now) {
        if !self.hinted || self.attempt.is_over() {
            return;
        }
        let Some(until) = self.attempt.sleeping_until() else {
            // A request is in flight, perhaps a read sent before the lock moved: the next
            // poll pause is skipped.
            self.hint_pending = Some(now.instant);
            return;
        };
        if self.poll_pause_until != Some(until) || until <= now.instant {
            return;
        }
        let spacing = self.poll.round_trip().max(MIN_NEXT_IN_LINE_PERIOD);
        if self
            .last_hinted_read
            .is_some_and(|at| now.instant < at + spacing)
        {
            return;
        }
        self.last_hinted_read = Some(now.instant);
        self.stats.hinted_reads += 1;
        self.sleep(self.step, now.instant);
        self.handle_timeout(now);
    }

    /// The poll pause of an owner `position` places back that listens for wake-up hints
    /// (docs/algorithm.md, section "Wake-up hints"), from the pause `polled` it would take
    /// without them. Next in line, a release's hint tells it when the lock is free: it
    /// polls at least half a hand-off apart, in case the hint is lost. Within
    /// [`hint::SUCCESSORS_HINTED`] places of the front, it may be hinted or not, and polls
    /// as without hints. Further back, the owners ahead hint it as its turn nears: it
    /// polls only every [`hint::FALLBACK_POLL`]. Never beyond `poll.max_interval`.
    fn listening_pause(&self, polled: Duration, position: usize) -> Duration {
        if !self.hinted {
            return polled;
        }
        let relaxed = if position <= 1 {
            self.poll.handoff_now() / 2
        } else if position >= hint::RELAXED_PLACES {
            hint::FALLBACK_POLL
        } else {
            return polled;
        };
        polled.max(relaxed.min(self.config().poll.max_interval))
    }

    /// Next in line (`position` 1 in a queue read's `cells`), asks the owner first in the
    /// queue, if its cell names a hint listener and we have not asked it yet, not to linger
    /// after its release ([`HintKind::Wanted`]; docs/algorithm.md, section "Lingering after
    /// a release"). Only a listening acquisition of a configuration that lingers asks (the
    /// lockers of a lock share one): it is the one the holder's hints then reach. The hint
    /// decides nothing: an owner that gets it only releases sooner.
    fn ask_head_not_to_linger(&mut self, position: usize, cells: &[Cell]) {
        if !self.hinted || position != 1 || self.config().linger.is_zero() {
            return;
        }
        let first_cell = cells.get(..1).unwrap_or_default();
        let Some(head) = hint::listeners_queued(first_cell, None).next() else {
            return;
        };
        if self.asked_head.as_ref() == Some(&head.owner) {
            return;
        }
        self.asked_head = Some(head.owner.clone());
        self.stats.wanted_hints += 1;
        let wanted = WakeHint {
            lock_id: self.lock_id.clone(),
            owner: head.owner,
            kind: HintKind::Wanted,
        };
        self.hint_out = Some((head.listener, wanted));
    }

    /// Records, at our turn, the owners queued right behind us whose cells name a hint
    /// listener: the queue read's cells after ours.
    fn note_successors(&mut self, cells: &[Cell]) {
        if !self.hinted {
            return;
        }
        let behind = cells
            .iter()
            .position(|cell| cell.column == self.queue_name)
            .map_or(&[][..], |ours| &cells[ours + 1..]);
        self.successors = hint::listeners_queued(behind, None).take(1).collect();
    }

    fn finish(&mut self, now: Now, ending: Ending) {
        let mut cells = Vec::new();
        if self.queue_written.maybe() {
            cells.push((self.queue_row.clone(), self.queue_name.clone()));
        }
        if self.main_written.maybe() {
            cells.push((self.main_row.clone(), self.seat.clone()));
        }
        if self.shadow_written.maybe() {
            cells.push((self.shadow_row.clone(), self.seat.clone()));
        }
        self.attempt.finish(now, ending, cells);
    }

    /// The first write of a queue column whose time was taken at `taken_at`.
    fn enqueue_step(&self, taken_at: MonotonicTime) -> Step {
        Step::Enqueue(taken_at + self.config().request_timeout)
    }

    /// Takes a new queue column under the current time, after the late one was deleted, or,
    /// if we rejoin, under the time of the owner that passed us: reads that start from its
    /// head see us, and its next acquisition, named later, sorts behind us.
    fn requeue(&mut self, now: Now) {
        let owner = self.queue_column.owner.clone();
        let timestamp = match self.rejoin_behind.take() {
            Some(passer) => passer.timestamp,
            None => now.timestamp,
        };
        self.queue_column = QueueColumn::new(timestamp, owner);
        self.queue_name = self.queue_column.encode();
        let step = self.enqueue_step(now.instant);
        self.issue(now, step);
    }

    fn view_queue(&self, cells: &[Cell]) -> QueueView {
        if self.first_is_ours(cells) {
            return QueueView::First;
        }
        let columns: Vec<QueueColumn> = cells
            .iter()
            .filter_map(|cell| QueueColumn::decode(cell.column.as_str()).ok())
            .collect();
        match columns
            .iter()
            .position(|column| *column == self.queue_column)
        {
            Some(0) => QueueView::First,
            Some(position) => QueueView::Behind {
                position,
                ahead: columns[..position].to_vec(),
                beyond_slice: false,
            },
            None => {
                let slice_full = cells.len() >= self.config().poll.queue_read_limit as usize;
                let all_ahead = columns.iter().all(|column| *column < self.queue_column);
                if slice_full && all_ahead {
                    QueueView::Behind {
                        position: columns.len(),
                        ahead: columns,
                        beyond_slice: true,
                    }
                } else {
                    QueueView::Missing
                }
            }
        }
    }

    /// True when a queue read's first cell is ours: the uncontended case, told by name
    /// without decoding the cells.
    fn first_is_ours(&self, cells: &[Cell]) -> bool {
        cells
            .first()
            .is_some_and(|cell| cell.column == self.queue_name)
    }

    /// The current step succeeded; `paired` is the answer to the second request of a
    /// fast-path step, or of a first queue write that reads the main row for a floor.
    fn on_success(
        &mut self,
        now: Now,
        sent_at: MonotonicTime,
        response: StorageResponse,
        paired: Vec<StorageResponse>,
    ) {
        let cells = response.into_cells();
        if let (Step::Enqueue(_), Some(main)) = (self.step, paired.first()) {
            self.floor_from_main = false;
            if let StorageResponse::Cells(main) = main {
                self.floor_from_main_row(main);
            }
        }
        match self.step {
            Step::CheckMain if cells.is_empty() => {
                let step = self.enqueue_step(self.started_at);
                self.issue(now, step);
            }
            Step::CheckMain => self.finish(now, Ending::Busy),
            // Bounded: storage that cannot acknowledge a first write in time, again and
            // again, costs our place in line once too often, not the acquisition.
            Step::Enqueue(due)
                if now.instant > due && self.stats.requeues < self.config().storage_retries =>
            {
                self.issue(now, Step::Requeue)
            }
            // Our cell may have expired before this rewrite landed, letting owners behind
            // pass: enqueue again rather than take back a place we may have lost.
            Step::WriteQueue
                if self.queue_may_have_lapsed(now)
                    && self.stats.requeues < self.config().storage_retries =>
            {
                self.queue_written = Written::At(sent_at);
                self.issue(now, Step::Requeue)
            }
            Step::Enqueue(_) | Step::WriteQueue => {
                self.queue_written = Written::At(sent_at);
                self.queue_acked = Some(sent_at);
                // A mandatory owner's first write, soon after a release of its own that
                // left others to go first: sleep to the turn that release tells of,
                // rather than read at once only to find our place (section "When a waiter polls").
                let first_write = self.mode == Mode::Mandatory
                    && self.stats.queue_reads == 0
                    && self.stats.requeues == 0;
                let min_interval = self.config().poll.min_interval;
                match first_write
                    .then(|| self.poll.skip_arrival_read(now.instant, min_interval))
                    .flatten()
                {
                    Some(wake) => self.sleep(Step::ReadQueue, wake),
                    None => self.issue(now, Step::ReadQueue),
                }
            }
            Step::Requeue => {
                self.queue_written = Written::No;
                self.queue_acked = None;
                if self.rejoin_behind.is_some() {
                    self.stats.rejoins += 1;
                } else {
                    self.stats.requeues += 1;
                }
                self.requeue(now);
            }
            Step::ReadQueue => {
                self.saw_queue(&cells);
                self.on_queue(now, sent_at, &cells);
            }
            Step::FastWrite(due) => {
                self.queue_written = Written::At(sent_at);
                self.queue_acked = Some(sent_at);
                self.main_written = Written::At(sent_at);
                let late = now.instant > due && self.stats.requeues < self.config().storage_retries;
                let next = if late {
                    Step::LeaveFastPath { requeue: true }
                } else {
                    Step::FastRead
                };
                self.issue(now, next);
            }
            Step::FastRead => {
                self.saw_queue(&cells);
                let main = paired
                    .into_iter()
                    .next()
                    .map(StorageResponse::into_cells)
                    .unwrap_or_default();
                let view = self.view_queue(&cells);
                if let QueueView::Behind { position, .. } = view {
                    self.ask_head_not_to_linger(position, &cells);
                }
                let first = matches!(view, QueueView::First);
                if first && self.only_ours(&main) {
                    self.note_behind_at_turn(now, &cells);
                    self.on_main(now, sent_at, &main);
                } else {
                    if !self.only_ours(&main) {
                        self.stats.conflicts += 1;
                    }
                    self.issue(now, Step::LeaveFastPath { requeue: false });
                }
            }
            Step::LeaveFastPath { requeue } => {
                self.main_gone();
                let next = if requeue {
                    Step::Requeue
                } else {
                    Step::ReadQueue
                };
                self.issue(now, next);
            }
            Step::WriteMain => {
                let short = self.main_ttl() < self.attempt.config.ttl();
                self.main_acked(sent_at, short);
                self.issue(now, Step::ReadMain);
            }
            Step::ShortenMain { read_at } => {
                self.main_acked(sent_at, true);
                if read_at <= now.instant {
                    self.issue(now, Step::ReadMain);
                } else {
                    self.sleep(Step::ReadMain, read_at);
                }
            }
            Step::RenewMain => self.on_renewal(now, sent_at, None),
            Step::ReadMain => self.on_main(now, sent_at, &cells),
            Step::ReadFence => {
                if self.leaves_queue_with_fence_read() {
                    self.left_queue();
                }
                let token = FencingToken::after(FencingToken::seen(&cells), now.timestamp);
                if self.short_main_sent.is_some() {
                    self.on_renewal(now, sent_at, Some(token));
                } else {
                    self.issue(now, Step::WriteFence(token));
                }
            }
            Step::WriteFence(token) => {
                if self.leaves_queue_with_fence() {
                    self.left_queue();
                }
                self.acquired(now, Some(token))
            }
            Step::DeleteMain if self.shadow_written.maybe() => {
                self.main_gone();
                self.issue(now, Step::DeleteShadow);
            }
            Step::DeleteMain if self.rejoin_behind.is_some() => {
                self.main_gone();
                self.issue(now, Step::Requeue);
            }
            Step::DeleteMain => {
                self.main_gone();
                self.after_conflict(now);
            }
            Step::WriteShadow => {
                self.shadow_written = Written::At(sent_at);
                self.issue(now, Step::ReadShadow);
            }
            Step::ReadShadow if self.only_ours(&cells) => {
                self.issue(now, Step::WriteMain);
            }
            Step::ReadShadow => {
                self.stats.conflicts += 1;
                self.conflicts = self.conflicts.saturating_add(1);
                self.issue(now, Step::DeleteShadow);
            }
            Step::DeleteShadow => {
                self.shadow_written = Written::No;
                self.after_conflict(now);
            }
        }
    }

    /// Counts a queue read and remembers the head it saw: the floor of this acquisition's
    /// later reads, and of the next acquisition's.
    fn saw_queue(&mut self, cells: &[Cell]) {
        self.stats.queue_reads += 1;
        if self.config().adapts_queue_margin()
            && let Some(interval) = queue_spread(cells)
        {
            self.stats.lock_interval = interval;
        }
        self.queue_head = if self.first_is_ours(cells) {
            Some(self.queue_column.clone())
        } else {
            cells
                .iter()
                .find_map(|cell| QueueColumn::decode(cell.column.as_str()).ok())
        };
        // A head just seen is as good a floor as the one the last acquisition saw, and
        // fresher: the reads still to come step over no tombstone older than the margin
        // before it. The first acquisition of a lock by a locker starts `cold_lookback`
        // before now, and without this every poll of it walked that long of tombstones.
        if let Some(head) = self.queue_head.as_ref().map(|head| head.timestamp) {
            self.raise_floor(head);
        }
    }

    /// Moves the floor of queue reads up to the margin before `head`, the enqueue time of a
    /// queue head seen, if that is later than where they start now.
    fn raise_floor(&mut self, head: Timestamp) {
        let floor = QueueColumn::time_prefix(head - self.queue_margin());
        if self
            .queue_floor
            .as_ref()
            .is_none_or(|current| *current < floor)
        {
            self.queue_floor = Some(floor);
        }
    }

    /// A main read sent with our first queue write: the latest queue head another owner's
    /// main cell names ([`MainCellValue::Head`]) is as good a floor as one we saw ourselves
    /// (docs/algorithm.md, section "Queue floors and tombstones"). Cells without a head (the fast path's, older
    /// versions', anything undecodable) tell nothing and are passed over.
    fn floor_from_main_row(&mut self, cells: &[Cell]) {
        let latest_head = cells
            .iter()
            .filter(|cell| !self.is_ours(cell))
            .filter_map(|cell| MainCellValue::decode(&cell.value).ok())
            .filter_map(|value| value.head().map(|head| head.timestamp))
            .max();
        if let Some(head) = latest_head {
            self.raise_floor(head);
        }
    }

    /// At the read that found us first: how many owners are queued behind us, and how many
    /// will be ahead if we join again at once after our release
    /// ([`AcquireStats::ahead_at_return`]). The owner that held before us joins again (if it
    /// does) just after its release, and may not show in this read yet: unless a cell
    /// behind us was enqueued within half a hand-off and a round trip of now, one more is
    /// counted for it, if a read before this one showed it ahead of us.
    fn note_behind_at_turn(&mut self, now: Now, cells: &[Cell]) {
        self.poll.observe_first(now.instant);
        self.note_successors(cells);
        let recent_since =
            now.timestamp - (self.poll.handoff_now() / 2).saturating_add(self.poll.round_trip());
        let (mut count, mut previous_holder_joined) = (0u32, false);
        for column in cells
            .iter()
            .skip(1)
            .filter_map(|cell| QueueColumn::decode(cell.column.as_str()).ok())
        {
            count = count.saturating_add(1);
            previous_holder_joined |= column.timestamp >= recent_since;
        }
        self.stats.behind_at_turn = count;
        self.stats.ahead_at_return =
            if count > 0 && !previous_holder_joined && self.poll.saw_owners_ahead() {
                count.saturating_add(1)
            } else {
                count
            };
    }

    fn on_queue(&mut self, now: Now, sent_at: MonotonicTime, cells: &[Cell]) {
        match self.view_queue(cells) {
            QueueView::First => {
                self.missing = 0;
                self.note_behind_at_turn(now, cells);
                let gate = if self.combined {
                    Step::WriteShadow
                } else {
                    Step::WriteMain
                };
                self.issue(now, gate);
            }
            // We deleted our queue cell with the fence read, then gave the lock back (the
            // lease check): join the queue again under the current time, as after any cell
            // that may have lapsed, rather than bring back the old place.
            QueueView::Missing if self.queue_left => self.requeue(now),
            QueueView::Missing => {
                self.missing += 1;
                if self.missing > self.config().storage_retries + 1 {
                    let error = Error::rejected(
                        format!("read {}", self.queue_row),
                        "our queue cell is not visible after a successful write; check that \
                         reads and writes use QUORUM (or LOCAL_QUORUM) and that no tombstone \
                         with a future timestamp shadows it",
                    );
                    self.finish(now, Ending::Failed(error));
                } else {
                    self.issue(now, Step::WriteQueue);
                }
            }
            QueueView::Behind { .. } if self.mode == Mode::Soft => {
                self.finish(now, Ending::Busy);
            }
            // A main cell left from waiting in the main row (our queue cell was rewritten
            // and others are now ahead): take it out, so that nobody waits for it.
            QueueView::Behind { .. } if self.waits_in_main && self.main_written.maybe() => {
                self.conflict(now)
            }
            QueueView::Behind {
                position,
                ahead,
                beyond_slice,
            } => {
                self.missing = 0;
                self.ask_head_not_to_linger(position, cells);
                self.poll
                    .observe(now.instant, sent_at, ahead, self.config().poll.min_interval);
                let config = &self.attempt.config;
                let pause = if beyond_slice {
                    self.poll
                        .pause_beyond_slice(now.instant, position, config, &mut self.rng)
                } else {
                    self.poll.pause(now.instant, position, config)
                };
                let pause = self.listening_pause(pause, position);
                self.sleep(Step::ReadQueue, now.instant + pause);
            }
        }
    }

    fn on_main(&mut self, now: Now, sent_at: MonotonicTime, cells: &[Cell]) {
        if self.only_ours(cells) {
            // A cell last written with the waiter TTL must be renewed with `lease_ttl`
            // before we hold, in time (docs/algorithm.md, section "Waiting in the main
            // row"); past that time it may have lapsed already.
            if self.renewal_late(now) {
                self.conflict(now);
            } else if self.config().fencing {
                self.issue(now, Step::ReadFence);
            } else if self.short_main_sent.is_some() {
                self.issue(now, Step::RenewMain);
            } else {
                self.acquired(now, None);
            }
        } else if self.may_wait_in_main(cells) {
            self.stats.main_row_waits += 1;
            // The pace assumes a read takes the round trip: measure it on these reads too,
            // or a round trip learnt from slow queue reads would set a pace of back-to-back
            // main reads that take no time.
            self.poll.observe_round_trip(now.instant, sent_at);
            let pause = self.poll.pause(now.instant, 1, &self.attempt.config);
            let pause = self.listening_pause(pause, 1);
            let first_wait = !self.waiting_in_main;
            self.waiting_in_main = true;
            if first_wait && self.shortens_main() {
                // From now on our main cell carries the waiter TTL, so that a waiter that
                // dies first in line blocks the owners behind it no longer than its queue
                // cell would. The write goes out while we wait anyway.
                self.issue(
                    now,
                    Step::ShortenMain {
                        read_at: now.instant + pause,
                    },
                );
            } else {
                self.sleep(Step::ReadMain, now.instant + pause);
            }
        } else {
            self.rejoin_behind = self.passed_by(cells);
            self.conflict(now);
        }
    }

    /// With queue margins that may be shorter than the safe one
    /// ([`crate::PollConfig::queue_margin`], [`crate::PollConfig::margin_acquisitions`]):
    /// the latest queue column that a main read shows marked as a head
    /// ([`MainCellValue::Head`]) and whose time is more than the shortest margin
    /// ([`LockConfig::least_queue_margin`]) after ours. Its
    /// owner's queue read showed it first, so our cell, which sorts before it, was not in
    /// that read; and owners whose floors come from that head start their reads past our
    /// cell, so that each of them could pass us in turn. We join again under its time. A
    /// later head within the margin is a plain conflict: the reads that start from it
    /// still see us.
    fn passed_by(&self, cells: &[Cell]) -> Option<QueueColumn> {
        let config = self.config();
        if !config.rejoins_when_passed()
            || self.mode != Mode::Mandatory
            || self.combined
            || !self.queue_written.maybe()
        {
            return None;
        }
        let hidden_before = self.queue_column.timestamp + config.least_queue_margin();
        cells
            .iter()
            .filter(|cell| !self.is_ours(cell))
            .filter_map(|cell| MainCellValue::decode(&cell.value).ok())
            .filter_map(|value| value.head().cloned())
            .filter(|head| head.timestamp > hidden_before)
            .max()
    }

    /// The rewrite of our short main cell with `lease_ttl`, sent at `sent_at`, was
    /// acknowledged (with the fence read, which chose `token`, when fencing is on). The
    /// lock is ours only if the acknowledgement came before the short cell may have lapsed:
    /// then our cell was live on a quorum without a gap from the read that showed it alone
    /// until now, as a holder's is between renewals.
    fn on_renewal(&mut self, now: Now, sent_at: MonotonicTime, token: Option<FencingToken>) {
        if self.renewal_late(now) {
            self.main_written = Written::At(sent_at);
            self.conflict(now);
            return;
        }
        self.main_acked(sent_at, false);
        self.waiting_in_main = false;
        match token {
            Some(token) => self.issue(now, Step::WriteFence(token)),
            None => self.acquired(now, None),
        }
    }

    /// The main row held only our cell: the lock is ours if the lease can still be renewed
    /// in time (otherwise we give it back, as after a conflict).
    fn acquired(&mut self, now: Now, fencing_token: Option<FencingToken>) {
        // A main cell last written with the waiter TTL is never held with.
        let Written::At(main_sent_at) = self.main_written else {
            self.conflict(now);
            return;
        };
        if self.short_main_sent.is_some() {
            self.conflict(now);
            return;
        }
        let lease_deadline = self.attempt.config.lease_deadline(main_sent_at);
        if !self.attempt.config.renewable(now.instant, lease_deadline) {
            self.conflict(now);
            return;
        }
        let queue_written_at = match self.queue_written {
            Written::At(at) => at,
            Written::No | Written::Maybe => main_sent_at,
        };
        // Waiting in the main row, the owner behind waits for our main cell, not our queue
        // cell; but a holder that may linger stays to be asked not to.
        let leaves_queue = self.waits_in_main && !self.stays_queued_to_be_asked();
        let holding = Holding {
            lock_id: self.lock_id.clone(),
            owner: self.queue_column.owner.clone(),
            main: HeldCell {
                row: self.main_row.clone(),
                column: self.seat.clone(),
                value: self.main_value.clone(),
                written_at: main_sent_at,
            },
            queue: Some(HeldCell {
                row: self.queue_row.clone(),
                column: self.queue_name.clone(),
                value: self.queue_value.clone(),
                written_at: queue_written_at,
            }),
            queue_renew_by: (!leaves_queue)
                .then(|| queue_written_at + self.attempt.config.waiter_renew_every()),
            queue_exit: if self.queue_left {
                QueueExit::Done
            } else if leaves_queue {
                QueueExit::Now
            } else {
                QueueExit::AtRelease
            },
            shadow: match self.shadow_written {
                Written::At(written_at) => Some(HeldCell {
                    row: self.shadow_row.clone(),
                    column: self.seat.clone(),
                    value: self.main_value.clone(),
                    written_at,
                }),
                Written::No | Written::Maybe => None,
            },
            lease_deadline,
            fencing_token,
            last_timestamp: self.attempt.stamps.last(),
            started_at: self.started_at,
            acquired_at: now.instant,
            stats: self.stats(),
            successors: std::mem::take(&mut self.successors),
        };
        self.attempt
            .succeed(AcquireOutcome::Acquired(Box::new(holding)));
    }

    fn conflict(&mut self, now: Now) {
        self.stats.conflicts += 1;
        self.conflicts = self.conflicts.saturating_add(1);
        self.issue(now, Step::DeleteMain);
    }

    /// After a conflict, pause (doubling per conflict, jittered) and check the queue again;
    /// a soft lock gives up after `soft_attempts` conflicts. The pause lets a competing
    /// owner's delete land before we look again, which is what lets the owner first in the
    /// queue win (Theorem 4) when network delays are shorter than the pause.
    fn after_conflict(&mut self, now: Now) {
        if self.mode == Mode::Soft && self.conflicts >= self.config().soft_attempts {
            self.finish(now, Ending::Busy);
            return;
        }
        let poll = &self.attempt.config.config().poll;
        let pause = doubled(poll.min_interval, self.conflicts - 1, poll.max_interval);
        let pause = self.rng.jitter(pause, poll.jitter_percent);
        self.back_off(Step::ReadQueue, now.instant + pause);
    }

    /// While pausing before a queue poll, when our queue cell is due for a rewrite.
    fn renewal_due_while_sleeping(&self) -> Option<MonotonicTime> {
        let polling = match self.step {
            Step::ReadQueue => true,
            Step::ReadMain => self.waits_in_main,
            _ => false,
        };
        match self.queue_written {
            Written::At(at) if polling => Some(at + self.attempt.config.waiter_renew_every()),
            _ => None,
        }
    }

    /// True when a queue write acknowledged now comes more than the waiter cell's effective
    /// life after the previous acknowledged write of the same column was sent: in between,
    /// the cell may have expired (see [`Acquire`] on dead waiters).
    fn queue_may_have_lapsed(&self, now: Now) -> bool {
        self.queue_acked
            .is_some_and(|at| now.instant > at + self.attempt.config.waiter_effective())
    }
}

/// Whether a row slice holds exactly one cell, named by `owner` (the baseline algorithm's
/// test; its cells are named by owner ids and carry no value).
/// The time between the lock's acquisitions an acquisition starts from: the previous
/// acquisition's measurement ([`AcquireOptions::lock_interval`]) or the time since the
/// queue floor given (the head the previous acquisition saw, often its own column: one
/// acquisition at least since then), whichever is shorter; `None` without either. A
/// measurement older than the margin it sets (`margin_acquisitions` times it, as the
/// floor's age tells) is dropped: the lock may have cooled since.
fn first_lock_interval(
    now: Timestamp,
    options: &AcquireOptions,
    margin_acquisitions: u32,
) -> Option<Duration> {
    let since_floor = options
        .queue_floor
        .map(|floor| now.saturating_duration_since(floor));
    let measured = options.lock_interval.filter(|interval| {
        since_floor.is_none_or(|age| age <= interval.saturating_mul(margin_acquisitions))
    });
    measured
        .into_iter()
        .chain(since_floor)
        .filter(|interval| !interval.is_zero())
        .min()
}

/// The time between the enqueue times of the live queue cells a read showed, on average:
/// their spread over their number less one (at least a microsecond), if there are two or
/// more. Owners join the queue about as often as the lock changes hands, so it measures
/// the time between acquisitions while the lock is contended.
fn queue_spread(cells: &[Cell]) -> Option<Duration> {
    let mut times = cells
        .iter()
        .filter_map(|cell| QueueColumn::decode_timestamp(cell.column.as_str()).ok());
    let first = times.next()?;
    let (count, last) = times.fold((0u32, first), |(count, _), time| (count + 1, time));
    let spread = last.saturating_duration_since(first).checked_div(count)?;
    Some(spread.max(Duration::from_micros(1)))
}

pub(crate) fn only_ours(cells: &[Cell], owner: &OwnerId) -> bool {
    matches!(cells, [cell] if cell.column.as_str() == owner.as_str())
}

impl Machine for Acquire {
    type Outcome = AcquireOutcome;

    fn handle_response(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        match self.attempt.accept(now, id, response) {
            Response::Ignored => {}
            Response::Success { sent_at, response } => {
                self.on_success(now, sent_at, response, Vec::new())
            }
            Response::GroupSuccess {
                sent_at,
                first,
                rest,
            } => self.on_success(now, sent_at, first, rest),
            Response::Failure(error) => {
                if !self.attempt.retry_later(now, &error) {
                    self.finish(now, Ending::Failed(error));
                }
            }
        }
    }

    fn handle_timeout(&mut self, now: Now) {
        let renewal_due = self
            .renewal_due_while_sleeping()
            .is_some_and(|due| due <= now.instant)
            && self.attempt.sleeping_until().is_some();
        match self.attempt.wake(now) {
            Wake::GiveUp => self.finish(now, Ending::TimedOut),
            Wake::Due | Wake::Nothing if renewal_due => self.issue(now, Step::WriteQueue),
            // A renewal of our short main cell to be sent again after a failure, too late
            // to land before the cell may have lapsed: give the main row up instead.
            Wake::Due
                if matches!(self.step, Step::RenewMain | Step::ReadFence)
                    && self.renewal_late(now) =>
            {
                self.conflict(now)
            }
            Wake::Due => self.issue(now, self.step),
            Wake::Nothing => {}
        }
    }

    fn poll_request(&mut self) -> Option<Outgoing> {
        self.attempt.poll_request()
    }

    fn poll_timeout(&self) -> Option<MonotonicTime> {
        self.attempt.poll_timeout(self.renewal_due_while_sleeping())
    }

    fn poll_outcome(&mut self) -> Option<AcquireOutcome> {
        self.attempt.poll_outcome()
    }

    fn handle_wake_hint(&mut self, now: Now) {
        self.on_wake_hint(now);
    }

    fn poll_wake_hint(&mut self) -> Option<(SocketAddr, WakeHint)> {
        self.hint_out.take()
    }
}
