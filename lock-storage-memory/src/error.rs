//! The crate's one error type, for bad configuration and unknown ids.
//!
//! Storage requests never return it: [`lock_core::LockStorage`] methods return
//! [`lock_core::Error`], whose storage variants say whether a write may have been applied.

use crate::id::{ClientId, ReplicaId};

/// What can go wrong when building a cluster or injecting a fault.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A configuration value is out of range or inconsistent with another one.
    #[error("invalid cluster configuration: `{field}` {reason}")]
    InvalidConfig {
        /// The offending field, named as in [`crate::ClusterConfig`] or [`crate::ClientOptions`].
        field: &'static str,
        /// What is wrong and what would be accepted.
        reason: String,
    },

    /// A replica id that the cluster does not have.
    #[error("there is no {replica} in a cluster of {replicas} replicas (ids run from 0 to {last})", last = replicas.saturating_sub(1))]
    UnknownReplica {
        /// The id asked for.
        replica: ReplicaId,
        /// How many replicas the cluster has.
        replicas: usize,
    },

    /// A network endpoint (the CQL front end) could not listen where it was asked to.
    #[error("cannot listen on {address}: {reason}")]
    Network {
        /// The address asked for.
        address: String,
        /// The operating system's reason.
        reason: String,
    },

    /// A client id that was not handed out by this cluster.
    #[error("there is no {client} in this cluster; create clients with `MemoryCluster::client`")]
    UnknownClient {
        /// The id asked for.
        client: ClientId,
    },
}

impl MemoryError {
    pub(crate) fn config(field: &'static str, reason: impl Into<String>) -> Self {
        MemoryError::InvalidConfig {
            field,
            reason: reason.into(),
        }
    }
}
