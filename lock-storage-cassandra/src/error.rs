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

    /// A TLS certificate or key file could not be read.
    #[error(
        "cannot read `{field}` from {path}: {error}; check the path and that this process may \
         read the file",
        path = path.display()
    )]
    TlsFileUnreadable {
        /// The setting: `tls.ca_certificates`, `tls.client_certificate` or `tls.client_key`.
        field: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        #[source]
        error: std::io::Error,
    },

    /// TLS material is not well-formed PEM (a section without its end line, bad base64).
    #[error(
        "`{field}`: {origin} is not valid PEM ({error}); give PEM text as openssl writes it: \
         `-----BEGIN ...-----`, base64 lines, `-----END ...-----`"
    )]
    TlsPemInvalid {
        /// The setting.
        field: &'static str,
        /// The file, or "the PEM text given inline".
        origin: String,
        /// The PEM parser's error.
        #[source]
        error: rustls::pki_types::pem::Error,
    },

    /// TLS material holds no certificate, or no usable private key.
    #[error("`{field}`: {origin} holds no {expected}; {hint}")]
    TlsPemMissing {
        /// The setting.
        field: &'static str,
        /// The file, or "the PEM text given inline".
        origin: String,
        /// What was looked for.
        expected: &'static str,
        /// What to do.
        hint: &'static str,
    },

    /// Rustls refused the TLS material (a CA certificate it cannot parse, a key that does
    /// not match its certificate or is of an unsupported type).
    #[error("`{field}`: {reason}: {error}")]
    TlsSetup {
        /// The setting.
        field: &'static str,
        /// What was being done, and what to check.
        reason: String,
        /// Rustls's error.
        #[source]
        error: rustls::Error,
    },

    /// The TLS handshake with the nodes failed; [`TlsFailure`] says why and what to do.
    #[error(
        "could not connect to the cluster at {contact_points} over TLS: {failure} (the driver said: {error})"
    )]
    TlsHandshake {
        /// The contact points tried, comma-separated.
        contact_points: String,
        /// Why the handshake failed.
        failure: TlsFailure,
        /// The driver's error.
        #[source]
        error: Box<NewSessionError>,
    },

    /// Connecting without TLS, the nodes closed the connection without answering the first
    /// request: what a node does when it requires TLS (`client_encryption_options` with
    /// `enabled: true`, `optional: false`) and the client speaks plaintext.
    #[error(
        "could not connect to the cluster at {contact_points}: the node closed the plaintext \
         connection without answering, as a node that requires TLS does (client_encryption_options \
         enabled, optional: false); set `tls` (lockctl: --tls-ca) to the CA that signed the \
         nodes' certificates (the driver said: {error})"
    )]
    TlsRequiredByServer {
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

    /// The lock table's options could not be read back from `system_schema.tables`.
    #[error(
        "could not read the options of the lock table {keyspace}.{table} from \
         system_schema.tables: {reason}; check that the table exists (set `schema`, or create \
         it from the statements in the crate docs) and that the user may read system_schema"
    )]
    TableOptions {
        /// The keyspace.
        keyspace: String,
        /// The table.
        table: String,
        /// What went wrong.
        reason: String,
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
}

/// Why a TLS handshake with the nodes failed ([`CassandraError::TlsHandshake`]); its
/// `Display` says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The node's certificate is not signed by a CA in `tls.ca_certificates` (or is
    /// expired, not yet valid, or otherwise invalid).
    UntrustedCertificate {
        /// Rustls's reason, such as `UnknownIssuer` or `Expired`.
        reason: String,
    },
    /// The node's certificate is signed by a trusted CA but not issued for the address the
    /// driver connected to (hostname verification).
    HostnameMismatch {
        /// Rustls's reason, with the names the certificate holds when it says them.
        reason: String,
    },
    /// The node did not answer in TLS: its client encryption is off.
    ServerNotTls {
        /// Rustls's reason.
        reason: String,
    },
    /// The node refused this client's certificate, or wanted one and got none (mutual TLS).
    ClientCertificateRefused {
        /// The alert the node sent.
        reason: String,
    },
    /// Any other TLS failure.
    Other {
        /// Rustls's reason.
        reason: String,
    },
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsFailure::UntrustedCertificate { reason } => write!(
                f,
                "the node's certificate is not trusted ({reason}): it is not signed by a CA in \
                 `tls.ca_certificates`, or not valid now; give the CA certificate that signed the \
                 nodes' certificates (lockctl: --tls-ca)"
            ),
            TlsFailure::HostnameMismatch { reason } => write!(
                f,
                "the node's certificate is signed by a trusted CA but not issued for the address \
                 the driver connected to ({reason}); add each node's IP address to its \
                 certificate's subject alternative names, or for certificates that name no \
                 addresses set `tls.verify_hostname` to false (lockctl: --tls-no-hostname-check)"
            ),
            TlsFailure::ServerNotTls { reason } => write!(
                f,
                "the node did not answer in TLS ({reason}): its client_encryption_options are \
                 probably not enabled; connect without `tls`, or enable client encryption on the \
                 nodes"
            ),
            TlsFailure::ClientCertificateRefused { reason } => write!(
                f,
                "the node refused this client's certificate ({reason}): it requires client \
                 certificates (require_client_auth); set `tls.client_certificate` and \
                 `tls.client_key` (lockctl: --tls-cert, --tls-key) to a certificate the nodes' \
                 truststore trusts"
            ),
            TlsFailure::Other { reason } => write!(f, "the TLS handshake failed: {reason}"),
        }
    }
}

/// The error for a session that could not be opened: a TLS failure as such when the
/// driver's error shows one, otherwise [`CassandraError::Connect`].
pub(crate) fn connect_error(
    contact_points: String,
    tls: bool,
    error: NewSessionError,
) -> CassandraError {
    let error = Box::new(error);
    let first_request = first_request_broken(error.as_ref());
    let failure = match (find_rustls_error(error.as_ref()), first_request) {
        // Under TLS 1.3 the client's side of the handshake is over before the node checks
        // the client's certificate; a node that refuses it sends its alert under the
        // client's first request (Cassandra's JDK engine sends `internal_error`).
        (Some(rustls::Error::AlertReceived(alert)), Some(_)) => {
            Some(TlsFailure::ClientCertificateRefused {
                reason: format!("the node sent the alert {alert:?} right after the handshake"),
            })
        }
        (Some(rustls_error), _) => Some(tls_failure(rustls_error)),
        (None, Some(kind)) if !tls && plaintext_refused(kind) => {
            return CassandraError::TlsRequiredByServer {
                contact_points,
                error,
            };
        }
        // The same, when the node closed the connection without an alert the driver kept.
        (None, Some(_)) if tls => Some(TlsFailure::ClientCertificateRefused {
            reason: "the node closed the connection right after the handshake, without \
                     answering the first request"
                .into(),
        }),
        (None, _) => None,
    };
    match failure {
        Some(failure) => CassandraError::TlsHandshake {
            contact_points,
            failure,
            error,
        },
        None => CassandraError::Connect {
            contact_points,
            error,
        },
    }
}

/// What a rustls error means for the user.
pub(crate) fn tls_failure(error: &rustls::Error) -> TlsFailure {
    use rustls::{AlertDescription, CertificateError};
    let reason = error.to_string();
    match error {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => TlsFailure::HostnameMismatch { reason },
        rustls::Error::InvalidCertificate(_) => TlsFailure::UntrustedCertificate { reason },
        // A plaintext CQL answer read as a TLS record.
        rustls::Error::InvalidMessage(_) | rustls::Error::PeerSentOversizedRecord => {
            TlsFailure::ServerNotTls { reason }
        }
        rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired
            | AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied,
        ) => TlsFailure::ClientCertificateRefused { reason },
        _ => TlsFailure::Other { reason },
    }
}

/// The first rustls error in `error`'s chain, looking also inside the I/O errors and
/// broken-connection errors that the chain steps over.
fn find_rustls_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    let mut pending: Vec<&'a (dyn std::error::Error + 'static)> = vec![error];
    // The chains are short; the bound keeps a cyclic chain from looping.
    let mut budget = 64;
    while let Some(error) = pending.pop() {
        budget -= 1;
        if budget == 0 {
            break;
        }
        if let Some(found) = error.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        pending.extend(hidden_inner(error));
        pending.extend(error.source());
    }
    None
}

/// The error that `error` wraps without naming it as its source, which the chain would
/// step over: a broken pool's last connection error, a connection's I/O or setup error
/// (`#[error(transparent)]` skips them), a broken connection's reason, an I/O error's
/// inner error.
fn hidden_inner<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use scylla::errors::{
        BrokenConnectionError, BrokenConnectionErrorKind, ConnectionError, ConnectionPoolError,
        ConnectionSetupRequestErrorKind, FrameHeaderParseError,
    };
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        return io
            .get_ref()
            .map(|inner| inner as &(dyn std::error::Error + 'static));
    }
    if let Some(ConnectionPoolError::Broken {
        last_connection_error,
    }) = error.downcast_ref::<ConnectionPoolError>()
    {
        return Some(last_connection_error);
    }
    if let Some(connection) = error.downcast_ref::<ConnectionError>() {
        return match connection {
            ConnectionError::IoError(io) => Some(io.as_ref()),
            ConnectionError::BrokenConnection(broken) => Some(broken),
            ConnectionError::ConnectionSetupRequestError(setup) => Some(setup.get_error()),
            _ => None,
        };
    }
    if let Some(ConnectionSetupRequestErrorKind::BrokenConnection(broken)) =
        error.downcast_ref::<ConnectionSetupRequestErrorKind>()
    {
        return Some(broken);
    }
    if let Some(broken) = error.downcast_ref::<BrokenConnectionError>() {
        return match broken.downcast_ref::<BrokenConnectionErrorKind>()? {
            BrokenConnectionErrorKind::WriteError(io) => Some(io),
            BrokenConnectionErrorKind::FrameHeaderParseError(parse) => Some(parse),
            _ => None,
        };
    }
    if let Some(FrameHeaderParseError::HeaderIoError(io)) =
        error.downcast_ref::<FrameHeaderParseError>()
    {
        return Some(io);
    }
    None
}

/// Why the connection broke under the first request on it (`OPTIONS`), if that is how
/// the session failed.
fn first_request_broken(
    error: &NewSessionError,
) -> Option<&scylla::errors::BrokenConnectionErrorKind> {
    use scylla::errors::{
        BrokenConnectionErrorKind, ConnectionError, ConnectionPoolError,
        ConnectionSetupRequestErrorKind, CqlRequestKind, MetadataError,
    };
    let NewSessionError::MetadataError(MetadataError::ConnectionPoolError(
        ConnectionPoolError::Broken {
            last_connection_error: ConnectionError::ConnectionSetupRequestError(setup),
        },
    )) = error
    else {
        return None;
    };
    if !matches!(setup.request_kind, CqlRequestKind::Options) {
        return None;
    }
    let ConnectionSetupRequestErrorKind::BrokenConnection(broken) = setup.get_error() else {
        return None;
    };
    broken.downcast_ref::<BrokenConnectionErrorKind>()
}

/// Whether a connection that broke under the first request was closed by the node, or
/// answered with bytes that are a TLS record rather than a CQL frame: what a node that
/// requires TLS does to a plaintext client.
fn plaintext_refused(kind: &scylla::errors::BrokenConnectionErrorKind) -> bool {
    use scylla::errors::{BrokenConnectionErrorKind, FrameHeaderParseError};
    match kind {
        BrokenConnectionErrorKind::FrameHeaderParseError(FrameHeaderParseError::HeaderIoError(
            io,
        )) => matches!(
            io.kind(),
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
        ),
        // A TLS record's first byte: 0x15 alert, 0x16 handshake.
        BrokenConnectionErrorKind::FrameHeaderParseError(
            FrameHeaderParseError::VersionNotSupported(0x15 | 0x16),
        ) => true,
        _ => false,
    }
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

    /// A session that failed on its control connection with `last`.
    fn session_failure(last: ConnectionError) -> NewSessionError {
        NewSessionError::MetadataError(scylla::errors::MetadataError::ConnectionPoolError(
            ConnectionPoolError::Broken {
                last_connection_error: last,
            },
        ))
    }

    fn rustls_io(error: rustls::Error) -> ConnectionError {
        ConnectionError::IoError(std::sync::Arc::new(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            error,
        )))
    }

    #[test]
    fn a_tls_failure_at_connect_is_reported_as_such_with_the_drivers_error_kept() {
        use rustls::CertificateError;
        use std::error::Error as _;
        let cases = [
            (
                rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
                "UntrustedCertificate",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::Expired),
                "UntrustedCertificate",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
                "HostnameMismatch",
            ),
            (
                rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
                "ServerNotTls",
            ),
            (
                rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired),
                "ClientCertificateRefused",
            ),
            (
                rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure),
                "Other",
            ),
        ];
        for (rustls_error, expected) in cases {
            let driver = session_failure(rustls_io(rustls_error));
            let error = connect_error("n1:9042".into(), true, driver.clone());
            let CassandraError::TlsHandshake { failure, .. } = &error else {
                panic!("{error:?}");
            };
            let name = format!("{failure:?}");
            assert!(name.starts_with(expected), "{name}, not {expected}");
            assert!(error.to_string().contains("n1:9042"), "{error}");
            assert_eq!(
                error.source().map(ToString::to_string),
                Some(driver.to_string()),
                "the driver's error is the source"
            );
        }
        // Not a TLS matter: the plain connect error, with or without TLS configured.
        for tls in [false, true] {
            let error = connect_error(
                "n1:9042".into(),
                tls,
                session_failure(ConnectionError::ConnectTimeout),
            );
            assert!(matches!(error, CassandraError::Connect { .. }), "{error:?}");
        }
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
