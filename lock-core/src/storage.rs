//! The storage vocabulary the algorithms speak, and the async trait a backend implements.
//!
//! The model is Cassandra's (docs/algorithm.md, section "The storage model"): a *row* holds *cells* sorted by column name;
//! a cell has a value, a write timestamp chosen by the writer and an optional TTL. The
//! algorithms need exactly three operations: write one cell, delete one cell (a tombstone
//! with the writer's timestamp) and read a bounded slice of a row in column order.
//! [`merge`] holds the one rule by which every store here picks between two versions of a
//! cell: Cassandra 5.0's.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::column::ColumnName;
use crate::config::LockConfig;
use crate::error::Error;
use crate::id::LockId;
use crate::time::Timestamp;

pub mod merge;

pub use merge::{Expiry, StateRef, VersionRef};

/// Which of a lock's rows a cell lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowKind {
    /// The queue row of the new algorithm: one cell per waiting or holding owner, named by
    /// [`crate::QueueColumn`].
    Queue,
    /// The main row: the cell of the owner holding the lock, named by its owner id.
    Main,
    /// The shadow row of the baseline algorithm, where contenders meet.
    Shadow,
    /// The fencing row: one cell whose value only grows.
    Fence,
    /// The time service's `GlobalTime` cell.
    GlobalTime,
    /// A work queue's items enqueued in one time bucket, named like queue cells (enqueue
    /// time, then item id), the payload as value (docs/work-queue.md).
    WorkItems,
    /// A work queue's completion records of one time bucket: one cell per completed item,
    /// the completing claim's fencing token as value and write timestamp.
    WorkDone,
    /// A work queue's two bookkeeping cells: the oldest bucket ever enqueued into, and the
    /// floor below which every bucket is known empty.
    WorkFloor,
}

impl RowKind {
    /// Every kind, in a fixed order.
    pub const ALL: [RowKind; 8] = [
        RowKind::Queue,
        RowKind::Main,
        RowKind::Shadow,
        RowKind::Fence,
        RowKind::GlobalTime,
        RowKind::WorkItems,
        RowKind::WorkDone,
        RowKind::WorkFloor,
    ];

    /// A short lowercase name, used in table names and messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            RowKind::Queue => "queue",
            RowKind::Main => "main",
            RowKind::Shadow => "shadow",
            RowKind::Fence => "fence",
            RowKind::GlobalTime => "global_time",
            RowKind::WorkItems => "work_items",
            RowKind::WorkDone => "work_done",
            RowKind::WorkFloor => "work_floor",
        }
    }
}

/// The key of one row: its kind and the lock it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowKey {
    /// Which row of the lock.
    pub kind: RowKind,
    /// Which lock (for [`RowKind::GlobalTime`], the name of the time domain; for the work
    /// queue's kinds, the queue's name, followed by `/` and the bucket for items and
    /// completions).
    pub lock_id: LockId,
}

impl RowKey {
    /// The key of `lock_id`'s row of `kind`.
    pub fn new(kind: RowKind, lock_id: LockId) -> Self {
        RowKey { kind, lock_id }
    }
}

impl fmt::Display for RowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} row of {}", self.kind.as_str(), self.lock_id)
    }
}

/// A cell's time to live, in whole seconds as CQL's `USING TTL` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ttl(NonZeroU32);

impl Ttl {
    /// Cassandra's largest TTL: 20 years.
    pub const MAX_SECONDS: u32 = 630_720_000;

    /// A TTL of `seconds`, which must be between 1 and [`Ttl::MAX_SECONDS`].
    pub fn from_secs(seconds: u32) -> Result<Self, Error> {
        match NonZeroU32::new(seconds) {
            Some(seconds) if seconds.get() <= Self::MAX_SECONDS => Ok(Ttl(seconds)),
            _ => Err(Error::config(
                "lease_ttl",
                format!(
                    "must be 1 to {} whole seconds, got {seconds}",
                    Self::MAX_SECONDS
                ),
            )),
        }
    }

    /// A TTL equal to `duration`, which must be a whole number of seconds in range.
    pub fn from_duration(duration: Duration) -> Result<Self, Error> {
        if duration.subsec_nanos() != 0 {
            return Err(Error::config(
                "lease_ttl",
                format!(
                    "must be a whole number of seconds (CQL TTLs are in seconds), got {duration:?}"
                ),
            ));
        }
        let seconds = u32::try_from(duration.as_secs()).unwrap_or(u32::MAX);
        Ttl::from_secs(seconds)
    }

    /// The TTL in seconds.
    pub fn as_secs(self) -> u32 {
        self.0.get()
    }

    /// The TTL as a duration.
    pub fn as_duration(self) -> Duration {
        Duration::from_secs(u64::from(self.0.get()))
    }
}

/// A live cell as returned by a read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cell {
    /// The cell's column name.
    pub column: ColumnName,
    /// The cell's value.
    pub value: Vec<u8>,
    /// The write timestamp of the version that won.
    pub write_timestamp: Timestamp,
}

/// Write (insert or overwrite) one cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CellWrite {
    /// The row to write into.
    pub row: RowKey,
    /// The cell's column name.
    pub column: ColumnName,
    /// The value.
    pub value: Vec<u8>,
    /// The write timestamp (`USING TIMESTAMP`), decisive for last-write-wins.
    pub timestamp: Timestamp,
    /// The time to live (`USING TTL`); `None` for a cell that never expires.
    pub ttl: Option<Ttl>,
}

/// Delete one cell: write a tombstone with the given timestamp.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CellDelete {
    /// The row to delete from.
    pub row: RowKey,
    /// The cell's column name.
    pub column: ColumnName,
    /// The tombstone's timestamp; it shadows versions written with a smaller or equal one.
    pub timestamp: Timestamp,
}

/// Read the live cells of a row in column order: at most `limit` of them, starting at
/// `start` (inclusive) or at the beginning of the row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowRead {
    /// The row to read.
    pub row: RowKey,
    /// The first column to return, if not the row's first.
    pub start: Option<ColumnName>,
    /// The most cells to return.
    pub limit: NonZeroU32,
}

impl RowRead {
    /// The first `limit` cells of `row` (at least one).
    pub fn first(row: RowKey, limit: u32) -> Self {
        RowRead {
            row,
            start: None,
            limit: NonZeroU32::new(limit).unwrap_or(NonZeroU32::MIN),
        }
    }

    /// The cell named `column` in `row`, if it is live, as a one-cell slice.
    pub fn single(row: RowKey, column: ColumnName) -> Self {
        RowRead {
            row,
            start: Some(column),
            limit: NonZeroU32::MIN,
        }
    }
}

/// One storage operation, as the state machines ask for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StorageRequest {
    /// Write one cell.
    Write(CellWrite),
    /// Delete one cell.
    Delete(CellDelete),
    /// Read a slice of a row.
    Read(RowRead),
}

impl StorageRequest {
    /// The row the request touches.
    pub fn row(&self) -> &RowKey {
        match self {
            StorageRequest::Write(write) => &write.row,
            StorageRequest::Delete(delete) => &delete.row,
            StorageRequest::Read(read) => &read.row,
        }
    }

    /// A short description for error messages and traces, such as `"write queue row of a"`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.verb(), self.row())
    }

    /// What the request does to its row: `"write"`, `"delete from"` or `"read"`.
    pub fn verb(&self) -> &'static str {
        match self {
            StorageRequest::Write(_) => "write",
            StorageRequest::Delete(_) => "delete from",
            StorageRequest::Read(_) => "read",
        }
    }
}

/// The successful answer to a [`StorageRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StorageResponse {
    /// A write or delete was acknowledged by enough replicas.
    Done,
    /// The live cells a read found, in column order.
    Cells(Vec<Cell>),
}

impl StorageResponse {
    /// The cells a read found; none for an acknowledged write or delete.
    pub fn into_cells(self) -> Vec<Cell> {
        match self {
            StorageResponse::Cells(cells) => cells,
            StorageResponse::Done => Vec::new(),
        }
    }
}

/// A storage backend: an in-memory quorum simulator, a Cassandra or ScyllaDB cluster.
///
/// Implementations must give each operation the consistency the algorithms rely on
/// (QUORUM writes and reads, or an equivalent such as LOCAL_QUORUM within one data centre),
/// honour the caller's write timestamps and TTLs exactly, and return errors of the right
/// kind: [`Error::StorageUnavailable`] or [`Error::StorageRejected`] only when the request
/// was certainly not applied, [`Error::StorageOutcomeUnknown`] when it may have been.
#[async_trait]
pub trait LockStorage: Send + Sync + 'static {
    /// Writes one cell.
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error>;

    /// Deletes one cell by writing a tombstone.
    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error>;

    /// Reads a slice of a row: live cells only, in column order.
    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error>;

    /// Checks that this backend suits a lock configured with `config` (its timeouts, what
    /// its schema keeps, ...). A `Locker` calls it once, before its first
    /// acquisition sends anything, and returns its error from that acquisition (and from
    /// the next ones, until a check succeeds). The default accepts every configuration.
    ///
    /// Return [`Error::InvalidConfig`] for a setting that does not suit, and a storage
    /// error if the check itself could not be made.
    async fn check_config(&self, _config: &LockConfig) -> Result<(), Error> {
        Ok(())
    }

    /// Runs any [`StorageRequest`] through the three methods above.
    async fn execute(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        match request {
            StorageRequest::Write(write) => {
                self.write_cell(write).await.map(|()| StorageResponse::Done)
            }
            StorageRequest::Delete(delete) => self
                .delete_cell(delete)
                .await
                .map(|()| StorageResponse::Done),
            StorageRequest::Read(read) => self.read_row(read).await.map(StorageResponse::Cells),
        }
    }
}

#[async_trait]
impl<S: LockStorage + ?Sized> LockStorage for Arc<S> {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        (**self).write_cell(write).await
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        (**self).delete_cell(delete).await
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        (**self).read_row(read).await
    }

    async fn check_config(&self, config: &LockConfig) -> Result<(), Error> {
        (**self).check_config(config).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_are_whole_seconds_in_range() {
        assert_eq!(
            Ttl::from_secs(10).unwrap().as_duration(),
            Duration::from_secs(10)
        );
        assert!(Ttl::from_secs(0).is_err());
        assert!(Ttl::from_secs(Ttl::MAX_SECONDS + 1).is_err());
        assert!(Ttl::from_duration(Duration::from_millis(1500)).is_err());
        assert!(Ttl::from_duration(Duration::from_secs(u64::MAX)).is_err());
        assert_eq!(
            Ttl::from_duration(Duration::from_secs(3))
                .unwrap()
                .as_secs(),
            3
        );
    }

    #[test]
    fn reads_are_never_unbounded() {
        let row = RowKey::new(RowKind::Queue, LockId::new("l").unwrap());
        assert_eq!(RowRead::first(row.clone(), 0).limit.get(), 1);
        assert_eq!(RowRead::first(row, 8).limit.get(), 8);
    }

    #[test]
    fn requests_describe_themselves() {
        let row = RowKey::new(RowKind::Main, LockId::new("account:1").unwrap());
        let read = StorageRequest::Read(RowRead::first(row, 2));
        assert_eq!(read.describe(), "read main row of account:1");
    }
}
