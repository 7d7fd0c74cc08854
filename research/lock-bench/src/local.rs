//! A real Apache Cassandra cluster on this machine, from `lock-storage-cassandra`'s harness
//! (lock-local-cluster), for `--cassandra local`: the experiment on a local cluster
//! beside the simulator calibrated to that cluster's round trip. (A cluster to try the lock
//! by hand is `lockctl cluster start`'s.)

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use fair_lock::{Clock, SystemClock};
use lock_core::LockStorage;
use lock_local_cluster::{LocalCluster, LocalClusterConfig};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage, Replication, SchemaConfig};
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster};
use serde::Serialize;
use tokio::time::Instant as TokioInstant;

use crate::BoxError;
use crate::experiment::{
    self, Backend, ProbeTimes, RoundTrip, RoundTripProbe, RunResult, RunSpec, Settings, Variant,
    mix,
};
use crate::options::{Fencing, RunArgs};
use crate::report::{Report, RunSummary, SettingsReport};
use crate::stats::Summary;
use crate::units::{LAN, describe_latency, ms};

/// Starts a local cluster of `nodes` nodes for a command given `--cassandra local`, saying
/// so on stderr if `progress`, and returns it with a configuration that creates the
/// keyspace of `backend` with replication factor `nodes`, checked against `lock`. Refuses
/// the simulator's options first. The cluster stops when the returned [`LocalCluster`] is
/// dropped.
pub fn start_for_run(
    nodes: usize,
    backend: &crate::options::BackendArgs,
    lock: &lock_core::LockConfig,
    progress: bool,
) -> Result<(LocalCluster, CassandraConfig), BoxError> {
    start_cluster_for_run(LocalClusterConfig::new(nodes), backend, lock, progress)
}

/// [`start_for_run`] with the whole cluster configuration (a Paxos variant, say).
pub fn start_cluster_for_run(
    cluster_config: LocalClusterConfig,
    backend: &crate::options::BackendArgs,
    lock: &lock_core::LockConfig,
    progress: bool,
) -> Result<(LocalCluster, CassandraConfig), BoxError> {
    backend.refuse_simulator_options()?;
    backend.refuse_username_for_local()?;
    let cluster_config = LocalClusterConfig {
        version: Some(backend.cassandra_version),
        ..cluster_config
    };
    let nodes = cluster_config.nodes;
    lock_local_cluster::check_tools(&cluster_config)?;
    if progress {
        crate::note(&format!(
            "starting a local {nodes}-node Apache Cassandra {} cluster \
             (Paxos {})...",
            backend.cassandra_version, cluster_config.paxos_variant
        ));
    }
    let started = Instant::now();
    let cluster = LocalCluster::start(cluster_config)?;
    let contact_points = cluster.contact_points();
    if progress {
        crate::note(&format!(
            "cluster up at {} in {:.1} s",
            contact_points.join(","),
            started.elapsed().as_secs_f64()
        ));
    }
    let config = CassandraConfig {
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor: u32::try_from(nodes).unwrap_or(3),
        })),
        ..CassandraConfig::new(contact_points.iter().map(String::as_str), &backend.keyspace)
    };
    config.validate()?;
    config.check_lock_config(lock)?;
    Ok((cluster, config))
}

/// Every timed request of a round-trip measurement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoundTripSamples {
    /// QUORUM writes of one cell.
    pub write: Vec<Duration>,
    /// QUORUM reads of the first two cells of a row.
    pub read: Vec<Duration>,
    /// QUORUM deletes of one cell.
    pub delete: Vec<Duration>,
}

impl RoundTripSamples {
    /// The means, as the experiment's report takes them.
    pub fn means(&self) -> RoundTrip {
        let mean = |values: &[Duration]| {
            let count = u32::try_from(values.len()).unwrap_or(u32::MAX).max(1);
            values.iter().sum::<Duration>() / count
        };
        RoundTrip {
            samples: u32::try_from(self.write.len()).unwrap_or(u32::MAX),
            write: mean(&self.write),
            read: mean(&self.read),
            delete: mean(&self.delete),
        }
    }

    /// The distribution of each kind and of all of them together, in ms.
    pub fn distribution(&self) -> RoundTripDistribution {
        let summary =
            |values: &[Duration]| Summary::of(&values.iter().map(|d| ms(*d)).collect::<Vec<_>>());
        let all: Vec<Duration> = [&self.write, &self.read, &self.delete]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        RoundTripDistribution {
            write: summary(&self.write),
            read: summary(&self.read),
            delete: summary(&self.delete),
            all: summary(&all),
        }
    }
}

/// The distribution of a round-trip measurement, in ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RoundTripDistribution {
    /// QUORUM writes.
    pub write: Summary,
    /// QUORUM reads.
    pub read: Summary,
    /// QUORUM deletes.
    pub delete: Summary,
    /// All three together.
    pub all: Summary,
}

impl RoundTripDistribution {
    fn render(&self, out: &mut String, indent: &str) {
        let _ = writeln!(
            out,
            "{indent}{:<8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
            "request", "mean", "min", "p50", "p90", "p99", "max"
        );
        for (name, summary) in [
            ("write", &self.write),
            ("read", &self.read),
            ("delete", &self.delete),
            ("all", &self.all),
        ] {
            let _ = writeln!(
                out,
                "{indent}{name:<8} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>7.3}",
                summary.mean, summary.min, summary.p50, summary.p90, summary.p99, summary.max
            );
        }
    }
}

/// Times `samples` uncontended QUORUM writes, reads and deletes of one cell on `storage`
/// (the requests of `experiment::measure_round_trip`), after untimed rounds of the same
/// requests for `warm_up`.
pub async fn sample_round_trips<S: LockStorage>(
    storage: &S,
    clock: &dyn Clock,
    settings: &Settings,
    samples: u32,
    warm_up: Duration,
) -> Result<RoundTripSamples, BoxError> {
    let probe = RoundTripProbe::new(settings)?;
    let mut measured = RoundTripSamples::default();
    let warming = TokioInstant::now();
    let mut timed = 0;
    while timed < samples {
        let warm = warming.elapsed() >= warm_up;
        let ProbeTimes {
            write,
            read,
            delete,
        } = probe.once(storage, clock).await?;
        if warm {
            timed += 1;
            measured.write.push(write);
            measured.read.push(read);
            measured.delete.push(delete);
        }
    }
    Ok(measured)
}

/// Acquisitions per process in one untimed round of [`warm_up_locks`].
const WARM_UP_ACQUISITIONS: u32 = 50;

/// Runs every one of `specs` with [`WARM_UP_ACQUISITIONS`] per process, on rows of their
/// own, until `warm_up` has passed; returns how many rounds ran. A fresh cluster's JVMs
/// serve requests several times slower until they have compiled their hot paths, and the
/// lock's requests (rows of many cells and tombstones, pairs in flight) take paths that
/// the round trip's one-cell probe does not.
async fn warm_up_locks(
    backend: &Backend,
    settings: &Settings,
    specs: &[RunSpec],
    warm_up: Duration,
) -> Result<u32, BoxError> {
    let warming = Settings {
        acquisitions: WARM_UP_ACQUISITIONS,
        lock_id: format!("{}-warm-up", settings.lock_id),
        progress: false,
        handoffs: false,
        ..settings.clone()
    };
    let started = Instant::now();
    let mut rounds = 0;
    while started.elapsed() < warm_up {
        experiment::run_all(backend, &warming, specs, "warm-up ").await?;
        rounds += 1;
    }
    Ok(rounds)
}

/// The simulated cluster that stands for a local cluster of `nodes` nodes: as many replicas,
/// replication factor `nodes`, QUORUM, with `latency`.
pub fn simulated_cluster(nodes: usize, latency: Latency, seed: u64) -> ClusterConfig {
    ClusterConfig {
        replicas: nodes,
        replication_factor: nodes,
        latency,
        gc_grace: crate::options::SimulationDefaults::EXPERIMENT.gc_grace,
        dead_cell_read_cost: crate::options::SimulationDefaults::EXPERIMENT.dead_cell_cost,
        timer_dilation: crate::options::SimulationDefaults::EXPERIMENT.timer_dilation,
        seed,
        ..ClusterConfig::default()
    }
}

/// The one-way latency model the simulator was calibrated to, and what it gives.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// The model, in `--latency` syntax.
    pub latency: String,
    /// The model itself.
    #[serde(skip)]
    pub model: Latency,
    /// The round trip the simulated cluster gives with it (virtual time, so in whole
    /// milliseconds of Tokio's timer), measured as on the real cluster.
    pub simulated: RoundTripDistribution,
    /// How many models were tried.
    pub models_tried: u32,
}

/// The spreads tried, as the one-way latency's p99 over its median.
const SPREADS: [f64; 8] = [1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0, 16.0];
/// Bisection steps on the median, per spread.
const BISECTION_STEPS: u32 = 12;
/// Requests of each kind per candidate model while searching.
const SEARCH_SAMPLES: u32 = 300;

/// Fits a log-normal one-way latency (median, p99) to the simulated cluster so that its
/// round trip, measured as on the real cluster, matches `target`: for each spread
/// (p99 / median) the median is bisected until the mean round trip over writes, reads and
/// deletes equals the real one; of those, the model whose p50, p90 and p99 are closest to
/// the real ones (in log ratio) wins. Run it on a runtime with a paused clock.
pub async fn calibrate(
    target: &RoundTripDistribution,
    nodes: usize,
    settings: &Settings,
    samples: u32,
) -> Result<Calibration, BoxError> {
    let seed = mix(settings.seed, 0x0CA1_1B8A_7E00);
    let mut tried = 0;
    let lognormal = |median_us: f64, spread: f64| {
        let median = Duration::from_micros(median_us.round().max(1.0) as u64);
        Latency::LogNormal {
            median,
            p99: Duration::from_micros((median.as_micros() as f64 * spread).round() as u64),
        }
    };
    let target_mean = target.all.mean;
    let score = |simulated: &RoundTripDistribution| {
        let log_ratio = |sim: f64, real: f64| (sim.max(1e-3) / real.max(1e-3)).ln().abs();
        log_ratio(simulated.all.mean, target.all.mean)
            + log_ratio(simulated.all.p50, target.all.p50)
            + log_ratio(simulated.all.p90, target.all.p90)
            + log_ratio(simulated.all.p99, target.all.p99)
    };
    let mut best: Option<(f64, Latency)> = None;
    for spread in SPREADS {
        // The one-way median lies between 1 µs and the whole mean round trip (times two
        // for slack); bisect it geometrically on the mean round trip.
        let (mut low, mut high) = (1.0_f64, (target_mean * 2e3).max(10.0));
        let mut fitted = None;
        for _ in 0..BISECTION_STEPS {
            let middle = (low * high).sqrt();
            let latency = lognormal(middle, spread);
            let simulated = probe(nodes, latency.clone(), seed, settings, SEARCH_SAMPLES).await?;
            tried += 1;
            if simulated.all.mean < target_mean {
                low = middle;
            } else {
                high = middle;
            }
            let fit = score(&simulated);
            if fitted.as_ref().is_none_or(|(best_fit, _)| fit < *best_fit) {
                fitted = Some((fit, latency));
            }
        }
        if let Some((fit, latency)) = fitted
            && best.as_ref().is_none_or(|(best_fit, _)| fit < *best_fit)
        {
            best = Some((fit, latency));
        }
    }
    let model = best.map_or(LAN, |(_, latency)| latency);
    let simulated = probe(nodes, model.clone(), seed, settings, samples.max(1)).await?;
    Ok(Calibration {
        latency: describe_latency(&model),
        model,
        simulated,
        models_tried: tried,
    })
}

/// The round trip of a fresh simulated cluster with `latency`, measured as on the real one.
async fn probe(
    nodes: usize,
    latency: Latency,
    seed: u64,
    settings: &Settings,
    samples: u32,
) -> Result<RoundTripDistribution, BoxError> {
    let cluster = MemoryCluster::new(simulated_cluster(nodes, latency, seed))?;
    let client = cluster.client();
    let clock = client.clock();
    Ok(
        sample_round_trips(&client, &clock, settings, samples, Duration::ZERO)
            .await?
            .distribution(),
    )
}

/// One run on both sides.
#[derive(Clone, Debug, Serialize)]
pub struct ComparedRun {
    /// `queue`, `queue+fencing` or `baseline`.
    pub label: String,
    /// P.
    pub processes: usize,
    /// The run on the real cluster.
    pub real: RunSummary,
    /// The run on the simulator.
    pub simulated: RunSummary,
}

/// What `--cassandra local` reports besides the two experiments' own reports.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Nodes of the local cluster (and replicas of the simulated one).
    pub nodes: usize,
    /// Cassandra's version.
    pub cassandra_version: String,
    /// Untimed rounds of the runs, on rows of their own, before anything was timed.
    pub warm_up_rounds: u32,
    /// The round trip measured on the real cluster before the runs (after the warm-up):
    /// what the simulator is calibrated to.
    pub measured: RoundTripDistribution,
    /// The round trip measured the same way after the runs, to show how far it drifted.
    pub measured_after: RoundTripDistribution,
    /// The calibrated simulator.
    pub calibration: Calibration,
    /// Every run, real and simulated.
    pub runs: Vec<ComparedRun>,
    /// The variant reported as "new".
    pub new: Variant,
    /// Wall-clock seconds: the cluster's start, the real runs, the calibration and the
    /// simulated runs, and all of it.
    pub wall_seconds: WallTimes,
}

/// Where the wall time of `--cassandra local` went, in seconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WallTimes {
    /// Starting the local cluster.
    pub cluster_start: f64,
    /// The round-trip measurement and the runs on the real cluster.
    pub real: f64,
    /// Stopping the cluster.
    pub cluster_stop: f64,
    /// Calibrating the simulator.
    pub calibration: f64,
    /// The runs on the simulator.
    pub simulated: f64,
    /// Everything.
    pub total: f64,
}

impl Comparison {
    fn run(&self, variant: Variant, processes: usize) -> Option<&ComparedRun> {
        self.runs
            .iter()
            .find(|run| run.real.spec.variant == variant && run.real.spec.processes == processes)
    }

    /// The measured round trip, the calibrated model, and Tables 1 and 2 real beside
    /// simulated with the simulator's figure over the real one.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Round trip on the real cluster ({} node(s), Apache Cassandra {}, QUORUM), ms, \
             {} uncontended requests of each kind before the runs, after a warm-up of {} \
             untimed round(s) of the runs:",
            self.nodes, self.cassandra_version, self.measured.write.count, self.warm_up_rounds,
        );
        self.measured.render(&mut out, "  ");
        let after = &self.measured_after.all;
        let _ = writeln!(
            out,
            "  (timed again after the runs, not used: all {:.3} mean, {:.3} p50, {:.3} p90, \
             {:.3} p99)",
            after.mean, after.p50, after.p90, after.p99
        );
        let _ = writeln!(
            out,
            "Simulator calibrated to it: one-way latency --latency {} (log-normal, fitted \
             over {} models), which gives, in virtual time:",
            self.calibration.latency, self.calibration.models_tried
        );
        self.calibration.simulated.render(&mut out, "  ");
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Real Cassandra against the calibrated simulator: same P, same acquisitions, same \
             lock configuration; sim/real = the simulator's figure over the real one (1.00 = \
             exact prediction)\n"
        );
        self.table(
            &mut out,
            "Table 1: Mean time to acquire the lock (ms)",
            |run| run.wait_ms.mean,
        );
        self.table(
            &mut out,
            "Table 2: Maximum time to acquire the lock (ms)",
            |run| run.wait_ms.max,
        );
        let _ = writeln!(out, "Every run, real / simulated (sim/real):");
        let _ = writeln!(
            out,
            "  {:<14} {:>2} {:>24} {:>26} {:>24} {:>22} {:>14}",
            "algorithm", "P", "mean wait ms", "max wait ms", "ms/acq", "req/acq", "Jain"
        );
        for run in &self.runs {
            let pair = |real: f64, simulated: f64, decimals: usize| {
                format!(
                    "{real:.decimals$} / {simulated:.decimals$} ({})",
                    ratio(real, simulated)
                )
            };
            let _ = writeln!(
                out,
                "  {:<14} {:>2} {:>24} {:>26} {:>24} {:>22} {:>14}",
                run.label,
                run.processes,
                pair(run.real.wait_ms.mean, run.simulated.wait_ms.mean, 2),
                pair(run.real.wait_ms.max, run.simulated.wait_ms.max, 1),
                pair(
                    run.real.time_per_acquisition_ms,
                    run.simulated.time_per_acquisition_ms,
                    3
                ),
                pair(
                    run.real.requests_per_acquisition,
                    run.simulated.requests_per_acquisition,
                    2
                ),
                format!(
                    "{:.3} / {:.3}",
                    run.real.fairness.mean, run.simulated.fairness.mean
                ),
            );
        }
        let violations: u64 = self
            .runs
            .iter()
            .map(|run| run.real.exclusion_violations + run.simulated.exclusion_violations)
            .sum();
        let _ = writeln!(
            out,
            "  mutual exclusion violations, real and simulated: {violations}\n"
        );
        let wall = &self.wall_seconds;
        let _ = writeln!(
            out,
            "Wall time: {:.1} s (cluster start {:.1} s, real runs {:.1} s, cluster stop {:.1} s, \
             calibration {:.1} s, simulated runs {:.1} s)",
            wall.total,
            wall.cluster_start,
            wall.real,
            wall.cluster_stop,
            wall.calibration,
            wall.simulated
        );
        out
    }

    fn table(&self, out: &mut String, title: &str, value: impl Fn(&RunSummary) -> f64) {
        let _ = writeln!(out, "{title}");
        let _ = writeln!(
            out,
            "  {:<10} {:>10} {:>10} {:>9}   {:>10} {:>10} {:>9}",
            "processes", "new real", "new sim", "sim/real", "old real", "old sim", "sim/real"
        );
        let mut processes: Vec<usize> = self.runs.iter().map(|run| run.processes).collect();
        processes.sort_unstable();
        processes.dedup();
        let cells = |run: Option<&ComparedRun>| match run {
            Some(run) => {
                let (real, simulated) = (value(&run.real), value(&run.simulated));
                (
                    format!("{real:.1}"),
                    format!("{simulated:.1}"),
                    ratio(real, simulated),
                )
            }
            None => ("-".into(), "-".into(), "-".into()),
        };
        for p in processes {
            let (new_real, new_sim, new_ratio) = cells(self.run(self.new, p));
            let (old_real, old_sim, old_ratio) = cells(self.run(Variant::BASELINE, p));
            let _ = writeln!(
                out,
                "  {p:<10} {new_real:>10} {new_sim:>10} {new_ratio:>9}   {old_real:>10} \
                 {old_sim:>10} {old_ratio:>9}"
            );
        }
        let _ = writeln!(out);
    }
}

/// `simulated / real` to two decimals, or `-` when the real figure is zero.
fn ratio(real: f64, simulated: f64) -> String {
    if real > 0.0 && simulated.is_finite() {
        format!("{:.2}", simulated / real)
    } else {
        "-".into()
    }
}

/// `lock-bench --cassandra local`: starts a local cluster, measures its round trip, runs the
/// experiment on it, stops it, calibrates the simulator to the measured round trip, runs
/// the same experiment on the simulator, and prints both side by side.
pub fn run_compared(args: &RunArgs) -> Result<(), BoxError> {
    let backend_args = &args.backend;
    if backend_args.latency != LAN
        || backend_args.gc_grace.is_some()
        || backend_args.dead_cell_cost.is_some()
    {
        return Err(
            "--latency, --gc-grace and --dead-cell-cost do not go with --cassandra local: the \
             simulator's latency is calibrated to the local cluster's round trip"
                .into(),
        );
    }
    let nodes = args.local_nodes;
    let settings = args.settings()?;
    let specs = args.specs();
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let progress = settings.progress;
    let new = if args.fencing == Fencing::On {
        Variant::QUEUE_FENCED
    } else {
        Variant::QUEUE
    };
    let mut wall = WallTimes::default();
    let started = Instant::now();

    let phase = Instant::now();
    let (cluster, cassandra) = start_for_run(nodes, backend_args, &settings.lock, progress)?;
    let cassandra_version = cluster.version().to_string();
    wall.cluster_start = phase.elapsed().as_secs_f64();
    let backend = Backend::Cassandra(Box::new(cassandra.clone()));
    let phase = Instant::now();
    let samples = args.round_trip_samples;
    let (warm_up_rounds, before, after, real_runs) = crate::options::runtime(false, true)?.block_on(async {
        let storage = CassandraStorage::connect(cassandra).await?;
        let warming = Instant::now();
        let rounds = warm_up_locks(&backend, &settings, &specs, args.round_trip_warm_up).await?;
        if progress {
            crate::note(&format!(
                "warmed up: {rounds} untimed round(s) of the runs, on rows of their own, in {:.1} s",
                warming.elapsed().as_secs_f64()
            ));
        }
        let before = sample_round_trips(
            &storage,
            &SystemClock::new(),
            &settings,
            samples,
            args.round_trip_warm_up / 10,
        )
        .await?;
        if progress {
            crate::note(&format!(
                "real round trip before the runs: mean {:.3} ms over {} requests of each kind",
                ms(before.means().r()),
                samples
            ));
        }
        let runs = experiment::run_all(&backend, &settings, &specs, "real ").await?;
        let after = sample_round_trips(
            &storage,
            &SystemClock::new(),
            &settings,
            samples,
            Duration::ZERO,
        )
        .await?;
        if progress {
            crate::note(&format!(
                "real round trip after the runs: mean {:.3} ms",
                ms(after.means().r())
            ));
        }
        Ok::<_, BoxError>((rounds, before, after, runs))
    })?;
    let measured = before;
    wall.real = phase.elapsed().as_secs_f64();
    let phase = Instant::now();
    drop(cluster);
    wall.cluster_stop = phase.elapsed().as_secs_f64();
    let real_report = Report::new(
        SettingsReport::new(&settings, backend.describe(), "wall-clock"),
        measured.means(),
        &real_runs,
        new,
        Duration::from_secs_f64(wall.cluster_start + wall.real),
    );

    let target = measured.distribution();
    let phase = Instant::now();
    let virtual_time = !args.real_time;
    let sim_runtime = crate::options::runtime(virtual_time, false)?;
    let calibration = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?
        .block_on(calibrate(&target, nodes, &settings, samples))?;
    wall.calibration = phase.elapsed().as_secs_f64();
    if progress {
        crate::note(&format!(
            "simulator calibrated: --latency {} gives a mean round trip of {:.3} ms (real {:.3} ms)",
            calibration.latency, calibration.simulated.all.mean, target.all.mean
        ));
    }
    let mut simulated_backend = Backend::Simulated(simulated_cluster(
        nodes,
        calibration.model.clone(),
        settings.seed,
    ));
    if args.real_time {
        simulated_backend = simulated_backend.for_wall_clock();
    }
    let phase = Instant::now();
    let (simulated_round_trip, simulated_runs) = sim_runtime.block_on(async {
        let round_trip =
            experiment::measure_round_trip(&simulated_backend, &settings, samples).await?;
        let runs = experiment::run_all(&simulated_backend, &settings, &specs, "simulated ").await?;
        Ok::<_, BoxError>((round_trip, runs))
    })?;
    wall.simulated = phase.elapsed().as_secs_f64();
    let simulated_report = Report::new(
        SettingsReport::new(
            &settings,
            simulated_backend.describe(),
            if virtual_time {
                "virtual (Tokio's paused clock)"
            } else {
                "wall-clock"
            },
        ),
        simulated_round_trip,
        &simulated_runs,
        new,
        Duration::from_secs_f64(wall.calibration + wall.simulated),
    );
    wall.total = started.elapsed().as_secs_f64();
    let comparison = Comparison {
        nodes,
        cassandra_version,
        warm_up_rounds,
        measured: target,
        measured_after: after.distribution(),
        calibration,
        runs: real_report
            .runs
            .iter()
            .filter_map(|real| {
                let simulated = simulated_report.run(real.spec.variant, real.spec.processes)?;
                Some(ComparedRun {
                    label: real.label.clone(),
                    processes: real.spec.processes,
                    real: real.clone(),
                    simulated: simulated.clone(),
                })
            })
            .collect(),
        new,
        wall_seconds: wall,
    };

    let mut text = String::new();
    let _ = writeln!(
        text,
        "==== On the real cluster ====\n{}",
        real_report.render()
    );
    let _ = writeln!(
        text,
        "==== On the simulator calibrated to it ====\n{}",
        simulated_report.render()
    );
    let _ = writeln!(
        text,
        "==== Real against simulated ====\n{}",
        comparison.render()
    );
    let written = write_outputs(
        &out,
        &real_report,
        &real_runs,
        &simulated_report,
        &simulated_runs,
        &comparison,
    )?;
    let _ = writeln!(text, "\nWrote {}:", out.display());
    for path in written {
        let _ = writeln!(text, "  {}", path.display());
    }
    crate::emit(&text)?;
    let violations: u64 = real_runs
        .iter()
        .chain(&simulated_runs)
        .map(|run| run.exclusion_violations)
        .sum();
    if violations > 0 {
        return Err(format!("{violations} mutual exclusion violations: the lock is broken").into());
    }
    Ok(())
}

/// Writes `real/` and `simulated/` (each as the experiment writes its directory) and
/// `comparison.json` into `out`, and returns what it wrote.
fn write_outputs(
    out: &Path,
    real: &Report,
    real_runs: &[RunResult],
    simulated: &Report,
    simulated_runs: &[RunResult],
    comparison: &Comparison,
) -> Result<Vec<std::path::PathBuf>, BoxError> {
    let mut written = Vec::new();
    for (name, report, runs) in [
        ("real", real, real_runs),
        ("simulated", simulated, simulated_runs),
    ] {
        let dir = out.join(name);
        std::fs::create_dir_all(&dir)
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        crate::report::write_files(&dir, report, runs)?;
        written.push(dir.join("results.json"));
        written.push(dir.join("acquisitions.csv"));
        written.extend(crate::plot::draw_all(&dir, runs, report.new)?);
    }
    let path = out.join("comparison.json");
    std::fs::write(&path, serde_json::to_string_pretty(comparison)?)?;
    written.push(path);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_samples_summarise_per_kind_and_together() {
        let samples = RoundTripSamples {
            write: vec![Duration::from_millis(1), Duration::from_millis(3)],
            read: vec![Duration::from_millis(2), Duration::from_millis(4)],
            delete: vec![Duration::from_millis(3), Duration::from_millis(5)],
        };
        let means = samples.means();
        assert_eq!(means.samples, 2);
        assert_eq!(means.r(), Duration::from_millis(3));
        let distribution = samples.distribution();
        assert_eq!(distribution.all.count, 6);
        assert!((distribution.all.mean - 3.0).abs() < 1e-9);
        assert!((distribution.read.max - 4.0).abs() < 1e-9);
        assert_eq!(ratio(0.0, 1.0), "-");
        assert_eq!(ratio(2.0, 1.0), "0.50");
    }

    #[test]
    fn calibration_matches_the_mean_round_trip_in_virtual_time() {
        // A target the simulator can reach: what a known model gives.
        let settings = Settings {
            acquisitions: 1,
            critical_section: Duration::ZERO,
            pause: Duration::ZERO,
            seed: 1,
            lock_id: "calibration".into(),
            lock: lock_core::LockConfig::default(),
            progress: false,
            handoffs: false,
            wake_hints: false,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let known = Latency::LogNormal {
            median: Duration::from_micros(1500),
            p99: Duration::from_micros(6000),
        };
        let target = runtime
            .block_on(probe(3, known, 99, &settings, 300))
            .unwrap();
        let calibration = runtime
            .block_on(calibrate(&target, 3, &settings, 300))
            .unwrap();
        assert_eq!(calibration.models_tried, 96);
        let (simulated, real) = (calibration.simulated.all.mean, target.all.mean);
        assert!(
            (simulated / real - 1.0).abs() < 0.1,
            "simulated {simulated} ms against {real} ms with {}",
            calibration.latency
        );
    }
}
