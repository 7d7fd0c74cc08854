//! The work queue's decision rules, without IO: which buckets a claim scans and from where,
//! when the floor may rise, when an item found held is tried again, and when a claim may
//! still complete its item. The async [`super::WorkQueue`] reads the clock and the storage
//! and asks these rules; the times are arguments, so the tests can put any moment to them.

use std::ops::RangeInclusive;
use std::time::Duration;

use lock_core::time::duration_micros;
use lock_core::{ColumnName, FencingToken, LockConfig, MonotonicTime, QueueColumn, Timestamp};

use super::WorkQueueConfig;

/// The rules of one queue handle: its bucket width, and the lock's timings they depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct QueueRules {
    /// The width of a bucket in microseconds, at least 1.
    bucket_micros: u64,
    /// How far before a seen item a later read must start, and how long after a bucket's
    /// end producers may still add to it: twice the clock-skew bound plus the request
    /// timeout (docs/algorithm.md, section "Queue floors and tombstones").
    margin: Duration,
    /// The lock's `request_timeout`: how long a write may take to land.
    request_timeout: Duration,
    /// How long an item found held by another claim is passed over.
    held_item_recheck: Duration,
}

/// Why [`QueueRules::completion`] refuses to send a completion record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CompletionRefused {
    /// The lease the claim had left.
    pub(crate) time_left: Duration,
    /// The least it needs.
    pub(crate) needed: Duration,
}

impl QueueRules {
    /// The rules of a queue configured with `config`, on a locker configured with `lock`.
    pub(crate) fn new(config: &WorkQueueConfig, lock: &LockConfig) -> Self {
        QueueRules {
            bucket_micros: duration_micros(config.bucket_width).max(1),
            margin: lock
                .max_clock_skew
                .saturating_mul(2)
                .saturating_add(lock.request_timeout),
            request_timeout: lock.request_timeout,
            held_item_recheck: config.held_item_recheck,
        }
    }

    /// The visibility margin: twice the clock-skew bound plus the request timeout.
    #[cfg(test)]
    pub(crate) fn margin(&self) -> Duration {
        self.margin
    }

    /// The bucket an item enqueued at `at` goes into: whole bucket widths since 1970.
    pub(crate) fn bucket_of(&self, at: Timestamp) -> u64 {
        at.as_micros() / self.bucket_micros
    }

    /// True when no producer can still add an item to `bucket` at wall time `now` (this
    /// worker's clock): the bucket ended at least the margin ago.
    pub(crate) fn bucket_closed(&self, bucket: u64, now: Timestamp) -> bool {
        let end = bucket.saturating_add(1).saturating_mul(self.bucket_micros);
        end.saturating_add(duration_micros(self.margin)) <= now.as_micros()
    }

    /// The buckets a claim at wall time `now` scans, oldest first: from the floor (below it
    /// every bucket is known closed and empty) to the current one. Empty if the floor is
    /// ahead of this worker's clock.
    pub(crate) fn buckets_to_scan(&self, floor: u64, now: Timestamp) -> RangeInclusive<u64> {
        floor..=self.bucket_of(now)
    }

    /// A handle's first floor, from the shared floor and origin cells (`None` when absent):
    /// the larger of the two, or, when nothing was ever enqueued, the bucket a margin
    /// before `now`.
    pub(crate) fn initial_floor(
        &self,
        floor_cell: Option<u64>,
        origin_cell: Option<u64>,
        now: Timestamp,
    ) -> u64 {
        match (floor_cell, origin_cell) {
            (Some(floor), Some(origin)) => floor.max(origin),
            (Some(floor), None) => floor,
            (None, Some(origin)) => origin,
            (None, None) => self.bucket_of(now - self.margin),
        }
    }

    /// The floor after a pass that found `bucket` empty with every bucket from the old
    /// floor up to it closed and empty too (`empty_so_far`): the bucket above it if it is
    /// closed at `now`, else `None` (the floor stays, and no later bucket can raise it in
    /// this pass).
    pub(crate) fn floor_above_empty(
        &self,
        bucket: u64,
        empty_so_far: bool,
        now: Timestamp,
    ) -> Option<u64> {
        (empty_so_far && self.bucket_closed(bucket, now)).then(|| bucket.saturating_add(1))
    }

    /// Where a read of a bucket starts when its first live item was last seen enqueued at
    /// `head`: a margin before it, so that an item enqueued a little earlier by a producer
    /// whose clock is behind, or whose write was still on its way, is not skipped.
    pub(crate) fn read_start(&self, head: Timestamp) -> ColumnName {
        QueueColumn::time_prefix(head - self.margin)
    }

    /// When an item found held by another claim at `now` is to be tried again, or `None`
    /// to try it on every pass (`held_item_recheck` zero).
    pub(crate) fn retry_held_at(&self, now: MonotonicTime) -> Option<MonotonicTime> {
        (!self.held_item_recheck.is_zero()).then(|| now + self.held_item_recheck)
    }

    /// Whether a held item to be tried again at `retry_at` is still passed over at `now`.
    pub(crate) fn passes_over(retry_at: MonotonicTime, now: MonotonicTime) -> bool {
        retry_at > now
    }

    /// The completion rule: a claim may send its completion record only with at least the
    /// request timeout of its lease left (`time_left`). A record sent with less could land
    /// after the lease ran out and another worker claimed the item, read no record, and
    /// processed the item again; that worker's own completion would then be the second.
    pub(crate) fn completion(&self, time_left: Duration) -> Result<(), CompletionRefused> {
        if time_left < self.request_timeout {
            return Err(CompletionRefused {
                time_left,
                needed: self.request_timeout,
            });
        }
        Ok(())
    }

    /// The pause before the next try of a completion record that failed after `pause`:
    /// doubled, but never above the request timeout, so that retries go on while the lease
    /// lasts.
    pub(crate) fn next_completion_pause(&self, pause: Duration) -> Duration {
        pause.saturating_mul(2).min(self.request_timeout)
    }

    /// The timestamp of the tombstone that removes a completed item, written at
    /// `item_written_at` and completed under `token`: above both, so it shadows the item's
    /// cell and cannot be shadowed by a rewrite of the same item.
    pub(crate) fn item_tombstone(token: FencingToken, item_written_at: Timestamp) -> Timestamp {
        Timestamp::from_micros(token.get()).max(item_written_at.next())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn rules(bucket_width: Duration, skew: Duration, request_timeout: Duration) -> QueueRules {
        QueueRules::new(
            &WorkQueueConfig {
                bucket_width,
                ..WorkQueueConfig::default()
            },
            &LockConfig {
                max_clock_skew: skew,
                request_timeout,
                ..LockConfig::default()
            },
        )
    }

    fn default_rules() -> QueueRules {
        QueueRules::new(&WorkQueueConfig::default(), &LockConfig::default())
    }

    /// A runner with a fixed seed, so that every run tries the same cases.
    fn seeded() -> TestRunner {
        TestRunner::new_with_rng(
            Config {
                cases: 512,
                failure_persistence: None,
                ..Config::default()
            },
            TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
        )
    }

    fn micros(range: std::ops::Range<u64>) -> impl Strategy<Value = Duration> {
        range.prop_map(Duration::from_micros)
    }

    #[test]
    fn a_completion_needs_the_request_timeout_of_lease_left() {
        let rules = default_rules();
        let timeout = LockConfig::default().request_timeout;
        let short = timeout - Duration::from_micros(1);
        assert_eq!(
            rules.completion(short),
            Err(CompletionRefused {
                time_left: short,
                needed: timeout
            })
        );
        assert_eq!(
            rules.completion(Duration::ZERO).map_err(|r| r.needed),
            Err(timeout)
        );
        assert_eq!(rules.completion(timeout), Ok(()));
        assert_eq!(rules.completion(timeout * 5), Ok(()));
    }

    #[test]
    fn the_completion_rule_holds_for_any_timeout_and_lease() {
        // Any lease left, leases within a millisecond of the request timeout, and exactly it.
        let cases = micros(1..10_000_000).prop_flat_map(|request_timeout| {
            let timeout = duration_micros(request_timeout);
            let near =
                (timeout.saturating_sub(1_000)..timeout + 1_000).prop_map(Duration::from_micros);
            let lease = prop_oneof![micros(0..20_000_000), near, Just(request_timeout)];
            (Just(request_timeout), lease)
        });
        seeded()
            .run(&cases, |(request_timeout, time_left)| {
                let rules = rules(MINUTE, Duration::from_secs(1), request_timeout);
                let verdict = rules.completion(time_left);
                // Sent only when it lands, a request timeout later at the latest, within the
                // lease.
                prop_assert_eq!(verdict.is_ok(), time_left >= request_timeout);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn completion_retries_back_off_to_the_request_timeout() {
        let rules = default_rules();
        let timeout = LockConfig::default().request_timeout;
        let mut pause = Duration::from_millis(100);
        let pauses: Vec<_> = (0..6)
            .map(|_| {
                pause = rules.next_completion_pause(pause);
                pause
            })
            .collect();
        assert_eq!(
            pauses,
            [200, 400, 800, 1600, 2000, 2000].map(Duration::from_millis)
        );
        assert!(pauses.iter().all(|pause| *pause <= timeout));
    }

    #[test]
    fn buckets_are_whole_widths_and_close_a_margin_after_their_end() {
        // Skew 1 s, timeout 1 s: a margin of 3 s.
        let rules = rules(MINUTE, Duration::from_secs(1), Duration::from_secs(1));
        let minute = 60_000_000;
        assert_eq!(rules.margin(), Duration::from_secs(3));
        assert_eq!(rules.bucket_of(Timestamp::from_micros(0)), 0);
        assert_eq!(rules.bucket_of(Timestamp::from_micros(minute - 1)), 0);
        assert_eq!(rules.bucket_of(Timestamp::from_micros(minute)), 1);
        // Bucket 0 ends at one minute; it closes three seconds later.
        assert!(!rules.bucket_closed(0, Timestamp::from_micros(minute)));
        assert!(!rules.bucket_closed(0, Timestamp::from_micros(minute + 2_999_999)));
        assert!(rules.bucket_closed(0, Timestamp::from_micros(minute + 3_000_000)));
        assert!(!rules.bucket_closed(u64::MAX, Timestamp::MAX));
    }

    /// The floor's safety: once a bucket is closed at a worker's `now`, no producer whose
    /// clock reads at least `now` minus the margin (a clock behind by up to twice the skew
    /// bound, a write still on its way for up to the request timeout) enqueues into it.
    #[test]
    fn a_closed_bucket_gets_no_more_items_and_stays_closed() {
        let cases = (
            micros(1_000_000..600_000_000),
            micros(0..5_000_000),
            micros(1_000..5_000_000),
            0u64..4_000_000_000_000_000,
            micros(0..10_000_000),
        );
        seeded()
            .run(&cases, |(width, skew, timeout, now, later)| {
                let rules = rules(width, skew, timeout);
                let now = Timestamp::from_micros(now);
                let bucket = rules.bucket_of(now - rules.margin()).saturating_sub(1);
                if rules.bucket_closed(bucket, now) {
                    let earliest_producer = now - rules.margin();
                    prop_assert!(rules.bucket_of(earliest_producer) > bucket);
                    prop_assert!(rules.bucket_closed(bucket, now + later));
                }
                // The bucket of `now` itself is never closed at `now`.
                prop_assert!(!rules.bucket_closed(rules.bucket_of(now), now));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn the_floor_rises_only_over_closed_empty_buckets() {
        let rules = rules(MINUTE, Duration::from_secs(1), Duration::from_secs(1));
        let now = Timestamp::from_micros(10 * 60_000_000 + 3_000_000);
        // Buckets 0 to 9 are closed at `now`; 10 is the current one.
        assert_eq!(rules.floor_above_empty(9, true, now), Some(10));
        assert_eq!(rules.floor_above_empty(10, true, now), None);
        assert_eq!(
            rules.floor_above_empty(3, false, now),
            None,
            "an item below keeps the floor"
        );
        assert_eq!(rules.buckets_to_scan(7, now), 7..=10);
        assert!(rules.buckets_to_scan(11, now).is_empty());
    }

    #[test]
    fn the_first_floor_is_the_highest_known_or_a_margin_back() {
        let rules = rules(MINUTE, Duration::from_secs(1), Duration::from_secs(1));
        let now = Timestamp::from_micros(10 * 60_000_000 + 1_000_000);
        assert_eq!(rules.initial_floor(Some(4), Some(6), now), 6);
        assert_eq!(rules.initial_floor(Some(7), Some(6), now), 7);
        assert_eq!(rules.initial_floor(Some(4), None, now), 4);
        assert_eq!(rules.initial_floor(None, Some(2), now), 2);
        // Three seconds before ten minutes and one second: still bucket 9.
        assert_eq!(rules.initial_floor(None, None, now), 9);
    }

    /// A read that starts at `read_start(head)` sees every item enqueued up to a margin
    /// before the head it last saw.
    #[test]
    fn a_read_starts_a_margin_before_the_last_head() {
        let cases = (
            0u64..4_000_000_000_000_000,
            micros(0..5_000_000),
            micros(1_000..5_000_000),
            micros(0..20_000_000),
        );
        seeded()
            .run(&cases, |(head, skew, timeout, before)| {
                let rules = rules(MINUTE, skew, timeout);
                let head = Timestamp::from_micros(head);
                let start = rules.read_start(head);
                let item = QueueColumn::new(
                    head - before,
                    lock_core::OwnerId::new("0123456789abcdef0123456789abcdef").unwrap(),
                );
                if before <= rules.margin() {
                    prop_assert!(start <= item.encode(), "{start} skips {item}");
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_held_item_is_passed_over_until_its_recheck() {
        let now = MonotonicTime::from_micros(5_000_000);
        let rules = default_rules();
        let retry_at = rules.retry_held_at(now).unwrap();
        assert_eq!(retry_at, now + WorkQueueConfig::default().held_item_recheck);
        assert!(QueueRules::passes_over(retry_at, now));
        assert!(QueueRules::passes_over(
            retry_at,
            retry_at - Duration::from_micros(1)
        ));
        assert!(!QueueRules::passes_over(retry_at, retry_at));
        let every_pass = QueueRules::new(
            &WorkQueueConfig {
                held_item_recheck: Duration::ZERO,
                ..WorkQueueConfig::default()
            },
            &LockConfig::default(),
        );
        assert_eq!(every_pass.retry_held_at(now), None);
    }

    #[test]
    fn a_completed_item_is_removed_above_its_own_write() {
        let written = Timestamp::from_micros(1_000);
        assert_eq!(
            QueueRules::item_tombstone(FencingToken::new(5_000), written),
            Timestamp::from_micros(5_000)
        );
        assert_eq!(
            QueueRules::item_tombstone(FencingToken::new(10), written),
            written.next()
        );
    }
}
