//! Seats and queue floors: what a locker remembers between acquisitions so that reads skip
//! the dead cells every acquisition leaves behind.
//!
//! See [`crate::machine::Seat`] and [`crate::machine::AcquireOptions::queue_floor`] for why.
//! A locker names its seats `<seat prefix>.<n>`; an acquisition of a lock takes the lowest
//! seat of that lock that no running acquisition or held lock of this locker uses, and gives
//! it back when its cells are deleted (or left to expire). A seat whose lease was lost is
//! retired until a forced release's future-dated tombstone on it can no longer matter.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::column::ColumnName;
use crate::id::LockId;
use crate::machine::{AcquireOptions, Seat};
use crate::time::{Instant, Timestamp};

/// How many locks without a running acquisition a locker remembers the queue floor of.
const IDLE_LOCKS_REMEMBERED: usize = 4096;

/// How many seat names (the same for every lock) a locker keeps built.
const SEAT_NAMES_KEPT: usize = 64;

/// A locker's seats and queue floors; cheap to clone, shared by its acquisitions and guards.
#[derive(Clone, Debug)]
pub(crate) struct Seating {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    prefix: String,
    /// `<prefix>.<n>` for the lowest seat numbers, built once.
    seat_names: Vec<ColumnName>,
    /// By lock id; found by key on every acquisition, never walked in order.
    locks: HashMap<LockId, LockSeats>,
    /// At least every write timestamp any finished acquisition or lease of this locker used.
    high_water: Timestamp,
}

#[derive(Debug, Default)]
struct LockSeats {
    taken: BTreeSet<u32>,
    /// Seats not to be used before the instant given.
    retired: BTreeMap<u32, Instant>,
    queue_floor: Option<Timestamp>,
}

impl LockSeats {
    fn idle(&self, now: Instant) -> bool {
        self.taken.is_empty() && self.retired.values().all(|until| *until <= now)
    }
}

impl Seating {
    /// Seats named `<prefix>.<n>`; the prefix must be unique to this locker.
    pub(crate) fn new(prefix: String) -> Self {
        Seating {
            inner: Arc::new(Mutex::new(Inner {
                prefix,
                seat_names: Vec::new(),
                locks: HashMap::new(),
                high_water: Timestamp::ZERO,
            })),
        }
    }

    /// Takes the lowest free seat of `lock_id`, with the queue floor last seen there.
    pub(crate) fn take(&self, lock_id: &LockId, now: Instant) -> SeatTicket {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if !inner.locks.contains_key(lock_id) && inner.locks.len() >= IDLE_LOCKS_REMEMBERED {
            inner.locks.retain(|_, seats| !seats.idle(now));
        }
        let after = inner.high_water;
        let seats = inner.locks.entry(lock_id.clone()).or_default();
        seats.retired.retain(|_, until| *until > now);
        let index = (0..)
            .find(|index| !seats.taken.contains(index) && !seats.retired.contains_key(index))
            .unwrap_or(u32::MAX);
        seats.taken.insert(index);
        let queue_floor = seats.queue_floor;
        SeatTicket {
            seating: self.clone(),
            lock_id: lock_id.clone(),
            index,
            seat: Seat {
                column: inner.seat_name(index),
                after,
            },
            queue_floor,
            returned: false,
        }
    }
}

impl Inner {
    /// The column name of seat `index`.
    fn seat_name(&mut self, index: u32) -> ColumnName {
        let slot = usize::try_from(index).unwrap_or(usize::MAX);
        while self.seat_names.len() <= slot && self.seat_names.len() < SEAT_NAMES_KEPT {
            let next = self.seat_names.len();
            let name = ColumnName::new(format!("{}.{next}", self.prefix));
            self.seat_names.push(name);
        }
        match self.seat_names.get(slot) {
            Some(name) => name.clone(),
            None => ColumnName::new(format!("{}.{index}", self.prefix)),
        }
    }
}

/// One acquisition's seat, from its start until its cells are gone; give it back with
/// [`SeatTicket::give_back`]. Dropped without that (a task cancelled at shutdown), the seat
/// is retired for good, since what was last written in it is unknown.
#[derive(Debug)]
pub(crate) struct SeatTicket {
    seating: Seating,
    lock_id: LockId,
    index: u32,
    seat: Seat,
    queue_floor: Option<Timestamp>,
    returned: bool,
}

/// How a seat's last user ended.
#[derive(Clone, Debug)]
pub(crate) struct SeatReturn {
    /// The highest write timestamp the acquisition, its lease and its release used.
    pub(crate) last_timestamp: Timestamp,
    /// The enqueue time of the queue's head as last seen (ours if we held the lock).
    pub(crate) queue_head: Option<Timestamp>,
    /// If the lease was lost (perhaps to a forced release, whose tombstones are dated up to
    /// this long into the future), how long to keep the seat out of use.
    pub(crate) retire_for: Option<(Instant, Duration)>,
}

impl SeatTicket {
    /// The acquisition options for this seat. Queue reads start at the head last seen or,
    /// on this locker's first acquisition of the lock, `cold_lookback` before `now`.
    pub(crate) fn options(
        &self,
        now: Timestamp,
        cold_lookback: Duration,
        give_up_at: Option<Instant>,
    ) -> AcquireOptions {
        AcquireOptions {
            give_up_at,
            seat: Some(self.seat.clone()),
            queue_floor: Some(self.queue_floor.unwrap_or(now - cold_lookback)),
        }
    }

    /// Gives the seat back, remembering the queue head and the timestamps used.
    pub(crate) fn give_back(mut self, ended: SeatReturn) {
        self.returned = true;
        let mut inner = self
            .seating
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        inner.high_water = inner.high_water.max(ended.last_timestamp);
        let seats = inner.locks.entry(self.lock_id.clone()).or_default();
        seats.taken.remove(&self.index);
        if let Some((now, retire_for)) = ended.retire_for {
            seats.retired.insert(self.index, now + retire_for);
        }
        if ended.queue_head.is_some() {
            seats.queue_floor = ended.queue_head;
        }
    }
}

impl Drop for SeatTicket {
    fn drop(&mut self) {
        if self.returned {
            return;
        }
        let mut inner = self
            .seating
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(seats) = inner.locks.get_mut(&self.lock_id) {
            seats.retired.insert(self.index, Instant::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> LockId {
        LockId::new("l").unwrap()
    }

    fn column(micros: u64) -> Timestamp {
        Timestamp::from_micros(micros)
    }

    fn ended(last: u64, head: Option<Timestamp>) -> SeatReturn {
        SeatReturn {
            last_timestamp: Timestamp::from_micros(last),
            queue_head: head,
            retire_for: None,
        }
    }

    #[test]
    fn concurrent_acquisitions_get_different_seats_and_seats_are_reused() {
        let seating = Seating::new("p".into());
        let now = Instant::from_micros(0);
        let first = seating.take(&lock(), now);
        let second = seating.take(&lock(), now);
        assert_eq!(first.seat.column.as_str(), "p.0");
        assert_eq!(second.seat.column.as_str(), "p.1");
        first.give_back(ended(50, Some(column(7))));
        let third = seating.take(&lock(), now);
        assert_eq!(third.seat.column.as_str(), "p.0");
        assert_eq!(third.seat.after, Timestamp::from_micros(50));
        assert_eq!(third.queue_floor, Some(column(7)));
        let other_lock = seating.take(&LockId::new("m").unwrap(), now);
        assert_eq!(other_lock.seat.column.as_str(), "p.0");
        assert_eq!(other_lock.queue_floor, None);
        drop((second, third, other_lock));
    }

    #[test]
    fn seats_past_the_kept_names_are_named_alike() {
        let seating = Seating::new("p".into());
        let now = Instant::from_micros(0);
        let tickets: Vec<SeatTicket> = (0..SEAT_NAMES_KEPT + 2)
            .map(|_| seating.take(&lock(), now))
            .collect();
        for (index, ticket) in tickets.iter().enumerate() {
            assert_eq!(ticket.seat.column.as_str(), format!("p.{index}"));
        }
        for ticket in tickets {
            ticket.give_back(ended(1, None));
        }
    }

    #[test]
    fn a_lost_seat_is_retired_for_a_while_and_an_abandoned_one_for_good() {
        let seating = Seating::new("p".into());
        let now = Instant::from_micros(0);
        let lost = seating.take(&lock(), now);
        lost.give_back(SeatReturn {
            retire_for: Some((now, Duration::from_secs(10))),
            ..ended(1, None)
        });
        let during = seating.take(&lock(), now + Duration::from_secs(9));
        assert_eq!(during.seat.column.as_str(), "p.1");
        let after = seating.take(&lock(), now + Duration::from_secs(10));
        assert_eq!(after.seat.column.as_str(), "p.0");
        drop(during);
        let next = seating.take(&lock(), now + Duration::from_secs(3600));
        assert_eq!(next.seat.column.as_str(), "p.2");
        drop((after, next));
    }

    #[test]
    fn idle_locks_are_forgotten_only_past_the_limit() {
        let seating = Seating::new("p".into());
        let now = Instant::from_micros(0);
        for n in 0..IDLE_LOCKS_REMEMBERED {
            let id = LockId::new(format!("lock-{n}")).unwrap();
            seating.take(&id, now).give_back(ended(1, Some(column(1))));
        }
        let remembered = LockId::new("lock-0").unwrap();
        assert!(seating.take(&remembered, now).queue_floor.is_some());
        assert_eq!(
            seating.inner.lock().unwrap().locks.len(),
            IDLE_LOCKS_REMEMBERED
        );
        // One more lock: the idle ones are forgotten, the retired "lock-0" is kept.
        drop(seating.take(&LockId::new("new").unwrap(), now));
        let inner = seating.inner.lock().unwrap();
        let mut kept: Vec<&str> = inner.locks.keys().map(LockId::as_str).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["lock-0", "new"]);
    }
}
