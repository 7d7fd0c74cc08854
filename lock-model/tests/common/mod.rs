//! Helpers the model test files share.

use lock_model::clock::{TimeRule, TimeoutRule};
use lock_model::liveness;
use lock_model::lock::LockModel;
use stateright::{Checker, Model};

/// Explores every state of `model` breadth-first.
pub fn check<M>(model: M) -> impl Checker<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    model.checker().spawn_bfs().join()
}

/// The liveness time rule: time advances only when nothing else is urgent, timeouts fire
/// only on a quiet network, up to tick `max_tick`.
pub fn urgent(model: &mut LockModel, max_tick: u32) {
    model.time = TimeRule::Urgent { hold_ticks: 0 };
    model.timeouts = TimeoutRule::QuietNetwork;
    model.max_tick = max_tick;
}

/// Checks that `model` is acyclic and its `eventually` properties stable, so that the
/// checker's verdict on them is sound (see `lock_model::liveness`), and that the checker saw
/// every state.
pub fn assert_liveness_sound(model: &LockModel, checker: &impl Checker<LockModel>) {
    let explored = liveness::verify(model).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(explored.states, checker.unique_state_count());
    assert!(explored.terminal > 0);
}

/// Checks bounded bypass: `model` under the liveness time rule up to tick 3, with strict
/// timestamps and `bound`, passes no owner more than `bound` times and keeps mutual
/// exclusion. Returns the checker, for the test's own counts and discoveries.
pub fn check_bypass(mut model: LockModel, bound: u8) -> impl Checker<LockModel> {
    urgent(&mut model, 3);
    model.strict_timestamps = true;
    model.bypass_bound = bound;
    let checker = check(model);
    checker.assert_no_discovery("bypass bounded");
    checker.assert_no_discovery("mutual exclusion");
    checker
}
