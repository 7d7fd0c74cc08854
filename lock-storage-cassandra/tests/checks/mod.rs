//! Helpers shared by the run against a real cluster (`cluster.rs`) and the run against the
//! simulator's CQL endpoint (`endpoint.rs`), and the one check that needs this backend's
//! own configuration. The storage semantics themselves are checked by lock-core's
//! conformance checks (`fair_lock::testing`), which every backend runs.

#![allow(
    dead_code,
    reason = "each test binary uses its own subset of the checks"
)]

use std::time::{SystemTime, UNIX_EPOCH};

use fair_lock::Locker;
use lock_core::storage::{CellWrite, RowKey, RowKind, Ttl};
use lock_core::{ColumnName, LockConfig, LockId, Timestamp};
use lock_storage_cassandra::{CassandraConfig, CassandraError, CassandraStorage};

/// The wall clock in microseconds, for write timestamps.
pub fn wall_clock() -> Timestamp {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros())
        .unwrap_or_default();
    Timestamp::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

pub fn row(kind: RowKind, lock: &str) -> RowKey {
    RowKey::new(kind, LockId::new(lock).expect("valid lock id"))
}

pub fn write(row: &RowKey, column: &str, value: &[u8], micros: u64, ttl: Option<u32>) -> CellWrite {
    CellWrite {
        row: row.clone(),
        column: ColumnName::new(column),
        value: value.to_vec(),
        timestamp: Timestamp::from_micros(micros),
        ttl: ttl.map(|seconds| Ttl::from_secs(seconds).expect("valid TTL")),
    }
}

pub async fn check_missing_table_is_reported(config: &CassandraConfig) -> Result<(), String> {
    let missing = CassandraConfig {
        table: "no_such_table".into(),
        schema: None,
        ..config.clone()
    };
    match CassandraStorage::connect(missing).await {
        Err(CassandraError::Prepare { .. }) => Ok(()),
        Err(other) => Err(format!("a missing table gave {other}")),
        Ok(_) => Err("a missing table was accepted".into()),
    }
}

/// Connects with `config` (under the lock's own `request_timeout`), takes `lock_id` with
/// the default lock configuration and releases it; `who` names the client in the errors.
pub async fn lock_and_release(
    config: CassandraConfig,
    lock_id: &str,
    who: &str,
) -> Result<(), String> {
    let lock_config = LockConfig::default();
    let config = CassandraConfig {
        request_timeout: lock_config.request_timeout,
        ..config
    };
    config
        .check_lock_config(&lock_config)
        .map_err(|error| error.to_string())?;
    let storage = CassandraStorage::connect(config)
        .await
        .map_err(|error| format!("{who}'s connect: {error}"))?;
    let locker = Locker::builder(storage)
        .config(lock_config)
        .build()
        .map_err(|error| error.to_string())?;
    let guard = locker
        .lock(lock_id)
        .await
        .map_err(|error| format!("lock() as {who}: {error}"))?;
    guard
        .release()
        .await
        .map_err(|error| format!("release() as {who}: {error}"))
}
