//! One replica's version of a cell, and how two of them merge (by lock-core's rule,
//! [`lock_core::storage::merge`]).

use std::cmp::Ordering;
use std::sync::Arc;

use lock_core::Timestamp;
use lock_core::storage::{Expiry, VersionRef};

/// What a version of a cell holds: a value (perhaps with an expiry) or a deletion mark.
///
/// Times here are whole seconds since the Unix epoch, like Cassandra's `localDeletionTime`,
/// and they were stamped by the clock of the request's *coordinator*.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CellState {
    /// A value.
    Live {
        /// The value's bytes (shared, so copying a version between replicas is cheap).
        value: Arc<[u8]>,
        /// The second at which the cell stops being live (the coordinator's clock, truncated
        /// to whole seconds, plus the TTL) and the TTL in seconds. `None` for a cell
        /// without TTL.
        expiry: Option<Expiry>,
    },
    /// A tombstone, written by a delete or left by an expired cell.
    Tombstone {
        /// The second the deletion happened (for an expired cell: its expiry second), from
        /// which the grace period before purging is counted.
        deleted_at: u64,
    },
}

/// One version of one cell as a replica stores it: a write timestamp and a state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CellVersion {
    /// The writer's timestamp (`USING TIMESTAMP`), decisive for last-write-wins.
    pub timestamp: Timestamp,
    /// The value or the deletion mark.
    pub state: CellState,
}

impl CellVersion {
    /// True when the version is a value that is still live at second `now` of the judging
    /// clock: `now` before its expiry, as Cassandra's `isLive(nowInSec)`.
    pub fn is_live_at(&self, now: u64) -> bool {
        match self.state {
            CellState::Live { expiry, .. } => expiry.is_none_or(|expiry| now < expiry.at),
            CellState::Tombstone { .. } => false,
        }
    }

    /// The version as seen at second `now`: an expired value becomes a tombstone with the
    /// same timestamp, deleted at its expiry. It keeps shadowing older versions, and never
    /// lets an older value resurface.
    pub fn judged_at(self, now: u64) -> CellVersion {
        match self.state {
            CellState::Live {
                expiry: Some(expiry),
                ..
            } if now >= expiry.at => CellVersion {
                timestamp: self.timestamp,
                state: CellState::Tombstone {
                    deleted_at: expiry.at,
                },
            },
            _ => self,
        }
    }

    /// True when `self` judged at second `now` and `other` judged at `other_now` are the
    /// same version (as [`CellVersion::judged_at`] on both would compare), without copying
    /// either.
    pub(crate) fn same_when_judged(&self, now: u64, other: &CellVersion, other_now: u64) -> bool {
        self.timestamp == other.timestamp && self.judged_state(now) == other.judged_state(other_now)
    }

    fn judged_state(&self, now: u64) -> JudgedState<'_> {
        match &self.state {
            CellState::Live {
                expiry: Some(expiry),
                ..
            } if now >= expiry.at => JudgedState::Tombstone(expiry.at),
            CellState::Live { value, expiry } => JudgedState::Live(value, *expiry),
            CellState::Tombstone { deleted_at } => JudgedState::Tombstone(*deleted_at),
        }
    }

    /// The last second at which a replica must still keep this version: `gc_grace` after
    /// its deletion (or expiry); forever for a value without TTL. Like Cassandra's
    /// `localDeletionTime < gcBefore`, the version is purgeable only once the replica's clock
    /// is past this second.
    pub(crate) fn kept_until(&self, gc_grace_secs: u64) -> u64 {
        match self.state {
            CellState::Tombstone { deleted_at } => deleted_at.saturating_add(gc_grace_secs),
            CellState::Live {
                expiry: Some(expiry),
                ..
            } => expiry.at.saturating_add(gc_grace_secs),
            CellState::Live { expiry: None, .. } => u64::MAX,
        }
    }

    /// True for a tombstone (a delete, or a value judged expired).
    pub(crate) fn is_tombstone(&self) -> bool {
        matches!(self.state, CellState::Tombstone { .. })
    }
}

/// A version's state as judged at some second, borrowed.
#[derive(PartialEq)]
enum JudgedState<'a> {
    Live(&'a Arc<[u8]>, Option<Expiry>),
    Tombstone(u64),
}

impl CellVersion {
    /// The version as lock-core's merge rule sees it.
    pub fn as_merged(&self) -> VersionRef<'_> {
        match &self.state {
            CellState::Live { value, expiry } => VersionRef::live(self.timestamp, value, *expiry),
            CellState::Tombstone { deleted_at } => {
                VersionRef::tombstone(self.timestamp, *deleted_at)
            }
        }
    }
}

/// The better of two versions of the same cell by lock-core's merge rule
/// ([`lock_core::storage::merge`], Cassandra 5.0's): the higher timestamp; on a tie a
/// tombstone, then a value with a TTL over one without, then the later expiry (or
/// deletion), then the greater value bytes. The order is total, so the merge is
/// commutative, associative and idempotent, and replicas converge whatever the delivery
/// order. It never looks at a clock: an expired value still ranks as a value with a TTL.
pub(crate) fn best(a: CellVersion, b: CellVersion) -> CellVersion {
    if a.as_merged().precedence(&b.as_merged()) == Ordering::Less {
        b
    } else {
        a
    }
}

/// Replaces `stored` by `incoming` if `incoming` is the better version.
pub(crate) fn merge_into(stored: &mut CellVersion, incoming: CellVersion) {
    if incoming.as_merged().supersedes(&stored.as_merged()) {
        *stored = incoming;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn live(timestamp: u64, value: &str) -> CellVersion {
        CellVersion {
            timestamp: Timestamp::from_micros(timestamp),
            state: CellState::Live {
                value: value.as_bytes().into(),
                expiry: None,
            },
        }
    }

    fn tombstone(timestamp: u64, deleted_at: u64) -> CellVersion {
        CellVersion {
            timestamp: Timestamp::from_micros(timestamp),
            state: CellState::Tombstone { deleted_at },
        }
    }

    #[test]
    fn the_higher_timestamp_wins_whatever_the_kind() {
        assert_eq!(best(live(2, "new"), live(1, "old")), live(2, "new"));
        assert_eq!(best(live(1, "old"), live(2, "new")), live(2, "new"));
        assert_eq!(best(live(3, "x"), tombstone(2, 0)), live(3, "x"));
        assert_eq!(best(tombstone(3, 0), live(2, "x")), tombstone(3, 0));
    }

    /// A value written at second 0 that expires at `expires_at`.
    fn expiring(timestamp: u64, value: &str, expires_at: u64) -> CellVersion {
        written_with_ttl(timestamp, value, 0, expires_at)
    }

    fn written_with_ttl(timestamp: u64, value: &str, written_at: u64, ttl: u64) -> CellVersion {
        CellVersion {
            timestamp: Timestamp::from_micros(timestamp),
            state: CellState::Live {
                value: value.as_bytes().into(),
                expiry: Some(Expiry::after(written_at, ttl)),
            },
        }
    }

    #[test]
    fn on_a_tie_the_tombstone_wins() {
        assert_eq!(best(live(5, "x"), tombstone(5, 0)), tombstone(5, 0));
        assert_eq!(best(tombstone(5, 0), live(5, "x")), tombstone(5, 0));
    }

    #[test]
    fn on_a_tie_between_values_the_greater_bytes_win() {
        // md5("a") < md5("c") < md5("b"): the thesis's rule kept "a" over "b" and "c" over
        // "b"; Cassandra 5.0 keeps the greater bytes.
        assert_eq!(best(live(7, "a"), live(7, "b")), live(7, "b"));
        assert_eq!(best(live(7, "b"), live(7, "a")), live(7, "b"));
        assert_eq!(best(live(7, "b"), live(7, "c")), live(7, "c"));
        assert_eq!(best(live(7, "c"), live(7, "b")), live(7, "c"));
    }

    #[test]
    fn on_a_tie_a_ttl_wins_then_the_later_expiry() {
        assert_eq!(best(live(7, "z"), expiring(7, "a", 5)), expiring(7, "a", 5));
        assert_eq!(
            best(expiring(7, "z", 5), expiring(7, "a", 6)),
            expiring(7, "a", 6)
        );
        // Whatever the clock: the rule ranks versions as they were written.
        assert_eq!(best(expiring(7, "a", 1), live(7, "b")), expiring(7, "a", 1));
        // Equal expiries: the smaller TTL (written later) before the greater value.
        let (first, second) = (
            written_with_ttl(7, "b", 10, 2),
            written_with_ttl(7, "", 11, 1),
        );
        assert_eq!(best(first.clone(), second.clone()), second);
        assert_eq!(best(second.clone(), first), second);
    }

    #[test]
    fn an_expired_value_judges_as_a_tombstone_with_its_timestamp() {
        let expiring = CellVersion {
            timestamp: Timestamp::from_micros(9),
            state: CellState::Live {
                value: b"x".as_slice().into(),
                expiry: Some(Expiry::after(90, 10)),
            },
        };
        assert!(expiring.is_live_at(99));
        assert!(!expiring.is_live_at(100));
        assert_eq!(expiring.clone().judged_at(99), expiring);
        assert_eq!(expiring.clone().judged_at(100), tombstone(9, 100));
        // It still shadows an older value, and beats a same-timestamp value.
        assert_eq!(
            best(expiring.clone().judged_at(150), live(8, "older")),
            tombstone(9, 100)
        );
        assert_eq!(
            best(live(9, "same"), expiring.judged_at(150)),
            tombstone(9, 100)
        );
    }

    fn any_version() -> impl Strategy<Value = CellVersion> {
        let state = prop_oneof![
            (0u64..4).prop_map(|deleted_at| CellState::Tombstone { deleted_at }),
            (
                prop::sample::select(vec!["a", "b", "c", "lock", ""]),
                prop::option::of((0u64..3, 1u64..3))
            )
                .prop_map(|(value, expiry)| CellState::Live {
                    value: value.as_bytes().into(),
                    expiry: expiry.map(|(written_at, ttl)| Expiry::after(written_at, ttl)),
                }),
        ];
        (0u64..4, state).prop_map(|(timestamp, state)| CellVersion {
            timestamp: Timestamp::from_micros(timestamp),
            state,
        })
    }

    proptest! {
        #[test]
        fn merge_is_commutative(a in any_version(), b in any_version()) {
            prop_assert_eq!(best(a.clone(), b.clone()), best(b, a));
        }

        #[test]
        fn merge_is_associative(a in any_version(), b in any_version(), c in any_version()) {
            prop_assert_eq!(
                best(best(a.clone(), b.clone()), c.clone()),
                best(a, best(b, c))
            );
        }

        #[test]
        fn merge_is_idempotent_and_picks_one_of_its_inputs(a in any_version(), b in any_version()) {
            prop_assert_eq!(best(a.clone(), a.clone()), a.clone());
            let winner = best(a.clone(), b.clone());
            prop_assert!(winner == a || winner == b);
            prop_assert_eq!(winner.timestamp, a.timestamp.max(b.timestamp));
        }

        /// The borrowed comparison answers as judging both copies and comparing them
        /// would, whichever side of its expiry each clock is on.
        #[test]
        fn same_when_judged_agrees_with_judging_both(
            a in any_version(),
            b in any_version(),
            now in 0u64..5,
            other_now in 0u64..5,
        ) {
            prop_assert_eq!(
                a.same_when_judged(now, &b, other_now),
                a.clone().judged_at(now) == b.clone().judged_at(other_now)
            );
        }

        #[test]
        fn merging_in_place_agrees_with_best(a in any_version(), b in any_version()) {
            let mut stored = a.clone();
            merge_into(&mut stored, b.clone());
            prop_assert_eq!(stored, best(a, b));
        }
    }
}
