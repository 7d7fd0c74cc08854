//! The lease model: two clients take the lock with lock-core's [`Acquire`]; the holder keeps
//! it with lock-core's [`Lease`], which rewrites both cells every `renew_every` and reads the
//! main cell back. Cells carry a TTL that replicas judge on their own clocks.
//!
//! A holder may *pause* (a stop-the-world GC, a swapped-out VM): from then on it handles no
//! event, so it neither renews nor learns that its lease ran out, but it still believes it
//! holds the lock, because the last time it looked, it did. The checker must find that such a
//! holder and a second client hold the lock at once — the reason the lease reports
//! [`lock_core::LeaseStatus::Lost`] and the reason fencing exists. With renewal working, and
//! for every holder that consults its lease (`time_left(now) > 0`), mutual exclusion holds.
//!
//! Fencing: each holder keeps the [`FencingToken`] its acquisition took, and every holder
//! that believes it holds may make one write to a *resource* (the thing the lock protects),
//! a paused holder too: it stands for the write the holder was about to send when it paused
//! and sends when it resumes, before it looks at its lease. A resource that checks tokens
//! (Chubby's sequencer check) refuses a token below the highest it has accepted. The model
//! checks that tokens grow with acquisition order, and that such a resource never accepts a
//! write from a holder after it accepted one from a later holder; with
//! [`LeaseModel::resource_checks_tokens`] off, the checker finds the paused holder's write
//! landing after its successor's.
//!
//! Dead waiters ([`LeaseModel::dead_waiter`]): three clients; client 0 holds, client 1 queues
//! behind it and may *die* while it waits (it handles no event any more, and its cells stay
//! until their TTL), client 2 queues behind client 1, and client 0 may release at any moment.
//! Queue cells of waiters carry the short `waiter_ttl`
//! ([`lock_core::LockConfig::waiter_ttl`]); the model checks that exclusion still holds and
//! that client 2 holds the lock within the waiter TTL of client 1's death (and a tick of the
//! release), on every schedule, far sooner than the lease TTL would allow.
//!
//! With [`lock_core::LockConfig::wait_in_main_row`] on ([`LeaseModel::dead_head_waiter_in_main`]),
//! client 0 leaves the queue once it holds, and client 1, first in the queue, waits in the
//! main row with a main cell that carries the waiter TTL and so expires like its queue
//! cell; it renews that cell with `lease_ttl` before it holds. The same claims are checked,
//! exclusion with waiting main cells that expire among them. A death in the few round trips
//! between client 1's first main write, which carries `lease_ttl`, and its rewrite with the
//! waiter TTL leaves a lease-long cell, as a death between a main write and its conflict
//! delete does: the claim exempts those deaths (the state records them), whose bound is
//! `lease_ttl`, beyond the model's horizon.

use std::fmt;
use std::time::Duration;

use lock_core::machine::{Acquire, AcquireOutcome, FencingToken, Lease, Machine, Mode, Release};
use lock_core::storage::{RowKey, RowKind};
use lock_core::time::Now;
use lock_core::{ColumnName, Fraction, LeaseStatus, LockConfig, LockId, PollConfig, ValidConfig};
use stateright::{Model, Property};

use crate::client::{drain, owner_id};
use crate::clock::{now_at, tick_micros};
use crate::store::{
    ClientIndex, Message, QuorumStore, ReplicaIndex, ReplicaRequest, StoreConfig, Version,
};
use crate::trace::Describe;

/// One tick of the lease model: one second, the TTL's unit.
pub const MICROS_PER_TICK: u64 = 1_000_000;

/// The lease model's parameters.
#[derive(Clone, Debug)]
pub struct LeaseModel {
    /// How many clients (each takes the lock once and then holds it).
    pub clients: usize,
    /// The replicated store (its `replica_skew_micros` make replicas' clocks run ahead).
    pub store: StoreConfig,
    /// How many replicas may crash.
    pub crashes: usize,
    /// The last tick.
    pub max_tick: u32,
    /// Whether a holder may pause.
    pub pauses: bool,
    /// Whether the resource refuses a write whose fencing token is below the highest it has
    /// accepted (if not, it accepts every write).
    pub resource_checks_tokens: bool,
    /// The lock configuration: see [`lease_config`].
    pub config: ValidConfig,
    /// Dead-waiter mode: client 1 may die while it waits behind client 0, which may
    /// release; the claim checked is that client 2 holds within this many ticks of client
    /// 1's death (and at least a tick after the release). `None`: the mode is off.
    pub dead_waiter: Option<u32>,
    lock_id: LockId,
}

impl LeaseModel {
    /// `clients` clients over `replicas` replicas, no crash, 4 ticks, pauses allowed, a
    /// resource that checks fencing tokens.
    pub fn new(clients: usize, replicas: usize) -> Self {
        LeaseModel {
            clients,
            store: StoreConfig::new(replicas),
            crashes: 0,
            max_tick: 4,
            pauses: true,
            resource_checks_tokens: true,
            config: lease_config(),
            dead_waiter: None,
            lock_id: LockId::new("lock").expect("a valid lock id"),
        }
    }

    /// The dead-waiter model over `replicas` replicas: three clients, no pauses, 5 ticks,
    /// the configuration of [`dead_waiter_config`] with `waiter_ttl`, claiming that the owner
    /// behind a dead waiter holds within `bound_ticks` of its death.
    pub fn dead_waiter(replicas: usize, waiter_ttl: Duration, bound_ticks: u32) -> Self {
        LeaseModel {
            clients: 3,
            max_tick: 5,
            pauses: false,
            config: dead_waiter_config(waiter_ttl),
            dead_waiter: Some(bound_ticks),
            ..LeaseModel::new(3, replicas)
        }
    }

    /// The dead-waiter model of [`LeaseModel::dead_waiter`] with waiting in the main row on:
    /// client 1, first in the queue once client 0 holds (and has left the queue), waits in
    /// the main row with a main cell that carries the waiter TTL.
    pub fn dead_head_waiter_in_main(
        replicas: usize,
        waiter_ttl: Duration,
        bound_ticks: u32,
    ) -> Self {
        let config = LockConfig {
            wait_in_main_row: true,
            ..dead_waiter_config(waiter_ttl).config().clone()
        }
        .validate()
        .expect("the dead-waiter model configuration is valid");
        LeaseModel {
            config,
            ..LeaseModel::dead_waiter(replicas, waiter_ttl, bound_ticks)
        }
    }

    /// Whether client `index` has a main cell written with more than the waiter TTL that
    /// is still the cell's version on a replica or still on its way to one.
    fn has_long_main_cell(&self, state: &LeaseState, index: ClientIndex) -> bool {
        let seat = ColumnName::from(&owner_id(index, 0));
        let waiter_ttl =
            u64::try_from(self.config.waiter_ttl().as_duration().as_micros()).unwrap_or(u64::MAX);
        let long = |row: &RowKey, column: &ColumnName, version: &Version| {
            row.kind == RowKind::Main
                && *column == seat
                && version.value.is_some()
                && version.expiry.is_some_and(|expiry| expiry.ttl > waiter_ttl)
        };
        let stored = state.store.replicas.iter().any(|replica| {
            replica
                .cells
                .iter()
                .any(|((row, column), version)| long(row, column, version))
        });
        let in_flight = state.store.in_flight.iter().any(|message| {
            message.client == index
                && matches!(&message.body, ReplicaRequest::Mutate { row, column, version }
                    if long(row, column, version))
        });
        stored || in_flight
    }

    /// Whether client `index` may start: client 0 at once; in the dead-waiter mode client 2
    /// once client 1 has started, otherwise each once the one before holds.
    fn may_start(&self, state: &LeaseState, index: ClientIndex) -> bool {
        if index == 0 {
            return true;
        }
        let before = &state.clients[index - 1];
        if self.dead_waiter.is_some() && index == 2 {
            return before.phase != LeasePhase::Idle;
        }
        Self::holding(before)
    }

    /// True when nothing is in flight and no timeout is due: time may pass.
    fn quiescent(state: &LeaseState) -> bool {
        state.store.is_quiet() && !state.clients.iter().any(|client| Self::due(state, client))
    }

    /// The dead-waiter claim: once client 1 died and client 0 released, client 2 holds by
    /// `bound` ticks after the death and a tick after the release, whenever time could pass.
    pub fn next_owner_on_time(&self, state: &LeaseState) -> bool {
        let (Some(bound), Some(died), Some(released)) =
            (self.dead_waiter, state.died_at, state.released_at)
        else {
            return true;
        };
        if state.died_with_lease_cell {
            return true;
        }
        let due = (died + bound).max(released + 1);
        state.tick < due || !Self::quiescent(state) || Self::holding(&state.clients[2])
    }

    fn now(state: &LeaseState) -> Now {
        now_at(state.tick, MICROS_PER_TICK, 0)
    }

    fn due(state: &LeaseState, client: &LeaseClient) -> bool {
        let timeout = match &client.phase {
            LeasePhase::Acquiring(machine) => machine.poll_timeout(),
            LeasePhase::Holding {
                lease,
                paused: false,
                ..
            } => lease.poll_timeout(),
            LeasePhase::Releasing(machine) => machine.poll_timeout(),
            _ => None,
        };
        timeout.is_some_and(|at| at <= Self::now(state).instant)
    }

    fn pump(&self, state: &mut LeaseState, index: ClientIndex) {
        let micros = tick_micros(state.tick, MICROS_PER_TICK);
        let now = Self::now(state);
        let LeaseState { store, clients, .. } = state;
        let client = &mut clients[index];
        match &mut client.phase {
            LeasePhase::Acquiring(machine) => {
                let Some(outcome) = drain(machine.as_mut(), store, index, micros) else {
                    return;
                };
                store.forget(index);
                client.phase = match outcome {
                    AcquireOutcome::Acquired(holding) => {
                        let token = holding.fencing_token;
                        let mut lease = Lease::new(now, self.config.clone(), *holding);
                        drain(&mut lease, store, index, micros);
                        LeasePhase::Holding {
                            lease: Box::new(lease),
                            paused: false,
                            token,
                        }
                    }
                    _ => LeasePhase::Failed,
                };
            }
            LeasePhase::Holding {
                lease,
                paused: false,
                ..
            } => {
                drain(lease.as_mut(), store, index, micros);
            }
            LeasePhase::Releasing(machine) => {
                let released = drain(machine.as_mut(), store, index, micros).is_some();
                if released {
                    store.forget(index);
                    client.phase = LeasePhase::Released;
                }
            }
            _ => {}
        }
    }

    fn holding(client: &LeaseClient) -> bool {
        matches!(client.phase, LeasePhase::Holding { .. })
    }

    /// Clients whose lease, asked now, says the lock is still theirs.
    pub fn leased(state: &LeaseState) -> usize {
        let now = Self::now(state).instant;
        state
            .clients
            .iter()
            .filter(|client| match &client.phase {
                LeasePhase::Holding { lease, .. } => lease.time_left(now) > Duration::ZERO,
                _ => false,
            })
            .count()
    }

    /// Clients that believe they hold the lock: a paused holder always does; a running one
    /// as long as its lease is not lost.
    pub fn believers(state: &LeaseState) -> usize {
        state
            .clients
            .iter()
            .filter(|client| Self::believes(state, client))
            .count()
    }

    fn believes(state: &LeaseState, client: &LeaseClient) -> bool {
        let now = Self::now(state).instant;
        match &client.phase {
            LeasePhase::Holding { paused: true, .. } => true,
            LeasePhase::Holding { lease, .. } => {
                lease.status() != LeaseStatus::Lost && lease.time_left(now) > Duration::ZERO
            }
            _ => false,
        }
    }

    /// True if every holder's fencing token is below the token of every holder that
    /// acquired after it (clients acquire in index order: see [`LeaseModel::actions`]).
    pub fn tokens_follow_acquisitions(state: &LeaseState) -> bool {
        let tokens: Vec<Option<FencingToken>> = state
            .clients
            .iter()
            .filter_map(|client| match &client.phase {
                LeasePhase::Holding { token, .. } => Some(*token),
                _ => None,
            })
            .collect();
        tokens.windows(2).all(|pair| match pair {
            [Some(earlier), Some(later)] => earlier < later,
            _ => false,
        })
    }

    /// The resource receives client `index`'s write.
    fn write(&self, state: &mut LeaseState, index: ClientIndex) {
        let LeasePhase::Holding { token, .. } = state.clients[index].phase else {
            return;
        };
        state.clients[index].wrote = true;
        let resource = &mut state.resource;
        let accepted = !self.resource_checks_tokens
            || token.is_some_and(|token| resource.highest.is_none_or(|highest| token >= highest));
        if !accepted {
            resource.refused = resource.refused.saturating_add(1);
            return;
        }
        resource.highest = resource.highest.max(token);
        resource.stale_write_accepted |=
            resource.newest_writer.is_some_and(|newest| newest > index);
        resource.newest_writer = resource.newest_writer.max(Some(index));
    }
}

/// The lease model's lock configuration: TTL 3 s, renewal every 1 s (a third), request
/// timeout 0.5 s, no clock skew allowed, so the effective lease is 3 - 1 - 0 = 2 s; polls
/// every second without jitter.
pub fn lease_config() -> ValidConfig {
    let second = Duration::from_secs(1);
    LockConfig {
        lease_ttl: second * 3,
        renew_fraction: Fraction::new(1, 3),
        max_clock_skew: Duration::ZERO,
        request_timeout: second / 2,
        poll: PollConfig {
            min_interval: second,
            max_interval: second,
            queue_read_limit: 8,
            jitter_percent: 0,
            ..PollConfig::default()
        },
        retry_backoff: second,
        // Failures are retried `storage_retries` times, as in the lock model.
        storage_retry_window: Duration::ZERO,
        // On by default; `LeaseModel::dead_head_waiter_in_main` turns it on.
        wait_in_main_row: false,
        ..LockConfig::default()
    }
    .validate()
    .expect("the lease model configuration is valid")
}

/// The dead-waiter model's configuration: [`lease_config`]'s, but with a 6 s lease
/// (renewed every 2 s, effective lease 5 s) and waiters' queue cells written with
/// `waiter_ttl` (2 s: effective 1 s, rewritten every third of it, so at every tick).
pub fn dead_waiter_config(waiter_ttl: Duration) -> ValidConfig {
    LockConfig {
        lease_ttl: Duration::from_secs(6),
        waiter_ttl,
        ..lease_config().config().clone()
    }
    .validate()
    .expect("the dead-waiter model configuration is valid")
}

/// Where a lease-model client is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeasePhase {
    /// Not started.
    Idle,
    /// Acquiring.
    Acquiring(Box<Acquire>),
    /// Holding, with its lease; a paused holder handles no event any more.
    Holding {
        /// The lease machine.
        lease: Box<Lease>,
        /// Whether the holder is paused.
        paused: bool,
        /// The fencing token its acquisition took.
        token: Option<FencingToken>,
    },
    /// The acquisition failed.
    Failed,
    /// Releasing (dead-waiter mode).
    Releasing(Box<Release>),
    /// Released (dead-waiter mode).
    Released,
    /// Died while waiting (dead-waiter mode): it handles no event any more.
    Dead,
}

/// One client of the lease model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseClient {
    /// Where it is.
    pub phase: LeasePhase,
    /// Whether it has made its write to the resource.
    pub wrote: bool,
}

/// The resource the lock protects, as far as fencing goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The highest fencing token of a write it accepted.
    pub highest: Option<FencingToken>,
    /// The last client (in acquisition order) whose write it accepted.
    pub newest_writer: Option<ClientIndex>,
    /// It accepted a write from a holder after one from a later holder.
    pub stale_write_accepted: bool,
    /// How many writes it refused for their tokens.
    pub refused: u8,
}

/// A state of the lease model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseState {
    /// The current tick (one second each).
    pub tick: u32,
    /// Replicas, messages and coordinators.
    pub store: QuorumStore,
    /// The clients.
    pub clients: Vec<LeaseClient>,
    /// The protected resource.
    pub resource: Resource,
    /// Dead-waiter mode: the tick at which client 1 died.
    pub died_at: Option<u32>,
    /// Dead-waiter mode: the tick at which client 0 released.
    pub released_at: Option<u32>,
    /// Dead-waiter mode: client 1 died leaving a main cell with `lease_ttl` (between its
    /// first main write and the rewrite with the waiter TTL when it waits in the main row);
    /// its bound is the lease's, not the waiter TTL's.
    pub died_with_lease_cell: bool,
}

/// A step of the lease model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeaseAction {
    /// Deliver a message.
    Deliver(Message),
    /// Wake a client's machine.
    Timeout(ClientIndex),
    /// A client starts acquiring.
    Start(ClientIndex),
    /// A holder pauses for good.
    Pause(ClientIndex),
    /// A holder that believes it holds the lock writes to the resource.
    Write(ClientIndex),
    /// A replica crashes.
    Crash(ReplicaIndex),
    /// A waiting client dies (dead-waiter mode).
    Die(ClientIndex),
    /// A holder releases (dead-waiter mode).
    Release(ClientIndex),
    /// One second passes.
    Tick,
}

impl fmt::Display for LeaseAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseAction::Deliver(message) => write!(f, "deliver {message}"),
            LeaseAction::Timeout(client) => write!(f, "c{client} wakes up"),
            LeaseAction::Start(client) => write!(f, "c{client} starts acquiring"),
            LeaseAction::Pause(client) => write!(f, "c{client} PAUSES"),
            LeaseAction::Write(client) => write!(f, "c{client} writes to the resource"),
            LeaseAction::Crash(replica) => write!(f, "r{replica} crashes"),
            LeaseAction::Die(client) => write!(f, "c{client} DIES while waiting"),
            LeaseAction::Release(client) => write!(f, "c{client} releases"),
            LeaseAction::Tick => write!(f, "tick"),
        }
    }
}

impl Model for LeaseModel {
    type State = LeaseState;
    type Action = LeaseAction;

    fn init_states(&self) -> Vec<LeaseState> {
        vec![LeaseState {
            tick: 0,
            store: QuorumStore::new(&self.store),
            clients: vec![
                LeaseClient {
                    phase: LeasePhase::Idle,
                    wrote: false,
                };
                self.clients
            ],
            resource: Resource::default(),
            died_at: None,
            released_at: None,
            died_with_lease_cell: false,
        }]
    }

    /// Client `i + 1` starts once client `i` holds the lock (acquisition races are the lock
    /// model's business; here the second client waits in the queue behind a holder). Time is
    /// urgent-only: it advances when no message is in flight, no timeout is due and no client
    /// may start. Pausing and writing to the resource are never urgent; each holder writes at
    /// most once.
    fn actions(&self, state: &LeaseState, actions: &mut Vec<LeaseAction>) {
        actions.extend(
            state
                .store
                .in_flight
                .iter()
                .cloned()
                .map(LeaseAction::Deliver),
        );
        let mut urgent = !state.store.is_quiet();
        for (index, client) in state.clients.iter().enumerate() {
            if Self::due(state, client) {
                actions.push(LeaseAction::Timeout(index));
                urgent = true;
            }
            if !client.wrote && Self::believes(state, client) {
                actions.push(LeaseAction::Write(index));
            }
            match client.phase {
                LeasePhase::Idle if self.may_start(state, index) => {
                    actions.push(LeaseAction::Start(index));
                    urgent = true;
                }
                LeasePhase::Acquiring(_)
                    if self.dead_waiter.is_some()
                        && index == 1
                        && Self::holding(&state.clients[0]) =>
                {
                    actions.push(LeaseAction::Die(index));
                }
                LeasePhase::Holding { paused: false, .. }
                    if self.dead_waiter.is_some() && index == 0 =>
                {
                    actions.push(LeaseAction::Release(index));
                }
                LeasePhase::Holding { paused: false, .. } if self.pauses => {
                    let someone_paused = state.clients.iter().any(|other| {
                        matches!(other.phase, LeasePhase::Holding { paused: true, .. })
                    });
                    if !someone_paused {
                        actions.push(LeaseAction::Pause(index));
                    }
                }
                _ => {}
            }
        }
        if state.store.crashed() < self.crashes {
            for (index, replica) in state.store.replicas.iter().enumerate() {
                if !replica.crashed {
                    actions.push(LeaseAction::Crash(index));
                }
            }
        }
        if state.tick < self.max_tick && !urgent {
            actions.push(LeaseAction::Tick);
        }
    }

    fn next_state(&self, last: &LeaseState, action: LeaseAction) -> Option<LeaseState> {
        let mut state = last.clone();
        let now = Self::now(&state);
        let micros = tick_micros(state.tick, MICROS_PER_TICK);
        match action {
            LeaseAction::Deliver(message) => {
                let Some(done) = state.store.deliver(&self.store, &message, micros) else {
                    return Some(state);
                };
                match &mut state.clients[done.client].phase {
                    LeasePhase::Acquiring(machine) => {
                        machine.handle_response(now, done.request_id, Ok(done.response));
                    }
                    LeasePhase::Holding {
                        lease,
                        paused: false,
                        ..
                    } => lease.handle_response(now, done.request_id, Ok(done.response)),
                    LeasePhase::Releasing(machine) => {
                        machine.handle_response(now, done.request_id, Ok(done.response));
                    }
                    _ => return Some(state),
                }
                self.pump(&mut state, done.client);
            }
            LeaseAction::Timeout(index) => {
                match &mut state.clients[index].phase {
                    LeasePhase::Acquiring(machine) => machine.handle_timeout(now),
                    LeasePhase::Holding {
                        lease,
                        paused: false,
                        ..
                    } => lease.handle_timeout(now),
                    LeasePhase::Releasing(machine) => machine.handle_timeout(now),
                    _ => return None,
                }
                self.pump(&mut state, index);
            }
            LeaseAction::Start(index) => {
                state.clients[index].phase = LeasePhase::Acquiring(Box::new(Acquire::new(
                    now,
                    self.config.clone(),
                    Mode::Mandatory,
                    self.lock_id.clone(),
                    owner_id(index, 0),
                    index as u64,
                    None,
                )));
                self.pump(&mut state, index);
            }
            LeaseAction::Pause(index) => {
                if let LeasePhase::Holding { paused, .. } = &mut state.clients[index].phase {
                    *paused = true;
                }
                state.store.forget(index);
            }
            LeaseAction::Write(index) => self.write(&mut state, index),
            LeaseAction::Die(index) => {
                state.died_with_lease_cell = self.has_long_main_cell(&state, index);
                state.clients[index].phase = LeasePhase::Dead;
                state.store.forget(index);
                state.died_at = Some(state.tick);
            }
            LeaseAction::Release(index) => {
                let phase = std::mem::replace(&mut state.clients[index].phase, LeasePhase::Idle);
                let LeasePhase::Holding { lease, .. } = phase else {
                    return None;
                };
                state.store.forget(index);
                state.clients[index].phase = LeasePhase::Releasing(Box::new(lease.release(now)));
                state.released_at = Some(state.tick);
                self.pump(&mut state, index);
            }
            LeaseAction::Crash(replica) => state.store.crash(replica),
            LeaseAction::Tick => state.tick += 1,
        }
        Some(state)
    }

    fn format_action(&self, action: &LeaseAction) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                "mutual exclusion of holders whose lease has time left",
                |_: &LeaseModel, state: &LeaseState| LeaseModel::leased(state) <= 1,
            ),
            Property::always(
                "mutual exclusion of holders that believe they hold",
                |_: &LeaseModel, state: &LeaseState| LeaseModel::believers(state) <= 1,
            ),
            Property::always(
                "fencing tokens grow with acquisition order",
                |_: &LeaseModel, state: &LeaseState| LeaseModel::tokens_follow_acquisitions(state),
            ),
            Property::always(
                "the resource takes no write from a holder after its successor's",
                |_: &LeaseModel, state: &LeaseState| !state.resource.stale_write_accepted,
            ),
            Property::sometimes(
                "the resource refuses a superseded holder's write",
                |_: &LeaseModel, state: &LeaseState| state.resource.refused > 0,
            ),
        ];
        if self.dead_waiter.is_some() {
            properties.push(Property::always(
                "the owner behind a dead waiter holds within the waiter TTL",
                |model: &LeaseModel, state: &LeaseState| model.next_owner_on_time(state),
            ));
            properties.push(Property::sometimes(
                "the owner behind a dead waiter holds",
                |_: &LeaseModel, state: &LeaseState| {
                    state.died_at.is_some()
                        && !state.died_with_lease_cell
                        && LeaseModel::holding(&state.clients[2])
                },
            ));
        }
        properties
    }
}

impl Describe for LeaseModel {
    fn describe(&self, last: &LeaseState, action: &LeaseAction, next: &LeaseState) -> String {
        let mut line = format!("t{}s {action}", last.tick);
        for (index, (before, after)) in last.clients.iter().zip(&next.clients).enumerate() {
            match (&before.phase, &after.phase) {
                (LeasePhase::Acquiring(_), LeasePhase::Holding { lease, token, .. }) => {
                    line.push_str(&format!(
                        "; c{index} HOLDS the lock, lease deadline {}s",
                        lease.deadline().as_micros() / MICROS_PER_TICK
                    ));
                    if let Some(token) = token {
                        line.push_str(&format!(", fencing token {token}"));
                    }
                }
                (
                    LeasePhase::Holding { lease: old, .. },
                    LeasePhase::Holding { lease: new, .. },
                ) => {
                    if old.deadline() != new.deadline() {
                        line.push_str(&format!(
                            "; c{index} renewed, deadline {}s",
                            new.deadline().as_micros() / MICROS_PER_TICK
                        ));
                    }
                    if old.status() != new.status() {
                        line.push_str(&format!("; c{index} lease {:?}", new.status()));
                    }
                }
                _ => {}
            }
        }
        if let LeaseAction::Write(index) = action
            && let LeasePhase::Holding { token, .. } = &next.clients[*index].phase
        {
            let token = token.map_or("none".to_owned(), |token| token.to_string());
            let verdict = if next.resource.refused > last.resource.refused {
                "REFUSED"
            } else {
                "accepted"
            };
            line.push_str(&format!(" with token {token}: {verdict}"));
        }
        if next.resource.stale_write_accepted && !last.resource.stale_write_accepted {
            line.push_str(" — AFTER a later holder's write");
        }
        line
    }
}
