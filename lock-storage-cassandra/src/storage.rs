//! [`CassandraStorage`]: lock-core's storage trait on a `scylla` session.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::storage::{Cell, CellDelete, CellWrite, LockStorage, RowRead, StorageRequest};
use lock_core::{ColumnName, Error, LockConfig, Timestamp};
use scylla::client::execution_profile::{ExecutionProfile, ExecutionProfileHandle};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::ExecutionError;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::policies::retry::FallthroughRetryPolicy;
use scylla::policies::speculative_execution::{
    SimpleSpeculativeExecutionPolicy, SpeculativeExecutionPolicy,
};
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, Statement};

use crate::config::{CassandraConfig, check_gc_grace};
use crate::cql::Statements;
use crate::error::{CassandraError, connect_error, storage_error};

/// Lock-core's [`LockStorage`] on a Cassandra or ScyllaDB cluster.
///
/// Every operation is one prepared statement (see [`Statements`]) run with the configured
/// consistency and client-side timeout, without driver retries (lock-core retries what
/// may pass, for `LockConfig::storage_retry_window`), with a speculative request to
/// another node when the first has not answered ([`crate::Speculation`]). Connections are probed
/// every 2 s and closed when a node has not answered a probe within
/// twice the request timeout, so that a node cut off from this client stops being chosen
/// as coordinator within seconds.
/// Cheap to clone: every clone shares one driver session and the same prepared
/// statements, so give each `Locker` (or each task) its own clone.
#[derive(Clone)]
pub struct CassandraStorage {
    session: Arc<Session>,
    config: Arc<CassandraConfig>,
    statements: Statements,
    insert: PreparedStatement,
    delete: PreparedStatement,
    select_first: PreparedStatement,
    select_from: PreparedStatement,
}

impl fmt::Debug for CassandraStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CassandraStorage")
            .field("statements", &self.statements)
            .finish_non_exhaustive()
    }
}

impl CassandraStorage {
    /// Validates `config`, opens a session, checks the local data centre, creates the
    /// keyspace and table if `config.schema` asks for it, and prepares the statements.
    pub async fn connect(config: CassandraConfig) -> Result<Self, CassandraError> {
        let statements = Statements::new(&config)?;
        let profile = execution_profile(&config).into_handle();
        let mut builder = SessionBuilder::new()
            .known_nodes(&config.contact_points)
            .connection_timeout(config.connection_timeout)
            .keepalive_interval(KEEPALIVE_INTERVAL)
            .keepalive_timeout(keepalive_timeout(&config))
            .keyspaces_to_fetch([config.keyspace.as_str()])
            .local_ip_address(config.local_address)
            .default_execution_profile_handle(profile.clone());
        if let Some(credentials) = &config.credentials {
            builder = builder.user(&credentials.username, &credentials.password);
        }
        if let Some(schema) = &config.schema {
            builder = builder.schema_agreement_timeout(schema.timeout);
        }
        if let Some(tls) = &config.tls {
            builder = builder.tls_context(Some(tls.client_config()?));
        }
        let session = builder.build().await.map_err(|error| {
            connect_error(config.contact_points.join(","), config.tls.is_some(), error)
        })?;
        Self::prepare_on(Arc::new(session), config, statements, profile).await
    }

    /// The backend on a session the application already has (a `Session` or an
    /// `Arc<Session>`): validates `config`, checks the local data centre, creates the
    /// keyspace and table if `config.schema` asks for it, and prepares the statements, as
    /// [`CassandraStorage::connect`] does on the session it opens.
    ///
    /// Of `config`, the keyspace, table, consistency, `local_dc`, request timeout,
    /// speculation and schema apply; the connection settings (contact points, connection
    /// timeout, credentials, TLS) are the session's own and are not looked at. The lock's
    /// statements run with this crate's execution profile (no driver retries, speculative
    /// requests as [`CassandraConfig::speculation`] says) whatever the session's default
    /// profile is, and the session's other statements keep theirs. The session's
    /// keepalives and schema-agreement timeout are its own: [`CassandraStorage::connect`] probes every 2 s, so that a
    /// node cut off stops being chosen within seconds; build the session with
    /// `keepalive_interval` and `keepalive_timeout` alike for the same.
    pub async fn from_session(
        session: impl Into<Arc<Session>>,
        config: CassandraConfig,
    ) -> Result<Self, CassandraError> {
        let statements = Statements::new(&config)?;
        let profile = execution_profile(&config).into_handle();
        Self::prepare_on(session.into(), config, statements, profile).await
    }

    /// What [`CassandraStorage::connect`] and [`CassandraStorage::from_session`] share once
    /// the session is there: the data-centre check, the schema and the prepared statements,
    /// all run with `profile`.
    async fn prepare_on(
        session: Arc<Session>,
        config: CassandraConfig,
        statements: Statements,
        profile: ExecutionProfileHandle,
    ) -> Result<Self, CassandraError> {
        if let Some(local_dc) = &config.local_dc {
            check_datacenter(&session, local_dc)?;
        }
        if let Some(schema) = &config.schema {
            let ddl = [&statements.create_keyspace, &statements.create_table];
            for text in ddl.into_iter().flatten() {
                let mut statement = Statement::new(text.as_str());
                statement.set_execution_profile_handle(Some(profile.clone()));
                statement.set_request_timeout(Some(schema.timeout));
                statement.set_is_idempotent(true);
                session
                    .query_unpaged(statement, ())
                    .await
                    .map_err(|error| CassandraError::Schema {
                        statement: text.clone(),
                        error: Box::new(error),
                    })?;
                tracing::info!(statement = %text, "Cassandra schema statement applied");
            }
            // A statement that found the table already there changed nothing, so the
            // driver did not wait; the nodes that have not heard of the table yet would
            // refuse this service's first requests.
            session.await_schema_agreement().await.map_err(|error| {
                CassandraError::SchemaAgreement {
                    timeout: schema.timeout,
                    error: Box::new(error),
                }
            })?;
        }
        let prepare = Prepare {
            session: &session,
            config: &config,
            profile: &profile,
        };
        let write = config.consistency.write_level();
        let read = config.consistency.read_level();
        Ok(CassandraStorage {
            insert: prepare.run(&statements.insert, write).await?,
            delete: prepare.run(&statements.delete, write).await?,
            select_first: prepare.run(&statements.select_first, read).await?,
            select_from: prepare.run(&statements.select_from, read).await?,
            session,
            config: Arc::new(config),
            statements,
        })
    }

    /// The driver session, for anything beyond the lock (opened by
    /// [`CassandraStorage::connect`], it uses this crate's execution profile by default: no
    /// retries, speculative requests as [`CassandraConfig::speculation`] says; mark your own
    /// statements idempotent only if running them twice is harmless. Given to
    /// [`CassandraStorage::from_session`], it keeps its own default).
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The CQL this backend runs.
    pub fn statements(&self) -> &Statements {
        &self.statements
    }

    /// The lock table's own `gc_grace_seconds`, as `system_schema.tables` gives it: what the
    /// table was created or last altered with, by whoever did it.
    pub async fn table_gc_grace_seconds(&self) -> Result<u32, CassandraError> {
        let (keyspace, table) = (self.config.keyspace.as_str(), self.config.table.as_str());
        let failed = |reason: String| CassandraError::TableOptions {
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
            reason,
        };
        let rows = self
            .session
            .query_unpaged(
                "SELECT gc_grace_seconds FROM system_schema.tables \
                 WHERE keyspace_name = ? AND table_name = ?",
                (keyspace, table),
            )
            .await
            .map_err(|error| failed(error.to_string()))?
            .into_rows_result()
            .map_err(|error| failed(error.to_string()))?;
        match rows.maybe_first_row::<(Option<i32>,)>() {
            Ok(Some((Some(seconds),))) => {
                u32::try_from(seconds).map_err(|_| failed(format!("gc_grace_seconds is {seconds}")))
            }
            Ok(Some((None,))) => Err(failed("gc_grace_seconds is null".to_owned())),
            Ok(None) => Err(failed("the table is not there".to_owned())),
            Err(error) => Err(failed(error.to_string())),
        }
    }

    /// Checks that this backend suits a lock configured with `lock`: what
    /// [`CassandraConfig::check_lock_config`] checks, and the same bound on the table's own
    /// `gc_grace_seconds` ([`crate::config::least_gc_grace_seconds`]), however the table
    /// was created (by hand, by another service, or with other defaults).
    pub async fn check_lock_config(&self, lock: &LockConfig) -> Result<(), CassandraError> {
        self.config.check_lock_config(lock)?;
        let seconds = self.table_gc_grace_seconds().await?;
        check_gc_grace("the table's gc_grace_seconds", seconds, lock)
    }

    async fn insert_cell(&self, write: &CellWrite) -> Result<(), Failure> {
        let ttl = match write.ttl {
            Some(ttl) => i32::try_from(ttl.as_secs())
                .map_err(|_| Failure::Value(format!("TTL {} s does not fit CQL", ttl.as_secs())))?,
            None => 0,
        };
        let values = (
            write.row.lock_id.as_str(),
            write.row.kind.as_str(),
            write.column.as_str(),
            write.value.as_slice(),
            ttl,
            cql_timestamp(write.timestamp)?,
        );
        self.session
            .execute_unpaged(&self.insert, values)
            .await
            .map_err(|error| Failure::Driver(Box::new(error)))?;
        Ok(())
    }

    async fn delete_from(&self, delete: &CellDelete) -> Result<(), Failure> {
        let values = (
            cql_timestamp(delete.timestamp)?,
            delete.row.lock_id.as_str(),
            delete.row.kind.as_str(),
            delete.column.as_str(),
        );
        self.session
            .execute_unpaged(&self.delete, values)
            .await
            .map_err(|error| Failure::Driver(Box::new(error)))?;
        Ok(())
    }

    async fn select(&self, read: &RowRead) -> Result<Vec<Cell>, Failure> {
        let lock_id = read.row.lock_id.as_str();
        let kind = read.row.kind.as_str();
        let limit = i32::try_from(read.limit.get()).unwrap_or(i32::MAX);
        let result = match &read.start {
            None => {
                self.session
                    .execute_unpaged(&self.select_first, (lock_id, kind, limit))
                    .await
            }
            Some(start) => {
                self.session
                    .execute_unpaged(&self.select_from, (lock_id, kind, start.as_str(), limit))
                    .await
            }
        };
        decode(result.map_err(|error| Failure::Driver(Box::new(error)))?)
    }
}

#[async_trait]
impl LockStorage for CassandraStorage {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        let outcome = self.insert_cell(&write).await;
        outcome.map_err(|failure| failure.into_error(StorageRequest::Write(write)))
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        let outcome = self.delete_from(&delete).await;
        outcome.map_err(|failure| failure.into_error(StorageRequest::Delete(delete)))
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        let outcome = self.select(&read).await;
        outcome.map_err(|failure| failure.into_error(StorageRequest::Read(read)))
    }

    /// [`CassandraStorage::check_lock_config`], which a `Locker` runs before its first
    /// request: a setting that does not suit comes back as [`Error::InvalidConfig`], a
    /// table whose options cannot be read as [`Error::StorageUnavailable`].
    async fn check_config(&self, config: &LockConfig) -> Result<(), Error> {
        self.check_lock_config(config).await.map_err(check_error)
    }
}

/// A failed [`CassandraStorage::check_lock_config`] as lock-core's error.
fn check_error(error: CassandraError) -> Error {
    const OPERATION: &str = "check the Cassandra backend against the lock configuration";
    match error {
        CassandraError::InvalidConfig { field, reason } => Error::InvalidConfig {
            field,
            reason: format!("{reason} (Cassandra backend)"),
        },
        error @ CassandraError::TableOptions { .. } => {
            Error::unavailable(OPERATION, error.to_string())
        }
        error => Error::rejected(OPERATION, error.to_string()),
    }
}

/// Why one request failed, before it is tied to its operation.
#[derive(Debug)]
enum Failure {
    /// The driver or the server reported an error.
    Driver(Box<ExecutionError>),
    /// A value of the request cannot be expressed in CQL; nothing was sent.
    Value(String),
    /// The reply does not have the documented shape (the table differs from the schema).
    Reply(String),
}

impl Failure {
    fn into_error(self, request: StorageRequest) -> Error {
        let operation = request.describe();
        match self {
            Failure::Driver(error) => storage_error(operation, &error),
            Failure::Value(message) => Error::rejected(operation, message),
            Failure::Reply(message) => Error::rejected(
                operation,
                format!("{message}; the table must have the schema in the crate docs"),
            ),
        }
    }
}

/// The profile every statement runs with: the configured consistency and timeout, the
/// token-aware default load balancing (kept inside `local_dc` for LOCAL_QUORUM), no
/// retries, and speculative requests as [`CassandraConfig::speculation`] says. See the
/// crate docs for why.
fn execution_profile(config: &CassandraConfig) -> ExecutionProfile {
    let mut balancing = DefaultPolicy::builder().token_aware(true);
    if let Some(local_dc) = &config.local_dc {
        balancing = balancing
            .prefer_datacenter(local_dc.clone())
            .permit_dc_failover(!config.pins_local_dc());
    }
    ExecutionProfile::builder()
        .consistency(config.consistency.write_level())
        .serial_consistency(None)
        .request_timeout(Some(config.request_timeout))
        .load_balancing_policy(balancing.build())
        .retry_policy(Arc::new(FallthroughRetryPolicy::new()))
        .speculative_execution_policy(config.speculation.delay(config.request_timeout).map(
            |retry_interval| {
                Arc::new(SimpleSpeculativeExecutionPolicy {
                    max_retry_count: SPECULATIVE_REQUESTS,
                    retry_interval,
                }) as Arc<dyn SpeculativeExecutionPolicy>
            },
        ))
        .build()
}

/// How often every connection is probed with a keepalive request.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);

/// How many more times one request may be sent, the [`crate::Speculation`] delay apart, while no answer has come: with three replicas, to each of the others.
const SPECULATIVE_REQUESTS: usize = 2;

/// How long a connection may go without answering keepalives before it is closed: twice
/// the request timeout, and at least 4 s, so that a node slow for one request keeps its
/// connections.
fn keepalive_timeout(config: &CassandraConfig) -> Duration {
    (config.request_timeout * 2).max(Duration::from_secs(4))
}

/// Prepares hot-path statements with their per-statement settings.
struct Prepare<'a> {
    session: &'a Session,
    config: &'a CassandraConfig,
    profile: &'a ExecutionProfileHandle,
}

impl Prepare<'_> {
    async fn run(
        &self,
        text: &str,
        consistency: Consistency,
    ) -> Result<PreparedStatement, CassandraError> {
        let mut prepared =
            self.session
                .prepare(text)
                .await
                .map_err(|error| CassandraError::Prepare {
                    statement: text.to_owned(),
                    error: Box::new(error),
                })?;
        prepared.set_execution_profile_handle(Some(self.profile.clone()));
        prepared.set_consistency(consistency);
        prepared.set_request_timeout(Some(self.config.request_timeout));
        prepared.set_retry_policy(Some(Arc::new(FallthroughRetryPolicy::new())));
        // Every statement carries its own write timestamp or only reads, so running it
        // twice has the effect of running it once (see the crate docs).
        prepared.set_is_idempotent(true);
        Ok(prepared)
    }
}

fn check_datacenter(session: &Session, local_dc: &str) -> Result<(), CassandraError> {
    let state = session.get_cluster_state();
    let mut known: Vec<&str> = state
        .get_nodes_info()
        .iter()
        .filter_map(|node| node.datacenter.as_deref())
        .collect();
    if known.contains(&local_dc) {
        return Ok(());
    }
    known.sort_unstable();
    known.dedup();
    Err(CassandraError::UnknownDatacenter {
        local_dc: local_dc.to_owned(),
        known: known.join(", "),
    })
}

fn cql_timestamp(timestamp: Timestamp) -> Result<i64, Failure> {
    i64::try_from(timestamp.as_micros()).map_err(|_| {
        Failure::Value(format!(
            "timestamp {timestamp} is beyond CQL's largest write timestamp"
        ))
    })
}

/// One row as the select statements return it: `column_name`, `value`, `WRITETIME(value)`.
type RawRow<'frame> = (&'frame str, Option<&'frame [u8]>, Option<i64>);

fn decode(result: QueryResult) -> Result<Vec<Cell>, Failure> {
    let rows = result
        .into_rows_result()
        .map_err(|error| Failure::Reply(format!("the read returned no rows: {error}")))?;
    let typed = rows
        .rows::<RawRow<'_>>()
        .map_err(|error| Failure::Reply(format!("unexpected column types: {error}")))?;
    let raw = typed
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| Failure::Reply(format!("a row could not be decoded: {error}")))?;
    cells_from_rows(raw).map_err(Failure::Reply)
}

/// Turns rows into live cells, checking that they come in strictly increasing column order
/// (the lock's queue depends on it, and a table clustered `DESC` would break it).
fn cells_from_rows<'frame>(
    rows: impl IntoIterator<Item = RawRow<'frame>>,
) -> Result<Vec<Cell>, String> {
    let mut cells: Vec<Cell> = Vec::new();
    for (column, value, write_time) in rows {
        // A row without a value has no live cell: only its primary key is alive.
        let Some(value) = value else { continue };
        let write_time =
            write_time.ok_or_else(|| format!("column {column:?} has a value but no write time"))?;
        let micros = u64::try_from(write_time)
            .map_err(|_| format!("column {column:?} has a negative write time {write_time}"))?;
        if let Some(previous) = cells.last()
            && previous.column.as_str() >= column
        {
            return Err(format!(
                "rows came back out of column order ({:?} before {column:?}); the table must \
                 be clustered by column_name ASC",
                previous.column.as_str()
            ));
        }
        cells.push(Cell {
            column: ColumnName::new(column),
            value: value.to_vec(),
            write_timestamp: Timestamp::from_micros(micros),
        });
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use scylla::statement::Consistency;

    use super::*;
    use crate::config::{LockConsistency, Speculation};

    #[test]
    fn rows_become_cells_in_order() {
        let rows = [
            ("00000000000000000001a", Some(&b"x"[..]), Some(10)),
            ("00000000000000000001b", Some(&b""[..]), Some(11)),
            ("owner-\u{e9}", Some(&b"\xff\x00"[..]), Some(i64::MAX)),
        ];
        let cells = cells_from_rows(rows).unwrap();
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[0].column.as_str(), "00000000000000000001a");
        assert_eq!(cells[0].value, b"x");
        assert_eq!(cells[0].write_timestamp, Timestamp::from_micros(10));
        assert_eq!(cells[1].value, b"");
        assert_eq!(cells[2].value, b"\xff\x00");
        assert_eq!(cells[2].write_timestamp, Timestamp::MAX);
    }

    #[test]
    fn rows_without_a_value_are_not_cells() {
        let rows = [("a", None, None), ("b", Some(&b"v"[..]), Some(5))];
        let cells = cells_from_rows(rows).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].column.as_str(), "b");
    }

    #[test]
    fn malformed_rows_are_refused() {
        assert!(
            cells_from_rows([("a", Some(&b"v"[..]), None)])
                .unwrap_err()
                .contains("no write time")
        );
        assert!(
            cells_from_rows([("a", Some(&b"v"[..]), Some(-1))])
                .unwrap_err()
                .contains("negative")
        );
        let descending = [
            ("b", Some(&b"v"[..]), Some(1)),
            ("a", Some(&b"v"[..]), Some(1)),
        ];
        assert!(
            cells_from_rows(descending)
                .unwrap_err()
                .contains("column_name ASC")
        );
        let repeated = [
            ("a", Some(&b"v"[..]), Some(1)),
            ("a", Some(&b"w"[..]), Some(2)),
        ];
        assert!(cells_from_rows(repeated).is_err());
    }

    #[test]
    fn failures_carry_the_operation() {
        let read = RowRead::first(
            lock_core::storage::RowKey::new(
                lock_core::storage::RowKind::Queue,
                lock_core::LockId::new("account:1").unwrap(),
            ),
            8,
        );
        let error = Failure::Reply("bad".into()).into_error(StorageRequest::Read(read));
        assert!(matches!(error, Error::StorageRejected { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("read queue row of account:1"), "{message}");
        assert!(message.contains("crate docs"), "{message}");
    }

    /// The backend's refusals keep their kind: a setting that does not suit stays
    /// `InvalidConfig` with its field, an unreadable table is unavailable, not invalid.
    #[test]
    fn check_failures_become_lock_core_errors() {
        let invalid = CassandraError::InvalidConfig {
            field: "the table's gc_grace_seconds",
            reason: "(10) is shorter".to_owned(),
        };
        match check_error(invalid) {
            Error::InvalidConfig { field, reason } => {
                assert_eq!(field, "the table's gc_grace_seconds");
                assert!(reason.contains("(10) is shorter"), "{reason}");
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
        let unreadable = CassandraError::TableOptions {
            keyspace: "locks".into(),
            table: "lock_cells".into(),
            reason: "the table is not there".into(),
        };
        let error = check_error(unreadable);
        assert!(
            matches!(error, Error::StorageUnavailable { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("locks.lock_cells"), "{error}");
    }

    #[test]
    fn timestamps_map_one_to_one() {
        assert_eq!(
            cql_timestamp(Timestamp::MAX).ok(),
            Some(i64::MAX),
            "the largest lock-core timestamp is CQL's largest"
        );
        assert_eq!(cql_timestamp(Timestamp::from_micros(42)).ok(), Some(42));
    }

    /// The driver never retries (lock-core does, for its window) and speculates after the
    /// configured delay, or not at all with `None`.
    #[test]
    fn the_profile_never_retries_and_speculates_after_the_delay() {
        let config = CassandraConfig {
            consistency: LockConsistency::EachQuorum,
            local_dc: Some("dc1".into()),
            request_timeout: Duration::from_millis(1500),
            ..CassandraConfig::new(["localhost"], "locks")
        };
        let profile = execution_profile(&config);
        assert_eq!(profile.get_consistency(), Consistency::EachQuorum);
        assert_eq!(profile.get_serial_consistency(), None);
        assert_eq!(
            profile.get_request_timeout(),
            Some(Duration::from_millis(1500))
        );
        let speculative = format!("{:?}", profile.get_speculative_execution_policy());
        assert!(
            speculative.contains("max_retry_count: 2") && speculative.contains("375ms"),
            "{speculative}"
        );
        let retry = format!("{:?}", profile.get_retry_policy());
        assert_eq!(retry, "FallthroughRetryPolicy");
        let once = CassandraConfig {
            speculation: Speculation::Off,
            ..config
        };
        assert!(
            execution_profile(&once)
                .get_speculative_execution_policy()
                .is_none()
        );
        assert_eq!(keepalive_timeout(&once), Duration::from_secs(4));
    }
}
