//! The model checker's command line, in the style of stateright's examples:
//!
//! ```text
//! lock-model check [CLIENTS] [REPLICAS] [OPTIONS]             breadth-first, every state
//! lock-model check-dfs [CLIENTS] [REPLICAS] [OPTIONS]         depth-first, every state
//! lock-model check-simulation [CLIENTS] [REPLICAS] [OPTIONS]  random walks
//! lock-model explore [CLIENTS] [REPLICAS] [OPTIONS]           Explorer web UI
//! ```
//!
//! `--model` picks the model (`queue`, `soft`, `baseline`, `lease`, `time`); see the crate
//! documentation for what each checks and `--help` for the options.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::num::NonZeroUsize;
use std::process::exit;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use lock_core::Algorithm;
use lock_core::machine::Mode;
use lock_core::storage::RowKind;
use lock_model::clock::{TimeRule, TimeoutRule};
use lock_model::global_time::{FollowRule, GlobalTimeModel};
use lock_model::lease::{self, LeaseModel};
use lock_model::lock::{
    LockModel, LockState, MODEL_LINGER, RetakeFault, SeatFault, TimeService, lock_config,
};
use lock_model::trace::{Describe, render_discovery};
use stateright::report::WriteReporter;
use stateright::{Checker, CheckerBuilder, Model, Representative, UniformChooser};

#[derive(Parser)]
#[command(about = "Model-check the fair lock's theorems on lock-core's state machines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Explore every state breadth-first and report each property.
    Check(Options),
    /// Explore every state depth-first and report each property.
    CheckDfs(Options),
    /// Walk random paths (bounded by --states) and report what they found.
    CheckSimulation(Options),
    /// Serve stateright's Explorer on --address to step through the model by hand.
    Explore(Options),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    /// The queue algorithm, mandatory lock: Theorems 1 and 2, bounded bypass.
    Queue,
    /// The queue algorithm, soft lock: Theorems 3 and 4.
    Soft,
    /// The baseline shadow-row algorithm: mutual exclusion and starvation.
    Baseline,
    /// Leases: renewal, pauses, replica clock skew.
    Lease,
    /// The time service: Theorem 5 (CLIENTS = time-service replicas).
    Time,
}

/// A deliberately broken seat rule (see `SeatFault`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BrokenSeats {
    /// Every client's seats share one prefix (assumption A7 broken).
    SharedPrefix,
    /// Acquisitions ignore their seat's timestamp floor.
    NoTimestampFloor,
    /// Queue floors are used without their margin.
    FloorWithoutMargin,
}

/// How time-model followers take timestamps (see `FollowRule`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Follow {
    /// lock-core's GlobalTimeFollower.
    Follower,
    /// Broken: the local clock.
    LocalClock,
    /// Broken: the latest GlobalTime read.
    LatestRead,
}

#[derive(Args, Clone)]
struct Options {
    /// Clients (for `time`: time-service replicas, whose clocks run 0, 1, 2, ... ticks ahead).
    #[arg(default_value_t = 2)]
    clients: usize,
    /// Storage replicas (the replication factor).
    #[arg(default_value_t = 3)]
    replicas: usize,
    /// Which model.
    #[arg(long, value_enum, default_value = "queue")]
    model: Which,
    /// Replicas that may crash.
    #[arg(long, default_value_t = 0)]
    crashes: usize,
    /// The last tick.
    #[arg(long)]
    ticks: Option<u32>,
    /// Acquisitions per client (queue, soft, baseline) or runs per time-service replica.
    #[arg(long, default_value_t = 1)]
    rounds: u8,
    /// Queue, soft and baseline models: check progress; time advances only when nothing else
    /// is urgent, timeouts fire only on a quiet network (see the crate docs).
    #[arg(long)]
    liveness: bool,
    /// With --liveness: let timeouts fire while other clients' messages are in flight.
    #[arg(long)]
    timeouts_anytime: bool,
    /// With --liveness: tick boundaries a holder may hold the lock across.
    #[arg(long, default_value_t = 0)]
    hold_ticks: u32,
    /// Queue, soft and baseline models: every clock reading is distinct (strictly increasing
    /// queue timestamps).
    #[arg(long)]
    strict_timestamps: bool,
    /// Queue and baseline models: the K of the bypass properties.
    #[arg(long, default_value_t = 1)]
    bypass_bound: u8,
    /// Queue, soft and baseline models: holders keep the lock (no release).
    #[arg(long)]
    no_release: bool,
    /// Keep a write's copies outside its quorum in flight after the acknowledgement.
    #[arg(long)]
    late_writes: bool,
    /// Time model: blocking read repair (the lock models' liveness argument assumes none).
    #[arg(long)]
    read_repair: bool,
    /// Queue and soft models: acquisitions take no fencing token (lock-core's `fencing:
    /// false`).
    #[arg(long)]
    no_fencing: bool,
    /// Queue model: the two-round-trip fast path as lock-core's locker uses it, after an
    /// acquisition that found the lock idle (lock-core's `fast_path`, off in the models by
    /// default).
    #[arg(long)]
    fast_path: bool,
    /// Queue model: every mandatory acquisition tries the fast path.
    #[arg(long)]
    fast_path_always: bool,
    /// Queue model: a released lock with nobody seen queued behind lingers for one tick,
    /// and the holder's next round may retake it (lock-core's `linger`, off by default).
    #[arg(long)]
    linger: bool,
    /// Queue model with --linger, deliberately broken: the retake's queue read is
    /// answered with nothing.
    #[arg(long)]
    retake_ignores_queue: bool,
    /// Queue and soft models, a deliberately broken store: fence reads wait for one replica
    /// (consistency ONE) instead of a quorum.
    #[arg(long)]
    fence_read_one: bool,
    /// Lease model: holders never pause.
    #[arg(long)]
    no_pause: bool,
    /// Lease model: the resource accepts every write, whatever its fencing token.
    #[arg(long)]
    resource_ignores_tokens: bool,
    /// Lease model: the last replica's clock runs this many seconds ahead.
    #[arg(long, default_value_t = 0)]
    replica_skew: u64,
    /// Queue, soft and baseline models with check-dfs or check-simulation: replica symmetry
    /// reduction (states that differ only in the numbering of replicas count once; see the
    /// crate docs). stateright's breadth-first checker offers no symmetry reduction.
    #[arg(long)]
    symmetry: bool,
    /// Queue and soft models with --strict-timestamps: client symmetry, owner ids in the
    /// order clients first start (see the crate docs).
    #[arg(long)]
    client_symmetry: bool,
    /// Queue and soft models: how many queue cells one queue read returns (lock-core's
    /// `poll.queue_read_limit`; 8 by default here).
    #[arg(long)]
    queue_read_limit: Option<u32>,
    /// Queue and soft models: lock-core's `request_timeout`, in ticks (2000 by default);
    /// with --max-clock-skew-ticks 0 the queue floor's margin is this many ticks.
    #[arg(long)]
    request_timeout_ticks: Option<u64>,
    /// Queue and soft models: lock-core's `max_clock_skew`, in ticks (1000 by default).
    #[arg(long)]
    max_clock_skew_ticks: Option<u64>,
    /// Queue and soft models: lock-core's `storage_retries` (3 by default).
    #[arg(long)]
    storage_retries: Option<u32>,
    /// Queue and soft models: how many requests of releasing clients may time out (their
    /// messages stay in flight).
    #[arg(long, default_value_t = 0)]
    release_timeouts: u8,
    /// Queue and soft models, deliberately broken: a seat rule to break.
    #[arg(long, value_enum)]
    seat_fault: Option<BrokenSeats>,
    /// Queue and soft models: clients' clocks follow GlobalTime, which a time-service
    /// replica this many ticks ahead updates once (see --refreshes and --follow-rule).
    #[arg(long)]
    time_service_ahead: Option<u32>,
    /// Time model: lock clients whose clocks follow GlobalTime (readers become 0 when set).
    #[arg(long, default_value_t = 0)]
    followers: usize,
    /// Time model and --time-service-ahead: refreshes (reads of GlobalTime) per follower.
    #[arg(long, default_value_t = 1)]
    refreshes: u8,
    /// Time model: timestamps each follower takes.
    #[arg(long, default_value_t = 2)]
    stamps: u8,
    /// Time model and --time-service-ahead: how followers take timestamps.
    #[arg(long, value_enum, default_value = "follower")]
    follow_rule: Follow,
    /// Stop the check after this many seconds and report what it explored so far.
    #[arg(long)]
    timeout_secs: Option<u64>,
    /// Checker threads.
    #[arg(long, default_value = "1")]
    threads: NonZeroUsize,
    /// Simulation: stop after this many states.
    #[arg(long, default_value = "1000000")]
    states: NonZeroUsize,
    /// Simulation: the random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Explorer: where to listen.
    #[arg(long, default_value = "localhost:3000")]
    address: String,
}

#[derive(Clone, Copy)]
enum How {
    Bfs,
    Dfs,
    Simulation,
    Explore,
}

fn main() {
    let cli = Cli::parse();
    let (how, options) = match cli.command {
        Command::Check(options) => (How::Bfs, options),
        Command::CheckDfs(options) => (How::Dfs, options),
        Command::CheckSimulation(options) => (How::Simulation, options),
        Command::Explore(options) => (How::Explore, options),
    };
    let lock_symmetry: Option<Symmetry<LockState>> = if options.symmetry {
        if matches!(how, How::Bfs | How::Explore) {
            eprintln!("error: --symmetry needs check-dfs or check-simulation");
            exit(2);
        }
        Some(LockState::representative)
    } else {
        None
    };
    if options.symmetry && matches!(options.model, Which::Lease | Which::Time) {
        eprintln!("error: --symmetry is for the queue, soft and baseline models");
        exit(2);
    }
    if options.client_symmetry
        && (!options.strict_timestamps || !matches!(options.model, Which::Queue | Which::Soft))
    {
        eprintln!("error: --client-symmetry needs --strict-timestamps and the queue or soft model");
        exit(2);
    }
    match options.model {
        Which::Queue => run(
            lock_model(&options, Algorithm::Queue, Mode::Mandatory),
            how,
            &options,
            lock_symmetry,
        ),
        Which::Soft => run(
            lock_model(&options, Algorithm::Queue, Mode::Soft),
            how,
            &options,
            lock_symmetry,
        ),
        Which::Baseline => run(
            lock_model(&options, Algorithm::Baseline, Mode::Mandatory),
            how,
            &options,
            lock_symmetry,
        ),
        Which::Lease => {
            let mut model = LeaseModel::new(options.clients, options.replicas);
            model.crashes = options.crashes;
            model.pauses = !options.no_pause;
            model.resource_checks_tokens = !options.resource_ignores_tokens;
            model.store.late_writes = options.late_writes;
            if options.replica_skew > 0 && options.replicas > 0 {
                let mut skews = vec![0; options.replicas];
                skews[options.replicas - 1] =
                    options.replica_skew.saturating_mul(lease::MICROS_PER_TICK);
                model.store.replica_skew_micros = skews;
            }
            if let Some(ticks) = options.ticks {
                model.max_tick = ticks;
            }
            run(model, how, &options, None);
        }
        Which::Time => {
            let skews = (0..options.clients)
                .map(|index| u32::try_from(index).unwrap_or(u32::MAX))
                .collect();
            let mut model = GlobalTimeModel::new(skews, options.replicas);
            model.runs = options.rounds;
            model.crashes = options.crashes;
            model.store.read_repair = options.read_repair;
            model.store.late_writes = options.late_writes;
            if options.followers > 0 {
                model.readers = 0;
                model.followers = options.followers;
                model.refreshes = options.refreshes;
                model.stamps = options.stamps;
                model.follow_rule = follow_rule(options.follow_rule);
            }
            if let Some(ticks) = options.ticks {
                model.max_tick = ticks;
            }
            run(model, how, &options, None);
        }
    }
}

fn lock_model(options: &Options, algorithm: Algorithm, mode: Mode) -> LockModel {
    let mut model = LockModel::new(algorithm, mode, options.clients, options.replicas);
    model.rounds = options.rounds;
    model.crashes = options.crashes;
    model.strict_timestamps = options.strict_timestamps;
    model.bypass_bound = options.bypass_bound;
    model.holders_release = !options.no_release;
    model.store.late_writes = options.late_writes;
    model.client_symmetry = options.client_symmetry;
    let mut config = lock_config(
        algorithm,
        !options.no_fencing && algorithm != Algorithm::Baseline,
    );
    if let Some(limit) = options.queue_read_limit {
        config.poll.queue_read_limit = limit;
    }
    config.fast_path = options.fast_path;
    model.fast_path_always = options.fast_path_always;
    if options.linger {
        config.linger = MODEL_LINGER;
    }
    model.retake_fault = options
        .retake_ignores_queue
        .then_some(RetakeFault::IgnoreQueue);
    let tick = Duration::from_micros(lock_model::lock::MICROS_PER_TICK);
    if let Some(ticks) = options.request_timeout_ticks {
        config.request_timeout = tick.saturating_mul(u32::try_from(ticks).unwrap_or(u32::MAX));
    }
    if let Some(ticks) = options.max_clock_skew_ticks {
        config.max_clock_skew = tick.saturating_mul(u32::try_from(ticks).unwrap_or(u32::MAX));
    }
    if let Some(retries) = options.storage_retries {
        config.storage_retries = retries;
    }
    model.release_timeouts = options.release_timeouts;
    model.time_service = options.time_service_ahead.map(|ahead_ticks| TimeService {
        ahead_ticks,
        refreshes: options.refreshes,
        rule: follow_rule(options.follow_rule),
    });
    model.seat_fault = options.seat_fault.map(|fault| match fault {
        BrokenSeats::SharedPrefix => SeatFault::SharedPrefix,
        BrokenSeats::NoTimestampFloor => SeatFault::NoTimestampFloor,
        BrokenSeats::FloorWithoutMargin => SeatFault::FloorWithoutMargin,
    });
    model.config = match config.validate() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            exit(2);
        }
    };
    if options.fence_read_one {
        model.store.one_replica_reads.push(RowKind::Fence);
    }
    if options.liveness {
        model.time = TimeRule::Urgent {
            hold_ticks: options.hold_ticks,
        };
        model.timeouts = if options.timeouts_anytime {
            TimeoutRule::Anytime
        } else {
            TimeoutRule::QuietNetwork
        };
    }
    if let Some(ticks) = options.ticks {
        model.max_tick = ticks;
    }
    model
}

fn follow_rule(rule: Follow) -> FollowRule {
    match rule {
        Follow::Follower => FollowRule::Follower,
        Follow::LocalClock => FollowRule::LocalClock,
        Follow::LatestRead => FollowRule::LatestRead,
    }
}

/// A representative function for stateright's symmetry reduction.
type Symmetry<State> = fn(&State) -> State;

/// The process's peak resident set size as the kernel reports it (`VmHWM`), where there is
/// a `/proc`.
fn peak_memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_owned())
}

/// The address to serve the Explorer on, checked by binding it once (stateright's server
/// panics if it cannot bind); `None`, after saying why, if it is unusable.
fn listen_address(address: &str) -> Option<SocketAddr> {
    let resolved = match address.to_socket_addrs() {
        Ok(mut addresses) => addresses.next(),
        Err(error) => {
            eprintln!("error: cannot resolve --address {address}: {error}");
            return None;
        }
    };
    let Some(resolved) = resolved else {
        eprintln!("error: --address {address} resolves to no address");
        return None;
    };
    if let Err(error) = TcpListener::bind(resolved) {
        eprintln!("error: cannot listen on {resolved}: {error}");
        return None;
    }
    Some(resolved)
}

fn run<M>(model: M, how: How, options: &Options, representative: Option<Symmetry<M::State>>)
where
    M: Model + Describe + Clone + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let mut builder: CheckerBuilder<M> = model.clone().checker().threads(options.threads.get());
    if let Some(representative) = representative {
        builder = builder.symmetry_fn(representative);
    }
    if let Some(seconds) = options.timeout_secs {
        builder = builder.timeout(Duration::from_secs(seconds));
    }
    let started = Instant::now();
    let mut stdout = std::io::stdout();
    let mut reporter = WriteReporter::new(&mut stdout);
    let discoveries = match how {
        How::Bfs => builder.spawn_bfs().report(&mut reporter).discoveries(),
        How::Dfs => builder.spawn_dfs().report(&mut reporter).discoveries(),
        How::Simulation => builder
            .target_state_count(options.states.get())
            .spawn_simulation(options.seed, UniformChooser)
            .report(&mut reporter)
            .discoveries(),
        How::Explore => {
            let Some(address) = listen_address(&options.address) else {
                exit(2);
            };
            println!("Explorer on http://{address}");
            builder.serve(address);
            return;
        }
    };
    println!("Finished in {:.1?}.", started.elapsed());
    if let Some(peak) = peak_memory() {
        println!("Peak resident memory: {peak}.");
    }
    for (name, path) in discoveries {
        println!(
            "\nTrace for {name:?}:\n{}",
            render_discovery(&model, name, path)
        );
    }
}
