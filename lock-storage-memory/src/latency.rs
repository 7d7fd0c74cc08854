//! How long a simulated message takes to travel: configurable, seeded distributions.

use std::time::Duration;

use lock_core::time::duration_micros;
use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};

use crate::error::MemoryError;

/// The z-score of the 99th percentile of a standard normal distribution.
const Z_99: f64 = 2.326_347_874_040_841;

/// The distribution every message's one-way latency is drawn from, independently for each
/// message (a request from a client to a replica, a reply back, a read-repair or hint
/// message), with the cluster's seeded random number generator.
///
/// Samples are taken in whole microseconds. Tokio's timer wakes tasks with millisecond
/// resolution, so a client may *see* an answer up to a millisecond after the simulated time
/// at which it arrived; the simulation itself orders and timestamps messages to the
/// microsecond.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Latency {
    /// Every message arrives at once. This is the fast path: a request is served inline,
    /// without spawning or sleeping, unless it times out.
    #[default]
    Zero,
    /// Every message takes exactly this long.
    Fixed(Duration),
    /// Uniform between `min` and `max`, both included.
    Uniform {
        /// The shortest latency.
        min: Duration,
        /// The longest latency.
        max: Duration,
    },
    /// `min` plus an exponentially distributed extra delay of mean `mean_extra`: a floor and
    /// a tail that decays geometrically.
    Exponential {
        /// The floor every message pays.
        min: Duration,
        /// The mean of the extra delay above the floor.
        mean_extra: Duration,
    },
    /// Log-normal with the given median and 99th percentile: the long, heavy tail of a real
    /// network and garbage-collecting JVMs.
    LogNormal {
        /// Half of the messages are faster than this.
        median: Duration,
        /// 99 % of the messages are faster than this; at least `median`.
        p99: Duration,
    },
}

impl Latency {
    /// The longest latency a distribution may be configured with, and the cap on samples.
    pub const MAX: Duration = Duration::from_secs(3600);

    /// Checks that every duration is at most [`Latency::MAX`] and that the parameters are
    /// consistent (`min <= max`, `median <= p99`, a non-zero median).
    pub fn validate(&self) -> Result<(), MemoryError> {
        let within = |name: &str, value: Duration| {
            if value > Self::MAX {
                Err(MemoryError::config(
                    "latency",
                    format!(
                        "{name} of {value:?} is longer than the {:?} a message may take",
                        Self::MAX
                    ),
                ))
            } else {
                Ok(())
            }
        };
        match *self {
            Latency::Zero => Ok(()),
            Latency::Fixed(value) => within("the fixed latency", value),
            Latency::Uniform { min, max } => {
                within("min", min)?;
                within("max", max)?;
                if min > max {
                    return Err(MemoryError::config(
                        "latency",
                        format!("uniform min {min:?} is greater than max {max:?}"),
                    ));
                }
                Ok(())
            }
            Latency::Exponential { min, mean_extra } => {
                within("min", min)?;
                within("mean_extra", mean_extra)
            }
            Latency::LogNormal { median, p99 } => {
                within("median", median)?;
                within("p99", p99)?;
                if median < Duration::from_micros(1) {
                    return Err(MemoryError::config(
                        "latency",
                        "a log-normal median must be at least 1µs",
                    ));
                }
                if p99 < median {
                    return Err(MemoryError::config(
                        "latency",
                        format!("log-normal p99 {p99:?} is below the median {median:?}"),
                    ));
                }
                Ok(())
            }
        }
    }

    /// True when every sample is zero, so requests can be served inline.
    pub fn is_always_zero(&self) -> bool {
        match *self {
            Latency::Zero => true,
            Latency::Fixed(value) => value.is_zero(),
            Latency::Uniform { max, .. } => max.is_zero(),
            Latency::Exponential { min, mean_extra } => min.is_zero() && mean_extra.is_zero(),
            Latency::LogNormal { .. } => false,
        }
    }

    /// Draws one latency in microseconds, at most [`Latency::MAX`]. Draws nothing from `rng`
    /// when the latency is always zero, so the zero-latency path costs no randomness.
    pub(crate) fn sample_micros(&self, rng: &mut impl Rng) -> u64 {
        if self.is_always_zero() {
            return 0;
        }
        let cap = duration_micros(Self::MAX);
        let micros = match *self {
            Latency::Zero => 0,
            Latency::Fixed(value) => duration_micros(value),
            Latency::Uniform { min, max } => {
                rng.random_range(duration_micros(min)..=duration_micros(max))
            }
            Latency::Exponential { min, mean_extra } => {
                let extra = Exp::new(1.0 / micros_f64(mean_extra))
                    .map(|exp| exp.sample(rng))
                    .unwrap_or(0.0);
                duration_micros(min).saturating_add(float_micros(extra))
            }
            Latency::LogNormal { median, p99 } => {
                let sigma = (micros_f64(p99) / micros_f64(median)).ln() / Z_99;
                LogNormal::new(micros_f64(median).ln(), sigma)
                    .map(|log_normal| float_micros(log_normal.sample(rng)))
                    .unwrap_or_else(|_| duration_micros(median))
            }
        };
        micros.min(cap)
    }
}

fn micros_f64(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Rounds a non-negative sample to whole microseconds (`as` saturates; NaN becomes zero).
fn float_micros(micros: f64) -> u64 {
    micros.round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn samples(latency: &Latency, count: usize) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        (0..count)
            .map(|_| latency.sample_micros(&mut rng))
            .collect()
    }

    #[test]
    fn fixed_and_uniform_stay_in_bounds() {
        assert!(
            samples(&Latency::Fixed(Duration::from_millis(3)), 10)
                .iter()
                .all(|&micros| micros == 3_000)
        );
        let uniform = Latency::Uniform {
            min: Duration::from_micros(100),
            max: Duration::from_micros(200),
        };
        let drawn = samples(&uniform, 1_000);
        assert!(drawn.iter().all(|&micros| (100..=200).contains(&micros)));
        assert!(drawn.iter().any(|&micros| micros < 120));
        assert!(drawn.iter().any(|&micros| micros > 180));
    }

    #[test]
    fn log_normal_has_the_configured_median_and_tail() {
        let latency = Latency::LogNormal {
            median: Duration::from_millis(2),
            p99: Duration::from_millis(20),
        };
        let mut drawn = samples(&latency, 20_000);
        drawn.sort_unstable();
        let median = drawn[drawn.len() / 2];
        let p99 = drawn[drawn.len() * 99 / 100];
        assert!((1_800..=2_200).contains(&median), "median {median}");
        assert!((16_000..=24_000).contains(&p99), "p99 {p99}");
    }

    #[test]
    fn exponential_adds_a_tail_above_the_floor() {
        let latency = Latency::Exponential {
            min: Duration::from_millis(1),
            mean_extra: Duration::from_millis(4),
        };
        let drawn = samples(&latency, 20_000);
        assert!(drawn.iter().all(|&micros| micros >= 1_000));
        let mean = drawn.iter().sum::<u64>() / drawn.len() as u64;
        assert!((4_700..=5_300).contains(&mean), "mean {mean}");
    }

    #[test]
    fn zero_latency_draws_no_randomness() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut untouched = rng.clone();
        assert_eq!(Latency::Zero.sample_micros(&mut rng), 0);
        assert_eq!(rng.random::<u64>(), untouched.random::<u64>());
    }

    #[test]
    fn inconsistent_or_absurd_distributions_are_rejected() {
        let bad = [
            Latency::Uniform {
                min: Duration::from_millis(5),
                max: Duration::from_millis(1),
            },
            Latency::Fixed(Duration::from_secs(7200)),
            Latency::LogNormal {
                median: Duration::from_millis(5),
                p99: Duration::from_millis(1),
            },
            Latency::LogNormal {
                median: Duration::ZERO,
                p99: Duration::from_millis(1),
            },
        ];
        for latency in bad {
            assert!(
                matches!(
                    latency.validate(),
                    Err(MemoryError::InvalidConfig {
                        field: "latency",
                        ..
                    })
                ),
                "{latency:?} was accepted"
            );
        }
        assert_eq!(Latency::Zero.validate(), Ok(()));
    }
}
