//! What an acquisition starts from beyond the required settings: its seat in the main
//! row, and what the locker remembers of the lock.

use super::*;

/// The main-row column an acquisition writes under: the thesis's `threadId`.
///
/// In the thesis a thread's id names its main cell, and a thread takes one lock at a time,
/// so a lock's main row only ever holds as many columns as there are threads. Our owner ids
/// are fresh per acquisition; naming main cells by them would leave one more tombstone in
/// the main row with every acquisition, and every main-row read would walk them all (on
/// Cassandra, until compaction after `gc_grace_seconds`). A seat restores the thesis's
/// bound: the locker hands each acquisition a seat that no other acquisition of the same lock
/// uses at the same time, and reuses it afterwards, so a lock's main row has at most one
/// column per seat ever used. The cell's *value* is the acquisition's owner id, and a main
/// cell counts as ours only if both its column and its value match, so a cell left by an
/// earlier acquisition in the same seat is never mistaken for ours.
///
/// `after` must be at least every write timestamp an earlier acquisition used in this seat:
/// this acquisition's timestamps start above it, so that a late delete of the earlier
/// acquisition (a tombstone wins a timestamp tie) can never remove this one's cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Seat {
    /// The column name.
    pub column: ColumnName,
    /// Every timestamp this acquisition writes is above this one.
    pub after: Timestamp,
}

/// Settings of an acquisition beyond the required ones; `Default` gives none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AcquireOptions {
    /// When to stop trying, clean up and report [`AcquireOutcome::TimedOut`].
    pub give_up_at: Option<MonotonicTime>,
    /// The main-row column to use; without one, the owner id names the main cell (a fresh
    /// column per acquisition, as a model checker wants, but see [`Seat`]).
    pub seat: Option<Seat>,
    /// Where queue reads start: the enqueue time of a queue head seen earlier (the locker
    /// passes the one its previous acquisition of the lock saw, [`Acquire::queue_head`]),
    /// or a time before which no live queue cell is expected. Reads start
    /// [`Acquire::floor_margin`] before it. Without one, the first queue read starts at the
    /// beginning of the row. Later reads start the margin before the head the last read
    /// saw, if that is later. See [`Acquire`] on tombstones.
    pub queue_floor: Option<Timestamp>,
    /// Try the two-round-trip fast path first (docs/algorithm.md, section "The two-round-trip fast path"): write the
    /// queue and main cells together, then read both rows together, and hold if the queue
    /// shows our cell first and the main row shows only ours; on anything else delete the
    /// main cell and go on as without it. Used only by a mandatory acquisition outside the
    /// combined mode; the locker sets it when its previous acquisition of the lock found the
    /// lock idle.
    pub fast_path: bool,
    /// When this locker last released the lock and the hand-off time it then estimated,
    /// to time the first pause (docs/algorithm.md, section "When a waiter polls"). The locker passes the
    /// one its previous acquisition of the lock left.
    pub poll_hint: Option<PollHint>,
    /// The time between the lock's acquisitions the locker's previous acquisition of it
    /// measured ([`AcquireStats::lock_interval`]): with the adaptive margin
    /// ([`crate::PollConfig::margin_acquisitions`]) the first queue read starts that many
    /// of them before the floor. The locker passes the one its previous acquisition left.
    pub lock_interval: Option<Duration>,
    /// Read the main row with the first queue write, and start queue reads from the latest
    /// queue head a main cell names ([`MainCellValue::Head`]) less the margin, if that is
    /// later than `queue_floor` (docs/algorithm.md, section "Queue floors and tombstones"). The locker sets it on its
    /// first acquisition of a lock, whose `queue_floor` is `cold_lookback` back, so that the
    /// first read need not step over that long of a busy lock's tombstones. Used only by a
    /// mandatory acquisition; costs one read, sent with the queue write.
    pub floor_from_main: bool,
    /// The address of this locker's wake-up hint listener (docs/algorithm.md, section
    /// "Wake-up hints"), written as the queue cell's value so that the owners ahead can
    /// hint us. With one, the acquisition records the owners queued behind it at its turn
    /// ([`Holding::successors`]), sends its next read at once on a hint
    /// ([`Machine::handle_wake_hint`]), and, while [`crate::hint::RELAXED_PLACES`] or more
    /// places back, polls no more often than [`crate::hint::FALLBACK_POLL`]: the owners
    /// ahead hint it as its turn nears.
    pub wake_hint_listener: Option<SocketAddr>,
}
