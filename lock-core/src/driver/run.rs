//! Runs one machine against a storage backend, following the loop contract of
//! [`crate::machine`].

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::error::Error;
use crate::machine::Machine;
use crate::storage::{LockStorage, StorageRequest, StorageResponse};
use crate::time::Instant;

use super::clock::Clock;

/// Sends one request, turning a timeout into [`Error::StorageOutcomeUnknown`].
pub(crate) async fn execute<S: LockStorage + ?Sized>(
    storage: &S,
    request: StorageRequest,
    request_timeout: Duration,
) -> Result<StorageResponse, Error> {
    let operation = request.describe();
    match tokio::time::timeout(request_timeout, storage.execute(request)).await {
        Ok(result) => result,
        Err(_) => Err(Error::outcome_unknown(
            operation,
            format!("no answer within request_timeout ({request_timeout:?})"),
        )),
    }
}

/// How a drive ended.
pub(crate) enum Driven<O, T> {
    /// The machine produced its outcome.
    Outcome(O),
    /// The `stop` future completed first, with this output.
    Stopped(T),
    /// The machine waited for nothing (a bug in lock-core).
    Stalled,
}

/// Drives `machine` until it produces its outcome or `stop` completes. `observe` sees the
/// machine after every event, to publish its state.
pub(crate) async fn drive<M, S, F>(
    machine: &mut M,
    storage: &S,
    clock: &dyn Clock,
    request_timeout: Duration,
    stop: F,
    mut observe: impl FnMut(&M),
) -> Driven<M::Outcome, F::Output>
where
    M: Machine,
    S: LockStorage + ?Sized,
    F: Future,
{
    let mut in_flight = FuturesUnordered::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        while let Some(outgoing) = machine.poll_request() {
            in_flight.push(async move {
                let response = execute(storage, outgoing.request, request_timeout).await;
                (outgoing.id, response)
            });
        }
        observe(machine);
        if let Some(outcome) = machine.poll_outcome() {
            return Driven::Outcome(outcome);
        }
        let deadline = machine.poll_timeout();
        if in_flight.is_empty() && deadline.is_none() {
            tracing::error!("a lock state machine waits for nothing; this is a bug in lock-core");
            return Driven::Stalled;
        }
        tokio::select! {
            stopped = &mut stop => return Driven::Stopped(stopped),
            Some((id, response)) = in_flight.next(), if !in_flight.is_empty() => {
                machine.handle_response(clock.now(), id, response);
            }
            () = sleep_until(clock, deadline) => machine.handle_timeout(clock.now()),
        }
    }
}

/// Runs `machine` to its outcome, with no way to stop it early.
pub(crate) async fn run<M, S>(
    machine: &mut M,
    storage: &S,
    clock: &dyn Clock,
    request_timeout: Duration,
) -> Result<M::Outcome, Error>
where
    M: Machine,
    S: LockStorage + ?Sized,
{
    let never = std::future::pending::<()>();
    match drive(machine, storage, clock, request_timeout, never, |_| {}).await {
        Driven::Outcome(outcome) => Ok(outcome),
        Driven::Stopped(()) | Driven::Stalled => Err(Error::Internal(
            "a lock state machine stopped waiting before it finished",
        )),
    }
}

/// Sleeps on Tokio's timer until `clock` reaches `deadline`, or forever without one.
async fn sleep_until(clock: &dyn Clock, deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => {
            let pause = deadline.saturating_duration_since(clock.now().instant);
            tokio::time::sleep(pause).await;
        }
        None => std::future::pending().await,
    }
}
