//! Leader election on the lock: one active instance of a service at a time.

use std::fmt;
use std::time::Duration;

use crate::error::Error;
use crate::id::{IntoLockId, LockId, OwnerId};
use crate::machine::{FencingToken, LeaseStatus};
use crate::storage::LockStorage;

use super::guard::LockGuard;
use super::locker::Locker;

/// How many cells per row [`Election::leader`] reads: candidates of one election are few.
const LEADER_READ_LIMIT: u32 = 64;

/// A leader election: the instances that campaign on the same `name` (on the same storage)
/// take turns as leader, one at a time, in the order they campaigned. The leader holds the
/// election's lock; its *term* is the lock's fencing token, so terms strictly increase from
/// leader to leader and a resource can refuse the writes of a former leader.
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
/// use lock_core::{Election, LockConfig, Locker};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let locker = Locker::new(storage, LockConfig::default())?;
/// let election = Election::new(locker, "billing-scheduler")?;
///
/// let leadership = election.campaign().await?; // waits until we lead
/// let term = leadership.term(); // pass it to the resource with every write
/// let leader = election.leader().await?.expect("we lead");
/// assert_eq!(&leader.owner, leadership.owner_id());
/// assert_eq!(leader.term, Some(term));
/// tokio::select! {
///     () = leadership.lost() => eprintln!("no longer the leader: stop, then campaign again"),
///     () = async { /* the leader's work, writing with `term` */ } => {}
/// }
/// leadership.resign().await?; // the next campaigner leads at once
/// assert!(election.leader().await?.is_none());
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub struct Election<S: LockStorage> {
    locker: Locker<S>,
    name: LockId,
}

impl<S: LockStorage> Clone for Election<S> {
    fn clone(&self) -> Self {
        Election {
            locker: self.locker.clone(),
            name: self.name.clone(),
        }
    }
}

impl<S: LockStorage> fmt::Debug for Election<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<S: LockStorage> Election<S> {
    /// An election named `name` (the id of the lock its leader holds), campaigned through
    /// `locker`.
    ///
    /// Fails with [`Error::InvalidConfig`] (field `fencing`) if the locker's configuration
    /// has `fencing: false`: a term is the lock's fencing token, so a leader without one
    /// could not be told from its predecessor. Fails as [`IntoLockId`] does on a bad name.
    pub fn new(locker: Locker<S>, name: impl IntoLockId) -> Result<Self, Error> {
        if !locker.config().config().fencing {
            return Err(Error::InvalidConfig {
                field: "fencing",
                reason: "is off, but an election's term is the lock's fencing token; \
                         set fencing: true (the default) for a locker that campaigns"
                    .into(),
            });
        }
        Ok(Election {
            locker,
            name: name.into_lock_id()?,
        })
    }

    /// The election's name: the id of the lock its leader holds.
    pub fn name(&self) -> &LockId {
        &self.name
    }

    /// The locker this election campaigns through.
    pub fn locker(&self) -> &Locker<S> {
        &self.locker
    }

    /// Waits until this instance is the leader and returns its [`Leadership`]. Candidates
    /// lead in the order they campaigned (a crashed leader is replaced once its lease has
    /// run out, about `lease_ttl`). Fails as [`Locker::lock`] does.
    ///
    /// # Cancel safety
    ///
    /// As for [`Locker::lock`]: dropped while it waits, the candidacy is withdrawn in the
    /// background (and a leadership it had won is resigned); a new call campaigns afresh,
    /// behind the candidates already waiting.
    #[must_use = "leadership is resigned as soon as the returned Leadership is dropped; \
                  bind it (`let leadership = ...`) for the whole term"]
    pub async fn campaign(&self) -> Result<Leadership, Error> {
        let guard = self.locker.lock(self.name.clone()).await?;
        let Some(term) = guard.fencing_token() else {
            // `new` refused a locker without fencing; the guard resigns as it drops.
            return Err(Error::Internal(
                "a fenced acquisition took no fencing token",
            ));
        };
        Ok(Leadership { guard, term })
    }

    /// The current leader, read from the storage without campaigning, or `None` if no one
    /// leads (or a hand-over is being decided at this moment).
    ///
    /// A leader that crashed is still reported, with [`Leader::stale`] set once it has
    /// missed its renewals, until its lease runs out and its successor takes over.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Leader>, Error> {
        let report = self
            .locker
            .inspect(self.name.clone(), LEADER_READ_LIMIT)
            .await?;
        let Some(owner) = report.holder else {
            return Ok(None);
        };
        let stale = report
            .main
            .iter()
            .filter(|cell| cell.owner == owner)
            .all(|cell| cell.stale);
        Ok(Some(Leader {
            owner,
            term: report.fence,
            stale,
        }))
    }
}

/// The current leader of an [`Election`], as [`Election::leader`] read it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Leader {
    /// The leader's owner id: [`Leadership::owner_id`] of the instance that leads.
    pub owner: OwnerId,
    /// The highest term handed out so far: the leader's own [`Leadership::term`] once its
    /// campaign has completed. While a successor is taking over it may still be its
    /// predecessor's, and a candidate that gave up midway may have raised it; `None` if no
    /// one has ever led.
    pub term: Option<FencingToken>,
    /// True if the leader has not renewed its lease for longer than a live leader would let
    /// pass: it has probably crashed and will be replaced within `lease_ttl`.
    pub stale: bool,
}

/// This instance's term as leader of an [`Election`]: the held lock, renewed in the
/// background. Dropping it resigns in the background; [`Leadership::resign`] resigns and
/// reports how the term ended.
///
/// Leadership can be lost without resigning: renewals fail until the lease's deadline (the
/// storage is unreachable, or the process was paused past it), or an administrator
/// force-released the lock. [`Leadership::lost`] completes then, and [`Leadership::status`]
/// says [`LeaseStatus::Lost`], before any other instance can lead; stop acting as leader
/// and campaign again.
#[must_use = "dropping a Leadership resigns at once (in the background): bind it \
              (`let leadership = ...`) for the whole term, then call `resign`"]
pub struct Leadership {
    guard: LockGuard,
    term: FencingToken,
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("term", &self.term)
            .field("guard", &self.guard)
            .finish()
    }
}

impl Leadership {
    /// This term's number: the lock's fencing token, strictly greater than every earlier
    /// leader's. Pass it to the resources the leader writes, so they can refuse a former
    /// leader that has not yet noticed it lost.
    pub fn term(&self) -> FencingToken {
        self.term
    }

    /// This leader's owner id, as [`Leader::owner`] reports it to observers.
    pub fn owner_id(&self) -> &OwnerId {
        self.guard.owner_id()
    }

    /// The election's name.
    pub fn name(&self) -> &LockId {
        self.guard.lock_id()
    }

    /// The lease status now; [`LeaseStatus::Lost`] once leadership is lost.
    pub fn status(&self) -> LeaseStatus {
        self.guard.status()
    }

    /// True unless leadership is lost.
    pub fn is_leader(&self) -> bool {
        self.guard.is_held()
    }

    /// How long this instance certainly still leads; check it before a critical write.
    pub fn time_left(&self) -> Duration {
        self.guard.time_left()
    }

    /// Completes when leadership is lost (see the type's docs); never after a clean
    /// resignation.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`LockGuard::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// The held lock behind this leadership.
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// Steps down: releases the lock, so the next candidate leads at once. Returns
    /// [`Error::LockLost`] if leadership was lost at some point during the term (another
    /// instance may have led meanwhile), or the storage error if the release failed (the
    /// next candidate then leads once the lease has run out).
    ///
    /// # Cancel safety
    ///
    /// As for [`LockGuard::release`]: the resignation survives cancellation.
    pub async fn resign(self) -> Result<(), Error> {
        self.guard.release().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use futures::FutureExt;

    use super::*;
    use crate::config::LockConfig;
    use crate::driver::test_client::{Link, TestClient, TestStore};
    use crate::driver::{Clock, VirtualClock};
    use crate::storage::{RowKey, RowKind};
    use crate::time::{MonotonicTime, Timestamp};

    const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);
    const NAME: &str = "scheduler";

    fn store() -> (TestStore, VirtualClock) {
        let clock = VirtualClock::starting_at(EPOCH);
        (TestStore::new(clock.clone()), clock)
    }

    fn election(client: TestClient, clock: &VirtualClock, seed: u64) -> Election<TestClient> {
        let locker = Locker::builder(client)
            .clock(Arc::new(clock.clone()))
            .seed(seed)
            .build()
            .unwrap();
        Election::new(locker, NAME).unwrap()
    }

    fn since(clock: &VirtualClock, start: MonotonicTime) -> Duration {
        clock.now().instant.saturating_duration_since(start)
    }

    /// Jumps the paused clock forward without yielding, as if the process had been frozen:
    /// no task runs before the caller's next await.
    fn freeze_for(duration: Duration) {
        let _ = tokio::time::advance(duration).now_or_never();
    }

    #[test]
    fn one_leader_at_a_time_and_terms_strictly_increase() {
        crate::watchdog::in_virtual_time(
            "one_leader_at_a_time_and_terms_strictly_increase",
            async {
                let (store, clock) = store();
                let leading = Arc::new(AtomicUsize::new(0));
                let terms = Arc::new(Mutex::new(Vec::new()));
                let ttl = LockConfig::default().lease_ttl;
                let tasks: Vec<_> = (0..4u64)
                    .map(|seed| {
                        let election = election(store.client(), &clock, seed);
                        let (leading, terms) = (leading.clone(), terms.clone());
                        tokio::spawn(async move {
                            for round in 0..6u32 {
                                let leadership = election.campaign().await.unwrap();
                                assert_eq!(
                                    leading.fetch_add(1, Ordering::SeqCst),
                                    0,
                                    "two leaders"
                                );
                                terms.lock().unwrap().push(leadership.term());
                                // Some terms outlive the lease, so they must be renewed.
                                let term_length = if round % 3 == 0 {
                                    ttl + Duration::from_secs(3)
                                } else {
                                    Duration::from_millis(5)
                                };
                                tokio::time::sleep(term_length).await;
                                assert!(leadership.is_leader());
                                leading.fetch_sub(1, Ordering::SeqCst);
                                leadership.resign().await.unwrap();
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
                let terms = terms.lock().unwrap();
                assert_eq!(terms.len(), 24);
                assert!(
                    terms.windows(2).all(|pair| pair[0] < pair[1]),
                    "terms must strictly increase from leader to leader: {terms:?}"
                );
            },
        );
    }

    #[test]
    fn leader_reports_the_current_leader_without_campaigning() {
        crate::watchdog::in_virtual_time(
            "leader_reports_the_current_leader_without_campaigning",
            async {
                let (store, clock) = store();
                let observer = election(store.client(), &clock, 9);
                let candidate = election(store.client(), &clock, 1);
                assert_eq!(observer.leader().await.unwrap(), None, "no one leads yet");

                let leadership = candidate.campaign().await.unwrap();
                for _ in 0..3 {
                    let leader = observer.leader().await.unwrap().expect("a leader");
                    assert_eq!(&leader.owner, leadership.owner_id());
                    assert_eq!(leader.term, Some(leadership.term()));
                    assert!(!leader.stale);
                    tokio::time::sleep(LockConfig::default().lease_ttl).await;
                }
                let queue = RowKey::new(RowKind::Queue, LockId::new(NAME).unwrap());
                assert_eq!(
                    store.live_columns(&queue).len(),
                    1,
                    "only the leader stands in the queue: observing is not campaigning"
                );
                leadership.resign().await.unwrap();
                assert_eq!(
                    observer.leader().await.unwrap(),
                    None,
                    "the leader resigned"
                );
            },
        );
    }

    #[test]
    fn resign_hands_leadership_to_the_next_campaigner_at_once() {
        crate::watchdog::in_virtual_time(
            "resign_hands_leadership_to_the_next_campaigner_at_once",
            async {
                let (store, clock) = store();
                let observer = election(store.client(), &clock, 9);
                let first = election(store.client(), &clock, 1)
                    .campaign()
                    .await
                    .unwrap();
                let next = {
                    let second = election(store.client(), &clock, 2);
                    tokio::spawn(async move { second.campaign().await })
                };
                tokio::time::sleep(Duration::from_secs(30)).await;
                assert!(!next.is_finished(), "a candidate led beside the leader");
                assert_eq!(
                    observer.leader().await.unwrap().map(|leader| leader.owner),
                    Some(first.owner_id().clone())
                );
                let first_term = first.term();
                let resigned_at = clock.now().instant;
                first.resign().await.unwrap();
                let second = next.await.unwrap().unwrap();
                let handover = since(&clock, resigned_at);
                assert!(
                    handover < Duration::from_secs(1),
                    "the next campaigner took {handover:?} to lead"
                );
                assert!(second.term() > first_term);
                let leader = observer.leader().await.unwrap().expect("a leader");
                assert_eq!(&leader.owner, second.owner_id());
                assert_eq!(leader.term, Some(second.term()));
                second.resign().await.unwrap();
            },
        );
    }

    #[test]
    fn a_crashed_leader_is_replaced_after_its_lease_with_a_larger_term() {
        crate::watchdog::in_virtual_time(
            "a_crashed_leader_is_replaced_after_its_lease_with_a_larger_term",
            async {
                let (store, clock) = store();
                let ttl = LockConfig::default().lease_ttl;
                let observer = election(store.client(), &clock, 9);
                let crashing_link = store.client();
                let crashing = election(crashing_link.clone(), &clock, 1);
                let leadership = crashing.campaign().await.unwrap();
                // Between two renewals, so the last one certainly reached the storage.
                tokio::time::sleep(ttl + Duration::from_secs(1)).await;
                let crashed_term = leadership.term();
                let crashed_owner = leadership.owner_id().clone();
                // The process dies: nothing it sends reaches the storage any more, and its
                // leadership goes without a resignation.
                crashing_link.set_link(Link::Silent);
                drop(leadership);
                let crashed_at = clock.now().instant;
                let next = {
                    let successor = election(store.client(), &clock, 2);
                    tokio::spawn(async move { successor.campaign().await })
                };
                tokio::time::sleep(ttl - Duration::from_secs(2)).await;
                assert!(
                    !next.is_finished(),
                    "a successor led before the crashed leader's lease ran out"
                );
                let leader = observer
                    .leader()
                    .await
                    .unwrap()
                    .expect("the crashed leader");
                assert_eq!(leader.owner, crashed_owner);
                assert!(leader.stale, "a leader that stopped renewing looks stale");

                let successor = next.await.unwrap().unwrap();
                let recovery = since(&clock, crashed_at);
                assert!(
                    recovery <= ttl + Duration::from_secs(1),
                    "took {recovery:?} to replace the crashed leader"
                );
                assert!(successor.term() > crashed_term);
                let leader = observer.leader().await.unwrap().expect("the successor");
                assert_eq!(&leader.owner, successor.owner_id());
                assert_eq!(leader.term, Some(successor.term()));
                assert!(!leader.stale);
                successor.resign().await.unwrap();
            },
        );
    }

    #[test]
    fn a_paused_leader_is_told_it_lost_leadership() {
        crate::watchdog::in_virtual_time("a_paused_leader_is_told_it_lost_leadership", async {
            let (store, clock) = store();
            let ttl = LockConfig::default().lease_ttl;
            let paused = election(store.client(), &clock, 1);
            let successor = election(store.client(), &clock, 2);
            let leadership = paused.campaign().await.unwrap();
            tokio::time::sleep(ttl).await;
            assert!(leadership.is_leader(), "renewals keep it leading");
            let lost = tokio::spawn(leadership.lost());
            // The whole process is frozen past its lease: not even its renewal task runs.
            freeze_for(ttl * 2);
            assert_eq!(leadership.status(), LeaseStatus::Lost);
            assert!(!leadership.is_leader());
            assert_eq!(leadership.time_left(), Duration::ZERO);
            tokio::time::timeout(Duration::from_millis(1), lost)
                .await
                .expect("the paused leader's lost() must complete once it runs again")
                .unwrap();
            let next = tokio::time::timeout(ttl, successor.campaign())
                .await
                .expect("the lapsed leadership is free")
                .unwrap();
            assert!(next.term() > leadership.term());
            assert!(
                matches!(leadership.resign().await, Err(Error::LockLost { .. })),
                "a resignation after the lease lapsed reports the loss"
            );
            assert!(next.is_leader());
            next.resign().await.unwrap();
        });
    }

    #[test]
    fn a_cut_off_leader_is_told_before_anyone_else_leads() {
        crate::watchdog::in_virtual_time(
            "a_cut_off_leader_is_told_before_anyone_else_leads",
            async {
                let (store, clock) = store();
                let leader_link = store.client();
                let leadership = election(leader_link.clone(), &clock, 1)
                    .campaign()
                    .await
                    .unwrap();
                let lost = leadership.lost();
                let lost_at = tokio::spawn({
                    let clock = clock.clone();
                    async move {
                        lost.await;
                        clock.now().instant
                    }
                });
                tokio::time::sleep(Duration::from_secs(12)).await;
                assert_eq!(leadership.status(), LeaseStatus::Held);
                leader_link.set_link(Link::Refused);
                let next = election(store.client(), &clock, 2)
                    .campaign()
                    .await
                    .unwrap();
                let led_at = clock.now().instant;
                let lost_at = lost_at.await.unwrap();
                assert!(
                    lost_at <= led_at,
                    "told at {lost_at:?}, successor led at {led_at:?}"
                );
                assert!(next.term() > leadership.term());
                assert!(matches!(
                    leadership.resign().await,
                    Err(Error::LockLost { .. })
                ));
                next.resign().await.unwrap();
            },
        );
    }

    #[test]
    fn an_election_refuses_a_locker_without_fencing() {
        crate::watchdog::in_virtual_time("an_election_refuses_a_locker_without_fencing", async {
            let (store, clock) = store();
            let locker = Locker::builder(store.client())
                .config(LockConfig {
                    fencing: false,
                    ..LockConfig::default()
                })
                .clock(Arc::new(clock.clone()))
                .seed(1)
                .build()
                .unwrap();
            match Election::new(locker, NAME) {
                Err(Error::InvalidConfig { field, .. }) => assert_eq!(field, "fencing"),
                other => panic!("expected InvalidConfig for fencing, got {other:?}"),
            }
        });
    }

    /// The algorithms that take no fencing tokens run only with fencing off, so an election
    /// refuses their lockers too, saying what to set.
    #[test]
    fn an_election_refuses_the_lockers_of_algorithms_without_terms() {
        crate::watchdog::in_virtual_time(
            "an_election_refuses_the_lockers_of_algorithms_without_terms",
            async {
                use crate::config::{Algorithm, BakeryConfig};
                let (store, clock) = store();
                let configs = [
                    LockConfig {
                        algorithm: Algorithm::Baseline,
                        fencing: false,
                        ..LockConfig::default()
                    },
                    LockConfig {
                        algorithm: Algorithm::Bakery,
                        fencing: false,
                        bakery: BakeryConfig {
                            client_id: 1,
                            ..BakeryConfig::default()
                        },
                        ..LockConfig::default()
                    },
                ];
                for config in configs {
                    let algorithm = config.algorithm;
                    let locker = Locker::builder(store.client())
                        .config(config)
                        .clock(Arc::new(clock.clone()))
                        .seed(1)
                        .build()
                        .unwrap();
                    match Election::new(locker, NAME) {
                        Err(Error::InvalidConfig { field, reason }) => {
                            assert_eq!(field, "fencing", "{algorithm:?}");
                            assert!(reason.contains("fencing: true"), "{reason}");
                        }
                        other => panic!("{algorithm:?}: expected fencing refused, got {other:?}"),
                    }
                }
            },
        );
    }

    /// A hostile election name is refused as a lock id is, naming the problem, and an
    /// election is never created under it.
    #[test]
    fn an_election_refuses_hostile_names() {
        crate::watchdog::in_virtual_time("an_election_refuses_hostile_names", async {
            let (store, clock) = store();
            let too_long = "n".repeat(crate::id::LockId::MAX_LEN + 1);
            let hostile: [(&str, &str); 6] = [
                ("", "empty"),
                (&too_long, "too long"),
                ("leader\nelection", "U+000A"),
                ("leader\u{0}", "U+0000"),
                ("lead\u{202E}er", "U+202E"),
                ("\u{200B}", "U+200B"),
            ];
            for (name, says) in hostile {
                let locker = Locker::builder(store.client())
                    .clock(Arc::new(clock.clone()))
                    .seed(1)
                    .build()
                    .unwrap();
                match Election::new(locker, name) {
                    Err(Error::InvalidLockId { reason, .. }) => {
                        assert!(
                            reason.contains(says),
                            "{name:?}: {reason} should say {says:?}"
                        )
                    }
                    other => panic!("{name:?}: expected InvalidLockId, got {other:?}"),
                }
            }
        });
    }

    /// Campaigning or asking for the leader outside a Tokio runtime returns
    /// [`Error::NoRuntime`] instead of panicking.
    #[test]
    fn campaigning_outside_a_runtime_returns_no_runtime() {
        let (store, clock) = store();
        let election = election(store.client(), &clock, 1);
        match futures::executor::block_on(election.campaign()) {
            Err(Error::NoRuntime(_)) => {}
            other => panic!("expected NoRuntime, got {other:?}"),
        }
        assert!(matches!(
            futures::executor::block_on(election.leader()),
            Err(Error::NoRuntime(_))
        ));
    }
}
