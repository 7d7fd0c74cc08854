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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use clap::Args;
use fair_lock::Locker;
use lock_core::storage::{Cell, CellDelete, CellWrite, RowKind, RowRead};
use lock_core::{LockConfig, LockId, LockStorage};
use lock_storage_cassandra::scylla::client::session::Session;
use lock_storage_cassandra::scylla::statement::prepared::PreparedStatement;
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use lock_local_cluster::{LocalCluster, LocalClusterConfig};
use lock_storage_cassandra::config::{DEFAULT_GC_GRACE_SECONDS, MEMTABLE_FLUSH_PERIOD_MS};
use lock_storage_cassandra::{Replication, SchemaConfig};
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster};

use crate::BoxError;
use crate::experiment::{
    Acquisition, Backend, RequestTally, RunResult, RunSpec, Sample, Settings, Variant,
};
use crate::options::{
    AlgorithmArg, BackendArgs, RunArgs, SimulationDefaults, create_out_dir, process_count, runtime,
};
use crate::stats::Summary;
use crate::table_stats::TableSample;
use crate::timeline::Timeline;
use crate::units::ms;
use crate::units::{LAN, parse_duration};

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
    /// Acquisitions of the window hidden by a margin shorter than the safe one (fixed or
    /// adaptive), which joined the queue again (lock-core's `AcquireStats::rejoins`, added
    /// up).
    pub rejoins: u64,
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
        let rejoins: Vec<u64> = run
            .acquisitions
            .iter()
            .map(|a| u64::from(a.rejoins))
            .collect();
        let windows: Vec<Window> = samples
            .windows(2)
            .map(|pair| {
                let (start, end) = (pair[0], pair[1]);
                let count = (end.acquisitions - start.acquisitions).max(1);
                let from = usize::try_from(start.acquisitions).unwrap_or(usize::MAX);
                let to = usize::try_from(end.acquisitions).unwrap_or(usize::MAX);
                let slice = waits.get(from..to.min(waits.len())).unwrap_or(&[]);
                let rejoined: u64 = rejoins
                    .get(from..to.min(rejoins.len()))
                    .unwrap_or(&[])
                    .iter()
                    .sum();
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
                    rejoins: rejoined,
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
            "  {:>17} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>10} {:>11} {:>7} {:>7}",
            "acquisitions",
            "from s",
            "ms/acq",
            "mean wait",
            "p99 wait",
            "max wait",
            "req/acq",
            "dead/read",
            "stored dead",
            "rejoins",
            "wall s"
        );
        let optional = |value: Option<f64>, decimals: usize| {
            value.map_or_else(|| "-".to_owned(), |value| format!("{value:.decimals$}"))
        };
        for window in &self.windows {
            let _ = writeln!(
                out,
                "  {:>17} {:>9.1} {:>8.3} {:>9.2} {:>9.1} {:>9.1} {:>8.2} {:>10} {:>11} {:>7} {:>7.1}",
                format!("{}-{}", window.first, window.last),
                window.started_s,
                window.ms_per_acquisition,
                window.wait_ms.mean,
                window.wait_ms.p99,
                window.wait_ms.max,
                window.requests_per_acquisition,
                optional(window.dead_cells_per_read, 1),
                optional(window.stored_dead_cells.map(|cells| cells as f64), 0),
                window.rejoins,
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
             dead cells replica 0 keeps in the lock's rows at the window's end; rejoins = \
             acquisitions a margin shorter than the safe one hid, which joined the queue again)"
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

/// The queue reads' margin for a setup line: a fixed one (`--queue-margin`), the adaptive
/// one's bounds (lock-core's default, `--margin-acquisitions`), or the safe one alone.
pub fn describe_margin(lock: &LockConfig) -> String {
    let safe = describe(lock.safe_queue_margin());
    if let Some(margin) = lock.poll.queue_margin {
        format!("{} (fixed)", describe(margin.min(lock.safe_queue_margin())))
    } else if lock.adapts_queue_margin() {
        format!(
            "{} acquisitions' worth, {} to {safe}",
            lock.poll.margin_acquisitions,
            describe(lock.least_queue_margin())
        )
    } else {
        safe
    }
}

// ---------------------------------------------------------------------------------------
// On a real Cassandra: the lock's reads sampled with tracing, Cassandra's own tombstone
// counts, and the warnings in the nodes' logs.
// ---------------------------------------------------------------------------------------

/// What one replica reported about one read, in its trace event or its log warning
/// (`Read N live rows and M tombstone cells`): Cassandra's own count of the dead cells
/// (cell and row tombstones, expired cells, range tombstone markers) it stepped over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplicaRead {
    /// Live rows the replica returned.
    pub live_rows: u64,
    /// Tombstones it scanned.
    pub tombstones: u64,
}

/// The number at the start of `text`, and the rest.
fn leading_number(text: &str) -> Option<(u64, &str)> {
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let number = text.get(..digits)?.parse().ok()?;
    Some((number, &text[digits..]))
}

/// Parses Cassandra's `Read N live rows and M tombstone cells` (a trace event's activity,
/// or the tombstone warning of `system.log`), wherever it appears in `text`.
pub fn parse_read_activity(text: &str) -> Option<ReplicaRead> {
    text.match_indices("Read ").find_map(|(at, needle)| {
        let rest = &text[at + needle.len()..];
        let (live_rows, rest) = leading_number(rest)?;
        let rest = rest.strip_prefix(" live rows and ")?;
        let (tombstones, rest) = leading_number(rest)?;
        rest.starts_with(" tombstone cells").then_some(ReplicaRead {
            live_rows,
            tombstones,
        })
    })
}

/// What the nodes' `system.log` say about tombstones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LogFindings {
    /// Logs read.
    pub logs: usize,
    /// Every `tombstone_warn_threshold` warning, as counted in it.
    pub warnings: Vec<ReplicaRead>,
    /// `tombstone_failure_threshold` lines (reads aborted).
    pub failures: usize,
    /// Warnings about a large partition: compaction's "Writing large partition" (past
    /// `compaction_large_partition_warning_threshold`, 100 MiB by default) and the
    /// `partition_size` guardrail's.
    pub large_partitions: usize,
}

impl LogFindings {
    /// Adds what one node's log says.
    pub fn scan(&mut self, log: &str) {
        self.logs += 1;
        for line in log.lines() {
            if line.contains("Scanned over") && line.contains("tombstone_failure_threshold") {
                self.failures += 1;
            } else if line.starts_with("WARN")
                && (line.contains("large partition") || line.contains("partition_size"))
            {
                self.large_partitions += 1;
            } else if line.starts_with("WARN")
                && line.contains("tombstone_warn_threshold")
                && let Some(read) = parse_read_activity(line)
            {
                self.warnings.push(read);
            }
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        if self.warnings.is_empty() && self.failures == 0 && self.large_partitions == 0 {
            return format!(
                "no tombstone warning or failure and no large-partition warning in the {} node \
                 log(s) (tombstone_warn_threshold 1000, the default)",
                self.logs
            );
        }
        let most = self
            .warnings
            .iter()
            .map(|read| read.tombstones)
            .max()
            .unwrap_or(0);
        format!(
            "{} tombstone warning(s) (at most {most} tombstones in one read), {} aborted \
             read(s) and {} large-partition warning(s) in the {} node log(s)",
            self.warnings.len(),
            self.failures,
            self.large_partitions,
            self.logs
        )
    }
}

/// One read of the lock's, repeated with tracing on, and what the replicas said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TracedRead {
    /// Acquisitions completed (over all processes) when the lock made the read.
    pub after: u64,
    /// Which row: `queue`, `main`, `fence`...
    pub row: &'static str,
    /// One entry per replica that ran the read (the data and digest replicas).
    pub replicas: Vec<ReplicaRead>,
}

/// Cassandra's tombstone counts over one window, from the traced reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TracedWindow {
    /// Traced queue reads.
    pub queue_reads: u64,
    /// Tombstones one replica scanned per queue read, mean over replicas and reads.
    pub queue_tombstones_mean: Option<f64>,
    /// The most tombstones one replica scanned in one queue read.
    pub queue_tombstones_max: Option<u64>,
    /// Traced reads of every row (queue, main, fence).
    pub reads: u64,
    /// Tombstones one replica scanned per read of any row, mean.
    pub tombstones_mean: Option<f64>,
}

impl TracedWindow {
    /// The traced reads made while acquisitions `first..=last` were under way.
    pub fn of(traced: &[TracedRead], first: u64, last: u64) -> Self {
        let within: Vec<&TracedRead> = traced
            .iter()
            .filter(|read| read.after + 1 >= first && read.after < last)
            .collect();
        let mean = |reads: &[&TracedRead]| {
            let counts: Vec<u64> = reads
                .iter()
                .flat_map(|read| read.replicas.iter().map(|replica| replica.tombstones))
                .collect();
            (!counts.is_empty()).then(|| counts.iter().sum::<u64>() as f64 / counts.len() as f64)
        };
        let queue: Vec<&TracedRead> = within
            .iter()
            .copied()
            .filter(|read| read.row == RowKind::Queue.as_str())
            .collect();
        TracedWindow {
            queue_reads: queue.len() as u64,
            queue_tombstones_mean: mean(&queue),
            queue_tombstones_max: queue
                .iter()
                .flat_map(|read| read.replicas.iter().map(|replica| replica.tombstones))
                .max(),
            reads: within.len() as u64,
            tombstones_mean: mean(&within),
        }
    }
}

/// A [`LockStorage`] that hands every `every`-th read to a tracer, which repeats it with
/// tracing on (the lock's own request is untouched, so the lock runs as it would).
pub struct TracedStorage {
    inner: CassandraStorage,
    reads: AtomicU64,
    every: u64,
    sampled: mpsc::UnboundedSender<RowRead>,
}

impl TracedStorage {
    /// Wraps `inner`; every `every`-th read (the first included) goes to `sampled` too.
    pub fn new(
        inner: CassandraStorage,
        every: u64,
        sampled: mpsc::UnboundedSender<RowRead>,
    ) -> Self {
        TracedStorage {
            inner,
            reads: AtomicU64::new(0),
            every: every.max(1),
            sampled,
        }
    }
}

#[async_trait]
impl LockStorage for TracedStorage {
    async fn write_cell(&self, write: CellWrite) -> Result<(), lock_core::Error> {
        self.inner.write_cell(write).await
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), lock_core::Error> {
        self.inner.delete_cell(delete).await
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, lock_core::Error> {
        if self
            .reads
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(self.every)
        {
            // The tracer may be gone at the very end of a run; the sample is then dropped.
            let _ = self.sampled.send(read.clone());
        }
        self.inner.read_row(read).await
    }
}

/// Repeats sampled reads with tracing on and reads Cassandra's trace events.
struct Tracer {
    session: Arc<Session>,
    first: PreparedStatement,
    from: PreparedStatement,
    done: Arc<AtomicU64>,
    found: Arc<Mutex<Vec<TracedRead>>>,
    lost: Arc<AtomicU64>,
    quorum: usize,
}

impl Tracer {
    async fn new(
        config: &CassandraConfig,
        done: Arc<AtomicU64>,
        quorum: usize,
    ) -> Result<Self, BoxError> {
        let storage = CassandraStorage::connect(config.clone()).await?;
        let session = storage.session().clone();
        let statements = storage.statements();
        let prepare = async |text: &str| -> Result<PreparedStatement, BoxError> {
            let mut prepared = session.prepare(text).await?;
            prepared.set_consistency(config.consistency.read_level());
            prepared.set_tracing(true);
            Ok(prepared)
        };
        let first = prepare(&statements.select_first).await?;
        let from = prepare(&statements.select_from).await?;
        Ok(Tracer {
            session,
            first,
            from,
            done,
            found: Arc::new(Mutex::new(Vec::new())),
            lost: Arc::new(AtomicU64::new(0)),
            quorum,
        })
    }

    /// Traces every read that arrives until `stop` fires, then waits for the traces
    /// under way.
    async fn run(self, mut sampled: mpsc::UnboundedReceiver<RowRead>, stop: oneshot::Receiver<()>) {
        let mut tasks = tokio::task::JoinSet::new();
        tokio::pin!(stop);
        loop {
            let read = tokio::select! {
                read = sampled.recv() => read,
                _ = &mut stop => None,
            };
            let Some(read) = read else { break };
            let after = self.done.load(Ordering::Relaxed);
            let (session, found, lost) =
                (self.session.clone(), self.found.clone(), self.lost.clone());
            let statement = if read.start.is_some() {
                self.from.clone()
            } else {
                self.first.clone()
            };
            let quorum = self.quorum;
            tasks.spawn(async move {
                match trace(&session, &statement, &read, quorum).await {
                    Some(replicas) => {
                        found
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(TracedRead {
                                after,
                                row: read.row.kind.as_str(),
                                replicas,
                            })
                    }
                    None => {
                        lost.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
            while tasks.try_join_next().is_some() {}
        }
        while tasks.join_next().await.is_some() {}
    }
}

/// Runs `read` with tracing and returns each replica's count, or `None` if the read or its
/// trace could not be had.
async fn trace(
    session: &Session,
    statement: &PreparedStatement,
    read: &RowRead,
    quorum: usize,
) -> Option<Vec<ReplicaRead>> {
    let lock_id = read.row.lock_id.as_str();
    let kind = read.row.kind.as_str();
    let limit = i32::try_from(read.limit.get()).unwrap_or(i32::MAX);
    let result = match &read.start {
        None => {
            session
                .execute_unpaged(statement, (lock_id, kind, limit))
                .await
        }
        Some(start) => {
            session
                .execute_unpaged(statement, (lock_id, kind, start.as_str(), limit))
                .await
        }
    }
    .ok()?;
    let id = result.tracing_id()?;
    // Cassandra writes trace events in the background; a replica's may come late.
    let mut best: Vec<ReplicaRead> = Vec::new();
    for attempt in 1..=6_u64 {
        tokio::time::sleep(Duration::from_millis(250 * attempt)).await;
        if let Ok(info) = session.get_tracing_info(&id).await {
            let replicas: Vec<ReplicaRead> = info
                .events
                .iter()
                .filter_map(|event| event.activity.as_deref().and_then(parse_read_activity))
                .collect();
            if replicas.len() > best.len() {
                best = replicas;
            }
            if best.len() >= quorum {
                break;
            }
        }
    }
    (!best.is_empty()).then_some(best)
}

/// A run of one lock on Cassandra, with its windows and traced reads.
#[derive(Debug)]
pub struct RealRun {
    /// The run, as the experiment records one.
    pub run: RunResult,
    /// Samples at every window's end, the first before the run.
    pub samples: Vec<Sample>,
    /// The traced reads.
    pub traced: Vec<TracedRead>,
    /// Sampled reads whose trace could not be had.
    pub traces_lost: u64,
    /// The nodes' own figures for the lock table, sampled through the run.
    pub table: Vec<TableSample>,
}

/// The lock configuration and lock id of `spec`, as the experiment makes them.
fn lock_of(settings: &Settings, spec: RunSpec) -> Result<(LockConfig, LockId), BoxError> {
    let lock = LockConfig {
        algorithm: spec.variant.algorithm,
        fencing: spec.variant.fencing,
        ..settings.lock.clone()
    };
    let lock_id = LockId::new(format!(
        "{}-{}-p{}",
        settings.lock_id,
        spec.variant.label(),
        spec.processes
    ))?;
    Ok((lock, lock_id))
}

/// Takes one lock `settings.acquisitions` times per process on Cassandra, each process with
/// its own session, sampling every `window` acquisitions and tracing every `trace_every`-th
/// read of each process (`quorum`: how many replicas answer a read).
pub async fn run_on_cassandra(
    config: &CassandraConfig,
    settings: &Settings,
    spec: RunSpec,
    window: u64,
    trace_every: u64,
    quorum: usize,
) -> Result<RealRun, BoxError> {
    let (lock, lock_id) = lock_of(settings, spec)?;
    config.check_lock_config(&lock)?;
    let done = Arc::new(AtomicU64::new(0));
    let tracer = Tracer::new(config, done.clone(), quorum).await?;
    let (found, lost) = (tracer.found.clone(), tracer.lost.clone());
    let (watch_stop, watch_stopped) = oneshot::channel();
    let watching = tokio::spawn(crate::table_stats::watch(
        tracer.session.clone(),
        config.keyspace.clone(),
        config.table.clone(),
        TABLE_SAMPLE_INTERVAL,
        watch_stopped,
    ));
    let (sampled_tx, sampled_rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = oneshot::channel();
    let tracing = tokio::spawn(tracer.run(sampled_rx, stop_rx));
    let tally = Arc::new(RequestTally::default());
    let mut lockers = Vec::new();
    for process in 0..spec.processes {
        let storage = CassandraStorage::connect(config.clone()).await?;
        lockers.push(
            Locker::builder(TracedStorage::new(storage, trace_every, sampled_tx.clone()))
                .config(lock.clone())
                .seed(crate::experiment::mix(settings.seed, process as u64 + 1))
                .metrics(tally.clone())
                .build()?,
        );
    }
    drop(sampled_tx);
    let progress_found = found.clone();
    let line = move |previous: &Sample, now: &Sample| {
        let count = now
            .acquisitions
            .saturating_sub(previous.acquisitions)
            .max(1);
        let traced = progress_found
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let window = TracedWindow::of(&traced, previous.acquisitions + 1, now.acquisitions);
        format!(
            "  acquisitions {}-{}: {:.3} ms/acq, {:.2} req/acq, {} traced queue reads, {} \
             tombstones per queue read (max {})",
            previous.acquisitions + 1,
            now.acquisitions,
            ms(now.at.saturating_sub(previous.at)) / count as f64,
            (now.requests - previous.requests) as f64 / count as f64,
            window.queue_reads,
            window
                .queue_tombstones_mean
                .map_or_else(|| "-".to_owned(), |mean| format!("{mean:.1}")),
            window
                .queue_tombstones_max
                .map_or_else(|| "-".to_owned(), |max| max.to_string()),
        )
    };
    let contended = contend_in_windows(
        lockers,
        &lock_id,
        settings,
        spec,
        window,
        Windows {
            tally,
            done,
            fill: Box::new(|_: &mut Sample| {}),
            line: Box::new(line),
        },
        Timeline::start(),
    )
    .await;
    let _ = stop_tx.send(());
    let _ = tracing.await;
    let _ = watch_stop.send(());
    let table = watching.await.unwrap_or_default();
    let (run, samples) = contended?;
    let mut traced = std::mem::take(&mut *found.lock().unwrap_or_else(PoisonError::into_inner));
    traced.sort_by_key(|read| read.after);
    Ok(RealRun {
        run,
        samples,
        traced,
        traces_lost: lost.load(Ordering::Relaxed),
        table,
    })
}

/// How often a run on Cassandra samples the nodes' figures for the lock table.
const TABLE_SAMPLE_INTERVAL: Duration = Duration::from_secs(30);

/// The same run on a simulated cluster (virtual time): each window's sample counts the
/// reads every replica served and the dead cells it stepped over, so that dead cells per
/// read are per replica read, as Cassandra's trace events count them.
pub async fn run_on_simulator(
    cluster_config: ClusterConfig,
    settings: &Settings,
    spec: RunSpec,
    window: u64,
) -> Result<(RunResult, Vec<Sample>), BoxError> {
    let (lock, lock_id) = lock_of(settings, spec)?;
    let timeline = Timeline::dilated(cluster_config.timer_dilation);
    let cluster = MemoryCluster::new(cluster_config)?;
    let tally = Arc::new(RequestTally::default());
    let mut lockers = Vec::new();
    for process in 0..spec.processes {
        let client = cluster.client();
        let clock: Arc<dyn fair_lock::Clock> = Arc::new(client.clock());
        lockers.push(
            Locker::builder(client)
                .config(lock.clone())
                .clock(clock)
                .replay_owner_ids_unsafe(crate::experiment::mix(settings.seed, process as u64 + 1))
                .metrics(tally.clone())
                .build()?,
        );
    }
    let before = cluster.counters();
    let replicas = before.replicas.len();
    let row_id = lock_id.clone();
    let fill = move |sample: &mut Sample| {
        let now = cluster.counters();
        let served = |counters: &lock_storage_memory::Counters| {
            counters
                .replicas
                .iter()
                .map(|replica| replica.requests.reads)
                .sum::<u64>()
        };
        sample.reads = served(&now) - served(&before);
        sample.dead_cells_scanned = now.dead_cells_scanned - before.dead_cells_scanned;
        let replica = lock_storage_memory::ReplicaId(0);
        let second = cluster
            .replica_clock(replica)
            .map_or(0, |clock| clock.as_micros() / 1_000_000);
        sample.stored_dead_cells = [RowKind::Queue, RowKind::Main]
            .into_iter()
            .map(|kind| {
                let row = lock_core::storage::RowKey::new(kind, row_id.clone());
                cluster
                    .replica_row(replica, &row)
                    .unwrap_or_default()
                    .iter()
                    .filter(|(_, version)| !version.is_live_at(second))
                    .count() as u64
            })
            .sum();
    };
    let line = move |previous: &Sample, now: &Sample| {
        let count = now
            .acquisitions
            .saturating_sub(previous.acquisitions)
            .max(1);
        format!(
            "  simulated, acquisitions {}-{}: {:.3} ms/acq, {:.1} dead cells per replica read \
             ({replicas} replicas)",
            previous.acquisitions + 1,
            now.acquisitions,
            ms(now.at.saturating_sub(previous.at)) / count as f64,
            (now.dead_cells_scanned - previous.dead_cells_scanned) as f64
                / (now.reads - previous.reads).max(1) as f64
        )
    };
    contend_in_windows(
        lockers,
        &lock_id,
        settings,
        spec,
        window,
        Windows {
            tally,
            done: Arc::new(AtomicU64::new(0)),
            fill: Box::new(fill),
            line: Box::new(line),
        },
        timeline,
    )
    .await
}

/// The progress line of a window, from the samples at its start and end.
type WindowLine = Box<dyn Fn(&Sample, &Sample) -> String + Send + Sync>;

/// How a run is cut into windows.
struct Windows {
    /// The lockers' request counts.
    tally: Arc<RequestTally>,
    /// Acquisitions completed so far (shared with whoever wants to know).
    done: Arc<AtomicU64>,
    /// Fills in a sample's cluster counters.
    fill: Box<dyn Fn(&mut Sample) + Send + Sync>,
    /// The progress line of a window, from the samples at its start and end.
    line: WindowLine,
}

/// Runs every locker `settings.acquisitions` times on `lock_id` (each acquisition followed
/// by its release), taking a sample before the run, after every `window` acquisitions and
/// after the last, and counting exclusion violations.
async fn contend_in_windows<S: LockStorage>(
    lockers: Vec<Locker<S>>,
    lock_id: &LockId,
    settings: &Settings,
    spec: RunSpec,
    window: u64,
    windows: Windows,
    timeline: Timeline,
) -> Result<(RunResult, Vec<Sample>), BoxError> {
    let Windows {
        tally,
        done,
        fill,
        line,
    } = windows;
    let counted = tally.clone();
    let total = u64::from(settings.acquisitions) * spec.processes as u64;
    let wall = std::time::Instant::now();
    let take = Arc::new(move |acquisitions: u64| {
        let mut sample = Sample {
            acquisitions,
            at: timeline.elapsed(),
            wall: wall.elapsed(),
            requests: tally.counts().total(),
            ..Sample::default()
        };
        fill(&mut sample);
        sample
    });
    let samples = Arc::new(Mutex::new(vec![take(0)]));
    let line = Arc::new(line);
    let inside = Arc::new(AtomicU64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for (process, locker) in lockers.into_iter().enumerate() {
        let (lock_id, done, inside, violations, samples, take, line) = (
            lock_id.clone(),
            done.clone(),
            inside.clone(),
            violations.clone(),
            samples.clone(),
            take.clone(),
            line.clone(),
        );
        let (count, critical, pause, progress) = (
            settings.acquisitions,
            settings.critical_section,
            settings.pause,
            settings.progress,
        );
        tasks.spawn(async move {
            let mut acquisitions = Vec::with_capacity(count as usize);
            for number in 1..=count {
                let guard = locker.lock(&lock_id).await?;
                let acquired_at = timeline.elapsed();
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    violations.fetch_add(1, Ordering::Relaxed);
                }
                acquisitions.push(Acquisition {
                    process,
                    number,
                    acquired_at,
                    wait: guard.wait(),
                    requests: guard.stats().requests,
                    rejoins: guard.stats().rejoins,
                });
                if !critical.is_zero() {
                    timeline.sleep(critical).await;
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await?;
                let finished = done.fetch_add(1, Ordering::SeqCst) + 1;
                if finished.is_multiple_of(window) || finished == total {
                    let now = take(finished);
                    let mut samples = samples.lock().unwrap_or_else(PoisonError::into_inner);
                    if progress && let Some(previous) = samples.last() {
                        crate::note(&line(previous, &now));
                    }
                    samples.push(now);
                }
                if !pause.is_zero() {
                    timeline.sleep(pause).await;
                }
            }
            Ok::<_, lock_core::Error>(acquisitions)
        });
    }
    let mut acquisitions = Vec::new();
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(done)) => acquisitions.extend(done),
            Ok(Err(error)) => {
                failure.get_or_insert_with(|| format!("a process failed: {error}"));
                tasks.abort_all();
            }
            Err(error) if error.is_cancelled() => {}
            Err(error) => {
                failure.get_or_insert_with(|| format!("a process panicked: {error}"));
                tasks.abort_all();
            }
        }
    }
    if let Some(failure) = failure {
        return Err(failure.into());
    }
    let duration = timeline.elapsed();
    acquisitions.sort_by_key(|acquisition| (acquisition.acquired_at, acquisition.process));
    let mut samples = std::mem::take(&mut *samples.lock().unwrap_or_else(PoisonError::into_inner));
    samples.sort_by_key(|sample| sample.acquisitions);
    Ok((
        RunResult {
            spec,
            acquisitions,
            duration,
            requests: counted.counts(),
            cluster: None,
            exclusion_violations: violations.load(Ordering::Relaxed),
            handoffs: None,
            wall_time: wall.elapsed(),
        },
        samples,
    ))
}

/// Real Cassandra beside the simulator, window by window.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// What ran.
    pub setup: String,
    /// Nodes of the real cluster (and replicas of the simulated one).
    pub nodes: usize,
    /// The run on Cassandra.
    pub real: TombstoneReport,
    /// Cassandra's own tombstone counts per window (traced reads).
    pub traced: Vec<TracedWindow>,
    /// Reads traced, and sampled reads whose trace was not had.
    pub traced_reads: usize,
    /// Sampled reads whose trace was lost.
    pub traces_lost: u64,
    /// What the nodes' logs say.
    pub logs: LogFindings,
    /// The nodes' own figures for the lock table (largest partition, SSTables, tombstones
    /// per read), sampled through the run on Cassandra.
    pub table: Vec<TableSample>,
    /// The same run on the simulator (calibrated latency, the table's gc_grace).
    pub simulated: TombstoneReport,
    /// The simulator's latency model, in `--latency` syntax.
    pub latency: String,
    /// `/proc/loadavg` before and after the run on Cassandra.
    pub load: [String; 2],
}

impl Comparison {
    /// The table printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.setup);
        let _ = writeln!(
            out,
            "load average (1, 5, 15 min): {} before, {} after the run on Cassandra\n",
            self.load[0], self.load[1]
        );
        let _ = writeln!(
            out,
            "  {:>15} {:>9} {:>10} {:>7} {:>7} {:>11} {:>9} {:>10} {:>10} {:>11}",
            "acquisitions",
            "ms/acq",
            "mean wait",
            "rejoins",
            "traced",
            "tomb/queue",
            "max",
            "tomb/read",
            "sim ms/acq",
            "sim dead/rd"
        );
        let optional = |value: Option<f64>, decimals: usize| {
            value.map_or_else(|| "-".to_owned(), |value| format!("{value:.decimals$}"))
        };
        for (index, window) in self.real.windows.iter().enumerate() {
            let traced = self.traced.get(index).cloned().unwrap_or_default();
            let simulated = self.simulated.windows.get(index);
            let per_replica = simulated.and_then(|window| window.dead_cells_per_read);
            let _ = writeln!(
                out,
                "  {:>15} {:>9.3} {:>10.2} {:>7} {:>7} {:>11} {:>9} {:>10} {:>10} {:>11}",
                format!("{}-{}", window.first, window.last),
                window.ms_per_acquisition,
                window.wait_ms.mean,
                window.rejoins,
                traced.queue_reads,
                optional(traced.queue_tombstones_mean, 1),
                traced
                    .queue_tombstones_max
                    .map_or_else(|| "-".to_owned(), |max| max.to_string()),
                optional(traced.tombstones_mean, 1),
                optional(simulated.map(|window| window.ms_per_acquisition), 3),
                optional(per_replica, 1),
            );
        }
        let most = self
            .traced
            .iter()
            .filter_map(|window| window.queue_tombstones_max)
            .max();
        let _ = writeln!(
            out,
            "\n  Cassandra: {} reads traced ({} lost); the most tombstones one replica scanned in \
             one traced read: {}; {}",
            self.traced_reads,
            self.traces_lost,
            most.map_or_else(|| "-".to_owned(), |most| most.to_string()),
            self.logs.describe()
        );
        out.push_str(&crate::table_stats::describe(&self.table));
        let _ = writeln!(
            out,
            "  last window / first window on Cassandra: {:.2}x run time per acquisition; \
             simulator: {:.2}x",
            self.real.slowdown, self.simulated.slowdown
        );
        let _ = writeln!(
            out,
            "  (ms/acq = run time per acquisition; mean wait in ms; rejoins = acquisitions a margin \
             shorter than the safe one hid, which joined the queue again; traced = queue reads repeated \
             with tracing; tomb/queue and max = tombstones one replica scanned per traced queue \
             read, mean and most, from Cassandra's own trace events; tomb/read = the same over \
             traced reads of every row; sim = the simulator with the same P, acquisitions, \
             gc_grace and seed, its latency ({}) calibrated so that it hands the lock off as \
             fast as the real cluster did, since a read steps over the tombstones of the \
             acquisitions made within the queue floor's margin; sim dead/rd = dead cells one \
             replica stepped over per read of any row)",
            self.latency
        );
        out
    }

    /// Writes the comparison as `tombstones.json` into `dir` and returns the path.
    pub fn write(&self, dir: &Path) -> Result<std::path::PathBuf, BoxError> {
        let path = dir.join("tombstones.json");
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        Ok(path)
    }
}

/// `lock-bench tombstones --cassandra local`: starts a local cluster, takes the lock there
/// with every `--trace-every`-th read traced, reads the nodes' logs, times the round trip,
/// stops the cluster, then runs the simulator calibrated to that round trip with the same
/// settings, and prints both window by window.
pub fn run_local(
    args: &TombstoneArgs,
    settings: &Settings,
    variant: Variant,
    window: u64,
) -> Result<(), BoxError> {
    let backend = &args.backend;
    if backend.latency != LAN || backend.dead_cell_cost.is_some() {
        return Err(
            "--latency and --dead-cell-cost do not go with --cassandra local: the simulator is \
             calibrated to the local cluster's round trip"
                .into(),
        );
    }
    backend.refuse_username_for_local()?;
    let nodes = args.local_nodes;
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let spec = RunSpec {
        variant,
        processes: args.processes,
    };
    let total = u64::from(settings.acquisitions) * args.processes as u64;
    let gc_grace = match backend.gc_grace {
        None => DEFAULT_GC_GRACE_SECONDS,
        Some(gc_grace) => {
            let duration = gc_grace.duration(&settings.lock);
            let seconds = duration
                .as_secs()
                .saturating_add(u64::from(duration.subsec_nanos() > 0));
            u32::try_from(seconds).unwrap_or(u32::MAX)
        }
    };
    // Checked before the cluster starts, so that a bad --gc-grace costs no minute.
    let table_config = CassandraConfig {
        schema: Some(SchemaConfig {
            gc_grace_seconds: gc_grace,
            ..SchemaConfig::new(Replication::Simple {
                replication_factor: u32::try_from(nodes).unwrap_or(3),
            })
        }),
        ..CassandraConfig::new(["127.0.0.1"], &backend.keyspace)
    };
    table_config.validate()?;
    table_config.check_lock_config(&settings.lock)?;
    let version = backend.cassandra_version;
    let cluster_config = LocalClusterConfig {
        version: Some(version),
        ..LocalClusterConfig::new(nodes)
    };
    lock_local_cluster::check_tools(&cluster_config)?;
    if settings.progress {
        crate::note(&format!(
            "starting a local {nodes}-node Apache Cassandra {version} cluster..."
        ));
    }
    let cluster = LocalCluster::start(cluster_config)?;
    let contact_points = cluster.contact_points();
    let config = CassandraConfig {
        contact_points: contact_points.clone(),
        ..table_config
    };
    let setup = format!(
        "Tombstones on Cassandra and on the simulator: {total} acquisitions of one lock ({}, P = \
         {}, critical section {}, pause {}, queue margin {}), windows of {window} acquisitions\nreal: a local \
         {nodes}-node Apache Cassandra {version} at {} (RF {nodes}, QUORUM, table \
         gc_grace_seconds {gc_grace}, memtable_flush_period_in_ms {MEMTABLE_FLUSH_PERIOD_MS}, \
         tombstone_warn_threshold 1000 by default), every \
         {}-th read of each process repeated with tracing",
        variant.label(),
        args.processes,
        describe(args.critical_section),
        describe(args.pause),
        describe_margin(&settings.lock),
        contact_points.join(","),
        args.trace_every
    );
    if settings.progress {
        crate::note(&setup);
    }
    let load_before = lock_cli_support::load_average();
    let quorum = nodes / 2 + 1;
    let real = crate::options::runtime(false, true)?.block_on(run_on_cassandra(
        &config,
        settings,
        spec,
        window,
        args.trace_every,
        quorum,
    ))?;
    let load_after = lock_cli_support::load_average();
    let mut logs = LogFindings::default();
    for node in 0..nodes {
        let path = cluster.log_path(node)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        logs.scan(&text);
    }
    drop(cluster);

    let real_ms = ms(real.run.duration) / total.max(1) as f64;
    let simulated_cluster = |latency: Latency| ClusterConfig {
        gc_grace: Duration::from_secs(u64::from(gc_grace)),
        dead_cell_read_cost: crate::options::SimulationDefaults::TOMBSTONES.dead_cell_cost,
        timer_dilation: crate::options::SimulationDefaults::TOMBSTONES.timer_dilation,
        ..crate::local::simulated_cluster(nodes, latency, settings.seed)
    };
    let (latency, calibrated_ms) = crate::options::runtime(true, false)?
        .block_on(calibrate_rate(real_ms, &simulated_cluster, settings, spec))?;
    let latency_text = crate::units::describe_latency(&latency);
    if settings.progress {
        crate::note(&format!(
            "simulator calibrated to the real hand-off rate ({real_ms:.3} ms per acquisition):              --latency {latency_text} gives {calibrated_ms:.3}; running it"
        ));
    }
    let simulated_config = simulated_cluster(latency);
    let (simulated_run, simulated_samples) = crate::options::runtime(true, false)?
        .block_on(run_on_simulator(simulated_config, settings, spec, window))?;
    let real_report = TombstoneReport::new(String::new(), &real.run, &real.samples, false);
    let traced = real_report
        .windows
        .iter()
        .map(|window| TracedWindow::of(&real.traced, window.first, window.last))
        .collect();
    let comparison = Comparison {
        setup,
        nodes,
        traced,
        traced_reads: real.traced.len(),
        traces_lost: real.traces_lost,
        logs,
        table: real.table,
        simulated: TombstoneReport::new(String::new(), &simulated_run, &simulated_samples, true),
        real: real_report,
        latency: latency_text,
        load: [load_before, load_after],
    };
    let path = comparison.write(&out)?;
    crate::emit(&format!(
        "{}\nWrote {}\n",
        comparison.render(),
        path.display()
    ))?;
    let violations = real.run.exclusion_violations + simulated_run.exclusion_violations;
    if violations > 0 {
        return Err(format!("{violations} mutual exclusion violations: the lock is broken").into());
    }
    Ok(())
}

/// The spread of the simulated one-way latency while calibrating to a hand-off rate: p99
/// four times the median, as the local cluster's round trips were (see the README).
const RATE_SPREAD: u32 = 4;
/// Acquisitions per bisection step of [`calibrate_rate`], over all processes.
const RATE_SAMPLE: u64 = 2_000;

/// The log-normal one-way latency (p99 = 4 × median) whose simulated run, at P and the lock
/// settings of `spec`, takes `target_ms` per acquisition (bisected on the median over short
/// runs), with the rate it gives. The tombstones a read steps over are those of the
/// acquisitions made within the queue floor's margin, so a simulator compared with a real
/// cluster must hand the lock off as fast. Run it on a runtime with a paused clock.
pub async fn calibrate_rate(
    target_ms: f64,
    cluster: &dyn Fn(Latency) -> ClusterConfig,
    settings: &Settings,
    spec: RunSpec,
) -> Result<(Latency, f64), BoxError> {
    let processes = spec.processes.max(1) as u64;
    let short = Settings {
        acquisitions: u32::try_from(RATE_SAMPLE / processes)
            .unwrap_or(1)
            .clamp(1, settings.acquisitions.max(1)),
        progress: false,
        ..settings.clone()
    };
    let total = u64::from(short.acquisitions) * processes;
    let model = |median_us: f64| {
        let median = Duration::from_micros(median_us.round().max(1.0) as u64);
        Latency::LogNormal {
            median,
            p99: median * RATE_SPREAD,
        }
    };
    let (mut low, mut high) = (1.0_f64, (target_ms * 1e3).max(10.0));
    let mut best: Option<(f64, Latency, f64)> = None;
    for _ in 0..12 {
        let middle = (low * high).sqrt();
        let latency = model(middle);
        let run = crate::experiment::run(
            &Backend::Simulated(cluster(latency.clone())),
            &short,
            spec,
            "",
        )
        .await?;
        let got = ms(run.duration) / total.max(1) as f64;
        if got < target_ms {
            low = middle;
        } else {
            high = middle;
        }
        let miss = (got / target_ms.max(1e-9)).ln().abs();
        if best
            .as_ref()
            .is_none_or(|(best_miss, _, _)| miss < *best_miss)
        {
            best = Some((miss, latency, got));
        }
    }
    best.map(|(_, latency, got)| (latency, got))
        .ok_or_else(|| "calibration ran no simulation".into())
}

/// The options of `tombstones`.
#[derive(Debug, Args)]
pub struct TombstoneArgs {
    /// Acquisitions in all, over all processes [default: 1000000; 50000 with
    /// `--cassandra local`].
    #[arg(short = 'n', long)]
    pub acquisitions: Option<u64>,
    /// Acquisitions per window [default: 100000; 5000 with `--cassandra local`].
    #[arg(long)]
    pub window: Option<u64>,
    /// How many processes contend.
    #[arg(short, long, default_value = "5", value_parser = process_count())]
    pub processes: usize,
    /// The algorithm.
    #[arg(long, value_enum, default_value_t = AlgorithmArg::Queue)]
    pub algorithm: AlgorithmArg,
    /// Take a fencing token with every acquisition (queue algorithm only).
    #[arg(long)]
    pub fencing: bool,
    /// How long a process holds the lock before releasing it.
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_duration)]
    pub critical_section: Duration,
    /// How long a process pauses after releasing before it asks again.
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_duration)]
    pub pause: Duration,
    /// The lock id.
    #[arg(long, default_value = "tombstones")]
    pub lock_id: String,
    /// A fixed margin before the latest queue head seen where queue reads start (lock-core's
    /// `PollConfig::queue_margin`; default `2 × max_clock_skew + request_timeout`, 4 s).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub queue_margin: Option<Duration>,
    /// Adapt the queue margin to the lock's rate: this many acquisitions' worth of the time
    /// between them (lock-core's `PollConfig::margin_acquisitions`; 200 recommended for hot
    /// locks; default 0, off, every read starting 4 s back).
    #[arg(long)]
    pub margin_acquisitions: Option<u32>,
    /// Where to write tombstones.json (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// With `--cassandra local`: how many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = crate::options::parse_node_count)]
    pub local_nodes: usize,
    /// With `--cassandra local`: every this many reads of each process, the same read is
    /// repeated with CQL tracing on, for Cassandra's own count of the tombstones it scanned
    /// (a prime, so that the sample does not fall on the same read of every acquisition).
    #[arg(long, default_value_t = 47)]
    pub trace_every: u64,
    /// Where the lock lives. `--cassandra local` starts a local cluster, runs there with
    /// Cassandra's tombstone counts sampled by tracing, then runs the simulator beside it.
    #[command(flatten)]
    pub backend: BackendArgs,
}

impl TombstoneArgs {
    /// Acquisitions in all and per window, with the defaults of the backend.
    pub fn counts(&self) -> Result<(u64, u64), BoxError> {
        let local = crate::options::is_local(&self.backend.cassandra);
        let acquisitions = self
            .acquisitions
            .unwrap_or(if local { 50_000 } else { 1_000_000 });
        let window = self.window.unwrap_or(if local { 5_000 } else { 100_000 });
        if acquisitions == 0 || window == 0 {
            return Err("--acquisitions and --window must be at least 1".into());
        }
        if self.trace_every == 0 {
            return Err("--trace-every must be at least 1".into());
        }
        Ok((acquisitions, window))
    }
}

/// Runs `tombstones`.
pub fn run(args: &TombstoneArgs) -> Result<(), BoxError> {
    let (acquisitions, window) = args.counts()?;
    let variant = match args.algorithm {
        AlgorithmArg::Queue => Variant {
            algorithm: lock_core::Algorithm::Queue,
            fencing: args.fencing,
        },
        AlgorithmArg::Baseline | AlgorithmArg::Bakery if args.fencing => {
            return Err("--fencing applies to the queue algorithm only".into());
        }
        AlgorithmArg::Baseline => Variant::BASELINE,
        AlgorithmArg::Bakery => Variant::BAKERY,
    };
    // The experiment's defaults, with this command's choices.
    let mut run_args = RunArgs::defaults()?;
    run_args.processes = vec![args.processes];
    run_args.acquisitions = Some(per_process(acquisitions, args.processes)?);
    run_args.critical_section = args.critical_section;
    run_args.pause = args.pause;
    run_args.lock_id.clone_from(&args.lock_id);
    run_args.queue_margin = args.queue_margin;
    run_args.margin_acquisitions = args.margin_acquisitions;
    run_args.quiet = args.quiet;
    run_args.backend.seed = args.backend.seed;
    let settings = run_args.settings()?;
    if crate::options::is_local(&args.backend.cassandra) {
        return run_local(args, &settings, variant, window);
    }
    let backend = args
        .backend
        .backend(&settings.lock, SimulationDefaults::TOMBSTONES)?;
    let simulated = matches!(backend, Backend::Simulated(_));
    let out = create_out_dir(args.out.as_ref())?;
    let spec = RunSpec {
        variant,
        processes: args.processes,
    };
    let total = u64::from(settings.acquisitions) * args.processes as u64;
    let setup = format!(
        "Tombstones: {total} acquisitions of one lock ({}, P = {}, critical section {}, \
         pause {}, queue margin {}), windows of {} acquisitions\n{}{}",
        variant.label(),
        args.processes,
        describe(args.critical_section),
        describe(args.pause),
        describe_margin(&settings.lock),
        window,
        backend.describe(),
        match &backend {
            Backend::Simulated(config) => format!(
                ", dead-cell read cost {}",
                describe(config.dead_cell_read_cost)
            ),
            Backend::Cassandra(_) => String::new(),
        }
    );
    if !args.quiet {
        crate::note(&setup);
    }
    let label = format!("tombstones {} P={}", variant.label(), args.processes);
    let (run, samples) = runtime(simulated, !simulated)?.block_on(
        crate::experiment::run_sampled(&backend, &settings, spec, &label, window),
    )?;
    let report = TombstoneReport::new(setup, &run, &samples, simulated);
    let path = report.write(&out)?;
    crate::emit(&format!("{}\nWrote {}\n", report.render(), path.display()))?;
    if run.exclusion_violations > 0 {
        return Err(format!(
            "{} mutual exclusion violations: the lock is broken",
            run.exclusion_violations
        )
        .into());
    }
    Ok(())
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
                rejoins: u32::from(index == 3),
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
            handoffs: None,
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
        let rejoins: Vec<u64> = report.windows.iter().map(|window| window.rejoins).collect();
        assert_eq!(rejoins, [0, 1, 0], "the fourth acquisition rejoined");
        assert_eq!(report.windows[2].wait_ms.count, 1);
        assert_eq!(report.slowdown, 2.0, "the partial window is left out");
        assert_eq!(report.request_growth, 1.0);
        let text = report.render();
        assert!(text.contains("3-4"), "{text}");
        let unsimulated = TombstoneReport::new("setup".into(), &run, &samples, false);
        assert_eq!(unsimulated.windows[0].dead_cells_per_read, None);
    }

    #[test]
    fn cassandra_read_counts_are_parsed_from_trace_events_and_warnings() {
        assert_eq!(
            parse_read_activity("Read 1 live rows and 287 tombstone cells"),
            Some(ReplicaRead {
                live_rows: 1,
                tombstones: 287
            })
        );
        // The event of a read over the warning threshold, as Cassandra 5.0 words it.
        assert_eq!(
            parse_read_activity(
                "Read 0 live rows and 1001 tombstone cells (see tombstone_warn_threshold)"
            ),
            Some(ReplicaRead {
                live_rows: 0,
                tombstones: 1001
            })
        );
        for other in [
            "Executing single-partition query on lock_cells",
            "Read  live rows and 3 tombstone cells",
            "Read 1 live rows and tombstone cells",
            "Read 1 live rows and 3 tombstones",
            "Read 99999999999999999999999 live rows and 3 tombstone cells",
            "",
        ] {
            assert_eq!(parse_read_activity(other), None, "{other:?}");
        }
        // The first well-formed occurrence wins, after a false start.
        assert_eq!(
            parse_read_activity("Read repair; Read 2 live rows and 0 tombstone cells"),
            Some(ReplicaRead {
                live_rows: 2,
                tombstones: 0
            })
        );
    }

    #[test]
    fn logs_count_only_real_warnings_and_aborted_reads() {
        let log = "\
INFO  [main] 2026-01-01 00:00:00,000 Config.java - tombstone_warn_threshold=1000; tombstone_failure_threshold=100000
WARN  [ReadStage-2] 2026-01-01 00:00:01,000 ReadCommand.java - Read 1 live rows and 1204 tombstone cells for query SELECT * FROM lock_bench.lock_cells WHERE lock_id = 'x' LIMIT 10; token 42 (see tombstone_warn_threshold)
ERROR [ReadStage-1] 2026-01-01 00:00:02,000 ReadCommand.java - Scanned over 100001 tombstones for query SELECT ...; query aborted (see tombstone_failure_threshold)
INFO  [ReadStage-1] 2026-01-01 00:00:03,000 Read 1 live rows and 5000 tombstone cells in an info line
WARN  [CompactionExecutor:1] 2026-01-01 00:00:04,000 BigTableWriter.java - Writing large partition lock_bench/lock_cells:x:queue (120.000MiB) to sstable /data/nb-1-big-Data.db
INFO  [main] 2026-01-01 00:00:00,000 Config.java - partition_size_warn_threshold=null
";
        let mut findings = LogFindings::default();
        findings.scan(log);
        findings.scan("");
        assert_eq!(findings.logs, 2);
        assert_eq!(
            findings.warnings,
            vec![ReplicaRead {
                live_rows: 1,
                tombstones: 1204
            }]
        );
        assert_eq!(findings.failures, 1);
        assert_eq!(findings.large_partitions, 1);
        assert!(findings.describe().contains("1 tombstone warning(s)"));
        assert!(findings.describe().contains("1 large-partition warning(s)"));
        assert!(findings.describe().contains("at most 1204"));
        let quiet = LogFindings {
            logs: 3,
            ..LogFindings::default()
        };
        assert!(quiet.describe().starts_with("no tombstone warning"));
    }

    #[test]
    fn traced_reads_fall_into_the_window_under_way() {
        let read = |after: u64, row: &'static str, counts: &[u64]| TracedRead {
            after,
            row,
            replicas: counts
                .iter()
                .map(|&tombstones| ReplicaRead {
                    live_rows: 1,
                    tombstones,
                })
                .collect(),
        };
        let traced = [
            read(0, "queue", &[10, 20]),
            read(9, "main", &[2]),
            read(9, "queue", &[30]),
            read(10, "queue", &[1000]),
        ];
        // Acquisitions 1-10: reads made after 0 to 9 had completed.
        let first = TracedWindow::of(&traced, 1, 10);
        assert_eq!(first.queue_reads, 2);
        assert_eq!(first.queue_tombstones_mean, Some(20.0));
        assert_eq!(first.queue_tombstones_max, Some(30));
        assert_eq!(first.reads, 3);
        assert_eq!(first.tombstones_mean, Some(62.0 / 4.0));
        let second = TracedWindow::of(&traced, 11, 20);
        assert_eq!(second.queue_tombstones_max, Some(1000));
        let empty = TracedWindow::of(&traced, 21, 30);
        assert_eq!((empty.queue_reads, empty.queue_tombstones_mean), (0, None));
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
