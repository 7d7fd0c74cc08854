//! A test storage client over [`Cells`], for the driver's own tests: requests applied at
//! once, refused, or held, on a clock the test controls.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::{Clock, VirtualClock};
use lock_core::column::ColumnName;
use lock_core::error::Error;
use lock_core::storage::{
    Cell, CellDelete, CellWrite, LockStorage, RowKey, RowRead, StorageRequest, StorageResponse,
};
use lock_core::test_store::Cells;

/// How a test client's requests behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Link {
    /// Applied at once.
    Up,
    /// Refused at once with [`Error::StorageUnavailable`].
    Refused,
    /// Never answered (the driver's request timeout turns this into outcome-unknown).
    Silent,
    /// Applied and answered this long after it is sent (on Tokio's clock, which the tests
    /// pause: a network with this round trip).
    Delayed(std::time::Duration),
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
            Link::Delayed(round_trip) => {
                tokio::time::sleep(round_trip).await;
                let now = self.store.clock.now().timestamp;
                Ok(self.store.lock().apply(request, now))
            }
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
