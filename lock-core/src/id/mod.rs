//! Validated identifiers: the resource being locked and the owner taking it. Their
//! validation, the only part that returns the crate's error, is in a module of its own, so
//! that the error (which names a [`LockId`]) and the ids do not import each other.

use std::fmt;
use std::sync::Arc;

mod validate;

pub use validate::IntoLockId;

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

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
