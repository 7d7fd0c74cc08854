//! `lock-bench tombstones`: many acquisitions of one lock id, cut into windows, to see
//! whether the dead cells that every acquisition leaves behind (the tombstones of its
//! release, and expired cells) slow acquisition down as they accumulate.
//!
//! Every release deletes the owner's queue and main cells, and owner ids are fresh per
//! acquisition, so each acquisition leaves at least two tombstones. A replica keeps them
//! for `gc_grace`, and a read of "the first K live cells" of a row steps over every dead
//! cell that sorts before them. The simulated cluster counts those cells and, with a
//! dead-cell read cost, charges simulated time for them; this command reports both per
//! window, from the first window to the last.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::BoxError;
use crate::experiment::{RunResult, Sample};
use crate::stats::Summary;
use crate::units::ms;

/// One window of consecutive acquisitions (in completion order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    /// The first acquisition of the window, counting from 1 over all processes.
    pub first: u64,
    /// The last acquisition of the window.
    pub last: u64,
    /// When the window started, in run time (s).
    pub started_s: f64,
    /// Run time per acquisition over the window (ms): the hand-off rate.
    pub ms_per_acquisition: f64,
    /// Waits (from calling `lock()` to holding) of the window's acquisitions, in ms.
    pub wait_ms: Summary,
    /// Storage requests of the lockers per acquisition (release and renewals included).
    pub requests_per_acquisition: f64,
    /// Dead cells the simulated replicas stepped over per read (simulation only).
    pub dead_cells_per_read: Option<f64>,
    /// Dead cells replica 0 stored in the lock's rows at the end of the window
    /// (simulation only).
    pub stored_dead_cells: Option<u64>,
    /// Wall-clock seconds the window took to compute.
    pub wall_s: f64,
}

/// The windows of one run, and how the last compares with the first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TombstoneReport {
    /// What ran, for the reader.
    pub setup: String,
    /// The windows, in order.
    pub windows: Vec<Window>,
    /// The last full window's run time per acquisition over the first's.
    pub slowdown: f64,
    /// The last full window's requests per acquisition over the first's.
    pub request_growth: f64,
}

impl TombstoneReport {
    /// Cuts `run` into windows at its `samples` (taken every `window` acquisitions, the first
    /// before the run). `simulated` says whether the cluster counters mean anything.
    pub fn new(setup: String, run: &RunResult, samples: &[Sample], simulated: bool) -> Self {
        let waits: Vec<f64> = run.acquisitions.iter().map(|a| ms(a.wait)).collect();
        let windows: Vec<Window> = samples
            .windows(2)
            .map(|pair| {
                let (start, end) = (pair[0], pair[1]);
                let count = (end.acquisitions - start.acquisitions).max(1);
                let from = usize::try_from(start.acquisitions).unwrap_or(usize::MAX);
                let to = usize::try_from(end.acquisitions).unwrap_or(usize::MAX);
                let slice = waits.get(from..to.min(waits.len())).unwrap_or(&[]);
                let reads = end.reads - start.reads;
                Window {
                    first: start.acquisitions + 1,
                    last: end.acquisitions,
                    started_s: start.at.as_secs_f64(),
                    ms_per_acquisition: ms(end.at.saturating_sub(start.at)) / count as f64,
                    wait_ms: Summary::of(slice),
                    requests_per_acquisition: (end.requests - start.requests) as f64 / count as f64,
                    dead_cells_per_read: simulated.then(|| {
                        (end.dead_cells_scanned - start.dead_cells_scanned) as f64
                            / reads.max(1) as f64
                    }),
                    stored_dead_cells: simulated.then_some(end.stored_dead_cells),
                    wall_s: end.wall.saturating_sub(start.wall).as_secs_f64(),
                }
            })
            .collect();
        let full = windows
            .first()
            .map_or(0, |first| first.last - first.first + 1);
        let full_windows: Vec<&Window> = windows
            .iter()
            .filter(|window| window.last - window.first + 1 == full)
            .collect();
        let ratio = |value: fn(&Window) -> f64| match (full_windows.first(), full_windows.last()) {
            (Some(first), Some(last)) if value(first) > 0.0 => value(last) / value(first),
            _ => f64::NAN,
        };
        TombstoneReport {
            setup,
            slowdown: ratio(|window| window.ms_per_acquisition),
            request_growth: ratio(|window| window.requests_per_acquisition),
            windows,
        }
    }

    /// The table printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}\n", self.setup);
        let _ = writeln!(
            out,
            "  {:>17} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>10} {:>11} {:>7}",
            "acquisitions",
            "from s",
            "ms/acq",
            "mean wait",
            "p99 wait",
            "max wait",
            "req/acq",
            "dead/read",
            "stored dead",
            "wall s"
        );
        let optional = |value: Option<f64>, decimals: usize| {
            value.map_or_else(|| "-".to_owned(), |value| format!("{value:.decimals$}"))
        };
        for window in &self.windows {
            let _ = writeln!(
                out,
                "  {:>17} {:>9.1} {:>8.3} {:>9.2} {:>9.1} {:>9.1} {:>8.2} {:>10} {:>11} {:>7.1}",
                format!("{}-{}", window.first, window.last),
                window.started_s,
                window.ms_per_acquisition,
                window.wait_ms.mean,
                window.wait_ms.p99,
                window.wait_ms.max,
                window.requests_per_acquisition,
                optional(window.dead_cells_per_read, 1),
                optional(window.stored_dead_cells.map(|cells| cells as f64), 0),
                window.wall_s
            );
        }
        let _ = writeln!(
            out,
            "\n  last window / first window: {:.2}x run time per acquisition, {:.2}x requests per \
             acquisition",
            self.slowdown, self.request_growth
        );
        let _ = writeln!(
            out,
            "  (ms/acq = run time per acquisition over the window; waits in ms; req/acq = the \
             lockers' storage requests per acquisition, release included; dead/read = \
             tombstones and expired cells the replicas stepped over per read; stored dead = \
             dead cells replica 0 keeps in the lock's rows at the window's end)"
        );
        out
    }

    /// Writes the report as `tombstones.json` into `dir` and returns the path.
    pub fn write(&self, dir: &Path) -> Result<std::path::PathBuf, BoxError> {
        let path = dir.join("tombstones.json");
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        Ok(path)
    }
}

/// The per-process count that makes at least `total` acquisitions over `processes`.
pub fn per_process(total: u64, processes: usize) -> Result<u32, BoxError> {
    let processes = processes.max(1) as u64;
    u32::try_from(total.div_ceil(processes))
        .map_err(|_| format!("--acquisitions {total} is too many").into())
}

/// A duration for the setup line, as the command line writes it (`0s`, `1us`, `2ms 500us`).
pub fn describe(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Acquisition, RequestCounts, RunSpec, Variant};

    fn sample(acquisitions: u64, at_ms: u64, requests: u64, reads: u64, dead: u64) -> Sample {
        Sample {
            acquisitions,
            at: Duration::from_millis(at_ms),
            wall: Duration::from_millis(at_ms / 10),
            requests,
            reads,
            dead_cells_scanned: dead,
            stored_dead_cells: dead / 2,
        }
    }

    #[test]
    fn windows_are_cut_at_the_samples_and_compared_first_to_last() {
        let acquisitions = (0..5)
            .map(|index| Acquisition {
                process: 0,
                number: index + 1,
                acquired_at: Duration::from_millis(u64::from(index) * 10),
                wait: Duration::from_millis(u64::from(index) + 1),
                requests: 4,
            })
            .collect();
        let run = RunResult {
            spec: RunSpec {
                variant: Variant::QUEUE,
                processes: 1,
            },
            acquisitions,
            duration: Duration::from_millis(50),
            requests: RequestCounts::default(),
            cluster: None,
            exclusion_violations: 0,
            wall_time: Duration::ZERO,
        };
        // Two full windows of two acquisitions, then a partial one; the second full window
        // is twice as slow and reads twice as many dead cells per read.
        let samples = [
            sample(0, 0, 0, 0, 0),
            sample(2, 10, 12, 4, 40),
            sample(4, 30, 24, 8, 120),
            sample(5, 50, 30, 10, 200),
        ];
        let report = TombstoneReport::new("setup".into(), &run, &samples, true);
        assert_eq!(report.windows.len(), 3);
        let first = &report.windows[0];
        assert_eq!((first.first, first.last), (1, 2));
        assert_eq!(first.ms_per_acquisition, 5.0);
        assert_eq!(first.wait_ms.mean, 1.5);
        assert_eq!(first.requests_per_acquisition, 6.0);
        assert_eq!(first.dead_cells_per_read, Some(10.0));
        assert_eq!(report.windows[1].dead_cells_per_read, Some(20.0));
        assert_eq!(report.windows[2].wait_ms.count, 1);
        assert_eq!(report.slowdown, 2.0, "the partial window is left out");
        assert_eq!(report.request_growth, 1.0);
        let text = report.render();
        assert!(text.contains("3-4"), "{text}");
        let unsimulated = TombstoneReport::new("setup".into(), &run, &samples, false);
        assert_eq!(unsimulated.windows[0].dead_cells_per_read, None);
    }

    #[test]
    fn acquisitions_are_spread_over_the_processes() {
        assert_eq!(per_process(1_000_000, 5).unwrap(), 200_000);
        assert_eq!(per_process(10, 3).unwrap(), 4);
        assert!(per_process(u64::MAX, 1).is_err());
    }

    #[test]
    fn setup_durations_read_back_as_options() {
        for duration in [
            Duration::ZERO,
            Duration::from_micros(1),
            Duration::from_micros(2500),
        ] {
            let text = describe(duration);
            assert_eq!(crate::units::parse_duration(&text), Ok(duration), "{text}");
        }
        assert_eq!(describe(Duration::from_micros(2500)), "2ms 500us");
    }
}
