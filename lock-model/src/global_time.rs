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

use std::fmt;

use lock_core::machine::{GlobalTimeOutcome, Machine, Outgoing, RequestId, UpdateGlobalTime};
use lock_core::storage::{StorageRequest, StorageResponse};
use lock_core::time::{Now, Timestamp};
use lock_core::{ColumnName, LockId};
use stateright::{Model, Property};

use crate::clock::{now_at, tick_micros};
use crate::lock::drain;
use crate::store::{ClientIndex, Message, QuorumStore, ReplicaIndex, StoreConfig};
use crate::trace::Describe;

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
    domain: LockId,
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
            domain: LockId::new("time").expect("a valid domain"),
        }
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
}

/// A step of the time-service model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimeAction {
    /// Deliver a message.
    Deliver(Message),
    /// A time-service replica starts a run, or a reader a read.
    Start(ClientIndex),
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
                        id: RequestId(u64::from(done)),
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
            TimeAction::Crash(replica) => state.store.crash(replica),
            TimeAction::Tick => state.tick += 1,
        }
        Some(state)
    }

    fn format_action(&self, action: &TimeAction) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
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
        ]
    }
}

impl Describe for GlobalTimeModel {
    fn describe(&self, last: &TimeState, action: &TimeAction, next: &TimeState) -> String {
        let mut line = format!("t{} {action}", last.tick);
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
