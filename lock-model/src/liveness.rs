//! Why stateright's `eventually` properties can be trusted on these models, and a check that
//! the conditions for it hold.
//!
//! stateright 0.31 checks `eventually P` by carrying, along each explored path, the set of
//! `eventually` properties not yet seen to hold, and reporting a property when a path reaches
//! a *terminal* state (one without successors) with the property still in that set. Two
//! shortcuts make this unsound in general, as its documentation and source say: a path that
//! ends in a cycle never reaches a terminal state, so a run that loops forever without `P`
//! is never reported; and a state is expanded only the first time it is reached, with the
//! set of the path that reached it first, so a second path that joins it without having
//! seen `P` is never followed to its end.
//!
//! Both shortcuts are harmless when
//!
//! 1. the model is **acyclic**: some rank strictly increases with every step, so every path
//!    is finite, every maximal path ends in a terminal state, and there is no cycle to hide
//!    a run in; and
//! 2. every `eventually` property is **stable**: a state predicate that, once true, stays true
//!    in every successor. Then a path has seen `P` exactly when `P` holds in its last state,
//!    so the set a state is expanded with depends only on the state, not on the path that
//!    reached it, and joins lose nothing.
//!
//! Under both, stateright reports `eventually P` exactly when some terminal state violates
//! `P`, that is, exactly when some complete run never reaches `P`. [`verify`] checks both
//! conditions on every reachable state and every step of a model (rank up, no `eventually`
//! property true before the step and false after it) and counts the terminal states.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::fmt::Debug;
use std::hash::{Hash, Hasher};

use stateright::{Expectation, Model};

/// A model with a rank that every step strictly increases (a variant function).
pub trait Ranked: Model {
    /// The rank; compared lexicographically when it is a tuple.
    type Rank: Ord + Debug;

    /// The rank of `state`.
    fn rank(&self, state: &Self::State) -> Self::Rank;
}

/// What [`verify`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Explored {
    /// Reachable states (compare with the checker's `unique_state_count`).
    pub states: usize,
    /// Reachable states without successors: the ends of the model's runs.
    pub terminal: usize,
}

/// Explores every reachable state of `model` breadth-first and checks that every step raises
/// the rank and keeps every `eventually` property that held before it. Returns the first
/// step that does not, in words, or what was explored.
pub fn verify<M>(model: &M) -> Result<Explored, String>
where
    M: Ranked,
    M::State: Hash,
    M::Action: Debug,
{
    let eventually: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|property| property.expectation == Expectation::Eventually)
        .collect();
    let mut seen = HashSet::new();
    let mut pending = VecDeque::new();
    for state in model.init_states() {
        if seen.insert(fingerprint(&state)) {
            pending.push_back(state);
        }
    }
    let mut actions = Vec::new();
    let mut terminal = 0;
    while let Some(state) = pending.pop_front() {
        let rank = model.rank(&state);
        model.actions(&state, &mut actions);
        let mut successors = 0;
        for action in actions.drain(..) {
            let step = model.format_action(&action);
            let Some(next) = model.next_state(&state, action) else {
                continue;
            };
            successors += 1;
            let next_rank = model.rank(&next);
            if next_rank <= rank {
                return Err(format!(
                    "step {step:?} does not raise the rank: {rank:?} to {next_rank:?}"
                ));
            }
            for property in &eventually {
                if (property.condition)(model, &state) && !(property.condition)(model, &next) {
                    return Err(format!(
                        "step {step:?} makes {:?} false again",
                        property.name
                    ));
                }
            }
            if seen.insert(fingerprint(&next)) {
                pending.push_back(next);
            }
        }
        if successors == 0 {
            terminal += 1;
        }
    }
    Ok(Explored {
        states: seen.len(),
        terminal,
    })
}

/// A 64-bit fingerprint of a state, as stateright keeps (collisions are as unlikely as in
/// the checker itself).
fn fingerprint<T: Hash>(value: &T) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use stateright::{Checker, Property};

    use super::*;

    /// Counts 0, 1, 2, 3 and stops, or with `wrap` counts 0, 1, 2, 0, ... for ever.
    struct Counter {
        wrap: bool,
    }

    impl Model for Counter {
        type State = u8;
        type Action = ();

        fn init_states(&self) -> Vec<u8> {
            vec![0]
        }

        fn actions(&self, state: &u8, actions: &mut Vec<()>) {
            if self.wrap || *state < 3 {
                actions.push(());
            }
        }

        fn next_state(&self, state: &u8, _: ()) -> Option<u8> {
            Some(if self.wrap {
                (state + 1) % 3
            } else {
                state + 1
            })
        }

        fn properties(&self) -> Vec<Property<Self>> {
            vec![
                Property::eventually("reaches 2", |_, state| *state >= 2),
                Property::eventually("reaches 5", |_, state| *state >= 5),
            ]
        }
    }

    impl Ranked for Counter {
        type Rank = u8;

        fn rank(&self, state: &u8) -> u8 {
            *state
        }
    }

    #[test]
    fn an_acyclic_model_with_stable_properties_passes() {
        let model = Counter { wrap: false };
        assert_eq!(
            verify(&model),
            Ok(Explored {
                states: 4,
                terminal: 1
            })
        );
        let checker = model.checker().spawn_bfs().join();
        checker.assert_no_discovery("reaches 2");
        checker.assert_any_discovery("reaches 5");
    }

    #[test]
    fn a_cycle_is_caught_although_stateright_misses_the_run_that_never_reaches_5() {
        let model = Counter { wrap: true };
        let error = verify(&model).expect_err("the counter wraps");
        assert!(error.contains("does not raise the rank"), "{error}");
        let checker = model.checker().spawn_bfs().join();
        checker.assert_no_discovery("reaches 5");
    }

    /// Like [`Counter`], but "at 2" holds only at 2 and is lost at 3.
    struct Unstable;

    impl Model for Unstable {
        type State = u8;
        type Action = ();

        fn init_states(&self) -> Vec<u8> {
            vec![0]
        }

        fn actions(&self, state: &u8, actions: &mut Vec<()>) {
            if *state < 3 {
                actions.push(());
            }
        }

        fn next_state(&self, state: &u8, _: ()) -> Option<u8> {
            Some(state + 1)
        }

        fn properties(&self) -> Vec<Property<Self>> {
            vec![Property::eventually("at 2", |_, state| *state == 2)]
        }
    }

    impl Ranked for Unstable {
        type Rank = u8;

        fn rank(&self, state: &u8) -> u8 {
            *state
        }
    }

    #[test]
    fn a_property_that_becomes_false_again_is_caught() {
        let error = verify(&Unstable).expect_err("at 2 is lost at 3");
        assert!(error.contains("makes \"at 2\" false again"), "{error}");
    }
}
