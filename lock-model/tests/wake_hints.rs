//! The theorems again with wake-up hints on (`AcquireOptions::wake_hint_listener`,
//! docs/algorithm.md, section "Wake-up hints"): every acquisition names a listener in its
//! queue cell, records the listening owner behind it at its turn and polls at the listening
//! pace; a holder's release also reads the queue for whom to hint
//! (`Lease::release_finding_successors`), one more request the store delivers like any
//! other; and a hint may reach an acquiring client at any moment, any number of times
//! (`LockAction::WakeHint`), so that forged, early, late and repeated hints are all among
//! the runs. A hint carries no authority, so every property must hold as without them.
//!
//! Each check runs with hints off and on: off, the count is the one pinned for the same
//! model elsewhere (the option changes nothing when off); on, it differs, and
//! `HINTED_READ_SENT` is reached, which is the sign that hints ran. With model time frozen
//! (tick 0), a waiter in a poll pause can move only when a hint cuts its pause short.

mod common;

use common::{assert_liveness_sound, check, check_bypass, urgent};
use lock_core::machine::Mode;
use lock_core::{Algorithm, LockConfig};
use lock_model::lock::{
    CLEAN_AFTER_RELEASE, HINTED_READ_SENT, HOLDERS_CELLS_STAY, HintFault, LockModel, lock_config,
};
use lock_model::trace::render_discovery;
use stateright::Checker;

/// `clients` mandatory clients over `replicas` replicas with fencing tokens on, waiting in
/// the main row on or off, wake-up hints on or off.
fn hinted(clients: usize, replicas: usize, wait_in_main_row: bool, hints: bool) -> LockModel {
    let mut model = LockModel::new(Algorithm::Queue, Mode::Mandatory, clients, replicas);
    model.config = LockConfig {
        wait_in_main_row,
        ..lock_config(Algorithm::Queue, true)
    }
    .validate()
    .expect("a valid configuration");
    model.wake_hints = hints;
    model
}

/// The safety properties every check keeps, and with hints on, that some hint brought a
/// read forward.
fn assert_safe(checker: &impl Checker<LockModel>, hints: bool) {
    for property in [
        "mutual exclusion",
        "no acquisition fails",
        "fencing tokens increase from holder to holder",
        HOLDERS_CELLS_STAY,
        CLEAN_AFTER_RELEASE,
    ] {
        checker.assert_no_discovery(property);
    }
    if hints {
        checker.assert_any_discovery(HINTED_READ_SENT);
    }
}

/// The state counts of `states` with hints off, then on.
fn off_and_on(states: impl Fn(bool) -> usize) -> [usize; 2] {
    [states(false), states(true)]
}

/// Theorem 1 with releasing holders: two clients of two rounds each, model time frozen, over
/// `replicas` replicas. Without hints a waiter in a poll pause never reads again at tick 0;
/// with them, it reads whenever a hint comes, so the second rounds run too.
fn exclusion_states(replicas: usize, wait_in_main_row: bool, hints: bool) -> usize {
    let mut model = hinted(2, replicas, wait_in_main_row, hints);
    model.max_tick = 0;
    model.rounds = 2;
    let checker = check(model);
    assert_safe(&checker, hints);
    checker.unique_state_count()
}

/// Theorem 1 with hints: two clients never hold together, a holder's main cell stays its
/// own, tokens increase, and every cell is gone once both are done (the release's queue
/// read included), over one replica, waiting in the main row or not. Off, the first count
/// is the one `tests/linger.rs` gives for the model without lingering (2,217).
#[test]
fn theorem_1_holds_with_wake_hints() {
    let counts: Vec<[usize; 2]> = [false, true]
        .into_iter()
        .map(|wait_in_main_row| off_and_on(|hints| exclusion_states(1, wait_in_main_row, hints)))
        .collect();
    assert_eq!(counts, [[2_217, 7_298], [2_219, 9_144]]);
}

/// Theorem 1 with hints over two replicas, as above (34,320 states without hints, not
/// waiting, as `tests/linger.rs` gives it). Millions of states: run with `--ignored`.
#[test]
#[ignore = "millions of states, several minutes"]
fn theorem_1_holds_with_wake_hints_rf2() {
    let counts: Vec<[usize; 2]> = [false, true]
        .into_iter()
        .map(|wait_in_main_row| off_and_on(|hints| exclusion_states(2, wait_in_main_row, hints)))
        .collect();
    assert_eq!(counts, [[34_320, 371_762], [29_408, 152_549]]);
}

/// Theorem 1 with holders that keep the lock, as `tests/wait_in_main.rs` checks it (225
/// and 3,447 states waiting in the main row): a hinted waiter behind a holder that never
/// leaves reads at once, and finds it still there. Every property holds, the bypass bound
/// and a hinted read are reached.
#[test]
fn theorem_1_holds_with_wake_hints_when_holders_keep_the_lock() {
    let counts: Vec<[usize; 2]> = [(1, true), (2, true), (1, false), (2, false)]
        .into_iter()
        .map(|(replicas, wait_in_main_row)| {
            off_and_on(|hints| {
                let mut model = hinted(2, replicas, wait_in_main_row, hints);
                model.max_tick = 0;
                model.holders_release = false;
                let checker = check(model);
                checker.assert_properties();
                checker.unique_state_count()
            })
        })
        .collect();
    assert_eq!(
        counts,
        [[225, 312], [3_447, 4_424], [150, 176], [1_791, 2_005]]
    );
}

/// Theorem 2 with hints, waiting in the main row off and on: both clients acquire within
/// the horizon that suffices without them, 2 ticks (511 and 491 states without hints, as
/// `tests/theorems.rs` and `tests/wait_in_main.rs` pin them); a hint only ever brings a
/// read forward, and the model stays acyclic (a hinted read raises the operation count).
///
/// It holds because a hint never cuts short the pause after a conflict. When it did (a
/// first version), the checker found with the main-row wait on, at 2, 3 and 4 ticks: c1
/// read the queue before c0's cell landed, took itself for first and waited in the main row
/// behind c0's main cell; c0, first in the queue, found c1's cell, deleted its own and
/// paused; a hint brought c0's read forward, its main cell was back before c1's next read
/// landed, and so on every tick, nobody holding.
#[test]
fn theorem_2_holds_with_wake_hints() {
    let counts = [false, true].map(|wait_in_main_row| {
        off_and_on(|hints| {
            let mut model = hinted(2, 1, wait_in_main_row, hints);
            urgent(&mut model, 2);
            let checker = check(model.clone());
            checker.assert_properties();
            assert_liveness_sound(&model, &checker);
            checker.unique_state_count()
        })
    });
    assert_eq!(counts, [[511, 928], [491, 950]]);
}

/// Bounded bypass with hints, two clients and two rounds, strict timestamps: K = 1 as
/// without them, and the bound is reached. Off: 22,901 states waiting in the main row, as
/// `tests/wait_in_main.rs` pins it, and 22,945 not waiting, as `tests/theorems.rs` does.
#[test]
fn bypass_stays_bounded_by_one_with_wake_hints() {
    let counts: Vec<[usize; 2]> = [false, true]
        .into_iter()
        .map(|wait_in_main_row| {
            off_and_on(|hints| {
                let mut model = hinted(2, 1, wait_in_main_row, hints);
                model.rounds = 2;
                let checker = check_bypass(model, 1);
                checker.assert_any_discovery("bypass bound reached");
                assert_safe(&checker, hints);
                checker.unique_state_count()
            })
        })
        .collect();
    assert_eq!(counts, [[22_945, 213_177], [22_901, 268_531]]);
}

/// Bounded bypass with hints, three clients of one round each: K = 2 as without them.
/// Off: 169,408 states waiting in the main row, as `tests/wait_in_main.rs` pins it, and
/// 166,966 not waiting, as `tests/theorems.rs` does. Millions of states: run with
/// `--ignored`.
#[test]
#[ignore = "millions of states, several minutes"]
fn bypass_stays_bounded_by_two_with_wake_hints() {
    let counts: Vec<[usize; 2]> = [false, true]
        .into_iter()
        .map(|wait_in_main_row| {
            off_and_on(|hints| {
                let checker = check_bypass(hinted(3, 1, wait_in_main_row, hints), 2);
                assert_safe(&checker, hints);
                checker.unique_state_count()
            })
        })
        .collect();
    assert_eq!(counts, [[166_966, 812_722], [169_408, 955_486]]);
}

/// The control: an acquisition that trusts a hint as "the lock is yours"
/// ([`HintFault::Trusted`]) takes the lock behind a holder that never released it, on a
/// hint nobody had reason to send, and the checker sees two holders.
#[test]
fn a_hint_that_grants_the_lock_breaks_mutual_exclusion() {
    let mut model = hinted(2, 1, false, true);
    model.max_tick = 0;
    model.holders_release = false;
    model.hint_fault = Some(HintFault::Trusted);
    let checker = check(model.clone());
    let path = checker.assert_any_discovery("mutual exclusion");
    let trace = render_discovery(&model, "mutual exclusion", path);
    assert!(trace.contains("a wake-up hint reaches"), "{trace}");
    assert!(trace.contains("reads at once"), "{trace}");
    assert_eq!(trace.matches("HOLDS the lock").count(), 2, "{trace}");
}
