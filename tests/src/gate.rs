//! A [`LockStorage`] wrapper that can pause, crash or cut off one client, on any backend.
//!
//! Every fault a test injects into a *client* (as opposed to the storage cluster) goes
//! through a [`Gate`]: it works the same on the memory simulator, on a real Cassandra
//! cluster and on any future backend, because it only sits between the locker and its
//! storage.
//!
//! * [`GateMode::Paused`] models a process that is frozen (a long GC pause, a stopped VM, a
//!   dead network link that will come back): requests wait until the gate reopens before
//!   they are sent, and answers that arrive meanwhile wait too. The locker's own
//!   `request_timeout` turns such a request into an unknown outcome, as it would in a
//!   frozen process.
//! * [`GateMode::Crashed`] models a process that died: nothing is sent any more and nothing
//!   ever answers. The cells it wrote stay until their TTL.
//! * [`GateMode::Refusing`] answers every request at once with
//!   [`lock_core::Error::StorageUnavailable`] (the request was not applied).
//!
//! A gate also counts requests and, if asked, logs each one that completed (for the
//! property tests, which need to know when a waiter's queue cell became visible).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use lock_core::storage::{
    Cell, CellDelete, CellWrite, RowKind, RowRead, StorageRequest, StorageResponse,
};
use lock_core::{ColumnName, Error, LockStorage};
use tokio::sync::Notify;
use tokio::time::Instant;

/// What a [`Gate`] does with requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GateMode {
    /// Requests pass through.
    #[default]
    Open,
    /// Requests (and answers) wait until the gate leaves this mode.
    Paused,
    /// Requests are never sent and never answered.
    Crashed,
    /// Requests fail at once as unavailable (not applied).
    Refusing,
}

/// What kind of operation a logged request was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A cell write.
    Write,
    /// A cell delete.
    Delete,
    /// A row read.
    Read,
}

/// One request that passed the gate and completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// When it went through the gate to the storage.
    pub sent: Instant,
    /// When its answer came back through the gate.
    pub answered: Instant,
    /// What it did.
    pub operation: Operation,
    /// Which row kind it touched.
    pub row: RowKind,
    /// The column written or deleted (none for reads).
    pub column: Option<ColumnName>,
    /// Where a read started, if not at the beginning of the row (none for writes).
    pub read_start: Option<ColumnName>,
    /// Whether it succeeded.
    pub ok: bool,
}

#[derive(Debug)]
struct Shared {
    mode: Mutex<GateMode>,
    /// Wakes requests waiting on a pause. Not a `watch` channel: that wakes its waiters in
    /// a random order, and the order in which paused requests resume must replay exactly.
    mode_changed: Notify,
    requests: AtomicU64,
    log: Option<Mutex<Vec<RequestRecord>>>,
}

impl Shared {
    fn mode(&self) -> GateMode {
        *self.mode.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The switch of a [`Gate`]; cheap to clone, usable from any task.
#[derive(Clone, Debug)]
pub struct GateHandle {
    shared: Arc<Shared>,
}

impl GateHandle {
    /// Switches the gate to `mode`; requests waiting on a pause re-examine it at once.
    pub fn set(&self, mode: GateMode) {
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mode;
        self.shared.mode_changed.notify_waiters();
    }

    /// The current mode.
    pub fn mode(&self) -> GateMode {
        self.shared.mode()
    }

    /// How many requests the locker has handed to the gate so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Every request that completed so far (empty unless the gate was built with a log).
    pub fn log(&self) -> Vec<RequestRecord> {
        self.shared.log.as_ref().map_or_else(Vec::new, |log| {
            log.lock().unwrap_or_else(PoisonError::into_inner).clone()
        })
    }
}

/// A [`LockStorage`] in front of another one, with a switch ([`GateHandle`]).
#[derive(Clone, Debug)]
pub struct Gate<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: LockStorage> Gate<S> {
    /// An open gate in front of `inner`, without a request log.
    pub fn new(inner: S) -> (Self, GateHandle) {
        Self::build(inner, false)
    }

    /// An open gate in front of `inner` that logs every completed request.
    pub fn logged(inner: S) -> (Self, GateHandle) {
        Self::build(inner, true)
    }

    fn build(inner: S, log: bool) -> (Self, GateHandle) {
        let shared = Arc::new(Shared {
            mode: Mutex::new(GateMode::Open),
            mode_changed: Notify::new(),
            requests: AtomicU64::new(0),
            log: log.then(|| Mutex::new(Vec::new())),
        });
        let handle = GateHandle {
            shared: shared.clone(),
        };
        (Gate { inner, shared }, handle)
    }

    /// The storage behind the gate.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Waits until the gate lets traffic through; `Err` if it refuses.
    async fn pass(&self, describe: impl FnOnce() -> String) -> Result<(), Error> {
        loop {
            // Register for the wake-up before reading the mode, so that a change in between
            // is not missed.
            let changed = self.shared.mode_changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            match self.shared.mode() {
                GateMode::Open => return Ok(()),
                GateMode::Refusing => {
                    return Err(Error::unavailable(
                        describe(),
                        "the test gate refuses every request",
                    ));
                }
                GateMode::Crashed => std::future::pending::<()>().await,
                GateMode::Paused => changed.await,
            }
        }
    }
}

#[async_trait]
impl<S: LockStorage> LockStorage for Gate<S> {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        self.execute(StorageRequest::Write(write)).await.map(drop)
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        self.execute(StorageRequest::Delete(delete)).await.map(drop)
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        match self.execute(StorageRequest::Read(read)).await? {
            StorageResponse::Cells(cells) => Ok(cells),
            StorageResponse::Done => Ok(Vec::new()),
        }
    }

    async fn execute(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        self.shared.requests.fetch_add(1, Ordering::SeqCst);
        self.pass(|| request.describe()).await?;
        let sent = Instant::now();
        let (operation, row, column, read_start) = match &request {
            StorageRequest::Write(write) => (
                Operation::Write,
                write.row.kind,
                Some(write.column.clone()),
                None,
            ),
            StorageRequest::Delete(delete) => (
                Operation::Delete,
                delete.row.kind,
                Some(delete.column.clone()),
                None,
            ),
            StorageRequest::Read(read) => {
                (Operation::Read, read.row.kind, None, read.start.clone())
            }
        };
        let row_key = request.row().clone();
        let result = self.inner.execute(request).await;
        // A frozen or dead process does not see the answer either.
        self.pass(|| format!("answer from {row_key}")).await?;
        if let Some(log) = &self.shared.log {
            log.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(RequestRecord {
                    sent,
                    answered: Instant::now(),
                    operation,
                    row,
                    column,
                    read_start,
                    ok: result.is_ok(),
                });
        }
        result
    }
}
