//! The theorems again with the two-round-trip fast path on (docs/algorithm.md, section "The two-round-trip fast path"):
//! on every mandatory acquisition ([`LockModel::fast_path_always`], the harshest setting,
//! where a newcomer's main cell can meet a head that is taking the lock), and as lock-core's
//! locker uses it (`fast_path` in the configuration: after an acquisition that found the
//! lock idle). State counts are pinned as in `theorems.rs`; each differs from the count of
//! the same model without the fast path, which is the sign that it ran.

mod common;

use std::time::Duration;

use common::{assert_liveness_sound, check, check_bypass, urgent};
use lock_core::machine::Mode;
use lock_core::{Algorithm, LockConfig};
use lock_model::lock::{
    CLEAN_AFTER_RELEASE, FLOORS_HIDE_NO_WAITER, HOLDERS_CELLS_STAY, LockModel, lock_config,
};
use stateright::Checker;

/// `clients` mandatory clients over `replicas` replicas, every acquisition on the fast path.
fn always(clients: usize, replicas: usize) -> LockModel {
    let mut model = LockModel::new(Algorithm::Queue, Mode::Mandatory, clients, replicas);
    model.fast_path_always = true;
    model
}

/// As the locker does: the fast path after an acquisition that found the lock idle.
fn as_the_locker_does(model: &mut LockModel, config: LockConfig) {
    model.config = LockConfig {
        fast_path: true,
        ..config
    }
    .validate()
    .expect("a valid configuration");
}

/// Theorem 1: two clients both on the fast path never hold together, over one replica
/// and over two (with QUORUM, both); 432 and 7,603 states.
#[test]
fn theorem_1_holds_with_the_fast_path() {
    let counts: Vec<usize> = [1, 2]
        .into_iter()
        .map(|replicas| {
            let mut model = always(2, replicas);
            model.max_tick = 0;
            model.holders_release = false;
            let checker = check(model);
            checker.assert_properties();
            checker.unique_state_count()
        })
        .collect();
    assert_eq!(counts, [432, 7_603]);
}

/// Theorem 1 over three replicas, where two quorums share one replica, without fencing
/// tokens (31,545 states without the fast path; with tokens, 3,069,898 states, too many for
/// every CI run: `lock-model check 2 3 --ticks 0 --no-release --fast-path-always`).
#[test]
fn theorem_1_holds_with_the_fast_path_rf3() {
    let mut model = always(2, 3);
    model.config = lock_config(Algorithm::Queue, false)
        .validate()
        .expect("a valid configuration");
    model.max_tick = 0;
    model.holders_release = false;
    let checker = check(model);
    checker.assert_properties();
    assert_eq!(checker.unique_state_count(), 2_048_830);
}

/// Theorem 2: every client acquires, although each newcomer's fast-path main cell can send
/// the head back once (511 states without the fast path).
#[test]
fn theorem_2_holds_with_the_fast_path() {
    let mut model = always(2, 1);
    urgent(&mut model, 2);
    let checker = check(model.clone());
    checker.assert_properties();
    assert_liveness_sound(&model, &checker);
    assert_eq!(checker.unique_state_count(), 1_268);
}

/// Theorem 2 with three clients: a head knocked back by two newcomers still acquires (and
/// is passed at most twice, as without the fast path).
#[test]
fn theorem_2_holds_with_the_fast_path_and_a_head_knocked_back_twice() {
    let mut model = always(3, 1);
    urgent(&mut model, 3);
    model.bypass_bound = 2;
    let checker = check(model.clone());
    checker.assert_properties();
    assert_liveness_sound(&model, &checker);
    assert_eq!(checker.unique_state_count(), 81_907);
}

/// Bounded bypass, two clients and two rounds each, strict timestamps: a fast-path owner
/// holds only if the queue shows it first, so it passes nobody that the normal path would
/// not (22,945 states without the fast path).
#[test]
fn bypass_stays_bounded_by_one_with_the_fast_path() {
    let mut model = always(2, 1);
    model.rounds = 2;
    let checker = check_bypass(model, 1);
    checker.assert_any_discovery("bypass bound reached");
    assert_eq!(checker.unique_state_count(), 138_481);
}

/// Bounded bypass with three clients (166,966 states without the fast path).
#[test]
fn bypass_stays_bounded_by_two_with_the_fast_path() {
    let checker = check_bypass(always(3, 1), 2);
    assert_eq!(checker.unique_state_count(), 678_706);
}

/// As the locker uses it, over two rounds: fencing tokens increase, releases leave nothing
/// behind, and a holder's main cell stays its own (38,046 states without the fast path).
#[test]
fn fencing_and_release_hold_when_the_locker_takes_the_fast_path_rf3() {
    let mut model = LockModel::new(Algorithm::Queue, Mode::Mandatory, 1, 3);
    as_the_locker_does(&mut model, lock_config(Algorithm::Queue, true));
    model.max_tick = 0;
    model.rounds = 2;
    let checker = check(model);
    checker.assert_no_discovery("fencing tokens increase from holder to holder");
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("no acquisition fails");
    checker.assert_no_discovery(CLEAN_AFTER_RELEASE);
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    assert_eq!(checker.unique_state_count(), 48_362);
}

/// As the locker uses it, two clients over two rounds with queue floors: no floor hides an
/// enqueued waiter, bypass stays bounded (22,945 states without the fast path).
#[test]
fn floors_and_bypass_hold_when_the_locker_takes_the_fast_path() {
    let mut model = LockModel::new(Algorithm::Queue, Mode::Mandatory, 2, 1);
    urgent(&mut model, 3);
    model.rounds = 2;
    model.strict_timestamps = true;
    as_the_locker_does(
        &mut model,
        LockConfig {
            max_clock_skew: Duration::ZERO,
            request_timeout: Duration::from_millis(1),
            ..lock_config(Algorithm::Queue, true)
        },
    );
    let checker = check(model);
    checker.assert_no_discovery(FLOORS_HIDE_NO_WAITER);
    checker.assert_no_discovery(HOLDERS_CELLS_STAY);
    checker.assert_no_discovery("mutual exclusion");
    checker.assert_no_discovery("bypass bounded");
    assert_eq!(checker.unique_state_count(), 70_403);
}
