//! Validating text as ids: the constructors of [`LockId`] and [`OwnerId`], their parsing,
//! and [`IntoLockId`]. The id types themselves know nothing of the crate's [`Error`], which
//! carries a [`LockId`]; only their validation returns it.

use crate::error::{Error, excerpt};

use super::{LockId, OwnerId};

impl LockId {
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

impl OwnerId {
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
}

fn is_owner_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'@' | b'-')
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
