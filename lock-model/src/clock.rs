//! Logical time: a small tick counter shared by every actor, and the rules for when it may
//! advance and when a machine's timeout may fire.

use lock_core::time::{MonotonicTime, Now, Timestamp};

/// When the tick counter may advance (always only up to the model's last tick).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeRule {
    /// At any moment: messages may be delayed over any number of ticks, holders may hold
    /// and clients may wait to start for as long as they like. The most adversarial rule;
    /// used for safety properties.
    Free,
    /// Only when nothing else is urgent: no message is in flight, no timeout is due, no idle
    /// client is waiting to start, and no holder has held the lock for `hold_ticks` tick
    /// boundaries. In words: message delays, think times and critical sections are shorter
    /// than one tick (critical sections: shorter than `hold_ticks + 1`). Used for progress
    /// properties, so that every path is bounded and ends in a state where either every
    /// client is done or the model ran out of ticks, which the property then reports.
    Urgent {
        /// How many tick boundaries a holder may hold the lock across.
        hold_ticks: u32,
    },
}

/// When a machine whose `poll_timeout` is due may be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutRule {
    /// As soon as it is due (lock-core's machines never have a timeout due while their own
    /// request is in flight, but other clients' messages may still be on their way).
    Anytime,
    /// Only when no message of any client is in flight: network delays are shorter than
    /// every pause a machine takes. lock-core's soft lock relies on this for Theorem 4.
    QuietNetwork,
}

/// The time of one tick, in microseconds of both clocks.
pub fn tick_micros(tick: u32, micros_per_tick: u64) -> u64 {
    u64::from(tick) * micros_per_tick
}

/// The readings a client gets at `tick`: the monotonic instant and the wall clock, both
/// `tick * micros_per_tick`, the wall clock moved on by `extra` microseconds.
pub fn now_at(tick: u32, micros_per_tick: u64, extra: u64) -> Now {
    let micros = tick_micros(tick, micros_per_tick);
    Now::new(
        MonotonicTime::from_micros(micros),
        Timestamp::from_micros(micros + extra),
    )
}
