//! The small configurations CI checks exhaustively. State counts are pinned: a change to
//! lock-core's machines or to the models that changes the reachable states fails here first,
//! and the new count goes into the crate docs' table with a reason.

mod common;

use std::time::Duration;

use common::{assert_liveness_sound, check, check_bypass, urgent};
use lock_core::machine::Mode;
use lock_core::storage::RowKind;
use lock_core::{Algorithm, LockConfig, PollConfig};
use lock_model::global_time::{
    FollowRule, GlobalTimeModel, STAMP_BELOW_ANOTHER, STAMPS_FOLLOW_UPDATES,
};
use lock_model::lease::{self, LeaseModel};
use lock_model::lock::{
    CLEAN_AFTER_RELEASE, FLOORS_HIDE_NO_WAITER, HIDDEN_WAITER_REJOINS, HOLDERS_CELLS_STAY,
    LockModel, MARGIN_SHORTENED, QUEUE_TIMES_FOLLOW_UPDATES, SeatFault, TimeService, lock_config,
    model_config,
};
use lock_model::trace::{Describe, render_discovery};
use stateright::{Checker, HasDiscoveries, Model};

/// The crate documentation's page of counterexample traces.
const COUNTEREXAMPLES: &str = include_str!("../src/counterexamples.md");

/// The trace of `property`'s discovery, up to the state that shows it; fails if there is
/// none, or if the crate documentation does not show this very trace (then the model or
/// lock-core changed what the checker finds, and the documentation must say so).
fn trace<M>(model: &M, checker: &impl Checker<M>, property: &'static str) -> String
where
    M: Describe,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq,
{
    let trace = render_discovery(model, property, checker.assert_any_discovery(property));
    assert!(
        COUNTEREXAMPLES.contains(&trace),
        "src/counterexamples.md does not show this trace for {property:?}:\n{trace}"
    );
    trace
}

fn mandatory(clients: usize, replicas: usize) -> LockModel {
    LockModel::new(Algorithm::Queue, Mode::Mandatory, clients, replicas)
}

#[test]
fn theorem_1_mutual_exclusion_of_the_mandatory_lock_rf3() {
    let mut model = mandatory(2, 3);
    model.max_tick = 0;
    model.holders_release = false;
    let checker = check(model);
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 70_749);
}

#[test]
fn theorem_1_holds_without_fencing_rf3() {
    let mut model = mandatory(2, 3);
    model.config = model_config(Algorithm::Queue, false);
    model.max_tick = 0;
    model.holders_release = false;
    let checker = check(model);
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 31_545);
}

#[test]
fn theorem_1_survives_one_replica_crash_rf3() {
    let mut model = mandatory(2, 3);
    model.max_tick = 0;
    model.holders_release = false;
    model.crashes = 1;
    let checker = check(model);
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 282_996);
}

#[test]
fn fencing_tokens_increase_from_holder_to_holder_rf3() {
    let mut model = mandatory(1, 3);
    model.max_tick = 0;
    model.rounds = 2;
    let checker = check(model);
    checker.assert_no_discovery("fencing tokens increase from holder to holder");
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("no acquisition fails");
    checker.assert_no_discovery(CLEAN_AFTER_RELEASE);
    assert_eq!(checker.unique_state_count(), 38_046);
}

#[test]
fn fencing_tokens_repeat_when_the_fence_is_read_from_one_replica_rf3() {
    let mut model = mandatory(1, 3);
    model.max_tick = 0;
    model.rounds = 2;
    model.store.one_replica_reads = vec![RowKind::Fence];
    let property = "fencing tokens increase from holder to holder";
    let checker = model
        .clone()
        .checker()
        .finish_when(HasDiscoveries::AnyOf([property].into()))
        .spawn_bfs()
        .join();
    let trace = trace(&model, &checker, property);
    assert!(
        trace.contains("NOT above every earlier holder's token"),
        "{trace}"
    );
}

#[test]
fn theorem_2_every_client_acquires_given_enough_ticks() {
    let mut model = mandatory(2, 1);
    urgent(&mut model, 2);
    let checker = check(model.clone());
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 511);
    assert_liveness_sound(&model, &checker);
}

#[test]
fn theorem_2_check_fails_when_the_horizon_is_too_short() {
    let mut model = mandatory(2, 1);
    urgent(&mut model, 1);
    let checker = check(model.clone());
    let stuck = trace(&model, &checker, "every client acquires every round");
    assert!(stuck.contains("t0 tick"), "{stuck}");
    checker.assert_no_discovery("mutual exclusion");
}

#[test]
fn theorems_3_and_4_soft_lock_rf3() {
    let mut model = LockModel::new(Algorithm::Queue, Mode::Soft, 2, 3);
    model.holders_release = false;
    urgent(&mut model, 2);
    let checker = check(model.clone());
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 179_190);
    assert_liveness_sound(&model, &checker);
}

#[test]
fn theorems_3_and_4_survive_one_replica_crash_rf3() {
    let mut model = LockModel::new(Algorithm::Queue, Mode::Soft, 2, 3);
    model.holders_release = false;
    model.crashes = 1;
    urgent(&mut model, 1);
    let checker = check(model.clone());
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 507_240);
    assert_liveness_sound(&model, &checker);
}

#[test]
fn theorem_2_a_lone_client_acquires_despite_one_replica_crash_rf3() {
    let mut model = mandatory(1, 3);
    model.crashes = 1;
    urgent(&mut model, 0);
    let checker = check(model.clone());
    checker.assert_no_discovery("every client acquires every round");
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("no acquisition fails");
    checker.assert_no_discovery(CLEAN_AFTER_RELEASE);
    assert_eq!(checker.unique_state_count(), 4_656);
    assert_liveness_sound(&model, &checker);
}

#[test]
fn bypass_is_bounded_by_one_for_two_clients_with_strict_timestamps() {
    let mut model = mandatory(2, 1);
    model.rounds = 2;
    let checker = check_bypass(model, 1);
    checker.assert_any_discovery("bypass bound reached");
    assert_eq!(checker.unique_state_count(), 22_945);
}

#[test]
fn bypass_is_bounded_by_two_for_three_clients_with_strict_timestamps() {
    let mut model = mandatory(3, 1);
    urgent(&mut model, 3);
    model.strict_timestamps = true;
    model.bypass_bound = 1;
    let checker = check(model.clone());
    let bypassed = trace(&model, &checker, "bypass bounded");
    assert!(bypassed.contains("bypassed 2x"), "{bypassed}");
    let checker = check_bypass(model, 2);
    checker.assert_any_discovery("bypass bound reached");
    assert_eq!(checker.unique_state_count(), 166_966);
}

#[test]
fn equal_timestamps_let_a_smaller_owner_id_bypass_again() {
    let mut model = mandatory(2, 1);
    urgent(&mut model, 3);
    model.rounds = 2;
    model.bypass_bound = 1;
    let checker = check(model.clone());
    let trace = trace(&model, &checker, "bypass bounded");
    assert!(trace.contains("c1 bypassed 2x"), "{trace}");
    checker.assert_no_discovery("mutual exclusion");
    assert_eq!(checker.unique_state_count(), 4_808);
}

#[test]
fn the_baseline_starves_a_waiter() {
    let mut model = LockModel::new(Algorithm::Baseline, Mode::Mandatory, 2, 1);
    urgent(&mut model, 3);
    model.rounds = 3;
    // Beyond rounds - 1: the waiter is passed over by every acquisition the other client
    // makes, the queue algorithm's bound for two clients being 1 however many rounds.
    model.bypass_bound = 2;
    let checker = check(model.clone());
    let starved = trace(&model, &checker, "starvation: bypassed beyond the bound");
    assert!(starved.contains("c1 bypassed 3x"), "{starved}");
    checker.assert_no_discovery("mutual exclusion");
    assert_eq!(checker.unique_state_count(), 36_905);
}

#[test]
fn a_store_that_loses_main_row_deletes_leaves_the_main_cell_behind_rf3() {
    let mut model = mandatory(1, 3);
    model.max_tick = 0;
    model.store.lost_deletes = vec![RowKind::Main];
    let checker = model
        .clone()
        .checker()
        .finish_when(HasDiscoveries::AnyOf([CLEAN_AFTER_RELEASE].into()))
        .spawn_bfs()
        .join();
    let path = checker.assert_any_discovery(CLEAN_AFTER_RELEASE);
    let left = model.left_behind(path.last_state());
    assert!(
        left.iter().all(|(row, _)| row.kind == RowKind::Main) && !left.is_empty(),
        "{left:?}"
    );
    checker.assert_no_discovery("mutual exclusion");
}

/// Three clients with queue reads of two cells (the smallest limit lock-core accepts): a
/// waiter whose own cell lies beyond the slice must tell "behind a full slice" from
/// "missing".
#[test]
fn theorems_1_and_2_hold_with_more_clients_than_the_queue_read_limit() {
    let mut model = mandatory(3, 1);
    urgent(&mut model, 3);
    model.bypass_bound = 2;
    let mut config = lock_config(Algorithm::Queue, true);
    config.poll.queue_read_limit = 2;
    model.config = config.validate().expect("a valid configuration");
    let checker = check(model.clone());
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 15_579);
    assert_liveness_sound(&model, &checker);
}

/// Replica symmetry (depth-first, the only search stateright offers it in) keeps the
/// verdicts: Theorem 1 with a crash holds on a sixth of the states, and the broken fence
/// read is still caught.
#[test]
fn replica_symmetry_keeps_the_verdicts_rf3() {
    let mut model = mandatory(2, 3);
    model.max_tick = 0;
    model.holders_release = false;
    model.crashes = 1;
    let checker = model.clone().checker().symmetry().spawn_dfs().join();
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 47_794);

    let mut model = mandatory(1, 3);
    model.max_tick = 0;
    model.rounds = 2;
    model.store.one_replica_reads = vec![RowKind::Fence];
    let checker = model.checker().symmetry().spawn_dfs().join();
    checker.assert_any_discovery("fencing tokens increase from holder to holder");
}

/// Client symmetry (owner ids in start order, strict timestamps) keeps the bypass verdicts
/// for three clients: K = 1 fails, K = 2 holds and is reached.
#[test]
fn client_symmetry_keeps_the_bypass_verdicts() {
    let mut model = mandatory(3, 1);
    urgent(&mut model, 3);
    model.strict_timestamps = true;
    model.client_symmetry = true;
    model.bypass_bound = 1;
    check(model.clone()).assert_any_discovery("bypass bounded");
    model.bypass_bound = 2;
    let checker = check(model.clone());
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 27_835);
    assert_liveness_sound(&model, &checker);
}

#[test]
#[should_panic(expected = "client symmetry is sound only")]
fn client_symmetry_is_refused_without_strict_timestamps() {
    let mut model = mandatory(2, 1);
    model.client_symmetry = true;
    check(model);
}

const TOKENS_GROW: &str = "fencing tokens grow with acquisition order";
const NO_STALE_WRITE: &str = "the resource takes no write from a holder after its successor's";
const REFUSED: &str = "the resource refuses a superseded holder's write";

#[test]
fn a_paused_holder_and_a_new_holder_hold_at_once_but_fencing_refuses_the_paused_one() {
    let model = LeaseModel::new(2, 1);
    let checker = check(model.clone());
    let both = trace(
        &model,
        &checker,
        "mutual exclusion of holders that believe they hold",
    );
    assert!(
        both.contains("PAUSES") && both.contains("c1 HOLDS"),
        "{both}"
    );
    checker.assert_no_discovery("mutual exclusion of holders whose lease has time left");
    checker.assert_no_discovery(TOKENS_GROW);
    checker.assert_no_discovery(NO_STALE_WRITE);
    let refused = trace(&model, &checker, REFUSED);
    assert!(
        refused.contains("c0 writes to the resource with token 1: REFUSED"),
        "{refused}"
    );
    assert_eq!(checker.unique_state_count(), 895);
}

#[test]
fn a_resource_that_ignores_tokens_takes_the_paused_holders_write_last() {
    let mut model = LeaseModel::new(2, 1);
    model.resource_checks_tokens = false;
    let checker = check(model.clone());
    let stale = trace(&model, &checker, NO_STALE_WRITE);
    assert!(
        stale.contains("PAUSES") && stale.contains("AFTER a later holder's write"),
        "{stale}"
    );
    checker.assert_no_discovery(TOKENS_GROW);
}

#[test]
fn renewal_keeps_the_lock_exclusive() {
    let mut model = LeaseModel::new(2, 1);
    model.pauses = false;
    let checker = check(model);
    checker.assert_no_discovery("mutual exclusion of holders whose lease has time left");
    checker.assert_no_discovery("mutual exclusion of holders that believe they hold");
    checker.assert_no_discovery(TOKENS_GROW);
    checker.assert_no_discovery(NO_STALE_WRITE);
    checker.assert_no_discovery(REFUSED);
    assert_eq!(checker.unique_state_count(), 207);
}

#[test]
fn a_replica_clock_beyond_the_skew_bound_breaks_the_lease_but_not_fencing() {
    let mut model = LeaseModel::new(2, 1);
    model.pauses = false;
    model.store.replica_skew_micros = vec![2 * lease::MICROS_PER_TICK];
    let checker = check(model.clone());
    let skewed = trace(
        &model,
        &checker,
        "mutual exclusion of holders whose lease has time left",
    );
    assert!(skewed.contains("c1 HOLDS"), "{skewed}");
    checker.assert_no_discovery(TOKENS_GROW);
    checker.assert_no_discovery(NO_STALE_WRITE);
    trace(&model, &checker, REFUSED);
    assert_eq!(checker.unique_state_count(), 3_351);
}

#[test]
fn theorem_5_holds_for_acknowledged_updates_but_reads_can_go_back_rf3() {
    let model = GlobalTimeModel::new(vec![0, 1], 3);
    let checker = check(model.clone());
    checker.assert_no_discovery("every stored GlobalTime equals its write timestamp");
    checker.assert_no_discovery("a read returns at least every update acknowledged before it");
    let trace = trace(
        &model,
        &checker,
        "a read returns at least every read finished before it",
    );
    assert!(trace.contains("LESS than an earlier read"), "{trace}");
    assert_eq!(checker.unique_state_count(), 42_517);
}

#[test]
fn theorem_5_with_blocking_read_repair_rf3() {
    let mut model = GlobalTimeModel::new(vec![0, 1], 3);
    model.store.read_repair = true;
    let checker = check(model);
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 82_727);
}

/// Re-enqueueing keeps exclusion: with `request_timeout` one tick, a queue write the
/// network holds over two ticks is acknowledged too late, so its cell is deleted and written
/// again under a new time (lock-core's `Acquire`, on tombstones). The same model with the
/// default `request_timeout`, which never re-enqueues, reaches fewer states.
#[test]
fn theorem_1_holds_when_late_queue_cells_are_enqueued_again() {
    let with_timeout = |request_timeout| {
        let mut model = mandatory(2, 1);
        model.config = LockConfig {
            request_timeout,
            ..model_config(Algorithm::Queue, true).config().clone()
        }
        .validate()
        .expect("a valid configuration");
        model.max_tick = 2;
        model.holders_release = false;
        let checker = check(model);
        checker.assert_properties();
        checker.unique_state_count()
    };
    assert_eq!(with_timeout(Duration::from_millis(1)), 17_320);
    assert_eq!(with_timeout(Duration::from_secs(2)), 15_192);
}

const DEAD_WAITER: &str = "the owner behind a dead waiter holds within the waiter TTL";

/// Checks that in `model` exclusion holds, tokens grow and the owner behind the dead
/// waiter holds within the waiter TTL (and does hold); returns the state count.
fn dead_waiter_bound_holds(model: LeaseModel) -> usize {
    let checker = check(model);
    checker.assert_no_discovery("mutual exclusion of holders whose lease has time left");
    checker.assert_no_discovery("mutual exclusion of holders that believe they hold");
    checker.assert_no_discovery(TOKENS_GROW);
    checker.assert_no_discovery(DEAD_WAITER);
    checker.assert_any_discovery("the owner behind a dead waiter holds");
    checker.unique_state_count()
}

/// Checks that in `model` the owner behind the dead waiter is kept waiting past the bound,
/// after the waiter's death, with exclusion kept.
fn dead_waiter_delays_past_the_bound(model: LeaseModel) {
    let checker = check(model.clone());
    let late = render_discovery(
        &model,
        DEAD_WAITER,
        checker.assert_any_discovery(DEAD_WAITER),
    );
    assert!(late.contains("c1 DIES"), "{late}");
    checker.assert_no_discovery("mutual exclusion of holders whose lease has time left");
}

#[test]
fn a_dead_waiter_delays_the_next_owner_only_for_its_waiter_ttl() {
    let model = LeaseModel::dead_waiter(1, Duration::from_secs(2), 2);
    assert_eq!(dead_waiter_bound_holds(model), 39_885);
}

#[test]
fn a_dead_waiter_with_a_lease_long_queue_cell_delays_the_next_owner_past_the_bound() {
    // The same, with waiter_ttl at lease_ttl (6 s): as before waiter TTLs, the dead
    // waiter's queue cell blocks the owner behind it beyond the claimed bound.
    dead_waiter_delays_past_the_bound(LeaseModel::dead_waiter(1, Duration::from_secs(6), 2));
}

// Seats and queue floors (docs/algorithm.md, sections "Seats" and "Queue floors and tombstones"): every queue client takes
// its seat from its own `SeatBook` and gives it back as the driver does.

/// The lock configuration with storage requests that fail at once (`storage_retries` 0), so
/// that a release whose delete timed out ends, and gives its seat back, within the tick.
fn no_retries() -> lock_core::ValidConfig {
    LockConfig {
        storage_retries: 0,
        ..lock_config(Algorithm::Queue, true)
    }
    .validate()
    .expect("a valid configuration")
}

/// A release whose main-cell delete times out gives its seat back while the delete is still
/// in flight; the next round in the same seat writes above it, so the late delete cannot
/// remove the new holder's cell. Without the seat's timestamp floor it does.
#[test]
fn a_late_delete_by_a_seats_previous_user_never_removes_the_holders_cell() {
    let mut model = mandatory(1, 1);
    model.max_tick = 0;
    model.rounds = 2;
    model.release_timeouts = 1;
    model.config = no_retries();
    let checker = check(model.clone());
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("fencing tokens increase from holder to holder");
    let count = checker.unique_state_count();
    model.seat_fault = Some(SeatFault::NoTimestampFloor);
    let checker = check(model.clone());
    let lost = trace(&model, &checker, HOLDERS_CELLS_STAY);
    assert!(
        lost.contains("TIMES OUT") && lost.contains("c0's main cell no longer reads as its own"),
        "{lost}"
    );
    assert_eq!(count, 64);
}

/// Two lockers sharing a seat prefix (assumption A7 broken) overwrite each other's main
/// cell, and both hold; with a book each, as the driver gives every locker, neither happens.
#[test]
fn seats_shared_between_lockers_let_two_owners_hold() {
    let mut model = mandatory(2, 1);
    model.max_tick = 0;
    model.holders_release = false;
    let checker = check(model.clone());
    checker.assert_properties();
    let count = checker.unique_state_count();
    model.seat_fault = Some(SeatFault::SharedPrefix);
    let checker = check(model.clone());
    let lost = trace(&model, &checker, HOLDERS_CELLS_STAY);
    assert!(lost.contains("main/c.0"), "{lost}");
    checker.assert_any_discovery("mutual exclusion");
    assert_eq!(count, 150);
}

/// Queue floors with the margin of section "Queue floors and tombstones" (`2 × max_clock_skew + request_timeout`,
/// here one tick) hide no enqueued waiter from the next round's reads; floors without the
/// margin do.
/// `clients` mandatory clients of `rounds` rounds on one replica, urgent time to
/// `max_tick`, distinct timestamps, and a floor margin of one tick (`max_clock_skew` 0,
/// `request_timeout` one tick), so that floors can matter within the horizon.
fn one_tick_margin(clients: usize, max_tick: u32, rounds: u8) -> LockModel {
    let mut model = mandatory(clients, 1);
    urgent(&mut model, max_tick);
    model.rounds = rounds;
    model.strict_timestamps = true;
    model.config = LockConfig {
        max_clock_skew: Duration::ZERO,
        request_timeout: Duration::from_millis(1),
        ..lock_config(Algorithm::Queue, true)
    }
    .validate()
    .expect("a valid configuration");
    model
}

#[test]
fn queue_floors_hide_no_enqueued_waiter() {
    let mut model = one_tick_margin(2, 3, 2);
    let checker = check(model.clone());
    checker.assert_no_discovery(FLOORS_HIDE_NO_WAITER);
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("bypass bounded");
    let count = checker.unique_state_count();
    model.seat_fault = Some(SeatFault::FloorWithoutMargin);
    let checker = check(model.clone());
    let hidden = trace(&model, &checker, FLOORS_HIDE_NO_WAITER);
    assert!(hidden.contains("PAST an enqueued waiter"), "{hidden}");
    assert_eq!(count, 22_945);
}

/// A queue margin shorter than the default (docs/algorithm.md, section "Dead cells per
/// queue read: the bound"), here none at all: floors hide waiters, as without the margin
/// above, and an owner hidden that way, first in its own reads, meets in the main row the
/// head that passed it and joins the queue again under that head's time. Exclusion and
/// the holders' cells are kept. Bypass is not bounded by one: the write that rejoins can
/// itself land after the next owner's read, which then passes the waiter once more (with
/// three rounds, the other client passes it three times). Lock-core offers the short
/// margin as an option for that reason.
#[test]
fn a_waiter_hidden_by_a_short_margin_joins_again_and_exclusion_holds() {
    let mut model = one_tick_margin(2, 3, 2);
    model.config = without_margin(&model);
    let checker = check(model.clone());
    checker.assert_any_discovery(FLOORS_HIDE_NO_WAITER);
    checker.assert_any_discovery(HIDDEN_WAITER_REJOINS);
    checker.assert_any_discovery("bypass bounded");
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    assert_eq!(checker.unique_state_count(), 46_149);
}

/// The same with waiting in the main row (on by default in lock-core): a hidden waiter
/// meets the passing head whether that head holds or waits in the main row for an owner
/// ahead of it, and a rejoined waiter may wait in the main row behind the head it
/// rejoined under.
#[test]
fn a_waiter_hidden_by_a_short_margin_joins_again_waiting_in_the_main_row() {
    let mut model = one_tick_margin(2, 3, 2);
    model.config = LockConfig {
        wait_in_main_row: true,
        ..model.config.config().clone()
    }
    .validate()
    .expect("a valid configuration");
    model.config = without_margin(&model);
    let checker = check(model.clone());
    checker.assert_any_discovery(FLOORS_HIDE_NO_WAITER);
    checker.assert_any_discovery(HIDDEN_WAITER_REJOINS);
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    assert_eq!(checker.unique_state_count(), 44_270);
}

/// The adaptive margin (docs/algorithm.md, section 8.4; `PollConfig::margin_acquisitions`,
/// on in lock-core), scaled to the model: one acquisition's worth of the time between
/// acquisitions a client measured, at least a microsecond (far under a tick), at most the
/// safe margin (three ticks here, the request timeout). Reads take margins from a
/// microsecond to the safe one as the queue cells they saw were spread and their floors
/// aged; owners passed by a head more than the least margin after them would rejoin.
/// Exclusion and the holders' cells are kept. With two clients no read is hidden: the
/// short margins come from two cells enqueued within a tick, and shorten only polls,
/// whose one other cell is the head itself; the first read of a round, where the fixed
/// zero margin hides a waiter, starts at least the age of its floor (a tick) back.
#[test]
fn an_adaptive_margin_shortens_reads_and_keeps_exclusion() {
    let mut model = one_tick_margin(2, 3, 2);
    model.config = LockConfig {
        poll: PollConfig {
            margin_acquisitions: 1,
            least_queue_margin: Duration::from_micros(1),
            ..model.config.config().poll.clone()
        },
        request_timeout: Duration::from_millis(3),
        ..model.config.config().clone()
    }
    .validate()
    .expect("a valid configuration");
    assert!(model.config.config().adapts_queue_margin());
    let checker = check(model.clone());
    checker.assert_any_discovery(MARGIN_SHORTENED);
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    checker.assert_no_discovery(FLOORS_HIDE_NO_WAITER);
    assert_eq!(checker.unique_state_count(), 26_583);
}

/// `model`'s configuration with [`PollConfig::queue_margin`] at zero: queue reads start at
/// the latest head seen.
fn without_margin(model: &LockModel) -> lock_core::ValidConfig {
    LockConfig {
        poll: PollConfig {
            queue_margin: Some(Duration::ZERO),
            ..model.config.config().poll.clone()
        },
        ..model.config.config().clone()
    }
    .validate()
    .expect("a valid configuration")
}

/// A first acquisition's floor from a head named in the main row (docs/algorithm.md,
/// section "Queue floors and tombstones") hides no enqueued waiter either: three clients, one round each, so every
/// acquisition takes its floor that way, with a one-tick margin. The third client is what
/// can be hidden: the head a main cell names is its writer's own column, which no floor
/// taken from it can pass, but a cell that became visible only after that writer read the
/// queue can sort before it by up to the margin.
#[test]
fn floors_from_the_main_row_hide_no_enqueued_waiter() {
    let checker = check(one_tick_margin(3, 2, 1));
    checker.assert_no_discovery(FLOORS_HIDE_NO_WAITER);
    checker.assert_no_discovery("mutual exclusion");
    assert_eq!(checker.unique_state_count(), 165_310);
}

// The time service (docs/algorithm.md, section "The time service"): lock clients whose clocks follow
// GlobalTime through lock-core's GlobalTimeFollower.

/// A timestamp is at least every update acknowledged before its client's last refresh
/// (reading 2 of Theorem 5 through the follower), never below a GlobalTime its client read,
/// and a client's timestamps never decrease; a timestamp below one another client took
/// earlier is reachable (not guaranteed). On its local clock a client falls behind.
#[test]
fn followed_timestamps_follow_acknowledged_updates_rf3() {
    let mut model = GlobalTimeModel::new(vec![1], 3);
    model.readers = 0;
    model.followers = 2;
    model.refreshes = 1;
    model.stamps = 2;
    model.max_tick = 1;
    let checker = check(model.clone());
    checker.assert_no_discovery(STAMPS_FOLLOW_UPDATES);
    checker.assert_no_discovery("a follower's timestamps never decrease");
    checker.assert_no_discovery("a timestamp is at least every GlobalTime its client has read");
    checker.assert_any_discovery("a followed timestamp runs ahead of the local clock");
    checker.assert_any_discovery(STAMP_BELOW_ANOTHER);
    let count = checker.unique_state_count();
    model.follow_rule = FollowRule::LocalClock;
    let checker = check(model.clone());
    let behind = trace(&model, &checker, STAMPS_FOLLOW_UPDATES);
    assert!(behind.contains("BELOW an update"), "{behind}");
    assert_eq!(count, 74_445);
}

/// Taking each timestamp from the latest read of GlobalTime (the thesis's rule) goes back
/// when a later read misses an update an earlier one saw; the follower never does.
#[test]
fn timestamps_from_the_latest_read_go_back_rf3() {
    let mut model = GlobalTimeModel::new(vec![1], 3);
    model.readers = 0;
    model.followers = 1;
    model.refreshes = 2;
    model.stamps = 2;
    model.max_tick = 0;
    model.follow_rule = FollowRule::LatestRead;
    let checker = check(model.clone());
    let back = trace(&model, &checker, "a follower's timestamps never decrease");
    assert!(back.contains("BELOW its own previous"), "{back}");
    checker.assert_no_discovery(STAMPS_FOLLOW_UPDATES);
    model.follow_rule = FollowRule::Follower;
    let checker = check(model.clone());
    checker.assert_no_discovery("a follower's timestamps never decrease");
    checker.assert_no_discovery(STAMPS_FOLLOW_UPDATES);
    checker.assert_no_discovery("a timestamp is at least every GlobalTime its client has read");
    assert_eq!(checker.unique_state_count(), 912);
}

fn followed(model: &mut LockModel, rule: FollowRule) {
    model.time_service = Some(TimeService {
        ahead_ticks: 2,
        refreshes: 1,
        rule,
    });
}

/// Clients whose clocks follow GlobalTime (a time-service replica two ticks ahead updates it
/// once; each client refreshes once): exclusion, fencing, clean release and the seat
/// property hold, and every queue timestamp is at least every update acknowledged before
/// its client's refresh. On their local clocks the clients fall behind such an update.
#[test]
fn theorem_1_holds_with_clocks_that_follow_global_time() {
    let mut model = mandatory(2, 1);
    model.max_tick = 0;
    followed(&mut model, FollowRule::Follower);
    let checker = check(model.clone());
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("fencing tokens increase from holder to holder");
    checker.assert_no_discovery("no acquisition fails");
    checker.assert_no_discovery(CLEAN_AFTER_RELEASE);
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    checker.assert_no_discovery(QUEUE_TIMES_FOLLOW_UPDATES);
    let count = checker.unique_state_count();
    assert_eq!(count, 64_885);
    followed(&mut model, FollowRule::LocalClock);
    let checker = check(model.clone());
    let behind = trace(&model, &checker, QUEUE_TIMES_FOLLOW_UPDATES);
    assert!(behind.contains("BELOW an update"), "{behind}");
    assert_eq!(count, 64_885);
}

/// Theorem 2 with followed clocks: every client still acquires within the horizon.
#[test]
fn theorem_2_holds_with_clocks_that_follow_global_time() {
    let mut model = mandatory(2, 1);
    urgent(&mut model, 2);
    followed(&mut model, FollowRule::Follower);
    let checker = check(model.clone());
    checker.assert_properties();
    assert_liveness_sound(&model, &checker);
    assert_eq!(checker.unique_state_count(), 108_731);
}

#[test]
fn a_dead_head_waiter_in_the_main_row_delays_the_next_owner_only_for_its_waiter_ttl() {
    // Waiting in the main row, client 1 keeps a main cell while it waits; it carries the
    // waiter TTL, so the bound is the one of a waiter in the queue. Exclusion is checked
    // with those cells expiring and client 1 renewing its cell with lease_ttl to hold.
    let model = LeaseModel::dead_head_waiter_in_main(1, Duration::from_secs(2), 2);
    assert_eq!(dead_waiter_bound_holds(model), 47_707);
}

#[test]
fn a_dead_head_waiter_with_a_lease_long_main_cell_delays_the_next_owner_past_the_bound() {
    // The same with waiter_ttl at lease_ttl (6 s): the waiting main cell carries the lease
    // TTL, as it did before waiting main cells were shortened, and blocks the owner behind
    // beyond the bound.
    dead_waiter_delays_past_the_bound(LeaseModel::dead_head_waiter_in_main(
        1,
        Duration::from_secs(6),
        2,
    ));
}
