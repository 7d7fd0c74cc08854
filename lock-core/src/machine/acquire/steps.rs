//! The steps: the requests each step sends (fencing included), what a successful answer
//! leads to, pauses and backoff, and how an acquisition ends, holding or not
//! (docs/algorithm.md, sections "The mandatory lock" and "Fencing tokens").

use super::*;

impl Acquire {
    pub(super) fn issue(&mut self, now: Now, step: Step) {
        let (request, rest) = self.requests(now, step);
        self.step = step;
        self.attempt.send_group(now, request, rest);
    }

    /// The request `step` sends, and those sent with it (the fast path's second request, a
    /// main read for a floor, the queue delete and main renewal of the fence read).
    pub(super) fn requests(
        &mut self,
        now: Now,
        step: Step,
    ) -> (StorageRequest, Vec<StorageRequest>) {
        let main_column = self.main.seat.clone();
        let request = match step {
            Step::CheckMain => StorageRequest::Read(RowRead::first(self.main_row.clone(), 1)),
            Step::Enqueue(_) | Step::WriteQueue => {
                self.queue.written = Written::Maybe;
                self.queue.left = false;
                let ttl = self.attempt.config.waiter_ttl();
                let write = self.attempt.write_with_ttl(
                    now,
                    self.queue_row.clone(),
                    self.queue.name.clone(),
                    self.queue.value.clone(),
                    ttl,
                );
                if matches!(step, Step::Enqueue(_)) && self.queue.floor_from_main {
                    let (main, _) = self.requests(now, Step::ReadMain);
                    return (write, vec![main]);
                }
                write
            }
            Step::ReadQueue => {
                let mut read =
                    RowRead::first(self.queue_row.clone(), self.config().poll.queue_read_limit);
                read.start = self
                    .queue
                    .floor
                    .as_ref()
                    .map(|floor| floor.min(&self.queue.name).clone());
                StorageRequest::Read(read)
            }
            Step::Requeue => self.queue_delete(now),
            Step::WriteMain | Step::ShortenMain { .. } | Step::RenewMain => {
                self.main.written = Written::Maybe;
                let value = self.main_value_to_write(true);
                let ttl = match step {
                    Step::RenewMain => self.attempt.config.ttl(),
                    _ => self.main_ttl(),
                };
                self.attempt
                    .write_with_ttl(now, self.main_row.clone(), main_column, value, ttl)
            }
            Step::ReadMain => {
                StorageRequest::Read(RowRead::first(self.main_row.clone(), MAIN_READ_LIMIT))
            }
            Step::DeleteMain => self.attempt.delete(now, self.main_row.clone(), main_column),
            Step::WriteShadow => {
                self.main.shadow_written = Written::Maybe;
                let value = self.main_value_to_write(true);
                self.attempt
                    .write(now, self.shadow_row.clone(), main_column, value)
            }
            Step::ReadShadow => StorageRequest::Read(RowRead::first(self.shadow_row.clone(), 2)),
            Step::DeleteShadow => self
                .attempt
                .delete(now, self.shadow_row.clone(), main_column),
            Step::FastWrite(_) => {
                let (queue, _) = self.requests(now, Step::WriteQueue);
                self.main.written = Written::Maybe;
                let value = self.main_value_to_write(false);
                let main = self
                    .attempt
                    .write(now, self.main_row.clone(), main_column, value);
                return (queue, vec![main]);
            }
            Step::FastRead => {
                let (queue, _) = self.requests(now, Step::ReadQueue);
                let (main, _) = self.requests(now, Step::ReadMain);
                return (queue, vec![main]);
            }
            Step::LeaveFastPath { .. } => {
                self.attempt.delete(now, self.main_row.clone(), main_column)
            }
            Step::ReadFence => {
                let read = StorageRequest::Read(FencingToken::read(&self.lock_id));
                let mut rest = Vec::new();
                // Our main cell was last written with the waiter TTL: renew it with
                // `lease_ttl` now, in the fence read's round trip.
                if self.main.short_sent.is_some() {
                    let (renewal, _) = self.requests(now, Step::RenewMain);
                    rest.push(renewal);
                }
                // The main row is ours: leave the queue now, so that the owner behind us
                // can wait in the main row while we take the token.
                if self.leaves_queue_with_fence_read() {
                    rest.push(self.queue_delete(now));
                }
                return (read, rest);
            }
            Step::WriteFence(token) => {
                let write = StorageRequest::Write(token.write(&self.lock_id));
                // We kept our queue cell through the renewal of a short main cell: leave the
                // queue now that the renewal made the main row ours.
                if self.leaves_queue_with_fence() {
                    return (write, vec![self.queue_delete(now)]);
                }
                write
            }
        };
        (request, Vec::new())
    }

    /// Pauses before sending `step`'s request at `until`: a poll pause, which a wake-up
    /// hint may cut short (when we listen for hints; otherwise nothing is recorded, so that
    /// the machine's states are those without hints).
    pub(super) fn sleep(&mut self, step: Step, until: MonotonicTime) {
        if !self.hints.listening {
            self.back_off(step, until);
            return;
        }
        self.step = step;
        // A hint that came while the last request was in flight ends the pause at once:
        // one read more, after the answer, so still one a round trip.
        let until = match self.hints.pending.take() {
            Some(hinted_at) => {
                self.hints.last_hinted_read = Some(hinted_at);
                self.stats.hinted_reads += 1;
                hinted_at.min(until)
            }
            None => until,
        };
        self.hints.poll_pause_until = Some(until);
        self.attempt.sleep_until(until);
    }

    /// Pauses before sending `step`'s request at `until`, with no hint cutting it short:
    /// the pause after a conflict, which lets the other owner's delete land before we look
    /// again (cut short by hints, two owners could meet in the main row tick after tick,
    /// as the model checker found).
    pub(super) fn back_off(&mut self, step: Step, until: MonotonicTime) {
        self.step = step;
        self.hints.poll_pause_until = None;
        self.attempt.sleep_until(until);
    }

    pub(super) fn finish(&mut self, now: Now, ending: Ending) {
        let mut cells = Vec::new();
        if self.queue.written.maybe() {
            cells.push((self.queue_row.clone(), self.queue.name.clone()));
        }
        if self.main.written.maybe() {
            cells.push((self.main_row.clone(), self.main.seat.clone()));
        }
        if self.main.shadow_written.maybe() {
            cells.push((self.shadow_row.clone(), self.main.seat.clone()));
        }
        self.attempt.finish(now, ending, cells);
    }

    /// The current step succeeded; `paired` is the answer to the second request of a
    /// fast-path step, or of a first queue write that reads the main row for a floor.
    pub(super) fn on_success(
        &mut self,
        now: Now,
        sent_at: MonotonicTime,
        response: StorageResponse,
        paired: Vec<StorageResponse>,
    ) {
        let cells = response.into_cells();
        if let (Step::Enqueue(_), Some(main)) = (self.step, paired.first()) {
            self.queue.floor_from_main = false;
            if let StorageResponse::Cells(main) = main {
                self.floor_from_main_row(main);
            }
        }
        match self.step {
            Step::CheckMain if cells.is_empty() => {
                let step = self.enqueue_step(self.started_at);
                self.issue(now, step);
            }
            Step::CheckMain => self.finish(now, Ending::Busy),
            // Bounded: storage that cannot acknowledge a first write in time, again and
            // again, costs our place in line once too often, not the acquisition.
            Step::Enqueue(due)
                if now.instant > due && self.stats.requeues < self.config().storage_retries =>
            {
                self.issue(now, Step::Requeue)
            }
            // Our cell may have expired before this rewrite landed, letting owners behind
            // pass: enqueue again rather than take back a place we may have lost.
            Step::WriteQueue
                if self.queue_may_have_lapsed(now)
                    && self.stats.requeues < self.config().storage_retries =>
            {
                self.queue.written = Written::At(sent_at);
                self.issue(now, Step::Requeue)
            }
            Step::Enqueue(_) | Step::WriteQueue => {
                self.queue.written = Written::At(sent_at);
                self.queue.acked = Some(sent_at);
                // A mandatory owner's first write, soon after a release of its own that
                // left others to go first: sleep to the turn that release tells of,
                // rather than read at once only to find our place (section "When a waiter polls").
                let first_write = self.mode == Mode::Mandatory
                    && self.stats.queue_reads == 0
                    && self.stats.requeues == 0;
                let min_interval = self.config().poll.min_interval;
                match first_write
                    .then(|| self.poll.skip_arrival_read(now.instant, min_interval))
                    .flatten()
                {
                    Some(wake) => self.sleep(Step::ReadQueue, wake),
                    None => self.issue(now, Step::ReadQueue),
                }
            }
            Step::Requeue => {
                self.queue.written = Written::No;
                self.queue.acked = None;
                if self.queue.rejoin_behind.is_some() {
                    self.stats.rejoins += 1;
                } else {
                    self.stats.requeues += 1;
                }
                self.requeue(now);
            }
            Step::ReadQueue => {
                self.saw_queue(&cells);
                self.on_queue(now, sent_at, &cells);
            }
            Step::FastWrite(due) => {
                self.queue.written = Written::At(sent_at);
                self.queue.acked = Some(sent_at);
                self.main.written = Written::At(sent_at);
                let late = now.instant > due && self.stats.requeues < self.config().storage_retries;
                let next = if late {
                    Step::LeaveFastPath { requeue: true }
                } else {
                    Step::FastRead
                };
                self.issue(now, next);
            }
            Step::FastRead => {
                self.saw_queue(&cells);
                let main = paired
                    .into_iter()
                    .next()
                    .map(StorageResponse::into_cells)
                    .unwrap_or_default();
                let view = self.view_queue(&cells);
                if let QueueView::Behind { position, .. } = view {
                    self.ask_head_not_to_linger(position, &cells);
                }
                let first = matches!(view, QueueView::First);
                if first && self.only_ours(&main) {
                    self.note_behind_at_turn(now, &cells);
                    self.on_main(now, sent_at, &main);
                } else {
                    if !self.only_ours(&main) {
                        self.stats.conflicts += 1;
                    }
                    self.issue(now, Step::LeaveFastPath { requeue: false });
                }
            }
            Step::LeaveFastPath { requeue } => {
                self.main_gone();
                let next = if requeue {
                    Step::Requeue
                } else {
                    Step::ReadQueue
                };
                self.issue(now, next);
            }
            Step::WriteMain => {
                let short = self.main_ttl() < self.attempt.config.ttl();
                self.main_acked(sent_at, short);
                self.issue(now, Step::ReadMain);
            }
            Step::ShortenMain { read_at } => {
                self.main_acked(sent_at, true);
                if read_at <= now.instant {
                    self.issue(now, Step::ReadMain);
                } else {
                    self.sleep(Step::ReadMain, read_at);
                }
            }
            Step::RenewMain => self.on_renewal(now, sent_at, None),
            Step::ReadMain => self.on_main(now, sent_at, &cells),
            Step::ReadFence => {
                if self.leaves_queue_with_fence_read() {
                    self.left_queue();
                }
                let token = FencingToken::after(FencingToken::seen(&cells), now.timestamp);
                if self.main.short_sent.is_some() {
                    self.on_renewal(now, sent_at, Some(token));
                } else {
                    self.issue(now, Step::WriteFence(token));
                }
            }
            Step::WriteFence(token) => {
                if self.leaves_queue_with_fence() {
                    self.left_queue();
                }
                self.acquired(now, Some(token))
            }
            Step::DeleteMain if self.main.shadow_written.maybe() => {
                self.main_gone();
                self.issue(now, Step::DeleteShadow);
            }
            Step::DeleteMain if self.queue.rejoin_behind.is_some() => {
                self.main_gone();
                self.issue(now, Step::Requeue);
            }
            Step::DeleteMain => {
                self.main_gone();
                self.after_conflict(now);
            }
            Step::WriteShadow => {
                self.main.shadow_written = Written::At(sent_at);
                self.issue(now, Step::ReadShadow);
            }
            Step::ReadShadow if self.only_ours(&cells) => {
                self.issue(now, Step::WriteMain);
            }
            Step::ReadShadow => {
                self.stats.conflicts += 1;
                self.main.conflicts = self.main.conflicts.saturating_add(1);
                self.issue(now, Step::DeleteShadow);
            }
            Step::DeleteShadow => {
                self.main.shadow_written = Written::No;
                self.after_conflict(now);
            }
        }
    }

    /// The main row held only our cell: the lock is ours if the lease can still be renewed
    /// in time (otherwise we give it back, as after a conflict).
    pub(super) fn acquired(&mut self, now: Now, fencing_token: Option<FencingToken>) {
        // A main cell last written with the waiter TTL is never held with.
        let Written::At(main_sent_at) = self.main.written else {
            self.conflict(now);
            return;
        };
        if self.main.short_sent.is_some() {
            self.conflict(now);
            return;
        }
        let lease_deadline = self.attempt.config.lease_deadline(main_sent_at);
        if !self.attempt.config.renewable(now.instant, lease_deadline) {
            self.conflict(now);
            return;
        }
        let queue_written_at = match self.queue.written {
            Written::At(at) => at,
            Written::No | Written::Maybe => main_sent_at,
        };
        // Waiting in the main row, the owner behind waits for our main cell, not our queue
        // cell; but a holder that may linger stays to be asked not to.
        let leaves_queue = self.main.waits_in_main && !self.stays_queued_to_be_asked();
        let holding = Holding {
            lock_id: self.lock_id.clone(),
            owner: self.queue.column.owner.clone(),
            main: HeldCell {
                row: self.main_row.clone(),
                column: self.main.seat.clone(),
                value: self.main.value.clone(),
                written_at: main_sent_at,
            },
            queue: Some(HeldCell {
                row: self.queue_row.clone(),
                column: self.queue.name.clone(),
                value: self.queue.value.clone(),
                written_at: queue_written_at,
            }),
            queue_renew_by: (!leaves_queue)
                .then(|| queue_written_at + self.attempt.config.waiter_renew_every()),
            queue_exit: if self.queue.left {
                QueueExit::Done
            } else if leaves_queue {
                QueueExit::Now
            } else {
                QueueExit::AtRelease
            },
            shadow: match self.main.shadow_written {
                Written::At(written_at) => Some(HeldCell {
                    row: self.shadow_row.clone(),
                    column: self.main.seat.clone(),
                    value: self.main.value.clone(),
                    written_at,
                }),
                Written::No | Written::Maybe => None,
            },
            lease_deadline,
            fencing_token,
            last_timestamp: self.attempt.stamps.last(),
            started_at: self.started_at,
            acquired_at: now.instant,
            stats: self.stats(),
            successors: std::mem::take(&mut self.hints.successors),
        };
        self.attempt
            .succeed(AcquireOutcome::Acquired(Box::new(holding)));
    }
}
