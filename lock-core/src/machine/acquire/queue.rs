//! The queue position: reading the queue row, where we stand in it, the floor and margin
//! the next read starts from, leaving and rejoining it, and the wake-up hints between
//! neighbours (docs/algorithm.md, section "The mandatory lock").

use super::*;

impl Acquire {
    /// Whether a fence request goes with a delete of our queue cell: the main row is ours,
    /// and we leave the queue so that the owner behind us can wait in the main row. Not
    /// when our release may linger and we listen for hints: then the owner behind sees our
    /// cell, with our listener, first in the queue, and asks us not to linger
    /// ([`HintKind::Wanted`]).
    pub(super) fn leaves_queue_with_fence(&self) -> bool {
        self.main.waits_in_main && self.queue.written.maybe() && !self.stays_queued_to_be_asked()
    }

    /// Whether we keep our queue cell while we hold so that an owner behind can ask us not
    /// to linger: we listen for hints, the configuration lingers, and the lock was idle when
    /// we came (as [`AcquireStats::found_idle`] says; only then may the release linger).
    pub(super) fn stays_queued_to_be_asked(&self) -> bool {
        self.hints.listening && !self.config().linger.is_zero() && self.stats.found_idle()
    }

    /// Whether the fence read goes with the queue delete: not when it also renews a short
    /// main cell, since a renewal acknowledged too late gives the main row back and we
    /// then wait on in our place in the queue; the fence write takes the delete instead.
    pub(super) fn leaves_queue_with_fence_read(&self) -> bool {
        self.leaves_queue_with_fence() && self.main.short_sent.is_none()
    }

    /// The delete of our queue cell.
    pub(super) fn queue_delete(&mut self, now: Now) -> StorageRequest {
        self.attempt
            .delete(now, self.queue_row.clone(), self.queue.name.clone())
    }

    /// Our queue cell's delete, sent with a fence request, was acknowledged.
    pub(super) fn left_queue(&mut self) {
        self.queue.written = Written::No;
        self.queue.acked = None;
        self.queue.left = true;
    }

    /// A wake-up hint for this acquisition arrived (docs/algorithm.md, section "Wake-up
    /// hints"): the lock has moved ahead of us. If we are in a poll pause, the read it
    /// ends with is sent now, at most once a round trip (never more often than
    /// [`MIN_NEXT_IN_LINE_PERIOD`]). Anything else (a request in flight, a retry's backoff,
    /// a hint too soon after the last, an acquisition that does not listen) ignores it. A
    /// hint decides nothing: the read it brings forward is the one the pause would have
    /// sent, and what that read finds decides as always.
    pub(super) fn on_wake_hint(&mut self, now: Now) {
        if !self.hints.listening || self.attempt.is_over() {
            return;
        }
        let Some(until) = self.attempt.sleeping_until() else {
            // A request is in flight, perhaps a read sent before the lock moved: the next
            // poll pause is skipped.
            self.hints.pending = Some(now.instant);
            return;
        };
        if self.hints.poll_pause_until != Some(until) || until <= now.instant {
            return;
        }
        let spacing = self.poll.round_trip().max(MIN_NEXT_IN_LINE_PERIOD);
        if self
            .hints
            .last_hinted_read
            .is_some_and(|at| now.instant < at + spacing)
        {
            return;
        }
        self.hints.last_hinted_read = Some(now.instant);
        self.stats.hinted_reads += 1;
        self.sleep(self.step, now.instant);
        self.handle_timeout(now);
    }

    /// The poll pause of an owner `position` places back that listens for wake-up hints
    /// (docs/algorithm.md, section "Wake-up hints"), from the pause `polled` it would take
    /// without them. Next in line, a release's hint tells it when the lock is free: it
    /// polls at least half a hand-off apart, in case the hint is lost. Within
    /// [`hint::SUCCESSORS_HINTED`] places of the front, it may be hinted or not, and polls
    /// as without hints. Further back, the owners ahead hint it as its turn nears: it
    /// polls only every [`hint::FALLBACK_POLL`]. Never beyond `poll.max_interval`.
    pub(super) fn listening_pause(&self, polled: Duration, position: usize) -> Duration {
        if !self.hints.listening {
            return polled;
        }
        let relaxed = if position <= 1 {
            self.poll.handoff_now() / 2
        } else if position >= hint::RELAXED_PLACES {
            hint::FALLBACK_POLL
        } else {
            return polled;
        };
        polled.max(relaxed.min(self.config().poll.max_interval))
    }

    /// Next in line (`position` 1 in a queue read's `cells`), asks the owner first in the
    /// queue, if its cell names a hint listener and we have not asked it yet, not to linger
    /// after its release ([`HintKind::Wanted`]; docs/algorithm.md, section "Lingering after
    /// a release"). Only a listening acquisition of a configuration that lingers asks (the
    /// lockers of a lock share one): it is the one the holder's hints then reach. The hint
    /// decides nothing: an owner that gets it only releases sooner.
    pub(super) fn ask_head_not_to_linger(&mut self, position: usize, cells: &[Cell]) {
        if !self.hints.listening || position != 1 || self.config().linger.is_zero() {
            return;
        }
        let first_cell = cells.get(..1).unwrap_or_default();
        let Some(head) = hint::listeners_queued(first_cell, None).next() else {
            return;
        };
        if self.hints.asked_head.as_ref() == Some(&head.owner) {
            return;
        }
        self.hints.asked_head = Some(head.owner.clone());
        self.stats.wanted_hints += 1;
        let wanted = WakeHint {
            lock_id: self.lock_id.clone(),
            owner: head.owner,
            kind: HintKind::Wanted,
        };
        self.hints.out = Some((head.listener, wanted));
    }

    /// Records, at our turn, the owners queued right behind us whose cells name a hint
    /// listener: the queue read's cells after ours.
    pub(super) fn note_successors(&mut self, cells: &[Cell]) {
        if !self.hints.listening {
            return;
        }
        let behind = cells
            .iter()
            .position(|cell| cell.column == self.queue.name)
            .map_or(&[][..], |ours| &cells[ours + 1..]);
        self.hints.successors = hint::listeners_queued(behind, None).take(1).collect();
    }

    /// The first write of a queue column whose time was taken at `taken_at`.
    pub(super) fn enqueue_step(&self, taken_at: MonotonicTime) -> Step {
        Step::Enqueue(taken_at + self.config().request_timeout)
    }

    /// Takes a new queue column under the current time, after the late one was deleted, or,
    /// if we rejoin, under the time of the owner that passed us: reads that start from its
    /// head see us, and its next acquisition, named later, sorts behind us.
    pub(super) fn requeue(&mut self, now: Now) {
        let owner = self.queue.column.owner.clone();
        let timestamp = match self.queue.rejoin_behind.take() {
            Some(passer) => passer.timestamp,
            None => now.timestamp,
        };
        self.queue.column = QueueColumn::new(timestamp, owner);
        self.queue.name = self.queue.column.encode();
        let step = self.enqueue_step(now.instant);
        self.issue(now, step);
    }

    pub(super) fn view_queue(&self, cells: &[Cell]) -> QueueView {
        if self.first_is_ours(cells) {
            return QueueView::First;
        }
        let columns: Vec<QueueColumn> = cells
            .iter()
            .filter_map(|cell| QueueColumn::decode(cell.column.as_str()).ok())
            .collect();
        match columns
            .iter()
            .position(|column| *column == self.queue.column)
        {
            Some(0) => QueueView::First,
            Some(position) => QueueView::Behind {
                position,
                ahead: columns[..position].to_vec(),
                beyond_slice: false,
            },
            None => {
                let slice_full = cells.len() >= self.config().poll.queue_read_limit as usize;
                let all_ahead = columns.iter().all(|column| *column < self.queue.column);
                if slice_full && all_ahead {
                    QueueView::Behind {
                        position: columns.len(),
                        ahead: columns,
                        beyond_slice: true,
                    }
                } else {
                    QueueView::Missing
                }
            }
        }
    }

    /// True when a queue read's first cell is ours: the uncontended case, told by name
    /// without decoding the cells.
    pub(super) fn first_is_ours(&self, cells: &[Cell]) -> bool {
        cells
            .first()
            .is_some_and(|cell| cell.column == self.queue.name)
    }

    /// Counts a queue read and remembers the head it saw: the floor of this acquisition's
    /// later reads, and of the next acquisition's.
    pub(super) fn saw_queue(&mut self, cells: &[Cell]) {
        self.stats.queue_reads += 1;
        if self.config().adapts_queue_margin()
            && let Some(interval) = queue_spread(cells)
        {
            self.stats.lock_interval = interval;
        }
        self.queue.head = if self.first_is_ours(cells) {
            Some(self.queue.column.clone())
        } else {
            cells
                .iter()
                .find_map(|cell| QueueColumn::decode(cell.column.as_str()).ok())
        };
        // A head just seen is as good a floor as the one the last acquisition saw, and
        // fresher: the reads still to come step over no tombstone older than the margin
        // before it. The first acquisition of a lock by a locker starts `cold_lookback`
        // before now, and without this every poll of it walked that long of tombstones.
        if let Some(head) = self.queue.head.as_ref().map(|head| head.timestamp) {
            self.raise_floor(head);
        }
    }

    /// Moves the floor of queue reads up to the margin before `head`, the enqueue time of a
    /// queue head seen, if that is later than where they start now.
    pub(super) fn raise_floor(&mut self, head: Timestamp) {
        let floor = QueueColumn::time_prefix(head - self.queue_margin());
        if self
            .queue
            .floor
            .as_ref()
            .is_none_or(|current| *current < floor)
        {
            self.queue.floor = Some(floor);
        }
    }

    /// A main read sent with our first queue write: the latest queue head another owner's
    /// main cell names ([`MainCellValue::Head`]) is as good a floor as one we saw ourselves
    /// (docs/algorithm.md, section "Queue floors and tombstones"). Cells without a head (the fast path's, older
    /// versions', anything undecodable) tell nothing and are passed over.
    pub(super) fn floor_from_main_row(&mut self, cells: &[Cell]) {
        let latest_head = cells
            .iter()
            .filter(|cell| !self.is_ours(cell))
            .filter_map(|cell| MainCellValue::decode(&cell.value).ok())
            .filter_map(|value| value.head().map(|head| head.timestamp))
            .max();
        if let Some(head) = latest_head {
            self.raise_floor(head);
        }
    }

    /// At the read that found us first: how many owners are queued behind us, and how many
    /// will be ahead if we join again at once after our release
    /// ([`AcquireStats::ahead_at_return`]). The owner that held before us joins again (if it
    /// does) just after its release, and may not show in this read yet: unless a cell
    /// behind us was enqueued within half a hand-off and a round trip of now, one more is
    /// counted for it, if a read before this one showed it ahead of us.
    pub(super) fn note_behind_at_turn(&mut self, now: Now, cells: &[Cell]) {
        self.poll.observe_first(now.instant);
        self.note_successors(cells);
        let recent_since =
            now.timestamp - (self.poll.handoff_now() / 2).saturating_add(self.poll.round_trip());
        let (mut count, mut previous_holder_joined) = (0u32, false);
        for column in cells
            .iter()
            .skip(1)
            .filter_map(|cell| QueueColumn::decode(cell.column.as_str()).ok())
        {
            count = count.saturating_add(1);
            previous_holder_joined |= column.timestamp >= recent_since;
        }
        self.stats.behind_at_turn = count;
        self.stats.ahead_at_return =
            if count > 0 && !previous_holder_joined && self.poll.saw_owners_ahead() {
                count.saturating_add(1)
            } else {
                count
            };
    }

    pub(super) fn on_queue(&mut self, now: Now, sent_at: MonotonicTime, cells: &[Cell]) {
        match self.view_queue(cells) {
            QueueView::First => {
                self.queue.missing = 0;
                self.note_behind_at_turn(now, cells);
                let gate = if self.main.combined {
                    Step::WriteShadow
                } else {
                    Step::WriteMain
                };
                self.issue(now, gate);
            }
            // We deleted our queue cell with the fence read, then gave the lock back (the
            // lease check): join the queue again under the current time, as after any cell
            // that may have lapsed, rather than bring back the old place.
            QueueView::Missing if self.queue.left => self.requeue(now),
            QueueView::Missing => {
                self.queue.missing += 1;
                if self.queue.missing > self.config().storage_retries + 1 {
                    let error = Error::rejected(
                        format!("read {}", self.queue_row),
                        "our queue cell is not visible after a successful write; check that \
                         reads and writes use QUORUM (or LOCAL_QUORUM) and that no tombstone \
                         with a future timestamp shadows it",
                    );
                    self.finish(now, Ending::Failed(error));
                } else {
                    self.issue(now, Step::WriteQueue);
                }
            }
            QueueView::Behind { .. } if self.mode == Mode::Soft => {
                self.finish(now, Ending::Busy);
            }
            // A main cell left from waiting in the main row (our queue cell was rewritten
            // and others are now ahead): take it out, so that nobody waits for it.
            QueueView::Behind { .. } if self.main.waits_in_main && self.main.written.maybe() => {
                self.conflict(now)
            }
            QueueView::Behind {
                position,
                ahead,
                beyond_slice,
            } => {
                self.queue.missing = 0;
                self.ask_head_not_to_linger(position, cells);
                self.poll
                    .observe(now.instant, sent_at, ahead, self.config().poll.min_interval);
                let config = &self.attempt.config;
                let pause = if beyond_slice {
                    self.poll
                        .pause_beyond_slice(now.instant, position, config, &mut self.rng)
                } else {
                    self.poll.pause(now.instant, position, config)
                };
                let pause = self.listening_pause(pause, position);
                self.sleep(Step::ReadQueue, now.instant + pause);
            }
        }
    }

    /// With queue margins that may be shorter than the safe one
    /// ([`crate::PollConfig::queue_margin`], [`crate::PollConfig::margin_acquisitions`]):
    /// the latest queue column that a main read shows marked as a head
    /// ([`MainCellValue::Head`]) and whose time is more than the shortest margin
    /// ([`LockConfig::least_queue_margin`]) after ours. Its
    /// owner's queue read showed it first, so our cell, which sorts before it, was not in
    /// that read; and owners whose floors come from that head start their reads past our
    /// cell, so that each of them could pass us in turn. We join again under its time. A
    /// later head within the margin is a plain conflict: the reads that start from it
    /// still see us.
    pub(super) fn passed_by(&self, cells: &[Cell]) -> Option<QueueColumn> {
        let config = self.config();
        if !config.rejoins_when_passed()
            || self.mode != Mode::Mandatory
            || self.main.combined
            || !self.queue.written.maybe()
        {
            return None;
        }
        let hidden_before = self.queue.column.timestamp + config.least_queue_margin();
        cells
            .iter()
            .filter(|cell| !self.is_ours(cell))
            .filter_map(|cell| MainCellValue::decode(&cell.value).ok())
            .filter_map(|value| value.head().cloned())
            .filter(|head| head.timestamp > hidden_before)
            .max()
    }

    /// True when a queue write acknowledged now comes more than the waiter cell's effective
    /// life after the previous acknowledged write of the same column was sent: in between,
    /// the cell may have expired (see [`Acquire`] on dead waiters).
    pub(super) fn queue_may_have_lapsed(&self, now: Now) -> bool {
        self.queue
            .acked
            .is_some_and(|at| now.instant > at + self.attempt.config.waiter_effective())
    }
}

/// The time between the lock's acquisitions an acquisition starts from: the previous
/// acquisition's measurement ([`AcquireOptions::lock_interval`]) or the time since the
/// queue floor given (the head the previous acquisition saw, often its own column: one
/// acquisition at least since then), whichever is shorter; `None` without either. A
/// measurement older than the margin it sets (`margin_acquisitions` times it, as the
/// floor's age tells) is dropped: the lock may have cooled since.
pub(super) fn first_lock_interval(
    now: Timestamp,
    options: &AcquireOptions,
    margin_acquisitions: u32,
) -> Option<Duration> {
    let since_floor = options
        .queue_floor
        .map(|floor| now.saturating_duration_since(floor));
    let measured = options.lock_interval.filter(|interval| {
        since_floor.is_none_or(|age| age <= interval.saturating_mul(margin_acquisitions))
    });
    measured
        .into_iter()
        .chain(since_floor)
        .filter(|interval| !interval.is_zero())
        .min()
}

/// The time between the enqueue times of the live queue cells a read showed, on average:
/// their spread over their number less one (at least a microsecond), if there are two or
/// more. Owners join the queue about as often as the lock changes hands, so it measures
/// the time between acquisitions while the lock is contended.
fn queue_spread(cells: &[Cell]) -> Option<Duration> {
    let mut times = cells
        .iter()
        .filter_map(|cell| QueueColumn::decode_timestamp(cell.column.as_str()).ok());
    let first = times.next()?;
    let (count, last) = times.fold((0u32, first), |(count, _), time| (count + 1, time));
    let spread = last.saturating_duration_since(first).checked_div(count)?;
    Some(spread.max(Duration::from_micros(1)))
}
