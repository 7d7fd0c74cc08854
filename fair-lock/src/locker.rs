//! `Locker`: the entry point users call.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::config::{LockConfig, ValidConfig};
use lock_core::error::Error;
use lock_core::id::{IntoLockId, LockId, OwnerId};
use lock_core::machine::{
    AcquireOutcome, AnyAcquire, FencingToken, Holding, Inspect, LockReport, Mode, Retake,
    RetakeOutcome, SplitMix64,
};
use lock_core::storage::LockStorage;

use super::clock::{Clock, SystemClock};
use super::guard::LockGuard;
use super::keeper::LeaseKeeper;
use super::linger::{self, Lingering, Lingers};
use super::local_line::{LocalLines, LocalTurn};
use super::metrics::{LockMetrics, NotAcquired};
use super::run::Context;
use super::seats::{SeatTicket, Seating};
use super::tasks::Tasks;
use super::wake::{HintLink, WakeHintTransport, WakeRegistration, send_all};
use tracing::Instrument;

/// Takes locks on one storage backend. Cheap to clone; clones share the backend.
///
/// Make one per process (or per backend) and clone it where it is needed, rather than a new
/// one per acquisition. A locker remembers, per lock, where the queue's head was at its
/// last turn and the pace of the last hand-offs, and its tasks waiting for one lock stand
/// in the distributed queue as one. A new locker knows none of that: its first read of a
/// lock's queue starts at the head the holder's main cell names, if a holder took the lock
/// after reading the queue, and otherwise `poll.cold_lookback` (60 s) back, stepping over
/// every queue tombstone of that minute on Cassandra (docs/algorithm.md, sections "Queue floors and tombstones" and
/// "Dead cells per queue read: the bound").
///
/// ```
/// # use lock_core::storage::*;
/// # use lock_core::Error;
/// # use std::sync::Mutex;
/// # use std::collections::BTreeMap;
/// # struct Store(Mutex<BTreeMap<(RowKey, lock_core::ColumnName), (Vec<u8>, lock_core::Timestamp)>>);
/// # #[async_trait::async_trait]
/// # impl LockStorage for Store {
/// #     async fn write_cell(&self, w: CellWrite) -> Result<(), Error> {
/// #         self.0.lock().unwrap().insert((w.row, w.column), (w.value, w.timestamp)); Ok(())
/// #     }
/// #     async fn delete_cell(&self, d: CellDelete) -> Result<(), Error> {
/// #         self.0.lock().unwrap().remove(&(d.row, d.column)); Ok(())
/// #     }
/// #     async fn read_row(&self, r: RowRead) -> Result<Vec<Cell>, Error> {
/// #         Ok(self.0.lock().unwrap().iter()
/// #             .filter(|((row, column), _)| *row == r.row && r.start.as_ref().is_none_or(|s| column >= s))
/// #             .take(r.limit.get() as usize)
/// #             .map(|((_, column), (value, ts))| Cell { column: column.clone(), value: value.clone(), write_timestamp: *ts })
/// #             .collect())
/// #     }
/// # }
/// # let storage = Store(Mutex::new(BTreeMap::new()));
/// use lock_core::LockConfig;
/// use fair_lock::Locker;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let locker = Locker::new(storage, LockConfig::default())?;
///
/// let guard = locker.lock("account:42").await?;           // waits its turn
/// assert!(locker.try_lock("account:42").await?.is_none()); // taken: no waiting
/// // ... touch the account; check guard.is_held() or select! on guard.lost() ...
/// guard.release().await?;
/// assert!(locker.try_lock("account:42").await?.is_some());
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub struct Locker<S: LockStorage> {
    pub(crate) shared: Arc<Shared<S>>,
}

pub(crate) struct Shared<S> {
    pub(crate) storage: S,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: ValidConfig,
    pub(crate) metrics: Option<Arc<dyn LockMetrics>>,
    pub(crate) seating: Seating,
    /// This locker's tasks waiting for the same lock, in order.
    pub(crate) lines: Arc<LocalLines>,
    /// Holds the leases of locks whose first renewal is not yet due.
    pub(crate) keeper: Arc<LeaseKeeper>,
    /// Released locks still held in storage for a quick retake.
    pub(crate) lingers: Lingers,
    /// Where wake-up hints go out and come in, if this locker uses them.
    pub(crate) wake_hints: Option<Arc<dyn WakeHintTransport>>,
    /// The seeded generator of poll jitter and [`Locker::next_seed`].
    seeds: Mutex<SplitMix64>,
    /// Where owner ids come from.
    owner_ids: OwnerIds,
    /// The locker's background tasks, and its shutdown signal.
    pub(crate) tasks: Arc<Tasks>,
    /// The errors of the releases [`Locker::shutdown`] made on lease tasks.
    pub(crate) shutdown_errors: Mutex<Vec<Error>>,
    /// Set once [`LockStorage::check_config`] has accepted the configuration.
    storage_checked: tokio::sync::OnceCell<()>,
}

/// Where a locker's owner ids (and the prefix of its seats) come from.
enum OwnerIds {
    /// A generator of their own, seeded from the operating system's randomness whatever
    /// [`LockerBuilder::seed`] says: two lockers never share an owner id.
    Random(Mutex<SplitMix64>),
    /// The seeded generator of poll jitter, for an exact replay
    /// ([`LockerBuilder::replay_owner_ids_unsafe`]).
    Replayed,
}

/// 64 bits of the operating system's randomness (a version 4 UUID's).
fn os_random_u64() -> u64 {
    let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
    high ^ low
}

impl<S: LockStorage> Shared<S> {
    pub(crate) fn context(&self) -> Context<'_, S> {
        Context {
            storage: &self.storage,
            clock: &*self.clock,
            request_timeout: self.config.config().request_timeout,
            metrics: self.metrics.as_deref(),
        }
    }
}

impl<S: LockStorage> Clone for Locker<S> {
    fn clone(&self) -> Self {
        Locker {
            shared: self.shared.clone(),
        }
    }
}

impl<S: LockStorage> fmt::Debug for Locker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locker")
            .field("config", self.shared.config.config())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Locker`]: the five settings that matter, and advanced tuning.
///
/// Most services set only the first five; each left unset keeps its default:
///
/// | setting | default | choose |
/// |---|---|---|
/// | [`owner_name`](LockerBuilder::owner_name) | none | the host or service name: it prefixes owner ids, so `lockctl inspect` shows who holds a lock |
/// | [`lease_ttl`](LockerBuilder::lease_ttl) | 10 s | how long a holder that died blocks the lock; at least 9 s with the other defaults (whole seconds, more than `2 × (1 s + max_clock_skew + request_timeout)`, so that a renewal due half-way and answered late still lands in time), longer if holders may pause (GC, a frozen VM) for seconds |
/// | [`max_clock_skew`](LockerBuilder::max_clock_skew) | 1 s | the most the clocks of clients and nodes may disagree; NTP keeps them within milliseconds |
/// | [`request_timeout`](LockerBuilder::request_timeout) | 2 s | how long one storage request may take before its outcome counts as unknown; at most the backend's own timeout |
/// | [`fencing`](LockerBuilder::fencing) | on | a fencing token per acquisition (one more read and write): leave it on unless nothing downstream checks tokens |
///
/// Everything else (polling, retries, waiting in the main row, lingering, the fast path)
/// is advanced tuning, set with [`LockerBuilder::config`] on a whole [`LockConfig`]; the
/// five setters apply on top of it, whichever is called first.
///
/// ```
/// # use std::time::Duration;
/// # use fair_lock::{Error, LockStorage, Locker};
/// fn locker<S: LockStorage>(storage: S) -> Result<Locker<S>, Error> {
///     Locker::builder(storage)
///         .owner_name("billing-1")
///         .lease_ttl(Duration::from_secs(15))
///         .build()
/// }
/// ```
pub struct LockerBuilder<S> {
    storage: S,
    config: LockConfig,
    settings: Settings,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
    replay_owner_ids: Option<u64>,
    metrics: Option<Arc<dyn LockMetrics>>,
    wake_hints: Option<Arc<dyn WakeHintTransport>>,
}

/// The everyday settings given to the builder, applied over its [`LockConfig`].
#[derive(Clone, Debug, Default)]
struct Settings {
    lease_ttl: Option<Duration>,
    max_clock_skew: Option<Duration>,
    request_timeout: Option<Duration>,
    fencing: Option<bool>,
    owner_name: Option<String>,
}

impl Settings {
    fn apply(self, mut config: LockConfig) -> LockConfig {
        if let Some(lease_ttl) = self.lease_ttl {
            config.lease_ttl = lease_ttl;
        }
        if let Some(max_clock_skew) = self.max_clock_skew {
            config.max_clock_skew = max_clock_skew;
        }
        if let Some(request_timeout) = self.request_timeout {
            config.request_timeout = request_timeout;
        }
        if let Some(fencing) = self.fencing {
            config.fencing = fencing;
        }
        if let Some(owner_name) = self.owner_name {
            config.owner_prefix = Some(owner_name);
        }
        config
    }
}

impl<S: LockStorage> LockerBuilder<S> {
    /// The TTL of a holder's cells: how long a holder that died blocks the lock (default
    /// 10 s). Whole seconds, and long enough for a renewal round within the lease: with
    /// the other defaults at least 9 s; [`LockerBuilder::build`] says what to change
    /// otherwise. A holder that may pause (a long GC, a frozen VM) for longer than the
    /// lease loses the lock meanwhile: choose the lease longer than such pauses, or check
    /// fencing tokens downstream.
    pub fn lease_ttl(mut self, lease_ttl: Duration) -> Self {
        self.settings.lease_ttl = Some(lease_ttl);
        self
    }

    /// The most that the wall clocks of lock clients and storage nodes may disagree
    /// (default 1 s). Exclusion rests on it: keep clocks synchronised (NTP) within it.
    pub fn max_clock_skew(mut self, max_clock_skew: Duration) -> Self {
        self.settings.max_clock_skew = Some(max_clock_skew);
        self
    }

    /// How long one storage request may take before its outcome counts as unknown
    /// (default 2 s). The backend checks it against its own timeouts at the first
    /// acquisition.
    pub fn request_timeout(mut self, request_timeout: Duration) -> Self {
        self.settings.request_timeout = Some(request_timeout);
        self
    }

    /// Whether each acquisition takes a fencing token ([`LockGuard::fencing_token`],
    /// default on): one more read and write per acquisition, and what makes a former
    /// holder's late write refusable downstream.
    ///
    /// [`LockGuard::fencing_token`]: crate::LockGuard::fencing_token
    pub fn fencing(mut self, fencing: bool) -> Self {
        self.settings.fencing = Some(fencing);
        self
    }

    /// A readable name (a host or service name) that prefixes this locker's owner ids, so
    /// that inspection shows who holds a lock (default: none, the ids are random only).
    /// The ids stay unique: each still carries the process's own randomness.
    pub fn owner_name(mut self, owner_name: impl Into<String>) -> Self {
        self.settings.owner_name = Some(owner_name.into());
        self
    }

    /// Advanced tuning: the machines' whole configuration (default
    /// [`LockConfig::default`]), for the settings beyond the five above (polling, retries,
    /// waiting in the main row, lingering, the fast path). The five setters apply on top
    /// of it, whether called before or after it.
    pub fn config(mut self, config: LockConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the clock (default: [`SystemClock`]); tests use a [`super::VirtualClock`], and
    /// the time service offers a global one.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Seeds the generator of poll jitter and of [`Locker::next_seed`] (default: from the
    /// OS), so that their draws repeat from one run to the next.
    ///
    /// Owner ids (and the names of the locker's seats) never come from this seed: they
    /// always carry the operating system's randomness, so lockers built with the same seed
    /// (two processes started from one configuration) still hold a lock one at a time.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// **Unstable, for simulations and tests only (feature `testing`); never in
    /// production.** Draws owner ids
    /// and seat names from the seeded generator too, seeded with `seed` (which replaces
    /// [`LockerBuilder::seed`]), so that a simulated run, owner ids included, replays
    /// exactly.
    ///
    /// Two lockers given the same `seed` here make the same owner ids: each takes the
    /// other's cells for its own and both can hold the same lock at once. Give every
    /// locker of a simulation its own seed. This method may change or go away in any
    /// release.
    #[cfg(feature = "testing")]
    pub fn replay_owner_ids_unsafe(mut self, seed: u64) -> Self {
        self.replay_owner_ids = Some(seed);
        self
    }

    /// Reports measurements to `metrics` (default: none, at no cost).
    pub fn metrics(mut self, metrics: Arc<dyn LockMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Sends and receives wake-up hints on `transport` (default: none; docs/algorithm.md,
    /// section "Wake-up hints"). Each acquisition of the queue algorithm then names the
    /// transport's listener in its queue cell; a holder hints the two listening owners
    /// queued right behind it when it takes the lock and when it releases it, and they
    /// read at once instead of at their next poll. Owners three or more places back then
    /// poll only every [`lock_core::hint::FALLBACK_POLL`], waiting for the hints of those
    /// ahead. Every locker of a lock should use hints, or none: a holder without them
    /// hints nobody.
    pub fn wake_hints(mut self, transport: Arc<dyn WakeHintTransport>) -> Self {
        self.wake_hints = Some(transport);
        self
    }

    /// Validates the configuration ([`LockConfig::validate`]) and builds the locker. The
    /// backend's own check of the configuration ([`LockStorage::check_config`]: on
    /// Cassandra, the request timeout and the table's `gc_grace_seconds`) runs at the
    /// locker's first acquisition, which returns its error.
    pub fn build(self) -> Result<Locker<S>, Error> {
        let config = self.settings.apply(self.config).validate()?;
        let (mut seeds, owner_ids) = match self.replay_owner_ids {
            Some(seed) => (SplitMix64::new(seed), OwnerIds::Replayed),
            None => (
                SplitMix64::new(self.seed.unwrap_or_else(os_random_u64)),
                OwnerIds::Random(Mutex::new(SplitMix64::new(os_random_u64()))),
            ),
        };
        let seat_number = match &owner_ids {
            OwnerIds::Random(ids) => lock_ignoring_poison(ids).next_u64(),
            OwnerIds::Replayed => seeds.next_u64(),
        };
        let seat_prefix = match &config.config().owner_prefix {
            Some(prefix) => format!("{prefix}-{seat_number:016x}"),
            None => format!("{seat_number:016x}"),
        };
        let seating = Seating::new(seat_prefix, &config);
        Ok(Locker {
            shared: Arc::new(Shared {
                storage: self.storage,
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock::new())),
                config,
                metrics: self.metrics,
                seating,
                lines: Arc::default(),
                keeper: Arc::default(),
                lingers: Lingers::default(),
                wake_hints: self.wake_hints,
                seeds: Mutex::new(seeds),
                owner_ids,
                tasks: Arc::default(),
                shutdown_errors: Mutex::default(),
                storage_checked: tokio::sync::OnceCell::new(),
            }),
        })
    }
}

impl<S: LockStorage> Locker<S> {
    /// A locker on `storage` with the system clock; fails if `config` is invalid.
    pub fn new(storage: S, config: LockConfig) -> Result<Self, Error> {
        Self::builder(storage).config(config).build()
    }

    /// Starts building a locker on `storage`.
    pub fn builder(storage: S) -> LockerBuilder<S> {
        LockerBuilder {
            storage,
            config: LockConfig::default(),
            settings: Settings::default(),
            clock: None,
            seed: None,
            replay_owner_ids: None,
            metrics: None,
            wake_hints: None,
        }
    }

    /// The validated configuration.
    pub fn config(&self) -> &ValidConfig {
        &self.shared.config
    }

    /// The storage backend.
    pub fn storage(&self) -> &S {
        &self.shared.storage
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// Mandatory lock: waits as long as needed and returns the held lock. Fails only on bad
    /// input, when the backend refuses the configuration ([`LockStorage::check_config`],
    /// checked before the locker's first request), when storage keeps failing for
    /// [`crate::LockConfig::storage_retry_window`] (10 s by default; a node restart or a
    /// short loss of quorum is waited out), when the same task already holds the lock
    /// ([`Error::ReentrantLock`], below), once the locker is shut down
    /// ([`Error::ShutDown`], [`Locker::shutdown`]), or with [`Error::NoRuntime`] when
    /// polled outside a Tokio runtime (as do every other async method of the locker and
    /// [`LockGuard::release`]).
    ///
    /// Tasks of this locker (and its clones) that want the same lock wait for it in the
    /// process, in the order they called, and only the first of them stands in the
    /// distributed queue: fifty local waiters cost the storage what one does. When a task
    /// releases, the next one enqueues behind every other process's owner that enqueued
    /// meanwhile, so a busy process takes one turn per pass of the queue and cannot starve
    /// the others.
    ///
    /// # Re-entrancy
    ///
    /// The lock is not re-entrant, like Tokio's `Mutex`, whose `lock` in a task that
    /// holds its guard waits for itself forever. Here the driver tells that case apart: a
    /// task that calls `lock` (or [`Locker::lock_timeout`]) for a lock it acquired through
    /// this locker or a clone, and whose guard is still alive (or whose acquisition is
    /// still under way in the same task, as with `join!`), gets
    /// [`Error::ReentrantLock`] at once instead of waiting. A guard handed to another task
    /// still counts as the acquiring task's until it is released or dropped. Where a task
    /// may already hold the lock, use the guard it has, or [`Locker::try_lock`] (which
    /// returns `None` at once when a task of this locker holds it). Outside a spawned Tokio
    /// task (a future polled by `block_on`, such as the body of `#[tokio::main]` or
    /// `#[tokio::test]`) there is no task to tell apart and `lock` waits for itself, as
    /// Tokio's `Mutex` does.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in the sense that a dropped future forgets its place: dropped while
    /// it waits, the acquisition is abandoned and a background task deletes its queue entry
    /// (and any main cell it had written), so it blocks no one; a new call joins the back of
    /// the queue. If the abandoned acquisition turns out to have taken the lock, that task
    /// releases it at once. Without a runtime left to run that task, the cells expire after
    /// `waiter_ttl` (a queue entry) or `lease_ttl`.
    #[must_use = "the lock is released as soon as the returned guard is dropped; bind it \
                  (`let guard = ...`) for the whole critical section"]
    pub async fn lock(&self, lock_id: impl IntoLockId) -> Result<LockGuard, Error> {
        let lock_id = lock_id.into_lock_id()?;
        self.acquire(lock_id, Mode::Mandatory, None)
            .await?
            .ok_or(Error::Internal(
                "a mandatory lock without a deadline gave up",
            ))
    }

    /// Soft lock: takes the lock now, or returns `None` if another owner holds it or is
    /// ahead in the queue. Never waits for another holder. If another task of this locker
    /// holds or waits for the lock, it returns `None` at once, without asking the storage.
    ///
    /// # Cancel safety
    ///
    /// As for [`Locker::lock`]: dropped midway, its cells are deleted in the background
    /// (and a lock it had taken is released), so a new call starts afresh.
    #[must_use = "the lock is released as soon as the returned guard is dropped; bind it \
                  (`if let Some(guard) = ...`) for the whole critical section"]
    pub async fn try_lock(&self, lock_id: impl IntoLockId) -> Result<Option<LockGuard>, Error> {
        let lock_id = lock_id.into_lock_id()?;
        self.acquire(lock_id, Mode::Soft, None).await
    }

    /// Mandatory lock that gives up after `timeout`, returning `None` (its queue entry is
    /// deleted on the way out). If storage keeps failing until then, it returns the storage
    /// error instead, once its next retry would come after the deadline, so that a
    /// time-out never hides an unavailable cluster.
    ///
    /// # Cancel safety
    ///
    /// As for [`Locker::lock`]: dropped before the timeout, its queue entry is deleted
    /// in the background (and a lock it had taken is released); a new call joins the back
    /// of the queue.
    #[must_use = "the lock is released as soon as the returned guard is dropped; bind it \
                  (`if let Some(guard) = ...`) for the whole critical section"]
    pub async fn lock_timeout(
        &self,
        lock_id: impl IntoLockId,
        timeout: Duration,
    ) -> Result<Option<LockGuard>, Error> {
        let lock_id = lock_id.into_lock_id()?;
        self.acquire(lock_id, Mode::Mandatory, Some(timeout)).await
    }

    /// Reports a lock's holder, queue (in order, with ages), shadow cells and fence, and
    /// flags stale cells. Reads at most `limit` cells per row.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads, so dropping it midway has no effect.
    pub async fn inspect(&self, lock_id: impl IntoLockId, limit: u32) -> Result<LockReport, Error> {
        let lock_id = lock_id.into_lock_id()?;
        require_runtime("Locker::inspect was polled outside one")?;
        let shared = &self.shared;
        let mut inspect = Inspect::new(shared.clock.now(), shared.config.clone(), lock_id, limit);
        shared.context().run(&mut inspect).await?
    }

    /// Administrative force release: deletes every cell of `owner` on `lock_id`, so that
    /// the next owner can take the lock without waiting for the TTL. Returns whether the
    /// owner had any cell. The owner, if still alive, learns at its next renewal that it
    /// lost the lock. Logged at `warn` level on target `lock_core::admin`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, some of the owner's cells may be deleted and others
    /// not (nothing goes on in the background). Deleting is idempotent, so call it again;
    /// cells left behind expire after their TTL anyway.
    pub async fn force_release(
        &self,
        lock_id: impl IntoLockId,
        owner: &OwnerId,
    ) -> Result<bool, Error> {
        let lock_id = lock_id.into_lock_id()?;
        require_runtime("Locker::force_release was polled outside one")?;
        let report = self.inspect(lock_id.clone(), 1000).await?;
        let shared = &self.shared;
        let Some(mut release) =
            report.force_release(shared.clock.now(), shared.config.clone(), owner)
        else {
            tracing::warn!(target: "lock_core::admin", %lock_id, %owner, "force release: the owner has no cell");
            return Ok(false);
        };
        tracing::warn!(target: "lock_core::admin", %lock_id, %owner, "force release");
        shared.context().run(&mut release).await??;
        Ok(true)
    }

    /// Scoped lock: waits for the lock as [`Locker::lock`] does, runs the critical
    /// `section` with the guard (for its [`LockGuard::fencing_token`] and
    /// [`LockGuard::time_left`]), then releases the lock and returns the section's value.
    ///
    /// * If the lease is lost while the section runs (renewals failed until the deadline,
    ///   or the lock was force-released), the section is **stopped**: its future is dropped
    ///   at its current `.await`, and `with_lock` returns [`Error::LockLost`]. Code between
    ///   two `.await`s cannot be interrupted, and a write already sent may still land, so
    ///   pass the fencing token to the resource when that matters.
    /// * If the section completes, the lock is released; if the release fails, its error is
    ///   returned and the section's value is dropped: [`Error::LockLost`] when the lease
    ///   lapsed during the section (it may have overlapped another owner's), or the storage
    ///   error (the cells then expire after `lease_ttl`).
    /// * If the lock cannot be taken, the error of [`Locker::lock`] is returned and
    ///   the section never runs.
    ///
    /// ```
    /// # use fair_lock::{Error, LockConfig, Locker};
    /// # use lock_core::storage::*;
    /// # async fn write_balance(_token: Option<fair_lock::FencingToken>) {}
    /// async fn withdraw<S: LockStorage>(locker: &Locker<S>) -> Result<(), Error> {
    ///     locker
    ///         .with_lock("account:42", async |guard| {
    ///             write_balance(guard.fencing_token()).await;
    ///         })
    ///         .await
    /// }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropped while it waits, it behaves as a dropped [`Locker::lock`] (the queue
    /// entry is deleted in the background). Dropped while the section runs, the section's
    /// future is dropped with it and the guard releases the lock in the background. Dropped
    /// during the release, the release goes on in the background
    /// (see [`LockGuard::release`]).
    pub async fn with_lock<T>(
        &self,
        lock_id: impl IntoLockId,
        section: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<T, Error> {
        let guard = self.lock(lock_id).await?;
        let lost = guard.lost();
        let value = {
            let section = section(&guard);
            tokio::select! {
                biased;
                () = lost => None,
                value = section => Some(value),
            }
        };
        match (value, guard.lock_id().clone(), guard.release().await) {
            (Some(value), _, Ok(())) => Ok(value),
            (Some(_), _, Err(error)) | (None, _, Err(error @ Error::LockLost { .. })) => Err(error),
            (None, lock_id, _) => Err(Error::LockLost {
                lock_id,
                reason: "the lease was lost while the critical section ran".to_owned(),
            }),
        }
    }

    /// An acquisition, given up with [`Error::ShutDown`] if the locker is (or gets) shut
    /// down before it ends.
    async fn acquire(
        &self,
        lock_id: LockId,
        mode: Mode,
        timeout: Option<Duration>,
    ) -> Result<Option<LockGuard>, Error> {
        if self.shared.tasks.is_closed() {
            return Err(Error::ShutDown);
        }
        let closed = self.shared.tasks.closed();
        tokio::select! {
            biased;
            acquired = self.acquire_open(lock_id, mode, timeout) => acquired,
            () = closed => Err(Error::ShutDown),
        }
    }

    async fn acquire_open(
        &self,
        lock_id: LockId,
        mode: Mode,
        timeout: Option<Duration>,
    ) -> Result<Option<LockGuard>, Error> {
        require_runtime(
            "Locker::lock, try_lock or lock_timeout was polled outside one \
             (acquiring needs Tokio's timer, and a held lock's lease runs on a Tokio task)",
        )?;
        let shared = &self.shared;
        // The backend checks the configuration before the first request; a failed check
        // is made again by the next acquisition.
        shared
            .storage_checked
            .get_or_try_init(|| shared.storage.check_config(shared.config.config()))
            .await?;
        let called = shared.clock.now();
        let give_up_at = timeout.map(|timeout| called.instant + timeout);
        if mode == Mode::Mandatory && shared.lines.claimed_by_this_task(&lock_id) {
            return Err(Error::ReentrantLock { lock_id });
        }
        // Only the first of this locker's tasks that want the lock stands in the queue.
        let turn = match (mode, timeout) {
            (Mode::Soft, _) => shared.lines.try_join(&lock_id),
            (Mode::Mandatory, None) => Some(shared.lines.join(&lock_id).await),
            (Mode::Mandatory, Some(timeout)) => tokio::time::timeout(
                shared.clock.timer_duration(timeout),
                shared.lines.join(&lock_id),
            )
            .await
            .ok(),
        };
        let Some(turn) = turn else {
            if let Some(metrics) = shared.metrics.as_deref() {
                let reason = match mode {
                    Mode::Soft => NotAcquired::Busy,
                    Mode::Mandatory => NotAcquired::TimedOut,
                };
                metrics.not_acquired(&lock_id, reason);
            }
            return Ok(None);
        };
        let claim = shared.lines.claim(&lock_id, &turn);
        let turn = match shared.lingers.take(&lock_id) {
            Some(lingering) => match self.retake(lingering, turn).await? {
                Ok(guard) => return Ok(Some(guard.claimed(claim))),
                Err(turn) => turn,
            },
            None => turn,
        };
        let (owner, seed) = self.next_owner()?;
        let now = shared.clock.now();
        let span = tracing::debug_span!("acquire", %lock_id, %owner, ?mode);
        let (seat, mut options) = shared.seating.start(&lock_id, now, give_up_at);
        let hints = shared.wake_hints.as_deref().map(|transport| {
            options.wake_hint_listener = Some(transport.listener());
            transport.inbox().register(lock_id.clone(), owner.clone())
        });
        let machine = AnyAcquire::new(
            now,
            shared.config.clone(),
            mode,
            lock_id.clone(),
            owner,
            seed,
            options,
        );
        let mut pending = PendingAcquire {
            machine: Some(machine),
            seat: Some(seat),
            turn: Some(turn),
            shared: self.shared.clone(),
        };
        let machine = pending
            .machine
            .as_mut()
            .ok_or(Error::Internal("an acquisition lost its machine"))?;
        let link =
            shared
                .wake_hints
                .as_deref()
                .zip(hints.as_ref())
                .map(|(transport, registration)| HintLink {
                    transport,
                    registration,
                });
        let outcome = shared
            .context()
            .run_hinted(machine, link)
            .instrument(span)
            .await;
        // The holder of a lock that may linger keeps listening: a waiter may ask it not to.
        let hints = hints.filter(|_| !shared.config.config().linger.is_zero());
        let holding = match &outcome {
            Ok(AcquireOutcome::Acquired(holding)) => Some(&**holding),
            _ => None,
        };
        let (seat, turn) = pending.finished(holding);
        let metrics = shared.metrics.as_deref();
        let not_acquired = |reason| {
            if let Some(metrics) = metrics {
                metrics.not_acquired(&lock_id, reason);
            }
        };
        match outcome? {
            AcquireOutcome::Acquired(holding) => {
                tracing::debug!(wait = ?holding.wait(), "acquired");
                if let Some(transport) = shared.wake_hints.as_deref() {
                    send_all(transport, holding.wake_hints());
                }
                if let Some(metrics) = metrics {
                    metrics.acquired(&lock_id, holding.wait(), &holding.stats);
                }
                let guard =
                    LockGuard::start(self.shared.clone(), *holding, seat, turn, true, hints);
                Ok(Some(guard.claimed(claim)))
            }
            AcquireOutcome::Busy | AcquireOutcome::Abandoned => {
                not_acquired(NotAcquired::Busy);
                Ok(None)
            }
            AcquireOutcome::TimedOut => {
                not_acquired(NotAcquired::TimedOut);
                Ok(None)
            }
            AcquireOutcome::Failed(error) => {
                not_acquired(NotAcquired::Failed);
                Err(error)
            }
        }
    }

    /// Releases at once every lock of this locker (and its clones) that lingers after its
    /// release ([`LockConfig::linger`]), deleting their cells, and returns how many there
    /// were. Call it before the process exits: a lingering lock whose deletes never run
    /// (the runtime shut down first) blocks other processes until its cells expire after
    /// `lease_ttl`.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the locks not yet released stay with it and expire after
    /// `lease_ttl`; call it again instead.
    pub async fn release_lingering(&self) -> Result<usize, Error> {
        require_runtime("Locker::release_lingering was polled outside one")?;
        let lingering = self.shared.lingers.take_all();
        let count = lingering.len();
        for lingering in lingering {
            linger::end(&self.shared, lingering).await;
        }
        Ok(count)
    }

    /// Shuts this locker and its clones down: releases every lock they still hold (the
    /// locks of live guards, and those lingering after their release), gives up the
    /// acquisitions still waiting (they return [`Error::ShutDown`], their queue cells
    /// deleted), ends the locker's background tasks (lease renewals, the lease keeper,
    /// linger timers, background releases and clean-ups), and returns once all that is
    /// done: `Ok(())`, or the errors of the releases that failed (their cells then expire
    /// after `lease_ttl`; a lease already lost reports [`Error::LockLost`]).
    ///
    /// Call it before the process exits: dropping a locker leaves the renewal tasks of its
    /// live guards running. Afterwards every acquisition of the locker and its clones
    /// returns [`Error::ShutDown`].
    ///
    /// A guard still alive after the shutdown no longer holds its lock: its
    /// [`LockGuard::status`] is [`crate::LeaseStatus::Lost`], [`LockGuard::lost`] and
    /// [`LockGuard::in_doubt`] complete, and [`LockGuard::release`] returns
    /// [`Error::LockLost`] (another owner may hold the lock by then). Stop the work
    /// those guards protect before calling it.
    ///
    /// The wake-up hint transport ([`LockerBuilder::wake_hints`]) and the clock (a
    /// [`super::TimeService`]'s, for one) belong to the caller, who may share them with
    /// other lockers: drop them to stop their tasks.
    ///
    /// # Cancel safety
    ///
    /// The locker is shut down at the first poll, whatever happens to the future; dropped
    /// midway, the releases already begun go on in the background and their errors are
    /// lost. Call it again to wait for them.
    pub async fn shutdown(&self) -> Result<(), Vec<Error>> {
        require_runtime("Locker::shutdown was polled outside one").map_err(|error| vec![error])?;
        let shared = &self.shared;
        shared.tasks.close();
        for lingering in shared.lingers.take_all() {
            linger::end(shared, lingering).await;
        }
        let mut errors = Vec::new();
        for parked in shared.keeper.take_all() {
            if let Some(release) = parked.shut_down()
                && let Err(error) = release.await
            {
                errors.push(error);
            }
        }
        shared.tasks.all_ended().await;
        errors.append(&mut lock_ignoring_poison(&shared.shutdown_errors));
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Takes `lingering` again if nobody else has queued for its lock
    /// ([`lock_core::machine::Retake`]): the guard, or the turn back once the lease has been
    /// given back and its cells deleted, for an acquisition afresh.
    async fn retake(
        &self,
        lingering: Lingering,
        turn: LocalTurn,
    ) -> Result<Result<LockGuard, LocalTurn>, Error> {
        let shared = &self.shared;
        // As for any acquisition, the wait counts from the first request, not from the
        // call: time in the local line is not the storage's.
        let started_at = shared.clock.now().instant;
        let Lingering {
            lease,
            seat,
            owner,
            fencing_token,
            hints,
        } = lingering;
        let mut pending = PendingRetake {
            retake: Some(Retake::new(
                shared.clock.now(),
                shared.config.clone(),
                lease,
            )),
            parts: Some((seat, owner, fencing_token, hints)),
            shared: shared.clone(),
        };
        let retake = pending
            .retake
            .as_mut()
            .ok_or(Error::Internal("a retake lost its machine"))?;
        let outcome = shared.context().run(retake).await;
        let (Some(retake), Some((seat, owner, fencing_token, hints))) =
            (pending.retake.take(), pending.parts.take())
        else {
            return Err(Error::Internal("a retake lost its lease"));
        };
        let give_back = |lease| Lingering {
            lease,
            seat,
            owner,
            fencing_token,
            hints,
        };
        match outcome {
            Ok(RetakeOutcome::Held(lease, stats)) => {
                if let Some(metrics) = shared.metrics.as_deref() {
                    metrics.acquired(lease.lock_id(), Duration::ZERO, &stats);
                }
                let guard =
                    LockGuard::retaken(shared.clone(), give_back(lease), stats, started_at, turn);
                Ok(Ok(guard))
            }
            Ok(RetakeOutcome::GiveBack(lease)) => {
                linger::end(shared, give_back(lease)).await;
                Ok(Err(turn))
            }
            Err(error) => {
                if let Some(lease) = retake.into_lease() {
                    linger::end(shared, give_back(lease)).await;
                }
                Err(error)
            }
        }
    }

    /// A number from this locker's seeded generator, for the randomness of what is built
    /// on the locker (lock-recipes' work queue draws its item ids and pauses from it), so
    /// that a locker built with [`LockerBuilder::seed`] makes a simulation replay exactly.
    /// Without a seed the generator starts from fresh randomness, so processes draw
    /// different numbers.
    ///
    /// Public so that recipes built in other crates replay as the lock does. Lockers built
    /// with the same seed draw the same numbers; the lock's own owner ids do not come from
    /// this generator (see [`LockerBuilder::seed`]).
    pub fn next_seed(&self) -> u64 {
        lock_ignoring_poison(&self.shared.seeds).next_u64()
    }

    /// A fresh owner id, and the seed of its acquisition's poll jitter.
    fn next_owner(&self) -> Result<(OwnerId, u64), Error> {
        let mut seeds = lock_ignoring_poison(&self.shared.seeds);
        let bytes = match &self.shared.owner_ids {
            OwnerIds::Random(ids) => owner_bytes(&mut lock_ignoring_poison(ids)),
            OwnerIds::Replayed => owner_bytes(&mut seeds),
        };
        let prefix = self.shared.config.config().owner_prefix.as_deref();
        Ok((OwnerId::from_random_bytes(prefix, bytes)?, seeds.next_u64()))
    }
}

/// The 16 random bytes of an owner id, from `ids`.
fn owner_bytes(ids: &mut SplitMix64) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&ids.next_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&ids.next_u64().to_le_bytes());
    bytes
}

fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`Error::NoRuntime`] naming `what` unless a Tokio runtime is running: checked by every
/// async entry point before anything that needs the runtime (a timer, a spawned task).
pub(crate) fn require_runtime(what: &'static str) -> Result<(), Error> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => Ok(()),
        Err(_) => Err(Error::NoRuntime(what)),
    }
}

/// What a lingering lease brings to its retake besides the lease: its seat, owner, fencing
/// token and registration for wake-up hints.
type RetakeParts = (
    Option<SeatTicket>,
    OwnerId,
    Option<FencingToken>,
    Option<WakeRegistration>,
);

/// Owns a retake and its lingering lease while its future runs: dropped midway, the lease
/// is released on a background task, as a dropped guard's would be.
struct PendingRetake<S: LockStorage> {
    retake: Option<Retake>,
    parts: Option<RetakeParts>,
    shared: Arc<Shared<S>>,
}

impl<S: LockStorage> Drop for PendingRetake<S> {
    fn drop(&mut self) {
        let (Some(retake), Some((seat, owner, fencing_token, hints))) =
            (self.retake.take(), self.parts.take())
        else {
            return;
        };
        if let Some(lease) = retake.into_lease() {
            let lingering = Lingering {
                lease,
                seat,
                owner,
                fencing_token,
                hints,
            };
            linger::spawn_end(&self.shared, lingering);
        }
    }
}

/// Owns an acquisition and its seat while its future runs. If the future is dropped
/// midway, the machine is abandoned and driven to the end of its cleanup on a background
/// task, so no queue or main cell is left to wait for its TTL (without a runtime, the TTL
/// still frees it), and only then is the seat given back.
struct PendingAcquire<S: LockStorage> {
    machine: Option<AnyAcquire>,
    seat: Option<SeatTicket>,
    /// Kept until the cleanup of a dropped acquisition is over.
    turn: Option<LocalTurn>,
    shared: Arc<Shared<S>>,
}

impl<S: LockStorage> PendingAcquire<S> {
    /// The machine has run to its end, holding the lock as `holding` if it took it: tells
    /// the seat ([`SeatTicket::acquisition_ended`], which gives it back without the lock),
    /// and returns it and the local turn if the lock was taken (the lease keeps them until
    /// the cells are deleted). Without the lock, the turn is dropped here and the line
    /// moves on.
    fn finished(&mut self, holding: Option<&Holding>) -> (Option<SeatTicket>, Option<LocalTurn>) {
        let turn = self.turn.take();
        let Some(machine) = self.machine.take() else {
            return (None, None);
        };
        let mut seat = self.seat.take();
        if let Some(seat) = seat.as_mut() {
            seat.acquisition_ended(&machine, holding);
        }
        match holding {
            Some(_) => (seat, turn),
            None => (None, None),
        }
    }
}

impl<S: LockStorage> Drop for PendingAcquire<S> {
    fn drop(&mut self) {
        let Some(mut machine) = self.machine.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let shared = self.shared.clone();
        let mut seat = self.seat.take();
        let turn = self.turn.take();
        let tasks = shared.tasks.clone();
        tasks.spawn(async move {
            machine.abandon(shared.clock.now());
            let outcome = shared.context().run(&mut machine).await;
            let holding = match outcome {
                Ok(AcquireOutcome::Acquired(holding)) => Some(*holding),
                _ => None,
            };
            if let Some(seat) = seat.as_mut() {
                seat.acquisition_ended(&machine, holding.as_ref());
            }
            if let Some(holding) = holding {
                drop(LockGuard::start(
                    shared.clone(),
                    holding,
                    seat,
                    turn,
                    false,
                    None,
                ));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::VirtualClock;
    use crate::test_client::TestStore;
    use lock_core::config::{Algorithm, BakeryConfig};
    use lock_core::time::Timestamp;

    fn bakery(client_id: u32, lease: bool) -> LockConfig {
        LockConfig {
            algorithm: Algorithm::Bakery,
            fencing: false,
            bakery: BakeryConfig {
                max_clients: 3,
                client_id,
                lease,
            },
            ..LockConfig::default()
        }
    }

    /// Three lockers, bakery clients 1 to 3, take one lock in turn, never two at once,
    /// with holds longer than a renewal period (their numbers and leases are renewed).
    #[test]
    fn bakery_lockers_take_turns() {
        crate::watchdog::in_virtual_time("bakery_lockers_take_turns", async {
            let clock = VirtualClock::starting_at(Timestamp::from_micros(1_700_000_000_000_000));
            let store = TestStore::new(clock.clone());
            let inside = Arc::new(AtomicUsize::new(0));
            let tasks: Vec<_> = (1..=3)
                .map(|client_id| {
                    let locker = Locker::builder(store.client())
                        .config(bakery(client_id, true))
                        .clock(Arc::new(clock.clone()))
                        .replay_owner_ids_unsafe(u64::from(client_id))
                        .build()
                        .unwrap();
                    let inside = inside.clone();
                    tokio::spawn(async move {
                        for _ in 0..3 {
                            let guard = locker.lock("account:42").await.unwrap();
                            assert!(guard.fencing_token().is_none());
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                            tokio::time::sleep(Duration::from_secs(6)).await;
                            assert!(guard.is_held());
                            inside.fetch_sub(1, Ordering::SeqCst);
                            guard.release().await.unwrap();
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        });
    }

    /// Two processes started from one configuration, seed included: their owner ids still
    /// differ, so only one of them holds the lock; the seed still repeats their other draws.
    #[test]
    fn lockers_with_the_same_seed_never_hold_one_lock_together() {
        crate::watchdog::in_virtual_time(
            "lockers_with_the_same_seed_never_hold_one_lock_together",
            async {
                let clock =
                    VirtualClock::starting_at(Timestamp::from_micros(1_700_000_000_000_000));
                let store = TestStore::new(clock.clone());
                let seeded = || {
                    Locker::builder(store.client())
                        .clock(Arc::new(clock.clone()))
                        .seed(7)
                        .build()
                        .unwrap()
                };
                let (a, b) = (seeded(), seeded());
                assert_eq!(
                    a.next_seed(),
                    b.next_seed(),
                    "the seed drives the other draws"
                );
                let held = a.lock("account:42").await.unwrap();
                assert!(
                    b.try_lock("account:42").await.unwrap().is_none(),
                    "two holders"
                );
                let waiting = b.lock_timeout("account:42", Duration::from_secs(1));
                assert!(waiting.await.unwrap().is_none(), "two holders");
                let owner = held.owner_id().clone();
                held.release().await.unwrap();
                let taken = b.lock("account:42").await.unwrap();
                assert_ne!(taken.owner_id(), &owner, "one owner id in two lockers");
                taken.release().await.unwrap();
            },
        );
    }

    /// The testing-only replay draws owner ids from the seed: the same seed, the same ids.
    #[test]
    fn replayed_owner_ids_repeat_with_their_seed() {
        crate::watchdog::in_virtual_time("replayed_owner_ids_repeat_with_their_seed", async {
            let clock = VirtualClock::starting_at(Timestamp::from_micros(1_700_000_000_000_000));
            let owner_of = async |store: TestStore| {
                let locker = Locker::builder(store.client())
                    .clock(Arc::new(clock.clone()))
                    .replay_owner_ids_unsafe(7)
                    .build()
                    .unwrap();
                let guard = locker.lock("account:42").await.unwrap();
                let owner = guard.owner_id().clone();
                guard.release().await.unwrap();
                owner
            };
            let first = owner_of(TestStore::new(clock.clone())).await;
            let second = owner_of(TestStore::new(clock.clone())).await;
            assert_eq!(first, second);
        });
    }

    /// A backend whose configuration check fails as often as `failures` says, counting
    /// its checks.
    struct Checked {
        client: crate::test_client::TestClient,
        failures: AtomicUsize,
        checks: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl LockStorage for Checked {
        async fn write_cell(&self, write: lock_core::storage::CellWrite) -> Result<(), Error> {
            self.client.write_cell(write).await
        }

        async fn delete_cell(&self, delete: lock_core::storage::CellDelete) -> Result<(), Error> {
            self.client.delete_cell(delete).await
        }

        async fn read_row(
            &self,
            read: lock_core::storage::RowRead,
        ) -> Result<Vec<lock_core::storage::Cell>, Error> {
            self.client.read_row(read).await
        }

        async fn check_config(&self, config: &LockConfig) -> Result<(), Error> {
            self.checks.fetch_add(1, Ordering::SeqCst);
            let failing = self.failures.load(Ordering::SeqCst);
            if failing == 0 {
                return Ok(());
            }
            self.failures.store(failing - 1, Ordering::SeqCst);
            Err(Error::InvalidConfig {
                field: "lease_ttl",
                reason: format!("{:?} does not suit this backend", config.lease_ttl),
            })
        }
    }

    /// The backend's check runs before the first request: its error comes back from the
    /// first acquisition, with nothing sent; a later acquisition checks again, and once a
    /// check has passed, none is made again.
    #[test]
    fn a_backend_that_refuses_the_configuration_fails_the_first_call() {
        crate::watchdog::in_virtual_time(
            "a_backend_that_refuses_the_configuration_fails_the_first_call",
            async {
                let clock =
                    VirtualClock::starting_at(Timestamp::from_micros(1_700_000_000_000_000));
                let client = TestStore::new(clock.clone()).client();
                let storage = Arc::new(Checked {
                    client: client.clone(),
                    failures: AtomicUsize::new(1),
                    checks: AtomicUsize::new(0),
                });
                let locker = Locker::builder(storage.clone())
                    .clock(Arc::new(clock.clone()))
                    .build()
                    .unwrap();
                assert_eq!(
                    storage.checks.load(Ordering::SeqCst),
                    0,
                    "build checks nothing"
                );
                match locker.lock("account:42").await {
                    Err(Error::InvalidConfig { field, reason }) => {
                        assert_eq!(field, "lease_ttl");
                        assert!(reason.contains("does not suit"), "{reason}");
                    }
                    other => panic!("expected the backend's refusal, got {other:?}"),
                }
                assert!(
                    client.sent().is_empty(),
                    "a request before the check passed"
                );
                for _ in 0..3 {
                    let guard = locker.try_lock("account:42").await.unwrap().unwrap();
                    guard.release().await.unwrap();
                }
                assert_eq!(
                    storage.checks.load(Ordering::SeqCst),
                    2,
                    "checked once passed"
                );
            },
        );
    }

    #[tokio::test]
    async fn a_locker_refuses_the_bakery_without_its_lease() {
        let store = TestStore::new(VirtualClock::starting_at(Timestamp::from_micros(1)));
        match bakery(1, false).validate() {
            Err(Error::InvalidConfig { field, .. }) => assert_eq!(field, "bakery.lease"),
            other => panic!("expected bakery.lease refused, got {:?}", other.map(|_| ())),
        }
        match Locker::new(store.client(), bakery(1, false)) {
            Err(Error::InvalidConfig { field, .. }) => assert_eq!(field, "bakery.lease"),
            other => panic!("expected bakery.lease refused, got {:?}", other.map(|_| ())),
        }
        assert!(Locker::new(store.client(), bakery(1, true)).is_ok());
    }
}
