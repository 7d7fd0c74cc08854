//! Checking a statement against the schema: which table it runs on, whether the lock
//! table (or a system table) can express its shape, and each bind marker's name and type.
//! The result is a [`Plan`], run by the other jobs.

use crate::error::CqlError;
use crate::parse::{
    self, CreateKeyspace, CreateTable, Delete, Insert, Operator, Select, Selector, Statement,
    TableName, Term,
};
use crate::schema::{self, LOCK_COLUMNS, Schema, SystemTable};
use crate::value::CqlType;

use super::Session;
use super::prepared::BindSpec;

/// The columns of a result, and the table they come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResultSpec {
    pub(crate) keyspace: String,
    pub(crate) table: String,
    pub(crate) columns: Vec<(String, CqlType)>,
}

/// A column of the lock table a SELECT returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LockColumn {
    LockId,
    RowKind,
    ColumnName,
    Value,
    WriteTime,
}

impl LockColumn {
    pub(super) fn spec(self) -> (String, CqlType) {
        let (name, ty) = match self {
            LockColumn::LockId => ("lock_id", CqlType::Text),
            LockColumn::RowKind => ("row_kind", CqlType::Text),
            LockColumn::ColumnName => ("column_name", CqlType::Text),
            LockColumn::Value => ("value", CqlType::Blob),
            LockColumn::WriteTime => ("writetime(value)", CqlType::BigInt),
        };
        (name.to_owned(), ty)
    }
}

/// The table a lock statement runs on, checked again when it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LockTable {
    pub(super) keyspace: String,
    pub(super) name: String,
}

/// What a statement does, once checked against the schema.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Plan {
    Write(WritePlan),
    Delete(DeletePlan),
    Read(ReadPlan),
    System(SystemPlan),
    CreateKeyspace(CreateKeyspace),
    CreateTable {
        keyspace: String,
        create: CreateTable,
    },
    DropKeyspace {
        name: String,
        if_exists: bool,
    },
    DropTable {
        keyspace: String,
        name: String,
        if_exists: bool,
    },
    Use(String),
}

/// An INSERT of one cell.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct WritePlan {
    pub(super) table: LockTable,
    pub(super) lock_id: Term,
    pub(super) row_kind: Term,
    pub(super) column: Term,
    pub(super) value: Term,
    pub(super) ttl: Option<Term>,
    pub(super) timestamp: Option<Term>,
}

/// A DELETE of one cell.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct DeletePlan {
    pub(super) table: LockTable,
    pub(super) lock_id: Term,
    pub(super) row_kind: Term,
    pub(super) column: Term,
    pub(super) timestamp: Option<Term>,
}

/// A SELECT of a slice of one row of the lock table.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ReadPlan {
    pub(super) table: LockTable,
    pub(super) lock_id: Term,
    pub(super) row_kind: Term,
    /// `column_name >= term` (false) or `column_name = term` (true).
    pub(super) start: Option<(Term, bool)>,
    pub(super) limit: Option<Term>,
    pub(super) selection: Vec<LockColumn>,
}

/// A SELECT from a system table.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SystemPlan {
    pub(super) keyspace: String,
    pub(super) name: String,
    /// Indexes into the system table's columns.
    pub(super) selection: Vec<usize>,
    /// Column index, and the values it may take (one term, or an IN list).
    pub(super) filters: Vec<(usize, Term)>,
    pub(super) limit: Option<Term>,
}

/// Turns a statement into a plan, recording the bind markers' names and types.
pub(super) struct Planner<'a> {
    pub(super) schema: &'a Schema,
    pub(super) session: &'a Session,
    pub(super) binds: Vec<Option<BindSpec>>,
    pub(super) bind_table: (String, String),
}

/// Where a statement's table is.
enum Target {
    Lock(LockTable),
    System(SystemTable),
}

impl Planner<'_> {
    pub(super) fn plan(
        &mut self,
        statement: Statement,
    ) -> Result<(Plan, Option<ResultSpec>, Vec<i16>), CqlError> {
        match statement {
            Statement::Select(select) => self.select(select),
            Statement::Insert(insert) => self.insert(insert).map(|(plan, pk)| (plan, None, pk)),
            Statement::Delete(delete) => self.delete(delete).map(|(plan, pk)| (plan, None, pk)),
            Statement::CreateKeyspace(create) => {
                Ok((Plan::CreateKeyspace(create), None, Vec::new()))
            }
            Statement::CreateTable(create) => {
                let keyspace = self.keyspace_of(&create.table)?;
                if schema::is_system_keyspace(&keyspace) {
                    return Err(CqlError::Invalid(format!(
                        "{keyspace} keyspace is not user-modifiable"
                    )));
                }
                Ok((Plan::CreateTable { keyspace, create }, None, Vec::new()))
            }
            Statement::DropKeyspace { name, if_exists } => {
                Ok((Plan::DropKeyspace { name, if_exists }, None, Vec::new()))
            }
            Statement::DropTable { table, if_exists } => {
                let keyspace = self.keyspace_of(&table)?;
                Ok((
                    Plan::DropTable {
                        keyspace,
                        name: table.name,
                        if_exists,
                    },
                    None,
                    Vec::new(),
                ))
            }
            Statement::Use(keyspace) => Ok((Plan::Use(keyspace), None, Vec::new())),
        }
    }

    fn keyspace_of(&self, table: &TableName) -> Result<String, CqlError> {
        table
            .keyspace
            .clone()
            .or_else(|| self.session.keyspace.clone())
            .ok_or_else(|| {
                CqlError::Invalid(
                    "No keyspace has been specified. USE a keyspace, or explicitly specify \
                     keyspace.tablename"
                        .into(),
                )
            })
    }

    fn target(&mut self, table: &TableName) -> Result<Target, CqlError> {
        let keyspace = self.keyspace_of(table)?;
        self.bind_table = (keyspace.clone(), table.name.clone());
        if schema::is_system_keyspace(&keyspace) {
            return schema::system_table(&keyspace, &table.name, self.schema, self.session.node)
                .map(Target::System)
                .ok_or_else(|| CqlError::Invalid(format!("unconfigured table {}", table.name)));
        }
        if self.schema.table(&keyspace, &table.name).is_some() {
            return Ok(Target::Lock(LockTable {
                keyspace,
                name: table.name.clone(),
            }));
        }
        if self
            .schema
            .keyspace
            .as_ref()
            .is_none_or(|served| served.name != keyspace)
        {
            return Err(CqlError::Invalid(format!(
                "Keyspace {keyspace} does not exist"
            )));
        }
        Err(CqlError::Invalid(format!(
            "unconfigured table {}",
            table.name
        )))
    }

    fn lock_target(&mut self, table: &TableName, verb: &str) -> Result<LockTable, CqlError> {
        match self.target(table)? {
            Target::Lock(table) => Ok(table),
            Target::System(system) => Err(CqlError::Invalid(format!(
                "{verb} on {}.{} is not allowed: the system keyspaces are not user-modifiable",
                system.keyspace, system.name
            ))),
        }
    }

    /// Records the type of `term`'s bind markers.
    pub(super) fn bind(&mut self, term: &Term, name: &str, ty: CqlType) {
        match term {
            Term::Bind(index) => {
                if let Some(slot) = self.binds.get_mut(*index) {
                    *slot = Some(BindSpec {
                        name: name.to_owned(),
                        ty,
                    });
                }
            }
            Term::List(items) => {
                for item in items {
                    self.bind(item, name, ty);
                }
            }
            _ => {}
        }
    }

    fn pk_indexes(lock_id: &Term, row_kind: &Term) -> Vec<i16> {
        match (lock_id, row_kind) {
            (Term::Bind(first), Term::Bind(second)) => [*first, *second]
                .into_iter()
                .filter_map(|index| i16::try_from(index).ok())
                .collect(),
            _ => Vec::new(),
        }
    }

    fn insert(&mut self, insert: Insert) -> Result<(Plan, Vec<i16>), CqlError> {
        let table = self.lock_target(&insert.table, "INSERT")?;
        if insert.columns.len() != insert.values.len() {
            return Err(CqlError::Invalid("Unmatched column names/values".into()));
        }
        let mut terms: [Option<Term>; 4] = [None, None, None, None];
        for (column, term) in insert.columns.iter().zip(insert.values) {
            let Some(index) = LOCK_COLUMNS.iter().position(|(name, ..)| name == column) else {
                return Err(CqlError::Invalid(format!(
                    "Undefined column name {column} in table {}.{}",
                    table.keyspace, table.name
                )));
            };
            if terms[index].is_some() {
                return Err(CqlError::Invalid(format!(
                    "Multiple definitions found for column {column}"
                )));
            }
            let (name, ty, ..) = LOCK_COLUMNS[index];
            self.bind(&term, name, ty);
            terms[index] = Some(term);
        }
        let [Some(lock_id), Some(row_kind), Some(column), Some(value)] = terms else {
            return Err(CqlError::Invalid(
                "INSERT must set lock_id, row_kind, column_name and value: this endpoint \
                 stores one cell per row"
                    .into(),
            ));
        };
        if let Some(ttl) = &insert.ttl {
            self.bind(ttl, "[ttl]", CqlType::Int);
        }
        if let Some(timestamp) = &insert.timestamp {
            self.bind(timestamp, "[timestamp]", CqlType::BigInt);
        }
        let pk = Self::pk_indexes(&lock_id, &row_kind);
        Ok((
            Plan::Write(WritePlan {
                table,
                lock_id,
                row_kind,
                column,
                value,
                ttl: insert.ttl,
                timestamp: insert.timestamp,
            }),
            pk,
        ))
    }

    /// The `=` terms of the key columns among `relations`, and the `column_name` relation.
    #[allow(clippy::type_complexity)]
    fn key_relations(
        &mut self,
        table: &LockTable,
        relations: Vec<parse::Relation>,
    ) -> Result<(Term, Term, Option<(Operator, Term)>), CqlError> {
        let (mut lock_id, mut row_kind, mut column) = (None, None, None);
        for relation in relations {
            let slot = match relation.column.as_str() {
                "lock_id" => &mut lock_id,
                "row_kind" => &mut row_kind,
                "column_name" => &mut column,
                "value" => {
                    return Err(CqlError::Invalid(
                        "Non PRIMARY KEY columns found in where clause: value".into(),
                    ));
                }
                other => {
                    return Err(CqlError::Invalid(format!(
                        "Undefined column name {other} in table {}.{}",
                        table.keyspace, table.name
                    )));
                }
            };
            if slot.is_some() {
                return Err(CqlError::Invalid(format!(
                    "{} is restricted more than once, which this endpoint does not serve",
                    relation.column
                )));
            }
            let is_key = relation.column != "column_name";
            if is_key && relation.operator != Operator::Eq {
                return Err(CqlError::Invalid(format!(
                    "only = restrictions on the partition key are supported by this endpoint, \
                     got {} {}",
                    relation.column, relation.operator
                )));
            }
            self.bind(&relation.value, &relation.column, CqlType::Text);
            *slot = Some((relation.operator, relation.value));
        }
        match (lock_id, row_kind) {
            (Some((_, lock_id)), Some((_, row_kind))) => Ok((lock_id, row_kind, column)),
            _ => Err(CqlError::Invalid(
                "lock_id and row_kind must both be restricted with =: this endpoint reads and \
                 writes one partition at a time"
                    .into(),
            )),
        }
    }

    fn delete(&mut self, delete: Delete) -> Result<(Plan, Vec<i16>), CqlError> {
        let table = self.lock_target(&delete.table, "DELETE")?;
        if let Some(timestamp) = &delete.timestamp {
            self.bind(timestamp, "[timestamp]", CqlType::BigInt);
        }
        let (lock_id, row_kind, column) = self.key_relations(&table, delete.relations)?;
        let column = match column {
            Some((Operator::Eq, column)) => column,
            Some((operator, _)) => {
                return Err(CqlError::Invalid(format!(
                    "DELETE takes only column_name = ..., got column_name {operator}: this \
                     endpoint deletes one cell at a time"
                )));
            }
            None => {
                return Err(CqlError::Invalid(
                    "DELETE of a whole partition is not supported by this endpoint: restrict \
                     column_name with ="
                        .into(),
                ));
            }
        };
        let pk = Self::pk_indexes(&lock_id, &row_kind);
        Ok((
            Plan::Delete(DeletePlan {
                table,
                lock_id,
                row_kind,
                column,
                timestamp: delete.timestamp,
            }),
            pk,
        ))
    }

    fn select(&mut self, select: Select) -> Result<(Plan, Option<ResultSpec>, Vec<i16>), CqlError> {
        let table = match self.target(&select.table)? {
            Target::Lock(table) => table,
            Target::System(system) => return self.system_select(system, select),
        };
        let selection = match &select.selectors {
            None => vec![
                LockColumn::LockId,
                LockColumn::RowKind,
                LockColumn::ColumnName,
                LockColumn::Value,
            ],
            Some(selectors) => selectors
                .iter()
                .map(|selector| match selector {
                    Selector::Column(name) => match name.as_str() {
                        "lock_id" => Ok(LockColumn::LockId),
                        "row_kind" => Ok(LockColumn::RowKind),
                        "column_name" => Ok(LockColumn::ColumnName),
                        "value" => Ok(LockColumn::Value),
                        other => Err(CqlError::Invalid(format!(
                            "Undefined column name {other} in table {}.{}",
                            table.keyspace, table.name
                        ))),
                    },
                    Selector::WriteTime(name) if name == "value" => Ok(LockColumn::WriteTime),
                    Selector::WriteTime(name) => Err(CqlError::Invalid(format!(
                        "Cannot use selection function writeTime on PRIMARY KEY part {name}"
                    ))),
                    Selector::Ttl(_) => Err(CqlError::Invalid(
                        "TTL() is not supported by this endpoint: the simulated cluster does \
                         not report remaining TTLs"
                            .into(),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let (lock_id, row_kind, column) = self.key_relations(&table, select.relations)?;
        let start = match column {
            None => None,
            Some((Operator::Ge, term)) => Some((term, false)),
            Some((Operator::Eq, term)) => Some((term, true)),
            Some((operator, _)) => {
                return Err(CqlError::Invalid(format!(
                    "column_name {operator} is not supported by this endpoint: it serves \
                     column_name >= (a slice from a column on) and column_name ="
                )));
            }
        };
        if let Some(limit) = &select.limit {
            self.bind(limit, "[limit]", CqlType::Int);
        }
        let spec = ResultSpec {
            keyspace: table.keyspace.clone(),
            table: table.name.clone(),
            columns: selection.iter().map(|column| column.spec()).collect(),
        };
        let pk = Self::pk_indexes(&lock_id, &row_kind);
        Ok((
            Plan::Read(ReadPlan {
                table,
                lock_id,
                row_kind,
                start,
                limit: select.limit,
                selection,
            }),
            Some(spec),
            pk,
        ))
    }
}
