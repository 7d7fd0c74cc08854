//! Why a request failed, in the terms a Cassandra coordinator reports it.
//!
//! [`lock_core::LockStorage`] only needs the kind of a failure ([`lock_core::Error`]); a
//! CQL front end needs what Cassandra's error frames carry besides: the consistency
//! level, how many replicas it needed and how many were alive or answered.
//! [`MemoryClient::execute_at`](crate::MemoryClient::execute_at) returns both.

use lock_core::Error;

use crate::config::Consistency;

/// The coordinator's account of a failed request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureDetail {
    /// Refused before anything was sent (Cassandra's `UnavailableException`): fewer of the
    /// row's replicas were up, or reachable from the client, than the level needs.
    Unavailable {
        /// The level asked for.
        consistency: Consistency,
        /// How many replicas it needs.
        required: usize,
        /// How many were up and reachable.
        alive: usize,
    },
    /// A write or delete timed out (`WriteTimeoutException`): it may have been applied on
    /// some replicas.
    WriteTimeout {
        /// The level asked for.
        consistency: Consistency,
        /// How many acknowledgements it needs.
        required: usize,
        /// How many arrived in time.
        received: usize,
    },
    /// A read, or the blocking read repair that follows it, timed out
    /// (`ReadTimeoutException`); the simulator reports it as
    /// [`lock_core::Error::StorageUnavailable`] because a read applies nothing.
    ReadTimeout {
        /// The level asked for.
        consistency: Consistency,
        /// How many replica answers it needs.
        required: usize,
        /// How many arrived in time.
        received: usize,
        /// Whether the replicas' data arrived (true when the read repair timed out).
        data_present: bool,
    },
    /// The simulator lost track of the request (a bug; never expected).
    Lost,
}

/// A failed request: lock-core's error and the coordinator's detail.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{error}")]
pub struct RequestFailure {
    error: Error,
    detail: FailureDetail,
}

impl RequestFailure {
    pub(crate) fn new(error: Error, detail: FailureDetail) -> Self {
        RequestFailure { error, detail }
    }

    /// The error [`lock_core::LockStorage`] reports for this failure.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// What the coordinator knew about it.
    pub fn detail(&self) -> &FailureDetail {
        &self.detail
    }

    /// The error, without the detail.
    pub fn into_error(self) -> Error {
        self.error
    }
}

impl From<RequestFailure> for Error {
    fn from(failure: RequestFailure) -> Self {
        failure.error
    }
}
