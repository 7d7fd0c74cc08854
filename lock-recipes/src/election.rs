//! Leader election on the lock: one active instance of a service at a time.

use std::fmt;
use std::time::Duration;

use fair_lock::{LockGuard, Locker};
use lock_core::{FencingToken, IntoLockId, LeaseStatus, LockId, LockStorage, OwnerId};

use crate::Error;

/// How many cells per row [`Election::leader`] reads: candidates of one election are few.
const LEADER_READ_LIMIT: u32 = 64;

/// A leader election: the instances that campaign on the same `name` (on the same storage)
/// take turns as leader, one at a time, in the order they campaigned. The leader holds the
/// election's lock; its *term* is the lock's fencing token, so terms strictly increase from
/// leader to leader and a resource can refuse the writes of a former leader.
///
/// ```
/// use std::sync::Arc;
///
/// use lock_core::LockConfig;
/// use fair_lock::Locker;
/// use lock_recipes::{Election, Error};
/// use lock_storage_memory::MemoryCluster;
///
/// # fair_lock::testing::in_virtual_time("election_doctest", async {
/// // On Cassandra, the storage is lock_storage_cassandra::CassandraStorage.
/// let cluster = MemoryCluster::default();
/// let client = cluster.client();
/// let locker = Locker::builder(client.clone())
///     .config(LockConfig::default())
///     .clock(Arc::new(client.clock()))
///     .build()?;
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
    /// could not be told from its predecessor. Fails as [`IntoLockId`] does on a bad name
    /// (as [`Error::Lock`]).
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
    /// run out, about `lease_ttl`). Fails as [`Locker::lock`] does (as [`Error::Lock`]).
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
    /// [`lock_core::Error::LockLost`] (as [`Error::Lock`]) if leadership was lost at some point during the term (another
    /// instance may have led meanwhile), or the storage error if the release failed (the
    /// next candidate then leads once the lease has run out).
    ///
    /// # Cancel safety
    ///
    /// As for [`LockGuard::release`]: the resignation survives cancellation.
    pub async fn resign(self) -> Result<(), Error> {
        Ok(self.guard.release().await?)
    }
}
