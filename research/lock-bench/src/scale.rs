//! `scale`: how an algorithm's costs grow with the number of waiters.
//!
//! Runs the experiment on the simulator for every P of a sweep (default 1, 2, 5, 10, 20,
//! 50 and 64 processes, 200 acquisitions each, no fencing tokens) and prints, per algorithm
//! and P, the three figures that should stay flat as waiters grow: storage requests per
//! acquisition over the uncontended figure, time per acquisition (less the critical section,
//! `--critical-section`) over the hand-off floor `3r`, and the maximum wait over the mean. It writes them to `scale.json` and plots them
//! against P in `scale.png`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use lock_storage_memory::Latency;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::BoxError;
use crate::experiment::{self, Backend};
use crate::handoff::{HandoffRow, HandoffSummary, render_table};
use crate::options::{AlgorithmArg, Fencing, RunArgs, SimulationDefaults, process_count, runtime};
use crate::plot::{FONT, boxed, colour, draw_legend, format_number, register_fonts};
use crate::report::RunSummary;
use crate::units::{LAN, describe_latency, parse_duration, parse_latency};

/// The options of `lock-bench scale`.
#[derive(Clone, Debug, Args)]
pub struct ScaleArgs {
    /// Process counts to sweep, comma-separated.
    #[arg(
        short,
        long,
        value_delimiter = ',',
        default_values = ["1", "2", "5", "10", "20", "50", "64"],
        value_parser = process_count()
    )]
    pub processes: Vec<usize>,
    /// Acquisitions per process in each run.
    #[arg(short = 'n', long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub acquisitions: u32,
    /// The algorithms to sweep.
    #[arg(long, value_delimiter = ',', default_values = ["queue", "baseline"])]
    pub algorithms: Vec<AlgorithmArg>,
    /// The seed of the simulation and of every locker.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The simulated latency of one message (one way), as for the experiment: `lan` (the
    /// default), `thesis` (a quorum round trip of about 5 ms), `fixed:DUR`,
    /// `uniform:MIN,MAX`, `exp:MIN,MEAN_EXTRA` or `lognormal:MEDIAN,P99`.
    #[arg(long, default_value = "lan", value_parser = parse_latency)]
    pub latency: Latency,
    /// Where to write scale.json and scale.png (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Turn off the queue algorithm's two-round-trip fast path, for comparison.
    #[arg(long)]
    pub no_fast_path: bool,
    /// Keep the queue algorithm's next owner from waiting in the main row (it does by
    /// default), for comparison.
    #[arg(long)]
    pub no_wait_in_main_row: bool,
    /// How long a queue lock released with nobody queued behind stays with its locker for
    /// a quick retake (lock-core's `LockConfig::linger`; default off).
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_duration)]
    pub linger: Duration,
    /// Give every locker wake-up hints (lock-core's `LockerBuilder::wake_hints`), each
    /// taking the simulated network's one-way latency.
    #[arg(long)]
    pub wake_hints: bool,
    /// How long each process holds the lock before releasing it (e.g. `2ms`); the
    /// hand-off is then the time per acquisition less this.
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_duration)]
    pub critical_section: Duration,
    /// Also split each run's hand-offs into detection, the read that saw the release, the
    /// main write and the main read, from a log of every request the lockers sent.
    #[arg(long)]
    pub handoffs: bool,
    /// Turn off the simulated replicas' blocking read repair, to measure what a read that
    /// meets disagreeing replicas costs the hand-off. Cassandra's table option
    /// `read_repair = 'NONE'` does less: a digest mismatch still costs it a data read.
    #[arg(long)]
    pub no_read_repair: bool,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// One algorithm at one P.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    /// The algorithm's label (`queue`, `baseline`, `bakery`).
    pub algorithm: String,
    /// Processes contending.
    pub processes: usize,
    /// Storage requests per acquisition, release included.
    pub requests_per_acquisition: f64,
    /// The same over the algorithm's figure at the sweep's smallest P.
    pub requests_over_uncontended: f64,
    /// Time per acquisition over the hand-off floor `3r`.
    pub handoff_over_3r: f64,
    /// Maximum wait over mean wait. At small P this mostly measures the network's slow
    /// round trips: with one process it is already about two on the simulator.
    pub max_over_mean: f64,
    /// Fairness between processes: the worst window's Jain index of acquisitions per
    /// process (1 when every process takes the same share, `1/P` when one takes all).
    pub jain_min: f64,
    /// Acquisitions that overlapped another's (must be 0).
    pub exclusion_violations: u64,
    /// Reads per acquisition that met replicas answering differently and waited for the
    /// blocking read repair: on Cassandra, `Mismatch (Blocking)` of `nodetool netstats`
    /// over the acquisitions.
    pub repaired_reads_per_acquisition: f64,
    /// Where the hand-offs' time went (with `--handoffs`).
    pub handoffs: Option<HandoffSummary>,
}

/// How a sweep ran, so that two reports can be told apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScaleSettings {
    /// The seed of the simulation and of every locker.
    pub seed: u64,
    /// The simulated latency of one message, as `--latency` takes it.
    pub latency: String,
    /// Acquisitions per process in each run.
    pub acquisitions: u32,
    /// Whether the queue algorithm's fast path was on.
    pub fast_path: bool,
    /// Whether the queue algorithm's next owner waited in the main row.
    pub wait_in_main_row: bool,
    /// How long a released lock lingered for a retake, in µs (0: off).
    pub linger_micros: u64,
    /// Whether the lockers sent each other wake-up hints.
    pub wake_hints: bool,
    /// Whether the simulated replicas repaired on reads (blocking).
    pub read_repair: bool,
    /// How long each process held the lock, in µs.
    pub critical_section_micros: u64,
}

impl ScaleSettings {
    fn of(args: &ScaleArgs) -> Self {
        ScaleSettings {
            seed: args.seed,
            latency: describe_latency(&args.latency),
            acquisitions: args.acquisitions,
            fast_path: !args.no_fast_path,
            wait_in_main_row: !args.no_wait_in_main_row,
            linger_micros: u64::try_from(args.linger.as_micros()).unwrap_or(u64::MAX),
            wake_hints: args.wake_hints,
            read_repair: !args.no_read_repair,
            critical_section_micros: u64::try_from(args.critical_section.as_micros())
                .unwrap_or(u64::MAX),
        }
    }

    /// How long each process held the lock, in ms.
    fn critical_section_ms(&self) -> f64 {
        self.critical_section_micros as f64 / 1e3
    }

    /// The settings as the table's heading names them: the seed and the acquisitions, and
    /// whatever differs from lock-core's defaults and the simulator's.
    fn describe(&self) -> String {
        let mut text = format!(
            "seed {}, {} acquisitions per process",
            self.seed, self.acquisitions
        );
        if self.latency != describe_latency(&LAN) {
            let _ = write!(text, ", one-way latency {}", self.latency);
        }
        if self.critical_section_micros > 0 {
            let _ = write!(
                text,
                ", critical section {} ms (taken off the hand-off)",
                self.critical_section_ms()
            );
        }
        if self.linger_micros > 0 {
            let _ = write!(text, ", linger {} ms", self.linger_micros as f64 / 1e3);
        }
        for (differs, what) in [
            (!self.fast_path, "no fast path"),
            (!self.wait_in_main_row, "no waiting in the main row"),
            (!self.read_repair, "no read repair"),
            (self.wake_hints, "wake-up hints"),
        ] {
            if differs {
                text.push_str(", ");
                text.push_str(what);
            }
        }
        text
    }
}

/// What `scale` measured.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleReport {
    /// How the sweep ran.
    pub settings: ScaleSettings,
    /// The measured round trip `r`, in ms.
    pub round_trip_ms: f64,
    /// Every algorithm at every P, by algorithm then P.
    pub rows: Vec<ScaleRow>,
}

impl ScaleReport {
    /// The rows of `runs`, each algorithm's requests compared with its run at the smallest P.
    pub fn new(settings: ScaleSettings, round_trip_ms: f64, runs: &[RunSummary]) -> Self {
        let mut rows: Vec<ScaleRow> = runs
            .iter()
            .map(|run| {
                let uncontended = runs
                    .iter()
                    .filter(|other| other.label == run.label)
                    .min_by_key(|other| other.spec.processes)
                    .map_or(f64::NAN, |other| other.requests_per_acquisition);
                ScaleRow {
                    algorithm: run.label.clone(),
                    processes: run.spec.processes,
                    requests_per_acquisition: run.requests_per_acquisition,
                    requests_over_uncontended: run.requests_per_acquisition / uncontended,
                    handoff_over_3r: (run.time_per_acquisition_ms - settings.critical_section_ms())
                        / (3.0 * round_trip_ms),
                    max_over_mean: run.max_over_mean,
                    jain_min: run.fairness.min,
                    exclusion_violations: run.exclusion_violations,
                    repaired_reads_per_acquisition: run
                        .repaired_reads_per_acquisition
                        .unwrap_or(f64::NAN),
                    handoffs: run.handoffs,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            (a.algorithm.as_str(), a.processes).cmp(&(b.algorithm.as_str(), b.processes))
        });
        ScaleReport {
            settings,
            round_trip_ms,
            rows,
        }
    }

    /// The table `scale` prints.
    pub fn render(&self) -> String {
        let mut text = format!(
            "Scale: costs against the number of processes (simulator, virtual time, {}; r = {:.3} ms)\n",
            self.settings.describe(),
            self.round_trip_ms
        );
        let _ = writeln!(
            text,
            "  {:<10} {:>4} {:>9} {:>14} {:>12} {:>9} {:>9}",
            "algorithm", "P", "req/acq", "÷ uncontended", "hand-off/3r", "max/mean", "Jain min"
        );
        for row in &self.rows {
            let _ = writeln!(
                text,
                "  {:<10} {:>4} {:>9.2} {:>14.2} {:>12.2} {:>9.2} {:>9.3}",
                row.algorithm,
                row.processes,
                row.requests_per_acquisition,
                row.requests_over_uncontended,
                row.handoff_over_3r,
                row.max_over_mean,
                row.jain_min
            );
        }
        let violations: u64 = self.rows.iter().map(|row| row.exclusion_violations).sum();
        let _ = writeln!(text, "  mutual exclusion violations: {violations}");
        if self.rows.iter().any(|row| row.handoffs.is_some()) {
            self.render_handoffs(&mut text);
        }
        text
    }

    /// The table of `--handoffs`, with the reads per acquisition that waited for a read
    /// repair.
    fn render_handoffs(&self, text: &mut String) {
        let rows = self.rows.iter().filter_map(|row| {
            let handoffs = row.handoffs.as_ref()?;
            Some(HandoffRow {
                label: &row.algorithm,
                processes: row.processes,
                handoffs,
                repaired_reads_per_acquisition: Some(row.repaired_reads_per_acquisition),
            })
        });
        text.push('\n');
        text.push_str(&render_table(rows, self.round_trip_ms));
    }
}

/// Runs `lock-bench scale`.
pub fn run(args: &ScaleArgs) -> Result<(), BoxError> {
    if let Some(processes) = first_repeated(&args.processes) {
        return Err(format!(
            "--processes lists {processes} more than once; give each process count once"
        )
        .into());
    }
    if let Some(algorithm) = first_repeated(&args.algorithms) {
        return Err(format!(
            "--algorithms lists {} more than once; give each algorithm once",
            format!("{algorithm:?}").to_lowercase()
        )
        .into());
    }
    if args.latency.is_always_zero() {
        return Err(format!(
            "--latency {} makes every round trip zero, and scale's ratios are over the round \
             trip; give a latency above zero (the default is lan)",
            describe_latency(&args.latency)
        )
        .into());
    }
    let mut run_args = RunArgs::defaults()?;
    run_args.processes.clone_from(&args.processes);
    run_args.acquisitions = Some(args.acquisitions);
    run_args.algorithms.clone_from(&args.algorithms);
    run_args.fencing = Fencing::Off;
    run_args.quiet = args.quiet;
    run_args.no_fast_path = args.no_fast_path;
    run_args.no_wait_in_main_row = args.no_wait_in_main_row;
    run_args.linger = Some(args.linger);
    run_args.wake_hints = args.wake_hints;
    run_args.critical_section = args.critical_section;
    run_args.handoffs = args.handoffs;
    run_args.backend.seed = args.seed;
    run_args.backend.latency = args.latency.clone();
    let settings = run_args.settings()?;
    let mut backend = run_args
        .backend
        .backend(&settings.lock, SimulationDefaults::EXPERIMENT)?;
    let Backend::Simulated(cluster) = &mut backend else {
        return Err("scale runs on the simulator only".into());
    };
    cluster.read_repair = !args.no_read_repair;
    let specs = run_args.specs();
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let (round_trip, runs) = runtime(true, false)?.block_on(async {
        let round_trip =
            experiment::measure_round_trip(&backend, &settings, run_args.round_trip_samples)
                .await?;
        let runs = experiment::run_all(&backend, &settings, &specs, "scale ").await?;
        Ok::<_, BoxError>((round_trip, runs))
    })?;
    let summaries: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
    let report = ScaleReport::new(
        ScaleSettings::of(args),
        round_trip.r().as_secs_f64() * 1e3,
        &summaries,
    );
    let json = out.join("scale.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .map_err(|error| format!("cannot write {}: {error}", json.display()))?;
    let picture = out.join("scale.png");
    draw(&picture, &report)?;
    crate::emit(&format!(
        "{}\nWrote {} and {}\n",
        report.render(),
        json.display(),
        picture.display()
    ))?;
    let violations: u64 = report.rows.iter().map(|row| row.exclusion_violations).sum();
    if violations > 0 {
        return Err(format!("{violations} mutual exclusion violations: the lock is broken").into());
    }
    Ok(())
}

/// The first item of `items` that occurs again later: a sweep that names a value twice
/// would run it twice and print it twice.
fn first_repeated<T: PartialEq>(items: &[T]) -> Option<&T> {
    items
        .iter()
        .enumerate()
        .find(|(at, item)| items[at + 1..].contains(item))
        .map(|(_, item)| item)
}

/// One of `scale`'s figures, read from a row.
type ScaleFigure = fn(&ScaleRow) -> f64;

/// Draws `scale`'s three figures against P, one panel each, a line per algorithm.
pub fn draw(path: &Path, report: &ScaleReport) -> Result<(), BoxError> {
    register_fonts();
    let mut algorithms: Vec<&str> = Vec::new();
    for row in &report.rows {
        if !algorithms.contains(&row.algorithm.as_str()) {
            algorithms.push(&row.algorithm);
        }
    }
    let p_max = report
        .rows
        .iter()
        .map(|row| row.processes)
        .max()
        .unwrap_or(1) as f64;
    let panels: [(&str, ScaleFigure); 3] = [
        ("requests per acquisition ÷ uncontended", |row| {
            row.requests_over_uncontended
        }),
        ("time per acquisition ÷ 3r", |row| row.handoff_over_3r),
        ("maximum wait ÷ mean wait", |row| row.max_over_mean),
    ];
    let root = BitMapBackend::new(path, (1500, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(boxed)?;
    let area = root
        .margin(10, 0, 0, 0)
        .titled(
            "Costs against the number of processes (simulator)",
            (FONT, 22).into_font().style(FontStyle::Bold),
        )
        .map_err(boxed)?;
    for (panel, (title, figure)) in area.split_evenly((1, 3)).iter().zip(panels) {
        let values = || {
            report
                .rows
                .iter()
                .map(figure)
                .filter(|value| value.is_finite() && *value > 0.0)
        };
        let y_max = values().fold(1.0, f64::max);
        let y_min = values().fold(1.0, f64::min);
        let mut chart = ChartBuilder::on(panel)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..p_max * 1.05, (y_min * 0.9..y_max * 1.15).log_scale())
            .map_err(boxed)?;
        chart
            .configure_mesh()
            .x_desc("processes P")
            .y_desc("log scale")
            .y_labels(8)
            .axis_desc_style((FONT, 16))
            .y_label_formatter(&|y| format_number(*y))
            .label_style((FONT, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(boxed)?;
        for (index, algorithm) in algorithms.iter().enumerate() {
            let style = colour(index).stroke_width(3);
            let points: Vec<(f64, f64)> = report
                .rows
                .iter()
                .filter(|row| row.algorithm == *algorithm)
                .map(|row| (row.processes as f64, figure(row)))
                .filter(|(_, value)| value.is_finite() && *value > 0.0)
                .collect();
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|point| Circle::new(*point, 4, style.filled())),
                )
                .map_err(boxed)?;
            chart
                .draw_series(LineSeries::new(points, style))
                .map_err(boxed)?
                .label(*algorithm)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 15)?;
    }
    root.present().map_err(boxed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// The command's options alone, parsed as `lock-bench scale` parses them.
    #[derive(Debug, Parser)]
    #[command(name = "scale")]
    struct ScaleCommand {
        #[command(flatten)]
        args: ScaleArgs,
    }

    /// A quiet sweep of the queue algorithm at seed 1, into a directory of its own.
    fn sweep_args(tag: &str, processes: Vec<usize>, acquisitions: u32) -> ScaleArgs {
        let out = std::env::temp_dir().join(format!("lock-bench-{tag}-{}", std::process::id()));
        ScaleArgs {
            processes,
            acquisitions,
            algorithms: vec![AlgorithmArg::Queue],
            seed: 1,
            latency: LAN,
            out: Some(out),
            quiet: true,
            no_fast_path: false,
            no_wait_in_main_row: false,
            linger: Duration::ZERO,
            wake_hints: false,
            critical_section: Duration::ZERO,
            handoffs: false,
            no_read_repair: false,
        }
    }

    /// Runs `args` and returns its `scale.json`, once the plot is drawn too; removes both.
    fn sweep(args: &ScaleArgs) -> serde_json::Value {
        run(args).unwrap();
        let out = args.out.as_ref().unwrap();
        let report =
            serde_json::from_str(&std::fs::read_to_string(out.join("scale.json")).unwrap())
                .unwrap();
        assert!(out.join("scale.png").is_file());
        std::fs::remove_dir_all(out).unwrap();
        report
    }

    #[test]
    fn handoffs_are_split_into_stages_that_add_up_to_the_time_per_acquisition() {
        let report = sweep(&ScaleArgs {
            handoffs: true,
            ..sweep_args("handoffs", vec![1, 3], 30)
        });
        let round_trip = report["round_trip_ms"].as_f64().unwrap();
        let rows = report["rows"].as_array().unwrap();
        // One process takes the fast path every time: no hand-off to split.
        assert_eq!(rows[0]["handoffs"]["handoffs"], 0, "{}", rows[0]);
        let contended = &rows[1]["handoffs"];
        let count = contended["handoffs"].as_u64().unwrap();
        assert!(
            count >= 80,
            "most of the 90 acquisitions are hand-offs: {contended}"
        );
        let stage = |name: &str| contended[name].as_f64().unwrap();
        let stages = stage("detection_ms")
            + stage("seeing_read_ms")
            + stage("main_write_ms")
            + stage("main_read_and_turn_ms");
        assert!((stages - stage("total_ms")).abs() < 1e-9, "{contended}");
        for name in ["seeing_read_ms", "main_write_ms", "main_read_and_turn_ms"] {
            assert!(
                stage(name) >= 0.5 * round_trip,
                "a round trip at least: {contended}"
            );
        }
        let per_acquisition = rows[1]["handoff_over_3r"].as_f64().unwrap() * 3.0 * round_trip;
        assert!(
            (stage("total_ms") / per_acquisition - 1.0).abs() < 0.2,
            "back to back, a hand-off is an acquisition's time ({per_acquisition} ms): {contended}"
        );
    }

    #[test]
    fn a_sweep_runs_on_the_network_it_is_given_and_names_it() {
        let report = sweep(&ScaleArgs {
            latency: Latency::Fixed(std::time::Duration::from_millis(3)),
            ..sweep_args("latency", vec![1, 2], 10)
        });
        assert_eq!(report["settings"]["latency"], "fixed:3000us");
        let round_trip = report["round_trip_ms"].as_f64().unwrap();
        assert!(
            (round_trip - 6.0).abs() < 0.01,
            "two messages of 3 ms each: {round_trip} ms"
        );
        let default = sweep(&sweep_args("latency-lan", vec![1], 10));
        assert_eq!(default["settings"]["latency"], describe_latency(&LAN));
        assert!(
            default["round_trip_ms"].as_f64().unwrap() < 2.0,
            "{default}"
        );
    }

    /// One process that takes the lock again while it lingers does so with two reads (the
    /// retake), and releases with no request; contended, holders rarely find the lock idle
    /// (at the start, or once the others are done), so the cost barely moves.
    #[test]
    fn a_lingering_lock_is_taken_again_with_two_reads_and_only_when_idle() {
        let rows = |linger: Duration| {
            let report = sweep(&ScaleArgs {
                linger,
                ..sweep_args(&format!("linger-{}", linger.as_micros()), vec![1, 3], 30)
            });
            assert_eq!(
                report["settings"]["linger_micros"],
                u64::try_from(linger.as_micros()).unwrap()
            );
            let rows = report["rows"].as_array().unwrap().clone();
            let figure = |row: usize, name: &str| rows[row][name].as_f64().unwrap();
            [
                figure(0, "requests_per_acquisition"),
                figure(1, "requests_per_acquisition"),
                figure(0, "handoff_over_3r"),
            ]
        };
        let without = rows(Duration::ZERO);
        let with = rows(Duration::from_millis(20));
        // The first acquisition takes the fast path (four requests and a release of two);
        // the 29 retakes, two reads each.
        assert!(with[0] < 2.2, "{with:?}");
        assert!(without[0] >= 6.0, "{without:?}");
        assert!(
            with[2] < 0.6 * without[2],
            "without {without:?}, with {with:?}"
        );
        assert!(
            (with[1] - without[1]).abs() < 0.05 * without[1],
            "contended, without {without:?}, with {with:?}"
        );
    }

    #[test]
    fn a_critical_section_is_taken_off_the_hand_off() {
        let ratio = |critical_section: Duration| {
            let report = sweep(&ScaleArgs {
                critical_section,
                ..sweep_args(
                    &format!("critical-{}", critical_section.as_micros()),
                    vec![3],
                    20,
                )
            });
            assert_eq!(
                report["settings"]["critical_section_micros"],
                u64::try_from(critical_section.as_micros()).unwrap()
            );
            report["rows"][0]["handoff_over_3r"].as_f64().unwrap()
        };
        let (without, with) = (ratio(Duration::ZERO), ratio(Duration::from_millis(20)));
        // Held 20 ms, about ten round trips: had it not been taken off, the ratio would
        // have grown by more than three.
        assert!(with > 0.3, "{with}");
        assert!(
            (with - without).abs() < 1.5,
            "without {without}, with a 20 ms critical section {with}"
        );
    }

    #[test]
    fn without_read_repair_the_read_that_sees_a_release_is_quicker() {
        let seeing_read = |no_read_repair: bool| {
            let report = sweep(&ScaleArgs {
                handoffs: true,
                no_read_repair,
                ..sweep_args(&format!("repair-{no_read_repair}"), vec![5], 40)
            });
            assert_eq!(report["settings"]["read_repair"], !no_read_repair);
            let repaired = report["rows"][0]["repaired_reads_per_acquisition"]
                .as_f64()
                .unwrap();
            if no_read_repair {
                assert_eq!(repaired, 0.0, "{report}");
            } else {
                assert!(repaired > 0.1, "reads race releases: {report}");
            }
            report["rows"][0]["handoffs"]["seeing_read_ms"]
                .as_f64()
                .unwrap()
        };
        let (with, without) = (seeing_read(false), seeing_read(true));
        assert!(
            without < with,
            "the read racing a release waits for a read repair: {with} ms with, {without} ms without"
        );
    }

    #[test]
    fn a_small_sweep_compares_each_algorithm_with_its_uncontended_run() {
        let report = sweep(&ScaleArgs {
            algorithms: vec![AlgorithmArg::Queue, AlgorithmArg::Baseline],
            ..sweep_args("scale", vec![3, 1], 20)
        });
        let rows = report["rows"].as_array().unwrap();
        let keys: Vec<(String, u64)> = rows
            .iter()
            .map(|row| {
                (
                    row["algorithm"].as_str().unwrap().to_owned(),
                    row["processes"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                ("baseline".to_owned(), 1),
                ("baseline".to_owned(), 3),
                ("queue".to_owned(), 1),
                ("queue".to_owned(), 3),
            ]
        );
        for row in rows {
            let ratio = row["requests_over_uncontended"].as_f64().unwrap();
            if row["processes"] == 1 {
                assert!((ratio - 1.0).abs() < 1e-9, "{row}");
            } else {
                assert!(ratio >= 1.0, "contention costs requests: {row}");
            }
            let handoff = row["handoff_over_3r"].as_f64().unwrap();
            assert!(handoff.is_finite() && handoff > 0.5, "{row}");
            let jain = row["jain_min"].as_f64().unwrap();
            let floor = 1.0 / row["processes"].as_f64().unwrap();
            assert!((floor..=1.0).contains(&jain), "{row}");
            assert_eq!(row["exclusion_violations"], 0);
        }
    }

    #[test]
    fn bad_sweeps_are_refused() {
        for bad in [
            &["scale", "-p", "0"][..],
            &["scale", "-n", "0"],
            &["scale", "-p", "65"],
        ] {
            let parsed = ScaleCommand::try_parse_from(bad.iter().copied());
            assert!(parsed.is_err(), "{bad:?} was accepted");
        }
        for latency in [Latency::Zero, Latency::Fixed(std::time::Duration::ZERO)] {
            let error = run(&ScaleArgs {
                latency,
                ..sweep_args("zero", vec![1], 1)
            })
            .unwrap_err()
            .to_string();
            assert!(error.contains("above zero"), "{error}");
        }
    }
}
