//! The merge rule: which of two versions of one cell a replica keeps, and a read returns.
//!
//! This is Apache Cassandra 5.0's reconciliation of regular cells (`Cells.reconcile`,
//! `resolveRegular`), which its rows follow too (a row deletion shadows everything with a
//! timestamp up to its own, `DeletionTime.deletes`; `LivenessInfo.supersedes` ranks primary
//! key liveness as below). For two versions of the same cell:
//!
//! 1. the higher write timestamp wins;
//! 2. on equal timestamps a tombstone wins over a value, and a value *with* a TTL wins over
//!    one without (whether or not it has expired yet: the rule never looks at a clock, so
//!    every replica reaches the same result whenever it reconciles);
//! 3. between two tombstones, or two values with TTLs, the later deletion (expiry) time
//!    wins, and between two values with TTLs that expire at the same time, the smaller TTL
//!    (the value written later);
//! 4. what is left is decided by the value bytes: the greater wins, compared as unsigned
//!    bytes, a prefix before its extensions.
//!
//! The order is total (two versions rank equal only when they are equal), so merging is
//! commutative, associative and idempotent, and replicas converge whatever the order in
//! which they receive writes. The thesis's `GetBestCell` broke every tie between values by
//! the smaller MD5 of the value; Cassandra 5.0 does not, so that rule is not kept. The
//! workspace's differential test (`lock-tests`, `tests/differential.rs`) checks the rule
//! against a real Cassandra 5.0 cluster.
//!
//! Expiry and deletion times are compared as numbers, so both versions must use one unit
//! (Cassandra's are whole seconds of the coordinator's clock).

use std::cmp::Ordering;

use crate::time::Timestamp;

/// One version of a cell, borrowed, as the merge rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VersionRef<'a> {
    /// The write timestamp (`USING TIMESTAMP`).
    pub timestamp: Timestamp,
    /// The value, with its expiry, or the deletion mark.
    pub state: StateRef<'a>,
}

/// When a value written with a TTL expires, and that TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Expiry {
    /// When the value stops being live (Cassandra's `localExpirationTime`): the time of
    /// the write (the coordinator's, in Cassandra) plus the TTL.
    pub at: u64,
    /// The TTL it was written with, in the unit of `at`; on equal expiries the smaller
    /// wins (rule 3).
    pub ttl: u64,
}

impl Expiry {
    /// The expiry of a value written at `written_at` with `ttl`.
    pub fn after(written_at: u64, ttl: u64) -> Self {
        Expiry {
            at: written_at.saturating_add(ttl),
            ttl,
        }
    }
}

/// What a [`VersionRef`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateRef<'a> {
    /// A value written without TTL.
    Value(&'a [u8]),
    /// A value written with a TTL, live until its expiry (and a tombstone afterwards),
    /// which the rule treats as a value with a TTL either way.
    Expiring {
        /// The value.
        value: &'a [u8],
        /// When it expires and the TTL it was written with.
        expiry: Expiry,
    },
    /// A tombstone.
    Tombstone {
        /// When the deletion happened (Cassandra's `localDeletionTime`).
        deleted_at: u64,
    },
}

impl StateRef<'_> {
    /// 0 for a value without TTL, 1 for a value with one, 2 for a tombstone: rule 2.
    fn class(self) -> u8 {
        match self {
            StateRef::Value(_) => 0,
            StateRef::Expiring { .. } => 1,
            StateRef::Tombstone { .. } => 2,
        }
    }

    /// The expiry or deletion time that rule 3 compares (none for a value without TTL).
    fn local_deletion_time(self) -> u64 {
        match self {
            StateRef::Value(_) => 0,
            StateRef::Expiring { expiry, .. } => expiry.at,
            StateRef::Tombstone { deleted_at } => deleted_at,
        }
    }

    /// The TTL that rule 3 compares between equal expiries (none but a value's).
    fn ttl(self) -> u64 {
        match self {
            StateRef::Expiring { expiry, .. } => expiry.ttl,
            StateRef::Value(_) | StateRef::Tombstone { .. } => 0,
        }
    }
}

impl<'a> StateRef<'a> {
    /// The bytes that rule 4 compares (none for a tombstone).
    fn bytes(self) -> &'a [u8] {
        match self {
            StateRef::Value(value) | StateRef::Expiring { value, .. } => value,
            StateRef::Tombstone { .. } => &[],
        }
    }
}

impl<'a> VersionRef<'a> {
    /// A value without TTL.
    pub fn value(timestamp: Timestamp, value: &'a [u8]) -> Self {
        VersionRef {
            timestamp,
            state: StateRef::Value(value),
        }
    }

    /// A value that expires as `expiry` says, or never if `None`.
    pub fn live(timestamp: Timestamp, value: &'a [u8], expiry: Option<Expiry>) -> Self {
        let state = match expiry {
            Some(expiry) => StateRef::Expiring { value, expiry },
            None => StateRef::Value(value),
        };
        VersionRef { timestamp, state }
    }

    /// A tombstone deleted at `deleted_at`.
    pub fn tombstone(timestamp: Timestamp, deleted_at: u64) -> Self {
        VersionRef {
            timestamp,
            state: StateRef::Tombstone { deleted_at },
        }
    }

    /// How `self` ranks against `other` by the merge rule: `Greater` when `self` wins.
    pub fn precedence(&self, other: &VersionRef<'_>) -> Ordering {
        self.timestamp
            .cmp(&other.timestamp)
            .then_with(|| self.state.class().cmp(&other.state.class()))
            .then_with(|| {
                self.state
                    .local_deletion_time()
                    .cmp(&other.state.local_deletion_time())
            })
            .then_with(|| other.state.ttl().cmp(&self.state.ttl()))
            .then_with(|| self.state.bytes().cmp(other.state.bytes()))
    }

    /// True when `self` wins over `other`: a replica holding `other` replaces it by `self`.
    pub fn supersedes(&self, other: &VersionRef<'_>) -> bool {
        self.precedence(other) == Ordering::Greater
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(micros: u64) -> Timestamp {
        Timestamp::from_micros(micros)
    }

    #[test]
    fn the_higher_timestamp_wins_whatever_the_kind() {
        let old = VersionRef::tombstone(ts(1), 99);
        assert!(VersionRef::value(ts(2), b"").supersedes(&old));
        assert!(
            VersionRef::tombstone(ts(3), 0).supersedes(&VersionRef::live(
                ts(2),
                b"z",
                Some(Expiry::after(0, 9))
            ))
        );
        assert!(!VersionRef::value(ts(1), b"z").supersedes(&VersionRef::value(ts(2), b"a")));
    }

    #[test]
    fn on_a_tie_a_tombstone_beats_a_value_with_a_ttl_which_beats_one_without() {
        let plain = VersionRef::value(ts(5), b"\xff");
        let expiring = VersionRef::live(ts(5), b"", Some(Expiry::after(0, 1)));
        let tombstone = VersionRef::tombstone(ts(5), 0);
        assert!(tombstone.supersedes(&expiring));
        assert!(tombstone.supersedes(&plain));
        assert!(expiring.supersedes(&plain));
        assert!(!plain.supersedes(&expiring));
    }

    #[test]
    fn on_a_tie_of_ttls_the_later_expiry_wins_before_the_value() {
        let early = VersionRef::live(ts(5), b"\xff", Some(Expiry::after(0, 10)));
        let late = VersionRef::live(ts(5), b"", Some(Expiry::after(0, 11)));
        assert!(late.supersedes(&early));
        assert!(VersionRef::tombstone(ts(5), 8).supersedes(&VersionRef::tombstone(ts(5), 7)));
    }

    /// Found by the differential test on Cassandra 5.0.6: `"b"` written with a TTL of 2 s
    /// and, one second later, `""` with the same timestamp and a TTL of 1 s expire together,
    /// and Cassandra keeps `""` (`resolveRegular` prefers the smaller TTL).
    #[test]
    fn on_a_tie_of_expiries_the_smaller_ttl_wins_before_the_value() {
        let first = VersionRef::live(ts(3), b"b", Some(Expiry::after(100, 2)));
        let second = VersionRef::live(ts(3), b"", Some(Expiry::after(101, 1)));
        assert!(second.supersedes(&first));
        assert!(!first.supersedes(&second));
    }

    #[test]
    fn on_a_tie_of_values_the_greater_unsigned_bytes_win() {
        let value = |bytes: &'static [u8]| VersionRef::value(ts(7), bytes);
        // md5("a") < md5("b"): the thesis's rule kept "a"; Cassandra 5.0 keeps "b".
        assert!(value(b"b").supersedes(&value(b"a")));
        assert!(value(b"\x80").supersedes(&value(b"\x7f")));
        assert!(value(b"ab").supersedes(&value(b"a")));
        assert!(value(b"a").supersedes(&value(b"")));
        let expiring =
            |bytes: &'static [u8]| VersionRef::live(ts(7), bytes, Some(Expiry::after(1, 2)));
        assert!(expiring(b"b").supersedes(&expiring(b"a")));
    }

    fn any_version() -> impl Strategy<Value = (u64, u8, u64, u64, &'static [u8])> {
        (
            0u64..3,
            0u8..3,
            0u64..3,
            1u64..3,
            prop::sample::select(vec![&b""[..], b"a", b"b", b"ab", b"\x80"]),
        )
    }

    fn version(
        (timestamp, class, time, ttl, value): (u64, u8, u64, u64, &'static [u8]),
    ) -> VersionRef<'static> {
        match class {
            0 => VersionRef::value(ts(timestamp), value),
            1 => VersionRef::live(ts(timestamp), value, Some(Expiry::after(time, ttl))),
            _ => VersionRef::tombstone(ts(timestamp), time),
        }
    }

    proptest! {
        #[test]
        fn the_order_is_total_and_consistent_with_equality(a in any_version(), b in any_version()) {
            let (a, b) = (version(a), version(b));
            prop_assert_eq!(a.precedence(&b), b.precedence(&a).reverse());
            prop_assert_eq!(a.precedence(&b) == Ordering::Equal, a == b);
        }

        #[test]
        fn the_order_is_transitive(a in any_version(), b in any_version(), c in any_version()) {
            let (a, b, c) = (version(a), version(b), version(c));
            if a.precedence(&b) != Ordering::Less && b.precedence(&c) != Ordering::Less {
                prop_assert_ne!(a.precedence(&c), Ordering::Less);
            }
        }
    }
}
