//! Step-by-step tests of the machines against the single-node test store, on a time line
//! the test controls.

use std::time::Duration;

use proptest::prelude::*;

use super::seats::IDLE_LOCKS_REMEMBERED;
use super::*;
use crate::column::{ColumnName, MainCellValue, QueueColumn};
use crate::config::{Algorithm, LockConfig, ValidConfig};
use crate::error::Error;
use crate::id::{LockId, OwnerId};
use crate::storage::{RowKey, RowKind, StorageRequest, StorageResponse};
use crate::test_store::Cells;
use crate::time::{MonotonicTime, Now, Timestamp};

mod hint_tests;
mod linger_rules_tests;
mod rejoin_tests;
mod release_rules_tests;

const EPOCH: u64 = 1_700_000_000_000_000;

/// The default configuration with waiting in the main row off: these tests follow the
/// queue's steps of docs/algorithm.md section 6, and those of section 6.2 turn it on.
fn without_waiting_in_main() -> LockConfig {
    LockConfig {
        wait_in_main_row: false,
        ..LockConfig::default()
    }
}

fn config() -> ValidConfig {
    without_waiting_in_main().validate().unwrap()
}

fn lock() -> LockId {
    LockId::new("account:42").unwrap()
}

fn owner(name: &str) -> OwnerId {
    OwnerId::new(name).unwrap()
}

fn row(kind: RowKind) -> RowKey {
    RowKey::new(kind, lock())
}

/// One store and one time line; instants and timestamps move together.
///
/// The world is the tests' watchdog: every loop that drives a machine moves its clock or
/// sends it requests, so a machine that never finishes runs into [`WORLD_TIME_LIMIT`] or
/// [`WORLD_REQUEST_LIMIT`] and fails its test, instead of spinning.
struct World {
    cells: Cells,
    micros: u64,
    requests: u64,
}

/// The longest any test's world runs: the longest test waits a few minutes.
const WORLD_TIME_LIMIT: Duration = Duration::from_secs(2 * 3600);

/// The most requests any test's world answers: the busiest test sends a few thousand.
const WORLD_REQUEST_LIMIT: u64 = 1_000_000;

impl World {
    fn new() -> Self {
        World {
            cells: Cells::default(),
            micros: 0,
            requests: 0,
        }
    }

    fn check_limits(&self) {
        assert!(
            Duration::from_micros(self.micros) <= WORLD_TIME_LIMIT
                && self.requests <= WORLD_REQUEST_LIMIT,
            "watchdog: the machines under test ran past {WORLD_TIME_LIMIT:?} of world time or \
             {WORLD_REQUEST_LIMIT} requests ({:?}, {} requests): a loop without end",
            Duration::from_micros(self.micros),
            self.requests
        );
    }

    fn now(&self) -> Now {
        Now::new(
            MonotonicTime::from_micros(self.micros),
            Timestamp::from_micros(EPOCH + self.micros),
        )
    }

    fn advance_to(&mut self, instant: MonotonicTime) {
        self.micros = self.micros.max(instant.as_micros());
        self.check_limits();
    }

    fn advance(&mut self, by: Duration) {
        self.micros += u64::try_from(by.as_micros()).unwrap();
        self.check_limits();
    }

    fn apply(&mut self, request: StorageRequest) -> StorageResponse {
        self.requests += 1;
        self.check_limits();
        let now = self.now().timestamp;
        self.cells.apply(request, now)
    }

    /// Sends the machine's next request, and lets it land and be answered `delay` later.
    fn answer_after<M: Machine>(&mut self, machine: &mut M, delay: Duration) {
        let outgoing = machine.poll_request().expect("a request to send");
        self.advance(delay);
        let response = self.apply(outgoing.request);
        machine.handle_response(self.now(), outgoing.id, Ok(response));
    }

    /// Sends every pending request at once and answers it, until the machine is quiet.
    /// Returns the requests in the order sent.
    fn settle<M: Machine>(&mut self, machine: &mut M) -> Vec<StorageRequest> {
        let mut sent = Vec::new();
        while let Some(outgoing) = machine.poll_request() {
            sent.push(outgoing.request.clone());
            let response = self.apply(outgoing.request);
            machine.handle_response(self.now(), outgoing.id, Ok(response));
        }
        sent
    }

    /// Runs a machine to its outcome, jumping the clock to each timeout.
    fn finish<M: Machine>(&mut self, machine: &mut M) -> (M::Outcome, Vec<StorageRequest>) {
        let mut sent = Vec::new();
        for _ in 0..10_000 {
            sent.extend(self.settle(machine));
            if let Some(outcome) = machine.poll_outcome() {
                return (outcome, sent);
            }
            let wake = machine
                .poll_timeout()
                .expect("a quiet machine must wait for time");
            self.advance_to(wake);
            machine.handle_timeout(self.now());
        }
        panic!("the machine did not finish in 10 000 steps");
    }

    /// Answers the acquisition's requests at once until it sends its fence write, and
    /// returns that write unanswered.
    fn answer_until_fence_write(&mut self, acquire: &mut Acquire) -> Outgoing {
        loop {
            let outgoing = acquire.poll_request().unwrap();
            if matches!(&outgoing.request, StorageRequest::Write(write) if write.row.kind == RowKind::Fence)
            {
                return outgoing;
            }
            let response = self.apply(outgoing.request);
            acquire.handle_response(self.now(), outgoing.id, Ok(response));
        }
    }

    fn live(&self, kind: RowKind) -> Vec<ColumnName> {
        self.cells.live_columns(&row(kind), self.now().timestamp)
    }

    fn acquire(&self, mode: Mode, name: &str) -> Acquire {
        Acquire::new(self.now(), config(), mode, lock(), owner(name), 7, None)
    }

    /// A mandatory acquisition by `name` with `config`.
    fn acquire_with(&self, config: ValidConfig, name: &str) -> Acquire {
        Acquire::new(
            self.now(),
            config,
            Mode::Mandatory,
            lock(),
            owner(name),
            7,
            None,
        )
    }
}

fn kinds(requests: &[StorageRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|request| {
            let verb = match request {
                StorageRequest::Write(_) => "write",
                StorageRequest::Delete(_) => "delete",
                StorageRequest::Read(_) => "read",
            };
            format!("{verb} {}", request.row().kind.as_str())
        })
        .collect()
}

/// The default configuration but with `waiter_ttl` at `lease_ttl`: queue cells are written
/// and renewed as before waiter TTLs existed.
fn waiters_like_holders() -> ValidConfig {
    LockConfig {
        waiter_ttl: LockConfig::default().lease_ttl,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

/// A lock held by `name` whose queue cell lives as long as its lease without a [`Lease`]
/// running: taken with `waiter_ttl` at `lease_ttl`, for tests about something else that let
/// seconds pass without renewing.
fn unrenewed_holder(world: &mut World, name: &str) -> Holding {
    let mut acquire = world.acquire_with(waiters_like_holders(), name);
    holding(world.finish(&mut acquire).0)
}

fn holding(outcome: AcquireOutcome) -> Holding {
    match outcome {
        AcquireOutcome::Acquired(holding) => *holding,
        other => panic!("expected the lock, got {other:?}"),
    }
}

fn release(world: &mut World, holding: &Holding) {
    let mut release = Release::new(
        world.now(),
        config(),
        holding.cells(),
        holding.last_timestamp,
    );
    let (result, _) = world.finish(&mut release);
    result.unwrap();
}

fn without_fencing() -> ValidConfig {
    LockConfig {
        fencing: false,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

#[test]
fn an_uncontended_mandatory_lock_takes_four_requests_without_fencing() {
    let mut world = World::new();
    let mut acquire = world.acquire_with(without_fencing(), "a");
    let (outcome, sent) = world.finish(&mut acquire);
    assert_eq!(
        kinds(&sent),
        ["write queue", "read queue", "write main", "read main"]
    );
    let holding = holding(outcome);
    assert_eq!(holding.stats.requests, 4);
    assert_eq!(holding.fencing_token, None);
    assert_eq!(
        holding.lease_deadline,
        MonotonicTime::ZERO + config().effective_lease()
    );
    assert_eq!(world.live(RowKind::Main), [ColumnName::new("a")]);
    let StorageRequest::Write(queue_write) = &sent[0] else {
        panic!("the first request must write the queue cell");
    };
    assert_eq!(
        QueueColumn::decode(queue_write.column.as_str()).unwrap(),
        QueueColumn::new(world.now().timestamp, owner("a"))
    );
    assert_eq!(queue_write.ttl, Some(config().waiter_ttl()));
}

#[test]
fn fencing_adds_a_fence_read_and_write() {
    let mut world = World::new();
    let (outcome, sent) = world.finish(&mut world.acquire(Mode::Mandatory, "a"));
    assert_eq!(
        kinds(&sent),
        [
            "write queue",
            "read queue",
            "write main",
            "read main",
            "read fence",
            "write fence"
        ]
    );
    let token = holding(outcome).fencing_token.unwrap();
    assert_eq!(token.get(), world.now().timestamp.as_micros());
}

#[test]
fn fencing_tokens_grow_from_holder_to_holder_even_when_clocks_go_back() {
    let mut world = World::new();
    let mut tokens = Vec::new();
    for (index, skew_back) in [0u64, 5_000_000, 9_000_000, 9_500_000].iter().enumerate() {
        world.advance(Duration::from_millis(1));
        let mut now = world.now();
        now.timestamp = now.timestamp - Duration::from_micros(*skew_back);
        let mut acquire = Acquire::new(
            now,
            config(),
            Mode::Mandatory,
            lock(),
            owner(&format!("o{index}")),
            1,
            None,
        );
        let held = holding(world.finish(&mut acquire).0);
        tokens.push(held.fencing_token.unwrap());
        release(&mut world, &held);
    }
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{tokens:?}"
    );
}

#[test]
fn an_owner_paused_before_publishing_its_token_never_holds_with_a_stale_one() {
    let mut world = World::new();
    let mut paused = world.acquire(Mode::Mandatory, "paused");
    let fence_write = world.answer_until_fence_write(&mut paused);
    world.advance(config().ttl().as_duration() + Duration::from_secs(1));
    let successor = holding(world.finish(&mut world.acquire(Mode::Mandatory, "next")).0);
    let successor_token = successor.fencing_token.unwrap();
    release(&mut world, &successor);
    let response = world.apply(fence_write.request);
    paused.handle_response(world.now(), fence_write.id, Ok(response));
    let (outcome, _) = world.finish(&mut paused);
    let late = holding(outcome);
    assert!(
        late.stats.conflicts >= 1,
        "the stale acquisition must be given back"
    );
    assert!(late.fencing_token.unwrap() > successor_token);
}

fn seated(world: &World, name: &str, seat: &str, after: u64, floor: Option<Timestamp>) -> Acquire {
    let options = AcquireOptions {
        give_up_at: None,
        seat: Some(Seat {
            column: ColumnName::new(seat),
            after: Timestamp::from_micros(after),
        }),
        queue_floor: floor,
        fast_path: false,
        poll_hint: None,
        lock_interval: None,
        floor_from_main: false,
        wake_hint_listener: None,
    };
    Acquire::with_options(
        world.now(),
        config(),
        Mode::Mandatory,
        lock(),
        owner(name),
        7,
        options,
    )
}

#[test]
fn a_seated_owner_writes_its_main_cell_in_its_seat_with_its_queue_column_as_a_head() {
    let mut world = World::new();
    let mut a = seated(&world, "a", "locker-1.0", 0, None);
    let (outcome, requests) = world.finish(&mut a);
    let holding = holding(outcome);
    assert_eq!(world.live(RowKind::Main), [ColumnName::new("locker-1.0")]);
    assert_eq!(holding.main.column.as_str(), "locker-1.0");
    let column = QueueColumn::decode(holding.queue.as_ref().unwrap().column.as_str()).unwrap();
    assert_eq!(column.owner, owner("a"));
    let value = MainCellValue::Head(column).encode();
    assert_eq!(holding.main.value, value);
    let main_write = requests
        .iter()
        .find_map(|request| match request {
            StorageRequest::Write(write) if write.row.kind == RowKind::Main => Some(write),
            _ => None,
        })
        .unwrap();
    assert_eq!(main_write.value, value);
    release(&mut world, &holding);
    assert!(world.live(RowKind::Main).is_empty());
}

#[test]
fn a_cell_left_in_our_seat_by_an_earlier_owner_is_not_ours() {
    let mut world = World::new();
    // An earlier acquisition in seat "s.0" left its main cell, with a timestamp far ahead of
    // our clock (say it was written by a clock that later stepped back).
    let stale_at = EPOCH + 60_000_000;
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Main),
        column: ColumnName::new("s.0"),
        value: b"old".to_vec(),
        timestamp: Timestamp::from_micros(stale_at),
        ttl: Some(config().ttl()),
    }));
    let mut a = seated(&world, "a", "s.0", 0, None);
    world.settle(&mut a);
    assert!(
        a.poll_outcome().is_none(),
        "the old cell shadows ours: no lock"
    );
    assert!(a.stats().conflicts >= 1);
    // With the seat's `after` at the earlier owner's last timestamp, our writes go above it.
    let mut b = seated(&world, "b", "s.0", stale_at, None);
    let (outcome, _) = world.finish(&mut b);
    let value = MainCellValue::decode(&holding(outcome).main.value).unwrap();
    assert_eq!(value.owner(), &owner("b"));
    assert!(b.last_timestamp().as_micros() > stale_at);
}

#[test]
fn queue_reads_start_at_the_floor_and_never_after_our_own_cell() {
    let mut world = World::new();
    let floor = Timestamp::from_micros(EPOCH - 5);
    let mut a = seated(&world, "a", "s.0", 0, Some(floor));
    let (outcome, requests) = world.finish(&mut a);
    holding(outcome);
    let starts = queue_read_starts(&requests);
    let margin = Acquire::floor_margin(config().config());
    let expected = QueueColumn::time_prefix(floor - margin);
    assert_eq!(starts, [Some(expected)], "the floor's time less the margin");
    assert_eq!(a.queue_head(), Some(a.queue_column()));

    let ahead_of_us = Timestamp::from_micros(EPOCH + 3_600_000_000);
    let mut b = seated(&world, "b", "s.1", 0, Some(ahead_of_us));
    let own = b.queue_column().encode();
    let requests = world.settle(&mut b);
    let start = queue_read_starts(&requests).first().cloned();
    assert_eq!(
        start,
        Some(Some(own)),
        "a floor after our own cell is clamped to it"
    );
}

/// A locker's first acquisition of a lock, as [`crate::machine::TakenSeat::options`] makes
/// it: the floor `cold_lookback` back, and a main read for a later one.
fn cold(world: &World, mode: Mode, name: &str, seat: &str) -> Acquire {
    let options = AcquireOptions {
        seat: Some(Seat {
            column: ColumnName::new(seat),
            after: Timestamp::ZERO,
        }),
        queue_floor: Some(world.now().timestamp - config().config().poll.cold_lookback),
        floor_from_main: true,
        ..AcquireOptions::default()
    };
    Acquire::with_options(world.now(), config(), mode, lock(), owner(name), 7, options)
}

fn queue_read_starts(requests: &[StorageRequest]) -> Vec<Option<ColumnName>> {
    requests
        .iter()
        .filter_map(|request| match request {
            StorageRequest::Read(read) if read.row.kind == RowKind::Queue => {
                Some(read.start.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_first_acquisition_starts_its_queue_reads_at_the_head_a_holders_main_cell_names() {
    let mut world = World::new();
    let mut a = world.acquire(Mode::Mandatory, "a");
    let held = holding(world.finish(&mut a).0);
    world.advance(Duration::from_secs(1));
    let mut b = cold(&world, Mode::Mandatory, "b", "s.0");
    let sent = world.settle(&mut b);
    assert_eq!(
        kinds(&sent[..3]),
        ["write queue", "read main", "read queue"],
        "the main read goes out with the first queue write"
    );
    let margin = Acquire::floor_margin(config().config());
    let from_head = QueueColumn::time_prefix(a.queue_column().timestamp - margin);
    let cold_floor = QueueColumn::time_prefix(
        world.now().timestamp - config().config().poll.cold_lookback - margin,
    );
    assert!(from_head > cold_floor);
    assert_eq!(queue_read_starts(&sent), [Some(from_head)]);
    assert_eq!(b.queue_head(), Some(a.queue_column()), "the holder is seen");
    release(&mut world, &held);
    let (outcome, sent) = world.finish(&mut b);
    holding(outcome);
    assert!(
        kinds(&sent)
            .iter()
            .filter(|kind| *kind == "read main")
            .count()
            == 1,
        "only the first queue write carries a main read: {:?}",
        kinds(&sent)
    );
}

#[test]
fn main_cells_that_name_no_head_leave_the_cold_floor() {
    let mut world = World::new();
    // A fast-path main cell goes out before its owner has read the queue, so it names no
    // head; nor do the values of older versions, or bytes that decode as nothing.
    let mut fast = Acquire::with_options(
        world.now(),
        config(),
        Mode::Mandatory,
        lock(),
        owner("fast"),
        7,
        AcquireOptions {
            fast_path: true,
            ..AcquireOptions::default()
        },
    );
    let write = fast.poll_request().into_iter().chain(fast.poll_request());
    let main_write = write
        .filter_map(|outgoing| match outgoing.request {
            StorageRequest::Write(write) if write.row.kind == RowKind::Main => Some(write),
            _ => None,
        })
        .next()
        .unwrap();
    assert_eq!(
        main_write.value,
        MainCellValue::Queued(fast.queue_column().clone()).encode()
    );
    world.apply(StorageRequest::Write(main_write));
    for (column, value) in [("old.0", b"old".to_vec()), ("junk.0", vec![0xff, b'^'])] {
        world.apply(StorageRequest::Write(crate::storage::CellWrite {
            row: row(RowKind::Main),
            column: ColumnName::new(column),
            value,
            timestamp: world.now().timestamp,
            ttl: Some(config().ttl()),
        }));
    }
    world.advance(Duration::from_secs(1));
    assert_eq!(world.live(RowKind::Main).len(), 3);
    let mut b = cold(&world, Mode::Mandatory, "b", "s.0");
    let sent = world.settle(&mut b);
    let margin = Acquire::floor_margin(config().config());
    let cold_floor = QueueColumn::time_prefix(
        world.now().timestamp - config().config().poll.cold_lookback - margin,
    );
    assert_eq!(kinds(&sent[..2]), ["write queue", "read main"]);
    assert_eq!(queue_read_starts(&sent), [Some(cold_floor)]);
}

#[test]
fn a_soft_acquisition_reads_no_main_row_for_a_floor() {
    let mut world = World::new();
    let mut b = cold(&world, Mode::Soft, "b", "s.0");
    let (outcome, sent) = world.finish(&mut b);
    holding(outcome);
    assert_eq!(
        kinds(&sent[..3]),
        ["read main", "write queue", "read queue"],
        "its first check already read the main row, and found it empty"
    );
}

#[test]
fn a_waiter_reports_the_head_it_saw_as_the_next_floor() {
    let mut world = World::new();
    let mut a = world.acquire(Mode::Mandatory, "a");
    let (outcome, _) = world.finish(&mut a);
    let first = holding(outcome);
    world.advance(Duration::from_millis(1));
    let mut b = seated(&world, "b", "s.0", 0, None);
    world.settle(&mut b);
    assert_eq!(b.queue_head(), Some(a.queue_column()));
    release(&mut world, &first);
}

#[test]
fn release_deletes_both_cells_and_frees_the_lock_at_once() {
    let mut world = World::new();
    let holding = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    release(&mut world, &holding);
    assert!(world.live(RowKind::Main).is_empty());
    assert!(world.live(RowKind::Queue).is_empty());
    let (outcome, _) = world.finish(&mut world.acquire(Mode::Soft, "b"));
    holding_of_b(outcome);
}

fn holding_of_b(outcome: AcquireOutcome) {
    assert_eq!(holding(outcome).owner, owner("b"));
}

#[test]
fn a_soft_lock_while_held_is_busy_without_writing_anything() {
    let mut world = World::new();
    let _held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let (outcome, sent) = world.finish(&mut world.acquire(Mode::Soft, "b"));
    assert_eq!(outcome, AcquireOutcome::Busy);
    assert_eq!(kinds(&sent), ["read main"]);
}

#[test]
fn a_soft_lock_behind_a_queued_owner_leaves_no_queue_cell() {
    let mut world = World::new();
    let mut first = world.acquire(Mode::Mandatory, "a");
    let queue_write = first.poll_request().unwrap();
    world.apply(queue_write.request);
    world.advance(Duration::from_millis(1));
    let (outcome, sent) = world.finish(&mut world.acquire(Mode::Soft, "b"));
    assert_eq!(outcome, AcquireOutcome::Busy);
    assert_eq!(
        kinds(&sent),
        ["read main", "write queue", "read queue", "delete queue"]
    );
    assert_eq!(world.live(RowKind::Queue).len(), 1);
}

#[test]
fn a_waiter_gets_the_lock_right_after_the_release() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    world.advance(Duration::from_millis(1));
    let mut waiter = world.acquire(Mode::Mandatory, "b");
    world.settle(&mut waiter);
    assert!(waiter.poll_outcome().is_none());
    let first_poll = waiter.poll_timeout().unwrap();
    assert_eq!(
        first_poll,
        world.now().instant + crate::config::MIN_NEXT_IN_LINE_PERIOD,
        "the owner next in line follows the round trip, here zero, down to the floor"
    );
    world.advance(Duration::from_millis(20));
    release(&mut world, &held);
    let released_at = world.now().instant;
    let (outcome, _) = world.finish(&mut waiter);
    let acquired = holding(outcome);
    assert_eq!(acquired.owner, owner("b"));
    let handoff = acquired.acquired_at.saturating_duration_since(released_at);
    assert!(
        handoff <= config().config().poll.max_interval,
        "hand-off took {handoff:?}"
    );
}

/// The glue between a held lock and its seat's next user, which the driver's guard and the
/// model's clients both call.
#[test]
fn a_holders_seat_ending_gives_its_queue_head_and_a_poll_hint_unless_the_lease_was_lost() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    world.advance(Duration::from_millis(1));
    let mut next = world.acquire(Mode::Mandatory, "b");
    world.settle(&mut next);
    let mut last = world.acquire(Mode::Mandatory, "c");
    world.settle(&mut last);
    world.advance(Duration::from_millis(20));
    release(&mut world, &held);
    let between = holding(world.finish(&mut next).0);
    // c's next poll sees a gone and b still ahead: a departure, whence a hand-off estimate.
    world.advance_to(last.poll_timeout().unwrap());
    last.handle_timeout(world.now());
    world.settle(&mut last);
    world.advance(Duration::from_millis(20));
    release(&mut world, &between);
    let taken = holding(world.finish(&mut last).0);
    world.advance(Duration::from_millis(5));
    let released_at = world.now().instant;
    let after = Timestamp::from_micros(u64::MAX / 2);

    let first = SeatEnding::of(&held).seat_return(released_at, after, None);
    assert!(first.found_idle, "a found the lock idle");
    assert_eq!(first.last_timestamp, after);

    let ending = SeatEnding::of(&taken);
    let kept = ending.seat_return(released_at, after, None);
    let enqueued = taken
        .queue
        .as_ref()
        .map(|cell| cell.column.as_str())
        .unwrap();
    assert_eq!(
        kept.queue_head,
        Some(QueueColumn::decode_timestamp(enqueued).unwrap())
    );
    assert!(!kept.found_idle, "c waited");
    let hint = kept.poll_hint.expect("c estimated a hand-off");
    assert_eq!(hint.departed_at, released_at);
    assert_eq!(hint.handoff, taken.stats.handoff_estimate);
    assert_eq!(
        hint.turn,
        released_at.saturating_duration_since(taken.main.written_at)
    );
    assert_eq!(hint.ahead, taken.stats.ahead_at_return);

    let lost = ending.seat_return(released_at, after, Some(released_at));
    assert_eq!(lost.lost_at, Some(released_at));
    assert_eq!(lost.poll_hint, None, "a lost lease leaves no hint");
    let unhinted = ending
        .without_poll_hint()
        .seat_return(released_at, after, None);
    assert_eq!(unhinted.poll_hint, None);
    assert_eq!(unhinted.queue_head, kept.queue_head);
}

/// The seat glue the driver's locker and guard and the model's clients all call: a book
/// starts each acquisition with its seat and options, and the acquisition's [`SeatUse`]
/// gives the seat back, at once without the lock, after the release with it, with what the
/// next acquisition of the lock needs: the holder's enqueue time and its poll hint.
#[test]
fn a_seat_use_hands_a_holders_queue_head_and_poll_hint_to_the_next_acquisition() {
    let config = config();
    let mut book = SeatBook::new("p", &config);
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    world.advance(Duration::from_millis(1));
    let mut next = world.acquire(Mode::Mandatory, "b");
    world.settle(&mut next);
    let (mut seat, options) = book.start(&lock(), world.now(), None);
    let column = |options: &AcquireOptions| options.seat.clone().unwrap().column;
    assert_eq!(column(&options), ColumnName::new("p.0"));
    let mut last = AnyAcquire::new(
        world.now(),
        config.clone(),
        Mode::Mandatory,
        lock(),
        owner("c"),
        7,
        options,
    );
    world.settle(&mut last);
    world.advance(Duration::from_millis(20));
    release(&mut world, &held);
    let between = holding(world.finish(&mut next).0);
    // c's next poll sees a gone and b still ahead: a departure, whence a hand-off estimate.
    world.advance_to(last.poll_timeout().unwrap());
    last.handle_timeout(world.now());
    world.settle(&mut last);
    world.advance(Duration::from_millis(20));
    release(&mut world, &between);
    let taken = holding(world.finish(&mut last).0);
    seat.acquisition_ended(&mut book, &last, Some(&taken));

    // While c holds, its seat stays taken; d, ending without the lock, gives its own back.
    let (mut other, options) = book.start(&lock(), world.now(), None);
    assert_eq!(column(&options), ColumnName::new("p.1"));
    let mut soft = AnyAcquire::new(
        world.now(),
        config.clone(),
        Mode::Soft,
        lock(),
        owner("d"),
        7,
        options,
    );
    assert_eq!(world.finish(&mut soft).0, AcquireOutcome::Busy);
    other.acquisition_ended(&mut book, &soft, None);
    assert_eq!(other, SeatUse::default(), "d's seat was not given back");

    world.advance(Duration::from_millis(5));
    let released_at = world.now().instant;
    let after = Timestamp::from_micros(u64::MAX / 2);
    let enqueued = taken.queue.as_ref().unwrap().column.as_str();
    let enqueued = QueueColumn::decode_timestamp(enqueued).unwrap();
    // As the model's clients end it: the same, without the poll hint.
    let (mut unhinted, mut unhinted_book) = (seat.clone(), book.clone());
    unhinted.without_poll_hint();
    unhinted.release_ended(&mut unhinted_book, released_at, after, None);
    let (_, options) = unhinted_book.start(&lock(), world.now(), None);
    assert_eq!(options.queue_floor, Some(enqueued));
    assert_eq!(options.poll_hint, None);

    seat.release_ended(&mut book, released_at, after, None);
    assert_eq!(seat, SeatUse::default(), "c's seat was not given back");
    let (_, options) = book.start(&lock(), world.now(), None);
    assert_eq!(
        options.seat,
        Some(Seat {
            column: ColumnName::new("p.0"),
            after,
        })
    );
    assert_eq!(options.queue_floor, Some(enqueued));
    assert!(!options.fast_path, "c waited");
    assert!(taken.stats.handoff_estimate > Duration::ZERO);
    assert_eq!(
        options.poll_hint,
        Some(PollHint {
            departed_at: released_at,
            handoff: taken.stats.handoff_estimate,
            turn: released_at.saturating_duration_since(taken.main.written_at),
            ahead: taken.stats.ahead_at_return,
            round_trip: taken.stats.round_trip,
        })
    );
}

#[test]
fn an_acquisition_without_the_lock_gives_back_its_last_timestamp_and_the_head_it_saw() {
    let mut world = World::new();
    let _held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut soft = world.acquire(Mode::Soft, "b");
    let (outcome, _) = world.finish(&mut soft);
    assert_eq!(outcome, AcquireOutcome::Busy);
    let returned = SeatReturn::without_lock(&soft);
    assert_eq!(returned.last_timestamp, soft.last_timestamp());
    assert_eq!(
        returned.queue_head,
        soft.queue_head().map(|column| column.timestamp)
    );
    assert_eq!(
        (returned.lost_at, returned.found_idle, returned.poll_hint),
        (None, false, None)
    );
}

#[test]
fn the_owner_next_in_line_backs_off_while_the_head_stays() {
    let mut world = World::new();
    let _held = unrenewed_holder(&mut world, "a");
    // Queue rewrites every `waiter_renew_every` would cut pauses short: renew as a holder
    // would (every 5 s, beyond this test's horizon), to see the poll pacing alone.
    let mut waiter = world.acquire_with(waiters_like_holders(), "b");
    let mut pauses = Vec::new();
    while world.now().instant < MonotonicTime::ZERO + Duration::from_millis(4_500) {
        world.settle(&mut waiter);
        let wake = waiter.poll_timeout().unwrap();
        pauses.push(wake.saturating_duration_since(world.now().instant));
        world.advance_to(wake);
        waiter.handle_timeout(world.now());
    }
    let config = config();
    let poll = &config.config().poll;
    assert_eq!(pauses[0], crate::config::MIN_NEXT_IN_LINE_PERIOD);
    assert!(pauses.windows(2).all(|pair| pair[1] >= pair[0]));
    assert_eq!(*pauses.last().unwrap(), poll.max_interval);
    let waited = |pauses: &[Duration]| pauses.iter().sum::<Duration>();
    for (index, pause) in pauses.iter().enumerate().skip(1) {
        assert!(
            *pause <= (waited(&pauses[..index]) / 4).max(crate::config::MIN_NEXT_IN_LINE_PERIOD),
            "poll {index} paused {pause:?}, more than a quarter of the wait so far"
        );
    }
    assert!(pauses.len() < 60, "{} polls in 4.5 s", pauses.len());
}

#[test]
fn owners_further_back_poll_less_often_than_the_next_in_line() {
    let mut world = World::new();
    let _held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut waiters: Vec<Acquire> = ["b", "c", "d", "e"]
        .iter()
        .map(|name| {
            world.advance(Duration::from_micros(10));
            let mut waiter = world.acquire(Mode::Mandatory, name);
            world.settle(&mut waiter);
            waiter
        })
        .collect();
    let pauses: Vec<Duration> = waiters
        .iter_mut()
        .map(|waiter| {
            waiter
                .poll_timeout()
                .unwrap()
                .saturating_duration_since(world.now().instant)
        })
        .collect();
    assert!(pauses[0] <= config().config().poll.min_interval * 2);
    assert!(pauses[3] > pauses[0] * 2, "{pauses:?}");
}

#[test]
fn a_foreign_main_cell_causes_conflicts_until_it_expires() {
    let mut world = World::new();
    let stale = StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Main),
        column: ColumnName::new("crashed-holder"),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: Some(config().ttl()),
    });
    world.apply(stale);
    let (outcome, sent) = world.finish(&mut world.acquire(Mode::Mandatory, "b"));
    let holding = holding(outcome);
    assert!(holding.stats.conflicts >= 1);
    assert!(world.now().instant >= MonotonicTime::ZERO + config().ttl().as_duration());
    assert!(kinds(&sent).contains(&"delete main".to_owned()));
    assert_eq!(world.live(RowKind::Main), [ColumnName::new("b")]);
}

#[test]
fn soft_locks_give_up_after_their_conflict_budget() {
    let mut world = World::new();
    let stale = StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Main),
        column: ColumnName::new("zombie"),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: Some(config().ttl()),
    });
    let mut soft = world.acquire(Mode::Soft, "b");
    let check = soft.poll_request().unwrap();
    let response = world.apply(check.request);
    soft.handle_response(world.now(), check.id, Ok(response));
    world.apply(stale);
    let (outcome, sent) = world.finish(&mut soft);
    assert_eq!(outcome, AcquireOutcome::Busy);
    let conflicts = kinds(&sent)
        .iter()
        .filter(|kind| *kind == "delete main")
        .count();
    assert_eq!(conflicts as u32, config().config().soft_attempts);
    assert!(world.live(RowKind::Queue).is_empty());
    assert_eq!(world.live(RowKind::Main), [ColumnName::new("zombie")]);
}

#[test]
fn a_late_enqueue_with_an_older_time_never_breaks_exclusion() {
    let mut world = World::new();
    let mut late = world.acquire(Mode::Mandatory, "late");
    let late_write = late.poll_request().unwrap();
    world.advance(Duration::from_millis(5));
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "b")).0);
    let response = world.apply(late_write.request);
    late.handle_response(world.now(), late_write.id, Ok(response));
    for _ in 0..10 {
        world.settle(&mut late);
        let outcome = late.poll_outcome();
        assert!(outcome.is_none(), "two holders at once: {outcome:?}");
        let wake = late.poll_timeout().unwrap();
        world.advance_to(wake);
        late.handle_timeout(world.now());
    }
    assert!(late.stats().conflicts >= 1);
    release(&mut world, &held);
    let (outcome, _) = world.finish(&mut late);
    assert_eq!(holding(outcome).owner, owner("late"));
}

#[test]
fn a_queue_cell_acknowledged_too_late_for_the_floor_margin_is_enqueued_again() {
    let mut world = World::new();
    let held = unrenewed_holder(&mut world, "h");
    world.advance(Duration::from_millis(1));
    let mut late = world.acquire(Mode::Mandatory, "late");
    let old_column = late.queue_column().encode();
    // The first write is held up (a paused process, timed-out attempts) and lands and is
    // acknowledged longer after the time in its name than the floor margin allows.
    let delay = Acquire::floor_margin(config().config()) + Duration::from_secs(1);
    world.answer_after(&mut late, delay);
    let acknowledged_at = world.now().timestamp;
    let sent = world.settle(&mut late);
    assert_eq!(
        kinds(&sent),
        ["delete queue", "write queue", "read queue"],
        "the late cell is replaced by one named with the current time"
    );
    assert_eq!(late.queue_column().timestamp, acknowledged_at);
    assert!(!world.live(RowKind::Queue).contains(&old_column));
    assert!(late.poll_outcome().is_none(), "h still holds the lock");
    release(&mut world, &held);

    // A waiter that enqueues now, reading from a floor at the time the late cell was
    // acknowledged (say its locker's previous acquisition was queued then), must find that
    // cell ahead of it.
    world.advance(Duration::from_millis(1));
    let mut next = seated(&world, "next", "s.1", 0, Some(acknowledged_at));
    world.settle(&mut next);
    assert!(
        next.poll_outcome().is_none(),
        "an owner that enqueued after the late cell was visible went first"
    );
    assert_eq!(next.queue_head(), Some(late.queue_column()));
    let (outcome, _) = world.finish(&mut late);
    let first = holding(outcome);
    assert_eq!(first.owner, owner("late"));
    assert_eq!(first.stats.requeues, 1);
    release(&mut world, &first);
    let (outcome, _) = world.finish(&mut next);
    assert_eq!(holding(outcome).owner, owner("next"));
}

#[test]
fn queue_cells_acknowledged_too_late_again_and_again_are_kept_after_storage_retries() {
    let mut world = World::new();
    let mut late = world.acquire(Mode::Mandatory, "late");
    let retries = config().config().storage_retries;
    for _ in 0..=retries {
        let late_by = config().config().request_timeout + Duration::from_millis(1);
        world.answer_after(&mut late, late_by);
        if late.stats().requeues < retries {
            // The late cell's delete.
            world.answer_after(&mut late, Duration::ZERO);
        }
    }
    let kept = late.queue_column().clone();
    let (outcome, _) = world.finish(&mut late);
    let held = holding(outcome);
    assert_eq!(held.stats.requeues, retries);
    assert_eq!(held.queue.unwrap().column, kept.encode());
}

#[test]
fn a_queue_cell_acknowledged_in_time_keeps_its_place() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let column = acquire.queue_column().clone();
    world.answer_after(&mut acquire, config().config().request_timeout);
    let (outcome, sent) = world.finish(&mut acquire);
    let held = holding(outcome);
    assert_eq!(held.queue.unwrap().column, column.encode());
    assert_eq!(held.stats.requeues, 0);
    assert!(!kinds(&sent).contains(&"delete queue".to_owned()));
}

/// Runs `acquire` to its outcome on virtual time, answering every request with `answer`
/// (given the world, to apply what it lets through); returns the outcome and when the
/// first request answered with an error was answered.
fn run_answering(
    world: &mut World,
    acquire: &mut Acquire,
    mut answer: impl FnMut(&mut World, StorageRequest) -> Result<StorageResponse, Error>,
) -> (AcquireOutcome, Option<MonotonicTime>) {
    let mut first_failure = None;
    loop {
        while let Some(outgoing) = acquire.poll_request() {
            let response = answer(world, outgoing.request);
            if response.is_err() {
                first_failure.get_or_insert(world.now().instant);
            }
            acquire.handle_response(world.now(), outgoing.id, response);
        }
        if let Some(outcome) = acquire.poll_outcome() {
            return (outcome, first_failure);
        }
        world.advance_to(acquire.poll_timeout().unwrap());
        acquire.handle_timeout(world.now());
    }
}

/// Storage failures that may pass are retried `storage_retries` times and then for the
/// rest of `storage_retry_window` since the first of them, backing off up to
/// `poll.max_interval`; then the acquisition ends with the last error and deletes what it
/// may have written.
#[test]
fn storage_failures_are_retried_for_the_window_then_reported_with_cleanup() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let settings = config().config().clone();
    let mut failures = 0;
    let (outcome, first_failure) = run_answering(&mut world, &mut acquire, |world, request| {
        if matches!(&request, StorageRequest::Write(write) if write.row == row(RowKind::Main)) {
            world.apply(request.clone());
        }
        match request {
            StorageRequest::Delete(_) => Ok(world.apply(request)),
            _ => {
                failures += 1;
                Err(Error::outcome_unknown("write queue", "timeout"))
            }
        }
    });
    let failing_for = world
        .now()
        .instant
        .saturating_duration_since(first_failure.unwrap());
    assert!(matches!(
        outcome,
        AcquireOutcome::Failed(Error::StorageOutcomeUnknown { .. })
    ));
    assert!(
        failing_for >= settings.storage_retry_window
            && failing_for < settings.storage_retry_window + settings.poll.max_interval,
        "gave up after {failing_for:?} of failures"
    );
    assert!(failures > settings.storage_retries + 1);
    assert_eq!(acquire.stats().storage_failures, failures);
    assert!(
        world.live(RowKind::Queue).is_empty(),
        "a write of unknown outcome must be cleaned up"
    );
}

/// When the cleanup's deletes fail too, the acquisition still ends about one retry window
/// after its first failure: the cleanup retries `storage_retries` times, not for a window
/// of its own (its cells expire anyway).
#[test]
fn a_failing_cleanup_does_not_add_a_retry_window() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let settings = config().config().clone();
    let mut deletes = 0;
    let (outcome, first_failure) = run_answering(&mut world, &mut acquire, |_, request| {
        if matches!(request, StorageRequest::Delete(_)) {
            deletes += 1;
        }
        Err(Error::unavailable("request", "replicas down"))
    });
    let failing_for = world
        .now()
        .instant
        .saturating_duration_since(first_failure.unwrap());
    assert!(matches!(
        outcome,
        AcquireOutcome::Failed(Error::StorageUnavailable { .. })
    ));
    assert!(deletes > 0, "the cleanup ran");
    assert!(
        failing_for < settings.storage_retry_window + Duration::from_secs(1),
        "ended {failing_for:?} after the first failure"
    );
}

/// An acquisition with a deadline whose storage keeps failing ends with the storage error
/// once its next retry would come at or after the deadline, not with a bare time-out: the
/// caller learns why.
#[test]
fn a_deadline_reached_while_storage_fails_reports_the_storage_error() {
    let mut world = World::new();
    let deadline = world.now().instant + Duration::from_millis(500);
    let mut acquire = Acquire::new(
        world.now(),
        config(),
        Mode::Mandatory,
        lock(),
        owner("a"),
        7,
        Some(deadline),
    );
    let (outcome, _) = run_answering(&mut world, &mut acquire, |_, _| {
        Err(Error::unavailable("write queue", "replicas down"))
    });
    assert!(
        matches!(
            outcome,
            AcquireOutcome::Failed(Error::StorageUnavailable { .. })
        ),
        "{outcome:?}"
    );
    assert!(world.now().instant <= deadline, "ran past the deadline");
}

/// Without a retry window, `storage_retries` alone bounds the retries.
#[test]
fn storage_failures_without_a_window_are_retried_storage_retries_times() {
    let settings = LockConfig {
        storage_retry_window: Duration::ZERO,
        ..config().config().clone()
    }
    .validate()
    .unwrap();
    let mut world = World::new();
    let mut acquire = world.acquire_with(settings.clone(), "a");
    let mut failures = 0;
    let (outcome, _) = run_answering(&mut world, &mut acquire, |world, request| match request {
        StorageRequest::Delete(_) => Ok(world.apply(request)),
        _ => {
            failures += 1;
            Err(Error::unavailable("write queue", "replicas down"))
        }
    });
    assert!(matches!(
        outcome,
        AcquireOutcome::Failed(Error::StorageUnavailable { .. })
    ));
    assert_eq!(failures, settings.config().storage_retries + 1);
}

/// Storage failures count against `storage_retries` only in a row: a success in between
/// starts the budget again, so a flaky but working store never makes an acquisition fail.
#[test]
fn storage_retries_count_failures_in_a_row_only() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let retries = config().config().storage_retries;
    let mut failed_in_a_row = 0;
    let mut total_failures = 0;
    let outcome = loop {
        while let Some(outgoing) = acquire.poll_request() {
            // Fail every request `retries` times before letting it through.
            let response = if failed_in_a_row < retries {
                failed_in_a_row += 1;
                total_failures += 1;
                Err(Error::unavailable("request", "flaky"))
            } else {
                failed_in_a_row = 0;
                Ok(world.apply(outgoing.request))
            };
            acquire.handle_response(world.now(), outgoing.id, response);
        }
        if let Some(outcome) = acquire.poll_outcome() {
            break outcome;
        }
        world.advance_to(acquire.poll_timeout().unwrap());
        acquire.handle_timeout(world.now());
    };
    let held = holding(outcome);
    assert!(total_failures > retries, "{total_failures} failures in all");
    assert_eq!(held.stats.storage_failures, total_failures);
    assert!(held.wait() > Duration::ZERO, "the backoffs took time");
    assert_eq!(
        held.wait(),
        held.acquired_at.saturating_duration_since(held.started_at)
    );
}

/// In the combined migration mode an owner that meets a conflict after passing the shadow
/// gate deletes its main cell *and* its shadow cell, so no client of the old algorithm is
/// kept out by an owner that does not hold the lock.
#[test]
fn a_combined_mode_conflict_deletes_the_shadow_cell_too() {
    let mut world = World::new();
    let combined = LockConfig {
        algorithm: Algorithm::Combined,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap();
    // A foreign main cell (a holder on the old algorithm that wrote no queue cell).
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Main),
        column: ColumnName::new("old-owner"),
        value: b"old-owner".to_vec(),
        timestamp: world.now().timestamp,
        ttl: None,
    }));
    let mut acquire = world.acquire_with(combined, "a");
    let mut saw_shadow = false;
    for _ in 0..20 {
        let sent = world.settle(&mut acquire);
        saw_shadow |= kinds(&sent).iter().any(|kind| kind == "write shadow");
        if kinds(&sent).iter().any(|kind| kind == "delete main") {
            break;
        }
        world.advance_to(acquire.poll_timeout().unwrap());
        acquire.handle_timeout(world.now());
    }
    assert!(saw_shadow, "the owner passed the shadow gate");
    world.settle(&mut acquire);
    assert!(
        world.live(RowKind::Shadow).is_empty(),
        "a shadow cell outlived the conflict: {:?}",
        world.live(RowKind::Shadow)
    );
    assert!(
        acquire.poll_outcome().is_none(),
        "it waits for the old owner"
    );
}

#[test]
fn a_rejected_request_fails_at_once() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let write = acquire.poll_request().unwrap();
    acquire.handle_response(
        world.now(),
        write.id,
        Err(Error::rejected("write", "no such table")),
    );
    let (outcome, sent) = world.finish(&mut acquire);
    assert!(matches!(
        outcome,
        AcquireOutcome::Failed(Error::StorageRejected { .. })
    ));
    assert_eq!(kinds(&sent), ["delete queue"]);
}

#[test]
fn giving_up_deletes_the_queue_cell() {
    let mut world = World::new();
    let _held = unrenewed_holder(&mut world, "a");
    let give_up_at = world.now().instant + Duration::from_secs(3);
    let mut waiter = Acquire::new(
        world.now(),
        config(),
        Mode::Mandatory,
        lock(),
        owner("b"),
        1,
        Some(give_up_at),
    );
    let (outcome, _) = world.finish(&mut waiter);
    assert_eq!(outcome, AcquireOutcome::TimedOut);
    assert_eq!(world.now().instant, give_up_at);
    assert_eq!(
        world.live(RowKind::Queue).len(),
        1,
        "only the holder remains"
    );
}

#[test]
fn abandoning_during_the_main_write_deletes_it_even_if_it_lands_later() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let main_write = loop {
        let outgoing = acquire.poll_request().unwrap();
        if matches!(&outgoing.request, StorageRequest::Write(write) if write.row.kind == RowKind::Main)
        {
            break outgoing;
        }
        let response = world.apply(outgoing.request);
        acquire.handle_response(world.now(), outgoing.id, Ok(response));
    };
    acquire.abandon(world.now());
    let (outcome, sent) = world.finish(&mut acquire);
    assert_eq!(outcome, AcquireOutcome::Abandoned);
    assert_eq!(kinds(&sent), ["delete queue", "delete main"]);
    world.apply(main_write.request);
    assert!(world.live(RowKind::Main).is_empty());
    assert!(world.live(RowKind::Queue).is_empty());
}

#[test]
fn a_vanished_queue_cell_is_rewritten_in_place() {
    let mut world = World::new();
    let _held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut waiter = world.acquire(Mode::Mandatory, "b");
    world.settle(&mut waiter);
    let column = waiter.queue_column().encode();
    world.apply(StorageRequest::Delete(crate::storage::CellDelete {
        row: row(RowKind::Queue),
        column: column.clone(),
        timestamp: world.now().timestamp,
    }));
    world.advance(Duration::from_millis(1));
    world.advance_to(waiter.poll_timeout().unwrap());
    waiter.handle_timeout(world.now());
    let sent = world.settle(&mut waiter);
    assert_eq!(kinds(&sent), ["read queue", "write queue", "read queue"]);
    assert!(world.live(RowKind::Queue).contains(&column));
}

#[test]
fn a_long_wait_keeps_the_queue_cell_alive() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held);
    let mut waiter = world.acquire(Mode::Mandatory, "b");
    let mut queue_writes = 0;
    let wait = Duration::from_secs(60);
    while world.now().instant < MonotonicTime::ZERO + wait {
        world.settle(&mut lease);
        queue_writes += kinds(&world.settle(&mut waiter))
            .iter()
            .filter(|kind| *kind == "write queue")
            .count();
        assert!(
            waiter.poll_outcome().is_none(),
            "the holder renews, so b must wait"
        );
        let wake = waiter
            .poll_timeout()
            .unwrap()
            .min(lease.poll_timeout().unwrap());
        world.advance_to(wake);
        waiter.handle_timeout(world.now());
        lease.handle_timeout(world.now());
    }
    let expected = (wait.as_millis() / config().waiter_renew_every().as_millis()) as usize;
    assert!(queue_writes >= expected, "{queue_writes} queue writes");
    assert_eq!(
        waiter.stats().requeues,
        0,
        "rewrites in time keep the place"
    );
    let mut release = lease.release(world.now());
    world.finish(&mut release).0.unwrap();
    let (outcome, _) = world.finish(&mut waiter);
    assert_eq!(holding(outcome).owner, owner("b"));
}

#[test]
fn a_main_read_that_returns_too_late_is_not_a_lock() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let read_main = loop {
        let outgoing = acquire.poll_request().unwrap();
        if matches!(&outgoing.request, StorageRequest::Read(read) if read.row.kind == RowKind::Main)
        {
            break outgoing;
        }
        let response = world.apply(outgoing.request);
        acquire.handle_response(world.now(), outgoing.id, Ok(response));
    };
    let response = world.apply(read_main.request);
    world.advance(config().effective_lease());
    acquire.handle_response(world.now(), read_main.id, Ok(response));
    let sent = world.settle(&mut acquire);
    assert!(
        acquire.poll_outcome().is_none(),
        "a lock past its lease was handed out"
    );
    assert_eq!(kinds(&sent).last().map(String::as_str), Some("delete main"));
    assert_eq!(acquire.stats().conflicts, 1);
}

#[test]
fn the_lease_renews_both_cells_then_reads_back_the_main_cell() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held.clone());
    assert_eq!(lease.status(), LeaseStatus::Held);
    assert!(lease.poll_request().is_none());
    let renew_at = lease.poll_timeout().unwrap();
    // The queue cell was written with the short waiter TTL: the first renewal comes
    // within the waiter's renewal period, not the lease's.
    assert_eq!(
        renew_at,
        held.queue.as_ref().unwrap().written_at + config().waiter_renew_every()
    );
    assert_eq!(held.queue_renew_by, Some(renew_at));
    assert_eq!(lease.quiet_until(), Some(renew_at));
    for round in 1..=20u32 {
        world.advance_to(lease.poll_timeout().unwrap());
        lease.handle_timeout(world.now());
        assert_eq!(lease.quiet_until(), None, "a renewal is due");
        let sent = world.settle(&mut lease);
        assert_eq!(kinds(&sent), ["write main", "write queue", "read main"]);
        assert_eq!(lease.renewal_counts(), (round, 0));
        assert_eq!(
            lease.deadline(),
            world.now().instant + config().effective_lease()
        );
    }
    assert_eq!(world.live(RowKind::Main), [ColumnName::new("a")]);
    assert!(lease.poll_outcome().is_none());
}

#[test]
fn failed_renewals_make_the_lease_in_doubt_then_lost_and_stop_renewing() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held.clone());
    let mut statuses = Vec::new();
    let mut last_send = MonotonicTime::ZERO;
    let lost = loop {
        while let Some(outgoing) = lease.poll_request() {
            last_send = world.now().instant;
            lease.handle_response(
                world.now(),
                outgoing.id,
                Err(Error::unavailable("write", "partition")),
            );
        }
        statuses.push(lease.status());
        if let Some(lost) = lease.poll_outcome() {
            break lost;
        }
        world.advance_to(lease.poll_timeout().unwrap());
        lease.handle_timeout(world.now());
    };
    assert!(matches!(lost, Error::LockLost { .. }));
    assert!(statuses.contains(&LeaseStatus::InDoubt));
    assert_eq!(lease.status(), LeaseStatus::Lost);
    assert_eq!(world.now().instant, held.lease_deadline);
    assert!(
        last_send + config().config().request_timeout < held.lease_deadline,
        "a renewal was sent too close to the deadline"
    );
    assert_eq!(lease.time_left(world.now().instant), Duration::ZERO);
    world.advance(Duration::from_secs(60));
    lease.handle_timeout(world.now());
    assert!(
        lease.poll_request().is_none(),
        "renewed after losing the lease"
    );
}

#[test]
fn a_renewal_that_fails_once_recovers() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held);
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    let first = lease.poll_request().unwrap();
    lease.handle_response(
        world.now(),
        first.id,
        Err(Error::outcome_unknown("write", "timeout")),
    );
    assert_eq!(lease.status(), LeaseStatus::InDoubt);
    world.settle(&mut lease);
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    world.settle(&mut lease);
    assert_eq!(lease.status(), LeaseStatus::Held);
    assert_eq!(lease.renewal_counts(), (1, 1));
}

/// A renewal's read-back must find our main cell by column *and* value: a cell in our seat
/// column written by another owner (the seat's next user after a lapse, say) is not ours,
/// and the lease is lost.
#[test]
fn a_renewal_that_reads_back_another_owners_cell_in_our_column_loses_the_lease() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held.clone());
    assert_eq!(
        lease.time_left(world.now().instant),
        held.lease_deadline
            .saturating_duration_since(world.now().instant)
    );
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    let mut outgoing: Vec<Outgoing> = std::iter::from_fn(|| lease.poll_request()).collect();
    for write in outgoing.drain(..) {
        let response = world.apply(write.request);
        lease.handle_response(world.now(), write.id, Ok(response));
    }
    let verify = lease.poll_request().expect("the read-back");
    let mut impostor = held.main.clone();
    impostor.value = b"someone-else".to_vec();
    let foreign = crate::storage::Cell {
        column: impostor.column.clone(),
        value: impostor.value.clone(),
        write_timestamp: world.now().timestamp,
    };
    lease.handle_response(
        world.now(),
        verify.id,
        Ok(StorageResponse::Cells(vec![foreign])),
    );
    assert_eq!(lease.status(), LeaseStatus::Lost);
    assert_eq!(lease.time_left(world.now().instant), Duration::ZERO);
}

/// A response whose id is not the request in flight (a stale answer to an earlier,
/// timed-out attempt) is ignored: it must not move the acquisition on.
#[test]
fn a_response_to_another_request_is_ignored() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let enqueue = acquire.poll_request().expect("the queue write");
    let stale = RequestId(enqueue.id.0 + 1_000);
    acquire.handle_response(world.now(), stale, Ok(StorageResponse::Done));
    assert!(
        acquire.poll_request().is_none(),
        "a stale answer moved the acquisition on"
    );
    let response = world.apply(enqueue.request);
    acquire.handle_response(world.now(), enqueue.id, Ok(response));
    assert!(
        acquire.poll_request().is_some(),
        "the real answer moves it on"
    );
}

/// An answer that belongs to none of the renewal's writes (a stale one, from an earlier
/// round) does not count as one of them: the read-back waits for the real acknowledgements.
#[test]
fn a_stale_answer_does_not_complete_a_renewal_round() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held);
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    let writes: Vec<Outgoing> = std::iter::from_fn(|| lease.poll_request()).collect();
    assert_eq!(writes.len(), 2);
    let stale = RequestId(writes[0].id.0 + 1_000);
    lease.handle_response(world.now(), stale, Ok(StorageResponse::Done));
    lease.handle_response(world.now(), stale, Ok(StorageResponse::Done));
    assert!(
        lease.poll_request().is_none(),
        "read back before the writes were acknowledged"
    );
    for write in writes {
        let response = world.apply(write.request);
        lease.handle_response(world.now(), write.id, Ok(response));
    }
    assert!(
        lease.poll_request().is_some(),
        "the read-back follows the real acknowledgements"
    );
}

#[test]
fn a_force_released_cell_is_noticed_at_the_next_renewal() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held);
    world.apply(StorageRequest::Delete(crate::storage::CellDelete {
        row: row(RowKind::Main),
        column: ColumnName::new("a"),
        timestamp: world.now().timestamp + Duration::from_secs(3600),
    }));
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    world.settle(&mut lease);
    assert_eq!(lease.status(), LeaseStatus::Lost);
    assert!(matches!(lease.poll_outcome(), Some(Error::LockLost { .. })));
}

#[test]
fn a_renewal_in_flight_cannot_revive_a_released_lock() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held);
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    let renewals: Vec<Outgoing> = std::iter::from_fn(|| lease.poll_request()).collect();
    assert_eq!(renewals.len(), 2);
    let mut release = lease.release(world.now());
    let (result, _) = world.finish(&mut release);
    result.unwrap();
    for renewal in renewals {
        world.apply(renewal.request);
    }
    assert!(world.live(RowKind::Main).is_empty());
    assert!(world.live(RowKind::Queue).is_empty());
}

/// The loop contract: calling `handle_timeout` before the machine's own timeout is
/// harmless. A waiter woken early sends nothing, and polls once its pause is over.
#[test]
fn an_early_timeout_call_does_nothing() {
    let mut world = World::new();
    let held = unrenewed_holder(&mut world, "h");
    let mut waiter = world.acquire(Mode::Mandatory, "w");
    world.settle(&mut waiter);
    let due = waiter.poll_timeout().expect("a waiter pauses");
    assert!(due > world.now().instant);
    waiter.handle_timeout(world.now());
    assert!(
        waiter.poll_request().is_none(),
        "woke before its pause was over"
    );
    world.advance_to(due);
    waiter.handle_timeout(world.now());
    assert!(waiter.poll_request().is_some(), "did not poll when due");
    release(&mut world, &held);
}

/// A lease is quiet (a driver may park it) only while nothing is in flight: not while a
/// renewal's writes, already handed to the driver, wait for their answers.
#[test]
fn a_lease_with_a_renewal_in_flight_is_not_quiet() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held);
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    let in_flight: Vec<Outgoing> = std::iter::from_fn(|| lease.poll_request()).collect();
    assert!(!in_flight.is_empty());
    assert_eq!(lease.quiet_until(), None);
    for write in in_flight {
        let response = world.apply(write.request);
        lease.handle_response(world.now(), write.id, Ok(response));
    }
    world.settle(&mut lease);
    assert!(lease.quiet_until().is_some(), "quiet again once renewed");
}

/// A baseline acquisition dropped midway (its future cancelled) deletes what it may have
/// written and ends as abandoned, like the queue algorithm's.
#[test]
fn an_abandoned_baseline_acquisition_deletes_its_cells() {
    let mut world = World::new();
    let mut acquire = BaselineAcquire::new(
        world.now(),
        without_fencing_baseline(),
        Mode::Mandatory,
        lock(),
        owner("a"),
        3,
        None,
    );
    // Let it write its shadow cell (read main, then write shadow), then abandon it.
    for _ in 0..2 {
        let outgoing = acquire.poll_request().expect("a request");
        let response = world.apply(outgoing.request);
        acquire.handle_response(world.now(), outgoing.id, Ok(response));
    }
    assert!(
        !world.live(RowKind::Shadow).is_empty(),
        "the shadow cell was written"
    );
    acquire.abandon(world.now());
    let (outcome, _) = world.finish(&mut acquire);
    assert_eq!(outcome, AcquireOutcome::Abandoned);
    assert!(world.live(RowKind::Shadow).is_empty());
    assert!(world.live(RowKind::Main).is_empty());
}

fn without_fencing_baseline() -> ValidConfig {
    LockConfig {
        algorithm: Algorithm::Baseline,
        fencing: false,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

#[test]
fn the_baseline_takes_an_uncontended_lock_in_six_requests() {
    let mut world = World::new();
    let mut acquire = BaselineAcquire::new(
        world.now(),
        config(),
        Mode::Mandatory,
        lock(),
        owner("a"),
        3,
        None,
    );
    let (outcome, sent) = world.finish(&mut acquire);
    assert_eq!(
        kinds(&sent),
        [
            "read main",
            "write shadow",
            "read shadow",
            "read main",
            "write main",
            "delete shadow"
        ]
    );
    let holding = holding(outcome);
    assert!(holding.queue.is_none());
    assert!(world.live(RowKind::Shadow).is_empty());
}

#[test]
fn the_baseline_backs_off_randomly_from_the_seed() {
    let pauses = |seed| {
        let mut world = World::new();
        let _held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
        let mut waiter = BaselineAcquire::new(
            world.now(),
            config(),
            Mode::Mandatory,
            lock(),
            owner("b"),
            seed,
            None,
        );
        (0..8)
            .map(|_| {
                world.settle(&mut waiter);
                let wake = waiter.poll_timeout().unwrap();
                let pause = wake.saturating_duration_since(world.now().instant);
                world.advance_to(wake);
                waiter.handle_timeout(world.now());
                pause
            })
            .collect::<Vec<_>>()
    };
    let first = pauses(11);
    assert_eq!(first, pauses(11));
    assert_ne!(first, pauses(12));
    let max = config().config().baseline.owner_backoff_max;
    assert!(first.iter().all(|pause| *pause < max));
    assert!(first.iter().any(|pause| *pause > max / 2));
}

#[test]
fn a_soft_baseline_lock_while_held_is_busy() {
    let mut world = World::new();
    let _held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut soft = BaselineAcquire::new(
        world.now(),
        config(),
        Mode::Soft,
        lock(),
        owner("b"),
        3,
        None,
    );
    let (outcome, sent) = world.finish(&mut soft);
    assert_eq!(outcome, AcquireOutcome::Busy);
    assert_eq!(kinds(&sent), ["read main"]);
}

/// A baseline holder that is never renewed loses the lock to a waiter, but only after its
/// main cell expired, well after its own deadline: the waiter's holding and the lapsed
/// holder's lease never overlap.
#[test]
fn a_baseline_holder_that_is_not_renewed_is_succeeded_only_after_its_deadline() {
    let mut world = World::new();
    let config = without_fencing_baseline();
    let baseline = |world: &World, name: &str| {
        let (now, config) = (world.now(), config.clone());
        BaselineAcquire::new(now, config, Mode::Mandatory, lock(), owner(name), 5, None)
    };
    let first = holding(world.finish(&mut baseline(&world, "a")).0);
    let (second, _) = world.finish(&mut baseline(&world, "b"));
    let second = holding(second);
    let expiry = first.main.written_at + config.config().lease_ttl;
    assert!(first.lease_deadline < expiry);
    assert!(
        second.acquired_at >= expiry,
        "b took the lock at {:?}, before a's cell expired at {expiry:?}",
        second.acquired_at
    );
}

/// A contender in the interleaving test: acquiring, holding for some steps, releasing.
enum Contender {
    Acquiring(AnyAcquire),
    Holding(Box<Holding>, u32),
    Releasing(Release),
    Done,
}

/// Every request and response is an independent event that a seeded scheduler delivers in
/// random order, so writes land late and responses arrive late; time jumps to the earliest
/// timeout only when nothing else can happen. Two owners must never hold at once while both
/// their leases have time left (Theorem 1, docs/algorithm.md section "Theorem 1: mutual exclusion of the mandatory lock"). Holders are not
/// renewed here, so a holder kept past its deadline, which its lease would report `Lost`,
/// no longer counts: its cells may expire and another owner may rightly take the lock.
/// Returns the number of acquisitions, or a description of the first violation.
fn interleave(seed: u64, algorithms: &[Algorithm], mode: Mode) -> Result<u32, String> {
    interleave_with(
        seed,
        algorithms,
        mode,
        LockConfig::default().poll.queue_read_limit,
    )
}

/// [`interleave`] with every contender reading at most `queue_read_limit` queue cells.
fn interleave_with(
    seed: u64,
    algorithms: &[Algorithm],
    mode: Mode,
    queue_read_limit: u32,
) -> Result<u32, String> {
    let mut world = World::new();
    let mut rng = SplitMix64::new(seed);
    let mut machines: Vec<Contender> = algorithms
        .iter()
        .enumerate()
        .map(|(index, algorithm)| {
            world.advance(Duration::from_micros(rng.below(3)));
            let name = owner(&format!("c{index}"));
            let defaults = LockConfig::default();
            let config = LockConfig {
                algorithm: *algorithm,
                fencing: *algorithm != Algorithm::Baseline,
                poll: crate::config::PollConfig {
                    queue_read_limit,
                    ..defaults.poll
                },
                ..defaults
            }
            .validate()
            .unwrap();
            let seed = seed + index as u64;
            let machine = AnyAcquire::new(
                world.now(),
                config,
                mode,
                lock(),
                name,
                seed,
                AcquireOptions::default(),
            );
            Contender::Acquiring(machine)
        })
        .collect();
    let mut requests: Vec<(usize, Outgoing)> = Vec::new();
    let mut responses: Vec<(usize, RequestId, StorageResponse)> = Vec::new();
    let mut acquisitions = 0;
    let mut last_token = None;
    for _ in 0..20_000 * algorithms.len().max(4) / 4 {
        for (index, contender) in machines.iter_mut().enumerate() {
            let polled: Vec<Outgoing> = match contender {
                Contender::Acquiring(machine) => {
                    std::iter::from_fn(|| machine.poll_request()).collect()
                }
                Contender::Releasing(machine) => {
                    std::iter::from_fn(|| machine.poll_request()).collect()
                }
                _ => Vec::new(),
            };
            requests.extend(polled.into_iter().map(|outgoing| (index, outgoing)));
            if let Contender::Acquiring(machine) = contender {
                match machine.poll_outcome() {
                    Some(AcquireOutcome::Acquired(holding)) => {
                        acquisitions += 1;
                        if let Some(token) = holding.fencing_token {
                            if last_token >= Some(token) {
                                return Err(format!("token {token} after {last_token:?}"));
                            }
                            last_token = Some(token);
                        }
                        *contender = Contender::Holding(holding, 1 + rng.below(20) as u32);
                    }
                    Some(_) => *contender = Contender::Done,
                    None => {}
                }
            }
            if let Contender::Releasing(machine) = contender
                && machine.poll_outcome().is_some()
            {
                *contender = Contender::Done;
            }
        }
        let now = world.now().instant;
        let holders = machines
            .iter()
            .filter(|contender| {
                matches!(contender, Contender::Holding(holding, _) if now < holding.lease_deadline)
            })
            .count();
        if holders > 1 {
            return Err(format!("{holders} owners hold the lock at once"));
        }
        let events = requests.len() + responses.len();
        if events == 0 {
            let Some((index, wake)) = machines
                .iter()
                .enumerate()
                .filter_map(|(index, contender)| match contender {
                    Contender::Acquiring(machine) => {
                        machine.poll_timeout().map(|wake| (index, wake))
                    }
                    Contender::Releasing(machine) => {
                        machine.poll_timeout().map(|wake| (index, wake))
                    }
                    _ => None,
                })
                .min_by_key(|(_, wake)| *wake)
            else {
                if let Some(index) = machines
                    .iter()
                    .position(|c| matches!(c, Contender::Holding(..)))
                {
                    step_holder(&mut machines[index], &mut world);
                    continue;
                }
                break;
            };
            world.advance_to(wake);
            match &mut machines[index] {
                Contender::Acquiring(machine) => machine.handle_timeout(world.now()),
                Contender::Releasing(machine) => machine.handle_timeout(world.now()),
                _ => {}
            }
            continue;
        }
        let pick = rng.below(events as u64 + 1) as usize;
        if pick == events {
            if let Some(index) = machines
                .iter()
                .position(|c| matches!(c, Contender::Holding(..)))
            {
                step_holder(&mut machines[index], &mut world);
            }
        } else if pick < requests.len() {
            let (index, outgoing) = requests.swap_remove(pick);
            let response = world.apply(outgoing.request);
            responses.push((index, outgoing.id, response));
        } else {
            let (index, id, response) = responses.swap_remove(pick - requests.len());
            match &mut machines[index] {
                Contender::Acquiring(machine) => {
                    machine.handle_response(world.now(), id, Ok(response))
                }
                Contender::Releasing(machine) => {
                    machine.handle_response(world.now(), id, Ok(response))
                }
                _ => {}
            }
        }
    }
    Ok(acquisitions)
}

fn step_holder(contender: &mut Contender, world: &mut World) {
    if let Contender::Holding(holding, steps) = contender {
        if *steps > 1 {
            *steps -= 1;
        } else {
            let release = Release::new(
                world.now(),
                config(),
                holding.cells(),
                holding.last_timestamp,
            );
            *contender = Contender::Releasing(release);
        }
    }
}

/// A schedule proptest found: c1 takes the lock at 0.88 s and the scheduler keeps it holding,
/// unrenewed, while c2 backs off behind it (up to 1 s at a time) until 10.92 s. c1's deadline
/// passed at 8.88 s and its main cell expired at 10.88 s, so c2 rightly took the lock then;
/// the interleaving once counted the lapsed c1 as a second holder.
#[test]
fn baseline_contenders_with_a_holder_kept_past_its_deadline_never_overlap() {
    let seed = 17_684_947_405_734_129_728;
    let acquisitions = interleave(seed, &[Algorithm::Baseline; 3], Mode::Mandatory);
    assert_eq!(acquisitions, Ok(3));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn mandatory_contenders_never_overlap_and_all_get_the_lock(seed in any::<u64>(), contenders in 2usize..5) {
        let acquisitions = interleave(seed, &vec![Algorithm::Queue; contenders], Mode::Mandatory);
        prop_assert_eq!(acquisitions, Ok(contenders as u32));
    }

    #[test]
    fn soft_contenders_never_overlap_and_one_succeeds(seed in any::<u64>(), contenders in 2usize..5) {
        let acquisitions = interleave(seed, &vec![Algorithm::Queue; contenders], Mode::Soft);
        prop_assert!(acquisitions.as_ref().is_ok_and(|count| *count >= 1), "{:?}", acquisitions);
    }

    #[test]
    fn baseline_contenders_never_overlap(seed in any::<u64>(), contenders in 2usize..4) {
        let acquisitions = interleave(seed, &vec![Algorithm::Baseline; contenders], Mode::Mandatory);
        prop_assert_eq!(acquisitions, Ok(contenders as u32));
    }

    #[test]
    fn old_and_migrating_clients_exclude_each_other(
        seed in any::<u64>(),
        algorithms in proptest::collection::vec(
            prop_oneof![Just(Algorithm::Baseline), Just(Algorithm::Combined)],
            2..5,
        ),
    ) {
        let acquisitions = interleave(seed, &algorithms, Mode::Mandatory);
        prop_assert_eq!(acquisitions, Ok(algorithms.len() as u32));
    }

    #[test]
    fn migrating_and_new_clients_exclude_each_other(
        seed in any::<u64>(),
        algorithms in proptest::collection::vec(
            prop_oneof![Just(Algorithm::Queue), Just(Algorithm::Combined)],
            2..5,
        ),
    ) {
        let acquisitions = interleave(seed, &algorithms, Mode::Mandatory);
        prop_assert_eq!(acquisitions, Ok(algorithms.len() as u32));
    }
}

/// More waiters than one queue read returns: a waiter whose cell lies beyond the slice must
/// tell "behind a full slice" from "my cell is missing", or it rewrites its cell forever
/// and never gets the lock. Every contender must still get it, one at a time, whether the
/// queue is just over the limit or several times it.
#[test]
fn queues_longer_than_the_read_limit_serve_every_waiter() {
    for (limit, contenders) in [(2, 3), (2, 7), (3, 12), (8, 9), (8, 12), (4, 32)] {
        for seed in 0..8 {
            let acquisitions = interleave_with(
                seed,
                &vec![Algorithm::Queue; contenders],
                Mode::Mandatory,
                limit,
            );
            assert_eq!(
                acquisitions,
                Ok(contenders as u32),
                "queue_read_limit {limit}, {contenders} contenders, seed {seed}"
            );
        }
    }
}

#[test]
fn new_and_old_clients_without_the_migration_mode_can_overlap() {
    let mixed = [Algorithm::Queue, Algorithm::Baseline, Algorithm::Baseline];
    let overlap = (0..2_000).find_map(|seed| interleave(seed, &mixed, Mode::Mandatory).err());
    assert!(
        overlap.is_some(),
        "expected an overlap: this is why the combined mode exists"
    );
}

/// Drives `lease` and `waiters` until `until`, jumping to each timeout; returns the first
/// waiter outcome, if one finished.
fn run_until(
    world: &mut World,
    lease: &mut Option<Lease>,
    waiters: &mut [&mut Acquire],
    until: MonotonicTime,
) -> Option<(usize, AcquireOutcome)> {
    loop {
        if let Some(lease) = lease.as_mut() {
            world.settle(lease);
        }
        for (index, waiter) in waiters.iter_mut().enumerate() {
            world.settle(*waiter);
            if let Some(outcome) = waiter.poll_outcome() {
                return Some((index, outcome));
            }
        }
        let wake = waiters
            .iter()
            .filter_map(|waiter| waiter.poll_timeout())
            .chain(lease.as_ref().and_then(Lease::poll_timeout))
            .min()
            .expect("something waits for time");
        if wake > until {
            world.advance_to(until);
            return None;
        }
        world.advance_to(wake);
        if let Some(lease) = lease.as_mut() {
            lease.handle_timeout(world.now());
        }
        for waiter in waiters.iter_mut() {
            waiter.handle_timeout(world.now());
        }
    }
}

#[test]
fn a_waiter_that_dies_first_in_line_blocks_the_next_for_the_waiter_ttl_not_the_lease() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Some(Lease::new(world.now(), config(), held));
    world.advance(Duration::from_millis(1));
    let mut dead = world.acquire(Mode::Mandatory, "dead");
    world.advance(Duration::from_millis(1));
    let mut next = world.acquire(Mode::Mandatory, "next");
    // Both wait behind the holder for a while; "dead" keeps its cell alive.
    let settle = world.now().instant + Duration::from_secs(20);
    assert!(run_until(&mut world, &mut lease, &mut [&mut dead, &mut next], settle).is_none());
    // "dead" dies: it never sends another request. The holder releases.
    drop(dead);
    let died_at = world.now().instant;
    let mut release = lease.take().unwrap().release(world.now());
    world.finish(&mut release).0.unwrap();
    let (_, outcome) = run_until(
        &mut world,
        &mut lease,
        &mut [&mut next],
        died_at + config().ttl().as_duration(),
    )
    .expect("the next owner gets the lock before the lease TTL");
    let held = holding(outcome);
    let blocked = held.acquired_at.saturating_duration_since(died_at);
    let bound = config().waiter_ttl().as_duration() + config().config().poll.max_interval;
    assert!(blocked <= bound, "blocked {blocked:?}, bound {bound:?}");
    assert!(
        blocked + config().waiter_renew_every() >= config().waiter_effective(),
        "the dead waiter's cell vanished before its TTL allows: {blocked:?}"
    );
}

/// A holder with its lease and a waiter behind it, run until the waiter's first queue
/// rewrite is due: returns the lease, the waiter, that rewrite (not yet sent to the store)
/// and when the waiter's enqueue was sent.
fn waiter_at_its_first_rewrite(world: &mut World) -> (Lease, Acquire, Outgoing, MonotonicTime) {
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut lease = Lease::new(world.now(), config(), held);
    world.advance(Duration::from_millis(1));
    let mut waiter = world.acquire(Mode::Mandatory, "b");
    let enqueued_at = world.now().instant;
    world.settle(&mut waiter);
    loop {
        world.settle(&mut lease);
        world.advance_to(waiter.poll_timeout().unwrap());
        waiter.handle_timeout(world.now());
        lease.handle_timeout(world.now());
        let outgoing = waiter.poll_request().unwrap();
        if matches!(&outgoing.request, StorageRequest::Write(write) if write.row.kind == RowKind::Queue)
        {
            return (lease, waiter, outgoing, enqueued_at);
        }
        let response = world.apply(outgoing.request);
        waiter.handle_response(world.now(), outgoing.id, Ok(response));
    }
}

#[test]
fn a_waiter_rewrite_acknowledged_after_its_cell_may_have_lapsed_enqueues_again() {
    let mut world = World::new();
    // Poll until the queue rewrite is due, then let it be acknowledged just past the
    // cell's effective life.
    let (lease, mut waiter, rewrite, _) = waiter_at_its_first_rewrite(&mut world);
    let old = waiter.queue_column().clone();
    let late_by = config().waiter_effective();
    let response = world.apply(rewrite.request);
    world.advance(late_by);
    waiter.handle_response(world.now(), rewrite.id, Ok(response));
    let sent = world.settle(&mut waiter);
    assert_eq!(kinds(&sent), ["delete queue", "write queue", "read queue"]);
    assert_eq!(waiter.stats().requeues, 1);
    assert!(
        waiter.queue_column() > &old,
        "enqueued again under a later time"
    );
    assert!(!world.live(RowKind::Queue).contains(&old.encode()));
    // A rewrite acknowledged in time keeps the new place.
    let mut lease = Some(lease);
    let until = world.now().instant + Duration::from_secs(5);
    assert!(run_until(&mut world, &mut lease, &mut [&mut waiter], until).is_none());
    assert_eq!(waiter.stats().requeues, 1);
    let mut release = lease.take().unwrap().release(world.now());
    world.finish(&mut release).0.unwrap();
    let (outcome, _) = world.finish(&mut waiter);
    let held = holding(outcome);
    assert_eq!(held.owner, owner("b"));
    assert_eq!(held.queue.unwrap().column, waiter.queue_column().encode());
}

/// Lets a waiter's first queue rewrite be acknowledged `after_enqueue` after its enqueue
/// was sent (the rewrite itself lands at once), and returns how many times it enqueued
/// again.
fn requeues_after_a_rewrite_acknowledged(after_enqueue: Duration) -> u32 {
    let mut world = World::new();
    let (_lease, mut waiter, rewrite, enqueued_at) = waiter_at_its_first_rewrite(&mut world);
    let response = world.apply(rewrite.request);
    world.advance_to(enqueued_at + after_enqueue);
    waiter.handle_response(world.now(), rewrite.id, Ok(response));
    world.settle(&mut waiter);
    waiter.stats().requeues
}

/// The cell is certainly alive up to `waiter_effective` after the write before was sent:
/// a rewrite acknowledged exactly then keeps the place, a microsecond later it does not.
#[test]
fn a_rewrite_acknowledged_at_the_end_of_the_effective_life_keeps_the_place() {
    let effective = config().waiter_effective();
    assert_eq!(requeues_after_a_rewrite_acknowledged(effective), 0);
    assert_eq!(
        requeues_after_a_rewrite_acknowledged(effective + Duration::from_micros(1)),
        1
    );
}

/// A queue cell that never shows up in reads (a store that drops it, or reads below
/// QUORUM) ends the acquisition with a typed error after `storage_retries + 2` reads,
/// instead of rewriting it forever; every read is counted.
#[test]
fn a_queue_cell_that_never_shows_up_fails_after_the_retry_budget() {
    let mut world = World::new();
    let mut acquire = world.acquire(Mode::Mandatory, "a");
    let retries = config().config().storage_retries;
    let mut reads = 0;
    let outcome = loop {
        while let Some(outgoing) = acquire.poll_request() {
            let response = match &outgoing.request {
                // Acknowledged but dropped.
                StorageRequest::Write(write) if write.row.kind == RowKind::Queue => {
                    StorageResponse::Done
                }
                StorageRequest::Read(read) if read.row.kind == RowKind::Queue => {
                    reads += 1;
                    assert!(reads <= 100, "still rewriting a cell that never shows up");
                    world.apply(outgoing.request)
                }
                _ => world.apply(outgoing.request),
            };
            acquire.handle_response(world.now(), outgoing.id, Ok(response));
        }
        if let Some(outcome) = acquire.poll_outcome() {
            break outcome;
        }
        world.advance_to(acquire.poll_timeout().unwrap());
        acquire.handle_timeout(world.now());
    };
    assert!(
        matches!(
            outcome,
            AcquireOutcome::Failed(Error::StorageRejected { .. })
        ),
        "{outcome:?}"
    );
    assert_eq!(reads, retries + 2);
    assert_eq!(acquire.stats().queue_reads, reads);
}

/// After its first conflict an owner pauses about `poll.min_interval` (within the jitter)
/// before it looks at the queue again; the pause doubles with each conflict after that.
#[test]
fn the_first_conflict_pauses_about_the_minimum_interval() {
    let mut world = World::new();
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Main),
        column: ColumnName::new("crashed-holder"),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: Some(config().ttl()),
    }));
    let mut acquire = world.acquire(Mode::Mandatory, "b");
    let sent = world.settle(&mut acquire);
    assert_eq!(kinds(&sent).last().map(String::as_str), Some("delete main"));
    let config = config();
    let poll = &config.config().poll;
    let pause = acquire
        .poll_timeout()
        .unwrap()
        .saturating_duration_since(world.now().instant);
    let most = poll.min_interval + poll.min_interval * poll.jitter_percent / 100;
    assert!(
        pause <= most,
        "paused {pause:?} after one conflict, more than {most:?}"
    );
}

#[test]
fn a_holder_renews_its_queue_cell_with_the_lease_ttl_before_the_waiter_ttl_runs_out() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let queue_written = held.queue.as_ref().unwrap().written_at;
    let mut lease = Some(Lease::new(world.now(), config(), held));
    let mut waiter = world.acquire(Mode::Mandatory, "b");
    // Well past the waiter TTL and past the first lease renewal: the holder's queue cell
    // (first in line) must still be there, so the waiter behind never tries the main row.
    let until = queue_written + config().ttl().as_duration() * 3;
    assert!(run_until(&mut world, &mut lease, &mut [&mut waiter], until).is_none());
    assert_eq!(
        waiter.stats().conflicts,
        0,
        "the holder's queue cell lapsed"
    );
    assert_eq!(lease.as_ref().unwrap().status(), LeaseStatus::Held);
}

#[test]
fn a_waiter_ttl_at_the_lease_ttl_renews_waiters_like_holders() {
    let same = LockConfig {
        waiter_ttl: LockConfig::default().lease_ttl,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap();
    let mut world = World::new();
    let mut acquire = world.acquire_with(same.clone(), "a");
    let (outcome, sent) = world.finish(&mut acquire);
    let StorageRequest::Write(queue_write) = &sent[0] else {
        panic!("the first request must write the queue cell");
    };
    assert_eq!(queue_write.ttl, Some(same.ttl()));
    let held = holding(outcome);
    let lease = Lease::new(world.now(), same.clone(), held.clone());
    assert_eq!(
        lease.poll_timeout(),
        Some(held.main.written_at.min(held.queue.unwrap().written_at) + same.renew_every())
    );
}

/// Sends every pending request; each lands at once (the earliest a replica can start its
/// TTL) and is acknowledged `ack_delay` later, then the next wave goes out. Returns the
/// instant the last write to the main row landed, if any was sent.
fn land_now_acknowledge_later<M: Machine>(
    world: &mut World,
    machine: &mut M,
    ack_delay: Duration,
) -> Option<MonotonicTime> {
    let mut last_write = None;
    loop {
        let wave: Vec<Outgoing> = std::iter::from_fn(|| machine.poll_request()).collect();
        if wave.is_empty() {
            return last_write;
        }
        let mut answers = Vec::new();
        for outgoing in wave {
            if matches!(&outgoing.request, StorageRequest::Write(write) if write.row == row(RowKind::Main))
            {
                last_write = Some(world.now().instant);
            }
            answers.push((outgoing.id, world.apply(outgoing.request)));
        }
        world.advance(ack_delay);
        for (id, response) in answers {
            machine.handle_response(world.now(), id, Ok(response));
        }
    }
}

/// Takes an uncontended lock with every request landing at once and acknowledged `ack`
/// later, and checks that the lease deadline counts from the main write's send.
fn take_with_slow_acknowledgements<M: Machine<Outcome = AcquireOutcome>>(
    world: &mut World,
    mut acquire: M,
    ack: Duration,
) -> Result<Holding, TestCaseError> {
    let mut main_landed = None;
    for _ in 0..64 {
        main_landed = land_now_acknowledge_later(world, &mut acquire, ack).or(main_landed);
        if let Some(outcome) = acquire.poll_outcome() {
            let held = holding(outcome);
            let effective = config().effective_lease();
            let landed = main_landed.expect("the main cell was written");
            prop_assert!(
                held.lease_deadline <= landed + effective,
                "acquired: deadline {:?} is later than the main write's landing {:?} + {:?}",
                held.lease_deadline,
                landed,
                effective
            );
            return Ok(held);
        }
        world.advance_to(acquire.poll_timeout().expect("a waiting machine"));
        acquire.handle_timeout(world.now());
    }
    Err(TestCaseError::fail("an uncontended lock was not taken"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A lease deadline counts from when the write was *sent*, never from when it was
    /// acknowledged: a replica may start the cell's TTL the moment the write arrives, and
    /// the 1 s + `max_clock_skew` margin in the effective lease is for TTL rounding and
    /// replica clocks, not for the network. Writes here land at once and are acknowledged
    /// up to a second later, so a deadline taken at the acknowledgement would
    /// outlive `landed + effective_lease`, the instant a replica running `max_clock_skew`
    /// ahead may expire the cell. Time is in microseconds, so no tick hides the gap. (A
    /// renewal round is two requests in turn, the writes then the read-back, so each is
    /// acknowledged within half the request timeout.)
    #[test]
    fn lease_deadlines_count_from_the_send_however_slow_the_acknowledgement(
        acquire_ack_micros in 1u64..200_000,
        ack_micros in proptest::collection::vec(1u64..1_000_000, 1..6),
    ) {
        let mut world = World::new();
        let effective = config().effective_lease();
        let ack = Duration::from_micros(acquire_ack_micros);
        let baseline = BaselineAcquire::new(
            world.now(), config(), Mode::Mandatory, lock(), owner("b"), 3, None,
        );
        let baseline_held = take_with_slow_acknowledgements(&mut world, baseline, ack)?;
        release(&mut world, &baseline_held);
        let queue = world.acquire(Mode::Mandatory, "a");
        let held = take_with_slow_acknowledgements(&mut world, queue, ack)?;
        // A slow acquisition may be due to renew its queue cell at once.
        let mut lease = Lease::new(world.now(), config(), held);
        for ack in &ack_micros {
            if lease.quiet_until().is_some() {
                world.advance_to(lease.poll_timeout().expect("a held lease waits"));
                lease.handle_timeout(world.now());
            }
            let sent = world.now().instant;
            let landed = land_now_acknowledge_later(&mut world, &mut lease, Duration::from_micros(*ack));
            prop_assert_eq!(landed, Some(sent), "a renewal was sent");
            prop_assert_eq!(lease.status(), LeaseStatus::Held);
            prop_assert!(
                lease.deadline() <= sent + effective,
                "renewed: deadline {:?} is later than the send {:?} + {:?}",
                lease.deadline(), sent, effective
            );
        }
    }
}

/// Runs `machine` to its outcome like [`World::finish`], failing the first `failures`
/// requests with a transient error; returns the outcome and how many requests it sent.
fn finish_after_failures<M: Machine>(
    world: &mut World,
    machine: &mut M,
    mut failures: u32,
) -> (M::Outcome, u32) {
    let mut sent = 0;
    for _ in 0..10_000 {
        while let Some(outgoing) = machine.poll_request() {
            sent += 1;
            let response = if failures > 0 {
                failures -= 1;
                Err(Error::unavailable("request", "flaky"))
            } else {
                Ok(world.apply(outgoing.request))
            };
            machine.handle_response(world.now(), outgoing.id, response);
        }
        if let Some(outcome) = machine.poll_outcome() {
            return (outcome, sent);
        }
        world.advance_to(
            machine
                .poll_timeout()
                .expect("a quiet machine waits for time"),
        );
        machine.handle_timeout(world.now());
    }
    panic!("the machine did not finish in 10 000 steps");
}

/// A baseline holder's counters say what happened: every request sent (the failed one
/// too), every failure, and at least one main-row read, however many it took.
#[test]
fn a_baseline_holding_counts_its_requests_failures_and_main_reads() {
    for failures in 0..=2 {
        let mut world = World::new();
        let mut acquire = BaselineAcquire::new(
            world.now(),
            without_fencing_baseline(),
            Mode::Mandatory,
            lock(),
            owner("a"),
            3,
            None,
        );
        let (outcome, sent) = finish_after_failures(&mut world, &mut acquire, failures);
        let held = holding(outcome);
        assert_eq!(held.stats.requests, sent, "after {failures} failures");
        assert_eq!(held.stats.storage_failures, failures);
        assert!(held.stats.queue_reads >= 1, "{:?}", held.stats);
        assert_eq!(held.stats, acquire.stats());
    }
}

/// A baseline owner that meets another owner's shadow cell again and again counts every
/// conflict, and pauses after each one for a random time below `concurrent_backoff_step`
/// times the number of conflicts so far, from the moment it learnt of it: never a wake-up
/// in the past.
#[test]
fn baseline_conflicts_are_counted_and_back_off_within_a_growing_bound() {
    let step = Duration::from_millis(3);
    let config = LockConfig {
        algorithm: Algorithm::Baseline,
        fencing: false,
        baseline: crate::config::BaselineConfig {
            owner_backoff_max: Duration::from_millis(1),
            concurrent_backoff_step: step,
        },
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap();
    let mut world = World::new();
    // Another owner's shadow cell that never goes away: every attempt is concurrent.
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Shadow),
        column: ColumnName::new("other"),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: None,
    }));
    let mut acquire = BaselineAcquire::new(
        world.now(),
        config,
        Mode::Mandatory,
        lock(),
        owner("a"),
        5,
        None,
    );
    let mut pauses = Vec::new();
    for conflicts in 1..=12u32 {
        world.settle(&mut acquire);
        assert_eq!(acquire.stats().conflicts, conflicts);
        assert!(world.live(RowKind::Shadow) == [ColumnName::new("other")]);
        let wake = acquire.poll_timeout().expect("a pause after a conflict");
        assert!(
            wake >= world.now().instant,
            "woke in the past after conflict {conflicts}"
        );
        let pause = wake.saturating_duration_since(world.now().instant);
        assert!(pause < step * conflicts, "{pause:?} after {conflicts}");
        pauses.push(pause);
        world.advance_to(wake);
        acquire.handle_timeout(world.now());
    }
    assert!(
        pauses.iter().any(|pause| *pause > step),
        "the bound grows with the conflicts: {pauses:?}"
    );
    assert!(acquire.poll_outcome().is_none());
}

/// The baseline's pause behind another owner is drawn below the configured
/// `owner_backoff_max`, whatever that is.
#[test]
fn the_baseline_backs_off_below_the_configured_maximum() {
    let max = Duration::from_millis(7);
    let config = LockConfig {
        algorithm: Algorithm::Baseline,
        fencing: false,
        baseline: crate::config::BaselineConfig {
            owner_backoff_max: max,
            ..crate::config::BaselineConfig::default()
        },
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap();
    let mut world = World::new();
    let _held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "h")).0);
    let mut waiter = BaselineAcquire::new(
        world.now(),
        config,
        Mode::Mandatory,
        lock(),
        owner("b"),
        11,
        None,
    );
    for _ in 0..16 {
        world.settle(&mut waiter);
        let wake = waiter.poll_timeout().unwrap();
        let pause = wake.saturating_duration_since(world.now().instant);
        assert!(pause < max, "{pause:?}");
        world.advance_to(wake);
        waiter.handle_timeout(world.now());
    }
}

/// A main cell in our column that this acquisition did not write (left by an earlier
/// process under the same owner id, or forged) is not our lock: the baseline treats it as
/// another owner's.
#[test]
fn a_baseline_main_cell_we_did_not_write_is_another_owners() {
    let mut world = World::new();
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Main),
        column: ColumnName::new("a"),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: None,
    }));
    let mut soft = BaselineAcquire::new(
        world.now(),
        without_fencing_baseline(),
        Mode::Soft,
        lock(),
        owner("a"),
        3,
        None,
    );
    world.answer_after(&mut soft, Duration::ZERO);
    assert_eq!(soft.poll_outcome(), Some(AcquireOutcome::Busy));
    assert!(soft.poll_request().is_none());
}

/// Abandoning an acquisition that has already ended (here: with the lock) does nothing:
/// it must not delete the cells of the lock now held, nor report a second outcome.
#[test]
fn abandoning_an_acquisition_that_ended_does_nothing() {
    let mut world = World::new();
    let mut queue = world.acquire(Mode::Mandatory, "a");
    let held = holding(world.finish(&mut queue).0);
    queue.abandon(world.now());
    assert!(queue.poll_request().is_none(), "the queue holder's cells");
    assert!(queue.poll_outcome().is_none());
    release(&mut world, &held);

    let mut baseline = BaselineAcquire::new(
        world.now(),
        without_fencing_baseline(),
        Mode::Mandatory,
        lock(),
        owner("b"),
        3,
        None,
    );
    let _held = holding(world.finish(&mut baseline).0);
    baseline.abandon(world.now());
    assert!(
        baseline.poll_request().is_none(),
        "the baseline holder's cells"
    );
    assert!(baseline.poll_outcome().is_none());
    assert_eq!(world.live(RowKind::Main), [ColumnName::new("b")]);
}

/// An acquisition's request count includes its cleanup's: after a soft lock gives up
/// behind a queued owner (deleting its queue cell), it has counted every request it sent.
#[test]
fn an_acquisition_counts_its_cleanup_requests() {
    let mut world = World::new();
    let mut first = world.acquire(Mode::Mandatory, "a");
    let queue_write = first.poll_request().unwrap();
    world.apply(queue_write.request);
    world.advance(Duration::from_millis(1));
    let mut soft = world.acquire(Mode::Soft, "s");
    let (outcome, sent) = world.finish(&mut soft);
    assert_eq!(outcome, AcquireOutcome::Busy);
    assert!(kinds(&sent).contains(&"delete queue".to_owned()));
    assert_eq!(soft.stats().requests as usize, sent.len());
}

/// The loop contract: a timeout call while the waiter's queue read is in flight sends
/// nothing, even past the time its queue cell is due for a rewrite; the rewrite waits for
/// the read's answer, one request at a time.
#[test]
fn a_waiter_sends_nothing_on_a_timeout_while_its_read_is_in_flight() {
    let mut world = World::new();
    let held = unrenewed_holder(&mut world, "h");
    let mut waiter = world.acquire(Mode::Mandatory, "w");
    world.settle(&mut waiter);
    world.advance_to(waiter.poll_timeout().expect("a waiter pauses"));
    waiter.handle_timeout(world.now());
    let read = waiter.poll_request().expect("a queue read");
    assert!(matches!(read.request, StorageRequest::Read(_)));
    world.advance(config().waiter_renew_every() * 2);
    waiter.handle_timeout(world.now());
    assert!(
        waiter.poll_request().is_none(),
        "a second request while the read is in flight"
    );
    let response = world.apply(read.request);
    waiter.handle_response(world.now(), read.id, Ok(response));
    release(&mut world, &held);
}

/// `TryUpdateGlobalTime` writes only when our local time is strictly ahead: a global time
/// equal to it is already where it should be, and is left alone.
#[test]
fn a_global_time_equal_to_ours_is_already_ahead() {
    let world = World::new();
    let mut update = UpdateGlobalTime::new(world.now(), lock());
    assert_eq!(update.poll_timeout(), None, "it waits only for answers");
    let read = update.poll_request().unwrap();
    let ours = world.now().timestamp;
    let cell = crate::storage::Cell {
        column: ColumnName::new(UpdateGlobalTime::COLUMN),
        value: UpdateGlobalTime::encode(ours),
        write_timestamp: ours,
    };
    update.handle_response(world.now(), read.id, Ok(StorageResponse::Cells(vec![cell])));
    assert!(
        update.poll_request().is_none(),
        "rewrote an equal global time"
    );
    assert_eq!(update.poll_timeout(), None);
    assert_eq!(
        update.poll_outcome(),
        Some(GlobalTimeOutcome::AlreadyAhead(ours))
    );
}

/// An inspection calls a cell stale only once its last write is *older* than
/// `renew_every + request_timeout + max_clock_skew`: a cell exactly that old may still
/// be renewed by a live owner. An inspection never asks for a timeout.
#[test]
fn inspection_calls_a_cell_stale_only_past_the_patience_of_a_live_owner() {
    let config = config();
    let patience =
        config.renew_every() + config.config().request_timeout + config.config().max_clock_skew;
    let report = |age: Duration| {
        let mut world = World::new();
        world.advance(Duration::from_secs(100));
        let written = world.now().timestamp - age;
        let main = crate::storage::Cell {
            column: ColumnName::new("s.0"),
            value: b"a".to_vec(),
            write_timestamp: written,
        };
        let mut inspect = Inspect::new(world.now(), config.clone(), lock(), 8);
        assert_eq!(inspect.poll_timeout(), None, "it waits only for answers");
        while let Some(outgoing) = inspect.poll_request() {
            let is_main = outgoing.request.row().kind == RowKind::Main;
            let cells = if is_main {
                vec![main.clone()]
            } else {
                Vec::new()
            };
            inspect.handle_response(world.now(), outgoing.id, Ok(StorageResponse::Cells(cells)));
        }
        assert_eq!(inspect.poll_timeout(), None);
        let report = inspect.poll_outcome().unwrap().unwrap();
        assert_eq!(report.holder, Some(owner("a")));
        report.main[0].stale
    };
    assert!(!report(patience - Duration::from_micros(1)));
    assert!(!report(patience), "a cell exactly as old as the patience");
    assert!(report(patience + Duration::from_micros(1)));
}

/// A book of prefix `p` in which `retired` lost its lease at `now`, then as many other
/// locks as the book remembers, less one, were taken and given back idle.
fn book_with_a_retired_seat(
    config: &ValidConfig,
    retired: &LockId,
    now: MonotonicTime,
) -> SeatBook {
    let returned = |lost_at| SeatReturn {
        last_timestamp: Timestamp::from_micros(1),
        queue_head: None,
        lost_at,
        found_idle: false,
        poll_hint: None,
        lock_interval: None,
    };
    let mut book = SeatBook::new("p", config);
    let lost = book.take(retired, now);
    book.give_back(&lost, &returned(Some(now)));
    for n in 1..IDLE_LOCKS_REMEMBERED {
        let taken = book.take(&LockId::new(format!("lock-{n}")).unwrap(), now);
        book.give_back(&taken, &returned(None));
    }
    book
}

/// A lock whose only seat is retired (its lease was lost) is not idle until the retirement
/// is over: a book full of idle locks keeps it, so the retired seat is not reused early.
#[test]
fn a_book_remembers_a_lock_with_a_retired_seat_until_the_retirement_ends() {
    let config = config();
    let now = MonotonicTime::from_micros(0);
    let retired_lock = LockId::new("retired").unwrap();
    let mut book = book_with_a_retired_seat(&config, &retired_lock, now);
    // One more lock during the retirement: the idle locks go, the retired one stays.
    book.take(&LockId::new("new").unwrap(), now);
    assert!(book.remembers(&retired_lock));
    assert!(!book.remembers(&LockId::new("lock-1").unwrap()));
    assert_eq!(
        book.take(&retired_lock, now).seat.column.as_str(),
        "p.1",
        "the retired seat was reused"
    );

    // After the retirement, a lock whose retired seats have all served their time is idle.
    let mut book = book_with_a_retired_seat(&config, &retired_lock, now);
    book.take(&LockId::new("new").unwrap(), now + config.seat_retirement());
    assert!(!book.remembers(&retired_lock));
}

/// A write to the queue row of a column already written: a waiter's rewrite.
fn is_queue_rewrite(request: &StorageRequest, written: &[ColumnName]) -> bool {
    matches!(request, StorageRequest::Write(write)
        if write.row.kind == RowKind::Queue && written.contains(&write.column))
}

/// A waiter whose queue rewrites are each acknowledged after its cell may have lapsed
/// enqueues again, but only `storage_retries` times in all: after that it keeps its place
/// rather than move to the back again and again.
#[test]
fn late_rewrites_again_and_again_requeue_only_within_the_retry_budget() {
    let mut world = World::new();
    // An owner ahead that never leaves: a queue cell without TTL.
    let ahead = QueueColumn::new(world.now().timestamp, owner("ahead"));
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Queue),
        column: ahead.encode(),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: None,
    }));
    world.advance(Duration::from_millis(1));
    let mut waiter = world.acquire(Mode::Mandatory, "w");
    let retries = config().config().storage_retries;
    let mut written = Vec::new();
    let mut late_rewrites = 0;
    for _ in 0..100_000 {
        if late_rewrites > retries + 1 {
            break;
        }
        let Some(outgoing) = waiter.poll_request() else {
            world.advance_to(waiter.poll_timeout().expect("a waiter waits"));
            waiter.handle_timeout(world.now());
            continue;
        };
        let rewrite = is_queue_rewrite(&outgoing.request, &written);
        if let StorageRequest::Write(write) = &outgoing.request {
            written.push(write.column.clone());
        }
        let response = world.apply(outgoing.request);
        if rewrite {
            world.advance(config().waiter_effective());
            late_rewrites += 1;
        }
        waiter.handle_response(world.now(), outgoing.id, Ok(response));
        assert!(waiter.stats().requeues <= retries, "{:?}", waiter.stats());
    }
    assert_eq!(late_rewrites, retries + 2);
    assert_eq!(waiter.stats().requeues, retries);
    assert!(
        waiter.poll_outcome().is_none(),
        "the owner ahead never left"
    );
}

/// In the combined migration mode every time the shadow gate finds another shadow cell
/// (an old-algorithm client trying at the same time) counts as a conflict.
#[test]
fn combined_mode_shadow_conflicts_are_counted() {
    let mut world = World::new();
    let combined = LockConfig {
        algorithm: Algorithm::Combined,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap();
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Shadow),
        column: ColumnName::new("old-owner"),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: None,
    }));
    let mut acquire = world.acquire_with(combined, "a");
    let mut shadow_deletes = 0;
    for _ in 0..6 {
        let sent = world.settle(&mut acquire);
        shadow_deletes += kinds(&sent)
            .iter()
            .filter(|kind| *kind == "delete shadow")
            .count();
        world.advance_to(acquire.poll_timeout().unwrap());
        acquire.handle_timeout(world.now());
    }
    assert!(shadow_deletes >= 2, "{shadow_deletes} conflicts");
    assert_eq!(acquire.stats().conflicts as usize, shadow_deletes);
    assert!(acquire.poll_outcome().is_none());
}

const MS: Duration = Duration::from_millis(1);

/// An acquisition that tries the fast path (docs/algorithm.md, section "The two-round-trip fast path").
fn fast(world: &World, config: ValidConfig, name: &str) -> Acquire {
    let options = AcquireOptions {
        fast_path: true,
        ..AcquireOptions::default()
    };
    Acquire::with_options(
        world.now(),
        config,
        Mode::Mandatory,
        lock(),
        owner(name),
        7,
        options,
    )
}

/// Runs a machine to its outcome in rounds: every request it has out is answered `delay`
/// later, together, before it may send more. Returns the outcome and the requests of each
/// round, so that a round is one round trip.
fn in_rounds<M: Machine>(
    world: &mut World,
    machine: &mut M,
    delay: Duration,
) -> (M::Outcome, Vec<Vec<String>>) {
    let mut rounds = Vec::new();
    for _ in 0..1_000 {
        let mut out = Vec::new();
        while let Some(outgoing) = machine.poll_request() {
            out.push(outgoing);
        }
        if out.is_empty() {
            if let Some(outcome) = machine.poll_outcome() {
                return (outcome, rounds);
            }
            let wake = machine
                .poll_timeout()
                .expect("a quiet machine must wait for time");
            world.advance_to(wake);
            machine.handle_timeout(world.now());
            continue;
        }
        let requests: Vec<StorageRequest> = out.iter().map(|o| o.request.clone()).collect();
        rounds.push(kinds(&requests));
        world.advance(delay);
        for outgoing in out {
            let response = world.apply(outgoing.request);
            machine.handle_response(world.now(), outgoing.id, Ok(response));
        }
    }
    panic!("the machine did not finish in 1 000 rounds");
}

#[test]
fn the_fast_path_takes_an_idle_lock_in_two_round_trips() {
    let mut world = World::new();
    let mut acquire = fast(&world, without_fencing(), "a");
    let (outcome, rounds) = in_rounds(&mut world, &mut acquire, MS);
    let held = holding(outcome);
    assert_eq!(
        rounds,
        [
            vec!["write queue", "write main"],
            vec!["read queue", "read main"]
        ]
    );
    assert_eq!(held.stats.queue_reads, 1);
    assert!(held.stats.found_idle());
    assert_eq!(
        world.live(RowKind::Main),
        std::slice::from_ref(&held.main.column)
    );
    // With fencing tokens, the fence's read and write follow: four round trips, not six.
    let mut world = World::new();
    let mut acquire = fast(&world, config(), "a");
    let (outcome, rounds) = in_rounds(&mut world, &mut acquire, MS);
    assert!(holding(outcome).fencing_token.is_some());
    assert_eq!(rounds.len(), 4, "{rounds:?}");
    // The normal path, for comparison: four round trips without fencing.
    let mut world = World::new();
    let mut normal = world.acquire_with(without_fencing(), "a");
    let (outcome, rounds) = in_rounds(&mut world, &mut normal, MS);
    holding(outcome);
    assert_eq!(rounds.len(), 4, "{rounds:?}");
}

#[test]
fn the_fast_path_meeting_a_holder_deletes_its_main_cell_and_waits_in_the_queue() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    let mut waiter = fast(&world, config(), "b");
    let sent = world.settle(&mut waiter);
    assert_eq!(
        kinds(&sent),
        [
            "write queue",
            "write main",
            "read queue",
            "read main",
            "delete main",
            "read queue"
        ]
    );
    assert!(waiter.poll_outcome().is_none());
    assert_eq!(
        world.live(RowKind::Main),
        std::slice::from_ref(&held.main.column)
    );
    assert_eq!(world.live(RowKind::Queue).len(), 2);
    assert_eq!(waiter.stats().conflicts, 1);
    release(&mut world, &held);
    let (outcome, _) = world.finish(&mut waiter);
    let acquired = holding(outcome);
    assert_eq!(acquired.owner, owner("b"));
    assert!(!acquired.stats.found_idle());
}

#[test]
fn a_fast_path_enqueue_acknowledged_late_is_enqueued_again_without_its_main_cell() {
    let mut world = World::new();
    let timeout = config().config().request_timeout;
    let mut acquire = fast(&world, config(), "a");
    let mut out = Vec::new();
    while let Some(outgoing) = acquire.poll_request() {
        out.push(outgoing);
    }
    assert_eq!(out.len(), 2);
    world.advance(timeout + MS);
    for outgoing in out {
        let response = world.apply(outgoing.request);
        acquire.handle_response(world.now(), outgoing.id, Ok(response));
    }
    let (outcome, sent) = world.finish(&mut acquire);
    let held = holding(outcome);
    assert_eq!(
        kinds(&sent)[..4],
        ["delete main", "delete queue", "write queue", "read queue"]
    );
    assert_eq!(held.stats.requeues, 1);
    assert_eq!(world.live(RowKind::Queue).len(), 1);
}

#[test]
fn the_fast_path_takes_its_answers_in_either_order_and_retries_a_failed_pair_whole() {
    let mut world = World::new();
    let mut acquire = fast(&world, without_fencing(), "a");
    let queue = acquire.poll_request().unwrap();
    let main = acquire.poll_request().unwrap();
    // The main write's answer first, then the queue write fails: both are sent again.
    let response = world.apply(main.request);
    acquire.handle_response(world.now(), main.id, Ok(response));
    assert!(
        acquire.poll_request().is_none(),
        "nothing before the pair's second answer"
    );
    acquire.handle_response(
        world.now(),
        queue.id,
        Err(Error::unavailable("write queue", "flaky")),
    );
    let (outcome, sent) = world.finish(&mut acquire);
    holding(outcome);
    assert_eq!(
        kinds(&sent),
        ["write queue", "write main", "read queue", "read main"]
    );
}

#[test]
fn the_soft_lock_and_the_combined_mode_never_take_the_fast_path() {
    let world = World::new();
    let options = AcquireOptions {
        fast_path: true,
        ..AcquireOptions::default()
    };
    let mut soft = Acquire::with_options(
        world.now(),
        config(),
        Mode::Soft,
        lock(),
        owner("a"),
        7,
        options.clone(),
    );
    assert_eq!(
        kinds(&[soft.poll_request().unwrap().request]),
        ["read main"]
    );
    assert!(soft.poll_request().is_none());
    let combined = LockConfig {
        algorithm: Algorithm::Combined,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap();
    let mut mandatory = Acquire::with_options(
        world.now(),
        combined,
        Mode::Mandatory,
        lock(),
        owner("a"),
        7,
        options,
    );
    assert_eq!(
        kinds(&[mandatory.poll_request().unwrap().request]),
        ["write queue"]
    );
    assert!(mandatory.poll_request().is_none());
}

/// The default configuration with waiters waiting in the main row, fencing on or off.
fn waiting_in_main(fencing: bool) -> ValidConfig {
    LockConfig {
        wait_in_main_row: true,
        fencing,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

/// The TTLs, in seconds, of the main-row writes among `requests`, in order.
fn main_write_ttls(requests: &[StorageRequest]) -> Vec<u32> {
    requests
        .iter()
        .filter_map(|request| match request {
            StorageRequest::Write(write) if write.row.kind == RowKind::Main => {
                write.ttl.map(|ttl| ttl.as_secs())
            }
            _ => None,
        })
        .collect()
}

fn main_values(world: &World) -> Vec<String> {
    let read = crate::storage::RowRead::first(row(RowKind::Main), 10);
    world
        .cells
        .read(&read, world.now().timestamp)
        .iter()
        .map(|cell| String::from_utf8(cell.value.clone()).unwrap())
        .collect()
}

#[test]
fn waiting_in_the_main_row_a_holder_leaves_the_queue_with_its_fence_read() {
    let mut world = World::new();
    let mut acquire = world.acquire_with(waiting_in_main(true), "a");
    let (outcome, sent) = world.finish(&mut acquire);
    assert_eq!(
        kinds(&sent),
        [
            "write queue",
            "read queue",
            "write main",
            "read main",
            "read fence",
            "delete queue",
            "write fence"
        ]
    );
    assert_eq!(
        main_write_ttls(&sent),
        [config().ttl().as_secs()],
        "holding at once takes no short cell and no renewal"
    );
    let held = holding(outcome);
    assert_eq!(held.queue_exit, QueueExit::Done);
    assert!(world.live(RowKind::Queue).is_empty());
    assert_eq!(held.held_cells().count(), 1, "only the main cell is held");
    // The main cell carries the queue column, which names its owner, marked as a head.
    let column = QueueColumn::decode(held.queue.as_ref().unwrap().column.as_str()).unwrap();
    let value = String::from_utf8(MainCellValue::Head(column.clone()).encode()).unwrap();
    assert_eq!(main_values(&world), [value]);
    assert_eq!(column.owner, owner("a"));
}

#[test]
fn waiting_in_the_main_row_without_fencing_the_lease_leaves_the_queue() {
    let mut world = World::new();
    let config = waiting_in_main(false);
    let mut acquire = world.acquire_with(config.clone(), "a");
    let (outcome, sent) = world.finish(&mut acquire);
    assert_eq!(
        kinds(&sent),
        ["write queue", "read queue", "write main", "read main"]
    );
    assert_eq!(main_write_ttls(&sent), [config.ttl().as_secs()]);
    let held = holding(outcome);
    assert_eq!(held.queue_exit, QueueExit::Now);
    assert_eq!(held.queue_renew_by, None);
    let mut lease = Lease::new(world.now(), config.clone(), held.clone());
    assert_eq!(kinds(&world.settle(&mut lease)), ["delete queue"]);
    assert!(world.live(RowKind::Queue).is_empty());
    // Renewals rewrite the main cell alone, and the release deletes it alone.
    world.advance_to(lease.poll_timeout().unwrap());
    lease.handle_timeout(world.now());
    assert_eq!(
        kinds(&world.settle(&mut lease)),
        ["write main", "read main"]
    );
    assert_eq!(lease.status(), LeaseStatus::Held);
    let (result, sent) = world.finish(&mut lease.release(world.now()));
    result.unwrap();
    assert_eq!(kinds(&sent), ["delete main"]);
    assert!(world.live(RowKind::Main).is_empty());
}

#[test]
fn a_lease_whose_queue_delete_failed_deletes_the_queue_cell_on_release() {
    let mut world = World::new();
    let config = waiting_in_main(false);
    let held = holding(world.finish(&mut world.acquire_with(config.clone(), "a")).0);
    let mut lease = Lease::new(world.now(), config, held);
    let leave = lease.poll_request().unwrap();
    lease.handle_response(
        world.now(),
        leave.id,
        Err(Error::unavailable("delete", "partition")),
    );
    assert_eq!(world.live(RowKind::Queue).len(), 1);
    let (result, sent) = world.finish(&mut lease.release(world.now()));
    result.unwrap();
    assert_eq!(kinds(&sent), ["delete main", "delete queue"]);
    assert!(world.live(RowKind::Queue).is_empty());
}

/// Waiting in the main row without fencing: `a` holds (its lease has left the queue), and
/// `b` starts 1 ms later. Returns the configuration, `a`'s lease, `b`'s acquisition and the
/// requests `b` sent until it had to wait.
fn a_holds_and_b_starts(world: &mut World) -> (ValidConfig, Lease, Acquire, Vec<StorageRequest>) {
    let config = waiting_in_main(false);
    let held = holding(world.finish(&mut world.acquire_with(config.clone(), "a")).0);
    let mut lease = Lease::new(world.now(), config.clone(), held);
    world.settle(&mut lease);
    world.advance(Duration::from_millis(1));
    let mut waiter = world.acquire_with(config.clone(), "b");
    let sent = world.settle(&mut waiter);
    (config, lease, waiter, sent)
}

#[test]
fn the_owner_behind_waits_in_the_main_row_and_holds_one_read_after_the_release() {
    let mut world = World::new();
    let (config, lease, mut waiter, sent) = a_holds_and_b_starts(&mut world);
    assert_eq!(
        kinds(&sent),
        [
            "write queue",
            "read queue",
            "write main",
            "read main",
            "write main"
        ],
        "b is first in the queue, finds a's cell in the main row and keeps its own, \
         rewritten with the waiter TTL"
    );
    assert!(waiter.poll_outcome().is_none());
    assert_eq!(world.live(RowKind::Main).len(), 2);
    assert_eq!(waiter.stats().main_row_waits, 1);
    // An operator (or an election) still sees a as the holder: b waits in the queue.
    let (report, _) = world.finish(&mut Inspect::new(world.now(), config.clone(), lock(), 8));
    let report = report.unwrap();
    assert_eq!(report.main.len(), 2);
    assert_eq!(report.holder, Some(owner("a")));
    // Each main cell carries its owner's queue column, so a reader can tell the owner
    // waiting (b, a later column) from the one it waits for.
    let column_of = |name: &str| {
        let cell = report.main.iter().find(|cell| cell.owner == owner(name));
        cell.and_then(|cell| cell.queue_column.clone())
            .unwrap_or_else(|| panic!("{name}'s main cell carries no queue column: {report:?}"))
    };
    let (a_column, b_column) = (column_of("a"), column_of("b"));
    assert_eq!(
        (&a_column.owner, &b_column.owner),
        (&owner("a"), &owner("b"))
    );
    assert!(a_column < b_column, "{a_column} {b_column}");
    assert_eq!(report.queue[0].enqueued_at, b_column.timestamp);
    // b polls the main row, not the queue, while a holds.
    world.advance_to(waiter.poll_timeout().unwrap());
    waiter.handle_timeout(world.now());
    assert_eq!(kinds(&world.settle(&mut waiter)), ["read main"]);
    assert!(waiter.poll_outcome().is_none());
    let (result, _) = world.finish(&mut lease.release(world.now()));
    result.unwrap();
    let released_at = world.now().instant;
    let (outcome, sent) = world.finish(&mut waiter);
    assert_eq!(
        kinds(&sent),
        ["read main", "write main"],
        "one read after the release, then the renewal with lease_ttl"
    );
    let next = holding(outcome);
    assert_eq!(next.owner, owner("b"));
    assert!(next.stats.main_row_waits >= 2);
    assert!(!next.stats.found_idle());
    let handoff = next.acquired_at.saturating_duration_since(released_at);
    assert!(handoff <= LockConfig::default().poll.max_interval);
}

#[test]
fn a_waiter_in_the_main_row_keeps_its_cells_fresh_while_the_holder_holds_long() {
    let mut world = World::new();
    let config = waiting_in_main(false);
    let held = holding(world.finish(&mut world.acquire_with(config.clone(), "a")).0);
    let mut lease = Lease::new(world.now(), config.clone(), held);
    let mut waiter = world.acquire_with(config.clone(), "b");
    let hold = Duration::from_secs(30);
    let mut main_writes = 0;
    while world.now().instant < MonotonicTime::ZERO + hold {
        world.settle(&mut lease);
        main_writes += kinds(&world.settle(&mut waiter))
            .iter()
            .filter(|kind| *kind == "write main")
            .count();
        assert!(waiter.poll_outcome().is_none(), "a renews, so b must wait");
        let wake = waiter
            .poll_timeout()
            .unwrap()
            .min(lease.poll_timeout().unwrap());
        world.advance_to(wake);
        waiter.handle_timeout(world.now());
        lease.handle_timeout(world.now());
    }
    // b rewrites its queue cell every waiter renewal period and its main cell with it, so
    // that the lease it holds with is never stale.
    let expected = (hold.as_millis() / config.waiter_renew_every().as_millis()) as usize;
    assert!(main_writes >= expected, "{main_writes} main writes");
    assert_eq!(waiter.stats().conflicts, 0);
    world.settle(&mut lease);
    let (result, _) = world.finish(&mut lease.release(world.now()));
    result.unwrap();
    let next = holding(world.finish(&mut waiter).0);
    assert!(
        next.lease_deadline
            >= world.now().instant + config.effective_lease()
                - config.waiter_renew_every()
                - Duration::from_millis(10),
        "the lease counts from b's latest main write"
    );
}

#[test]
fn an_owner_never_waits_in_the_main_row_for_a_later_column_or_a_bare_owner_id() {
    for value in [
        QueueColumn::new(Timestamp::from_micros(EPOCH + 5_000_000), owner("late"))
            .encode()
            .as_str()
            .to_owned(),
        "old".to_owned(),
    ] {
        let mut world = World::new();
        world.apply(StorageRequest::Write(crate::storage::CellWrite {
            row: row(RowKind::Main),
            column: ColumnName::new("other.0"),
            value: value.clone().into_bytes(),
            timestamp: Timestamp::from_micros(EPOCH),
            ttl: None,
        }));
        let mut waiter = world.acquire_with(waiting_in_main(false), "b");
        let sent = world.settle(&mut waiter);
        assert_eq!(
            kinds(&sent),
            [
                "write queue",
                "read queue",
                "write main",
                "read main",
                "delete main"
            ],
            "{value}: a conflict, not a wait"
        );
        assert_eq!(waiter.stats().main_row_waits, 0);
    }
}

#[test]
fn a_waiter_in_the_main_row_that_finds_itself_behind_takes_its_main_cell_out() {
    let mut world = World::new();
    let (config, mut lease, mut waiter, _) = a_holds_and_b_starts(&mut world);
    assert_eq!(world.live(RowKind::Main).len(), 2);
    // A cell that sorts before b's turns up (a slow clock): at b's next look at the queue,
    // when its queue cell is due, b is behind and must not keep a main cell that others
    // would wait for.
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Queue),
        column: QueueColumn::new(Timestamp::from_micros(EPOCH), owner("early")).encode(),
        value: Vec::new(),
        timestamp: world.now().timestamp,
        ttl: None,
    }));
    let mut sent = Vec::new();
    while world.now().instant < MonotonicTime::ZERO + config.waiter_renew_every() * 2 {
        world.settle(&mut lease);
        sent.extend(kinds(&world.settle(&mut waiter)));
        let wake = waiter.poll_timeout().unwrap();
        world.advance_to(wake);
        waiter.handle_timeout(world.now());
    }
    let read_queue = sent.iter().position(|kind| kind == "read queue").unwrap();
    assert_eq!(sent[read_queue + 1], "delete main", "{sent:?}");
    assert_eq!(world.live(RowKind::Main).len(), 1, "only a's cell is left");
}

#[test]
fn an_owner_that_left_the_queue_and_gives_the_lock_back_joins_the_queue_again_under_a_new_time() {
    let mut world = World::new();
    let mut late = world.acquire_with(waiting_in_main(true), "a");
    let first_column = late.queue_column().clone();
    let fence_write = world.answer_until_fence_write(&mut late);
    assert!(world.live(RowKind::Queue).is_empty(), "a left the queue");
    // The fence write is answered too late to renew the lease in time: a gives the lock
    // back, and must not bring back its old queue column.
    world.advance(config().effective_lease());
    let response = world.apply(fence_write.request);
    late.handle_response(world.now(), fence_write.id, Ok(response));
    let (outcome, _) = world.finish(&mut late);
    let held = holding(outcome);
    assert!(held.stats.conflicts >= 1);
    let column = QueueColumn::decode(held.queue.as_ref().unwrap().column.as_str()).unwrap();
    assert!(
        column.timestamp > first_column.timestamp,
        "{column} should be later than {first_column}"
    );
}

#[test]
fn a_waiter_in_the_main_row_paces_its_reads_by_their_own_round_trip() {
    let mut world = World::new();
    let config = waiting_in_main(false);
    let held = holding(world.finish(&mut world.acquire_with(config.clone(), "a")).0);
    // b's queue requests are slow (300 ms) while a is still queued, then everything is
    // answered at once: the pace b learnt from the queue must not make it read the main
    // row back to back for ever without time passing.
    let mut waiter = world.acquire_with(config.clone(), "b");
    world.answer_after(&mut waiter, Duration::from_millis(300));
    world.answer_after(&mut waiter, Duration::from_millis(300));
    let mut lease = Lease::new(world.now(), config, held);
    world.settle(&mut lease);
    let mut instant_reads = 0;
    loop {
        world.settle(&mut waiter);
        if waiter.poll_timeout().unwrap() > world.now().instant {
            break;
        }
        instant_reads += 1;
        assert!(
            instant_reads < 50,
            "main reads back to back without time passing"
        );
        waiter.handle_timeout(world.now());
    }
    assert!(waiter.stats().main_row_waits >= 1);
}

/// The owner that finds itself first counts the owners queued behind it: its locker's next
/// acquisition will wait for them, and for the owner that held before it unless a cell
/// behind was written since that owner's release (it joined again). With anyone behind,
/// the lock was not idle, and the next acquisition takes no fast path.
#[test]
fn the_owner_that_finds_itself_first_counts_who_its_next_turn_waits_for() {
    let mut world = World::new();
    let held = holding(world.finish(&mut world.acquire(Mode::Mandatory, "a")).0);
    world.advance(MS);
    let mut b = world.acquire(Mode::Mandatory, "b");
    world.settle(&mut b);
    world.advance(MS);
    let mut c = world.acquire(Mode::Mandatory, "c");
    world.settle(&mut c);
    world.advance(20 * MS);
    release(&mut world, &held);
    let b_held = holding(world.finish(&mut b).0);
    assert_eq!(b_held.stats.behind_at_turn, 1);
    assert_eq!(
        b_held.stats.ahead_at_return, 2,
        "c, and a if it joins again"
    );
    assert!(!b_held.stats.found_idle());
    // a joins again as soon as b releases, before c's read finds c first.
    world.advance(20 * MS);
    release(&mut world, &b_held);
    let mut a_again = world.acquire(Mode::Mandatory, "a2");
    world.settle(&mut a_again);
    let c_held = holding(world.finish(&mut c).0);
    assert_eq!(c_held.stats.behind_at_turn, 1);
    assert_eq!(c_held.stats.ahead_at_return, 1, "a2, already behind");
    // An owner whose first read finds it first with one behind found the lock busy.
    world.advance(20 * MS);
    release(&mut world, &c_held);
    let a_held = holding(world.finish(&mut a_again).0);
    release(&mut world, &a_held);
    let mut x = world.acquire(Mode::Mandatory, "x");
    let enqueue = x.poll_request().unwrap();
    let response = world.apply(enqueue.request);
    world.advance(MS);
    let mut y = world.acquire(Mode::Mandatory, "y");
    world.settle(&mut y);
    x.handle_response(world.now(), enqueue.id, Ok(response));
    let x_held = holding(world.finish(&mut x).0);
    assert_eq!(x_held.stats.queue_reads, 1);
    assert_eq!(x_held.stats.behind_at_turn, 1);
    assert_eq!(
        x_held.stats.ahead_at_return, 1,
        "no read showed anyone ahead"
    );
    assert!(!x_held.stats.found_idle());
}

/// A mandatory owner with a hint of its own release 1 ms ago and two owners to go sends
/// no read on arrival: after its queue write it sleeps to half a round trip before the
/// second should have left, then reads.
#[test]
fn an_owner_with_owners_to_go_since_its_release_sleeps_to_its_turn_before_reading() {
    let mut world = World::new();
    world.advance(10 * MS);
    let hint = PollHint {
        departed_at: world.now().instant - MS,
        handoff: 4 * MS,
        turn: 2 * MS,
        ahead: 2,
        round_trip: MS,
    };
    let options = AcquireOptions {
        poll_hint: Some(hint),
        ..AcquireOptions::default()
    };
    let mut acquire = Acquire::with_options(
        world.now(),
        config(),
        Mode::Mandatory,
        lock(),
        owner("a"),
        7,
        options.clone(),
    );
    let sent = world.settle(&mut acquire);
    assert_eq!(kinds(&sent), ["write queue"]);
    let wake = acquire.poll_timeout().unwrap();
    assert_eq!(wake, hint.departed_at + Duration::from_micros(7_500));
    world.advance_to(wake);
    acquire.handle_timeout(world.now());
    let (outcome, sent) = world.finish(&mut acquire);
    assert_eq!(kinds(&sent)[0], "read queue");
    assert_eq!(holding(outcome).stats.queue_reads, 1);
    // The soft lock reads at once: it gives up if anyone is ahead.
    let mut soft = Acquire::with_options(
        world.now(),
        config(),
        Mode::Soft,
        lock(),
        owner("b"),
        7,
        options,
    );
    let sent = world.settle(&mut soft);
    assert_eq!(kinds(&sent)[..1], ["read main"]);
}

/// Waiting in the main row with `config`: `a` holds, `b` starts 1 ms later and waits for
/// about `hold` (answered at once, `a` renewing), then `a` releases. Returns `b`'s
/// acquisition, asleep, the requests it sent while `a` held, and when its latest main
/// write with the waiter TTL was sent (and, answered at once, acknowledged).
fn b_waits_in_main_for(
    world: &mut World,
    config: &ValidConfig,
    hold: Duration,
) -> (Acquire, Vec<StorageRequest>, Option<MonotonicTime>) {
    let held = holding(world.finish(&mut world.acquire_with(config.clone(), "a")).0);
    let mut lease = Lease::new(world.now(), config.clone(), held);
    world.settle(&mut lease);
    world.advance(Duration::from_millis(1));
    let mut waiter = world.acquire_with(config.clone(), "b");
    let until = world.now().instant + hold;
    let mut sent = Vec::new();
    let mut short_sent = None;
    loop {
        world.settle(&mut lease);
        let now = world.now().instant;
        for request in world.settle(&mut waiter) {
            if is_main_write_with_ttl(&request, config.waiter_ttl().as_secs()) {
                short_sent = Some(now);
            }
            sent.push(request);
        }
        assert!(waiter.poll_outcome().is_none(), "a holds, so b must wait");
        let wake = waiter
            .poll_timeout()
            .unwrap()
            .min(lease.poll_timeout().unwrap());
        if wake > until {
            break;
        }
        world.advance_to(wake);
        waiter.handle_timeout(world.now());
        lease.handle_timeout(world.now());
    }
    let (result, _) = world.finish(&mut lease.release(world.now()));
    result.unwrap();
    (waiter, sent, short_sent)
}

fn is_main_write_with_ttl(request: &StorageRequest, ttl: u32) -> bool {
    matches!(request, StorageRequest::Write(write)
        if write.row.kind == RowKind::Main && write.ttl.map(|ttl| ttl.as_secs()) == Some(ttl))
}

/// Drives `waiter` (answering every request at once, waking it when due) until it sends
/// a main write with `lease_ttl`: the renewal before holding. `short_sent` is when its latest
/// main write with the waiter TTL so far was sent. Returns the requests sent with the
/// renewal, unanswered, and when the latest main write with the waiter TTL was sent (and,
/// being answered at once, acknowledged).
fn until_renewal(
    world: &mut World,
    waiter: &mut Acquire,
    config: &ValidConfig,
    mut short_sent: Option<MonotonicTime>,
) -> (Vec<Outgoing>, MonotonicTime) {
    loop {
        let batch: Vec<Outgoing> = std::iter::from_fn(|| waiter.poll_request()).collect();
        if batch
            .iter()
            .any(|outgoing| is_main_write_with_ttl(&outgoing.request, config.ttl().as_secs()))
        {
            return (
                batch,
                short_sent.expect("a short main write before the renewal"),
            );
        }
        if batch.is_empty() {
            assert!(waiter.poll_outcome().is_none(), "held without a renewal");
            world.advance_to(waiter.poll_timeout().unwrap());
            waiter.handle_timeout(world.now());
        }
        for outgoing in batch {
            if is_main_write_with_ttl(&outgoing.request, config.waiter_ttl().as_secs()) {
                short_sent = Some(world.now().instant);
            }
            let response = world.apply(outgoing.request);
            waiter.handle_response(world.now(), outgoing.id, Ok(response));
        }
    }
}

fn answer(world: &mut World, machine: &mut impl Machine, outgoing: Outgoing) {
    let response = world.apply(outgoing.request);
    machine.handle_response(world.now(), outgoing.id, Ok(response));
}

#[test]
fn waiting_in_the_main_row_every_main_rewrite_carries_the_waiter_ttl() {
    let mut world = World::new();
    let config = waiting_in_main(false);
    let (_, sent, _) = b_waits_in_main_for(&mut world, &config, Duration::from_secs(5));
    assert_eq!(
        kinds(&sent[..5]),
        [
            "write queue",
            "read queue",
            "write main",
            "read main",
            "write main"
        ],
        "b rewrites its main cell as soon as it decides to wait"
    );
    let ttls = main_write_ttls(&sent);
    let (lease_ttl, waiter_ttl) = (config.ttl().as_secs(), config.waiter_ttl().as_secs());
    assert!(waiter_ttl < lease_ttl);
    assert_eq!(
        ttls[0], lease_ttl,
        "the first main write carries the lease TTL"
    );
    assert!(
        ttls.len() >= 5 && ttls[1..].iter().all(|ttl| *ttl == waiter_ttl),
        "every rewrite while waiting carries the waiter TTL: {ttls:?}"
    );
}

#[test]
fn after_waiting_in_the_main_row_without_fencing_the_owner_renews_its_cell_then_holds() {
    let mut world = World::new();
    let config = waiting_in_main(false);
    let (mut waiter, _, short_sent) =
        b_waits_in_main_for(&mut world, &config, Duration::from_secs(2));
    let (mut batch, _) = until_renewal(&mut world, &mut waiter, &config, short_sent);
    assert_eq!(batch.len(), 1, "the renewal goes alone without fencing");
    let renewal_sent = world.now().instant;
    world.advance(Duration::from_millis(200));
    answer(&mut world, &mut waiter, batch.remove(0));
    let held = holding(
        waiter
            .poll_outcome()
            .expect("held once the renewal is acknowledged"),
    );
    assert_eq!(held.main.written_at, renewal_sent);
    assert_eq!(
        held.lease_deadline,
        renewal_sent + config.effective_lease(),
        "the lease counts from the renewal's send"
    );
}

#[test]
fn after_waiting_in_the_main_row_with_fencing_the_renewal_goes_with_the_fence_read() {
    let mut world = World::new();
    let config = waiting_in_main(true);
    let (mut waiter, _, short_sent) =
        b_waits_in_main_for(&mut world, &config, Duration::from_secs(2));
    let (batch, _) = until_renewal(&mut world, &mut waiter, &config, short_sent);
    let requests: Vec<StorageRequest> = batch.iter().map(|o| o.request.clone()).collect();
    assert_eq!(
        kinds(&requests),
        ["read fence", "write main"],
        "no extra round trip, and the queue cell kept until the renewal makes the main row ours"
    );
    let renewal_sent = world.now().instant;
    let mut renewal = None;
    for outgoing in batch {
        if is_main_write_with_ttl(&outgoing.request, config.ttl().as_secs()) {
            renewal = Some(outgoing);
        } else {
            answer(&mut world, &mut waiter, outgoing);
        }
    }
    assert!(
        waiter.poll_request().is_none() && waiter.poll_outcome().is_none(),
        "no fence write and no hold before the renewal is acknowledged"
    );
    world.advance(Duration::from_millis(200));
    answer(&mut world, &mut waiter, renewal.unwrap());
    let (outcome, sent) = world.finish(&mut waiter);
    assert_eq!(kinds(&sent), ["write fence", "delete queue"]);
    let held = holding(outcome);
    assert_eq!(held.queue_exit, QueueExit::Done);
    assert_eq!(held.main.written_at, renewal_sent);
    assert_eq!(held.lease_deadline, renewal_sent + config.effective_lease());
}

/// `b` waits in the main row, then its renewal before holding is acknowledged `late`
/// relative to the send of its latest short main write plus the waiter's effective life.
/// Returns what followed the acknowledgement: the outcome, if any, and the next requests.
fn renewal_acknowledged(fencing: bool, late: bool) -> (Option<AcquireOutcome>, Vec<String>) {
    let mut world = World::new();
    let config = waiting_in_main(fencing);
    let (mut waiter, _, short_sent) =
        b_waits_in_main_for(&mut world, &config, Duration::from_secs(2));
    let (batch, short_sent) = until_renewal(&mut world, &mut waiter, &config, short_sent);
    let due = short_sent + config.waiter_effective();
    world.advance_to(if late {
        due
    } else {
        due - Duration::from_micros(1)
    });
    for outgoing in batch {
        answer(&mut world, &mut waiter, outgoing);
    }
    let next: Vec<StorageRequest> = std::iter::from_fn(|| waiter.poll_request())
        .map(|outgoing| outgoing.request)
        .collect();
    (waiter.poll_outcome(), kinds(&next))
}

#[test]
fn a_renewal_acknowledged_after_the_short_cell_may_have_lapsed_is_a_conflict() {
    for fencing in [false, true] {
        let (outcome, next) = renewal_acknowledged(fencing, true);
        assert_eq!(outcome, None, "fencing {fencing}: never hold");
        assert_eq!(next, ["delete main"], "fencing {fencing}");
        let (outcome, next) = renewal_acknowledged(fencing, false);
        if fencing {
            assert_eq!(
                (outcome, next),
                (
                    None,
                    vec!["write fence".to_owned(), "delete queue".to_owned()]
                )
            );
        } else {
            holding(outcome.expect("held just in time"));
        }
    }
}

#[test]
fn a_late_renewal_leaves_no_main_cell_and_the_owner_holds_later_in_its_first_place() {
    // With fencing the renewal goes with the fence read; had the queue delete gone with it
    // too, a late renewal would leave the owner without its place, and it would join again
    // at the back.
    for fencing in [false, true] {
        let mut world = World::new();
        let config = waiting_in_main(fencing);
        let (mut waiter, _, short_sent) =
            b_waits_in_main_for(&mut world, &config, Duration::from_secs(2));
        let queued = world.live(RowKind::Queue);
        assert_eq!(
            queued.len(),
            1,
            "fencing {fencing}: b is queued: {queued:?}"
        );
        let (batch, short_sent) = until_renewal(&mut world, &mut waiter, &config, short_sent);
        world.advance_to(short_sent + config.waiter_effective());
        for outgoing in batch {
            answer(&mut world, &mut waiter, outgoing);
        }
        world.settle(&mut waiter);
        assert!(
            world.live(RowKind::Main).is_empty(),
            "fencing {fencing}: b deleted its cell"
        );
        assert_eq!(
            world.live(RowKind::Queue),
            queued,
            "fencing {fencing}: b kept its queue cell"
        );
        let held = holding(world.finish(&mut waiter).0);
        assert_eq!(held.stats.conflicts, 1, "fencing {fencing}");
        let column = held.queue.map(|cell| cell.column);
        assert_eq!(
            column.as_ref(),
            queued.first(),
            "fencing {fencing}: b held in its first place, not enqueued again"
        );
    }
}

#[test]
fn with_a_waiter_ttl_at_the_lease_ttl_waiting_in_the_main_row_takes_no_short_cell_nor_renewal() {
    for fencing in [false, true] {
        let mut world = World::new();
        let config = LockConfig {
            waiter_ttl: LockConfig::default().lease_ttl,
            ..waiting_in_main(fencing).config().clone()
        }
        .validate()
        .unwrap();
        let (mut waiter, sent, _) =
            b_waits_in_main_for(&mut world, &config, Duration::from_secs(6));
        assert_eq!(
            kinds(&sent[..4]),
            ["write queue", "read queue", "write main", "read main"]
        );
        assert!(
            main_write_ttls(&sent)
                .iter()
                .all(|ttl| *ttl == config.ttl().as_secs())
        );
        let last_main_write = sent
            .iter()
            .rposition(|request| is_main_write_with_ttl(request, config.ttl().as_secs()))
            .unwrap();
        assert!(last_main_write > 4, "b rewrote its main cell while waiting");
        let (outcome, sent) = world.finish(&mut waiter);
        assert!(
            !kinds(&sent).contains(&"write main".to_owned()),
            "fencing {fencing}: {:?}",
            kinds(&sent)
        );
        holding(outcome);
    }
}
