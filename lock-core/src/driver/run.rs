//! Runs one machine against a storage backend, following the loop contract of
//! [`crate::machine`].

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::error::Error;
use crate::machine::Machine;
use crate::storage::{LockStorage, StorageRequest, StorageResponse};
use crate::time::Instant;

use super::clock::Clock;
use super::metrics::{LockMetrics, RequestKind};

/// What running a machine needs: where to send requests, how long to wait for each, the
/// clock, and who hears about each request.
pub(crate) struct Context<'a, S: ?Sized> {
    pub(crate) storage: &'a S,
    pub(crate) clock: &'a dyn Clock,
    pub(crate) request_timeout: Duration,
    pub(crate) metrics: Option<&'a dyn LockMetrics>,
}

impl<S: LockStorage + ?Sized> Context<'_, S> {
    /// Sends one request, turning a timeout into [`Error::StorageOutcomeUnknown`].
    pub(crate) async fn execute(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        let started = self.metrics.map(|_| tokio::time::Instant::now());
        let kind = RequestKind::of(&request);
        // Described only if it times out: formatting every request costs more than the
        // simulated cluster takes to serve it.
        let (verb, row) = (request.verb(), request.row().clone());
        let timeout = self.request_timeout;
        let mut answer = self.storage.execute(request);
        // Polled once before the timer is set up: an in-memory backend answers at once, and
        // arming a timer it never needs costs more than its answer.
        let result = match futures::poll!(&mut answer) {
            Poll::Ready(result) => result,
            Poll::Pending => match tokio::time::timeout(timeout, answer).await {
                Ok(result) => result,
                Err(_) => Err(Error::outcome_unknown(
                    format!("{verb} {row}"),
                    format!("no answer within request_timeout ({timeout:?})"),
                )),
            },
        };
        if let (Some(metrics), Some(started)) = (self.metrics, started) {
            metrics.storage_request(kind, started.elapsed(), result.as_ref().err());
        }
        result
    }

    /// Drives `machine` until it produces its outcome or `stop` completes. `observe` sees
    /// the machine after every event, to publish its state.
    pub(crate) async fn drive<M, F>(
        &self,
        machine: &mut M,
        stop: F,
        mut observe: impl FnMut(&M),
    ) -> Driven<M::Outcome, F::Output>
    where
        M: Machine,
        F: Future,
    {
        let mut in_flight = FuturesUnordered::new();
        let mut stop = std::pin::pin!(stop);
        loop {
            while let Some(outgoing) = machine.poll_request() {
                in_flight.push(async move { (outgoing.id, self.execute(outgoing.request).await) });
            }
            observe(machine);
            if let Some(outcome) = machine.poll_outcome() {
                return Driven::Outcome(outcome);
            }
            let deadline = machine.poll_timeout();
            if in_flight.is_empty() && deadline.is_none() {
                tracing::error!(
                    "a lock state machine waits for nothing; this is a bug in lock-core"
                );
                return Driven::Stalled;
            }
            // Biased, so that a run on a paused clock replays exactly: a stop request comes
            // first, then a response, then a timer due at the same instant.
            tokio::select! {
                biased;
                stopped = &mut stop => return Driven::Stopped(stopped),
                Some((id, response)) = in_flight.next(), if !in_flight.is_empty() => {
                    machine.handle_response(self.clock.now(), id, response);
                }
                () = sleep_until(self.clock, deadline) => machine.handle_timeout(self.clock.now()),
            }
        }
    }

    /// Runs `machine` to its outcome, with no way to stop it early.
    pub(crate) async fn run<M: Machine>(&self, machine: &mut M) -> Result<M::Outcome, Error> {
        let never = std::future::pending::<()>();
        match self.drive(machine, never, |_| {}).await {
            Driven::Outcome(outcome) => Ok(outcome),
            Driven::Stopped(()) | Driven::Stalled => Err(Error::Internal(
                "a lock state machine stopped waiting before it finished",
            )),
        }
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
