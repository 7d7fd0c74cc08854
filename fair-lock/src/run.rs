//! Runs one machine against a storage backend, following the loop contract of
//! [`lock_core::machine`].

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

use lock_core::error::Error;
use lock_core::machine::Machine;
use lock_core::storage::{LockStorage, RowKey, StorageRequest, StorageResponse};
use lock_core::time::MonotonicTime;

use super::clock::Clock;
use super::fine_timer::FineSleep;
use super::metrics::{LockMetrics, RequestKind};
use super::wake::HintLink;

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
        match self.send(request).await {
            Sent::Answered(result) => result,
            Sent::Pending(pending) => self.wait(pending).await,
        }
    }

    /// Hands `request` to the backend and polls its answer once: an in-memory backend
    /// answers at once, and then neither a timeout timer nor a slot among the requests in
    /// flight is needed. Always ready on its first poll.
    async fn send(&self, request: StorageRequest) -> Sent<'_> {
        let started = self.metrics.map(|_| self.clock.now().instant);
        let kind = RequestKind::of(&request);
        // Described only if it times out: formatting every request costs more than the
        // simulated cluster takes to serve it.
        let (verb, row) = (request.verb(), request.row().clone());
        let mut answer = self.storage.execute(request);
        match futures::poll!(&mut answer) {
            Poll::Ready(result) => Sent::Answered(self.measured(kind, started, result)),
            Poll::Pending => Sent::Pending(PendingAnswer {
                answer,
                kind,
                started,
                verb,
                row,
            }),
        }
    }

    /// Waits up to `request_timeout` for an answer that did not come at once.
    async fn wait(&self, pending: PendingAnswer<'_>) -> Result<StorageResponse, Error> {
        let timeout = self.request_timeout;
        let result =
            match tokio::time::timeout(self.clock.timer_duration(timeout), pending.answer).await {
                Ok(result) => result,
                Err(_) => Err(Error::outcome_unknown(
                    format!("{} {}", pending.verb, pending.row),
                    format!("no answer within request_timeout ({timeout:?})"),
                )),
            };
        self.measured(pending.kind, pending.started, result)
    }

    fn measured(
        &self,
        kind: RequestKind,
        started: Option<MonotonicTime>,
        result: Result<StorageResponse, Error>,
    ) -> Result<StorageResponse, Error> {
        if let (Some(metrics), Some(started)) = (self.metrics, started) {
            let took = self.clock.now().instant.saturating_duration_since(started);
            metrics.storage_request(kind, took, result.as_ref().err());
        }
        result
    }

    /// Drives `machine` until it produces its outcome or `stop` completes. `observe` sees
    /// the machine after every event, to publish its state.
    ///
    /// An answer that arrives at once is handed to the machine at once, before its next
    /// request is taken: the machines accept events between any two calls.
    pub(crate) async fn drive<M, F>(
        &self,
        machine: &mut M,
        stop: F,
        observe: impl FnMut(&M),
    ) -> Driven<M::Outcome, F::Output>
    where
        M: Machine,
        F: Future,
    {
        self.drive_hinted(machine, stop, observe, None).await
    }

    /// [`Context::drive`], also handing the machine every wake-up hint `hints` receives
    /// and sending the ones it wants sent.
    pub(crate) async fn drive_hinted<M, F>(
        &self,
        machine: &mut M,
        stop: F,
        mut observe: impl FnMut(&M),
        hints: Option<HintLink<'_>>,
    ) -> Driven<M::Outcome, F::Output>
    where
        M: Machine,
        F: Future,
    {
        let mut in_flight = None;
        let mut stop = std::pin::pin!(stop);
        loop {
            while let Some(outgoing) = machine.poll_request() {
                match self.send(outgoing.request).await {
                    Sent::Answered(response) => {
                        machine.handle_response(self.clock.now(), outgoing.id, response);
                    }
                    Sent::Pending(pending) => in_flight
                        .get_or_insert_with(FuturesUnordered::new)
                        .push(async move { (outgoing.id, self.wait(pending).await) }),
                }
            }
            if let Some(hints) = hints {
                while let Some((to, hint)) = machine.poll_wake_hint() {
                    hints.transport.send(to, hint.encode());
                }
            }
            observe(machine);
            if let Some(outcome) = machine.poll_outcome() {
                return Driven::Outcome(outcome);
            }
            let deadline = machine.poll_timeout();
            let waiting = in_flight
                .as_ref()
                .is_some_and(|in_flight: &FuturesUnordered<_>| !in_flight.is_empty());
            if !waiting && deadline.is_none() {
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
                Some((id, response)) = next_answer(&mut in_flight), if waiting => {
                    machine.handle_response(self.clock.now(), id, response);
                }
                () = sleep_until(self.clock, deadline) => machine.handle_timeout(self.clock.now()),
                () = hinted(hints) => machine.handle_wake_hint(self.clock.now()),
            }
        }
    }

    /// Runs `machine` to its outcome, with no way to stop it early.
    pub(crate) async fn run<M: Machine>(&self, machine: &mut M) -> Result<M::Outcome, Error> {
        self.run_hinted(machine, None).await
    }

    /// [`Context::run`], also handing the machine every wake-up hint `hints` receives and
    /// sending the ones it wants sent.
    pub(crate) async fn run_hinted<M: Machine>(
        &self,
        machine: &mut M,
        hints: Option<HintLink<'_>>,
    ) -> Result<M::Outcome, Error> {
        let never = std::future::pending::<()>();
        match self.drive_hinted(machine, never, |_| {}, hints).await {
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

/// A request handed to the backend.
enum Sent<'a> {
    /// Answered on the first poll.
    Answered(Result<StorageResponse, Error>),
    /// Still on its way.
    Pending(PendingAnswer<'a>),
}

/// An answer still on its way, with what is needed to time it out and measure it.
struct PendingAnswer<'a> {
    answer: BoxFuture<'a, Result<StorageResponse, Error>>,
    kind: RequestKind,
    started: Option<MonotonicTime>,
    verb: &'static str,
    row: RowKey,
}

/// The next answer among the requests in flight (there are some, or this never completes).
async fn next_answer<F: Future>(in_flight: &mut Option<FuturesUnordered<F>>) -> Option<F::Output> {
    match in_flight {
        Some(in_flight) => in_flight.next().await,
        None => std::future::pending().await,
    }
}

/// The next hint for a registered acquisition, or never without one.
async fn hinted(hints: Option<HintLink<'_>>) {
    match hints {
        Some(hints) => hints.registration.hinted().await,
        None => std::future::pending().await,
    }
}

/// The longest pause the fine timer serves: Tokio wakes a longer one at most 2 % late.
const FINE_TIMER_LONGEST_PAUSE: Duration = Duration::from_millis(100);

/// Sleeps until `clock` reaches `deadline`, or forever without one: on Tokio's timer, or,
/// for a clock that follows real time and a pause of at most
/// [`FINE_TIMER_LONGEST_PAUSE`], on the finer one of [`super::fine_timer`] once the clock
/// shows the deadline passed.
async fn sleep_until(clock: &dyn Clock, deadline: Option<MonotonicTime>) {
    let Some(deadline) = deadline else {
        return std::future::pending().await;
    };
    let pause = deadline.saturating_duration_since(clock.now().instant);
    let coarse = tokio::time::sleep(clock.timer_duration(pause));
    if !clock.follows_real_time() || pause > FINE_TIMER_LONGEST_PAUSE {
        return coarse.await;
    }
    let mut coarse = std::pin::pin!(coarse);
    let fine = FineSleep::until(std::time::Instant::now() + pause);
    tokio::select! {
        biased;
        () = &mut coarse => return,
        () = fine => {}
    }
    if clock.now().instant < deadline {
        coarse.await;
    }
}
