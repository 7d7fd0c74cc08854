//! Clocks the async driver reads; the state machines never do.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant as TokioInstant;

use lock_core::time::{MonotonicTime, Now, Timestamp, duration_micros};

/// Where the driver gets the time it gives the machines.
///
/// `now().instant` must be monotonic and must advance at the rate of
/// [`tokio::time::Instant`] (the driver sleeps on Tokio's timer and re-reads the clock when
/// it wakes, so a clock that runs a little fast or slow is tolerated). `now().timestamp` must
/// never decrease; it orders the queue and is every write's `USING TIMESTAMP`.
pub trait Clock: Send + Sync + 'static {
    /// Both readings, taken together.
    fn now(&self) -> Now;

    /// Whether this clock follows real time, so that the driver may end a pause on a
    /// timer finer than Tokio's, whose millisecond ticks wake a sleeper up to two
    /// milliseconds late. A clock on Tokio's paused time must say no (the default): the
    /// finer timer runs on real time and would wake its tasks at moments a run on a paused
    /// clock cannot replay. [`SystemClock`] says yes.
    fn follows_real_time(&self) -> bool {
        false
    }

    /// How long Tokio's timer must run for this clock's monotonic time to advance by
    /// `duration`: `duration` itself (the default) for a clock that runs at Tokio's pace. A
    /// simulation may run its time slower than Tokio's, so that Tokio's millisecond timer
    /// steps through it in finer steps (lock-storage-memory's `ClusterConfig::timer_dilation`);
    /// its clock then returns `duration` times that factor. The driver times every pause and
    /// request timeout with it.
    fn timer_duration(&self, duration: Duration) -> Duration {
        duration
    }
}

/// Sleeps on Tokio's timer until `clock` has advanced by `duration`.
pub(crate) async fn sleep_for(clock: &dyn Clock, duration: Duration) {
    tokio::time::sleep(clock.timer_duration(duration)).await;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Now {
        (**self).now()
    }

    fn timer_duration(&self, duration: Duration) -> Duration {
        (**self).timer_duration(duration)
    }

    fn follows_real_time(&self) -> bool {
        (**self).follows_real_time()
    }
}

/// The production clock: Tokio's monotonic clock, and the system wall clock made
/// non-decreasing.
///
/// Each timestamp is the larger of the system time and the previous timestamp advanced by
/// the monotonic time elapsed since. So the timestamp follows the wall clock forward, keeps
/// moving at the monotonic rate when the wall clock is stepped back, and never repeats or
/// decreases within this process. The wall clock is read at most once per
/// [`SystemClock::WALL_READ_EVERY`] of monotonic time (a lock cycle reads the time about
/// ten times); in between, the timestamp advances at the monotonic rate, which differs from
/// the wall clock's by NTP's slew (at most 500 ppm: half a microsecond per millisecond).
#[derive(Debug)]
pub struct SystemClock {
    origin: TokioInstant,
    last: Mutex<Reading>,
}

/// What [`SystemClock`] last gave, and when it last read the wall clock.
#[derive(Clone, Copy, Debug)]
struct Reading {
    timestamp: Timestamp,
    /// The monotonic reading (since `origin`) `timestamp` was given at.
    instant: MonotonicTime,
    /// The monotonic reading the wall clock was last read at.
    wall_read_at: MonotonicTime,
}

impl SystemClock {
    /// How much monotonic time may pass between two reads of the wall clock.
    pub const WALL_READ_EVERY: Duration = Duration::from_millis(1);

    /// A clock whose monotonic origin is now.
    pub fn new() -> Self {
        let start = MonotonicTime::from_micros(0);
        SystemClock {
            origin: TokioInstant::now(),
            last: Mutex::new(Reading {
                timestamp: system_time(),
                instant: start,
                wall_read_at: start,
            }),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Now {
        let mono = instant_since(self.origin, TokioInstant::now());
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let mut timestamp = last.timestamp + mono.saturating_duration_since(last.instant);
        if mono.saturating_duration_since(last.wall_read_at) >= Self::WALL_READ_EVERY {
            timestamp = timestamp.max(system_time());
            last.wall_read_at = mono;
        }
        last.timestamp = timestamp;
        last.instant = mono;
        Now::new(mono, timestamp)
    }

    fn follows_real_time(&self) -> bool {
        true
    }
}

/// A clock on Tokio's time alone, starting at a chosen wall time: deterministic under
/// `tokio::time::pause`, which is what tests and simulations want.
///
/// `offset` and `drift_ppm` model a machine whose wall clock is off by a fixed amount and
/// runs fast (positive) or slow (negative) by so many parts per million; the monotonic
/// reading runs at the same skewed rate.
#[derive(Clone, Debug)]
pub struct VirtualClock {
    origin: TokioInstant,
    epoch: Timestamp,
    offset_micros: i64,
    drift_ppm: i64,
}

impl VirtualClock {
    /// A clock reading `epoch` now, with no skew.
    pub fn starting_at(epoch: Timestamp) -> Self {
        VirtualClock {
            origin: TokioInstant::now(),
            epoch,
            offset_micros: 0,
            drift_ppm: 0,
        }
    }

    /// The same clock, off by `offset_micros` (positive: ahead) and running fast by
    /// `drift_ppm` parts per million (negative: slow).
    pub fn skewed(mut self, offset_micros: i64, drift_ppm: i64) -> Self {
        self.offset_micros = offset_micros;
        self.drift_ppm = drift_ppm;
        self
    }

    fn elapsed_micros(&self) -> u64 {
        let elapsed = duration_micros(TokioInstant::now().saturating_duration_since(self.origin));
        let drift = i128::from(elapsed) * i128::from(self.drift_ppm) / 1_000_000;
        u64::try_from((i128::from(elapsed) + drift).max(0)).unwrap_or(u64::MAX)
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Now {
        let elapsed = self.elapsed_micros();
        let wall = i128::from(self.epoch.as_micros())
            + i128::from(elapsed)
            + i128::from(self.offset_micros);
        let wall = u64::try_from(wall.max(0)).unwrap_or(u64::MAX);
        Now::new(
            MonotonicTime::from_micros(elapsed),
            Timestamp::from_micros(wall),
        )
    }
}

fn system_time() -> Timestamp {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    Timestamp::from_micros(duration_micros(since_epoch))
}

fn instant_since(origin: TokioInstant, now: TokioInstant) -> MonotonicTime {
    MonotonicTime::from_micros(duration_micros(now.saturating_duration_since(origin)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_never_goes_back_and_follows_monotonic_time() {
        crate::watchdog::in_virtual_time(
            "the_system_clock_never_goes_back_and_follows_monotonic_time",
            async {
                let clock = SystemClock::new();
                let first = clock.now();
                tokio::time::sleep(Duration::from_secs(5)).await;
                let second = clock.now();
                assert!(second.timestamp >= first.timestamp + Duration::from_secs(5));
                assert_eq!(
                    second.instant.saturating_duration_since(first.instant),
                    Duration::from_secs(5)
                );
                let third = clock.now();
                assert!(third.timestamp >= second.timestamp);
            },
        );
    }

    #[test]
    fn the_system_clock_reads_the_wall_clock_again_once_a_millisecond_has_passed() {
        crate::watchdog::in_virtual_time(
            "the_system_clock_reads_the_wall_clock_again_once_a_millisecond_has_passed",
            async {
                let clock = SystemClock::new();
                // The wall clock moves on; Tokio's paused clock, the monotonic reading, does not.
                std::thread::sleep(Duration::from_millis(5));
                let wall = system_time();
                assert!(clock.now().timestamp < wall);
                tokio::time::advance(SystemClock::WALL_READ_EVERY).await;
                assert!(clock.now().timestamp >= wall);
            },
        );
    }

    #[test]
    fn a_virtual_clock_is_deterministic_and_can_be_skewed() {
        crate::watchdog::in_virtual_time(
            "a_virtual_clock_is_deterministic_and_can_be_skewed",
            async {
                let epoch = Timestamp::from_micros(1_000_000);
                let plain = VirtualClock::starting_at(epoch);
                let skewed = plain.clone().skewed(-500, 100_000);
                tokio::time::sleep(Duration::from_secs(10)).await;
                assert_eq!(plain.now().timestamp, epoch + Duration::from_secs(10));
                assert_eq!(plain.now().instant, MonotonicTime::from_micros(10_000_000));
                assert_eq!(
                    skewed.now().timestamp,
                    Timestamp::from_micros(1_000_000 + 11_000_000 - 500)
                );
                assert_eq!(skewed.now().instant, MonotonicTime::from_micros(11_000_000));
            },
        );
    }
}
