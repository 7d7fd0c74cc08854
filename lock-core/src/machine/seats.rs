//! The rules for main-row seats and queue floors: what one locker remembers between its
//! acquisitions so that reads skip the dead cells every acquisition leaves behind
//! (docs/algorithm.md, sections "Seats" and "Queue floors and tombstones").
//!
//! A [`SeatBook`] is a plain value, like the machines: the locker keeps one behind a mutex,
//! and the model checker keeps one per client, so the allocation, reuse and retirement of
//! seats are checked with the acquisitions that use them. Both go through the same calls:
//! [`SeatBook::start`] gives an acquisition its seat (if its algorithm has seats) and its
//! options, and the [`SeatUse`] it returns gives the seat back when the acquisition ends
//! without the lock ([`SeatUse::acquisition_ended`]) or when the holder's release is over
//! ([`SeatUse::release_ended`]), with the queue head, the idle finding and the poll hint
//! its next user needs.
//!
//! * **Allocation.** An acquisition of a lock takes the lowest seat of that lock that no
//!   running acquisition or held lock of this book uses and that is not retired. Seats are
//!   named `<prefix>.<n>`; the prefix must be unique to the book's locker.
//! * **Reuse.** Given back when its cells are deleted (or left to expire), a seat is free at
//!   once. Its next acquisition writes with timestamps above every timestamp the book has
//!   seen used ([`Seat::after`]), so an earlier acquisition's late delete cannot remove the
//!   new cell.
//! * **Retirement.** A seat whose lease was lost may have been force-released, with
//!   tombstones dated up to `lease_ttl + 2 × max_clock_skew` ahead: it stays out of use for
//!   [`ValidConfig::seat_retirement`]. A seat whose acquisition vanished without giving it
//!   back (a task cancelled at shutdown) stays taken for good, since what was last written
//!   in it is unknown.
//! * **Queue floors.** The enqueue time of the queue head an acquisition last saw is where
//!   the next acquisition of the lock starts reading the queue; on a book's first
//!   acquisition of a lock, reads start `cold_lookback` before now.
//! * **The fast path.** With `fast_path` on, an acquisition tries the two-round-trip fast
//!   path (docs/algorithm.md, section "The two-round-trip fast path") when the lock's previous acquisition in this book
//!   found it idle, or the book remembers no acquisition of the lock, and no other
//!   acquisition of the lock in this book is running.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::column::{ColumnName, QueueColumn};
use crate::config::{Algorithm, ValidConfig};
use crate::id::LockId;
use crate::time::{MonotonicTime, Now, Timestamp};

use super::{Acquire, AcquireOptions, AnyAcquire, Holding, PollHint, Seat};

/// How many locks without a running acquisition a book remembers the queue floor of; past
/// that, the idle ones are forgotten when a new lock comes.
pub const IDLE_LOCKS_REMEMBERED: usize = 4096;

/// One locker's seats and queue floors, by lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeatBook {
    prefix: String,
    retirement: Duration,
    fast_path: bool,
    /// Whether the configured algorithm's acquisitions take seats ([`SeatBook::takes_seats`]).
    seated: bool,
    /// Where a first acquisition's queue reads start: this long before it.
    cold_lookback: Duration,
    locks: BTreeMap<LockId, LockSeats>,
    /// At least every write timestamp any finished acquisition or lease of this book used.
    high_water: Timestamp,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct LockSeats {
    taken: BTreeSet<u32>,
    /// Seats not to be used before the instant given.
    retired: BTreeMap<u32, MonotonicTime>,
    queue_floor: Option<Timestamp>,
    /// Whether the lock's last acquisition given back found it idle.
    found_idle: bool,
    /// What the lock's last release left to time the next acquisition's polls.
    poll_hint: Option<PollHint>,
    /// The time between the lock's acquisitions its last acquisition measured.
    lock_interval: Option<Duration>,
}

impl LockSeats {
    fn idle(&self, now: MonotonicTime) -> bool {
        self.taken.is_empty() && self.retired.values().all(|until| *until <= now)
    }
}

/// A seat handed to one acquisition, from its start until its cells are gone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TakenSeat {
    /// The lock.
    pub lock_id: LockId,
    /// The seat's number; its column is `<prefix>.<index>`.
    pub index: u32,
    /// The column and the timestamp floor the acquisition writes with.
    pub seat: Seat,
    /// The enqueue time of the queue head the lock's previous acquisition saw, if any.
    pub queue_floor: Option<Timestamp>,
    /// Whether to try the fast path: it is on, the lock's previous acquisition found it
    /// idle (or the book remembers none), and no other acquisition of the lock in this
    /// book is running.
    pub fast_path: bool,
    /// The lock's last release and hand-off estimate in this book, if any.
    pub poll_hint: Option<PollHint>,
    /// The time between the lock's acquisitions that its last acquisition in this book
    /// measured ([`super::AcquireStats::lock_interval`]), if it measured one.
    pub lock_interval: Option<Duration>,
}

impl TakenSeat {
    /// The acquisition options for this seat. Queue reads start at the head last seen or,
    /// on the book's first acquisition of the lock, `cold_lookback` before `now`, or at a
    /// later head a main cell names ([`AcquireOptions::floor_from_main`]).
    pub fn options(
        &self,
        now: Timestamp,
        cold_lookback: Duration,
        give_up_at: Option<MonotonicTime>,
    ) -> AcquireOptions {
        AcquireOptions {
            give_up_at,
            seat: Some(self.seat.clone()),
            queue_floor: Some(self.queue_floor.unwrap_or(now - cold_lookback)),
            fast_path: self.fast_path,
            poll_hint: self.poll_hint,
            lock_interval: self.lock_interval,
            floor_from_main: self.queue_floor.is_none(),
            wake_hint_listener: None,
        }
    }
}

/// How a seat's last user ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeatReturn {
    /// The highest write timestamp the acquisition, its lease and its release used.
    pub last_timestamp: Timestamp,
    /// The enqueue time of the queue's head as last seen (ours if we held the lock).
    pub queue_head: Option<Timestamp>,
    /// When the lease was found lost, if it was: the seat is then retired.
    pub lost_at: Option<MonotonicTime>,
    /// Whether the acquisition found the lock idle ([`super::AcquireStats::found_idle`]);
    /// false if it did not take the lock.
    pub found_idle: bool,
    /// When the release sent its deletes, the hand-off time the acquisition estimated and
    /// its own turn, if it held and saw owners leave ahead of it or started from a hint.
    pub poll_hint: Option<PollHint>,
    /// The time between the lock's acquisitions the acquisition measured
    /// ([`super::AcquireStats::lock_interval`]), if it measured one.
    pub lock_interval: Option<Duration>,
}

impl SeatReturn {
    /// What an acquisition that ended without the lock hands back: its last timestamp and
    /// the queue head it last saw.
    pub fn without_lock(acquire: &Acquire) -> Self {
        SeatReturn {
            last_timestamp: acquire.last_timestamp(),
            queue_head: acquire.queue_head().map(|column| column.timestamp),
            lost_at: None,
            found_idle: false,
            poll_hint: None,
            lock_interval: acquire.stats().measured_lock_interval(),
        }
    }
}

/// What a held lock's seat hands back when the lock's cells are gone: gathered from the
/// acquisition when it takes the lock ([`SeatEnding::of`]), completed by the release
/// ([`SeatEnding::seat_return`]). The driver's guard and the model's clients both use it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeatEnding {
    /// Our enqueue time: the head of the queue when we took the lock.
    queue_head: Option<Timestamp>,
    /// Whether the acquisition found the lock idle: the next one then tries the fast path.
    found_idle: bool,
    /// What times the next acquisition's polls, if the acquisition estimated a hand-off.
    timing: Option<HandoffTiming>,
    /// The time between the lock's acquisitions the acquisition measured, if it did.
    lock_interval: Option<Duration>,
}

/// The parts of a [`PollHint`] known when the lock is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct HandoffTiming {
    /// The hand-off time the acquisition estimated ([`PollHint::handoff`]).
    handoff: Duration,
    /// How many owners it left to go before this locker's next turn ([`PollHint::ahead`]).
    ahead: u32,
    /// The round trip its queue reads took ([`PollHint::round_trip`]).
    round_trip: Duration,
    /// When its own turn began: its main-cell write, or the moment the lock was ours if it
    /// waited in the main row ([`PollHint::turn`] runs from here to the release).
    turn_began_at: MonotonicTime,
}

impl SeatEnding {
    /// What `holding` will hand back.
    pub fn of(holding: &Holding) -> Self {
        let stats = &holding.stats;
        SeatEnding {
            queue_head: holding
                .queue
                .as_ref()
                .and_then(|cell| QueueColumn::decode_timestamp(cell.column.as_str()).ok()),
            found_idle: stats.found_idle(),
            lock_interval: stats.measured_lock_interval(),
            timing: (!stats.handoff_estimate.is_zero()).then_some(HandoffTiming {
                handoff: stats.handoff_estimate,
                ahead: stats.ahead_at_return,
                round_trip: stats.round_trip,
                turn_began_at: if stats.main_row_waits == 0 {
                    holding.main.written_at
                } else {
                    holding.acquired_at
                },
            }),
        }
    }

    /// The same without what only times the next acquisition's polls: its seat return then
    /// carries no [`PollHint`]. The model checker's clients leave hints out, so that their
    /// pauses stay the ones the checks name; a hint never decides who holds the lock.
    #[doc(hidden)]
    pub fn without_poll_hint(self) -> Self {
        SeatEnding {
            timing: None,
            ..self
        }
    }

    /// The seat's return once the release that began at `released_at` is over (its
    /// deletes done or failed), `last_timestamp` being the release's; `lost_at` is when the
    /// lease was found lost, if it was (the seat is then retired, and leaves no hint).
    pub fn seat_return(
        &self,
        released_at: MonotonicTime,
        last_timestamp: Timestamp,
        lost_at: Option<MonotonicTime>,
    ) -> SeatReturn {
        SeatReturn {
            last_timestamp,
            queue_head: self.queue_head,
            lost_at,
            found_idle: self.found_idle,
            lock_interval: self.lock_interval,
            poll_hint: self
                .timing
                .filter(|_| lost_at.is_none())
                .map(|timing| PollHint {
                    departed_at: released_at,
                    handoff: timing.handoff,
                    turn: released_at.saturating_duration_since(timing.turn_began_at),
                    ahead: timing.ahead,
                    round_trip: timing.round_trip,
                }),
        }
    }
}

/// One acquisition's seat, from its start ([`SeatBook::start`]) until its cells are gone:
/// the seat taken, if the algorithm has seats, and once the lock is held, what the seat
/// hands back after the release ([`SeatEnding`]). The driver's locker and guard and the
/// model checker's clients keep one per acquisition and make the same calls on it.
///
/// Dropped before its seat is given back (a task cancelled at shutdown), the seat stays
/// taken for good: what was last written in it is unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SeatUse {
    taken: Option<TakenSeat>,
    ending: Option<SeatEnding>,
}

impl SeatUse {
    /// The acquisition `machine` has ended, holding the lock as `holding` if it took it.
    /// Without the lock, the seat goes back to `book` at once with the acquisition's last
    /// timestamp and the queue head it saw ([`SeatReturn::without_lock`]); with it, the
    /// seat stays taken until [`SeatUse::release_ended`], and what it will hand back is
    /// gathered now ([`SeatEnding::of`]).
    pub fn acquisition_ended(
        &mut self,
        book: &mut SeatBook,
        machine: &AnyAcquire,
        holding: Option<&Holding>,
    ) {
        match holding {
            Some(holding) => self.ending = Some(SeatEnding::of(holding)),
            None => {
                if let (Some(taken), Some(acquire)) = (self.taken.take(), machine.as_queue()) {
                    book.give_back(&taken, &SeatReturn::without_lock(acquire));
                }
            }
        }
    }

    /// Leaves out what only times the next acquisition's polls
    /// ([`SeatEnding::without_poll_hint`]): the model checker's clients call it once they
    /// hold.
    #[doc(hidden)]
    pub fn without_poll_hint(&mut self) {
        self.ending = self.ending.take().map(SeatEnding::without_poll_hint);
    }

    /// The holder's release that began at `released_at` is over (its deletes done or
    /// failed), `last_timestamp` being the release's: gives the seat back to `book`
    /// ([`SeatEnding::seat_return`]), retired if the lease was found lost at `lost_at`.
    pub fn release_ended(
        &mut self,
        book: &mut SeatBook,
        released_at: MonotonicTime,
        last_timestamp: Timestamp,
        lost_at: Option<MonotonicTime>,
    ) {
        if let (Some(taken), Some(ending)) = (self.taken.take(), self.ending.take()) {
            book.give_back(
                &taken,
                &ending.seat_return(released_at, last_timestamp, lost_at),
            );
        }
    }

    /// The seat taken, if the algorithm has seats and it is not given back yet.
    pub fn taken(&self) -> Option<&TakenSeat> {
        self.taken.as_ref()
    }
}

impl SeatBook {
    /// An empty book whose seats are named `<prefix>.<n>`, with the algorithm, the
    /// retirement period, the fast-path switch and the cold lookback of `config`.
    pub fn new(prefix: impl Into<String>, config: &ValidConfig) -> Self {
        SeatBook {
            prefix: prefix.into(),
            retirement: config.seat_retirement(),
            fast_path: config.config().fast_path,
            seated: Self::takes_seats(config.config().algorithm),
            cold_lookback: config.config().poll.cold_lookback,
            locks: BTreeMap::new(),
            high_water: Timestamp::ZERO,
        }
    }

    /// Whether acquisitions by `algorithm` take seats and queue floors: only the queue
    /// algorithm's (also in the combined mode) do; the baseline and the bakery name their
    /// cells by owner and ignore both.
    pub fn takes_seats(algorithm: Algorithm) -> bool {
        match algorithm {
            Algorithm::Queue | Algorithm::Combined => true,
            Algorithm::Baseline | Algorithm::Bakery => false,
        }
    }

    /// Starts an acquisition of `lock_id` at `now` that gives up at `give_up_at`, if ever:
    /// takes its seat ([`SeatBook::take`]) if the configured algorithm has seats, and
    /// returns it with the acquisition's options ([`TakenSeat::options`]; without a seat,
    /// only the deadline). Give the seat back through the [`SeatUse`].
    pub fn start(
        &mut self,
        lock_id: &LockId,
        now: Now,
        give_up_at: Option<MonotonicTime>,
    ) -> (SeatUse, AcquireOptions) {
        if !self.seated {
            let options = AcquireOptions {
                give_up_at,
                ..AcquireOptions::default()
            };
            return (SeatUse::default(), options);
        }
        let taken = self.take(lock_id, now.instant);
        let options = taken.options(now.timestamp, self.cold_lookback, give_up_at);
        let seat = SeatUse {
            taken: Some(taken),
            ending: None,
        };
        (seat, options)
    }

    /// The column name of seat `index`.
    pub fn seat_name(&self, index: u32) -> ColumnName {
        ColumnName::new(format!("{}.{index}", self.prefix))
    }

    /// Takes the lowest free seat of `lock_id` at `now`, with the queue floor last seen
    /// there.
    pub fn take(&mut self, lock_id: &LockId, now: MonotonicTime) -> TakenSeat {
        if !self.locks.contains_key(lock_id) && self.locks.len() >= IDLE_LOCKS_REMEMBERED {
            self.locks.retain(|_, seats| !seats.idle(now));
        }
        let after = self.high_water;
        // A lock the book knows nothing of is taken to be idle: most of a service's many
        // locks are, and an unseen lock's only alternative is the four-round-trip path.
        let seats = self
            .locks
            .entry(lock_id.clone())
            .or_insert_with(|| LockSeats {
                found_idle: true,
                ..LockSeats::default()
            });
        seats.retired.retain(|_, until| *until > now);
        let index = (0..)
            .find(|index| !seats.taken.contains(index) && !seats.retired.contains_key(index))
            .unwrap_or(u32::MAX);
        let fast_path = self.fast_path && seats.found_idle && seats.taken.is_empty();
        seats.taken.insert(index);
        let queue_floor = seats.queue_floor;
        let poll_hint = seats.poll_hint;
        let lock_interval = seats.lock_interval;
        TakenSeat {
            lock_id: lock_id.clone(),
            index,
            seat: Seat {
                column: self.seat_name(index),
                after,
            },
            queue_floor,
            fast_path,
            poll_hint,
            lock_interval,
        }
    }

    /// Gives `taken` back, remembering the queue head and the timestamps used, and
    /// retiring the seat if its lease was lost.
    pub fn give_back(&mut self, taken: &TakenSeat, ended: &SeatReturn) {
        self.high_water = self.high_water.max(ended.last_timestamp);
        let seats = self.locks.entry(taken.lock_id.clone()).or_default();
        seats.taken.remove(&taken.index);
        if let Some(lost_at) = ended.lost_at {
            seats.retired.insert(taken.index, lost_at + self.retirement);
        }
        if ended.queue_head.is_some() {
            seats.queue_floor = ended.queue_head;
        }
        seats.found_idle = ended.found_idle;
        seats.poll_hint = ended.poll_hint;
        seats.lock_interval = ended.lock_interval;
    }

    /// How many locks the book remembers.
    #[doc(hidden)]
    pub fn locks_remembered(&self) -> usize {
        self.locks.len()
    }

    /// Whether the book remembers `lock_id`.
    #[doc(hidden)]
    pub fn remembers(&self, lock_id: &LockId) -> bool {
        self.locks.contains_key(lock_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BakeryConfig, LockConfig};

    fn lock() -> LockId {
        LockId::new("l").unwrap()
    }

    fn book() -> SeatBook {
        SeatBook::new("p", &LockConfig::default().validate().unwrap())
    }

    fn column(micros: u64) -> Timestamp {
        Timestamp::from_micros(micros)
    }

    fn ended(last: u64, head: Option<Timestamp>) -> SeatReturn {
        SeatReturn {
            last_timestamp: Timestamp::from_micros(last),
            queue_head: head,
            lost_at: None,
            found_idle: false,
            poll_hint: None,
            lock_interval: None,
        }
    }

    #[test]
    fn concurrent_acquisitions_get_different_seats_and_seats_are_reused() {
        let mut book = book();
        let now = MonotonicTime::from_micros(0);
        let first = book.take(&lock(), now);
        let second = book.take(&lock(), now);
        assert_eq!(first.seat.column.as_str(), "p.0");
        assert_eq!(second.seat.column.as_str(), "p.1");
        assert_eq!(first.seat.after, Timestamp::ZERO);
        book.give_back(&first, &ended(50, Some(column(7))));
        let third = book.take(&lock(), now);
        assert_eq!(third.seat.column.as_str(), "p.0");
        assert_eq!(third.seat.after, Timestamp::from_micros(50));
        assert_eq!(third.queue_floor, Some(column(7)));
        let other_lock = book.take(&LockId::new("m").unwrap(), now);
        assert_eq!(other_lock.seat.column.as_str(), "p.0");
        assert_eq!(other_lock.queue_floor, None);
        // A lower timestamp given back later never lowers the floor of later seats.
        book.give_back(&second, &ended(10, None));
        assert_eq!(book.take(&lock(), now).seat.after, column(50));
    }

    #[test]
    fn the_options_start_queue_reads_at_the_floor_or_the_cold_lookback() {
        let mut book = book();
        let now = MonotonicTime::from_micros(0);
        let lookback = Duration::from_secs(1);
        let cold = book.take(&lock(), now);
        let options = cold.options(column(5_000_000), lookback, None);
        assert_eq!(options.queue_floor, Some(column(4_000_000)));
        assert_eq!(options.seat, Some(cold.seat.clone()));
        book.give_back(&cold, &ended(1, Some(column(3))));
        let warm = book.take(&lock(), now);
        let give_up = Some(now + lookback);
        let options = warm.options(column(5_000_000), lookback, give_up);
        assert_eq!(options.queue_floor, Some(column(3)));
        assert_eq!(options.give_up_at, give_up);
    }

    #[test]
    fn a_book_starts_only_the_queue_algorithm_s_acquisitions_with_a_seat() {
        let now = Now::new(MonotonicTime::from_micros(0), column(5_000_000));
        let give_up_at = Some(MonotonicTime::from_micros(9));
        for algorithm in [Algorithm::Baseline, Algorithm::Bakery] {
            assert!(!SeatBook::takes_seats(algorithm));
            let config = LockConfig {
                algorithm,
                fencing: false,
                bakery: BakeryConfig {
                    max_clients: 2,
                    client_id: 1,
                    lease: true,
                },
                ..LockConfig::default()
            };
            let mut book = SeatBook::new("p", &config.validate().unwrap());
            let (seat, options) = book.start(&lock(), now, give_up_at);
            assert_eq!(seat, SeatUse::default());
            assert_eq!(
                options,
                AcquireOptions {
                    give_up_at,
                    ..AcquireOptions::default()
                }
            );
            assert!(!book.remembers(&lock()), "{algorithm:?} took a seat");
        }
        let mut book = book();
        let (seat, options) = book.start(&lock(), now, give_up_at);
        let taken = seat.taken().unwrap();
        assert_eq!(taken.seat.column.as_str(), "p.0");
        let lookback = LockConfig::default().poll.cold_lookback;
        assert_eq!(options, taken.options(now.timestamp, lookback, give_up_at));
        assert_eq!(options.queue_floor, Some(now.timestamp - lookback));
        assert!(options.floor_from_main && options.fast_path);
        // Not given back yet: the next acquisition of the lock takes the next seat.
        let (second, options) = book.start(&lock(), now, None);
        assert_eq!(second.taken().unwrap().seat.column.as_str(), "p.1");
        assert!(
            !options.fast_path,
            "another acquisition of the lock is running"
        );
    }

    #[test]
    fn a_lost_seat_is_retired_for_a_while_and_one_never_given_back_stays_taken() {
        let config = LockConfig::default().validate().unwrap();
        let retirement = config.seat_retirement();
        let mut book = book();
        let now = MonotonicTime::from_micros(0);
        let lost = book.take(&lock(), now);
        book.give_back(
            &lost,
            &SeatReturn {
                lost_at: Some(now),
                ..ended(1, None)
            },
        );
        let during = book.take(&lock(), now + retirement - Duration::from_micros(1));
        assert_eq!(during.seat.column.as_str(), "p.1");
        let after = book.take(&lock(), now + retirement);
        assert_eq!(after.seat.column.as_str(), "p.0");
        // `during` is never given back: its seat stays taken.
        let next = book.take(&lock(), now + Duration::from_secs(3600));
        assert_eq!(next.seat.column.as_str(), "p.2");
    }

    #[test]
    fn idle_locks_are_forgotten_only_past_the_limit() {
        let mut book = book();
        let now = MonotonicTime::from_micros(0);
        for n in 0..IDLE_LOCKS_REMEMBERED {
            let id = LockId::new(format!("lock-{n}")).unwrap();
            let taken = book.take(&id, now);
            book.give_back(&taken, &ended(1, Some(column(1))));
        }
        let remembered = LockId::new("lock-0").unwrap();
        let held = book.take(&remembered, now);
        assert!(held.queue_floor.is_some());
        assert_eq!(book.locks_remembered(), IDLE_LOCKS_REMEMBERED);
        // One more lock: the idle ones are forgotten, "lock-0" (its seat taken) is kept.
        book.take(&LockId::new("new").unwrap(), now);
        assert_eq!(book.locks_remembered(), 2);
        assert!(book.remembers(&remembered));
        assert!(!book.remembers(&LockId::new("lock-1").unwrap()));
    }

    #[test]
    fn the_last_release_s_poll_hint_and_idle_finding_reach_the_next_acquisition() {
        let mut book = book();
        let now = MonotonicTime::from_micros(0);
        let first = book.take(&lock(), now);
        assert!(
            first.fast_path,
            "a lock nothing is known of is taken to be idle"
        );
        assert_eq!(first.poll_hint, None);
        // One that was found busy is not.
        book.give_back(&first, &ended(1, None));
        let busy = book.take(&lock(), now);
        assert!(!busy.fast_path, "the last acquisition found the lock busy");
        let hint = PollHint {
            departed_at: MonotonicTime::from_micros(7),
            handoff: Duration::from_millis(4),
            turn: Duration::from_millis(2),
            ahead: 0,
            round_trip: Duration::from_millis(1),
        };
        book.give_back(
            &busy,
            &SeatReturn {
                found_idle: true,
                poll_hint: Some(hint),
                ..ended(1, None)
            },
        );
        let second = book.take(&lock(), now);
        assert!(second.fast_path);
        assert_eq!(second.poll_hint, Some(hint));
        let options = second.options(Timestamp::from_micros(9), Duration::ZERO, None);
        assert!(options.fast_path);
        assert_eq!(options.poll_hint, Some(hint));
        // While `second` runs, another acquisition of the lock in this book does not try
        // the fast path.
        assert!(!book.take(&lock(), now).fast_path);
    }
}
