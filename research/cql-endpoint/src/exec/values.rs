//! The values a request bound, decoded as the types its plan gave the bind markers, and
//! the lock table's keys, TTL and LIMIT read from them.

use lock_core::storage::{RowKey, RowKind, Ttl};
use lock_core::{ColumnName, LockId};

use super::Prepared;
use super::prepared::BindSpec;
use crate::error::CqlError;
use crate::frame::QueryParams;
use crate::parse::Term;
use crate::value::{self, CqlType, CqlValue, RawValue};

/// The values a request bound, in bind-marker order.
pub(super) struct Values<'a> {
    raw: Vec<&'a RawValue>,
    specs: &'a [BindSpec],
}

impl<'a> Values<'a> {
    pub(super) fn new(prepared: &'a Prepared, params: &'a QueryParams) -> Result<Self, CqlError> {
        let specs = prepared.binds.as_slice();
        if params.values.len() != specs.len() {
            return Err(CqlError::Invalid(format!(
                "Invalid amount of bind variables: expected {}, got {}",
                specs.len(),
                params.values.len()
            )));
        }
        let raw = match &params.names {
            None => params.values.iter().collect(),
            Some(names) => specs
                .iter()
                .map(|spec| {
                    names
                        .iter()
                        .position(|name| *name == spec.name)
                        .and_then(|index| params.values.get(index))
                        .ok_or_else(|| {
                            CqlError::Invalid(format!("no value was bound for {}", spec.name))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(Values { raw, specs })
    }

    pub(super) fn ty(&self, term: &Term) -> Option<CqlType> {
        match term {
            Term::Bind(index) => self.specs.get(*index).map(|spec| spec.ty),
            _ => None,
        }
    }

    pub(super) fn is_null(&self, term: &Term) -> bool {
        matches!(term, Term::Bind(index) if matches!(self.raw.get(*index), Some(RawValue::Null)))
    }

    /// The value of `term` as type `ty`: `None` for a null or unset bound value.
    pub(super) fn get(
        &self,
        term: &Term,
        ty: CqlType,
        name: &str,
    ) -> Result<Option<CqlValue>, CqlError> {
        let mismatch = |kind: &str, text: String| {
            CqlError::Invalid(format!(
                "Invalid {kind} constant ({text}) for \"{name}\" of type {}",
                ty.cql_name()
            ))
        };
        match (term, ty) {
            (Term::Bind(index), _) => {
                let raw = self
                    .raw
                    .get(*index)
                    .ok_or_else(|| CqlError::Server(format!("bind marker {index} has no value")))?;
                value::decode(ty, raw, name)
            }
            (Term::Text(text), CqlType::Text) => Ok(Some(CqlValue::Text(text.clone()))),
            (Term::Blob(bytes), CqlType::Blob) => Ok(Some(CqlValue::Blob(bytes.clone()))),
            (Term::Integer(number), CqlType::BigInt) => Ok(Some(CqlValue::BigInt(*number))),
            (Term::Integer(number), CqlType::Int) => i32::try_from(*number)
                .map(|number| Some(CqlValue::Int(number)))
                .map_err(|_| mismatch("INTEGER", number.to_string())),
            (Term::Boolean(value), CqlType::Boolean) => Ok(Some(CqlValue::Boolean(*value))),
            (Term::Text(text), _) => Err(mismatch("STRING", text.clone())),
            (Term::Integer(number), _) => Err(mismatch("INTEGER", number.to_string())),
            (Term::Blob(_), _) => Err(mismatch("HEX", "0x...".into())),
            (Term::Boolean(value), _) => Err(mismatch("BOOLEAN", value.to_string())),
            (Term::List(_), _) => Err(CqlError::Invalid(format!(
                "a list of values is not valid for {name}"
            ))),
        }
    }

    /// A text value that must not be null.
    pub(super) fn text(&self, term: &Term, ty: CqlType, name: &str) -> Result<String, CqlError> {
        match self.get(term, ty, name)? {
            Some(CqlValue::Text(text)) => Ok(text),
            _ => Err(CqlError::Invalid(format!("Invalid null value for {name}"))),
        }
    }
}

/// The partition key the terms give, checked as a lock id and a lock row.
pub(super) fn row_key(
    values: &Values<'_>,
    lock_id: &Term,
    row_kind: &Term,
) -> Result<RowKey, CqlError> {
    let lock_id = values.text(lock_id, CqlType::Text, "partition key part lock_id")?;
    let lock_id = LockId::new(&lock_id).map_err(|error| CqlError::Invalid(error.to_string()))?;
    let kind = values.text(row_kind, CqlType::Text, "partition key part row_kind")?;
    let kind = RowKind::ALL
        .into_iter()
        .find(|known| known.as_str() == kind)
        .ok_or_else(|| {
            CqlError::Invalid(format!(
                "row_kind {kind:?} is not one of the lock's rows ({})",
                RowKind::ALL.map(RowKind::as_str).join(", ")
            ))
        })?;
    Ok(RowKey::new(kind, lock_id))
}

/// The clustering column the term gives.
pub(super) fn column_name(values: &Values<'_>, term: &Term) -> Result<ColumnName, CqlError> {
    values
        .text(term, CqlType::Text, "clustering column column_name")
        .map(ColumnName::new)
}

/// The TTL the term gives: none for no term, null, unset or 0.
pub(super) fn ttl_of(values: &Values<'_>, term: Option<&Term>) -> Result<Option<Ttl>, CqlError> {
    let Some(term) = term else { return Ok(None) };
    match values.get(term, CqlType::Int, "[ttl]")? {
        None | Some(CqlValue::Int(0)) => Ok(None),
        Some(CqlValue::Int(seconds)) if seconds < 0 => Err(CqlError::Invalid(format!(
            "A TTL must be greater or equal to 0, but was {seconds}"
        ))),
        Some(CqlValue::Int(seconds)) => {
            let seconds = u32::try_from(seconds).unwrap_or(u32::MAX);
            Ttl::from_secs(seconds).map(Some).map_err(|_| {
                CqlError::Invalid(format!(
                    "ttl is too large. requested ({seconds}) maximum ({})",
                    Ttl::MAX_SECONDS
                ))
            })
        }
        Some(_) => Err(CqlError::Invalid("the TTL must be an int".into())),
    }
}

/// The LIMIT the term gives: none for no term, null or unset.
pub(super) fn limit_of(values: &Values<'_>, term: Option<&Term>) -> Result<Option<u32>, CqlError> {
    let Some(term) = term else { return Ok(None) };
    match values.get(term, CqlType::Int, "[limit]")? {
        None => Ok(None),
        Some(CqlValue::Int(limit)) if limit > 0 => Ok(u32::try_from(limit).ok()),
        Some(_) => Err(CqlError::Invalid("LIMIT must be strictly positive".into())),
    }
}
