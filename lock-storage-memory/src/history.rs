//! A record of a run, for replaying a failing case from its seed and comparing runs.

use std::time::Duration;

use lock_core::ColumnName;
use lock_core::Error;
use lock_core::storage::{RowKey, StorageRequest, StorageResponse};

use crate::id::{ClientId, ReplicaId};
use crate::version::CellVersion;

/// One recorded event, at a simulated time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Simulated time since the cluster was created.
    pub at: Duration,
    /// What happened.
    pub event: HistoryEvent,
}

/// Why a replica applied a mutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApplyCause {
    /// A client's write or delete.
    Request,
    /// Read repair by a read's coordinator.
    ReadRepair,
    /// Hinted handoff, after the replica came back.
    Hint,
}

/// Something the simulation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryEvent {
    /// A client sent a request.
    Requested {
        /// Who asked.
        client: ClientId,
        /// The request's sequence number in this cluster.
        request: u64,
        /// What was asked.
        operation: StorageRequest,
    },
    /// A replica merged a version of a cell into its store.
    Applied {
        /// Where.
        replica: ReplicaId,
        /// The row.
        row: RowKey,
        /// The cell.
        column: ColumnName,
        /// The version merged in (before judging by the replica's clock).
        version: CellVersion,
        /// Why.
        cause: ApplyCause,
    },
    /// A request's coordinator answered.
    Answered {
        /// Who asked.
        client: ClientId,
        /// The request's sequence number.
        request: u64,
        /// The answer.
        result: Result<StorageResponse, Error>,
    },
}
