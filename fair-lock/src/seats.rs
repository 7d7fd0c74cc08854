//! A locker's [`SeatBook`] shared by its acquisitions and guards, and the ticket that gives a
//! seat back however its holder ends. The rules themselves live in
//! [`lock_core::machine::SeatBook`] and [`lock_core::machine::SeatUse`], where the model checks them.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lock_core::config::ValidConfig;
use lock_core::id::LockId;
use lock_core::machine::{AcquireOptions, AnyAcquire, Holding, SeatBook, SeatUse};
use lock_core::time::{MonotonicTime, Now, Timestamp};

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

    /// Starts an acquisition of `lock_id`: its seat, if the algorithm has seats, and its
    /// options ([`SeatBook::start`]).
    pub(crate) fn start(
        &self,
        lock_id: &LockId,
        now: Now,
        give_up_at: Option<MonotonicTime>,
    ) -> (SeatTicket, AcquireOptions) {
        let (seat, options) = self.book().start(lock_id, now, give_up_at);
        let ticket = SeatTicket {
            seating: self.clone(),
            seat,
        };
        (ticket, options)
    }
}

/// One acquisition's seat, from its start until its cells are gone. Dropped before its seat
/// is given back (a task cancelled at shutdown), the seat stays taken for good: what was
/// last written in it is unknown.
#[derive(Debug)]
pub(crate) struct SeatTicket {
    seating: Seating,
    seat: SeatUse,
}

impl SeatTicket {
    /// The acquisition `machine` has ended, holding the lock as `holding` if it took it
    /// ([`SeatUse::acquisition_ended`]): without the lock, the seat is given back now.
    pub(crate) fn acquisition_ended(&mut self, machine: &AnyAcquire, holding: Option<&Holding>) {
        self.seat
            .acquisition_ended(&mut self.seating.book(), machine, holding);
    }

    /// The holder's release is over: gives the seat back ([`SeatUse::release_ended`]).
    pub(crate) fn release_ended(
        mut self,
        released_at: MonotonicTime,
        last_timestamp: Timestamp,
        lost_at: Option<MonotonicTime>,
    ) {
        self.seat.release_ended(
            &mut self.seating.book(),
            released_at,
            last_timestamp,
            lost_at,
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use lock_core::config::LockConfig;
    use lock_core::id::OwnerId;
    use lock_core::machine::Mode;

    #[test]
    fn a_ticket_dropped_without_giving_back_keeps_its_seat_taken() {
        let config = LockConfig::default().validate().unwrap();
        let seating = Seating::new("p".into(), &config);
        let lock = LockId::new("l").unwrap();
        let now = Now::new(MonotonicTime::from_micros(0), Timestamp::from_micros(1));
        drop(seating.start(&lock, now, None));
        let (mut returned, _) = seating.start(&lock, now, None);
        let taken = returned.seat.taken().cloned().unwrap();
        assert_eq!(taken.seat.column.as_str(), "p.1");
        // Given back at once by a queue acquisition that ended without the lock.
        let machine = AnyAcquire::new(
            now,
            config.clone(),
            Mode::Soft,
            lock.clone(),
            OwnerId::new("o").unwrap(),
            7,
            AcquireOptions::default(),
        );
        returned.acquisition_ended(&machine, None);
        assert_eq!(returned.seat.taken(), None);
        let later = Now::new(now.instant + Duration::from_secs(86_400), now.timestamp);
        let (next, _) = seating.start(&lock, later, None);
        assert_eq!(next.seat.taken().unwrap().seat.column.as_str(), "p.1");
    }
}
