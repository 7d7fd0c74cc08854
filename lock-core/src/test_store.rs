//! A deterministic single-node store for lock-core's own tests: last-write-wins cells with
//! tombstones and TTLs, judged on a clock the test controls. The full quorum simulator lives
//! in `lock-storage-memory`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::column::ColumnName;
use crate::driver::{Clock, VirtualClock};
use crate::error::Error;
use crate::storage::{
    Cell, CellDelete, CellWrite, LockStorage, RowKey, RowRead, StorageRequest, StorageResponse,
    VersionRef,
};
use crate::time::Timestamp;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Version {
    value: Vec<u8>,
    timestamp: Timestamp,
    tombstone: bool,
    expires_at: Option<Timestamp>,
}

impl Version {
    fn live(&self, now: Timestamp) -> bool {
        !self.tombstone && self.expires_at.is_none_or(|at| now < at)
    }

    /// The version as the merge rule sees it (expiry in microseconds of the store's clock,
    /// tombstones without a deletion time).
    fn as_merged(&self) -> VersionRef<'_> {
        if self.tombstone {
            VersionRef::tombstone(self.timestamp, 0)
        } else {
            let expires_at = self.expires_at.map(Timestamp::as_micros);
            VersionRef::live(self.timestamp, &self.value, expires_at)
        }
    }

    /// True if `self` replaces `other` by lock-core's merge rule ([`crate::storage::merge`]).
    fn beats(&self, other: &Version) -> bool {
        self.as_merged().supersedes(&other.as_merged())
    }
}

/// The cells, keyed by row and column.
#[derive(Debug, Default)]
pub(crate) struct Cells(BTreeMap<(RowKey, ColumnName), Version>);

impl Cells {
    fn put(&mut self, row: RowKey, column: ColumnName, version: Version) {
        let key = (row, column);
        if self.0.get(&key).is_none_or(|old| version.beats(old)) {
            self.0.insert(key, version);
        }
    }

    /// Applies one request at wall time `now`.
    pub(crate) fn apply(&mut self, request: StorageRequest, now: Timestamp) -> StorageResponse {
        match request {
            StorageRequest::Write(CellWrite {
                row,
                column,
                value,
                timestamp,
                ttl,
            }) => {
                let expires_at = ttl.map(|ttl| now + ttl.as_duration());
                let version = Version {
                    value,
                    timestamp,
                    tombstone: false,
                    expires_at,
                };
                self.put(row, column, version);
                StorageResponse::Done
            }
            StorageRequest::Delete(CellDelete {
                row,
                column,
                timestamp,
            }) => {
                let version = Version {
                    value: Vec::new(),
                    timestamp,
                    tombstone: true,
                    expires_at: None,
                };
                self.put(row, column, version);
                StorageResponse::Done
            }
            StorageRequest::Read(read) => StorageResponse::Cells(self.read(&read, now)),
        }
    }

    pub(crate) fn read(&self, read: &RowRead, now: Timestamp) -> Vec<Cell> {
        self.0
            .iter()
            .filter(|((row, column), _)| {
                *row == read.row && read.start.as_ref().is_none_or(|start| column >= start)
            })
            .filter(|(_, version)| version.live(now))
            .take(read.limit.get() as usize)
            .map(|((_, column), version)| Cell {
                column: column.clone(),
                value: version.value.clone(),
                write_timestamp: version.timestamp,
            })
            .collect()
    }

    /// Live cells of `row`, whatever their number.
    pub(crate) fn live_columns(&self, row: &RowKey, now: Timestamp) -> Vec<ColumnName> {
        self.0
            .iter()
            .filter(|((cell_row, _), version)| cell_row == row && version.live(now))
            .map(|((_, column), _)| column.clone())
            .collect()
    }
}

/// How a test client's requests behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Link {
    /// Applied at once.
    Up,
    /// Refused at once with [`Error::StorageUnavailable`].
    Refused,
    /// Never answered (the driver's request timeout turns this into outcome-unknown).
    Silent,
}

/// One shared store judged on one virtual clock.
#[derive(Clone)]
pub(crate) struct TestStore {
    cells: Arc<Mutex<Cells>>,
    clock: VirtualClock,
}

impl TestStore {
    pub(crate) fn new(clock: VirtualClock) -> Self {
        TestStore {
            cells: Arc::default(),
            clock,
        }
    }

    /// A client handle whose link can be cut.
    pub(crate) fn client(&self) -> TestClient {
        TestClient {
            store: self.clone(),
            link: Arc::new(Mutex::new(Link::Up)),
            sent: Arc::default(),
        }
    }

    pub(crate) fn live_columns(&self, row: &RowKey) -> Vec<ColumnName> {
        let now = self.clock.now().timestamp;
        self.lock().live_columns(row, now)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cells> {
        self.cells.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A client of a [`TestStore`].
#[derive(Clone)]
pub(crate) struct TestClient {
    store: TestStore,
    link: Arc<Mutex<Link>>,
    sent: Arc<Mutex<Vec<StorageRequest>>>,
}

impl TestClient {
    pub(crate) fn set_link(&self, link: Link) {
        *self.link.lock().unwrap_or_else(PoisonError::into_inner) = link;
    }

    /// Every request this client (and its clones) was asked to send, in order.
    pub(crate) fn sent(&self) -> Vec<StorageRequest> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    async fn apply(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.clone());
        let link = *self.link.lock().unwrap_or_else(PoisonError::into_inner);
        match link {
            Link::Up => {
                let now = self.store.clock.now().timestamp;
                Ok(self.store.lock().apply(request, now))
            }
            Link::Refused => Err(Error::unavailable(
                request.describe(),
                "link cut by the test",
            )),
            Link::Silent => std::future::pending().await,
        }
    }
}

#[async_trait]
impl LockStorage for TestClient {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        self.apply(StorageRequest::Write(write)).await.map(|_| ())
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        self.apply(StorageRequest::Delete(delete)).await.map(|_| ())
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        match self.apply(StorageRequest::Read(read)).await? {
            StorageResponse::Cells(cells) => Ok(cells),
            StorageResponse::Done => Ok(Vec::new()),
        }
    }
}
