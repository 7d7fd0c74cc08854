//! `lock-bench many-locks`: many lockers over many lock ids, as a production service uses
//! the lock (one lock per account, per job, per tenant).
//!
//! `--lockers` tasks, spread over `--processes` (a process is one `Locker`, with a session
//! of its own on a real cluster, shared by its tasks), take lock ids drawn at random from
//! `--keys` ids, hold each for `--critical-section` and draw again, closed loop, for
//! `--run-time`. Ids are drawn uniformly or Zipf-distributed (rank `k` drawn with
//! probability proportional to `1 / (k + 1)^s`, `--zipf-exponent` `s`), so that a few ids
//! are hot. Each scenario (a lock, a key count, a distribution) has lock ids of its own.
//!
//! Per scenario it reports the acquisitions per second in all, the waits (from the call to
//! holding: p50, p99, max), the acquisitions that timed out (`--acquire-timeout`) or
//! failed, storage requests per acquisition, Jain's index over lockers on the hot ids (the
//! `--hot-ids` most likely ranks; see [`hot_jain`]), and on a local cluster the nodes' CPU
//! time per acquisition, the idle cluster's share taken off. It fails if two tasks ever
//! held one lock id at once.
//!
//! The queue lock runs on the simulator (virtual time) or on a real cluster; the
//! lightweight-transaction lock ([`lock_lwt`]) only on a real cluster, since Paxos is not
//! simulated. The LWT lock has one owner per task (tasks of one process share its
//! session); the queue lock one locker per process, whose tasks wait for an id in a local
//! line when another task of the process wants it too.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Args, ValueEnum};
use fair_lock::Locker;
use lock_core::{LockConfig, LockId, LockStorage};
use lock_local_cluster::{LocalCluster, LocalClusterConfig, PaxosVariant};
use lock_lwt::{LwtConfig, LwtError, LwtLocker, LwtStatements, LwtTally};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};
use lock_storage_memory::{ClusterConfig, MemoryCluster};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::BoxError;
use crate::cluster_cost::{IdleRate, Meter, Usage};
use crate::experiment::{Backend, LockerSetup, RequestTally, mix, simulated_lockers};
use crate::options::{BackendArgs, SimulationDefaults};
use crate::stats::Summary;
use crate::timeline::Timeline;
use crate::units::{ms, parse_duration};

/// The most lock ids a scenario draws from.
pub const MAX_KEYS: u64 = 10_000_000;
/// The shortest `--run-time` accepted.
const MIN_RUN_TIME: Duration = Duration::from_millis(100);
/// The longest `--run-time` accepted.
const MAX_RUN_TIME: Duration = Duration::from_secs(3600);
/// The largest `--zipf-exponent` accepted: beyond it nearly every draw is rank 0.
const MAX_ZIPF_EXPONENT: f64 = 4.0;

/// The options of `lock-bench many-locks`.
#[derive(Debug, Args)]
pub struct ManyLocksArgs {
    /// How many lock ids each scenario draws from, comma-separated (1 to 10,000,000).
    #[arg(short, long, value_delimiter = ',', default_value = "10,1000,100000", value_parser = clap::value_parser!(u64).range(1..=MAX_KEYS))]
    pub keys: Vec<u64>,
    /// How ids are drawn, comma-separated: `uniform`, `zipf`.
    #[arg(long, value_delimiter = ',', default_value = "uniform,zipf")]
    pub distribution: Vec<Distribution>,
    /// The Zipf exponent `s` (more than 0, at most 4): rank `k` is drawn with probability
    /// proportional to `1 / (k + 1)^s`.
    #[arg(long, default_value_t = 1.0, value_parser = parse_zipf_exponent)]
    pub zipf_exponent: f64,
    /// Tasks that take locks, in all (1 to 4,096).
    #[arg(short, long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub lockers: u32,
    /// Processes the tasks are spread over, round robin (1 to 256, at most `--lockers`).
    #[arg(short, long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub processes: u32,
    /// How long each acquisition holds its lock.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    pub critical_section: Duration,
    /// How long each scenario's tasks keep taking locks (virtual time on the simulator),
    /// 100ms to 1h; tasks finish the acquisition they started.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub run_time: Duration,
    /// How long one acquisition may wait before it counts as timed out (and the task draws
    /// again).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub acquire_timeout: Duration,
    /// The locks to run, comma-separated: `queue`, `lwt` (a real cluster only). Default:
    /// `queue` on the simulator, both on a real cluster.
    #[arg(long, value_delimiter = ',')]
    pub algorithms: Option<Vec<ManyLocksAlgorithm>>,
    /// How many of the most likely ranks count as hot ids for the fairness index.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub hot_ids: u32,
    /// On a real cluster: how long to take and release both locks first, unmeasured,
    /// while the JVMs compile their hot paths.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub warm_up: Duration,
    /// With `--cassandra local`: how long the idle cluster is measured, before the
    /// scenarios, for the background CPU time taken off theirs.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub idle: Duration,
    /// With `--cassandra local`: the Paxos variant the cluster is started with.
    #[arg(long, default_value = "v1")]
    pub paxos_variant: PaxosVariant,
    /// With `--cassandra local`: how many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = crate::options::parse_node_count)]
    pub local_nodes: usize,
    /// The prefix of the lock ids; each scenario appends its lock, number and rank.
    #[arg(long, default_value = "many-locks")]
    pub lock_id: String,
    /// Where to write many-locks.json (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// The storage: the simulator by default, `--cassandra local` (a local cluster started
    /// for the run and stopped after it) or contact points of a real cluster.
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// How a scenario draws lock ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Every id equally likely.
    Uniform,
    /// Zipf: a few hot ids, a long tail.
    Zipf,
}

/// The locks `many-locks` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ManyLocksAlgorithm {
    /// The queue lock (fencing off).
    Queue,
    /// The lightweight-transaction lock (a real cluster only).
    Lwt,
}

impl ManyLocksAlgorithm {
    fn name(self) -> &'static str {
        match self {
            ManyLocksAlgorithm::Queue => "queue",
            ManyLocksAlgorithm::Lwt => "lwt",
        }
    }
}

/// Parses `--zipf-exponent`: more than 0, at most [`MAX_ZIPF_EXPONENT`].
fn parse_zipf_exponent(text: &str) -> Result<f64, String> {
    let exponent: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if exponent.is_finite() && exponent > 0.0 && exponent <= MAX_ZIPF_EXPONENT {
        Ok(exponent)
    } else {
        Err(format!(
            "{text:?}: the Zipf exponent must be more than 0 and at most {MAX_ZIPF_EXPONENT}"
        ))
    }
}

/// Draws ranks `0..keys` from a seeded stream of random words.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyPicker {
    keys: u64,
    /// Zipf only: the cumulative probability of ranks `0..=k`, the last exactly 1.
    cumulative: Option<Vec<f64>>,
}

impl KeyPicker {
    /// A picker over `keys` ranks (at least 1) by `distribution`.
    pub fn new(keys: u64, distribution: Distribution, zipf_exponent: f64) -> Self {
        let keys = keys.max(1);
        let cumulative = (distribution == Distribution::Zipf).then(|| {
            let weights: Vec<f64> = (0..keys)
                .map(|rank| 1.0 / ((rank + 1) as f64).powf(zipf_exponent))
                .collect();
            let total: f64 = weights.iter().sum();
            let mut sum = 0.0;
            let mut cumulative: Vec<f64> = weights
                .iter()
                .map(|weight| {
                    sum += weight / total;
                    sum
                })
                .collect();
            if let Some(last) = cumulative.last_mut() {
                *last = 1.0;
            }
            cumulative
        });
        KeyPicker { keys, cumulative }
    }

    /// The rank drawn by the random word `random`.
    pub fn pick(&self, random: u64) -> u64 {
        match &self.cumulative {
            None => ((u128::from(random) * u128::from(self.keys)) >> 64) as u64,
            Some(cumulative) => {
                // The top 53 bits as a fraction in [0, 1).
                let fraction = (random >> 11) as f64 / (1u64 << 53) as f64;
                let rank = cumulative.partition_point(|&below| below <= fraction);
                (rank as u64).min(self.keys - 1)
            }
        }
    }
}

/// One scenario: which lock, how many ids, how they are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scenario {
    /// The lock.
    pub algorithm: ManyLocksAlgorithm,
    /// How many ids.
    pub keys: u64,
    /// How they are drawn.
    pub distribution: Distribution,
}

/// What the scenarios share.
#[derive(Clone, Debug, PartialEq)]
pub struct Load {
    /// Tasks in all.
    pub lockers: usize,
    /// Processes they are spread over.
    pub processes: usize,
    /// How long each acquisition holds.
    pub critical_section: Duration,
    /// How long tasks keep taking locks.
    pub run_time: Duration,
    /// How long an acquisition may wait.
    pub acquire_timeout: Duration,
    /// The Zipf exponent.
    pub zipf_exponent: f64,
    /// Ranks below this are hot.
    pub hot_ids: u64,
}

/// What one task saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskOutcome {
    /// Each acquisition's wait, ms.
    pub waits_ms: Vec<f64>,
    /// Acquisitions of hot ids.
    pub hot_acquisitions: u64,
    /// Time spent waiting for or holding hot ids.
    pub hot_busy: Duration,
    /// Acquisitions that timed out.
    pub timeouts: u64,
    /// Acquisitions or releases that failed.
    pub errors: u64,
}

/// What one scenario measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Per task.
    pub tasks: Vec<TaskOutcome>,
    /// From the start until the last task finished.
    pub elapsed: Duration,
    /// Storage requests of every locker.
    pub requests: u64,
    /// Times a task took an id another task held.
    pub exclusion_violations: u64,
    /// The nodes' CPU time over the scenario, idle share taken off (a local cluster only).
    pub cluster_cpu: Option<f64>,
}

impl Outcome {
    /// Acquisitions of every task.
    pub fn acquisitions(&self) -> u64 {
        self.tasks
            .iter()
            .map(|task| task.waits_ms.len() as u64)
            .sum()
    }
}

/// Jain's index over the tasks that took a hot id, of each one's hot-id throughput: its
/// hot acquisitions over the time it spent waiting for or holding hot ids. A fair lock
/// serves every task wanting a hot id at the same pace, so the index is near 1; `None`
/// when fewer than two tasks took a hot id.
pub fn hot_jain(tasks: &[TaskOutcome]) -> Option<f64> {
    let paces: Vec<f64> = tasks
        .iter()
        .filter(|task| task.hot_acquisitions > 0 && !task.hot_busy.is_zero())
        .map(|task| task.hot_acquisitions as f64 / task.hot_busy.as_secs_f64())
        .collect();
    (paces.len() >= 2).then(|| crate::stats::jain(&paces))
}

/// One scenario's figures as `many-locks.json` has them.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// `queue` or `lwt`.
    pub algorithm: ManyLocksAlgorithm,
    /// How many ids.
    pub keys: u64,
    /// How they were drawn.
    pub distribution: Distribution,
    /// Acquisitions in all.
    pub acquisitions: u64,
    /// Acquisitions per second of run time.
    pub acquisitions_per_second: f64,
    /// Waits, ms.
    pub wait_ms: Summary,
    /// Acquisitions that timed out.
    pub timeouts: u64,
    /// Acquisitions or releases that failed.
    pub errors: u64,
    /// Storage requests per acquisition (LWT: conditional and plain requests).
    pub requests_per_acquisition: f64,
    /// Jain's index over lockers on the hot ids.
    pub hot_jain: Option<f64>,
    /// The nodes' CPU time per acquisition, ms, idle share taken off (a local cluster).
    pub cluster_cpu_ms_per_acquisition: Option<f64>,
    /// Times a task took an id another task held.
    pub exclusion_violations: u64,
}

impl ScenarioReport {
    /// The figures of `outcome`.
    pub fn new(scenario: &Scenario, outcome: &Outcome) -> Self {
        let acquisitions = outcome.acquisitions();
        let waits: Vec<f64> = outcome
            .tasks
            .iter()
            .flat_map(|task| task.waits_ms.iter().copied())
            .collect();
        let count = acquisitions.max(1) as f64;
        ScenarioReport {
            algorithm: scenario.algorithm,
            keys: scenario.keys,
            distribution: scenario.distribution,
            acquisitions,
            acquisitions_per_second: acquisitions as f64
                / outcome.elapsed.as_secs_f64().max(f64::MIN_POSITIVE),
            wait_ms: Summary::of(&waits),
            timeouts: outcome.tasks.iter().map(|task| task.timeouts).sum(),
            errors: outcome.tasks.iter().map(|task| task.errors).sum(),
            requests_per_acquisition: outcome.requests as f64 / count,
            hot_jain: hot_jain(&outcome.tasks),
            cluster_cpu_ms_per_acquisition: outcome.cluster_cpu.map(|cpu| cpu / count),
            exclusion_violations: outcome.exclusion_violations,
        }
    }

    /// The report's table row.
    fn row(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {:.0} | {:.2} / {:.2} / {:.1} | {} / {} | {:.2} | {} | {} | {} |",
            self.algorithm.name(),
            self.keys,
            match self.distribution {
                Distribution::Uniform => "uniform",
                Distribution::Zipf => "zipf",
            },
            self.acquisitions,
            self.acquisitions_per_second,
            self.wait_ms.p50,
            self.wait_ms.p99,
            self.wait_ms.max,
            self.timeouts,
            self.errors,
            self.requests_per_acquisition,
            self.hot_jain
                .map_or_else(|| "-".to_owned(), |jain| format!("{jain:.3}")),
            self.cluster_cpu_ms_per_acquisition
                .map_or_else(|| "-".to_owned(), |cpu| format!("{cpu:.2}")),
            self.exclusion_violations,
        )
    }
}

/// Runs `many-locks`.
pub fn run(args: &ManyLocksArgs) -> Result<(), BoxError> {
    if !(MIN_RUN_TIME..=MAX_RUN_TIME).contains(&args.run_time) {
        return Err(format!(
            "--run-time must be between {MIN_RUN_TIME:?} and {MAX_RUN_TIME:?}, not {:?}",
            args.run_time
        )
        .into());
    }
    if args.acquire_timeout.is_zero() {
        return Err("--acquire-timeout must be more than 0".into());
    }
    if args.processes > args.lockers {
        return Err(format!(
            "--processes ({}) must be at most --lockers ({}): every process has a task",
            args.processes, args.lockers
        )
        .into());
    }
    if args.keys.is_empty() || args.distribution.is_empty() {
        return Err("--keys and --distribution need at least one value each".into());
    }
    LockId::new(lock_name(
        &args.lock_id,
        ManyLocksAlgorithm::Queue,
        999,
        MAX_KEYS,
    ))
    .map_err(|error| format!("--lock-id: {error}"))?;
    let local = crate::options::is_local(&args.backend.cassandra);
    let simulated = args.backend.cassandra.is_empty();
    let algorithms = match &args.algorithms {
        Some(algorithms) => {
            let mut unique = Vec::new();
            for &algorithm in algorithms {
                if !unique.contains(&algorithm) {
                    unique.push(algorithm);
                }
            }
            unique
        }
        None if simulated => vec![ManyLocksAlgorithm::Queue],
        None => vec![ManyLocksAlgorithm::Queue, ManyLocksAlgorithm::Lwt],
    };
    if simulated && algorithms.contains(&ManyLocksAlgorithm::Lwt) {
        return Err(
            "the lightweight-transaction lock needs a real cluster (Paxos is not \
                    simulated): add --cassandra local or contact points"
                .into(),
        );
    }
    if algorithms.is_empty() {
        return Err("--algorithms needs at least one of queue and lwt".into());
    }
    let load = Load {
        lockers: args.lockers as usize,
        processes: args.processes as usize,
        critical_section: args.critical_section,
        run_time: args.run_time,
        acquire_timeout: args.acquire_timeout,
        zipf_exponent: args.zipf_exponent,
        hot_ids: u64::from(args.hot_ids),
    };
    let lock = LockConfig {
        fencing: false,
        ..LockConfig::default()
    };
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let mut scenarios = Vec::new();
    for &keys in &args.keys {
        for &distribution in &args.distribution {
            for &algorithm in &algorithms {
                scenarios.push(Scenario {
                    algorithm,
                    keys,
                    distribution,
                });
            }
        }
    }
    let load_before = lock_cli_support::load_average();
    let (cluster, backend) = if local {
        let (cluster, config) = crate::local::start_cluster_for_run(
            LocalClusterConfig {
                paxos_variant: args.paxos_variant,
                ..LocalClusterConfig::new(args.local_nodes)
            },
            &args.backend,
            &lock,
            !args.quiet,
        )?;
        (Some(cluster), Backend::Cassandra(Box::new(config)))
    } else {
        (
            None,
            args.backend
                .backend(&lock, SimulationDefaults::EXPERIMENT)?,
        )
    };
    let runtime = crate::options::runtime(simulated, !simulated)?;
    let reports = runtime.block_on(run_scenarios(
        args,
        &backend,
        cluster.as_ref(),
        &lock,
        &load,
        &scenarios,
    ))?;
    drop(cluster);
    let mut text = format!(
        "Many locks: {}{}\n{} tasks over {} processes, each scenario {:?} of {}, lock held {:?}, \
         acquire timeout {:?}, Zipf exponent {}, hot ids = the {} likeliest ranks, queue lock \
         with fencing off; load {} before, {} after\n\n",
        backend.describe(),
        if local {
            format!(", Paxos {}", args.paxos_variant)
        } else {
            String::new()
        },
        load.lockers,
        load.processes,
        load.run_time,
        if simulated {
            "virtual time"
        } else {
            "wall-clock time"
        },
        load.critical_section,
        load.acquire_timeout,
        load.zipf_exponent,
        load.hot_ids,
        load_before,
        lock_cli_support::load_average(),
    );
    let _ = writeln!(
        text,
        "| lock | ids | drawn | acquisitions | acq/s | wait p50 / p99 / max ms | timeouts / errors \
         | requests / acq | Jain, hot ids | cluster CPU-ms / acq | violations |"
    );
    let _ = writeln!(text, "|---|---|---|---|---|---|---|---|---|---|---|");
    let violations: u64 = reports
        .iter()
        .map(|report| report.exclusion_violations)
        .sum();
    for report in &reports {
        let _ = writeln!(text, "{}", report.row());
    }
    crate::options::write_json_and_report(&out, "many-locks.json", &reports, text, violations)
}

/// The lock id of `rank` in scenario `number` of `algorithm`.
fn lock_name(prefix: &str, algorithm: ManyLocksAlgorithm, number: usize, rank: u64) -> String {
    format!("{prefix}-{}-{number}-{rank}", algorithm.name())
}

/// The warm-up (a real cluster), the idle measurement (a local cluster), then every
/// scenario.
async fn run_scenarios(
    args: &ManyLocksArgs,
    backend: &Backend,
    cluster: Option<&LocalCluster>,
    lock: &LockConfig,
    load: &Load,
    scenarios: &[Scenario],
) -> Result<Vec<ScenarioReport>, BoxError> {
    let progress = !args.quiet;
    let seed = args.backend.seed;
    let meter = cluster.map(Meter::of).transpose()?;
    if let Backend::Cassandra(config) = backend {
        let setup = CassandraStorage::connect((**config).clone()).await?;
        LwtStatements::create_table(setup.session(), &config.keyspace).await?;
        setup.session().await_schema_agreement().await?;
        if !args.warm_up.is_zero() {
            if progress {
                crate::note(&format!(
                    "warming up: every lock taken and released for {:?}",
                    args.warm_up
                ));
            }
            let algorithms: Vec<ManyLocksAlgorithm> = scenarios
                .iter()
                .map(|scenario| scenario.algorithm)
                .collect();
            let warm_load = Load {
                run_time: args.warm_up / algorithms.len().max(1) as u32,
                ..load.clone()
            };
            for (index, &algorithm) in [ManyLocksAlgorithm::Queue, ManyLocksAlgorithm::Lwt]
                .iter()
                .filter(|algorithm| algorithms.contains(algorithm))
                .enumerate()
            {
                let warm = Scenario {
                    algorithm,
                    keys: 100,
                    distribution: Distribution::Uniform,
                };
                let prefix = format!("{}-warm", args.lock_id);
                run_scenario(backend, lock, &warm_load, &warm, &prefix, index, seed).await?;
            }
        }
    }
    let idle = match &meter {
        Some(meter) => {
            if progress {
                crate::note(&format!("measuring the idle cluster for {:?}", args.idle));
            }
            let before = meter.read()?;
            tokio::time::sleep(args.idle).await;
            IdleRate::of(meter.read()?.since(before), args.idle)
        }
        None => IdleRate::default(),
    };
    let mut reports = Vec::with_capacity(scenarios.len());
    for (number, scenario) in scenarios.iter().enumerate() {
        let before = meter.as_ref().map(Meter::read).transpose()?;
        let scenario_seed = mix(seed, 0x0041_0000 + number as u64);
        let mut outcome = run_scenario(
            backend,
            lock,
            load,
            scenario,
            &args.lock_id,
            number,
            scenario_seed,
        )
        .await?;
        if let (Some(meter), Some(before)) = (&meter, before) {
            let used: Usage = meter.read()?.since(before);
            outcome.cluster_cpu =
                Some(ms(used.cpu) - idle.cpu_ms_per_second * outcome.elapsed.as_secs_f64());
        }
        let report = ScenarioReport::new(scenario, &outcome);
        if progress {
            crate::note(&format!(
                "{} ids={} {:?}: {} acquisitions, {:.0}/s",
                scenario.algorithm.name(),
                scenario.keys,
                scenario.distribution,
                report.acquisitions,
                report.acquisitions_per_second
            ));
        }
        reports.push(report);
    }
    Ok(reports)
}

/// Runs one scenario on `backend`, its lock ids named from `prefix` and `number`.
pub async fn run_scenario(
    backend: &Backend,
    lock: &LockConfig,
    load: &Load,
    scenario: &Scenario,
    prefix: &str,
    number: usize,
    seed: u64,
) -> Result<Outcome, BoxError> {
    let picker = Arc::new(KeyPicker::new(
        scenario.keys,
        scenario.distribution,
        load.zipf_exponent,
    ));
    let names = Names {
        prefix: format!("{prefix}-{}-{number}", scenario.algorithm.name()),
    };
    match (backend, scenario.algorithm) {
        (Backend::Simulated(cluster_config), ManyLocksAlgorithm::Queue) => {
            let cluster = MemoryCluster::new(ClusterConfig {
                seed,
                ..cluster_config.clone()
            })?;
            let tally = Arc::new(RequestTally::default());
            let lockers = simulated_lockers(
                &cluster,
                LockerSetup::new(load.processes, |_| lock.clone(), seed, &tally),
            )?;
            let takers = queue_takers(lockers, load);
            let mut outcome = drive(takers, load, &picker, names, seed, backend.timeline()).await?;
            outcome.requests = tally.counts().total();
            Ok(outcome)
        }
        (Backend::Simulated(_), ManyLocksAlgorithm::Lwt) => {
            Err("the lightweight-transaction lock needs a real cluster".into())
        }
        (Backend::Cassandra(config), ManyLocksAlgorithm::Queue) => {
            let tally = Arc::new(RequestTally::default());
            let lockers = crate::experiment::cassandra_lockers(
                config,
                LockerSetup::new(load.processes, |_| lock.clone(), seed, &tally),
            )
            .await?;
            let takers = queue_takers(lockers, load);
            let mut outcome = drive(takers, load, &picker, names, seed, backend.timeline()).await?;
            outcome.requests = tally.counts().total();
            Ok(outcome)
        }
        (Backend::Cassandra(config), ManyLocksAlgorithm::Lwt) => {
            let tally = Arc::new(LwtTally::default());
            let takers = lwt_takers(config, load, seed, &tally).await?;
            let mut outcome = drive(takers, load, &picker, names, seed, backend.timeline()).await?;
            outcome.requests = tally.counts().total();
            Ok(outcome)
        }
    }
}

/// The lock ids of one scenario.
struct Names {
    prefix: String,
}

impl Names {
    fn of(&self, rank: u64) -> String {
        format!("{}-{rank}", self.prefix)
    }
}

/// How one task takes a lock.
enum Taker<S: LockStorage> {
    /// A task of a queue-lock process.
    Queue(Locker<S>),
    /// A lightweight-transaction owner.
    Lwt(Arc<LwtLocker>),
}

/// What one attempt to take a lock came to.
enum Taken {
    /// Held for the critical section and released; the wait.
    Held(Duration),
    /// Held and released, but the release failed; the wait.
    HeldReleaseFailed(Duration),
    /// Not taken within the acquire timeout.
    TimedOut,
    /// The lock failed.
    Failed,
}

/// The ids held right now, to catch two holders of one id.
#[derive(Default)]
struct Holders {
    held: Mutex<HashSet<u64>>,
}

impl Holders {
    /// Notes that `rank` is held; false if it already was.
    fn enter(&self, rank: u64) -> bool {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(rank)
    }

    fn leave(&self, rank: u64) {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&rank);
    }
}

impl<S: LockStorage> Taker<S> {
    /// Takes `rank`'s lock, holds it for the critical section, releases it.
    async fn take(
        &self,
        lock_id: &str,
        rank: u64,
        load: &Load,
        timeline: &Timeline,
        holders: &Holders,
    ) -> (Taken, bool) {
        let asked = timeline.elapsed();
        match self {
            Taker::Queue(locker) => {
                match locker.lock_timeout(lock_id, load.acquire_timeout).await {
                    Ok(Some(guard)) => {
                        let wait = timeline.elapsed().saturating_sub(asked);
                        hold(wait, rank, load, timeline, holders, async || {
                            guard.release().await
                        })
                        .await
                    }
                    Ok(None) => (Taken::TimedOut, true),
                    Err(_) => (Taken::Failed, true),
                }
            }
            Taker::Lwt(locker) => match locker.lock(lock_id).await {
                Ok(guard) => {
                    let wait = timeline.elapsed().saturating_sub(asked);
                    hold(wait, rank, load, timeline, holders, async || {
                        guard.release().await
                    })
                    .await
                }
                Err(LwtError::GaveUp { .. }) => (Taken::TimedOut, true),
                Err(_) => (Taken::Failed, true),
            },
        }
    }
}

/// Holds `rank`'s lock, taken after `wait`, for the critical section (noted in `holders`
/// meanwhile), then releases it with `release`: what came of it, and whether no other task
/// held the id at the same time.
async fn hold<T, E>(
    wait: Duration,
    rank: u64,
    load: &Load,
    timeline: &Timeline,
    holders: &Holders,
    release: impl AsyncFnOnce() -> Result<T, E>,
) -> (Taken, bool) {
    let exclusive = holders.enter(rank);
    timeline.sleep(load.critical_section).await;
    if exclusive {
        holders.leave(rank);
    }
    let taken = match release().await {
        Ok(_) => Taken::Held(wait),
        Err(_) => Taken::HeldReleaseFailed(wait),
    };
    (taken, exclusive)
}

/// One taker per task: task `t` uses process `t % processes`'s locker.
fn queue_takers<S: LockStorage>(lockers: Vec<Locker<S>>, load: &Load) -> Vec<Taker<S>> {
    (0..load.lockers)
        .map(|task| Taker::Queue(lockers[task % lockers.len()].clone()))
        .collect()
}

/// One LWT owner per task, sharing its process's session.
async fn lwt_takers(
    config: &CassandraConfig,
    load: &Load,
    seed: u64,
    tally: &Arc<LwtTally>,
) -> Result<Vec<Taker<CassandraStorage>>, BoxError> {
    let lwt = LwtConfig {
        acquire_timeout: load.acquire_timeout,
        ..LwtConfig::default()
    };
    let mut sessions = Vec::with_capacity(load.processes);
    for _ in 0..load.processes {
        let storage = CassandraStorage::connect(config.clone()).await?;
        let session = storage.session().clone();
        let statements = LwtStatements::prepare(&session, &config.keyspace, &lwt).await?;
        sessions.push((session, statements));
    }
    Ok((0..load.lockers)
        .map(|task| {
            let (session, statements) = &sessions[task % sessions.len()];
            Taker::Lwt(Arc::new(LwtLocker::new(
                session.clone(),
                statements.clone(),
                lwt,
                format!("many-{:016x}-{task}", mix(seed, 0x0042_0000)),
                mix(seed, 0x0042_0000 + task as u64 + 1),
                tally.clone(),
            )))
        })
        .collect())
}

/// Has every taker draw ids and take them until the run time is over.
async fn drive<S: LockStorage>(
    takers: Vec<Taker<S>>,
    load: &Load,
    picker: &Arc<KeyPicker>,
    names: Names,
    seed: u64,
    timeline: Timeline,
) -> Result<Outcome, BoxError> {
    let holders = Arc::new(Holders::default());
    let violations = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let names = Arc::new(names);
    let mut tasks = JoinSet::new();
    for (index, taker) in takers.into_iter().enumerate() {
        let (picker, names, holders, violations) = (
            picker.clone(),
            names.clone(),
            holders.clone(),
            violations.clone(),
        );
        let (load, timeline) = (load.clone(), timeline);
        tasks.spawn(async move {
            let mut outcome = TaskOutcome::default();
            let mut draws = 0u64;
            while timeline.elapsed() < load.run_time {
                draws += 1;
                let rank = picker.pick(mix(seed, ((index as u64) << 40) | draws));
                let started = timeline.elapsed();
                let (taken, exclusive) = taker
                    .take(&names.of(rank), rank, &load, &timeline, &holders)
                    .await;
                if !exclusive {
                    violations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let held = match taken {
                    Taken::Held(wait) => Some(wait),
                    Taken::HeldReleaseFailed(wait) => {
                        outcome.errors += 1;
                        Some(wait)
                    }
                    Taken::TimedOut => {
                        outcome.timeouts += 1;
                        None
                    }
                    Taken::Failed => {
                        outcome.errors += 1;
                        None
                    }
                };
                if let Some(wait) = held {
                    outcome.waits_ms.push(ms(wait));
                    if rank < load.hot_ids {
                        outcome.hot_acquisitions += 1;
                        outcome.hot_busy += timeline.elapsed().saturating_sub(started);
                    }
                }
            }
            outcome
        });
    }
    let mut outcome = Outcome::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(task) => outcome.tasks.push(task),
            Err(error) => {
                tasks.abort_all();
                return Err(format!("a task panicked: {error}").into());
            }
        }
    }
    outcome.elapsed = timeline.elapsed();
    outcome.exclusion_violations = violations.load(std::sync::atomic::Ordering::Relaxed);
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_draws_cover_every_id_evenly() {
        let picker = KeyPicker::new(10, Distribution::Uniform, 1.0);
        let mut counts = [0u32; 10];
        for draw in 0..100_000 {
            counts[picker.pick(mix(7, draw)) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&count| (9_000..11_000).contains(&count)),
            "{counts:?}"
        );
        assert_eq!(picker.pick(u64::MAX), 9);
        assert_eq!(picker.pick(0), 0);
    }

    #[test]
    fn zipf_draws_follow_the_ranks() {
        // s = 1 over 4 ranks: weights 1, 1/2, 1/3, 1/4 of 25/12.
        let picker = KeyPicker::new(4, Distribution::Zipf, 1.0);
        let mut counts = [0u32; 4];
        for draw in 0..120_000 {
            counts[picker.pick(mix(3, draw)) as usize] += 1;
        }
        let expected = [0.48, 0.24, 0.16, 0.12].map(|share| share * 120_000.0);
        for (count, expected) in counts.iter().zip(expected) {
            assert!(
                (f64::from(*count) - expected).abs() < expected * 0.05,
                "{counts:?} against {expected:?}"
            );
        }
        assert_eq!(picker.pick(u64::MAX), 3);
        assert_eq!(picker.pick(0), 0);
    }

    #[test]
    fn the_hot_index_compares_paces_on_hot_ids() {
        let task = |hot_acquisitions, busy_ms| TaskOutcome {
            hot_acquisitions,
            hot_busy: Duration::from_millis(busy_ms),
            ..TaskOutcome::default()
        };
        assert_eq!(hot_jain(&[task(10, 100)]), None);
        let even = hot_jain(&[task(10, 100), task(20, 200), task(0, 0)]);
        assert!((even.unwrap_or(0.0) - 1.0).abs() < 1e-9, "{even:?}");
        // Paces 100/s and 25/s: (125)² / (2 × (10,000 + 625)).
        let uneven = hot_jain(&[task(10, 100), task(5, 200)]).unwrap_or(0.0);
        assert!((uneven - 15_625.0 / 21_250.0).abs() < 1e-9, "{uneven}");
    }
}
