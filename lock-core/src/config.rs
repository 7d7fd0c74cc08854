//! Configuration, validated once, before any lock is taken.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::id::OwnerId;
use crate::storage::Ttl;
use crate::time::MonotonicTime;

/// Which lock algorithm a locker runs: the queue, unless you migrate from the old
/// algorithm or measure the baselines. Set with `LockConfig { algorithm, ..LockConfig::default() }`
/// (a field hidden from the everyday docs). To migrate a fleet from [`Algorithm::Baseline`],
/// switch every client to [`Algorithm::Combined`], then every client to [`Algorithm::Queue`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// The fair queue algorithm (docs/algorithm.md, sections "The mandatory lock" and "The soft lock").
    #[default]
    Queue,
    /// The old shadow-row algorithm with random backoff (docs/algorithm.md, section "The baseline algorithm and why it starves"), kept for
    /// comparison. It is unfair under contention; do not use it for new work.
    Baseline,
    /// The migration mode (docs/algorithm.md, section "The combined migration mode"): the queue algorithm, which also takes the
    /// old algorithm's shadow-row gate before writing the main cell and keeps its shadow cell
    /// until release, so that clients still running [`Algorithm::Baseline`] and clients in
    /// this mode exclude each other. Switch every client to it, then to
    /// [`Algorithm::Queue`].
    Combined,
    /// Lamport's bakery algorithm as the Apache Cassandra wiki's "Locking" page adapts it
    /// (docs/algorithm.md, section "The bakery baseline"), kept as a third point of comparison: every locker of a
    /// lock needs its own [`BakeryConfig::client_id`] out of a fixed
    /// [`BakeryConfig::max_clients`]. It takes no fencing tokens. See
    /// [`crate::machine::BakeryAcquire`].
    Bakery,
}

/// A fraction `numerator / denominator` strictly between 0 and 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fraction {
    /// The part.
    pub numerator: u32,
    /// The whole.
    pub denominator: u32,
}

impl Fraction {
    /// One half: the thesis renews every TTL/2.
    pub const HALF: Fraction = Fraction::new(1, 2);

    /// `numerator / denominator` (checked by [`LockConfig::validate`]).
    pub const fn new(numerator: u32, denominator: u32) -> Self {
        Fraction {
            numerator,
            denominator,
        }
    }

    /// `duration × numerator / denominator`, in whole nanoseconds rounded down; saturates
    /// at [`Duration::MAX`] instead of overflowing (a fraction above 1 can only come from
    /// a configuration that validation refuses).
    fn of(self, duration: Duration) -> Duration {
        let nanos =
            duration.as_nanos() * u128::from(self.numerator) / u128::from(self.denominator.max(1));
        let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
        let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
        if secs == u64::MAX {
            return Duration::MAX;
        }
        Duration::new(secs, subsec)
    }
}

/// How waiting owners poll the queue.
///
/// The owner next in line polls at the pace of its own reads' round trip, about eight
/// times per hand-off it has observed (one read in flight at a time when hand-offs take
/// under eight round trips), never faster than [`MIN_NEXT_IN_LINE_PERIOD`], slowing down
/// while a holder holds longer than usual, and never pausing more than `max_interval`.
/// Owners further back poll about when they expect to have moved up, from the rate at
/// which they have seen the queue move: `k` places back they wait about `k - 1.5` observed
/// hand-offs (until they should be next in line), never less than the round trip they
/// measure nor more than `max_interval`; owners beyond the read's slice, who cannot tell
/// their place, shorten that by up to `jitter_percent` at random. See
/// [`crate::machine::Acquire`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PollConfig {
    /// The first pause after a main-row conflict; about one storage round trip is right.
    /// It also caps the first hand-off estimate at four of it. (Waiting owners pace
    /// themselves by the round trip they measure instead, so that a network faster than
    /// this interval still hands off at its own pace.)
    pub min_interval: Duration,
    /// The longest pause between two polls, which bounds the extra wait after a release.
    pub max_interval: Duration,
    /// How many queue cells one poll reads (the queue read is always a bounded slice). A
    /// waiter beyond the slice cannot tell its place and takes the slice's length for it,
    /// so it polls more often than it needs to: keep this above the number of owners that
    /// usually wait for one lock (default 64).
    pub queue_read_limit: u32,
    /// How much shorter than planned, at most, in percent, the pauses of owners beyond the
    /// read's slice are drawn (never longer: a late waker leaves the lock free with nobody
    /// polling): they all take the slice's length for their place, and would otherwise
    /// read together. Owners whose places are known plan pauses a hand-off apart and are
    /// not jittered. The pause after a main-row conflict is jittered by ± this much.
    pub jitter_percent: u32,
    /// How far back a locker's first acquisition of a lock looks for queue cells. Later
    /// acquisitions start reading the queue at the head their predecessor saw, skipping the
    /// tombstones before it; the first has no such head and starts this long before now,
    /// instead of walking every tombstone the row has kept since compaction last ran. A
    /// waiter queued for longer than this is not seen by that first acquisition (it still
    /// cannot take the lock while that waiter holds it: exclusion rests on the main row).
    pub cold_lookback: Duration,
    /// How far before the latest queue head seen queue reads start (docs/algorithm.md,
    /// section "Dead cells per queue read: the bound"). `None`, the default, is
    /// `2 × max_clock_skew + request_timeout`: no cell enqueued in time can sort further
    /// before a head already seen, so no read passes a waiter. Every read steps over the
    /// tombstones of the acquisitions of the last margin, so a lock taken `λ` times a second
    /// costs about `λ × margin` dead cells per read, past Cassandra's
    /// `tombstone_warn_threshold` (1,000) at 250 a second with the default 4 s. A shorter
    /// margin bounds that; an owner whose cell it hid (a clock behind by more than the
    /// margin, or a write slower than it) learns so when it meets, first in its own reads,
    /// the main cell of an owner with a later queue column that saw itself first, and joins
    /// the queue again under that owner's time, where the reads that start from that
    /// owner's head see it. Exclusion does not depend on the margin; fairness does: the
    /// rejoin's own write can land after the next owner's read, which then passes the
    /// waiter once more, so bounded bypass holds only while writes land and clocks agree
    /// within the margin (docs/algorithm.md, section 8.4). At most the default. When set,
    /// it is the margin of every read and [`PollConfig::margin_acquisitions`] is not used.
    pub queue_margin: Option<Duration>,
    /// Without a fixed [`PollConfig::queue_margin`], how many acquisitions' worth of time
    /// queue reads look back before the latest head seen; zero, the default, turns this
    /// off ([`RECOMMENDED_MARGIN_ACQUISITIONS`] suits a hot lock). The margin is this many times
    /// the time between the lock's acquisitions as the locker measured it (the spread of
    /// the queue cells a read shows over their number less one, or the time since its own
    /// previous acquisition of the lock), at least [`PollConfig::least_queue_margin`] and
    /// at most `2 × max_clock_skew + request_timeout`. A lock taken seldom keeps the
    /// longest margin, which hides no cell enqueued in time; a hot lock reads over about
    /// this many tombstones whatever its rate (docs/algorithm.md, section 8.4). Off, every
    /// read starts the longest margin back. A cell hidden by a shorter margin costs its
    /// owner a rejoin, as with a fixed one, and its place: on a hot lock, owners whose
    /// clocks or queue writes lag by more than [`PollConfig::least_queue_margin`] lose the
    /// first-come order that the default keeps for lags up to
    /// `2 × max_clock_skew + request_timeout` (tests/tests/properties.rs finds such
    /// reorderings within those bounds with it on).
    pub margin_acquisitions: u32,
    /// The shortest margin [`PollConfig::margin_acquisitions`] may choose: owners passed
    /// by a head whose queue column is further than this after theirs join the queue again
    /// under its time, since reads that start from that head may not reach them. Above
    /// the clock skew and the time a queue write takes to land that a deployment expects,
    /// hidden cells stay rare. Used only when shorter than
    /// `2 × max_clock_skew + request_timeout`.
    pub least_queue_margin: Duration,
}

impl Default for PollConfig {
    fn default() -> Self {
        PollConfig {
            min_interval: Duration::from_millis(1),
            max_interval: Duration::from_millis(250),
            queue_read_limit: 64,
            jitter_percent: 10,
            cold_lookback: Duration::from_secs(60),
            queue_margin: None,
            margin_acquisitions: 0,
            least_queue_margin: Duration::from_millis(50),
        }
    }
}

/// The baseline algorithm's random backoff (docs/algorithm.md, section "The baseline algorithm and why it starves").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BaselineConfig {
    /// When another owner holds the lock, sleep uniformly in `0..owner_backoff_max`.
    pub owner_backoff_max: Duration,
    /// After a concurrent attempt, sleep uniformly in `0..concurrent_backoff_step * attempt`.
    pub concurrent_backoff_step: Duration,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        BaselineConfig {
            owner_backoff_max: Duration::from_millis(1000),
            concurrent_backoff_step: Duration::from_millis(50),
        }
    }
}

/// The most clients a bakery lock may have ([`BakeryConfig::max_clients`]): every wait reads
/// a whole row of one cell per client, so the rows must stay small.
pub const MAX_BAKERY_CLIENTS: u32 = 1000;

/// The bakery algorithm's settings (docs/algorithm.md, section "The bakery baseline").
///
/// Lamport's algorithm names its processes `1..=n` in advance, and so does the wiki page it
/// comes from: every locker that takes a bakery lock must be given a distinct `client_id`
/// in `1..=max_clients`, and all of them the same `max_clients`. Two lockers with one
/// client id would write the same cells and could hold the lock together; a cell of a
/// client id beyond `max_clients` makes an acquisition fail with
/// [`Error::InvalidConfig`] naming `bakery.max_clients`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BakeryConfig {
    /// How many clients the lock has at most, 1 to [`MAX_BAKERY_CLIENTS`].
    pub max_clients: u32,
    /// This locker's client id, 1 to `max_clients`; 0 (the default) means unset, which
    /// validation refuses for [`Algorithm::Bakery`].
    pub client_id: u32,
    /// Whether the bakery's cells carry our lease (`true`, the default): they are written
    /// with `lease_ttl`, a waiter rewrites its number before it can expire, and a holder's
    /// number is renewed like any lease, so a client that crashes blocks the others for
    /// about `lease_ttl`. With `false` the cells are written without a TTL, as on the wiki
    /// page, and a client that crashes after taking its number blocks every other client
    /// for good. The machine and the model checker run both; the driver's `Locker` refuses
    /// `false`.
    pub lease: bool,
}

impl Default for BakeryConfig {
    fn default() -> Self {
        BakeryConfig {
            max_clients: 8,
            client_id: 0,
            lease: true,
        }
    }
}

/// Everything a locker can be told. Start from [`LockConfig::default`] and change fields;
/// [`LockConfig::validate`] (called by the locker) rejects unsafe or inconsistent values.
///
/// # Which settings matter
///
/// Five settings are the everyday ones, and `fair-lock`'s `LockerBuilder` has a setter for
/// each: `lease_ttl`, `max_clock_skew`, `request_timeout`, `fencing` and `owner_prefix`
/// (the builder's `owner_name`). Every other field is advanced tuning, with defaults that
/// suit a lock on a cluster in one data centre: polling ([`PollConfig`]), storage retries,
/// `waiter_ttl`, `renew_fraction`, `soft_attempts`, `fast_path`, `wait_in_main_row` and
/// `linger`. No setting can break mutual exclusion: validation refuses what would.
///
/// The research algorithms (the thesis's old algorithm, the migration mode between it and
/// the queue, and the wiki's bakery lock) are chosen by three fields hidden from these docs
/// (`algorithm`, `baseline`, `bakery`), for lock-bench, the model checker and users who
/// migrate from the old algorithm ([`Algorithm`] says how); the default runs the queue
/// algorithm.
///
/// # Leases and clock skew
///
/// Every cell is written with TTL `lease_ttl`. A storage replica judges expiry on its own
/// clock, and CQL TTLs are counted in whole seconds, so a cell can vanish up to
/// `1 s + max_clock_skew` earlier than `lease_ttl` after it was written. The holder therefore
/// counts its lease as lost `lease_ttl - 1 s - max_clock_skew` (the *effective lease*) after
/// it *sent* the write that last renewed it, measured on its monotonic clock. You must keep
/// the clocks of storage nodes and lock clients within `max_clock_skew` of each other
/// (NTP usually keeps them within milliseconds).
///
/// ```
/// use std::time::Duration;
/// use lock_core::LockConfig;
///
/// let config = LockConfig { lease_ttl: Duration::from_secs(30), ..LockConfig::default() };
/// let valid = config.validate().unwrap();
/// assert_eq!(valid.renew_every(), Duration::from_secs(15));
/// assert_eq!(valid.effective_lease(), Duration::from_secs(28));
///
/// let unsafe_config = LockConfig { lease_ttl: Duration::from_secs(2), ..LockConfig::default() };
/// assert!(unsafe_config.validate().is_err());
/// ```
///
/// # Floors, and how many requests a lock costs
///
/// Every period has a floor that validation enforces, so that no configuration makes one
/// lock flood the storage: renewal no more often than every [`MIN_RENEW_EVERY`] (10 ms:
/// `renew_fraction × lease_ttl` must be at least that), and `poll.min_interval`,
/// `retry_backoff` and the baseline's backoffs at least [`MIN_PERIOD`] (1 ms), with
/// `poll.jitter_percent` at most [`MAX_JITTER_PERCENT`] (50) so that no jittered pause is
/// shorter than half of `poll.min_interval`. At those floors (the most aggressive
/// configuration accepted), one held lock of the queue algorithm makes at most 300 requests
/// a second (a renewal round of two writes and one read every 10 ms; measured: 300), and a
/// waiter further back than next in line at most about 4000 (a poll of at most two reads at
/// least every 0.5 ms). The owner next in line follows its round trip instead, so that it
/// sees a release within about one round trip on any network: one read in flight at a
/// time, never more than one every [`MIN_NEXT_IN_LINE_PERIOD`] (50 µs), and only while a
/// hand-off is due; once the holder has held longer than the hand-offs it has seen, its
/// period grows by a quarter of the overrun up to `poll.max_interval` (at the floors, a
/// waiter behind a lock held for seconds measured about 2850 requests a second). With the
/// defaults a held lock renews every 5 s. Durations too large to add
/// are refused, never overflowed: [`LockConfig::validate`] does not panic on any input.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockConfig {
    /// Which algorithm to run (research and migration only; the default is the queue).
    #[doc(hidden)]
    pub algorithm: Algorithm,
    /// The TTL of a holder's cells (its main cell, and its queue cell once it holds): how
    /// long a dead holder blocks the lock.
    pub lease_ttl: Duration,
    /// The TTL of a waiter's queue cell, which the waiter rewrites every
    /// `renew_fraction × (waiter_ttl − 1 s − max_clock_skew)`: how long a waiter that died
    /// (or whose `lock()` failed and whose cleanup could not reach storage) blocks the owners
    /// behind it, about `waiter_ttl` plus a poll after its last write instead of `lease_ttl`.
    /// Whole seconds; must exceed 1 s of TTL rounding plus `max_clock_skew`. A value above
    /// `lease_ttl` is clamped to it (`min(waiter_ttl, lease_ttl)`), and at `lease_ttl` a
    /// waiter's cell is written and renewed exactly like a holder's. Exclusion does not rest
    /// on queue cells (it rests on the main row), so a short `waiter_ttl` costs only requests
    /// and, if storage answers a rewrite later than the cell could live, the waiter's place:
    /// see [`crate::machine::Acquire`] on dead waiters. Default 3 s: with the default 1 s
    /// skew, a rewrite every 0.5 s.
    pub waiter_ttl: Duration,
    /// How far into a lease it is renewed (the thesis: one half).
    pub renew_fraction: Fraction,
    /// The most that the clocks of storage replicas and lock clients may disagree.
    pub max_clock_skew: Duration,
    /// How long the driver waits for one storage request before calling its outcome unknown.
    pub request_timeout: Duration,
    /// How waiters poll the queue.
    pub poll: PollConfig,
    /// How many storage failures in a row one acquisition step (or one delete of a
    /// release) retries at least, whatever [`LockConfig::storage_retry_window`] says.
    pub storage_retries: u32,
    /// How long storage may keep failing with errors that may pass (a replica unavailable,
    /// a request timed out) before a call gives up with the last error: failures are
    /// retried, `retry_backoff` apart and doubling up to `poll.max_interval`, until this
    /// much has passed since the first failure in a row (and at least `storage_retries`
    /// times). A node restart or a quorum lost for a few seconds then makes `lock()` wait,
    /// keeping its place where the algorithm allows, instead of failing. A held lease is
    /// renewed whatever this says, until it runs out. Zero leaves `storage_retries` alone.
    /// Default 10 s; at most an hour.
    pub storage_retry_window: Duration,
    /// The first pause after a storage failure; it doubles with each further failure.
    pub retry_backoff: Duration,
    /// How many times a soft lock retries its main-row check when it is first in the queue
    /// but finds another cell in the main row (a release or a crash in progress).
    pub soft_attempts: u32,
    /// An optional prefix for owner ids (such as the host name), for readable inspection.
    pub owner_prefix: Option<String>,
    /// Whether each acquisition by the queue algorithm takes a fencing token
    /// ([`crate::machine::FencingToken`]): one more read and write per acquisition.
    /// [`Algorithm::Baseline`] takes no tokens, so validation refuses it with `fencing`
    /// on: set `fencing: false` to run the baseline.
    pub fencing: bool,
    /// Try the two-round-trip fast path (docs/algorithm.md, section "The two-round-trip fast path") on a mandatory
    /// acquisition of the queue algorithm when this locker's previous acquisition of the
    /// lock found it idle, or it remembers none (its first acquisition of a lock, or of one
    /// idle for so long that it was forgotten): write the queue and main cells together, then read both rows
    /// together, and hold if the queue shows our cell first and the main row only ours. On
    /// anything else the acquisition deletes its main cell and goes on as usual. An
    /// uncontended acquisition then takes two round trips instead of four (four instead of
    /// six with `fencing`); under contention it costs a main write and delete more, once,
    /// after which the locker stops trying until it finds the lock idle again. Default on.
    pub fast_path: bool,
    /// Let the owner first in the queue wait in the main row (docs/algorithm.md, section
    /// "Waiting in the main row"; the queue algorithm only, outside the combined mode). A holder deletes its queue
    /// cell as soon as it holds, so the owner behind it sees itself first, writes its main
    /// cell and, finding there only the cells of owners that were ahead of it in the queue,
    /// keeps its cell and polls the main row instead of backing off: when the holder
    /// releases, the next owner holds after one main-row read instead of a queue read, a
    /// main write and a main read. Main cells then carry their owner's queue column rather
    /// than the bare owner id, so that waiters can tell whom they wait for. While it waits,
    /// the owner's main cell carries the waiter TTL (`min(waiter_ttl, lease_ttl)`), so that
    /// a waiter that dies first in line blocks the owners behind it for about the waiter
    /// TTL, not `lease_ttl`; before holding it renews the cell with `lease_ttl` (with
    /// `fencing`, together with the fence read; without, one more round trip) and holds only
    /// if the renewal is acknowledged before the short cell may have lapsed. On by
    /// default: with a critical section, the next owner holds one main-row read after the
    /// release.
    pub wait_in_main_row: bool,
    /// How long a released lock of the queue algorithm stays with this locker, for a quick
    /// retake, when its acquisition saw nobody queued behind it (docs/algorithm.md, section
    /// "Lingering after a release"). Releasing then returns at once and the cells are
    /// deleted `linger` later; if this locker asks for the lock meanwhile, one round trip
    /// (a queue read and a main-row read, together) tells whether anybody else has queued,
    /// and if nobody has, the lock is held again as it was, with the same fencing token.
    /// If somebody has, the cells are deleted at once and the acquisition joins the queue
    /// behind them. The price: another process that asks for the lock while it lingers
    /// waits (or its `try_lock` finds it taken) up to `linger` longer. Before the process
    /// exits, call the locker's `release_lingering`, or a lingering lock stays taken
    /// until its cells expire after `lease_ttl`. Zero turns it off; at most 1 s and less
    /// than the renewal period.
    pub linger: Duration,
    /// The baseline algorithm's backoff (research only).
    #[doc(hidden)]
    pub baseline: BaselineConfig,
    /// The bakery algorithm's clients and lease (used by [`Algorithm::Bakery`] only;
    /// research only).
    #[doc(hidden)]
    pub bakery: BakeryConfig,
}

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig {
            algorithm: Algorithm::Queue,
            lease_ttl: Duration::from_secs(10),
            waiter_ttl: Duration::from_secs(3),
            renew_fraction: Fraction::HALF,
            max_clock_skew: Duration::from_secs(1),
            request_timeout: Duration::from_secs(2),
            poll: PollConfig::default(),
            storage_retries: 3,
            storage_retry_window: Duration::from_secs(10),
            retry_backoff: Duration::from_millis(10),
            soft_attempts: 3,
            owner_prefix: None,
            fencing: true,
            fast_path: true,
            wait_in_main_row: true,
            linger: Duration::ZERO,
            baseline: BaselineConfig::default(),
            bakery: BakeryConfig::default(),
        }
    }
}

/// CQL TTLs count whole seconds from a truncated "now", so a cell may expire up to this much
/// earlier than its TTL says.
pub const TTL_GRANULARITY: Duration = Duration::from_secs(1);

const ONE_HOUR: Duration = Duration::from_secs(3600);

/// The longest [`LockConfig::linger`] accepted: a lingering lock delays other processes by
/// up to this much.
pub const MAX_LINGER: Duration = Duration::from_secs(1);

/// The shortest renewal period accepted: `renew_fraction × lease_ttl` must be at least
/// this, so that a held lock costs at most 100 renewal rounds a second.
pub const MIN_RENEW_EVERY: Duration = Duration::from_millis(10);

/// The shortest pause accepted for `poll.min_interval`, `retry_backoff`,
/// `baseline.owner_backoff_max` and `baseline.concurrent_backoff_step`: no configuration
/// makes a waiter poll, or a failed request retry, more than about once a millisecond.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The shortest period at which the owner next in line sends queue reads, whatever the
/// round trip and the hand-off rate (docs/algorithm.md, section "When a waiter polls"). Its reads otherwise
/// follow the round trip it measures, one in flight at a time and at most about eight per
/// expected hand-off, so that it sees a release within about one round trip; this floor
/// only keeps a storage that answers at once (an in-memory store) from being polled in a
/// tight loop.
pub const MIN_NEXT_IN_LINE_PERIOD: Duration = Duration::from_micros(50);

/// The most `poll.jitter_percent` accepted: with at most 50 % jitter, no jittered pause is
/// shorter than half of `poll.min_interval`.
pub const MAX_JITTER_PERCENT: u32 = 50;

/// A [`PollConfig::margin_acquisitions`] for hot locks (the default, zero, keeps the
/// adaptation off): a queue read then steps over about this many tombstones, under half of
/// Cassandra's default `tombstone_warn_threshold` (1,000) with the cells between the floor
/// and the reader's own column.
pub const RECOMMENDED_MARGIN_ACQUISITIONS: u32 = 200;

/// The most [`PollConfig::margin_acquisitions`] accepted: Cassandra's default
/// `tombstone_warn_threshold`.
pub const MAX_MARGIN_ACQUISITIONS: u32 = 1000;

impl LockConfig {
    /// `2 × max_clock_skew + request_timeout`: how far before a queue head already seen a
    /// cell enqueued in time can sort, the margin queue reads start with unless
    /// [`PollConfig::queue_margin`] shortens it.
    pub fn safe_queue_margin(&self) -> Duration {
        self.max_clock_skew
            .saturating_mul(2)
            .saturating_add(self.request_timeout)
    }

    /// How far before a queue head already seen a queue read starts, given the time
    /// between the lock's acquisitions that the locker measured (`None` before any
    /// measurement): the fixed [`PollConfig::queue_margin`] if set; otherwise
    /// [`PollConfig::margin_acquisitions`] times `lock_interval`, kept between
    /// [`LockConfig::least_queue_margin`] and [`LockConfig::safe_queue_margin`]; the
    /// safe margin without a measurement or with the adaptation off.
    pub fn queue_margin_for(&self, lock_interval: Option<Duration>) -> Duration {
        let safe = self.safe_queue_margin();
        if let Some(margin) = self.poll.queue_margin {
            return margin.min(safe);
        }
        match lock_interval {
            Some(interval) if self.adapts_queue_margin() => interval
                .saturating_mul(self.poll.margin_acquisitions)
                .clamp(self.least_queue_margin(), safe),
            _ => safe,
        }
    }

    /// The shortest margin any queue read may start with: the fixed
    /// [`PollConfig::queue_margin`], or [`PollConfig::least_queue_margin`] when the margin
    /// adapts, never above [`LockConfig::safe_queue_margin`]. An owner passed by a head
    /// further than this after its own column joins the queue again.
    pub fn least_queue_margin(&self) -> Duration {
        let safe = self.safe_queue_margin();
        match self.poll.queue_margin {
            Some(margin) => margin.min(safe),
            None if self.adapts_queue_margin() => self.poll.least_queue_margin.min(safe),
            None => safe,
        }
    }

    /// Whether the queue margin adapts to the time between the lock's acquisitions: no
    /// fixed [`PollConfig::queue_margin`], and [`PollConfig::margin_acquisitions`] above
    /// zero. Only then do acquisitions measure that time
    /// ([`crate::machine::AcquireStats::lock_interval`]).
    pub fn adapts_queue_margin(&self) -> bool {
        self.poll.queue_margin.is_none() && self.poll.margin_acquisitions > 0
    }

    /// Whether queue reads may start later than [`LockConfig::safe_queue_margin`], so that
    /// a late cell may be hidden and its owner must join again when passed
    /// ([`PollConfig::queue_margin`], [`PollConfig::margin_acquisitions`]).
    pub fn rejoins_when_passed(&self) -> bool {
        self.least_queue_margin() < self.safe_queue_margin()
    }

    /// Checks every field and derives the lease timings; see the type's docs.
    pub fn validate(self) -> Result<ValidConfig, Error> {
        let unleased_bakery = self.algorithm == Algorithm::Bakery && !self.bakery.lease;
        let valid = self.validate_rules()?;
        if unleased_bakery {
            return Err(Error::config(
                "bakery.lease",
                "is off, which only the model checker runs: without a lease a client that \
                 dies holding a bakery number blocks the lock for good, and a guard could not \
                 report the lease of cells that have none; set bakery.lease: true",
            ));
        }
        Ok(valid)
    }

    /// [`LockConfig::validate`] for a model checker, which also accepts the bakery without
    /// its lease (`bakery.lease: false`): the wiki page's algorithm as written, whose
    /// machine the model checks although no locker may run it. Hidden: no stability
    /// promise.
    #[doc(hidden)]
    pub fn validate_unleased_bakery(self) -> Result<ValidConfig, Error> {
        self.validate_rules()
    }

    /// True if a renewal due `renew_fraction` into `lease_ttl` and answered as late as
    /// `request_timeout` still lands within the effective lease (`lease_ttl - margin`).
    fn renewal_fits(&self, lease_ttl: Duration, margin: Duration) -> bool {
        let effective_lease = lease_ttl.checked_sub(margin).unwrap_or_default();
        self.renew_fraction
            .of(lease_ttl)
            .saturating_add(self.request_timeout)
            < effective_lease
    }

    /// The shortest whole-second lease whose renewal round fits, if one up to an hour does.
    fn shortest_lease(&self, margin: Duration) -> Option<Duration> {
        let Fraction {
            numerator,
            denominator,
        } = self.renew_fraction;
        // lease × (1 - n/d) > margin + request_timeout, solved in whole seconds.
        let needed = margin.saturating_add(self.request_timeout).as_micros()
            * u128::from(denominator)
            / u128::from(denominator.checked_sub(numerator)?.max(1));
        let first = u64::try_from(needed / 1_000_000).ok()?;
        (first..first.saturating_add(4))
            .map(Duration::from_secs)
            .find(|lease| *lease <= ONE_HOUR && self.renewal_fits(*lease, margin))
    }

    /// Every rule but the refusal of the bakery without its lease, which the machines run
    /// (their own tests and the model checker do).
    pub(crate) fn validate_rules(self) -> Result<ValidConfig, Error> {
        if self.algorithm == Algorithm::Baseline && self.fencing {
            return Err(Error::config(
                "fencing",
                "is on, but Algorithm::Baseline takes no fencing tokens (its guards would \
                 return none); set fencing: false to run the baseline, or use \
                 Algorithm::Queue or Algorithm::Combined, which take them",
            ));
        }
        if self.algorithm == Algorithm::Bakery {
            self.bakery.check(self.fencing)?;
        }
        let ttl = Ttl::from_duration(self.lease_ttl)?;
        let Fraction {
            numerator,
            denominator,
        } = self.renew_fraction;
        if numerator == 0 || numerator >= denominator {
            return Err(Error::config(
                "renew_fraction",
                format!("must be strictly between 0 and 1, got {numerator}/{denominator}"),
            ));
        }
        let margin = TTL_GRANULARITY.saturating_add(self.max_clock_skew);
        let effective_lease = self.lease_ttl.checked_sub(margin).unwrap_or_default();
        if effective_lease.is_zero() {
            return Err(Error::config(
                "lease_ttl",
                format!(
                    "({:?}) must exceed 1 s of TTL rounding plus max_clock_skew ({:?}); \
                     raise lease_ttl or tighten clock synchronisation",
                    self.lease_ttl, self.max_clock_skew
                ),
            ));
        }
        positive("request_timeout", self.request_timeout, ONE_HOUR)?;
        let renew_every = self.renew_fraction.of(self.lease_ttl);
        if renew_every < MIN_RENEW_EVERY {
            return Err(Error::config(
                "renew_fraction",
                format!(
                    "{numerator}/{denominator} of lease_ttl {:?} renews every {renew_every:?}, \
                     more often than the floor of {MIN_RENEW_EVERY:?}; use a larger fraction \
                     (the thesis renews at 1/2)",
                    self.lease_ttl
                ),
            ));
        }
        if !self.renewal_fits(self.lease_ttl, margin) {
            // Blame the setting the user chose: the lease, unless the fraction is not the
            // default one.
            if self.renew_fraction == Fraction::HALF {
                let shortest = match self.shortest_lease(margin) {
                    Some(shortest) => format!("the shortest accepted is {shortest:?}"),
                    None => "no whole-second lease fits".to_owned(),
                };
                return Err(Error::config(
                    "lease_ttl",
                    format!(
                        "({:?}) is too short for a renewal round: a renewal due every \
                         {renew_every:?} (half the lease) and answered as late as \
                         request_timeout ({:?}) must land within the effective lease \
                         {effective_lease:?} (lease_ttl - 1 s - max_clock_skew); with these \
                         settings {shortest}; or shorten request_timeout or max_clock_skew",
                        self.lease_ttl, self.request_timeout
                    ),
                ));
            }
            return Err(Error::config(
                "renew_fraction",
                format!(
                    "renewing every {renew_every:?} with request_timeout {:?} could let a cell \
                     expire: renewal plus timeout must stay below the effective lease {effective_lease:?} \
                     (lease_ttl - 1 s - max_clock_skew); renew earlier, shorten request_timeout \
                     or lengthen lease_ttl",
                    self.request_timeout
                ),
            ));
        }
        let waiter = self.waiter_timings(margin, renew_every, effective_lease)?;
        if self.linger > MAX_LINGER || (!self.linger.is_zero() && self.linger >= renew_every) {
            return Err(Error::config(
                "linger",
                format!(
                    "must be zero (off), or at most {MAX_LINGER:?} and below the renewal \
                     period {renew_every:?}, got {:?}",
                    self.linger
                ),
            ));
        }
        in_range(
            "poll.min_interval",
            self.poll.min_interval,
            MIN_PERIOD,
            ONE_HOUR,
        )?;
        in_range(
            "poll.max_interval",
            self.poll.max_interval,
            MIN_PERIOD,
            effective_lease,
        )?;
        if self.poll.min_interval > self.poll.max_interval {
            return Err(Error::config(
                "poll.min_interval",
                "must not exceed poll.max_interval",
            ));
        }
        if !(2..=1000).contains(&self.poll.queue_read_limit) {
            return Err(Error::config(
                "poll.queue_read_limit",
                format!("must be 2 to 1000, got {}", self.poll.queue_read_limit),
            ));
        }
        positive("poll.cold_lookback", self.poll.cold_lookback, ONE_HOUR * 24)?;
        if let Some(margin) = self.poll.queue_margin {
            let safe = self.safe_queue_margin();
            if margin > safe {
                return Err(Error::config(
                    "poll.queue_margin",
                    format!(
                        "must not exceed 2 × max_clock_skew + request_timeout ({safe:?}), \
                         got {margin:?}: a longer margin hides no more late cells and only \
                         steps over more tombstones; leave it unset for that"
                    ),
                ));
            }
        }
        if self.poll.margin_acquisitions > MAX_MARGIN_ACQUISITIONS {
            return Err(Error::config(
                "poll.margin_acquisitions",
                format!(
                    "must be at most {MAX_MARGIN_ACQUISITIONS} (Cassandra's default \
                     tombstone_warn_threshold), got {}; 0 turns the adaptive margin off",
                    self.poll.margin_acquisitions
                ),
            ));
        }
        positive(
            "poll.least_queue_margin",
            self.poll.least_queue_margin,
            ONE_HOUR,
        )?;
        if self.poll.jitter_percent > MAX_JITTER_PERCENT {
            return Err(Error::config(
                "poll.jitter_percent",
                format!(
                    "must be 0 to {MAX_JITTER_PERCENT}, got {}",
                    self.poll.jitter_percent
                ),
            ));
        }
        if self.storage_retries > 100 {
            return Err(Error::config(
                "storage_retries",
                format!("must be at most 100, got {}", self.storage_retries),
            ));
        }
        in_range(
            "storage_retry_window",
            self.storage_retry_window,
            Duration::ZERO,
            ONE_HOUR,
        )?;
        in_range(
            "retry_backoff",
            self.retry_backoff,
            MIN_PERIOD,
            effective_lease,
        )?;
        if !(1..=100).contains(&self.soft_attempts) {
            return Err(Error::config(
                "soft_attempts",
                format!("must be 1 to 100, got {}", self.soft_attempts),
            ));
        }
        if let Some(prefix) = &self.owner_prefix
            && (prefix.len() > 50 || OwnerId::new(prefix).is_err())
        {
            return Err(Error::config(
                "owner_prefix",
                format!("{prefix:?} must be 1 to 50 characters from [A-Za-z0-9._:@-]"),
            ));
        }
        in_range(
            "baseline.owner_backoff_max",
            self.baseline.owner_backoff_max,
            MIN_PERIOD,
            ONE_HOUR,
        )?;
        in_range(
            "baseline.concurrent_backoff_step",
            self.baseline.concurrent_backoff_step,
            MIN_PERIOD,
            ONE_HOUR,
        )?;
        Ok(ValidConfig(Arc::new(Validated {
            ttl,
            renew_every,
            effective_lease,
            waiter,
            config: self,
        })))
    }

    /// The waiter TTL's timings: `min(waiter_ttl, lease_ttl)`; at `lease_ttl`, the lease's
    /// own; below it, renewal every `renew_fraction` of its effective life.
    fn waiter_timings(
        &self,
        margin: Duration,
        renew_every: Duration,
        effective_lease: Duration,
    ) -> Result<WaiterTimings, Error> {
        if self.waiter_ttl >= self.lease_ttl {
            return Ok(WaiterTimings {
                ttl: Ttl::from_duration(self.lease_ttl)?,
                renew_every,
                effective: effective_lease,
            });
        }
        if self.waiter_ttl.subsec_nanos() != 0 {
            return Err(Error::config(
                "waiter_ttl",
                format!(
                    "must be a whole number of seconds (CQL TTLs are in seconds), got {:?}",
                    self.waiter_ttl
                ),
            ));
        }
        let effective = self.waiter_ttl.checked_sub(margin).unwrap_or_default();
        if effective.is_zero() {
            return Err(Error::config(
                "waiter_ttl",
                format!(
                    "({:?}) must exceed 1 s of TTL rounding plus max_clock_skew ({:?}); \
                     raise waiter_ttl (or set it to lease_ttl to renew waiters like holders)",
                    self.waiter_ttl, self.max_clock_skew
                ),
            ));
        }
        let waiter_renew = self.renew_fraction.of(effective);
        if waiter_renew < MIN_RENEW_EVERY {
            return Err(Error::config(
                "waiter_ttl",
                format!(
                    "{:?} rewrites a waiter's queue cell every {waiter_renew:?}, more often \
                     than the floor of {MIN_RENEW_EVERY:?}; raise waiter_ttl",
                    self.waiter_ttl
                ),
            ));
        }
        let seconds = u32::try_from(self.waiter_ttl.as_secs()).unwrap_or(u32::MAX);
        Ok(WaiterTimings {
            ttl: Ttl::from_secs(seconds)?,
            renew_every: waiter_renew,
            effective,
        })
    }
}

impl BakeryConfig {
    /// The checks [`LockConfig::validate`] makes for [`Algorithm::Bakery`].
    fn check(&self, fencing: bool) -> Result<(), Error> {
        if fencing {
            return Err(Error::config(
                "fencing",
                "is on, but Algorithm::Bakery takes no fencing tokens (its guards would \
                 return none); set fencing: false to run the bakery, or use \
                 Algorithm::Queue, which takes them",
            ));
        }
        if !(1..=MAX_BAKERY_CLIENTS).contains(&self.max_clients) {
            return Err(Error::config(
                "bakery.max_clients",
                format!(
                    "must be 1 to {MAX_BAKERY_CLIENTS}, got {}",
                    self.max_clients
                ),
            ));
        }
        if !(1..=self.max_clients).contains(&self.client_id) {
            return Err(Error::config(
                "bakery.client_id",
                format!(
                    "must be 1 to bakery.max_clients ({}), got {}; give every locker of a \
                     bakery lock its own id",
                    self.max_clients, self.client_id
                ),
            ));
        }
        Ok(())
    }
}

fn in_range(
    field: &'static str,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), Error> {
    if value < min || value > max {
        return Err(Error::config(
            field,
            format!("must be {min:?} to {max:?}, got {value:?}"),
        ));
    }
    Ok(())
}

fn positive(field: &'static str, value: Duration, max: Duration) -> Result<(), Error> {
    if value.is_zero() || value > max {
        return Err(Error::config(
            field,
            format!("must be above zero and at most {max:?}, got {value:?}"),
        ));
    }
    Ok(())
}

/// A [`LockConfig`] that passed validation, with its derived lease timings. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidConfig(Arc<Validated>);

#[derive(Debug, PartialEq, Eq, Hash)]
struct Validated {
    config: LockConfig,
    ttl: Ttl,
    renew_every: Duration,
    effective_lease: Duration,
    waiter: WaiterTimings,
}

/// The derived timings of a waiter's queue cell.
#[derive(Debug, PartialEq, Eq, Hash)]
struct WaiterTimings {
    ttl: Ttl,
    renew_every: Duration,
    effective: Duration,
}

impl ValidConfig {
    /// The configuration as given.
    pub fn config(&self) -> &LockConfig {
        &self.0.config
    }

    /// The TTL written on every lock cell.
    pub fn ttl(&self) -> Ttl {
        self.0.ttl
    }

    /// How often a held (or queued) cell is rewritten.
    pub fn renew_every(&self) -> Duration {
        self.0.renew_every
    }

    /// How long after sending a write its cell is certainly still alive:
    /// `lease_ttl - 1 s - max_clock_skew`.
    pub fn effective_lease(&self) -> Duration {
        self.0.effective_lease
    }

    /// The lease deadline a write of our cells sent at `sent_at` earns: `sent_at` plus the
    /// effective lease. Counted from the send, never the acknowledgement, because a
    /// replica may start the cell's TTL the moment the write arrives.
    pub fn lease_deadline(&self, sent_at: MonotonicTime) -> MonotonicTime {
        sent_at + self.0.effective_lease
    }

    /// Whether a lease ending at `deadline` may still be renewed (or, for a lock just
    /// taken, kept) at `now`: only while a write sent now and acknowledged as late as
    /// `request_timeout` would still land before the deadline. A renewal acknowledged
    /// later could revive cells that already expired next to a new holder's. The one rule
    /// every acquiring and lease machine applies.
    pub fn renewable(&self, now: MonotonicTime, deadline: MonotonicTime) -> bool {
        now + self.0.config.request_timeout < deadline
    }

    /// How long a seat whose lease was lost stays out of use: twice
    /// `lease_ttl + 2 × max_clock_skew`, well past the future-dated tombstones a forced
    /// release may have left in it.
    pub fn seat_retirement(&self) -> Duration {
        let config = &self.0.config;
        config
            .lease_ttl
            .saturating_add(config.max_clock_skew.saturating_mul(2))
            .saturating_mul(2)
    }

    /// The TTL written on a waiter's queue cell: `min(waiter_ttl, lease_ttl)`.
    pub fn waiter_ttl(&self) -> Ttl {
        self.0.waiter.ttl
    }

    /// How often a waiter rewrites its queue cell: `renew_fraction` of
    /// [`ValidConfig::waiter_effective`] (with `waiter_ttl` at `lease_ttl`,
    /// [`ValidConfig::renew_every`]).
    pub fn waiter_renew_every(&self) -> Duration {
        self.0.waiter.renew_every
    }

    /// How long after sending a write a waiter's queue cell is certainly still alive:
    /// `min(waiter_ttl, lease_ttl) - 1 s - max_clock_skew`. A rewrite acknowledged later
    /// than this after the previous one was sent may have left a gap in which the cell was
    /// gone.
    pub fn waiter_effective(&self) -> Duration {
        self.0.waiter.effective
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(result: Result<ValidConfig, Error>) -> &'static str {
        match result {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn a_lease_too_short_for_its_renewal_names_the_lease_and_the_shortest_accepted() {
        let with_lease = |seconds| LockConfig {
            lease_ttl: Duration::from_secs(seconds),
            ..LockConfig::default()
        };
        assert!(with_lease(9).validate().is_ok());
        for seconds in [3, 8] {
            match with_lease(seconds).validate() {
                Err(Error::InvalidConfig { field, reason }) => {
                    assert_eq!(field, "lease_ttl");
                    assert!(reason.contains("the shortest accepted is 9s"), "{reason}");
                }
                other => panic!("expected lease_ttl refused, got {other:?}"),
            }
        }
        let skewed = LockConfig {
            max_clock_skew: Duration::from_millis(200),
            request_timeout: Duration::from_millis(500),
            lease_ttl: Duration::from_secs(3),
            ..LockConfig::default()
        };
        match skewed.validate() {
            Err(Error::InvalidConfig { reason, .. }) => {
                assert!(reason.contains("the shortest accepted is 4s"), "{reason}");
            }
            other => panic!("expected lease_ttl refused, got {other:?}"),
        }
        let custom_fraction = LockConfig {
            renew_fraction: Fraction::new(3, 4),
            ..with_lease(10)
        };
        assert_eq!(field_of(custom_fraction.validate()), "renew_fraction");
    }

    #[test]
    fn a_lease_counts_from_the_send_and_is_renewable_only_with_a_request_timeout_to_spare() {
        let valid = LockConfig::default().validate().unwrap();
        let sent = MonotonicTime::from_micros(5_000_000);
        assert_eq!(valid.lease_deadline(sent), sent + Duration::from_secs(8));
        let timeout = valid.config().request_timeout;
        let deadline = valid.lease_deadline(sent);
        assert!(valid.renewable(deadline - timeout - Duration::from_micros(1), deadline));
        assert!(!valid.renewable(deadline - timeout, deadline));
        assert!(!valid.renewable(deadline, deadline));
        assert!(!valid.renewable(MonotonicTime::MAX, MonotonicTime::MAX));
    }

    #[test]
    fn the_default_is_valid_and_matches_the_thesis_renewal() {
        let valid = LockConfig::default().validate().unwrap();
        assert_eq!(valid.renew_every(), Duration::from_secs(5));
        assert_eq!(valid.effective_lease(), Duration::from_secs(8));
    }

    #[test]
    fn waiter_ttl_defaults_to_three_seconds_renewed_every_half_second() {
        let valid = LockConfig::default().validate().unwrap();
        assert_eq!(valid.waiter_ttl().as_secs(), 3);
        assert_eq!(valid.waiter_effective(), Duration::from_secs(1));
        assert_eq!(valid.waiter_renew_every(), Duration::from_millis(500));
    }

    #[test]
    fn waiter_ttl_is_clamped_to_the_lease_and_then_renews_like_it() {
        // A real-time test configuration: 3 s leases, no skew allowance.
        let short = LockConfig {
            lease_ttl: Duration::from_secs(3),
            max_clock_skew: Duration::ZERO,
            request_timeout: Duration::from_millis(400),
            ..LockConfig::default()
        }
        .validate()
        .unwrap();
        assert_eq!(short.waiter_ttl(), short.ttl());
        assert_eq!(short.waiter_renew_every(), short.renew_every());
        assert_eq!(short.waiter_effective(), short.effective_lease());
        let above = LockConfig {
            waiter_ttl: Duration::from_secs(60),
            ..LockConfig::default()
        }
        .validate()
        .unwrap();
        assert_eq!(above.waiter_ttl(), above.ttl());
    }

    #[test]
    fn unsafe_waiter_ttls_are_rejected() {
        for waiter_ttl in [
            Duration::from_millis(2_500),
            Duration::from_secs(2),
            Duration::ZERO,
        ] {
            let config = LockConfig {
                waiter_ttl,
                ..LockConfig::default()
            };
            assert_eq!(field_of(config.validate()), "waiter_ttl", "{waiter_ttl:?}");
        }
        let no_skew = LockConfig {
            waiter_ttl: Duration::from_secs(2),
            max_clock_skew: Duration::ZERO,
            ..LockConfig::default()
        }
        .validate()
        .unwrap();
        assert_eq!(no_skew.waiter_effective(), Duration::from_secs(1));
    }

    #[test]
    fn unsafe_leases_are_rejected() {
        let base = LockConfig::default();
        let fractional = LockConfig {
            lease_ttl: Duration::from_millis(10_500),
            ..base.clone()
        };
        assert_eq!(field_of(fractional.validate()), "lease_ttl");
        let too_short = LockConfig {
            lease_ttl: Duration::from_secs(2),
            ..base.clone()
        };
        assert_eq!(field_of(too_short.validate()), "lease_ttl");
        let late_renewal = LockConfig {
            renew_fraction: Fraction::new(3, 4),
            ..base.clone()
        };
        assert_eq!(field_of(late_renewal.validate()), "renew_fraction");
        let whole = LockConfig {
            renew_fraction: Fraction::new(1, 1),
            ..base.clone()
        };
        assert_eq!(field_of(whole.validate()), "renew_fraction");
        let zero_denominator = LockConfig {
            renew_fraction: Fraction::new(1, 0),
            ..base
        };
        assert_eq!(field_of(zero_denominator.validate()), "renew_fraction");
    }

    /// The adaptive margin: `margin_acquisitions` times the time between acquisitions,
    /// between the least margin and the safe one, the safe one without a measurement; a
    /// fixed margin wins; zero acquisitions (the default) turn the adaptation off.
    #[test]
    fn the_queue_margin_adapts_to_the_time_between_acquisitions_within_its_bounds() {
        let off = LockConfig::default();
        let base = LockConfig {
            poll: PollConfig {
                margin_acquisitions: RECOMMENDED_MARGIN_ACQUISITIONS,
                ..PollConfig::default()
            },
            ..LockConfig::default()
        };
        let safe = base.safe_queue_margin();
        assert_eq!(safe, Duration::from_secs(4));
        let ms = Duration::from_millis;
        assert_eq!(base.queue_margin_for(None), safe);
        assert_eq!(base.queue_margin_for(Some(ms(1))), ms(200));
        assert_eq!(
            base.queue_margin_for(Some(Duration::from_micros(10))),
            ms(50)
        );
        assert_eq!(base.queue_margin_for(Some(ms(100))), safe);
        assert_eq!(base.least_queue_margin(), ms(50));
        let fixed = LockConfig {
            poll: PollConfig {
                queue_margin: Some(ms(250)),
                ..PollConfig::default()
            },
            ..base.clone()
        };
        assert_eq!(fixed.queue_margin_for(Some(ms(1))), ms(250));
        assert_eq!(fixed.queue_margin_for(None), ms(250));
        assert_eq!(fixed.least_queue_margin(), ms(250));
        assert_eq!(off.queue_margin_for(Some(ms(1))), safe);
        assert_eq!(off.least_queue_margin(), safe);
        assert!(!off.rejoins_when_passed());
        // A least margin above the safe one is the safe one: nothing hidden.
        let tight = LockConfig {
            max_clock_skew: ms(5),
            request_timeout: ms(20),
            ..base
        };
        assert_eq!(tight.least_queue_margin(), ms(30));
        assert_eq!(
            tight.queue_margin_for(Some(Duration::from_micros(1))),
            ms(30)
        );
        assert!(!tight.rejoins_when_passed());
    }

    #[test]
    fn out_of_range_knobs_are_rejected() {
        let base = LockConfig::default();
        let cases: Vec<(LockConfig, &str)> = vec![
            (
                LockConfig {
                    request_timeout: Duration::ZERO,
                    ..base.clone()
                },
                "request_timeout",
            ),
            (
                LockConfig {
                    poll: PollConfig {
                        min_interval: Duration::from_secs(1),
                        max_interval: Duration::from_millis(10),
                        ..PollConfig::default()
                    },
                    ..base.clone()
                },
                "poll.min_interval",
            ),
            (
                LockConfig {
                    poll: PollConfig {
                        queue_read_limit: 1,
                        ..PollConfig::default()
                    },
                    ..base.clone()
                },
                "poll.queue_read_limit",
            ),
            (
                LockConfig {
                    poll: PollConfig {
                        margin_acquisitions: MAX_MARGIN_ACQUISITIONS + 1,
                        ..PollConfig::default()
                    },
                    ..base.clone()
                },
                "poll.margin_acquisitions",
            ),
            (
                LockConfig {
                    poll: PollConfig {
                        least_queue_margin: Duration::ZERO,
                        ..PollConfig::default()
                    },
                    ..base.clone()
                },
                "poll.least_queue_margin",
            ),
            (
                LockConfig {
                    soft_attempts: 0,
                    ..base.clone()
                },
                "soft_attempts",
            ),
            (
                LockConfig {
                    owner_prefix: Some("my host".into()),
                    ..base.clone()
                },
                "owner_prefix",
            ),
            (
                LockConfig {
                    baseline: BaselineConfig {
                        owner_backoff_max: Duration::ZERO,
                        ..BaselineConfig::default()
                    },
                    ..base
                },
                "baseline.owner_backoff_max",
            ),
        ];
        for (config, field) in cases {
            assert_eq!(field_of(config.validate()), field);
        }
    }

    #[test]
    fn errors_say_what_to_do() {
        let message = LockConfig {
            lease_ttl: Duration::from_secs(2),
            ..LockConfig::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(message.contains("raise lease_ttl"), "{message}");
    }
}
