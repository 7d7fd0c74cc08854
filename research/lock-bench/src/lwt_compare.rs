//! `lock-bench compare-lwt`: the queue lock against the lightweight-transaction lock users
//! write instead ([`lock_lwt`]), in one run on one real cluster: uncontended acquire and
//! release latency and requests, then P processes contending for each lock in turn, with
//! waits, hand-off time, requests, fairness, errors and mutual exclusion checked as in the
//! experiment.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use fair_lock::Locker;
use lock_core::{LockConfig, LockId};
use lock_local_cluster::{LocalClusterConfig, PaxosVariant};
use lock_storage_cassandra::scylla::client::session::Session;
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::Instant as TokioInstant;

use crate::BoxError;
use crate::experiment::{
    self, Acquisition, Backend, RequestTally, RunResult, RunSpec, Settings, Variant, mix,
};
use crate::options::{BackendArgs, SimulationDefaults};
use crate::plot::WaitCurve;
use crate::progress::{Mode, RunProgress};
use crate::report::FAIRNESS_WINDOW_ACQUISITIONS;
use crate::stats::{Fairness, Summary};
use crate::timeline::Timeline;
use crate::units::{ms, parse_duration};
use lock_lwt::{LwtConfig, LwtCounts, LwtError, LwtLocker, LwtStatements, LwtTally};

/// The options of `compare-lwt`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Process counts, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_value = "1,3,5,10", value_parser = crate::options::process_count())]
    pub processes: Vec<usize>,
    /// Acquisitions per process in each contended run (500: about 7 minutes in all on a
    /// local 3-node cluster on a busy two-core machine).
    #[arg(short = 'n', long, default_value_t = 500)]
    pub acquisitions: u32,
    /// Uncontended acquisitions of each lock (interleaved) to time acquire and release.
    #[arg(long, default_value_t = 200)]
    pub uncontended: u32,
    /// How long to take and release both locks untimed first, while a fresh cluster's
    /// JVMs compile their hot paths.
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = parse_duration)]
    pub warm_up: Duration,
    /// With `--cassandra local`: the Paxos variants to run the lightweight-transaction lock
    /// on, comma-separated (`v1`, `v2`); the whole comparison runs once on a fresh local
    /// cluster started with each. Default: both. With contact points the nodes' own
    /// setting is used; either way the report gives what every node says it runs.
    #[arg(long, value_delimiter = ',')]
    pub paxos_variant: Option<Vec<PaxosVariant>>,
    /// With `--cassandra local`: how many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = crate::options::parse_node_count)]
    pub local_nodes: usize,
    /// How long the queue lock, released with nobody queued behind, stays with its locker
    /// for a quick retake (lock-core's `LockConfig::linger`; default: lock-core's, off).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub linger: Option<Duration>,
    /// The lock id (each run appends its lock and process count).
    #[arg(long, default_value = "lwt-comparison")]
    pub lock_id: String,
    /// Where to write lwt-comparison.json and lwt-wait-distribution.png (default: as for
    /// the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// The cluster: `--cassandra local` (a local cluster started for the run) or contact
    /// points (with `--create-schema` if the keyspace is missing).
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// Uncontended figures of one lock, in ms.
#[derive(Clone, Debug, Serialize)]
pub struct Uncontended {
    /// `queue`, `queue+linger` (with `--linger`) or `lwt`.
    pub lock: String,
    /// From calling lock to holding it.
    pub acquire_ms: Summary,
    /// The release.
    pub release_ms: Summary,
    /// Requests per acquisition (the acquire alone).
    pub acquire_requests: f64,
    /// Requests per release.
    pub release_requests: f64,
}

/// The figures of one contended run.
#[derive(Clone, Debug, Serialize)]
pub struct Contended {
    /// `queue` or `lwt`.
    pub lock: String,
    /// P.
    pub processes: usize,
    /// Wait times, ms.
    pub wait_ms: Summary,
    /// Maximum wait over mean wait.
    pub max_over_mean: f64,
    /// Run time per acquisition, ms: the hand-off time under contention.
    pub time_per_acquisition_ms: f64,
    /// Every request the lockers made (acquire, release, renewals, read-backs), per
    /// acquisition.
    pub requests_per_acquisition: f64,
    /// Jain's index of acquisitions per process over windows (see the experiment).
    pub fairness: Fairness,
    /// Conditional takes that found the lock held (the lightweight-transaction lock only).
    pub contention: Option<u64>,
    /// Requests that timed out (outcome unknown). For the queue lock: failed requests of
    /// any kind, which lock-core retries.
    pub timeouts: u64,
    /// Other failed requests (the lightweight-transaction lock only).
    pub errors: Option<u64>,
    /// Acquisitions made while another process held the lock (must be 0).
    pub exclusion_violations: u64,
    /// The lightweight-transaction lock's counts.
    pub lwt_counts: Option<LwtCounts>,
}

/// Everything `compare-lwt` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The cluster.
    pub backend: String,
    /// The lightweight-transaction lock's configuration.
    pub lwt: LwtConfig,
    /// The Paxos variant every node reported (`paxos_variant` in its own
    /// `system_views.settings`), or `mixed`.
    pub paxos_variant: String,
    /// Each node's `paxos_variant`, as (`address`, value).
    pub paxos_variant_by_node: Vec<(String, String)>,
    /// Acquisitions per process in the contended runs.
    pub acquisitions_per_process: u32,
    /// `/proc/loadavg` before and after the runs.
    pub load_average: (String, String),
    /// Uncontended figures, queue then lwt.
    pub uncontended: Vec<Uncontended>,
    /// Contended runs, for each P queue then lwt.
    pub contended: Vec<Contended>,
    /// Wall-clock seconds of the whole command.
    pub wall_seconds: f64,
}

/// The lightweight-transaction lock's run: what the experiment's [`RunResult`] holds.
struct LwtRun {
    processes: usize,
    acquisitions: Vec<Acquisition>,
    duration: Duration,
    counts: LwtCounts,
    exclusion_violations: u64,
}

/// Runs `compare-lwt`.
pub fn run(args: &CompareArgs) -> Result<(), BoxError> {
    if args.acquisitions == 0 || args.uncontended == 0 {
        return Err("--acquisitions and --uncontended must be at least 1".into());
    }
    if args.processes.is_empty() {
        return Err("--processes needs at least one count".into());
    }
    LockId::new(format!("{}-queue-p64-warm-up", args.lock_id))
        .map_err(|error| format!("--lock-id: {error}"))?;
    if args.backend.cassandra.is_empty() {
        return Err(
            "compare-lwt needs a real cluster, `--cassandra local` or contact points: \
                    the lightweight-transaction lock needs Paxos, which the simulator lacks"
                .into(),
        );
    }
    let settings = Settings {
        acquisitions: args.acquisitions,
        critical_section: Duration::ZERO,
        pause: Duration::ZERO,
        seed: args.backend.seed,
        lock_id: args.lock_id.clone(),
        lock: LockConfig {
            fencing: false,
            linger: args.linger.unwrap_or(LockConfig::default().linger),
            ..LockConfig::default()
        },
        progress: !args.quiet,
        handoffs: false,
        wake_hints: false,
    };
    let local = crate::options::is_local(&args.backend.cassandra);
    if !local && args.paxos_variant.is_some() {
        return Err(
            "--paxos-variant starts local clusters with that setting (--cassandra \
                    local); a cluster given by contact points runs its own, which the report \
                    reads from every node"
                .into(),
        );
    }
    let mut variants = Vec::new();
    if local {
        for variant in args
            .paxos_variant
            .clone()
            .unwrap_or_else(|| vec![PaxosVariant::V1, PaxosVariant::V2])
        {
            if !variants.contains(&Some(variant)) {
                variants.push(Some(variant));
            }
        }
    } else {
        variants.push(None);
    }
    if variants.is_empty() {
        return Err("--paxos-variant needs at least one of v1 and v2".into());
    }
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let mut text = String::new();
    let mut violations = 0;
    for variant in variants {
        let (comparison, waits) = compare_on(args, &settings, variant)?;
        text.push_str(&comparison.render());
        let name = format!("paxos-{}", comparison.paxos_variant);
        let json = out.join(format!("lwt-comparison-{name}.json"));
        std::fs::write(&json, serde_json::to_string_pretty(&comparison)?)?;
        let picture = out.join(format!("lwt-wait-distribution-{name}.png"));
        crate::plot::draw_wait_distributions(
            &picture,
            &format!(
                "Wait-time distribution, queue lock against LWT lock (Paxos {}): share of \
                 acquisitions that waited longer than x",
                comparison.paxos_variant
            ),
            &waits,
        )?;
        let _ = writeln!(
            text,
            "\nWrote {} and {}\n",
            json.display(),
            picture.display()
        );
        violations += comparison
            .contended
            .iter()
            .map(|run| run.exclusion_violations)
            .sum::<u64>();
    }
    crate::emit(&text)?;
    if violations > 0 {
        return Err(format!("{violations} mutual exclusion violations: a lock is broken").into());
    }
    Ok(())
}

/// One whole comparison: on a local cluster started with `variant`, or (`None`) on the
/// cluster of the contact points.
fn compare_on(
    args: &CompareArgs,
    settings: &Settings,
    variant: Option<PaxosVariant>,
) -> Result<(Comparison, Vec<WaitCurve>), BoxError> {
    let started = Instant::now();
    let mut cluster = None;
    let config = if let Some(paxos_variant) = variant {
        let (started, config) = crate::local::start_cluster_for_run(
            LocalClusterConfig {
                paxos_variant,
                ..LocalClusterConfig::new(args.local_nodes)
            },
            &args.backend,
            &settings.lock,
            settings.progress,
        )?;
        cluster = Some(started);
        config
    } else {
        match args
            .backend
            .backend(&settings.lock, SimulationDefaults::EXPERIMENT)?
        {
            Backend::Cassandra(config) => *config,
            Backend::Simulated(_) => return Err("compare-lwt needs --cassandra".into()),
        }
    };
    let backend = Backend::Cassandra(Box::new(config.clone()));
    let description = match &cluster {
        Some(cluster) => format!(
            "{}; a local {}-node Apache Cassandra {}, replication factor {}",
            backend.describe(),
            cluster.node_count(),
            cluster.version(),
            cluster.node_count()
        ),
        None => backend.describe(),
    };
    let before = lock_cli_support::load_average();
    let lwt = LwtConfig::default();
    let (paxos_variant_by_node, uncontended, contended, waits) =
        crate::options::runtime(false, true)?.block_on(compare(args, &config, settings, &lwt))?;
    drop(cluster);
    let paxos_variant = match paxos_variant_by_node.first() {
        Some((_, first))
            if paxos_variant_by_node
                .iter()
                .all(|(_, value)| value == first) =>
        {
            first.clone()
        }
        Some(_) => "mixed".to_owned(),
        None => "unknown".to_owned(),
    };
    let comparison = Comparison {
        backend: description,
        lwt,
        paxos_variant,
        paxos_variant_by_node,
        acquisitions_per_process: args.acquisitions,
        load_average: (before, lock_cli_support::load_average()),
        uncontended,
        contended,
        wall_seconds: started.elapsed().as_secs_f64(),
    };
    Ok((comparison, waits))
}

/// Every node's value of the setting `name`, each read from that node's own
/// `system_views.settings` (a node-local virtual table, so each query is sent to one
/// node), as (`address`, value). A node that cannot answer (Cassandra before 4.0 has no
/// `system_views`) shows what went wrong instead of a value.
async fn node_settings(session: &Session, name: &str) -> Vec<(String, String)> {
    let mut values = Vec::new();
    for node in session.get_cluster_state().get_nodes_info() {
        let text = "SELECT value FROM system_views.settings WHERE name = ?";
        let value = match crate::table_stats::first_row_on::<(Option<String>,), _>(
            session,
            node,
            text,
            (name,),
        )
        .await
        {
            Ok(Some((Some(value),))) => value,
            Ok(_) => "(not set)".to_owned(),
            Err(error) => format!("(unreadable: {error})"),
        };
        values.push((
            format!("{}:{}", node.address.ip(), node.address.port()),
            value,
        ));
    }
    values
}

/// A session, the lightweight-transaction statements and a locker for process `process`.
pub(crate) async fn lwt_locker(
    config: &CassandraConfig,
    lwt: &LwtConfig,
    seed: u64,
    process: usize,
    tally: Arc<LwtTally>,
) -> Result<LwtLocker, BoxError> {
    let storage = CassandraStorage::connect(config.clone()).await?;
    let session = storage.session().clone();
    let statements = LwtStatements::prepare(&session, &config.keyspace, lwt).await?;
    Ok(LwtLocker::new(
        session,
        statements,
        *lwt,
        format!("lwt-{:016x}-{process}", mix(seed, 0x0017_0000)),
        mix(seed, 0x0017_0000 + process as u64 + 1),
        tally,
    ))
}

/// One queue locker's uncontended acquire and release times (ms) and request counts.
#[derive(Default)]
struct QueueTimes {
    acquire: Vec<f64>,
    release: Vec<f64>,
    acquire_requests: u64,
    release_requests: u64,
}

impl QueueTimes {
    /// Takes and releases `lock_id` once with `locker`, whose requests `tally` counts.
    async fn time(
        &mut self,
        locker: &Locker<CassandraStorage>,
        lock_id: &LockId,
        tally: &RequestTally,
    ) -> Result<(), BoxError> {
        let before = tally.counts().total();
        let guard = locker.lock(lock_id).await?;
        self.acquire.push(ms(guard.wait()));
        let acquired = tally.counts().total();
        self.acquire_requests += acquired - before;
        let release = TokioInstant::now();
        guard.release().await?;
        self.release.push(ms(release.elapsed()));
        self.release_requests += tally.counts().total() - acquired;
        Ok(())
    }

    fn into_tuple(self) -> (Vec<f64>, Vec<f64>, u64, u64) {
        (
            self.acquire,
            self.release,
            self.acquire_requests,
            self.release_requests,
        )
    }
}

/// Every node's `paxos_variant`, then the figures.
type Outcome = (
    Vec<(String, String)>,
    Vec<Uncontended>,
    Vec<Contended>,
    Vec<WaitCurve>,
);

async fn compare(
    args: &CompareArgs,
    config: &CassandraConfig,
    settings: &Settings,
    lwt: &LwtConfig,
) -> Result<Outcome, BoxError> {
    let progress = settings.progress;
    // The table first, once, and the schema agreed before any process prepares on it.
    let setup = CassandraStorage::connect(config.clone()).await?;
    let paxos_variant_by_node = node_settings(setup.session(), "paxos_variant").await;
    LwtStatements::create_table(setup.session(), &config.keyspace).await?;
    setup.session().await_schema_agreement().await?;

    let queue_tally = Arc::new(RequestTally::default());
    let without_linger = LockConfig {
        linger: Duration::ZERO,
        ..settings.lock.clone()
    };
    let queue = Locker::builder(CassandraStorage::connect(config.clone()).await?)
        .config(without_linger)
        .seed(mix(settings.seed, 0x0017_0001))
        .metrics(queue_tally.clone())
        .build()?;
    // With --linger, a second queue locker lingers, timed in the same loop.
    let lingering_tally = Arc::new(RequestTally::default());
    let lingering = if settings.lock.linger.is_zero() {
        None
    } else {
        let storage = CassandraStorage::connect(config.clone()).await?;
        let locker = Locker::builder(storage)
            .config(settings.lock.clone())
            .seed(mix(settings.seed, 0x0017_0002))
            .metrics(lingering_tally.clone())
            .build()?;
        Some(locker)
    };
    let lwt_tally = Arc::new(LwtTally::default());
    let lwt_alone = lwt_locker(config, lwt, settings.seed, 0, lwt_tally.clone()).await?;
    let queue_id = LockId::new(format!("{}-queue-uncontended", settings.lock_id))?;
    let lingering_id = LockId::new(format!("{}-queue-linger-uncontended", settings.lock_id))?;
    let lwt_id = format!("{}-lwt-uncontended", settings.lock_id);

    if progress {
        crate::note(&format!(
            "warming up: taking and releasing both locks for {:?}",
            args.warm_up
        ));
    }
    let warming = TokioInstant::now();
    while warming.elapsed() < args.warm_up {
        queue.lock(&queue_id).await?.release().await?;
        if let Some(lingering) = &lingering {
            lingering.lock(&lingering_id).await?.release().await?;
        }
        lwt_alone.lock(&lwt_id).await?.release().await?;
    }

    let mut queue_times = QueueTimes::default();
    let mut lingering_times = QueueTimes::default();
    let mut lwt_times = (Vec::new(), Vec::new(), 0_u64, 0_u64);
    for _ in 0..args.uncontended {
        queue_times.time(&queue, &queue_id, &queue_tally).await?;
        if let Some(lingering) = &lingering {
            lingering_times
                .time(lingering, &lingering_id, &lingering_tally)
                .await?;
        }

        let guard = lwt_alone.lock(&lwt_id).await?;
        lwt_times.0.push(ms(guard.wait()));
        lwt_times.2 += u64::from(guard.requests());
        let release = TokioInstant::now();
        lwt_times.3 += u64::from(guard.release().await?);
        lwt_times.1.push(ms(release.elapsed()));
    }
    let count = f64::from(args.uncontended);
    let lingering_row = lingering
        .is_some()
        .then(|| ("queue+linger", lingering_times.into_tuple()));
    let uncontended = [("queue", queue_times.into_tuple())]
        .into_iter()
        .chain(lingering_row)
        .chain([("lwt", lwt_times)])
        .map(
            |(lock, (acquire, release, acquire_requests, release_requests))| Uncontended {
                lock: lock.to_owned(),
                acquire_ms: Summary::of(&acquire),
                release_ms: Summary::of(&release),
                acquire_requests: acquire_requests as f64 / count,
                release_requests: release_requests as f64 / count,
            },
        )
        .collect();
    if progress {
        crate::note(&format!(
            "timed {} uncontended acquisitions of each lock",
            args.uncontended
        ));
    }

    let backend = Backend::Cassandra(Box::new(config.clone()));
    let mut contended = Vec::new();
    let mut curves = Vec::new();
    let mut seen = Vec::new();
    for &processes in &args.processes {
        if seen.contains(&processes) {
            continue;
        }
        seen.push(processes);
        let spec = RunSpec {
            variant: Variant::QUEUE,
            processes,
        };
        let label = format!("queue P={processes}");
        let queue_run = experiment::run(&backend, settings, spec, &label).await?;
        curves.push(curve("queue lock", processes, &queue_run.acquisitions));
        contended.push(queue_row(&queue_run));
        if progress {
            crate::note(&format!(
                "{label}: done in {:.1} s",
                ms(queue_run.duration) / 1e3
            ));
        }
        let label = format!("lwt P={processes}");
        let lwt_run = run_lwt(config, lwt, settings, processes, &label).await?;
        curves.push(curve("LWT lock", processes, &lwt_run.acquisitions));
        contended.push(lwt_row(&lwt_run));
        if progress {
            crate::note(&format!(
                "{label}: done in {:.1} s",
                ms(lwt_run.duration) / 1e3
            ));
        }
    }
    Ok((paxos_variant_by_node, uncontended, contended, curves))
}

fn curve(label: &str, processes: usize, acquisitions: &[Acquisition]) -> WaitCurve {
    WaitCurve {
        label: label.to_owned(),
        processes,
        waits_ms: acquisitions.iter().map(|a| ms(a.wait)).collect(),
    }
}

/// The waits, hand-off time and fairness of `acquisitions` over a run of `duration`.
fn figures(
    processes: usize,
    acquisitions: &[Acquisition],
    duration: Duration,
) -> (Summary, f64, f64, Fairness) {
    let wait_ms = Summary::of(&acquisitions.iter().map(|a| ms(a.wait)).collect::<Vec<_>>());
    let max_over_mean = if wait_ms.mean > 0.0 {
        wait_ms.max / wait_ms.mean
    } else {
        f64::NAN
    };
    let per_acquisition = ms(duration) / acquisitions.len().max(1) as f64;
    let mut completions = vec![Vec::new(); processes];
    for acquisition in acquisitions {
        if let Some(times) = completions.get_mut(acquisition.process) {
            times.push(ms(acquisition.acquired_at));
        }
    }
    let window = per_acquisition * processes as f64 * FAIRNESS_WINDOW_ACQUISITIONS;
    let fairness = Fairness::over_windows(&completions, ms(duration), window);
    (wait_ms, max_over_mean, per_acquisition, fairness)
}

fn queue_row(run: &RunResult) -> Contended {
    let (wait_ms, max_over_mean, per_acquisition, fairness) =
        figures(run.spec.processes, &run.acquisitions, run.duration);
    Contended {
        lock: "queue".to_owned(),
        processes: run.spec.processes,
        wait_ms,
        max_over_mean,
        time_per_acquisition_ms: per_acquisition,
        requests_per_acquisition: run.requests.total() as f64
            / run.acquisitions.len().max(1) as f64,
        fairness,
        contention: None,
        timeouts: run.requests.failed,
        errors: None,
        exclusion_violations: run.exclusion_violations,
        lwt_counts: None,
    }
}

fn lwt_row(run: &LwtRun) -> Contended {
    let (wait_ms, max_over_mean, per_acquisition, fairness) =
        figures(run.processes, &run.acquisitions, run.duration);
    Contended {
        lock: "lwt".to_owned(),
        processes: run.processes,
        wait_ms,
        max_over_mean,
        time_per_acquisition_ms: per_acquisition,
        requests_per_acquisition: run.counts.total() as f64 / run.acquisitions.len().max(1) as f64,
        fairness,
        contention: Some(run.counts.not_applied),
        timeouts: run.counts.unknown,
        errors: Some(run.counts.failed),
        exclusion_violations: run.exclusion_violations,
        lwt_counts: Some(run.counts),
    }
}

/// P processes, each with its own session, take the lightweight-transaction lock
/// `settings.acquisitions` times each, with the experiment's exclusion check.
async fn run_lwt(
    config: &CassandraConfig,
    lwt: &LwtConfig,
    settings: &Settings,
    processes: usize,
    label: &str,
) -> Result<LwtRun, BoxError> {
    let seed = mix(settings.seed, 0x0017_1000 + processes as u64);
    let tally = Arc::new(LwtTally::default());
    let mut lockers = Vec::new();
    for process in 0..processes {
        lockers.push(lwt_locker(config, lwt, seed, process, tally.clone()).await?);
    }
    let lock_id = format!("{}-lwt-p{processes}", settings.lock_id);
    let origin = Timeline::start();
    let progress = Arc::new(RunProgress::new(
        label,
        u64::from(settings.acquisitions) * processes as u64,
        origin,
        Mode::for_stderr(settings.progress),
    ));
    let inside = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for (process, locker) in lockers.into_iter().enumerate() {
        let (lock_id, inside, violations, progress) = (
            lock_id.clone(),
            inside.clone(),
            violations.clone(),
            progress.clone(),
        );
        let acquisitions = settings.acquisitions;
        tasks.spawn(async move {
            let mut samples = Vec::with_capacity(acquisitions as usize);
            for number in 1..=acquisitions {
                let guard = locker.lock(&lock_id).await?;
                let acquired_at = origin.elapsed();
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    violations.fetch_add(1, Ordering::Relaxed);
                }
                samples.push(Acquisition {
                    process,
                    number,
                    acquired_at,
                    wait: guard.wait(),
                    requests: guard.requests(),
                    rejoins: 0,
                });
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await?;
                progress.show(progress.count());
            }
            Ok::<_, LwtError>(samples)
        });
    }
    let mut acquisitions: Vec<_> = crate::tasks::join_all(&mut tasks, label, "process")
        .await?
        .into_iter()
        .flatten()
        .collect();
    progress.finish();
    let duration = origin.elapsed();
    acquisitions.sort_by_key(|acquisition| (acquisition.acquired_at, acquisition.process));
    Ok(LwtRun {
        processes,
        acquisitions,
        duration,
        counts: tally.counts(),
        exclusion_violations: violations.load(Ordering::Relaxed),
    })
}

impl Comparison {
    /// The uncontended figures of `lock`.
    fn uncontended(&self, lock: &str) -> Option<&Uncontended> {
        self.uncontended.iter().find(|row| row.lock == lock)
    }

    /// The contended run of `lock` with `processes` processes.
    pub fn contended(&self, lock: &str, processes: usize) -> Option<&Contended> {
        self.contended
            .iter()
            .find(|row| row.lock == lock && row.processes == processes)
    }

    /// The comparison table and the goals, as printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Queue lock against the lightweight-transaction (LWT) lock on Paxos {}\nSetup: \
             {}\n       paxos_variant as every node's system_views.settings gives it: {}\n       \
             queue = lock-core's queue algorithm without fencing tokens; lwt = INSERT IF NOT \
             EXISTS USING TTL {} s, renewal UPDATE ... IF owner = ?, DELETE ... IF owner = ?, \
             QUORUM + SERIAL, backoff with full jitter {:?} doubling to {:?}\n       \
             load average (1, 5, 15 min) {} before, {} after; wall time {:.1} s\n",
            self.paxos_variant,
            self.backend,
            self.paxos_variant_by_node
                .iter()
                .map(|(node, value)| format!("{node} {value}"))
                .collect::<Vec<_>>()
                .join(", "),
            self.lwt.lease_ttl.as_secs(),
            self.lwt.backoff.base,
            self.lwt.backoff.cap,
            self.load_average.0,
            self.load_average.1,
            self.wall_seconds
        );
        let _ = writeln!(
            out,
            "Uncontended: one process takes and releases each lock in turn ({} times each), ms",
            self.uncontended
                .first()
                .map_or(0, |row| row.acquire_ms.count)
        );
        let _ = writeln!(
            out,
            "  {:<12} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>14} {:>14}",
            "lock",
            "acq mean",
            "acq p50",
            "acq p99",
            "rel mean",
            "rel p50",
            "rel p99",
            "requests/acq",
            "requests/rel"
        );
        for row in &self.uncontended {
            let _ = writeln!(
                out,
                "  {:<12} {:>9.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>8.2} {:>14.2} {:>14.2}",
                row.lock,
                row.acquire_ms.mean,
                row.acquire_ms.p50,
                row.acquire_ms.p99,
                row.release_ms.mean,
                row.release_ms.p50,
                row.release_ms.p99,
                row.acquire_requests,
                row.release_requests
            );
        }
        let paxos_round = match self.paxos_variant.as_str() {
            "v1" => "a Paxos v1 round of 4 coordinator-replica round trips",
            "v2" => "a Paxos v2 round of 2 coordinator-replica round trips",
            _ => "a Paxos round of 2 (v2) or 4 (v1) coordinator-replica round trips",
        };
        let _ = writeln!(
            out,
            "  (requests: the queue lock's storage requests, each one QUORUM round trip; the LWT \
             lock's CQL requests, each conditional one {paxos_round})\n"
        );
        let _ = writeln!(
            out,
            "Under contention: P processes, {} acquisitions each, no critical section, no pause \
             (waits in ms; ms/acq = run time per acquisition, the hand-off time)",
            self.acquisitions_per_process
        );
        let _ = writeln!(
            out,
            "  {:<6} {:>3} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>15} {:>10} {:>8} {:>6}",
            "lock",
            "P",
            "mean",
            "p99",
            "max",
            "max/mean",
            "ms/acq",
            "req/acq",
            "Jain (worst)",
            "contended",
            "timeouts",
            "errors"
        );
        for row in &self.contended {
            let optional = |value: Option<u64>| value.map_or("-".to_owned(), |v| v.to_string());
            let _ = writeln!(
                out,
                "  {:<6} {:>3} {:>9.1} {:>9.1} {:>9.1} {:>8.1} {:>8.2} {:>8.2} {:>15} {:>10} {:>8} \
                 {:>6}",
                row.lock,
                row.processes,
                row.wait_ms.mean,
                row.wait_ms.p99,
                row.wait_ms.max,
                row.max_over_mean,
                row.time_per_acquisition_ms,
                row.requests_per_acquisition,
                format!("{:.3} ({:.3})", row.fairness.mean, row.fairness.min),
                optional(row.contention),
                row.timeouts,
                optional(row.errors)
            );
        }
        let violations: u64 = self
            .contended
            .iter()
            .map(|row| row.exclusion_violations)
            .sum();
        let _ = writeln!(
            out,
            "  (contended: conditional takes that found the lock held; timeouts: requests with \
             an unknown outcome, resolved by a read at SERIAL; for the queue lock, failed \
             requests of any kind, which lock-core retries)\n  mutual exclusion violations: \
             {violations}\n"
        );
        self.render_goals(&mut out);
        out
    }

    fn render_goals(&self, out: &mut String) {
        let _ = writeln!(out, "Goals:");
        let verdict = |met: bool| if met { "met" } else { "NOT MET" };
        if let Some(most) = self.contended.iter().map(|row| row.processes).max()
            && let (Some(queue), Some(lwt)) =
                (self.contended("queue", most), self.contended("lwt", most))
        {
            let _ = writeln!(
                out,
                "  [{:^7}] queue P={most}: max wait within 2x its mean: {:.1} / {:.1} ms = {:.2}",
                verdict(queue.max_over_mean <= 2.0),
                queue.wait_ms.max,
                queue.wait_ms.mean,
                queue.max_over_mean
            );
            let _ = writeln!(
                out,
                "  [{:^7}] lwt P={most}: max over mean an order of magnitude worse than the \
                 queue's: {:.1} / {:.1} ms = {:.2}, {:.1}x the queue's",
                verdict(lwt.max_over_mean >= 10.0 * queue.max_over_mean),
                lwt.wait_ms.max,
                lwt.wait_ms.mean,
                lwt.max_over_mean,
                lwt.max_over_mean / queue.max_over_mean
            );
        }
        for lock in ["queue", "queue+linger"] {
            if let (Some(queue), Some(lwt)) = (self.uncontended(lock), self.uncontended("lwt")) {
                let _ = writeln!(
                    out,
                    "  [{:^7}] uncontended acquire no slower: {lock} {:.2} ms, lwt {:.2} ms (mean)",
                    verdict(queue.acquire_ms.mean <= lwt.acquire_ms.mean),
                    queue.acquire_ms.mean,
                    lwt.acquire_ms.mean
                );
            }
        }
    }
}
