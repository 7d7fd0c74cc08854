//! `work-queue`: lock-core's leased work queue, measured on the simulator.
//!
//! For every worker count W of a sweep (default 1, 4 and 16), a run enqueues N items
//! (default 1000) into a fresh simulated 3-replica cluster, then W workers, each on its own
//! client, claim, process (a fixed `--work` time) and complete them until every item is
//! completed. With `--crash-percent P` (default 10) every W runs a second time in which a
//! worker, after each claim, dies with probability P% part-way through the work: its client
//! is cut off from every replica (nothing it sends arrives any more), its claim is dropped
//! without completing, and a fresh worker on a new client takes its slot, so W stays
//! constant. The item comes back once the dead worker's lease has run out.
//!
//! Per run it reports items per second of virtual time, the time from a claim to its
//! completion and from an item's first claim to its completion (mean and p99), storage
//! requests per item (every request the cluster served: enqueues, claims, lease renewals,
//! completions, idle polls and the dead workers' attempts), redeliveries (claims of an item
//! already claimed before), items completed more than once and items never completed. The
//! last two must be 0, and every item's completion record must name the claim whose
//! `complete()` returned `Ok`; the command fails if not. It writes `work-queue.json` and
//! `work-queue.png` (items/s against W, with and without crashes).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Args;
use fair_lock::{Clock, Locker};
use lock_core::{FencingToken, LockConfig};
use lock_recipes::{Error, WorkItemId, WorkQueue, WorkQueueConfig};
use lock_storage_memory::{ClientId, ClusterConfig, Latency, MemoryClient, MemoryCluster};
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::BoxError;
use crate::experiment::mix;
use crate::options::{GcGrace, process_count};
use crate::plot::{FONT, boxed, register_fonts};
use crate::units::{ms, parse_duration, parse_latency};

/// The name of the queue in every run (each run has a cluster of its own).
const QUEUE_NAME: &str = "lock-bench-work";

/// The longest `--work` accepted.
const MAX_WORK: Duration = Duration::from_secs(60);

/// The options of `lock-bench work-queue`.
#[derive(Clone, Debug, Args)]
pub struct WorkQueueArgs {
    /// Worker counts to run, comma-separated (1 to 64 each).
    #[arg(
        short,
        long,
        value_delimiter = ',',
        default_values = ["1", "4", "16"],
        value_parser = process_count()
    )]
    pub workers: Vec<usize>,
    /// Items enqueued in each run (1 to 100000).
    #[arg(short = 'n', long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub items: u32,
    /// How long a worker processes one item before completing it (at most 60 s).
    #[arg(long, default_value = "2ms", allow_hyphen_values = true, value_parser = parse_work)]
    pub work: Duration,
    /// The chance, in percent, that a worker dies holding an item after a claim (0 to 50).
    /// Every worker count runs once without crashes and, unless this is 0, once with them.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=50))]
    pub crash_percent: u32,
    /// The simulated latency of one message (one way), as for the experiment.
    #[arg(long, default_value = "lan", value_parser = parse_latency)]
    pub latency: Latency,
    /// The seed of the simulation, of every locker and of the crashes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write work-queue.json and work-queue.png (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Parses `--work`: a duration of at most [`MAX_WORK`].
fn parse_work(text: &str) -> Result<Duration, String> {
    let work = parse_duration(text).map_err(|error| error.to_string())?;
    if work > MAX_WORK {
        return Err(format!(
            "{text:?} is longer than {MAX_WORK:?}, the longest accepted"
        ));
    }
    Ok(work)
}

/// One run: W workers, with or without crashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RunSpec {
    /// Workers at any time.
    pub workers: usize,
    /// The chance per claim that the worker dies holding it, in percent.
    pub crash_percent: u32,
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct WorkQueueRow {
    /// Workers at any time.
    pub workers: usize,
    /// The chance per claim that the worker dies holding it, in percent.
    pub crash_percent: u32,
    /// Items enqueued.
    pub items: u32,
    /// Virtual time from the workers' start to the last completion, in seconds.
    pub duration_s: f64,
    /// Items completed per second of virtual time.
    pub items_per_second: f64,
    /// Mean time a worker waited in `claim()` for an item (probing items others hold,
    /// taking the lease, idle pauses when every item left is held), in ms.
    pub claim_wait_mean_ms: f64,
    /// The 99th percentile of that time, in ms.
    pub claim_wait_p99_ms: f64,
    /// Mean time from a claim to its successful completion, in ms.
    pub claim_to_complete_mean_ms: f64,
    /// The 99th percentile of that time, in ms.
    pub claim_to_complete_p99_ms: f64,
    /// Mean time from an item's first claim to its completion, in ms (includes the wait
    /// for a dead worker's lease to run out).
    pub first_claim_to_complete_mean_ms: f64,
    /// The 99th percentile of that time, in ms.
    pub first_claim_to_complete_p99_ms: f64,
    /// Storage requests the cluster served during the run (enqueues included), per item.
    pub requests_per_item: f64,
    /// Of which the enqueues, per item.
    pub enqueue_requests_per_item: f64,
    /// Claims of an item that had been claimed before.
    pub redeliveries: u64,
    /// Workers that died holding a claim.
    pub deaths: u64,
    /// Claims whose lease was lost before the work or completion was done
    /// (`complete()` returned `LockLost`, or `lost()` fired during the work).
    pub lost_claims: u64,
    /// Items whose `complete()` returned `Ok` more than once (must be 0).
    pub completed_more_than_once: u64,
    /// Items never completed (must be 0).
    pub never_completed: u64,
    /// Items whose completion record does not name the claim that completed them, or
    /// that a fresh worker could still claim after the run (must be 0).
    pub record_mismatches: u64,
    /// Wall-clock time the run took to compute, in seconds.
    pub wall_s: f64,
}

impl WorkQueueRow {
    /// True if exactly-once held: every item completed once, by the claim its record names.
    pub fn exactly_once(&self) -> bool {
        self.completed_more_than_once == 0
            && self.never_completed == 0
            && self.record_mismatches == 0
    }
}

/// What `work-queue` measured.
#[derive(Clone, Debug, Serialize)]
pub struct WorkQueueReport {
    /// Items per run.
    pub items: u32,
    /// Processing time per item, in ms.
    pub work_ms: f64,
    /// The simulated cluster.
    pub cluster: String,
    /// The seed.
    pub seed: u64,
    /// The lock's `lease_ttl`, in seconds: how long a dead worker's item waits.
    pub lease_ttl_s: f64,
    /// One row per run, by W then crash percentage.
    pub rows: Vec<WorkQueueRow>,
}

impl WorkQueueReport {
    /// The table `work-queue` prints.
    pub fn render(&self) -> String {
        let mut text = format!(
            "Work queue: {} items per run, {:.1} ms of work each, lease_ttl {:.0} s\n{} \
             (virtual time), seed {}\n",
            self.items, self.work_ms, self.lease_ttl_s, self.cluster, self.seed
        );
        let _ = writeln!(
            text,
            "  {:>3} {:>6} {:>9} {:>8} {:>17} {:>17} {:>21} {:>8} {:>7} {:>6} {:>5} {:>6} {:>6}",
            "W",
            "crash",
            "items/s",
            "run s",
            "claim wait ms",
            "claim→done ms",
            "1st claim→done ms",
            "req/item",
            "redeliv",
            "deaths",
            "lost",
            "twice",
            "never"
        );
        let _ = writeln!(
            text,
            "  {:>3} {:>6} {:>9} {:>8} {:>17} {:>17} {:>21}",
            "", "", "", "", "mean / p99", "mean / p99", "mean / p99"
        );
        for row in &self.rows {
            let _ = writeln!(
                text,
                "  {:>3} {:>5}% {:>9.1} {:>8.2} {:>17} {:>17} {:>21} {:>8.1} {:>7} {:>6} {:>5} {:>6} {:>6}",
                row.workers,
                row.crash_percent,
                row.items_per_second,
                row.duration_s,
                format!(
                    "{:.1} / {:.1}",
                    row.claim_wait_mean_ms, row.claim_wait_p99_ms
                ),
                format!(
                    "{:.1} / {:.1}",
                    row.claim_to_complete_mean_ms, row.claim_to_complete_p99_ms
                ),
                format!(
                    "{:.1} / {:.1}",
                    row.first_claim_to_complete_mean_ms, row.first_claim_to_complete_p99_ms
                ),
                row.requests_per_item,
                row.redeliveries,
                row.deaths,
                row.lost_claims,
                row.completed_more_than_once,
                row.never_completed
            );
        }
        let broken: Vec<&WorkQueueRow> =
            self.rows.iter().filter(|row| !row.exactly_once()).collect();
        if broken.is_empty() {
            let _ = writeln!(
                text,
                "  exactly once: every item completed by one claim, its record naming that claim"
            );
        }
        text
    }

    /// The reason the command fails, if exactly-once did not hold in some run.
    pub fn violations(&self) -> Option<String> {
        let broken: Vec<String> = self
            .rows
            .iter()
            .filter(|row| !row.exactly_once())
            .map(|row| {
                format!(
                    "W={} crash {}%: {} items completed more than once, {} never completed, {} \
                     records not naming the completing claim",
                    row.workers,
                    row.crash_percent,
                    row.completed_more_than_once,
                    row.never_completed,
                    row.record_mismatches
                )
            })
            .collect();
        (!broken.is_empty())
            .then(|| format!("the work queue broke exactly-once: {}", broken.join("; ")))
    }
}

impl WorkQueueArgs {
    /// The runs, in order: per distinct W, without crashes then with them.
    pub fn specs(&self) -> Vec<RunSpec> {
        let mut specs = Vec::new();
        for &workers in &self.workers {
            if specs.iter().any(|spec: &RunSpec| spec.workers == workers) {
                continue;
            }
            specs.push(RunSpec {
                workers,
                crash_percent: 0,
            });
            if self.crash_percent > 0 {
                specs.push(RunSpec {
                    workers,
                    crash_percent: self.crash_percent,
                });
            }
        }
        specs
    }

    fn cluster_config(&self, lock: &LockConfig) -> Result<ClusterConfig, BoxError> {
        let config = ClusterConfig {
            latency: self.latency.clone(),
            // Dead workers leave cells for a lease: keep tombstones as long as a real
            // cluster must (they cost no simulated time to read).
            gc_grace: GcGrace::Safe.duration(lock),
            seed: self.seed,
            ..ClusterConfig::default()
        };
        config.validate()?;
        Ok(config)
    }
}

/// Measures every run of `args` and writes the files; returns the report (the command's
/// error, if exactly-once broke, is left to the caller).
pub fn execute(args: &WorkQueueArgs) -> Result<(WorkQueueReport, Vec<PathBuf>), BoxError> {
    if args.workers.is_empty() {
        return Err("--workers needs at least one count".into());
    }
    let lock = LockConfig::default();
    let cluster = args.cluster_config(&lock)?;
    let specs = args.specs();
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let rows = crate::options::runtime(true, false)?.block_on(async {
        let mut rows = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            let row = measure(args, &cluster, &lock, *spec).await?;
            if !args.quiet {
                crate::note(&format!(
                    "work-queue [{}/{}] W={} crash {}%: {:.1} s of run time in {:.1} s wall",
                    index + 1,
                    specs.len(),
                    spec.workers,
                    spec.crash_percent,
                    row.duration_s,
                    row.wall_s
                ));
            }
            rows.push(row);
        }
        Ok::<_, BoxError>(rows)
    })?;
    let report = WorkQueueReport {
        items: args.items,
        work_ms: ms(args.work),
        cluster: format!(
            "simulated cluster: {} replicas, QUORUM, one-way latency {}",
            cluster.replicas,
            crate::units::describe_latency(&cluster.latency)
        ),
        seed: args.seed,
        lease_ttl_s: lock.lease_ttl.as_secs_f64(),
        rows,
    };
    let json = out.join("work-queue.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .map_err(|error| format!("cannot write {}: {error}", json.display()))?;
    let picture = out.join("work-queue.png");
    draw_picture(&picture, &report)?;
    Ok((report, vec![json, picture]))
}

/// Runs `lock-bench work-queue`.
pub fn run(args: &WorkQueueArgs) -> Result<(), BoxError> {
    let (report, files) = execute(args)?;
    let written: Vec<String> = files
        .iter()
        .map(|file| file.display().to_string())
        .collect();
    crate::emit(&format!(
        "{}\nWrote {}\n",
        report.render(),
        written.join(" and ")
    ))?;
    match report.violations() {
        Some(violations) => Err(violations.into()),
        None => Ok(()),
    }
}

/// What happened to one item.
#[derive(Debug, Default)]
struct ItemRecord {
    claims: u32,
    first_claim: Option<Instant>,
    /// The tokens of the claims whose `complete()` returned `Ok`.
    completions: Vec<FencingToken>,
    /// The time of the first successful completion.
    completed_at: Option<Instant>,
}

/// What every worker of a run reports into.
#[derive(Debug, Default)]
struct Ledger {
    items: BTreeMap<WorkItemId, ItemRecord>,
    completed: usize,
    claim_wait: Vec<f64>,
    claim_to_complete: Vec<f64>,
    deaths: u64,
    lost: u64,
}

/// What the workers of one run share.
struct Run {
    cluster: MemoryCluster,
    lock: LockConfig,
    seed: u64,
    work: Duration,
    crash_percent: u32,
    items: usize,
    ledger: Mutex<Ledger>,
    finished: watch::Sender<bool>,
}

/// One worker: a work queue handle on its own client.
struct Worker {
    queue: WorkQueue<MemoryClient>,
    client: ClientId,
}

impl Run {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn worker(&self, seed: u64) -> Result<Worker, BoxError> {
        let client = self.cluster.client();
        let id = client.id();
        let clock: Arc<dyn Clock> = Arc::new(client.clock());
        let locker = Locker::builder(client)
            .config(self.lock.clone())
            .clock(clock)
            .replay_owner_ids_unsafe(seed)
            .build()?;
        Ok(Worker {
            queue: WorkQueue::new(locker, QUEUE_NAME, WorkQueueConfig::default())?,
            client: id,
        })
    }

    /// One worker slot: claims, processes and completes items until every item is done;
    /// with crashes, its worker may die holding a claim and be replaced by a fresh one.
    async fn slot(self: Arc<Self>, slot: usize) -> Result<(), BoxError> {
        let mut finished = self.finished.subscribe();
        let mut random = Random(mix(self.seed, 0xC0FF_EE00 + slot as u64));
        let mut generation = 0u64;
        let mut worker = self.worker(mix(self.seed, (slot as u64) << 20))?;
        loop {
            let asked = Instant::now();
            let claim = tokio::select! {
                biased;
                _ = finished.wait_for(|done| *done) => return Ok(()),
                claim = worker.queue.claim() => claim?,
            };
            let claimed_at = Instant::now();
            {
                let mut ledger = self.ledger();
                ledger
                    .claim_wait
                    .push(ms(claimed_at.saturating_duration_since(asked)));
                let record = ledger.items.entry(claim.id().clone()).or_default();
                record.claims += 1;
                record.first_claim.get_or_insert(claimed_at);
            }
            if random.below(100) < u64::from(self.crash_percent) {
                // Dies part-way through the work, holding the claim: cut off from every
                // replica, so that neither the claim's release nor its renewals arrive.
                tokio::time::sleep(self.work.mul_f64(random.fraction())).await;
                self.cluster.faults().isolate(worker.client)?;
                drop(claim);
                self.ledger().deaths += 1;
                generation += 1;
                worker = self.worker(mix(self.seed, ((slot as u64) << 20) + generation))?;
                continue;
            }
            let lost = claim.lost();
            tokio::select! {
                () = lost => {
                    self.ledger().lost += 1;
                    continue;
                }
                () = tokio::time::sleep(self.work) => {}
            }
            let token = claim.fencing_token();
            let id = claim.id().clone();
            match claim.complete().await {
                Ok(()) => {
                    let now = Instant::now();
                    let mut ledger = self.ledger();
                    ledger
                        .claim_to_complete
                        .push(ms(now.saturating_duration_since(claimed_at)));
                    let record = ledger.items.entry(id).or_default();
                    record.completions.push(token);
                    if record.completed_at.is_none() {
                        record.completed_at = Some(now);
                        ledger.completed += 1;
                        if ledger.completed >= self.items {
                            self.finished.send_replace(true);
                        }
                    }
                }
                Err(Error::Lock(lock_core::Error::LockLost { .. })) => self.ledger().lost += 1,
                Err(error) => return Err(error.into()),
            }
        }
    }
}

/// A small seeded generator for the crash decisions.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0, 0)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

fn p99(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    crate::stats::percentile(values, 0.99)
}

/// One run on a fresh cluster.
async fn measure(
    args: &WorkQueueArgs,
    cluster_config: &ClusterConfig,
    lock: &LockConfig,
    spec: RunSpec,
) -> Result<WorkQueueRow, BoxError> {
    let wall = std::time::Instant::now();
    let seed = mix(
        args.seed,
        spec.workers as u64 * 1000 + u64::from(spec.crash_percent),
    );
    let cluster = MemoryCluster::new(ClusterConfig {
        seed,
        ..cluster_config.clone()
    })?;
    let (finished, _) = watch::channel(false);
    let run = Arc::new(Run {
        cluster: cluster.clone(),
        lock: lock.clone(),
        seed,
        work: args.work,
        crash_percent: spec.crash_percent,
        items: args.items as usize,
        ledger: Mutex::new(Ledger::default()),
        finished,
    });
    let before = cluster.counters();
    let producer = run.worker(mix(seed, u64::MAX))?;
    let mut ids = Vec::with_capacity(args.items as usize);
    for index in 0..args.items {
        ids.push(producer.queue.enqueue(index.to_be_bytes()).await?);
    }
    let enqueued = cluster.counters();
    let started = Instant::now();
    // Far beyond any healthy run: every item could wait for a dead worker's lease in turn.
    let deadline = Duration::from_secs(600)
        + (args.work + Duration::from_millis(100)) * args.items
        + lock.lease_ttl * 4;
    let mut tasks = JoinSet::new();
    for slot in 0..spec.workers {
        tasks.spawn(run.clone().slot(slot));
    }
    let mut done = run.finished.subscribe();
    let timed_out = tokio::select! {
        _ = done.wait_for(|done| *done) => false,
        () = tokio::time::sleep(deadline) => true,
        failed = join_first_error(&mut tasks) => {
            tasks.abort_all();
            return Err(failed.into());
        }
    };
    run.finished.send_replace(true);
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|error| format!("a worker panicked: {error}"))??;
    }
    let after = cluster.counters();
    let mut ledger = std::mem::take(&mut *run.ledger());
    let last_completion = ledger
        .items
        .values()
        .filter_map(|record| record.completed_at)
        .max()
        .unwrap_or(started);
    let duration = if timed_out {
        started.elapsed()
    } else {
        last_completion.saturating_duration_since(started)
    };

    // The checks: each enqueued item completed once, by the claim its record names, and
    // nothing left to claim.
    let mut completed_more_than_once = 0;
    let mut never_completed = 0;
    let mut record_mismatches = 0;
    let mut first_claim_to_complete = Vec::new();
    for id in &ids {
        let record = ledger.items.get(id);
        let tokens = record.map_or(&[][..], |record| record.completions.as_slice());
        match tokens {
            [] => never_completed += 1,
            [token] => {
                if producer.queue.completed_by(id).await? != Some(*token) {
                    record_mismatches += 1;
                }
            }
            _ => completed_more_than_once += 1,
        }
        if let Some((first, done)) =
            record.and_then(|record| record.first_claim.zip(record.completed_at))
        {
            first_claim_to_complete.push(ms(done.saturating_duration_since(first)));
        }
    }
    // Completions of items nobody enqueued would be a bug too.
    let enqueued_ids: BTreeSet<&WorkItemId> = ids.iter().collect();
    record_mismatches += ledger
        .items
        .keys()
        .filter(|id| !enqueued_ids.contains(id))
        .count() as u64;
    if !timed_out {
        let checker = run.worker(mix(seed, u64::MAX - 1))?;
        if let Some(claim) = checker.queue.try_claim().await? {
            crate::note(&format!(
                "work-queue W={} crash {}%: item {} could still be claimed after every item \
                 was completed",
                spec.workers,
                spec.crash_percent,
                claim.id()
            ));
            record_mismatches += 1;
            claim.abandon().await?;
        }
    }
    let requests = after.requests.total() - before.requests.total();
    let enqueue_requests = enqueued.requests.total() - before.requests.total();
    let items = f64::from(args.items);
    Ok(WorkQueueRow {
        workers: spec.workers,
        crash_percent: spec.crash_percent,
        items: args.items,
        duration_s: duration.as_secs_f64(),
        items_per_second: ledger.completed as f64 / duration.as_secs_f64().max(1e-9),
        claim_wait_mean_ms: mean(&ledger.claim_wait),
        claim_wait_p99_ms: p99(&mut ledger.claim_wait),
        claim_to_complete_mean_ms: mean(&ledger.claim_to_complete),
        claim_to_complete_p99_ms: p99(&mut ledger.claim_to_complete),
        first_claim_to_complete_mean_ms: mean(&first_claim_to_complete),
        first_claim_to_complete_p99_ms: p99(&mut first_claim_to_complete),
        requests_per_item: requests as f64 / items,
        enqueue_requests_per_item: enqueue_requests as f64 / items,
        redeliveries: ledger
            .items
            .values()
            .map(|record| u64::from(record.claims.saturating_sub(1)))
            .sum(),
        deaths: ledger.deaths,
        lost_claims: ledger.lost,
        completed_more_than_once,
        never_completed,
        record_mismatches,
        wall_s: wall.elapsed().as_secs_f64(),
    })
}

/// Waits for the first worker that fails and returns its error; pends forever if none does.
async fn join_first_error(tasks: &mut JoinSet<Result<(), BoxError>>) -> String {
    loop {
        match tasks.join_next().await {
            Some(Ok(Ok(()))) => {}
            Some(Ok(Err(error))) => return format!("a worker failed: {error}"),
            Some(Err(error)) => return format!("a worker panicked: {error}"),
            None => std::future::pending::<()>().await,
        }
    }
}

/// Draws items/s against W into `path`, a line per crash percentage.
fn draw_picture(path: &Path, report: &WorkQueueReport) -> Result<(), BoxError> {
    register_fonts();
    let mut series: Vec<u32> = report.rows.iter().map(|row| row.crash_percent).collect();
    series.sort_unstable();
    series.dedup();
    let rate = |row: &WorkQueueRow| row.items_per_second;
    let values = || {
        report
            .rows
            .iter()
            .map(rate)
            .filter(|value| value.is_finite() && *value > 0.0)
    };
    let y_max = values().fold(f64::MIN_POSITIVE, f64::max);
    let y_min = values().fold(f64::MAX, f64::min).min(y_max);
    let w_max = report.rows.iter().map(|row| row.workers).max().unwrap_or(1) as f64;
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(boxed)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Work queue: items/s against workers ({} items, {:.1} ms work each, simulator)",
                report.items, report.work_ms
            ),
            (FONT, 20).into_font().style(FontStyle::Bold),
        )
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            0.0..w_max * 1.08 + 0.5,
            (y_min * 0.7..y_max * 1.4).log_scale(),
        )
        .map_err(boxed)?;
    chart
        .configure_mesh()
        .x_desc("workers W")
        .y_desc("items per second (virtual time, log scale)")
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(WHITE)
        .draw()
        .map_err(boxed)?;
    for (index, crash_percent) in series.iter().enumerate() {
        let colour = if index == 0 {
            RGBColor(31, 119, 180)
        } else {
            RGBColor(214, 39, 40)
        };
        let style = colour.stroke_width(3);
        let mut points: Vec<(f64, f64)> = report
            .rows
            .iter()
            .filter(|row| row.crash_percent == *crash_percent)
            .map(|row| (row.workers as f64, rate(row)))
            .filter(|(_, value)| value.is_finite() && *value > 0.0)
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let label = if *crash_percent == 0 {
            "no crashes".to_owned()
        } else {
            format!("{crash_percent}% of claims: the worker dies holding it")
        };
        chart
            .draw_series(
                points
                    .iter()
                    .map(|point| Circle::new(*point, 5, style.filled())),
            )
            .map_err(boxed)?;
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(boxed)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(boxed)?;
    root.present().map_err(boxed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use clap::error::ErrorKind;

    use super::*;

    /// The command's options alone, parsed as `lock-bench work-queue` parses them.
    #[derive(Debug, Parser)]
    #[command(name = "work-queue")]
    struct Cli {
        #[command(flatten)]
        args: WorkQueueArgs,
    }

    fn parse(arguments: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["work-queue"].into_iter().chain(arguments.iter().copied()))
    }

    fn args(cli: Cli) -> WorkQueueArgs {
        cli.args
    }

    #[test]
    fn the_defaults_are_three_worker_counts_with_and_without_crashes() {
        let args = args(parse(&[]).unwrap());
        assert_eq!(args.workers, [1, 4, 16]);
        assert_eq!(
            (args.items, args.work, args.crash_percent),
            (1000, Duration::from_millis(2), 10)
        );
        let specs = args.specs();
        assert_eq!(specs.len(), 6);
        assert_eq!(
            specs.iter().filter(|spec| spec.crash_percent == 10).count(),
            3
        );
        let no_crash = self::args(parse(&["--crash-percent", "0", "-w", "2,2,3"]).unwrap());
        assert_eq!(
            no_crash.specs(),
            [
                RunSpec {
                    workers: 2,
                    crash_percent: 0
                },
                RunSpec {
                    workers: 3,
                    crash_percent: 0
                }
            ]
        );
    }

    #[test]
    fn bad_input_is_a_clap_error_naming_the_option() {
        for (arguments, option) in [
            (&["--workers", "0"][..], "--workers"),
            (&["--workers", "65"], "--workers"),
            (&["--workers", "x"], "--workers"),
            (&["--workers", "1,,4"], "--workers"),
            (&["--items", "0"], "--items"),
            (&["--items=-3"], "--items"),
            (&["--work", "5"], "--work"),
            (&["--work", "-1ms"], "--work"),
            (&["--work", "2min"], "--work"),
            (&["--crash-percent", "51"], "--crash-percent"),
            (&["--crash-percent", "ten"], "--crash-percent"),
            (&["--latency", "uniform:3ms,1ms"], "--latency"),
        ] {
            let error = parse(arguments).unwrap_err();
            assert!(
                matches!(
                    error.kind(),
                    ErrorKind::ValueValidation
                        | ErrorKind::InvalidValue
                        | ErrorKind::UnknownArgument
                ),
                "{arguments:?}: {:?}",
                error.kind()
            );
            assert!(error.to_string().contains(option), "{arguments:?}: {error}");
        }
    }

    #[test]
    fn two_workers_with_crashes_complete_every_item_exactly_once() {
        let out =
            std::env::temp_dir().join(format!("lock-bench-work-queue-{}", std::process::id()));
        let mut args =
            args(parse(&["-w", "2", "-n", "12", "--crash-percent", "30", "-q"]).unwrap());
        args.out = Some(out.clone());
        let (report, files) = execute(&args).unwrap();
        assert!(report.violations().is_none(), "{}", report.render());
        assert_eq!(report.rows.len(), 2);
        for row in &report.rows {
            assert!(row.exactly_once(), "{row:?}");
            assert_eq!((row.completed_more_than_once, row.never_completed), (0, 0));
            assert!(
                row.items_per_second > 0.0 && row.requests_per_item > 1.0,
                "{row:?}"
            );
            // Every redelivery comes from a death or a lost lease, and every death causes
            // one.
            assert_eq!(row.redeliveries, row.deaths + row.lost_claims, "{row:?}");
        }
        assert_eq!(report.rows[0].deaths, 0);
        assert!(
            report.rows[1].deaths > 0,
            "no worker died: {:?}",
            report.rows[1]
        );
        assert!(files.iter().all(|file| file.is_file()));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
        assert_eq!(json["rows"][1]["never_completed"], 0);
        std::fs::remove_dir_all(out).unwrap();
    }
}
