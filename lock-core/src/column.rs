//! Column names: the queue column (docs/algorithm.md, section "Queue column names") and plain owner columns.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, excerpt};
use crate::id::{OwnerId, shared_text_identity};
use crate::time::Timestamp;

/// The name of a cell within a row. Rows keep their cells sorted by the bytes of this name,
/// as Cassandra does for a `text` clustering column.
#[derive(Clone, PartialOrd, Ord)]
pub struct ColumnName(Arc<str>);

shared_text_identity!(ColumnName);

impl ColumnName {
    /// Wraps a name as read from, or to be written to, storage.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        ColumnName(name.into())
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ColumnName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl fmt::Display for ColumnName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&OwnerId> for ColumnName {
    /// Main-row and shadow-row cells are named by their owner.
    fn from(owner: &OwnerId) -> Self {
        ColumnName(owner.as_str().into())
    }
}

impl From<&QueueColumn> for ColumnName {
    fn from(column: &QueueColumn) -> Self {
        column.encode()
    }
}

/// A queue cell's name (docs/algorithm.md, section "Queue column names"): the enqueue time in microseconds as 20 decimal
/// digits, zero-padded, followed by the owner id.
///
/// Because the time part has a fixed width, the byte order of encoded names equals the order
/// of `(timestamp, owner)`, which is what this type's `Ord` compares: earlier arrivals first,
/// ties broken by owner id.
///
/// ```
/// use lock_core::{OwnerId, QueueColumn, Timestamp};
/// let column = QueueColumn::new(Timestamp::from_micros(42), OwnerId::new("a").unwrap());
/// assert_eq!(column.encode().as_str(), "00000000000000000042a");
/// assert_eq!(QueueColumn::decode(column.encode().as_str()).unwrap(), column);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueColumn {
    /// When the owner took its place in the queue.
    pub timestamp: Timestamp,
    /// Who is queued.
    pub owner: OwnerId,
}

impl QueueColumn {
    /// The number of digits in the time part.
    pub const TIME_DIGITS: usize = 20;

    /// A queue column for `owner` enqueued at `timestamp`.
    pub fn new(timestamp: Timestamp, owner: OwnerId) -> Self {
        QueueColumn { timestamp, owner }
    }

    /// The 20-digit time part alone: sorts before every queue column of `timestamp` or later,
    /// and after every earlier one. A queue read can start there.
    pub fn time_prefix(timestamp: Timestamp) -> ColumnName {
        let mut name = String::with_capacity(Self::TIME_DIGITS);
        push_time_digits(&mut name, timestamp);
        ColumnName::new(name)
    }

    /// The column name to store.
    pub fn encode(&self) -> ColumnName {
        let owner = self.owner.as_str();
        let mut name = String::with_capacity(Self::TIME_DIGITS + owner.len());
        push_time_digits(&mut name, self.timestamp);
        name.push_str(owner);
        ColumnName::new(name)
    }

    /// Parses a stored name, rejecting anything [`QueueColumn::encode`] cannot produce.
    pub fn decode(name: &str) -> Result<Self, Error> {
        let timestamp = Self::decode_timestamp(name)?;
        let owner = OwnerId::new(&name[Self::TIME_DIGITS..]).map_err(|_| {
            malformed(
                name,
                "the owner id after the time prefix is empty or invalid",
            )
        })?;
        Ok(QueueColumn::new(timestamp, owner))
    }

    /// Parses only the enqueue time of a stored name (the owner id after it is not checked).
    pub fn decode_timestamp(name: &str) -> Result<Timestamp, Error> {
        let digits = name
            .get(..Self::TIME_DIGITS)
            .ok_or_else(|| malformed(name, "shorter than the 20-digit time prefix"))?;
        if !digits.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(malformed(
                name,
                "the first 20 characters are not all decimal digits",
            ));
        }
        let micros: u64 = digits
            .parse()
            .map_err(|_| malformed(name, "the time prefix does not fit in 64 bits"))?;
        if micros > Timestamp::MAX.as_micros() {
            return Err(malformed(
                name,
                "the time prefix is beyond the largest Cassandra timestamp",
            ));
        }
        Ok(Timestamp::from_micros(micros))
    }
}

fn malformed(name: &str, reason: &'static str) -> Error {
    Error::MalformedColumn {
        column: excerpt(name),
        reason,
    }
}

/// Appends `timestamp`'s microseconds as exactly [`QueueColumn::TIME_DIGITS`] zero-padded
/// decimal digits (every `u64` fits). A queue name is built on every acquisition, and
/// `format!` with a width costs several times more than `itoa` and the padding by hand.
fn push_time_digits(name: &mut String, timestamp: Timestamp) {
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(timestamp.as_micros());
    let padding = QueueColumn::TIME_DIGITS.saturating_sub(digits.len());
    name.extend(std::iter::repeat_n('0', padding));
    name.push_str(digits);
}

/// What a main cell's value says (docs/algorithm.md, sections "Who holds the lock" and "Queue floors and tombstones"): whose cell it
/// is and, when its owner wrote it after a queue read showed it first, that it names a head
/// of the queue, which a locker with no queue floor of its own may start its reads from.
///
/// ```
/// use lock_core::{MainCellValue, OwnerId, QueueColumn, Timestamp};
/// let column = QueueColumn::new(Timestamp::from_micros(42), OwnerId::new("a").unwrap());
/// let head = MainCellValue::Head(column.clone());
/// assert_eq!(head.encode(), b"^00000000000000000042a");
/// assert_eq!(MainCellValue::decode(&head.encode()).unwrap().head(), Some(&column));
/// assert_eq!(MainCellValue::decode(b"00000000000000000042a").unwrap().head(), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MainCellValue {
    /// A bare owner id, as versions before this encoding wrote.
    Owner(OwnerId),
    /// The owner's queue column, written before its owner knew its place (the fast path)
    /// or by a version before [`MainCellValue::Head`]: it tells who was ahead of whom, but
    /// nothing about the queue's head.
    Queued(QueueColumn),
    /// [`MainCellValue::HEAD_MARK`] and the owner's queue column, written after a queue
    /// read showed that column first: every waiter's column sorts after it, but for cells
    /// within a floor margin before it (section "Queue floors and tombstones").
    Head(QueueColumn),
}

impl MainCellValue {
    /// The byte that opens a [`MainCellValue::Head`]; it can open neither an owner id nor a
    /// queue column.
    pub const HEAD_MARK: u8 = b'^';

    /// The bytes to store.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            MainCellValue::Owner(owner) => owner.as_str().as_bytes().to_vec(),
            MainCellValue::Queued(column) => column.encode().as_str().as_bytes().to_vec(),
            MainCellValue::Head(column) => {
                let encoded = column.encode();
                let mut bytes = Vec::with_capacity(1 + encoded.as_str().len());
                bytes.push(Self::HEAD_MARK);
                bytes.extend_from_slice(encoded.as_str().as_bytes());
                bytes
            }
        }
    }

    /// Parses a stored value, rejecting anything [`MainCellValue::encode`] cannot produce.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let text = std::str::from_utf8(bytes).map_err(|_| Error::MalformedColumn {
            column: excerpt(&String::from_utf8_lossy(bytes)),
            reason: "a main cell's value is not UTF-8",
        })?;
        if let Some(column) = text.strip_prefix(char::from(Self::HEAD_MARK)) {
            return QueueColumn::decode(column).map(MainCellValue::Head);
        }
        QueueColumn::decode(text)
            .map(MainCellValue::Queued)
            .or_else(|_| OwnerId::new(text).map(MainCellValue::Owner))
            .map_err(|_| {
                malformed(
                    text,
                    "a main cell's value is neither an owner id nor a queue column",
                )
            })
    }

    /// Whose cell it is.
    pub fn owner(&self) -> &OwnerId {
        match self {
            MainCellValue::Owner(owner) => owner,
            MainCellValue::Queued(column) | MainCellValue::Head(column) => &column.owner,
        }
    }

    /// The owner's queue column, if the value carries it.
    pub fn queue_column(&self) -> Option<&QueueColumn> {
        match self {
            MainCellValue::Owner(_) => None,
            MainCellValue::Queued(column) | MainCellValue::Head(column) => Some(column),
        }
    }

    /// The queue head the owner saw, if it wrote the cell after seeing itself first.
    pub fn head(&self) -> Option<&QueueColumn> {
        match self {
            MainCellValue::Head(column) => Some(column),
            MainCellValue::Owner(_) | MainCellValue::Queued(_) => None,
        }
    }
}

impl fmt::Display for QueueColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn owner_strategy() -> impl Strategy<Value = OwnerId> {
        "[A-Za-z0-9._:@-]{1,40}".prop_map(|text| OwnerId::new(text).unwrap())
    }

    fn timestamp_strategy() -> impl Strategy<Value = Timestamp> {
        prop_oneof![
            (0..=Timestamp::MAX.as_micros()).prop_map(Timestamp::from_micros),
            (0u64..1_000).prop_map(Timestamp::from_micros),
            Just(Timestamp::MAX),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(timestamp in timestamp_strategy(), owner in owner_strategy()) {
            let column = QueueColumn::new(timestamp, owner);
            let encoded = column.encode();
            prop_assert_eq!(encoded.as_str().len(), 20 + column.owner.as_str().len());
            prop_assert_eq!(QueueColumn::decode_timestamp(encoded.as_str()).unwrap(), timestamp);
            prop_assert_eq!(QueueColumn::decode(encoded.as_str()).unwrap(), column);
        }

        #[test]
        fn the_time_part_is_the_zero_padded_decimal_micros(timestamp in timestamp_strategy()) {
            let expected = format!("{:020}", timestamp.as_micros());
            let prefix = QueueColumn::time_prefix(timestamp);
            prop_assert_eq!(prefix.as_str(), expected.as_str());
        }

        #[test]
        fn byte_order_equals_arrival_order(
            a in (timestamp_strategy(), owner_strategy()),
            b in (timestamp_strategy(), owner_strategy()),
        ) {
            let a = QueueColumn::new(a.0, a.1);
            let b = QueueColumn::new(b.0, b.1);
            prop_assert_eq!(a.cmp(&b), a.encode().as_str().as_bytes().cmp(b.encode().as_str().as_bytes()));
            prop_assert_eq!(a.cmp(&b), a.encode().cmp(&b.encode()));
            if a.timestamp < b.timestamp {
                prop_assert!(a.encode() < b.encode());
            }
        }

        #[test]
        fn equal_timestamps_are_ordered_by_owner(
            timestamp in timestamp_strategy(),
            a in owner_strategy(),
            b in owner_strategy(),
        ) {
            let ca = QueueColumn::new(timestamp, a.clone());
            let cb = QueueColumn::new(timestamp, b.clone());
            prop_assert_eq!(ca.encode().cmp(&cb.encode()), a.as_str().cmp(b.as_str()));
        }

        #[test]
        fn decode_never_panics(text in "\\PC{0,60}") {
            let _ = QueueColumn::decode(&text);
        }

        #[test]
        fn main_cell_values_round_trip(
            timestamp in timestamp_strategy(),
            owner in owner_strategy(),
            kind in 0u8..3,
        ) {
            let column = QueueColumn::new(timestamp, owner.clone());
            let value = match kind {
                0 => MainCellValue::Owner(owner),
                1 => MainCellValue::Queued(column),
                _ => MainCellValue::Head(column),
            };
            prop_assert_eq!(MainCellValue::decode(&value.encode()).unwrap(), value);
        }

        #[test]
        fn main_cell_value_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..60)) {
            let _ = MainCellValue::decode(&bytes);
        }
    }

    #[test]
    fn malformed_names_are_rejected() {
        for bad in [
            "",
            "0000000000000000004",
            "00000000000000000042",
            "0000000000000000004xowner",
            "99999999999999999999owner",
            "18446744073709551615owner",
            "00000000000000000042 spaced",
            "+0000000000000000042owner",
        ] {
            assert!(
                matches!(QueueColumn::decode(bad), Err(Error::MalformedColumn { .. })),
                "{bad:?} was accepted"
            );
        }
    }
}
