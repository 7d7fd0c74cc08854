//! The one error type of lockctl.

use lock_local_cluster::ClusterError;
use lock_storage_cassandra::CassandraError;
use lock_storage_memory::MemoryError;

use crate::PASSWORD_VARIABLE;

/// Everything that can stop a lockctl command. Each message says what went wrong and, where
/// there is something to do, what; the binary prints it after `lockctl: ` and exits with
/// status 1. (Bad command-line syntax, an unknown option or a value that does not parse is
/// clap's usage error, status 2.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option's value cannot work. Found before anything connects or starts.
    #[error("{option} {reason}")]
    InvalidOption {
        /// The option, as written on the command line (`--keyspace`).
        option: &'static str,
        /// What is wrong, and what would be accepted, to follow the option's name: `is 1;
        /// give ...`.
        reason: String,
    },

    /// `--username` was given, but its password is not in the environment.
    #[error(
        "--username {username} needs its password in the environment variable \
         {PASSWORD_VARIABLE} (set, and valid UTF-8); lockctl never takes a password on the \
         command line"
    )]
    MissingPassword {
        /// The user name given.
        username: String,
    },

    /// The lock library refused or failed: a storage request failed or timed out, the
    /// lock configuration is invalid...
    #[error(transparent)]
    Lock(#[from] lock_core::Error),

    /// Cassandra: the connection failed.
    #[error(transparent)]
    Cassandra(#[from] CassandraError),

    /// The local cluster could not start (`java` missing, ports in use, a node that did not
    /// come up...).
    #[error(transparent)]
    Cluster(#[from] ClusterError),

    /// The simulated cluster of the demonstration mode.
    #[error("the simulated cluster: {0}")]
    Simulation(#[from] MemoryError),

    /// An operating-system call failed: writing to standard output, starting the async
    /// runtime, installing signal handlers.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl Error {
    /// `error`, with a configuration field that an option sets renamed to that option:
    /// `fields` pairs a field of a configuration (`"keyspace"`) with the option that sets it
    /// (`"--keyspace"`). Any other error is returned as it is.
    pub(crate) fn from_config(error: CassandraError, fields: &[(&str, &'static str)]) -> Error {
        if let CassandraError::InvalidConfig { field, reason } = &error
            && let Some((_, option)) = fields.iter().find(|(name, _)| name == field)
        {
            return Error::InvalidOption {
                option,
                reason: reason.clone(),
            };
        }
        // A TLS file that cannot be read or holds no usable PEM: its message names the
        // setting and the file, and follows the option's name.
        let tls_field = match &error {
            CassandraError::TlsFileUnreadable { field, .. }
            | CassandraError::TlsPemInvalid { field, .. }
            | CassandraError::TlsPemMissing { field, .. }
            | CassandraError::TlsSetup { field, .. } => Some(*field),
            _ => None,
        };
        if let Some(field) = tls_field
            && let Some((_, option)) = fields.iter().find(|(name, _)| *name == field)
        {
            return Error::InvalidOption {
                option,
                reason: format!("is refused: {error}"),
            };
        }
        Error::Cassandra(error)
    }

    /// `error` of the local cluster's configuration, with its field renamed to the option
    /// that sets it, as [`Error::from_config`] does.
    pub(crate) fn from_cluster_config(
        error: ClusterError,
        fields: &[(&str, &'static str)],
    ) -> Error {
        if let ClusterError::InvalidConfig { field, reason } = &error
            && let Some((_, option)) = fields.iter().find(|(name, _)| name == field)
        {
            return Error::InvalidOption {
                option,
                reason: reason.clone(),
            };
        }
        Error::Cluster(error)
    }
}
