//! The command line, and what each command does with it.

use std::ops::ControlFlow;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use clap::{Parser, Subcommand};
use fair_lock::Locker;
use lock_core::{LockConfig, LockId, OwnerId};
use lock_local_cluster::{CassandraVersion, LocalClusterConfig, PaxosVariant};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};

use crate::Error;
use crate::admin::{self, Action};
use crate::connection::{Connection, Target};
use crate::demo::{self, Simulation};
use crate::watch::{self, End, Plan};

/// Inspect, watch and force-release the locks of the fair Cassandra lock, and run a local
/// Apache Cassandra cluster to try it on.
///
/// Without `--cassandra`, `inspect`, `force-release` and `watch` run a demonstration on a
/// simulated cluster inside lockctl (one owner holds the lock, `--waiters` wait) and say
/// so. The password of `--username` is read from the environment variable
/// `LOCKCTL_CASSANDRA_PASSWORD`. Exit status: 0 on success, 1 when the command failed (the
/// message says why), 2 for a usage error.
#[derive(Debug, Parser)]
#[command(name = "lockctl", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// lockctl's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a lock's holder, its queue in order (with ages), stale cells and fence.
    Inspect {
        /// The lock id, as the application gives it to its locker.
        #[arg(value_parser = parse_lock_id)]
        lock_id: LockId,
        /// Where the lock lives.
        #[command(flatten)]
        connection: Connection,
    },
    /// Delete every cell of a stuck owner, so that the next owner need not wait for them to
    /// expire.
    ///
    /// Prints the lock first, and logs the release on standard error: time, operator, lock,
    /// owner, outcome and where the lock lives, on one line tagged `lockctl force-release:`.
    ForceRelease {
        /// The lock id.
        #[arg(value_parser = parse_lock_id)]
        lock_id: LockId,
        /// The owner id, as `inspect` prints it.
        #[arg(long, value_parser = parse_owner_id)]
        owner: OwnerId,
        /// Where the lock lives.
        #[command(flatten)]
        connection: Connection,
    },
    /// A live view of a lock's holder and queue, until Ctrl-C or `--count` inspections.
    ///
    /// Inspects the lock every `--every` and prints the whole report first, then one line
    /// per inspection, starting with the time: what changed (`holder A -> B, queue 3
    /// waiting`), or "unchanged". After every `--full-every` change lines the next change
    /// prints the whole report again below its line. A failed inspection (a timeout, a node
    /// down) is printed, the watch goes on, and the next report is whole.
    Watch {
        /// The lock id.
        #[arg(value_parser = parse_lock_id)]
        lock_id: LockId,
        /// How often to inspect: a positive duration of at most an hour (`500ms`, `2s`).
        #[arg(
            long,
            default_value = "1s",
            allow_hyphen_values = true,
            value_parser = watch::parse_every
        )]
        every: Duration,
        /// Stop after this many inspections (failed ones included) instead of at Ctrl-C.
        #[arg(long, value_parser = RangedU64ValueParser::<u64>::new().range(1..))]
        count: Option<u64>,
        /// Print the whole report again with the change that follows this many change
        /// lines (1 prints it with every change).
        #[arg(
            long,
            value_name = "N",
            default_value_t = watch::FULL_EVERY,
            value_parser = RangedU64ValueParser::<u64>::new().range(1..)
        )]
        full_every: u64,
        /// Where the lock lives.
        #[command(flatten)]
        connection: Connection,
    },
    /// Run a real Apache Cassandra cluster on this machine (`start`), or stop every one
    /// (`stop`).
    #[command(subcommand)]
    Cluster(ClusterCommand),
}

/// `lockctl cluster`: a local Apache Cassandra cluster for trying the lock by hand.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start a local cluster (one JVM per node on 127.0.S.1-3, CQL port 9042), print its
    /// contact points, and keep it running in the foreground until Ctrl-C or until
    /// `lockctl cluster stop` (in another terminal) stops it. Needs `java` 17, `mvn` for
    /// the first fetch of the jars, and for Cassandra 4.x `python3 -m pip` for the first
    /// fetch of the Java 11 it runs on.
    Start {
        /// How many nodes: 1 or 3.
        #[arg(long, default_value = "3", value_parser = crate::cluster::parse_node_count)]
        nodes: usize,
        /// Maximum JVM heap of each node, in MiB (at least 256).
        #[arg(long, default_value_t = 512)]
        heap_mib: u32,
        /// Data centres: 1, or 2 with 3 nodes (nodes 1 and 2 in `dc1`, node 3 in `dc2`,
        /// with `GossipingPropertyFileSnitch`).
        #[arg(long, default_value_t = 1)]
        data_centers: usize,
        /// Require a user name and password (`PasswordAuthenticator`, starting with the
        /// superuser `cassandra`, password `cassandra`) and check permissions
        /// (`CassandraAuthorizer`). Log in with `--username` and
        /// `LOCKCTL_CASSANDRA_PASSWORD`.
        #[arg(long)]
        password_authentication: bool,
        /// The Paxos variant of lightweight transactions (`paxos_variant` in every node's
        /// `cassandra.yaml`): v1 (Cassandra 5.0's default) or v2.
        #[arg(long, default_value = "v1")]
        paxos_variant: PaxosVariant,
        /// The Apache Cassandra release: 4.0.x or 4.1.x (on a Java 11 fetched into the jar
        /// cache) or 5.0.x (on the system's Java 17); a line alone (4.0, 4.1, 5.0) is the
        /// release it was tested on (4.0.19, 4.1.10, 5.0.6).
        #[arg(long, default_value = "5.0.6")]
        cassandra_version: CassandraVersion,
    },
    /// Stop every local cluster on this machine (started by `cluster start`, by lock-bench's
    /// `--cassandra local` or by the workspace's tests) and say how many.
    Stop,
}

fn parse_lock_id(text: &str) -> Result<LockId, lock_core::Error> {
    LockId::new(text)
}

fn parse_owner_id(text: &str) -> Result<OwnerId, lock_core::Error> {
    OwnerId::new(text)
}

/// Runs the command line.
pub fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Inspect {
            lock_id,
            connection,
        } => act(&lock_id, &connection, &Action::Inspect),
        Command::ForceRelease {
            lock_id,
            owner,
            connection,
        } => act(&lock_id, &connection, &Action::ForceRelease(owner)),
        Command::Watch {
            lock_id,
            every,
            count,
            full_every,
            connection,
        } => watch(
            &lock_id,
            &connection,
            Plan {
                every,
                count,
                full_every,
            },
        ),
        Command::Cluster(ClusterCommand::Start {
            nodes,
            heap_mib,
            data_centers,
            password_authentication,
            paxos_variant,
            cassandra_version,
        }) => crate::cluster::start(LocalClusterConfig {
            heap_mib,
            data_centers,
            password_authentication,
            paxos_variant,
            version: Some(cassandra_version),
            ..LocalClusterConfig::new(nodes)
        }),
        Command::Cluster(ClusterCommand::Stop) => crate::cluster::stop(),
    }
}

/// The runtimes the commands run on.
#[derive(Clone, Copy)]
enum Runtime {
    /// Tokio's paused clock: the demonstration's waits take no wall time (its `watch`
    /// waits for the wall clock between inspections itself).
    Paused,
    /// Two worker threads for the Cassandra driver.
    Cassandra,
}

fn runtime(kind: Runtime) -> Result<tokio::runtime::Runtime, Error> {
    match kind {
        Runtime::Paused => tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build(),
        Runtime::Cassandra => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    }
    .map_err(|source| Error::Io {
        what: "cannot start the async runtime",
        source,
    })
}

/// A locker on the cluster `config` names, with the default lock configuration (which
/// [`Connection::target`] checked `config` against).
async fn connect(config: CassandraConfig) -> Result<Locker<CassandraStorage>, Error> {
    let storage = CassandraStorage::connect(config).await?;
    Ok(Locker::new(storage, LockConfig::default())?)
}

/// `inspect` and `force-release`.
fn act(lock_id: &LockId, connection: &Connection, action: &Action) -> Result<(), Error> {
    let target = connection.target()?;
    let backend = target.describe();
    let out = match target {
        Target::Simulated(demo) => {
            runtime(Runtime::Paused)?.block_on(demo::act(lock_id, demo, action, &backend))?
        }
        Target::Cassandra(config) => runtime(Runtime::Cassandra)?.block_on(async {
            let locker = connect(*config).await?;
            admin::act(&locker, lock_id, action, &backend).await
        })?,
    };
    crate::emit(&out)
}

/// `watch`.
fn watch(lock_id: &LockId, connection: &Connection, plan: Plan) -> Result<(), Error> {
    let target = connection.target()?;
    let until = match plan.count {
        Some(count) => format!("for {count} inspection(s)"),
        None => "until Ctrl-C".to_owned(),
    };
    let header = format!(
        "Watching {lock_id} on {}, every {}, {until}.\n",
        target.describe(),
        humantime::format_duration(plan.every)
    );
    let interrupted = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler: Ctrl-C keeps its default action and ends the process.
            std::future::pending::<()>().await;
        }
    };
    let end = match target {
        Target::Simulated(demo) => runtime(Runtime::Paused)?.block_on(async {
            let simulation = Simulation::start(lock_id, demo).await?;
            let what_happens = if demo.crashed {
                format!(
                    "Watch its cells turn STALE about {:.0} s after its last write, and the \
                     first waiter take the lock once they expire (lease TTL {} s).\n",
                    simulation.stale_after()?.as_secs_f64(),
                    simulation.lease_ttl().as_secs()
                )
            } else {
                "The holder keeps the lock while the watch runs.\n".to_owned()
            };
            crate::emit(&format!("{}{what_happens}\n{header}", simulation.intro()))?;
            // The simulation runs on the paused clock, frozen while the watch waits for the
            // wall clock between inspections: its output is the same run after run, and
            // the same at any pace.
            let ctrl_c = ctrl_c_listener();
            let pause = || match ctrl_c.recv_timeout(plan.every) {
                Ok(()) => ControlFlow::Break(()),
                Err(RecvTimeoutError::Timeout) => ControlFlow::Continue(()),
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(plan.every);
                    ControlFlow::Continue(())
                }
            };
            watch::watch(
                simulation.admin(),
                lock_id,
                plan,
                std::future::pending(),
                pause,
                &mut std::io::stdout(),
            )
            .await
        })?,
        Target::Cassandra(config) => runtime(Runtime::Cassandra)?.block_on(async {
            let locker = connect(*config).await?;
            crate::emit(&header)?;
            let pause = || ControlFlow::Continue(());
            watch::watch(
                &locker,
                lock_id,
                plan,
                interrupted,
                pause,
                &mut std::io::stdout(),
            )
            .await
        })?,
    };
    if let End::Stopped(inspections) = end {
        crate::emit(&format!(
            "stopped by Ctrl-C after {inspections} inspection(s)\n"
        ))?;
    }
    Ok(())
}

/// A channel that receives `()` when Ctrl-C is pressed, from a thread of its own (with a
/// runtime of its own, on the wall clock). If the handler cannot be installed, the channel
/// is closed and Ctrl-C keeps its default action, ending the process.
fn ctrl_c_listener() -> std::sync::mpsc::Receiver<()> {
    let (pressed, listener) = std::sync::mpsc::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    if let Ok(runtime) = runtime {
        std::thread::spawn(move || {
            if runtime.block_on(tokio::signal::ctrl_c()).is_ok() {
                let _ = pressed.send(());
            }
        });
    }
    listener
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(arguments: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lockctl").chain(arguments.iter().copied()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_commands_parse_with_their_defaults() {
        let Command::Watch {
            lock_id,
            every,
            count,
            full_every,
            connection,
        } = parse(&["watch", "account:42"]).unwrap().command
        else {
            panic!("not watch");
        };
        assert_eq!(lock_id.as_str(), "account:42");
        assert_eq!(
            (every, count, full_every),
            (Duration::from_secs(1), None, watch::FULL_EVERY)
        );
        assert_eq!(connection.cassandra, None);
        assert_eq!(connection.keyspace, None);
        assert_eq!((connection.waiters, connection.crashed), (3, false));
        let Command::ForceRelease {
            owner, connection, ..
        } = parse(&[
            "force-release",
            "account:42",
            "--owner",
            "web-1",
            "--cassandra",
            "10.0.0.1,10.0.0.2:9042",
            "--keyspace",
            "locks",
        ])
        .unwrap()
        .command
        else {
            panic!("not force-release");
        };
        assert_eq!(owner.as_str(), "web-1");
        assert_eq!(
            connection.cassandra.unwrap_or_default(),
            ["10.0.0.1", "10.0.0.2:9042"]
        );
        assert_eq!(connection.keyspace.as_deref(), Some("locks"));
        let Command::Cluster(ClusterCommand::Start {
            nodes,
            heap_mib,
            data_centers,
            password_authentication,
            paxos_variant,
            cassandra_version,
        }) = parse(&["cluster", "start"]).unwrap().command
        else {
            panic!("not cluster start");
        };
        assert_eq!(
            (nodes, heap_mib, data_centers, password_authentication),
            (3, 512, 1, false)
        );
        assert_eq!(paxos_variant, PaxosVariant::V1);
        assert_eq!(cassandra_version, CassandraVersion::DEFAULT);
        let Command::Cluster(ClusterCommand::Start {
            cassandra_version, ..
        }) = parse(&["cluster", "start", "--cassandra-version", "4.1"])
            .unwrap()
            .command
        else {
            panic!("not cluster start");
        };
        assert_eq!(cassandra_version.to_string(), "4.1.10");
        let refused = parse(&["cluster", "start", "--cassandra-version", "3.11.17"]).unwrap_err();
        assert!(refused.to_string().contains("4.0.x"), "{refused}");
    }

    #[test]
    fn options_for_the_other_mode_are_usage_errors() {
        for (arguments, word) in [
            (
                &["inspect", "x", "--crashed", "--cassandra", "10.0.0.1"][..],
                "--crashed",
            ),
            (
                &["inspect", "x", "--waiters", "5", "--cassandra", "10.0.0.1"],
                "--waiters",
            ),
            (&["inspect", "x", "--keyspace", "locks"], "--cassandra"),
            // No default keyspace: the one lock-bench creates is a benchmark's, and a wrong
            // keyspace would show the lock free.
            (&["inspect", "x", "--cassandra", "10.0.0.1"], "--keyspace"),
            (&["watch", "x", "--cassandra", "10.0.0.1"], "--keyspace"),
            (
                &[
                    "force-release",
                    "x",
                    "--owner",
                    "o",
                    "--cassandra",
                    "10.0.0.1",
                ],
                "--keyspace",
            ),
            (&["watch", "x", "--full-every", "0"], "--full-every"),
            (&["watch", "x", "--username", "ops"], "--cassandra"),
            (&["watch", "x", "--local-dc", "dc1"], "--cassandra"),
            (&["watch", "x", "--count", "0"], "--count"),
            (&["watch", "x", "--every", "0s"], "--every"),
            (&["force-release", "x"], "--owner"),
            (
                &["force-release", "x", "--owner", "not an owner"],
                "--owner",
            ),
        ] {
            let error = parse(arguments).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{arguments:?}");
            let message = error.to_string();
            assert!(message.contains(word), "{arguments:?}: {message}");
        }
    }
}
