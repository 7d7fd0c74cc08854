//! Wake-up hints (docs/algorithm.md, section "Wake-up hints"): a holder tells the owners
//! queued right behind it, directly and outside the storage, that the lock moved, so that
//! they read at once instead of at their next poll.
//!
//! A hint carries no authority. It names the lock and the owner it is for, and all a
//! waiter does with it is send its next read sooner, at most once a round trip: a lost,
//! late, repeated or forged hint costs at most a read and never decides who holds.
//!
//! Two encodings live here, both parsed without panicking whatever the bytes:
//!
//! * the **queue cell value** of an owner that listens for hints: `wake:` and its listener's
//!   socket address as text (`wake:192.0.2.7:7401`, `wake:[2001:db8::7]:7401`). A queue
//!   cell with any other value (an empty one, as lockers without hints write) names no
//!   listener;
//! * the **datagram**: a header of four bytes, the lock id's length (two bytes, big-endian)
//!   and UTF-8 text, the owner id's length (one byte) and text. Nothing follows. The header
//!   says what the hint tells its owner ([`HintKind`]): `LKH1` (the magic `LKH` and format
//!   version `1`), "the lock moved, read now", which a holder sends the owners queued
//!   behind it; `LKW1`, "an owner waits behind you", which the owner next in line sends the
//!   owner first in the queue, so that a lock found idle does not linger after its release
//!   ([`crate::LockConfig::linger`]).
//!
//! ```
//! use lock_core::hint::{self, WakeHint};
//! use lock_core::{LockId, OwnerId};
//!
//! let address = "192.0.2.7:7401".parse().unwrap();
//! assert_eq!(hint::listener_in_queue_value(&hint::queue_value(address)), Some(address));
//! assert_eq!(hint::listener_in_queue_value(b""), None);
//!
//! let wake = WakeHint {
//!     lock_id: LockId::new("account:42").unwrap(),
//!     owner: OwnerId::new("web-1-00ff").unwrap(),
//!     kind: hint::HintKind::Moved,
//! };
//! assert_eq!(WakeHint::decode(&wake.encode()).unwrap(), wake);
//! assert!(WakeHint::decode(b"LKH1\0").is_err());
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use crate::column::{ColumnName, QueueColumn};
use crate::error::Error;
use crate::id::{LockId, OwnerId};
use crate::storage::Cell;

/// How many of the owners queued behind a holder it hints: the one next in line, and one
/// more in case that one has gone.
pub const SUCCESSORS_HINTED: usize = 2;

/// How many places back a listening owner stops pacing its polls by the hand-offs and
/// waits for hints instead: the owners ahead hint it once it is within
/// [`SUCCESSORS_HINTED`] places of the front.
pub const RELAXED_PLACES: usize = SUCCESSORS_HINTED + 1;

/// How often a listening owner [`RELAXED_PLACES`] or more places back still polls (or
/// `poll.max_interval`, if that is shorter), in case hints are lost.
pub const FALLBACK_POLL: Duration = Duration::from_millis(50);

/// The prefix of a queue cell value that names its owner's hint listener.
const QUEUE_VALUE_PREFIX: &[u8] = b"wake:";

/// The longest queue cell value read as a listener's address: the prefix and the longest
/// IPv6 socket address with a scope id.
const QUEUE_VALUE_MAX_LEN: usize = 72;

/// The first bytes of a [`HintKind::Moved`] datagram: the magic and the format version.
const MOVED_HEADER: &[u8; 4] = b"LKH1";

/// The first bytes of a [`HintKind::Wanted`] datagram.
const WANTED_HEADER: &[u8; 4] = b"LKW1";

/// The longest hint datagram: the header, the lock id and owner id at their longest with
/// their lengths. A receive buffer of this size holds any valid hint.
pub const MAX_DATAGRAM_LEN: usize = MOVED_HEADER.len() + 2 + LockId::MAX_LEN + 1 + OwnerId::MAX_LEN;

/// The queue cell value of an owner whose hint listener is at `listener`.
pub fn queue_value(listener: SocketAddr) -> Vec<u8> {
    let mut value = QUEUE_VALUE_PREFIX.to_vec();
    value.extend_from_slice(listener.to_string().as_bytes());
    value
}

/// The hint listener a queue cell value names, if it names one. Anything else (an empty
/// value, another locker's format, bytes that are not an address) names none.
pub fn listener_in_queue_value(value: &[u8]) -> Option<SocketAddr> {
    if value.len() > QUEUE_VALUE_MAX_LEN {
        return None;
    }
    let address = value.strip_prefix(QUEUE_VALUE_PREFIX)?;
    std::str::from_utf8(address).ok()?.parse().ok()
}

/// An owner queued behind a holder, with the listener its queue cell named: where the
/// holder sends its hints.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Successor {
    /// The waiting owner.
    pub owner: OwnerId,
    /// Its hint listener.
    pub listener: SocketAddr,
}

/// The owners of the queue cells among `cells` (a queue read's answer, in queue order) that
/// name a hint listener, passing over the cell named `own`, if given.
pub fn listeners_queued<'a>(
    cells: &'a [Cell],
    own: Option<&'a ColumnName>,
) -> impl Iterator<Item = Successor> + 'a {
    cells
        .iter()
        .filter(move |cell| own != Some(&cell.column))
        .filter_map(|cell| {
            let listener = listener_in_queue_value(&cell.value)?;
            let column = QueueColumn::decode(cell.column.as_str()).ok()?;
            Some(Successor {
                owner: column.owner,
                listener,
            })
        })
}

/// The hints for `successors`, waiting for `lock_id`, each with the address to send it to.
pub fn addressed(lock_id: &LockId, successors: &[Successor]) -> Vec<(SocketAddr, WakeHint)> {
    successors
        .iter()
        .map(|successor| {
            let wake = WakeHint {
                lock_id: lock_id.clone(),
                owner: successor.owner.clone(),
                kind: HintKind::Moved,
            };
            (successor.listener, wake)
        })
        .collect()
}

/// What a hint tells the owner it is for. Neither kind decides who holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HintKind {
    /// "The lock moved, read now": to an owner waiting for the lock, from the holder as it
    /// takes and releases the lock. The owner sends its next read at once.
    Moved,
    /// "An owner waits behind you": to the owner first in the queue, from the owner next in
    /// line. If it found the lock idle, its release does not linger, and a linger under way
    /// ends at once (docs/algorithm.md, section "Lingering after a release").
    Wanted,
}

/// A hint for `owner`, about `lock_id`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WakeHint {
    /// The lock.
    pub lock_id: LockId,
    /// The owner the hint is for.
    pub owner: OwnerId,
    /// What it tells that owner.
    pub kind: HintKind,
}

impl WakeHint {
    /// The datagram that carries this hint, at most [`MAX_DATAGRAM_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let lock_id = self.lock_id.as_str().as_bytes();
        let owner = self.owner.as_str().as_bytes();
        let mut datagram = Vec::with_capacity(MOVED_HEADER.len() + 3 + lock_id.len() + owner.len());
        datagram.extend_from_slice(match self.kind {
            HintKind::Moved => MOVED_HEADER,
            HintKind::Wanted => WANTED_HEADER,
        });
        // Both lengths fit: a lock id has at most 256 bytes, an owner id at most 100.
        datagram.extend_from_slice(
            &u16::try_from(lock_id.len())
                .unwrap_or(u16::MAX)
                .to_be_bytes(),
        );
        datagram.extend_from_slice(lock_id);
        datagram.push(u8::try_from(owner.len()).unwrap_or(u8::MAX));
        datagram.extend_from_slice(owner);
        datagram
    }

    /// Parses a received datagram; [`Error::MalformedWakeHint`] says what is wrong with
    /// one that is not a hint.
    pub fn decode(datagram: &[u8]) -> Result<WakeHint, Error> {
        let malformed = |reason| Error::MalformedWakeHint { reason };
        let (kind, rest) = match datagram.split_first_chunk::<4>() {
            Some((MOVED_HEADER, rest)) => (HintKind::Moved, rest),
            Some((WANTED_HEADER, rest)) => (HintKind::Wanted, rest),
            _ => {
                return Err(malformed(
                    "it does not start with `LKH1` or `LKW1`, a magic and version 1",
                ));
            }
        };
        let (length, rest) = rest
            .split_first_chunk::<2>()
            .ok_or_else(|| malformed("it ends before the lock id's length"))?;
        let length = usize::from(u16::from_be_bytes(*length));
        let (lock_id, rest) = rest
            .split_at_checked(length)
            .ok_or_else(|| malformed("it ends inside the lock id"))?;
        let (&length, rest) = rest
            .split_first()
            .ok_or_else(|| malformed("it ends before the owner id's length"))?;
        let (owner, rest) = rest
            .split_at_checked(usize::from(length))
            .ok_or_else(|| malformed("it ends inside the owner id"))?;
        if !rest.is_empty() {
            return Err(malformed("bytes follow the owner id"));
        }
        let text = |bytes| std::str::from_utf8(bytes).map_err(|_| malformed("an id is not UTF-8"));
        Ok(WakeHint {
            lock_id: LockId::new(text(lock_id)?)?,
            owner: OwnerId::new(text(owner)?)?,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn hint(lock_id: &str, owner: &str) -> WakeHint {
        WakeHint {
            lock_id: LockId::new(lock_id).unwrap(),
            owner: OwnerId::new(owner).unwrap(),
            kind: HintKind::Moved,
        }
    }

    #[test]
    fn the_longest_ids_fit_the_largest_datagram() {
        let longest = hint(
            &"é".repeat(LockId::MAX_LEN / 2),
            &"o".repeat(OwnerId::MAX_LEN),
        );
        let datagram = longest.encode();
        assert_eq!(datagram.len(), MAX_DATAGRAM_LEN);
        assert_eq!(WakeHint::decode(&datagram).unwrap(), longest);
    }

    #[test]
    fn the_header_tells_the_kinds_apart_and_a_moved_hint_keeps_the_first_format() {
        let moved = hint("l", "o");
        assert_eq!(moved.encode(), b"LKH1\0\x01l\x01o");
        let wanted = WakeHint {
            kind: HintKind::Wanted,
            ..moved.clone()
        };
        assert_eq!(wanted.encode(), b"LKW1\0\x01l\x01o");
        assert_eq!(WakeHint::decode(&wanted.encode()).unwrap(), wanted);
        assert_eq!(WakeHint::decode(&moved.encode()).unwrap(), moved);
    }

    #[test]
    fn every_malformed_datagram_says_why() {
        let good = hint("l", "o").encode();
        let cases: [(&[u8], &str); 7] = [
            (b"", "magic"),
            (b"LKH2\0\x01l\x01o", "magic"),
            (b"LKH1\0", "lock id's length"),
            (b"LKH1\0\x05ab", "inside the lock id"),
            (b"LKH1\0\x01l", "owner id's length"),
            (b"LKH1\0\x01l\x03o", "inside the owner id"),
            (&[good.as_slice(), b"x"].concat(), "follow"),
        ];
        for (datagram, reason) in cases {
            match WakeHint::decode(datagram) {
                Err(Error::MalformedWakeHint { reason: said }) => {
                    assert!(said.contains(reason), "{datagram:?}: {said}");
                }
                other => panic!("{datagram:?}: {other:?}"),
            }
        }
        assert!(matches!(
            WakeHint::decode(b"LKH1\0\x01l\x01 "),
            Err(Error::InvalidOwnerId { .. })
        ));
        assert!(matches!(
            WakeHint::decode(b"LKH1\0\0\x01o"),
            Err(Error::InvalidLockId { .. })
        ));
        assert!(matches!(
            WakeHint::decode(b"LKH1\0\x01\xff\x01o"),
            Err(Error::MalformedWakeHint { .. })
        ));
    }

    #[test]
    fn queue_values_name_a_listener_only_in_their_own_format() {
        for text in ["192.0.2.7:7401", "[2001:db8::7]:0", "[fe80::1%4]:65535"] {
            let address: SocketAddr = text.parse().unwrap();
            let value = queue_value(address);
            assert!(value.len() <= QUEUE_VALUE_MAX_LEN);
            assert_eq!(listener_in_queue_value(&value), Some(address), "{text}");
        }
        let longest: SocketAddr =
            "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255%4294967295]:65535"
                .parse()
                .unwrap();
        assert_eq!(
            listener_in_queue_value(&queue_value(longest)),
            Some(longest)
        );
        for value in [
            &b""[..],
            b"wake:",
            b"wake:localhost:80",
            b"192.0.2.7:7401",
            b"wake:\xff",
        ] {
            assert_eq!(listener_in_queue_value(value), None, "{value:?}");
        }
    }

    proptest! {
        // Seeded, so that every run checks the same inputs; the fuzz-style breadth comes
        // from the case count.
        #![proptest_config(ProptestConfig {
            cases: 2048,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x11a7),
            ..ProptestConfig::default()
        })]

        #[test]
        fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = WakeHint::decode(&bytes);
            let _ = listener_in_queue_value(&bytes);
        }

        #[test]
        fn a_hint_survives_its_encoding(lock_id in "[^\\p{C}\\p{Zl}\\p{Zp}]{1,64}", owner in "[A-Za-z0-9._:@-]{1,100}", wanted in any::<bool>()) {
            let wake = WakeHint {
                lock_id: LockId::new(&lock_id).unwrap(),
                owner: OwnerId::new(&owner).unwrap(),
                kind: if wanted { HintKind::Wanted } else { HintKind::Moved },
            };
            prop_assert_eq!(WakeHint::decode(&wake.encode()).unwrap(), wake);
        }

        #[test]
        fn a_cut_or_extended_hint_is_refused(cut in 0usize..40, extra in proptest::collection::vec(any::<u8>(), 1..8)) {
            let datagram = hint("account:42", "web-1-00ff").encode();
            let cut = cut.min(datagram.len() - 1);
            prop_assert!(WakeHint::decode(&datagram[..cut]).is_err());
            prop_assert!(WakeHint::decode(&[datagram.as_slice(), &extra].concat()).is_err());
        }

        #[test]
        fn any_address_survives_the_queue_value(address in any::<(std::net::IpAddr, u16)>().prop_map(SocketAddr::from)) {
            prop_assert_eq!(listener_in_queue_value(&queue_value(address)), Some(address));
        }
    }
}
