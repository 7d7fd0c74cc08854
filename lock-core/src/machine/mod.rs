//! The sans-IO state machines.
//!
//! Each machine is a plain value: no I/O, no async, no clock reads, no ambient randomness.
//! It is fed events that carry the time ([`Now`]) and drained of outputs:
//!
//! * [`Machine::poll_request`]: the next storage request to send;
//! * [`Machine::poll_timeout`]: when to call [`Machine::handle_timeout`] next;
//! * [`Machine::poll_outcome`]: the final result, once.
//!
//! # The loop contract
//!
//! A driver (the async `Locker` of the `fair-lock` crate, a test, or the model checker)
//! runs a machine like this:
//!
//! 1. After creating the machine and after **every** `handle_*` call, call `poll_request`
//!    until it returns `None`, and send each request. Requests may be in flight together;
//!    their responses may come back in any order.
//! 2. Then call `poll_outcome`. Once it returns `Some`, the machine is finished: outstanding
//!    responses may be dropped and further events are ignored.
//! 3. Otherwise wait for whichever comes first: a response (give it to `handle_response` with
//!    its [`RequestId`]) or the instant returned by `poll_timeout` (call `handle_timeout`).
//!    `poll_timeout` returns `None` only while the machine is waiting for a response.
//!
//! Calling `handle_timeout` early is harmless (the machine compares `now` with its own
//! deadlines), and a response with an unknown or stale id is ignored. A driver must give
//! every request a timeout of its own (the locker uses `request_timeout`) and report it as
//! [`Error::StorageOutcomeUnknown`]; the machines never wait for a response forever.
//!
//! # Waiting policy
//!
//! Pauses are always chosen by the machine and always bounded by the configuration:
//! [`crate::PollConfig`] for queue polls, `retry_backoff` doubling for storage failures
//! (at most `storage_retries` in a row), `renew_every` for renewals. See each machine.

mod acquire;
mod any;
mod attempt;
mod bakery;
mod baseline;
mod fence;
mod global_time;
mod inspect;
mod lease;
#[cfg(test)]
mod machine_tests;
mod poll;
mod release;
mod retake;
mod seats;

pub use acquire::{Acquire, AcquireOutcome, AcquireStats, Holding, Mode, QueueExit};
pub use bakery::BakeryAcquire;
pub use baseline::BaselineAcquire;
pub use fence::FencingToken;
pub use global_time::{GlobalTimeFollower, GlobalTimeOutcome, UpdateGlobalTime};
pub use inspect::{CellReport, Inspect, LockReport, QueueEntry};
pub use lease::{Lease, LeaseStatus};
pub use release::Release;
pub use retake::{Retake, RetakeOutcome};

// The glue between acquisitions of one locker (seats, queue floors, poll hints, the
// algorithm chosen at run time): what a driver and the model checker need, public but
// hidden from the documentation, without any promise of stability. No setting or feature
// changes what is public.
#[doc(hidden)]
pub use acquire::{AcquireOptions, Seat};
#[doc(hidden)]
pub use any::AnyAcquire;
#[doc(hidden)]
pub use poll::PollHint;
#[doc(hidden)]
pub use seats::{IDLE_LOCKS_REMEMBERED, SeatBook, SeatEnding, SeatReturn, SeatUse, TakenSeat};

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use crate::column::ColumnName;
use crate::config::LockConfig;
use crate::error::Error;
use crate::hint::WakeHint;
use crate::storage::{RowKey, StorageRequest, StorageResponse};
use crate::time::{MonotonicTime, Now, Timestamp, duration_micros};

/// Names one request of one machine, so that its response can be matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(u64);

impl RequestId {
    /// A request id made up by a model checker for a request of its own (the machines
    /// number theirs from 0). Hidden: no stability promise.
    #[doc(hidden)]
    pub fn from_raw(raw: u64) -> Self {
        RequestId(raw)
    }
}

/// A request a machine wants sent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Outgoing {
    /// Give this back with the response.
    pub id: RequestId,
    /// What to do.
    pub request: StorageRequest,
}

/// The interface every machine in this module offers; see the module docs for the loop
/// contract.
pub trait Machine {
    /// What the machine finally produces.
    type Outcome;

    /// A response (or failure) to a request this machine sent.
    fn handle_response(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    );

    /// Time has passed; act on any deadline that is due.
    fn handle_timeout(&mut self, now: Now);

    /// The next request to send, if any.
    fn poll_request(&mut self) -> Option<Outgoing>;

    /// When `handle_timeout` should be called next, if the machine is waiting for time.
    fn poll_timeout(&self) -> Option<MonotonicTime>;

    /// The final outcome, returned once.
    fn poll_outcome(&mut self) -> Option<Self::Outcome>;

    /// A wake-up hint for this machine arrived ([`crate::hint`]): the lock moved, and a
    /// waiter may send its next read now. It only ever brings a read forward, so a driver
    /// may call it at any time, as often as hints come. Machines that do not wait for a
    /// lock ignore it.
    fn handle_wake_hint(&mut self, now: Now) {
        let _ = now;
    }

    /// The next wake-up hint this machine wants sent, with its listener's address, if any
    /// ([`crate::hint::HintKind::Wanted`]: an acquisition next in line asks the owner first
    /// in the queue not to linger). A driver without a hint transport may drop them; a
    /// hint that is never sent costs time, not safety. Machines that send none return
    /// `None`.
    fn poll_wake_hint(&mut self) -> Option<(SocketAddr, WakeHint)> {
        None
    }
}

/// A cell an owner wrote and may have to renew or delete.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeldCell {
    /// Its row.
    pub row: RowKey,
    /// Its column.
    pub column: ColumnName,
    /// Its value (rewritten unchanged on renewal).
    pub value: Vec<u8>,
    /// When the last write of it that storage acknowledged was *sent*.
    pub written_at: MonotonicTime,
}

/// Request ids and the outbox of requests not yet polled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Io {
    next_id: u64,
    outbox: VecDeque<Outgoing>,
    sent: u32,
}

impl Io {
    pub(crate) fn send(&mut self, request: StorageRequest) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.sent = self.sent.saturating_add(1);
        self.outbox.push_back(Outgoing { id, request });
        id
    }

    /// True when no request waits to be sent.
    pub(crate) fn is_empty(&self) -> bool {
        self.outbox.is_empty()
    }

    pub(crate) fn poll(&mut self) -> Option<Outgoing> {
        self.outbox.pop_front()
    }

    /// How many requests this machine has issued.
    pub(crate) fn sent(&self) -> u32 {
        self.sent
    }
}

/// Hands out write timestamps that strictly increase, so that an owner's later write or
/// delete of a cell always beats its earlier ones under last-write-wins, even when the
/// clock has not moved on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Stamps {
    last: Option<Timestamp>,
}

impl Stamps {
    pub(crate) fn after(last: Timestamp) -> Self {
        Stamps { last: Some(last) }
    }

    pub(crate) fn next(&mut self, now: Timestamp) -> Timestamp {
        let stamp = match self.last {
            Some(last) if now <= last => last.next(),
            _ => now,
        };
        self.last = Some(stamp);
        stamp
    }

    pub(crate) fn last(&self) -> Timestamp {
        self.last.unwrap_or(Timestamp::ZERO)
    }
}

/// SplitMix64: a tiny seeded generator whose whole state is one `u64`, so machines that
/// hold it stay `Hash + Eq` for the model checker. Public for the driver (`fair-lock`),
/// which draws seeds and owner ids from it; not a stable API.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator that starts from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..bound` (0 when `bound` is 0).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// A uniform duration in `0..max`, at microsecond resolution.
    pub(crate) fn duration_below(&mut self, max: Duration) -> Duration {
        Duration::from_micros(self.below(duration_micros(max)))
    }

    /// `base` scaled by a uniform factor in `[1 - percent/100, 1 + percent/100]`.
    pub(crate) fn jitter(&mut self, base: Duration, percent: u32) -> Duration {
        let base = duration_micros(base);
        let spread = base / 100 * u64::from(percent);
        let low = base - spread;
        Duration::from_micros(low + self.below(spread.saturating_mul(2).saturating_add(1)))
    }
}

/// `base * 2^exponent`, saturating, and never above `cap`.
pub(crate) fn doubled(base: Duration, exponent: u32, cap: Duration) -> Duration {
    base.checked_mul(1u32.checked_shl(exponent.min(30)).unwrap_or(u32::MAX))
        .unwrap_or(cap)
        .min(cap)
}

/// Counts consecutive storage failures of one step and decides when to give up.
///
/// A failure that may pass ([`Error::is_retryable`]) is retried while fewer than
/// `storage_retries` failures have come in a row, and after that for as long as
/// `storage_retry_window` has not passed since the first of them: a node restart or a short
/// loss of quorum then costs the caller a wait, not an error. A final error ends at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Failures {
    /// Failures since the last success.
    in_a_row: u32,
    /// When the retry window of this run of failures ends; `None` with no failure yet or a
    /// zero window (which keeps the count alone, and the model's states as they were).
    window_ends: Option<MonotonicTime>,
}

impl Failures {
    /// Records a failure seen at `now`; returns the pause (at most `cap`) before the next
    /// attempt, or `None` when the error is final or the retry budget is spent. A window
    /// that opens with this failure ends at `window_cut` if that is sooner.
    pub(crate) fn record(
        &mut self,
        now: MonotonicTime,
        error: &Error,
        config: &LockConfig,
        cap: Duration,
        window_cut: Option<MonotonicTime>,
    ) -> Option<Duration> {
        if !error.is_retryable() {
            return None;
        }
        if self.in_a_row == 0 && !config.storage_retry_window.is_zero() {
            let ends = now + config.storage_retry_window;
            self.window_ends = Some(window_cut.map_or(ends, |cut| cut.min(ends)));
        }
        let within_window = self.window_ends.is_some_and(|ends| now < ends);
        if self.in_a_row >= config.storage_retries && !within_window {
            return None;
        }
        let pause = doubled(config.retry_backoff, self.in_a_row, cap);
        self.in_a_row = self.in_a_row.saturating_add(1);
        Some(pause)
    }

    pub(crate) fn reset(&mut self) {
        *self = Failures::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published SplitMix64 sequence for seed 1,234,567 (as produced by the reference
    /// implementation): poll jitter and baseline backoff are replayable from a seed only if
    /// the generator is exactly this one.
    #[test]
    fn split_mix_64_follows_the_reference_sequence() {
        let mut rng = SplitMix64::new(1_234_567);
        let drawn: Vec<u64> = (0..5).map(|_| rng.next_u64()).collect();
        assert_eq!(
            drawn,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423,
                4_593_380_528_125_082_431,
                16_408_922_859_458_223_821,
            ]
        );
    }

    /// `below(n)` scales the same sequence into `0..n` (the high 64 bits of `draw × n`),
    /// and gives 0 for the empty range.
    #[test]
    fn below_scales_the_sequence_into_the_range() {
        let mut rng = SplitMix64::new(1_234_567);
        let bounds = [10, 1_000, 1 << 40, u64::MAX];
        let drawn: Vec<u64> = bounds.iter().map(|bound| rng.below(*bound)).collect();
        assert_eq!(drawn, [3, 173, 585_168_119_203, 4_593_380_528_125_082_430]);
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.below(1), 0);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[usize::try_from(rng.below(6)).unwrap()] += 1;
        }
        for count in counts {
            assert!((9_000..=11_000).contains(&count), "not uniform: {counts:?}");
        }
    }

    #[test]
    fn stamps_strictly_increase_even_when_the_clock_stalls() {
        let mut stamps = Stamps::default();
        let t = Timestamp::from_micros(100);
        assert_eq!(stamps.next(t), t);
        assert_eq!(stamps.next(t), Timestamp::from_micros(101));
        assert_eq!(
            stamps.next(Timestamp::from_micros(50)),
            Timestamp::from_micros(102)
        );
        assert_eq!(
            stamps.next(Timestamp::from_micros(500)),
            Timestamp::from_micros(500)
        );
        let mut after = Stamps::after(Timestamp::from_micros(500));
        assert_eq!(
            after.next(Timestamp::from_micros(500)),
            Timestamp::from_micros(501)
        );
    }

    #[test]
    fn the_generator_is_seeded_and_bounded() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let draws: Vec<u64> = (0..100).map(|_| a.below(10)).collect();
        assert_eq!(draws, (0..100).map(|_| b.below(10)).collect::<Vec<_>>());
        assert!(draws.iter().all(|&draw| draw < 10));
        assert!((0..10).all(|value| draws.contains(&value)));
        assert_eq!(a.below(0), 0);
        for _ in 0..1000 {
            let jittered = a.jitter(Duration::from_millis(100), 25);
            assert!(
                jittered >= Duration::from_millis(75) && jittered <= Duration::from_millis(125)
            );
        }
        assert_eq!(
            a.jitter(Duration::from_millis(100), 0),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn doubling_is_capped() {
        let cap = Duration::from_secs(1);
        assert_eq!(
            doubled(Duration::from_millis(10), 0, cap),
            Duration::from_millis(10)
        );
        assert_eq!(
            doubled(Duration::from_millis(10), 3, cap),
            Duration::from_millis(80)
        );
        assert_eq!(doubled(Duration::from_millis(10), 200, cap), cap);
    }

    #[test]
    fn failures_give_up_after_the_budget_or_at_once_when_final() {
        let mut failures = Failures::default();
        let busy = Error::unavailable("read", "down");
        let step = Duration::from_millis(10);
        let cap = Duration::from_secs(1);
        let config = LockConfig {
            storage_retries: 2,
            retry_backoff: step,
            storage_retry_window: Duration::ZERO,
            ..LockConfig::default()
        };
        let now = MonotonicTime::from_micros(1_000);
        assert_eq!(failures.record(now, &busy, &config, cap, None), Some(step));
        assert_eq!(
            failures.record(now, &busy, &config, cap, None),
            Some(step * 2)
        );
        assert_eq!(failures.record(now, &busy, &config, cap, None), None);
        failures.reset();
        let final_error = Error::rejected("read", "no table");
        assert_eq!(failures.record(now, &final_error, &config, cap, None), None);
        // After a success the budget and the backoff start again.
        failures.reset();
        assert_eq!(failures.record(now, &busy, &config, cap, None), Some(step));
    }

    /// Past the count, failures that may pass are retried until the window since the first
    /// of them ends (the backoff capped), and a final error still ends at once.
    #[test]
    fn failures_are_retried_for_the_window_since_the_first_of_a_run() {
        let mut failures = Failures::default();
        let busy = Error::unavailable("write", "down");
        let cap = Duration::from_millis(250);
        let config = LockConfig {
            storage_retries: 1,
            retry_backoff: Duration::from_millis(10),
            storage_retry_window: Duration::from_secs(5),
            ..LockConfig::default()
        };
        let first = MonotonicTime::from_micros(1_000_000);
        let mut now = first;
        let mut retries = 0;
        while let Some(pause) = failures.record(now, &busy, &config, cap, None) {
            assert!(pause <= cap);
            retries += 1;
            now = now + pause;
        }
        assert!(now >= first + Duration::from_secs(5), "gave up at {now:?}");
        assert!(
            now < first + Duration::from_secs(5) + cap,
            "retried past the window"
        );
        assert!(retries > 10, "only {retries} retries in the window");
        failures.reset();
        let final_error = Error::rejected("write", "no table");
        assert_eq!(
            failures.record(first, &final_error, &config, cap, None),
            None
        );
        // A success starts a new window.
        failures.reset();
        assert!(failures.record(now, &busy, &config, cap, None).is_some());
        let later = now + Duration::from_secs(4);
        assert!(failures.record(later, &busy, &config, cap, None).is_some());
        assert_eq!(
            failures.record(now + Duration::from_secs(5), &busy, &config, cap, None),
            None
        );
    }
}
