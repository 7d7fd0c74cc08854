//! The time-service model (Theorem 5): time-service replicas with skewed local clocks run
//! lock-core's [`UpdateGlobalTime`] (`TryUpdateGlobalTime`) concurrently against the quorum
//! store, while readers read `GlobalTime` the way a lock client does
//! ([`UpdateGlobalTime::read_request`], decoded by [`UpdateGlobalTime::global_time`]).
//!
//! "`GlobalTime` never decreases" is checked in the three senses it can have under quorum
//! semantics:
//!
//! 1. on every replica, the stored value equals its write timestamp, so last-write-wins
//!    keeps the largest value ever written there (the thesis's argument);
//! 2. a read returns at least every value whose update was acknowledged before the read
//!    started (read-after-write, from quorum intersection);
//! 3. a read returns at least every value returned by a read that finished before it
//!    started (monotonic reads). This one needs more than quorums: a read can see an update
//!    that has reached one replica only, and a later read can miss it. Cassandra's blocking
//!    read repair (the default since 4.0) restores it; the model checks both settings.
//!
//! **Followers** (docs/algorithm.md, section "The clock that follows `GlobalTime`"): lock clients whose clocks follow
//! `GlobalTime` through lock-core's [`GlobalTimeFollower`], as the driver's
//! `GlobalTimeClock` does. Each refreshes (reads `GlobalTime` and
//! [`observe`](GlobalTimeFollower::observe)s the value as of the read's completion) and takes
//! queue timestamps ([`now`](GlobalTimeFollower::now)) in any order, on a local clock that
//! runs on true time, behind the time-service replica that runs ahead. What section "The time service"
//! guarantees, and so what is checked, is reading 2 carried through the follower: a
//! timestamp a client takes is at least every `GlobalTime` update acknowledged before its
//! latest completed refresh started, hence queue timestamps follow the order of acknowledged
//! updates across clients; and a client's own timestamps never decrease and never fall
//! behind a `GlobalTime` it has read. Not guaranteed, and shown reachable: a client taking a
//! timestamp below one another client took earlier (it has not refreshed since the update).

use std::fmt;

use lock_core::machine::{
    GlobalTimeFollower, GlobalTimeOutcome, Machine, Outgoing, RequestId, UpdateGlobalTime,
};
use lock_core::storage::{StorageRequest, StorageResponse};
use lock_core::time::{Now, Timestamp};
use lock_core::{ColumnName, LockId};
use stateright::{Model, Property};

use crate::client::drain;
use crate::clock::{now_at, tick_micros};
use crate::store::{ClientIndex, Message, QuorumStore, ReplicaIndex, StoreConfig};
use crate::trace::Describe;

/// The guarantee of docs/algorithm.md, section "The time service", for clients that follow `GlobalTime`:
/// reading 2 of Theorem 5 (a read returns at least every update acknowledged before it
/// started) carried through the follower, which never hands out less than what it observed.
pub const STAMPS_FOLLOW_UPDATES: &str =
    "a timestamp is at least every GlobalTime update acknowledged before its client's last refresh";

/// What section "The time service" does not guarantee, shown reachable: timestamps in real-time order across
/// clients (a client that has not refreshed since an update can still take a lower one).
pub const STAMP_BELOW_ANOTHER: &str =
    "a client takes a timestamp below one another client took earlier (not guaranteed)";

/// One tick of the time-service model, in microseconds.
pub const MICROS_PER_TICK: u64 = 1_000;

/// The time-service model's parameters.
#[derive(Clone, Debug)]
pub struct GlobalTimeModel {
    /// How far ahead of true time each time-service replica's clock runs, in ticks; its
    /// length is the number of time-service replicas.
    pub updater_skews: Vec<u32>,
    /// How many `TryUpdateGlobalTime` runs each time-service replica makes.
    pub runs: u8,
    /// How many readers.
    pub readers: usize,
    /// How many reads each reader makes, one after another.
    pub reads: u8,
    /// The replicated store.
    pub store: StoreConfig,
    /// How many storage replicas may crash.
    pub crashes: usize,
    /// The last tick.
    pub max_tick: u32,
    /// How many lock clients follow `GlobalTime` (see the module documentation).
    pub followers: usize,
    /// How many refreshes (reads of `GlobalTime`) each follower makes.
    pub refreshes: u8,
    /// How many timestamps each follower takes.
    pub stamps: u8,
    /// How followers turn what they read into timestamps.
    pub follow_rule: FollowRule,
    domain: LockId,
}

/// How a follower turns the `GlobalTime` it reads into timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FollowRule {
    /// lock-core's [`GlobalTimeFollower`], as the driver's `GlobalTimeClock` uses it.
    Follower,
    /// Broken: the local clock, ignoring `GlobalTime`.
    LocalClock,
    /// Broken: the value of the latest completed read, as the thesis reads `GlobalTime` for
    /// every timestamp (zero before the first read).
    LatestRead,
}

impl FollowRule {
    /// The clock reading a client that follows by this rule gets, given its local reading,
    /// its follower and the value of its latest completed read of `GlobalTime`.
    pub fn now(self, follower: &mut GlobalTimeFollower, latest: Timestamp, local: Now) -> Now {
        match self {
            FollowRule::Follower => follower.now(local),
            FollowRule::LocalClock => local,
            FollowRule::LatestRead => Now::new(local.instant, latest),
        }
    }
}

/// A lock client following `GlobalTime`, with the ghost variables its properties read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FollowerClient {
    /// The follower lock-core's `GlobalTimeClock` keeps.
    pub follower: GlobalTimeFollower,
    /// Refreshes finished.
    pub refreshed: u8,
    /// Timestamps taken.
    pub stamped: u8,
    /// While a refresh runs: the largest update acknowledged before it started.
    pub refreshing: Option<Timestamp>,
    /// The largest update acknowledged before a completed refresh of this client started.
    pub floor: Timestamp,
    /// The largest `GlobalTime` this client has read.
    pub seen: Timestamp,
    /// The value of its latest completed read ([`FollowRule::LatestRead`]).
    pub latest: Timestamp,
    /// The last timestamp it took.
    pub last_stamp: Option<Timestamp>,
}

impl GlobalTimeModel {
    /// Time-service replicas with the given clock skews (in ticks), one run each, one reader
    /// making two reads, over `replicas` storage replicas without read repair, 2 ticks.
    pub fn new(updater_skews: Vec<u32>, replicas: usize) -> Self {
        GlobalTimeModel {
            updater_skews,
            runs: 1,
            readers: 1,
            reads: 2,
            store: StoreConfig::new(replicas),
            crashes: 0,
            max_tick: 2,
            followers: 0,
            refreshes: 1,
            stamps: 2,
            follow_rule: FollowRule::Follower,
            domain: LockId::new("time").expect("a valid domain"),
        }
    }

    /// The store client index of follower `index`.
    fn follower_client(&self, index: usize) -> ClientIndex {
        self.updaters() + self.readers + index
    }

    /// The time follower `index` takes now (and the local reading it took it from).
    fn stamp(&self, state: &mut TimeState, index: usize) -> (Timestamp, Timestamp) {
        let local = now_at(state.tick, MICROS_PER_TICK, 0);
        let client = &mut state.followers[index];
        let stamp = self
            .follow_rule
            .now(&mut client.follower, client.latest, local)
            .timestamp;
        (stamp, local.timestamp)
    }

    fn updaters(&self) -> usize {
        self.updater_skews.len()
    }

    fn local_now(&self, state: &TimeState, updater: usize) -> Now {
        let skew = self.updater_skews.get(updater).copied().unwrap_or(0);
        now_at(
            state.tick,
            MICROS_PER_TICK,
            tick_micros(skew, MICROS_PER_TICK),
        )
    }
}

/// Where a time-service replica or a reader is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimeClient {
    /// Between runs (or reads); `done` counts those finished.
    Idle {
        /// Runs or reads finished.
        done: u8,
    },
    /// A time-service replica running `TryUpdateGlobalTime`.
    Updating {
        /// The machine.
        machine: UpdateGlobalTime,
        /// Runs finished before this one.
        done: u8,
    },
    /// A reader waiting for its read, with what it must see at least.
    Reading {
        /// The largest update acknowledged before the read started.
        floor_write: Timestamp,
        /// The largest value read by a read that finished before this one started.
        floor_read: Timestamp,
        /// Reads finished before this one.
        done: u8,
    },
}

/// A state of the time-service model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TimeState {
    /// The current tick.
    pub tick: u32,
    /// Replicas, messages and coordinators.
    pub store: QuorumStore,
    /// Time-service replicas first, then readers.
    pub clients: Vec<TimeClient>,
    /// The largest value whose update was acknowledged.
    pub written: Timestamp,
    /// The largest value a finished read returned.
    pub read: Timestamp,
    /// The value the latest finished read returned.
    pub latest_read: Timestamp,
    /// A read returned less than an update acknowledged before it started.
    pub stale_after_write: bool,
    /// A read returned less than a read that finished before it started.
    pub stale_after_read: bool,
    /// The followers.
    pub followers: Vec<FollowerClient>,
    /// A follower took a timestamp below an update acknowledged before its latest
    /// completed refresh started.
    pub stamp_behind_update: bool,
    /// A follower took a timestamp below one it took before.
    pub stamp_went_back: bool,
    /// A follower took a timestamp below a `GlobalTime` it had read.
    pub stamp_behind_seen: bool,
    /// A follower took a timestamp ahead of its local clock.
    pub stamp_ahead_of_local: bool,
    /// A follower took a timestamp below one another follower took before.
    pub stamp_below_another: bool,
}

/// A step of the time-service model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimeAction {
    /// Deliver a message.
    Deliver(Message),
    /// A time-service replica starts a run, or a reader a read.
    Start(ClientIndex),
    /// A follower (by follower index) starts a refresh.
    Refresh(usize),
    /// A follower takes a timestamp.
    Stamp(usize),
    /// A storage replica crashes.
    Crash(ReplicaIndex),
    /// Time advances.
    Tick,
}

impl fmt::Display for TimeAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeAction::Deliver(message) => write!(f, "deliver {message}"),
            TimeAction::Start(client) => write!(f, "c{client} starts"),
            TimeAction::Refresh(follower) => write!(f, "f{follower} refreshes"),
            TimeAction::Stamp(follower) => write!(f, "f{follower} takes a timestamp"),
            TimeAction::Crash(replica) => write!(f, "r{replica} crashes"),
            TimeAction::Tick => write!(f, "tick"),
        }
    }
}

impl Model for GlobalTimeModel {
    type State = TimeState;
    type Action = TimeAction;

    fn init_states(&self) -> Vec<TimeState> {
        vec![TimeState {
            tick: 0,
            store: QuorumStore::new(&self.store),
            clients: vec![TimeClient::Idle { done: 0 }; self.updaters() + self.readers],
            written: Timestamp::ZERO,
            read: Timestamp::ZERO,
            latest_read: Timestamp::ZERO,
            stale_after_write: false,
            stale_after_read: false,
            followers: vec![
                FollowerClient {
                    follower: GlobalTimeFollower::new(now_at(0, MICROS_PER_TICK, 0)),
                    refreshed: 0,
                    stamped: 0,
                    refreshing: None,
                    floor: Timestamp::ZERO,
                    seen: Timestamp::ZERO,
                    latest: Timestamp::ZERO,
                    last_stamp: None,
                };
                self.followers
            ],
            stamp_behind_update: false,
            stamp_went_back: false,
            stamp_behind_seen: false,
            stamp_ahead_of_local: false,
            stamp_below_another: false,
        }]
    }

    fn actions(&self, state: &TimeState, actions: &mut Vec<TimeAction>) {
        actions.extend(
            state
                .store
                .in_flight
                .iter()
                .cloned()
                .map(TimeAction::Deliver),
        );
        for (index, client) in state.clients.iter().enumerate() {
            let limit = if index < self.updaters() {
                self.runs
            } else {
                self.reads
            };
            if let TimeClient::Idle { done } = client
                && *done < limit
            {
                actions.push(TimeAction::Start(index));
            }
        }
        for (index, follower) in state.followers.iter().enumerate() {
            if follower.refreshing.is_none() && follower.refreshed < self.refreshes {
                actions.push(TimeAction::Refresh(index));
            }
            if follower.stamped < self.stamps {
                actions.push(TimeAction::Stamp(index));
            }
        }
        if state.store.crashed() < self.crashes {
            for (index, replica) in state.store.replicas.iter().enumerate() {
                if !replica.crashed {
                    actions.push(TimeAction::Crash(index));
                }
            }
        }
        if state.tick < self.max_tick {
            actions.push(TimeAction::Tick);
        }
    }

    fn next_state(&self, last: &TimeState, action: TimeAction) -> Option<TimeState> {
        let mut state = last.clone();
        let micros = tick_micros(state.tick, MICROS_PER_TICK);
        match action {
            TimeAction::Deliver(message) => {
                let Some(done) = state.store.deliver(&self.store, &message, micros) else {
                    return Some(state);
                };
                let index = done.client;
                if index >= self.updaters() + self.readers {
                    let value = match &done.response {
                        StorageResponse::Cells(cells) => UpdateGlobalTime::global_time(cells),
                        StorageResponse::Done => Timestamp::ZERO,
                    };
                    let as_of = now_at(state.tick, MICROS_PER_TICK, 0).instant;
                    let follower = &mut state.followers[index - self.updaters() - self.readers];
                    // As the driver's refresh: anchored at the read's completion.
                    follower.follower.observe(value, as_of);
                    follower.floor = follower
                        .floor
                        .max(follower.refreshing.unwrap_or(Timestamp::ZERO));
                    follower.refreshing = None;
                    follower.refreshed += 1;
                    follower.seen = follower.seen.max(value);
                    follower.latest = value;
                    return Some(state);
                }
                let now = self.local_now(&state, index);
                match &mut state.clients[index] {
                    TimeClient::Updating {
                        machine,
                        done: runs,
                    } => {
                        let runs = *runs;
                        machine.handle_response(now, done.request_id, Ok(done.response));
                        if let Some(outcome) = drain(machine, &mut state.store, index, micros) {
                            if let GlobalTimeOutcome::Advanced(value) = outcome {
                                state.written = state.written.max(value);
                            }
                            state.store.forget(index);
                            state.clients[index] = TimeClient::Idle { done: runs + 1 };
                        }
                    }
                    TimeClient::Reading {
                        floor_write,
                        floor_read,
                        done: reads,
                    } => {
                        let value = match &done.response {
                            StorageResponse::Cells(cells) => UpdateGlobalTime::global_time(cells),
                            StorageResponse::Done => Timestamp::ZERO,
                        };
                        state.stale_after_write |= value < *floor_write;
                        state.stale_after_read |= value < *floor_read;
                        state.read = state.read.max(value);
                        state.latest_read = value;
                        state.clients[index] = TimeClient::Idle { done: *reads + 1 };
                    }
                    TimeClient::Idle { .. } => {}
                }
            }
            TimeAction::Start(index) => {
                let TimeClient::Idle { done } = state.clients[index] else {
                    return None;
                };
                if index < self.updaters() {
                    let now = self.local_now(&state, index);
                    let mut machine = UpdateGlobalTime::new(now, self.domain.clone());
                    drain(&mut machine, &mut state.store, index, micros);
                    state.clients[index] = TimeClient::Updating { machine, done };
                } else {
                    let read = UpdateGlobalTime::read_request(self.domain.clone());
                    let outgoing = Outgoing {
                        id: RequestId::from_raw(u64::from(done)),
                        request: StorageRequest::Read(read),
                    };
                    state.store.submit(index, outgoing, micros);
                    state.clients[index] = TimeClient::Reading {
                        floor_write: state.written,
                        floor_read: state.read,
                        done,
                    };
                }
            }
            TimeAction::Refresh(index) => {
                let client = self.follower_client(index);
                let follower = &mut state.followers[index];
                let outgoing = Outgoing {
                    id: RequestId::from_raw(u64::from(follower.refreshed)),
                    request: StorageRequest::Read(UpdateGlobalTime::read_request(
                        self.domain.clone(),
                    )),
                };
                follower.refreshing = Some(state.written);
                state.store.submit(client, outgoing, micros);
            }
            TimeAction::Stamp(index) => {
                let (stamp, local) = self.stamp(&mut state, index);
                let others = state
                    .followers
                    .iter()
                    .enumerate()
                    .filter(|(other, _)| *other != index)
                    .filter_map(|(_, other)| other.last_stamp)
                    .max();
                let follower = &mut state.followers[index];
                let own_last = follower.last_stamp;
                state.stamp_behind_update |= stamp < follower.floor;
                state.stamp_went_back |= own_last.is_some_and(|last| stamp < last);
                state.stamp_behind_seen |= stamp < follower.seen;
                state.stamp_ahead_of_local |= stamp > local;
                state.stamp_below_another |= others.is_some_and(|others| stamp < others);
                follower.last_stamp = Some(stamp);
                follower.stamped += 1;
            }
            TimeAction::Crash(replica) => state.store.crash(replica),
            TimeAction::Tick => state.tick += 1,
        }
        Some(state)
    }

    fn format_action(&self, action: &TimeAction) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                "every stored GlobalTime equals its write timestamp",
                |_: &GlobalTimeModel, state: &TimeState| {
                    let column = ColumnName::new(UpdateGlobalTime::COLUMN);
                    state.store.replicas.iter().all(|replica| {
                        replica
                            .cells
                            .iter()
                            .filter(|((_, name), _)| *name == column)
                            .all(|(_, version)| {
                                version.value.as_deref().and_then(UpdateGlobalTime::decode)
                                    == Some(version.timestamp)
                            })
                    })
                },
            ),
            Property::always(
                "a read returns at least every update acknowledged before it",
                |_: &GlobalTimeModel, state: &TimeState| !state.stale_after_write,
            ),
            Property::always(
                "a read returns at least every read finished before it",
                |_: &GlobalTimeModel, state: &TimeState| !state.stale_after_read,
            ),
            Property::sometimes(
                "a read sees an update",
                |_: &GlobalTimeModel, state: &TimeState| state.read > Timestamp::ZERO,
            ),
        ];
        if self.followers > 0 {
            properties.extend([
                Property::always(
                    STAMPS_FOLLOW_UPDATES,
                    |_: &GlobalTimeModel, state: &TimeState| !state.stamp_behind_update,
                ),
                Property::always(
                    "a follower's timestamps never decrease",
                    |_: &GlobalTimeModel, state: &TimeState| !state.stamp_went_back,
                ),
                Property::always(
                    "a timestamp is at least every GlobalTime its client has read",
                    |_: &GlobalTimeModel, state: &TimeState| !state.stamp_behind_seen,
                ),
                Property::sometimes(
                    "a followed timestamp runs ahead of the local clock",
                    |_: &GlobalTimeModel, state: &TimeState| state.stamp_ahead_of_local,
                ),
                Property::sometimes(
                    STAMP_BELOW_ANOTHER,
                    |_: &GlobalTimeModel, state: &TimeState| state.stamp_below_another,
                ),
            ]);
        }
        properties
    }
}

impl Describe for GlobalTimeModel {
    fn describe(&self, last: &TimeState, action: &TimeAction, next: &TimeState) -> String {
        let mut line = format!("t{} {action}", last.tick);
        if let TimeAction::Stamp(index) = action
            && let Some(stamp) = next.followers[*index].last_stamp
        {
            line.push_str(&format!(": {}", stamp.as_micros()));
        }
        for (index, (before, after)) in last.followers.iter().zip(&next.followers).enumerate() {
            if after.refreshed > before.refreshed {
                line.push_str(&format!(
                    "; f{index}'s refresh reads {}",
                    after.latest.as_micros()
                ));
            }
        }
        if next.stamp_behind_update && !last.stamp_behind_update {
            line.push_str(" — BELOW an update acknowledged before its refresh");
        }
        if next.stamp_went_back && !last.stamp_went_back {
            line.push_str(" — BELOW its own previous timestamp");
        }
        if let TimeAction::Start(index) = action {
            if *index < self.updaters() {
                line.push_str(&format!(
                    " TryUpdateGlobalTime with local time {}",
                    self.local_now(last, *index).timestamp.as_micros()
                ));
            } else {
                line.push_str(" a read of GlobalTime");
            }
        }
        if next.written > last.written {
            line.push_str(&format!(
                "; update to {} acknowledged",
                next.written.as_micros()
            ));
        }
        for (index, (before, after)) in last.clients.iter().zip(&next.clients).enumerate() {
            if let (TimeClient::Reading { .. }, TimeClient::Idle { .. }) = (before, after) {
                line.push_str(&format!(
                    "; c{index}'s read returns {}",
                    next.latest_read.as_micros()
                ));
            }
        }
        if next.stale_after_read && !last.stale_after_read {
            line.push_str(" — LESS than an earlier read returned");
        }
        if next.stale_after_write && !last.stale_after_write {
            line.push_str(" — LESS than an acknowledged update");
        }
        line
    }
}
