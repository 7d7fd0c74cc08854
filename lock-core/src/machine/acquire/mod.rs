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

mod main_row;
mod options;
mod outcome;
mod queue;
mod steps;

pub use options::{AcquireOptions, Seat};
pub use outcome::{AcquireOutcome, AcquireStats, Holding, QueueExit};

pub(crate) use main_row::only_ours;
use queue::first_lock_interval;

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
/// its queue cell once it holds (with its fence read, or through [`crate::machine::Lease`] without
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
///   asks [`crate::machine::Lease`] for its first renewal no later than `f × E_w` after the queue
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
    queue_row: RowKey,
    main_row: RowKey,
    /// The old algorithm's shadow row, used only in the combined migration mode.
    shadow_row: RowKey,
    /// Where we stand in the queue row ([`queue`]).
    queue: QueuePlace,
    /// Our cell in the main row, and the contest for it ([`main_row`]).
    main: MainContest,
    /// Wake-up hints: whether we listen, whom we hint, and early reads.
    hints: HintState,
    rng: SplitMix64,
    step: Step,
    started_at: MonotonicTime,
    poll: PollTracker,
    stats: AcquireStats,
}

/// Where an acquisition stands in the queue row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct QueuePlace {
    column: QueueColumn,
    /// `column` encoded, built once: it is written, read past and deleted by name.
    name: ColumnName,
    /// The value of our queue cell: the hint listener's address, or empty.
    value: Vec<u8>,
    /// Where queue reads start, if not at the beginning of the row (or at our own column,
    /// if that is earlier): the margin before the floor given, then before the latest head
    /// seen.
    floor: Option<ColumnName>,
    /// The first live queue cell of the last queue read.
    head: Option<QueueColumn>,
    /// Whether the first queue write still has to carry a main read for a floor
    /// (`AcquireOptions::floor_from_main`).
    floor_from_main: bool,
    /// Whether our queue cell was deleted once the lock was ours (with the fence read).
    left: bool,
    written: Written,
    /// When the last acknowledged write of our current queue column was sent.
    acked: Option<MonotonicTime>,
    /// How many reads in a row did not show our cell although it should be there.
    missing: u32,
    /// The latest queue column, later than ours, of an owner that saw itself first while
    /// our cell was hidden from it: once our main cell is deleted, we join the queue again
    /// under its time ([`crate::PollConfig::queue_margin`]).
    rejoin_behind: Option<QueueColumn>,
}

/// An acquisition's cell in the main row, and the contest for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct MainContest {
    /// The main (and, in the combined mode, shadow) column: the seat's, or the owner id.
    seat: ColumnName,
    /// The value of our last main (and shadow) write: tells our cell from one an earlier
    /// acquisition left in the same seat.
    value: Vec<u8>,
    written: Written,
    shadow_written: Written,
    /// Whether the shadow row's gate is taken too (the combined migration mode).
    combined: bool,
    /// Whether the owner first in the queue waits in the main row for the owners that were
    /// ahead of it ([`crate::LockConfig::wait_in_main_row`]).
    waits_in_main: bool,
    /// Whether we are waiting in the main row: from the main read that showed only the
    /// cells of owners ahead of us until our main cell is deleted or renewed to hold, our
    /// main writes carry the waiter TTL if it is shorter than `lease_ttl`.
    waiting: bool,
    /// When the latest acknowledged write of our main cell was sent, if it carried the
    /// waiter TTL: the lock is then ours only after a rewrite with `lease_ttl` acknowledged
    /// before this instant plus the waiter's effective life.
    short_sent: Option<MonotonicTime>,
    /// How many times another cell was found beside ours.
    conflicts: u32,
}

/// What an acquisition knows of wake-up hints.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct HintState {
    /// Whether we listen for wake-up hints.
    listening: bool,
    /// The owners behind us at our turn, to hint ([`Holding::successors`]).
    successors: Vec<Successor>,
    /// The end of the current poll pause, the only kind of sleep a hint may cut short (a
    /// retry's backoff is kept).
    poll_pause_until: Option<MonotonicTime>,
    /// When a hint last made us read early: at most one such read per round trip.
    last_hinted_read: Option<MonotonicTime>,
    /// When a hint came while a request was in flight: the next poll pause is skipped.
    pending: Option<MonotonicTime>,
    /// The owner first in the queue we last asked not to linger ([`HintKind::Wanted`]):
    /// each owner is asked once.
    asked_head: Option<OwnerId>,
    /// The hint we want sent, until the driver takes it ([`Machine::poll_wake_hint`]).
    out: Option<(SocketAddr, WakeHint)>,
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
            queue_row: RowKey::new(RowKind::Queue, lock_id.clone()),
            main_row: RowKey::new(RowKind::Main, lock_id.clone()),
            shadow_row: RowKey::new(RowKind::Shadow, lock_id.clone()),
            queue: QueuePlace {
                column: queue_column,
                name: queue_name,
                value: options
                    .wake_hint_listener
                    .map(hint::queue_value)
                    .unwrap_or_default(),
                floor: queue_floor,
                head: None,
                floor_from_main: options.floor_from_main && mode == Mode::Mandatory,
                left: false,
                written: Written::No,
                acked: None,
                missing: 0,
                rejoin_behind: None,
            },
            main: MainContest {
                seat,
                value: Vec::new(),
                written: Written::No,
                shadow_written: Written::No,
                combined: config.config().algorithm == Algorithm::Combined,
                waits_in_main: config.config().wait_in_main_row
                    && config.config().algorithm == Algorithm::Queue,
                waiting: false,
                short_sent: None,
                conflicts: 0,
            },
            hints: HintState {
                listening: options.wake_hint_listener.is_some(),
                successors: Vec::new(),
                poll_pause_until: None,
                last_hinted_read: None,
                pending: None,
                asked_head: None,
                out: None,
            },
            mode,
            lock_id,
            rng: SplitMix64::new(seed),
            step: Step::WriteQueue,
            started_at: now.instant,
            poll: PollTracker::new(now.instant, options.poll_hint),
            stats: AcquireStats {
                lock_interval: lock_interval.unwrap_or_default(),
                ..AcquireStats::default()
            },
        };
        let first = match mode {
            Mode::Mandatory if options.fast_path && !acquire.main.combined => {
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
        &self.queue.column.owner
    }

    /// Our queue column.
    pub fn queue_column(&self) -> &QueueColumn {
        &self.queue.column
    }

    /// Our main-row column (the seat).
    pub fn seat(&self) -> &ColumnName {
        &self.main.seat
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
        self.queue.head.as_ref()
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
        self.hints.out.take()
    }
}
