//! The history of a run and its checker: a pure function of the workers' logs,
//! the nemesis's log and the registers' final state.
//!
//! Every time is microseconds of `CLOCK_MONOTONIC`, which Linux keeps for the whole machine,
//! so the logs of separate processes on one machine share one time line.

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
}

/// A fault's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A node killed with SIGKILL, then restarted on its data.
    Kill,
    /// A node frozen with SIGSTOP past the request timeout, then SIGCONT.
    Freeze,
    /// A worker process stopped with SIGSTOP past its lease, then SIGCONT.
    Pause,
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
    /// The highest token of a fenced write acknowledged before it was sent, if above its own.
    pub superseded_by: Option<u64>,
    /// The write timestamp the worker read back after it.
    pub read_back_writetime: Option<i64>,
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
    /// Overlaps where the earlier holder was not paused: within the assumptions, none may
    /// exist.
    pub overlaps_within: Vec<Overlap>,
    /// Overlaps where the earlier holder was paused past its lease.
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
    let mut verdict = Verdict {
        registers,
        ..Verdict::default()
    };
    let pauses: Vec<&Fault> = faults
        .iter()
        .filter(|fault| fault.kind == FaultKind::Pause)
        .collect();
    let mut holdings = Vec::new();
    // (token, sent, acked) of every fenced write, and the late ones with their read-backs.
    let mut fenced_acks: Vec<(u64, u64)> = Vec::new();
    let mut late: Vec<LateWrite> = Vec::new();
    for (worker, events) in logs.iter().enumerate() {
        let mut open: Option<Holding> = None;
        let mut pending_late: Option<usize> = None;
        for event in events {
            match event {
                Event::Acquired {
                    at,
                    token,
                    deadline,
                } => {
                    verdict.acquisitions += 1;
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
                Event::Skipped { .. } => verdict.plain_skipped += 1,
                Event::Start { .. }
                | Event::Read { deadline: None, .. }
                | Event::Error { .. }
                | Event::Stop { .. } => {}
            }
        }
        holdings.extend(open);
    }
    for holding in &mut holdings {
        holding.paused = pauses.iter().any(|pause| {
            pause.target == holding.worker && pause.from < holding.end && pause.to > holding.start
        });
    }
    verdict.paused_holdings = holdings.iter().filter(|holding| holding.paused).count() as u64;
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
            if earlier.paused {
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

    // The plain register.
    let plain = u64::try_from(registers.plain).unwrap_or(u64::MAX);
    let set_back_possible = verdict.plain_late > 0 || verdict.plain_failed_attempts > 0;
    let set_back = plain < verdict.plain_acked;
    verdict.plain_set_back_beyond_assumptions = set_back && set_back_possible;
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
            .filter(|(token, acked)| *token > write.token && *acked <= write.sent)
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
            },
            Event::Wrote {
                register: Register::Fenced,
                value: value + 1,
                sent: at + 4,
                acked: Some(at + 5),
                failed_attempts: 0,
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
            },
            Event::Wrote {
                register: Register::Fenced,
                value: 1,
                sent: 5_002,
                acked: Some(5_003),
                failed_attempts: 0,
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
}
