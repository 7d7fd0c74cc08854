//! The theorems again with waiting in the main row on (`LockConfig::wait_in_main_row`,
//! docs/algorithm.md, section "Waiting in the main row"): a holder leaves the queue as soon as it holds, and the
//! owner then first in the queue writes its main cell and, finding there only the cells of
//! owners that were ahead of it, keeps it and polls the main row. State counts are pinned
//! as in `theorems.rs`; each differs from the count of the same model without the option,
//! which is the sign that it ran.

mod common;

use std::time::Duration;

use common::{assert_liveness_sound, check, check_bypass, urgent};
use lock_core::machine::Mode;
use lock_core::{Algorithm, LockConfig};
use lock_model::lock::{
    CLEAN_AFTER_RELEASE, FLOORS_HIDE_NO_WAITER, HOLDERS_CELLS_STAY, LockModel, lock_config,
};
use stateright::Checker;

/// The model's configuration with fencing tokens on or off, waiting in the main row on.
fn waiting_config(fencing: bool) -> LockConfig {
    LockConfig {
        wait_in_main_row: true,
        ..lock_config(Algorithm::Queue, fencing)
    }
}

/// `clients` clients in `mode` over `replicas` replicas, waiting in the main row, with
/// fencing tokens on or off (with tokens the holder leaves the queue with its fence read;
/// without, its lease leaves it).
fn waiting(mode: Mode, clients: usize, replicas: usize, fencing: bool) -> LockModel {
    let mut model = LockModel::new(Algorithm::Queue, mode, clients, replicas);
    model.config = waiting_config(fencing)
        .validate()
        .expect("a valid configuration");
    model
}

/// The states of a Theorem 1 check (two clients, model time frozen, holders that keep the
/// lock) over `replicas` replicas, with or without fencing tokens.
fn exclusion_states(replicas: usize, fencing: bool) -> usize {
    let mut model = waiting(Mode::Mandatory, 2, replicas, fencing);
    model.max_tick = 0;
    model.holders_release = false;
    let checker = check(model);
    checker.assert_properties();
    checker.unique_state_count()
}

/// Theorem 1: two clients never hold together, over one replica and two, with and without
/// fencing tokens.
#[test]
fn theorem_1_holds_waiting_in_the_main_row() {
    let counts: Vec<usize> = [(1, true), (2, true), (1, false), (2, false)]
        .into_iter()
        .map(|(replicas, fencing)| exclusion_states(replicas, fencing))
        .collect();
    assert_eq!(counts, [225, 3_447, 151, 1_755]);
}

/// Theorem 1 over three replicas, where two quorums share one replica (70,749 states with
/// fencing and 31,545 without, when nobody waits in the main row).
#[test]
fn theorem_1_holds_waiting_in_the_main_row_rf3() {
    let counts = [exclusion_states(3, true), exclusion_states(3, false)];
    assert_eq!(counts, [271_467, 82_656]);
}

/// Theorem 2: every client acquires, with and without fencing tokens (511 states with
/// tokens when nobody waits in the main row).
#[test]
fn theorem_2_holds_waiting_in_the_main_row() {
    let counts: Vec<usize> = [true, false]
        .into_iter()
        .map(|fencing| {
            let mut model = waiting(Mode::Mandatory, 2, 1, fencing);
            urgent(&mut model, 2);
            let checker = check(model.clone());
            checker.assert_properties();
            assert_liveness_sound(&model, &checker);
            checker.unique_state_count()
        })
        .collect();
    assert_eq!(counts, [491, 1_120]);
}

/// Theorem 2 with three clients, two of them able to wait in the main row behind the
/// holder one after the other. The horizon is one tick longer than the bypass checks' for
/// three clients without the option: a waiter in the main row paces its reads as the owner
/// next in line does, and having seen no departure it takes the holder for one that holds
/// long and reads less often, which the model's coarse ticks round up.
#[test]
fn theorem_2_holds_waiting_in_the_main_row_with_three_clients() {
    let mut model = waiting(Mode::Mandatory, 3, 1, false);
    urgent(&mut model, 4);
    model.bypass_bound = 2;
    let checker = check(model.clone());
    checker.assert_properties();
    assert_liveness_sound(&model, &checker);
    assert_eq!(checker.unique_state_count(), 55_282);
}

/// Bounded bypass, two clients and two rounds each, strict timestamps (22,945 states when
/// nobody waits in the main row).
#[test]
fn bypass_stays_bounded_by_one_waiting_in_the_main_row() {
    let mut model = waiting(Mode::Mandatory, 2, 1, true);
    model.rounds = 2;
    let checker = check_bypass(model, 1);
    checker.assert_any_discovery("bypass bound reached");
    assert_eq!(checker.unique_state_count(), 22_901);
}

/// Bounded bypass with three clients (166,966 states when nobody waits in the main row).
#[test]
fn bypass_stays_bounded_by_two_waiting_in_the_main_row() {
    let checker = check_bypass(waiting(Mode::Mandatory, 3, 1, true), 2);
    assert_eq!(checker.unique_state_count(), 169_408);
}

/// One client over two rounds at RF 3: fencing tokens increase, releases leave nothing
/// behind (the queue cell left when the lock was taken included), and a holder's main cell
/// stays its own (38,046 states when nobody waits in the main row).
#[test]
fn fencing_and_release_hold_when_holders_leave_the_queue_rf3() {
    let counts: Vec<usize> = [true, false]
        .into_iter()
        .map(|fencing| {
            let mut model = waiting(Mode::Mandatory, 1, 3, fencing);
            model.max_tick = 0;
            model.rounds = 2;
            let checker = check(model);
            checker.assert_no_discovery("fencing tokens increase from holder to holder");
            checker.assert_no_discovery("mutual exclusion");
            checker.assert_no_discovery("no acquisition fails");
            checker.assert_no_discovery(CLEAN_AFTER_RELEASE);
            checker.assert_no_discovery(HOLDERS_CELLS_STAY);
            checker.unique_state_count()
        })
        .collect();
    assert_eq!(counts, [34_113, 212_835]);
}

/// Two clients over two rounds with queue floors: no floor hides an enqueued waiter, and
/// bypass stays bounded (22,945 states when nobody waits in the main row).
#[test]
fn floors_and_bypass_hold_waiting_in_the_main_row() {
    let mut model = LockModel::new(Algorithm::Queue, Mode::Mandatory, 2, 1);
    urgent(&mut model, 3);
    model.rounds = 2;
    model.strict_timestamps = true;
    model.config = LockConfig {
        max_clock_skew: Duration::ZERO,
        request_timeout: Duration::from_millis(1),
        ..waiting_config(true)
    }
    .validate()
    .expect("a valid configuration");
    let checker = check(model);
    checker.assert_no_discovery(FLOORS_HIDE_NO_WAITER);
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("bypass bounded");
    assert_eq!(checker.unique_state_count(), 22_901);
}

/// Theorems 3 and 4: soft clients never wait in the main row, but their holders leave the
/// queue (179,190 states when they do not).
#[test]
fn theorems_3_and_4_hold_when_holders_leave_the_queue_rf3() {
    let mut model = waiting(Mode::Soft, 2, 3, true);
    model.holders_release = false;
    urgent(&mut model, 2);
    let checker = check(model.clone());
    checker.assert_properties();
    assert_liveness_sound(&model, &checker);
    assert_eq!(checker.unique_state_count(), 947_367);
}
