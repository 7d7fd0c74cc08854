//! The fair lock in five minutes: two services share an account, and the lock, its lost
//! signal and its fencing tokens keep the account right.
//!
//! ```text
//! cargo run -p lock-examples --bin quickstart                  # on the embedded simulator
//! cargo run -p lock-examples --bin quickstart -- --local       # on a local Apache Cassandra
//! cargo run -p lock-examples --bin quickstart -- --cassandra 10.0.0.1:9042,10.0.0.2:9042
//! ```
//!
//! `--local` starts a one-node Apache Cassandra 5.0 on this machine from Maven's jars (it
//! needs `java`, and `mvn` the first time) and stops it at the end. `--cassandra` uses
//! your cluster, in the keyspace `lock_examples` (created with replication factor
//! `--replication-factor`, 1 by default, if it is missing).
//!
//! The story, in three acts:
//!
//! 1. **The lock.** Services A and B withdraw from one account in turns. Each holds the
//!    lock while it reads and writes the balance, and hands the ledger its fencing token.
//! 2. **The lost signal.** A holds the lock; an operator force-releases it (what `lockctl
//!    force-release` does). A's guard learns it at its next renewal: `lost()` completes.
//! 3. **Fencing.** B takes the lock and writes. A, paused while it still held its old
//!    token, writes late: the ledger refuses the stale token.

use std::error::Error;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use fair_lock::Locker;
use lock_core::machine::FencingToken;
use lock_core::{Fraction, LockConfig, LockStorage};
use lock_local_cluster::{LocalCluster, LocalClusterConfig, check_tools};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage, Replication, SchemaConfig};
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster};

/// The lock every act takes: one per account.
const ACCOUNT: &str = "account-42";
/// The keyspace on Cassandra.
const KEYSPACE: &str = "lock_examples";

/// Where the example runs.
#[derive(Debug)]
enum Target {
    /// The embedded simulated cluster (three replicas, LAN latency).
    Simulator,
    /// A one-node Cassandra started for the run.
    Local,
    /// A cluster at these contact points, with this replication factor for the keyspace.
    Cassandra(Vec<String>, u32),
}

const USAGE: &str =
    "usage: quickstart [--local | --cassandra HOST[:PORT],... [--replication-factor N]]";

fn parse(args: &[String]) -> Result<Target, String> {
    let mut target = Target::Simulator;
    let mut replication_factor = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--local" => target = Target::Local,
            "--cassandra" => {
                let points = args
                    .next()
                    .ok_or("--cassandra needs contact points, e.g. 127.0.0.1:9042")?;
                let points: Vec<String> = points
                    .split(',')
                    .map(str::trim)
                    .filter(|point| !point.is_empty())
                    .map(str::to_owned)
                    .collect();
                if points.is_empty() {
                    return Err("--cassandra needs at least one contact point".into());
                }
                target = Target::Cassandra(points, 1);
            }
            "--replication-factor" => {
                let value = args.next().ok_or("--replication-factor needs a number")?;
                let factor: u32 = value.parse().map_err(|_| {
                    format!("--replication-factor must be a whole number from 1, not {value:?}")
                })?;
                if factor == 0 {
                    return Err("--replication-factor must be at least 1".into());
                }
                replication_factor = Some(factor);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    match (target, replication_factor) {
        (Target::Cassandra(points, _), Some(factor)) => Ok(Target::Cassandra(points, factor)),
        (_, Some(_)) => Err("--replication-factor applies with --cassandra only".into()),
        (target, None) => Ok(target),
    }
}

/// The account as the bank's ledger keeps it. The ledger is the resource the lock guards,
/// and it checks fencing tokens: a write with a token older than one it has seen comes
/// from a holder that has lost the lock, and is refused.
#[derive(Debug)]
struct Ledger {
    state: Mutex<(i64, Option<FencingToken>)>,
}

impl Ledger {
    fn new(balance: i64) -> Self {
        Ledger {
            state: Mutex::new((balance, None)),
        }
    }

    fn balance(&self) -> i64 {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// Sets the balance, unless `token` is older than the newest token seen.
    fn write(&self, balance: i64, token: FencingToken) -> Result<(), FencingToken> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(newest) = state.1
            && token < newest
        {
            return Err(newest);
        }
        *state = (balance, Some(token));
        Ok(())
    }
}

/// The lock's settings: the defaults, with a shorter lease renewed every quarter of it, so
/// that act 2's holder learns of its loss within about a second and a half (each renewal
/// reads its cell back).
fn lock_config() -> LockConfig {
    LockConfig {
        lease_ttl: Duration::from_secs(6),
        renew_fraction: Fraction::new(1, 4),
        ..LockConfig::default()
    }
}

/// Everything the example prints, as it goes.
#[derive(Default)]
struct Story(String);

impl Story {
    fn say(&mut self, line: impl AsRef<str>) {
        println!("{}", line.as_ref());
        let _ = writeln!(self.0, "{}", line.as_ref());
    }
}

/// Withdraws `amount` from the ledger under the lock: read, check, write with the token.
async fn withdraw<S: LockStorage>(
    service: &str,
    locker: &Locker<S>,
    ledger: &Ledger,
    amount: i64,
    story: &mut Story,
) -> Result<(), Box<dyn Error>> {
    let guard = locker.lock(ACCOUNT).await?;
    let token = guard
        .fencing_token()
        .ok_or("the lock gives fencing tokens by default")?;
    let balance = ledger.balance();
    let result = ledger.write(balance - amount, token);
    story.say(format!(
        "  {service} holds {ACCOUNT} (token {token}, waited {:.1} ms): balance {balance} -> {}{}",
        guard.wait().as_secs_f64() * 1e3,
        balance - amount,
        if result.is_ok() { "" } else { " REFUSED" }
    ));
    guard.release().await?;
    Ok(())
}

/// The three acts on two services' lockers.
async fn run<S: LockStorage>(
    service_a: Locker<S>,
    service_b: Locker<S>,
    story: &mut Story,
) -> Result<(), Box<dyn Error>> {
    let ledger = Ledger::new(100);

    story.say("1. The lock: services A and B withdraw 10 each, three times, in turns.");
    for _ in 0..3 {
        withdraw("A", &service_a, &ledger, 10, story).await?;
        withdraw("B", &service_b, &ledger, 10, story).await?;
    }
    story.say(format!("  balance now {} (100 - 6 x 10)", ledger.balance()));

    story.say("2. The lost signal: A holds the lock; an operator force-releases it.");
    let held = service_a.lock(ACCOUNT).await?;
    let old_token = held
        .fencing_token()
        .ok_or("the lock gives fencing tokens by default")?;
    let balance_seen = ledger.balance();
    story.say(format!(
        "  A holds {ACCOUNT} (token {old_token}) and reads balance {balance_seen}"
    ));
    let removed = service_b.force_release(ACCOUNT, held.owner_id()).await?;
    story.say(format!(
        "  operator: force-released A's cells ({})",
        if removed { "removed" } else { "none found" }
    ));
    let asked = Instant::now();
    // Bounded, so that a lock that never reports the loss fails the example instead of
    // hanging it.
    tokio::time::timeout(Duration::from_secs(30), held.lost())
        .await
        .map_err(|_| "A's guard did not report the loss within 30 s")?;
    story.say(format!(
        "  A: lost() completed {:.1} s later, status {:?}: A must stop touching the account",
        asked.elapsed().as_secs_f64(),
        held.status()
    ));

    story.say("3. Fencing: B takes the lock and withdraws; then A, which was paused, writes late.");
    withdraw("B", &service_b, &ledger, 10, story).await?;
    match ledger.write(balance_seen - 10, old_token) {
        Ok(()) => return Err("the ledger took a stale token: fencing failed".into()),
        Err(newest) => story.say(format!(
            "  A writes balance {} with token {old_token}: refused, the ledger has seen token \
             {newest}",
            balance_seen - 10
        )),
    }
    // A's release finds nothing left to delete and reports the lost lease.
    if let Err(error) = held.release().await {
        story.say(format!("  A's release: {error}"));
    }
    story.say(format!("  balance now {} (100 - 7 x 10)", ledger.balance()));
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime, Box<dyn Error>> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// The story on two lockers of one Cassandra cluster.
fn on_cassandra(points: &[String], replication_factor: u32) -> Result<(), Box<dyn Error>> {
    let config = CassandraConfig {
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor,
        })),
        ..CassandraConfig::new(points.iter().map(String::as_str), KEYSPACE)
    };
    let lock = lock_config();
    config.check_lock_config(&lock)?;
    runtime()?.block_on(async {
        // One session is enough for both services here; on two machines each would
        // connect on its own.
        let storage = CassandraStorage::connect(config).await?;
        // The table may have been created before, by someone else: check its own gc_grace.
        storage.check_lock_config(&lock).await?;
        let service_a = Locker::new(storage.clone(), lock.clone())?;
        let service_b = Locker::new(storage, lock)?;
        run(service_a, service_b, &mut Story::default()).await
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = match parse(&args) {
        Ok(target) => target,
        Err(problem) if problem.is_empty() => {
            println!("{USAGE}");
            return Ok(());
        }
        Err(problem) => {
            eprintln!("quickstart: {problem}\n{USAGE}");
            std::process::exit(2);
        }
    };
    match target {
        Target::Simulator => {
            println!("On the embedded simulator: three replicas, QUORUM, LAN latency.\n");
            let cluster = MemoryCluster::new(ClusterConfig {
                latency: Latency::Uniform {
                    min: Duration::from_micros(300),
                    max: Duration::from_micros(700),
                },
                ..ClusterConfig::default()
            })?;
            let lock = lock_config();
            runtime()?.block_on(async {
                let service_a = Locker::new(cluster.client(), lock.clone())?;
                let service_b = Locker::new(cluster.client(), lock)?;
                run(service_a, service_b, &mut Story::default()).await
            })
        }
        Target::Local => {
            let config = LocalClusterConfig::new(1);
            check_tools(&config)?;
            println!("Starting a one-node Apache Cassandra on this machine (about a minute)...");
            let cluster = LocalCluster::start(config)?;
            let points = cluster.contact_points();
            println!("Cassandra is up at {}.\n", points.join(","));
            let result = on_cassandra(&points, 1);
            drop(cluster);
            println!("\nThe local Cassandra is stopped and its files removed.");
            result
        }
        Target::Cassandra(points, replication_factor) => {
            println!("On Cassandra at {}.\n", points.join(","));
            on_cassandra(&points, replication_factor)
        }
    }
}
