//! The main-row contest: what we write into the main row, when it is only ours, waiting
//! in it for the holder ahead, renewing the short cell of a waiter there, and backing out
//! on a conflict (docs/algorithm.md, sections "The mandatory lock" and "Waiting in the main
//! row").

use super::*;

impl Acquire {
    /// The value of a main (or shadow) write, kept to recognise our cell: our queue column,
    /// which holds the owner id (telling our cell from one an earlier acquisition left in
    /// the same seat) and tells owners waiting in the main row whether we were ahead of
    /// them; marked as a queue head when a queue read has shown us first, that is, on every
    /// main write but the fast path's, which goes out before the queue is read.
    pub(super) fn main_value_to_write(&mut self, head_seen: bool) -> Vec<u8> {
        let column = self.queue.column.clone();
        self.main.value = if head_seen {
            MainCellValue::Head(column)
        } else {
            MainCellValue::Queued(column)
        }
        .encode();
        self.main.value.clone()
    }

    pub(super) fn only_ours(&self, cells: &[Cell]) -> bool {
        matches!(cells, [cell] if self.is_ours(cell))
    }

    pub(super) fn is_ours(&self, cell: &Cell) -> bool {
        cell.column == self.main.seat && cell.value == self.main.value
    }

    /// Whether a main read that holds more than our cell lets us wait in the main row
    /// rather than back off (docs/algorithm.md, section "Waiting in the main row"): we are a mandatory owner
    /// first in the queue, the read shows our cell (or is a full slice), and every other
    /// cell carries a queue column that sorts before ours. Those owners were ahead of us and
    /// have left the queue: a holder leaves it once it holds. An owner never waits for a
    /// later column, so no two owners wait for each other.
    pub(super) fn may_wait_in_main(&self, cells: &[Cell]) -> bool {
        if !self.main.waits_in_main || self.mode != Mode::Mandatory {
            return false;
        }
        let shows_ours = cells.iter().any(|cell| self.is_ours(cell));
        (shows_ours || cells.len() >= MAIN_READ_LIMIT as usize)
            && cells.iter().filter(|cell| !self.is_ours(cell)).all(|cell| {
                MainCellValue::decode(&cell.value)
                    .ok()
                    .and_then(|value| value.queue_column().cloned())
                    .is_some_and(|column| column < self.queue.column)
            })
    }

    /// Whether an owner waiting in the main row writes its main cell with the waiter TTL:
    /// only if that is shorter than `lease_ttl` (docs/algorithm.md, section "Waiting in the
    /// main row").
    pub(super) fn shortens_main(&self) -> bool {
        self.main.waits_in_main && self.attempt.config.waiter_ttl() < self.attempt.config.ttl()
    }

    /// The TTL of our next main write (other than the renewal before holding): the waiter
    /// TTL while we wait in the main row, `lease_ttl` otherwise.
    pub(super) fn main_ttl(&self) -> Ttl {
        if self.main.waiting && self.shortens_main() {
            self.attempt.config.waiter_ttl()
        } else {
            self.attempt.config.ttl()
        }
    }

    /// The instant by which a renewal of our main cell, last written with the waiter TTL,
    /// must be acknowledged for the lock to be ours: the send of that write plus the
    /// waiter's effective life. Until then the cell is live on a quorum without a gap, as a
    /// holder's is between lease renewals. `None` when the cell carries `lease_ttl`.
    pub(super) fn renewal_due_by(&self) -> Option<MonotonicTime> {
        self.main
            .short_sent
            .map(|sent_at| sent_at + self.attempt.config.waiter_effective())
    }

    /// True when a renewal of our short main cell is acknowledged (or would be sent) too
    /// late: the cell may have expired before it, and another owner taken the lock.
    pub(super) fn renewal_late(&self, now: Now) -> bool {
        self.renewal_due_by().is_some_and(|due| now.instant >= due)
    }

    /// Our main cell was acknowledged as deleted, or never written: we wait in the main
    /// row no more.
    pub(super) fn main_gone(&mut self) {
        self.main.written = Written::No;
        self.main.waiting = false;
        self.main.short_sent = None;
    }

    /// A write of our main cell sent at `sent_at`, with `lease_ttl` or not, was
    /// acknowledged.
    pub(super) fn main_acked(&mut self, sent_at: MonotonicTime, short: bool) {
        self.main.written = Written::At(sent_at);
        self.main.short_sent = short.then_some(sent_at);
    }

    pub(super) fn on_main(&mut self, now: Now, sent_at: MonotonicTime, cells: &[Cell]) {
        if self.only_ours(cells) {
            // A cell last written with the waiter TTL must be renewed with `lease_ttl`
            // before we hold, in time (docs/algorithm.md, section "Waiting in the main
            // row"); past that time it may have lapsed already.
            if self.renewal_late(now) {
                self.conflict(now);
            } else if self.config().fencing {
                self.issue(now, Step::ReadFence);
            } else if self.main.short_sent.is_some() {
                self.issue(now, Step::RenewMain);
            } else {
                self.acquired(now, None);
            }
        } else if self.may_wait_in_main(cells) {
            self.stats.main_row_waits += 1;
            // The pace assumes a read takes the round trip: measure it on these reads too,
            // or a round trip learnt from slow queue reads would set a pace of back-to-back
            // main reads that take no time.
            self.poll.observe_round_trip(now.instant, sent_at);
            let pause = self.poll.pause(now.instant, 1, &self.attempt.config);
            let pause = self.listening_pause(pause, 1);
            let first_wait = !self.main.waiting;
            self.main.waiting = true;
            if first_wait && self.shortens_main() {
                // From now on our main cell carries the waiter TTL, so that a waiter that
                // dies first in line blocks the owners behind it no longer than its queue
                // cell would. The write goes out while we wait anyway.
                self.issue(
                    now,
                    Step::ShortenMain {
                        read_at: now.instant + pause,
                    },
                );
            } else {
                self.sleep(Step::ReadMain, now.instant + pause);
            }
        } else {
            self.queue.rejoin_behind = self.passed_by(cells);
            self.conflict(now);
        }
    }

    /// The rewrite of our short main cell with `lease_ttl`, sent at `sent_at`, was
    /// acknowledged (with the fence read, which chose `token`, when fencing is on). The
    /// lock is ours only if the acknowledgement came before the short cell may have lapsed:
    /// then our cell was live on a quorum without a gap from the read that showed it alone
    /// until now, as a holder's is between renewals.
    pub(super) fn on_renewal(
        &mut self,
        now: Now,
        sent_at: MonotonicTime,
        token: Option<FencingToken>,
    ) {
        if self.renewal_late(now) {
            self.main.written = Written::At(sent_at);
            self.conflict(now);
            return;
        }
        self.main_acked(sent_at, false);
        self.main.waiting = false;
        match token {
            Some(token) => self.issue(now, Step::WriteFence(token)),
            None => self.acquired(now, None),
        }
    }

    pub(super) fn conflict(&mut self, now: Now) {
        self.stats.conflicts += 1;
        self.main.conflicts = self.main.conflicts.saturating_add(1);
        self.issue(now, Step::DeleteMain);
    }

    /// After a conflict, pause (doubling per conflict, jittered) and check the queue again;
    /// a soft lock gives up after `soft_attempts` conflicts. The pause lets a competing
    /// owner's delete land before we look again, which is what lets the owner first in the
    /// queue win (Theorem 4) when network delays are shorter than the pause.
    pub(super) fn after_conflict(&mut self, now: Now) {
        if self.mode == Mode::Soft && self.main.conflicts >= self.config().soft_attempts {
            self.finish(now, Ending::Busy);
            return;
        }
        let poll = &self.attempt.config.config().poll;
        let pause = doubled(
            poll.min_interval,
            self.main.conflicts - 1,
            poll.max_interval,
        );
        let pause = self.rng.jitter(pause, poll.jitter_percent);
        self.back_off(Step::ReadQueue, now.instant + pause);
    }

    /// While pausing before a queue poll, when our queue cell is due for a rewrite.
    pub(super) fn renewal_due_while_sleeping(&self) -> Option<MonotonicTime> {
        let polling = match self.step {
            Step::ReadQueue => true,
            Step::ReadMain => self.main.waits_in_main,
            _ => false,
        };
        match self.queue.written {
            Written::At(at) if polling => Some(at + self.attempt.config.waiter_renew_every()),
            _ => None,
        }
    }
}

/// Whether a row slice holds exactly one cell, named by `owner` (the baseline algorithm's
/// test; its cells are named by owner ids and carry no value).
pub(crate) fn only_ours(cells: &[Cell], owner: &OwnerId) -> bool {
    matches!(cells, [cell] if cell.column.as_str() == owner.as_str())
}
