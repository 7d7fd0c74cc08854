//! A locker's [`SeatBook`] shared by its acquisitions and guards, and the ticket that gives a
//! seat back however its holder ends. The rules themselves live in
//! [`crate::machine::SeatBook`], where the model checks them.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::config::ValidConfig;
use crate::id::LockId;
use crate::machine::{AcquireOptions, SeatBook, SeatReturn, TakenSeat};
use crate::time::{MonotonicTime, Timestamp};

/// A locker's seats and queue floors; cheap to clone, shared by its acquisitions and guards.
#[derive(Clone, Debug)]
pub(crate) struct Seating {
    book: Arc<Mutex<SeatBook>>,
}

impl Seating {
    /// Seats named `<prefix>.<n>`; the prefix must be unique to this locker.
    pub(crate) fn new(prefix: String, config: &ValidConfig) -> Self {
        Seating {
            book: Arc::new(Mutex::new(SeatBook::new(prefix, config))),
        }
    }

    fn book(&self) -> MutexGuard<'_, SeatBook> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lowest free seat of `lock_id`, with the queue floor last seen there.
    pub(crate) fn take(&self, lock_id: &LockId, now: MonotonicTime) -> SeatTicket {
        let taken = self.book().take(lock_id, now);
        SeatTicket {
            seating: self.clone(),
            taken,
        }
    }
}

/// One acquisition's seat, from its start until its cells are gone; give it back with
/// [`SeatTicket::give_back`]. Dropped without that (a task cancelled at shutdown), the seat
/// stays taken for good: what was last written in it is unknown.
#[derive(Debug)]
pub(crate) struct SeatTicket {
    seating: Seating,
    taken: TakenSeat,
}

impl SeatTicket {
    /// The acquisition options for this seat ([`TakenSeat::options`]).
    pub(crate) fn options(
        &self,
        now: Timestamp,
        cold_lookback: Duration,
        give_up_at: Option<MonotonicTime>,
    ) -> AcquireOptions {
        self.taken.options(now, cold_lookback, give_up_at)
    }

    /// Gives the seat back ([`SeatBook::give_back`]).
    pub(crate) fn give_back(self, ended: SeatReturn) {
        self.seating.book().give_back(&self.taken, &ended);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LockConfig;

    #[test]
    fn a_ticket_dropped_without_giving_back_keeps_its_seat_taken() {
        let config = LockConfig::default().validate().unwrap();
        let seating = Seating::new("p".into(), &config);
        let lock = LockId::new("l").unwrap();
        let now = MonotonicTime::from_micros(0);
        drop(seating.take(&lock, now));
        let returned = seating.take(&lock, now);
        assert_eq!(returned.taken.seat.column.as_str(), "p.1");
        returned.give_back(SeatReturn {
            last_timestamp: Timestamp::from_micros(9),
            queue_head: None,
            lost_at: None,
            found_idle: false,
            poll_hint: None,
        });
        let later = seating.take(&lock, now + Duration::from_secs(86_400));
        assert_eq!(later.taken.seat.column.as_str(), "p.1");
        assert_eq!(later.taken.seat.after, Timestamp::from_micros(9));
    }
}
