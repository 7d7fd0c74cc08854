//! Apache Cassandra and ScyllaDB storage for the fair distributed lock.
#![doc = include_str!("../README.md")]

pub mod config;
pub mod cql;
pub mod error;
pub mod storage;
pub mod tls;

pub use config::{
    CassandraConfig, Credentials, LockConsistency, Replication, SchemaConfig, Speculation,
};
pub use cql::Statements;
pub use error::{CassandraError, RequestFault, TlsFailure, request_fault, storage_error};
pub use storage::CassandraStorage;
pub use tls::{PemSource, TlsConfig};

/// The driver this crate is built on, for the types [`CassandraStorage::session`] and the
/// error values expose.
pub use scylla;

/// The workspace README's usage example, compiled with this crate's doctests so that it
/// cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct WorkspaceReadme;
