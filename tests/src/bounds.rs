//! The bounds a run must respect, their derivations, and the checks of both regimes.
//!
//! All times are true (simulated) time. The lock configuration is [`sim::lock_config`]:
//! `lease_ttl` T = 10 s, `max_clock_skew` 1 s, effective lease E = 8 s, `request_timeout`
//! 2 s, `storage_retries` 3, `storage_retry_window` W = 10 s, `retry_backoff` 10 ms,
//! `poll.max_interval` P = 250 ms.
//!
//! # Regime (a): within the assumptions
//!
//! The generators keep every replica clock within ±0.4 s of true time with at most
//! ±100 ppm drift, so two replicas disagree by less than `max_clock_skew` for the whole run;
//! client clocks may be off by ±0.5 s with ±200 ppm drift, so two of them disagree by less
//! than `max_clock_skew` too (they order the queue, they do not decide expiry); the
//! applications stop working when `lost()` fires. Under these assumptions:
//!
//! * **Mutual exclusion**: no two critical sections `[grant, leave)` overlap
//!   ([`history::overlaps`]), and at every grant no other guard still inside claims
//!   `is_held()` ([`history::untruthful_grants`]).
//! * **Fencing**: tokens strictly increase in grant order
//!   ([`history::token_order_violations`]) and the fenced resource never accepts a write
//!   from an earlier holder after a later holder's write ([`history::stale_writes_accepted`]).
//! * **Progress**: the run finishes, and every contender that did not crash completed all
//!   its acquisitions.
//! * **No hidden failures**: without faults no `lock()` call fails; with faults every call
//!   that fails does so with a storage error (`StorageUnavailable` or
//!   `StorageOutcomeUnknown`), which the application retries, never another kind.
//! * **Cleanup**: in a run without faults, once every contender finished and released and
//!   no message is in flight, no replica holds a live queue or main cell of the lock; in
//!   every run, none does a lease TTL (plus clock margins) later.
//! * **Global time**: with the time service, no replica's `GlobalTime` value ever
//!   decreases ([`history::global_time_regressions`]).
//!
//! ## Hand-off H
//!
//! From the moment a holder's application leaves until the next waiter is granted, when no
//! fault disturbs it: the release deletes the main and queue cells (one round trip, both in
//! parallel); the waiter first in line polls the queue at most P after its previous poll
//! (the first in line doubles its pause up to a quarter of its hand-off estimate, never
//! above P; waiters further back never pause above P); then it reads the queue, writes and
//! reads the main row, reads and writes the fence (five requests; reads include their
//! blocking read repair). A main-row conflict (the old holder's main-cell delete not yet
//! applied) costs a delete, a pause of 1–2 ms and another try. With ρ the longest round trip
//! of a request sent outside every disturbed window (measured from the gates' logs):
//!
//! `H = P + 12 ρ + 50 ms` (the 50 ms cover Tokio's millisecond timer on each of the pauses).
//!
//! ## Recovery tail R
//!
//! After a fault ends, what it left behind clears within: the cells of a holder that lost
//! its lease (or crashed, or could not delete them) expire at most T after its last
//! successful write, and a call stuck in retries gives up once W has passed since its
//! first failure: that failure's request timeout, W, a back-off of at most P and the last
//! request's timeout (more than `storage_retries + 1` request timeouts plus their
//! back-offs), after which the application retries after [`sim::RETRY_PAUSE`]:
//!
//! `R = T + (2 s + W + P + 2 s) + 100 ms + 2 P + H`.
//!
//! A fault striking at `a` for `d` disturbs `[a, a + d + R]` (a crash: `[a, a + R]`); the
//! disturbed time is the union ([`disturbed_windows`]).
//!
//! ## Acquisition time
//!
//! Let W ask at `r` and be granted at `g`, let `G` be the number of other acquisitions
//! granted in `(r, g)` and `C` the longest critical section of the schedule. Between `r`
//! and `g` the lock is held by at most `G + 1` owners (the `G`, and the one holding at `r`),
//! each for at most `C`; it is idle between two holders (and before W's grant) for at most
//! H unless a disturbed window covers the gap. Hence
//!
//! `g − r ≤ (G + 1) C + (G + 2) H + |[r, g] ∩ disturbed|`,
//!
//! and with the bypass bound below, `G ≤ K + (number of W's failed calls' bypassers)`,
//! which gives an a-priori bound; the check uses the measured `G`, which is tighter.
//!
//! ## Bypass
//!
//! The bypass of W is the number of other contenders' acquisitions granted between W's
//! enqueue `t_W` and its grant. `t_W` is the start of its successful call, unless that call
//! enqueued again: a queue cell whose first write is acknowledged more than
//! `request_timeout` after the time in its name could sort further behind other waiters'
//! queue floors than their reads look back, so lock-core deletes it and writes a new one
//! named with the time then (`Acquire`, on tombstones), and `t_W` is that moment. The queue
//! cell below is the one W is granted with. An acquisition X that
//! enqueued at `t_X ≤ t_W` was already waiting: at most one per other contender. One that
//! enqueued later can only be granted first if its queue column sorts before W's, or if W's
//! queue cell was not yet visible when X looked:
//!
//! * Columns start with the wall-clock timestamp of the call, so X sorts first only if
//!   `clock_X(t_X) ≤ clock_W(t_W)`. With offsets `o` and drifts `δ` that means
//!   `t_X − t_W ≤ D(W, X) = o_W − o_X + max(δ_W, 0) t_W − min(δ_X, 0) t_X`.
//!   With the time service every clock is at least its own local clock and at most the
//!   fastest local clock; once `GlobalTime` is fresh (no disturbance so far and past a
//!   warm-up), every clock is within `L = update_every + refresh_every + 4 ρ + 2 ms` (plus
//!   drift) of the fastest, so `D ≤ L` whatever the offsets.
//! * W's cell is visible to every quorum read from the moment its first write was
//!   acknowledged, `v_W` (measured), until it could expire, which it cannot while its
//!   successive successful writes are less than E apart (acquisitions where they are not
//!   are exempt from this check, and counted). Reads that start at a queue floor see it
//!   too: a floor that could hide it is the time in the name of a cell seen before `v_W`,
//!   so it is later than the time in W's name by at most `v_W − t_W` (at most
//!   `request_timeout`: lock-core enqueues again otherwise) plus how far that cell's clock
//!   ran ahead of W's (under `max_clock_skew`), and reads start
//!   `2 × max_clock_skew + request_timeout` before it. (Client clocks further apart than
//!   the margin allows could hide a cell whose write was slow but in time: two clocks
//!   3 s apart and a 1.9 s write do. That is outside what lock-core asks of clocks, and
//!   outside this regime.)
//!
//! So every later bypasser X satisfies `t_X ≤ max(t_W + D(W, X), v_W)`: this is checked
//! pair by pair. Contender j enqueues at most once per `c_j` (its shortest critical section
//! plus its think time), so
//!
//! `K(W) ≤ (N − 1) + Σ_{j ≠ W} (1 + ⌊max(D(W, j), v_W − t_W) / c_j⌋)`,
//!
//! which is `2 (N − 1)` when clocks agree and requests are faster than critical sections,
//! and grows with the clock offsets otherwise: a contender whose clock runs behind jumps
//! ahead of everyone who enqueued less than its lag earlier, once per critical section it
//! completes in that time. The time service caps the lag at `L`.
//!
//! # Regime (b): beyond the assumptions
//!
//! * **A holder paused past its lease** ([`check_paused_victim`]): the checker must find
//!   overlapping critical sections, all of them the victim's with a later holder; for each,
//!   the victim's `lost()` must have fired, and its `is_held()` must have been false, before
//!   the later holder's grant; tokens still increase in grant order and the fenced resource
//!   refuses the victim's writes once its successor has written.
//! * **Replica clocks beyond the TTL** ([`skew_report`]): cells are born dead on the
//!   replicas whose clocks run ahead; a quorum read that meets only those replicas misses
//!   the holder's cells, so a second owner can be granted while the first one's renewals
//!   and read-backs still succeed through the other replica. The library cannot promise
//!   exclusion or even notice; fencing tokens still make the resource refuse one of the
//!   two holders once the other has written, as long as their tokens differ.
//!
//! [`sim::lock_config`]: crate::sim::lock_config
//! [`sim::RETRY_PAUSE`]: crate::sim::RETRY_PAUSE
//! [`history::overlaps`]: crate::history::overlaps
//! [`history::untruthful_grants`]: crate::history::untruthful_grants
//! [`history::token_order_violations`]: crate::history::token_order_violations
//! [`history::stale_writes_accepted`]: crate::history::stale_writes_accepted
//! [`history::global_time_regressions`]: crate::history::global_time_regressions

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::history::{
    Acquisition, bypassers, global_time_regressions, overlaps, stale_writes_accepted,
    token_order_violations, untruthful_grants,
};
use crate::sim::{
    FaultKind, LockErrors, RETRY_PAUSE, Run, Schedule, lock_config, time_service_config,
};

/// The hand-off bound `H` for a run whose undisturbed round trips took at most `round_trip`.
pub fn handoff(round_trip: Duration) -> Duration {
    lock_config().poll.max_interval + round_trip * 12 + Duration::from_millis(50)
}

/// The recovery tail `R` after a fault ends.
pub fn recovery_tail(round_trip: Duration) -> Duration {
    let config = lock_config();
    let backoffs: Duration = (0..config.storage_retries)
        .map(|retry| {
            (config.retry_backoff * 2u32.saturating_pow(retry)).min(config.poll.max_interval)
        })
        .sum();
    let by_count = config.request_timeout * (config.storage_retries + 1) + backoffs;
    let by_window =
        config.request_timeout * 2 + config.storage_retry_window + config.poll.max_interval;
    config.lease_ttl
        + by_count.max(by_window)
        + RETRY_PAUSE
        + config.poll.max_interval * 2
        + handoff(round_trip)
}

/// The disturbed windows of a schedule, merged and sorted: each fault's span plus the
/// recovery tail (computed with a generous 50 ms round trip, as the windows are needed
/// before the run's round trips are known).
pub fn disturbed_windows(schedule: &Schedule) -> Vec<(Duration, Duration)> {
    let tail = recovery_tail(Duration::from_millis(50));
    let mut windows: Vec<(Duration, Duration)> = schedule
        .faults
        .iter()
        .map(|fault| match fault.kind {
            FaultKind::Crash(_) => (fault.at, fault.at + tail),
            _ => (fault.at, fault.at + fault.duration + tail),
        })
        .collect();
    windows.sort();
    let mut merged: Vec<(Duration, Duration)> = Vec::new();
    for (from, to) in windows {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    merged
}

/// How much of `[from, to]` the windows cover.
pub fn covered(windows: &[(Duration, Duration)], from: Duration, to: Duration) -> Duration {
    windows
        .iter()
        .map(|&(start, end)| end.min(to).saturating_sub(start.max(from)))
        .sum()
}

fn micros(duration: Duration) -> i128 {
    i128::try_from(duration.as_micros()).unwrap_or(i128::MAX)
}

/// `D(W, X)` in microseconds: how much later than W a contender X may enqueue and still
/// sort before it.
fn clock_lead(schedule: &Schedule, waiter: &Acquisition, other: &Acquisition) -> i128 {
    let clock = |index: usize| schedule.contenders[index].clock;
    let (w, x) = (clock(waiter.contender), clock(other.contender));
    let (t_w, t_x) = (micros(waiter.enqueued), micros(other.enqueued));
    let drift = |ppm: i32, at: i128| i128::from(ppm) * at / 1_000_000;
    let local = i128::from(w.offset_micros) - i128::from(x.offset_micros)
        + drift(w.drift_ppm.max(0), t_w)
        - drift(x.drift_ppm.min(0), t_x)
        + 2;
    if !schedule.time_service {
        return local;
    }
    // With the time service, W's clock is at most the fastest local clock.
    let fastest = schedule
        .contenders
        .iter()
        .map(|plan| {
            i128::from(plan.clock.offset_micros)
                + drift(
                    plan.clock
                        .drift_ppm
                        .unsigned_abs()
                        .try_into()
                        .unwrap_or(i32::MAX),
                    t_w,
                )
        })
        .max()
        .unwrap_or_default();
    fastest - i128::from(x.offset_micros) - drift(x.drift_ppm.min(0), t_x) + 2
}

/// `L`: how far behind the fastest clock a time-service clock may be once `GlobalTime` is
/// fresh, in microseconds.
fn time_service_lag(schedule: &Schedule, round_trip: Duration, at: Duration) -> i128 {
    let service = time_service_config();
    let worst_drift = schedule
        .contenders
        .iter()
        .map(|plan| i128::from(plan.clock.drift_ppm.unsigned_abs()))
        .max()
        .unwrap_or_default();
    micros(service.update_every + service.refresh_every + round_trip * 4 + Duration::from_millis(2))
        + 2 * worst_drift * micros(at) / 1_000_000
}

/// What the checks of one regime-(a) run measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Acquisitions granted.
    pub granted: usize,
    /// The largest bypass.
    pub max_bypass: usize,
    /// The largest bypass bound `K(W)` among the acquisitions checked.
    pub max_bypass_bound: usize,
    /// Acquisitions exempt from the bypass check (their queue cell may have expired).
    pub bypass_exempt: usize,
    /// The longest acquisition (from first ask to grant).
    pub max_wait: Duration,
    /// The largest ratio of an acquisition's time to its bound, in percent.
    pub max_wait_percent: u64,
    /// `lock()` calls that failed and were retried, by kind.
    pub lock_errors: LockErrors,
    /// Whether the schedule had faults.
    pub faulty: bool,
    /// Contenders in the schedule.
    pub contenders: usize,
    /// Whether there were more contenders than one queue read returns.
    pub beyond_read_limit: bool,
    /// `GlobalTime` changes sampled (and found in order).
    pub global_time_changes: usize,
}

/// Checks a regime-(a) run: exclusion, truthful leases, fencing, progress, the acquisition
/// time bound and the bypass bound. `Err` says what broke, with the evidence.
pub fn check_within_assumptions(schedule: &Schedule, run: &Run) -> Result<Checked, String> {
    let acquisitions = &run.acquisitions;
    let fail = |what: String| Err(format!("{what}\nhistory: {acquisitions:#?}"));
    if run.finished_at.is_none() {
        return fail(format!(
            "the run did not finish within {:?}",
            crate::sim::RUN_LIMIT
        ));
    }
    let found = overlaps(acquisitions);
    if !found.is_empty() {
        return fail(format!("critical sections overlap: {found:?}"));
    }
    let untruthful = untruthful_grants(acquisitions);
    if !untruthful.is_empty() {
        return fail(format!(
            "(holder, newcomer) pairs where the holder still claimed the lease at the newcomer's grant: {untruthful:?}"
        ));
    }
    if let Some(broken) = fencing_broken(run) {
        return fail(broken);
    }
    for (index, plan) in schedule.contenders.iter().enumerate() {
        let mine: Vec<&Acquisition> = acquisitions
            .iter()
            .filter(|acquisition| acquisition.contender == index)
            .collect();
        let crashed = mine.iter().any(|acquisition| acquisition.crashed)
            || schedule
                .faults
                .iter()
                .any(|fault| matches!(fault.kind, FaultKind::Crash(c) if c % schedule.contenders.len() == index));
        let done = mine
            .iter()
            .filter(|acquisition| acquisition.left.is_some())
            .count();
        if !crashed && done != plan.sections.len() {
            return fail(format!(
                "contender {index} completed {done} of {} acquisitions",
                plan.sections.len()
            ));
        }
    }
    if let Some(broken) = hidden_failures(schedule, run) {
        return fail(broken);
    }
    if let Some(broken) = cleanup_broken(schedule, run) {
        return fail(broken);
    }
    let regressions = global_time_regressions(&run.global_time);
    if !regressions.is_empty() {
        return fail(format!(
            "GlobalTime went backwards, (replica, (time, value) before, (time, value) after): {regressions:?}"
        ));
    }
    let windows = disturbed_windows(schedule);
    let round_trip = run.max_round_trip;
    let h = handoff(round_trip);
    let longest = schedule
        .contenders
        .iter()
        .flat_map(|plan| plan.sections.iter().copied())
        .max()
        .unwrap_or_default();
    let mut checked = Checked {
        lock_errors: run.lock_errors.clone(),
        faulty: !schedule.faults.is_empty(),
        contenders: schedule.contenders.len(),
        beyond_read_limit: schedule.contenders.len()
            > usize::try_from(schedule.queue_read_limit).unwrap_or(usize::MAX),
        global_time_changes: run.global_time.len(),
        ..Checked::default()
    };
    for waiter in acquisitions {
        let Some(granted) = waiter.granted else {
            continue;
        };
        checked.granted += 1;
        let others = acquisitions
            .iter()
            .filter(|other| other.id != waiter.id)
            .filter(|other| {
                other
                    .granted
                    .is_some_and(|at| waiter.requested < at && at < granted)
            })
            .count();
        let others = u32::try_from(others).unwrap_or(u32::MAX);
        let wait = granted - waiter.requested;
        let bound = longest * (others + 1)
            + h * (others + 2)
            + covered(&windows, waiter.requested, granted);
        if wait > bound {
            return fail(format!(
                "acquisition {} waited {wait:?}, above its bound {bound:?} ({others} grants in between, \
                 longest section {longest:?}, hand-off {h:?})",
                waiter.id
            ));
        }
        checked.max_wait = checked.max_wait.max(wait);
        let percent =
            u64::try_from(wait.as_micros() * 100 / bound.as_micros().max(1)).unwrap_or(u64::MAX);
        checked.max_wait_percent = checked.max_wait_percent.max(percent);
    }
    let all_bypassers = bypassers(acquisitions);
    for (&waiter_id, passed) in &all_bypassers {
        let waiter = &acquisitions[waiter_id];
        checked.max_bypass = checked.max_bypass.max(passed.len());
        if waiter.queue_gap {
            checked.bypass_exempt += 1;
            continue;
        }
        let visible = waiter.queue_visible.unwrap_or(waiter.enqueued);
        let fresh_service = schedule.time_service
            && covered(&windows, Duration::ZERO, waiter.enqueued).is_zero()
            && waiter.enqueued
                >= time_service_config().update_every * 2 + time_service_config().refresh_every;
        let lead = |other: &Acquisition| {
            let lead = clock_lead(schedule, waiter, other);
            if fresh_service && covered(&windows, Duration::ZERO, other.enqueued).is_zero() {
                lead.min(time_service_lag(schedule, round_trip, other.enqueued))
            } else {
                lead
            }
        };
        let mut earlier = BTreeMap::new();
        for &other_id in passed {
            let other = &acquisitions[other_id];
            if other.enqueued <= waiter.enqueued {
                *earlier.entry(other.contender).or_insert(0usize) += 1;
                continue;
            }
            let late = micros(other.enqueued) - micros(waiter.enqueued);
            if late > lead(other) && other.enqueued > visible {
                return fail(format!(
                    "acquisition {other_id} enqueued {late} µs after acquisition {waiter_id} (allowed: \
                     {} µs by the clocks, or before its queue cell was visible at {visible:?}) and was \
                     granted first",
                    lead(other)
                ));
            }
        }
        if let Some((contender, count)) = earlier.iter().find(|(_, count)| **count > 1) {
            return fail(format!(
                "contender {contender} passed acquisition {waiter_id} {count} times with calls started before it"
            ));
        }
        let contenders = schedule.contenders.len();
        let window = |index: usize| {
            // A later arrival of contender `index`, far enough out that its drift term is
            // not underestimated.
            let probe = Acquisition {
                contender: index,
                enqueued: waiter.enqueued + Duration::from_secs(60),
                ..Acquisition::default()
            };
            lead(&probe)
                .max(micros(visible.saturating_sub(waiter.enqueued)))
                .max(0)
        };
        let bound = (contenders - 1)
            + (0..contenders)
                .filter(|&index| index != waiter.contender)
                .map(|index| {
                    let plan = &schedule.contenders[index];
                    let cycle = micros(
                        plan.sections.iter().copied().min().unwrap_or_default() + plan.think,
                    )
                    .max(1);
                    usize::try_from(1 + window(index) / cycle).unwrap_or(usize::MAX)
                })
                .sum::<usize>();
        checked.max_bypass_bound = checked.max_bypass_bound.max(bound);
        if passed.len() > bound {
            return fail(format!(
                "acquisition {waiter_id} was bypassed {} times, above its bound {bound}",
                passed.len()
            ));
        }
    }
    Ok(checked)
}

/// What is wrong with the `lock()` calls that failed: any at all without faults, or any
/// that failed with something other than a storage error.
pub fn hidden_failures(schedule: &Schedule, run: &Run) -> Option<String> {
    let errors = &run.lock_errors;
    if schedule.faults.is_empty() && errors.total() > 0 {
        return Some(format!(
            "{} lock() calls failed in a run without faults: {errors:?}",
            errors.total()
        ));
    }
    (!errors.other.is_empty()).then(|| {
        format!(
            "lock() calls failed with errors other than StorageUnavailable or \
             StorageOutcomeUnknown: {:?}",
            errors.other
        )
    })
}

/// What a run left behind: live queue or main cells at quiescence (judged only without
/// faults: a fault may keep a release's deletes from landing, and the cells then expire),
/// or a lease TTL later (judged always).
pub fn cleanup_broken(schedule: &Schedule, run: &Run) -> Option<String> {
    if schedule.faults.is_empty() && !run.live_at_quiescence.is_empty() {
        return Some(format!(
            "cells left live once every contender had finished and released, as (replica, row, \
             column): {:?}",
            run.live_at_quiescence
        ));
    }
    (!run.live_after_ttl.is_empty()).then(|| {
        format!(
            "cells still live a lease TTL after every contender finished, as (replica, row, \
             column): {:?}",
            run.live_after_ttl
        )
    })
}

/// What is wrong with the fencing of a run: tokens out of grant order, or stale writes the
/// resource accepted.
fn fencing_broken(run: &Run) -> Option<String> {
    let tokens = token_order_violations(&run.acquisitions);
    if !tokens.is_empty() {
        return Some(format!("fencing tokens out of grant order: {tokens:?}"));
    }
    let stale = stale_writes_accepted(&run.writes, &run.acquisitions);
    (!stale.is_empty()).then(|| format!("the resource accepted stale writes: {stale:?}"))
}

/// Totals over many regime-(a) runs, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Runs checked.
    pub runs: usize,
    /// Runs with faults.
    pub faulty_runs: usize,
    /// Acquisitions granted.
    pub granted: usize,
    /// The largest bypass seen.
    pub max_bypass: usize,
    /// The largest bypass bound.
    pub max_bypass_bound: usize,
    /// Acquisitions exempt from the bypass check.
    pub bypass_exempt: usize,
    /// The longest acquisition.
    pub max_wait: Duration,
    /// The closest an acquisition came to its time bound, in percent.
    pub max_wait_percent: u64,
    /// Failed `lock()` calls (retried), by kind.
    pub lock_errors: LockErrors,
    /// The most contenders in one run.
    pub max_contenders: usize,
    /// Runs with more contenders than their queue read limit.
    pub beyond_read_limit: usize,
    /// Runs without faults, whose cells were checked at quiescence.
    pub quiescent_checked: usize,
    /// `GlobalTime` changes sampled.
    pub global_time_changes: usize,
}

impl Summary {
    /// Adds one run.
    pub fn add(&mut self, checked: &Checked) {
        self.runs += 1;
        self.faulty_runs += usize::from(checked.faulty);
        self.granted += checked.granted;
        self.max_bypass = self.max_bypass.max(checked.max_bypass);
        self.max_bypass_bound = self.max_bypass_bound.max(checked.max_bypass_bound);
        self.bypass_exempt += checked.bypass_exempt;
        self.max_wait = self.max_wait.max(checked.max_wait);
        self.max_wait_percent = self.max_wait_percent.max(checked.max_wait_percent);
        self.lock_errors.add(&checked.lock_errors);
        self.max_contenders = self.max_contenders.max(checked.contenders);
        self.beyond_read_limit += usize::from(checked.beyond_read_limit);
        self.quiescent_checked += usize::from(!checked.faulty);
        self.global_time_changes += checked.global_time_changes;
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} runs ({} with faults), {} acquisitions, 0 violations; max bypass {} (largest bound {}), \
             {} exempt from the bypass check; longest acquisition {:?} ({}% of its bound); \
             up to {} contenders, {} runs with more than their queue read limit; \
             {} failed lock() calls retried ({} StorageUnavailable, {} StorageOutcomeUnknown, \
             {} other), none without faults; no live cell left at quiescence ({} runs without \
             faults) nor a TTL later (all runs); {} GlobalTime changes sampled, none backwards",
            self.runs,
            self.faulty_runs,
            self.granted,
            self.max_bypass,
            self.max_bypass_bound,
            self.bypass_exempt,
            self.max_wait,
            self.max_wait_percent,
            self.max_contenders,
            self.beyond_read_limit,
            self.lock_errors.total(),
            self.lock_errors.unavailable,
            self.lock_errors.outcome_unknown,
            self.lock_errors.other.len(),
            self.quiescent_checked,
            self.global_time_changes,
        )
    }
}

/// What a regime-(b) pause run showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VictimReport {
    /// Overlaps the checker found.
    pub overlaps: usize,
    /// The shortest time between the victim's `lost()` and the next holder's grant.
    pub min_warning: Duration,
    /// Victim writes the resource refused.
    pub refused: usize,
}

/// Checks a run with a holder paused past its lease: the checker finds the overlap, and the
/// library told the truth before it began.
pub fn check_paused_victim(run: &Run) -> Result<VictimReport, String> {
    let acquisitions = &run.acquisitions;
    let fail = |what: String| {
        Err(format!(
            "{what}\nhistory: {acquisitions:#?}\nwrites: {:?}",
            run.writes
        ))
    };
    if run.finished_at.is_none() {
        return fail("the run did not finish".into());
    }
    let Some(victim) = acquisitions
        .iter()
        .find(|acquisition| !acquisition.honours_lost)
    else {
        return fail("no victim".into());
    };
    let found = overlaps(acquisitions);
    if found.is_empty() {
        return fail(
            "the checker found no overlap although the victim worked past its lease".into(),
        );
    }
    let mut report = VictimReport {
        overlaps: found.len(),
        min_warning: Duration::MAX,
        ..VictimReport::default()
    };
    for overlap in &found {
        if overlap.first != victim.id {
            return fail(format!("an overlap without the victim: {overlap:?}"));
        }
        let Some(lost_at) = victim.lost_at else {
            return fail(format!("the victim's lost() never fired, yet {overlap:?}"));
        };
        if lost_at > overlap.from {
            return fail(format!(
                "the victim's lost() fired at {lost_at:?}, after the next holder's grant at {:?}",
                overlap.from
            ));
        }
        report.min_warning = report.min_warning.min(overlap.from - lost_at);
        let claim = acquisitions[overlap.second]
            .inside_at_grant
            .iter()
            .find(|(id, _)| *id == victim.id);
        if claim != Some(&(victim.id, false)) {
            return fail(format!(
                "at acquisition {}'s grant the victim's guard said {claim:?} (want not held)",
                overlap.second
            ));
        }
    }
    if let Some(broken) = fencing_broken(run) {
        return fail(broken);
    }
    report.refused = run
        .writes
        .iter()
        .filter(|write| write.acquisition == victim.id && !write.accepted)
        .count();
    if report.refused == 0 {
        return fail(
            "the resource never refused the victim, who kept writing past its successor".into(),
        );
    }
    Ok(report)
}

/// What a run with replica clocks beyond the TTL showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkewReport {
    /// Overlapping critical sections the checker found.
    pub overlaps: usize,
    /// Of those, how many began while the earlier holder's guard still claimed the lease
    /// (the library could not know).
    pub unnoticed: usize,
    /// Pairs of consecutive grants whose tokens were out of order.
    pub token_inversions: usize,
    /// Writes the resource accepted from an earlier holder after a later holder's write.
    pub stale_accepted: usize,
    /// Writes the resource refused.
    pub refused: usize,
    /// Overlaps in which the two holders' tokens were equal (fencing cannot separate them).
    pub equal_tokens: usize,
}

/// Describes a run with replica clocks beyond the TTL.
pub fn skew_report(run: &Run) -> SkewReport {
    let acquisitions = &run.acquisitions;
    let found = overlaps(acquisitions);
    let untruthful = untruthful_grants(acquisitions);
    SkewReport {
        overlaps: found.len(),
        unnoticed: found
            .iter()
            .filter(|overlap| untruthful.contains(&(overlap.first, overlap.second)))
            .count(),
        token_inversions: token_order_violations(acquisitions).len(),
        stale_accepted: stale_writes_accepted(&run.writes, acquisitions).len(),
        refused: run.writes.iter().filter(|write| !write.accepted).count(),
        equal_tokens: found
            .iter()
            .filter(|overlap| {
                acquisitions[overlap.first].token == acquisitions[overlap.second].token
            })
            .count(),
    }
}

/// Whether the resource ever accepted writes of two overlapping holders interleaved (A, B,
/// A): with distinct tokens the fencing rule forbids it.
pub fn interleaved_overlaps(run: &Run) -> Vec<(usize, usize)> {
    let acquisitions = &run.acquisitions;
    overlaps(acquisitions)
        .into_iter()
        .filter(|overlap| {
            let accepted: Vec<usize> = run
                .writes
                .iter()
                .filter(|write| write.accepted)
                .filter(|write| {
                    write.acquisition == overlap.first || write.acquisition == overlap.second
                })
                .map(|write| write.acquisition)
                .collect();
            accepted
                .windows(2)
                .filter(|pair| pair[0] != pair[1])
                .count()
                > 1
        })
        .map(|overlap| (overlap.first, overlap.second))
        .collect()
}
