//! `inspect` and `force-release` on a locker, wherever its lock lives.

use std::fmt::Write as _;

use fair_lock::Locker;
use lock_core::{LockId, LockStorage, OwnerId, Timestamp};

use crate::Error;
use crate::report::{INSPECT_LIMIT, render, utc};

/// What `inspect` or `force-release` does once it has a locker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Print the report.
    Inspect,
    /// Print the report, then delete every cell of this owner.
    ForceRelease(OwnerId),
}

/// Runs `action` on `lock_id` with `locker` and returns what to print. A force release is
/// also logged on standard error ([`audit_line`]); `backend` names where the lock lives,
/// for that line.
pub async fn act<S: LockStorage>(
    locker: &Locker<S>,
    lock_id: &LockId,
    action: &Action,
    backend: &str,
) -> Result<String, Error> {
    let report = locker.inspect(lock_id, INSPECT_LIMIT).await?;
    let mut out = render(&report, locker.clock().now().timestamp);
    if let Action::ForceRelease(owner) = action {
        let released = locker.force_release(lock_id, owner).await;
        let outcome = match &released {
            Ok(true) => "released".to_owned(),
            Ok(false) => "no cell of this owner".to_owned(),
            Err(error) => format!("failed: {error}"),
        };
        crate::note(&audit_line(
            locker.clock().now().timestamp,
            &operator(),
            lock_id,
            owner,
            backend,
            &outcome,
        ));
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

/// The log line of a force release: UTC time, operator, lock, owner, outcome and backend,
/// as `key=value` pairs after a fixed tag, so that it can be found in a job log or a
/// terminal's scrollback with `grep 'lockctl force-release:'`.
pub fn audit_line(
    at: Timestamp,
    operator: &str,
    lock_id: &LockId,
    owner: &OwnerId,
    backend: &str,
    outcome: &str,
) -> String {
    format!(
        "{} lockctl force-release: operator={operator:?} lock={:?} owner={owner} \
         outcome={outcome:?} backend={backend:?}",
        utc(at),
        lock_id.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_line_names_who_released_what_where() {
        let owner = OwnerId::new("web-1").unwrap();
        let line = audit_line(
            lock_storage_memory::ClusterConfig::DEFAULT_EPOCH,
            "alice",
            &LockId::new("account:42").unwrap(),
            &owner,
            "Cassandra at 10.0.0.1 (keyspace locks, table lock_cells)",
            "released",
        );
        assert_eq!(
            line,
            "2025-01-01T00:00:00.000Z lockctl force-release: operator=\"alice\" \
             lock=\"account:42\" owner=web-1 outcome=\"released\" \
             backend=\"Cassandra at 10.0.0.1 (keyspace locks, table lock_cells)\""
        );
    }
}
