//! The lock model: clients running lock-core's [`Acquire`]
//! (queue algorithm, mandatory or soft) or
//! [`BaselineAcquire`](lock_core::machine::BaselineAcquire), through [`AnyAcquire`], and
//! [`Release`] against a [`QuorumStore`].
//!
//! Each client takes the lock `rounds` times (a soft client tries `rounds` times): it creates
//! an acquisition machine at the current tick (that reading of the clock is its queue
//! timestamp), the machine's requests travel as messages, and when the machine reports
//! [`AcquireOutcome::Acquired`] the client holds the lock until it chooses to release it
//! (if `holders_release`). As in the driver, the holder keeps the [`Lease`] built from the
//! acquisition's [`Holding`](lock_core::machine::Holding), and releasing is
//! [`Lease::release`]: the [`Release`] machine it returns deletes the cells the lease holds.
//! Renewals and expiry are out of scope here (the thesis assumes holders keep their cells):
//! the TTL is far longer than the model's horizon. See [`crate::lease`].
//!
//! Each client is a locker with its own [`SeatBook`] (seat prefix `c<i>`, unique to it as
//! assumption A7 asks), used exactly as the driver's locker and guard use theirs: every
//! acquisition starts in the book ([`SeatBook::start`]), which gives one by the queue
//! algorithm its seat and queue floor, and ends through the [`SeatUse`] it returns: one
//! that ends without the lock gives the seat back at once with its last timestamp and the
//! queue head it last saw ([`SeatUse::acquisition_ended`]), and a holder gives it back once
//! its release has ended, successfully or not, with the release's last timestamp and its
//! own enqueue time ([`SeatUse::release_ended`]). These are the calls the driver makes, not
//! copies of them; the clients only leave out the poll hint
//! ([`SeatUse::without_poll_hint`]), which times reads and decides nothing. So the seat a
//! round writes its main cell in, the timestamp floor above which it stamps, and where its
//! queue reads start are the book's (a first mandatory round, for which the book has no queue floor,
//! also reads the main row with its first queue write and may start at a queue head a main
//! cell names), and what the model explores is what the driver runs. Rounds of one
//! client are sequential, as the driver's local line makes a locker's acquisitions of one
//! lock, so each round takes seat 0 again (a lease is never lost within the lock models'
//! horizon, so no seat is retired). Two properties watch the rules of docs/algorithm.md,
//! sections "Seats" and "Queue floors and tombstones": [`HOLDERS_CELLS_STAY`] and [`FLOORS_HIDE_NO_WAITER`]; the model
//! options [`SeatFault`] and [`LockModel::release_timeouts`] show that each can fail.
//!
//! With a non-zero `linger` ([`MODEL_LINGER`]; docs/algorithm.md, section "Lingering after a
//! release"), a holder's release keeps its cells when lock-core's [`Retake::lingers`] says
//! so ([`Phase::Lingering`]), and its next round may take them again through lock-core's
//! [`Retake`] ([`Phase::Retaking`]), which counts as that round's acquisition; a retake
//! that gives the lease back releases it and acquires the round afresh. The linger's end
//! and the retake's give-back release through [`Lease::release`], as the driver does.
//!
//! With wake-up hints on ([`LockModel::wake_hints`]; docs/algorithm.md, section "Wake-up
//! hints"), every acquisition by the queue algorithm names [`MODEL_WAKE_HINT_LISTENER`] in
//! its queue cell, as the driver's locker does with a hint transport, and a release whose
//! lease was not lost goes through [`Lease::release_finding_successors`], as the driver's
//! guard's does: its queue read is one more request the store delivers like any other.
//! Which hints a holder sends is not modelled; instead a hint may arrive for an acquiring
//! client at any moment, any number of times ([`LockAction::WakeHint`]): forged, early,
//! late and repeated hints are all among the runs, and the properties must hold on each.
//!
//! With fencing on (as lock-core ships; [`model_config`]), each queue acquisition also reads
//! the fence and writes the next token before it holds, and the state keeps the highest
//! token any holder was given, for the property that tokens increase from holder to holder.

use std::cmp::Reverse;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use lock_core::ValidConfig;
use lock_core::machine::{
    Acquire, AcquireOptions, AcquireOutcome, AcquireStats, AnyAcquire, FencingToken,
    GlobalTimeFollower, GlobalTimeOutcome, HeldCell, Lease, Machine, Mode, Outgoing, Release,
    RequestId, Retake, RetakeOutcome, SeatBook, SeatUse, UpdateGlobalTime,
};
use lock_core::storage::{Cell, RowKey, RowKind, StorageRequest, StorageResponse};
use lock_core::time::{MonotonicTime, Now, Timestamp};
use lock_core::{Algorithm, BaselineConfig, ColumnName, Error, LockConfig, LockId, PollConfig};
use stateright::{Model, Property, Representative};

use crate::client::{drain, owner_id};
use crate::clock::{TimeRule, TimeoutRule, now_at, tick_micros};
use crate::global_time::FollowRule;
use crate::liveness::Ranked;
use crate::store::{ClientIndex, Message, QuorumStore, ReplicaIndex, StoreConfig};
use crate::trace::Describe;

/// One tick of the lock models: 1 ms, the poll interval, so that every pause a waiting
/// machine takes is exactly one tick.
pub const MICROS_PER_TICK: u64 = 1_000;

/// The `LockConfig::linger` of a lock model that lingers after a release (docs/algorithm.md,
/// section "Lingering after a release"): one tick, the smallest non-zero linger the model's
/// time can tell apart, well below the renewal period as validation asks. Set it in
/// [`LockModel::config`] (e.g. `LockConfig { linger: MODEL_LINGER, ..lock_config(..) }`);
/// zero, as [`lock_config`] has it, keeps every model as it was without the rule.
pub const MODEL_LINGER: Duration = Duration::from_micros(MICROS_PER_TICK);

/// The wake-up hint listener every client of a model with [`LockModel::wake_hints`] names
/// in its queue cells. All clients name the same one: a hint's effect in the model does not
/// depend on where it was sent, only on which acquisition it reaches.
pub const MODEL_WAKE_HINT_LISTENER: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 7), 7401));

/// What a model checks and under which assumptions; build one with [`LockModel::new`] and
/// adjust the public fields.
#[derive(Clone, Debug)]
pub struct LockModel {
    /// Queue (the new algorithm) or baseline (the old one).
    pub algorithm: Algorithm,
    /// Mandatory or soft.
    pub mode: Mode,
    /// How many clients contend.
    pub clients: usize,
    /// How many acquisitions each client makes (soft: attempts).
    pub rounds: u8,
    /// Whether a holder releases the lock (if not, it holds it to the end).
    pub holders_release: bool,
    /// The replicated store.
    pub store: StoreConfig,
    /// How many replicas may crash.
    pub crashes: usize,
    /// The last tick.
    pub max_tick: u32,
    /// When time advances.
    pub time: TimeRule,
    /// When timeouts fire.
    pub timeouts: TimeoutRule,
    /// If true every clock reading is distinct (a clock reading taken later within the same
    /// tick is one microsecond later); if false, clients that start in the same tick get the
    /// same queue timestamp and are ordered by owner id.
    pub strict_timestamps: bool,
    /// The `K` of the bounded-bypass properties.
    pub bypass_bound: u8,
    /// Client symmetry: owner ids go to clients in the order they first start (only the
    /// lowest-numbered client that has not started yet may start), so that states that
    /// differ only in which client started first coincide. Sound only for the queue
    /// algorithm with `strict_timestamps` (see the crate documentation's section on
    /// symmetry); [`Model::init_states`] refuses it otherwise.
    pub client_symmetry: bool,
    /// The lock configuration every machine runs with ([`model_config`]).
    pub config: ValidConfig,
    /// A deliberately broken seat rule, to show that the seat properties can fail; `None`
    /// (the default) runs each client's [`SeatBook`] exactly as the driver does.
    pub seat_fault: Option<SeatFault>,
    /// Every mandatory acquisition tries the fast path (docs/algorithm.md, section "The two-round-trip fast path"),
    /// not only those whose client last found the lock idle as the driver's locker does
    /// (which `config.fast_path` already models): the harshest setting for the checks of
    /// exclusion, order and progress. Default off.
    pub fast_path_always: bool,
    /// How many storage requests of releasing clients may time out (assumption A6): the
    /// release machine is told *outcome unknown* while the request's messages stay in flight,
    /// so a delete may still land after the release has ended and the seat was given back.
    /// lock-core's release retries `storage_retries` times, then reports the error and, as
    /// the driver does, the seat is given back all the same.
    pub release_timeouts: u8,
    /// Clients whose clocks follow `GlobalTime` (docs/algorithm.md, section "The time service"), kept by one
    /// time-service replica; `None`: every client reads the shared true clock.
    pub time_service: Option<TimeService>,
    /// A deliberately broken retake, to show that the checks see what a retake must not do;
    /// `None` (the default) runs lock-core's [`Retake`] on the answers the store gives.
    /// Only matters when the configuration lingers ([`MODEL_LINGER`]).
    pub retake_fault: Option<RetakeFault>,
    /// Wake-up hints (docs/algorithm.md, section "Wake-up hints"): every acquisition by the
    /// queue algorithm listens ([`MODEL_WAKE_HINT_LISTENER`] in `wake_hint_listener`), a
    /// holder's release also reads the queue for whom to hint
    /// ([`Lease::release_finding_successors`]), and a hint may reach an acquiring client at
    /// any moment ([`LockAction::WakeHint`]). Default off, which leaves the model exactly as
    /// it was without hints.
    pub wake_hints: bool,
    /// A deliberately broken hint, to show that the checks see a hint that decides; `None`
    /// (the default) runs lock-core's acquisition on the answers the store gives. Only
    /// matters with [`LockModel::wake_hints`].
    pub hint_fault: Option<HintFault>,
    lock_id: LockId,
}

/// A deliberately broken wake-up hint ([`LockModel::hint_fault`]), planted in the model
/// (the answers the acquisition gets), not in lock-core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HintFault {
    /// A hinted acquisition trusts the hint as if it said "the lock is yours": once it has
    /// sent a hinted read, its queue reads are answered without the cells ahead of its own
    /// and its main reads with its own cell alone. A forged or early hint then grants the
    /// lock while another client holds it.
    Trusted,
}

/// A deliberately broken retake ([`LockModel::retake_fault`]), planted in the model (the
/// answers [`Retake`] gets), not in lock-core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetakeFault {
    /// The retake's queue read is answered with an empty slice, as if the retake held
    /// without checking whether anybody had queued: a waiter enqueued before the read was
    /// sent is passed once more.
    IgnoreQueue,
}

/// The time service in the lock model ([`LockModel::time_service`]): one time-service
/// replica, whose clock runs `ahead_ticks` ahead of true time, runs lock-core's
/// [`UpdateGlobalTime`] once, at a moment of the checker's choosing, against the same
/// quorum store; every client keeps a [`GlobalTimeFollower`], may refresh it (read
/// `GlobalTime` and observe the value as of the read's completion, as the driver's
/// `GlobalTimeClock` does) up to `refreshes` times at any moment, and every clock reading
/// its machines get (queue timestamps, write timestamps) is the follower's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeService {
    /// How far ahead of true time the time-service replica's clock runs, in ticks.
    pub ahead_ticks: u32,
    /// How many refreshes each client makes at most.
    pub refreshes: u8,
    /// How clients turn what they read into clock readings ([`FollowRule::Follower`]:
    /// lock-core's rule).
    pub rule: FollowRule,
}

/// A client's clock that follows `GlobalTime` ([`LockModel::time_service`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FollowedClock {
    /// The follower, as the driver's `GlobalTimeClock` keeps it.
    pub follower: GlobalTimeFollower,
    /// The value of the latest completed refresh ([`FollowRule::LatestRead`]).
    pub latest: Timestamp,
    /// Refreshes finished.
    pub refreshed: u8,
    /// While a refresh runs: the largest update acknowledged before it started.
    pub refreshing: Option<Timestamp>,
    /// The largest update acknowledged before a completed refresh of this client started:
    /// every queue timestamp the client takes from then on must be at least this.
    pub floor: Timestamp,
}

/// A deliberately broken seat rule ([`LockModel::seat_fault`]): each breaks one rule of
/// docs/algorithm.md, section "Seats" or "Queue floors and tombstones", and the checker
/// must see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeatFault {
    /// Every client's book has the same seat prefix, breaking assumption A7 (a locker's
    /// seat prefix is unique to it): two clients' acquisitions can write one seat.
    SharedPrefix,
    /// The seat's timestamp floor ([`lock_core::machine::Seat::after`]) is dropped: an
    /// acquisition stamps its writes from the current time, not above every timestamp its
    /// seat's earlier users wrote.
    NoTimestampFloor,
    /// Queue floors without their margin: reads start at the head last seen instead of
    /// [`Acquire::floor_margin`] before it (the model adds the margin to the floor it passes,
    /// which lock-core then takes off again).
    FloorWithoutMargin,
}

impl LockModel {
    /// `clients` clients of `algorithm` in `mode` over `replicas` replicas, one round each,
    /// holders releasing, no crashes, 4 ticks of free time, timeouts firing any time, and
    /// fencing tokens on, as lock-core ships ([`model_config`]).
    pub fn new(algorithm: Algorithm, mode: Mode, clients: usize, replicas: usize) -> Self {
        LockModel {
            algorithm,
            mode,
            clients,
            rounds: 1,
            holders_release: true,
            store: StoreConfig::new(replicas),
            crashes: 0,
            max_tick: 4,
            time: TimeRule::Free,
            timeouts: TimeoutRule::Anytime,
            strict_timestamps: false,
            bypass_bound: 1,
            client_symmetry: false,
            config: model_config(algorithm, algorithm != Algorithm::Baseline),
            seat_fault: None,
            fast_path_always: false,
            release_timeouts: 0,
            time_service: None,
            retake_fault: None,
            wake_hints: false,
            hint_fault: None,
            lock_id: LockId::new("lock").expect("a valid lock id"),
        }
    }

    /// The seat prefix of client `index`'s [`SeatBook`]: `c<index>`, unique to the client
    /// as assumption A7 asks (the same for every client with [`SeatFault::SharedPrefix`]).
    pub fn seat_prefix(&self, index: ClientIndex) -> String {
        match self.seat_fault {
            Some(SeatFault::SharedPrefix) => "c".to_owned(),
            _ => format!("c{index}"),
        }
    }

    /// The acquisition options for client `index`'s next acquisition, starting it in its
    /// book with the driver's locker's call ([`SeatBook::start`]: a seat only for the queue
    /// algorithm), then breaking the seat rule [`LockModel::seat_fault`] names, if any.
    fn seat_options(&self, client: &mut Client, now: Now) -> AcquireOptions {
        let (seat, mut options) = client.book.start(&self.lock_id, now, None);
        client.seat = seat;
        if !self.has_seats() {
            return options;
        }
        let config = self.config.config();
        match self.seat_fault {
            Some(SeatFault::NoTimestampFloor) => {
                if let Some(seat) = options.seat.as_mut() {
                    seat.after = Timestamp::ZERO;
                }
            }
            Some(SeatFault::FloorWithoutMargin) => {
                options.queue_floor = options
                    .queue_floor
                    .map(|floor| floor + Acquire::floor_margin(config));
            }
            Some(SeatFault::SharedPrefix) | None => {}
        }
        options.fast_path |= self.fast_path_always;
        if self.wake_hints {
            options.wake_hint_listener = Some(MODEL_WAKE_HINT_LISTENER);
        }
        options
    }

    fn now(&self, state: &LockState) -> Now {
        now_at(state.tick, MICROS_PER_TICK, u64::from(state.readings))
    }

    /// The clock reading client `index`'s machines get now: the true clock, or with a time
    /// service the client's followed clock.
    fn client_now(&self, state: &mut LockState, index: ClientIndex) -> Now {
        let local = self.now(state);
        match (self.time_service, state.clients[index].clock.as_mut()) {
            (Some(service), Some(clock)) => {
                service.rule.now(&mut clock.follower, clock.latest, local)
            }
            _ => local,
        }
    }

    /// The store client index of the time-service replica: after every lock client.
    fn updater_index(&self) -> ClientIndex {
        self.clients
    }

    /// The store client index of client `index`'s refreshes (its clock's reads of
    /// `GlobalTime` run beside its machines, on a coordinator of their own).
    fn refresh_index(&self, index: ClientIndex) -> ClientIndex {
        self.clients + 1 + index
    }

    fn time_domain() -> LockId {
        LockId::new("time").expect("a valid domain")
    }

    fn micros(&self, state: &LockState) -> u64 {
        tick_micros(state.tick, MICROS_PER_TICK)
    }

    fn timeout_due(&self, state: &LockState, client: &Client) -> bool {
        let due = client
            .machine_timeout()
            .is_some_and(|at| at <= self.now(state).instant);
        due && (self.timeouts == TimeoutRule::Anytime || state.store.is_quiet())
    }

    fn start(&self, state: &mut LockState, index: ClientIndex) {
        if self.strict_timestamps {
            state.readings += 1;
        }
        let now = self.client_now(state, index);
        let client = &mut state.clients[index];
        if let Some(clock) = &client.clock {
            state.queue_time_behind_update |= now.timestamp < clock.floor;
        }
        // The round a retake started and gave back is acquired afresh without counting a
        // new round; its owner id is the one that round would have had.
        let round = if std::mem::take(&mut client.rerun) {
            client.started.saturating_sub(1)
        } else {
            client.started += 1;
            client.started - 1
        };
        let owner = owner_id(index, round);
        let seed = (index as u64) << 8 | u64::from(round);
        let options = self.seat_options(client, now);
        if self.algorithm == Algorithm::Baseline {
            client.enqueued = true;
        }
        client.phase = Phase::Acquiring(Arc::new(AnyAcquire::new(
            now,
            self.config.clone(),
            self.mode,
            self.lock_id.clone(),
            owner,
            seed,
            options,
        )));
        self.pump(state, index);
    }

    /// Sends whatever the client's machine wants sent and acts on its outcome.
    fn pump(&self, state: &mut LockState, index: ClientIndex) {
        let micros = self.micros(state);
        let now = self.client_now(state, index);
        let takes_tokens = self.takes_tokens();
        let waiting = self.waiting_columns(state, index);
        let lingers = self.lingers();
        let LockState {
            store,
            clients,
            tick,
            highest_token,
            token_regressed,
            floor_hid_waiter,
            retake_passed_waiter,
            ..
        } = &mut *state;
        // A queue read that starts past an enqueued waiter's cell hides it.
        let mut submit = |store: &mut QuorumStore, outgoing: Outgoing| {
            if let StorageRequest::Read(read) = &outgoing.request
                && read.row.kind == RowKind::Queue
                && let Some(start) = &read.start
            {
                *floor_hid_waiter |= waiting.iter().any(|column| column < start);
            }
            store.submit(index, outgoing, micros);
        };
        let client = &mut clients[index];
        let mut gave_back = false;
        match &mut client.phase {
            Phase::Acquiring(machine) => {
                let machine = Arc::make_mut(machine);
                while let Some(outgoing) = machine.poll_request() {
                    submit(store, outgoing);
                }
                // The hints an acquisition sends (asking the owner first in the queue not to
                // linger) are lost here, as a datagram may be: one delivered only ends a
                // linger early, which `EndLinger` explores at every moment anyway.
                while machine.poll_wake_hint().is_some() {}
                let Some(outcome) = machine.poll_outcome() else {
                    return;
                };
                store.forget(index);
                client.enqueued = false;
                client.bypassed = 0;
                let holding = match &outcome {
                    AcquireOutcome::Acquired(holding) => Some(&**holding),
                    _ => None,
                };
                client
                    .seat
                    .acquisition_ended(&mut client.book, machine, holding);
                match outcome {
                    AcquireOutcome::Acquired(holding) => {
                        client.seat.without_poll_hint();
                        let main = holding.main.clone();
                        let token = holding.fencing_token;
                        let linger_stats = lingers.then_some(holding.stats);
                        let increases = match (token, *highest_token) {
                            (Some(token), highest) => highest.is_none_or(|highest| token > highest),
                            (None, _) => !takes_tokens,
                        };
                        *token_regressed |= !increases;
                        *highest_token = (*highest_token).max(token);
                        client.acquired += 1;
                        let mut lease = Lease::new(now, self.config.clone(), *holding);
                        drain(&mut lease, store, index, micros);
                        let lease = Arc::new(lease);
                        client.phase = Phase::Holding {
                            lease,
                            main,
                            fencing_token: token,
                            since: *tick,
                            linger_stats,
                        };
                        pass_waiters(clients, index);
                    }
                    AcquireOutcome::Busy => {
                        client.busy += 1;
                        client.phase = self.after_attempt(client);
                    }
                    AcquireOutcome::TimedOut
                    | AcquireOutcome::Abandoned
                    | AcquireOutcome::Failed(_) => {
                        client.failed += 1;
                        client.phase = self.after_attempt(client);
                    }
                }
            }
            Phase::Retaking {
                retake,
                main,
                fencing_token,
                waiters,
            } => {
                let machine = Arc::make_mut(retake);
                while let Some(outgoing) = machine.poll_request() {
                    submit(store, outgoing);
                }
                let Some(outcome) = machine.poll_outcome() else {
                    return;
                };
                // Both reads answered, or one read gave the lease back and the other's
                // answer no longer matters.
                store.forget(index);
                match outcome {
                    RetakeOutcome::Held(mut lease, stats) => {
                        let (main, token, waiters) = (main.clone(), *fencing_token, *waiters);
                        // Held again as it was: with the token it held with, which must
                        // still be the highest any holder was given (nobody held since).
                        *token_regressed |= match token {
                            Some(token) => *highest_token != Some(token),
                            None => takes_tokens,
                        };
                        *retake_passed_waiter |= (enqueued(clients) & waiters) != 0;
                        let client = &mut clients[index];
                        client.acquired += 1;
                        drain(&mut lease, store, index, micros);
                        client.phase = Phase::Holding {
                            lease: Arc::new(lease),
                            main,
                            fencing_token: token,
                            since: *tick,
                            linger_stats: Some(stats),
                        };
                        pass_waiters(clients, index);
                    }
                    RetakeOutcome::GiveBack(lease) => {
                        // Released at once, as the driver's locker does; the round the
                        // retake started is then acquired afresh.
                        client.rerun = true;
                        client.phase = releasing(client, lease, now, self.wake_hints);
                        gave_back = true;
                    }
                }
            }
            Phase::Releasing(machine) => {
                if drain(Arc::make_mut(machine), store, index, micros).is_some() {
                    store.forget(index);
                    // Once the deletes are over, whether they succeeded or not: a delete that
                    // failed may still land later, which the seat's timestamp floor makes
                    // harmless.
                    let lost_at = client.lost_at.take();
                    client.seat.release_ended(
                        &mut client.book,
                        now.instant,
                        machine.last_timestamp(),
                        lost_at,
                    );
                    client.phase = self.after_attempt(client);
                }
            }
            Phase::Holding { lease, .. } => {
                // A lost lease is the lease model's business: with a TTL of 10 s the lock
                // models' horizon never reaches a renewal, so the outcome is always `None`;
                // were it lost, the seat would be retired as the driver's guard retires it.
                if drain(Arc::make_mut(lease), store, index, micros).is_some() {
                    client.lost_at = Some(now.instant);
                }
            }
            Phase::Lingering { .. } | Phase::Idle | Phase::Done => {}
        }
        if gave_back {
            // The release the retake's lease went to sends its deletes.
            self.pump(state, index);
        }
    }

    /// Whether the configuration lingers after a release (a non-zero `LockConfig::linger`,
    /// such as [`MODEL_LINGER`]): then a holder's release may keep its cells
    /// ([`Phase::Lingering`]) and its next round may retake them ([`Phase::Retaking`]).
    pub fn lingers(&self) -> bool {
        !self.config.config().linger.is_zero()
    }

    /// The linger in ticks, rounded up: a lingering lease whose linger started at tick `t`
    /// must be released before time passes tick `t` plus this, under the urgent time rule.
    fn linger_ticks(&self) -> u32 {
        let micros = self.config.config().linger.as_micros();
        u32::try_from(micros.div_ceil(u128::from(MICROS_PER_TICK))).unwrap_or(u32::MAX)
    }

    /// Whether the model checks that queue floors hide no enqueued waiter
    /// ([`FLOORS_HIDE_NO_WAITER`]): the queue algorithm under the urgent time rule, where
    /// every request completes within the tick it was sent in, as assumption A6 (requests
    /// bounded by `request_timeout`, at least a tick here) asks of the reads a floor comes
    /// from. Under the free rule a read may take any number of ticks, which A6 forbids.
    pub fn checks_floors(&self) -> bool {
        self.has_seats() && matches!(self.time, TimeRule::Urgent { .. })
    }

    /// Whether acquisitions take seats and queue floors ([`SeatBook::takes_seats`]): only
    /// the queue algorithm (and the combined mode) has them.
    pub fn has_seats(&self) -> bool {
        SeatBook::takes_seats(self.algorithm)
    }

    /// The queue columns of the clients other than `index` that are enqueued (their queue
    /// write acknowledged) and still acquiring, if the model checks floors.
    fn waiting_columns(&self, state: &LockState, index: ClientIndex) -> Vec<ColumnName> {
        if !self.checks_floors() {
            return Vec::new();
        }
        state
            .clients
            .iter()
            .enumerate()
            .filter(|(other, client)| *other != index && client.enqueued)
            .filter_map(|(_, client)| match &client.phase {
                Phase::Acquiring(machine) => machine
                    .as_queue()
                    .map(|acquire| acquire.queue_column().encode()),
                _ => None,
            })
            .collect()
    }

    /// The holders whose main cell some quorum of live replicas would not return as theirs
    /// (a later version in its column, another owner's value, or none): empty in every
    /// state unless a seat rule is broken. See [`HOLDERS_CELLS_STAY`].
    pub fn holders_without_their_cell(&self, state: &LockState) -> Vec<ClientIndex> {
        let micros = self.micros(state);
        state
            .clients
            .iter()
            .enumerate()
            .filter(|(_, client)| match &client.phase {
                Phase::Holding { main, .. } => !state.store.reads_as_on_every_quorum(
                    &self.store,
                    micros,
                    &main.row,
                    &main.column,
                    &main.value,
                ),
                _ => false,
            })
            .map(|(index, _)| index)
            .collect()
    }

    fn after_attempt(&self, client: &Client) -> Phase {
        if client.started < self.rounds || client.rerun {
            Phase::Idle
        } else {
            Phase::Done
        }
    }

    fn respond(&self, state: &mut LockState, message: &Message) {
        let micros = self.micros(state);
        let Some(done) = state.store.deliver(&self.store, message, micros) else {
            return;
        };
        if done.client >= self.clients {
            self.time_service_responds(state, done.client, done.request_id, done.response);
            return;
        }
        let now = self.client_now(state, done.client);
        let client = &mut state.clients[done.client];
        let request_id = done.request_id;
        let response = Ok(done.response);
        match &mut client.phase {
            Phase::Acquiring(machine) => {
                if let StorageRequest::Write(write) = &done.request
                    && write.row.kind == RowKind::Queue
                {
                    client.enqueued = true;
                }
                let response = match (self.hint_fault, machine.as_queue(), response) {
                    (
                        Some(HintFault::Trusted),
                        Some(acquire),
                        Ok(StorageResponse::Cells(cells)),
                    ) if acquire.stats().hinted_reads > 0 => Ok(StorageResponse::Cells(
                        trusting_the_hint(acquire, &done.request, cells),
                    )),
                    (_, _, response) => response,
                };
                Arc::make_mut(machine).handle_response(now, request_id, response);
            }
            Phase::Releasing(machine) => {
                Arc::make_mut(machine).handle_response(now, request_id, response);
            }
            Phase::Holding { lease, .. } => {
                Arc::make_mut(lease).handle_response(now, request_id, response);
            }
            Phase::Retaking { retake, .. } => {
                let response = match (self.retake_fault, &done.request) {
                    (Some(RetakeFault::IgnoreQueue), StorageRequest::Read(read))
                        if read.row.kind == RowKind::Queue =>
                    {
                        Ok(StorageResponse::Cells(Vec::new()))
                    }
                    _ => response,
                };
                Arc::make_mut(retake).handle_response(now, request_id, response);
            }
            Phase::Lingering { .. } | Phase::Idle | Phase::Done => return,
        }
        self.pump(state, done.client);
    }

    /// The time-service replica's local reading now.
    fn updater_now(&self, state: &LockState) -> Now {
        let ahead = self.time_service.map_or(0, |service| service.ahead_ticks);
        now_at(
            state.tick,
            MICROS_PER_TICK,
            tick_micros(ahead, MICROS_PER_TICK),
        )
    }

    /// The time-service replica starts its `TryUpdateGlobalTime`.
    fn start_update(&self, state: &mut LockState) {
        let micros = self.micros(state);
        let mut machine = UpdateGlobalTime::new(self.updater_now(state), Self::time_domain());
        drain(&mut machine, &mut state.store, self.updater_index(), micros);
        state.updater = Some(Arc::new(machine));
        state.updater_started = true;
    }

    /// Client `index` starts refreshing its clock: a read of `GlobalTime`.
    fn start_refresh(&self, state: &mut LockState, index: ClientIndex) {
        let micros = self.micros(state);
        let written = state.global_written;
        let Some(clock) = state.clients[index].clock.as_mut() else {
            return;
        };
        clock.refreshing = Some(written);
        let outgoing = Outgoing {
            id: RequestId::from_raw(u64::from(clock.refreshed)),
            request: StorageRequest::Read(UpdateGlobalTime::read_request(Self::time_domain())),
        };
        state
            .store
            .submit(self.refresh_index(index), outgoing, micros);
    }

    /// A response to the time-service replica or to a client's refresh.
    fn time_service_responds(
        &self,
        state: &mut LockState,
        store_client: ClientIndex,
        request_id: RequestId,
        response: StorageResponse,
    ) {
        let micros = self.micros(state);
        if store_client == self.updater_index() {
            let now = self.updater_now(state);
            let Some(machine) = state.updater.as_mut() else {
                return;
            };
            let machine = Arc::make_mut(machine);
            machine.handle_response(now, request_id, Ok(response));
            if let Some(outcome) = drain(machine, &mut state.store, store_client, micros) {
                if let GlobalTimeOutcome::Advanced(value) = outcome {
                    state.global_written = state.global_written.max(value);
                }
                state.store.forget(store_client);
                state.updater = None;
            }
            return;
        }
        let index = store_client - self.refresh_index(0);
        let as_of = self.now(state).instant;
        let Some(clock) = state.clients[index].clock.as_mut() else {
            return;
        };
        let value = match &response {
            StorageResponse::Cells(cells) => UpdateGlobalTime::global_time(cells),
            StorageResponse::Done => Timestamp::ZERO,
        };
        // As the driver's refresh: the value is anchored at the read's completion.
        clock.follower.observe(value, as_of);
        clock.latest = value;
        clock.floor = clock
            .floor
            .max(clock.refreshing.take().unwrap_or(Timestamp::ZERO));
        clock.refreshed += 1;
    }

    fn urgent(&self, state: &LockState) -> bool {
        !state.store.is_quiet()
            || state.clients.iter().any(|client| {
                self.timeout_due(state, client)
                    || matches!(client.phase, Phase::Idle)
                    || match (&client.phase, self.time) {
                        (Phase::Holding { since, .. }, TimeRule::Urgent { hold_ticks }) => {
                            self.holders_release && since.saturating_add(hold_ticks) <= state.tick
                        }
                        // A client with a round left wants the lock again at once, as an idle
                        // one does; the linger ends when it has run out.
                        (Phase::Lingering { since, .. }, _) => {
                            client.started < self.rounds
                                || since.saturating_add(self.linger_ticks()) <= state.tick
                        }
                        _ => false,
                    }
            })
    }

    /// Whether acquisitions take fencing tokens: the queue algorithm (and the combined mode)
    /// with `fencing` on.
    pub fn takes_tokens(&self) -> bool {
        self.algorithm != Algorithm::Baseline && self.config.config().fencing
    }

    /// The lock cells (main, queue and shadow rows) a quorum read could still find live once
    /// every client is done and no message is in flight; empty in every other state. See
    /// [`CLEAN_AFTER_RELEASE`].
    pub fn left_behind(&self, state: &LockState) -> Vec<(RowKey, ColumnName)> {
        let finished = state
            .clients
            .iter()
            .all(|client| matches!(client.phase, Phase::Done));
        if !finished || !state.store.is_quiet() {
            return Vec::new();
        }
        state
            .store
            .readable_live_cells(&self.store, self.micros(state))
            .into_iter()
            .filter(|(row, _)| matches!(row.kind, RowKind::Main | RowKind::Queue | RowKind::Shadow))
            .collect()
    }

    /// The number of clients holding the lock.
    pub fn holders(state: &LockState) -> usize {
        state
            .clients
            .iter()
            .filter(|client| matches!(client.phase, Phase::Holding { .. }))
            .count()
    }
}

/// What a read of a hinted acquisition that trusts the hint ([`HintFault::Trusted`]) is
/// answered with: a queue read without the cells ahead of its own, a main read with its own
/// seat's cell alone.
fn trusting_the_hint(acquire: &Acquire, request: &StorageRequest, cells: Vec<Cell>) -> Vec<Cell> {
    let StorageRequest::Read(read) = request else {
        return cells;
    };
    match read.row.kind {
        RowKind::Queue => {
            let own = acquire.queue_column().encode();
            cells
                .into_iter()
                .filter(|cell| cell.column >= own)
                .collect()
        }
        RowKind::Main => cells
            .into_iter()
            .filter(|cell| cell.column == *acquire.seat())
            .collect(),
        _ => cells,
    }
}

/// The clients enqueued, one bit each (a retaking or holding client is never enqueued).
fn enqueued(clients: &[Client]) -> u64 {
    clients
        .iter()
        .enumerate()
        .filter(|(_, client)| client.enqueued)
        .fold(0, |bits, (index, _)| bits | 1 << index)
}

/// Counts one more pass for every client other than `index` that waits enqueued: `index`
/// has just taken the lock, by an acquisition or a retake.
fn pass_waiters(clients: &mut [Client], index: ClientIndex) {
    for (other, waiting) in clients.iter_mut().enumerate() {
        if other != index && waiting.enqueued {
            waiting.bypassed = waiting.bypassed.saturating_add(1);
        }
    }
}

/// The release of `lease` at `now`, as the driver's guard starts it (through
/// [`Lease::release`], or with `wake_hints` [`Lease::release_finding_successors`] unless
/// the lease was lost); a lease found lapsed by then retires the seat once it is over.
fn releasing(client: &mut Client, mut lease: Lease, now: Now, wake_hints: bool) -> Phase {
    let lost = lease.check_lapsed(now.instant).is_some();
    if lost {
        client.lost_at = Some(now.instant);
    }
    let release = if wake_hints && !lost {
        lease.release_finding_successors(now)
    } else {
        lease.release(now)
    };
    Phase::Releasing(Arc::new(release))
}

/// The reads an acquisition sent early because of a wake-up hint (lock-core's
/// [`AcquireStats::hinted_reads`]); zero for a client that is not acquiring by the queue
/// algorithm.
pub fn hinted_reads(client: &Client) -> u32 {
    match &client.phase {
        Phase::Acquiring(machine) => machine
            .as_queue()
            .map_or(0, |acquire| acquire.stats().hinted_reads),
        _ => 0,
    }
}

/// The property that the rejoin of a short queue margin is exercised: some acquisition,
/// hidden from an owner that then wrote a head into the main row, has joined the queue
/// again behind it. Checked when the configuration's
/// [`lock_core::PollConfig::queue_margin`] is shorter than the default.
pub const HIDDEN_WAITER_REJOINS: &str = "a hidden waiter joins the queue again";

/// A reachable state: an acquisition's queue reads start less than the safe margin
/// (`2 × max_clock_skew + request_timeout`) before the latest head it saw, because the
/// margin adapted to the time between acquisitions it measured
/// ([`lock_core::PollConfig::margin_acquisitions`]). Checked when the configuration adapts
/// the margin and its least margin is below the safe one.
pub const MARGIN_SHORTENED: &str = "an acquisition's reads take a margin shorter than the safe one";

/// The property that wake-up hints are exercised: some acquisition sends a read early
/// because a hint reached it. Checked with [`LockModel::wake_hints`].
pub const HINTED_READ_SENT: &str = "a wake-up hint brings a read forward";

/// The property that releases leave nothing behind: once every client is done (all its rounds
/// finished, its last release or clean-up acknowledged) and no message is in flight, no
/// quorum of live replicas returns a live cell of the main, queue or shadow row. A cell may
/// still be live on a replica outside the quorum that acknowledged its delete (the copies
/// outside a quorum are lost unless `late_writes`, and a crashed replica never answers
/// again); what the property rules out is a cell that a later quorum read would see. The
/// fence row is not a lock cell (its token must survive). Vacuous when holders keep the lock.
pub const CLEAN_AFTER_RELEASE: &str = "no lock cell is left on a quorum once every client is done";

/// The property that seats keep a holder's cell: while a client holds the lock, every
/// quorum of live replicas returns its main cell, in its seat, with the value it wrote (its
/// queue column, which ends with its owner id). Theorem 1 rests on it ("a holder's main
/// cell stays live until its deadline", docs/algorithm.md, section "Theorem 1: mutual exclusion of the mandatory lock"); with seats, three
/// things could break it, one rule of section "Seats" each: another locker writing the same
/// seat (seat prefixes unique, A7), an earlier acquisition's late delete in the same seat
/// (the seat's timestamp floor), and two running acquisitions of one locker sharing a seat
/// (the lowest seat no running acquisition or held lock uses).
pub const HOLDERS_CELLS_STAY: &str = "every holder's main cell reads as its own on every quorum";

/// The property that queue floors hide no waiter: no queue read starts (at the floor less
/// its margin, or at the reader's own cell if that is earlier) past the cell of a waiter
/// whose queue write was acknowledged before the read was sent. docs/algorithm.md, section
/// "Queue floors and tombstones": a live cell can sort before a head already seen by at most the skew between two
/// clocks plus the time its write took to become visible, and the margin covers both.
/// Checked under the urgent time rule only ([`LockModel::checks_floors`]).
pub const FLOORS_HIDE_NO_WAITER: &str = "no queue read starts past an enqueued waiter's cell";

/// The property that a retake passes no waiter it could have seen: when a lingering lease is
/// held again ([`RetakeOutcome::Held`]), no other client whose queue write was acknowledged
/// before the retake sent its reads is still waiting (docs/algorithm.md, section "Lingering
/// after a release": "nobody enqueued before the read was sent"). Such a waiter's cell is on
/// every quorum the retake's queue read meets, within the margin before the holder's own
/// column. Checked when the configuration lingers ([`LockModel::lingers`]). A waiter that
/// enqueues while the reads are out may be passed, and then counts for bypass as one passed
/// by any acquisition already under way when it enqueued.
pub const RETAKE_PASSES_NO_WAITER: &str =
    "a retake passes no waiter enqueued before its reads were sent";

/// With clocks that follow `GlobalTime` ([`LockModel::time_service`]): every queue timestamp
/// a client takes is at least every `GlobalTime` update acknowledged before its latest
/// completed refresh started. What docs/algorithm.md, section "The time service", guarantees (reading 2 of
/// Theorem 5, carried through the follower): queue timestamps follow the order of
/// acknowledged updates across clients. Not claimed: real-time order across clients.
pub const QUEUE_TIMES_FOLLOW_UPDATES: &str = "a queue timestamp is at least every GlobalTime update acknowledged before its client's last refresh";

/// The lock configuration of the lock models: jitter off and every poll interval one tick,
/// so that pauses are deterministic and short; a TTL (10 s) far beyond the horizon; the
/// baseline's random backoff scaled to 0-2 ticks; fencing tokens as asked (lock-core ships
/// with `fencing: true`, which adds a fence read and a fence write to every acquisition by
/// the queue algorithm; the baseline takes no tokens either way). The fast path
/// (docs/algorithm.md, section "The two-round-trip fast path"), on in lock-core's default configuration, is off here so
/// that each check sees the path it names; `tests/fast_path.rs` checks every theorem again
/// with it on, as lock-core's locker uses it and on every acquisition.
pub fn model_config(algorithm: Algorithm, fencing: bool) -> ValidConfig {
    lock_config(algorithm, fencing)
        .validate()
        .expect("the model configuration is valid")
}

/// [`model_config`] before validation, for a test that changes one setting (such as
/// `poll.queue_read_limit`, 8 here: above every model's number of clients) and validates
/// the result itself.
pub fn lock_config(algorithm: Algorithm, fencing: bool) -> LockConfig {
    let tick = Duration::from_micros(MICROS_PER_TICK);
    LockConfig {
        algorithm,
        poll: PollConfig {
            min_interval: tick,
            max_interval: tick,
            queue_read_limit: 8,
            jitter_percent: 0,
            ..PollConfig::default()
        },
        retry_backoff: tick,
        // Failures are retried `storage_retries` times: a retry window would add only more
        // of the same retries, each a state of its own.
        storage_retry_window: Duration::ZERO,
        baseline: BaselineConfig {
            owner_backoff_max: tick * 2,
            concurrent_backoff_step: tick,
        },
        fencing,
        fast_path: false,
        // On by default; `tests/wait_in_main.rs` checks the theorems with it on.
        wait_in_main_row: false,
        ..LockConfig::default()
    }
}

/// Where a client is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Between acquisitions, about to start the next.
    Idle,
    /// Running an acquisition machine.
    Acquiring(Arc<AnyAcquire>),
    /// In the critical section since tick `since`, holding the lease the driver builds
    /// from the acquisition's [`Holding`](lock_core::machine::Holding); releasing goes through [`Lease::release`], as the
    /// driver's does.
    Holding {
        /// The lease on the cells the acquisition wrote.
        lease: Arc<Lease>,
        /// The acquisition's main cell: what a quorum read must keep returning while it
        /// holds ([`HOLDERS_CELLS_STAY`]).
        main: HeldCell,
        /// The fencing token the acquisition returned.
        fencing_token: Option<FencingToken>,
        /// The tick it was acquired at.
        since: u32,
        /// The counters [`Retake::lingers`] decides by at the release (the acquisition's
        /// or the retake's [`AcquireStats`], as the driver's guard keeps them); `None`
        /// unless the configuration lingers, so that a model without lingering has the
        /// states it had before the rule.
        linger_stats: Option<AcquireStats>,
    },
    /// Released by its user with nobody seen queued behind ([`Retake::lingers`]): the
    /// lease's cells stay in storage, undriven, until the linger ends
    /// ([`LockAction::EndLinger`]) or the client takes the lock again
    /// ([`LockAction::Retake`]).
    Lingering {
        /// The lease, as the release found it.
        lease: Arc<Lease>,
        /// Its main cell, for [`HOLDERS_CELLS_STAY`] once retaken.
        main: HeldCell,
        /// The fencing token a retake holds with again.
        fencing_token: Option<FencingToken>,
        /// The tick the linger started at.
        since: u32,
    },
    /// Running a retake of the lingering lease: its queue read and main read are out.
    Retaking {
        /// lock-core's retake machine, which owns the lease meanwhile.
        retake: Arc<Retake>,
        /// The lease's main cell.
        main: HeldCell,
        /// The lease's fencing token.
        fencing_token: Option<FencingToken>,
        /// The other clients enqueued when the retake sent its reads, one bit each
        /// ([`RETAKE_PASSES_NO_WAITER`]).
        waiters: u64,
    },
    /// Running a release machine.
    Releasing(Arc<Release>),
    /// No rounds left.
    Done,
}

/// One client and the ghost variables the properties read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is.
    pub phase: Phase,
    /// Acquisitions started.
    pub started: u8,
    /// Acquisitions that ended holding the lock.
    pub acquired: u8,
    /// Soft acquisitions that ended busy.
    pub busy: u8,
    /// Acquisitions that ended timed out, abandoned or failed.
    pub failed: u8,
    /// Whether the current acquisition counts as waiting for the bypass properties: the
    /// queue algorithm from the acknowledgement of its queue write, the baseline from its
    /// start.
    pub enqueued: bool,
    /// How many acquisitions by other clients completed while this one was enqueued.
    pub bypassed: u8,
    /// The client's seats and queue floors, as a driver's locker keeps them: every
    /// acquisition takes its seat here and gives it back when its cells are gone.
    pub book: SeatBook,
    /// The seat of the running acquisition, lease or release (queue algorithm only), and
    /// once the lock is held, what it hands back when the cells are gone (lock-core's own
    /// [`SeatUse`], without the poll hint, which only times reads): the next acquisition's
    /// queue floor and whether it tries the fast path.
    pub seat: SeatUse,
    /// When the holder's lease was found lost, if it was: its seat is then retired.
    pub lost_at: Option<MonotonicTime>,
    /// A retake gave its lease back: the round it started (and counted in `started`) is
    /// still to be acquired, afresh, once the release is over.
    pub rerun: bool,
    /// The client's clock, if it follows `GlobalTime` ([`LockModel::time_service`]).
    pub clock: Option<FollowedClock>,
}

impl Client {
    fn new(book: SeatBook) -> Self {
        Client {
            phase: Phase::Idle,
            started: 0,
            acquired: 0,
            busy: 0,
            failed: 0,
            enqueued: false,
            bypassed: 0,
            book,
            seat: SeatUse::default(),
            lost_at: None,
            rerun: false,
            clock: None,
        }
    }

    fn machine_timeout(&self) -> Option<MonotonicTime> {
        match &self.phase {
            Phase::Acquiring(machine) => machine.poll_timeout(),
            Phase::Releasing(machine) => machine.poll_timeout(),
            Phase::Holding { lease, .. } => lease.poll_timeout(),
            Phase::Retaking { retake, .. } => retake.poll_timeout(),
            Phase::Lingering { .. } | Phase::Idle | Phase::Done => None,
        }
    }
}

/// A state of the lock model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockState {
    /// The current tick.
    pub tick: u32,
    /// Clock readings taken in this tick (only counted with strict timestamps).
    pub readings: u32,
    /// The largest fencing token any holder so far was given.
    pub highest_token: Option<FencingToken>,
    /// A holder was given a token not above every earlier holder's (or none, although
    /// acquisitions take tokens).
    pub token_regressed: bool,
    /// A queue read started past the cell of a waiter whose queue write had been
    /// acknowledged ([`FLOORS_HIDE_NO_WAITER`]).
    pub floor_hid_waiter: bool,
    /// A retake held while a client enqueued before its reads were sent still waited
    /// ([`RETAKE_PASSES_NO_WAITER`]).
    pub retake_passed_waiter: bool,
    /// Requests of releasing clients that timed out so far ([`LockModel::release_timeouts`]).
    pub timeouts: u8,
    /// The time-service replica's `TryUpdateGlobalTime`, while it runs.
    pub updater: Option<Arc<UpdateGlobalTime>>,
    /// Whether it has started.
    pub updater_started: bool,
    /// The largest `GlobalTime` update acknowledged so far.
    pub global_written: Timestamp,
    /// A client took a queue timestamp below an update acknowledged before its last
    /// completed refresh started ([`QUEUE_TIMES_FOLLOW_UPDATES`]).
    pub queue_time_behind_update: bool,
    /// Replicas, messages and coordinators.
    pub store: QuorumStore,
    /// The clients.
    pub clients: Vec<Client>,
}

/// Replica symmetry: the state with its replicas in canonical order
/// ([`QuorumStore::with_canonical_replicas`]). Sound for every lock model, whose replicas all
/// run on true time.
impl Representative for LockState {
    fn representative(&self) -> Self {
        LockState {
            tick: self.tick,
            readings: self.readings,
            highest_token: self.highest_token,
            token_regressed: self.token_regressed,
            floor_hid_waiter: self.floor_hid_waiter,
            retake_passed_waiter: self.retake_passed_waiter,
            timeouts: self.timeouts,
            updater: self.updater.clone(),
            updater_started: self.updater_started,
            global_written: self.global_written,
            queue_time_behind_update: self.queue_time_behind_update,
            store: self.store.with_canonical_replicas(),
            clients: self.clients.clone(),
        }
    }
}

/// A step of the lock model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockAction {
    /// Deliver a message.
    Deliver(Message),
    /// Wake a client's machine.
    Timeout(ClientIndex),
    /// An idle client starts an acquisition.
    Start(ClientIndex),
    /// A holder leaves the critical section and releases (its lease lingers if
    /// [`Retake::lingers`] says so).
    Release(ClientIndex),
    /// A client whose released lease lingers wants the lock again (its next round) and
    /// starts a [`Retake`].
    Retake(ClientIndex),
    /// A lingering lease's linger ends: it is released.
    EndLinger(ClientIndex),
    /// A replica crashes.
    Crash(ReplicaIndex),
    /// A releasing client's storage request (the coordinator's operation number) times out:
    /// its machine is told *outcome unknown*, and the messages already sent stay in flight.
    TimeOut(ClientIndex, u32),
    /// The time-service replica runs `TryUpdateGlobalTime`.
    UpdateGlobalTime,
    /// A client refreshes its clock (reads `GlobalTime`).
    Refresh(ClientIndex),
    /// A wake-up hint reaches an acquiring client ([`LockModel::wake_hints`]): lock-core's
    /// `Machine::handle_wake_hint`. Whoever sent it, whenever: only a hint that changes the
    /// machine (brings a read forward) is a step; the others are ignored by the machine.
    WakeHint(ClientIndex),
    /// Time advances by one tick.
    Tick,
}

impl fmt::Display for LockAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockAction::Deliver(message) => write!(f, "deliver {message}"),
            LockAction::Timeout(client) => write!(f, "c{client} wakes up"),
            LockAction::Start(client) => write!(f, "c{client} starts acquiring"),
            LockAction::Release(client) => write!(f, "c{client} releases"),
            LockAction::Retake(client) => write!(f, "c{client} retakes its lingering lock"),
            LockAction::EndLinger(client) => write!(f, "c{client}'s linger ends"),
            LockAction::Crash(replica) => write!(f, "r{replica} crashes"),
            LockAction::TimeOut(client, op) => {
                write!(f, "c{client}'s request {op} TIMES OUT (it may still land)")
            }
            LockAction::UpdateGlobalTime => write!(f, "the time service updates GlobalTime"),
            LockAction::Refresh(client) => write!(f, "c{client} refreshes its clock"),
            LockAction::WakeHint(client) => write!(f, "a wake-up hint reaches c{client}"),
            LockAction::Tick => write!(f, "tick"),
        }
    }
}

impl Model for LockModel {
    type State = LockState;
    type Action = LockAction;

    fn init_states(&self) -> Vec<LockState> {
        assert!(
            !self.client_symmetry || (self.algorithm == Algorithm::Queue && self.strict_timestamps),
            "client symmetry is sound only for the queue algorithm with strict timestamps"
        );
        assert!(
            !self.client_symmetry || self.time_service.is_none(),
            "client symmetry is not sound with followed clocks (a client may refresh before it starts)"
        );
        let clock = self.time_service.map(|_| FollowedClock {
            follower: GlobalTimeFollower::new(now_at(0, MICROS_PER_TICK, 0)),
            latest: Timestamp::ZERO,
            refreshed: 0,
            refreshing: None,
            floor: Timestamp::ZERO,
        });
        vec![LockState {
            tick: 0,
            readings: 0,
            highest_token: None,
            token_regressed: false,
            floor_hid_waiter: false,
            retake_passed_waiter: false,
            timeouts: 0,
            updater: None,
            updater_started: false,
            global_written: Timestamp::ZERO,
            queue_time_behind_update: false,
            store: QuorumStore::new(&self.store),
            clients: (0..self.clients)
                .map(|index| Client {
                    clock: clock.clone(),
                    ..Client::new(SeatBook::new(self.seat_prefix(index), &self.config))
                })
                .collect(),
        }]
    }

    fn actions(&self, state: &LockState, actions: &mut Vec<LockAction>) {
        actions.extend(
            state
                .store
                .in_flight
                .iter()
                .cloned()
                .map(LockAction::Deliver),
        );
        let mut unstarted_may_start = true;
        for (index, client) in state.clients.iter().enumerate() {
            if self.timeout_due(state, client) {
                actions.push(LockAction::Timeout(index));
            }
            match client.phase {
                Phase::Idle if client.started == 0 && self.client_symmetry => {
                    if unstarted_may_start {
                        actions.push(LockAction::Start(index));
                    }
                    unstarted_may_start = false;
                }
                Phase::Idle => actions.push(LockAction::Start(index)),
                Phase::Acquiring(_) if self.wake_hints => {
                    actions.push(LockAction::WakeHint(index));
                }
                Phase::Holding { .. } if self.holders_release => {
                    actions.push(LockAction::Release(index));
                }
                // The linger's timer may fire at any moment (before its time too, which
                // covers every order of it and the other steps); a retake is the next round.
                Phase::Lingering { .. } => {
                    actions.push(LockAction::EndLinger(index));
                    if client.started < self.rounds {
                        actions.push(LockAction::Retake(index));
                    }
                }
                _ => {}
            }
        }
        if state.store.crashed() < self.crashes {
            for (index, replica) in state.store.replicas.iter().enumerate() {
                if !replica.crashed {
                    actions.push(LockAction::Crash(index));
                }
            }
        }
        if let Some(service) = self.time_service {
            if !state.updater_started {
                actions.push(LockAction::UpdateGlobalTime);
            }
            for (index, client) in state.clients.iter().enumerate() {
                if let Some(clock) = &client.clock
                    && clock.refreshing.is_none()
                    && clock.refreshed < service.refreshes
                {
                    actions.push(LockAction::Refresh(index));
                }
            }
        }
        if state.timeouts < self.release_timeouts {
            for (index, client) in state.clients.iter().enumerate() {
                if matches!(client.phase, Phase::Releasing(_)) {
                    actions.extend(
                        state
                            .store
                            .pending(index)
                            .into_iter()
                            .map(|op| LockAction::TimeOut(index, op)),
                    );
                }
            }
        }
        let time_may_pass = match self.time {
            TimeRule::Free => true,
            TimeRule::Urgent { .. } => !self.urgent(state),
        };
        if state.tick < self.max_tick && time_may_pass {
            actions.push(LockAction::Tick);
        }
    }

    fn next_state(&self, last: &LockState, action: LockAction) -> Option<LockState> {
        let mut state = last.clone();
        match action {
            LockAction::Deliver(message) => self.respond(&mut state, &message),
            LockAction::Timeout(index) => {
                let now = self.client_now(&mut state, index);
                match &mut state.clients[index].phase {
                    Phase::Acquiring(machine) => Arc::make_mut(machine).handle_timeout(now),
                    Phase::Releasing(machine) => Arc::make_mut(machine).handle_timeout(now),
                    Phase::Holding { lease, .. } => Arc::make_mut(lease).handle_timeout(now),
                    Phase::Retaking { retake, .. } => Arc::make_mut(retake).handle_timeout(now),
                    Phase::Lingering { .. } | Phase::Idle | Phase::Done => return None,
                }
                self.pump(&mut state, index);
            }
            LockAction::Start(index) => self.start(&mut state, index),
            LockAction::Release(index) => {
                let now = self.client_now(&mut state, index);
                let tick = state.tick;
                let client = &mut state.clients[index];
                let Phase::Holding {
                    lease,
                    main,
                    fencing_token,
                    linger_stats,
                    ..
                } = std::mem::replace(&mut client.phase, Phase::Done)
                else {
                    return None;
                };
                // As the driver's guard does: the lease stops renewing, and unless it lapsed
                // it lingers if `Retake::lingers` says so; otherwise its release deletes the
                // cells it holds (a lease found lapsed by then retires the seat). A release
                // told by a waiter's hint not to linger is the same as a linger that ends at
                // once, which `EndLinger` explores, so no hint is modelled here.
                let mut lease = Arc::unwrap_or_clone(lease);
                let lapsed = lease.check_lapsed(now.instant).is_some();
                let lingers = linger_stats.is_some_and(|stats| {
                    Retake::lingers(&self.config, &lease, &stats, now.instant, false)
                });
                state.store.forget(index);
                if lingers && !lapsed {
                    client.phase = Phase::Lingering {
                        lease: Arc::new(lease),
                        main,
                        fencing_token,
                        since: tick,
                    };
                    return Some(state);
                }
                client.phase = releasing(client, lease, now, self.wake_hints);
                self.pump(&mut state, index);
            }
            LockAction::Retake(index) => {
                let now = self.client_now(&mut state, index);
                let client = &mut state.clients[index];
                if client.started >= self.rounds {
                    return None;
                }
                let Phase::Lingering {
                    lease,
                    main,
                    fencing_token,
                    ..
                } = std::mem::replace(&mut client.phase, Phase::Done)
                else {
                    return None;
                };
                // The client's next round: a retake is an acquisition that starts here.
                client.started += 1;
                let retake = Retake::new(now, self.config.clone(), Arc::unwrap_or_clone(lease));
                let phase = Phase::Retaking {
                    retake: Arc::new(retake),
                    main,
                    fencing_token,
                    waiters: enqueued(&state.clients),
                };
                state.clients[index].phase = phase;
                self.pump(&mut state, index);
            }
            LockAction::EndLinger(index) => {
                let now = self.client_now(&mut state, index);
                let client = &mut state.clients[index];
                let Phase::Lingering { lease, .. } =
                    std::mem::replace(&mut client.phase, Phase::Done)
                else {
                    return None;
                };
                client.phase = releasing(client, Arc::unwrap_or_clone(lease), now, self.wake_hints);
                self.pump(&mut state, index);
            }
            LockAction::WakeHint(index) => {
                let now = self.client_now(&mut state, index);
                let client = &mut state.clients[index];
                let before = hinted_reads(client);
                let Phase::Acquiring(machine) = &mut client.phase else {
                    return None;
                };
                // The machine ignores a hint unless it is in a poll pause, not too soon
                // after its last hinted read; an ignored hint is no step. A hint that comes
                // while a request is in flight only makes the machine skip its next poll
                // pause, which is what a hint reaching it as that pause begins does, so that
                // case is left to the latter and the state space stays small.
                Arc::make_mut(machine).handle_wake_hint(now);
                if hinted_reads(client) == before {
                    return None;
                }
                self.pump(&mut state, index);
            }
            LockAction::Crash(replica) => state.store.crash(replica),
            LockAction::TimeOut(index, op) => {
                let now = self.client_now(&mut state, index);
                let Phase::Releasing(machine) = &mut state.clients[index].phase else {
                    return None;
                };
                let request_id = state.store.time_out(index, op)?;
                state.timeouts += 1;
                let error = Error::outcome_unknown("delete", "the request timed out");
                Arc::make_mut(machine).handle_response(now, request_id, Err(error));
                self.pump(&mut state, index);
            }
            LockAction::UpdateGlobalTime => self.start_update(&mut state),
            LockAction::Refresh(index) => self.start_refresh(&mut state, index),
            LockAction::Tick => {
                state.tick += 1;
                state.readings = 0;
            }
        }
        Some(state)
    }

    fn format_action(&self, action: &LockAction) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![Property::always(
            "mutual exclusion",
            |_: &LockModel, state: &LockState| LockModel::holders(state) <= 1,
        )];
        properties.push(Property::always(
            CLEAN_AFTER_RELEASE,
            |model: &LockModel, state: &LockState| model.left_behind(state).is_empty(),
        ));
        properties.push(Property::always(
            HOLDERS_CELLS_STAY,
            |model: &LockModel, state: &LockState| {
                model.holders_without_their_cell(state).is_empty()
            },
        ));
        if self.time_service.is_some() {
            properties.push(Property::always(
                QUEUE_TIMES_FOLLOW_UPDATES,
                |_: &LockModel, state: &LockState| !state.queue_time_behind_update,
            ));
        }
        if self.checks_floors() {
            properties.push(Property::always(
                FLOORS_HIDE_NO_WAITER,
                |_: &LockModel, state: &LockState| !state.floor_hid_waiter,
            ));
        }
        if self.lingers() {
            properties.push(Property::always(
                RETAKE_PASSES_NO_WAITER,
                |_: &LockModel, state: &LockState| !state.retake_passed_waiter,
            ));
        }
        if self.takes_tokens() {
            properties.push(Property::always(
                "fencing tokens increase from holder to holder",
                |_: &LockModel, state: &LockState| !state.token_regressed,
            ));
        }
        if self.wake_hints {
            properties.push(Property::sometimes(
                HINTED_READ_SENT,
                |_: &LockModel, state: &LockState| {
                    state.clients.iter().any(|client| hinted_reads(client) > 0)
                },
            ));
        }
        if self.config.config().rejoins_when_passed() {
            properties.push(Property::sometimes(
                HIDDEN_WAITER_REJOINS,
                |_: &LockModel, state: &LockState| {
                    state.clients.iter().any(|client| match &client.phase {
                        Phase::Acquiring(machine) => machine
                            .as_queue()
                            .is_some_and(|acquire| acquire.stats().rejoins > 0),
                        _ => false,
                    })
                },
            ));
        }
        if self.config.config().adapts_queue_margin() && self.config.config().rejoins_when_passed()
        {
            properties.push(Property::sometimes(
                MARGIN_SHORTENED,
                |model: &LockModel, state: &LockState| {
                    let safe = model.config.config().safe_queue_margin();
                    state.clients.iter().any(|client| match &client.phase {
                        Phase::Acquiring(machine) => machine
                            .as_queue()
                            .is_some_and(|acquire| acquire.queue_margin() < safe),
                        _ => false,
                    })
                },
            ));
        }
        let liveness = matches!(self.time, TimeRule::Urgent { .. });
        match (self.algorithm, self.mode) {
            (Algorithm::Queue, Mode::Mandatory) => {
                properties.push(Property::always(
                    "no acquisition fails",
                    |_: &LockModel, state: &LockState| {
                        state.clients.iter().all(|client| client.failed == 0)
                    },
                ));
                properties.push(Property::always(
                    "bypass bounded",
                    |model: &LockModel, state: &LockState| {
                        state
                            .clients
                            .iter()
                            .all(|client| client.bypassed <= model.bypass_bound)
                    },
                ));
                properties.push(Property::sometimes(
                    "bypass bound reached",
                    |model: &LockModel, state: &LockState| {
                        state
                            .clients
                            .iter()
                            .any(|client| client.bypassed == model.bypass_bound)
                    },
                ));
                if liveness {
                    properties.push(Property::eventually(
                        "every client acquires every round",
                        |model: &LockModel, state: &LockState| {
                            state
                                .clients
                                .iter()
                                .all(|client| client.acquired == model.rounds)
                        },
                    ));
                }
            }
            (Algorithm::Queue, Mode::Soft) if liveness => {
                properties.push(Property::eventually(
                    "some soft client acquires",
                    |_: &LockModel, state: &LockState| {
                        state.clients.iter().any(|client| client.acquired > 0)
                    },
                ));
            }
            (Algorithm::Baseline, _) => {
                properties.push(Property::sometimes(
                    "starvation: bypassed beyond the bound",
                    |model: &LockModel, state: &LockState| {
                        state
                            .clients
                            .iter()
                            .any(|client| client.bypassed > model.bypass_bound)
                    },
                ));
            }
            // The combined migration mode (and any algorithm lock-core adds later) is not
            // modelled beyond the properties above.
            _ => {}
        }
        properties
    }
}

/// Every step of the lock model raises this rank, so the model is acyclic (see
/// [`crate::liveness`]): the tick, then acquisitions started, replicas crashed and storage
/// operations started, then lingering clients, then fewer messages in flight. A tick raises
/// the first; a start, a crash, a release (its deletes) and a timeout (a due machine always
/// sends its next request) raise the second to fourth; a delivery removes its message and
/// either raises the operation count (the machine sent its next request) or changes nothing
/// else in the rank. With lingering: a release that lingers sends nothing but adds a
/// lingering client; a retake counts as a start; the end of a linger sends its deletes; and
/// the fresh start of a round whose retake gave the lock back, which counts no new round,
/// sends its first requests. A wake-up hint is a step only when it brings a read forward,
/// which raises the operation count. Read repair would break the delivery case (it sends messages
/// under the read's operation); the lock models never turn it on.
impl Ranked for LockModel {
    type Rank = (u32, u32, usize, u64, usize, Reverse<usize>);

    fn rank(&self, state: &LockState) -> Self::Rank {
        let started = state
            .clients
            .iter()
            .map(|client| u32::from(client.started))
            .sum();
        (
            state.tick,
            started,
            state.store.crashed() + usize::from(state.timeouts),
            state.store.operations_started(),
            state
                .clients
                .iter()
                .filter(|client| matches!(client.phase, Phase::Lingering { .. }))
                .count(),
            Reverse(state.store.in_flight.len()),
        )
    }
}

impl Describe for LockModel {
    fn describe(&self, last: &LockState, action: &LockAction, next: &LockState) -> String {
        let mut line = format!("t{} {action}", last.tick);
        for (index, (before, after)) in last.clients.iter().zip(&next.clients).enumerate() {
            let change = match (&before.phase, &after.phase) {
                (Phase::Idle, Phase::Acquiring(contender)) => contender
                    .as_queue()
                    .map(|machine| format!("queue column {}", machine.queue_column())),
                (Phase::Acquiring(_), Phase::Holding { fencing_token, .. }) => {
                    Some(match fencing_token {
                        Some(token) => format!("HOLDS the lock with fencing token {token}"),
                        None => "HOLDS the lock".to_owned(),
                    })
                }
                (Phase::Acquiring(_), Phase::Idle | Phase::Done) if after.busy > before.busy => {
                    Some("busy".to_owned())
                }
                (Phase::Acquiring(_), Phase::Idle | Phase::Done) => Some("failed".to_owned()),
                (Phase::Releasing(_), Phase::Idle | Phase::Done) => Some("released".to_owned()),
                (Phase::Holding { .. }, Phase::Lingering { .. }) => {
                    Some("lingers (its cells stay)".to_owned())
                }
                (Phase::Retaking { .. }, Phase::Holding { fencing_token, .. }) => {
                    Some(match fencing_token {
                        Some(token) => format!("HOLDS the lock AGAIN with fencing token {token}"),
                        None => "HOLDS the lock AGAIN".to_owned(),
                    })
                }
                (Phase::Retaking { .. }, Phase::Releasing(_) | Phase::Idle | Phase::Done) => {
                    Some("gives the lingering lock back".to_owned())
                }
                _ => None,
            };
            if !before.enqueued && after.enqueued && self.algorithm == Algorithm::Queue {
                line.push_str(&format!("; c{index} enqueued"));
            }
            if hinted_reads(after) > hinted_reads(before) {
                line.push_str(&format!("; c{index} reads at once"));
            }
            if after.bypassed > before.bypassed {
                line.push_str(&format!("; c{index} bypassed {}x", after.bypassed));
            }
            if let Some(change) = change {
                line.push_str(&format!("; c{index} {change}"));
            }
        }
        if next.token_regressed && !last.token_regressed {
            line.push_str(" — NOT above every earlier holder's token");
        }
        if next.global_written > last.global_written {
            line.push_str(&format!(
                "; GlobalTime update to {} acknowledged",
                next.global_written.as_micros()
            ));
        }
        for (index, (before, after)) in last.clients.iter().zip(&next.clients).enumerate() {
            if let (Some(before), Some(after)) = (&before.clock, &after.clock)
                && after.refreshed > before.refreshed
            {
                line.push_str(&format!(
                    "; c{index}'s clock reads GlobalTime {}",
                    after.latest.as_micros()
                ));
            }
        }
        if next.queue_time_behind_update && !last.queue_time_behind_update {
            line.push_str(" — a queue timestamp BELOW an update acknowledged before its refresh");
        }
        if next.retake_passed_waiter && !last.retake_passed_waiter {
            line.push_str(" — the retake PASSES a waiter enqueued before its reads were sent");
        }
        if next.floor_hid_waiter && !last.floor_hid_waiter {
            line.push_str(" — a queue read starts PAST an enqueued waiter");
        }
        let lost: Vec<String> = self
            .holders_without_their_cell(next)
            .into_iter()
            .filter(|index| !self.holders_without_their_cell(last).contains(index))
            .map(|index| format!("c{index}"))
            .collect();
        if !lost.is_empty() {
            line.push_str(&format!(
                " — {}'s main cell no longer reads as its own",
                lost.join(", ")
            ));
        }
        line
    }
}
