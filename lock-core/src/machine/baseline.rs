//! The baseline ("old") shadow-row algorithm (docs/algorithm.md, section "The baseline algorithm and why it starves"), kept for
//! comparison.

use crate::column::ColumnName;
use crate::config::{LockConfig, ValidConfig};
use crate::error::Error;
use crate::id::{LockId, OwnerId};
use crate::storage::{Cell, RowKey, RowKind, RowRead, StorageRequest, StorageResponse};
use crate::time::{MonotonicTime, Now};

use super::acquire::{QueueExit, Written, only_ours};
use super::attempt::{Attempt, Ending, Response, Wake};
use super::{
    AcquireOutcome, AcquireStats, HeldCell, Holding, Machine, Mode, Outgoing, RequestId, SplitMix64,
};

/// One acquisition by the old shadow-row algorithm.
///
/// `TryLock`: read the main row; if it holds exactly one cell, succeed if it is
/// ours and report *another owner* otherwise. Else write our shadow cell and read the shadow
/// row; if ours is the only shadow cell and the main row is empty, write our main cell,
/// delete our shadow cell and succeed; otherwise delete our shadow cell and report a
/// *concurrent attempt*.
///
/// We re-read the main row for the "main row is empty" test, after the shadow check. Using
/// the read from the first step, as a literal reading of the thesis's `TryLock` would, lets two owners
/// both succeed: one can pass the shadow check after the other has written its main cell and
/// deleted its shadow cell.
///
/// `GetLock` ([`Mode::Mandatory`]) repeats `TryLock`: after *another owner* it
/// sleeps uniformly in `0..owner_backoff_max`; after the n-th *concurrent attempt* uniformly
/// in `0..concurrent_backoff_step * n`. The sleeps are drawn from the seed. In
/// [`Mode::Soft`] one `TryLock` is made and anything but success is
/// [`AcquireOutcome::Busy`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BaselineAcquire {
    attempt: Attempt,
    mode: Mode,
    lock_id: LockId,
    owner: OwnerId,
    main_row: RowKey,
    shadow_row: RowKey,
    rng: SplitMix64,
    step: Step,
    started_at: MonotonicTime,
    concurrent_attempts: u32,
    main_written: Written,
    shadow_written: Written,
    stats: AcquireStats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    ReadMain,
    WriteShadow,
    ReadShadow,
    RecheckMain,
    WriteMain,
    DeleteShadow { won: bool },
    DeleteMain,
}

impl BaselineAcquire {
    /// Starts acquiring `lock_id` as `owner`; `seed` drives the random backoff.
    pub fn new(
        now: Now,
        config: ValidConfig,
        mode: Mode,
        lock_id: LockId,
        owner: OwnerId,
        seed: u64,
        give_up_at: Option<MonotonicTime>,
    ) -> Self {
        let mut acquire = BaselineAcquire {
            attempt: Attempt::new(config, give_up_at),
            mode,
            main_row: RowKey::new(RowKind::Main, lock_id.clone()),
            shadow_row: RowKey::new(RowKind::Shadow, lock_id.clone()),
            lock_id,
            owner,
            rng: SplitMix64::new(seed),
            step: Step::ReadMain,
            started_at: now.instant,
            concurrent_attempts: 0,
            main_written: Written::No,
            shadow_written: Written::No,
            stats: AcquireStats::default(),
        };
        acquire.issue(now, Step::ReadMain);
        acquire
    }

    /// The owner id of this acquisition.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// Counters so far (`queue_reads` counts main-row reads here).
    pub fn stats(&self) -> AcquireStats {
        AcquireStats {
            requests: self.attempt.requests_sent(),
            storage_failures: self.attempt.storage_failures,
            ..self.stats
        }
    }

    /// Gives up, deleting whatever we may have written.
    pub fn abandon(&mut self, now: Now) {
        if !self.attempt.is_over() {
            self.finish(now, Ending::Abandoned);
        }
    }

    fn config(&self) -> &LockConfig {
        self.attempt.config.config()
    }

    fn column(&self) -> ColumnName {
        ColumnName::from(&self.owner)
    }

    fn issue(&mut self, now: Now, step: Step) {
        let column = self.column();
        let request = match step {
            Step::ReadMain => StorageRequest::Read(RowRead::first(self.main_row.clone(), 2)),
            Step::RecheckMain => StorageRequest::Read(RowRead::first(self.main_row.clone(), 1)),
            Step::ReadShadow => StorageRequest::Read(RowRead::first(self.shadow_row.clone(), 2)),
            Step::WriteShadow => {
                self.shadow_written = Written::Maybe;
                self.attempt
                    .write(now, self.shadow_row.clone(), column, Vec::new())
            }
            Step::WriteMain => {
                self.main_written = Written::Maybe;
                self.attempt
                    .write(now, self.main_row.clone(), column, Vec::new())
            }
            Step::DeleteShadow { .. } => self.attempt.delete(now, self.shadow_row.clone(), column),
            Step::DeleteMain => self.attempt.delete(now, self.main_row.clone(), column),
        };
        self.step = step;
        self.attempt.send(now, request);
    }

    fn finish(&mut self, now: Now, ending: Ending) {
        let column = self.column();
        let mut cells = Vec::new();
        if self.shadow_written.maybe() {
            cells.push((self.shadow_row.clone(), column.clone()));
        }
        if self.main_written.maybe() {
            cells.push((self.main_row.clone(), column));
        }
        self.attempt.finish(now, ending, cells);
    }

    fn only_ours(&self, cells: &[Cell]) -> bool {
        only_ours(cells, &self.owner)
    }

    fn on_success(&mut self, now: Now, sent_at: MonotonicTime, response: StorageResponse) {
        let cells = response.into_cells();
        match self.step {
            Step::ReadMain => {
                self.stats.queue_reads += 1;
                if cells.len() != 1 {
                    self.issue(now, Step::WriteShadow);
                } else if self.only_ours(&cells) && matches!(self.main_written, Written::At(_)) {
                    self.acquired(now);
                } else {
                    self.another_owner(now);
                }
            }
            Step::WriteShadow => {
                self.shadow_written = Written::At(sent_at);
                self.issue(now, Step::ReadShadow);
            }
            Step::ReadShadow if self.only_ours(&cells) => self.issue(now, Step::RecheckMain),
            Step::RecheckMain if cells.is_empty() => self.issue(now, Step::WriteMain),
            Step::ReadShadow | Step::RecheckMain => {
                self.stats.conflicts += 1;
                self.issue(now, Step::DeleteShadow { won: false });
            }
            Step::WriteMain => {
                self.main_written = Written::At(sent_at);
                self.issue(now, Step::DeleteShadow { won: true });
            }
            Step::DeleteShadow { won } => {
                self.shadow_written = Written::No;
                if won {
                    self.acquired(now);
                } else {
                    self.concurrent_attempt(now);
                }
            }
            Step::DeleteMain => {
                self.main_written = Written::No;
                self.concurrent_attempt(now);
            }
        }
    }

    fn acquired(&mut self, now: Now) {
        let Written::At(main_sent_at) = self.main_written else {
            self.issue(now, Step::ReadMain);
            return;
        };
        let lease_deadline = self.attempt.config.lease_deadline(main_sent_at);
        if !self.attempt.config.renewable(now.instant, lease_deadline) {
            self.issue(now, Step::DeleteMain);
            return;
        }
        let holding = Holding {
            lock_id: self.lock_id.clone(),
            owner: self.owner.clone(),
            main: HeldCell {
                row: self.main_row.clone(),
                column: self.column(),
                value: Vec::new(),
                written_at: main_sent_at,
            },
            queue: None,
            shadow: None,
            queue_renew_by: None,
            queue_exit: QueueExit::AtRelease,
            lease_deadline,
            fencing_token: None,
            last_timestamp: self.attempt.stamps.last(),
            started_at: self.started_at,
            acquired_at: now.instant,
            stats: self.stats(),
            successors: Vec::new(),
        };
        self.attempt
            .succeed(AcquireOutcome::Acquired(Box::new(holding)));
    }

    fn another_owner(&mut self, now: Now) {
        if self.mode == Mode::Soft {
            self.finish(now, Ending::Busy);
            return;
        }
        let pause = self
            .rng
            .duration_below(self.config().baseline.owner_backoff_max);
        self.step = Step::ReadMain;
        self.attempt.sleep_until(now.instant + pause);
    }

    fn concurrent_attempt(&mut self, now: Now) {
        if self.mode == Mode::Soft {
            self.finish(now, Ending::Busy);
            return;
        }
        self.concurrent_attempts = self.concurrent_attempts.saturating_add(1);
        let max = self
            .config()
            .baseline
            .concurrent_backoff_step
            .saturating_mul(self.concurrent_attempts);
        let pause = self.rng.duration_below(max);
        self.step = Step::ReadMain;
        self.attempt.sleep_until(now.instant + pause);
    }
}

impl Machine for BaselineAcquire {
    type Outcome = AcquireOutcome;

    fn handle_response(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        match self.attempt.accept(now, id, response) {
            // This machine never sends a pair of requests.
            Response::Ignored | Response::GroupSuccess { .. } => {}
            Response::Success { sent_at, response } => self.on_success(now, sent_at, response),
            Response::Failure(error) => {
                if !self.attempt.retry_later(now, &error) {
                    self.finish(now, Ending::Failed(error));
                }
            }
        }
    }

    fn handle_timeout(&mut self, now: Now) {
        match self.attempt.wake(now) {
            Wake::GiveUp => self.finish(now, Ending::TimedOut),
            Wake::Due => self.issue(now, self.step),
            Wake::Nothing => {}
        }
    }

    fn poll_request(&mut self) -> Option<Outgoing> {
        self.attempt.poll_request()
    }

    fn poll_timeout(&self) -> Option<MonotonicTime> {
        self.attempt.poll_timeout(None)
    }

    fn poll_outcome(&mut self) -> Option<AcquireOutcome> {
        self.attempt.poll_outcome()
    }
}
