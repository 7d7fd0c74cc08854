//! The history of a run and its checker: a pure function of the workers' logs,
//! the nemesis's log and the registers' final state.
//!
//! Every time is microseconds of `CLOCK_MONOTONIC`, which Linux keeps for the whole machine,
//! so the logs of separate processes on one machine share one time line.

use std::time::Duration;

use lock_core::LockConfig;
use serde::{Deserialize, Serialize};

/// One line of a worker's log (JSON Lines).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The worker started.
    Start {
        /// When.
        at: u64,
        /// Its process id.
        pid: u32,
    },
    /// The worker is about to call `lock()`: the moment its request began, for the queue
    /// order check (absent in older logs).
    Asked {
        /// When.
        at: u64,
    },
    /// `lock()` returned: the worker believes it holds the lock from `at`.
    Acquired {
        /// When `lock()` returned.
        at: u64,
        /// The fencing token.
        token: u64,
        /// When its lease counts as lost unless renewed (`at + time_left()`): the lost
        /// signal, on the same time line.
        deadline: u64,
    },
    /// Both registers read (QUORUM) while holding.
    Read {
        /// When the reads completed.
        at: u64,
        /// The plain register's value.
        plain: i64,
        /// The fenced register's value.
        fenced: i64,
        /// The fenced register's write timestamp (the token of the write it shows).
        fenced_writetime: i64,
        /// The deadline then, if the lease was not lost yet (a renewal may have moved it).
        #[serde(default)]
        deadline: Option<u64>,
    },
    /// A register write.
    Wrote {
        /// `plain` or `fenced`.
        register: Register,
        /// The value written.
        value: i64,
        /// When it was first sent.
        sent: u64,
        /// When it was acknowledged; `None` if every attempt failed (outcome unknown).
        acked: Option<u64>,
        /// Attempts that failed (all of them if `acked` is `None`). A failed attempt may
        /// still be applied, and after its retry: Cassandra gives a write without `USING
        /// TIMESTAMP` the time at which its coordinator runs it, and a coordinator frozen
        /// with the write runs it when it thaws. Absent in older logs.
        #[serde(default)]
        failed_attempts: u32,
        /// When the attempt that was acknowledged was sent (after `sent` when earlier
        /// attempts failed); absent in older logs, and when every attempt failed.
        #[serde(default)]
        acked_attempt_sent: Option<u64>,
    },
    /// The plain write was skipped: too little of the lease was left to send it safely.
    Skipped {
        /// When.
        at: u64,
    },
    /// The fenced register read back (QUORUM) after the fenced write.
    ReadBack {
        /// When.
        at: u64,
        /// Its value.
        value: i64,
        /// Its write timestamp.
        writetime: i64,
    },
    /// The worker ended its critical section at `at` and released; `lost`: the release
    /// reported the lease lost.
    Released {
        /// When the critical section ended (just before `release()`).
        at: u64,
        /// Whether `release()` said `LockLost`.
        lost: bool,
    },
    /// Something failed; the worker went on.
    Error {
        /// When.
        at: u64,
        /// What.
        what: String,
    },
    /// The holding's `lost()` future completed: the worker was told its lease was lost
    /// (logged when the holding ends, with the time it fired).
    Lost {
        /// When `lost()` completed.
        at: u64,
    },
    /// The worker saw the stop file and ended.
    Stop {
        /// When.
        at: u64,
    },
}

/// Which register a write went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Register {
    /// Read-modify-write at QUORUM with the server's timestamps.
    Plain,
    /// Written `USING TIMESTAMP <fencing token>`.
    Fenced,
}

/// What the nemesis did, and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// `kill`, `freeze` or `pause`.
    pub kind: FaultKind,
    /// The node (from 1) or worker (from 0) it hit.
    pub target: usize,
    /// When it began (SIGKILL, SIGSTOP).
    pub from: u64,
    /// When it ended (the node back up, SIGCONT).
    pub to: u64,
    /// For a pause: whether the worker held the lock when it was stopped.
    pub while_holding: bool,
    /// For a clock fault: how the target's wall clock was set; absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSkew>,
}

/// A wall clock set off by the nemesis: `offset_us` at the fault's start, then drifting by
/// `drift_ppm` (positive: running fast) until its end, when it is set right again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSkew {
    /// The offset at the start, in µs (positive: ahead of the machine's clock).
    pub offset_us: i64,
    /// The drift, in parts per million of elapsed time (10 000: 1 % fast).
    pub drift_ppm: i64,
}

impl ClockSkew {
    /// The offset `elapsed_us` after the start.
    pub fn offset_after(&self, elapsed_us: u64) -> i64 {
        let drift = i128::from(elapsed_us) * i128::from(self.drift_ppm) / 1_000_000;
        i64::try_from(i128::from(self.offset_us) + drift).unwrap_or(i64::MAX)
    }
}

/// A fault's kind; on the command line (`--nemesis`) in kebab case (`node-cut`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A node killed with SIGKILL, then restarted on its data.
    Kill,
    /// A node frozen with SIGSTOP past the request timeout, then SIGCONT.
    Freeze,
    /// A worker process stopped with SIGSTOP past its lease, then SIGCONT.
    Pause,
    /// A node cut off from its two peers (the workers still reach it), then healed.
    NodeCut,
    /// A node cut off from every worker (its peers still reach it), then healed.
    ClientsCut,
    /// A worker caught holding the lock cut off from every node past its lease, then
    /// healed.
    HolderCut,
    /// A bridge: the nodes other than `target` cut off from each other, each still
    /// linked to `target`, so each side sees a different majority; then healed.
    Bridge,
    /// A node's links cut and healed over and over, a few hundred milliseconds each, then
    /// left healed.
    Flap,
    /// Every worker's wall clock set off and drifting, each its own way, every two within
    /// `max_clock_skew` of each other and of the nodes' (within the assumptions), then set
    /// right (libfaketime).
    Skew,
    /// Every worker's wall clock set off and drifting beyond `max_clock_skew` (even
    /// workers ahead, odd ones behind), then set right (libfaketime).
    SkewBeyond,
    /// One node's wall clock set off by up to half of `max_clock_skew`, so that every
    /// clock stays within the bound of every other, then set right (libfaketime in its
    /// JVM): the node's coordinators stamp expiry times and judge expiry by it.
    NodeSkew,
}

impl FaultKind {
    /// Whether the fault is a network partition, after whose heal the lock must be
    /// granted again within the progress bound.
    pub fn is_partition(self) -> bool {
        !matches!(
            self,
            FaultKind::Kill
                | FaultKind::Freeze
                | FaultKind::Pause
                | FaultKind::Skew
                | FaultKind::SkewBeyond
                | FaultKind::NodeSkew
        )
    }

    /// Whether the fault sets the workers' wall clocks (run under libfaketime).
    pub fn is_worker_clock(self) -> bool {
        matches!(self, FaultKind::Skew | FaultKind::SkewBeyond)
    }

    /// Whether the fault keeps every assumption of the lock: clocks set off within
    /// `max_clock_skew`. The checker excuses nothing during it, queue order included.
    pub fn within_assumptions(self) -> bool {
        matches!(self, FaultKind::Skew | FaultKind::NodeSkew)
    }
}

/// The registers as read (QUORUM) after every worker ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalRegisters {
    /// The plain register's value.
    pub plain: i64,
    /// The fenced register's value.
    pub fenced: i64,
    /// The fenced register's write timestamp.
    pub fenced_writetime: i64,
}

/// One holding: from `lock()` returning to the end of the critical section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holding {
    /// The worker.
    pub worker: usize,
    /// Its fencing token.
    pub token: u64,
    /// When it began.
    pub start: u64,
    /// When it ended (`u64::MAX` if the log ends inside it).
    pub end: u64,
    /// The latest deadline the worker logged for it.
    pub deadline: u64,
    /// Whether the nemesis paused the worker's process during it.
    pub paused: bool,
    /// Whether the nemesis cut the worker off from every node during it.
    pub cut_off: bool,
    /// Whether the workers' clocks were beyond `max_clock_skew` during it: from the
    /// start of the first `skew-beyond` fault on (see [`beyond_since`]).
    pub skewed_beyond: bool,
    /// When the worker was told the lease was lost (`lost()` completed), if it was.
    pub lost_signal: Option<u64>,
    /// Whether its release reported the lease lost.
    pub lost: bool,
}

/// Two holdings at once: `later` began before `earlier` ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Overlap {
    /// The holding that began first.
    pub earlier: Holding,
    /// The one that began while it lasted.
    pub later: Holding,
    /// `later.start - earlier.deadline` in µs: positive when the later one began after the
    /// earlier one's lease counted as lost.
    pub after_lost_us: i64,
}

/// A fenced write made after its holder's deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LateWrite {
    /// The worker.
    pub worker: usize,
    /// Its token (the write's timestamp).
    pub token: u64,
    /// When it was sent.
    pub sent: u64,
    /// When its acknowledged attempt was sent (`sent` if not known).
    pub acked_attempt_sent: u64,
    /// The highest token of a fenced write acknowledged before it was sent, if above its own.
    pub superseded_by: Option<u64>,
    /// The write timestamp the worker read back after it.
    pub read_back_writetime: Option<i64>,
}

/// How soon the lock was granted again after a partition healed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HealProgress {
    /// The partition's kind.
    pub kind: FaultKind,
    /// When it healed.
    pub healed: u64,
    /// The first acquisition after the heal, in µs after it; `None` if the logs end
    /// before one and before the bound passed (not judged).
    pub wait_us: Option<u64>,
}

/// The longest the lock may stay ungranted after a partition heals, for workers with
/// `lock`'s configuration: a holder cut off just before the heal keeps the lock until its
/// cells expire (`lease_ttl`); a waiter whose requests failed through the partition may
/// be backing off inside its retry window (`storage_retry_window`); and the hand-off
/// itself takes a poll and a request (`poll.max_interval + request_timeout`). With
/// lock-core's defaults: 10 s + 10 s + 0.25 s + 2 s = 22.25 s.
pub fn progress_bound(lock: &LockConfig) -> Duration {
    lock.lease_ttl
        .saturating_add(lock.storage_retry_window)
        .saturating_add(lock.poll.max_interval)
        .saturating_add(lock.request_timeout)
}

/// How much later than a waiter another worker must ask for the lock for the waiter to be
/// served first, for workers with `lock`'s configuration (4 s with the defaults):
///
/// * `max_clock_skew`: queue order is the order of the workers' wall clocks, which may
///   disagree by that much;
/// * `request_timeout`: the waiter's queue write may take that long to be acknowledged,
///   and a queue read that starts before it may miss it;
/// * one second for the time between the worker logging that it asks and the lock
///   reading its clock, a moment no log shows (the scheduler of a loaded machine may put
///   a pause there).
pub fn order_margin(lock: &LockConfig) -> Duration {
    lock.max_clock_skew
        .saturating_add(lock.request_timeout)
        .saturating_add(Duration::from_secs(1))
}

/// One call of `lock()`: from the worker's `Asked` to its `Acquired` (or to the error
/// that ended it).
#[derive(Clone, Copy, Debug)]
struct Request {
    worker: usize,
    asked: u64,
    /// When it ended: the acquisition, or the error.
    ended: u64,
    /// Whether it ended with the lock.
    granted: bool,
}

/// The checker's findings. [`Verdict::failures`] lists what broke.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Verdict {
    /// Acquisitions (`lock()` returned) over all workers.
    pub acquisitions: u64,
    /// Holdings whose release reported the lease lost.
    pub lost: u64,
    /// Holdings during which the nemesis paused the holder.
    pub paused_holdings: u64,
    /// Holdings during which the nemesis cut the holder off from every node.
    pub cut_off_holdings: u64,
    /// The bound on the wait for the next acquisition after a partition heals, in µs
    /// (see [`progress_bound`]).
    pub progress_bound_us: u64,
    /// After each partition's heal, how long until the lock was granted again.
    pub heals: Vec<HealProgress>,
    /// The longest of those waits, in µs.
    pub worst_wait_after_heal_us: Option<u64>,
    /// Overlaps where the earlier holder was not paused: within the assumptions, none may
    /// exist.
    pub overlaps_within: Vec<Overlap>,
    /// Overlaps where the earlier holder was paused past its lease, or cut off from every
    /// node past it.
    pub overlaps_beyond: Vec<Overlap>,
    /// Plain writes acknowledged, and with an unknown outcome.
    pub plain_acked: u64,
    /// Plain writes whose every attempt failed.
    pub plain_unknown: u64,
    /// Plain writes skipped because the lease had too little left (a paused holder).
    pub plain_skipped: u64,
    /// Plain writes possibly late: acknowledged (or logged as sent) at or after their
    /// holder's deadline. The worker checks its lease before it sends, but the instant a
    /// request leaves the process is not observable: a pause between that check and the
    /// send delays the write past the deadline while its `sent` stamp stays early. Only the
    /// acknowledgement bounds when the write landed.
    pub plain_late: u64,
    /// Plain writes with a failed attempt, which may have been applied after a later
    /// holder's write and set the register back.
    pub plain_failed_attempts: u64,
    /// Fenced writes acknowledged while their holder's lease lasted.
    pub fenced_in_lease: u64,
    /// Fenced writes with an unknown outcome.
    pub fenced_unknown: u64,
    /// Fenced writes possibly late: acknowledged (or logged as sent) at or after their
    /// holder's deadline.
    pub late_writes: Vec<LateWrite>,
    /// Late fenced writes that a later holder's write had superseded, and that the register
    /// refused (its read-back showed a later token).
    pub late_refused: u64,
    /// Late fenced writes that no later holder had superseded yet; the register took them.
    pub late_accepted: u64,
    /// The registers at the end.
    pub registers: FinalRegisters,
    /// The highest token of an acknowledged fenced write.
    pub highest_fenced_token: u64,
    /// The plain register ended below its acknowledged increments, and a possibly late
    /// plain write (or a failed attempt) explains it: no lock keeps a read-modify-write
    /// without a token safe then, so the run reports it instead of failing on it.
    pub plain_set_back_beyond_assumptions: bool,
    /// The plain register ended below its acknowledged increments while a node's clock
    /// was set off, which explains it (beside a late write, if
    /// [`Verdict::plain_set_back_beyond_assumptions`] says so too): its writes carry the
    /// coordinator's timestamps, and a
    /// write coordinated by a node whose clock lags can lose to the earlier holder's write
    /// coordinated by one whose clock runs ahead. The lock cannot order them (only a
    /// token can), so the run reports it instead of failing on it.
    pub plain_set_back_by_node_clocks: bool,
    /// Holdings during which the workers' clocks were beyond `max_clock_skew` (from the
    /// first `skew-beyond` fault on, see [`beyond_since`]).
    pub skewed_beyond_holdings: u64,
    /// How much later than a waiter another worker must have asked for the lock to be
    /// judged as served out of order if it got the lock first, in µs (see
    /// [`order_margin`]).
    pub order_margin_us: u64,
    /// Requests judged by the queue order check: they ended with the lock, and no fault
    /// but a clock set off within the bound came near them.
    pub order_judged: u64,
    /// Requests served after a worker that asked more than the margin later, while the
    /// workers' clocks were beyond the bound (reported, not failed).
    pub order_passed_beyond: u64,
    /// The longest head start of a waiter that another worker passed, in µs (how long
    /// before the other's request it had asked), over every request judged or passed
    /// beyond the bound; `None` if none was passed.
    pub worst_pass_us: Option<u64>,
    /// Everything that broke a promise; empty when the run passes.
    pub failures: Vec<String>,
}

impl Verdict {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Checks one run: `logs[w]` is worker `w`'s log, `faults` what the nemesis did.
///
/// Within the assumptions (no holder paused past its lease):
/// * no two holdings overlap;
/// * fencing tokens grow in the order holdings began;
/// * the plain register ends at most at the number of acknowledged plain increments plus
///   those of unknown outcome, and at least at the acknowledged ones unless a plain write
///   was possibly late or had an attempt fail (then a write may have landed after a later
///   holder's and set the register back: it is reported as beyond the assumptions, as the
///   pattern without tokens cannot promise it). A write is possibly late when it was
///   acknowledged at or after its holder's deadline, whatever its `sent` stamp says: the
///   worker stamps `sent` before the driver puts the request on the wire, and a pause in
///   between is invisible to it.
///
/// Beyond them (the holder paused past its lease):
/// * every overlap begins after the paused holder's deadline, its lost signal;
/// * a fenced write (`USING TIMESTAMP token`) possibly late, sent after a later holder's fenced
///   write was acknowledged, is refused: the register's read-back shows the later token;
/// * the fenced register ends at the write with the highest token, and its value at the
///   acknowledged in-lease increments plus at most the late writes it took and those of
///   unknown outcome.
pub fn check(logs: &[Vec<Event>], faults: &[Fault], registers: FinalRegisters) -> Verdict {
    check_with_bound(
        logs,
        faults,
        registers,
        progress_bound(&LockConfig::default()),
    )
}

/// [`check`] with the progress bound given: after every partition's heal, the next
/// acquisition comes within `bound`.
///
/// A holder cut off from every node (beyond the assumptions, like a paused one) must have
/// been told: every holding that begins during it begins after its deadline and after its
/// `lost()` completed.
pub fn check_with_bound(
    logs: &[Vec<Event>],
    faults: &[Fault],
    registers: FinalRegisters,
    bound: Duration,
) -> Verdict {
    let lock = LockConfig::default();
    let mut verdict = Verdict {
        registers,
        progress_bound_us: u64::try_from(bound.as_micros()).unwrap_or(u64::MAX),
        order_margin_us: u64::try_from(order_margin(&lock).as_micros()).unwrap_or(u64::MAX),
        ..Verdict::default()
    };
    let beyond_since = beyond_since(faults);
    let mut requests: Vec<Request> = Vec::new();
    let pauses: Vec<&Fault> = faults
        .iter()
        .filter(|fault| fault.kind == FaultKind::Pause)
        .collect();
    let cuts: Vec<&Fault> = faults
        .iter()
        .filter(|fault| fault.kind == FaultKind::HolderCut)
        .collect();
    let mut holdings = Vec::new();
    // (token, sent, acked) of every fenced write, and the late ones with their read-backs.
    let mut fenced_acks: Vec<(u64, u64)> = Vec::new();
    let mut late: Vec<LateWrite> = Vec::new();
    for (worker, events) in logs.iter().enumerate() {
        let mut open: Option<Holding> = None;
        let mut pending_late: Option<usize> = None;
        let mut asked: Option<u64> = None;
        for event in events {
            match event {
                Event::Asked { at } => asked = Some(*at),
                Event::Acquired {
                    at,
                    token,
                    deadline,
                } => {
                    verdict.acquisitions += 1;
                    if let Some(asked) = asked.take() {
                        requests.push(Request {
                            worker,
                            asked,
                            ended: *at,
                            granted: true,
                        });
                    }
                    if let Some(unclosed) = open.take() {
                        verdict.failures.push(format!(
                            "worker {worker} acquired again at {at} without releasing the \
                             holding that began at {}",
                            unclosed.start
                        ));
                        holdings.push(Holding {
                            end: *at,
                            ..unclosed
                        });
                    }
                    open = Some(Holding {
                        worker,
                        token: *token,
                        start: *at,
                        end: u64::MAX,
                        deadline: *deadline,
                        paused: false,
                        cut_off: false,
                        skewed_beyond: false,
                        lost_signal: None,
                        lost: false,
                    });
                }
                Event::Read {
                    deadline: Some(deadline),
                    ..
                } => {
                    if let Some(holding) = open.as_mut() {
                        holding.deadline = holding.deadline.max(*deadline);
                    }
                }
                Event::Wrote {
                    register,
                    sent,
                    acked,
                    failed_attempts,
                    acked_attempt_sent,
                    ..
                } => {
                    let Some(holding) = open.as_ref() else {
                        verdict
                            .failures
                            .push(format!("worker {worker} wrote at {sent} without holding"));
                        continue;
                    };
                    let is_late = *sent >= holding.deadline
                        || acked.is_some_and(|acked| acked >= holding.deadline);
                    match (register, acked) {
                        (Register::Plain, Some(_)) => verdict.plain_acked += 1,
                        (Register::Plain, None) => verdict.plain_unknown += 1,
                        (Register::Fenced, None) => verdict.fenced_unknown += 1,
                        (Register::Fenced, Some(acked)) => {
                            fenced_acks.push((holding.token, *acked));
                            if !is_late {
                                verdict.fenced_in_lease += 1;
                            }
                        }
                    }
                    if is_late && *register == Register::Plain {
                        verdict.plain_late += 1;
                    }
                    if *failed_attempts > 0 && *register == Register::Plain {
                        verdict.plain_failed_attempts += 1;
                    }
                    if is_late && *register == Register::Fenced {
                        late.push(LateWrite {
                            worker,
                            token: holding.token,
                            sent: *sent,
                            acked_attempt_sent: acked_attempt_sent.unwrap_or(*sent),
                            superseded_by: None,
                            read_back_writetime: None,
                        });
                        pending_late = Some(late.len() - 1);
                    }
                }
                Event::ReadBack { writetime, .. } => {
                    if let Some(index) = pending_late.take()
                        && let Some(write) = late.get_mut(index)
                    {
                        write.read_back_writetime = Some(*writetime);
                    }
                }
                Event::Released { at, lost } => {
                    pending_late = None;
                    if let Some(holding) = open.take() {
                        if *lost {
                            verdict.lost += 1;
                        }
                        holdings.push(Holding {
                            end: *at,
                            lost: *lost,
                            ..holding
                        });
                    }
                }
                Event::Lost { at } => {
                    if let Some(holding) = open.as_mut() {
                        holding.lost_signal = Some(*at);
                    }
                }
                Event::Skipped { .. } => verdict.plain_skipped += 1,
                Event::Error { at, .. } => {
                    if let Some(asked) = asked.take() {
                        requests.push(Request {
                            worker,
                            asked,
                            ended: *at,
                            granted: false,
                        });
                    }
                }
                Event::Start { .. } | Event::Read { deadline: None, .. } | Event::Stop { .. } => {}
            }
        }
        holdings.extend(open);
    }
    for holding in &mut holdings {
        holding.paused = pauses.iter().any(|pause| {
            pause.target == holding.worker && pause.from < holding.end && pause.to > holding.start
        });
    }
    for holding in &mut holdings {
        holding.cut_off = cuts.iter().any(|cut| {
            cut.target == holding.worker && cut.from < holding.end && cut.to > holding.start
        });
    }
    for holding in &mut holdings {
        holding.skewed_beyond = beyond_since.is_some_and(|since| since < holding.end);
    }
    verdict.skewed_beyond_holdings = holdings
        .iter()
        .filter(|holding| holding.skewed_beyond)
        .count() as u64;
    verdict.paused_holdings = holdings.iter().filter(|holding| holding.paused).count() as u64;
    verdict.cut_off_holdings = holdings.iter().filter(|holding| holding.cut_off).count() as u64;
    holdings.sort_by_key(|holding| (holding.start, holding.worker));

    // Overlaps, and tokens in the order holdings began.
    for (index, earlier) in holdings.iter().enumerate() {
        for later in holdings[index + 1..]
            .iter()
            .take_while(|later| later.start < earlier.end)
        {
            let overlap = Overlap {
                earlier: earlier.clone(),
                later: later.clone(),
                after_lost_us: i64::try_from(later.start).unwrap_or(i64::MAX)
                    - i64::try_from(earlier.deadline).unwrap_or(i64::MAX),
            };
            if (earlier.cut_off || earlier.skewed_beyond) && !earlier.paused {
                let told = earlier
                    .lost_signal
                    .is_some_and(|signal| signal <= later.start);
                if later.start < earlier.deadline || !told {
                    verdict.failures.push(format!(
                        "worker {} took the lock at {} before {} worker {} was told it \
                         lost it (deadline {}, lost() {})",
                        later.worker,
                        later.start,
                        if earlier.cut_off {
                            "cut-off"
                        } else {
                            "clock-skewed"
                        },
                        earlier.worker,
                        earlier.deadline,
                        earlier
                            .lost_signal
                            .map_or_else(|| "never completed".to_owned(), |at| format!("at {at}"))
                    ));
                }
                verdict.overlaps_beyond.push(overlap);
            } else if earlier.paused {
                if later.start < earlier.deadline {
                    verdict.failures.push(format!(
                        "worker {} took the lock at {} while paused worker {} still held it \
                         (its lease counted as lost only at {})",
                        later.worker, later.start, earlier.worker, earlier.deadline
                    ));
                }
                verdict.overlaps_beyond.push(overlap);
            } else {
                verdict.failures.push(format!(
                    "worker {} took the lock at {} while worker {} held it ({}..{}), not paused",
                    later.worker, later.start, earlier.worker, earlier.start, earlier.end
                ));
                verdict.overlaps_within.push(overlap);
            }
        }
    }
    for pair in holdings.windows(2) {
        if pair[1].token <= pair[0].token {
            verdict.failures.push(format!(
                "fencing token {} of worker {} (from {}) is not above token {} of worker {} (from \
                 {}), which began earlier",
                pair[1].token,
                pair[1].worker,
                pair[1].start,
                pair[0].token,
                pair[0].worker,
                pair[0].start
            ));
        }
    }

    check_order(&mut verdict, &requests, faults, lock.lease_ttl);

    // The plain register.
    let plain = u64::try_from(registers.plain).unwrap_or(u64::MAX);
    let late_or_retried = verdict.plain_late > 0 || verdict.plain_failed_attempts > 0;
    let node_clocks = faults.iter().any(|fault| fault.kind == FaultKind::NodeSkew);
    let set_back_possible = late_or_retried || node_clocks;
    let set_back = plain < verdict.plain_acked;
    verdict.plain_set_back_beyond_assumptions = set_back && late_or_retried;
    verdict.plain_set_back_by_node_clocks = set_back && node_clocks;
    let plain_ok =
        (!set_back || set_back_possible) && plain <= verdict.plain_acked + verdict.plain_unknown;
    if !plain_ok {
        verdict.failures.push(format!(
            "the plain register ends at {} after {} acknowledged increments ({} of unknown \
             outcome)",
            registers.plain, verdict.plain_acked, verdict.plain_unknown
        ));
    }

    // The fenced register.
    verdict.highest_fenced_token = fenced_acks
        .iter()
        .map(|(token, _)| *token)
        .max()
        .unwrap_or(0);
    for write in &mut late {
        write.superseded_by = fenced_acks
            .iter()
            .filter(|(token, acked)| *token > write.token && *acked <= write.acked_attempt_sent)
            .map(|(token, _)| *token)
            .max();
        let shown = write.read_back_writetime;
        let own = i64::try_from(write.token).unwrap_or(i64::MAX);
        match (write.superseded_by, shown) {
            (Some(later), Some(shown)) if shown <= own => verdict.failures.push(format!(
                "worker {}'s late write with token {} overwrote the write of token {later}: the \
                 register read back timestamp {shown}",
                write.worker, write.token
            )),
            (Some(_), Some(_)) => verdict.late_refused += 1,
            (Some(_), None) => {}
            (None, shown) => {
                if shown == Some(own) {
                    verdict.late_accepted += 1;
                } else if shown.is_some_and(|shown| shown > own) {
                    verdict.late_refused += 1;
                }
            }
        }
    }
    verdict.late_writes = late;
    check_progress(&mut verdict, logs, faults, bound);
    let highest = i64::try_from(verdict.highest_fenced_token).unwrap_or(i64::MAX);
    if verdict.highest_fenced_token > 0 && registers.fenced_writetime < highest {
        verdict.failures.push(format!(
            "the fenced register ends with timestamp {} below the highest acknowledged token {}",
            registers.fenced_writetime, highest
        ));
    }
    let fenced = u64::try_from(registers.fenced).unwrap_or(u64::MAX);
    let fenced_most = verdict.fenced_in_lease + verdict.late_accepted + verdict.fenced_unknown;
    if fenced < verdict.fenced_in_lease || fenced > fenced_most {
        verdict.failures.push(format!(
            "the fenced register ends at {} after {} acknowledged in-lease increments (at most {} \
             with late writes it took and unknown outcomes)",
            registers.fenced, verdict.fenced_in_lease, fenced_most
        ));
    }
    verdict
}

/// From when the workers' clocks count as beyond `max_clock_skew`: the start of the first
/// `skew-beyond` fault, to the end of the run. Setting a worker's clock right does not
/// end it: lock-core's `SystemClock` never goes back, so a worker whose wall clock was
/// set back keeps the lead it had, moving at the monotonic rate, for as long as its
/// process lives.
pub fn beyond_since(faults: &[Fault]) -> Option<u64> {
    faults
        .iter()
        .filter(|fault| fault.kind == FaultKind::SkewBeyond)
        .map(|fault| fault.from)
        .min()
}

/// Queue order: a request that ended with the lock, near which no fault came (but a clock
/// set off within the bound) from its start to its end, is served before every request that
/// began more than the order margin after it. A fault counts as near from its start until
/// `lease_ttl` after its end, while cells it left behind may still be expiring. While the
/// workers' clocks are beyond the bound ([`beyond_since`]), a pass is counted, not failed.
fn check_order(verdict: &mut Verdict, requests: &[Request], faults: &[Fault], lease_ttl: Duration) {
    let tail = u64::try_from(lease_ttl.as_micros()).unwrap_or(u64::MAX);
    let near = |request: &Request, fault: &Fault| {
        fault.from < request.ended && fault.to.saturating_add(tail) > request.asked
    };
    let beyond_since = beyond_since(faults);
    for waiter in requests.iter().filter(|request| request.granted) {
        let beyond = beyond_since.is_some_and(|since| since < waiter.ended);
        let disturbed = beyond
            || faults
                .iter()
                .any(|fault| !fault.kind.within_assumptions() && near(waiter, fault));
        if disturbed && !beyond {
            continue;
        }
        if !disturbed {
            verdict.order_judged += 1;
        }
        let passers = requests.iter().filter(|other| {
            other.granted
                && other.worker != waiter.worker
                && other.asked > waiter.asked
                && other.ended < waiter.ended
        });
        for passer in passers {
            let head_start = passer.asked - waiter.asked;
            verdict.worst_pass_us = Some(
                verdict
                    .worst_pass_us
                    .map_or(head_start, |worst| worst.max(head_start)),
            );
            if head_start <= verdict.order_margin_us {
                continue;
            }
            if disturbed {
                verdict.order_passed_beyond += 1;
            } else {
                verdict.failures.push(format!(
                    "worker {} asked for the lock at {}, {:.3} s after worker {} (at {}), and \
                     was served first (at {}, the other at {}), with the clocks within the bound",
                    passer.worker,
                    passer.asked,
                    head_start as f64 / 1e6,
                    waiter.worker,
                    waiter.asked,
                    passer.ended,
                    waiter.ended
                ));
            }
        }
    }
}

/// After each partition's heal, the next acquisition must come within `bound`; a heal
/// whose logs end sooner, with no acquisition after it, is recorded as not judged.
fn check_progress(verdict: &mut Verdict, logs: &[Vec<Event>], faults: &[Fault], bound: Duration) {
    let bound_us = u64::try_from(bound.as_micros()).unwrap_or(u64::MAX);
    let acquisitions: Vec<u64> = logs
        .iter()
        .flatten()
        .filter_map(|event| match event {
            Event::Acquired { at, .. } => Some(*at),
            _ => None,
        })
        .collect();
    let last_event = logs.iter().flatten().map(event_time).max().unwrap_or(0);
    for fault in faults.iter().filter(|fault| fault.kind.is_partition()) {
        let next = acquisitions.iter().filter(|at| **at > fault.to).min();
        let wait_us = next.map(|at| at - fault.to);
        match wait_us {
            Some(wait) if wait > bound_us => verdict.failures.push(format!(
                "the lock was granted again only {:.3} s after the {:?} partition healed at \
                 {}, beyond the bound of {:.3} s",
                wait as f64 / 1e6,
                fault.kind,
                fault.to,
                bound_us as f64 / 1e6
            )),
            None if last_event >= fault.to.saturating_add(bound_us) => {
                verdict.failures.push(format!(
                    "the lock was never granted again after the {:?} partition healed at {} \
                     (the logs go on {:.3} s past it; the bound is {:.3} s)",
                    fault.kind,
                    fault.to,
                    (last_event - fault.to) as f64 / 1e6,
                    bound_us as f64 / 1e6
                ));
            }
            _ => {}
        }
        verdict.heals.push(HealProgress {
            kind: fault.kind,
            healed: fault.to,
            wait_us,
        });
    }
    verdict.worst_wait_after_heal_us = verdict.heals.iter().filter_map(|heal| heal.wait_us).max();
}

/// When an event happened (a write: when it was acknowledged, else first sent).
fn event_time(event: &Event) -> u64 {
    match event {
        Event::Start { at, .. }
        | Event::Asked { at }
        | Event::Acquired { at, .. }
        | Event::Read { at, .. }
        | Event::Skipped { at }
        | Event::ReadBack { at, .. }
        | Event::Released { at, .. }
        | Event::Error { at, .. }
        | Event::Lost { at }
        | Event::Stop { at } => *at,
        Event::Wrote { sent, acked, .. } => acked.unwrap_or(*sent),
    }
}

/// Reads a worker's log: one JSON event per line. A last line cut short (the worker was
/// killed while writing it) is ignored; any other bad line is an error naming it.
pub fn parse_log(text: &str) -> Result<Vec<Event>, String> {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let mut events = Vec::with_capacity(lines.len());
    for (number, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(event) => events.push(event),
            Err(_) if number + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(error) => return Err(format!("line {}: {error}: {line}", number + 1)),
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One clean holding: acquire at `at`, read, both writes, release 10 µs later.
    fn holding(at: u64, token: u64, value: i64) -> Vec<Event> {
        vec![
            Event::Acquired {
                at,
                token,
                deadline: at + 8_000_000,
            },
            Event::Read {
                at: at + 1,
                plain: value,
                fenced: value,
                fenced_writetime: 0,
                deadline: Some(at + 8_000_000),
            },
            Event::Wrote {
                register: Register::Plain,
                value: value + 1,
                sent: at + 2,
                acked: Some(at + 3),
                failed_attempts: 0,
                acked_attempt_sent: None,
            },
            Event::Wrote {
                register: Register::Fenced,
                value: value + 1,
                sent: at + 4,
                acked: Some(at + 5),
                failed_attempts: 0,
                acked_attempt_sent: None,
            },
            Event::ReadBack {
                at: at + 6,
                value: value + 1,
                writetime: i64::try_from(token).unwrap(),
            },
            Event::Released {
                at: at + 10,
                lost: false,
            },
        ]
    }

    /// Asserts that one of `verdict`'s failures says `text`.
    fn assert_fails_with(verdict: &Verdict, text: &str) {
        assert!(
            verdict
                .failures
                .iter()
                .any(|failure| failure.contains(text)),
            "no failure says {text:?}: {:?}",
            verdict.failures
        );
    }

    fn registers(value: i64, writetime: i64) -> FinalRegisters {
        FinalRegisters {
            plain: value,
            fenced: value,
            fenced_writetime: writetime,
        }
    }

    #[test]
    fn a_clean_history_passes() {
        let logs = vec![
            [holding(100, 1000, 0), holding(300, 3000, 2)].concat(),
            holding(200, 2000, 1),
        ];
        let verdict = check(&logs, &[], registers(3, 3000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.acquisitions, 3);
        assert_eq!((verdict.plain_acked, verdict.fenced_in_lease), (3, 3));
        assert!(verdict.overlaps_within.is_empty() && verdict.overlaps_beyond.is_empty());
        assert_eq!(verdict.highest_fenced_token, 3000);
    }

    #[test]
    fn overlapping_holders_fail() {
        // Worker 1 takes the lock at 105, while worker 0 holds it (100..110).
        let logs = vec![holding(100, 1000, 0), holding(105, 2000, 1)];
        let verdict = check(&logs, &[], registers(2, 2000));
        assert!(!verdict.passed());
        assert_eq!(verdict.overlaps_within.len(), 1);
        assert!(
            verdict.failures[0].contains("not paused"),
            "{:?}",
            verdict.failures
        );
    }

    #[test]
    fn a_lost_increment_fails_and_so_do_tokens_that_do_not_grow() {
        let logs = vec![holding(100, 1000, 0), holding(200, 2000, 1)];
        let verdict = check(&logs, &[], registers(1, 2000));
        assert_fails_with(&verdict, "plain register ends at 1");
        let backwards = vec![holding(100, 2000, 0), holding(200, 1000, 1)];
        let verdict = check(&backwards, &[], registers(2, 2000));
        assert_fails_with(&verdict, "is not above");
    }

    /// Worker 0 holds from 100 with deadline 1_000, is paused 150..5_000, then writes late
    /// (the fenced write at 5_001) and reads back `read_back`; worker 1 takes the lock at
    /// `successor` and writes with token 2000.
    fn paused_history(successor: u64, read_back: i64) -> (Vec<Vec<Event>>, Vec<Fault>) {
        let paused = vec![
            Event::Acquired {
                at: 100,
                token: 1000,
                deadline: 1_000,
            },
            Event::Read {
                at: 110,
                plain: 0,
                fenced: 0,
                fenced_writetime: 0,
                deadline: None,
            },
            Event::Skipped { at: 5_000 },
            Event::Wrote {
                register: Register::Fenced,
                value: 1,
                sent: 5_001,
                acked: Some(5_002),
                failed_attempts: 0,
                acked_attempt_sent: None,
            },
            Event::ReadBack {
                at: 5_003,
                value: 1,
                writetime: read_back,
            },
            Event::Released {
                at: 5_004,
                lost: true,
            },
        ];
        let faults = vec![Fault {
            kind: FaultKind::Pause,
            target: 0,
            from: 150,
            to: 5_000,
            while_holding: true,
            clock: None,
        }];
        (vec![paused, holding(successor, 2000, 0)], faults)
    }

    #[test]
    fn a_paused_holder_overlaps_after_its_lost_signal_and_its_late_write_is_refused() {
        let (logs, faults) = paused_history(2_000, 2000);
        let verdict = check(&logs, &faults, registers(1, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.overlaps_beyond.len(), 1);
        assert_eq!(verdict.overlaps_beyond[0].after_lost_us, 1_000);
        assert!(verdict.overlaps_within.is_empty());
        assert_eq!(verdict.late_writes.len(), 1);
        assert_eq!(verdict.late_writes[0].superseded_by, Some(2000));
        assert_eq!((verdict.late_refused, verdict.late_accepted), (1, 0));
        assert_eq!((verdict.lost, verdict.paused_holdings), (1, 1));
        assert_eq!(verdict.plain_skipped, 1);
    }

    #[test]
    fn a_successor_before_the_lost_signal_fails() {
        let (logs, faults) = paused_history(900, 2000);
        let verdict = check(&logs, &faults, registers(1, 2000));
        assert_fails_with(&verdict, "while paused worker 0 still held it");
    }

    #[test]
    fn a_late_write_that_overwrites_a_later_holder_fails() {
        // The read-back shows the paused holder's own token: it overwrote token 2000.
        let (logs, faults) = paused_history(2_000, 1000);
        let verdict = check(&logs, &faults, registers(1, 1000));
        assert_fails_with(&verdict, "overwrote the write of token 2000");
        assert_fails_with(&verdict, "below the highest acknowledged token");
    }

    #[test]
    fn a_plain_write_with_a_failed_attempt_may_set_the_register_back() {
        // The first holder's plain write times out once and its retry is acknowledged; the
        // timed-out attempt runs after the second holder's write (its coordinator was
        // frozen), so the plain register ends at 1 after two acknowledged increments. Without
        // the failed attempt that is a lost increment
        // (`a_lost_increment_fails_and_so_do_tokens_that_do_not_grow`).
        let mut logs = vec![holding(100, 1000, 0), holding(300, 3000, 1)];
        if let Event::Wrote {
            failed_attempts, ..
        } = &mut logs[0][2]
        {
            *failed_attempts = 1;
        }
        let set_back = FinalRegisters {
            plain: 1,
            fenced: 2,
            fenced_writetime: 3000,
        };
        let verdict = check(&logs, &[], set_back);
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.plain_failed_attempts, 1);
        // It can set the register back, never beyond the increments written.
        let too_high = FinalRegisters {
            plain: 3,
            ..set_back
        };
        assert!(!check(&logs, &[], too_high).passed());
    }

    /// The history of a false alarm the checker once raised: worker 0 holds from 100
    /// (deadline 1_000), reads both registers, checks its lease and stamps its plain write
    /// sent at 140; its process is paused 150..5_000 before the write reaches the wire.
    /// Worker 1 takes the lock twice meanwhile (tokens 2000 and 3000) and counts the
    /// registers up to 2. Thawed, worker 0's plain write of 1 is acknowledged at 5_001 and
    /// sets the plain register back; its fenced write (token 1000) is refused.
    fn pause_between_check_and_send() -> (Vec<Vec<Event>>, Vec<Fault>) {
        let paused = vec![
            Event::Acquired {
                at: 100,
                token: 1000,
                deadline: 1_000,
            },
            Event::Read {
                at: 110,
                plain: 0,
                fenced: 0,
                fenced_writetime: 0,
                deadline: Some(1_000),
            },
            Event::Wrote {
                register: Register::Plain,
                value: 1,
                sent: 140,
                acked: Some(5_001),
                failed_attempts: 0,
                acked_attempt_sent: None,
            },
            Event::Wrote {
                register: Register::Fenced,
                value: 1,
                sent: 5_002,
                acked: Some(5_003),
                failed_attempts: 0,
                acked_attempt_sent: None,
            },
            Event::ReadBack {
                at: 5_004,
                value: 2,
                writetime: 3000,
            },
            Event::Released {
                at: 5_005,
                lost: true,
            },
        ];
        let faults = vec![Fault {
            kind: FaultKind::Pause,
            target: 0,
            from: 150,
            to: 5_000,
            while_holding: true,
            clock: None,
        }];
        let successor = [holding(2_000, 2000, 0), holding(3_000, 3000, 1)].concat();
        (vec![paused, successor], faults)
    }

    #[test]
    fn a_plain_write_acknowledged_after_its_deadline_is_beyond_the_assumptions() {
        let (logs, faults) = pause_between_check_and_send();
        let set_back = FinalRegisters {
            plain: 1,
            fenced: 2,
            fenced_writetime: 3000,
        };
        let verdict = check(&logs, &faults, set_back);
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!((verdict.plain_acked, verdict.plain_late), (3, 1));
        assert!(verdict.plain_set_back_beyond_assumptions);
        assert_eq!(verdict.overlaps_beyond.len(), 2);
        assert_eq!((verdict.late_refused, verdict.fenced_in_lease), (1, 2));
    }

    #[test]
    fn a_lost_plain_increment_acknowledged_within_the_lease_still_fails() {
        // The same history without the pause, the plain write acknowledged at the last
        // microsecond of its lease: nothing excuses the register's shortfall.
        let (mut logs, _) = pause_between_check_and_send();
        logs[0][2] = Event::Wrote {
            register: Register::Plain,
            value: 1,
            sent: 140,
            acked: Some(999),
            failed_attempts: 0,
            acked_attempt_sent: None,
        };
        logs[0][5] = Event::Released {
            at: 1_500,
            lost: false,
        };
        let set_back = FinalRegisters {
            plain: 1,
            fenced: 2,
            fenced_writetime: 3000,
        };
        let verdict = check(&logs, &[], set_back);
        assert_eq!(verdict.failures.len(), 1, "{:?}", verdict.failures);
        assert_fails_with(&verdict, "plain register ends at 1 after 3");
        assert!(!verdict.plain_set_back_beyond_assumptions);
        assert_eq!(verdict.plain_late, 0);
    }

    #[test]
    fn a_fenced_register_that_goes_backwards_still_fails_after_a_pause() {
        let (logs, faults) = pause_between_check_and_send();
        let backwards = FinalRegisters {
            plain: 1,
            fenced: 1,
            fenced_writetime: 1000,
        };
        let verdict = check(&logs, &faults, backwards);
        assert_fails_with(&verdict, "below the highest acknowledged token 3000");
        assert_fails_with(&verdict, "fenced register ends at 1 after 2");
    }

    #[test]
    fn unknown_outcomes_widen_the_register_check() {
        let mut logs = vec![holding(100, 1000, 0)];
        if let Event::Wrote { acked, .. } = &mut logs[0][2] {
            *acked = None;
        }
        for plain in [0, 1] {
            let verdict = check(
                &logs,
                &[],
                FinalRegisters {
                    plain,
                    fenced: 1,
                    fenced_writetime: 1000,
                },
            );
            assert!(verdict.passed(), "{plain}: {:?}", verdict.failures);
        }
        let verdict = check(
            &logs,
            &[],
            FinalRegisters {
                plain: 2,
                fenced: 1,
                fenced_writetime: 1000,
            },
        );
        assert!(!verdict.passed());
    }

    /// Worker 0 holds from 100 (deadline 1_000) and is cut off from every node 150..5_000;
    /// its `lost()` completes at `lost_signal`; its fenced write, first sent at 200 inside
    /// the cut, is acknowledged at 5_200 after an attempt sent at 5_100, and reads back
    /// `read_back`. Worker 1 takes the lock at `successor` and writes with token 2000.
    fn cut_off_history(
        successor: u64,
        lost_signal: Option<u64>,
        read_back: i64,
    ) -> (Vec<Vec<Event>>, Vec<Fault>) {
        let mut cut_off = vec![
            Event::Acquired {
                at: 100,
                token: 1000,
                deadline: 1_000,
            },
            Event::Read {
                at: 110,
                plain: 0,
                fenced: 0,
                fenced_writetime: 0,
                deadline: Some(1_000),
            },
            Event::Skipped { at: 120 },
            Event::Wrote {
                register: Register::Fenced,
                value: 1,
                sent: 200,
                acked: Some(5_200),
                failed_attempts: 3,
                acked_attempt_sent: Some(5_100),
            },
            Event::ReadBack {
                at: 5_300,
                value: 1,
                writetime: read_back,
            },
        ];
        cut_off.extend(lost_signal.map(|at| Event::Lost { at }));
        cut_off.push(Event::Released {
            at: 5_400,
            lost: true,
        });
        let faults = vec![Fault {
            kind: FaultKind::HolderCut,
            target: 0,
            from: 150,
            to: 5_000,
            while_holding: true,
            clock: None,
        }];
        (vec![cut_off, holding(successor, 2000, 0)], faults)
    }

    #[test]
    fn a_cut_off_holder_told_lost_before_its_successor_passes_and_its_late_write_is_refused() {
        let (logs, faults) = cut_off_history(2_000, Some(1_000), 2000);
        let verdict = check(&logs, &faults, registers(1, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.cut_off_holdings, 1);
        assert_eq!(verdict.overlaps_beyond.len(), 1);
        assert!(verdict.overlaps_within.is_empty());
        assert_eq!(verdict.late_writes[0].superseded_by, Some(2000));
        assert_eq!((verdict.late_refused, verdict.late_accepted), (1, 0));
        // The heal at 5_000 is not judged: the logs end long before the bound.
        assert_eq!(verdict.heals.len(), 1);
        assert_eq!(verdict.heals[0].wait_us, None);
    }

    #[test]
    fn a_successor_before_the_cut_off_holder_was_told_fails() {
        // Entered before the deadline (and before lost() completed).
        let (logs, faults) = cut_off_history(900, Some(1_000), 2000);
        let verdict = check(&logs, &faults, registers(1, 2000));
        assert_fails_with(&verdict, "before cut-off worker 0 was told it lost it");
        // Entered after the deadline, but lost() completed only later.
        let (logs, faults) = cut_off_history(2_000, Some(2_500), 2000);
        let verdict = check(&logs, &faults, registers(1, 2000));
        assert_fails_with(&verdict, "lost() at 2500");
        // Entered after the deadline, and lost() never completed.
        let (logs, faults) = cut_off_history(2_000, None, 2000);
        let verdict = check(&logs, &faults, registers(1, 2000));
        assert_fails_with(&verdict, "lost() never completed");
    }

    #[test]
    fn a_cut_off_holders_late_write_that_was_taken_over_a_later_token_fails() {
        // Its acknowledged attempt went out at 5_100, after token 2000 was acknowledged at
        // 2_005, and the register read back its own token: the register took it.
        let (logs, faults) = cut_off_history(2_000, Some(1_000), 1000);
        let verdict = check(&logs, &faults, registers(1, 1000));
        assert_fails_with(&verdict, "overwrote the write of token 2000");
        // Judged by its first send instead (200, before token 2000 existed), the same
        // history would pass as a write the register could take.
        assert_eq!(verdict.late_writes[0].acked_attempt_sent, 5_100);
    }

    /// A node cut off from its peers 150..1_000, and holdings at 100 and `next`.
    fn heal_history(next: u64) -> (Vec<Vec<Event>>, Vec<Fault>) {
        let faults = vec![Fault {
            kind: FaultKind::NodeCut,
            target: 2,
            from: 150,
            to: 1_000,
            while_holding: false,
            clock: None,
        }];
        (
            vec![
                holding(100, 1000, 0),
                [holding(next, 2000, 1), vec![Event::Stop { at: next + 50 }]].concat(),
            ],
            faults,
        )
    }

    #[test]
    fn the_lock_must_be_granted_again_within_the_bound_after_a_heal() {
        let bound = Duration::from_micros(1_000);
        let (logs, faults) = heal_history(1_800);
        let verdict = check_with_bound(&logs, &faults, registers(2, 2000), bound);
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.worst_wait_after_heal_us, Some(800));
        let (logs, faults) = heal_history(2_500);
        let verdict = check_with_bound(&logs, &faults, registers(2, 2000), bound);
        assert_fails_with(
            &verdict,
            "granted again only 0.002 s after the NodeCut partition",
        );
        assert_eq!(verdict.worst_wait_after_heal_us, Some(1_500));
    }

    #[test]
    fn a_lock_never_granted_again_after_a_heal_fails() {
        let bound = Duration::from_micros(1_000);
        let faults = vec![Fault {
            kind: FaultKind::Bridge,
            target: 2,
            from: 150,
            to: 1_000,
            while_holding: false,
            clock: None,
        }];
        let logs = vec![[holding(100, 1000, 0), vec![Event::Stop { at: 2_500 }]].concat()];
        let verdict = check_with_bound(&logs, &faults, registers(1, 1000), bound);
        assert_fails_with(&verdict, "never granted again after the Bridge partition");
        // Logs that end inside the bound leave the heal unjudged.
        let short = vec![[holding(100, 1000, 0), vec![Event::Stop { at: 1_500 }]].concat()];
        let verdict = check_with_bound(&short, &faults, registers(1, 1000), bound);
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.heals[0].wait_us, None);
    }

    #[test]
    fn the_progress_bound_is_lease_plus_retry_window_plus_a_hand_off() {
        assert_eq!(
            progress_bound(&LockConfig::default()),
            Duration::from_millis(22_250)
        );
    }

    #[test]
    fn logs_parse_line_by_line_and_forgive_only_a_torn_last_line() {
        let events = holding(100, 1000, 0);
        let text: String = events
            .iter()
            .map(|event| serde_json::to_string(event).unwrap() + "\n")
            .collect();
        assert_eq!(parse_log(&text).unwrap(), events);
        let torn = format!("{text}{{\"event\":\"acq");
        assert_eq!(parse_log(&torn).unwrap(), events);
        let bad = format!("{{\"event\":\"nonsense\"}}\n{text}");
        assert!(parse_log(&bad).unwrap_err().starts_with("line 1:"));
    }

    /// A fault of `kind` on worker 0, 0..`to`, without a clock (the checker reads only
    /// its kind and window).
    fn fault(kind: FaultKind, from: u64, to: u64) -> Fault {
        Fault {
            kind,
            target: 0,
            from,
            to,
            while_holding: false,
            clock: Some(ClockSkew {
                offset_us: 0,
                drift_ppm: 0,
            }),
        }
    }

    /// Worker 0 asks at 1_000_000 and gets the lock at 20_000_000; worker 1 asks
    /// `head_start` µs later and gets it at 10_000_000, before it.
    fn passed(head_start: u64) -> Vec<Vec<Event>> {
        vec![
            [
                vec![Event::Asked { at: 1_000_000 }],
                holding(20_000_000, 2000, 1),
            ]
            .concat(),
            [
                vec![Event::Asked {
                    at: 1_000_000 + head_start,
                }],
                holding(10_000_000, 1000, 0),
            ]
            .concat(),
        ]
    }

    #[test]
    fn a_waiter_passed_by_a_later_request_fails_with_clocks_within_the_bound() {
        let margin = order_margin(&LockConfig::default());
        assert_eq!(margin, Duration::from_secs(4));
        let logs = passed(5_000_000);
        let verdict = check(&logs, &[], registers(2, 2000));
        assert_fails_with(&verdict, "5.000 s after worker 0");
        assert_eq!(verdict.worst_pass_us, Some(5_000_000));
        // The same with the workers' or a node's clock set off within the bound.
        for kind in [FaultKind::Skew, FaultKind::NodeSkew] {
            let faults = [fault(kind, 0, 30_000_000)];
            let verdict = check(&logs, &faults, registers(2, 2000));
            assert_fails_with(&verdict, "with the clocks within the bound");
            assert_eq!(verdict.order_judged, 2, "{kind:?}");
        }
    }

    #[test]
    fn a_pass_within_the_margin_or_near_a_fault_is_no_failure() {
        // Asked 3 s later: the clocks and the queue write's time may explain it.
        let verdict = check(&passed(3_000_000), &[], registers(2, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.worst_pass_us, Some(3_000_000));
        // A node killed until 0.5 s before the waiter asked: within a lease of it, no
        // wait is judged.
        let faults = [fault(FaultKind::Kill, 100, 500_000)];
        let verdict = check(&passed(5_000_000), &faults, registers(2, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!((verdict.order_judged, verdict.order_passed_beyond), (0, 0));
        // With clocks beyond the bound, the pass is counted, not failed.
        let faults = [fault(FaultKind::SkewBeyond, 0, 30_000_000)];
        let verdict = check(&passed(5_000_000), &faults, registers(2, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!((verdict.order_judged, verdict.order_passed_beyond), (0, 1));
        // And after such clocks were set right, long after (a worker whose clock was set
        // back keeps its lead).
        let faults = [fault(FaultKind::SkewBeyond, 0, 100)];
        let verdict = check(&passed(5_000_000), &faults, registers(2, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.order_passed_beyond, 1);
        assert_eq!(beyond_since(&faults), Some(0));
        // A request that ended in an error is not judged.
        let mut logs = passed(5_000_000);
        logs[0].insert(
            1,
            Event::Error {
                at: 15_000_000,
                what: "lock: storage unavailable".to_owned(),
            },
        );
        let verdict = check(&logs, &[], registers(2, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
    }

    #[test]
    fn holders_overlapping_while_clocks_are_within_the_bound_fail() {
        let logs = vec![holding(100, 1000, 0), holding(105, 2000, 1)];
        for kind in [FaultKind::Skew, FaultKind::NodeSkew] {
            let verdict = check(&logs, &[fault(kind, 0, 1_000)], registers(2, 2000));
            assert_fails_with(&verdict, "not paused");
            assert_eq!(verdict.overlaps_within.len(), 1, "{kind:?}");
        }
    }

    /// The cut-off history's holder, not cut off: the workers' clocks are beyond the
    /// bound 50..6_000 instead.
    fn skewed_history(
        successor: u64,
        lost_signal: Option<u64>,
        read_back: i64,
    ) -> (Vec<Vec<Event>>, Vec<Fault>) {
        let (logs, _) = cut_off_history(successor, lost_signal, read_back);
        (logs, vec![fault(FaultKind::SkewBeyond, 50, 6_000)])
    }

    #[test]
    fn clocks_beyond_the_bound_allow_an_overlap_only_after_the_lost_signal() {
        let (logs, faults) = skewed_history(2_000, Some(1_000), 2000);
        let verdict = check(&logs, &faults, registers(1, 2000));
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert_eq!(verdict.overlaps_beyond.len(), 1);
        assert_eq!(verdict.skewed_beyond_holdings, 2);
        assert_eq!((verdict.late_refused, verdict.late_accepted), (1, 0));
        // Before the deadline, after it without lost(), or lost() only later: each fails.
        for (successor, signal, text) in [
            (900, Some(1_000), "before clock-skewed worker 0 was told"),
            (2_000, None, "lost() never completed"),
            (2_000, Some(2_500), "lost() at 2500"),
        ] {
            let (logs, faults) = skewed_history(successor, signal, 2000);
            let verdict = check(&logs, &faults, registers(1, 2000));
            assert_fails_with(&verdict, text);
        }
        // The same overlap with the clocks within the bound is not excused at all.
        let (logs, _) = skewed_history(2_000, Some(1_000), 2000);
        let verdict = check(
            &logs,
            &[fault(FaultKind::Skew, 50, 6_000)],
            registers(1, 2000),
        );
        assert_fails_with(&verdict, "not paused");
    }

    #[test]
    fn a_late_write_taken_over_a_later_token_fails_with_clocks_beyond_the_bound() {
        let (logs, faults) = skewed_history(2_000, Some(1_000), 1000);
        let verdict = check(&logs, &faults, registers(1, 1000));
        assert_fails_with(&verdict, "overwrote the write of token 2000");
    }

    #[test]
    fn a_plain_register_set_back_is_excused_only_by_a_node_clock() {
        // Two acknowledged increments, the register at 1: the second write, coordinated
        // by a node whose clock lagged, lost to the first.
        let logs = vec![holding(100, 1000, 0), holding(300, 3000, 1)];
        let set_back = FinalRegisters {
            plain: 1,
            fenced: 2,
            fenced_writetime: 3000,
        };
        let verdict = check(&logs, &[fault(FaultKind::NodeSkew, 50, 400)], set_back);
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert!(verdict.plain_set_back_by_node_clocks);
        assert!(!verdict.plain_set_back_beyond_assumptions);
        // With a failed attempt too, both explanations are reported.
        let mut retried = logs.clone();
        if let Event::Wrote {
            failed_attempts, ..
        } = &mut retried[0][2]
        {
            *failed_attempts = 1;
        }
        let verdict = check(&retried, &[fault(FaultKind::NodeSkew, 50, 400)], set_back);
        assert!(verdict.passed(), "{:?}", verdict.failures);
        assert!(verdict.plain_set_back_by_node_clocks && verdict.plain_set_back_beyond_assumptions);
        // The workers' clocks do not stamp plain writes: no excuse.
        let verdict = check(&logs, &[fault(FaultKind::Skew, 50, 400)], set_back);
        assert_fails_with(&verdict, "plain register ends at 1 after 2");
        // Nor may a node's clock raise the register above the increments written.
        let too_high = FinalRegisters {
            plain: 3,
            ..set_back
        };
        let verdict = check(&logs, &[fault(FaultKind::NodeSkew, 50, 400)], too_high);
        assert_fails_with(&verdict, "plain register ends at 3");
    }

    #[test]
    fn a_clock_skews_offset_drifts_from_its_start() {
        let skew = ClockSkew {
            offset_us: -300_000,
            drift_ppm: 10_000,
        };
        assert_eq!(skew.offset_after(0), -300_000);
        assert_eq!(skew.offset_after(20_000_000), -100_000);
    }
}
