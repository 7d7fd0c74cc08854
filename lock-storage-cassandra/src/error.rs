//! This crate's error type, and the mapping from the driver's errors to lock-core's.
//!
//! Lock-core needs to know one thing about a failed request: could it have been applied?
//! [`storage_error`] answers from the driver's error, following the table in the crate docs:
//!
//! * [`lock_core::Error::StorageUnavailable`]: certainly not applied, a retry may succeed
//!   (not enough replicas alive, coordinator overloaded or bootstrapping, no connection to
//!   send it on).
//! * [`lock_core::Error::StorageRejected`]: certainly not applied and a retry will fail the
//!   same way (bad statement, bad value, missing table, no permission).
//! * [`lock_core::Error::StorageOutcomeUnknown`]: it may have been applied (server-side
//!   read or write timeout, client-side timeout, connection lost after sending, a reply
//!   that could not be understood, and anything this crate does not recognise).

use lock_core::Error;
use scylla::errors::{
    DbError, ExecutionError, NewSessionError, PrepareError, RequestAttemptError,
    SchemaAgreementError,
};

/// Everything that can go wrong while setting the backend up. Failures of individual
/// storage requests are reported as [`lock_core::Error`] instead (see [`storage_error`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CassandraError {
    /// A configuration value is malformed, unsafe or inconsistent with another one.
    #[error("invalid Cassandra configuration: `{field}` {reason}")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// What is wrong and what would be accepted.
        reason: String,
    },

    /// No session could be opened.
    #[error(
        "could not connect to the cluster at {contact_points}: {error}; check that the contact \
         points are reachable CQL nodes (port 9042 unless configured otherwise) and that the \
         credentials are right"
    )]
    Connect {
        /// The contact points tried, comma-separated.
        contact_points: String,
        /// The driver's error.
        #[source]
        error: Box<NewSessionError>,
    },

    /// The configured local data centre has no node in the cluster.
    #[error(
        "the cluster has no node in data centre {local_dc:?} (it has: {known}); set local_dc \
         to one of those"
    )]
    UnknownDatacenter {
        /// The configured `local_dc`.
        local_dc: String,
        /// The data centres the driver found, comma-separated.
        known: String,
    },

    /// A `CREATE KEYSPACE` or `CREATE TABLE` statement failed.
    #[error(
        "schema creation failed on `{statement}`: {error}; check that the user may create \
         keyspaces and tables, or create them yourself and leave `schema` as None"
    )]
    Schema {
        /// The statement that failed.
        statement: String,
        /// The driver's error.
        #[source]
        error: Box<ExecutionError>,
    },

    /// After the schema statements, the nodes did not come to one schema version in time.
    #[error(
        "the nodes did not agree on the schema within {timeout:?} of creating it: {error}; \
         check that every node is up and lists one schema version (`nodetool \
         describecluster`), then connect again, or raise `schema.timeout`"
    )]
    SchemaAgreement {
        /// `schema.timeout`, how long the agreement was waited for.
        timeout: std::time::Duration,
        /// The driver's error.
        #[source]
        error: Box<SchemaAgreementError>,
    },

    /// A statement of the hot path could not be prepared.
    #[error(
        "could not prepare `{statement}`: {error}; check that the keyspace and table exist with \
         the schema in the crate docs (set `schema` to have them created) and that the user may \
         read and write them"
    )]
    Prepare {
        /// The statement that failed.
        statement: String,
        /// The driver's error.
        #[source]
        error: Box<PrepareError>,
    },
    /// A tool the local cluster needs (`java`, `mvn`) cannot be run
    /// (feature `local-cluster`).
    #[cfg(feature = "local-cluster")]
    #[error(
        "`{tool}` is needed to run a local Cassandra cluster but cannot be run ({detail}); {hint}"
    )]
    ClusterToolMissing {
        /// The program.
        tool: &'static str,
        /// What happened when it was run.
        detail: String,
        /// What to install.
        hint: &'static str,
    },

    /// The Cassandra jars could not be fetched (feature `local-cluster`).
    #[cfg(feature = "local-cluster")]
    #[error("could not fetch the Cassandra jars: {detail}")]
    ClusterFetch {
        /// What failed, where Maven's log is, and its last lines.
        detail: String,
    },

    /// A local node failed to start or to become ready (feature `local-cluster`).
    #[cfg(feature = "local-cluster")]
    #[error("local Cassandra node {node}: {problem}; its log is {log}, ending:\n{last_lines}", log = log.display())]
    ClusterNode {
        /// The node, from 1.
        node: usize,
        /// What went wrong.
        problem: String,
        /// The node's `system.log`.
        log: std::path::PathBuf,
        /// The last lines of that log (or of the JVM's console when the log is empty).
        last_lines: String,
    },

    /// A file or process operation of the local cluster failed (feature `local-cluster`).
    #[cfg(feature = "local-cluster")]
    #[error("local Cassandra cluster: could not {what}: {error}")]
    ClusterIo {
        /// What was being done.
        what: String,
        /// The operating system's error.
        #[source]
        error: std::io::Error,
    },

    /// The local cluster that the tests of this process share could not be started; the
    /// first test to ask got the full error (feature `local-cluster`).
    #[cfg(feature = "local-cluster")]
    #[error("the shared local {nodes}-node Cassandra cluster did not start: {detail}")]
    ClusterShared {
        /// Its number of nodes.
        nodes: usize,
        /// The start's error, as text.
        detail: String,
    },

    /// No local cluster slot is free (feature `local-cluster`).
    #[cfg(feature = "local-cluster")]
    #[error("cannot start a local Cassandra cluster: {detail}")]
    ClusterBusy {
        /// Which addresses and ports are taken, and what to do.
        detail: String,
    },
}

/// What a failed request may have done: this crate's one classification of the driver's
/// errors, which [`storage_error`] turns into lock-core's error kinds and which any other
/// code on the same session (a lock written with lightweight transactions, say) can use.
///
/// The three kinds cover every outcome (not applied and worth a retry, not applied and not
/// worth one, maybe applied), so the enum is exhaustive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestFault {
    /// Certainly not applied; a retry may succeed.
    NotApplied,
    /// Certainly not applied; a retry will fail the same way.
    Refused,
    /// Possibly applied.
    Unknown,
}

/// Converts a driver error for `operation` (such as `"write queue row of account:1"`, see
/// [`lock_core::storage::StorageRequest::describe`]) into lock-core's error of the right
/// kind. The message keeps the driver's text, including the server's own message.
pub fn storage_error(operation: impl Into<String>, error: &ExecutionError) -> Error {
    let operation = operation.into();
    let mut message = error.to_string();
    if is_read_failure(error) {
        message.push_str(
            " (a replica failed the read; the usual cause is a row with more tombstones than \
             the server's tombstone_failure_threshold, see the crate docs)",
        );
    }
    let kind = request_fault(error);
    tracing::debug!(%operation, %message, ?kind, "Cassandra request failed");
    let fault = match kind {
        RequestFault::NotApplied => Error::unavailable(operation, message),
        RequestFault::Refused => Error::rejected(operation, message),
        RequestFault::Unknown => Error::outcome_unknown(operation, message),
    };
    fault.with_source(error.clone())
}

/// Classifies a failed request by what it may have done (see [`RequestFault`]): the rules
/// of the table in the crate docs.
pub fn request_fault(error: &ExecutionError) -> RequestFault {
    match error {
        ExecutionError::BadQuery(_) => RequestFault::Refused,
        ExecutionError::EmptyPlan | ExecutionError::ConnectionPoolError(_) => {
            RequestFault::NotApplied
        }
        ExecutionError::PrepareError(error) => classify_prepare(error),
        ExecutionError::LastAttemptError(error) => classify_attempt(error),
        ExecutionError::RequestTimeout(_) => RequestFault::Unknown,
        // Schema agreement and metadata errors come after the statement ran; anything
        // newer than this crate may have run too.
        _ => RequestFault::Unknown,
    }
}

/// A failed prepare never executed the statement, so at worst it was not applied.
fn classify_prepare(error: &PrepareError) -> RequestFault {
    match error {
        PrepareError::AllAttemptsFailed { first_attempt } => {
            match classify_attempt(first_attempt) {
                RequestFault::Refused => RequestFault::Refused,
                RequestFault::NotApplied | RequestFault::Unknown => RequestFault::NotApplied,
            }
        }
        _ => RequestFault::NotApplied,
    }
}

fn classify_attempt(error: &RequestAttemptError) -> RequestFault {
    match error {
        RequestAttemptError::SerializationError(_)
        | RequestAttemptError::CqlRequestSerialization(_)
        | RequestAttemptError::RepreparedIdChanged { .. }
        | RequestAttemptError::RepreparedIdMissingInBatch => RequestFault::Refused,
        RequestAttemptError::UnableToAllocStreamId => RequestFault::NotApplied,
        RequestAttemptError::DbError(error, _) => classify_db(error),
        // A broken connection may have carried the request; a reply that could not be
        // read was a reply to a request the server ran.
        _ => RequestFault::Unknown,
    }
}

fn classify_db(error: &DbError) -> RequestFault {
    match error {
        DbError::SyntaxError
        | DbError::Invalid
        | DbError::AlreadyExists { .. }
        | DbError::FunctionFailure { .. }
        | DbError::AuthenticationError
        | DbError::Unauthorized
        | DbError::ConfigError
        | DbError::TruncateError
        | DbError::ProtocolError => RequestFault::Refused,
        // Refused by the coordinator before any replica was asked; a read changes nothing.
        DbError::Unavailable { .. }
        | DbError::Overloaded
        | DbError::IsBootstrapping
        | DbError::Unprepared { .. }
        | DbError::ReadFailure { .. } => RequestFault::NotApplied,
        DbError::RateLimitReached {
            rejected_by_coordinator: true,
            ..
        } => RequestFault::NotApplied,
        // Timeouts, replica failures after the write was sent, server bugs, unknown codes.
        _ => RequestFault::Unknown,
    }
}

fn is_read_failure(error: &ExecutionError) -> bool {
    matches!(
        error,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::ReadFailure { .. },
            _
        ))
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use scylla::errors::{
        BadQuery, BrokenConnectionErrorKind, ConnectionError, ConnectionPoolError, OperationType,
        WriteType,
    };
    use scylla::statement::Consistency;

    use super::*;

    const OP: &str = "write queue row of account:1";

    #[test]
    fn setup_errors_keep_the_drivers_error_as_their_source() {
        use std::error::Error as _;
        let connect = CassandraError::Connect {
            contact_points: "127.0.0.1:9042".into(),
            error: Box::new(NewSessionError::EmptyKnownNodesList),
        };
        let source = connect.source().map(ToString::to_string);
        assert_eq!(
            source,
            Some(NewSessionError::EmptyKnownNodesList.to_string()),
            "{connect}"
        );
        let schema = CassandraError::Schema {
            statement: "CREATE TABLE t".into(),
            error: Box::new(ExecutionError::EmptyPlan),
        };
        assert!(
            schema
                .source()
                .is_some_and(|source| source.to_string() == ExecutionError::EmptyPlan.to_string())
        );
        let invalid = CassandraError::InvalidConfig {
            field: "keyspace",
            reason: "is empty".into(),
        };
        assert!(invalid.source().is_none());
    }

    fn db(error: DbError) -> ExecutionError {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            error,
            "server says no".to_owned(),
        ))
    }

    fn write_timeout() -> DbError {
        DbError::WriteTimeout {
            consistency: Consistency::Quorum,
            received: 1,
            required: 2,
            write_type: WriteType::Simple,
        }
    }

    fn kind(error: &ExecutionError) -> &'static str {
        match storage_error(OP, error) {
            Error::StorageUnavailable { .. } => "unavailable",
            Error::StorageRejected { .. } => "rejected",
            Error::StorageOutcomeUnknown { .. } => "unknown",
            other => panic!("not a storage error: {other:?}"),
        }
    }

    #[test]
    fn timeouts_leave_the_outcome_unknown() {
        let cases = [
            db(write_timeout()),
            db(DbError::ReadTimeout {
                consistency: Consistency::Quorum,
                received: 1,
                required: 2,
                data_present: false,
            }),
            db(DbError::WriteFailure {
                consistency: Consistency::Quorum,
                received: 1,
                required: 2,
                numfailures: 1,
                write_type: WriteType::Simple,
            }),
            ExecutionError::RequestTimeout(Duration::from_secs(2)),
            ExecutionError::LastAttemptError(RequestAttemptError::BrokenConnectionError(
                BrokenConnectionErrorKind::ChannelError.into(),
            )),
            db(DbError::ServerError),
            db(DbError::Other(0x7777)),
            db(DbError::RateLimitReached {
                op_type: OperationType::Write,
                rejected_by_coordinator: false,
            }),
            ExecutionError::LastAttemptError(RequestAttemptError::NonfinishedPagingState),
        ];
        for error in &cases {
            assert_eq!(kind(error), "unknown", "{error:?}");
            assert_eq!(request_fault(error), RequestFault::Unknown, "{error:?}");
        }
    }

    #[test]
    fn refusals_before_any_replica_wrote_are_unavailable() {
        let cases = [
            db(DbError::Unavailable {
                consistency: Consistency::Quorum,
                required: 2,
                alive: 1,
            }),
            db(DbError::Overloaded),
            db(DbError::IsBootstrapping),
            db(DbError::RateLimitReached {
                op_type: OperationType::Write,
                rejected_by_coordinator: true,
            }),
            db(DbError::ReadFailure {
                consistency: Consistency::Quorum,
                received: 1,
                required: 2,
                numfailures: 1,
                data_present: false,
            }),
            ExecutionError::EmptyPlan,
            ExecutionError::ConnectionPoolError(ConnectionPoolError::Initializing),
            ExecutionError::ConnectionPoolError(ConnectionPoolError::Broken {
                last_connection_error: ConnectionError::ConnectTimeout,
            }),
            ExecutionError::LastAttemptError(RequestAttemptError::UnableToAllocStreamId),
            ExecutionError::PrepareError(PrepareError::AllAttemptsFailed {
                first_attempt: RequestAttemptError::DbError(write_timeout(), String::new()),
            }),
        ];
        for error in &cases {
            assert_eq!(kind(error), "unavailable", "{error:?}");
        }
    }

    #[test]
    fn hopeless_requests_are_rejected() {
        let cases = [
            db(DbError::Invalid),
            db(DbError::SyntaxError),
            db(DbError::Unauthorized),
            db(DbError::AuthenticationError),
            db(DbError::ConfigError),
            db(DbError::AlreadyExists {
                keyspace: "ks".into(),
                table: "t".into(),
            }),
            ExecutionError::BadQuery(BadQuery::PartitionKeyExtraction),
            ExecutionError::PrepareError(PrepareError::AllAttemptsFailed {
                first_attempt: RequestAttemptError::DbError(DbError::Invalid, String::new()),
            }),
        ];
        for error in &cases {
            assert_eq!(kind(error), "rejected", "{error:?}");
        }
    }

    #[test]
    fn messages_name_the_operation_and_keep_the_server_text() {
        let error = storage_error(OP, &db(write_timeout()));
        let message = error.to_string();
        assert!(message.contains(OP), "{message}");
        assert!(message.contains("server says no"), "{message}");
        assert!(error.is_outcome_unknown());
        let read_failure = storage_error(
            "read queue row of a",
            &db(DbError::ReadFailure {
                consistency: Consistency::Quorum,
                received: 0,
                required: 2,
                numfailures: 2,
                data_present: false,
            }),
        );
        assert!(
            read_failure.to_string().contains("tombstone"),
            "{read_failure}"
        );
    }

    #[test]
    fn the_driver_error_is_kept_as_the_source() {
        let driver_error = db(write_timeout());
        let error = storage_error(OP, &driver_error);
        let source = std::error::Error::source(&error).expect("a source");
        assert_eq!(source.to_string(), driver_error.to_string());
        let kept = source
            .downcast_ref::<lock_core::ErrorSource>()
            .and_then(|wrapper| wrapper.get().downcast_ref::<ExecutionError>());
        assert!(kept.is_some(), "the scylla error itself is reachable");
    }
}
