//! `LockGuard`: a held lock, its background lease and its release.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{oneshot, watch};
use tracing::Instrument;

use lock_core::error::Error;
use lock_core::hint;
use lock_core::id::{LockId, OwnerId};
use lock_core::machine::{AcquireStats, FencingToken, Holding, Lease, LeaseStatus, Retake};
use lock_core::storage::LockStorage;
use lock_core::time::MonotonicTime;

use super::clock::Clock;
use super::keeper::{KeeperKey, LeaseKeeper, ParkedLease};
use super::linger::{Lingering, Lingers};
use super::local_line::{LocalTurn, TaskClaim};
use super::locker::Shared;
use super::run::Driven;
use super::seats::SeatTicket;
use super::wake::{WakeRegistration, send_all};

/// What the lease task publishes after every event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LeaseState {
    status: LeaseStatus,
    deadline: MonotonicTime,
    /// How many times the status has left [`LeaseStatus::Held`], so that a watcher notices
    /// a doubt that was over before it looked.
    doubts: u64,
    /// [`super::Locker::shutdown`] released the lock.
    shut_down: bool,
}

type ReleaseReply = oneshot::Sender<Result<(), Error>>;

/// A held lock. While it exists, a background task renews its lease every `renew_every`
/// (started when the first renewal is due; a lock released before then needs none).
///
/// * [`LockGuard::status`] / [`LockGuard::is_held`] / [`LockGuard::time_left`] tell the
///   truth about the lease, checked against the local monotonic deadline at the moment you
///   ask, so a stalled renewal task cannot make them lie.
/// * [`LockGuard::lost`] completes when the lease is lost, for `tokio::select!`.
/// * [`LockGuard::release`] stops the renewals and deletes the cells.
/// * Dropping the guard without `release` asks the background task to release (best effort,
///   never blocking); if the runtime is gone, the cells expire after `lease_ttl`.
///
/// Every release, renewal and status query made after the lease lapsed reports it, even if
/// nothing ran in between (the process was frozen past the deadline): `status()` says
/// [`LeaseStatus::Lost`] and `release()` returns [`Error::LockLost`].
///
/// # Forgetting the guard
///
/// As with a Tokio `MutexGuard`, [`std::mem::forget`]ting a `LockGuard` (or leaking it in
/// an `Rc` cycle) leaks the lock: its release is never requested, so its background task
/// keeps renewing the lease for as long as the process and its runtime live, and no other
/// owner can ever take the lock. Dropping the [`super::Locker`] does not stop that
/// task; [`super::Locker::shutdown`] does, releasing the lock (the guard then reports
/// [`LeaseStatus::Lost`], and its `release` returns [`Error::LockLost`]). Release or drop
/// every guard; once the locker and all its guards are dropped, the locker makes no more
/// storage requests.
#[must_use = "dropping a LockGuard releases the lock at once (in the background): bind it \
              (`let guard = ...`) for the whole critical section, then call `release`"]
pub struct LockGuard {
    lock_id: LockId,
    owner: OwnerId,
    clock: Arc<dyn Clock>,
    state: watch::Receiver<LeaseState>,
    release: Option<oneshot::Sender<ReleaseReply>>,
    /// The lease, while it waits for its first renewal without a task.
    parked: Option<Parked>,
    wait: Duration,
    stats: AcquireStats,
    fencing_token: Option<FencingToken>,
    /// Marks the lock as held by the task that acquired it, while the guard lives.
    _claim: Option<TaskClaim>,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock_id", &self.lock_id)
            .field("owner", &self.owner)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    /// The guard of a lock just acquired as `holding`. Unless `may_linger` is false (an
    /// abandoned acquisition that took the lock), its release lingers when
    /// [`Retake::lingers`] says so; `hints`, the acquisition's registration for wake-up
    /// hints, tells it whether an owner waiting behind asked it not to.
    pub(crate) fn start<S: LockStorage>(
        shared: Arc<Shared<S>>,
        holding: Holding,
        seat: Option<SeatTicket>,
        turn: Option<LocalTurn>,
        may_linger: bool,
        hints: Option<WakeRegistration>,
    ) -> Self {
        let now = shared.clock.now();
        let facts = HoldFacts {
            owner: holding.owner.clone(),
            fencing_token: holding.fencing_token,
            wait: holding.wait(),
            stats: holding.stats,
            acquired_at: holding.acquired_at,
        };
        let lease = Lease::new(now, shared.config.clone(), holding);
        let linger = may_linger.then_some(hints);
        Self::hold(shared, lease, facts, seat, turn, linger)
    }

    /// The guard of a lingering lease taken again ([`lock_core::machine::RetakeOutcome::Held`]).
    pub(crate) fn retaken<S: LockStorage>(
        shared: Arc<Shared<S>>,
        lingering: Lingering,
        stats: AcquireStats,
        started_at: MonotonicTime,
        turn: LocalTurn,
    ) -> Self {
        let acquired_at = shared.clock.now().instant;
        let facts = HoldFacts {
            owner: lingering.owner,
            fencing_token: lingering.fencing_token,
            wait: acquired_at.saturating_duration_since(started_at),
            stats,
            acquired_at,
        };
        Self::hold(
            shared,
            lingering.lease,
            facts,
            lingering.seat,
            Some(turn),
            Some(lingering.hints),
        )
    }

    /// The guard of `lease`. With `linger` (the owner's registration for wake-up hints, if
    /// it has one), its release may linger.
    fn hold<S: LockStorage>(
        shared: Arc<Shared<S>>,
        lease: Lease,
        facts: HoldFacts,
        seat: Option<SeatTicket>,
        turn: Option<LocalTurn>,
        linger: Option<Option<WakeRegistration>>,
    ) -> Self {
        let (state_tx, state_rx) = watch::channel(LeaseState {
            status: lease.status(),
            deadline: lease.deadline(),
            doubts: 0,
            shut_down: false,
        });
        let (release_tx, release_rx) = oneshot::channel();
        let clock = shared.clock.clone();
        let span = tracing::debug_span!("lease", lock_id = %lease.lock_id(), owner = %facts.owner);
        let quiet_until = lease.quiet_until();
        let lock_id = lease.lock_id().clone();
        let task = LeaseTask {
            shared,
            lease,
            acquired_at: facts.acquired_at,
            state: state_tx,
            release: release_rx,
            ending: LeaseEnding {
                seat,
                _turn: turn,
                owner: facts.owner.clone(),
                fencing_token: facts.fencing_token,
                linger_stats: linger.is_some().then_some(facts.stats),
                hints: linger.flatten(),
            },
            span,
        };
        // A lock taken as its locker shuts down gets a task, which releases it at once.
        let quiet_until = quiet_until.filter(|_| !task.shared.tasks.is_closed());
        let parked = match quiet_until {
            Some(until) => {
                let keeper = task.shared.keeper.clone();
                let tasks = task.shared.tasks.clone();
                let parked: Arc<dyn ParkedLease> = Arc::new(ParkedTask(Mutex::new(Some(task))));
                let key = keeper.park(until, parked.clone(), &clock, &tasks);
                Some(Parked {
                    lease: parked,
                    keeper,
                    key,
                })
            }
            None => {
                task.spawn();
                None
            }
        };
        LockGuard {
            wait: facts.wait,
            stats: facts.stats,
            fencing_token: facts.fencing_token,
            lock_id,
            owner: facts.owner,
            clock,
            state: state_rx,
            release: Some(release_tx),
            parked,
            _claim: None,
        }
    }

    /// The guard, marking its lock as held by the task that acquired it for as long as the
    /// guard lives ([`Error::ReentrantLock`]).
    pub(crate) fn claimed(mut self, claim: Option<TaskClaim>) -> Self {
        self._claim = claim;
        self
    }

    /// Takes the lease back from the keeper if its task has not started: the future that
    /// releases it.
    fn unpark(&mut self) -> Option<BoxFuture<'static, Result<(), Error>>> {
        let parked = self.parked.take()?;
        let release = parked.lease.take_release()?;
        parked.keeper.forget(parked.key);
        self.release = None;
        Some(release)
    }

    /// The lock held.
    pub fn lock_id(&self) -> &LockId {
        &self.lock_id
    }

    /// This acquisition's owner id (the thesis's `threadId`).
    pub fn owner_id(&self) -> &OwnerId {
        &self.owner
    }

    /// This acquisition's fencing token (if `fencing` is on, and never with
    /// [`lock_core::Algorithm::Baseline`]): pass it to the resource with every write, so it can
    /// refuse writes from an earlier holder that lost its lease.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fencing_token
    }

    /// How long the acquisition waited in storage: from its first request to holding the
    /// lock. Time the task spent before that in its locker's local line, behind other tasks
    /// of the same locker (or its clones) that wanted the same lock, is not counted; time
    /// the call to `lock` for the whole wait.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Counters of the acquisition (storage requests, queue polls, conflicts, re-enqueues).
    pub fn stats(&self) -> AcquireStats {
        self.stats
    }

    /// The lease status now. Reports [`LeaseStatus::Lost`] as soon as the local deadline has
    /// passed, even if the renewal task has not run yet.
    pub fn status(&self) -> LeaseStatus {
        let state = *self.state.borrow();
        if self.clock.now().instant >= state.deadline {
            LeaseStatus::Lost
        } else {
            state.status
        }
    }

    /// True unless the lease is lost (`Held` or `InDoubt`).
    pub fn is_held(&self) -> bool {
        self.status() != LeaseStatus::Lost
    }

    /// How long the lock is certainly still ours; check it before a critical write.
    pub fn time_left(&self) -> Duration {
        if self.status() == LeaseStatus::Lost {
            return Duration::ZERO;
        }
        let deadline = self.state.borrow().deadline;
        deadline.saturating_duration_since(self.clock.now().instant)
    }

    /// Completes when the lease is lost: the deadline passed without a renewal, or our cell
    /// disappeared. Never completes after a clean release.
    ///
    /// To hear of trouble sooner, while the lock is still ours, await
    /// [`LockGuard::in_doubt`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the future only watches the lease and has no effect of its own, so it
    /// can be dropped at any time (a `tokio::select!` branch) and a new one made.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.watch(|state| state.status == LeaseStatus::Lost)
    }

    /// Completes when the lease is first in doubt after this call: a renewal failed (the
    /// status is [`LeaseStatus::InDoubt`]: the lock is still ours until the deadline, but
    /// may not stay so) or the lease is lost outright. It completes even if the doubt was
    /// over (a later renewal succeeded) by the time the future is polled, and at once if
    /// the lease is in doubt or lost when it is called. Never completes after a clean
    /// release.
    ///
    /// Use it, next to [`LockGuard::lost`] in a `tokio::select!`, to pause work that should
    /// not start without a margin (check [`LockGuard::time_left`] and
    /// [`LockGuard::status`] then); only `lost` means another owner may hold the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`LockGuard::lost`]: a new future made after a dropped one watches
    /// for doubts from its own call on.
    pub fn in_doubt(&self) -> impl Future<Output = ()> + Send + 'static {
        let seen = self.state.borrow().doubts;
        self.watch(move |state| state.status != LeaseStatus::Held || state.doubts > seen)
    }

    /// Completes when `done` holds of the published lease state, or when its deadline has
    /// passed (the lease is lost then, whatever the task has published).
    fn watch(
        &self,
        done: impl Fn(&LeaseState) -> bool + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut state = self.state.clone();
        let clock = self.clock.clone();
        async move {
            loop {
                let current = *state.borrow_and_update();
                if done(&current) {
                    return;
                }
                let pause = current
                    .deadline
                    .saturating_duration_since(clock.now().instant);
                if pause.is_zero() {
                    return;
                }
                tokio::select! {
                    biased;
                    changed = state.changed() => {
                        if changed.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                    () = super::clock::sleep_for(&*clock, pause) => {}
                }
            }
        }
    }

    /// Stops renewing and deletes our cells (or, with [`crate::LockConfig::linger`] and a
    /// lock that was found idle, returns at once and leaves them to linger for a retake by
    /// this locker: docs/algorithm.md, section "Lingering after a release"). Returns [`Error::LockLost`] if the lease was
    /// lost at some point (the critical section may have overlapped another owner's), or the
    /// storage error if the deletes failed (the cells then expire after `lease_ttl`).
    ///
    /// Outside a Tokio runtime it returns [`Error::NoRuntime`] and the cells expire after
    /// `lease_ttl`.
    ///
    /// # Cancel safety
    ///
    /// The release itself survives cancellation; only its result is lost. The future owns
    /// the guard: dropped before its first poll, the guard is dropped and releases in the
    /// background as on any drop. Dropped later, the deletes already started go on on a
    /// background task (of the lease, or spawned from the dropped future), so the lock is
    /// freed as if the future had completed. Without a runtime left to run them, the cells
    /// expire after `lease_ttl`.
    pub async fn release(mut self) -> Result<(), Error> {
        super::locker::require_runtime("LockGuard::release was polled outside one")?;
        if let Some(release) = self.unpark() {
            return FinishOnDrop(Some(release)).await;
        }
        let Some(release) = self.release.take() else {
            return Ok(());
        };
        let (reply_tx, reply_rx) = oneshot::channel();
        if release.send(reply_tx).is_err() {
            return Err(self.ended_early("the lease task ended before the release"));
        }
        match reply_rx.await {
            Ok(result) => result,
            Err(_) => Err(self.ended_early("the lease task ended during the release")),
        }
    }

    /// Why the lease task was gone when the guard asked it to release: the locker was shut
    /// down, which released the lock, or else a bug.
    fn ended_early(&self, bug: &'static str) -> Error {
        if self.state.borrow().shut_down {
            Error::LockLost {
                lock_id: self.lock_id.clone(),
                reason: "Locker::shutdown released it while this guard was alive".to_owned(),
            }
        } else {
            Error::Internal(bug)
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.release.is_some() {
            tracing::debug!(lock_id = %self.lock_id, "lock dropped without release; releasing in the background");
        }
        if let Some(release) = self.unpark()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(release);
        }
    }
}

/// A release run inline by its guard's `release` future. If that future is dropped midway,
/// the release goes on on a spawned task instead of stopping between two deletes, which
/// would leave the remaining cells to their TTL and the seat retired for good.
struct FinishOnDrop(Option<BoxFuture<'static, Result<(), Error>>>);

impl Future for FinishOnDrop {
    type Output = Result<(), Error>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(release) = self.0.as_mut() else {
            return std::task::Poll::Ready(Err(Error::Internal(
                "a release was polled after it completed",
            )));
        };
        let result = std::task::ready!(release.as_mut().poll(cx));
        self.0 = None;
        std::task::Poll::Ready(result)
    }
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        if let Some(release) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(release);
        }
    }
}

/// What a guard knew of its acquisition.
struct HoldFacts {
    owner: OwnerId,
    fencing_token: Option<FencingToken>,
    wait: Duration,
    stats: AcquireStats,
    acquired_at: MonotonicTime,
}

/// What the lease task hands back when its cells are gone.
struct LeaseEnding {
    /// The seat, which knows since the lock was taken what it hands back once the cells
    /// are gone.
    seat: Option<SeatTicket>,
    /// The head of this locker's local line for the lock: the next task of the line goes
    /// once the lease has ended (its cells deleted or left to expire).
    _turn: Option<LocalTurn>,
    /// The owner and token a retake keeps.
    owner: OwnerId,
    fencing_token: Option<FencingToken>,
    /// The counters [`Retake::lingers`] decides by, if the release may linger at all.
    linger_stats: Option<AcquireStats>,
    /// The owner's registration for wake-up hints, kept while the release may linger: a
    /// [`lock_core::hint::HintKind::Wanted`] hint says another owner waits.
    hints: Option<WakeRegistration>,
}

/// A held lock's lease and everything its task needs.
struct LeaseTask<S: LockStorage> {
    shared: Arc<Shared<S>>,
    lease: Lease,
    acquired_at: MonotonicTime,
    state: watch::Sender<LeaseState>,
    release: oneshot::Receiver<ReleaseReply>,
    ending: LeaseEnding,
    span: tracing::Span,
}

impl<S: LockStorage> LeaseTask<S> {
    fn spawn(self) {
        let span = self.span.clone();
        let tasks = self.shared.tasks.clone();
        tasks.spawn(self.run().instrument(span));
    }

    /// Renews the lease until asked to release (or the guard is dropped), then releases
    /// and gives the seat back.
    async fn run(self) {
        let LeaseTask {
            shared,
            mut lease,
            acquired_at,
            state,
            mut release,
            ending,
            span: _,
        } = self;
        let context = shared.context();
        let metrics = shared.metrics.as_deref();
        let lock_id = lease.lock_id().clone();
        let mut counted = (0, 0);
        let mut publish = |lease: &Lease| {
            let (status, deadline) = (lease.status(), lease.deadline());
            state.send_if_modified(|current| {
                let left_held = current.status == LeaseStatus::Held && status != LeaseStatus::Held;
                let next = LeaseState {
                    status,
                    deadline,
                    doubts: current.doubts + u64::from(left_held),
                    shut_down: false,
                };
                std::mem::replace(current, next) != next
            });
            if let Some(metrics) = metrics {
                let (renewed, failed) = lease.renewal_counts();
                let (renewed_before, failed_before) =
                    std::mem::replace(&mut counted, (renewed, failed));
                (renewed_before..renewed).for_each(|_| metrics.renewed(&lock_id));
                (failed_before..failed).for_each(|_| metrics.renewal_failed(&lock_id));
            }
        };
        let stop = released_or_closed(&mut release, shared.tasks.closed());
        let driven = context.drive(&mut lease, stop, &mut publish).await;
        let (stop, lost) = match driven {
            Driven::Stopped(stop) => (stop, None),
            Driven::Outcome(lost) => {
                tracing::warn!(error = %lost, "lock lost");
                publish(&lease);
                if let Some(metrics) = metrics {
                    metrics.lost(&lock_id);
                }
                let stop = released_or_closed(&mut release, shared.tasks.closed()).await;
                (stop, Some(lost))
            }
            Driven::Stalled => (
                released_or_closed(&mut release, shared.tasks.closed()).await,
                Some(Error::Internal("the lease machine stalled")),
            ),
        };
        let ended = end_lease(&shared, lease, acquired_at, ending, lost).await;
        match stop {
            Stop::Released(Some(reply)) => {
                let _ = reply.send(ended);
            }
            Stop::Released(None) => {}
            Stop::ShutDown => {
                publish_shut_down(&state, shared.clock.now().instant);
                if let Err(error) = ended {
                    lock_ignoring_poison(&shared.shutdown_errors).push(error);
                }
            }
        }
    }
}

/// Why a lease task stops renewing.
enum Stop {
    /// Its guard asked for the release (with where to send the result), or was dropped.
    Released(Option<ReleaseReply>),
    /// The locker was shut down.
    ShutDown,
}

/// Waits for the guard's release (or drop), or the locker's shutdown, whichever is first.
async fn released_or_closed(
    release: &mut oneshot::Receiver<ReleaseReply>,
    closed: impl Future<Output = ()>,
) -> Stop {
    tokio::select! {
        biased;
        reply = release => Stop::Released(reply.ok()),
        () = closed => Stop::ShutDown,
    }
}

/// Tells the guard that [`super::Locker::shutdown`] released its lock: its status is
/// [`LeaseStatus::Lost`] from now on, and its release reports it.
fn publish_shut_down(state: &watch::Sender<LeaseState>, now: MonotonicTime) {
    state.send_modify(|state| {
        if state.status == LeaseStatus::Held {
            state.doubts += 1;
        }
        state.status = LeaseStatus::Lost;
        if now < state.deadline {
            state.deadline = now;
        }
        state.shut_down = true;
    });
}

fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends a lease at its release: it lingers with the locker if it may
/// ([`Retake::lingers`]), and its cells are deleted otherwise. `lost` if the lease was lost
/// on the way: then that is the result, whatever the deletes do.
async fn end_lease<S: LockStorage>(
    shared: &Arc<Shared<S>>,
    mut lease: Lease,
    acquired_at: MonotonicTime,
    ending: LeaseEnding,
    lost: Option<Error>,
) -> Result<(), Error> {
    let now = shared.clock.now();
    // The lease may have lapsed with nothing driving it: parked before its first renewal,
    // or with its task not polled in time (a frozen process). Then that is the result.
    let lapsed = lease.check_lapsed(now.instant);
    let lost = lost.or(lapsed);
    if let Some(metrics) = shared.metrics.as_deref() {
        metrics.released(
            lease.lock_id(),
            now.instant.saturating_duration_since(acquired_at),
        );
    }
    let LeaseEnding {
        seat,
        _turn,
        owner,
        fencing_token,
        linger_stats,
        hints,
    } = ending;
    let wanted = hints.as_ref().is_some_and(WakeRegistration::is_wanted);
    let lingers = linger_stats
        .is_some_and(|stats| Retake::lingers(&shared.config, &lease, &stats, now.instant, wanted));
    // A locker shutting down keeps nothing lingering.
    if lost.is_none() && lingers && !shared.tasks.is_closed() {
        let lingering = Lingering {
            lease,
            seat,
            owner,
            fencing_token,
            hints,
        };
        Lingers::keep(shared, lingering);
        return Ok(());
    }
    if wanted {
        lease.note_waiter();
    }
    delete_cells(shared, lease, seat, lost).await
}

/// Deletes a lease's cells and gives its seat back. `lost` if the lease was lost on the
/// way: then that is the result, whatever the deletes do.
pub(crate) async fn delete_cells<S: LockStorage>(
    shared: &Shared<S>,
    lease: Lease,
    seat: Option<SeatTicket>,
    lost: Option<Error>,
) -> Result<(), Error> {
    let now = shared.clock.now();
    let lock_id = lease.lock_id().clone();
    // With hints, the owner next in line is hinted as the deletes go out, and the release
    // reads the queue for the owners to hint once it is over.
    let transport = shared.wake_hints.as_deref().filter(|_| lost.is_none());
    let mut deletes = match transport {
        Some(transport) => {
            let early = lease.wake_hints();
            let release = lease.release_finding_successors(now);
            send_all(transport, early);
            release
        }
        None => lease.release(now),
    };
    let deleted = shared
        .context()
        .run(&mut deletes)
        .await
        .and_then(|result| result);
    match (&deleted, transport) {
        (Err(error), _) => {
            tracing::warn!(%error, "release failed; the cells will expire after lease_ttl");
        }
        (Ok(()), Some(transport)) => {
            // The owner hinted early is hinted again: if its read came before the deletes
            // landed, it is pausing again; if not, it is no longer pausing and ignores it.
            send_all(
                transport,
                hint::addressed(&lock_id, deletes.successors_found()),
            );
        }
        (Ok(()), None) => {}
    }
    if let Some(seat) = seat {
        seat.release_ended(
            now.instant,
            deletes.last_timestamp(),
            lost.is_some().then_some(now.instant),
        );
    }
    match lost {
        Some(lost) => Err(lost),
        None => deleted,
    }
}

/// A lease waiting in the keeper, shared with its guard.
struct Parked {
    lease: Arc<dyn ParkedLease>,
    keeper: Arc<LeaseKeeper>,
    key: KeeperKey,
}

/// The task of a parked lease, until the keeper starts it or the guard takes it back.
struct ParkedTask<S: LockStorage>(Mutex<Option<LeaseTask<S>>>);

impl<S: LockStorage> ParkedTask<S> {
    fn take(&self) -> Option<LeaseTask<S>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl<S: LockStorage> ParkedLease for ParkedTask<S> {
    fn start(&self) {
        if let Some(task) = self.take() {
            task.spawn();
        }
    }

    fn take_release(&self) -> Option<BoxFuture<'static, Result<(), Error>>> {
        let task = self.take()?;
        let span = task.span.clone();
        let counted = task.shared.tasks.enter();
        let release = async move {
            let ended = end_lease(
                &task.shared,
                task.lease,
                task.acquired_at,
                task.ending,
                None,
            )
            .await;
            drop(counted);
            ended
        };
        Some(Box::pin(release.instrument(span)))
    }

    fn shut_down(&self) -> Option<BoxFuture<'static, Result<(), Error>>> {
        let task = self.take()?;
        let span = task.span.clone();
        let release = async move {
            let LeaseTask {
                shared,
                lease,
                acquired_at,
                state,
                ending,
                ..
            } = task;
            let ended = end_lease(&shared, lease, acquired_at, ending, None).await;
            publish_shut_down(&state, shared.clock.now().instant);
            ended
        };
        Some(Box::pin(release.instrument(span)))
    }
}
