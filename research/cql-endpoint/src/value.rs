//! The CQL types the endpoint uses, and their values on the wire.
//!
//! Encoding goes through `cassandra-protocol`'s value conversions; decoding is needed only
//! for the types a client can bind (`text`, `blob`, `int`, `bigint`, `list<text>`) and is
//! bounds-checked here.

use std::collections::BTreeMap;
use std::net::IpAddr;

use cassandra_protocol::frame::message_result::{ColType, ColTypeOption, ColTypeOptionValue};
use cassandra_protocol::types::CBytes;
use cassandra_protocol::types::value::Bytes;

use crate::error::CqlError;

/// A column or bind-marker type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CqlType {
    Text,
    Blob,
    Int,
    BigInt,
    Boolean,
    Double,
    Uuid,
    Inet,
    /// `set<text>`.
    TextSet,
    /// `list<text>` (frozen where a table says so).
    TextList,
    /// `map<text, text>` (frozen where a table says so).
    TextMap,
}

impl CqlType {
    /// The type as `system_schema.columns.type` spells it.
    pub(crate) fn cql_name(self) -> &'static str {
        match self {
            CqlType::Text => "text",
            CqlType::Blob => "blob",
            CqlType::Int => "int",
            CqlType::BigInt => "bigint",
            CqlType::Boolean => "boolean",
            CqlType::Double => "double",
            CqlType::Uuid => "uuid",
            CqlType::Inet => "inet",
            CqlType::TextSet => "set<text>",
            CqlType::TextList => "frozen<list<text>>",
            CqlType::TextMap => "frozen<map<text, text>>",
        }
    }

    /// The type's option in result and prepared metadata.
    pub(crate) fn option(self) -> ColTypeOption {
        let simple = |id| ColTypeOption { id, value: None };
        let boxed = |id| Box::new(simple(id));
        match self {
            CqlType::Text => simple(ColType::Varchar),
            CqlType::Blob => simple(ColType::Blob),
            CqlType::Int => simple(ColType::Int),
            CqlType::BigInt => simple(ColType::Bigint),
            CqlType::Boolean => simple(ColType::Boolean),
            CqlType::Double => simple(ColType::Double),
            CqlType::Uuid => simple(ColType::Uuid),
            CqlType::Inet => simple(ColType::Inet),
            CqlType::TextSet => ColTypeOption {
                id: ColType::Set,
                value: Some(ColTypeOptionValue::CSet(boxed(ColType::Varchar))),
            },
            CqlType::TextList => ColTypeOption {
                id: ColType::List,
                value: Some(ColTypeOptionValue::CList(boxed(ColType::Varchar))),
            },
            CqlType::TextMap => ColTypeOption {
                id: ColType::Map,
                value: Some(ColTypeOptionValue::CMap(
                    boxed(ColType::Varchar),
                    boxed(ColType::Varchar),
                )),
            },
        }
    }
}

/// A value in a result row, or a bound or literal value after decoding.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CqlValue {
    Text(String),
    Blob(Vec<u8>),
    Int(i32),
    BigInt(i64),
    Boolean(bool),
    Double(f64),
    Uuid([u8; 16]),
    Inet(IpAddr),
    TextSet(Vec<String>),
    TextList(Vec<String>),
    TextMap(BTreeMap<String, String>),
}

impl CqlValue {
    /// The value's cell in a result row.
    pub(crate) fn encode(&self) -> CBytes {
        let bytes: Bytes = match self {
            CqlValue::Text(text) => text.as_str().into(),
            CqlValue::Blob(blob) => return CBytes::new(blob.clone()),
            CqlValue::Int(int) => (*int).into(),
            CqlValue::BigInt(bigint) => (*bigint).into(),
            CqlValue::Boolean(boolean) => (*boolean).into(),
            CqlValue::Double(double) => (*double).into(),
            CqlValue::Uuid(uuid) => return CBytes::new(uuid.to_vec()),
            CqlValue::Inet(address) => (*address).into(),
            CqlValue::TextSet(items) | CqlValue::TextList(items) => items.clone().into(),
            CqlValue::TextMap(map) => map.clone().into(),
        };
        CBytes::new(bytes.into_inner())
    }

    /// The value as text, for filters on text columns.
    pub(crate) fn as_text(&self) -> Option<&str> {
        match self {
            CqlValue::Text(text) => Some(text),
            _ => None,
        }
    }
}

/// A value as a request carries it: bytes, null, or (protocol v4) "not set".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RawValue {
    Bytes(Vec<u8>),
    Null,
    Unset,
}

/// Decodes a bound value of type `ty`, named `name` in error messages. Null and unset
/// values come back as `None`; the caller decides whether they are allowed.
pub(crate) fn decode(
    ty: CqlType,
    raw: &RawValue,
    name: &str,
) -> Result<Option<CqlValue>, CqlError> {
    let bytes = match raw {
        RawValue::Bytes(bytes) => bytes.as_slice(),
        RawValue::Null | RawValue::Unset => return Ok(None),
    };
    let wrong_size = |expected: usize| {
        CqlError::Invalid(format!(
            "Expected {expected} or 0 byte value for {name} ({}), got {}",
            ty.cql_name(),
            bytes.len()
        ))
    };
    let value = match ty {
        CqlType::Text => CqlValue::Text(utf8(bytes, name)?),
        CqlType::Blob => CqlValue::Blob(bytes.to_vec()),
        CqlType::Int => {
            let array: [u8; 4] = bytes.try_into().map_err(|_| wrong_size(4))?;
            CqlValue::Int(i32::from_be_bytes(array))
        }
        CqlType::BigInt => {
            let array: [u8; 8] = bytes.try_into().map_err(|_| wrong_size(8))?;
            CqlValue::BigInt(i64::from_be_bytes(array))
        }
        CqlType::TextList => CqlValue::TextList(text_collection(bytes, name)?),
        CqlType::TextSet => CqlValue::TextSet(text_collection(bytes, name)?),
        CqlType::Boolean | CqlType::Double | CqlType::Uuid | CqlType::Inet | CqlType::TextMap => {
            return Err(CqlError::Invalid(format!(
                "values of type {} cannot be bound here ({name})",
                ty.cql_name()
            )));
        }
    };
    Ok(Some(value))
}

fn utf8(bytes: &[u8], name: &str) -> Result<String, CqlError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| CqlError::Invalid(format!("Invalid UTF-8 bytes for {name} (text)")))
}

/// A serialized `list<text>` or `set<text>`: `[int n]` then `n` times `[int len][bytes]`.
fn text_collection(bytes: &[u8], name: &str) -> Result<Vec<String>, CqlError> {
    let malformed = || CqlError::Invalid(format!("Malformed collection value for {name}"));
    let mut rest = bytes;
    let mut take = |count: usize| -> Result<&[u8], CqlError> {
        if rest.len() < count {
            return Err(malformed());
        }
        let (head, tail) = rest.split_at(count);
        rest = tail;
        Ok(head)
    };
    let count = i32::from_be_bytes(take(4)?.try_into().map_err(|_| malformed())?);
    let count = usize::try_from(count).map_err(|_| malformed())?;
    let mut items = Vec::new();
    for _ in 0..count {
        let length = i32::from_be_bytes(take(4)?.try_into().map_err(|_| malformed())?);
        let length = usize::try_from(length)
            .map_err(|_| CqlError::Invalid(format!("null elements are not allowed in {name}")))?;
        items.push(utf8(take(length)?, name)?);
    }
    if !rest.is_empty() {
        return Err(malformed());
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(value: CqlValue) -> Option<Vec<u8>> {
        value.encode().into_bytes()
    }

    #[test]
    fn values_encode_as_the_protocol_says() {
        assert_eq!(encoded(CqlValue::Int(1)), Some(vec![0, 0, 0, 1]));
        assert_eq!(encoded(CqlValue::BigInt(-1)), Some(vec![0xff; 8]));
        assert_eq!(
            encoded(CqlValue::Text("é".into())),
            Some("é".as_bytes().to_vec())
        );
        assert_eq!(
            encoded(CqlValue::TextSet(vec!["a".into()])),
            Some(vec![0, 0, 0, 1, 0, 0, 0, 1, b'a'])
        );
        let map = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
        assert_eq!(
            encoded(CqlValue::TextMap(map)),
            Some(vec![0, 0, 0, 1, 0, 0, 0, 1, b'k', 0, 0, 0, 1, b'v'])
        );
        assert_eq!(
            encoded(CqlValue::Inet("127.0.0.1".parse().unwrap())),
            Some(vec![127, 0, 0, 1])
        );
    }

    #[test]
    fn bound_values_decode_strictly() {
        let bytes = |b: &[u8]| RawValue::Bytes(b.to_vec());
        assert_eq!(
            decode(CqlType::Int, &bytes(&[0, 0, 0, 7]), "x").unwrap(),
            Some(CqlValue::Int(7))
        );
        assert!(decode(CqlType::Int, &bytes(&[0, 7]), "x").is_err());
        assert!(decode(CqlType::BigInt, &bytes(&[0; 4]), "x").is_err());
        assert!(decode(CqlType::Text, &bytes(&[0xff]), "x").is_err());
        assert_eq!(decode(CqlType::Text, &RawValue::Null, "x").unwrap(), None);
        assert_eq!(decode(CqlType::Blob, &RawValue::Unset, "x").unwrap(), None);
        let list = [0, 0, 0, 2, 0, 0, 0, 1, b'a', 0, 0, 0, 0];
        assert_eq!(
            decode(CqlType::TextList, &bytes(&list), "x").unwrap(),
            Some(CqlValue::TextList(vec!["a".into(), String::new()]))
        );
        for bad in [
            &[0, 0, 0, 2, 0, 0, 0, 1, b'a'][..],
            &[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff],
            &[0xff, 0xff, 0xff, 0xff],
            &[0, 0, 0, 0, 1],
            &[0, 0],
        ] {
            assert!(
                decode(CqlType::TextList, &bytes(bad), "x").is_err(),
                "{bad:?}"
            );
        }
    }
}
