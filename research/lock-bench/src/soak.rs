//! `lock-bench soak`: what a hot lock costs a real cluster over time, with default
//! settings, while each node is killed and restarted in turn.
//!
//! A local cluster is started for the run and the schema created with the backend's
//! defaults. `-p` lockers, each with its own session, take and release one lock id with
//! `LockConfig::default()` as fast as they can for `--duration`. Every `--restart-every`
//! one node is killed (`SIGKILL`) and restarted, the nodes in turn. An error from `lock()`
//! or from a release does not end the run: it is recorded (when, which call, its text)
//! and the locker goes on after a short pause. Per window of `--window` the report gives
//! the acquisitions, the latency of the lockers' queue-row reads, the errors, the lock
//! table's largest partition on each node (the queue partition: the run has one lock id),
//! each node's heap in use (`jcmd PID GC.heap_info`) and the tombstone and large-partition
//! warnings the node logs gained.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clap::Args;
use fair_lock::Locker;
use lock_core::storage::{Cell, CellDelete, CellWrite, RowKind, RowRead};
use lock_core::{LockConfig, LockId, LockStorage};
use lock_local_cluster::{CASSANDRA_VERSION, CQL_PORT, LocalCluster, LocalClusterConfig};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};
use serde::Serialize;

use crate::BoxError;
use crate::stats::Summary;
use crate::table_stats::NodeTableStats;
use crate::tombstones::{LogFindings, describe};
use crate::units::parse_duration;

/// The longest run `--duration` accepts.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// The shortest `--window`: every window's end asks each node for its figures and runs
/// `jcmd` on it, which takes seconds on a busy machine.
const MIN_WINDOW: Duration = Duration::from_secs(10);

/// The most windows a run is cut into.
const MAX_WINDOWS: u64 = 1000;

/// The shortest `--restart-every`: a node takes tens of seconds to start again.
const MIN_RESTART_EVERY: Duration = Duration::from_secs(30);

/// How long a locker pauses after an error before it calls again.
const ERROR_PAUSE: Duration = Duration::from_millis(500);

/// How long the lockers may take to finish the calls under way when the run ends, after
/// which they are stopped.
const FINISH_GRACE: Duration = Duration::from_secs(60);

/// How long one `jcmd` may take.
const JCMD_TIMEOUT: Duration = Duration::from_secs(30);

/// The options of `soak`.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// How many lockers (each with its own session) take the one lock.
    #[arg(short, long, default_value = "5", value_parser = crate::options::process_count())]
    pub processes: usize,
    /// How long the lockers run.
    #[arg(long, default_value = "45m", allow_hyphen_values = true, value_parser = parse_duration)]
    pub duration: Duration,
    /// Every this long one node is killed (SIGKILL) and restarted, the nodes in turn; at or
    /// past `--duration`, no node is.
    #[arg(long, default_value = "10m", allow_hyphen_values = true, value_parser = parse_duration)]
    pub restart_every: Duration,
    /// The report's windows.
    #[arg(long, default_value = "5m", allow_hyphen_values = true, value_parser = parse_duration)]
    pub window: Duration,
    /// How long a locker holds the lock before releasing it.
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_duration)]
    pub critical_section: Duration,
    /// How many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = crate::options::parse_node_count)]
    pub local_nodes: usize,
    /// The lock id.
    #[arg(long, default_value = "soak")]
    pub lock_id: String,
    /// Where to write soak.json (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The run's times, checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// How long the lockers run.
    pub duration: Duration,
    /// Between node restarts.
    pub restart_every: Duration,
    /// The windows' length.
    pub window: Duration,
}

impl Plan {
    /// The windows, `(from, to)` in seconds of run time: `window` long each, the last cut
    /// at the run's end.
    pub fn windows(&self) -> Vec<(f64, f64)> {
        let (length, end) = (self.window.as_secs_f64(), self.duration.as_secs_f64());
        let mut bounds = Vec::new();
        let mut from = 0.0;
        let mut index = 0_u32;
        while from < end {
            let to = (length * f64::from(index + 1)).min(end);
            bounds.push((from, to));
            from = to;
            index += 1;
        }
        bounds
    }

    /// The end of the last window that ends at or before `at` (seconds of run time), 0 if
    /// none does: the figures a restart due at `at` waits for.
    pub fn last_window_end_by(&self, at: f64) -> f64 {
        self.windows()
            .iter()
            .map(|&(_, to)| to)
            .filter(|&to| to <= at)
            .fold(0.0, f64::max)
    }

    /// When each restart starts, in run time, and which node (from 0) it restarts.
    pub fn restarts(&self, nodes: usize) -> Vec<(Duration, usize)> {
        let mut restarts = Vec::new();
        let mut at = self.restart_every;
        while at < self.duration {
            restarts.push((at, restarts.len() % nodes.max(1)));
            at += self.restart_every;
        }
        restarts
    }
}

impl SoakArgs {
    /// Checks the times against each other and the lock id and critical section against
    /// the lock's defaults.
    pub fn plan(&self) -> Result<Plan, BoxError> {
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return Err(format!(
                "--duration {} is out of range: give more than 0 and at most {}",
                describe(self.duration),
                describe(MAX_DURATION)
            )
            .into());
        }
        if self.window < MIN_WINDOW || self.window > self.duration {
            return Err(format!(
                "--window {} is out of range: give at least {} and at most --duration ({})",
                describe(self.window),
                describe(MIN_WINDOW),
                describe(self.duration)
            )
            .into());
        }
        if self.duration.as_secs_f64() / self.window.as_secs_f64() > MAX_WINDOWS as f64 {
            return Err(format!(
                "--window {} cuts --duration {} into more than {MAX_WINDOWS} windows: give a \
                 longer window",
                describe(self.window),
                describe(self.duration)
            )
            .into());
        }
        if self.restart_every < MIN_RESTART_EVERY {
            return Err(format!(
                "--restart-every {} is too short: a node takes tens of seconds to start \
                 again; give at least {} (or --duration or more for no restart)",
                describe(self.restart_every),
                describe(MIN_RESTART_EVERY)
            )
            .into());
        }
        let lock = LockConfig::default();
        if self.critical_section >= lock.lease_ttl {
            return Err(format!(
                "--critical-section {} is not shorter than the default lease ({}): the lease \
                 would lapse while the lock is held",
                describe(self.critical_section),
                describe(lock.lease_ttl)
            )
            .into());
        }
        LockId::new(self.lock_id.clone()).map_err(|error| format!("--lock-id: {error}"))?;
        Ok(Plan {
            duration: self.duration,
            restart_every: self.restart_every,
            window: self.window,
        })
    }
}

// ---------------------------------------------------------------------------------------
// What the lockers and the restarts record.
// ---------------------------------------------------------------------------------------

/// Which call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Call {
    /// `Locker::lock`.
    Lock,
    /// `LockGuard::release`.
    Release,
}

/// One error from a locker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorRecord {
    /// When the call started, in seconds of run time.
    pub started_s: f64,
    /// When it returned the error.
    pub at_s: f64,
    /// Which locker (from 0).
    pub locker: usize,
    /// Which call.
    pub call: Call,
    /// The error's text.
    pub error: String,
    /// The node (from 1) that was down or restarting while the call ran, if one was.
    pub during_restart_of: Option<usize>,
}

/// One node's kill and restart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outage {
    /// The node, from 1.
    pub node: usize,
    /// When it was killed, in seconds of run time.
    pub killed_s: f64,
    /// When it was up again (accepting CQL and seen up by its peers); `None` if it did not
    /// come back.
    pub up_s: Option<f64>,
    /// Why it did not come back.
    pub error: Option<String>,
}

impl Outage {
    /// Whether a call that ran from `started` to `ended` (seconds of run time) overlapped
    /// the outage; one that never ended overlaps everything after the kill up to `run_end`.
    pub fn overlaps(&self, started: f64, ended: f64, run_end: f64) -> bool {
        let up = self.up_s.unwrap_or(run_end.max(ended));
        started <= up && ended >= self.killed_s
    }
}

/// The node (from 1) of the first outage the call overlapped.
pub fn outage_during(outages: &[Outage], started: f64, ended: f64, run_end: f64) -> Option<usize> {
    outages
        .iter()
        .find(|outage| outage.overlaps(started, ended, run_end))
        .map(|outage| outage.node)
}

/// The index of the window that holds `at` (seconds of run time): the window whose span
/// has it (a time on a boundary goes to the later window), the last for a time at or past
/// the run's end, the first for a negative one. `None` when there is no window.
pub fn window_of(windows: &[(f64, f64)], at: f64) -> Option<usize> {
    let last = windows.len().checked_sub(1)?;
    Some(windows.iter().position(|&(_, to)| at < to).unwrap_or(last))
}

/// The queue reads a [`TimedStorage`] recorded: when each finished and its latency in ms.
pub type QueueReads = Arc<Mutex<Vec<(Instant, f64)>>>;

/// A [`LockStorage`] that times every read of a queue row (the lock's own request, as
/// it is) and records when it finished and how long it took.
pub struct TimedStorage {
    inner: CassandraStorage,
    reads: QueueReads,
}

impl TimedStorage {
    /// Wraps `inner`; each queue read's end and latency go onto `reads`.
    pub fn new(inner: CassandraStorage, reads: QueueReads) -> Self {
        TimedStorage { inner, reads }
    }
}

#[async_trait]
impl LockStorage for TimedStorage {
    async fn write_cell(&self, write: CellWrite) -> Result<(), lock_core::Error> {
        self.inner.write_cell(write).await
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), lock_core::Error> {
        self.inner.delete_cell(delete).await
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, lock_core::Error> {
        if read.row.kind != RowKind::Queue {
            return self.inner.read_row(read).await;
        }
        let began = Instant::now();
        let result = self.inner.read_row(read).await;
        let latency = crate::units::ms(began.elapsed());
        self.reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((Instant::now(), latency));
        result
    }
}

// ---------------------------------------------------------------------------------------
// What is read from the nodes at each window's end.
// ---------------------------------------------------------------------------------------

/// The heap in use, in bytes, from the output of `jcmd PID GC.heap_info`: the `used`
/// figures of the lines that give a generation's or the whole heap's `total` (Serial,
/// Parallel, G1), or of ZGC's `ZHeap` line; Metaspace is not heap and is left out.
pub fn parse_heap_used(text: &str) -> Option<u64> {
    let mut found = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("Metaspace") || trimmed.starts_with("class space") {
            continue;
        }
        let counts =
            (line.contains(" total ") && line.contains(" used ")) || trimmed.starts_with("ZHeap");
        if !counts {
            continue;
        }
        let used = line
            .split(',')
            .find_map(|part| part.split_once("used ").map(|(_, rest)| rest))
            .and_then(|value| parse_size(value.split_whitespace().next()?))?;
        found = Some(found.unwrap_or(0_u64).checked_add(used)?);
    }
    found
}

/// `12345K`, `80M`, `2G` or a plain byte count, in bytes.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let number: u64 = digits.parse().ok()?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(scale)
}

/// The heap in use of the JVM `pid`, in MiB, by `jcmd` from the JDK the node's `java`
/// came from, or why it could not be had.
fn heap_used_mib(pid: u32) -> Result<f64, String> {
    let exe = Path::new("/proc").join(pid.to_string()).join("exe");
    let java = std::fs::read_link(&exe)
        .map_err(|error| format!("cannot read {}: {error}", exe.display()))?;
    let jcmd = java.with_file_name("jcmd");
    if !jcmd.is_file() {
        return Err(format!(
            "no jcmd beside the node's java ({}): a runtime without the JDK's tools",
            java.display()
        ));
    }
    let mut child = std::process::Command::new(&jcmd)
        .arg(pid.to_string())
        .arg("GC.heap_info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", jcmd.display()))?;
    let deadline = Instant::now() + JCMD_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("jcmd gave no answer in {}", describe(JCMD_TIMEOUT)));
            }
            Err(error) => return Err(format!("cannot wait for jcmd: {error}")),
        }
    };
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout
            .read_to_string(&mut output)
            .map_err(|error| format!("cannot read jcmd's output: {error}"))?;
    }
    if !status.success() {
        let first = output.lines().find(|line| !line.trim().is_empty());
        return Err(format!(
            "jcmd failed ({status}): {}",
            first.unwrap_or("no output")
        ));
    }
    parse_heap_used(&output)
        .map(|bytes| bytes as f64 / f64::from(1 << 20))
        .ok_or_else(|| {
            format!(
                "no heap figure in jcmd's output: {:?}",
                output.chars().take(200).collect::<String>()
            )
        })
}

/// Where the reading of one node's log has got to.
struct LogCursor {
    path: PathBuf,
    offset: u64,
}

impl LogCursor {
    /// The whole lines the log gained since the last call (from the start after the log
    /// was rotated and is shorter than before).
    fn advance(&mut self) -> Result<String, String> {
        let mut file = std::fs::File::open(&self.path)
            .map_err(|error| format!("cannot open {}: {error}", self.path.display()))?;
        let length = file
            .metadata()
            .map_err(|error| format!("cannot read {}: {error}", self.path.display()))?
            .len();
        if length < self.offset {
            self.offset = 0;
        }
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|error| format!("cannot read {}: {error}", self.path.display()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|error| format!("cannot read {}: {error}", self.path.display()))?;
        let whole = complete_lines(&bytes);
        self.offset += whole as u64;
        Ok(String::from_utf8_lossy(&bytes[..whole]).into_owned())
    }
}

/// How many leading bytes of `bytes` are whole lines (up to and with the last newline).
pub fn complete_lines(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |at| at + 1)
}

/// What one node's log gained in one window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LogWindow {
    /// `tombstone_warn_threshold` warnings.
    pub tombstone_warnings: usize,
    /// The most tombstones one of those reads scanned.
    pub most_tombstones: Option<u64>,
    /// Reads aborted at `tombstone_failure_threshold`.
    pub tombstone_failures: usize,
    /// Large-partition warnings.
    pub large_partition_warnings: usize,
    /// Why the log could not be read.
    pub error: Option<String>,
}

impl LogWindow {
    /// The counts of `text`, new lines of a node's log.
    pub fn of(text: &str) -> Self {
        let mut findings = LogFindings::default();
        findings.scan(text);
        LogWindow {
            tombstone_warnings: findings.warnings.len(),
            most_tombstones: findings.warnings.iter().map(|read| read.tombstones).max(),
            tombstone_failures: findings.failures,
            large_partition_warnings: findings.large_partitions,
            error: None,
        }
    }
}

/// One node's figures at one window's end.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeWindow {
    /// The node, from 1.
    pub node: usize,
    /// The lock table's largest partition in the node's SSTables (the queue partition: the
    /// run has one lock id), whole MiB as Cassandra rounds it; the memtable is not counted.
    pub partition_mib: Option<i64>,
    /// The node's tombstones per local read since it (re)started, and why the figures
    /// could not be had.
    pub table: Option<NodeTableStats>,
    /// Heap in use, MiB.
    pub heap_used_mib: Option<f64>,
    /// Why the heap could not be read.
    pub heap_error: Option<String>,
    /// What the node's log gained in the window.
    pub log: LogWindow,
}

/// Everything read from the nodes at one window's end.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WindowSample {
    /// One entry per node, in node order.
    pub nodes: Vec<NodeWindow>,
}

// ---------------------------------------------------------------------------------------
// The report.
// ---------------------------------------------------------------------------------------

/// Errors, split by whether a node was down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorCounts {
    /// Errors of calls that overlapped a node's kill and restart.
    pub during_restart: usize,
    /// The others.
    pub otherwise: usize,
}

/// One window of the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SoakWindow {
    /// Start, seconds of run time.
    pub from_s: f64,
    /// End.
    pub to_s: f64,
    /// Acquisitions made in the window.
    pub acquisitions: u64,
    /// Acquisitions per second.
    pub per_second: f64,
    /// Latency of the lockers' queue-row reads that finished in the window, ms.
    pub queue_read_ms: Summary,
    /// Errors that the lockers got in the window.
    pub errors: ErrorCounts,
    /// Nodes (from 1) that were down at some time in the window.
    pub nodes_down: Vec<usize>,
    /// The nodes at the window's end.
    pub sample: WindowSample,
}

/// What a soak run found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SoakReport {
    /// What ran.
    pub setup: String,
    /// The windows.
    pub windows: Vec<SoakWindow>,
    /// Every kill and restart.
    pub outages: Vec<Outage>,
    /// Every error, in order.
    pub errors: Vec<ErrorRecord>,
    /// The errors, split.
    pub error_counts: ErrorCounts,
    /// Acquisitions in all.
    pub acquisitions: u64,
    /// Times two lockers held the lock at once.
    pub exclusion_violations: u64,
    /// Lockers still in a call when the run's grace ran out, and stopped.
    pub lockers_stopped: usize,
    /// `/proc/loadavg` before and after.
    pub load_average: (String, String),
}

/// What the run recorded, to be cut into windows.
#[derive(Debug, Default)]
pub struct Recorded {
    /// When each acquisition was made, seconds of run time.
    pub acquisitions: Vec<f64>,
    /// Each queue read: when it finished, and its latency in ms.
    pub queue_reads: Vec<(f64, f64)>,
    /// The errors (their `during_restart_of` is filled in by [`SoakReport::new`]).
    pub errors: Vec<ErrorRecord>,
    /// The outages.
    pub outages: Vec<Outage>,
    /// One sample per window, in order.
    pub samples: Vec<WindowSample>,
}

impl SoakReport {
    /// Cuts `recorded` into `plan`'s windows; `run_end` is when the lockers had stopped,
    /// in seconds of run time.
    pub fn new(setup: String, plan: &Plan, mut recorded: Recorded, run_end: f64) -> Self {
        let bounds = plan.windows();
        let mut windows: Vec<SoakWindow> = bounds
            .iter()
            .enumerate()
            .map(|(index, &(from_s, to_s))| SoakWindow {
                from_s,
                to_s,
                acquisitions: 0,
                per_second: 0.0,
                queue_read_ms: Summary::default(),
                errors: ErrorCounts::default(),
                nodes_down: recorded
                    .outages
                    .iter()
                    .filter(|outage| {
                        outage.killed_s < to_s && outage.overlaps(from_s, to_s, run_end)
                    })
                    .map(|outage| outage.node)
                    .collect(),
                sample: recorded.samples.get(index).cloned().unwrap_or_default(),
            })
            .collect();
        for &at in &recorded.acquisitions {
            if let Some(index) = window_of(&bounds, at) {
                windows[index].acquisitions += 1;
            }
        }
        let mut latencies = vec![Vec::new(); windows.len()];
        for &(at, latency) in &recorded.queue_reads {
            if let Some(index) = window_of(&bounds, at) {
                latencies[index].push(latency);
            }
        }
        let mut counts = ErrorCounts::default();
        recorded.errors.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        for error in &mut recorded.errors {
            error.during_restart_of =
                outage_during(&recorded.outages, error.started_s, error.at_s, run_end);
            let slot = window_of(&bounds, error.at_s).map(|index| &mut windows[index].errors);
            for tally in [Some(&mut counts), slot].into_iter().flatten() {
                if error.during_restart_of.is_some() {
                    tally.during_restart += 1;
                } else {
                    tally.otherwise += 1;
                }
            }
        }
        for (window, latencies) in windows.iter_mut().zip(latencies) {
            window.queue_read_ms = Summary::of(&latencies);
            let length = window.to_s - window.from_s;
            window.per_second = if length > 0.0 {
                window.acquisitions as f64 / length
            } else {
                0.0
            };
        }
        SoakReport {
            setup,
            windows,
            outages: recorded.outages,
            errors: recorded.errors,
            error_counts: counts,
            acquisitions: recorded.acquisitions.len() as u64,
            exclusion_violations: 0,
            lockers_stopped: 0,
            load_average: (String::new(), String::new()),
        }
    }

    /// The table printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}\n", self.setup);
        let _ = writeln!(
            out,
            "  {:>13} {:>9} {:>7} {:>8} {:>8} {:>9} {:>9} {:>11} {:>14} {:>20} {:>10} {:>6}",
            "window min",
            "acq",
            "acq/s",
            "q reads",
            "q p50",
            "q p99",
            "q max",
            "errors r/o",
            "partition MiB",
            "heap MiB",
            "warn t/l",
            "down"
        );
        let per_node = |nodes: &[NodeWindow], value: &dyn Fn(&NodeWindow) -> String| {
            nodes.iter().map(value).collect::<Vec<_>>().join("/")
        };
        for window in &self.windows {
            let nodes = &window.sample.nodes;
            let warnings: usize = nodes.iter().map(|node| node.log.tombstone_warnings).sum();
            let large: usize = nodes
                .iter()
                .map(|node| node.log.large_partition_warnings)
                .sum();
            let summary = &window.queue_read_ms;
            let latency = |value: f64| {
                if summary.count == 0 {
                    "-".to_owned()
                } else {
                    format!("{value:.2}")
                }
            };
            let _ = writeln!(
                out,
                "  {:>13} {:>9} {:>7.1} {:>8} {:>8} {:>9} {:>9} {:>11} {:>14} {:>20} {:>10} {:>6}",
                format!("{:.1}-{:.1}", window.from_s / 60.0, window.to_s / 60.0),
                window.acquisitions,
                window.per_second,
                summary.count,
                latency(summary.p50),
                latency(summary.p99),
                latency(summary.max),
                format!(
                    "{}/{}",
                    window.errors.during_restart, window.errors.otherwise
                ),
                per_node(nodes, &|node| node
                    .partition_mib
                    .map_or_else(|| "-".to_owned(), |mib| mib.to_string())),
                per_node(nodes, &|node| node
                    .heap_used_mib
                    .map_or_else(|| "-".to_owned(), |mib| format!("{mib:.0}"))),
                format!("{warnings}/{large}"),
                if window.nodes_down.is_empty() {
                    "-".to_owned()
                } else {
                    window
                        .nodes_down
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                }
            );
        }
        let _ = writeln!(
            out,
            "\n  (acq = acquisitions made in the window; q = the lockers' queue-row reads that \
             finished in the window, latency in ms; errors r/o = errors of calls that \
             overlapped a node's restart / the others; partition MiB = the lock table's \
             largest partition in each node's SSTables at the window's end, node 1/2/3, whole \
             MiB as Cassandra rounds them (0: under 1 MiB; the memtable is not counted); heap \
             MiB = each node's heap in use at the window's end (jcmd GC.heap_info); warn t/l = \
             tombstone / large-partition warnings the node logs gained in the window; down = \
             nodes killed or restarting in the window)"
        );
        let _ = writeln!(out, "\n  restarts:");
        if self.outages.is_empty() {
            let _ = writeln!(out, "    none");
        }
        for outage in &self.outages {
            let _ = writeln!(
                out,
                "    node {} killed at {:.1} s, {}",
                outage.node,
                outage.killed_s,
                match (outage.up_s, &outage.error) {
                    (Some(up), _) =>
                        format!("up again at {up:.1} s ({:.1} s down)", up - outage.killed_s),
                    (None, Some(error)) => format!("did not come back: {error}"),
                    (None, None) => "not back by the run's end".to_owned(),
                }
            );
        }
        let _ = writeln!(
            out,
            "\n  errors: {} during a node's restart, {} otherwise",
            self.error_counts.during_restart, self.error_counts.otherwise
        );
        for error in &self.errors {
            let _ = writeln!(
                out,
                "    {:.3} s, locker {}, {:?}{}: {}",
                error.at_s,
                error.locker,
                error.call,
                error
                    .during_restart_of
                    .map_or_else(String::new, |node| format!(" (node {node} restarting)")),
                error.error
            );
        }
        for window in &self.windows {
            for node in &window.sample.nodes {
                let problems: Vec<String> = [
                    node.heap_error
                        .as_ref()
                        .map(|error| format!("heap: {error}")),
                    node.table
                        .as_ref()
                        .and_then(|table| table.error.as_ref())
                        .map(|error| format!("system_views: {error}")),
                    node.log.error.as_ref().map(|error| format!("log: {error}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                if !problems.is_empty() {
                    let _ = writeln!(
                        out,
                        "  at {:.1} min, node {}: {}",
                        window.to_s / 60.0,
                        node.node,
                        problems.join("; ")
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "\n  {} acquisitions in all; {} mutual exclusion violation(s){}; load average \
             before {}, after {}",
            self.acquisitions,
            self.exclusion_violations,
            if self.lockers_stopped > 0 {
                format!(
                    "; {} locker(s) still in a call {} after the end, stopped",
                    self.lockers_stopped,
                    describe(FINISH_GRACE)
                )
            } else {
                String::new()
            },
            self.load_average.0,
            self.load_average.1
        );
        out
    }
}

// ---------------------------------------------------------------------------------------
// The run.
// ---------------------------------------------------------------------------------------

/// What the lockers share.
struct Shared {
    started: Instant,
    acquisitions: Mutex<Vec<f64>>,
    errors: Mutex<Vec<ErrorRecord>>,
    inside: AtomicU64,
    violations: AtomicU64,
    acquired: AtomicU64,
    failed: AtomicU64,
}

impl Shared {
    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn error(&self, locker: usize, call: Call, started_s: f64, error: &lock_core::Error) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let record = ErrorRecord {
            started_s,
            at_s: self.now(),
            locker,
            call,
            error: error.to_string(),
            during_restart_of: None,
        };
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record);
    }
}

/// One locker: takes and releases the lock until `deadline`, recording every error and
/// going on after a pause.
async fn locker_loop(
    index: usize,
    locker: Locker<TimedStorage>,
    lock_id: LockId,
    shared: Arc<Shared>,
    critical_section: Duration,
    deadline: Instant,
) {
    while Instant::now() < deadline {
        let started = shared.now();
        let guard = match locker.lock(&lock_id).await {
            Ok(guard) => guard,
            Err(error) => {
                shared.error(index, Call::Lock, started, &error);
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        if shared.inside.fetch_add(1, Ordering::SeqCst) != 0 {
            shared.violations.fetch_add(1, Ordering::Relaxed);
        }
        let at = shared.now();
        shared
            .acquisitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(at);
        shared.acquired.fetch_add(1, Ordering::Relaxed);
        if !critical_section.is_zero() {
            tokio::time::sleep(critical_section).await;
        }
        shared.inside.fetch_sub(1, Ordering::SeqCst);
        let releasing = shared.now();
        if let Err(error) = guard.release().await {
            shared.error(index, Call::Release, releasing, &error);
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
}

/// The nodes' running JVMs, as the restarts change them: `None` while a node is down.
type Pids = Arc<Mutex<Vec<Option<u32>>>>;

/// Kills and restarts the nodes on `plan`'s schedule. A restart due when a window ends
/// waits until that window's figures are read (`sampled` says up to which window end, in
/// seconds of run time), so that they show every node.
async fn restart_loop(
    cluster: Arc<LocalCluster>,
    plan: Plan,
    nodes: usize,
    started: Instant,
    pids: Pids,
    mut sampled: tokio::sync::watch::Receiver<f64>,
    progress: bool,
) -> Vec<Outage> {
    let mut outages = Vec::new();
    for (at, node) in plan.restarts(nodes) {
        tokio::time::sleep_until((started + at).into()).await;
        let needed = plan.last_window_end_by(at.as_secs_f64());
        // The sampler gone (it never is before the restarts end) leaves nothing to wait for.
        let _ = sampled.wait_for(|&done| done >= needed).await;
        pids.lock().unwrap_or_else(PoisonError::into_inner)[node] = None;
        let killed_s = started.elapsed().as_secs_f64();
        if progress {
            crate::note(&format!(
                "  {killed_s:.1} s: killing node {} (SIGKILL) and restarting it",
                node + 1
            ));
        }
        let restarting = Arc::clone(&cluster);
        let result = tokio::task::spawn_blocking(move || {
            restarting.kill(node)?;
            restarting.restart(node)?;
            restarting.pid(node)
        })
        .await;
        let up_s = started.elapsed().as_secs_f64();
        let outage = match result {
            Ok(Ok(pid)) => {
                pids.lock().unwrap_or_else(PoisonError::into_inner)[node] = pid;
                Outage {
                    node: node + 1,
                    killed_s,
                    up_s: Some(up_s),
                    error: None,
                }
            }
            Ok(Err(error)) => Outage {
                node: node + 1,
                killed_s,
                up_s: None,
                error: Some(error.to_string()),
            },
            Err(error) => Outage {
                node: node + 1,
                killed_s,
                up_s: None,
                error: Some(format!("the restart task failed: {error}")),
            },
        };
        if progress {
            crate::note(&format!(
                "  {up_s:.1} s: node {} {}",
                node + 1,
                outage.error.as_ref().map_or_else(
                    || "is up again".to_owned(),
                    |error| format!("did not come back: {error}")
                )
            ));
        }
        outages.push(outage);
    }
    outages
}

/// Reads every node's figures: the lock table's from `system_views`, the heap by `jcmd`,
/// the new lines of its log.
async fn sample_nodes(
    session: &lock_storage_cassandra::scylla::client::session::Session,
    config: &CassandraConfig,
    addresses: &[String],
    pids: &Pids,
    cursors: &mut [LogCursor],
) -> WindowSample {
    let table = crate::table_stats::read(session, &config.keyspace, &config.table).await;
    let current: Vec<Option<u32>> = pids.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let heaps = tokio::task::spawn_blocking(move || {
        current
            .into_iter()
            .map(|pid| match pid {
                Some(pid) => heap_used_mib(pid),
                None => Err("the node is down (restarting)".to_owned()),
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let nodes = addresses
        .iter()
        .zip(cursors.iter_mut())
        .enumerate()
        .map(|(index, (address, cursor))| {
            let table = table
                .iter()
                .find(|stats| stats.node == format!("{address}:{CQL_PORT}"))
                .cloned();
            let heap = heaps
                .get(index)
                .cloned()
                .unwrap_or_else(|| Err("jcmd was not run".to_owned()));
            let log = match cursor.advance() {
                Ok(text) => LogWindow::of(&text),
                Err(error) => LogWindow {
                    error: Some(error),
                    ..LogWindow::default()
                },
            };
            NodeWindow {
                node: index + 1,
                partition_mib: table.as_ref().and_then(|stats| stats.max_partition_mib),
                table,
                heap_used_mib: heap.as_ref().ok().copied(),
                heap_error: heap.err(),
                log,
            }
        })
        .collect();
    WindowSample { nodes }
}

/// Runs `soak`.
pub fn run(args: &SoakArgs) -> Result<(), BoxError> {
    let plan = args.plan()?;
    let lock = LockConfig::default();
    let lock_id = LockId::new(args.lock_id.clone())?;
    let mut backend = crate::options::RunArgs::defaults()?.backend;
    backend.cassandra = vec![crate::options::LOCAL.to_owned()];
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let progress = !args.quiet;
    let nodes = args.local_nodes;
    let (cluster, config) = crate::local::start_cluster_for_run(
        LocalClusterConfig::new(nodes),
        &backend,
        &lock,
        progress,
    )?;
    let mut addresses = Vec::new();
    let mut cursors = Vec::new();
    let mut pids = Vec::new();
    for index in 0..nodes {
        addresses.push(cluster.address(index)?.to_string());
        cursors.push(LogCursor {
            path: cluster.log_path(index)?,
            offset: 0,
        });
        pids.push(cluster.pid(index)?);
    }
    let setup = format!(
        "Soak: {} lockers (each with its own session) take and release one lock id ({}) as \
         fast as they can for {}, LockConfig::default() (queue algorithm, no tuning), \
         critical section {}; a local {nodes}-node Apache Cassandra {CASSANDRA_VERSION} at {} \
         (replication factor {nodes}, the backend's default schema); every {} one node is \
         killed (SIGKILL) and restarted, in turn; windows of {}",
        args.processes,
        lock_id,
        describe(plan.duration),
        describe(args.critical_section),
        config.contact_points.join(","),
        describe(plan.restart_every),
        describe(plan.window)
    );
    if progress {
        crate::note(&setup);
    }
    let load_before = lock_cli_support::load_average();
    let cluster = Arc::new(cluster);
    let pids: Pids = Arc::new(Mutex::new(pids));
    let (recorded, run_end, violations, stopped) =
        crate::options::runtime(false, true)?.block_on(async {
            let watcher = CassandraStorage::connect(config.clone()).await?;
            let session = Arc::clone(watcher.session());
            let queue_reads = QueueReads::default();
            let mut lockers = Vec::new();
            for process in 0..args.processes {
                let storage = CassandraStorage::connect(config.clone()).await?;
                lockers.push(
                    Locker::builder(TimedStorage::new(storage, Arc::clone(&queue_reads)))
                        .config(lock.clone())
                        .seed(crate::experiment::mix(1, process as u64 + 1))
                        .build()?,
                );
            }
            // The run's clock starts when every locker is ready.
            let started = Instant::now();
            let shared = Arc::new(Shared {
                started,
                acquisitions: Mutex::new(Vec::new()),
                errors: Mutex::new(Vec::new()),
                inside: AtomicU64::new(0),
                violations: AtomicU64::new(0),
                acquired: AtomicU64::new(0),
                failed: AtomicU64::new(0),
            });
            let deadline = started + plan.duration;
            let mut tasks = tokio::task::JoinSet::new();
            for (index, locker) in lockers.into_iter().enumerate() {
                tasks.spawn(locker_loop(
                    index,
                    locker,
                    lock_id.clone(),
                    Arc::clone(&shared),
                    args.critical_section,
                    deadline,
                ));
            }
            let (sampled_tx, sampled_rx) = tokio::sync::watch::channel(0.0_f64);
            let restarts = tokio::spawn(restart_loop(
                Arc::clone(&cluster),
                plan,
                nodes,
                started,
                Arc::clone(&pids),
                sampled_rx,
                progress,
            ));
            let mut samples = Vec::new();
            let (mut acquired, mut failed) = (0, 0);
            for (from, to) in plan.windows() {
                tokio::time::sleep_until((started + Duration::from_secs_f64(to)).into()).await;
                let sample = sample_nodes(&session, &config, &addresses, &pids, &mut cursors).await;
                let (now_acquired, now_failed) = (
                    shared.acquired.load(Ordering::Relaxed),
                    shared.failed.load(Ordering::Relaxed),
                );
                if progress {
                    let figures = |value: &dyn Fn(&NodeWindow) -> String| {
                        sample.nodes.iter().map(value).collect::<Vec<_>>().join("/")
                    };
                    crate::note(&format!(
                        "  window {:.1}-{:.1} min: {} acquisitions ({:.1}/s), {} errors, \
                         partition MiB {}, heap MiB {}, tombstone warnings {}",
                        from / 60.0,
                        to / 60.0,
                        now_acquired - acquired,
                        (now_acquired - acquired) as f64 / (to - from).max(1e-9),
                        now_failed - failed,
                        figures(&|node| node
                            .partition_mib
                            .map_or_else(|| "-".to_owned(), |mib| mib.to_string())),
                        figures(&|node| node
                            .heap_used_mib
                            .map_or_else(|| "-".to_owned(), |mib| format!("{mib:.0}"))),
                        figures(&|node| node.log.tombstone_warnings.to_string()),
                    ));
                }
                (acquired, failed) = (now_acquired, now_failed);
                samples.push(sample);
                sampled_tx.send_replace(to);
            }
            let finishing = async { while tasks.join_next().await.is_some() {} };
            let stopped = if tokio::time::timeout(FINISH_GRACE, finishing).await.is_err() {
                let left = tasks.len();
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                left
            } else {
                0
            };
            let run_end = shared.now();
            let outages = restarts
                .await
                .map_err(|error| format!("the restarts' task failed: {error}"))?;
            let recorded = Recorded {
                acquisitions: std::mem::take(
                    &mut *shared
                        .acquisitions
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner),
                ),
                queue_reads: queue_reads
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .map(|&(at, latency)| {
                        (at.saturating_duration_since(started).as_secs_f64(), latency)
                    })
                    .collect(),
                errors: std::mem::take(
                    &mut *shared.errors.lock().unwrap_or_else(PoisonError::into_inner),
                ),
                outages,
                samples,
            };
            Ok::<_, BoxError>((
                recorded,
                run_end,
                shared.violations.load(Ordering::Relaxed),
                stopped,
            ))
        })?;
    drop(cluster);
    let mut report = SoakReport::new(setup, &plan, recorded, run_end);
    report.exclusion_violations = violations;
    report.lockers_stopped = stopped;
    report.load_average = (load_before, lock_cli_support::load_average());
    let path = out.join("soak.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    crate::emit(&format!("{}\nWrote {}\n", report.render(), path.display()))?;
    if violations > 0 {
        return Err(format!("{violations} mutual exclusion violations: the lock is broken").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(duration_s: u64, restart_every_s: u64, window_s: u64) -> Plan {
        Plan {
            duration: Duration::from_secs(duration_s),
            restart_every: Duration::from_secs(restart_every_s),
            window: Duration::from_secs(window_s),
        }
    }

    #[test]
    fn windows_cover_the_run_and_the_last_is_cut_at_its_end() {
        let defaults = plan(45 * 60, 10 * 60, 5 * 60).windows();
        assert_eq!(defaults.len(), 9);
        assert_eq!(defaults[0], (0.0, 300.0));
        assert_eq!(defaults[8], (2400.0, 2700.0));
        assert_eq!(
            plan(7 * 60, 120, 120).windows(),
            [(0.0, 120.0), (120.0, 240.0), (240.0, 360.0), (360.0, 420.0)]
        );
        assert_eq!(plan(60, 30, 60).windows(), [(0.0, 60.0)]);
    }

    #[test]
    fn restarts_take_the_nodes_in_turn_and_stop_before_the_end() {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        assert_eq!(
            plan(45 * 60, 10 * 60, 5 * 60).restarts(3),
            [
                (minutes(10), 0),
                (minutes(20), 1),
                (minutes(30), 2),
                (minutes(40), 0)
            ]
        );
        assert_eq!(
            plan(6 * 60, 120, 120).restarts(3),
            [(minutes(2), 0), (minutes(4), 1)]
        );
        assert_eq!(
            plan(6 * 60, 120, 120).restarts(1),
            [(minutes(2), 0), (minutes(4), 0)]
        );
        assert!(plan(6 * 60, 6 * 60, 120).restarts(3).is_empty());
        // Each default restart falls on a window's end and waits for its figures.
        let defaults = plan(45 * 60, 10 * 60, 5 * 60);
        assert_eq!(defaults.last_window_end_by(600.0), 600.0);
        let offset = plan(45 * 60, 7 * 60, 5 * 60);
        assert_eq!(offset.last_window_end_by(420.0), 300.0);
        assert_eq!(offset.last_window_end_by(299.0), 0.0);
    }

    #[test]
    fn a_time_falls_into_the_window_whose_span_has_it() {
        let windows = plan(7 * 60, 120, 120).windows();
        assert_eq!(window_of(&windows, 0.0), Some(0));
        assert_eq!(window_of(&windows, 119.999), Some(0));
        assert_eq!(
            window_of(&windows, 120.0),
            Some(1),
            "a boundary opens the next"
        );
        assert_eq!(window_of(&windows, 419.0), Some(3));
        assert_eq!(
            window_of(&windows, 450.0),
            Some(3),
            "past the end: the last"
        );
        assert_eq!(window_of(&windows, -1.0), Some(0));
        assert_eq!(window_of(&[], 1.0), None);
    }

    fn outage(node: usize, killed_s: f64, up_s: Option<f64>) -> Outage {
        Outage {
            node,
            killed_s,
            up_s,
            error: None,
        }
    }

    #[test]
    fn an_error_is_of_a_restart_when_its_call_overlapped_the_outage() {
        let outages = [outage(1, 100.0, Some(140.0)), outage(2, 200.0, None)];
        // A call that started before the kill and failed during the outage.
        assert_eq!(outage_during(&outages, 95.0, 101.0, 300.0), Some(1));
        // Started while the node was down, failed after it was up again.
        assert_eq!(outage_during(&outages, 139.0, 150.0, 300.0), Some(1));
        assert_eq!(outage_during(&outages, 140.5, 150.0, 300.0), None);
        assert_eq!(outage_during(&outages, 50.0, 99.0, 300.0), None);
        // A node that never came back is down to the run's end.
        assert_eq!(outage_during(&outages, 250.0, 251.0, 300.0), Some(2));
        assert_eq!(outage_during(&outages, 310.0, 320.0, 300.0), Some(2));
    }

    fn error(started_s: f64, at_s: f64, call: Call) -> ErrorRecord {
        ErrorRecord {
            started_s,
            at_s,
            locker: 0,
            call,
            error: "timed out".to_owned(),
            during_restart_of: None,
        }
    }

    #[test]
    fn the_report_buckets_every_record_into_its_window() {
        let recorded = Recorded {
            acquisitions: vec![1.0, 2.0, 119.0, 120.0, 250.0, 365.0],
            queue_reads: vec![(1.0, 2.0), (3.0, 4.0), (5.0, 100.0), (130.0, 1.0)],
            errors: vec![
                error(239.0, 241.0, Call::Release),
                error(10.0, 12.0, Call::Lock),
                error(245.0, 250.0, Call::Lock),
            ],
            outages: vec![outage(1, 240.0, Some(260.0))],
            samples: vec![
                WindowSample::default(),
                WindowSample {
                    nodes: vec![NodeWindow {
                        node: 1,
                        partition_mib: Some(3),
                        table: None,
                        heap_used_mib: Some(512.0),
                        heap_error: None,
                        log: LogWindow {
                            tombstone_warnings: 2,
                            ..LogWindow::default()
                        },
                    }],
                },
            ],
        };
        let report = SoakReport::new("setup".to_owned(), &plan(7 * 60, 120, 120), recorded, 421.0);
        let acquisitions: Vec<u64> = report.windows.iter().map(|w| w.acquisitions).collect();
        assert_eq!(acquisitions, [3, 1, 1, 1]);
        assert_eq!(report.acquisitions, 6);
        assert_eq!(report.windows[0].per_second, 3.0 / 120.0);
        assert_eq!(
            report.windows[3].per_second,
            1.0 / 60.0,
            "the cut window's length"
        );
        let first = &report.windows[0].queue_read_ms;
        assert_eq!((first.count, first.p50, first.max), (3, 4.0, 100.0));
        assert_eq!(report.windows[1].queue_read_ms.count, 1);
        assert_eq!(report.windows[2].queue_read_ms.count, 0);
        assert_eq!(
            report.windows[0].errors,
            ErrorCounts {
                during_restart: 0,
                otherwise: 1
            }
        );
        assert_eq!(
            report.windows[2].errors,
            ErrorCounts {
                during_restart: 2,
                otherwise: 0
            }
        );
        assert_eq!(
            report.error_counts,
            ErrorCounts {
                during_restart: 2,
                otherwise: 1
            }
        );
        let order: Vec<f64> = report.errors.iter().map(|e| e.at_s).collect();
        assert_eq!(order, [12.0, 241.0, 250.0]);
        assert_eq!(report.errors[1].during_restart_of, Some(1));
        let down: Vec<&[usize]> = report.windows.iter().map(|w| &w.nodes_down[..]).collect();
        assert_eq!(down, [&[][..], &[], &[1], &[]]);
        assert_eq!(report.windows[1].sample.nodes[0].partition_mib, Some(3));
        assert!(
            report.windows[3].sample.nodes.is_empty(),
            "no sample: none made up"
        );
        let text = report.render();
        assert!(text.contains("2.0-4.0"), "{text}");
        assert!(text.contains("0/1"), "{text}");
        assert!(text.contains("node 1 killed at 240.0 s, up again at 260.0 s (20.0 s down)"));
        assert!(text.contains("errors: 2 during a node's restart, 1 otherwise"));
        assert!(text.contains("(node 1 restarting): timed out"), "{text}");
    }

    const SERIAL: &str = "\
12345:
 def new generation   total 157248K, used 45233K [0x00000000e0000000, 0x00000000eaaa0000, 0x00000000eaaa0000)
  eden space 139776K,  32% used [0x00000000e0000000, 0x00000000e2c2c5a8, 0x00000000e8880000)
  from space 17472K,   0% used [0x00000000e8880000, 0x00000000e8880000, 0x00000000e9990000)
  to   space 17472K,   0% used [0x00000000e9990000, 0x00000000e9990000, 0x00000000eaaa0000)
 tenured generation   total 349568K, used 120000K [0x00000000eaaa0000, 0x0000000100000000, 0x0000000100000000)
   the space 349568K,  34% used [0x00000000eaaa0000, 0x00000000f1fd0000, 0x00000000f1fd0200, 0x0000000100000000)
 Metaspace       used 45000K, committed 45500K, reserved 1089536K
  class space    used 5000K, committed 5200K, reserved 1048576K
";

    #[test]
    fn the_heap_in_use_is_read_from_jcmd_for_each_collector() {
        assert_eq!(parse_heap_used(SERIAL), Some((45_233 + 120_000) * 1024));
        let g1 = "\
777:
 garbage-first heap   total 262144K, used 30000K [0x00000000f0000000, 0x0000000100000000)
  region size 1024K, 20 young (20480K), 2 survivors (2048K)
 Metaspace       used 45000K, committed 45500K, reserved 1089536K
";
        assert_eq!(parse_heap_used(g1), Some(30_000 * 1024));
        let z = "9:\n ZHeap           used 30M, capacity 256M, max capacity 4096M\n Metaspace       used 1M, committed 2M, reserved 3M\n";
        assert_eq!(parse_heap_used(z), Some(30 << 20));
        for other in [
            "",
            "12345:\nCould not find any JVM",
            " Metaspace       used 45000K, committed 45500K, reserved 1089536K",
            " def new generation   total 157248K, used lots [0x0)",
            " def new generation   total 1K, used 99999999999999999999K [0x0)",
            " def new generation   total 1K, used 5Q [0x0)",
        ] {
            assert_eq!(parse_heap_used(other), None, "{other:?}");
        }
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("2G"), Some(2 << 30));
    }

    #[test]
    fn only_whole_lines_of_a_log_are_taken() {
        assert_eq!(complete_lines(b""), 0);
        assert_eq!(complete_lines(b"half"), 0);
        assert_eq!(complete_lines(b"one\ntwo\nthr"), 8);
        assert_eq!(complete_lines(b"one\n"), 4);
    }

    #[test]
    fn a_log_cursor_reads_what_the_log_gained_and_starts_over_after_a_rotation() {
        let dir = std::env::temp_dir().join(format!("lock-bench-soak-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("system.log");
        let warning = "WARN  [ReadStage-2] 2026-01-01 00:00:01,000 ReadCommand.java - Read 1 live \
                       rows and 1204 tombstone cells for query SELECT (see tombstone_warn_threshold)\n";
        std::fs::write(&path, format!("INFO start\n{warning}WARN  [half")).unwrap();
        let mut cursor = LogCursor {
            path: path.clone(),
            offset: 0,
        };
        let first = LogWindow::of(&cursor.advance().unwrap());
        assert_eq!(first.tombstone_warnings, 1);
        assert_eq!(first.most_tombstones, Some(1204));
        assert_eq!(
            LogWindow::of(&cursor.advance().unwrap()),
            LogWindow::default()
        );
        let mut appended = std::fs::read_to_string(&path).unwrap();
        appended.push_str("] a line finished later\n");
        appended.push_str(warning);
        std::fs::write(&path, appended).unwrap();
        let text = cursor.advance().unwrap();
        assert!(text.starts_with("WARN  [half] a line"), "{text}");
        assert_eq!(LogWindow::of(&text).tombstone_warnings, 1);
        // Rotated: shorter than what was read, so read from the start.
        std::fs::write(&path, warning).unwrap();
        assert_eq!(
            LogWindow::of(&cursor.advance().unwrap()).tombstone_warnings,
            1
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(cursor.advance().unwrap_err().contains("cannot open"));
    }
}
