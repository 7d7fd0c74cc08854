//! The poll policy of a waiter (docs/algorithm.md, section "When a waiter polls"): how long to pause
//! between two reads of the queue, from its place in the queue, the hand-offs it has seen
//! and the round trip its reads take.
//!
//! * The owner next in line sends a read every eighth of the expected hand-off time, or
//!   every round trip if that is longer (then it pauses not at all: one read in flight at
//!   a time), and never more often than every [`MIN_NEXT_IN_LINE_PERIOD`]. Once the holder
//!   has held a hand-off longer than expected, the period grows by a quarter of the
//!   overrun, so a long-held lock costs few reads. The pause is the period less the round
//!   trip, at most `poll.max_interval`: its pace follows the network, not
//!   `poll.min_interval`, so a release is seen within about one round trip on any network.
//! * An owner `k` places back pauses for the time it expects to need to become next in
//!   line, `(k − 1.5)` hand-off estimates (the holder has held for half a hand-off on
//!   average), clamped between one round trip (one read in flight, as next in line; not
//!   `poll.min_interval`, which on loopback is a turn or two) and `poll.max_interval`. It
//!   is not jittered: owners at distinct places already plan pauses a hand-off apart, and
//!   a plan shortened at random only wakes early. (Owners beyond the read's slice, who
//!   all take its length for their place, are: by up to `poll.jitter_percent`.) So a
//!   waiter costs about the same few reads wherever it starts in the queue: waiters far
//!   back cost almost nothing until their turn nears. When that plan is unsure (before
//!   any departure is seen, or while the estimate is above five round trips, more than
//!   the network explains), an owner more than eight places back plans for the first
//!   eight and half of the rest, and looks again about halfway to its turn: a late waker
//!   would leave the lock idle for everyone behind it.
//! * An acquisition whose locker released the same lock less than a hand-off before its
//!   first read (a [`PollHint`]) knows where the queue's rhythm stands: the `k` owners
//!   ahead leave about one hand-off apart after that release, so it sleeps until half a
//!   round trip before the `k`-th should have left, then polls as next in line (this plan,
//!   made before the queue was seen, is always unsure in the sense above). Without a hint
//!   the first pause cannot know how long the holder has held, and wakes early.
//! * If that release left owners to go first ([`PollHint::ahead`]: those queued behind the
//!   locker at its turn, and the owner that held before it unless it had joined again),
//!   the acquisition sends no read on arrival at all: after its queue write it sleeps to
//!   the same plan, and its first read counts the owners gone since the release as
//!   departures (with none gone, the release is the last departure). A first read that
//!   already finds it first cannot tell how long it had been first: the estimate falls
//!   halfway to the time since the release over the owners counted if that is shorter,
//!   and otherwise so that the same plan would wake a round trip earlier, never rising,
//!   so a waiter that woke late does not pass on the estimate that made it late.
//! * The hand-off estimate starts at a first guess: four round trips of the first read
//!   (what an uncontended owner takes from its first queue read to its release: the read,
//!   the main write and read, the deletes), or four `poll.min_interval`s if that is less.
//!   With a hint it starts at the hint's estimate, but at most the larger of the first
//!   guess and the hint's turn plus two round trips: the previous acquisition's own turn
//!   (its main and fence requests and its hold) took that long, and the next owner's read
//!   that sees a release about two round trips more, so hand-offs that long are the
//!   network's and the holders' work, while anything longer may come from owners asleep
//!   at their turn. The first guess alone would keep a network slower than
//!   `poll.min_interval` (a loaded cluster) at an estimate of four intervals for good.
//!   (Too long an estimate makes waiters wake late and leave the lock idle; too short
//!   costs reads, all through a long critical section.) It moves halfway to each
//!   shorter sample and an eighth of the way to each longer one: the time since the last
//!   departure seen, divided by the departures since. (With halves both ways, a hand-off
//!   slowed by an owner asleep at its turn taught the waiters behind to sleep longer, so
//!   that on a fast network they overslept theirs in turn and the lock stayed slow.) The
//!   round trip is a moving average of the queue reads' round trips.

use std::time::Duration;

use crate::column::QueueColumn;
use crate::config::{MIN_NEXT_IN_LINE_PERIOD, ValidConfig};
use crate::time::MonotonicTime;

use super::SplitMix64;
use crate::time::duration_micros;

/// What a locker knows of a lock's hand-offs from its previous acquisition of it: when its
/// release was sent, the hand-off time that acquisition estimated
/// ([`super::AcquireStats::handoff_estimate`]) and how long its own turn took. Given to the
/// next acquisition of the lock ([`super::AcquireOptions::poll_hint`]) to start its
/// hand-off estimate and time its first pause; it only paces polls, never decides who
/// holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PollHint {
    /// When the previous acquisition's release sent its deletes.
    pub departed_at: MonotonicTime,
    /// The hand-off time the previous acquisition estimated.
    pub handoff: Duration,
    /// How long the previous acquisition's own turn took: from its main-cell write to its
    /// release (the main write and read, any fencing requests, and the hold), or from the
    /// moment the lock was its own if it waited in the main row (where that write came
    /// long before). The part of a hand-off the leaving owner takes, measured by the locker
    /// itself, where no owner asleep at its turn can lengthen it.
    pub turn: Duration,
    /// How many owners the previous acquisition left to go before this locker's next turn
    /// ([`super::AcquireStats::ahead_at_return`]): those its read that found it first
    /// showed queued behind it, none of whom could take the lock before its release, and
    /// the owner that held before it if that one had not joined again yet. With one or more,
    /// an acquisition soon after the release skips the queue read on arrival.
    pub ahead: u32,
    /// The round trip the previous acquisition's queue reads took (their moving average).
    pub round_trip: Duration,
}

/// The hand-off estimate of an acquisition's first read, over `round_trip`: a first guess
/// of four round trips (at most four `min_interval`s), or a hint's estimate trusted as far
/// as the locker's own turn explains it, with two round trips for the next owner to see
/// the release (the read that sees it, and about half a read's wait and the delete's way
/// there), and no further: beyond that it was lengthened by owners asleep at their turn,
/// and would make this one sleep through its own.
fn first_estimate(
    hint: Option<PollHint>,
    round_trip: Duration,
    min_interval: Duration,
) -> Duration {
    let guess = round_trip.min(min_interval).saturating_mul(4);
    match hint {
        Some(hint) => hint
            .handoff
            .min(guess.max(hint.turn.saturating_add(round_trip.saturating_mul(2)))),
        None => guess,
    }
}

/// When to read the queue on a hint's plan, with `position` owners ahead and the locker's
/// release `handoff` estimates before the first of them leaves: they leave about one
/// hand-off apart after that release, so half a round trip (a delete lands about half a
/// round trip after it is sent) before the owner ahead should leave that the plan reaches,
/// the `position`-th counted as an unsure plan ([`planned_places`]): the estimate was made
/// before the queue was seen.
fn hinted_turn(
    hint: PollHint,
    handoff: Duration,
    position: usize,
    round_trip: Duration,
) -> Option<MonotonicTime> {
    let places = u32::try_from(planned_places(position, true)).ok()?;
    Some(hint.departed_at + handoff.checked_mul(places)? - round_trip / 2)
}

/// A hand-off estimate longer than this many round trips is set by more than the network:
/// an uncontended hand-off is about four (a queue read, a main write and read, the deletes).
const NETWORK_HANDOFF_ROUND_TRIPS: u32 = 5;

/// How many places ahead a pause plans for in full; beyond them, when the plan is unsure,
/// places count half.
const PLACES_PLANNED_IN_FULL: usize = 8;

/// How many of the `places` hand-offs ahead a pause sleeps through: all of them, or, when
/// the plan is `unsure`, the first [`PLACES_PLANNED_IN_FULL`] and half of the rest, so
/// that a waiter far back looks again about halfway to its turn. Waking early costs one
/// read; waking late leaves the lock idle, and every owner behind waits for the sleeper.
fn planned_places(places: usize, unsure: bool) -> usize {
    if unsure {
        places - places.saturating_sub(PLACES_PLANNED_IN_FULL) / 2
    } else {
        places
    }
}

/// Remembers what a waiter saw, to pace its polls.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PollTracker {
    /// Who was ahead at the previous poll (none before the first).
    ahead: Option<Vec<QueueColumn>>,
    last_departure_at: MonotonicTime,
    handoff_estimate: Duration,
    /// The moving average of the queue reads' round trips (zero before the first).
    round_trip: Duration,
    /// Whether a departure was seen, so that the estimate is a measurement.
    departure_seen: bool,
    /// Queue reads taken in so far.
    reads: u32,
    hint: Option<PollHint>,
    /// How many owners were taken to be ahead when the read on arrival was skipped.
    skipped_arrival: Option<u32>,
}

impl PollTracker {
    /// A tracker that has seen nothing yet; its estimates start at the first read, from
    /// `hint` if there is one.
    pub(crate) fn new(now: MonotonicTime, hint: Option<PollHint>) -> Self {
        PollTracker {
            ahead: None,
            last_departure_at: now,
            handoff_estimate: Duration::ZERO,
            round_trip: Duration::ZERO,
            departure_seen: false,
            reads: 0,
            hint,
            skipped_arrival: None,
        }
    }

    /// The hand-off time estimated from the departures seen, or from the hint if none
    /// were: a waiter that slept straight to its turn on a hint's estimate saw nobody leave,
    /// and passes on what it started from rather than nothing, which would send the next
    /// acquisition back to the first guess.
    pub(crate) fn handoff_estimate(&self) -> Option<Duration> {
        (self.departure_seen
            || (self.hint.is_some() && (self.reads > 0 || self.skipped_arrival.is_some())))
        .then_some(self.handoff_estimate)
    }

    /// Takes in who is ahead now, as read by a request sent at `sent_at`, and updates the
    /// hand-off and round-trip estimates.
    pub(crate) fn observe(
        &mut self,
        now: MonotonicTime,
        sent_at: MonotonicTime,
        ahead: Vec<QueueColumn>,
        min_interval: Duration,
    ) {
        let round_trip = now.saturating_duration_since(sent_at);
        self.reads = self.reads.saturating_add(1);
        let departures = match (&self.ahead, self.skipped_arrival) {
            (None, skipped) => {
                self.round_trip = round_trip;
                self.handoff_estimate = first_estimate(self.hint, round_trip, min_interval);
                // Without a read on arrival, the owners that left since the release the
                // hint tells of are the departures seen, over the time since it; with none, that
                // release is the last departure.
                match (skipped, self.hint) {
                    (Some(ahead_then), Some(hint)) => {
                        self.last_departure_at = hint.departed_at;
                        let ahead_now = u32::try_from(ahead.len()).unwrap_or(u32::MAX);
                        ahead_then.saturating_sub(ahead_now)
                    }
                    _ => 0,
                }
            }
            (Some(before), _) => {
                let departures = before
                    .iter()
                    .filter(|column| !ahead.contains(column))
                    .count();
                u32::try_from(departures).unwrap_or(u32::MAX)
            }
        };
        if self.reads > 1 {
            self.observe_round_trip(now, sent_at);
        }
        if departures > 0 {
            let sample = now.saturating_duration_since(self.last_departure_at) / departures;
            // Down halfway, up an eighth of the way: a hand-off slowed by an owner asleep
            // at its turn would otherwise teach the waiters behind to sleep longer, and
            // they would oversleep theirs in turn.
            self.handoff_estimate = if sample < self.handoff_estimate {
                self.handoff_estimate.saturating_add(sample) / 2
            } else {
                self.handoff_estimate
                    .saturating_mul(7)
                    .saturating_add(sample)
                    / 8
            };
            self.last_departure_at = now;
            self.departure_seen = true;
        }
        self.ahead = Some(ahead);
    }

    /// Takes in a read, answered at `now`, that found us first. If it is the first read,
    /// sent after skipping the one on arrival, every owner the hint counted has left since
    /// the hint's release: their mean hand-off was at most the time since over their
    /// number (at most: we may have been first some time before this read, and cannot
    /// tell how long). So the estimate falls halfway to that if it is shorter, and
    /// otherwise by a round trip over their number, so that the same plan would wake a
    /// round trip earlier: a waiter that slept through its turn must not pass on the
    /// estimate that made it late. It never rises here; reads that still see owners ahead
    /// raise it.
    pub(crate) fn observe_first(&mut self, now: MonotonicTime) {
        let (Some(ahead_then), Some(hint), 0) = (self.skipped_arrival, self.hint, self.reads)
        else {
            return;
        };
        if ahead_then == 0 {
            return;
        }
        let sample = now.saturating_duration_since(hint.departed_at) / ahead_then;
        if sample < self.handoff_estimate {
            self.handoff_estimate = self.handoff_estimate.saturating_add(sample) / 2;
        } else {
            let step = self.round_trip / ahead_then;
            self.handoff_estimate = self.handoff_estimate.saturating_sub(step);
        }
    }

    /// Whether the last read showed owners ahead of us.
    pub(crate) fn saw_owners_ahead(&self) -> bool {
        self.ahead.as_ref().is_some_and(|ahead| !ahead.is_empty())
    }

    /// The current hand-off estimate (zero before the first read).
    pub(crate) fn handoff_now(&self) -> Duration {
        self.handoff_estimate
    }

    /// The moving average of the queue reads' round trips (zero before the first).
    pub(crate) fn round_trip(&self) -> Duration {
        self.round_trip
    }

    /// Just enqueued, before the first read: with a hint of a release by this locker less
    /// than a hand-off ago that left owners to go before this turn ([`PollHint::ahead`]),
    /// when to send the first read, skipping the one that would only find our place. The
    /// plan is the one the hinted first pause makes after a read showing that many ahead
    /// ([`hinted_turn`]); the first read then counts the owners gone since the release as
    /// departures ([`Self::observe`]). `None` (read at once) without such a hint, or if the
    /// plan's moment has passed.
    pub(crate) fn skip_arrival_read(
        &mut self,
        now: MonotonicTime,
        min_interval: Duration,
    ) -> Option<MonotonicTime> {
        let hint = self.hint.filter(|hint| hint.ahead > 0 && self.reads == 0)?;
        let handoff = first_estimate(Some(hint), hint.round_trip, min_interval);
        if now.saturating_duration_since(hint.departed_at) >= handoff {
            return None;
        }
        let position = usize::try_from(hint.ahead).ok()?;
        self.skipped_arrival = Some(hint.ahead);
        self.handoff_estimate = handoff;
        self.round_trip = hint.round_trip;
        let wake = hinted_turn(hint, handoff, position, hint.round_trip)?;
        (wake > now).then_some(wake)
    }

    /// Takes in the round trip of a read other than a queue read (a main-row read while
    /// waiting in the main row), answered at `now` and sent at `sent_at`.
    pub(crate) fn observe_round_trip(&mut self, now: MonotonicTime, sent_at: MonotonicTime) {
        let round_trip = now.saturating_duration_since(sent_at);
        self.round_trip = (self.round_trip.saturating_mul(3).saturating_add(round_trip)) / 4;
    }

    /// At the first read, with a hint of a release by this locker less than a hand-off
    /// ago: the pause until the turn the hint's plan gives for `position` owners ahead
    /// ([`hinted_turn`]).
    fn hinted_first_pause(&self, now: MonotonicTime, position: usize) -> Option<Duration> {
        let hint = self
            .hint
            .filter(|_| self.reads == 1 && self.skipped_arrival.is_none())?;
        let handoff = self.handoff_estimate;
        if now.saturating_duration_since(hint.departed_at) >= handoff {
            return None;
        }
        let wake = hinted_turn(hint, handoff, position, self.round_trip)?;
        let pause = wake.saturating_duration_since(now);
        (!pause.is_zero()).then_some(pause)
    }

    /// Whether the hand-off estimate is longer than the network explains, so that a plan
    /// many hand-offs ahead may be far off: then the holders' critical sections, or owners
    /// asleep at their turn, set the pace, and either can change at any time.
    fn handoff_beyond_network(&self) -> bool {
        self.handoff_estimate > self.round_trip.saturating_mul(NETWORK_HANDOFF_ROUND_TRIPS)
    }

    /// The pause of an owner beyond the queue read's slice, which took the slice's length
    /// for its `position`: the pause of that place, shortened at random by up to
    /// `poll.jitter_percent`. Every owner beyond the slice takes the same place and would
    /// plan the same pause; the jitter spreads their reads.
    pub(crate) fn pause_beyond_slice(
        &self,
        now: MonotonicTime,
        position: usize,
        config: &ValidConfig,
        rng: &mut SplitMix64,
    ) -> Duration {
        let poll = &config.config().poll;
        let pause = duration_micros(self.pause(now, position, config));
        let spread = pause / 100 * u64::from(poll.jitter_percent);
        Duration::from_micros(pause - rng.below(spread.saturating_add(1))).max(self.floor(config))
    }

    /// The shortest pause of an owner further back than next in line: a round trip (one
    /// read in flight, as next in line), whatever `poll.min_interval` says. On loopback a
    /// place or two back is a fraction of a millisecond, and a millisecond's sleep there
    /// overslept the turn and left the lock idle.
    fn floor(&self, config: &ValidConfig) -> Duration {
        self.round_trip
            .max(MIN_NEXT_IN_LINE_PERIOD)
            .min(config.config().poll.max_interval)
    }

    /// The pause of an owner `position` places back (docs/algorithm.md, section "When a waiter polls").
    /// Owners whose places are known plan pauses a hand-off apart, so no jitter spreads
    /// them: shortening a plan at random only wakes the owner early.
    pub(crate) fn pause(
        &self,
        now: MonotonicTime,
        position: usize,
        config: &ValidConfig,
    ) -> Duration {
        let poll = &config.config().poll;
        if let Some(wake) = self.hinted_first_pause(now, position) {
            return wake.min(poll.max_interval);
        }
        if position <= 1 {
            let since_departure = now.saturating_duration_since(self.last_departure_at);
            let period = (self.handoff_estimate / 8)
                .max(since_departure.saturating_sub(self.handoff_estimate) / 4)
                .max(self.round_trip)
                .max(MIN_NEXT_IN_LINE_PERIOD);
            // A pause shorter than a round trip gains little and would cost a timer whose
            // resolution may be coarser than the round trip (Tokio's is a millisecond).
            let pause = period.saturating_sub(self.round_trip);
            return if pause < self.round_trip {
                Duration::ZERO
            } else {
                pause.min(poll.max_interval)
            };
        }
        // The expected time to become next in line, from the hand-off estimate alone, and
        // never longer: waking late leaves the lock free with nobody polling, and the slow
        // hand-off that causes would inflate every estimate in turn (the time since the
        // last departure is only for the owner next in line, whose polls it slows while a
        // holder holds long). Waking early costs one more read, at a place nearer the front.
        // Before any departure is seen the estimate is a guess, and the plan unsure.
        let places = planned_places(
            position - 1,
            !self.departure_seen || self.handoff_beyond_network(),
        );
        let places = u32::try_from(places).unwrap_or(u32::MAX);
        self.handoff_estimate
            .checked_mul(places)
            .map(|pause| pause.saturating_sub(self.handoff_estimate / 2))
            .unwrap_or(poll.max_interval)
            .clamp(self.floor(config), poll.max_interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LockConfig;
    use crate::id::OwnerId;
    use crate::time::Timestamp;

    const MS: Duration = Duration::from_millis(1);
    const US: Duration = Duration::from_micros(1);

    fn config() -> ValidConfig {
        LockConfig::default().validate().unwrap()
    }

    fn column(micros: u64, owner: &str) -> QueueColumn {
        QueueColumn::new(Timestamp::from_micros(micros), OwnerId::new(owner).unwrap())
    }

    fn at(millis: u64) -> MonotonicTime {
        MonotonicTime::from_micros(millis * 1_000)
    }

    /// Takes in a read answered at `now` that took `round_trip`.
    fn read(
        tracker: &mut PollTracker,
        now: MonotonicTime,
        round_trip: Duration,
        ahead: &[QueueColumn],
    ) {
        let answered = duration_micros(now.saturating_duration_since(MonotonicTime::ZERO));
        let sent_at =
            MonotonicTime::from_micros(answered.saturating_sub(duration_micros(round_trip)));
        tracker.observe(now, sent_at, ahead.to_vec(), MS);
    }

    #[test]
    fn the_first_estimate_is_four_round_trips_and_never_more_than_four_minimum_intervals() {
        let estimate = |round_trip: Duration| {
            let mut tracker = PollTracker::new(at(0), None);
            read(&mut tracker, at(30), round_trip, &[column(1, "h")]);
            (tracker.handoff_estimate, tracker.round_trip)
        };
        assert_eq!(estimate(100 * US), (400 * US, 100 * US));
        assert_eq!(estimate(MS), (4 * MS, MS));
        assert_eq!(estimate(20 * MS), (4 * MS, 20 * MS));
    }

    #[test]
    fn the_next_in_line_keeps_one_read_in_flight_while_a_departure_is_due() {
        let config = config();
        let holder = [column(1, "h")];
        // A loopback round trip of 80 µs: the pace is the round trip, well under the
        // 1 ms `poll.min_interval`.
        let mut tracker = PollTracker::new(at(1), None);
        read(&mut tracker, at(1), 80 * US, &holder);
        assert_eq!(tracker.pause(at(1), 1, &config), Duration::ZERO);
        // A LAN round trip of 1 ms with hand-offs of 4 ms: still back to back.
        let mut tracker = PollTracker::new(at(0), None);
        read(&mut tracker, at(1), MS, &holder);
        assert_eq!(tracker.pause(at(1), 1, &config), Duration::ZERO);
    }

    #[test]
    fn the_next_in_line_reads_about_eight_times_a_hand_off_and_backs_off_as_the_holder_overruns() {
        let config = config();
        let poll = &config.config().poll;
        let mut tracker = PollTracker::new(at(0), None);
        let holder = [column(1, "h")];
        read(&mut tracker, at(1), MS, &holder);
        // The holder leaves after 400 ms: the estimate moves an eighth of the way from the
        // first guess of 4 ms, to 53.5 ms.
        read(&mut tracker, at(400), MS, &[]);
        let estimate = Duration::from_micros(53_500);
        assert_eq!(tracker.handoff_estimate, estimate);
        read(&mut tracker, at(400), MS, &holder);
        // An eighth of the hand-off, less the round trip the read itself takes.
        let due = tracker.pause(at(400), 1, &config);
        assert_eq!(due, estimate / 8 - MS);
        // Within the expected hand-off the pace stays; beyond it, the period grows by a
        // quarter of the overrun, and never past `poll.max_interval`.
        assert_eq!(tracker.pause(at(450), 1, &config), due);
        // 453.5 ms since the departure is 400 ms over the hand-off expected: a period of
        // 100 ms.
        let overrun = tracker.pause(at(400) + Duration::from_micros(453_500), 1, &config);
        assert_eq!(overrun, Duration::from_millis(100) - MS);
        assert_eq!(tracker.pause(at(60_000), 1, &config), poll.max_interval);
    }

    /// A storage that answers at once (round trip zero) is still not read in a tight loop.
    #[test]
    fn a_storage_that_answers_at_once_is_read_no_faster_than_the_floor() {
        let config = config();
        let mut tracker = PollTracker::new(at(5), None);
        read(&mut tracker, at(5), Duration::ZERO, &[column(1, "h")]);
        assert_eq!(tracker.pause(at(5), 1, &config), MIN_NEXT_IN_LINE_PERIOD);
    }

    #[test]
    fn owners_further_back_pause_longer_within_the_bounds() {
        let config = config();
        let poll = &config.config().poll;
        let mut tracker = PollTracker::new(at(0), None);
        // Hand-offs of 3 ms on a 1 ms round trip: the network sets the pace, and pauses
        // plan for every place ahead.
        read(&mut tracker, at(1), MS, &[column(1, "a"), column(2, "b")]);
        read(&mut tracker, at(3), MS, &[column(2, "b")]);
        let estimate = tracker.handoff_estimate;
        assert_eq!(estimate, Duration::from_micros(3_500));
        assert!(!tracker.handoff_beyond_network());
        for position in 2..40usize {
            let pause = tracker.pause(at(20), position, &config);
            assert!(
                (poll.min_interval..=poll.max_interval).contains(&pause),
                "position {position}: {pause:?}"
            );
            let expected = estimate
                .saturating_mul(u32::try_from(position - 1).unwrap())
                .saturating_sub(estimate / 2)
                .clamp(poll.min_interval, poll.max_interval);
            assert_eq!(pause, expected, "position {position}");
        }
    }

    /// Owners beyond the read's slice all take its length for their place; their pauses
    /// are shortened at random by up to `poll.jitter_percent`, so that they do not read
    /// together. Owners whose places are known are not jittered (above).
    #[test]
    fn owners_beyond_the_slice_spread_their_pauses() {
        let config = config();
        let mut rng = SplitMix64::new(7);
        let mut tracker = PollTracker::new(at(0), None);
        read(&mut tracker, at(1), MS, &[column(1, "a"), column(2, "b")]);
        read(&mut tracker, at(3), MS, &[column(2, "b")]);
        let planned = tracker.pause(at(20), 64, &config);
        let pauses: std::collections::BTreeSet<Duration> = (0..8)
            .map(|_| tracker.pause_beyond_slice(at(20), 64, &config, &mut rng))
            .collect();
        assert!(pauses.len() > 1, "{pauses:?}");
        for pause in pauses {
            assert_jittered(pause, planned, &config, "beyond the slice");
        }
    }

    /// On loopback (a 100 µs round trip, hand-offs of 400 µs) an owner two places back
    /// pauses about half a hand-off, well under the 1 ms `poll.min_interval`: sleeping
    /// that millisecond overslept its turn. It never pauses less than a round trip.
    #[test]
    fn owners_further_back_pause_by_the_round_trip_not_the_minimum_interval() {
        let config = config();
        let answered = MonotonicTime::from_micros(1_100);
        let mut tracker = PollTracker::new(answered, None);
        let ahead = [column(1, "a"), column(2, "b"), column(3, "c")];
        tracker.observe(answered, at(1), ahead.to_vec(), MS);
        tracker.observe(
            MonotonicTime::from_micros(1_500),
            MonotonicTime::from_micros(1_400),
            ahead[1..].to_vec(),
            MS,
        );
        assert_eq!(tracker.handoff_estimate, 400 * US);
        assert_eq!(tracker.round_trip, 100 * US);
        let now = MonotonicTime::from_micros(1_500);
        assert_eq!(tracker.pause(now, 2, &config), 200 * US);
        assert_eq!(tracker.pause(now, 3, &config), 600 * US);
        // A hand-off estimate under two round trips would plan less than one: the pause is
        // then a round trip.
        tracker.handoff_estimate = 150 * US;
        assert_eq!(tracker.pause(now, 2, &config), 100 * US);
    }

    /// Asserts that `pause` is `expected` shortened by at most `poll.jitter_percent`.
    fn assert_jittered(pause: Duration, expected: Duration, config: &ValidConfig, what: &str) {
        let spread = expected * config.config().poll.jitter_percent / 100;
        assert!(
            pause + spread >= expected && pause <= expected,
            "{what}: {pause:?} is not {expected:?} shortened by at most {spread:?}"
        );
    }

    /// When hand-offs take longer than the network explains (here 16 ms on a 1 ms round
    /// trip), or before any departure is seen, an owner more than eight places back plans
    /// for the first eight and half of the rest, and looks again about halfway to its turn.
    #[test]
    fn owners_far_back_look_again_halfway_when_hand_offs_outlast_the_network() {
        let config = config();
        let mut slow = PollTracker::new(at(0), None);
        read(&mut slow, at(1), MS, &[column(1, "a"), column(2, "b")]);
        read(&mut slow, at(100), MS, &[column(2, "b")]);
        assert_eq!(slow.handoff_estimate, 16 * MS);
        assert!(slow.handoff_beyond_network());
        // Before any departure is seen the estimate is the first guess (4 ms, within five
        // round trips), and the plan as unsure.
        let mut first = PollTracker::new(at(0), None);
        read(&mut first, at(1), MS, &[column(1, "a")]);
        assert_eq!(first.handoff_estimate, 4 * MS);
        assert!(!first.handoff_beyond_network());
        for (tracker, now) in [(&slow, at(100)), (&first, at(1))] {
            let estimate = tracker.handoff_estimate;
            for (position, places) in [(2, 1), (9, 8), (10, 9), (11, 9), (13, 10), (21, 14)] {
                let pause = tracker.pause(now, position, &config);
                let expected = estimate * places - estimate / 2;
                assert_eq!(
                    pause, expected,
                    "estimate {estimate:?}, position {position}"
                );
            }
        }
    }

    /// A shorter hand-off than expected moves the estimate halfway to it, a longer one only
    /// an eighth of the way.
    #[test]
    fn the_estimate_falls_halfway_and_rises_an_eighth_of_the_way() {
        let mut tracker = PollTracker::new(at(0), None);
        read(
            &mut tracker,
            at(1),
            MS,
            &[column(1, "a"), column(2, "b"), column(3, "c")],
        );
        assert_eq!(tracker.handoff_estimate, 4 * MS);
        read(&mut tracker, at(12), MS, &[column(2, "b"), column(3, "c")]);
        assert_eq!(tracker.handoff_estimate, 5 * MS);
        read(&mut tracker, at(13), MS, &[column(3, "c")]);
        assert_eq!(tracker.handoff_estimate, 3 * MS);
    }

    /// The estimate is per hand-off: owners that leave together in one gap between polls
    /// count as that many hand-offs, each taking its share of the gap, so two leaving in
    /// 40 ms estimate as one leaving in 20 ms does.
    #[test]
    fn departures_seen_together_share_the_gap() {
        let estimate = |ahead: &[QueueColumn], gap: u64| {
            let mut tracker = PollTracker::new(at(1), None);
            read(&mut tracker, at(1), MS, ahead);
            read(&mut tracker, at(1 + gap), MS, &[]);
            tracker.handoff_estimate
        };
        let one = estimate(&[column(1, "a")], 20);
        let two = estimate(&[column(1, "a"), column(2, "b")], 40);
        let three = estimate(&[column(1, "a"), column(2, "b"), column(3, "c")], 60);
        assert_eq!(one, two);
        assert_eq!(one, three);
    }

    #[test]
    fn polls_that_see_no_departure_leave_the_estimate_and_the_round_trip_averages() {
        let mut tracker = PollTracker::new(at(0), None);
        let ahead = [column(1, "a")];
        read(&mut tracker, at(1), MS, &ahead);
        read(&mut tracker, at(5), 5 * MS, &ahead);
        assert_eq!(tracker.handoff_estimate, 4 * MS);
        assert_eq!(tracker.last_departure_at, at(0));
        assert_eq!(tracker.round_trip, 2 * MS);
        read(&mut tracker, at(12), MS, &[]);
        assert_eq!(tracker.last_departure_at, at(12));
    }

    /// A locker that released the lock 2 ms ago, with hand-offs of 4 ms, is 3 places back
    /// at its first read: the third owner ahead should leave 12 ms after the release, so
    /// it sleeps until half a round trip before that, instead of waking at a guess.
    #[test]
    fn a_hint_times_the_first_pause_from_the_last_release() {
        let config = config();
        let hint = PollHint {
            departed_at: at(10),
            handoff: 4 * MS,
            turn: Duration::ZERO,
            ahead: 0,
            round_trip: Duration::from_millis(1),
        };
        let ahead = [column(1, "a"), column(2, "b"), column(3, "c")];
        let mut tracker = PollTracker::new(at(10), Some(hint));
        read(&mut tracker, at(12), MS, &ahead);
        assert_eq!(tracker.handoff_estimate, 4 * MS);
        assert_eq!(
            tracker.pause(at(12), 3, &config),
            Duration::from_micros(9_500)
        );
        // Twenty places back, the pause plans for the first eight places and half of the
        // other twelve: the third owner of those fourteen should leave 56 ms after the
        // release.
        let ahead: Vec<_> = (0..20).map(|n| column(n, "a")).collect();
        let mut far = PollTracker::new(at(10), Some(hint));
        read(&mut far, at(12), MS, &ahead);
        assert_eq!(
            far.pause(at(12), 20, &config),
            Duration::from_micros(53_500)
        );
        // Only the first read: later ones pace as without a hint.
        read(&mut tracker, at(21), MS, &ahead[1..]);
        let unhinted = tracker.pause(at(21), 2, &config);
        assert!(unhinted < 9 * MS, "{unhinted:?}");
    }

    /// A locker that released 1 ms ago with three owners to go before its next turn, over
    /// 4 ms hand-offs and 1 ms round trips, sleeps without a read on arrival to half a
    /// round trip before the third should have left, 12 ms after the release; its first
    /// read counts the owners gone since the release as departures.
    #[test]
    fn a_hint_with_owners_to_go_skips_the_read_on_arrival() {
        let hint = PollHint {
            departed_at: at(10),
            handoff: 4 * MS,
            turn: 2 * MS,
            ahead: 3,
            round_trip: MS,
        };
        let mut tracker = PollTracker::new(at(11), Some(hint));
        assert_eq!(
            tracker.skip_arrival_read(at(11), MS),
            Some(MonotonicTime::from_micros(21_500))
        );
        assert_eq!(
            tracker.handoff_estimate(),
            Some(4 * MS),
            "passed on even if the first read finds us first"
        );
        // At 22.5 ms one owner is still ahead: two left in the 12.5 ms since the release,
        // 6.25 ms each, and the estimate rises an eighth of the way to that.
        let answered = MonotonicTime::from_micros(22_500);
        read(&mut tracker, answered, MS, &[column(3, "c")]);
        assert_eq!(
            tracker.handoff_estimate(),
            Some(Duration::from_nanos(4_281_250))
        );
        assert_eq!(tracker.last_departure_at, answered);
        // With nobody gone yet, the last departure is the release itself, which paces the
        // reads of an owner next in line.
        let mut early = PollTracker::new(at(11), Some(PollHint { ahead: 1, ..hint }));
        assert_eq!(
            early.skip_arrival_read(at(11), MS),
            Some(MonotonicTime::from_micros(13_500))
        );
        read(&mut early, at(15), MS, &[column(3, "c")]);
        assert_eq!(early.last_departure_at, at(10));
        assert_eq!(early.handoff_estimate, 4 * MS);
        // No skip without owners to go, a hand-off or more after the release, or with the
        // moment of the plan passed (then the read goes at once, counting departures).
        let mut none_ahead = PollTracker::new(at(11), Some(PollHint { ahead: 0, ..hint }));
        assert_eq!(none_ahead.skip_arrival_read(at(11), MS), None);
        let mut stale = PollTracker::new(at(14), Some(hint));
        assert_eq!(stale.skip_arrival_read(at(14), MS), None);
        let mut plain = PollTracker::new(at(11), None);
        assert_eq!(plain.skip_arrival_read(at(11), MS), None);
        let late = MonotonicTime::from_micros(13_600);
        let mut passed = PollTracker::new(late, Some(PollHint { ahead: 1, ..hint }));
        assert_eq!(passed.skip_arrival_read(late, MS), None);
        read(&mut passed, at(14), MS, &[]);
        assert!(passed.departure_seen);
        // A hint of long hand-offs from a short turn is capped as at a first read.
        let mut capped = PollTracker::new(
            at(11),
            Some(PollHint {
                handoff: 50 * MS,
                ..hint
            }),
        );
        assert_eq!(
            capped.skip_arrival_read(at(11), MS),
            Some(MonotonicTime::from_micros(21_500))
        );
    }

    /// A first read after a skipped one that finds us first cannot tell how long we had
    /// been first: a short time since the release lowers the estimate halfway to it, a
    /// long one (we may have slept through our turn) lowers it by a round trip over the
    /// owners counted, so that the plan wakes a round trip earlier; it never rises.
    #[test]
    fn finding_ourselves_first_after_a_skipped_read_only_lowers_the_estimate() {
        let hint = PollHint {
            departed_at: at(10),
            handoff: 4 * MS,
            turn: 2 * MS,
            ahead: 2,
            round_trip: 2 * MS,
        };
        let mut quick = PollTracker::new(at(11), Some(hint));
        quick.skip_arrival_read(at(11), MS);
        quick.observe_first(at(15));
        assert_eq!(quick.handoff_estimate, Duration::from_micros(3_250));
        let mut slow = PollTracker::new(at(11), Some(hint));
        slow.skip_arrival_read(at(11), MS);
        slow.observe_first(at(30));
        assert_eq!(slow.handoff_estimate, 3 * MS);
        // Without a skipped read it learns nothing.
        let mut read_first = PollTracker::new(at(11), Some(hint));
        read(&mut read_first, at(12), MS, &[column(1, "a")]);
        let before = read_first.handoff_estimate;
        read_first.observe_first(at(40));
        assert_eq!(read_first.handoff_estimate, before);
    }

    /// A waiter that slept straight to its turn on a hint saw nobody leave; it passes on
    /// the estimate it started from, where one without a hint has nothing to pass on.
    #[test]
    fn a_hinted_estimate_is_passed_on_even_when_no_departure_was_seen() {
        let ahead = [column(1, "a")];
        let hint = PollHint {
            departed_at: at(0),
            handoff: 6 * MS,
            turn: 5 * MS,
            ahead: 0,
            round_trip: Duration::from_millis(1),
        };
        let mut hinted = PollTracker::new(at(0), Some(hint));
        assert_eq!(hinted.handoff_estimate(), None, "nothing read yet");
        read(&mut hinted, at(2), MS, &ahead);
        assert_eq!(hinted.handoff_estimate(), Some(6 * MS));
        let mut plain = PollTracker::new(at(0), None);
        read(&mut plain, at(2), MS, &ahead);
        assert_eq!(plain.handoff_estimate(), None);
    }

    #[test]
    fn a_hint_is_used_only_within_a_hand_off_of_the_release_and_trusted_up_to_its_turn() {
        let config = config();
        let ahead = [column(1, "a"), column(2, "b")];
        // Released 5 ms before the first read, with 4 ms hand-offs: the owner after us has
        // likely left already, and the hint says nothing of where the queue stands.
        let stale = PollHint {
            departed_at: at(0),
            handoff: 4 * MS,
            turn: Duration::ZERO,
            ahead: 0,
            round_trip: Duration::from_millis(1),
        };
        let mut hinted = PollTracker::new(at(0), Some(stale));
        let mut plain = PollTracker::new(at(0), None);
        read(&mut hinted, at(5), MS, &ahead);
        read(&mut plain, at(5), MS, &ahead);
        assert_eq!(
            hinted.pause(at(5), 2, &config),
            plain.pause(at(5), 2, &config)
        );
        // The estimate after a first read of `round_trip`, 12 ms after the release.
        let first_estimate = |handoff: Duration, turn: Duration, round_trip: Duration| {
            let hint = PollHint {
                departed_at: at(10),
                handoff,
                turn,
                ahead: 0,
                round_trip,
            };
            let mut tracker = PollTracker::new(at(10), Some(hint));
            read(&mut tracker, at(12), round_trip, &ahead);
            tracker.handoff_estimate
        };
        // A hint of long hand-offs from a short turn is capped by the first guess (four
        // round trips of 1 ms): they were lengthened by owners asleep at their turn, and
        // an estimate too long would make the waiter wake late and leave the lock idle.
        assert_eq!(first_estimate(50 * MS, 2 * MS, MS), 4 * MS);
        // After a turn of 20 ms, hand-offs up to two round trips longer are the holders'
        // own: the estimate starts there, not at the first guess, and no further.
        assert_eq!(first_estimate(50 * MS, 20 * MS, MS), 22 * MS);
        assert_eq!(first_estimate(21 * MS, 20 * MS, MS), 21 * MS);
        // On a network slower than `poll.min_interval` (3 ms round trips, a 6 ms turn of a
        // main write and read), the first guess stays at four intervals, but hand-offs up
        // to the turn and two round trips are the network's: the estimate keeps them.
        assert_eq!(first_estimate(10 * MS, 6 * MS, 3 * MS), 10 * MS);
        assert_eq!(first_estimate(50 * MS, 6 * MS, 3 * MS), 12 * MS);
    }
}
