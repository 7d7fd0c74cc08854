//! Turns runs into the thesis's tables, the benchmark's numerical targets (see [`TARGETS`]),
//! and machine-readable files.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::BoxError;
use crate::experiment::{
    ClusterTally, RequestCounts, RoundTrip, RunResult, RunSpec, Settings, Variant,
};
use crate::handoff::{HandoffBreakdown, HandoffRow, HandoffSummary, render_table};
use crate::stats::{Fairness, Summary};
use crate::units::ms;
use lock_core::Algorithm;

/// The thesis's Table 1 (mean time to acquire, ms): processes, new, old.
pub const THESIS_MEAN: [(usize, f64, f64); 3] =
    [(1, 25.0, 15.0), (3, 53.0, 56.0), (5, 107.0, 106.0)];
/// The thesis's Table 2 (maximum time to acquire, ms): processes, new, old.
pub const THESIS_MAX: [(usize, f64, f64); 3] = [
    (1, 146.0, 39.0),
    (3, 537.0, 155_817.0),
    (5, 605.0, 502_441.0),
];

/// The four numerical targets the experiment is held to, in one sentence, as the report
/// prints them above their verdicts.
pub const TARGETS: &str = "the new lock's maximum wait at most 3 times its mean (aim 2); \
    the old lock starving a process (maximum wait at least 100 times the mean); \
    the new lock's run time per acquisition at most twice the hand-off floor 3r; \
    and its storage requests per acquisition under contention at most twice the uncontended \
    number";

/// How many acquisitions per process a fairness window holds on average.
pub const FAIRNESS_WINDOW_ACQUISITIONS: f64 = 10.0;

/// The numbers of one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// What ran.
    pub spec: RunSpec,
    /// `queue`, `queue+fencing` or `baseline`.
    pub label: String,
    /// Acquisitions completed by all processes.
    pub acquisitions: usize,
    /// Wait times (from calling `lock()` to holding), in ms.
    pub wait_ms: Summary,
    /// `max / mean` of the waits.
    pub max_over_mean: f64,
    /// The run's duration, in ms.
    pub duration_ms: f64,
    /// Duration divided by acquisitions, in ms.
    pub time_per_acquisition_ms: f64,
    /// Every storage request the lockers made, per acquisition (acquire, release, renewals).
    pub requests_per_acquisition: f64,
    /// Requests the acquisitions alone made, per acquisition (without the release).
    pub acquire_requests_per_acquisition: f64,
    /// The lockers' requests by kind.
    pub requests: RequestCounts,
    /// The mean round trip of the lockers' requests during the run, in ms: under the run's
    /// own load, unlike the uncontended round trip measured before the runs.
    pub request_round_trip_ms: Option<f64>,
    /// The same for reads, writes and deletes apart.
    pub read_write_delete_round_trip_ms: [Option<f64>; 3],
    /// Jain's index of acquisitions per process over windows of about
    /// [`FAIRNESS_WINDOW_ACQUISITIONS`] acquisitions per process (window in ms).
    pub fairness: Fairness,
    /// Acquisitions that overlapped another process's (must be 0).
    pub exclusion_violations: u64,
    /// Acquisitions a margin shorter than the safe one hid, which joined the queue again
    /// (lock-core's `AcquireStats::rejoins`, added up; always 0 without `--queue-margin` or
    /// `--margin-acquisitions`).
    pub rejoins: u64,
    /// What the simulated cluster counted.
    pub cluster: Option<ClusterTally>,
    /// Dead cells the replicas stepped over per read (simulation only).
    pub dead_cells_per_read: Option<f64>,
    /// Reads per acquisition that waited for a blocking read repair (simulation only).
    pub repaired_reads_per_acquisition: Option<f64>,
    /// Where the hand-offs' time went (simulation with a recorded history only).
    pub handoffs: Option<HandoffSummary>,
    /// Wall-clock seconds the run took.
    pub wall_seconds: f64,
}

impl RunSummary {
    /// Computes the numbers of `run`.
    pub fn of(run: &RunResult) -> Self {
        let count = run.acquisitions.len();
        let waits: Vec<f64> = run.acquisitions.iter().map(|a| ms(a.wait)).collect();
        let wait_ms = Summary::of(&waits);
        let per = |value: f64| {
            if count == 0 {
                0.0
            } else {
                value / count as f64
            }
        };
        let duration_ms = ms(run.duration);
        let mut completions = vec![Vec::new(); run.spec.processes];
        for acquisition in &run.acquisitions {
            completions[acquisition.process].push(ms(acquisition.acquired_at));
        }
        let window = per(duration_ms) * run.spec.processes as f64 * FAIRNESS_WINDOW_ACQUISITIONS;
        let acquire_requests: u64 = run.acquisitions.iter().map(|a| u64::from(a.requests)).sum();
        RunSummary {
            spec: run.spec,
            label: run.spec.variant.label(),
            acquisitions: count,
            max_over_mean: if wait_ms.mean > 0.0 {
                wait_ms.max / wait_ms.mean
            } else {
                f64::NAN
            },
            wait_ms,
            duration_ms,
            time_per_acquisition_ms: per(duration_ms),
            requests_per_acquisition: per(run.requests.total() as f64),
            acquire_requests_per_acquisition: per(acquire_requests as f64),
            requests: run.requests,
            request_round_trip_ms: run.requests.mean_round_trip().map(ms),
            read_write_delete_round_trip_ms: run.requests.mean_round_trips().map(|r| r.map(ms)),
            fairness: Fairness::over_windows(&completions, duration_ms, window),
            exclusion_violations: run.exclusion_violations,
            rejoins: run.acquisitions.iter().map(|a| u64::from(a.rejoins)).sum(),
            cluster: run.cluster,
            dead_cells_per_read: run
                .cluster
                .map(|cluster| cluster.dead_cells_scanned as f64 / cluster.reads.max(1) as f64),
            repaired_reads_per_acquisition: run
                .cluster
                .map(|cluster| per(cluster.repaired_reads as f64)),
            handoffs: run.handoffs.as_ref().map(HandoffBreakdown::summary),
            wall_seconds: run.wall_time.as_secs_f64(),
        }
    }
}

/// One of the [`TARGETS`] and how it came out.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// What is checked.
    pub name: String,
    /// The measured value.
    pub value: f64,
    /// The bound it is held to.
    pub bound: String,
    /// Whether it holds (`None` when the run needed is missing or the setup does not apply).
    pub met: Option<bool>,
    /// The numbers behind it.
    pub detail: String,
}

/// The round trip, in ms.
#[derive(Clone, Debug, Serialize)]
pub struct RoundTripReport {
    /// Requests of each kind timed.
    pub samples: u32,
    /// Mean write, ms.
    pub write_ms: f64,
    /// Mean read, ms.
    pub read_ms: f64,
    /// Mean delete, ms.
    pub delete_ms: f64,
    /// `r`, ms.
    pub r_ms: f64,
    /// The hand-off floor `3·r` (delete + write + read), ms.
    pub handoff_floor_ms: f64,
}

impl From<RoundTrip> for RoundTripReport {
    fn from(round_trip: RoundTrip) -> Self {
        RoundTripReport {
            samples: round_trip.samples,
            write_ms: ms(round_trip.write),
            read_ms: ms(round_trip.read),
            delete_ms: ms(round_trip.delete),
            r_ms: ms(round_trip.r()),
            handoff_floor_ms: ms(round_trip.handoff_floor()),
        }
    }
}

/// The settings, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct SettingsReport {
    /// The backend.
    pub backend: String,
    /// Virtual (Tokio's paused clock) or wall-clock time.
    pub clock: String,
    /// Acquisitions per process.
    pub acquisitions_per_process: u32,
    /// The critical section, ms.
    pub critical_section_ms: f64,
    /// The pause between acquisitions, ms.
    pub pause_ms: f64,
    /// The seed.
    pub seed: u64,
    /// The lease TTL, s.
    pub lease_ttl_s: f64,
    /// The baseline's backoff when another owner holds, ms.
    pub baseline_owner_backoff_max_ms: f64,
    /// The baseline's backoff step after a concurrent attempt, ms.
    pub baseline_concurrent_backoff_step_ms: f64,
    /// The queue algorithm's poll bounds, ms.
    pub poll_min_ms: f64,
    /// The queue algorithm's poll bounds, ms.
    pub poll_max_ms: f64,
    /// The queue algorithm's poll jitter, percent.
    pub poll_jitter_percent: u32,
    /// Whether the queue algorithm's two-round-trip fast path is on.
    pub fast_path: bool,
    /// The queue reads' margin: fixed (`--queue-margin`), adaptive within bounds
    /// (`--margin-acquisitions`, lock-core's default) or the safe one.
    pub queue_margin: String,
    /// Whether a margin shorter than the safe one may hide a waiter, which then rejoins.
    pub margin_may_hide: bool,
}

impl SettingsReport {
    /// Describes `settings` on `backend`.
    pub fn new(settings: &Settings, backend: String, clock: &str) -> Self {
        let lock = &settings.lock;
        SettingsReport {
            backend,
            clock: clock.to_owned(),
            acquisitions_per_process: settings.acquisitions,
            critical_section_ms: ms(settings.critical_section),
            pause_ms: ms(settings.pause),
            seed: settings.seed,
            lease_ttl_s: lock.lease_ttl.as_secs_f64(),
            baseline_owner_backoff_max_ms: ms(lock.baseline.owner_backoff_max),
            baseline_concurrent_backoff_step_ms: ms(lock.baseline.concurrent_backoff_step),
            poll_min_ms: ms(lock.poll.min_interval),
            poll_max_ms: ms(lock.poll.max_interval),
            poll_jitter_percent: lock.poll.jitter_percent,
            fast_path: lock.fast_path,
            queue_margin: crate::tombstones::describe_margin(lock),
            margin_may_hide: lock.rejoins_when_passed(),
        }
    }
}

/// Everything the main command reports.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// How the experiment was set up.
    pub settings: SettingsReport,
    /// The variant reported as the "new" algorithm (the queue, with or without fencing).
    pub new: Variant,
    /// The measured round trip.
    pub round_trip: RoundTripReport,
    /// One summary per run.
    pub runs: Vec<RunSummary>,
    /// The [`TARGETS`], each with its verdict.
    pub targets: Vec<Target>,
    /// Wall-clock seconds the whole experiment took.
    pub wall_seconds: f64,
}

impl Report {
    /// The summary of `variant` with `processes` processes, if it ran.
    pub fn run(&self, variant: Variant, processes: usize) -> Option<&RunSummary> {
        self.runs
            .iter()
            .find(|run| run.spec.variant == variant && run.spec.processes == processes)
    }

    /// Builds the report, evaluating the targets.
    pub fn new(
        settings: SettingsReport,
        round_trip: RoundTrip,
        runs: &[RunResult],
        new: Variant,
        wall_time: Duration,
    ) -> Self {
        let mut report = Report {
            settings,
            new,
            round_trip: round_trip.into(),
            runs: runs.iter().map(RunSummary::of).collect(),
            targets: Vec::new(),
            wall_seconds: wall_time.as_secs_f64(),
        };
        report.targets = report.evaluate();
        report
    }

    fn evaluate(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        let most = self
            .runs
            .iter()
            .map(|run| run.spec.processes)
            .max()
            .unwrap_or(1);
        let fewest = self
            .runs
            .iter()
            .map(|run| run.spec.processes)
            .min()
            .unwrap_or(1);
        if let Some(queue) = self.run(self.new, most) {
            targets.push(Target {
                name: format!("queue P={most}: max wait / mean wait"),
                value: queue.max_over_mean,
                bound: "<= 3 (aim 2)".into(),
                met: Some(queue.max_over_mean <= 3.0),
                detail: format!(
                    "max {:.1} ms, mean {:.1} ms",
                    queue.wait_ms.max, queue.wait_ms.mean
                ),
            });
        }
        if let Some(baseline) = self.run(Variant::BASELINE, most).filter(|_| most > 1) {
            targets.push(Target {
                name: format!("baseline P={most}: max wait / mean wait (starvation)"),
                value: baseline.max_over_mean,
                bound: ">= 100 (orders of magnitude)".into(),
                met: Some(baseline.max_over_mean >= 100.0),
                detail: format!(
                    "max {:.1} ms, mean {:.1} ms",
                    baseline.wait_ms.max, baseline.wait_ms.mean
                ),
            });
        }
        if let Some(queue) = self.run(self.new, most) {
            let floor = self.round_trip.handoff_floor_ms;
            let applies = self.settings.critical_section_ms == 0.0 && self.settings.pause_ms == 0.0;
            let ratio = queue.time_per_acquisition_ms / floor;
            targets.push(Target {
                name: format!("queue P={most}: time per acquisition / 3r"),
                value: ratio,
                bound: "<= 2 (no critical section, no pause)".into(),
                met: applies.then_some(ratio <= 2.0),
                detail: format!(
                    "{:.2} ms per acquisition, r = {:.3} ms, 3r = {floor:.3} ms{}",
                    queue.time_per_acquisition_ms,
                    self.round_trip.r_ms,
                    queue
                        .request_round_trip_ms
                        .map_or_else(String::new, |served| format!(
                            "; the lockers' requests took {served:.3} ms during the run, \
                         against which the ratio is {:.2}",
                            queue.time_per_acquisition_ms / (3.0 * served)
                        ))
                ),
            });
        }
        if let (Some(contended), Some(alone)) =
            (self.run(self.new, most), self.run(self.new, fewest))
            && fewest == 1
            && most > 1
        {
            let ratio = contended.requests_per_acquisition / alone.requests_per_acquisition;
            targets.push(Target {
                name: format!("queue P={most}: requests per acquisition / uncontended"),
                value: ratio,
                bound: "<= 2".into(),
                met: Some(ratio <= 2.0),
                detail: format!(
                    "{:.2} at P={most}, {:.2} at P=1 (release included)",
                    contended.requests_per_acquisition, alone.requests_per_acquisition
                ),
            });
        }
        targets
    }

    /// Table 1, Table 2, the details, fencing and targets, as printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Setup: {}", self.settings.backend);
        let _ = writeln!(
            out,
            "       {} time; {} acquisitions per process; critical section {} ms; pause {} ms; \
             lease TTL {} s; seed {}",
            self.settings.clock,
            self.settings.acquisitions_per_process,
            self.settings.critical_section_ms,
            self.settings.pause_ms,
            self.settings.lease_ttl_s,
            self.settings.seed
        );
        let _ = writeln!(
            out,
            "       measured r = {:.3} ms (write {:.3}, read {:.3}, delete {:.3}; {} each); \
             hand-off floor 3r = {:.3} ms",
            self.round_trip.r_ms,
            self.round_trip.write_ms,
            self.round_trip.read_ms,
            self.round_trip.delete_ms,
            self.round_trip.samples,
            self.round_trip.handoff_floor_ms
        );
        let _ = writeln!(
            out,
            "       new = queue algorithm {} (fast path {}, polls {}..{} ms, jitter {}%); \
             old = baseline (shadow row, backoff 0..{} ms / 0..{}·attempt ms); \
             bakery = the Cassandra wiki's bakery lock with our lease, one client id per \
             process\n",
            if self.new.fencing {
                "with fencing tokens"
            } else {
                "without fencing tokens, as in the thesis"
            },
            if self.settings.fast_path { "on" } else { "off" },
            self.settings.poll_min_ms,
            self.settings.poll_max_ms,
            self.settings.poll_jitter_percent,
            self.settings.baseline_owner_backoff_max_ms,
            self.settings.baseline_concurrent_backoff_step_ms
        );
        self.thesis_table(
            &mut out,
            "Table 1: Mean time to acquire the lock",
            &THESIS_MEAN,
            |s| s.wait_ms.mean,
        );
        self.thesis_table(
            &mut out,
            "Table 2: Maximum time to acquire the lock",
            &THESIS_MAX,
            |s| s.wait_ms.max,
        );
        self.details_table(&mut out);
        self.fencing_table(&mut out);
        if self.settings.margin_may_hide {
            let margin = &self.settings.queue_margin;
            let rejoins: Vec<String> = self
                .runs
                .iter()
                .filter(|run| run.spec.variant.algorithm == Algorithm::Queue)
                .map(|run| format!("{} P={}: {}", run.label, run.spec.processes, run.rejoins))
                .collect();
            let _ = writeln!(
                out,
                "Queue margin {margin}: acquisitions it hid, which joined the queue again: {}\n",
                rejoins.join(", ")
            );
        }
        let _ = writeln!(out, "Targets: {TARGETS}.");
        for target in &self.targets {
            let verdict = match target.met {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "n/a",
            };
            let _ = writeln!(
                out,
                "  [{verdict:^7}] {}: {:.2} (bound {}); {}",
                target.name, target.value, target.bound, target.detail
            );
        }
        out
    }

    fn processes(&self) -> Vec<usize> {
        let mut processes: Vec<usize> = self.runs.iter().map(|run| run.spec.processes).collect();
        processes.sort_unstable();
        processes.dedup();
        processes
    }

    fn thesis_table(
        &self,
        out: &mut String,
        title: &str,
        thesis: &[(usize, f64, f64)],
        value: impl Fn(&RunSummary) -> f64,
    ) {
        let cell = |run: Option<&RunSummary>| {
            run.map_or_else(|| "-".to_owned(), |run| format!("{:.1} ms", value(run)))
        };
        let _ = writeln!(out, "{title}");
        let _ = writeln!(
            out,
            "  {:<10} {:>14} {:>14} {:>14}   {:>12} {:>12}",
            "processes", "new", "old", "bakery", "thesis new", "thesis old"
        );
        for processes in self.processes() {
            let (thesis_new, thesis_old) = thesis
                .iter()
                .find(|(p, _, _)| *p == processes)
                .map_or(("-".to_owned(), "-".to_owned()), |(_, new, old)| {
                    (format!("{new} ms"), format!("{old} ms"))
                });
            let _ = writeln!(
                out,
                "  {:<10} {:>14} {:>14} {:>14}   {:>12} {:>12}",
                processes,
                cell(self.run(self.new, processes)),
                cell(self.run(Variant::BASELINE, processes)),
                cell(self.run(Variant::BAKERY, processes)),
                thesis_new,
                thesis_old
            );
        }
        let _ = writeln!(out);
    }

    fn details_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "Details (waits in ms; req/acq = storage requests per acquisition, release included; r ms = their mean round trip during the run; Jain = fairness index over windows of ~10 acquisitions per process)"
        );
        let _ = writeln!(
            out,
            "  {:<14} {:>2} {:>8} {:>8} {:>8} {:>9} {:>8} {:>9} {:>8} {:>6} {:>8} {:>11} {:>7} {:>8}",
            "algorithm",
            "P",
            "mean",
            "p50",
            "p99",
            "max",
            "max/mean",
            "ms/acq",
            "req/acq",
            "r ms",
            "Jain",
            "Jain (min)",
            "dead/rd",
            "wall s"
        );
        for run in &self.runs {
            let _ = writeln!(
                out,
                "  {:<14} {:>2} {:>8.2} {:>8.2} {:>8.2} {:>9.1} {:>8.1} {:>9.3} {:>8.2} {:>6} {:>8.3} {:>11.3} {:>7} {:>8.2}",
                run.label,
                run.spec.processes,
                run.wait_ms.mean,
                run.wait_ms.p50,
                run.wait_ms.p99,
                run.wait_ms.max,
                run.max_over_mean,
                run.time_per_acquisition_ms,
                run.requests_per_acquisition,
                run.request_round_trip_ms
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.3}")),
                run.fairness.mean,
                run.fairness.min,
                run.dead_cells_per_read
                    .map_or_else(|| "-".to_owned(), |dead| format!("{dead:.1}")),
                run.wall_seconds
            );
        }
        let violations: u64 = self.runs.iter().map(|run| run.exclusion_violations).sum();
        let _ = writeln!(
            out,
            "  mutual exclusion violations over all runs: {violations}\n"
        );
        let _ = writeln!(
            out,
            "Round trips of the lockers' requests during each run, ms (read / write / delete):"
        );
        for run in &self.runs {
            let [read, write, delete] = run
                .read_write_delete_round_trip_ms
                .map(|r| r.map_or_else(|| "-".to_owned(), |r| format!("{r:.3}")));
            let _ = writeln!(
                out,
                "  {:<14} {:>2}  {read} / {write} / {delete}",
                run.label, run.spec.processes
            );
        }
        let _ = writeln!(out);
        let queue_runs = self
            .runs
            .iter()
            .filter(|run| run.spec.variant.algorithm == lock_core::Algorithm::Queue);
        let split = queue_runs.filter_map(|run| {
            Some(HandoffRow {
                label: &run.label,
                processes: run.spec.processes,
                handoffs: run.handoffs.as_ref()?,
                repaired_reads_per_acquisition: run.repaired_reads_per_acquisition,
            })
        });
        if self.runs.iter().any(|run| run.handoffs.is_some()) {
            let _ = writeln!(out, "{}", render_table(split, self.round_trip.r_ms));
        }
    }

    fn fencing_table(&self, out: &mut String) {
        let rows: Vec<(usize, &RunSummary, &RunSummary)> = self
            .processes()
            .into_iter()
            .filter_map(|p| {
                Some((
                    p,
                    self.run(Variant::QUEUE, p)?,
                    self.run(Variant::QUEUE_FENCED, p)?,
                ))
            })
            .collect();
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "Cost of fencing tokens (lock-core's default; queue algorithm):"
        );
        let _ = writeln!(
            out,
            "  {:>2} {:>16} {:>16} {:>14} {:>14}",
            "P", "req/acq off/on", "ms/acq off/on", "mean wait", "max wait"
        );
        for (processes, off, on) in rows {
            let _ = writeln!(
                out,
                "  {:>2} {:>16} {:>16} {:>14} {:>14}",
                processes,
                format!(
                    "{:.2}/{:.2}",
                    off.requests_per_acquisition, on.requests_per_acquisition
                ),
                format!(
                    "{:.2}/{:.2}",
                    off.time_per_acquisition_ms, on.time_per_acquisition_ms
                ),
                format!("{:.1}/{:.1}", off.wait_ms.mean, on.wait_ms.mean),
                format!("{:.1}/{:.1}", off.wait_ms.max, on.wait_ms.max),
            );
        }
        let _ = writeln!(out);
    }
}

/// One line of `acquisitions.csv`; the field names are the header.
#[derive(Serialize)]
struct CsvAcquisition<'a> {
    algorithm: &'a str,
    processes: usize,
    /// From 1.
    process: usize,
    number: u32,
    #[serde(serialize_with = "three_decimals")]
    acquired_at_ms: f64,
    #[serde(serialize_with = "three_decimals")]
    wait_ms: f64,
    requests: u32,
}

/// Milliseconds with three decimals (to the microsecond), as the file has always had them.
fn three_decimals<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{value:.3}"))
}

/// Writes `results.json` (the report) and `acquisitions.csv` (every acquisition) into `dir`.
pub fn write_files(dir: &Path, report: &Report, runs: &[RunResult]) -> Result<(), BoxError> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("results.json"), json)?;
    let path = dir.join("acquisitions.csv");
    let cannot = |error: csv::Error| format!("cannot write {}: {error}", path.display());
    let mut csv = csv::Writer::from_path(&path).map_err(cannot)?;
    for run in runs {
        let label = run.spec.variant.label();
        for a in &run.acquisitions {
            csv.serialize(CsvAcquisition {
                algorithm: &label,
                processes: run.spec.processes,
                process: a.process + 1,
                number: a.number,
                acquired_at_ms: ms(a.acquired_at),
                wait_ms: ms(a.wait),
                requests: a.requests,
            })
            .map_err(cannot)?;
        }
    }
    csv.flush()
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Acquisition, RequestCounts};

    #[test]
    fn the_acquisitions_file_keeps_its_columns_and_decimals() {
        let acquisitions = (0..2)
            .map(|index| Acquisition {
                process: index,
                number: 1,
                acquired_at: Duration::from_micros(1_500 * (index as u64 + 1)),
                wait: Duration::from_micros(1_234_567),
                requests: 4,
                rejoins: u32::try_from(index).unwrap(),
            })
            .collect();
        let run = RunResult {
            spec: RunSpec {
                variant: Variant::QUEUE_FENCED,
                processes: 2,
            },
            acquisitions,
            duration: Duration::from_millis(3),
            requests: RequestCounts::default(),
            cluster: None,
            exclusion_violations: 0,
            handoffs: None,
            wall_time: Duration::ZERO,
        };
        let settings = SettingsReport {
            backend: "test".into(),
            clock: "virtual".into(),
            acquisitions_per_process: 1,
            critical_section_ms: 0.0,
            pause_ms: 0.0,
            seed: 1,
            lease_ttl_s: 10.0,
            baseline_owner_backoff_max_ms: 1000.0,
            baseline_concurrent_backoff_step_ms: 50.0,
            poll_min_ms: 1.0,
            poll_max_ms: 250.0,
            poll_jitter_percent: 25,
            fast_path: true,
            queue_margin: "50ms (fixed)".into(),
            margin_may_hide: true,
        };
        let round_trip = RoundTrip {
            samples: 1,
            write: Duration::from_millis(1),
            read: Duration::from_millis(1),
            delete: Duration::from_millis(1),
        };
        let runs = [run];
        let report = Report::new(settings, round_trip, &runs, Variant::QUEUE, Duration::ZERO);
        let dir = std::env::temp_dir().join(format!("lock-bench-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_files(&dir, &report, &runs).unwrap();
        let csv = std::fs::read_to_string(dir.join("acquisitions.csv")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            csv,
            "algorithm,processes,process,number,acquired_at_ms,wait_ms,requests\n\
             queue+fencing,2,1,1,1.500,1234.567,4\n\
             queue+fencing,2,2,1,3.000,1234.567,4\n"
        );
        // With a queue margin set, the report says how many acquisitions it hid.
        assert!(
            report.render().contains(
                "Queue margin 50ms (fixed): acquisitions it hid, which joined the queue again: \
                 queue+fencing P=2: 1"
            ),
            "{}",
            report.render()
        );
    }
}
