//! A leased work queue on the lock: producers enqueue items in time order, workers claim
//! the oldest unclaimed item with a lease (the soft lock on the item, fenced), process it and
//! complete it. docs/work-queue.md gives the rows, the cells and the exactly-once argument.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;
use tokio::sync::Notify;

use fair_lock::{LockGuard, Locker};
use lock_core::storage::{
    Cell, CellDelete, CellWrite, RowKey, RowKind, RowRead, StorageRequest, StorageResponse, Ttl,
};
use lock_core::time::duration_micros;
use lock_core::{
    ColumnName, FencingToken, IntoLockId, LeaseStatus, LockId, LockStorage, MonotonicTime, OwnerId,
    QueueColumn, Timestamp,
};

use crate::Error;
use crate::support::{below, require_runtime, send, sleep};

mod rules;

use rules::QueueRules;

/// The longest accepted queue name, in bytes: an item's lock id is the name, `/`, and the
/// item's 52-character column, and lock ids are at most [`LockId::MAX_LEN`] bytes.
pub const MAX_QUEUE_NAME_LEN: usize = 160;

/// The largest payload [`WorkQueue::enqueue`] accepts, in bytes: a cell value, which
/// Cassandra reads whole with every slice of the bucket row that contains it.
pub const MAX_PAYLOAD_LEN: usize = 1 << 20;

/// The floor cell's column in the [`RowKind::WorkFloor`] row: the lowest bucket that may
/// still hold an item (max wins).
const FLOOR_COLUMN: &str = "floor";
/// The origin cell's column: the lowest bucket anything was ever enqueued into (min wins).
const ORIGIN_COLUMN: &str = "origin";
/// The origin cell is written with the timestamp `ORIGIN_BASE - bucket`, so that
/// last-write-wins keeps the smallest bucket. Buckets of at least a second since 1970 stay
/// far below it (2^40 seconds is 34,000 years).
const ORIGIN_BASE: u64 = 1 << 40;

/// How a [`WorkQueue`] lays out and scans its items, and how idle workers back off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkQueueConfig {
    /// The width of a time bucket: every item enqueued within one bucket lives in one row
    /// (one Cassandra partition). Default 60 s; at least 1 s and a whole number of
    /// milliseconds. Wider buckets mean fewer empty rows to step over when the queue is
    /// idle, narrower ones smaller partitions when it is busy.
    pub bucket_width: Duration,
    /// How many items one read of a bucket row returns (2 to 1000, default 64). A claim
    /// reads further slices only when every item of the first one is claimed by others.
    pub read_limit: u32,
    /// The first pause of [`WorkQueue::claim`] after finding nothing to claim (default
    /// 10 ms, at least 1 ms); it doubles with every empty pass.
    pub idle_backoff_min: Duration,
    /// The cap of that pause (default 1 s, at least `idle_backoff_min`): an item enqueued
    /// into an idle queue waits at most about this long for a worker.
    pub idle_backoff_max: Duration,
    /// Each pause is shortened at random by up to this percentage (0 to 100, default 20), so
    /// that idle workers started together do not poll in step.
    pub idle_jitter_percent: u32,
    /// How long a completion record lives (whole seconds, default one day, at least 60 s).
    /// A worker that finds an item's record after claiming it skips the item, so the record
    /// must outlive any item cell whose delete failed.
    pub completed_ttl: Duration,
    /// How long a handle passes over an item it found claimed by another before trying it
    /// again (default 500 ms, at most one hour; zero tries every held item on every pass).
    /// Without it every claim tries every held item ahead of the first free one, one
    /// request each. The price: an item given back early (dropped, abandoned) waits up to
    /// this long for the handles that passed over it.
    pub held_item_recheck: Duration,
}

impl Default for WorkQueueConfig {
    fn default() -> Self {
        WorkQueueConfig {
            bucket_width: Duration::from_secs(60),
            read_limit: 64,
            idle_backoff_min: Duration::from_millis(10),
            idle_backoff_max: Duration::from_secs(1),
            idle_jitter_percent: 20,
            completed_ttl: Duration::from_secs(86_400),
            held_item_recheck: Duration::from_millis(500),
        }
    }
}

impl WorkQueueConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid =
            |field: &'static str, reason: String| Err(Error::InvalidConfig { field, reason });
        if self.bucket_width < Duration::from_secs(1)
            || !self.bucket_width.subsec_nanos().is_multiple_of(1_000_000)
        {
            return invalid(
                "work_queue.bucket_width",
                format!(
                    "must be at least 1 s and a whole number of milliseconds, got {:?}",
                    self.bucket_width
                ),
            );
        }
        if !(2..=1000).contains(&self.read_limit) {
            return invalid(
                "work_queue.read_limit",
                format!("must be 2 to 1000, got {}", self.read_limit),
            );
        }
        if self.idle_backoff_min < Duration::from_millis(1) {
            return invalid(
                "work_queue.idle_backoff_min",
                format!("must be at least 1 ms, got {:?}", self.idle_backoff_min),
            );
        }
        if self.idle_backoff_max < self.idle_backoff_min {
            return invalid(
                "work_queue.idle_backoff_max",
                format!(
                    "must be at least idle_backoff_min ({:?}), got {:?}",
                    self.idle_backoff_min, self.idle_backoff_max
                ),
            );
        }
        if self.idle_jitter_percent > 100 {
            return invalid(
                "work_queue.idle_jitter_percent",
                format!("must be 0 to 100, got {}", self.idle_jitter_percent),
            );
        }
        if self.held_item_recheck > Duration::from_secs(3600) {
            return invalid(
                "work_queue.held_item_recheck",
                format!("must be at most one hour, got {:?}", self.held_item_recheck),
            );
        }
        if self.completed_ttl < Duration::from_secs(60) {
            return invalid(
                "work_queue.completed_ttl",
                format!("must be at least 60 s, got {:?}", self.completed_ttl),
            );
        }
        Ttl::from_duration(self.completed_ttl).map_err(|error| match error {
            lock_core::Error::InvalidConfig { reason, .. } => Error::InvalidConfig {
                field: "work_queue.completed_ttl",
                reason,
            },
            other => Error::Lock(other),
        })?;
        Ok(())
    }
}

/// The idle workers' backoff, without a clock: each [`IdleBackoff::next_pause`] after an
/// empty pass doubles the pause up to the cap and shortens it by a random share; a claim
/// starts a new one.
#[derive(Clone, Debug)]
struct IdleBackoff {
    next: Duration,
    max: Duration,
    jitter_percent: u32,
}

impl IdleBackoff {
    fn new(config: &WorkQueueConfig) -> Self {
        IdleBackoff {
            next: config.idle_backoff_min,
            max: config.idle_backoff_max,
            jitter_percent: config.idle_jitter_percent.min(100),
        }
    }

    /// The pause before the next pass, given a random number; never above the cap.
    fn next_pause(&mut self, random: u64) -> Duration {
        let base = self.next.min(self.max);
        self.next = base.saturating_mul(2).min(self.max);
        let micros = duration_micros(base);
        let most = micros.saturating_mul(u64::from(self.jitter_percent)) / 100;
        let cut = if most == 0 { 0 } else { random % (most + 1) };
        Duration::from_micros(micros - cut)
    }
}

/// An item's id: its enqueue time (the producer's clock) and a random part. Items are
/// claimed in the order of these ids, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkItemId(QueueColumn);

impl WorkItemId {
    /// When the producer enqueued the item, by its clock.
    pub fn enqueued_at(&self) -> Timestamp {
        self.0.timestamp
    }

    /// The id as stored: the 20-digit enqueue time followed by the random part.
    pub fn to_column(&self) -> ColumnName {
        self.0.encode()
    }

    /// Parses an id written by [`WorkItemId::to_column`] (as logged, say).
    pub fn parse(text: &str) -> Result<Self, Error> {
        Ok(QueueColumn::decode(text).map(WorkItemId)?)
    }
}

impl fmt::Display for WorkItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.encode().as_str())
    }
}

/// A distributed work queue on the lock: producers [`WorkQueue::enqueue`] items; workers
/// claim the oldest item no one holds with a lease ([`WorkQueue::claim`], or the
/// [`WorkQueue::claims`] stream), process it and [`Claim::complete`] it. An item whose
/// worker dies is claimed again once its lease runs out (`lease_ttl`); a completion is
/// accepted only while the claim's lease is certainly held, so at most one claim of an item
/// completes it, however late a paused worker wakes (docs/work-queue.md).
///
/// Cheap to clone; clones share the locker and the scan position.
///
/// ```
/// use std::sync::Arc;
///
/// use futures::StreamExt;
/// use lock_core::LockConfig;
/// use fair_lock::Locker;
/// use lock_recipes::{Error, WorkQueue, WorkQueueConfig};
/// use lock_storage_memory::MemoryCluster;
///
/// # fair_lock::testing::in_virtual_time("work_queue_doctest", async {
/// // On Cassandra, the storage is lock_storage_cassandra::CassandraStorage.
/// let cluster = MemoryCluster::default();
/// let client = cluster.client();
/// let locker = Locker::builder(client.clone())
///     .config(LockConfig::default())
///     .clock(Arc::new(client.clock()))
///     .build()?;
/// let queue = WorkQueue::new(locker, "emails", WorkQueueConfig::default())?;
///
/// let first = queue.enqueue("welcome mail for 42").await?;   // producers
/// # // Items enqueued in the same microsecond sort by their random ids.
/// # tokio::time::sleep(std::time::Duration::from_millis(1)).await;
/// queue.enqueue("welcome mail for 43").await?;
///
/// let mut claims = queue.claims();                               // a worker
/// let claim = claims.next().await.expect("the stream never ends")?;
/// assert_eq!(claim.id(), &first);                                // oldest first
/// let token = claim.fencing_token(); // pass it to whatever the work writes
/// tokio::select! {
///     () = claim.lost() => eprintln!("lease lost: stop, the item will be delivered again"),
///     () = async { /* send the mail: claim.payload() */ } => {}
/// }
/// claim.complete().await?;                                       // done, exactly once
/// assert_eq!(queue.completed_by(&first).await?, Some(token));
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub struct WorkQueue<S: LockStorage> {
    inner: Arc<Inner<S>>,
}

struct Inner<S: LockStorage> {
    locker: Locker<S>,
    name: LockId,
    config: WorkQueueConfig,
    rules: QueueRules,
    scan: Mutex<Scan>,
    /// Buckets this handle already recorded as the origin (no need to write it again).
    origin_written: Mutex<Option<u64>>,
    /// Set by [`WorkQueue::close`]; `closing` wakes the claims waiting for an item.
    closed: AtomicBool,
    closing: Notify,
}

/// Where this handle's claims start reading.
#[derive(Debug, Default)]
struct Scan {
    /// The lowest bucket that may hold an item; `None` until read from storage.
    floor: Option<u64>,
    /// Per bucket, the enqueue time of the first live item the last read found: the next
    /// read starts a margin before it rather than at the tombstones of completed items.
    heads: BTreeMap<u64, Timestamp>,
    /// Items another claim held when this handle last tried them, and when to try again.
    held: BTreeMap<WorkItemId, MonotonicTime>,
    /// How many held items this handle's last claim tried before the one it took: about
    /// how many workers are busy at the front of the queue.
    held_before_last_claim: u64,
}

/// The most items a handle remembers as held by others; past it the soonest to be tried
/// again are forgotten first.
const MAX_HELD_REMEMBERED: usize = 4096;

impl<S: LockStorage> Clone for WorkQueue<S> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
        }
    }
}

impl<S: LockStorage> fmt::Debug for WorkQueue<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl<S: LockStorage> WorkQueue<S> {
    /// The work queue named `name` on `locker`'s storage. Producers and workers of one
    /// queue use the same name and configuration.
    ///
    /// Fails with [`Error::InvalidConfig`] if the locker has `fencing: false` (a claim's
    /// token is what makes completion idempotent) or `config` is invalid, with
    /// [`lock_core::Error::InvalidLockId`] (as [`Error::Lock`]) if `name` is not a valid
    /// lock id, and with [`Error::QueueNameTooLong`] if it has more than
    /// [`MAX_QUEUE_NAME_LEN`] bytes.
    pub fn new(
        locker: Locker<S>,
        name: impl IntoLockId,
        config: WorkQueueConfig,
    ) -> Result<Self, Error> {
        if !locker.config().config().fencing {
            return Err(Error::InvalidConfig {
                field: "fencing",
                reason: "is off, but a work queue completes an item under its claim's fencing \
                         token; set fencing: true (the default) for a locker of a work queue"
                    .into(),
            });
        }
        config.validate()?;
        let name = name.into_lock_id()?;
        if name.as_str().len() > MAX_QUEUE_NAME_LEN {
            return Err(Error::QueueNameTooLong {
                name: name.as_str().chars().take(40).collect(),
                len: name.as_str().len(),
            });
        }
        let rules = QueueRules::new(&config, locker.config().config());
        Ok(WorkQueue {
            inner: Arc::new(Inner {
                locker,
                name,
                config,
                rules,
                scan: Mutex::default(),
                origin_written: Mutex::new(None),
                closed: AtomicBool::new(false),
                closing: Notify::new(),
            }),
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &LockId {
        &self.inner.name
    }

    /// The locker whose soft lock leases the items.
    pub fn locker(&self) -> &Locker<S> {
        &self.inner.locker
    }

    /// The queue's configuration.
    pub fn config(&self) -> &WorkQueueConfig {
        &self.inner.config
    }

    /// Enqueues an item with `payload` at the current time and returns its id. Items are
    /// claimed oldest first (by the producers' clocks, which must agree within
    /// `max_clock_skew`).
    ///
    /// Fails with [`Error::PayloadTooLarge`] for a payload over [`MAX_PAYLOAD_LEN`] bytes,
    /// or with the storage error (as [`Error::Lock`]) once `storage_retries` retries
    /// failed; after [`lock_core::Error::StorageOutcomeUnknown`] the item may or may not be
    /// in the queue.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the item may or may not have been enqueued.
    pub async fn enqueue(&self, payload: impl Into<Vec<u8>>) -> Result<WorkItemId, Error> {
        require_runtime("WorkQueue::enqueue was polled outside one")?;
        let payload = payload.into();
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(Error::PayloadTooLarge { len: payload.len() });
        }
        let inner = &self.inner;
        let now = inner.now();
        let bucket = inner.rules.bucket_of(now);
        let id = WorkItemId(QueueColumn::new(now, self.random_item_id()?));
        inner.record_origin(bucket).await?;
        inner
            .request(StorageRequest::Write(CellWrite {
                row: inner.items_row(bucket)?,
                column: id.to_column(),
                value: payload,
                timestamp: now,
                ttl: None,
            }))
            .await?;
        Ok(id)
    }

    fn random_item_id(&self) -> Result<OwnerId, Error> {
        let locker = &self.inner.locker;
        let (high, low) = (locker.next_seed(), locker.next_seed());
        Ok(OwnerId::new(format!("{high:016x}{low:016x}"))?)
    }

    /// One pass over the queue: claims the oldest item that no one holds and that is not
    /// completed, or returns `None` at once if there is none. Reads start at the queue's
    /// floor (below it every bucket is known empty), never at the beginning of time.
    ///
    /// When this handle's last claim had to pass held items, the pass starts at a random
    /// one of the first as many items of a slice (and comes back to the earlier ones), so
    /// that busy workers do not all race for the same free item: with W workers busy,
    /// items are claimed in order to within about W places.
    ///
    /// Fails with [`Error::WorkQueueClosed`] once the handle is closed.
    ///
    /// # Cancel safety
    ///
    /// As for [`Locker::try_lock`]: dropped midway, a lease it had taken is given back in
    /// the background and the item stays in the queue.
    pub async fn try_claim(&self) -> Result<Option<Claim<S>>, Error> {
        require_runtime("WorkQueue::try_claim was polled outside one")?;
        self.refuse_if_closed()?;
        let inner = &self.inner;
        inner.forget_held_items_due();
        let now = inner.now();
        let floor = inner.floor(now).await?;
        // The lowest bucket not known to be closed and empty, from the floor up.
        let mut new_floor = floor;
        let mut empty_so_far = true;
        let mut held_tried = 0u64;
        for bucket in inner.rules.buckets_to_scan(floor, now) {
            let mut start = inner.head_start(bucket);
            let mut skip_first: Option<ColumnName> = None;
            let mut first_page = true;
            loop {
                let cells = inner.read_items(bucket, start.clone()).await?;
                if first_page {
                    inner.note_head(bucket, cells.first());
                    if cells.is_empty() {
                        match inner.rules.floor_above_empty(bucket, empty_so_far, now) {
                            Some(above) => new_floor = above,
                            None => empty_so_far = false,
                        }
                        break;
                    }
                    empty_so_far = false;
                }
                first_page = false;
                let full = cells.len() >= inner.config.read_limit as usize;
                let last = cells.last().map(|cell| cell.column.clone());
                let mut cells = cells;
                cells.retain(|cell| skip_first.as_ref() != Some(&cell.column));
                let start_at = inner.spread_start(cells.len());
                cells.rotate_left(start_at);
                for cell in cells {
                    match self.try_item(bucket, cell).await? {
                        Some(claim) => {
                            inner.scan().held_before_last_claim = held_tried;
                            inner.advance_floor(floor, new_floor).await;
                            return Ok(Some(claim));
                        }
                        None => held_tried += 1,
                    }
                }
                match (full, last) {
                    (true, Some(last)) => {
                        start = Some(last.clone());
                        skip_first = Some(last);
                    }
                    _ => break,
                }
            }
        }
        inner.advance_floor(floor, new_floor).await;
        Ok(None)
    }

    /// Tries to lease the item in `cell` of `bucket`: `None` if another worker holds it or
    /// it turns out completed.
    async fn try_item(&self, bucket: u64, cell: Cell) -> Result<Option<Claim<S>>, Error> {
        let inner = &self.inner;
        let column = match QueueColumn::decode(cell.column.as_str()) {
            Ok(column) => column,
            Err(error) => {
                tracing::warn!(queue = %inner.name, %error, "skipping a cell this library did not write");
                return Ok(None);
            }
        };
        let id = WorkItemId(column);
        if inner.passes_over(&id) {
            return Ok(None);
        }
        let Some(guard) = inner.locker.try_lock(inner.item_lock_id(&id)?).await? else {
            inner.remember_held(id);
            return Ok(None);
        };
        let Some(token) = guard.fencing_token() else {
            return Err(Error::Internal(
                "a fenced acquisition took no fencing token",
            ));
        };
        // Read after the lease was taken, so a completion acknowledged before any earlier
        // claim's lease ran out is seen here (docs/work-queue.md).
        if let Some(done) = inner.completion(bucket, &id).await? {
            inner
                .delete_item(bucket, &id, done.max(cell.write_timestamp.next()))
                .await;
            if let Err(error) = guard.release().await {
                tracing::debug!(%error, "releasing the lease of a completed item failed");
            }
            return Ok(None);
        }
        Ok(Some(Claim {
            queue: self.clone(),
            guard,
            bucket,
            id,
            payload: cell.value,
            item_written_at: cell.write_timestamp,
            token,
        }))
    }

    /// Waits until an item can be claimed and claims it: [`WorkQueue::try_claim`] in a loop,
    /// pausing after every empty pass (10 ms, doubling up to `idle_backoff_max`, jittered).
    /// Fails with the first storage error of a pass, and with [`Error::WorkQueueClosed`]
    /// once the handle is closed, at once even while it waits.
    ///
    /// # Cancel safety
    ///
    /// As for [`WorkQueue::try_claim`].
    pub async fn claim(&self) -> Result<Claim<S>, Error> {
        let mut backoff = IdleBackoff::new(&self.inner.config);
        loop {
            // Registered before the check, so that a close in between still wakes us.
            let closing = self.inner.closing.notified();
            self.refuse_if_closed()?;
            if let Some(claim) = self.try_claim().await? {
                return Ok(claim);
            }
            let random = self.inner.locker.next_seed();
            tokio::select! {
                () = sleep(&**self.inner.locker.clock(), backoff.next_pause(random)) => {}
                () = closing => {}
            }
        }
    }

    /// Closes this handle and every clone of it: [`WorkQueue::claim`], [`WorkQueue::try_claim`]
    /// and [`WorkQueue::claims`] claim nothing more (the waiting ones return at once with
    /// [`Error::WorkQueueClosed`], the stream ends). Claims already made are not touched:
    /// complete or abandon them as usual. Producers ([`WorkQueue::enqueue`]) and other
    /// handles of the same queue go on.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.closing.notify_waiters();
    }

    /// Whether [`WorkQueue::close`] was called on this handle or a clone of it.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    fn refuse_if_closed(&self) -> Result<(), Error> {
        if self.is_closed() {
            return Err(Error::WorkQueueClosed {
                queue: self.inner.name.clone(),
            });
        }
        Ok(())
    }

    /// The claims of this worker as a stream: each item is [`WorkQueue::claim`]'s result.
    /// A storage error is one item, and the stream goes on after it; the stream ends when
    /// the handle is closed ([`WorkQueue::close`]).
    pub fn claims(&self) -> Claims<S> {
        Claims {
            queue: self.clone(),
            pending: None,
        }
    }

    /// The fencing token of the claim that completed item `id`, or `None` if it is not
    /// completed (or its record outlived `completed_ttl`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn completed_by(&self, id: &WorkItemId) -> Result<Option<FencingToken>, Error> {
        require_runtime("WorkQueue::completed_by was polled outside one")?;
        let bucket = self.inner.rules.bucket_of(id.enqueued_at());
        Ok(self
            .inner
            .completion(bucket, id)
            .await?
            .map(|at| FencingToken::new(at.as_micros())))
    }
}

impl<S: LockStorage> Inner<S> {
    fn now(&self) -> Timestamp {
        self.locker.clock().now().timestamp
    }

    /// Where in a slice of `len` items to start trying: item 0 (the oldest) when the last
    /// claim met no held item, else a random one among the first as many as it met, so
    /// that busy workers spread over the front of the queue instead of all trying the
    /// same held items in turn and racing for the same free one.
    fn spread_start(&self, len: usize) -> usize {
        let busy = self.scan().held_before_last_claim;
        if busy == 0 || len == 0 {
            return 0;
        }
        let random = below(self.locker.next_seed(), busy.saturating_add(1));
        usize::try_from(random).unwrap_or(usize::MAX).min(len - 1)
    }

    /// Forgets the held items that are due to be tried again.
    fn forget_held_items_due(&self) {
        let now = self.locker.clock().now().instant;
        self.scan()
            .held
            .retain(|_, retry_at| QueueRules::passes_over(*retry_at, now));
    }

    /// Whether `id` was found held by another claim too recently to try again.
    fn passes_over(&self, id: &WorkItemId) -> bool {
        self.scan().held.contains_key(id)
    }

    /// Remembers that another claim holds `id`, not to try it for `held_item_recheck`.
    fn remember_held(&self, id: WorkItemId) {
        let Some(retry_at) = self.rules.retry_held_at(self.locker.clock().now().instant) else {
            return;
        };
        let mut scan = self.scan();
        if scan.held.len() >= MAX_HELD_REMEMBERED {
            let soonest = scan
                .held
                .iter()
                .min_by_key(|(_, retry_at)| **retry_at)
                .map(|(id, _)| id.clone());
            if let Some(soonest) = soonest {
                scan.held.remove(&soonest);
            }
        }
        scan.held.insert(id, retry_at);
    }

    fn bucket_row(&self, kind: RowKind, bucket: u64) -> Result<RowKey, Error> {
        Ok(RowKey::new(
            kind,
            LockId::new(format!("{}/{bucket}", self.name))?,
        ))
    }

    fn items_row(&self, bucket: u64) -> Result<RowKey, Error> {
        self.bucket_row(RowKind::WorkItems, bucket)
    }

    fn done_row(&self, bucket: u64) -> Result<RowKey, Error> {
        self.bucket_row(RowKind::WorkDone, bucket)
    }

    fn floor_row(&self) -> RowKey {
        RowKey::new(RowKind::WorkFloor, self.name.clone())
    }

    fn item_lock_id(&self, id: &WorkItemId) -> Result<LockId, Error> {
        Ok(LockId::new(format!("{}/{}", self.name, id.to_column()))?)
    }

    /// Sends `request` with the lock's timeout, retrying storage faults that a retry may
    /// cure up to `storage_retries` times, `retry_backoff` apart (doubling).
    async fn request(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        let config = self.locker.config().config();
        let mut pause = config.retry_backoff;
        let mut attempt = 0;
        loop {
            match send(&self.locker, request.clone()).await {
                Err(error) if error.is_retryable() && attempt < config.storage_retries => {
                    attempt += 1;
                    sleep(&**self.locker.clock(), pause).await;
                    pause = pause.saturating_mul(2);
                }
                answer => return Ok(answer?),
            }
        }
    }

    async fn read(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        match self.request(StorageRequest::Read(read)).await? {
            StorageResponse::Cells(cells) => Ok(cells),
            StorageResponse::Done => Err(Error::Internal("a read was answered as a write")),
        }
    }

    async fn read_items(&self, bucket: u64, start: Option<ColumnName>) -> Result<Vec<Cell>, Error> {
        let mut read = RowRead::first(self.items_row(bucket)?, self.config.read_limit);
        read.start = start;
        self.read(read).await
    }

    /// The write timestamp of item `id`'s completion record (its claim's fencing token).
    async fn completion(&self, bucket: u64, id: &WorkItemId) -> Result<Option<Timestamp>, Error> {
        let column = id.to_column();
        let cells = self
            .read(RowRead::single(self.done_row(bucket)?, column.clone()))
            .await?;
        Ok(cells
            .into_iter()
            .find(|cell| cell.column == column)
            .map(|cell| cell.write_timestamp))
    }

    /// Deletes an item's cell (best effort: a cell left behind is skipped by the next
    /// claimer, who finds its completion record).
    async fn delete_item(&self, bucket: u64, id: &WorkItemId, timestamp: Timestamp) {
        let Ok(row) = self.items_row(bucket) else {
            return;
        };
        let delete = CellDelete {
            row,
            column: id.to_column(),
            timestamp,
        };
        if let Err(error) = self.request(StorageRequest::Delete(delete)).await {
            tracing::warn!(queue = %self.name, item = %id, %error, "could not delete a completed item; the next claimer skips it");
        }
    }

    /// Deletes the fence cell of a completed item's lock, which would otherwise stay
    /// forever (fence cells have no TTL). Best effort.
    async fn delete_fence(&self, id: &WorkItemId, token: FencingToken) {
        let Ok(lock_id) = self.item_lock_id(id) else {
            return;
        };
        let delete = CellDelete {
            row: RowKey::new(RowKind::Fence, lock_id),
            column: ColumnName::new(FencingToken::COLUMN),
            timestamp: Timestamp::from_micros(token.get()),
        };
        if let Err(error) = self.request(StorageRequest::Delete(delete)).await {
            tracing::debug!(item = %id, %error, "could not delete a completed item's fence cell");
        }
    }

    /// Makes sure the origin cell is at or below `bucket` before an item is written there.
    async fn record_origin(&self, bucket: u64) -> Result<(), Error> {
        let written = *self
            .origin_written
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if written.is_some_and(|written| written <= bucket) {
            return Ok(());
        }
        self.request(StorageRequest::Write(CellWrite {
            row: self.floor_row(),
            column: ColumnName::new(ORIGIN_COLUMN),
            value: bucket.to_be_bytes().to_vec(),
            timestamp: Timestamp::from_micros(ORIGIN_BASE.saturating_sub(bucket)),
            ttl: None,
        }))
        .await?;
        let mut written = self
            .origin_written
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *written = Some(written.map_or(bucket, |written| written.min(bucket)));
        Ok(())
    }

    /// This handle's floor, read from storage the first time: the larger of the floor and
    /// origin cells, or (nothing ever enqueued) the bucket a margin before `now`.
    async fn floor(&self, now: Timestamp) -> Result<u64, Error> {
        if let Some(floor) = self.scan().floor {
            return Ok(floor);
        }
        let cells = self.read(RowRead::first(self.floor_row(), 2)).await?;
        let value = |name: &str| {
            cells
                .iter()
                .find(|cell| cell.column.as_str() == name)
                .and_then(|cell| <[u8; 8]>::try_from(cell.value.as_slice()).ok())
                .map(u64::from_be_bytes)
        };
        let floor = self
            .rules
            .initial_floor(value(FLOOR_COLUMN), value(ORIGIN_COLUMN), now);
        let mut scan = self.scan();
        let floor = scan.floor.map_or(floor, |known| known.max(floor));
        scan.floor = Some(floor);
        Ok(floor)
    }

    fn scan(&self) -> std::sync::MutexGuard<'_, Scan> {
        self.scan.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where to start reading `bucket`: a margin before the first live item last seen there.
    fn head_start(&self, bucket: u64) -> Option<ColumnName> {
        let head = *self.scan().heads.get(&bucket)?;
        Some(self.rules.read_start(head))
    }

    fn note_head(&self, bucket: u64, first: Option<&Cell>) {
        let head = first.and_then(|cell| QueueColumn::decode_timestamp(cell.column.as_str()).ok());
        let mut scan = self.scan();
        match head {
            Some(head) => {
                scan.heads.insert(bucket, head);
            }
            None => {
                scan.heads.remove(&bucket);
            }
        }
    }

    /// Raises this handle's floor (and the shared floor cell) from `from` to `to`, every
    /// bucket in between being closed and empty. Best effort for the cell.
    async fn advance_floor(&self, from: u64, to: u64) {
        if to <= from {
            return;
        }
        {
            let mut scan = self.scan();
            let floor = scan.floor.map_or(to, |known| known.max(to));
            scan.floor = Some(floor);
            scan.heads = scan.heads.split_off(&floor);
        }
        let write = CellWrite {
            row: self.floor_row(),
            column: ColumnName::new(FLOOR_COLUMN),
            value: to.to_be_bytes().to_vec(),
            // Last write wins: the highest floor stays.
            timestamp: Timestamp::from_micros(to),
            ttl: None,
        };
        if let Err(error) = self.request(StorageRequest::Write(write)).await {
            tracing::debug!(queue = %self.name, %error, "could not record the work queue's floor");
        }
    }
}

/// An item claimed with a lease: process it, then [`Claim::complete`] it. While the claim
/// exists its lease is renewed in the background. Dropped without completing, the lease is
/// given back (in the background) and the item is claimed again by the next worker; if
/// the worker dies instead, the item is claimed again once the lease runs out.
#[must_use = "dropping a Claim gives the item back at once: process it, then call `complete`"]
pub struct Claim<S: LockStorage> {
    queue: WorkQueue<S>,
    guard: LockGuard,
    bucket: u64,
    id: WorkItemId,
    payload: Vec<u8>,
    item_written_at: Timestamp,
    token: FencingToken,
}

impl<S: LockStorage> fmt::Debug for Claim<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claim")
            .field("id", &self.id)
            .field("token", &self.token)
            .field("status", &self.guard.status())
            .finish_non_exhaustive()
    }
}

impl<S: LockStorage> Claim<S> {
    /// The claimed item's id.
    pub fn id(&self) -> &WorkItemId {
        &self.id
    }

    /// The item's payload, as enqueued.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// This claim's fencing token: strictly greater than every earlier claim's of the same
    /// item. Pass it to what the work writes, so that a resource can refuse a worker whose
    /// lease ran out; it is also what [`WorkQueue::completed_by`] reports after completion.
    pub fn fencing_token(&self) -> FencingToken {
        self.token
    }

    /// The lease status now ([`LockGuard::status`]).
    pub fn status(&self) -> LeaseStatus {
        self.guard.status()
    }

    /// True unless the lease is lost.
    pub fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    /// How long the lease is certainly still held.
    pub fn time_left(&self) -> Duration {
        self.guard.time_left()
    }

    /// Completes when the lease is lost (as [`LockGuard::lost`]): stop working on the item,
    /// another worker may claim it now.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches the lease.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// Completes the item: records the completion under this claim's fencing token, removes
    /// the item from the queue and gives the lease back.
    ///
    /// Returns `Ok` only if the completion record was acknowledged while the lease was
    /// certainly held; then no other claim of the item completes it (docs/work-queue.md).
    /// Returns [`lock_core::Error::LockLost`] (as [`Error::Lock`]) if the lease ran out
    /// first, or had less than the lock's `request_timeout` left when the record would have
    /// been sent (the item is, or will be, delivered again, and a later claim completes it
    /// or finds it completed). Storage faults that a retry may cure are retried while the
    /// lease lasts (the record is idempotent); any other storage error is returned as it
    /// is (as [`Error::Lock`]), and the item is delivered again.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the completion may or may not have been recorded; the lease is given
    /// back in the background, and a later claimer skips the item if it was.
    pub async fn complete(self) -> Result<(), Error> {
        require_runtime("Claim::complete was polled outside one")?;
        let inner = &self.queue.inner;
        let config = inner.locker.config().config();
        let lost = |reason: &str| {
            Error::Lock(lock_core::Error::LockLost {
                lock_id: self.guard.lock_id().clone(),
                reason: format!("{reason}; the item was not completed by this claim"),
            })
        };
        let write = StorageRequest::Write(CellWrite {
            row: inner.done_row(self.bucket)?,
            column: self.id.to_column(),
            value: self.token.get().to_be_bytes().to_vec(),
            timestamp: Timestamp::from_micros(self.token.get()),
            ttl: Some(Ttl::from_duration(inner.config.completed_ttl)?),
        });
        // Storage faults are retried for as long as the lease allows: the record is
        // idempotent, and the lease is what bounds the retries.
        let mut pause = config.retry_backoff;
        loop {
            // A record sent with less than the request timeout left could land after another
            // worker claimed the item: send none then.
            if let Err(refused) = inner.rules.completion(self.guard.time_left()) {
                return Err(lost(&format!(
                    "the claim's lease ran out, or nearly, before completion ({:?} left, \
                     {:?} needed)",
                    refused.time_left, refused.needed
                )));
            }
            match send(&inner.locker, write.clone()).await {
                Ok(_) => break,
                Err(error) if error.is_retryable() => {
                    tracing::debug!(item = %self.id, %error, "retrying a completion record");
                    sleep(&**inner.locker.clock(), pause).await;
                    pause = inner.rules.next_completion_pause(pause);
                }
                Err(error) => return Err(error.into()),
            }
        }
        // Acknowledged before the deadline, hence applied before any other worker could
        // claim the item: that worker reads the record and skips the item.
        if !self.guard.is_held() {
            return Err(lost(
                "the completion was acknowledged after the claim's lease ran out",
            ));
        }
        let Claim {
            queue,
            guard,
            bucket,
            id,
            item_written_at,
            token,
            ..
        } = self;
        let inner = &queue.inner;
        inner
            .delete_item(
                bucket,
                &id,
                QueueRules::item_tombstone(token, item_written_at),
            )
            .await;
        inner.delete_fence(&id, token).await;
        if let Err(error) = guard.release().await {
            // The completion stands: it was acknowledged within the lease.
            tracing::debug!(item = %id, %error, "giving back a completed item's lease failed");
        }
        Ok(())
    }

    /// Gives the item back without completing it, so that the next worker claims it at once.
    /// Returns the release's error as [`LockGuard::release`] does (as [`Error::Lock`]).
    pub async fn abandon(self) -> Result<(), Error> {
        Ok(self.guard.release().await?)
    }
}

/// A worker's claims as a [`Stream`] (from [`WorkQueue::claims`]): every item is the next
/// claim, waited for with the idle backoff, or the storage error of a pass. Ends when the
/// handle is closed.
pub struct Claims<S: LockStorage> {
    queue: WorkQueue<S>,
    pending: Option<BoxFuture<'static, Result<Claim<S>, Error>>>,
}

impl<S: LockStorage> fmt::Debug for Claims<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claims")
            .field("queue", &self.queue)
            .field("waiting", &self.pending.is_some())
            .finish()
    }
}

impl<S: LockStorage> Stream for Claims<S> {
    type Item = Result<Claim<S>, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let queue = self.queue.clone();
        let pending = self
            .pending
            .get_or_insert_with(|| Box::pin(async move { queue.claim().await }));
        let claimed = std::task::ready!(pending.as_mut().poll(cx));
        self.pending = None;
        match claimed {
            Err(Error::WorkQueueClosed { .. }) => Poll::Ready(None),
            claimed => Poll::Ready(Some(claimed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_backoff_doubles_to_its_cap_and_only_shortens() {
        let config = WorkQueueConfig {
            idle_backoff_min: Duration::from_millis(10),
            idle_backoff_max: Duration::from_millis(70),
            idle_jitter_percent: 0,
            ..WorkQueueConfig::default()
        };
        let mut backoff = IdleBackoff::new(&config);
        let pauses: Vec<_> = (0..5).map(|_| backoff.next_pause(12345)).collect();
        assert_eq!(
            pauses,
            [10, 20, 40, 70, 70].map(Duration::from_millis).to_vec()
        );
        let mut jittered = IdleBackoff::new(&WorkQueueConfig {
            idle_jitter_percent: 20,
            ..config
        });
        for random in [0, 1, 999, u64::MAX] {
            let pause = jittered.next_pause(random);
            assert!(pause <= Duration::from_millis(70), "{pause:?}");
        }
        assert!(jittered.next_pause(u64::MAX) >= Duration::from_millis(56));
    }
}
