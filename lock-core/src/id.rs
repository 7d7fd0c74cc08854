//! Validated identifiers: the resource being locked and the owner taking it.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, excerpt};

/// Equality and hashing for a newtype over `Arc<str>`: by the text, but two handles on the
/// same allocation are equal without comparing it. Names and ids are cloned far more often
/// than built, so most comparisons take the shortcut (`Arc<str>`'s own `==` cannot: the
/// standard library takes it only for sized types).
macro_rules! shared_text_identity {
    ($name:ident) => {
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
            }
        }

        impl Eq for $name {}

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.hash(state);
            }
        }
    };
}
pub(crate) use shared_text_identity;

/// The id of a lockable resource (the thesis's `lockId`), for example `"account:42"`.
///
/// Valid ids are 1 to [`LockId::MAX_LEN`] bytes of UTF-8 with no control characters, no
/// format characters (Unicode category Cf: zero-width spaces and joiners, direction marks
/// and embeddings such as U+200E, U+202E and U+2066, the byte-order mark U+FEFF, soft
/// hyphens, tags; the full list is [`LockId::is_refused_char`]) and no line or paragraph
/// separators (U+2028, U+2029). The limit keeps every row key far below Cassandra's 64 KiB
/// partition-key limit and readable in logs; those characters are refused because they
/// make ids that look equal (or look like another id) in logs differ in storage.
///
/// ```
/// use lock_core::LockId;
/// let id = LockId::new("account:42").unwrap();
/// assert_eq!(id.as_str(), "account:42");
/// assert!(LockId::new("").is_err());
/// ```
#[derive(Clone, PartialOrd, Ord)]
pub struct LockId(Arc<str>);

shared_text_identity!(LockId);

impl LockId {
    /// The longest accepted lock id, in bytes.
    pub const MAX_LEN: usize = 256;

    /// Validates `value` as a lock id.
    pub fn new(value: impl AsRef<str>) -> Result<Self, Error> {
        let value = value.as_ref();
        let reject = |reason: String| Error::InvalidLockId {
            value: excerpt(value),
            reason,
        };
        if value.is_empty() {
            return Err(reject("it is empty".into()));
        }
        if value.len() > Self::MAX_LEN {
            return Err(reject(format!("it is too long ({} bytes)", value.len())));
        }
        if let Some((index, (byte, bad))) = value
            .char_indices()
            .enumerate()
            .find(|(_, (_, c))| c.is_control() || Self::is_refused_char(*c))
        {
            let kind = if bad.is_control() {
                "the control character"
            } else {
                "the invisible or direction-changing character"
            };
            return Err(reject(format!(
                "it contains {kind} U+{:04X} at character {index} (byte {byte}); remove it",
                u32::from(bad)
            )));
        }
        Ok(LockId(value.into()))
    }

    /// Whether `c` is a format character (Unicode general category Cf, as of Unicode 16)
    /// or a line or paragraph separator: invisible, or changing the direction of the text
    /// around it, so refused in lock ids. Control characters (Cc) are refused separately.
    pub const fn is_refused_char(c: char) -> bool {
        matches!(
            c,
            '\u{00AD}'                     // soft hyphen
                | '\u{0600}'..='\u{0605}'  // Arabic number signs
                | '\u{061C}'               // Arabic letter mark
                | '\u{06DD}'               // Arabic end of ayah
                | '\u{070F}'               // Syriac abbreviation mark
                | '\u{0890}'..='\u{0891}'  // Arabic pound and piastre marks above
                | '\u{08E2}'               // Arabic disputed end of ayah
                | '\u{180E}'               // Mongolian vowel separator
                | '\u{200B}'..='\u{200F}'  // zero-width space, (non-)joiner, LRM, RLM
                | '\u{2028}'..='\u{2029}'  // line and paragraph separators (Zl, Zp)
                | '\u{202A}'..='\u{202E}'  // bidirectional embeddings and overrides
                | '\u{2060}'..='\u{2064}'  // word joiner, invisible operators
                | '\u{2066}'..='\u{206F}'  // bidirectional isolates, deprecated formats
                | '\u{FEFF}'               // zero-width no-break space, byte-order mark
                | '\u{FFF9}'..='\u{FFFB}'  // interlinear annotation
                | '\u{110BD}'              // Kaithi number sign
                | '\u{110CD}'              // Kaithi number sign above
                | '\u{13430}'..='\u{1343F}' // Egyptian hieroglyph format controls
                | '\u{1BCA0}'..='\u{1BCA3}' // shorthand format controls
                | '\u{1D173}'..='\u{1D17A}' // musical symbol format controls
                | '\u{E0001}'              // language tag
                | '\u{E0020}'..='\u{E007F}' // tag characters
        )
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockId({:?})", &*self.0)
    }
}

impl fmt::Display for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<&str> for LockId {
    type Error = Error;
    fn try_from(value: &str) -> Result<Self, Error> {
        LockId::new(value)
    }
}

impl TryFrom<String> for LockId {
    type Error = Error;
    fn try_from(value: String) -> Result<Self, Error> {
        LockId::new(value)
    }
}

impl std::str::FromStr for LockId {
    type Err = Error;
    fn from_str(value: &str) -> Result<Self, Error> {
        LockId::new(value)
    }
}

/// Anything the locker accepts where a lock id is expected: a [`LockId`] or text that is
/// validated on the way in.
pub trait IntoLockId {
    /// Converts, validating text.
    fn into_lock_id(self) -> Result<LockId, Error>;
}

impl IntoLockId for LockId {
    fn into_lock_id(self) -> Result<LockId, Error> {
        Ok(self)
    }
}

impl IntoLockId for &LockId {
    fn into_lock_id(self) -> Result<LockId, Error> {
        Ok(self.clone())
    }
}

impl IntoLockId for &str {
    fn into_lock_id(self) -> Result<LockId, Error> {
        LockId::new(self)
    }
}

impl IntoLockId for String {
    fn into_lock_id(self) -> Result<LockId, Error> {
        LockId::new(self)
    }
}

impl IntoLockId for &String {
    fn into_lock_id(self) -> Result<LockId, Error> {
        LockId::new(self)
    }
}

/// The id of one acquisition (the thesis's `threadId`).
///
/// The locker makes a fresh owner id for every acquisition, a UUID v4 optionally prefixed
/// with a name you choose (such as the host name), so that a stale cell of an earlier
/// acquisition can never be mistaken for a current one.
///
/// Valid ids are 1 to [`OwnerId::MAX_LEN`] characters from `[A-Za-z0-9._:@-]`. The set keeps
/// queue column names (`20 digits` + owner id) unambiguous and printable.
///
/// ```
/// use lock_core::OwnerId;
/// let owner = OwnerId::from_random_bytes(Some("web-1"), [7; 16]).unwrap();
/// assert!(owner.as_str().starts_with("web-1-"));
/// assert!(OwnerId::new("has space").is_err());
/// ```
#[derive(Clone, PartialOrd, Ord)]
pub struct OwnerId(Arc<str>);

shared_text_identity!(OwnerId);

impl OwnerId {
    /// The longest accepted owner id, in characters (all ASCII).
    pub const MAX_LEN: usize = 100;

    /// Validates `value` as an owner id.
    pub fn new(value: impl AsRef<str>) -> Result<Self, Error> {
        let value = value.as_ref();
        let reject = |reason| Error::InvalidOwnerId {
            value: excerpt(value),
            reason,
        };
        if value.is_empty() {
            return Err(reject("it is empty"));
        }
        if value.len() > Self::MAX_LEN {
            return Err(reject("it is too long"));
        }
        if !value.bytes().all(is_owner_byte) {
            return Err(reject("it contains a character outside the allowed set"));
        }
        Ok(OwnerId(value.into()))
    }

    /// Builds a UUID-v4 owner id from 16 random bytes, optionally behind `prefix-`.
    ///
    /// The bytes come from the caller so that this crate never reads ambient randomness; the
    /// async driver draws them from its seeded generator.
    pub fn from_random_bytes(prefix: Option<&str>, bytes: [u8; 16]) -> Result<Self, Error> {
        let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
        let mut uuid_text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        let uuid_text = uuid.hyphenated().encode_lower(&mut uuid_text);
        match prefix {
            Some(prefix) => {
                let mut text = String::with_capacity(prefix.len() + 1 + uuid_text.len());
                text.push_str(prefix);
                text.push('-');
                text.push_str(uuid_text);
                OwnerId::new(text)
            }
            None => OwnerId::new(uuid_text),
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_owner_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'@' | b'-')
}

impl fmt::Debug for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerId({:?})", &*self.0)
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for OwnerId {
    type Err = Error;
    fn from_str(value: &str) -> Result<Self, Error> {
        OwnerId::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_ids_are_validated() {
        assert!(LockId::new("account:42").is_ok());
        assert!(LockId::new("счёт/42 ✓").is_ok());
        assert!(matches!(
            LockId::new(""),
            Err(Error::InvalidLockId { reason, .. }) if reason == "it is empty"
        ));
        assert!(LockId::new("a".repeat(LockId::MAX_LEN)).is_ok());
        assert!(LockId::new("a".repeat(LockId::MAX_LEN + 1)).is_err());
        assert!(LockId::new("tab\there").is_err());
        assert!(LockId::new("nul\0").is_err());
    }

    #[test]
    fn long_rejected_values_are_cut_in_messages() {
        let err = LockId::new("x".repeat(10_000)).unwrap_err().to_string();
        assert!(err.len() < 300, "{err}");
        assert!(err.contains("too long"));
    }

    #[test]
    fn owner_ids_are_validated() {
        assert!(OwnerId::new("host-1:pid@42_a.b").is_ok());
        assert!(OwnerId::new("").is_err());
        assert!(OwnerId::new("with space").is_err());
        assert!(OwnerId::new("ünïcode").is_err());
        assert!(OwnerId::new("a".repeat(OwnerId::MAX_LEN + 1)).is_err());
    }

    #[test]
    fn ids_compare_and_hash_by_their_text() {
        use std::hash::BuildHasher;
        let hasher = std::hash::RandomState::new();
        let one = LockId::new("account:42").unwrap();
        let same_text = LockId::new(String::from("account:42")).unwrap();
        let other = LockId::new("account:43").unwrap();
        assert_eq!(one, one.clone());
        assert_eq!(one, same_text);
        assert_ne!(one, other);
        assert_eq!(hasher.hash_one(&one), hasher.hash_one(&same_text));
        assert_eq!(hasher.hash_one(&one), hasher.hash_one("account:42"));
        let owner = OwnerId::new("a").unwrap();
        assert_eq!(owner, OwnerId::new("a").unwrap());
        assert_ne!(owner, OwnerId::new("b").unwrap());
    }

    #[test]
    fn random_owner_ids_are_uuids_behind_an_optional_prefix() {
        let plain = OwnerId::from_random_bytes(None, [1; 16]).unwrap();
        let uuid = uuid::Builder::from_random_bytes([1; 16]).into_uuid();
        assert_eq!(plain.as_str(), uuid.hyphenated().to_string());
        let named = OwnerId::from_random_bytes(Some("web-1"), [1; 16]).unwrap();
        assert_eq!(named.as_str(), format!("web-1-{plain}"));
        assert!(OwnerId::from_random_bytes(Some("bad prefix"), [1; 16]).is_err());
        assert_ne!(plain, OwnerId::from_random_bytes(None, [2; 16]).unwrap());
    }
}
