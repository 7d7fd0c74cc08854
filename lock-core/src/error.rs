//! The crate's one error type.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::id::LockId;

/// Everything that can go wrong in `lock-core`: bad input, bad configuration, storage faults
/// and lost leases.
///
/// Storage faults come in three kinds, because the lock algorithms must treat them
/// differently:
///
/// * [`Error::StorageUnavailable`]: the request was **not** applied (for example not enough
///   replicas were alive). Retrying may help.
/// * [`Error::StorageRejected`]: the request was **not** applied and retrying will not help
///   (a missing table, a bad query, no permission).
/// * [`Error::StorageOutcomeUnknown`]: the request timed out; a write may or may not have
///   landed on some replicas. The algorithms assume it may have.
///
/// The type is `Clone + Eq + Hash` so that state machines can carry it in their outcomes and
/// a model checker can hash those states.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A lock id was empty, too long or contained a control character, an invisible or
    /// direction-changing format character, or a line or paragraph separator.
    #[error(
        "invalid lock id {value:?}: {reason}; use 1 to {max} bytes of UTF-8 without control, \
         format (invisible or direction-changing) or line-separator characters",
        max = LockId::MAX_LEN
    )]
    InvalidLockId {
        /// The rejected value (cut to a readable length).
        value: String,
        /// Why it was rejected: for a bad character, which one and where.
        reason: String,
    },

    /// An owner id was empty, too long or contained characters outside the allowed set.
    #[error(
        "invalid owner id {value:?}: {reason}; use 1 to {max} characters from [A-Za-z0-9._:@-]",
        max = crate::id::OwnerId::MAX_LEN
    )]
    InvalidOwnerId {
        /// The rejected value (cut to a readable length).
        value: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A column name read from storage is not a queue column (`20 digits` + owner id).
    #[error("malformed queue column {column:?}: {reason}")]
    MalformedColumn {
        /// The column name as read.
        column: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A datagram received on a wake-up hint listener is not a hint
    /// ([`crate::hint::WakeHint::decode`]); the listener drops it.
    #[error(
        "malformed wake-up hint: {reason}; only lockers of this library should send to a hint \
         listener's address"
    )]
    MalformedWakeHint {
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A configuration value is out of range or inconsistent with another one.
    #[error("invalid configuration: `{field}` {reason}")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// What is wrong and what would be accepted.
        reason: String,
    },

    /// A storage request was not applied; retrying later may succeed.
    #[error(
        "storage unavailable during {operation}: {message} (the request was not applied; retry later)"
    )]
    StorageUnavailable {
        /// What was being done (`"write queue cell"`, `"read main row"`, ...).
        operation: String,
        /// The storage's own description of the fault.
        message: String,
        /// The storage driver's own error, kept for [`std::error::Error::source`], if the
        /// backend passed it ([`Error::with_source`]).
        #[source]
        source: Option<ErrorSource>,
    },

    /// A storage request was refused and retrying will not help.
    #[error(
        "storage rejected {operation}: {message} (check the schema, the permissions and the configuration)"
    )]
    StorageRejected {
        /// What was being done.
        operation: String,
        /// The storage's own description of the fault.
        message: String,
        /// The storage driver's own error, kept for [`std::error::Error::source`], if the
        /// backend passed it ([`Error::with_source`]).
        #[source]
        source: Option<ErrorSource>,
    },

    /// A storage request timed out: a write may or may not have been applied.
    #[error(
        "storage outcome unknown during {operation}: {message} (a write may or may not have been applied)"
    )]
    StorageOutcomeUnknown {
        /// What was being done.
        operation: String,
        /// The storage's own description of the fault.
        message: String,
        /// The storage driver's own error, kept for [`std::error::Error::source`], if the
        /// backend passed it ([`Error::with_source`]).
        #[source]
        source: Option<ErrorSource>,
    },

    /// The lease of a held lock ran out before it could be renewed, or its cell disappeared:
    /// another owner may now hold the lock.
    #[error(
        "lock {lock_id} was lost: {reason}; another owner may hold it now, stop touching the resource"
    )]
    LockLost {
        /// The lock that was lost.
        lock_id: LockId,
        /// Why the lease counts as lost.
        reason: String,
    },

    /// A bug in lock-core: a state machine broke its own contract. Please report it.
    #[error("internal error in lock-core: {0}; please report it")]
    Internal(&'static str),

    /// The async driver needs a Tokio runtime and none was running.
    #[error(
        "no Tokio runtime is running: {0}; call it from inside a Tokio runtime with its timer \
         enabled (`#[tokio::main]`, `#[tokio::test]`, or `Runtime::block_on` on a runtime built \
         with `enable_time`)"
    )]
    NoRuntime(&'static str),

    /// The locker was shut down (`Locker::shutdown`): it takes no more locks, and
    /// an acquisition still waiting when it was shut down gave up.
    #[error(
        "the locker was shut down (Locker::shutdown); it takes no more locks: build a new \
         locker to lock again"
    )]
    ShutDown,

    /// A task asked to wait for a lock that it already holds through this locker (or one of
    /// its clones), or is already acquiring: it would wait for itself forever. The lock is
    /// not re-entrant, as Tokio's `Mutex` is not.
    #[error(
        "lock {lock_id} is already held (or being acquired) by this same task through this \
         locker, and it is not re-entrant: waiting would never end; use the guard the task \
         has, release it first, or call try_lock or lock_timeout where the task may hold it"
    )]
    ReentrantLock {
        /// The lock asked for again.
        lock_id: LockId,
    },
}

impl Error {
    /// True for the storage faults that a retry may cure: unavailable and outcome-unknown.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::StorageUnavailable { .. } | Error::StorageOutcomeUnknown { .. }
        )
    }

    /// True when a write may have been applied even though it reported an error.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::StorageOutcomeUnknown { .. })
    }

    /// True for every storage fault, whatever its kind.
    pub fn is_storage(&self) -> bool {
        matches!(
            self,
            Error::StorageUnavailable { .. }
                | Error::StorageRejected { .. }
                | Error::StorageOutcomeUnknown { .. }
        )
    }

    /// Builds [`Error::StorageUnavailable`].
    pub fn unavailable(operation: impl Into<String>, message: impl Into<String>) -> Self {
        Error::StorageUnavailable {
            operation: operation.into(),
            message: message.into(),
            source: None,
        }
    }

    /// Builds [`Error::StorageRejected`].
    pub fn rejected(operation: impl Into<String>, message: impl Into<String>) -> Self {
        Error::StorageRejected {
            operation: operation.into(),
            message: message.into(),
            source: None,
        }
    }

    /// Builds [`Error::StorageOutcomeUnknown`].
    pub fn outcome_unknown(operation: impl Into<String>, message: impl Into<String>) -> Self {
        Error::StorageOutcomeUnknown {
            operation: operation.into(),
            message: message.into(),
            source: None,
        }
    }

    /// Attaches the storage driver's own error to a storage fault, so that
    /// [`std::error::Error::source`] leads to it (and through it to its own sources). Other
    /// variants are returned unchanged.
    #[must_use]
    pub fn with_source(mut self, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        if let Error::StorageUnavailable { source, .. }
        | Error::StorageRejected { source, .. }
        | Error::StorageOutcomeUnknown { source, .. } = &mut self
        {
            *source = Some(ErrorSource(Arc::new(error)));
        }
        self
    }

    pub(crate) fn config(field: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidConfig {
            field,
            reason: reason.into(),
        }
    }
}

/// A storage driver's error behind a storage fault, shared so that [`Error`] stays `Clone`.
///
/// It compares and hashes by its message, so that [`Error`] can stay `Eq + Hash` for the
/// state machines and the model checker: two faults with the same text are the same fault
/// to the lock.
#[derive(Clone, Debug)]
pub struct ErrorSource(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl ErrorSource {
    /// The driver's error.
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for ErrorSource {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(formatter)
    }
}

impl std::error::Error for ErrorSource {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for ErrorSource {}

impl Hash for ErrorSource {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_string().hash(state);
    }
}

/// Cuts a rejected value to a length that is still readable in an error message.
pub(crate) fn excerpt(value: &str) -> String {
    const SHOWN: usize = 64;
    match value.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the driver's own words")]
    struct DriverError;

    #[test]
    fn a_storage_fault_keeps_its_source_and_compares_by_text() {
        let plain = Error::unavailable("write queue cell", "no quorum");
        assert!(std::error::Error::source(&plain).is_none());
        let sourced = plain.clone().with_source(DriverError);
        let source = std::error::Error::source(&sourced).expect("a source");
        assert_eq!(source.to_string(), "the driver's own words");
        assert_ne!(plain, sourced);
        assert_eq!(sourced, plain.with_source(DriverError));
        assert_eq!(
            sourced.to_string(),
            Error::unavailable("write queue cell", "no quorum").to_string()
        );
        let not_storage = Error::Internal("x").with_source(DriverError);
        assert!(std::error::Error::source(&not_storage).is_none());
    }
}
