//! Lamport's bakery algorithm as the Apache Cassandra wiki's "Locking" page adapts it
//! (docs/algorithm.md, section "The bakery baseline"), kept as a third point of comparison.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::column::ColumnName;
use crate::config::{BakeryConfig, LockConfig, ValidConfig};
use crate::error::Error;
use crate::id::{LockId, OwnerId};
use crate::storage::{
    Cell, CellWrite, RowKey, RowKind, RowRead, StorageRequest, StorageResponse, Ttl,
};
use crate::time::{MonotonicTime, Now};

use super::acquire::{QueueExit, Written};
use super::attempt::{Attempt, Ending, Response, Wake};
use super::{
    AcquireOutcome, AcquireStats, HeldCell, Holding, Machine, Mode, Outgoing, RequestId,
    SplitMix64, doubled,
};

/// How many digits name a client's column: enough for
/// [`crate::config::MAX_BAKERY_CLIENTS`].
const ID_DIGITS: usize = 4;

/// One acquisition by the bakery algorithm.
///
/// # Storage
///
/// The wiki page keeps two maps per lock, *choosing* and *number*, each a row with one
/// column per client id. Here the choosing map is the lock's shadow row and the number map
/// its main row (no row kinds are added, and no lock id is derived from another); a
/// client's column is its [`BakeryConfig::client_id`] as four decimal digits (`0007`), so
/// columns sort by id. A choosing cell's value is the owner id; a number cell's value is
/// the number, 8 bytes big-endian, followed by the owner id, so that a renewal's read-back
/// knows its own cell. Every read is a slice of at most `max_clients + 1` cells, one more
/// than a well-configured lock can hold, so a cell of a client beyond `max_clients` is
/// always seen and reported as [`Error::InvalidConfig`] rather than silently ignored.
///
/// # Steps
///
/// The doorway: write our choosing cell; read the number row; take one more than the
/// largest number there; write our number cell; delete our choosing cell. Then the wait,
/// Lamport's loop over the other clients `j`: wait until `j` is seen not choosing, then
/// read `j`'s number until it is absent or `(number[j], j) > (number, client_id)`. A poll
/// makes one read of the choosing row (while some client is still to be seen not
/// choosing) followed by one of the number row, and each client passes its two gates once,
/// in that order, as in Lamport's loop: a client seen not choosing is then judged by a
/// number read sent afterwards. When every client has passed, the lock is ours. Unlike the
/// page's listing, ties are broken by client id (two clients that read the number row
/// together take the same number, and without the tie-break both would enter), and a
/// client's number is read again after it is seen not choosing (the page judges it by a
/// read made before).
///
/// Polls pause `poll.min_interval`, doubled for every poll that saw no client pass, at
/// most `poll.max_interval`, jittered by `poll.jitter_percent`.
///
/// # Leases
///
/// With [`BakeryConfig::lease`] (the default) every cell carries `lease_ttl`. A waiter
/// rewrites its number cell every `renew_every` while it waits, and starts again with a new
/// number (deleting the old one) whenever the cell may have lapsed: a rewrite that could
/// not be sent with `request_timeout` to spare before the effective lease ran out, or that
/// was acknowledged after it; a choosing cell that may have expired before the number
/// write landed; or a number cell found missing. The lock is held only with
/// `request_timeout` to spare before the number cell's lease runs out, and the holding's
/// main cell is the number cell, renewed and released by [`super::Lease`] and
/// [`super::Release`]. So a client that dies blocks the others for about `lease_ttl`.
///
/// Without it the cells have no TTL and are never rewritten, as on the page: a client that
/// dies after writing its number (or while choosing) blocks every other client for good.
/// The holding's lease deadline is then [`MonotonicTime::MAX`]. The page's warning is
/// found by the model checker (`lock-model/tests/bakery.rs`).
///
/// [`Mode::Soft`]: any client with a smaller number makes us busy at once; a client still
/// choosing is waited for through at most `soft_attempts` polls.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BakeryAcquire {
    attempt: Attempt,
    mode: Mode,
    lock_id: LockId,
    owner: OwnerId,
    client_id: u32,
    max_clients: u32,
    lease: bool,
    /// Whether equal numbers are ordered by client id (Lamport's rule, always on outside
    /// the model checker); see [`BakeryAcquire::without_tie_break`].
    tie_break: bool,
    choosing_row: RowKey,
    number_row: RowKey,
    column: ColumnName,
    rng: SplitMix64,
    step: Step,
    started_at: MonotonicTime,
    /// Our number, once taken (0 before).
    number: u64,
    choosing_written: Written,
    number_written: Written,
    /// Set when the choosing cell may have expired before our number landed: start again
    /// once the doorway is through.
    restart_after_doorway: bool,
    /// Clients that have not passed both gates; `None` before the first poll: all.
    open: Option<BTreeSet<u32>>,
    /// Clients not yet seen not choosing; `None` before the first choosing read: all.
    choosing_open: Option<BTreeSet<u32>>,
    /// Polls in a row in which no client passed.
    idle_polls: u32,
    /// Soft mode: polls that found a client still choosing.
    choosing_polls: u32,
    stats: AcquireStats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    WriteChoosing,
    ReadNumbers,
    WriteNumber,
    DeleteChoosing,
    /// Decide the next request of the wait: a renewal, a choosing read or a number read.
    Poll,
    RenewNumber,
    ReadChoosing,
    CheckNumbers,
    /// Delete our number cell and go through the doorway again.
    Restart,
}

impl BakeryAcquire {
    /// Starts acquiring `lock_id` as `owner`, as the client the configuration names
    /// ([`BakeryConfig::client_id`]); `seed` drives the poll jitter.
    pub fn new(
        now: Now,
        config: ValidConfig,
        mode: Mode,
        lock_id: LockId,
        owner: OwnerId,
        seed: u64,
        give_up_at: Option<MonotonicTime>,
    ) -> Self {
        let BakeryConfig {
            max_clients,
            client_id,
            lease,
        } = config.config().bakery;
        let mut acquire = BakeryAcquire {
            attempt: Attempt::new(config, give_up_at),
            mode,
            choosing_row: RowKey::new(RowKind::Shadow, lock_id.clone()),
            number_row: RowKey::new(RowKind::Main, lock_id.clone()),
            lock_id,
            owner,
            client_id,
            max_clients,
            lease,
            tie_break: true,
            column: client_column(client_id),
            rng: SplitMix64::new(seed),
            step: Step::WriteChoosing,
            started_at: now.instant,
            number: 0,
            choosing_written: Written::No,
            number_written: Written::No,
            restart_after_doorway: false,
            open: None,
            choosing_open: None,
            idle_polls: 0,
            choosing_polls: 0,
            stats: AcquireStats::default(),
        };
        acquire.issue(now, Step::WriteChoosing);
        acquire
    }

    /// The same acquisition judging numbers as the wiki page's listing does (its line 13,
    /// `number_hash[id] < client_number`): a client is ahead only with a *smaller* number,
    /// so two clients with equal numbers each let the other pass (docs/algorithm.md,
    /// section "The bakery baseline: Acquisition"). This breaks mutual exclusion and is here only so that the model
    /// checker can run the page's comparison on this machine and show it
    /// (`lock-model/tests/bakery.rs`); no configuration turns it on, and the driver never
    /// calls it. Everything else, including the page's other difference (numbers read
    /// once, before the choosing wait), stays as in [`BakeryAcquire::new`]. Call it
    /// before the first response: it changes only how number reads are judged.
    #[must_use]
    pub fn without_tie_break(mut self) -> Self {
        self.tie_break = false;
        self
    }

    /// The owner id of this acquisition.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// Our number, once the doorway has taken one (0 before).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Counters so far: `queue_reads` counts number-row reads, `conflicts` polls that
    /// found some client still ahead, `requeues` fresh starts through the doorway.
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

    fn write(&mut self, now: Now, row: RowKey, value: Vec<u8>) -> StorageRequest {
        let ttl: Option<Ttl> = self.lease.then(|| self.attempt.config.ttl());
        StorageRequest::Write(CellWrite {
            row,
            column: self.column.clone(),
            value,
            timestamp: self.attempt.stamps.next(now.timestamp),
            ttl,
        })
    }

    fn number_value(&self) -> Vec<u8> {
        let mut value = self.number.to_be_bytes().to_vec();
        value.extend_from_slice(self.owner.as_str().as_bytes());
        value
    }

    fn read(&self, row: &RowKey) -> StorageRequest {
        StorageRequest::Read(RowRead::first(row.clone(), self.max_clients + 1))
    }

    fn issue(&mut self, now: Now, step: Step) {
        let request = match step {
            Step::WriteChoosing => {
                self.choosing_written = Written::Maybe;
                let value = self.owner.as_str().as_bytes().to_vec();
                self.write(now, self.choosing_row.clone(), value)
            }
            Step::ReadNumbers | Step::CheckNumbers => self.read(&self.number_row),
            Step::ReadChoosing => self.read(&self.choosing_row),
            Step::WriteNumber | Step::RenewNumber => {
                if step == Step::WriteNumber {
                    self.number_written = Written::Maybe;
                }
                let value = self.number_value();
                self.write(now, self.number_row.clone(), value)
            }
            Step::DeleteChoosing => {
                self.attempt
                    .delete(now, self.choosing_row.clone(), self.column.clone())
            }
            Step::Restart => self
                .attempt
                .delete(now, self.number_row.clone(), self.column.clone()),
            Step::Poll => return self.poll(now),
        };
        self.step = step;
        self.attempt.send(now, request);
    }

    /// The next request of the wait.
    fn poll(&mut self, now: Now) {
        if let Written::At(sent_at) = self.number_written
            && self.lease
        {
            let deadline = self.attempt.config.lease_deadline(sent_at);
            if now.instant >= sent_at + self.attempt.config.renew_every() {
                if self.attempt.config.renewable(now.instant, deadline) {
                    self.issue(now, Step::RenewNumber);
                } else {
                    self.issue(now, Step::Restart);
                }
                return;
            }
        }
        if self
            .choosing_open
            .as_ref()
            .is_none_or(|open| !open.is_empty())
        {
            self.issue(now, Step::ReadChoosing);
        } else {
            self.issue(now, Step::CheckNumbers);
        }
    }

    /// With leases, until when our number cell is certainly alive.
    fn number_deadline(&self) -> Option<MonotonicTime> {
        match self.number_written {
            Written::At(sent_at) if self.lease => Some(self.attempt.config.lease_deadline(sent_at)),
            _ => None,
        }
    }

    fn finish(&mut self, now: Now, ending: Ending) {
        let mut cells = Vec::new();
        if self.choosing_written.maybe() {
            cells.push((self.choosing_row.clone(), self.column.clone()));
        }
        if self.number_written.maybe() {
            cells.push((self.number_row.clone(), self.column.clone()));
        }
        self.attempt.finish(now, ending, cells);
    }

    fn fail(&mut self, now: Now, error: Error) {
        self.finish(now, Ending::Failed(error));
    }

    fn on_success(&mut self, now: Now, sent_at: MonotonicTime, response: StorageResponse) {
        let cells = response.into_cells();
        match self.step {
            Step::WriteChoosing => {
                self.choosing_written = Written::At(sent_at);
                self.issue(now, Step::ReadNumbers);
            }
            Step::ReadNumbers => {
                self.stats.queue_reads += 1;
                match self.largest_other_number(&cells) {
                    Ok(Some(number)) => {
                        self.number = number;
                        self.issue(now, Step::WriteNumber);
                    }
                    Ok(None) => self.fail(
                        now,
                        Error::config(
                            "algorithm",
                            format!(
                                "found a bakery number of {} in the main row of {}, the \
                                 largest there is: no larger one can be taken; delete the \
                                 cell (it was not written by this library)",
                                u64::MAX,
                                self.lock_id
                            ),
                        ),
                    ),
                    Err(error) => self.fail(now, error),
                }
            }
            Step::WriteNumber => {
                self.number_written = Written::At(sent_at);
                if let Written::At(choosing_sent) = self.choosing_written
                    && self.lease
                    && now.instant >= self.attempt.config.lease_deadline(choosing_sent)
                {
                    self.restart_after_doorway = true;
                }
                self.issue(now, Step::DeleteChoosing);
            }
            Step::DeleteChoosing => {
                self.choosing_written = Written::No;
                if std::mem::take(&mut self.restart_after_doorway) {
                    self.issue(now, Step::Restart);
                } else {
                    self.issue(now, Step::Poll);
                }
            }
            Step::RenewNumber => match self.number_deadline() {
                Some(deadline) if now.instant < deadline => {
                    self.number_written = Written::At(sent_at);
                    self.issue(now, Step::Poll);
                }
                _ => self.issue(now, Step::Restart),
            },
            Step::ReadChoosing => match self.client_ids(&cells) {
                Ok(choosing) => {
                    self.choosing_open = Some(match self.choosing_open.take() {
                        None => choosing,
                        Some(open) => open.intersection(&choosing).copied().collect(),
                    });
                    self.issue(now, Step::CheckNumbers);
                }
                Err(error) => self.fail(now, error),
            },
            Step::CheckNumbers => {
                self.stats.queue_reads += 1;
                self.check_numbers(now, &cells);
            }
            Step::Restart => {
                self.number_written = Written::No;
                self.number = 0;
                self.open = None;
                self.choosing_open = None;
                self.idle_polls = 0;
                self.choosing_polls = 0;
                self.stats.requeues += 1;
                self.issue(now, Step::WriteChoosing);
            }
            Step::Poll => {}
        }
    }

    /// One more than the largest number of another client, `Ok(None)` if that would
    /// overflow.
    fn largest_other_number(&self, cells: &[Cell]) -> Result<Option<u64>, Error> {
        let mut largest = 0u64;
        for cell in cells {
            if self.client_id(cell)? != self.client_id {
                largest = largest.max(self.parse_number(cell)?);
            }
        }
        Ok(largest.checked_add(1))
    }

    /// The wait's number check: who has passed, and what next.
    fn check_numbers(&mut self, now: Now, cells: &[Cell]) {
        let ours = (self.number, self.client_id);
        let mut ahead = BTreeSet::new();
        let mut found_ours = false;
        for cell in cells {
            let parsed = self
                .client_id(cell)
                .and_then(|id| Ok((id, self.parse_number(cell)?)));
            let (id, number) = match parsed {
                Ok(parsed) => parsed,
                Err(error) => return self.fail(now, error),
            };
            if id == self.client_id {
                if cell.value != self.number_value() {
                    return self.fail(now, self.shared_id_error());
                }
                found_ours = true;
            } else if (number, id) < ours && (self.tie_break || number < self.number) {
                ahead.insert(id);
            }
        }
        if !found_ours {
            // Expired or deleted under us: others may already have passed us.
            return self.issue(now, Step::Restart);
        }
        let choosing = self.choosing_open.clone().unwrap_or_default();
        let open: BTreeSet<u32> = match &self.open {
            None => choosing.union(&ahead).copied().collect(),
            Some(open) => open
                .iter()
                .copied()
                .filter(|id| choosing.contains(id) || ahead.contains(id))
                .collect(),
        };
        let progressed = self.open.as_ref() != Some(&open);
        self.open = Some(open);
        let open = self.open.as_ref().map_or(0, BTreeSet::len);
        if open == 0 {
            return self.acquired(now);
        }
        self.stats.conflicts += 1;
        if self.mode == Mode::Soft {
            let behind_a_number = self.open.iter().flatten().any(|id| !choosing.contains(id));
            self.choosing_polls += 1;
            if behind_a_number || self.choosing_polls > self.config().soft_attempts {
                return self.finish(now, Ending::Busy);
            }
        }
        self.idle_polls = if progressed { 0 } else { self.idle_polls + 1 };
        let poll = &self.config().poll;
        let (min, max, jitter) = (poll.min_interval, poll.max_interval, poll.jitter_percent);
        let base = doubled(min, self.idle_polls, max);
        let pause: Duration = self.rng.jitter(base, jitter).clamp(min, max);
        self.step = Step::Poll;
        self.attempt.sleep_until(now.instant + pause);
    }

    fn acquired(&mut self, now: Now) {
        let Written::At(number_sent) = self.number_written else {
            return self.fail(
                now,
                Error::Internal("a bakery number held without its write"),
            );
        };
        let lease_deadline = match self.number_deadline() {
            Some(deadline) if !self.attempt.config.renewable(now.instant, deadline) => {
                return self.issue(now, Step::Restart);
            }
            Some(deadline) => deadline,
            None => MonotonicTime::MAX,
        };
        let holding = Holding {
            lock_id: self.lock_id.clone(),
            owner: self.owner.clone(),
            main: HeldCell {
                row: self.number_row.clone(),
                column: self.column.clone(),
                value: self.number_value(),
                written_at: number_sent,
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

    /// The client ids of `cells` other than ours.
    fn client_ids(&self, cells: &[Cell]) -> Result<BTreeSet<u32>, Error> {
        let mut ids = BTreeSet::new();
        for cell in cells {
            let id = self.client_id(cell)?;
            if id != self.client_id {
                ids.insert(id);
            }
        }
        Ok(ids)
    }

    /// The client a cell belongs to, or the error that says the lock's clients disagree.
    fn client_id(&self, cell: &Cell) -> Result<u32, Error> {
        let name = cell.column.as_str();
        let id = (name.len() == ID_DIGITS && name.bytes().all(|byte| byte.is_ascii_digit()))
            .then(|| name.parse::<u32>().ok())
            .flatten()
            .filter(|id| (1..=self.max_clients).contains(id));
        id.ok_or_else(|| {
            Error::config(
                "bakery.max_clients",
                format!(
                    "is {}, but the bakery rows of {} hold a cell {:?} that is not a client \
                     id from 1 to {}: give every locker of the lock the same max_clients",
                    self.max_clients, self.lock_id, name, self.max_clients
                ),
            )
        })
    }

    fn parse_number(&self, cell: &Cell) -> Result<u64, Error> {
        cell.value
            .first_chunk::<8>()
            .map(|bytes| u64::from_be_bytes(*bytes))
            .filter(|number| *number > 0)
            .ok_or_else(|| {
                Error::config(
                    "algorithm",
                    format!(
                        "is Algorithm::Bakery, but the main row of {} holds a cell {:?} that \
                         is not a bakery number: is another algorithm using the same lock id?",
                        self.lock_id,
                        cell.column.as_str()
                    ),
                )
            })
    }

    fn shared_id_error(&self) -> Error {
        Error::config(
            "bakery.client_id",
            format!(
                "is {}, and another locker wrote a number under the same id for {}: give \
                 every locker of a bakery lock its own client id",
                self.client_id, self.lock_id
            ),
        )
    }
}

/// The column of client `id` in both bakery rows: four decimal digits.
fn client_column(id: u32) -> ColumnName {
    ColumnName::new(format!("{id:0ID_DIGITS$}"))
}

impl Machine for BakeryAcquire {
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
            // A renewal that failed is tried again only if it can still be sent in time,
            // which the poll decides.
            Wake::Due if self.step == Step::RenewNumber => self.issue(now, Step::Poll),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MAX_BAKERY_CLIENTS;
    use crate::storage::CellDelete;
    use crate::test_store::Cells;
    use crate::time::Timestamp;

    const EPOCH: u64 = 1_700_000_000_000_000;

    fn lock() -> LockId {
        LockId::new("account:42").unwrap()
    }

    fn bakery(client_id: u32, lease: bool) -> LockConfig {
        LockConfig {
            algorithm: crate::Algorithm::Bakery,
            fencing: false,
            bakery: BakeryConfig {
                max_clients: 4,
                client_id,
                lease,
            },
            ..LockConfig::default()
        }
    }

    fn number_row() -> RowKey {
        RowKey::new(RowKind::Main, lock())
    }

    fn choosing_row() -> RowKey {
        RowKey::new(RowKind::Shadow, lock())
    }

    /// One single-node store and one time line.
    struct World {
        cells: Cells,
        micros: u64,
    }

    impl World {
        fn new() -> Self {
            World {
                cells: Cells::default(),
                micros: 0,
            }
        }

        fn now(&self) -> Now {
            Now::new(
                MonotonicTime::from_micros(self.micros),
                Timestamp::from_micros(EPOCH + self.micros),
            )
        }

        fn start(&self, client_id: u32, lease: bool, mode: Mode) -> BakeryAcquire {
            let config = bakery(client_id, lease).validate_rules().unwrap();
            let owner = OwnerId::new(format!("c{client_id}")).unwrap();
            BakeryAcquire::new(self.now(), config, mode, lock(), owner, 7, None)
        }

        fn apply(&mut self, request: StorageRequest) -> StorageResponse {
            let now = self.now().timestamp;
            self.cells.apply(request, now)
        }

        /// One event: the machine's next request answered 1 ms later, or else its
        /// timeout. Returns the request sent, if any.
        fn step(&mut self, machine: &mut BakeryAcquire) -> Option<StorageRequest> {
            if let Some(outgoing) = machine.poll_request() {
                self.micros += 1_000;
                let response = self.apply(outgoing.request.clone());
                machine.handle_response(self.now(), outgoing.id, Ok(response));
                return Some(outgoing.request);
            }
            let wake = machine.poll_timeout()?;
            self.micros = self.micros.max(wake.as_micros());
            machine.handle_timeout(self.now());
            None
        }

        /// Runs a machine alone until it has an outcome or `for_micros` have passed.
        fn run(
            &mut self,
            machine: &mut BakeryAcquire,
            for_micros: u64,
        ) -> (Option<AcquireOutcome>, Vec<StorageRequest>) {
            let until = self.micros + for_micros;
            let mut sent = Vec::new();
            while self.micros < until {
                sent.extend(self.step(machine));
                if let Some(outcome) = machine.poll_outcome() {
                    return (Some(outcome), sent);
                }
            }
            (None, sent)
        }

        fn live(&self, row: &RowKey) -> Vec<String> {
            let now = self.now().timestamp;
            let columns = self.cells.live_columns(row, now);
            columns.iter().map(|c| c.as_str().to_owned()).collect()
        }

        fn release(&mut self, holding: &Holding) {
            let timestamp = holding.last_timestamp.next();
            let (row, column) = (holding.main.row.clone(), holding.main.column.clone());
            self.micros += 1_000;
            self.apply(StorageRequest::Delete(CellDelete {
                row,
                column,
                timestamp,
            }));
        }
    }

    fn held(outcome: Option<AcquireOutcome>) -> Holding {
        match outcome {
            Some(AcquireOutcome::Acquired(holding)) => *holding,
            other => panic!("expected the lock, got {other:?}"),
        }
    }

    fn describe(requests: &[StorageRequest]) -> Vec<String> {
        requests
            .iter()
            .map(|request| format!("{} {}", request.verb(), request.row().kind.as_str()))
            .collect()
    }

    #[test]
    fn an_uncontended_lock_takes_number_one_in_six_requests() {
        let mut world = World::new();
        let mut machine = world.start(3, true, Mode::Mandatory);
        let (outcome, sent) = world.run(&mut machine, 1_000_000);
        assert_eq!(
            describe(&sent),
            [
                "write shadow",
                "read main",
                "write main",
                "delete from shadow",
                "read shadow",
                "read main",
            ]
        );
        let holding = held(outcome);
        assert_eq!(machine.number(), 1);
        assert_eq!(holding.main.row, number_row());
        assert_eq!(holding.main.column.as_str(), "0003");
        assert_eq!(&holding.main.value[..8], &1u64.to_be_bytes());
        assert_eq!(&holding.main.value[8..], b"c3");
        // The number write was the third request, sent at 2 ms.
        assert_eq!(holding.main.written_at, MonotonicTime::from_micros(2_000));
        assert_eq!(
            holding.lease_deadline,
            MonotonicTime::from_micros(2_000) + Duration::from_secs(8)
        );
        assert_eq!(holding.fencing_token, None);
        assert!(holding.queue.is_none() && holding.shadow.is_none());
        assert_eq!(world.live(&choosing_row()), Vec::<String>::new());
        assert_eq!(world.live(&number_row()), ["0003"]);
        // Every write carries the lease TTL.
        assert!(sent.iter().all(|request| match request {
            StorageRequest::Write(write) => write.ttl.is_some(),
            _ => true,
        }));
    }

    #[test]
    fn without_the_lease_cells_have_no_ttl_and_the_holding_no_deadline() {
        let mut world = World::new();
        let mut machine = world.start(1, false, Mode::Mandatory);
        let (outcome, sent) = world.run(&mut machine, 1_000_000);
        let holding = held(outcome);
        assert_eq!(holding.lease_deadline, MonotonicTime::MAX);
        assert!(sent.iter().all(|request| match request {
            StorageRequest::Write(write) => write.ttl.is_none(),
            _ => true,
        }));
    }

    /// Two clients that read the number row together take the same number; the smaller
    /// client id goes first, the other waits until its number is deleted.
    #[test]
    fn equal_numbers_go_in_client_id_order() {
        let mut world = World::new();
        let mut high = world.start(2, true, Mode::Mandatory);
        let mut low = world.start(1, true, Mode::Mandatory);
        // Both doorways in lockstep: write choosing, read numbers, write number, delete
        // choosing.
        for _ in 0..4 {
            world.step(&mut high);
            world.step(&mut low);
        }
        assert_eq!((high.number(), low.number()), (1, 1));
        let (outcome, _) = world.run(&mut high, 2_000_000);
        assert!(outcome.is_none(), "client 2 must wait for client 1");
        let holding = held(world.run(&mut low, 1_000_000).0);
        assert_eq!(holding.main.column.as_str(), "0001");
        world.release(&holding);
        let holding = held(world.run(&mut high, 1_000_000).0);
        assert_eq!(holding.main.column.as_str(), "0002");
    }

    /// The wiki page's comparison, numbers alone ([`BakeryAcquire::without_tie_break`]):
    /// two clients with the same number each let the other pass, and both hold.
    #[test]
    fn without_the_tie_break_equal_numbers_both_hold() {
        let mut world = World::new();
        let mut high = world.start(2, true, Mode::Mandatory).without_tie_break();
        let mut low = world.start(1, true, Mode::Mandatory).without_tie_break();
        for _ in 0..4 {
            world.step(&mut high);
            world.step(&mut low);
        }
        assert_eq!((high.number(), low.number()), (1, 1));
        let high_holding = held(world.run(&mut high, 1_000_000).0);
        let low_holding = held(world.run(&mut low, 1_000_000).0);
        assert_eq!(high_holding.main.column.as_str(), "0002");
        assert_eq!(low_holding.main.column.as_str(), "0001");
    }

    /// A larger number waits for a smaller one even with a smaller client id.
    #[test]
    fn a_later_number_waits_for_an_earlier_one_whatever_the_ids() {
        let mut world = World::new();
        let mut first = world.start(4, true, Mode::Mandatory);
        let first_holding = held(world.run(&mut first, 1_000_000).0);
        let mut second = world.start(1, true, Mode::Mandatory);
        let (outcome, sent) = world.run(&mut second, 3_000_000);
        assert!(outcome.is_none());
        assert_eq!(second.number(), 2);
        assert!(second.stats().conflicts > 0);
        // Waiting polls back off: far fewer than one per millisecond.
        assert!(sent.len() < 100, "{} requests", sent.len());
        world.release(&first_holding);
        let holding = held(world.run(&mut second, 1_000_000).0);
        assert_eq!(&holding.main.value[..8], &2u64.to_be_bytes());
    }

    /// Lamport's first gate: a client still choosing is waited for, even if it has no
    /// number yet, and then judged by a number read made after it stopped choosing.
    #[test]
    fn a_client_still_choosing_is_waited_for() {
        let mut world = World::new();
        let mut chooser = world.start(1, true, Mode::Mandatory);
        // The chooser writes its choosing cell and reads the (empty) number row.
        world.step(&mut chooser);
        world.step(&mut chooser);
        let mut waiter = world.start(2, true, Mode::Mandatory);
        let (outcome, _) = world.run(&mut waiter, 2_000_000);
        assert!(
            outcome.is_none(),
            "a client still choosing must be waited for"
        );
        assert_eq!(waiter.number(), 1);
        // The chooser also took 1 (it read before the waiter wrote), and has the smaller
        // id: it goes first, though its number was written last.
        let holding = held(world.run(&mut chooser, 1_000_000).0);
        assert_eq!(chooser.number(), 1);
        let (outcome, _) = world.run(&mut waiter, 2_000_000);
        assert!(outcome.is_none());
        world.release(&holding);
        held(world.run(&mut waiter, 1_000_000).0);
    }

    /// The wiki page's warning: without leases a client that dies after taking its number
    /// blocks everyone for good. With the lease its cell expires and the next client goes.
    #[test]
    fn a_dead_client_blocks_for_good_without_the_lease_and_for_a_ttl_with_it() {
        for lease in [false, true] {
            let mut world = World::new();
            let mut dead = world.start(1, lease, Mode::Mandatory);
            for _ in 0..3 {
                world.step(&mut dead); // choosing, read, number: then it dies
            }
            drop(dead);
            let mut waiter = world.start(2, lease, Mode::Mandatory);
            let (outcome, _) = world.run(&mut waiter, 600_000_000);
            if lease {
                let holding = held(outcome);
                // The dead client's cells lived 10 s; noticing took at most a poll more.
                let waited = holding.wait();
                assert!(waited >= Duration::from_secs(10), "{waited:?}");
                assert!(waited < Duration::from_secs(11), "{waited:?}");
            } else {
                assert!(outcome.is_none(), "ten minutes and still blocked");
                assert_eq!(world.live(&choosing_row()), ["0001"]);
            }
        }
    }

    /// A waiter's number cell is kept alive by rewrites while it waits, so it keeps its
    /// place however long the wait.
    #[test]
    fn a_long_wait_rewrites_the_number_and_keeps_its_place() {
        let mut world = World::new();
        // Client 1 holds number 1 in a cell without a TTL (it never expires).
        let mut holder = world.start(1, false, Mode::Mandatory);
        let holding = held(world.run(&mut holder, 1_000_000).0);
        let mut waiter = world.start(2, true, Mode::Mandatory);
        let (outcome, sent) = world.run(&mut waiter, 60_000_000);
        assert!(outcome.is_none());
        let rewrites = sent
            .iter()
            .filter(|request| matches!(request, StorageRequest::Write(w) if w.row == number_row()))
            .count();
        // The first write, then one every 5 s.
        assert!((12..=14).contains(&rewrites), "{rewrites} number writes");
        assert_eq!(waiter.stats().requeues, 0);
        assert_eq!(waiter.number(), 2);
        world.release(&holding);
        held(world.run(&mut waiter, 1_000_000).0);
    }

    /// A number cell that vanished under a waiter (expired, or deleted by an operator)
    /// sends it through the doorway again, for a new number.
    #[test]
    fn a_vanished_number_starts_the_doorway_again() {
        let mut world = World::new();
        let mut holder = world.start(1, false, Mode::Mandatory);
        let holding = held(world.run(&mut holder, 1_000_000).0);
        let mut waiter = world.start(2, true, Mode::Mandatory);
        world.run(&mut waiter, 100_000);
        world.apply(StorageRequest::Delete(CellDelete {
            row: number_row(),
            column: ColumnName::new("0002"),
            timestamp: waiter.attempt.last_timestamp().next(),
        }));
        world.micros += 1_000;
        world.release(&holding);
        let _ = world.run(&mut waiter, 1_000_000);
        assert_eq!(waiter.stats().requeues, 1);
    }

    #[test]
    fn a_soft_lock_is_busy_behind_a_smaller_number_and_cleans_up() {
        let mut world = World::new();
        let mut holder = world.start(3, true, Mode::Mandatory);
        held(world.run(&mut holder, 1_000_000).0);
        let mut soft = world.start(1, true, Mode::Soft);
        let (outcome, _) = world.run(&mut soft, 1_000_000);
        assert_eq!(outcome, Some(AcquireOutcome::Busy));
        assert_eq!(world.live(&number_row()), ["0003"]);
        assert_eq!(world.live(&choosing_row()), Vec::<String>::new());
        // Alone, a soft lock takes it.
        let mut world = World::new();
        let mut soft = world.start(1, true, Mode::Soft);
        held(world.run(&mut soft, 1_000_000).0);
    }

    #[test]
    fn a_soft_lock_waits_for_a_chooser_only_a_few_polls() {
        let mut world = World::new();
        let mut dead = world.start(1, false, Mode::Mandatory);
        world.step(&mut dead); // its choosing cell stays for good
        let mut soft = world.start(2, false, Mode::Soft);
        let (outcome, _) = world.run(&mut soft, 10_000_000);
        assert_eq!(outcome, Some(AcquireOutcome::Busy));
        assert_eq!(soft.stats().conflicts, 4); // soft_attempts (3) polls, then busy
    }

    fn config_field(config: LockConfig) -> &'static str {
        match config.validate() {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn bad_configurations_are_refused_with_the_field_named() {
        let fenced = LockConfig {
            fencing: true,
            ..bakery(1, true)
        };
        assert_eq!(config_field(fenced), "fencing");
        assert_eq!(config_field(bakery(0, true)), "bakery.client_id");
        assert_eq!(config_field(bakery(5, true)), "bakery.client_id");
        for max_clients in [0, MAX_BAKERY_CLIENTS + 1] {
            let mut config = bakery(1, true);
            config.bakery.max_clients = max_clients;
            assert_eq!(config_field(config), "bakery.max_clients");
        }
        let mut largest = bakery(MAX_BAKERY_CLIENTS, true);
        largest.bakery.max_clients = MAX_BAKERY_CLIENTS;
        assert!(largest.validate().is_ok());
        // Other algorithms ignore the bakery's settings.
        let queue = LockConfig {
            bakery: BakeryConfig {
                max_clients: 0,
                ..BakeryConfig::default()
            },
            ..LockConfig::default()
        };
        assert!(queue.validate().is_ok());
    }

    fn failed_field(outcome: Option<AcquireOutcome>) -> &'static str {
        match outcome {
            Some(AcquireOutcome::Failed(Error::InvalidConfig { field, .. })) => field,
            other => panic!("expected a config failure, got {other:?}"),
        }
    }

    #[test]
    fn cells_of_clients_configured_otherwise_fail_the_acquisition() {
        let foreign = |world: &mut World, column: &str, value: Vec<u8>| {
            world.apply(StorageRequest::Write(CellWrite {
                row: number_row(),
                column: ColumnName::new(column),
                value,
                timestamp: Timestamp::from_micros(EPOCH),
                ttl: None,
            }));
        };
        let number = |n: u64| n.to_be_bytes().to_vec();
        // A client id beyond max_clients (4), in four digits or not.
        for column in ["0005", "7", "host1"] {
            let mut world = World::new();
            foreign(&mut world, column, number(1));
            let mut machine = world.start(1, true, Mode::Mandatory);
            let (outcome, _) = world.run(&mut machine, 1_000_000);
            assert_eq!(failed_field(outcome), "bakery.max_clients", "{column}");
            assert_eq!(world.live(&choosing_row()), Vec::<String>::new());
        }
        // A cell that is no bakery number (another algorithm on the same lock id).
        let mut world = World::new();
        foreign(&mut world, "0002", Vec::new());
        let mut machine = world.start(1, true, Mode::Mandatory);
        assert_eq!(
            failed_field(world.run(&mut machine, 1_000_000).0),
            "algorithm"
        );
        // The largest number there is.
        let mut world = World::new();
        foreign(&mut world, "0002", number(u64::MAX));
        let mut machine = world.start(1, true, Mode::Mandatory);
        assert_eq!(
            failed_field(world.run(&mut machine, 1_000_000).0),
            "algorithm"
        );
        // Another locker writing under our id.
        let mut world = World::new();
        foreign(&mut world, "0002", number(1));
        let mut machine = world.start(1, true, Mode::Mandatory);
        for _ in 0..4 {
            world.step(&mut machine);
        }
        let mut value = number(2);
        value.extend_from_slice(b"intruder");
        world.apply(StorageRequest::Write(CellWrite {
            row: number_row(),
            column: ColumnName::new("0001"),
            value,
            timestamp: Timestamp::from_micros(EPOCH + 1_000_000_000),
            ttl: None,
        }));
        assert_eq!(
            failed_field(world.run(&mut machine, 1_000_000).0),
            "bakery.client_id"
        );
    }

    #[test]
    fn giving_up_deletes_both_cells() {
        let mut world = World::new();
        let mut holder = world.start(1, true, Mode::Mandatory);
        held(world.run(&mut holder, 1_000_000).0);
        let config = bakery(2, true).validate().unwrap();
        let give_up = world.now().instant + Duration::from_secs(1);
        let owner = OwnerId::new("c2").unwrap();
        let mut waiter = BakeryAcquire::new(
            world.now(),
            config,
            Mode::Mandatory,
            lock(),
            owner,
            1,
            Some(give_up),
        );
        let (outcome, _) = world.run(&mut waiter, 5_000_000);
        assert_eq!(outcome, Some(AcquireOutcome::TimedOut));
        assert_eq!(world.live(&number_row()), ["0001"]);
        let mut abandoned = world.start(3, true, Mode::Mandatory);
        world.step(&mut abandoned);
        abandoned.abandon(world.now());
        let (outcome, _) = world.run(&mut abandoned, 1_000_000);
        assert_eq!(outcome, Some(AcquireOutcome::Abandoned));
        assert_eq!(world.live(&choosing_row()), Vec::<String>::new());
    }
}
