//! Time as the state machines see it: always passed in, never read.
//!
//! Two different clocks matter to a lock, and they are kept apart on purpose:
//!
//! * [`MonotonicTime`] is the local **monotonic** clock. Poll intervals, renewal times and the
//!   lease deadline are measured on it, so a wall-clock step (NTP, a human) can never stretch
//!   a lease.
//! * [`Timestamp`] is **wall-clock** time in microseconds since the Unix epoch, as a
//!   Cassandra client would put in `USING TIMESTAMP`. It orders the queue and decides
//!   last-write-wins conflicts in storage. It comes from an injected clock (the system clock
//!   made non-decreasing, or the time service).
//!
//! Every event given to a machine carries both readings in a [`Now`].

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A reading of the local monotonic clock: microseconds since an arbitrary origin.
///
/// Like `std::time::Instant` but constructible from a number, so a model checker can use a
/// small logical tick counter and a test can use virtual time. It has its own name so that it
/// never shadows `std::time::Instant` or `tokio::time::Instant` where both are imported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MonotonicTime(u64);

impl MonotonicTime {
    /// The origin.
    pub const ZERO: MonotonicTime = MonotonicTime(0);

    /// The latest instant: "never" as a deadline.
    pub const MAX: MonotonicTime = MonotonicTime(u64::MAX);

    /// An instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        MonotonicTime(micros)
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: MonotonicTime) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for MonotonicTime {
    type Output = MonotonicTime;
    /// Saturates at the end of time instead of overflowing.
    fn add(self, rhs: Duration) -> MonotonicTime {
        MonotonicTime(self.0.saturating_add(duration_micros(rhs)))
    }
}

impl Sub<Duration> for MonotonicTime {
    type Output = MonotonicTime;
    /// Saturates at the origin instead of underflowing.
    fn sub(self, rhs: Duration) -> MonotonicTime {
        MonotonicTime(self.0.saturating_sub(duration_micros(rhs)))
    }
}

/// A wall-clock time in microseconds since the Unix epoch, used as a Cassandra write
/// timestamp and as the time part of a queue column name.
///
/// Cassandra write timestamps are signed 64-bit, so the largest usable value is
/// [`Timestamp::MAX`] (`i64::MAX`); every such value fits the 20 digits of a queue column.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch.
    pub const ZERO: Timestamp = Timestamp(0);
    /// The largest timestamp Cassandra accepts.
    pub const MAX: Timestamp = Timestamp(i64::MAX as u64);

    /// A timestamp `micros` microseconds after the epoch, clamped to [`Timestamp::MAX`].
    pub const fn from_micros(micros: u64) -> Self {
        if micros > Self::MAX.0 {
            Self::MAX
        } else {
            Timestamp(micros)
        }
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// The next microsecond (saturating).
    pub fn next(self) -> Timestamp {
        Timestamp::from_micros(self.0.saturating_add(1))
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}µs", self.0)
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    /// Saturates at [`Timestamp::MAX`].
    fn add(self, rhs: Duration) -> Timestamp {
        Timestamp::from_micros(self.0.saturating_add(duration_micros(rhs)))
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    /// Saturates at the epoch.
    fn sub(self, rhs: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(duration_micros(rhs)))
    }
}

/// The two clock readings that come with every event a machine handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Now {
    /// The local monotonic clock.
    pub instant: MonotonicTime,
    /// The wall clock (or the time service).
    pub timestamp: Timestamp,
}

impl Now {
    /// Both readings at once.
    pub const fn new(instant: MonotonicTime, timestamp: Timestamp) -> Self {
        Now { instant, timestamp }
    }
}

/// Whole microseconds in a duration, saturating at `u64::MAX`.
pub fn duration_micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        assert_eq!(
            MonotonicTime::ZERO - Duration::from_secs(1),
            MonotonicTime::ZERO
        );
        assert_eq!(
            MonotonicTime::from_micros(u64::MAX) + Duration::from_secs(1),
            MonotonicTime::from_micros(u64::MAX)
        );
        assert_eq!(Timestamp::MAX + Duration::from_secs(1), Timestamp::MAX);
        assert_eq!(Timestamp::from_micros(u64::MAX), Timestamp::MAX);
        assert_eq!(Timestamp::MAX.next(), Timestamp::MAX);
        assert_eq!(Timestamp::ZERO - Duration::from_secs(1), Timestamp::ZERO);
        assert_eq!(duration_micros(Duration::MAX), u64::MAX);
    }

    #[test]
    fn durations_between_readings() {
        let a = MonotonicTime::from_micros(1_000);
        let b = a + Duration::from_millis(2);
        assert_eq!(b.saturating_duration_since(a), Duration::from_millis(2));
        assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
    }
}
