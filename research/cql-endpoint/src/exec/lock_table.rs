//! The lock table's writes, deletes and reads: each is one storage request to the
//! simulated cluster, at the consistency level the frame carries.

use std::num::NonZeroU32;

use cassandra_protocol::consistency::Consistency as WireConsistency;
use fair_lock::Clock;
use lock_core::Timestamp;
use lock_core::storage::{CellDelete, CellWrite, RowRead, StorageRequest, StorageResponse};
use lock_storage_memory::Consistency;

use super::plan::{DeletePlan, LockColumn, LockTable, ReadPlan, ResultSpec, WritePlan};
use super::values::{Values, column_name, limit_of, row_key, ttl_of};
use super::{Answer, Engine, Outcome, Prepared, lock, one_page};
use crate::error::CqlError;
use crate::frame::QueryParams;
use crate::parse::Term;
use crate::value::{CqlType, CqlValue};

impl Engine {
    /// An INSERT: one cell written.
    pub(super) async fn write(
        &self,
        plan: &WritePlan,
        values: &Values<'_>,
        params: &QueryParams,
    ) -> Result<Answer, CqlError> {
        self.check_table(&plan.table)?;
        let write = CellWrite {
            row: row_key(values, &plan.lock_id, &plan.row_kind)?,
            column: column_name(values, &plan.column)?,
            value: match values.get(&plan.value, CqlType::Blob, "value")? {
                Some(CqlValue::Blob(bytes)) => bytes,
                _ => {
                    return Err(CqlError::Invalid(
                        "value must not be null or unset: this endpoint stores a cell only \
                         with its value"
                            .into(),
                    ));
                }
            },
            timestamp: self.timestamp(values, plan.timestamp.as_ref(), params)?,
            ttl: ttl_of(values, plan.ttl.as_ref())?,
        };
        self.storage(StorageRequest::Write(write), params.consistency, true)
            .await?;
        Ok(Outcome::Void.into())
    }

    /// A DELETE: one cell deleted.
    pub(super) async fn delete(
        &self,
        plan: &DeletePlan,
        values: &Values<'_>,
        params: &QueryParams,
    ) -> Result<Answer, CqlError> {
        self.check_table(&plan.table)?;
        let delete = CellDelete {
            row: row_key(values, &plan.lock_id, &plan.row_kind)?,
            column: column_name(values, &plan.column)?,
            timestamp: self.timestamp(values, plan.timestamp.as_ref(), params)?,
        };
        self.storage(StorageRequest::Delete(delete), params.consistency, true)
            .await?;
        Ok(Outcome::Void.into())
    }

    /// A SELECT: one slice of one row read, in one page.
    pub(super) async fn read(
        &self,
        plan: &ReadPlan,
        prepared: &Prepared,
        values: &Values<'_>,
        params: &QueryParams,
    ) -> Result<Answer, CqlError> {
        let ReadPlan {
            table,
            lock_id,
            row_kind,
            start,
            limit,
            selection,
        } = plan;
        self.check_table(table)?;
        let row = row_key(values, lock_id, row_kind)?;
        let limit = limit_of(values, limit.as_ref())?.unwrap_or(u32::MAX);
        let (start, exact) = match start {
            Some((term, exact)) => (Some(column_name(values, term)?), *exact),
            None => (None, false),
        };
        let read = RowRead {
            row: row.clone(),
            start: start.clone(),
            limit: NonZeroU32::new(if exact { 1 } else { limit }).unwrap_or(NonZeroU32::MIN),
        };
        let response = self
            .storage(StorageRequest::Read(read), params.consistency, false)
            .await?;
        let cells = match response {
            StorageResponse::Cells(cells) => cells,
            StorageResponse::Done => Vec::new(),
        };
        let rows = cells
            .into_iter()
            .filter(|cell| !exact || Some(&cell.column) == start.as_ref())
            .map(|cell| {
                selection
                    .iter()
                    .map(|column| match column {
                        LockColumn::LockId => CqlValue::Text(row.lock_id.as_str().to_owned()),
                        LockColumn::RowKind => CqlValue::Text(row.kind.as_str().to_owned()),
                        LockColumn::ColumnName => CqlValue::Text(cell.column.as_str().to_owned()),
                        LockColumn::Value => CqlValue::Blob(cell.value.clone()),
                        LockColumn::WriteTime => CqlValue::BigInt(
                            i64::try_from(cell.write_timestamp.as_micros()).unwrap_or(i64::MAX),
                        ),
                    })
                    .collect()
            })
            .collect();
        let rows = one_page(rows, params)?;
        Ok(Outcome::Rows {
            spec: prepared.result.clone().unwrap_or_else(|| ResultSpec {
                keyspace: table.keyspace.clone(),
                table: table.name.clone(),
                columns: Vec::new(),
            }),
            rows,
        }
        .into())
    }

    /// Fails if the lock table a statement was planned for is gone.
    fn check_table(&self, table: &LockTable) -> Result<(), CqlError> {
        if lock(&self.schema)
            .table(&table.keyspace, &table.name)
            .is_some()
        {
            Ok(())
        } else {
            Err(CqlError::Invalid(format!(
                "unconfigured table {}.{} (it was dropped after the statement was prepared)",
                table.keyspace, table.name
            )))
        }
    }

    /// The write timestamp: the statement's, else the frame's default, else this node's
    /// clock (the simulated cluster's wall time), as a Cassandra coordinator would.
    fn timestamp(
        &self,
        values: &Values<'_>,
        term: Option<&Term>,
        params: &QueryParams,
    ) -> Result<Timestamp, CqlError> {
        let bound = match term {
            Some(term) => match values.get(term, CqlType::BigInt, "[timestamp]")? {
                Some(CqlValue::BigInt(micros)) => Some(micros),
                Some(_) => return Err(CqlError::Invalid("the timestamp must be a bigint".into())),
                None if values.is_null(term) => {
                    return Err(CqlError::Invalid("Invalid null value of timestamp".into()));
                }
                // Unset: as if the statement had no USING TIMESTAMP.
                None => None,
            },
            None => None,
        };
        let Some(micros) = bound.or(params.default_timestamp) else {
            return Ok(self.client.clock().now().timestamp);
        };
        u64::try_from(micros)
            .map(Timestamp::from_micros)
            .map_err(|_| {
                CqlError::Invalid(format!(
                    "the write timestamp {micros} is negative, which this endpoint does not support"
                ))
            })
    }

    /// Runs one storage request at the frame's consistency level.
    async fn storage(
        &self,
        request: StorageRequest,
        consistency: i16,
        write: bool,
    ) -> Result<StorageResponse, CqlError> {
        let (wire, level) = consistency_level(consistency, write)?;
        self.client
            .execute_at(request, level)
            .await
            .map_err(|failure| CqlError::from_failure(failure, wire))
    }
}

/// The frame's consistency code as the wire level and the simulator's level.
fn consistency_level(code: i16, write: bool) -> Result<(WireConsistency, Consistency), CqlError> {
    let wire = WireConsistency::try_from(code)
        .map_err(|_| CqlError::Protocol(format!("unknown consistency level code {code:#06x}")))?;
    let level = match wire {
        WireConsistency::One | WireConsistency::LocalOne => Consistency::One,
        // One data centre: LOCAL_QUORUM and EACH_QUORUM are QUORUM.
        WireConsistency::Quorum | WireConsistency::LocalQuorum | WireConsistency::EachQuorum => {
            Consistency::Quorum
        }
        WireConsistency::All => Consistency::All,
        WireConsistency::Any if write => {
            return Err(CqlError::Invalid(
                "consistency level ANY is not supported by this endpoint (the simulator has \
                 no hint-only writes); use ONE, QUORUM or ALL"
                    .into(),
            ));
        }
        WireConsistency::Any => {
            return Err(CqlError::Invalid(
                "ANY ConsistencyLevel is only supported for writes".into(),
            ));
        }
        WireConsistency::Serial | WireConsistency::LocalSerial => {
            return Err(CqlError::Invalid(format!(
                "consistency level {wire} is only for conditional statements, which this \
                 endpoint does not serve"
            )));
        }
        other => {
            return Err(CqlError::Invalid(format!(
                "consistency level {other} is not supported by this endpoint; use ONE, \
                 LOCAL_ONE, QUORUM, LOCAL_QUORUM, EACH_QUORUM or ALL"
            )));
        }
    };
    Ok((wire, level))
}
