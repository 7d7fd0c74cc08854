//! Fencing tokens: a number per acquisition that only grows from holder to holder.

use std::fmt;
use std::sync::LazyLock;

use crate::column::ColumnName;
use crate::id::LockId;
use crate::storage::{Cell, CellWrite, RowKey, RowKind, RowRead};
use crate::time::Timestamp;

/// The fence cell's column, built once: every fenced acquisition reads and writes it.
static FENCE_COLUMN: LazyLock<ColumnName> = LazyLock::new(|| ColumnName::new(FencingToken::COLUMN));

/// A fencing token (Chubby's sequencer, etcd's revision): strictly greater than the token of
/// every earlier holder of the same lock. Give it to the resource with every write, and have
/// the resource refuse a token lower than the highest it has seen; then a holder that was
/// paused past its lease cannot overwrite its successor's work.
///
/// # How it is made, and why it only grows
///
/// Each lock has a fence cell whose value equals its write timestamp, so last-write-wins
/// keeps the largest value ever written (the argument of Theorem 5). After an owner's
/// main-row check succeeds it reads the fence (QUORUM), picks
/// `token = max(fence + 1, now)`, writes it (QUORUM, timestamp = token) and only then counts
/// the lock as held, and only if its lease still has `request_timeout` to run.
///
/// Let H1 hold before H2. H1's fence write completed before H1 held, so before H1's main
/// cell could disappear (H1 released after holding, or its lease expired after its
/// deadline, which H1 checked after the fence write). H2's main-row read saw no H1 cell, so
/// that read completed after H1's cell disappeared, hence after H1's fence write completed.
/// H2 sends its fence read only after its main-row read completed, so by quorum
/// intersection (Lemma 1) it reads a value at least H1's token, and picks a larger one.
/// An owner paused between reading and writing the fence can only raise the fence; it
/// cannot hold with a stale token, because its lease check after the write fails.
///
/// Reading the fence in the same request as the main row would not do: the replicas of one
/// read answer at different times, and one could answer before H1's fence write arrived
/// while another answers after H1's release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// The fence cell's column.
    pub const COLUMN: &'static str = "fence";

    /// The token as a number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// A token with this value (for resources that store tokens).
    pub const fn new(value: u64) -> Self {
        FencingToken(value)
    }

    /// The token after the fence value `seen` (none if the fence was never written), at
    /// wall time `now`: greater than `seen`, and close to the time when clocks allow.
    pub(crate) fn after(seen: Option<FencingToken>, now: Timestamp) -> Self {
        let floor = seen.map_or(1, |seen| seen.0.saturating_add(1));
        FencingToken(floor.max(now.as_micros()).min(Timestamp::MAX.as_micros()))
    }

    pub(crate) fn row(lock_id: &LockId) -> RowKey {
        RowKey::new(RowKind::Fence, lock_id.clone())
    }

    pub(crate) fn read(lock_id: &LockId) -> RowRead {
        RowRead::single(Self::row(lock_id), FENCE_COLUMN.clone())
    }

    /// The fence value in a read's cells, if any.
    pub(crate) fn seen(cells: &[Cell]) -> Option<FencingToken> {
        let cell = cells
            .iter()
            .find(|cell| cell.column.as_str() == Self::COLUMN)?;
        let bytes: [u8; 8] = cell.value.as_slice().try_into().ok()?;
        Some(FencingToken(u64::from_be_bytes(bytes)))
    }

    /// The write that publishes this token: value and write timestamp both equal to it.
    pub(crate) fn write(self, lock_id: &LockId) -> CellWrite {
        CellWrite {
            row: Self::row(lock_id),
            column: FENCE_COLUMN.clone(),
            value: self.0.to_be_bytes().to_vec(),
            timestamp: Timestamp::from_micros(self.0),
            ttl: None,
        }
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_displays_as_its_number() {
        assert_eq!(FencingToken::new(42).to_string(), "42");
        assert_eq!(
            FencingToken::new(u64::MAX).to_string(),
            u64::MAX.to_string()
        );
    }

    #[test]
    fn tokens_grow_past_the_fence_and_track_time() {
        let now = Timestamp::from_micros(1_000);
        assert_eq!(FencingToken::after(None, now).get(), 1_000);
        assert_eq!(
            FencingToken::after(Some(FencingToken(5_000)), now).get(),
            5_001
        );
        assert_eq!(
            FencingToken::after(Some(FencingToken(10)), now).get(),
            1_000
        );
        let max = FencingToken(Timestamp::MAX.as_micros());
        assert_eq!(FencingToken::after(Some(max), now), max);
    }

    #[test]
    fn the_written_value_is_the_write_timestamp_and_reads_back() {
        let lock = LockId::new("l").unwrap();
        let token = FencingToken(123_456);
        let write = token.write(&lock);
        assert_eq!(write.timestamp.as_micros(), token.get());
        assert_eq!(write.ttl, None);
        let cell = Cell {
            column: write.column.clone(),
            value: write.value.clone(),
            write_timestamp: write.timestamp,
        };
        assert_eq!(FencingToken::seen(&[cell]), Some(token));
        assert_eq!(FencingToken::seen(&[]), None);
    }
}
