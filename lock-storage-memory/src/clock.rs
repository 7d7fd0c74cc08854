//! Simulated wall clocks: Tokio's time, offset and drifting per node.

use lock_core::Timestamp;

use crate::error::MemoryError;

/// How far a node's wall clock is off: a fixed offset and a rate error.
///
/// A clock with skew `{offset_micros, drift_ppm}` set at simulated time `t₀` reads, at
/// simulated time `t`, `epoch + t + offset_micros + (t - t₀) · drift_ppm / 10⁶`. Setting a
/// new skew therefore *steps* the clock to `true time + offset` (as an operator or NTP would)
/// and lets it drift from there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClockSkew {
    /// How far the clock is ahead of true time (negative: behind), in microseconds.
    pub offset_micros: i64,
    /// How fast the clock runs, in parts per million (negative: slow).
    pub drift_ppm: i32,
}

impl ClockSkew {
    /// The largest offset accepted: ten years either way.
    pub const MAX_OFFSET_MICROS: i64 = 10 * 365 * 24 * 3600 * 1_000_000;
    /// The largest rate error accepted: half a second per second either way.
    pub const MAX_DRIFT_PPM: i32 = 500_000;

    /// A clock that is `offset_micros` ahead and does not drift.
    pub const fn offset(offset_micros: i64) -> Self {
        ClockSkew {
            offset_micros,
            drift_ppm: 0,
        }
    }

    /// Checks the offset and drift against [`ClockSkew::MAX_OFFSET_MICROS`] and
    /// [`ClockSkew::MAX_DRIFT_PPM`]; `field` names the setting in the error.
    pub(crate) fn validate(self, field: &'static str) -> Result<Self, MemoryError> {
        if self.offset_micros.unsigned_abs() > Self::MAX_OFFSET_MICROS.unsigned_abs() {
            return Err(MemoryError::config(
                field,
                format!(
                    "offset of {}µs is beyond ±{}µs (ten years)",
                    self.offset_micros,
                    Self::MAX_OFFSET_MICROS
                ),
            ));
        }
        if self.drift_ppm.unsigned_abs() > Self::MAX_DRIFT_PPM.unsigned_abs() {
            return Err(MemoryError::config(
                field,
                format!(
                    "drift of {} ppm is beyond ±{} ppm",
                    self.drift_ppm,
                    Self::MAX_DRIFT_PPM
                ),
            ));
        }
        Ok(self)
    }
}

/// One node's wall clock as a function of simulated time (microseconds since the cluster
/// started).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SkewedClock {
    epoch: Timestamp,
    skew: ClockSkew,
    skewed_since: u64,
}

impl SkewedClock {
    pub(crate) fn new(epoch: Timestamp, skew: ClockSkew) -> Self {
        SkewedClock {
            epoch,
            skew,
            skewed_since: 0,
        }
    }

    /// Steps the clock to `skew` at simulated time `now`.
    pub(crate) fn set_skew(&mut self, skew: ClockSkew, now: u64) {
        self.skew = skew;
        self.skewed_since = now;
    }

    /// The wall time at simulated time `now`, clamped to `0..=Timestamp::MAX`.
    pub(crate) fn wall(&self, now: u64) -> Timestamp {
        let drift = if self.skew.drift_ppm == 0 {
            0
        } else {
            let drifting = i128::from(now.saturating_sub(self.skewed_since));
            drifting * i128::from(self.skew.drift_ppm) / 1_000_000
        };
        let micros = i128::from(self.epoch.as_micros())
            + i128::from(now)
            + i128::from(self.skew.offset_micros)
            + drift;
        Timestamp::from_micros(u64::try_from(micros.max(0)).unwrap_or(u64::MAX))
    }

    /// The wall time at simulated time `now` in whole seconds (truncated), as Cassandra's
    /// `nowInSec`.
    pub(crate) fn wall_secs(&self, now: u64) -> u64 {
        self.wall(now).as_micros() / 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_clock_steps_then_drifts() {
        let epoch = Timestamp::from_micros(1_000_000_000);
        let mut clock = SkewedClock::new(epoch, ClockSkew::offset(-500));
        assert_eq!(clock.wall(2_000).as_micros(), 1_000_001_500);
        clock.set_skew(
            ClockSkew {
                offset_micros: 1_000,
                drift_ppm: 100_000,
            },
            10_000,
        );
        assert_eq!(clock.wall(10_000).as_micros(), 1_000_011_000);
        assert_eq!(clock.wall(20_000).as_micros(), 1_000_022_000);
        assert_eq!(clock.wall_secs(20_000), 1_000);
    }

    #[test]
    fn a_clock_never_reads_before_the_unix_epoch() {
        let clock = SkewedClock::new(Timestamp::ZERO, ClockSkew::offset(-5));
        assert_eq!(clock.wall(0), Timestamp::ZERO);
    }

    #[test]
    fn absurd_skews_are_rejected() {
        assert!(
            ClockSkew::offset(ClockSkew::MAX_OFFSET_MICROS + 1)
                .validate("replica_clocks")
                .is_err()
        );
        assert!(
            ClockSkew {
                offset_micros: 0,
                drift_ppm: -600_000
            }
            .validate("replica_clocks")
            .is_err()
        );
        assert!(
            ClockSkew::offset(-3_000_000)
                .validate("replica_clocks")
                .is_ok()
        );
    }
}
