//! Readable counterexample traces.

use stateright::{Model, Path};

/// A model that can say in words what one step did.
pub trait Describe: Model {
    /// One line for the step from `last` by `action` to `next`.
    fn describe(&self, last: &Self::State, action: &Self::Action, next: &Self::State) -> String;
}

/// The steps of `path`, one line each, numbered.
pub fn render<M: Describe>(model: &M, path: Path<M::State, M::Action>) -> String {
    let steps = path.into_vec();
    let mut text = String::new();
    for (number, window) in steps.windows(2).enumerate() {
        let (last, Some(action)) = (&window[0].0, &window[0].1) else {
            continue;
        };
        let next = &window[1].0;
        text.push_str(&format!(
            "{:>3}. {}\n",
            number + 1,
            model.describe(last, action, next)
        ));
    }
    text
}
