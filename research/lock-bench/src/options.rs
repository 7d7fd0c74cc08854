//! The command line's shared pieces: the storage options every command takes, the
//! experiment's options (which `scale` and `tombstones` start from), the simulation's
//! defaults, `--cassandra local`, and the runtime and output directory of a run. Every
//! command's module uses these; none of them uses a command's module.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, ValueEnum};
use lock_core::{LockConfig, LockId};
use lock_local_cluster::CassandraVersion;
use lock_storage_cassandra::{CassandraConfig, Credentials, Replication, SchemaConfig};
use lock_storage_memory::{ClusterConfig, Latency};

use crate::BoxError;
use crate::experiment::{Backend, RunSpec, Settings, Variant};
use crate::units::{LAN, parse_duration, parse_latency};

/// The environment variable `--username`'s password is read from.
pub const PASSWORD_VARIABLE: &str = "LOCK_BENCH_CASSANDRA_PASSWORD";

/// The most processes a run may have.
pub const MAX_PROCESSES: u64 = 64;

/// Reads one process count, 1 to [`MAX_PROCESSES`] (clap says which range on a bad one).
pub(crate) fn process_count() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..=MAX_PROCESSES)
}

/// The simulated replicas' gc_grace, as given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcGrace {
    /// The bound a real cluster needs: lease_ttl + 2 × max_clock_skew + 1 s, in whole
    /// seconds, as the Cassandra backend computes it.
    Safe,
    /// Whole seconds.
    Seconds(u64),
}

impl GcGrace {
    /// The duration for locks configured as `lock`.
    pub fn duration(self, lock: &LockConfig) -> Duration {
        match self {
            GcGrace::Safe => {
                Duration::from_secs(lock_storage_cassandra::config::least_gc_grace_seconds(lock))
            }
            GcGrace::Seconds(seconds) => Duration::from_secs(seconds),
        }
    }
}

/// Parses `--gc-grace`: whole seconds (at most a year) or `safe`.
fn parse_gc_grace(text: &str) -> Result<GcGrace, String> {
    let text = text.trim();
    if text == "safe" {
        return Ok(GcGrace::Safe);
    }
    match text.parse::<u64>() {
        Ok(seconds) if Duration::from_secs(seconds) <= crate::units::MAX_DURATION => {
            Ok(GcGrace::Seconds(seconds))
        }
        _ => Err(format!(
            "{text:?} is neither whole seconds (at most a year) nor `safe`; e.g. 60 or safe"
        )),
    }
}

/// Where locks live: the simulated cluster (default) or Cassandra.
#[derive(Debug, Args)]
pub struct BackendArgs {
    /// Run against a real Cassandra or ScyllaDB cluster: comma-separated contact points
    /// (`host`, `host:port`). `local` (the experiment and `compare-lwt` only): start a
    /// local Apache Cassandra cluster (`--local-nodes`, keyspace with RF = nodes) for the
    /// command and stop it at the end; the experiment then runs the same experiment on the
    /// simulator calibrated to the cluster's round trip, side by side.
    #[arg(long, value_name = "CONTACT_POINTS", value_delimiter = ',')]
    pub cassandra: Vec<String>,
    /// With `--cassandra local`: the Apache Cassandra release the local cluster runs,
    /// 4.0.x or 4.1.x (on a Java 11 fetched into the jar cache) or 5.0.x (on the system's
    /// Java 17); a line alone (4.0, 4.1, 5.0) is the release it was tested on (4.0.19,
    /// 4.1.10, 5.0.6).
    #[arg(long, default_value = "5.0.6")]
    pub cassandra_version: CassandraVersion,
    /// The keyspace on Cassandra.
    #[arg(long, default_value = "lock_bench")]
    pub keyspace: String,
    /// Create the keyspace and table on Cassandra if they are missing.
    #[arg(long)]
    pub create_schema: bool,
    /// The replication factor of a keyspace created by `--create-schema`.
    #[arg(long, default_value_t = 3)]
    pub replication_factor: u32,
    /// The user name to log in to Cassandra with, for a cluster that requires a password
    /// (`PasswordAuthenticator`). The password is read from the environment variable
    /// `LOCK_BENCH_CASSANDRA_PASSWORD`, never from the command line.
    #[arg(long)]
    pub username: Option<String>,
    /// The simulated latency of one message (one way), see the crate docs: `lan` (log-normal,
    /// median 250us, p99 1ms: a quorum round trip of about 1 ms with jitter), `thesis`,
    /// `zero`, `fixed:DUR`, `uniform:MIN,MAX`, `exp:MIN,MEAN_EXTRA`, `lognormal:MEDIAN,P99`.
    #[arg(long, default_value = "lan", value_parser = parse_latency)]
    pub latency: Latency,
    /// The simulated replicas' gc_grace in whole seconds, or `safe` for the bound a real
    /// cluster needs (lease_ttl + 2 × max_clock_skew + 1 s = 13 s). Default: 1 for the
    /// experiment and the other commands, 60 (the least the Cassandra backend accepts) for
    /// `tombstones`. The experiment injects no faults, so every replica gets every
    /// delete within milliseconds and 1 s is safe there; it only keeps the simulator from
    /// stepping over old tombstones (which cost no simulated time unless `--dead-cell-cost`
    /// is set) and keeps the run fast. With `tombstones --cassandra local` it is also the
    /// real table's `gc_grace_seconds` (default 60, the backend's; 60 to 864000, and at least
    /// the safe bound).
    #[arg(long, value_parser = parse_gc_grace)]
    pub gc_grace: Option<GcGrace>,
    /// Simulated time a replica spends per dead cell (tombstone or expired cell) it steps
    /// over while reading, to model tombstone build-up (e.g. `2us`). Default: 0 for the
    /// experiment, 1us for `tombstones`.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub dead_cell_cost: Option<Duration>,
    /// The seed of the simulation and of every locker.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Which runs of the queue algorithm use fencing tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Fencing {
    /// None: the thesis's algorithm.
    Off,
    /// All of them.
    On,
    /// The thesis's runs without, plus one more run per P with, to show the cost.
    Both,
}

/// The experiment's options. The defaults reproduce the thesis's experiment.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Process counts, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_value = "1,3,5", value_parser = process_count())]
    pub processes: Vec<usize>,
    /// Acquisitions per process [default: 5000; 500 with `--cassandra local`].
    #[arg(short = 'n', long)]
    pub acquisitions: Option<u32>,
    /// How long a process holds the lock before releasing it (e.g. `0`, `2ms`).
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_duration)]
    pub critical_section: Duration,
    /// How long a process pauses after releasing before it asks again.
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_duration)]
    pub pause: Duration,
    /// Fencing tokens for the queue algorithm (the thesis had none; lock-core defaults to on).
    #[arg(long, value_enum, default_value_t = Fencing::Both)]
    pub fencing: Fencing,
    /// The queue algorithm's shortest pause between polls (lock-core's
    /// `PollConfig::min_interval`; default: lock-core's).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub poll_min_interval: Option<Duration>,
    /// The queue algorithm's longest pause between polls (`PollConfig::max_interval`).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub poll_max_interval: Option<Duration>,
    /// The jitter of the pauses of waiters further back, in percent
    /// (`PollConfig::jitter_percent`).
    #[arg(long)]
    pub poll_jitter_percent: Option<u32>,
    /// Turn off the queue algorithm's two-round-trip fast path (lock-core's
    /// `LockConfig::fast_path`, on by default), for comparison.
    #[arg(long)]
    pub no_fast_path: bool,
    /// Keep the queue algorithm's next owner from waiting in the main row (lock-core's
    /// `LockConfig::wait_in_main_row`, on by default), for comparison.
    #[arg(long)]
    pub no_wait_in_main_row: bool,
    /// How long a queue lock released with nobody queued behind stays with its locker for
    /// a quick retake (lock-core's `LockConfig::linger`; default: lock-core's, off).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub linger: Option<Duration>,
    /// A fixed margin before the latest queue head seen where queue reads start (lock-core's
    /// `PollConfig::queue_margin`; default `2 × max_clock_skew + request_timeout`, 4 s):
    /// a shorter margin steps over fewer dead cells per read on a busy lock, and an owner
    /// it hides joins the queue again under the time of the owner that passed it.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub queue_margin: Option<Duration>,
    /// Adapt the queue margin to the lock's rate: this many acquisitions' worth of the time
    /// between them (lock-core's `PollConfig::margin_acquisitions`, at most 1000; 200
    /// recommended for hot locks; default 0, off, every read starting
    /// `2 × max_clock_skew + request_timeout`, 4 s, back).
    #[arg(long)]
    pub margin_acquisitions: Option<u32>,
    /// Give every locker wake-up hints (lock-core's `LockerBuilder::wake_hints`): on the
    /// simulator they take the cluster's one-way latency; on Cassandra each locker listens
    /// on a UDP socket of its own on loopback. Queue algorithm; the others ignore them.
    #[arg(long)]
    pub wake_hints: bool,
    /// Split each run's hand-offs into detection, the read that saw the release, the main
    /// write and the main read, from a log of every request the lockers sent (on the
    /// simulator or on Cassandra: with one clock for all lockers, as they share this
    /// process). Queue algorithm; the runs' table is followed by the split.
    #[arg(long)]
    pub handoffs: bool,
    /// Run only these algorithms.
    #[arg(long, value_delimiter = ',', default_values = ["queue", "baseline", "bakery"])]
    pub algorithms: Vec<AlgorithmArg>,
    /// Run on the wall clock instead of virtual time (simulation; Cassandra always is).
    #[arg(long)]
    pub real_time: bool,
    /// Where to write results.json, acquisitions.csv and the PNGs. Default: `lock-bench` in
    /// the Cargo target directory the binary runs from (`target/lock-bench` under
    /// `cargo run`), else `lock-bench-results` in the current directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The lock id (each run appends its algorithm and process count).
    #[arg(long, default_value = "thesis-experiment")]
    pub lock_id: String,
    /// Uncontended requests of each kind timed to measure the round trip r.
    #[arg(long, default_value_t = 1000)]
    pub round_trip_samples: u32,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// With `--cassandra local`: how long to run the experiment's runs untimed, on rows of
    /// their own, before timing anything, while the fresh cluster's JVMs compile their hot
    /// paths; the round trip's requests then also run untimed for a tenth of it.
    #[arg(long, default_value = "5m", allow_hyphen_values = true, value_parser = parse_duration)]
    pub round_trip_warm_up: Duration,
    /// With `--cassandra local`: how many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = parse_node_count)]
    pub local_nodes: usize,
    /// Where the lock lives.
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// An algorithm on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlgorithmArg {
    /// The new, fair queue algorithm.
    Queue,
    /// The old shadow-row algorithm with random backoff.
    Baseline,
    /// The Cassandra wiki's bakery lock, with our lease (each process one bakery client).
    Bakery,
}

/// The simulated cluster's tombstone settings when the command line does not give them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimulationDefaults {
    /// The replicas' gc_grace.
    pub gc_grace: Duration,
    /// The read cost per dead cell.
    pub dead_cell_cost: Duration,
    /// How many Tokio milliseconds a simulated millisecond takes
    /// (lock-storage-memory's `ClusterConfig::timer_dilation`).
    pub timer_dilation: u32,
}

impl SimulationDefaults {
    /// The experiment and every command but `tombstones`: tombstones kept 1 s and free to
    /// read, and time simulated to the microsecond (a Tokio millisecond per simulated
    /// microsecond), so that a round trip of a fraction of a millisecond is simulated as
    /// such rather than rounded to Tokio's millisecond timer. `tombstones` simulates time
    /// to the microsecond too.
    pub const EXPERIMENT: SimulationDefaults = SimulationDefaults {
        gc_grace: Duration::from_secs(1),
        dead_cell_cost: Duration::ZERO,
        timer_dilation: 1_000,
    };
    /// `tombstones`: the shortest gc_grace the Cassandra backend accepts (60 s) and 1 µs per
    /// dead cell read (1000 tombstones, Cassandra's warning threshold, then cost about one
    /// LAN round trip).
    pub const TOMBSTONES: SimulationDefaults = SimulationDefaults {
        gc_grace: Duration::from_secs(60),
        dead_cell_cost: Duration::from_micros(1),
        timer_dilation: 1_000,
    };
}

impl BackendArgs {
    /// Refuses `--username` for `--cassandra local`, whose cluster requires no password.
    pub fn refuse_username_for_local(&self) -> Result<(), BoxError> {
        match self.username {
            Some(_) => Err(
                "--username logs in to a cluster given by contact points; the \
                            cluster that --cassandra local starts requires no password"
                    .into(),
            ),
            None => Ok(()),
        }
    }

    /// The credentials of `--username`, with the password from
    /// [`PASSWORD_VARIABLE`]; none without `--username`.
    pub fn credentials(&self) -> Result<Option<Credentials>, BoxError> {
        let Some(username) = &self.username else {
            return Ok(None);
        };
        match std::env::var(PASSWORD_VARIABLE) {
            Ok(password) => Ok(Some(Credentials {
                username: username.clone(),
                password,
            })),
            Err(_) => Err(format!(
                "--username {username} needs its password in the environment variable \
                 {PASSWORD_VARIABLE} (set, and valid UTF-8)"
            )
            .into()),
        }
    }

    /// Refuses the options that only the simulator takes, for a run on a real cluster.
    pub fn refuse_simulator_options(&self) -> Result<(), BoxError> {
        if self.latency != LAN || self.gc_grace.is_some() || self.dead_cell_cost.is_some() {
            return Err(
                "--latency, --gc-grace and --dead-cell-cost apply to the simulated cluster, \
                 not to --cassandra"
                    .into(),
            );
        }
        Ok(())
    }

    /// The backend these options name, for locks configured as `lock`, with `defaults` for
    /// the simulation options not given.
    pub fn backend(
        &self,
        lock: &LockConfig,
        defaults: SimulationDefaults,
    ) -> Result<Backend, BoxError> {
        if is_local(&self.cassandra) {
            return Err(
                "--cassandra local starts a cluster for the experiment only; for this command \
                 start one with `lockctl cluster start` and pass the contact points it prints"
                    .into(),
            );
        }
        if self.cassandra.is_empty() {
            let gc_grace = self
                .gc_grace
                .map_or(defaults.gc_grace, |gc_grace| gc_grace.duration(lock));
            let config = ClusterConfig {
                latency: self.latency.clone(),
                gc_grace,
                dead_cell_read_cost: self.dead_cell_cost.unwrap_or(defaults.dead_cell_cost),
                seed: self.seed,
                timer_dilation: defaults.timer_dilation,
                ..ClusterConfig::default()
            };
            config.validate()?;
            return Ok(Backend::Simulated(config));
        }
        self.refuse_simulator_options()?;
        let schema = self.create_schema.then(|| {
            SchemaConfig::new(Replication::Simple {
                replication_factor: self.replication_factor,
            })
        });
        let config = CassandraConfig {
            schema,
            credentials: self.credentials()?,
            ..CassandraConfig::new(self.cassandra.iter().map(String::as_str), &self.keyspace)
        };
        config.validate()?;
        config.check_lock_config(lock)?;
        Ok(Backend::Cassandra(Box::new(config)))
    }
}

impl RunArgs {
    /// The runs, in the order they are made: for each P, the queue runs then the baseline.
    pub fn specs(&self) -> Vec<RunSpec> {
        let mut specs = Vec::new();
        let mut seen = Vec::new();
        for &processes in &self.processes {
            if seen.contains(&processes) {
                continue;
            }
            seen.push(processes);
            let mut variants = Vec::new();
            if self.algorithms.contains(&AlgorithmArg::Queue) {
                match self.fencing {
                    Fencing::Off => variants.push(Variant::QUEUE),
                    Fencing::On => variants.push(Variant::QUEUE_FENCED),
                    Fencing::Both => variants.extend([Variant::QUEUE, Variant::QUEUE_FENCED]),
                }
            }
            if self.algorithms.contains(&AlgorithmArg::Baseline) {
                variants.push(Variant::BASELINE);
            }
            if self.algorithms.contains(&AlgorithmArg::Bakery) {
                variants.push(Variant::BAKERY);
            }
            specs.extend(
                variants
                    .into_iter()
                    .map(|variant| RunSpec { variant, processes }),
            );
        }
        specs
    }

    /// The shared settings, after validating the options.
    pub fn settings(&self) -> Result<Settings, BoxError> {
        let acquisitions = self
            .acquisitions
            .unwrap_or(if is_local(&self.backend.cassandra) {
                LOCAL_ACQUISITIONS
            } else {
                5000
            });
        if acquisitions == 0 {
            return Err("--acquisitions must be at least 1".into());
        }
        if self.processes.is_empty() {
            return Err("--processes needs at least one count".into());
        }
        if self.algorithms.is_empty() {
            return Err("--algorithms needs at least one algorithm".into());
        }
        LockId::new(format!("{}-queue+fencing-p64", self.lock_id))
            .map_err(|error| format!("--lock-id: {error}"))?;
        let mut lock = LockConfig::default();
        if let Some(min_interval) = self.poll_min_interval {
            lock.poll.min_interval = min_interval;
        }
        if let Some(max_interval) = self.poll_max_interval {
            lock.poll.max_interval = max_interval;
        }
        if let Some(jitter_percent) = self.poll_jitter_percent {
            lock.poll.jitter_percent = jitter_percent;
        }
        lock.fast_path = !self.no_fast_path;
        lock.wait_in_main_row = !self.no_wait_in_main_row;
        if let Some(linger) = self.linger {
            lock.linger = linger;
        }
        lock.poll.queue_margin = self.queue_margin;
        if let Some(acquisitions) = self.margin_acquisitions {
            lock.poll.margin_acquisitions = acquisitions;
        }
        lock.clone().validate()?;
        let limit = lock.lease_ttl / 2;
        if self.critical_section >= limit {
            return Err(format!(
                "--critical-section must be shorter than half the lease TTL ({limit:?})"
            )
            .into());
        }
        if self.pause > Duration::from_secs(3600) {
            return Err("--pause must be at most an hour".into());
        }
        Ok(Settings {
            acquisitions,
            critical_section: self.critical_section,
            pause: self.pause,
            seed: self.backend.seed,
            lock_id: self.lock_id.clone(),
            lock,
            progress: !self.quiet,
            handoffs: self.handoffs,
            wake_hints: self.wake_hints,
        })
    }
}

pub(crate) fn runtime(
    virtual_time: bool,
    multi_thread: bool,
) -> Result<tokio::runtime::Runtime, BoxError> {
    let runtime = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(virtual_time)
            .build()?
    };
    Ok(runtime)
}

/// The end of a command's run: writes `value` as pretty JSON to `file` in `out`, says
/// where in `text`, prints `text`, and fails if any of the run's acquisitions broke mutual
/// exclusion (`violations`).
pub(crate) fn write_json_and_report(
    out: &std::path::Path,
    file: &str,
    value: &impl serde::Serialize,
    mut text: String,
    violations: u64,
) -> Result<(), BoxError> {
    let json = out.join(file);
    std::fs::write(&json, serde_json::to_string_pretty(value)?)?;
    text.push_str(&format!("\nWrote {}\n", json.display()));
    crate::emit(&text)?;
    if violations > 0 {
        return Err(format!("{violations} mutual exclusion violations: the lock is broken").into());
    }
    Ok(())
}

/// Creates the output directory: `out`, or `lock-bench` in the Cargo target directory the
/// binary runs from (else `lock-bench-results`), so that `cargo run` writes under the
/// ignored `target/`.
pub(crate) fn create_out_dir(out: Option<&PathBuf>) -> Result<PathBuf, BoxError> {
    Ok(lock_cli_support::create_out_dir(
        out.map(PathBuf::as_path),
        "lock-bench",
    )?)
}

/// The contact point that names a local cluster started by `lock-bench` itself.
pub const LOCAL: &str = "local";

/// The default acquisitions per process on a local cluster: the whole command (the
/// cluster's start, nine runs of P = 1, 3, 5 with new, new with fencing and old, the
/// simulator) took 5 to 6 minutes of wall time on the busy two-core development machine
/// (see the README), leaving room under 10 minutes for a slower machine.
pub const LOCAL_ACQUISITIONS: u32 = 500;

/// Whether `contact_points` is `local`: a local cluster that the command starts itself.
pub fn is_local(contact_points: &[String]) -> bool {
    matches!(contact_points, [only] if only.trim().eq_ignore_ascii_case(LOCAL))
}

/// Parses a local cluster's node count: 1 or 3.
pub fn parse_node_count(text: &str) -> Result<usize, String> {
    match text.trim() {
        "1" => Ok(1),
        "3" => Ok(3),
        _ => Err(format!("a local cluster has 1 or 3 nodes, got {text:?}")),
    }
}

impl RunArgs {
    /// The experiment's options as a command line without arguments gives them: what
    /// `scale` and `tombstones` start from.
    pub fn defaults() -> Result<RunArgs, clap::Error> {
        /// The experiment's options alone, to parse.
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            run: RunArgs,
        }
        Ok(Defaults::try_parse_from(["lock-bench"])?.run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_is_named_alone() {
        assert!(is_local(&["local".to_owned()]));
        assert!(is_local(&[" LOCAL ".to_owned()]));
        assert!(!is_local(&[]));
        assert!(!is_local(&["local".to_owned(), "10.0.0.1".to_owned()]));
        assert!(!is_local(&["127.0.0.1:9042".to_owned()]));
        assert_eq!(parse_node_count("1"), Ok(1));
        assert_eq!(parse_node_count("3"), Ok(3));
        assert!(parse_node_count("2").unwrap_err().contains("1 or 3"));
    }
}
