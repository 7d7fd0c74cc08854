//! The bakery lock of the Apache Cassandra wiki's "Locking" page (lock-core's
//! `BakeryAcquire`, docs/algorithm.md section "The bakery baseline"), model-checked on lock-model's replicated
//! quorum store.
//!
//! The page asks two questions and makes one warning; the checks answer them:
//!
//! * **Does consistency hold across the two rows (the page's "column families")?** With
//!   QUORUM reads and writes, yes: two clients at RF 3 never hold together
//!   (`exclusion_with_quorum_without_the_lease_rf3`), nor with the lease
//!   (`exclusion_with_the_lease_rf1`, and the crash models). Bakery needs only that a read
//!   sent after a write was acknowledged sees it, per cell, which quorums give whatever row
//!   the cell is in.
//! * **Progress.** Without crashes every client acquires (`progress_without_crashes_rf1`).
//! * **"If a client crashes after setting its number the algorithm will eventually block
//!   all other clients."** Without the lease the checker finds it
//!   (`a_crash_after_taking_a_number_blocks_the_other_client_for_good`); with the lease the
//!   same crash delays the other client until the dead client's cells expire, and every
//!   live client acquires (`with_the_lease_the_crash_only_delays_the_other_client`).
//!
//! * **The page's own comparison**, numbers alone with no tie-break between equal numbers,
//!   admits two holders: the checker finds the run
//!   (`the_pages_comparison_without_a_tie_break_admits_two_holders`).
//!
//! * **The lease, through expiry, at RF 3**: holders whose leases have time left never
//!   overlap, on a clock that reaches the expiry of every cell
//!   (`lease_exclusion_holds_through_expiry_rf3`), and the check fails without the
//!   tie-break (`lease_exclusion_fails_without_the_tie_break_rf3`).
//!
//! The liveness models run at RF 1: they are about a dead client's cells, not about
//! replicas. State counts are pinned; the file takes 10 to 25 s in debug, by load.
//!
//! The model is this file's own (lock-model's lock model gives every client one
//! configuration, and bakery clients each need their own id); it drives the real machines,
//! [`BakeryAcquire`] and [`Release`], through [`QuorumStore`].

use std::fmt::Write as _;
use std::time::Duration;

use lock_core::config::BakeryConfig;
use lock_core::machine::{
    AcquireOutcome, BakeryAcquire, Holding, Machine, Mode, Outgoing, Release,
};
use lock_core::{Algorithm, Fraction, LockConfig, LockId, OwnerId, PollConfig, ValidConfig};
use lock_model::clock::{now_at, tick_micros};
use lock_model::store::{ClientIndex, Message, QuorumStore, StoreConfig};
use stateright::{Checker, Model, Property, Representative};

/// One tick of the model's clock: a second.
const TICK: u64 = 1_000_000;

/// The bakery configuration of client `index` (id `index + 1`), polling once a tick (a
/// second): with `Lease::Long`, 4 s leases (3 s effective, renewed every 2 s); with
/// `Lease::Short`, 2 s leases (1 s effective, renewed every 0.5 s, so a waiter's number
/// cannot be renewed from one tick to the next and the waiter takes a new one), which lets
/// a few ticks reach expiry.
fn config(index: usize, clients: usize, lease: Lease) -> ValidConfig {
    let second = Duration::from_secs(1);
    let (lease_ttl, renew_fraction, request_timeout) = match lease {
        Lease::None | Lease::Long => (second * 4, Fraction::HALF, Duration::from_millis(500)),
        Lease::Short => (second * 2, Fraction::new(1, 4), Duration::from_millis(400)),
    };
    LockConfig {
        algorithm: Algorithm::Bakery,
        fencing: false,
        lease_ttl,
        waiter_ttl: lease_ttl,
        renew_fraction,
        max_clock_skew: Duration::ZERO,
        request_timeout,
        retry_backoff: second,
        storage_retry_window: Duration::ZERO,
        poll: PollConfig {
            min_interval: second,
            max_interval: second,
            jitter_percent: 0,
            ..PollConfig::default()
        },
        bakery: BakeryConfig {
            max_clients: u32::try_from(clients).expect("a few clients"),
            client_id: u32::try_from(index + 1).expect("a few clients"),
            lease: lease != Lease::None,
        },
        ..LockConfig::default()
    }
    .validate_unleased_bakery()
    .expect("the model configuration is valid")
}

/// The cells' lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lease {
    /// No TTL, as on the page (`bakery.lease: false`).
    None,
    /// A 4 s lease, beyond the horizons of most checks.
    Long,
    /// A 2 s lease, which expires within three ticks.
    Short,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Acquiring(Box<BakeryAcquire>),
    Holding(Box<Holding>),
    Releasing(Box<Release>),
    Done,
    Crashed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    phase: Phase,
    acquired: u8,
    failed: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    tick: u32,
    store: QuorumStore,
    clients: Vec<Client>,
}

/// Replica symmetry: every replica runs on true time, so renumbering them changes nothing.
impl Representative for State {
    fn representative(&self) -> Self {
        State {
            store: self.store.with_canonical_replicas(),
            ..self.clone()
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Start(ClientIndex),
    Deliver(Message),
    Timeout(ClientIndex),
    Release(ClientIndex),
    Crash(ClientIndex),
    Tick,
}

#[derive(Clone)]
struct BakeryModel {
    configs: Vec<ValidConfig>,
    store: StoreConfig,
    lease: bool,
    /// Whether the machines break ties by client id (ours); `false` runs the page's
    /// comparison of numbers alone ([`BakeryAcquire::without_tie_break`]).
    tie_break: bool,
    /// Whether holders may release; without, a holder keeps its cells until they expire.
    release: bool,
    /// Microseconds per tick.
    tick: u64,
    /// Whether client 0 may crash once it has a number (while acquiring or holding).
    crash: bool,
    max_tick: u32,
    /// Urgent time: the clock moves on only when nothing else can happen (message delays,
    /// pauses and critical sections shorter than a tick), for progress; otherwise at any
    /// moment, for safety.
    urgent: bool,
}

impl BakeryModel {
    fn new(clients: usize, replicas: usize, lease: Lease) -> Self {
        BakeryModel {
            configs: (0..clients).map(|i| config(i, clients, lease)).collect(),
            store: StoreConfig::new(replicas),
            lease: lease != Lease::None,
            tie_break: true,
            release: true,
            tick: TICK,
            crash: false,
            max_tick: 0,
            urgent: false,
        }
    }

    fn micros(&self, state: &State) -> u64 {
        tick_micros(state.tick, self.tick)
    }

    /// Clients in the holding phase, whether or not their lease has time left: what a
    /// holder that never looks at its lease would believe.
    fn believed_holders(state: &State) -> usize {
        state
            .clients
            .iter()
            .filter(|client| matches!(client.phase, Phase::Holding(_)))
            .count()
    }

    /// Holders whose lease has time left (without the lease: every holder).
    fn holders(&self, state: &State) -> usize {
        let now = lock_core::MonotonicTime::from_micros(self.micros(state));
        state
            .clients
            .iter()
            .filter(|client| match &client.phase {
                Phase::Holding(holding) => !self.lease || holding.lease_deadline > now,
                _ => false,
            })
            .count()
    }

    fn due(&self, state: &State, client: &Client) -> bool {
        let wake = match &client.phase {
            Phase::Acquiring(machine) => machine.poll_timeout(),
            Phase::Releasing(release) => release.poll_timeout(),
            _ => None,
        };
        wake.is_some_and(|wake| wake.as_micros() <= self.micros(state))
    }

    fn submit_all(store: &mut QuorumStore, client: ClientIndex, outgoing: Vec<Outgoing>, now: u64) {
        for outgoing in outgoing {
            store.submit(client, outgoing, now);
        }
    }

    /// Sends what the client's machine wants sent and moves it on if it finished.
    fn settle(&self, state: &mut State, index: ClientIndex) {
        let now = self.micros(state);
        let client = &mut state.clients[index];
        let mut outgoing = Vec::new();
        let next = match &mut client.phase {
            Phase::Acquiring(machine) => {
                while let Some(request) = machine.poll_request() {
                    outgoing.push(request);
                }
                match machine.poll_outcome() {
                    Some(AcquireOutcome::Acquired(holding)) => Some(Phase::Holding(holding)),
                    Some(_) => {
                        client.failed += 1;
                        Some(Phase::Done)
                    }
                    None => None,
                }
            }
            Phase::Releasing(release) => {
                while let Some(request) = release.poll_request() {
                    outgoing.push(request);
                }
                release.poll_outcome().map(|_| Phase::Done)
            }
            _ => None,
        };
        Self::submit_all(&mut state.store, index, outgoing, now);
        if let Some(next) = next {
            state.clients[index].phase = next;
            state.store.forget(index);
        }
    }
}

impl Model for BakeryModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            tick: 0,
            store: QuorumStore::new(&self.store),
            clients: vec![
                Client {
                    phase: Phase::Idle,
                    acquired: 0,
                    failed: 0,
                };
                self.configs.len()
            ],
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let quiet = state.store.is_quiet();
        let mut busy = !quiet;
        for message in &state.store.in_flight {
            actions.push(Action::Deliver(message.clone()));
        }
        for (index, client) in state.clients.iter().enumerate() {
            match &client.phase {
                Phase::Idle => {
                    busy = true;
                    actions.push(Action::Start(index));
                }
                Phase::Holding(_) if self.release => {
                    busy = true;
                    actions.push(Action::Release(index));
                }
                _ => {}
            }
            if self.due(state, client) && (quiet || !self.urgent) {
                busy = true;
                actions.push(Action::Timeout(index));
            }
            let has_number = match &client.phase {
                Phase::Acquiring(machine) => machine.number() > 0,
                Phase::Holding(_) => true,
                _ => false,
            };
            if self.crash && index == 0 && has_number {
                actions.push(Action::Crash(index));
            }
        }
        if state.tick < self.max_tick && !(self.urgent && busy) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        let micros = self.micros(&state);
        let now = now_at(state.tick, self.tick, 0);
        match action {
            Action::Tick => state.tick += 1,
            Action::Start(index) => {
                let owner = OwnerId::new(format!("c{}", index + 1)).expect("a valid owner id");
                let mut machine = BakeryAcquire::new(
                    now,
                    self.configs[index].clone(),
                    Mode::Mandatory,
                    LockId::new("l").expect("a valid lock id"),
                    owner,
                    0,
                    None,
                );
                if !self.tie_break {
                    machine = machine.without_tie_break();
                }
                state.clients[index].phase = Phase::Acquiring(Box::new(machine));
                self.settle(&mut state, index);
            }
            Action::Deliver(message) => {
                let Some(completion) = state.store.deliver(&self.store, &message, micros) else {
                    return Some(state);
                };
                let index = completion.client;
                let response = Ok(completion.response);
                match &mut state.clients[index].phase {
                    Phase::Acquiring(machine) => {
                        machine.handle_response(now, completion.request_id, response);
                    }
                    Phase::Releasing(release) => {
                        release.handle_response(now, completion.request_id, response);
                    }
                    _ => {}
                }
                self.settle(&mut state, index);
            }
            Action::Timeout(index) => {
                match &mut state.clients[index].phase {
                    Phase::Acquiring(machine) => machine.handle_timeout(now),
                    Phase::Releasing(release) => release.handle_timeout(now),
                    _ => return None,
                }
                self.settle(&mut state, index);
            }
            Action::Release(index) => {
                let Phase::Holding(holding) = &state.clients[index].phase else {
                    return None;
                };
                let release = Release::new(
                    now,
                    self.configs[index].clone(),
                    holding.cells(),
                    holding.last_timestamp,
                );
                let client = &mut state.clients[index];
                client.acquired += 1;
                client.phase = Phase::Releasing(Box::new(release));
                self.settle(&mut state, index);
            }
            Action::Crash(index) => {
                state.clients[index].phase = Phase::Crashed;
                state.store.forget(index);
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("mutual exclusion", |model: &Self, state: &State| {
                model.holders(state) <= 1
            }),
            Property::always("no acquisition fails", |_: &Self, state: &State| {
                state.clients.iter().all(|client| client.failed == 0)
            }),
            Property::sometimes("both acquire", |_: &Self, state: &State| {
                state.clients.iter().all(|client| client.acquired > 0)
            }),
            // Holders never renew in this model, so a holder that keeps the lock long
            // enough loses its lease while still in its critical section. A holder that
            // ignored its lease would overlap the next one: where a check's horizon reaches
            // expiry this property fails, while "mutual exclusion" (holders whose lease has
            // time left) must hold.
            Property::always(
                "mutual exclusion of holders that believe they hold",
                |_: &Self, state: &State| Self::believed_holders(state) <= 1,
            ),
            Property::eventually("every live client acquires", |_: &Self, state: &State| {
                state.clients.iter().all(|client| {
                    client.phase == Phase::Crashed
                        || (client.acquired > 0 && client.phase == Phase::Done)
                })
            }),
        ]
    }
}

/// One line per step of a path.
fn render(path: stateright::Path<State, Action>) -> String {
    let mut text = String::new();
    for (number, (state, action)) in path.into_vec().into_iter().enumerate() {
        let Some(action) = action else { continue };
        let line = match &action {
            Action::Start(index) => format!("c{index} starts"),
            Action::Deliver(message) => format!("deliver {message}"),
            Action::Timeout(index) => format!("c{index} wakes"),
            Action::Release(index) => format!("c{index} releases"),
            Action::Crash(index) => format!("c{index} crashes"),
            Action::Tick => format!("tick {} -> {}", state.tick, state.tick + 1),
        };
        let phases: Vec<&str> = state
            .clients
            .iter()
            .map(|client| match client.phase {
                Phase::Idle => "idle",
                Phase::Acquiring(_) => "acquiring",
                Phase::Holding(_) => "holding",
                Phase::Releasing(_) => "releasing",
                Phase::Done => "done",
                Phase::Crashed => "crashed",
            })
            .collect();
        let _ = writeln!(text, "{:>3}. [{}] {line}", number + 1, phases.join(", "));
    }
    text
}

fn check(model: BakeryModel) -> impl Checker<BakeryModel> {
    model.checker().symmetry().spawn_dfs().join()
}

/// Checks `model`: never two holders, no acquisition fails, some run lets both acquire, in
/// exactly `states` unique states.
fn assert_exclusive_and_both_acquire(model: BakeryModel, states: usize) {
    let checker = check(model);
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("no acquisition fails");
    checker.assert_any_discovery("both acquire");
    assert_eq!(checker.unique_state_count(), states);
}

/// The page's doubt about consistency across its two "column families": with QUORUM at RF
/// 3, every interleaving of two clients' doorways and first checks (model time frozen, so
/// a client that must wait never polls again) keeps them exclusive.
#[test]
fn exclusion_with_quorum_without_the_lease_rf3() {
    let mut model = BakeryModel::new(2, 3, Lease::None);
    model.max_tick = 0;
    assert_exclusive_and_both_acquire(model, 97_114);
}

/// With the lease, at RF 1 and two ticks of free time (polls, renewals of waiting numbers
/// and restarts interleaved any way): still exclusive. Expiry itself is reached in the
/// crash models below, whose exclusion property holds too.
#[test]
fn exclusion_with_the_lease_rf1() {
    let mut model = BakeryModel::new(2, 1, Lease::Long);
    model.max_tick = 2;
    assert_exclusive_and_both_acquire(model, 35_245);
}

/// Without crashes both clients acquire on every schedule, with and without the lease
/// (urgent time: message delays and critical sections shorter than a tick).
#[test]
fn progress_without_crashes_rf1() {
    for (lease, states) in [(Lease::None, 344), (Lease::Long, 347)] {
        let mut model = BakeryModel::new(2, 1, lease);
        model.urgent = true;
        model.max_tick = 4;
        let checker = check(model);
        checker.assert_properties();
        assert_eq!(checker.unique_state_count(), states, "lease {lease:?}");
    }
}

/// The page's warning, found: client 0 may crash at any point after it took a number, and
/// without the lease some run leaves client 1 waiting for ever (here: to the horizon of 8
/// ticks, twice the lease).
#[test]
fn a_crash_after_taking_a_number_blocks_the_other_client_for_good() {
    let mut model = BakeryModel::new(2, 1, Lease::None);
    model.urgent = true;
    model.crash = true;
    model.max_tick = 8;
    let checker = check(model);
    checker.assert_no_discovery("mutual exclusion");
    let path = checker.assert_any_discovery("every live client acquires");
    assert_eq!(checker.unique_state_count(), 1_144);
    // Client 0 crashes after taking its number (here while it waits on client 1, which
    // took the same number and has the larger id); its cells never expire, and client 1
    // polls the number row until the horizon.
    let trace = render(path);
    assert!(trace.contains("c0 crashes"), "{trace}");
    assert!(
        trace.ends_with("deliver c1 -> r0 op13: read main\n"),
        "{trace}"
    );
    eprintln!("{trace}");
}

/// The same crashes with the lease: on every run client 1 acquires within the same horizon
/// (once the dead client's cells expired, after at most 4 ticks), and no two holders with
/// lease time left ever coexist.
#[test]
fn with_the_lease_the_crash_only_delays_the_other_client() {
    let mut model = BakeryModel::new(2, 1, Lease::Long);
    model.urgent = true;
    model.crash = true;
    model.max_tick = 8;
    let checker = check(model);
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 1_022);
}

/// Stops a check at the first run that breaks `property`.
fn until_broken(property: &'static str) -> stateright::HasDiscoveries {
    stateright::HasDiscoveries::AnyOf([property].into_iter().collect())
}

/// Searches `model` depth-first, with client symmetry, until two clients hold at once, and
/// fails if they never do.
fn assert_two_holders(model: BakeryModel) {
    let checker = model
        .checker()
        .symmetry()
        .finish_when(until_broken("mutual exclusion"))
        .spawn_dfs()
        .join();
    checker.assert_any_discovery("mutual exclusion");
}

/// The page's listing compares numbers alone (its line 13, `number_hash[id] <
/// client_number`), with no tie-break between equal numbers. Run on our machine with that
/// one change ([`BakeryAcquire::without_tie_break`]) and no lease, the checker finds two
/// holders: both clients read the number row before either number lands, both take 1, and
/// each lets the other pass. At RF 1 breadth-first, for a shortest trace (pinned); at RF 3
/// with QUORUM depth-first, to show that quorums do not prevent it.
#[test]
fn the_pages_comparison_without_a_tie_break_admits_two_holders() {
    let mut model = BakeryModel::new(2, 1, Lease::None);
    model.tie_break = false;
    let checker = model
        .checker()
        .finish_when(until_broken("mutual exclusion"))
        .spawn_bfs()
        .join();
    let trace = render(checker.assert_any_discovery("mutual exclusion"));
    // The rendering shows each step's state before the step: after the last, both hold.
    let expected = [
        "1. [idle, idle] c0 starts",
        "2. [acquiring, idle] deliver c0 -> r0 op0: write shadow/0001 ts 0",
        "3. [acquiring, idle] deliver c0 -> r0 op1: read main",
        "4. [acquiring, idle] c1 starts",
        "5. [acquiring, acquiring] deliver c1 -> r0 op0: write shadow/0002 ts 0",
        "6. [acquiring, acquiring] deliver c1 -> r0 op1: read main",
        "7. [acquiring, acquiring] deliver c0 -> r0 op2: write main/0001 ts 1",
        "8. [acquiring, acquiring] deliver c0 -> r0 op3: delete shadow/0001 ts 2",
        "9. [acquiring, acquiring] deliver c1 -> r0 op2: write main/0002 ts 1",
        "10. [acquiring, acquiring] deliver c1 -> r0 op3: delete shadow/0002 ts 2",
        "11. [acquiring, acquiring] deliver c0 -> r0 op4: read shadow",
        "12. [acquiring, acquiring] deliver c0 -> r0 op5: read main",
        "13. [holding, acquiring] deliver c1 -> r0 op4: read shadow",
        "14. [holding, acquiring] deliver c1 -> r0 op5: read main",
    ];
    let lines: Vec<&str> = trace.lines().map(str::trim).collect();
    assert_eq!(lines, expected, "{trace}");

    let mut model = BakeryModel::new(2, 3, Lease::None);
    model.tie_break = false;
    assert_two_holders(model);
}

/// The lease check at RF 3: two clients with 2 s leases (1 s effective), on a clock of two
/// ticks 2 s apart, so that every cell written at the first tick has expired at the
/// second. Holders never release nor renew: each keeps the lock until its lease runs out,
/// and the other client may take it once the holder's cells have expired. Urgent time
/// (every request is answered within the tick it was sent in, as the lease's assumption
/// that requests finish within `request_timeout` asks; timeouts fire on a quiet network).
fn lease_model_rf3() -> BakeryModel {
    let mut model = BakeryModel::new(2, 3, Lease::Short);
    model.tick = 2 * TICK;
    model.max_tick = 1;
    model.urgent = true;
    model.release = false;
    model
}

/// Exclusion within the lease's assumptions, through expiry: no two holders whose leases
/// have time left, on every schedule. The check is not vacuous: holders that ignored
/// their lease would overlap (the checker finds client 1 holding after client 0's cells
/// expired, client 0 still in its critical section).
#[test]
fn lease_exclusion_holds_through_expiry_rf3() {
    let checker = check(lease_model_rf3());
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("no acquisition fails");
    checker.assert_any_discovery("mutual exclusion of holders that believe they hold");
    assert_eq!(checker.unique_state_count(), 226_566);
}

/// The same lease check fails on a broken variant: the page's comparison without a
/// tie-break admits two holders whose leases both have time left.
#[test]
fn lease_exclusion_fails_without_the_tie_break_rf3() {
    let mut model = lease_model_rf3();
    model.tie_break = false;
    assert_two_holders(model);
}
