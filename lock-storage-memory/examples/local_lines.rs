//! Many waiters in one process against many processes with one waiter each.
//!
//! Tasks of one `Locker` (and its clones) that want the same lock wait for it in the
//! process, in order, and only the first of them stands in the distributed queue (a *local
//! line*; lock-core's `driver/local_line.rs`). This example measures what that buys and
//! checks the policy that keeps a busy process from starving the others: the next task of
//! a line enqueues afresh, behind every owner of another process that enqueued meanwhile.
//!
//! Three runs on one simulated 3-replica cluster with a LAN-like latency (log-normal, median
//! 250 µs and p99 1 ms one way), in virtual time, each for 10 simulated seconds of tasks
//! that take one lock again and again with no critical section:
//!
//! * 50 processes with 1 task each;
//! * 1 process with 50 tasks;
//! * 1 busy process with 10 tasks, next to 10 processes with 1 task each.
//!
//! For each it prints the acquisitions, the storage requests per acquisition (release
//! included) and, per process, the share of the acquisitions; with more than one process,
//! Jain's fairness index over processes `(Σx)² / (n·Σx²)` (1 = equal shares).
//!
//! ```text
//! cargo run --release -p lock-storage-memory --example local_lines
//! ```

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{Clock, LockConfig, Locker};
use lock_storage_memory::{ClusterConfig, Latency, MemoryClient, MemoryCluster};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long, in simulated time, the tasks of one run keep taking the lock.
const RUN_TIME: Duration = Duration::from_secs(10);
/// The one lock every task wants.
const LOCK_ID: &str = "local-lines";

/// One run's processes: how many tasks each has.
struct Scenario {
    name: &'static str,
    tasks_per_process: Vec<usize>,
}

/// What one run measured.
struct Outcome {
    acquisitions_per_process: Vec<u64>,
    storage_requests: u64,
}

async fn run(scenario: &Scenario, seed: u64) -> Result<Outcome, Box<dyn Error>> {
    let cluster = MemoryCluster::new(ClusterConfig {
        latency: Latency::LogNormal {
            median: Duration::from_micros(250),
            p99: Duration::from_millis(1),
        },
        seed,
        ..ClusterConfig::default()
    })?;
    let before = cluster.counters().requests.total();
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for (process, &task_count) in scenario.tasks_per_process.iter().enumerate() {
        let client: MemoryClient = cluster.client();
        let clock: Arc<dyn Clock> = Arc::new(client.clock());
        let locker = Locker::builder(client)
            .config(LockConfig {
                fencing: false,
                ..LockConfig::default()
            })
            .clock(clock)
            .seed(seed.wrapping_add(process as u64 + 1))
            .build()?;
        for _ in 0..task_count {
            let locker = locker.clone();
            tasks.spawn(async move {
                let mut acquisitions = 0u64;
                while started.elapsed() < RUN_TIME {
                    let guard = locker.lock(LOCK_ID).await?;
                    guard.release().await?;
                    acquisitions += 1;
                }
                Ok::<_, lock_core::Error>((process, acquisitions))
            });
        }
    }
    let mut acquisitions_per_process = vec![0; scenario.tasks_per_process.len()];
    while let Some(joined) = tasks.join_next().await {
        let (process, acquisitions) = joined??;
        acquisitions_per_process[process] += acquisitions;
    }
    Ok(Outcome {
        acquisitions_per_process,
        storage_requests: cluster.counters().requests.total() - before,
    })
}

/// Jain's fairness index of `shares`: 1 when all are equal, `1/n` when one has everything.
fn jain(shares: &[u64]) -> f64 {
    let sum: f64 = shares.iter().map(|&share| share as f64).sum();
    let squares: f64 = shares.iter().map(|&share| (share as f64).powi(2)).sum();
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (shares.len() as f64 * squares)
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn Error>> {
    let scenarios = [
        Scenario {
            name: "50 processes x 1 task",
            tasks_per_process: vec![1; 50],
        },
        Scenario {
            name: "1 process x 50 tasks",
            tasks_per_process: vec![50],
        },
        Scenario {
            name: "1 process x 10 tasks + 10 processes x 1 task",
            tasks_per_process: std::iter::once(10).chain([1; 10]).collect(),
        },
    ];
    println!(
        "{:<46} {:>12} {:>8} {:>14} {:>9}",
        "scenario", "acquisitions", "req/acq", "first's share", "Jain"
    );
    for (index, scenario) in scenarios.iter().enumerate() {
        let outcome = run(scenario, 7 + index as u64).await?;
        let total: u64 = outcome.acquisitions_per_process.iter().sum();
        let first_share = outcome.acquisitions_per_process[0] as f64 / total.max(1) as f64;
        let fairness = if outcome.acquisitions_per_process.len() > 1 {
            format!("{:.3}", jain(&outcome.acquisitions_per_process))
        } else {
            "-".to_owned()
        };
        println!(
            "{:<46} {:>12} {:>8.2} {:>13.1}% {:>9}",
            scenario.name,
            total,
            outcome.storage_requests as f64 / total.max(1) as f64,
            first_share * 100.0,
            fairness
        );
    }
    Ok(())
}
