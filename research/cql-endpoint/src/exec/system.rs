//! The system tables the drivers read when they connect and after schema changes
//! (`system.local`, `system.peers`, `system_schema.*`): a SELECT on one is planned to a
//! projection and `=`/`IN` filters on its key columns, and run on the table as the schema
//! is then.

use super::plan::{Plan, Planner, ResultSpec, SystemPlan};
use super::values::{Values, limit_of};
use super::{Answer, Engine, Outcome, Prepared, Session, lock, one_page};
use crate::error::CqlError;
use crate::frame::QueryParams;
use crate::parse::{Operator, Select, Selector, Term};
use crate::schema::{self, SystemTable};
use crate::value::{CqlType, CqlValue};

impl Engine {
    /// A SELECT from a system table.
    pub(super) fn select_system(
        &self,
        plan: &SystemPlan,
        prepared: &Prepared,
        session: &Session,
        values: &Values<'_>,
        params: &QueryParams,
    ) -> Result<Answer, CqlError> {
        let SystemPlan {
            keyspace,
            name,
            selection,
            filters,
            limit,
        } = plan;
        let schema = lock(&self.schema).clone();
        let table = schema::system_table(keyspace, name, &schema, session.node)
            .ok_or_else(|| CqlError::Server(format!("system table {keyspace}.{name} vanished")))?;
        let rows = system_rows(&table, values, selection, filters, limit.as_ref())?;
        let rows = one_page(rows, params)?;
        let spec = prepared.result.clone().ok_or_else(|| {
            CqlError::Server("a system query was planned without result columns".into())
        })?;
        Ok(Outcome::Rows { spec, rows }.into())
    }
}

/// The rows of a system table that pass `filters`, projected on `selection`.
fn system_rows(
    table: &SystemTable,
    values: &Values<'_>,
    selection: &[usize],
    filters: &[(usize, Term)],
    limit: Option<&Term>,
) -> Result<Vec<Vec<CqlValue>>, CqlError> {
    let mut accepted: Vec<(usize, Vec<String>)> = Vec::new();
    for (column, term) in filters {
        let (name, ty) = table.columns[*column];
        let texts = match term {
            Term::List(items) => items
                .iter()
                .map(|item| values.text(item, ty, name))
                .collect::<Result<Vec<_>, _>>()?,
            Term::Bind(_) if values.ty(term) == Some(CqlType::TextList) => {
                match values.get(term, CqlType::TextList, name)? {
                    Some(CqlValue::TextList(items)) => items,
                    _ => Vec::new(),
                }
            }
            single => vec![values.text(single, ty, name)?],
        };
        accepted.push((*column, texts));
    }
    let limit = limit_of(values, limit)?.map_or(usize::MAX, |limit| limit as usize);
    Ok(table
        .rows
        .iter()
        .filter(|row| {
            accepted.iter().all(|(column, texts)| {
                row[*column]
                    .as_text()
                    .is_some_and(|text| texts.iter().any(|wanted| wanted == text))
            })
        })
        .take(limit)
        .map(|row| selection.iter().map(|index| row[*index].clone()).collect())
        .collect())
}

impl Planner<'_> {
    /// Plans a SELECT from a system table.
    pub(super) fn system_select(
        &mut self,
        table: SystemTable,
        select: Select,
    ) -> Result<(Plan, Option<ResultSpec>, Vec<i16>), CqlError> {
        let undefined = |column: &str| {
            CqlError::Invalid(format!(
                "Undefined column name {column} in table {}.{}",
                table.keyspace, table.name
            ))
        };
        let selection = match &select.selectors {
            None => (0..table.columns.len()).collect(),
            Some(selectors) => selectors
                .iter()
                .map(|selector| match selector {
                    Selector::Column(name) => table
                        .column(name)
                        .map(|(index, _)| index)
                        .ok_or_else(|| undefined(name)),
                    Selector::WriteTime(_) | Selector::Ttl(_) => Err(CqlError::Invalid(
                        "WRITETIME and TTL are not served on system tables".into(),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let mut filters = Vec::new();
        for relation in select.relations {
            let (index, ty) = table
                .column(&relation.column)
                .ok_or_else(|| undefined(&relation.column))?;
            if !table.keys.contains(&relation.column.as_str()) || ty != CqlType::Text {
                return Err(CqlError::Invalid(format!(
                    "restrictions on {} are not supported by this endpoint (only = and IN on \
                     the key columns {:?} of {}.{})",
                    relation.column, table.keys, table.keyspace, table.name
                )));
            }
            match (relation.operator, &relation.value) {
                (Operator::Eq, _) => self.bind(&relation.value, &relation.column, ty),
                (Operator::In, Term::List(_)) => self.bind(&relation.value, &relation.column, ty),
                (Operator::In, _) => self.bind(
                    &relation.value,
                    &format!("in({})", relation.column),
                    CqlType::TextList,
                ),
                (operator, _) => {
                    return Err(CqlError::Invalid(format!(
                        "{} {operator} is not supported on system tables (only = and IN)",
                        relation.column
                    )));
                }
            }
            filters.push((index, relation.value));
        }
        if let Some(limit) = &select.limit {
            self.bind(limit, "[limit]", CqlType::Int);
        }
        let spec = ResultSpec {
            keyspace: table.keyspace.to_owned(),
            table: table.name.to_owned(),
            columns: selection
                .iter()
                .map(|index| {
                    let (name, ty) = table.columns[*index];
                    (name.to_owned(), ty)
                })
                .collect(),
        };
        Ok((
            Plan::System(SystemPlan {
                keyspace: table.keyspace.to_owned(),
                name: table.name.to_owned(),
                selection,
                filters,
                limit: select.limit,
            }),
            Some(spec),
            Vec::new(),
        ))
    }
}
