//! The operator commands: `inspect` prints a lock's holder, queue, stale cells and fence;
//! `force-release` removes a stuck owner. Against Cassandra, or, for demonstration, against
//! a simulated cluster where one owner holds the lock and a few wait.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use lock_core::machine::LockReport;
use lock_core::{Clock, LockConfig, LockGuard, LockStorage, Locker, OwnerId, Timestamp};
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
            "    #{:<3} {}  enqueued {} ago, written {} ago{}",
            entry.position,
            entry.owner,
            age(entry.enqueued_at),
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

/// Runs `action` on `lock_id` with `locker` and returns what to print. A force release is
/// also logged on stderr ([`audit_line`]); `backend` names where the lock lives, for it.
pub async fn act<S: LockStorage>(
    locker: &Locker<S>,
    lock_id: &str,
    action: &Action,
    backend: &str,
) -> Result<String, BoxError> {
    let report = locker.inspect(lock_id, INSPECT_LIMIT).await?;
    let mut out = render(&report, locker.clock().now().timestamp);
    if let Action::ForceRelease(owner) = action {
        let released = locker.force_release(lock_id, owner).await;
        let outcome = match &released {
            Ok(true) => "released".to_owned(),
            Ok(false) => "no cell of this owner".to_owned(),
            Err(error) => format!("failed: {error}"),
        };
        let line = audit_line(
            locker.clock().now().timestamp,
            &operator(),
            lock_id,
            owner,
            backend,
            &outcome,
        );
        crate::note(&line);
        if released? {
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

/// Who runs the command, from `$USER` or `$LOGNAME`.
fn operator() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The log line of a force release: UTC time, operator, lock, owner, backend and outcome,
/// as `key=value` pairs after a fixed tag, so that it can be grepped from an operator's
/// shell history or a job log.
pub fn audit_line(
    at: Timestamp,
    operator: &str,
    lock_id: &str,
    owner: &OwnerId,
    backend: &str,
    outcome: &str,
) -> String {
    format!(
        "{} lock-bench force-release: operator={operator:?} lock={lock_id:?} owner={owner} \
         outcome={outcome:?} backend={backend:?}",
        utc(at)
    )
}

/// The first microsecond RFC 3339 cannot write (year 10000), where `humantime` stops.
const RFC3339_END_MICROS: u64 = 253_402_300_800_000_000;

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of a timestamp (microseconds since the Unix epoch); a
/// timestamp past the year 9999, which only a broken clock gives, as its microseconds.
pub fn utc(at: Timestamp) -> String {
    let micros = at.as_micros();
    if micros >= RFC3339_END_MICROS {
        return format!("{micros} us after the Unix epoch");
    }
    let time = std::time::UNIX_EPOCH + Duration::from_micros(micros);
    humantime::format_rfc3339_millis(time).to_string()
}

/// How the demonstration on a simulated cluster is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demo {
    /// Seeds the cluster's latencies and the owner ids, so they repeat from run to run.
    pub seed: u64,
    /// How many owners queue behind the holder.
    pub waiters: usize,
    /// Whether the holder crashes (its client is cut off from every replica) right after
    /// taking the lock; the command then acts once its cells are stale.
    pub crashed: bool,
}

/// The demonstration on a simulated cluster: one owner takes `lock_id` and holds it,
/// `demo.waiters` more queue behind it, then `action` runs. After a force release the lock
/// is inspected again, to show the next owner taking over. Seeded, so owner ids repeat from
/// one run to the next: `inspect` shows them, and `force-release` with the same seed finds
/// them.
pub async fn simulated_demo(
    cluster_config: ClusterConfig,
    lock_id: &str,
    demo: &Demo,
    action: &Action,
    backend: &str,
) -> Result<String, BoxError> {
    let cluster = MemoryCluster::new(cluster_config)?;
    let config = LockConfig::default();
    let locker = |salt: u64| -> Result<(Locker<MemoryClient>, MemoryClient), BoxError> {
        let client = cluster.client();
        let clock: Arc<dyn Clock> = Arc::new(client.clock());
        let locker = Locker::builder(client.clone())
            .config(config.clone())
            .clock(clock)
            .seed(mix(demo.seed, salt))
            .build()?;
        Ok((locker, client))
    };
    let (holder_locker, holder_client) = locker(1)?;
    let holder = holder_locker.lock(lock_id).await?;
    let mut out = format!(
        "Simulated cluster (no --cassandra given): {} holds {lock_id}, {} more wait.\n",
        holder.owner_id(),
        demo.waiters
    );
    if demo.crashed {
        cluster.faults().isolate(holder_client.id())?;
    }
    let (granted_tx, mut granted) = tokio::sync::mpsc::unbounded_channel::<LockGuard>();
    for waiter in 0..demo.waiters {
        let (locker, _) = locker(waiter as u64 + 2)?;
        let lock_id = lock_id.to_owned();
        let granted_tx = granted_tx.clone();
        tokio::spawn(async move {
            if let Ok(guard) = locker.lock(lock_id.as_str()).await {
                let _ = granted_tx.send(guard);
            }
        });
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    if demo.crashed {
        // Stale once a live owner would have renewed (renew_every + request_timeout +
        // max_clock_skew after its last write); the cells expire only at lease_ttl.
        let valid = config.clone().validate()?;
        let stale_after = valid.renew_every() + config.request_timeout + config.max_clock_skew;
        tokio::time::sleep(stale_after + Duration::from_millis(100)).await;
        let _ = writeln!(
            out,
            "Its client was cut off from every replica right after, as if it had crashed; \
             {:.1} s later its cells are stale, and without a force release the waiters wait \
             until they expire (lease TTL {} s).",
            (stale_after + Duration::from_millis(100)).as_secs_f64(),
            config.lease_ttl.as_secs()
        );
    } else {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    out.push('\n');
    let (admin, _) = locker(0)?;
    out.push_str(&act(&admin, lock_id, action, backend).await?);
    if matches!(action, Action::ForceRelease(_)) {
        let next = tokio::time::timeout(Duration::from_millis(500), granted.recv()).await;
        if let Ok(Some(guard)) = next {
            let _ = writeln!(
                out,
                "\n{} took the lock after waiting {:.1} ms; the lock now:\n",
                guard.owner_id(),
                guard.wait().as_secs_f64() * 1e3
            );
            out.push_str(&act(&admin, lock_id, &Action::Inspect, backend).await?);
        }
    }
    drop(holder);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_are_civil_dates() {
        assert_eq!(utc(Timestamp::from_micros(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            utc(ClusterConfig::DEFAULT_EPOCH),
            "2025-01-01T00:00:00.000Z"
        );
        // 2024-02-29T23:59:59.999Z, a leap day.
        assert_eq!(
            utc(Timestamp::from_micros(1_709_251_199_999_000)),
            "2024-02-29T23:59:59.999Z"
        );
        assert_eq!(
            utc(Timestamp::from_micros(RFC3339_END_MICROS - 1)),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            utc(Timestamp::from_micros(RFC3339_END_MICROS)),
            "253402300800000000 us after the Unix epoch"
        );
    }

    #[test]
    fn a_force_release_of_a_crashed_holder_lets_the_next_owner_in_and_is_logged() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let demo = Demo {
            seed: 1,
            waiters: 2,
            crashed: true,
        };
        let inspect = runtime
            .block_on(simulated_demo(
                ClusterConfig::default(),
                "account:42",
                &demo,
                &Action::Inspect,
                "test",
            ))
            .unwrap();
        let holder = inspect
            .lines()
            .find_map(|line| line.strip_prefix("  holder: "))
            .unwrap_or_else(|| panic!("no holder in:\n{inspect}"));
        // Its queue cell had only the waiter TTL (3 s) and no renewal: gone by now.
        assert_eq!(
            inspect.matches("STALE").count(),
            1,
            "the crashed holder's main cell, and no waiter's:\n{inspect}"
        );
        let owner = OwnerId::new(holder).unwrap();
        let released = runtime
            .block_on(simulated_demo(
                ClusterConfig::default(),
                "account:42",
                &demo,
                &Action::ForceRelease(owner.clone()),
                "test",
            ))
            .unwrap();
        assert!(
            released.contains(&format!("force-released {owner}")),
            "{released}"
        );
        let after = released
            .split("the lock now:")
            .nth(1)
            .unwrap_or_else(|| panic!("nobody took the lock:\n{released}"));
        assert!(!after.contains(holder), "{after}");
        assert!(!after.contains("STALE"), "{after}");
        let line = audit_line(
            ClusterConfig::DEFAULT_EPOCH,
            "ops",
            "account:42",
            &owner,
            "test",
            "released",
        );
        assert!(line.starts_with("2025-01-01T00:00:00.000Z lock-bench force-release:"));
        assert!(line.contains(&format!("owner={owner}")), "{line}");
    }
}
