//! The statistics of a run: summaries of wait times and Jain's fairness index.

use serde::Serialize;

/// The `q`-quantile (0 to 1) of `sorted` values by the nearest-rank method: the smallest
/// value with at least `q · n` values at or below it. `NaN` for no values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Jain's fairness index of `shares`: `(Σx)² / (n · Σx²)`, 1 when every share is equal and
/// `1/n` when one party has everything. 1 for no shares or all zero (nobody was treated
/// worse than anybody else).
pub fn jain(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|share| share * share).sum();
    if shares.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (shares.len() as f64 * squares)
}

/// A summary of a sample (here, wait times in milliseconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// How many values.
    pub count: usize,
    /// Their mean.
    pub mean: f64,
    /// The smallest.
    pub min: f64,
    /// The median.
    pub p50: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The 99.9th percentile.
    pub p999: f64,
    /// The largest.
    pub max: f64,
}

impl Summary {
    /// Summarises `values` (in any order).
    pub fn of(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let count = sorted.len();
        if count == 0 {
            return Summary::default();
        }
        Summary {
            count,
            mean: sorted.iter().sum::<f64>() / count as f64,
            min: sorted[0],
            p50: percentile(&sorted, 0.5),
            p90: percentile(&sorted, 0.9),
            p99: percentile(&sorted, 0.99),
            p999: percentile(&sorted, 0.999),
            max: sorted[count - 1],
        }
    }
}

/// Fairness over time: the run is cut into windows of `window` (same unit as the times),
/// and in each full window Jain's index of the acquisitions each process completed in it is
/// taken. `completions[i]` holds process `i`'s completion times; `duration` is the run's
/// length. A run shorter than one window counts as one window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Fairness {
    /// The window length.
    pub window: f64,
    /// How many windows were scored.
    pub windows: usize,
    /// The mean of the windows' indices.
    pub mean: f64,
    /// The worst window's index.
    pub min: f64,
}

impl Fairness {
    /// Scores `completions` over windows of `window` within `duration`.
    pub fn over_windows(completions: &[Vec<f64>], duration: f64, window: f64) -> Self {
        let full = if window > 0.0 {
            (duration / window).floor() as usize
        } else {
            0
        };
        let (windows, length) = if full == 0 {
            (1, duration.max(f64::MIN_POSITIVE))
        } else {
            (full, window)
        };
        let mut counts = vec![vec![0.0; completions.len()]; windows];
        for (process, times) in completions.iter().enumerate() {
            for &time in times {
                let index = (time / length).floor();
                if index >= 0.0 && (index as usize) < windows {
                    counts[index as usize][process] += 1.0;
                } else if full == 0 {
                    counts[0][process] += 1.0;
                }
            }
        }
        let indices: Vec<f64> = counts.iter().map(|shares| jain(shares)).collect();
        Fairness {
            window: length,
            windows,
            mean: indices.iter().sum::<f64>() / windows as f64,
            min: indices.iter().copied().fold(f64::INFINITY, f64::min),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.5), 50.0);
        assert_eq!(percentile(&values, 0.99), 99.0);
        assert_eq!(percentile(&values, 1.0), 100.0);
        assert_eq!(percentile(&values, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    #[test]
    fn summaries_sort_their_input() {
        let summary = Summary::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!(summary.count, 4);
        assert_eq!(summary.mean, 4.0);
        assert_eq!((summary.min, summary.p50, summary.max), (1.0, 2.0, 10.0));
        assert_eq!(Summary::of(&[]), Summary::default());
    }

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_a_monopoly() {
        assert_eq!(jain(&[5.0, 5.0, 5.0]), 1.0);
        assert!((jain(&[9.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
        assert!((jain(&[1.0, 2.0, 3.0]) - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
        assert_eq!(jain(&[0.0, 0.0]), 1.0);
    }

    #[test]
    fn fairness_windows_see_runs_of_one_process() {
        // Round robin: every window holds one acquisition of each process.
        let round_robin = vec![vec![0.5, 1.5, 2.5, 3.5], vec![0.6, 1.6, 2.6, 3.6]];
        let fair = Fairness::over_windows(&round_robin, 4.0, 1.0);
        assert_eq!((fair.windows, fair.mean, fair.min), (4, 1.0, 1.0));
        // Process 0 takes the first half, process 1 the second: each window is a monopoly.
        let runs = vec![vec![0.1, 0.2, 0.3, 1.1, 1.2], vec![2.1, 2.2, 3.3, 3.4, 3.5]];
        let unfair = Fairness::over_windows(&runs, 4.0, 1.0);
        assert_eq!(unfair.windows, 4);
        assert!((unfair.mean - 0.5).abs() < 1e-12);
        // A run shorter than a window is one window.
        let short = Fairness::over_windows(&round_robin, 4.0, 10.0);
        assert_eq!((short.windows, short.mean), (1, 1.0));
    }
}
