//! The command line: the experiment by default, and the other measurements as commands.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use lock_core::{LockConfig, LockId};
use lock_storage_cassandra::{CassandraConfig, Credentials, Replication, SchemaConfig};

/// The environment variable `--username`'s password is read from.
pub const PASSWORD_VARIABLE: &str = "LOCK_BENCH_CASSANDRA_PASSWORD";
use lock_storage_memory::{ClusterConfig, Latency};

use crate::BoxError;
use crate::experiment::{self, Backend, RunSpec, Settings, Variant};
use crate::report::{Report, SettingsReport};
use crate::units::{LAN, parse_duration, parse_latency};

/// The most processes a run may have.
pub const MAX_PROCESSES: u64 = 64;

/// Reads one process count, 1 to [`MAX_PROCESSES`] (clap says which range on a bad one).
pub(crate) fn process_count() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..=MAX_PROCESSES)
}

/// The simulated replicas' gc_grace, as given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcGrace {
    /// The bound a real cluster needs: lease_ttl + 2 × max_clock_skew + 1 s.
    Safe,
    /// Whole seconds.
    Seconds(u64),
}

impl GcGrace {
    /// The duration for locks configured as `lock`.
    pub fn duration(self, lock: &LockConfig) -> Duration {
        match self {
            GcGrace::Safe => lock.lease_ttl + lock.max_clock_skew * 2 + Duration::from_secs(1),
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

/// Reproduces the thesis's experiment (Tables 1 and 2, Figures 1 and 2) for the queue lock
/// and the old baseline lock, side by side, on a simulated 3-replica cluster (virtual time)
/// or on Cassandra.
#[derive(Debug, Parser)]
#[command(name = "lock-bench", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// A command instead of the experiment.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The experiment's options.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The commands besides the experiment. The operator commands (`inspect`, `force-release`,
/// `watch`, `cluster start|stop`) are `lockctl`'s.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Take one lock many times (default 1,000,000) and report, per window of acquisitions,
    /// whether the tombstones they leave slow acquisition down.
    Tombstones(TombstoneArgs),
    /// Compare the queue lock with the lock users write with lightweight transactions
    /// (INSERT IF NOT EXISTS USING TTL, retried with backoff) on one real cluster:
    /// uncontended latency, waits at P = 1, 3, 5, 10, hand-off time, requests, fairness,
    /// errors. Needs `--cassandra local` or contact points (Paxos is not simulated).
    CompareLwt(crate::lwt_compare::CompareArgs),
    /// Sweep the number of processes on the simulator (default 1 to 64) and print and plot,
    /// per algorithm, requests per acquisition over the uncontended figure, time per
    /// acquisition over the hand-off floor 3r, and maximum over mean wait.
    Scale(crate::scale::ScaleArgs),
    /// Measure the leased work queue on the simulator for W = 1, 4, 16 workers, with and
    /// without workers dying holding a claim: items/s, claim-to-complete latency, requests
    /// per item, redeliveries, and a check that every item is completed exactly once.
    WorkQueue(crate::work_queue::WorkQueueArgs),
    /// Many tasks of one process waiting for one lock against many processes with one task
    /// each, and one busy process among others: requests per acquisition, time per
    /// acquisition, waits, the busy process's share and fairness over processes. On the
    /// simulator, or on a real cluster given its contact points.
    LocalLines(crate::local_lines::LocalLinesArgs),
    /// What an acquisition costs the cluster: the nodes' CPU time and disk writes per
    /// acquisition, for the queue lock and the lightweight-transaction lock on Paxos v1 and
    /// v2, at a fixed offered rate (open loop), uncontended and shared by P lockers. Needs
    /// `--cassandra local` (the nodes' processes are read in /proc).
    ClusterCost(crate::cluster_cost::ClusterCostArgs),
    /// Many lockers over many lock ids (`--keys`, drawn uniformly or Zipf-skewed), closed
    /// loop with a short critical section: acquisitions per second in all, waits, timeouts,
    /// errors, fairness on the hot ids and, on a local cluster, the nodes' CPU time per
    /// acquisition, for the queue lock (simulator or real cluster) and the
    /// lightweight-transaction lock (real cluster).
    ManyLocks(crate::many_locks::ManyLocksArgs),
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
    /// Where to write tombstones.json (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// With `--cassandra local`: how many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = crate::local::parse_node_count)]
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
        let local = crate::local::is_local(&self.backend.cassandra);
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
    /// is set) and keeps the run fast.
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
    /// Let the queue algorithm's next owner wait in the main row (lock-core's
    /// `LockConfig::wait_in_main_row`, off by default).
    #[arg(long)]
    pub wait_in_main_row: bool,
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
    #[arg(long, default_value = "3", value_parser = crate::local::parse_node_count)]
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
        if crate::local::is_local(&self.cassandra) {
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
        Ok(Backend::Cassandra(config))
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
        let acquisitions =
            self.acquisitions
                .unwrap_or(if crate::local::is_local(&self.backend.cassandra) {
                    crate::local::LOCAL_ACQUISITIONS
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
        lock.wait_in_main_row = self.wait_in_main_row;
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

/// Runs the command line.
pub fn main(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        None => run_experiment(&cli.run),
        Some(Command::Tombstones(args)) => run_tombstones(&args),
        Some(Command::CompareLwt(args)) => crate::lwt_compare::run(&args),
        Some(Command::Scale(args)) => crate::scale::run(&args),
        Some(Command::WorkQueue(args)) => crate::work_queue::run(&args),
        Some(Command::LocalLines(args)) => crate::local_lines::run(&args),
        Some(Command::ClusterCost(args)) => crate::cluster_cost::run(&args),
        Some(Command::ManyLocks(args)) => crate::many_locks::run(&args),
    }
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

fn run_tombstones(args: &TombstoneArgs) -> Result<(), BoxError> {
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
    let mut run_args = Cli::try_parse_from(["lock-bench"])?.run;
    run_args.processes = vec![args.processes];
    run_args.acquisitions = Some(crate::tombstones::per_process(
        acquisitions,
        args.processes,
    )?);
    run_args.critical_section = args.critical_section;
    run_args.pause = args.pause;
    run_args.lock_id.clone_from(&args.lock_id);
    run_args.quiet = args.quiet;
    run_args.backend.seed = args.backend.seed;
    let settings = run_args.settings()?;
    if crate::local::is_local(&args.backend.cassandra) {
        return crate::tombstones::run_local(args, &settings, variant, window);
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
         pause {}), windows of {} acquisitions\n{}{}",
        variant.label(),
        args.processes,
        crate::tombstones::describe(args.critical_section),
        crate::tombstones::describe(args.pause),
        window,
        backend.describe(),
        match &backend {
            Backend::Simulated(config) => format!(
                ", dead-cell read cost {}",
                crate::tombstones::describe(config.dead_cell_read_cost)
            ),
            Backend::Cassandra(_) => String::new(),
        }
    );
    if !args.quiet {
        crate::note(&setup);
    }
    let label = format!("tombstones {} P={}", variant.label(), args.processes);
    let (run, samples) = runtime(simulated, !simulated)?.block_on(experiment::run_sampled(
        &backend, &settings, spec, &label, window,
    ))?;
    let report = crate::tombstones::TombstoneReport::new(setup, &run, &samples, simulated);
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

fn run_experiment(args: &RunArgs) -> Result<(), BoxError> {
    if crate::local::is_local(&args.backend.cassandra) {
        return crate::local::run_compared(args);
    }
    let settings = args.settings()?;
    let mut backend = args
        .backend
        .backend(&settings.lock, SimulationDefaults::EXPERIMENT)?;
    if args.real_time {
        backend = backend.for_wall_clock();
    }
    let cassandra = matches!(backend, Backend::Cassandra(_));
    if cassandra && args.real_time {
        crate::note("note: --real-time is implied by --cassandra");
    }
    let virtual_time = !cassandra && !args.real_time;
    let specs = args.specs();
    let out = create_out_dir(args.out.as_ref())?;
    let wall = std::time::Instant::now();
    let progress = settings.progress;
    let (round_trip, runs) = runtime(virtual_time, cassandra)?.block_on(async {
        let round_trip =
            experiment::measure_round_trip(&backend, &settings, args.round_trip_samples).await?;
        if progress {
            crate::note(&format!(
                "measured r = {:.3} ms over {} uncontended requests of each kind",
                round_trip.r().as_secs_f64() * 1e3,
                round_trip.samples
            ));
        }
        let runs = experiment::run_all(&backend, &settings, &specs, "").await?;
        Ok::<_, BoxError>((round_trip, runs))
    })?;
    let clock = if virtual_time {
        "virtual (Tokio's paused clock)"
    } else {
        "wall-clock"
    };
    let new = if args.fencing == Fencing::On {
        Variant::QUEUE_FENCED
    } else {
        Variant::QUEUE
    };
    let report = Report::new(
        SettingsReport::new(&settings, backend.describe(), clock),
        round_trip,
        &runs,
        new,
        wall.elapsed(),
    );
    let mut text = report.render();
    crate::report::write_files(&out, &report, &runs)?;
    let pictures = crate::plot::draw_all(&out, &runs, new)?;
    let _ = writeln!(text, "\nWrote {}:", out.display());
    let _ = writeln!(
        text,
        "  results.json (every number above), acquisitions.csv (every acquisition)"
    );
    for picture in pictures {
        let _ = writeln!(text, "  {}", picture.display());
    }
    let _ = writeln!(
        text,
        "Total wall time: {:.1} s",
        wall.elapsed().as_secs_f64()
    );
    Ok(crate::emit(&text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(arguments: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lock-bench").chain(arguments.iter().copied()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_defaults_are_the_thesis_experiment() {
        let cli = parse(&[]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.run.processes, vec![1, 3, 5]);
        assert_eq!(cli.run.acquisitions, None);
        assert_eq!(cli.run.settings().unwrap().acquisitions, 5000);
        let specs = cli.run.specs();
        assert_eq!(
            specs.len(),
            12,
            "queue, queue+fencing, baseline and bakery for 1, 3 and 5"
        );
        assert_eq!(
            specs
                .iter()
                .filter(|spec| spec.variant == Variant::BAKERY)
                .map(|spec| spec.processes)
                .collect::<Vec<_>>(),
            [1, 3, 5]
        );
        let queue_only = parse(&["--algorithms", "queue", "--fencing", "off"]).unwrap();
        assert!(
            queue_only
                .run
                .specs()
                .iter()
                .all(|spec| spec.variant == Variant::QUEUE)
        );
        let settings = cli.run.settings().unwrap();
        assert_eq!(settings.critical_section, Duration::ZERO);
        assert!(settings.lock.fast_path, "lock-core's default");
        let without = parse(&["--no-fast-path"]).unwrap();
        assert!(!without.run.settings().unwrap().lock.fast_path);
        match cli
            .run
            .backend
            .backend(&settings.lock, SimulationDefaults::EXPERIMENT)
            .unwrap()
        {
            Backend::Simulated(config) => {
                assert_eq!(config.replicas, 3);
                assert_eq!(config.latency, LAN);
                assert_eq!(config.gc_grace, Duration::from_secs(1));
            }
            Backend::Cassandra(_) => panic!("the default is the simulation"),
        }
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        assert!(parse(&["-p", "0"]).is_err());
        assert!(parse(&["--latency", "uniform:3ms,1ms"]).is_err());
        assert!(parse(&["--critical-section", "5"]).is_err());
        let zero = parse(&["-n", "0"]).unwrap();
        assert!(
            zero.run
                .settings()
                .unwrap_err()
                .to_string()
                .contains("at least 1")
        );
        let poll = parse(&["--poll-min-interval", "1s", "--poll-max-interval", "10ms"]).unwrap();
        assert!(
            poll.run
                .settings()
                .unwrap_err()
                .to_string()
                .contains("poll.min_interval")
        );
        let long = parse(&["--critical-section", "6s"]).unwrap();
        assert!(long.run.settings().is_err());
        for grace in ["soon", "1.5", "99999999999"] {
            let error = parse(&["--gc-grace", grace]).unwrap_err().to_string();
            assert!(
                error.contains("--gc-grace") && error.contains("safe"),
                "{error}"
            );
        }
        let lock = LockConfig::default();
        let safe = parse(&["--gc-grace", "safe"]).unwrap();
        match safe
            .run
            .backend
            .backend(&lock, SimulationDefaults::EXPERIMENT)
            .unwrap()
        {
            Backend::Simulated(config) => assert_eq!(config.gc_grace, Duration::from_secs(13)),
            Backend::Cassandra(_) => panic!("the default is the simulation"),
        }
        for count in ["0", "65", "x", ""] {
            let error = parse(&["-p", count]).unwrap_err().to_string();
            assert!(error.contains("--processes"), "{count:?}: {error}");
        }
        assert_eq!(parse(&["-p", "64,1"]).unwrap().run.processes, vec![64, 1]);
        let error = parse(&["--critical-section", "-1ms"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("negative"), "{error}");
        let error = parse(&["--pause", "5"]).unwrap_err().to_string();
        assert!(
            error.contains("--pause") && error.contains("unit needed") && error.contains("e.g."),
            "{error}"
        );
        let mixed = parse(&["--cassandra", "127.0.0.1", "--latency", "zero"]).unwrap();
        assert!(
            mixed
                .run
                .backend
                .backend(&lock, SimulationDefaults::EXPERIMENT)
                .is_err()
        );
    }

    #[test]
    fn logins_are_checked_before_anything_starts() {
        let local = parse(&["--cassandra", "local", "--username", "cassandra"]).unwrap();
        let error = main(local).unwrap_err().to_string();
        assert!(error.contains("--username"), "{error}");
        let login = parse(&["--cassandra", "127.0.0.1", "--username", "reader"]).unwrap();
        let lock = LockConfig::default();
        let backend = login
            .run
            .backend
            .backend(&lock, SimulationDefaults::EXPERIMENT);
        match std::env::var(PASSWORD_VARIABLE) {
            Err(_) => {
                let error = backend.unwrap_err().to_string();
                assert!(error.contains(PASSWORD_VARIABLE), "{error}");
            }
            Ok(password) => match backend.unwrap() {
                Backend::Cassandra(config) => {
                    let credentials = config.credentials.unwrap();
                    assert_eq!(credentials.username, "reader");
                    assert_eq!(credentials.password, password);
                }
                Backend::Simulated(_) => panic!("contact points make a Cassandra backend"),
            },
        }
    }

    #[test]
    fn tombstones_has_its_own_simulation_defaults_and_checks_its_input() {
        let cli = parse(&["tombstones"]).unwrap();
        let Some(Command::Tombstones(args)) = cli.command else {
            panic!("not the tombstones command");
        };
        assert_eq!(args.counts().unwrap(), (1_000_000, 100_000));
        let local = parse(&["tombstones", "--cassandra", "local"]).unwrap();
        let Some(Command::Tombstones(local)) = local.command else {
            panic!("not the tombstones command");
        };
        assert_eq!(local.counts().unwrap(), (50_000, 5_000));
        assert_eq!((local.local_nodes, local.trace_every), (3, 47));
        match args
            .backend
            .backend(&LockConfig::default(), SimulationDefaults::TOMBSTONES)
            .unwrap()
        {
            Backend::Simulated(config) => {
                assert_eq!(config.gc_grace, Duration::from_secs(60));
                assert_eq!(config.dead_cell_read_cost, Duration::from_micros(1));
            }
            Backend::Cassandra(_) => panic!("the default is the simulation"),
        }
        for bad in [
            &["tombstones", "--window", "0"][..],
            &["tombstones", "--algorithm", "baseline", "--fencing"],
            &["tombstones", "-n", "0"],
            &["tombstones", "--trace-every", "0"],
        ] {
            assert!(main(parse(bad).unwrap()).is_err(), "{bad:?}");
        }
        assert!(parse(&["tombstones", "--dead-cell-cost", "5"]).is_err());
    }
}
