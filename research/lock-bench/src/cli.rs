//! The command line: the experiment by default, and the other measurements as commands.

use std::fmt::Write as _;

use clap::{Parser, Subcommand};

use crate::BoxError;
use crate::experiment::Variant;
use crate::experiment::{self, Backend};
use crate::options::{Fencing, RunArgs, SimulationDefaults, create_out_dir, runtime};
use crate::report::{Report, SettingsReport};

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
    Tombstones(crate::tombstones::TombstoneArgs),
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
    /// A hot lock on a local cluster over time, with default settings, while each node is
    /// killed and restarted in turn: per window acquisitions, queue-read latency, errors,
    /// each node's queue partition, heap and new log warnings.
    Soak(crate::soak::SoakArgs),
}

/// Runs the command line.
pub fn main(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        None => run_experiment(&cli.run),
        Some(Command::Tombstones(args)) => crate::tombstones::run(&args),
        Some(Command::CompareLwt(args)) => crate::lwt_compare::run(&args),
        Some(Command::Scale(args)) => crate::scale::run(&args),
        Some(Command::WorkQueue(args)) => crate::work_queue::run(&args),
        Some(Command::LocalLines(args)) => crate::local_lines::run(&args),
        Some(Command::ClusterCost(args)) => crate::cluster_cost::run(&args),
        Some(Command::ManyLocks(args)) => crate::many_locks::run(&args),
        Some(Command::Soak(args)) => crate::soak::run(&args),
    }
}

fn run_experiment(args: &RunArgs) -> Result<(), BoxError> {
    if crate::options::is_local(&args.backend.cassandra) {
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
    use std::time::Duration;

    use super::*;
    use crate::options::PASSWORD_VARIABLE;
    use crate::units::LAN;
    use clap::CommandFactory;
    use lock_core::LockConfig;

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
    fn soak_defaults_are_the_long_run_with_default_settings() {
        let cli = parse(&["soak"]).unwrap();
        let Some(Command::Soak(args)) = cli.command else {
            panic!("not the soak command");
        };
        let plan = args.plan().unwrap();
        assert_eq!(plan.duration, Duration::from_secs(45 * 60));
        assert_eq!(plan.restart_every, Duration::from_secs(10 * 60));
        assert_eq!(plan.window, Duration::from_secs(5 * 60));
        assert_eq!((args.processes, args.local_nodes), (5, 3));
        assert_eq!(args.critical_section, Duration::ZERO);
        let short = parse(&[
            "soak",
            "--duration",
            "6m",
            "--restart-every",
            "2m",
            "--window",
            "2m",
        ])
        .unwrap();
        let Some(Command::Soak(short)) = short.command else {
            panic!("not the soak command");
        };
        assert_eq!(short.plan().unwrap().restarts(3).len(), 2);
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
