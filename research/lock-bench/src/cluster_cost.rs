//! `lock-bench cluster-cost`: what an acquisition costs the cluster, from the nodes' own
//! process accounting. On a local cluster started for the run (once per Paxos variant),
//! the queue lock and the lightweight-transaction lock ([`lock_lwt`]) are offered the
//! same load, open loop: acquisitions start on a fixed schedule (`--rate` per second in
//! all, in rounds where all P lockers sharing one lock call it at once), whatever the
//! earlier ones did, so that both locks do the same work per second, P of them contend,
//! and the JVMs are not saturated. Before the
//! scenarios the idle cluster is measured for `--idle`; its CPU time and disk writes per
//! second are taken off each scenario's, and what is left is divided by the acquisitions.
//!
//! CPU time is `utime + stime` of each node's JVM (`/proc/PID/stat`, every thread, in
//! clock ticks); disk writes are `write_bytes` of `/proc/PID/io`: the bytes the JVM caused
//! to be written to storage (commit log, flushed and compacted sstables, `system.paxos`),
//! counted when the pages are dirtied.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use fair_lock::Locker;
use fair_lock::UdpWakeHints;
use lock_core::{LockConfig, LockId};
use lock_local_cluster::{LocalCluster, LocalClusterConfig, PaxosVariant};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::Instant as TokioInstant;

use crate::BoxError;
use crate::experiment::{RequestTally, mix};
use crate::options::BackendArgs;
use crate::stats::Summary;
use crate::units::{ms, parse_duration};
use lock_lwt::{LwtConfig, LwtLocker, LwtStatements, LwtTally};

/// The highest `--rate`: far above what a local cluster serves, so that only a typing
/// slip is refused.
const MAX_RATE: f64 = 10_000.0;

/// The options of `cluster-cost`.
#[derive(Debug, Args)]
pub struct ClusterCostArgs {
    /// Lockers sharing one lock in each scenario, comma-separated (1 is uncontended).
    #[arg(short, long, value_delimiter = ',', default_value = "1,5,10", value_parser = crate::options::process_count())]
    pub processes: Vec<usize>,
    /// Acquisitions offered per second, in all, to each scenario: below what the cluster
    /// serves, so that both locks do the same work per second (open loop).
    #[arg(long, default_value_t = 20.0, value_parser = parse_rate)]
    pub rate: f64,
    /// How long each scenario offers its load.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How long each acquisition holds the lock.
    #[arg(long, default_value = "2ms", value_parser = parse_duration)]
    pub critical_section: Duration,
    /// How long the queue lock, released with nobody queued behind, stays with its locker
    /// for a quick retake (lock-core's `LockConfig::linger`; default off). At P = 1 and
    /// `--rate 20`, a linger above 50 ms makes every acquisition after the first a retake.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub linger: Duration,
    /// Give every queue locker wake-up hints (lock-core's `LockerBuilder::wake_hints`), each
    /// on a UDP socket of its own on loopback.
    #[arg(long)]
    pub wake_hints: bool,
    /// How long the idle cluster is measured, before the scenarios, for the background
    /// cost that is taken off theirs.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub idle: Duration,
    /// How long to take and release both locks first, unmeasured, while a fresh cluster's
    /// JVMs compile their hot paths.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub warm_up: Duration,
    /// The Paxos variants to start a cluster with, comma-separated (`v1`, `v2`); all the
    /// scenarios run on each. Default: both.
    #[arg(long, value_delimiter = ',')]
    pub paxos_variant: Option<Vec<PaxosVariant>>,
    /// How many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = crate::options::parse_node_count)]
    pub local_nodes: usize,
    /// The lock id (each scenario appends its lock and locker count).
    #[arg(long, default_value = "cluster-cost")]
    pub lock_id: String,
    /// Where to write cluster-cost.json (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// The cluster: only `--cassandra local`, whose nodes' processes the command can see.
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// Parses `--rate`: acquisitions per second, more than 0 and at most [`MAX_RATE`].
fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of acquisitions per second"))?;
    if rate.is_finite() && rate > 0.0 && rate <= MAX_RATE {
        Ok(rate)
    } else {
        Err(format!(
            "{text:?}: the rate must be more than 0 and at most {MAX_RATE} acquisitions per second"
        ))
    }
}

/// What the idle cluster uses per second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct IdleRate {
    pub(crate) cpu_ms_per_second: f64,
    written_bytes_per_second: f64,
}

impl IdleRate {
    /// The rate of `used` over `length`.
    pub(crate) fn of(used: Usage, length: Duration) -> IdleRate {
        let seconds = length.as_secs_f64();
        IdleRate {
            cpu_ms_per_second: ms(used.cpu) / seconds,
            written_bytes_per_second: used.written_bytes as f64 / seconds,
        }
    }
}

/// What the cluster's JVMs have used so far, summed over the nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Usage {
    /// CPU time, user and system.
    pub(crate) cpu: Duration,
    /// Bytes the JVMs caused to be written to storage.
    written_bytes: u64,
}

impl Usage {
    /// What was used between `earlier` and `self`.
    pub(crate) fn since(self, earlier: Usage) -> Usage {
        Usage {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            written_bytes: self.written_bytes.saturating_sub(earlier.written_bytes),
        }
    }
}

/// Reads the nodes' processes in `/proc`.
pub(crate) struct Meter {
    pids: Vec<u32>,
    ticks_per_second: u64,
}

impl Meter {
    /// The meter of `cluster`'s nodes, all of which must be running.
    pub(crate) fn of(cluster: &LocalCluster) -> Result<Meter, BoxError> {
        let mut pids = Vec::new();
        for index in 0..cluster.node_count() {
            pids.push(
                cluster
                    .pid(index)?
                    .ok_or_else(|| format!("node {} is not running", index + 1))?,
            );
        }
        let meter = Meter {
            pids,
            ticks_per_second: clock_ticks_per_second()?,
        };
        meter.read()?;
        Ok(meter)
    }

    /// The nodes' usage so far.
    pub(crate) fn read(&self) -> Result<Usage, BoxError> {
        let mut usage = Usage::default();
        for &pid in &self.pids {
            let stat = read_proc(pid, "stat")?;
            let ticks = cpu_ticks(&stat)
                .ok_or_else(|| format!("/proc/{pid}/stat has no CPU times: {stat:?}"))?;
            usage.cpu += Duration::from_secs_f64(ticks as f64 / self.ticks_per_second as f64);
            let io = read_proc(pid, "io")?;
            usage.written_bytes += written_bytes(&io)
                .ok_or_else(|| format!("/proc/{pid}/io has no write_bytes: {io:?}"))?;
        }
        Ok(usage)
    }
}

fn read_proc(pid: u32, file: &str) -> Result<String, BoxError> {
    let path = Path::new("/proc").join(pid.to_string()).join(file);
    std::fs::read_to_string(&path).map_err(|error| {
        format!(
            "cannot read {}: {error} (cluster-cost needs Linux's /proc and nodes of this user)",
            path.display()
        )
        .into()
    })
}

/// `utime + stime` from the text of `/proc/PID/stat`: the 14th and 15th fields, counted
/// after the command name in parentheses (which may hold spaces).
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// `write_bytes` from the text of `/proc/PID/io`.
fn written_bytes(io: &str) -> Option<u64> {
    io.lines()
        .find_map(|line| line.strip_prefix("write_bytes:"))
        .and_then(|value| value.trim().parse().ok())
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`), the unit of `/proc`'s CPU times.
fn clock_ticks_per_second() -> Result<u64, BoxError> {
    let output = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .map_err(|error| format!("cannot run `getconf CLK_TCK`: {error}"))?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .ok()
        .filter(|&ticks| ticks > 0)
        .ok_or_else(|| {
            format!(
                "`getconf CLK_TCK` printed no clock tick rate: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )
            .into()
        })
}

/// One of the two locks, for one locker.
enum Contender {
    Queue(Locker<CassandraStorage>),
    Lwt(Box<LwtLocker>),
}

impl Contender {
    /// Takes `lock_id`, holds it for `hold` and releases it; returns the wait.
    async fn take(&self, lock_id: &str, hold: Duration) -> Result<Duration, BoxError> {
        match self {
            Contender::Queue(locker) => {
                let guard = locker.lock(lock_id).await?;
                let wait = guard.wait();
                tokio::time::sleep(hold).await;
                guard.release().await?;
                Ok(wait)
            }
            Contender::Lwt(locker) => {
                let guard = locker.lock(lock_id).await?;
                let wait = guard.wait();
                tokio::time::sleep(hold).await;
                guard.release().await?;
                Ok(wait)
            }
        }
    }
}

/// The figures of one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    /// `queue` or `lwt`.
    pub lock: String,
    /// Lockers sharing the lock.
    pub processes: usize,
    /// Acquisitions offered (started on schedule).
    pub offered: u64,
    /// Acquisitions made and released.
    pub acquisitions: u64,
    /// Takes that failed (an error from the lock), each counted and not retried.
    pub errors: u64,
    /// Waits, from calling lock to holding it, ms.
    pub wait_ms: Summary,
    /// How late acquisitions started against their schedule, ms: large when a locker was
    /// still busy with its previous one (the offered rate is then not what ran).
    pub start_slip_ms: Summary,
    /// Storage requests per acquisition, as the lockers counted them.
    pub requests_per_acquisition: f64,
    /// The scenario's length, s.
    pub seconds: f64,
    /// The nodes' CPU time in the scenario, ms, before the idle share is taken off.
    pub cpu_ms: f64,
    /// The nodes' CPU time per acquisition, ms, the idle share taken off.
    pub cpu_ms_per_acquisition: f64,
    /// Bytes the nodes wrote to storage per acquisition, the idle share taken off.
    pub written_bytes_per_acquisition: f64,
}

/// One cluster's results.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterCost {
    /// The cluster.
    pub backend: String,
    /// The Paxos variant the cluster was started with.
    pub paxos_variant: String,
    /// The nodes' CPU time per second while idle, ms.
    pub idle_cpu_ms_per_second: f64,
    /// Bytes the nodes wrote to storage per second while idle.
    pub idle_written_bytes_per_second: f64,
    /// Acquisitions offered per second.
    pub rate: f64,
    /// How long each acquisition held the lock, ms.
    pub critical_section_ms: f64,
    /// How long a released queue lock lingered for a retake, ms (0: off).
    pub linger_ms: f64,
    /// Whether the queue lockers took wake-up hints.
    pub wake_hints: bool,
    /// The scenarios, for each locker count queue then lwt.
    pub scenarios: Vec<Scenario>,
    /// `/proc/loadavg` before and after.
    pub load_average: (String, String),
}

/// Runs `cluster-cost`.
pub fn run(args: &ClusterCostArgs) -> Result<(), BoxError> {
    if !crate::options::is_local(&args.backend.cassandra) {
        return Err(
            "cluster-cost reads the nodes' CPU time and disk writes from their \
                    processes, so it runs on a local cluster it starts: `--cassandra local`"
                .into(),
        );
    }
    if args.processes.is_empty() {
        return Err("--processes needs at least one count".into());
    }
    if args.duration.is_zero() {
        return Err("--duration must be more than 0".into());
    }
    if args.idle.is_zero() {
        return Err("--idle must be more than 0: the idle cost is taken off every scenario".into());
    }
    LockId::new(format!("{}-queue-p64", args.lock_id))
        .map_err(|error| format!("--lock-id: {error}"))?;
    let mut variants: Vec<PaxosVariant> = Vec::new();
    for variant in args
        .paxos_variant
        .clone()
        .unwrap_or_else(|| vec![PaxosVariant::V1, PaxosVariant::V2])
    {
        if !variants.contains(&variant) {
            variants.push(variant);
        }
    }
    if variants.is_empty() {
        return Err("--paxos-variant needs at least one of v1 and v2".into());
    }
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    let mut results = Vec::new();
    let mut text = String::new();
    for variant in variants {
        let result = measure_on(args, variant)?;
        text.push_str(&result.render());
        results.push(result);
    }
    let json = out.join("cluster-cost.json");
    std::fs::write(&json, serde_json::to_string_pretty(&results)?)?;
    let _ = writeln!(text, "\nWrote {}", json.display());
    Ok(crate::emit(&text)?)
}

/// Every scenario on a fresh local cluster running `variant`.
fn measure_on(args: &ClusterCostArgs, variant: PaxosVariant) -> Result<ClusterCost, BoxError> {
    let lock = LockConfig {
        fencing: false,
        linger: args.linger,
        ..LockConfig::default()
    };
    lock.clone().validate()?;
    let (cluster, config) = crate::local::start_cluster_for_run(
        LocalClusterConfig {
            paxos_variant: variant,
            ..LocalClusterConfig::new(args.local_nodes)
        },
        &args.backend,
        &lock,
        !args.quiet,
    )?;
    let meter = Meter::of(&cluster)?;
    let load_before = lock_cli_support::load_average();
    let (idle, scenarios) =
        crate::options::runtime(false, true)?.block_on(measure(args, &config, &lock, &meter))?;
    let backend = format!(
        "a local {}-node Apache Cassandra {}, replication factor {}, Paxos {variant}",
        cluster.node_count(),
        cluster.version(),
        cluster.node_count()
    );
    drop(cluster);
    Ok(ClusterCost {
        backend,
        paxos_variant: variant.to_string(),
        idle_cpu_ms_per_second: idle.cpu_ms_per_second,
        idle_written_bytes_per_second: idle.written_bytes_per_second,
        rate: args.rate,
        critical_section_ms: ms(args.critical_section),
        linger_ms: ms(args.linger),
        wake_hints: args.wake_hints,
        scenarios,
        load_average: (load_before, lock_cli_support::load_average()),
    })
}

/// The idle measurement, then every scenario.
async fn measure(
    args: &ClusterCostArgs,
    config: &CassandraConfig,
    lock: &LockConfig,
    meter: &Meter,
) -> Result<(IdleRate, Vec<Scenario>), BoxError> {
    let progress = !args.quiet;
    let setup = CassandraStorage::connect(config.clone()).await?;
    LwtStatements::create_table(setup.session(), &config.keyspace).await?;
    setup.session().await_schema_agreement().await?;
    let lwt = LwtConfig::default();
    let seed = args.backend.seed;

    let hints = args.wake_hints;
    let warm_queue = queue_contender(config, lock, hints, seed, 0, Arc::default()).await?;
    let warm_lwt = lwt_contender(config, &lwt, seed, 0, Arc::default()).await?;
    if progress {
        crate::note(&format!(
            "warming up: taking and releasing both locks for {:?}",
            args.warm_up
        ));
    }
    let warming = TokioInstant::now();
    while warming.elapsed() < args.warm_up {
        warm_queue
            .take(&format!("{}-warm-queue", args.lock_id), Duration::ZERO)
            .await?;
        warm_lwt
            .take(&format!("{}-warm-lwt", args.lock_id), Duration::ZERO)
            .await?;
    }
    drop((warm_queue, warm_lwt));

    if progress {
        crate::note(&format!("measuring the idle cluster for {:?}", args.idle));
    }
    let before = meter.read()?;
    tokio::time::sleep(args.idle).await;
    let idle = IdleRate::of(meter.read()?.since(before), args.idle);

    let mut scenarios = Vec::new();
    let mut seen = Vec::new();
    for &processes in &args.processes {
        if seen.contains(&processes) {
            continue;
        }
        seen.push(processes);
        // Which lock runs first alternates, so that neither always follows the other (or
        // the idle measurement), whose after-effects (a flush, a compaction) it would pay.
        let order = if seen.len() % 2 == 1 {
            ["queue", "lwt"]
        } else {
            ["lwt", "queue"]
        };
        let mut pair = Vec::new();
        for lock_name in order {
            let queue_tally = Arc::new(RequestTally::default());
            let lwt_tally = Arc::new(LwtTally::default());
            let mut contenders = Vec::new();
            for process in 0..processes {
                let tag = mix(seed, 0x00c0_0000 + processes as u64);
                contenders.push(match lock_name {
                    "queue" => {
                        let tally = queue_tally.clone();
                        queue_contender(config, lock, hints, tag, process, tally).await?
                    }
                    _ => lwt_contender(config, &lwt, tag, process, lwt_tally.clone()).await?,
                });
            }
            let lock_id = format!("{}-{lock_name}-p{processes}", args.lock_id);
            let before = meter.read()?;
            let outcome = offer(args, contenders, &lock_id).await?;
            let used = meter.read()?.since(before);
            let requests = queue_tally.counts().total() + lwt_tally.counts().total();
            let scenario = outcome.scenario(lock_name, processes, requests, used, idle);
            if progress {
                crate::note(&format!(
                    "{lock_name} P={processes}: {} acquisitions, {:.1} CPU-ms each",
                    scenario.acquisitions, scenario.cpu_ms_per_acquisition
                ));
            }
            pair.push(scenario);
        }
        // Reported queue first.
        pair.sort_by(|a, b| b.lock.cmp(&a.lock));
        scenarios.extend(pair);
    }
    Ok((idle, scenarios))
}

/// A queue locker on a session of its own, with wake-up hints on a UDP socket of its own on
/// loopback if `wake_hints`.
async fn queue_contender(
    config: &CassandraConfig,
    lock: &LockConfig,
    wake_hints: bool,
    seed: u64,
    process: usize,
    tally: Arc<RequestTally>,
) -> Result<Contender, BoxError> {
    let builder = Locker::builder(CassandraStorage::connect(config.clone()).await?)
        .config(lock.clone())
        .seed(mix(seed, 0x00c0_1000 + process as u64))
        .metrics(tally);
    let builder = if wake_hints {
        let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        builder.wake_hints(Arc::new(UdpWakeHints::bind(loopback, None).await?))
    } else {
        builder
    };
    Ok(Contender::Queue(builder.build()?))
}

async fn lwt_contender(
    config: &CassandraConfig,
    lwt: &LwtConfig,
    seed: u64,
    process: usize,
    tally: Arc<LwtTally>,
) -> Result<Contender, BoxError> {
    let locker = crate::lwt_compare::lwt_locker(config, lwt, seed, process, tally).await?;
    Ok(Contender::Lwt(Box::new(locker)))
}

/// What the lockers of one scenario saw.
#[derive(Default)]
struct Outcome {
    /// From the first scheduled start to the last release, s.
    seconds: f64,
    offered: u64,
    waits_ms: Vec<f64>,
    slips_ms: Vec<f64>,
    errors: u64,
}

impl Outcome {
    /// The scenario's figures, given the `requests` the lockers counted, what the nodes
    /// `used` over it, and the `idle` rate to take off.
    fn scenario(
        self,
        lock: &str,
        processes: usize,
        requests: u64,
        used: Usage,
        idle: IdleRate,
    ) -> Scenario {
        let acquisitions = self.waits_ms.len() as u64;
        let count = acquisitions.max(1) as f64;
        let seconds = self.seconds;
        let cpu_ms = ms(used.cpu);
        Scenario {
            lock: lock.to_owned(),
            processes,
            offered: self.offered,
            acquisitions,
            errors: self.errors,
            wait_ms: Summary::of(&self.waits_ms),
            start_slip_ms: Summary::of(&self.slips_ms),
            requests_per_acquisition: requests as f64 / count,
            seconds,
            cpu_ms,
            cpu_ms_per_acquisition: (cpu_ms - idle.cpu_ms_per_second * seconds) / count,
            written_bytes_per_acquisition: (used.written_bytes as f64
                - idle.written_bytes_per_second * seconds)
                / count,
        }
    }
}

/// When acquisition `number` is due, as an offset from the start: acquisitions come in
/// rounds of one per locker, all of a round at once (so that P lockers really contend),
/// and rounds `lockers / rate` apart, which keeps the offered rate at `rate`.
fn due_offset(number: u64, lockers: u64, rate: f64) -> Duration {
    let round = number / lockers.max(1);
    Duration::from_secs_f64((round * lockers.max(1)) as f64 / rate)
}

/// Offers `--rate` acquisitions per second for `--duration` to `contenders`, in rounds of
/// one per locker ([`due_offset`]); an acquisition starts when due, or as soon as its
/// locker is free.
async fn offer(
    args: &ClusterCostArgs,
    contenders: Vec<Contender>,
    lock_id: &str,
) -> Result<Outcome, BoxError> {
    let rate = args.rate;
    let offered = (args.duration.as_secs_f64() * args.rate).floor().max(1.0) as u64;
    let lockers = contenders.len() as u64;
    let origin = TokioInstant::now();
    let mut tasks = JoinSet::new();
    for (index, contender) in contenders.into_iter().enumerate() {
        let lock_id = lock_id.to_owned();
        let hold = args.critical_section;
        tasks.spawn(async move {
            let mut outcome = Outcome::default();
            let mut number = index as u64;
            while number < offered {
                let due = origin + due_offset(number, lockers, rate);
                tokio::time::sleep_until(due).await;
                outcome.offered += 1;
                outcome.slips_ms.push(ms(due.elapsed()));
                match contender.take(&lock_id, hold).await {
                    Ok(wait) => outcome.waits_ms.push(ms(wait)),
                    Err(_) => outcome.errors += 1,
                }
                number += lockers;
            }
            outcome
        });
    }
    let mut all = Outcome::default();
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.map_err(|error| format!("a locker panicked: {error}"))?;
        all.offered += outcome.offered;
        all.errors += outcome.errors;
        all.waits_ms.extend(outcome.waits_ms);
        all.slips_ms.extend(outcome.slips_ms);
    }
    all.seconds = origin.elapsed().as_secs_f64();
    Ok(all)
}

impl ClusterCost {
    /// The report: one table per cluster.
    pub fn render(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "\nCluster cost on {}\nOffered {} acquisitions/s open loop, lock held {:.1} ms, \
             queue lock with fencing off (the LWT lock has none){}; idle cluster {:.1} \
             CPU-ms/s and {:.1} KiB written/s, taken off below; load {} before, {} after\n",
            self.backend,
            self.rate,
            self.critical_section_ms,
            match (self.linger_ms > 0.0, self.wake_hints) {
                (true, true) => format!(
                    ", lingering {:.0} ms after a release, with wake-up hints",
                    self.linger_ms
                ),
                (true, false) => format!(" and lingering {:.0} ms after a release", self.linger_ms),
                (false, true) => " with wake-up hints".to_owned(),
                (false, false) => String::new(),
            },
            self.idle_cpu_ms_per_second,
            self.idle_written_bytes_per_second / 1024.0,
            self.load_average.0,
            self.load_average.1,
        );
        let _ = writeln!(
            text,
            "| lock | P | acquisitions (offered) | errors | CPU-ms / acq | KiB written / acq | \
             requests / acq | wait mean / p99 / max ms | start slip p99 ms |"
        );
        let _ = writeln!(text, "|---|---|---|---|---|---|---|---|---|");
        for scenario in &self.scenarios {
            let _ = writeln!(
                text,
                "| {} | {} | {} ({}) | {} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} / {:.2} | {:.2} |",
                scenario.lock,
                scenario.processes,
                scenario.acquisitions,
                scenario.offered,
                scenario.errors,
                scenario.cpu_ms_per_acquisition,
                scenario.written_bytes_per_acquisition / 1024.0,
                scenario.requests_per_acquisition,
                scenario.wait_ms.mean,
                scenario.wait_ms.p99,
                scenario.wait_ms.max,
                scenario.start_slip_ms.p99,
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_times_are_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (java (main) x) S 1 4242 4242 0 -1 4194560 9 0 0 0 1234 567 0 0 20 0 \
                    70 0 1 0 0 0";
        assert_eq!(cpu_ticks(stat), Some(1234 + 567));
        assert_eq!(cpu_ticks("4242 (java) S 1"), None);
        assert_eq!(cpu_ticks("no parenthesis"), None);
    }

    #[test]
    fn written_bytes_are_read_from_their_line() {
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
                  write_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(written_bytes(io), Some(8192));
        assert_eq!(written_bytes("rchar: 10\n"), None);
    }

    #[test]
    fn this_process_can_be_read_as_a_node_would_be() {
        let pid = std::process::id();
        let ticks = cpu_ticks(&read_proc(pid, "stat").unwrap());
        assert!(ticks.is_some());
        assert!(written_bytes(&read_proc(pid, "io").unwrap()).is_some());
        assert!(clock_ticks_per_second().unwrap() > 0);
    }

    #[test]
    fn acquisitions_come_in_rounds_of_one_per_locker_at_the_offered_rate() {
        let offsets = |lockers| {
            (0..6)
                .map(|number| due_offset(number, lockers, 20.0).as_millis())
                .collect::<Vec<_>>()
        };
        assert_eq!(offsets(1), [0, 50, 100, 150, 200, 250]);
        assert_eq!(offsets(3), [0, 0, 0, 150, 150, 150]);
        assert_eq!(offsets(2), [0, 0, 100, 100, 200, 200]);
    }

    #[test]
    fn rates_must_be_positive_finite_and_plausible() {
        assert_eq!(parse_rate("20"), Ok(20.0));
        assert_eq!(parse_rate(" 0.5 "), Ok(0.5));
        for bad in ["0", "-1", "NaN", "inf", "1e9", "fast", ""] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_idle_share_is_taken_off_in_proportion_to_the_scenarios_length() {
        let outcome = Outcome {
            seconds: 2.0,
            offered: 4,
            waits_ms: vec![1.0, 2.0, 3.0, 4.0],
            slips_ms: vec![0.0; 4],
            errors: 0,
        };
        let used = Usage {
            cpu: Duration::from_millis(500),
            written_bytes: 10_000,
        };
        let idle = IdleRate::of(
            Usage {
                cpu: Duration::from_millis(100),
                written_bytes: 2_000,
            },
            Duration::from_secs(1),
        );
        // Two seconds of scenario against one of idle: twice the idle usage comes off.
        let scenario = outcome.scenario("queue", 1, 40, used, idle);
        assert!((scenario.cpu_ms_per_acquisition - 75.0).abs() < 1e-9);
        assert!((scenario.written_bytes_per_acquisition - 1_500.0).abs() < 1e-9);
        assert!((scenario.requests_per_acquisition - 10.0).abs() < 1e-9);
    }
}
