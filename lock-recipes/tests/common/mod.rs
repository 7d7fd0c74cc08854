//! What the recipes' tests on the simulated cluster share: a client whose link to the
//! cluster a test can cut, and lockers on one simulated cluster.
// Each test file compiles this module on its own and uses only some of it.
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use fair_lock::Locker;
use lock_core::storage::{Cell, CellDelete, CellWrite, RowRead, StorageRequest, StorageResponse};
use lock_core::{Error, LockConfig, LockStorage, Timestamp};
use lock_storage_memory::{ClientClock, ClusterConfig, MemoryClient, MemoryCluster};

/// The wall time the test clusters start at.
pub const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

/// A simulated three-replica cluster with no latency: requests are answered at once.
pub fn cluster() -> MemoryCluster {
    MemoryCluster::new(ClusterConfig {
        epoch: EPOCH,
        ..ClusterConfig::default()
    })
    .unwrap()
}

/// How a [`Linked`] client's requests fare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Sent to the cluster.
    Up,
    /// Refused at once with `StorageUnavailable`, as by a driver with no connection.
    Refused,
    /// Never answered: the locker's request timeout turns this into outcome-unknown.
    Silent,
}

/// A client of the simulated cluster whose link the test sets; clones share the link.
#[derive(Clone, Debug)]
pub struct Linked {
    client: MemoryClient,
    link: Arc<Mutex<Link>>,
}

impl Linked {
    /// A new client of `cluster`, its link up.
    pub fn new(cluster: &MemoryCluster) -> Self {
        Linked {
            client: cluster.client(),
            link: Arc::new(Mutex::new(Link::Up)),
        }
    }

    /// The clock of the simulated machine the client runs on.
    pub fn clock(&self) -> ClientClock {
        self.client.clock()
    }

    /// Sets how the client's requests (and its clones') fare from now on.
    pub fn set_link(&self, link: Link) {
        *self.link.lock().unwrap_or_else(PoisonError::into_inner) = link;
    }

    /// A locker on this client with `config` and `seed` (each locker of a test its own),
    /// on the client's clock.
    pub fn locker(&self, config: LockConfig, seed: u64) -> Result<Locker<Linked>, Error> {
        Locker::builder(self.clone())
            .config(config)
            .clock(Arc::new(self.clock()))
            .replay_owner_ids_unsafe(seed)
            .build()
    }

    async fn send(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        let link = *self.link.lock().unwrap_or_else(PoisonError::into_inner);
        match link {
            Link::Up => self.client.execute(request).await,
            Link::Refused => Err(Error::unavailable(
                request.describe(),
                "link cut by the test",
            )),
            Link::Silent => std::future::pending().await,
        }
    }
}

#[async_trait]
impl LockStorage for Linked {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        self.send(StorageRequest::Write(write)).await.map(|_| ())
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        self.send(StorageRequest::Delete(delete)).await.map(|_| ())
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        Ok(self.send(StorageRequest::Read(read)).await?.into_cells())
    }
}
