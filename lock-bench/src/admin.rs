//! The operator commands: `inspect` prints a lock's holder, queue, stale cells and fence;
//! `force-release` removes a stuck owner. Against Cassandra, or, for demonstration, against
//! a simulated cluster where one owner holds the lock and a few wait.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use lock_core::machine::LockReport;
use lock_core::{Clock, LockConfig, LockStorage, OwnerId, RemoteLock, RemoteLocker, Timestamp};
use lock_storage_memory::{ClusterConfig, MemoryClient, MemoryCluster};

use crate::BoxError;
use crate::experiment::mix;

/// How many cells per row an inspection reads.
pub const INSPECT_LIMIT: u32 = 1000;

/// Renders `report` for a terminal; ages are measured from `now`.
pub fn render(report: &LockReport, now: Timestamp) -> String {
    let mut out = String::new();
    let age = |at: Timestamp| {
        format!(
            "{:.1} ms",
            now.saturating_duration_since(at).as_secs_f64() * 1e3
        )
    };
    let stale = |flag: bool| {
        if flag {
            "  STALE (owner probably dead)"
        } else {
            ""
        }
    };
    let _ = writeln!(out, "lock {}", report.lock_id);
    match &report.holder {
        Some(holder) => {
            let _ = writeln!(out, "  holder: {holder}");
        }
        None => {
            let _ = writeln!(out, "  holder: none");
        }
    }
    let _ = writeln!(out, "  main row: {} live cell(s)", report.main.len());
    for cell in &report.main {
        let _ = writeln!(
            out,
            "    {}  written {} ago{}",
            cell.owner,
            age(cell.last_write),
            stale(cell.stale)
        );
    }
    let _ = writeln!(
        out,
        "  queue: {} waiting or holding, in order",
        report.queue.len()
    );
    for entry in &report.queue {
        let _ = writeln!(
            out,
            "    #{:<3} {}  enqueued {:.1} ms ago, written {} ago{}",
            entry.position,
            entry.owner,
            entry.age.as_secs_f64() * 1e3,
            age(entry.last_write),
            stale(entry.stale)
        );
    }
    if !report.shadow.is_empty() {
        let _ = writeln!(out, "  shadow row: {} live cell(s)", report.shadow.len());
        for cell in &report.shadow {
            let _ = writeln!(
                out,
                "    {}  written {} ago{}",
                cell.owner,
                age(cell.last_write),
                stale(cell.stale)
            );
        }
    }
    match report.fence {
        Some(fence) => {
            let _ = writeln!(out, "  fence: {fence}");
        }
        None => {
            let _ = writeln!(out, "  fence: none (no fencing token handed out yet)");
        }
    }
    if !report.malformed.is_empty() {
        let _ = writeln!(
            out,
            "  malformed cells (not written by the lock): {:?}",
            report.malformed
        );
    }
    if report.truncated {
        let _ = writeln!(
            out,
            "  (a row had {INSPECT_LIMIT} cells or more: only the first were read)"
        );
    }
    out
}

/// What an operator command does once it has a locker.
#[derive(Clone, Debug)]
pub enum Action {
    /// Print the report.
    Inspect,
    /// Delete every cell of this owner, printing the report before and after.
    ForceRelease(OwnerId),
}

/// Runs `action` on `lock_id` with `locker` and returns what to print.
pub async fn act<S: LockStorage>(
    locker: &RemoteLocker<S>,
    lock_id: &str,
    action: &Action,
) -> Result<String, BoxError> {
    let report = locker.inspect(lock_id, INSPECT_LIMIT).await?;
    let mut out = render(&report, locker.clock().now().timestamp);
    if let Action::ForceRelease(owner) = action {
        if locker.force_release(lock_id, owner).await? {
            let _ = writeln!(out, "\nforce-released {owner}: its cells are deleted");
        } else {
            let _ = writeln!(
                out,
                "\n{owner} has no cell on {lock_id}: nothing to release"
            );
        }
    }
    Ok(out)
}

/// The demonstration on a simulated cluster: one owner takes `lock_id` and holds it,
/// `waiters` more queue behind it, then `action` runs. After a force release the lock is
/// inspected again, to show the next owner taking over. Seeded, so owner ids repeat from one
/// run to the next: `inspect` shows them, and `force-release` with the same seed finds them.
pub async fn simulated_demo(
    cluster_config: ClusterConfig,
    seed: u64,
    lock_id: &str,
    waiters: usize,
    action: &Action,
) -> Result<String, BoxError> {
    let cluster = MemoryCluster::new(cluster_config)?;
    let locker = |salt: u64| -> Result<RemoteLocker<MemoryClient>, BoxError> {
        let client = cluster.client();
        let clock: Arc<dyn Clock> = Arc::new(client.clock());
        Ok(RemoteLocker::builder(client)
            .config(LockConfig::default())
            .clock(clock)
            .seed(mix(seed, salt))
            .build()?)
    };
    let holder = locker(1)?.lock(lock_id).await?;
    let mut out = format!(
        "Simulated cluster (no --cassandra given): {} holds {lock_id}, {waiters} more wait.\n\n",
        holder.owner_id()
    );
    let (granted_tx, mut granted) = tokio::sync::mpsc::unbounded_channel::<RemoteLock>();
    for waiter in 0..waiters {
        let locker = locker(waiter as u64 + 2)?;
        let lock_id = lock_id.to_owned();
        let granted_tx = granted_tx.clone();
        tokio::spawn(async move {
            if let Ok(guard) = locker.lock(lock_id.as_str()).await {
                let _ = granted_tx.send(guard);
            }
        });
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let admin = locker(0)?;
    out.push_str(&act(&admin, lock_id, action).await?);
    if matches!(action, Action::ForceRelease(_)) {
        let next = tokio::time::timeout(Duration::from_secs(1), granted.recv()).await;
        if let Ok(Some(guard)) = next {
            let _ = writeln!(
                out,
                "\n{} took the lock after waiting {:.1} ms; the lock now:\n",
                guard.owner_id(),
                guard.wait().as_secs_f64() * 1e3
            );
            out.push_str(&act(&admin, lock_id, &Action::Inspect).await?);
        }
    }
    drop(holder);
    Ok(out)
}
