//! Bookkeeping shared by the acquisition machines (queue and baseline).

use crate::column::ColumnName;
use crate::config::ValidConfig;
use crate::error::Error;
use crate::storage::{CellDelete, CellWrite, RowKey, StorageRequest, StorageResponse, Ttl};
use crate::time::{MonotonicTime, Now};

use super::{AcquireOutcome, Failures, Io, Machine, Outgoing, Release, RequestId, Stamps};

/// Why an acquisition is ending without the lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ending {
    Busy,
    TimedOut,
    Abandoned,
    Failed(Error),
}

impl Ending {
    fn outcome(self) -> AcquireOutcome {
        match self {
            Ending::Busy => AcquireOutcome::Busy,
            Ending::TimedOut => AcquireOutcome::TimedOut,
            Ending::Abandoned => AcquireOutcome::Abandoned,
            Ending::Failed(error) => AcquireOutcome::Failed(error),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// The current step's request is in flight; it was sent at the instant given.
    InFlight(RequestId, MonotonicTime),
    /// The current step's requests are in flight, sent together at the instant given; each
    /// answer is kept once it arrives, until all have.
    InFlightGroup {
        ids: Vec<RequestId>,
        sent_at: MonotonicTime,
        answers: Vec<Option<Result<StorageResponse, Error>>>,
    },
    /// The current step's request will be (re)sent at this instant.
    Sleeping(MonotonicTime),
    /// Cleaning up or finished.
    Over,
}

/// What a response meant to the acquisition.
pub(crate) enum Response {
    /// Not for the current step (stale, or consumed by the cleanup).
    Ignored,
    /// The current step succeeded; its request was sent at `sent_at`.
    Success {
        sent_at: MonotonicTime,
        response: StorageResponse,
    },
    /// Every request of the current step's group succeeded; they were sent at `sent_at`.
    /// The answers are in the order the requests were given to [`Attempt::send_group`].
    GroupSuccess {
        sent_at: MonotonicTime,
        first: StorageResponse,
        rest: Vec<StorageResponse>,
    },
    /// The current step failed.
    Failure(Error),
}

/// What a timeout meant to the acquisition.
pub(crate) enum Wake {
    /// Nothing to do yet.
    Nothing,
    /// The pause is over: send the current step's request again (or the next one).
    Due,
    /// The give-up deadline passed.
    GiveUp,
}

/// One request (or one group of requests sent together) at a time, the pause before the
/// next, storage-failure retries, the give-up deadline, and the cleanup that deletes our
/// cells when we end without the lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Attempt {
    pub(crate) config: ValidConfig,
    pub(crate) io: Io,
    pub(crate) stamps: Stamps,
    phase: Phase,
    give_up_at: Option<MonotonicTime>,
    failures: Failures,
    pub(crate) storage_failures: u32,
    cleanup: Option<(Release, Ending)>,
    outcome: Option<AcquireOutcome>,
}

impl Attempt {
    pub(crate) fn new(config: ValidConfig, give_up_at: Option<MonotonicTime>) -> Self {
        Attempt {
            config,
            io: Io::default(),
            stamps: Stamps::default(),
            phase: Phase::Over,
            give_up_at,
            failures: Failures::default(),
            storage_failures: 0,
            cleanup: None,
            outcome: None,
        }
    }

    pub(crate) fn send(&mut self, now: Now, request: StorageRequest) {
        let id = self.io.send(request);
        self.phase = Phase::InFlight(id, now.instant);
    }

    /// Sends `first` and `rest` at once; the step succeeds when all have, and fails (to be
    /// retried as a whole) when one has failed and all have answered. Without `rest` it is
    /// [`Attempt::send`].
    pub(crate) fn send_group(
        &mut self,
        now: Now,
        first: StorageRequest,
        rest: Vec<StorageRequest>,
    ) {
        if rest.is_empty() {
            self.send(now, first);
            return;
        }
        let ids: Vec<RequestId> = std::iter::once(first)
            .chain(rest)
            .map(|request| self.io.send(request))
            .collect();
        self.phase = Phase::InFlightGroup {
            answers: vec![None; ids.len()],
            ids,
            sent_at: now.instant,
        };
    }

    /// A write of our cell with the lease TTL and the next timestamp.
    pub(crate) fn write(
        &mut self,
        now: Now,
        row: RowKey,
        column: ColumnName,
        value: Vec<u8>,
    ) -> StorageRequest {
        let ttl = self.config.ttl();
        self.write_with_ttl(now, row, column, value, ttl)
    }

    /// A write of our cell with `ttl` and the next timestamp.
    pub(crate) fn write_with_ttl(
        &mut self,
        now: Now,
        row: RowKey,
        column: ColumnName,
        value: Vec<u8>,
        ttl: Ttl,
    ) -> StorageRequest {
        StorageRequest::Write(CellWrite {
            row,
            column,
            value,
            timestamp: self.stamps.next(now.timestamp),
            ttl: Some(ttl),
        })
    }

    /// A delete of our cell with the next timestamp.
    pub(crate) fn delete(&mut self, now: Now, row: RowKey, column: ColumnName) -> StorageRequest {
        StorageRequest::Delete(CellDelete {
            row,
            column,
            timestamp: self.stamps.next(now.timestamp),
        })
    }

    pub(crate) fn sleep_until(&mut self, until: MonotonicTime) {
        self.phase = Phase::Sleeping(until);
    }

    pub(crate) fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    pub(crate) fn sleeping_until(&self) -> Option<MonotonicTime> {
        match self.phase {
            Phase::Sleeping(until) => Some(until),
            _ => None,
        }
    }

    /// The highest write timestamp used so far, the cleanup's included.
    pub(crate) fn last_timestamp(&self) -> crate::time::Timestamp {
        self.cleanup
            .as_ref()
            .map_or(self.stamps.last(), |(release, _)| {
                release.last_timestamp().max(self.stamps.last())
            })
    }

    /// Requests issued so far, cleanup included.
    pub(crate) fn requests_sent(&self) -> u32 {
        self.io.sent()
            + self
                .cleanup
                .as_ref()
                .map_or(0, |(release, _)| release.requests_sent())
    }

    pub(crate) fn accept(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) -> Response {
        if let Some((release, ending)) = &mut self.cleanup {
            release.handle_response(now, id, response);
            if release.poll_outcome().is_some() {
                self.outcome = Some(ending.clone().outcome());
            }
            return Response::Ignored;
        }
        match &mut self.phase {
            Phase::InFlight(expected, sent_at) if *expected == id => match response {
                Ok(response) => {
                    self.failures.reset();
                    Response::Success {
                        sent_at: *sent_at,
                        response,
                    }
                }
                Err(error) => {
                    self.storage_failures += 1;
                    Response::Failure(error)
                }
            },
            Phase::InFlightGroup {
                ids,
                sent_at,
                answers,
            } => {
                let Some(slot) = ids
                    .iter()
                    .position(|expected| *expected == id)
                    .and_then(|index| answers.get_mut(index))
                    .filter(|slot| slot.is_none())
                else {
                    return Response::Ignored;
                };
                if response.is_err() {
                    self.storage_failures += 1;
                }
                *slot = Some(response);
                if answers.iter().any(Option::is_none) {
                    return Response::Ignored;
                }
                let sent_at = *sent_at;
                let mut responses = Vec::with_capacity(answers.len());
                for answer in std::mem::take(answers).into_iter().flatten() {
                    match answer {
                        Ok(response) => responses.push(response),
                        Err(error) => return Response::Failure(error),
                    }
                }
                self.failures.reset();
                let mut responses = responses.into_iter();
                match responses.next() {
                    Some(first) => Response::GroupSuccess {
                        sent_at,
                        first,
                        rest: responses.collect(),
                    },
                    None => Response::Ignored,
                }
            }
            _ => Response::Ignored,
        }
    }

    /// After a failure: pause and return true (resend the same step on wake), or return
    /// false when the error is final, the retry budget is spent, or the retry would come
    /// at or after the give-up deadline (the caller then learns the storage error, not
    /// only that time ran out).
    pub(crate) fn retry_later(&mut self, now: Now, error: &Error) -> bool {
        let config = self.config.config();
        match self
            .failures
            .record(now.instant, error, config, config.poll.max_interval, None)
        {
            Some(pause) => {
                let at = now.instant + pause;
                if self.give_up_at.is_some_and(|deadline| at >= deadline) {
                    return false;
                }
                self.sleep_until(at);
                true
            }
            None => false,
        }
    }

    pub(crate) fn wake(&mut self, now: Now) -> Wake {
        if let Some((release, _)) = &mut self.cleanup {
            release.handle_timeout(now);
            return Wake::Nothing;
        }
        if self.phase == Phase::Over {
            return Wake::Nothing;
        }
        if self.give_up_at.is_some_and(|at| at <= now.instant) {
            return Wake::GiveUp;
        }
        match self.phase {
            Phase::Sleeping(until) if until <= now.instant => Wake::Due,
            _ => Wake::Nothing,
        }
    }

    /// Ends without the lock, deleting `cells` (those we may have written) first.
    pub(crate) fn finish(&mut self, now: Now, ending: Ending, cells: Vec<(RowKey, ColumnName)>) {
        self.phase = Phase::Over;
        if cells.is_empty() {
            self.outcome = Some(ending.outcome());
            return;
        }
        // The caller waits for the cleanup, and the cells expire on their own: a delete that
        // fails is retried `storage_retries` times, not for the whole retry window.
        let release = Release::new(now, self.config.clone(), cells, self.stamps.last())
            .retrying_until(now.instant);
        self.cleanup = Some((release, ending));
    }

    pub(crate) fn succeed(&mut self, outcome: AcquireOutcome) {
        self.phase = Phase::Over;
        self.outcome = Some(outcome);
    }

    pub(crate) fn poll_request(&mut self) -> Option<Outgoing> {
        match &mut self.cleanup {
            Some((release, _)) => release.poll_request(),
            None => self.io.poll(),
        }
    }

    /// The next wake-up: the end of the current pause (or `earlier`, if sooner) and the
    /// give-up deadline.
    pub(crate) fn poll_timeout(&self, earlier: Option<MonotonicTime>) -> Option<MonotonicTime> {
        if let Some((release, _)) = &self.cleanup {
            return release.poll_timeout();
        }
        let wake = match self.phase {
            Phase::Sleeping(until) => Some(earlier.map_or(until, |at| at.min(until))),
            Phase::InFlight(..) | Phase::InFlightGroup { .. } => None,
            Phase::Over => return None,
        };
        match (wake, self.give_up_at) {
            (Some(wake), Some(give_up)) => Some(wake.min(give_up)),
            (wake, give_up) => wake.or(give_up),
        }
    }

    pub(crate) fn poll_outcome(&mut self) -> Option<AcquireOutcome> {
        self.outcome.take()
    }
}
