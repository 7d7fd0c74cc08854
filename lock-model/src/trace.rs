//! Readable counterexample traces.

use stateright::{Expectation, Model, Path};

/// A model that can say in words what one step did.
pub trait Describe: Model {
    /// One line for the step from `last` by `action` to `next`.
    fn describe(&self, last: &Self::State, action: &Self::Action, next: &Self::State) -> String;
}

/// The path that stateright reports for `property`, one numbered line per step, up to the
/// first state that shows the property: for an `always` property the first state where it
/// is false, for a `sometimes` property the first where it is true, for an `eventually`
/// property (or a name the model does not have) the whole path, which for `eventually` ends
/// in the terminal state where the property still does not hold.
///
/// stateright keeps the last path it found for a property, not the first, and a violated
/// `always` property usually stays violated in every later state (the models record
/// violations in ghost variables), so without the cut a trace can run on well past the step
/// that matters.
pub fn render_discovery<M: Describe>(
    model: &M,
    property: &str,
    path: Path<M::State, M::Action>,
) -> String {
    let mut steps = path.into_vec();
    if let Some(property) = model
        .properties()
        .into_iter()
        .find(|candidate| candidate.name == property)
    {
        let shows = |state: &M::State| match property.expectation {
            Expectation::Always => !(property.condition)(model, state),
            Expectation::Sometimes => (property.condition)(model, state),
            Expectation::Eventually => false,
        };
        if let Some(end) = steps.iter().position(|(state, _)| shows(state)) {
            steps.truncate(end + 1);
        }
    }
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
