//! A history recorder for critical sections, in true (simulated) time, and the checkers
//! that judge a history.
//!
//! The [`Recorder`] notes, for every acquisition, when its owner asked for the lock, when it
//! started the call that succeeded (its *enqueue*; the simulation dates it later if that
//! call enqueued again, see [`Acquisition::enqueued`]), when it was granted the lock, when its
//! application left the critical section, and when the guard's `lost()` signal fired. At
//! each grant it also asks every other guard whose application is still inside whether its
//! lease is held ([`fair_lock::LockGuard::is_held`]): that is what the library claims at
//! the moment it matters.
//!
//! The checkers are plain functions over the recorded [`Acquisition`]s, so they can be run
//! on fabricated histories to show that they catch what they are meant to catch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fair_lock::LockGuard;
use tokio::time::Instant;

/// Index of an acquisition in a history.
pub type AcqId = usize;

/// One acquisition of the lock, as its owner lived it. Times are since the run started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acquisition {
    /// Its index in the history.
    pub id: AcqId,
    /// Which contender (process) made it.
    pub contender: usize,
    /// Which of the contender's acquisitions it is.
    pub round: usize,
    /// When the application first asked for the lock.
    pub requested: Duration,
    /// When it took its place in the queue: when the call that succeeded started (calls that
    /// failed with storage errors were retried by the application), or, if that call
    /// enqueued again because its first queue write was acknowledged too late, when it did.
    pub enqueued: Duration,
    /// How many calls it took.
    pub attempts: u32,
    /// The owner id of the call that succeeded.
    pub owner: Option<String>,
    /// When the lock was granted (the call returned the guard).
    pub granted: Option<Duration>,
    /// When the application left the critical section (or its process crashed).
    pub left: Option<Duration>,
    /// When the guard's `lost()` signal fired, if it did while inside.
    pub lost_at: Option<Duration>,
    /// The fencing token of the grant.
    pub token: Option<u64>,
    /// Whether the application stops work when `lost()` fires.
    pub honours_lost: bool,
    /// Whether the contender crashed during this acquisition.
    pub crashed: bool,
    /// At this grant: every other acquisition whose application was still inside, and
    /// whether its guard reported the lease as held (`is_held()`).
    pub inside_at_grant: Vec<(AcqId, bool)>,
    /// When the first write of the queue cell it was granted with was acknowledged.
    pub queue_visible: Option<Duration>,
    /// Whether its queue cell may have expired while it waited (two successful writes of
    /// it, or the last one and the grant, further apart than the effective lease).
    pub queue_gap: bool,
}

impl Acquisition {
    /// When the application's critical section ended, or `None` if it never did.
    pub fn end(&self) -> Option<Duration> {
        self.left
    }

    /// Whether `time` falls inside the critical section `[granted, left)`.
    pub fn inside(&self, time: Duration) -> bool {
        match self.granted {
            Some(granted) => granted <= time && self.left.is_none_or(|left| time < left),
            None => false,
        }
    }
}

#[derive(Default)]
struct State {
    acquisitions: Vec<Acquisition>,
    inside: BTreeMap<AcqId, Arc<LockGuard>>,
}

/// Records acquisitions as they happen. Shared by every contender of a run.
pub struct Recorder {
    origin: Instant,
    state: Mutex<State>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("acquisitions", &self.lock().acquisitions)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder whose time zero is now.
    pub fn new() -> Arc<Self> {
        Arc::new(Recorder {
            origin: Instant::now(),
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Time since the run started.
    pub fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }

    /// `instant` as time since the run started.
    pub fn since_origin(&self, instant: Instant) -> Duration {
        instant.saturating_duration_since(self.origin)
    }

    /// The application of `contender` asks for the lock for its `round`-th time.
    pub fn request(&self, contender: usize, round: usize, honours_lost: bool) -> AcqId {
        let now = self.now();
        let mut state = self.lock();
        let id = state.acquisitions.len();
        state.acquisitions.push(Acquisition {
            id,
            contender,
            round,
            requested: now,
            enqueued: now,
            honours_lost,
            ..Acquisition::default()
        });
        id
    }

    /// A call to `lock()` starts for acquisition `id`.
    pub fn attempt(&self, id: AcqId) {
        let now = self.now();
        let mut state = self.lock();
        let acquisition = &mut state.acquisitions[id];
        acquisition.enqueued = now;
        acquisition.attempts += 1;
    }

    /// Acquisition `id` was granted the lock: record it and probe every other guard still
    /// inside.
    pub fn granted(&self, id: AcqId, guard: &Arc<LockGuard>) {
        let now = self.now();
        let mut state = self.lock();
        let inside: Vec<(AcqId, bool)> = state
            .inside
            .iter()
            .map(|(&other, guard)| (other, guard.is_held()))
            .collect();
        let acquisition = &mut state.acquisitions[id];
        acquisition.granted = Some(now);
        acquisition.owner = Some(guard.owner_id().as_str().to_owned());
        acquisition.token = guard.fencing_token().map(|token| token.get());
        acquisition.inside_at_grant = inside;
        state.inside.insert(id, guard.clone());
    }

    /// Acquisition `id`'s `lost()` signal fired.
    pub fn lost(&self, id: AcqId) {
        let now = self.now();
        self.lock().acquisitions[id].lost_at.get_or_insert(now);
    }

    /// Acquisition `id`'s application left the critical section.
    pub fn left(&self, id: AcqId) {
        let now = self.now();
        let mut state = self.lock();
        state.inside.remove(&id);
        state.acquisitions[id].left.get_or_insert(now);
    }

    /// `contender`'s process crashed: whatever it was doing ends now.
    pub fn crashed(&self, contender: usize) {
        let now = self.now();
        let mut state = self.lock();
        let State {
            acquisitions,
            inside,
        } = &mut *state;
        for acquisition in acquisitions.iter_mut() {
            if acquisition.contender == contender && acquisition.left.is_none() {
                acquisition.crashed = true;
                if acquisition.granted.is_some() {
                    acquisition.left = Some(now);
                    inside.remove(&acquisition.id);
                }
            }
        }
    }

    /// Everything recorded so far.
    pub fn acquisitions(&self) -> Vec<Acquisition> {
        self.lock().acquisitions.clone()
    }
}

/// Two critical sections that overlapped in true time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The one granted first.
    pub first: AcqId,
    /// The one granted while `first` was still inside.
    pub second: AcqId,
    /// When the overlap began (`second`'s grant).
    pub from: Duration,
    /// When it ended (the earlier of the two ends; `None` if neither ended).
    pub to: Option<Duration>,
}

/// Every pair of critical sections `[granted, left)` that overlap. A section that ends at
/// the very instant the next one begins does not overlap it.
pub fn overlaps(acquisitions: &[Acquisition]) -> Vec<Overlap> {
    let mut granted: Vec<&Acquisition> = acquisitions
        .iter()
        .filter(|acquisition| acquisition.granted.is_some())
        .collect();
    granted.sort_by_key(|acquisition| (acquisition.granted, acquisition.id));
    let mut found = Vec::new();
    for (index, first) in granted.iter().enumerate() {
        for second in &granted[index + 1..] {
            let Some(from) = second.granted else { continue };
            if first.inside(from) {
                let to = match (first.end(), second.end()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (end, None) | (None, end) => end,
                };
                found.push(Overlap {
                    first: first.id,
                    second: second.id,
                    from,
                    to,
                });
            }
        }
    }
    found
}

/// Grants at which another guard whose application was still inside claimed to hold the
/// lease: `(holder, newcomer)`. The library promises none, whatever the application does,
/// as long as the stated assumptions hold.
pub fn untruthful_grants(acquisitions: &[Acquisition]) -> Vec<(AcqId, AcqId)> {
    acquisitions
        .iter()
        .flat_map(|acquisition| {
            acquisition
                .inside_at_grant
                .iter()
                .filter(|(_, held)| *held)
                .map(|&(holder, _)| (holder, acquisition.id))
        })
        .collect()
}

/// Consecutive grants (in grant order) whose fencing tokens do not strictly increase (a
/// retake by the same owner may keep its token, never lower it), or grants without a
/// token: `(earlier, later)`.
pub fn token_order_violations(acquisitions: &[Acquisition]) -> Vec<(AcqId, AcqId)> {
    let mut granted: Vec<&Acquisition> = acquisitions
        .iter()
        .filter(|acquisition| acquisition.granted.is_some())
        .collect();
    granted.sort_by_key(|acquisition| (acquisition.granted, acquisition.id));
    granted
        .windows(2)
        .filter(|pair| match (pair[0].token, pair[1].token) {
            // A retake of a lingering lock (docs/algorithm.md, section "Lingering after a
            // release") holds again as the same owner with the same token: nobody held in
            // between.
            (Some(earlier), Some(later))
                if pair[0].owner.is_some() && pair[0].owner == pair[1].owner =>
            {
                earlier > later
            }
            (Some(earlier), Some(later)) => earlier >= later,
            _ => true,
        })
        .map(|pair| (pair[0].id, pair[1].id))
        .collect()
}

/// For each granted acquisition, the other contenders' acquisitions granted strictly
/// between its enqueue and its grant (its *bypass*).
pub fn bypassers(acquisitions: &[Acquisition]) -> BTreeMap<AcqId, Vec<AcqId>> {
    acquisitions
        .iter()
        .filter_map(|waiter| {
            let granted = waiter.granted?;
            let passed = acquisitions
                .iter()
                .filter(|other| other.contender != waiter.contender)
                .filter(|other| {
                    other
                        .granted
                        .is_some_and(|at| waiter.enqueued < at && at < granted)
                })
                .map(|other| other.id)
                .collect();
            Some((waiter.id, passed))
        })
        .collect()
}

/// One write that a [`FencedResource`] was asked to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceWrite {
    /// When.
    pub at: Duration,
    /// By which acquisition.
    pub acquisition: AcqId,
    /// With which fencing token.
    pub token: u64,
    /// Whether the resource accepted it.
    pub accepted: bool,
}

/// A resource that checks fencing tokens: it accepts a write only if its token is at least
/// the highest it has accepted (the same holder writes many times with one token).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FencedResource {
    highest: Option<u64>,
    /// Every write asked for, in order.
    pub log: Vec<ResourceWrite>,
}

impl FencedResource {
    /// Asks to write with `token`; returns whether the write was accepted.
    pub fn write(&mut self, at: Duration, acquisition: AcqId, token: u64) -> bool {
        let accepted = self.highest.is_none_or(|highest| token >= highest);
        if accepted {
            self.highest = Some(token);
        }
        self.log.push(ResourceWrite {
            at,
            acquisition,
            token,
            accepted,
        });
        accepted
    }
}

/// Accepted writes from an acquisition that was granted *before* an acquisition whose write
/// the resource had already accepted: `(stale write, the later holder's earlier write)`.
/// This is what fencing exists to prevent.
pub fn stale_writes_accepted(
    log: &[ResourceWrite],
    acquisitions: &[Acquisition],
) -> Vec<(ResourceWrite, ResourceWrite)> {
    let grant = |id: AcqId| {
        acquisitions
            .get(id)
            .and_then(|acquisition| acquisition.granted)
    };
    let mut latest: Option<ResourceWrite> = None;
    let mut found = Vec::new();
    for write in log.iter().filter(|write| write.accepted) {
        match latest {
            Some(newest) if grant(write.acquisition) < grant(newest.acquisition) => {
                found.push((*write, newest));
            }
            _ => latest = Some(*write),
        }
    }
    found
}

/// A replica's `GlobalTime` going backwards between two samples:
/// `(replica, (time, value) before, (time, value) after)`, values in microseconds.
pub type GlobalTimeRegression = (usize, (Duration, u64), (Duration, u64));

/// Every time a replica's sampled `GlobalTime` value was lower than the one sampled before
/// it. The cell's value equals its write timestamp and storage keeps the highest
/// timestamp, so it must never decrease (Theorem 5).
pub fn global_time_regressions(samples: &[(Duration, usize, u64)]) -> Vec<GlobalTimeRegression> {
    let mut last: BTreeMap<usize, (Duration, u64)> = BTreeMap::new();
    let mut found = Vec::new();
    for &(at, replica, value) in samples {
        if let Some(&before) = last.get(&replica)
            && value < before.1
        {
            found.push((replica, before, (at, value)));
        }
        last.insert(replica, (at, value));
    }
    found
}
