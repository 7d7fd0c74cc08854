//! The poll policy of a waiter (docs/algorithm.md, section 8.1): how long to pause
//! between two reads of the queue, from its place in the queue and the hand-offs it has
//! seen. Every pause lies within `poll.min_interval..=poll.max_interval`.
//!
//! * The owner next in line polls at `poll.min_interval`, doubling while nothing changes,
//!   up to a quarter of the expected hand-off time (so it notices a release quickly
//!   without hammering a long-held lock).
//! * An owner `k` places back pauses for the time it expects to need to become next in
//!   line, `(k − 1.5)` hand-off estimates (the holder has held for half a hand-off on
//!   average), shortened by up to `poll.jitter_percent`, so a waiter costs about the same few reads wherever it
//!   starts in the queue: waiters far back cost almost nothing until their turn nears.
//! * The hand-off estimate starts at four minimum intervals and moves halfway to each new
//!   sample: the time since the last departure seen, divided by the departures since.

use std::time::Duration;

use crate::column::QueueColumn;
use crate::config::ValidConfig;
use crate::time::MonotonicTime;

use super::{SplitMix64, doubled};
use crate::time::duration_micros;

/// Remembers what a waiter saw, to pace its polls.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PollTracker {
    /// Who was ahead at the previous poll (none before the first).
    ahead: Option<Vec<QueueColumn>>,
    last_departure_at: MonotonicTime,
    handoff_estimate: Duration,
    unchanged_polls: u32,
}

impl PollTracker {
    pub(crate) fn new(now: MonotonicTime, min_interval: Duration) -> Self {
        PollTracker {
            ahead: None,
            last_departure_at: now,
            handoff_estimate: min_interval.saturating_mul(4),
            unchanged_polls: 0,
        }
    }

    /// Takes in who is ahead now and updates the hand-off estimate.
    pub(crate) fn observe(&mut self, now: MonotonicTime, ahead: Vec<QueueColumn>) {
        if let Some(before) = &self.ahead {
            let departures = before
                .iter()
                .filter(|column| !ahead.contains(column))
                .count();
            let departures = u32::try_from(departures).unwrap_or(u32::MAX);
            if departures > 0 {
                let sample = now.saturating_duration_since(self.last_departure_at) / departures;
                self.handoff_estimate = self.handoff_estimate.saturating_add(sample) / 2;
                self.last_departure_at = now;
                self.unchanged_polls = 0;
            } else {
                self.unchanged_polls = self.unchanged_polls.saturating_add(1);
            }
        }
        self.ahead = Some(ahead);
    }

    pub(crate) fn pause(
        &self,
        now: MonotonicTime,
        position: usize,
        config: &ValidConfig,
        rng: &mut SplitMix64,
    ) -> Duration {
        let poll = &config.config().poll;
        let estimate = self
            .handoff_estimate
            .max(now.saturating_duration_since(self.last_departure_at));
        if position <= 1 {
            let cap = (estimate / 4).clamp(poll.min_interval, poll.max_interval);
            return doubled(poll.min_interval, self.unchanged_polls, cap);
        }
        // The expected time to become next in line, from the hand-off estimate alone, and
        // never longer: waking late leaves the lock free with nobody polling, and the slow
        // hand-off that causes would inflate every estimate in turn (the time since the
        // last departure is only for the owner next in line, whose polls it slows while a
        // holder holds long). Waking early costs one more read, at a place nearer the front.
        let places = u32::try_from(position - 1).unwrap_or(u32::MAX);
        let pause = self
            .handoff_estimate
            .checked_mul(places)
            .map(|pause| pause.saturating_sub(self.handoff_estimate / 2))
            .unwrap_or(poll.max_interval)
            .clamp(poll.min_interval, poll.max_interval);
        let pause = duration_micros(pause);
        let spread = pause / 100 * u64::from(poll.jitter_percent);
        Duration::from_micros(pause - rng.below(spread.saturating_add(1)))
            .clamp(poll.min_interval, poll.max_interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LockConfig;
    use crate::id::OwnerId;
    use crate::time::Timestamp;

    const MS: Duration = Duration::from_millis(1);

    fn config() -> ValidConfig {
        LockConfig::default().validate().unwrap()
    }

    fn column(micros: u64, owner: &str) -> QueueColumn {
        QueueColumn::new(Timestamp::from_micros(micros), OwnerId::new(owner).unwrap())
    }

    fn at(millis: u64) -> MonotonicTime {
        MonotonicTime::from_micros(millis * 1_000)
    }

    #[test]
    fn the_next_in_line_starts_at_the_minimum_and_doubles_up_to_a_quarter_hand_off() {
        let config = config();
        let mut rng = SplitMix64::new(1);
        let mut tracker = PollTracker::new(at(0), MS);
        let holder = vec![column(1, "h")];
        // The estimate starts at four minimum intervals: a quarter of it is the minimum.
        tracker.observe(at(0), holder.clone());
        assert_eq!(tracker.pause(at(0), 1, &config, &mut rng), MS);
        // The holder leaves after 400 ms: the estimate moves halfway, to 202 ms.
        tracker.observe(at(400), vec![]);
        assert_eq!(tracker.handoff_estimate, Duration::from_micros(202_000));
        let mut pauses = Vec::new();
        for _ in 0..8 {
            tracker.observe(at(400), holder.clone());
            pauses.push(tracker.pause(at(400), 1, &config, &mut rng));
        }
        // 1, 2, 4, ... ms while nothing changes, capped at 202 ms / 4.
        assert_eq!(pauses[0], 2 * MS);
        assert_eq!(pauses[1], 4 * MS);
        assert!(
            pauses.windows(2).all(|pair| pair[0] <= pair[1]),
            "{pauses:?}"
        );
        assert_eq!(*pauses.last().unwrap(), Duration::from_micros(50_500));
    }

    #[test]
    fn owners_further_back_pause_longer_within_the_bounds() {
        let config = config();
        let poll = &config.config().poll;
        let mut rng = SplitMix64::new(7);
        let mut tracker = PollTracker::new(at(0), MS);
        tracker.observe(at(0), vec![column(1, "a"), column(2, "b")]);
        tracker.observe(at(20), vec![column(2, "b")]);
        let estimate = tracker.handoff_estimate;
        for position in 2..40usize {
            let pause = tracker.pause(at(20), position, &config, &mut rng);
            assert!(
                (poll.min_interval..=poll.max_interval).contains(&pause),
                "position {position}: {pause:?}"
            );
            let expected = estimate
                .saturating_mul(u32::try_from(position - 1).unwrap())
                .saturating_sub(estimate / 2)
                .clamp(poll.min_interval, poll.max_interval);
            let spread = expected * poll.jitter_percent / 100;
            assert!(
                pause + spread >= expected && pause <= expected,
                "position {position}: {pause:?} is not {expected:?} shortened by at most {spread:?}"
            );
        }
    }

    /// The estimate is per hand-off: owners that leave together in one gap between polls
    /// count as that many hand-offs, each taking its share of the gap, so two leaving in
    /// 40 ms estimate as one leaving in 20 ms does.
    #[test]
    fn departures_seen_together_share_the_gap() {
        let estimate = |ahead: Vec<QueueColumn>, gap: u64| {
            let mut tracker = PollTracker::new(at(0), MS);
            tracker.observe(at(0), ahead);
            tracker.observe(at(gap), vec![]);
            tracker.handoff_estimate
        };
        let one = estimate(vec![column(1, "a")], 20);
        let two = estimate(vec![column(1, "a"), column(2, "b")], 40);
        let three = estimate(vec![column(1, "a"), column(2, "b"), column(3, "c")], 60);
        assert_eq!(one, two);
        assert_eq!(one, three);
    }

    #[test]
    fn polls_that_see_no_departure_count_as_unchanged() {
        let mut tracker = PollTracker::new(at(0), MS);
        let ahead = vec![column(1, "a")];
        tracker.observe(at(0), ahead.clone());
        tracker.observe(at(5), ahead.clone());
        tracker.observe(at(9), ahead.clone());
        assert_eq!(tracker.unchanged_polls, 2);
        assert_eq!(tracker.handoff_estimate, 4 * MS);
        tracker.observe(at(12), vec![]);
        assert_eq!(tracker.unchanged_polls, 0);
        assert_eq!(tracker.last_departure_at, at(12));
    }
}
