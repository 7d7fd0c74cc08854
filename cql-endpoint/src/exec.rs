//! Planning statements against the schema, and running them on the simulated cluster.
//!
//! A statement is planned once (at PREPARE, or for each QUERY): its table is resolved,
//! its shape checked against what the lock table can express, and every bind marker
//! given a name and a type. Running a plan decodes the bound values and makes exactly
//! one [`LockStorage`](lock_core::LockStorage)-equivalent request, at the consistency
//! level the frame carries.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cassandra_protocol::consistency::Consistency as WireConsistency;
use cassandra_protocol::frame::events::{
    SchemaChange, SchemaChangeOptions, SchemaChangeTarget, SchemaChangeType,
};
use lock_core::storage::{
    CellDelete, CellWrite, RowKey, RowKind, RowRead, StorageRequest, StorageResponse, Ttl,
};
use lock_core::{Clock, ColumnName, LockId, Timestamp};
use md5::{Digest, Md5};
use tokio::sync::broadcast;

use crate::error::CqlError;
use crate::frame::QueryParams;
use crate::parse::{
    self, Constant, CreateKeyspace, CreateTable, Delete, Insert, Operator, Order, ParseError,
    Property, Select, Selector, Statement, TableName, Term,
};
use crate::schema::{
    self, DATA_CENTER, Keyspace, LOCK_COLUMNS, NodeInfo, Schema, SystemTable, Table,
};
use crate::value::{self, CqlType, CqlValue, RawValue};
use lock_storage_memory::{Consistency, MemoryClient, MemoryCluster, ReplicaId};

/// The most prepared statements kept; past it the oldest are forgotten (a client that
/// executes one gets UNPREPARED and prepares it again, as with Cassandra's cache).
const MAX_PREPARED: usize = 10_000;

/// The most statement text, in bytes, behind the prepared statements kept (a plan keeps
/// the literals of its text, so this bounds their memory too); past it the oldest are
/// forgotten, as past [`MAX_PREPARED`].
pub(crate) const MAX_PREPARED_BYTES: usize = 64 * 1024 * 1024;

/// A bind marker's name (as prepared metadata shows it) and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BindSpec {
    pub(crate) name: String,
    pub(crate) ty: CqlType,
}

/// The columns of a result, and the table they come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResultSpec {
    pub(crate) keyspace: String,
    pub(crate) table: String,
    pub(crate) columns: Vec<(String, CqlType)>,
}

/// A column of the lock table a SELECT returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LockColumn {
    LockId,
    RowKind,
    ColumnName,
    Value,
    WriteTime,
}

impl LockColumn {
    fn spec(self) -> (String, CqlType) {
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
struct LockTable {
    keyspace: String,
    name: String,
}

/// What a statement does, once checked against the schema.
#[derive(Clone, Debug, PartialEq)]
enum Plan {
    Write {
        table: LockTable,
        lock_id: Term,
        row_kind: Term,
        column: Term,
        value: Term,
        ttl: Option<Term>,
        timestamp: Option<Term>,
    },
    Delete {
        table: LockTable,
        lock_id: Term,
        row_kind: Term,
        column: Term,
        timestamp: Option<Term>,
    },
    Read {
        table: LockTable,
        lock_id: Term,
        row_kind: Term,
        /// `column_name >= term` (false) or `column_name = term` (true).
        start: Option<(Term, bool)>,
        limit: Option<Term>,
        selection: Vec<LockColumn>,
    },
    System {
        keyspace: String,
        name: String,
        /// Indexes into the system table's columns.
        selection: Vec<usize>,
        /// Column index, and the values it may take (one term, or an IN list).
        filters: Vec<(usize, Term)>,
        limit: Option<Term>,
    },
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

/// A statement ready to run: what PREPARE returns and EXECUTE runs.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) id: Vec<u8>,
    plan: Plan,
    pub(crate) binds: Vec<BindSpec>,
    /// The table the bind markers belong to (keyspace, table).
    pub(crate) bind_table: (String, String),
    pub(crate) pk_indexes: Vec<i16>,
    pub(crate) result: Option<ResultSpec>,
}

/// A successful answer.
#[derive(Debug)]
pub(crate) enum Outcome {
    Void,
    Rows {
        spec: ResultSpec,
        rows: Vec<Vec<CqlValue>>,
    },
    SetKeyspace(String),
    SchemaChange(SchemaChange),
    Prepared(Arc<Prepared>),
}

/// An outcome and the warnings that go with it.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) outcome: Outcome,
    pub(crate) warnings: Vec<String>,
}

impl From<Outcome> for Answer {
    fn from(outcome: Outcome) -> Self {
        Answer {
            outcome,
            warnings: Vec::new(),
        }
    }
}

/// What one connection remembers: its keyspace (`USE`) and where the client reached it.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) keyspace: Option<String>,
    pub(crate) node: NodeInfo,
}

/// What every connection of a server shares.
#[derive(Debug)]
pub(crate) struct Engine {
    cluster: MemoryCluster,
    client: MemoryClient,
    schema: Mutex<Schema>,
    prepared: Mutex<PreparedCache>,
    events: broadcast::Sender<SchemaChange>,
    requests: Mutex<Vec<String>>,
    /// Permits to plan a long statement, [`MAX_LONG_PLANS`] of them.
    long_plans: tokio::sync::Semaphore,
}

/// The most distinct requests [`Engine::note`] keeps.
pub(crate) const MAX_NOTED: usize = 1000;

/// The most bytes of a request's description [`Engine::note`] keeps; a longer one is cut
/// (at a character boundary) and marked with its full length, so that what is kept stays
/// under [`MAX_NOTED`] times about this, whatever clients send.
pub(crate) const MAX_NOTED_LEN: usize = 256;

/// Statements longer than this are planned on a blocking thread, so that parsing a long
/// statement never holds up a runtime worker and with it other connections.
pub(crate) const PLAN_INLINE_MAX: usize = 64 * 1024;

/// The longest statement served, in bytes; a longer one is refused (Invalid) unparsed.
/// Parsing takes memory and time in proportion to the text, and the lock table's
/// statements are a few hundred bytes.
pub(crate) const MAX_STATEMENT_LEN: usize = 1024 * 1024;

/// The most statements longer than [`PLAN_INLINE_MAX`] planned at once; the others wait.
/// This bounds the memory and the threads that long statements take.
pub(crate) const MAX_LONG_PLANS: usize = 2;

/// `text` cut to at most [`MAX_NOTED_LEN`] bytes, with its full length when cut.
pub(crate) fn noted(text: &str) -> String {
    if text.len() <= MAX_NOTED_LEN {
        return text.to_owned();
    }
    let mut end = MAX_NOTED_LEN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

#[derive(Debug, Default)]
struct PreparedCache {
    statements: HashMap<Vec<u8>, Arc<Prepared>>,
    /// Ids from oldest to newest, with the length of their statement's text.
    order: std::collections::VecDeque<(Vec<u8>, usize)>,
    /// The sum of the lengths in `order`.
    bytes: usize,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    pub(crate) fn new(cluster: MemoryCluster) -> Self {
        let client = cluster.client();
        let (events, _) = broadcast::channel(64);
        Engine {
            cluster,
            client,
            schema: Mutex::new(Schema::default()),
            prepared: Mutex::new(PreparedCache::default()),
            events,
            requests: Mutex::new(Vec::new()),
            long_plans: tokio::sync::Semaphore::new(MAX_LONG_PLANS),
        }
    }

    /// Remembers a kind of request (`"PREPARE <text>"`, `"REGISTER [...]"`, ...), once.
    /// `detail` (the statement, the options) is cut to [`MAX_NOTED_LEN`] bytes.
    pub(crate) fn note(&self, kind: &str, detail: Option<&str>) {
        let request = match detail {
            Some(detail) => format!("{kind} {}", noted(detail)),
            None => kind.to_owned(),
        };
        let mut requests = lock(&self.requests);
        if requests.len() < MAX_NOTED && !requests.contains(&request) {
            tracing::debug!(%request, "CQL request");
            requests.push(request);
        }
    }

    /// The distinct requests received so far, in order.
    pub(crate) fn requests(&self) -> Vec<String> {
        lock(&self.requests).clone()
    }

    pub(crate) fn client(&self) -> &MemoryClient {
        &self.client
    }

    pub(crate) fn cluster(&self) -> &MemoryCluster {
        &self.cluster
    }

    /// Schema changes, for connections registered for `SCHEMA_CHANGE` events.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<SchemaChange> {
        self.events.subscribe()
    }

    /// Plans `query` and keeps it for EXECUTE.
    pub(crate) async fn prepare(
        self: &Arc<Self>,
        session: &Session,
        query: String,
    ) -> Result<Arc<Prepared>, CqlError> {
        let id = statement_id(session.keyspace.as_deref(), &query);
        if let Some(prepared) = lock(&self.prepared).statements.get(&id) {
            return Ok(Arc::clone(prepared));
        }
        let length = query.len();
        let prepared = Arc::new(self.plan_apart(session, query, id.clone()).await?);
        let mut cache = lock(&self.prepared);
        if let Some(prepared) = cache.statements.get(&id) {
            // Prepared meanwhile by another request.
            return Ok(Arc::clone(prepared));
        }
        while cache.statements.len() >= MAX_PREPARED
            || cache.bytes.saturating_add(length) > MAX_PREPARED_BYTES
        {
            let Some((oldest, oldest_length)) = cache.order.pop_front() else {
                break;
            };
            cache.bytes -= oldest_length;
            cache.statements.remove(&oldest);
        }
        cache.order.push_back((id.clone(), length));
        cache.bytes += length;
        cache.statements.insert(id, Arc::clone(&prepared));
        Ok(prepared)
    }

    /// Plans and runs `query` (a QUERY frame).
    pub(crate) async fn query(
        self: &Arc<Self>,
        session: &mut Session,
        query: String,
        params: &QueryParams,
    ) -> Result<Answer, CqlError> {
        let prepared = self.plan_apart(session, query, Vec::new()).await?;
        self.run(session, &prepared, params).await
    }

    /// [`Engine::plan`], on a blocking thread when `query` is longer than
    /// [`PLAN_INLINE_MAX`].
    async fn plan_apart(
        self: &Arc<Self>,
        session: &Session,
        query: String,
        id: Vec<u8>,
    ) -> Result<Prepared, CqlError> {
        if query.len() <= PLAN_INLINE_MAX {
            return self.plan(session, &query, id);
        }
        if query.len() > MAX_STATEMENT_LEN {
            return Err(CqlError::Invalid(format!(
                "a statement of {} bytes is longer than this endpoint serves ({MAX_STATEMENT_LEN} \
                 bytes at most)",
                query.len()
            )));
        }
        let _permit = self
            .long_plans
            .acquire()
            .await
            .map_err(|_| CqlError::Server("the server is shutting down".into()))?;
        let engine = Arc::clone(self);
        let session = session.clone();
        tokio::task::spawn_blocking(move || engine.plan(&session, &query, id))
            .await
            .unwrap_or_else(|error| {
                Err(CqlError::Server(format!(
                    "planning the statement failed: {error}"
                )))
            })
    }

    /// Runs the statement prepared as `id` (an EXECUTE frame).
    pub(crate) async fn execute(
        &self,
        session: &mut Session,
        id: &[u8],
        params: &QueryParams,
    ) -> Result<Answer, CqlError> {
        let prepared = lock(&self.prepared).statements.get(id).cloned();
        let prepared = prepared.ok_or_else(|| CqlError::Unprepared { id: id.to_vec() })?;
        self.run(session, &prepared, params).await
    }

    fn plan(&self, session: &Session, query: &str, id: Vec<u8>) -> Result<Prepared, CqlError> {
        let parsed = parse::parse(query).map_err(|error| match error {
            ParseError::Syntax(message) => CqlError::Syntax(message),
            ParseError::Unsupported(message) => CqlError::Invalid(message),
        })?;
        let schema = lock(&self.schema).clone();
        let mut planner = Planner {
            schema: &schema,
            session,
            binds: vec![None; parsed.bind_markers],
            bind_table: (String::new(), String::new()),
        };
        let (plan, result, pk) = planner.plan(parsed.statement)?;
        let binds = planner
            .binds
            .into_iter()
            .enumerate()
            .map(|(index, spec)| {
                spec.ok_or_else(|| {
                    CqlError::Invalid(format!(
                        "bind marker {index} is not in a place that takes a value"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Prepared {
            id,
            plan,
            binds,
            bind_table: planner.bind_table,
            pk_indexes: pk,
            result,
        })
    }

    async fn run(
        &self,
        session: &mut Session,
        prepared: &Prepared,
        params: &QueryParams,
    ) -> Result<Answer, CqlError> {
        if params.paging_state.is_some() {
            return Err(CqlError::Invalid(
                "this endpoint returns every result in one page and issues no paging state".into(),
            ));
        }
        let values = Values::new(prepared, params)?;
        match &prepared.plan {
            Plan::Write {
                table,
                lock_id,
                row_kind,
                column,
                value,
                ttl,
                timestamp,
            } => {
                self.check_table(table)?;
                let write = CellWrite {
                    row: row_key(&values, lock_id, row_kind)?,
                    column: column_name(&values, column)?,
                    value: match values.get(value, CqlType::Blob, "value")? {
                        Some(CqlValue::Blob(bytes)) => bytes,
                        _ => {
                            return Err(CqlError::Invalid(
                                "value must not be null or unset: this endpoint stores a cell \
                                 only with its value"
                                    .into(),
                            ));
                        }
                    },
                    timestamp: self.timestamp(&values, timestamp.as_ref(), params)?,
                    ttl: ttl_of(&values, ttl.as_ref())?,
                };
                self.storage(StorageRequest::Write(write), params.consistency, true)
                    .await?;
                Ok(Outcome::Void.into())
            }
            Plan::Delete {
                table,
                lock_id,
                row_kind,
                column,
                timestamp,
            } => {
                self.check_table(table)?;
                let delete = CellDelete {
                    row: row_key(&values, lock_id, row_kind)?,
                    column: column_name(&values, column)?,
                    timestamp: self.timestamp(&values, timestamp.as_ref(), params)?,
                };
                self.storage(StorageRequest::Delete(delete), params.consistency, true)
                    .await?;
                Ok(Outcome::Void.into())
            }
            Plan::Read {
                table,
                lock_id,
                row_kind,
                start,
                limit,
                selection,
            } => {
                self.check_table(table)?;
                let row = row_key(&values, lock_id, row_kind)?;
                let limit = limit_of(&values, limit.as_ref())?.unwrap_or(u32::MAX);
                let (start, exact) = match start {
                    Some((term, exact)) => (Some(column_name(&values, term)?), *exact),
                    None => (None, false),
                };
                let read = RowRead {
                    row: row.clone(),
                    start: start.clone(),
                    limit: std::num::NonZeroU32::new(if exact { 1 } else { limit })
                        .unwrap_or(std::num::NonZeroU32::MIN),
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
                                LockColumn::LockId => {
                                    CqlValue::Text(row.lock_id.as_str().to_owned())
                                }
                                LockColumn::RowKind => CqlValue::Text(row.kind.as_str().to_owned()),
                                LockColumn::ColumnName => {
                                    CqlValue::Text(cell.column.as_str().to_owned())
                                }
                                LockColumn::Value => CqlValue::Blob(cell.value.clone()),
                                LockColumn::WriteTime => CqlValue::BigInt(
                                    i64::try_from(cell.write_timestamp.as_micros())
                                        .unwrap_or(i64::MAX),
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
            Plan::System {
                keyspace,
                name,
                selection,
                filters,
                limit,
            } => {
                let schema = lock(&self.schema).clone();
                let table = schema::system_table(keyspace, name, &schema, session.node)
                    .ok_or_else(|| {
                        CqlError::Server(format!("system table {keyspace}.{name} vanished"))
                    })?;
                let rows = system_rows(&table, &values, selection, filters, limit.as_ref())?;
                let rows = one_page(rows, params)?;
                let spec = prepared.result.clone().ok_or_else(|| {
                    CqlError::Server("a system query was planned without result columns".into())
                })?;
                Ok(Outcome::Rows { spec, rows }.into())
            }
            Plan::CreateKeyspace(create) => self.create_keyspace(create),
            Plan::CreateTable { keyspace, create } => self.create_table(keyspace, create),
            Plan::DropKeyspace { name, if_exists } => self.drop(name, None, *if_exists),
            Plan::DropTable {
                keyspace,
                name,
                if_exists,
            } => self.drop(keyspace, Some(name), *if_exists),
            Plan::Use(keyspace) => {
                let exists = schema::is_system_keyspace(keyspace)
                    || lock(&self.schema)
                        .keyspace
                        .as_ref()
                        .is_some_and(|served| &served.name == keyspace);
                if !exists {
                    return Err(CqlError::Invalid(format!(
                        "Keyspace '{keyspace}' does not exist"
                    )));
                }
                session.keyspace = Some(keyspace.clone());
                Ok(Outcome::SetKeyspace(keyspace.clone()).into())
            }
        }
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

    fn create_keyspace(&self, create: &CreateKeyspace) -> Result<Answer, CqlError> {
        let mut schema = lock(&self.schema);
        match &schema.keyspace {
            Some(served) if served.name == create.name => {
                return if create.if_not_exists {
                    Ok(Outcome::Void.into())
                } else {
                    Err(CqlError::AlreadyExists {
                        message: format!("Keyspace {} already exists", create.name),
                        keyspace: create.name.clone(),
                        table: String::new(),
                    })
                };
            }
            Some(served) => {
                return Err(CqlError::Invalid(format!(
                    "this endpoint serves one keyspace at a time and {} exists; DROP KEYSPACE \
                     {} first",
                    served.name, served.name
                )));
            }
            None => {}
        }
        let rf = self.cluster.config().replication_factor;
        let mut replication = None;
        let mut durable_writes = true;
        for (name, property) in &create.properties {
            match (name.as_str(), property) {
                ("replication", Property::Map(entries)) => {
                    replication = Some(replication_map(entries, rf)?);
                }
                ("durable_writes", Property::Constant(Constant::Boolean(value))) => {
                    durable_writes = *value;
                }
                (other, _) => {
                    return Err(CqlError::Invalid(format!(
                        "Unknown or malformed keyspace property '{other}' (this endpoint takes \
                         replication = {{...}} and durable_writes = true|false)"
                    )));
                }
            }
        }
        let replication = replication
            .ok_or_else(|| CqlError::Invalid("Missing mandatory option 'replication'".into()))?;
        schema.keyspace = Some(Keyspace {
            name: create.name.clone(),
            replication,
            durable_writes,
        });
        schema.changes += 1;
        drop(schema);
        Ok(self.changed(
            SchemaChangeType::Created,
            SchemaChangeTarget::Keyspace,
            SchemaChangeOptions::Keyspace(create.name.clone()),
        ))
    }

    fn create_table(&self, keyspace: &str, create: &CreateTable) -> Result<Answer, CqlError> {
        let name = &create.table.name;
        check_lock_table_shape(create)?;
        let mut gc_grace_seconds = None;
        let mut compaction = BTreeMap::new();
        let mut comment = String::new();
        let mut warnings = Vec::new();
        for (property, value) in &create.properties {
            match (property.as_str(), value) {
                ("gc_grace_seconds", Property::Constant(Constant::Number(number))) => {
                    let seconds: u32 = number
                        .parse()
                        .ok()
                        .filter(|seconds| *seconds <= Ttl::MAX_SECONDS)
                        .ok_or_else(|| {
                            CqlError::Invalid(format!(
                                "gc_grace_seconds must be 0 to {}, got {number}",
                                Ttl::MAX_SECONDS
                            ))
                        })?;
                    gc_grace_seconds = Some(seconds);
                }
                ("compaction", Property::Map(entries)) => {
                    compaction = entries
                        .iter()
                        .map(|(key, value)| (key.as_text(), value.as_text()))
                        .collect();
                    warnings.push(
                        "compaction options are recorded in system_schema.tables but change \
                         nothing: the simulated cluster has no SSTables and purges tombstones \
                         whenever a replica touches a row"
                            .to_owned(),
                    );
                }
                ("comment", Property::Constant(Constant::Text(text))) => comment = text.clone(),
                ("default_time_to_live", Property::Constant(Constant::Number(number)))
                    if number == "0" => {}
                (other, _) => {
                    return Err(CqlError::Invalid(format!(
                        "table property '{other}' (or its value) is not supported by this \
                         endpoint; it takes gc_grace_seconds, compaction, comment and \
                         default_time_to_live = 0"
                    )));
                }
            }
        }
        let mut schema = lock(&self.schema);
        if schema
            .keyspace
            .as_ref()
            .is_none_or(|served| served.name != keyspace)
        {
            return Err(CqlError::Invalid(format!(
                "Keyspace '{keyspace}' does not exist"
            )));
        }
        match &schema.table {
            Some(table) if table.name == *name => {
                return if create.if_not_exists {
                    Ok(Outcome::Void.into())
                } else {
                    Err(CqlError::AlreadyExists {
                        message: format!("Table {keyspace}.{name} already exists"),
                        keyspace: keyspace.to_owned(),
                        table: name.clone(),
                    })
                };
            }
            Some(table) => {
                return Err(CqlError::Invalid(format!(
                    "this endpoint serves one table at a time and {}.{} exists; DROP TABLE it \
                     first",
                    table.keyspace, table.name
                )));
            }
            None => {}
        }
        let gc_grace_seconds = match gc_grace_seconds {
            Some(seconds) => {
                self.cluster
                    .faults()
                    .set_gc_grace(Duration::from_secs(u64::from(seconds)))
                    .map_err(|error| CqlError::Invalid(error.to_string()))?;
                seconds
            }
            None => u32::try_from(self.cluster.config().gc_grace.as_secs()).unwrap_or(u32::MAX),
        };
        schema.table = Some(Table {
            keyspace: keyspace.to_owned(),
            name: name.clone(),
            gc_grace_seconds,
            compaction,
            comment,
        });
        schema.changes += 1;
        drop(schema);
        let mut answer = self.changed(
            SchemaChangeType::Created,
            SchemaChangeTarget::Table,
            SchemaChangeOptions::TableType(keyspace.to_owned(), name.clone()),
        );
        answer.warnings = warnings;
        Ok(answer)
    }

    /// DROP KEYSPACE (`table` is `None`) or DROP TABLE: forgets the schema and wipes every
    /// replica, so that a new table starts empty.
    fn drop(
        &self,
        keyspace: &str,
        table: Option<&str>,
        if_exists: bool,
    ) -> Result<Answer, CqlError> {
        let mut schema = lock(&self.schema);
        let exists = match table {
            None => schema
                .keyspace
                .as_ref()
                .is_some_and(|served| served.name == keyspace),
            Some(name) => schema.table(keyspace, name).is_some(),
        };
        if !exists {
            return if if_exists {
                Ok(Outcome::Void.into())
            } else {
                Err(CqlError::Invalid(match table {
                    None => format!("Cannot drop non existing keyspace '{keyspace}'."),
                    Some(name) => format!("Table '{keyspace}.{name}' doesn't exist"),
                }))
            };
        }
        schema.table = None;
        if table.is_none() {
            schema.keyspace = None;
        }
        schema.changes += 1;
        drop(schema);
        let faults = self.cluster.faults();
        for replica in 0..self.cluster.config().replicas {
            faults
                .wipe_replica(ReplicaId(replica))
                .map_err(|error| CqlError::Server(error.to_string()))?;
        }
        Ok(match table {
            None => self.changed(
                SchemaChangeType::Dropped,
                SchemaChangeTarget::Keyspace,
                SchemaChangeOptions::Keyspace(keyspace.to_owned()),
            ),
            Some(name) => self.changed(
                SchemaChangeType::Dropped,
                SchemaChangeTarget::Table,
                SchemaChangeOptions::TableType(keyspace.to_owned(), name.to_owned()),
            ),
        })
    }

    fn changed(
        &self,
        change_type: SchemaChangeType,
        target: SchemaChangeTarget,
        options: SchemaChangeOptions,
    ) -> Answer {
        let change = SchemaChange {
            change_type,
            target,
            options,
        };
        // Nobody listening is fine.
        let _ = self.events.send(change.clone());
        Outcome::SchemaChange(change).into()
    }
}

/// Refuses a result larger than the page the client asked for: this endpoint returns
/// every result in one page and issues no paging state, and cutting the result short
/// would silently drop rows. A page size of zero or less means "unpaged", as in Cassandra.
fn one_page(
    rows: Vec<Vec<CqlValue>>,
    params: &QueryParams,
) -> Result<Vec<Vec<CqlValue>>, CqlError> {
    match params.page_size.and_then(|size| usize::try_from(size).ok()) {
        Some(size) if size > 0 && rows.len() > size => Err(CqlError::Invalid(format!(
            "the result has {} rows, more than the page size {size}, and this endpoint does not \
             page results; raise the page size, run the statement unpaged or add a LIMIT",
            rows.len()
        ))),
        _ => Ok(rows),
    }
}

/// The id of a prepared statement: the MD5 of its keyspace and text, as Cassandra's.
fn statement_id(keyspace: Option<&str>, query: &str) -> Vec<u8> {
    let mut hasher = Md5::new();
    hasher.update(keyspace.unwrap_or_default().as_bytes());
    hasher.update([0]);
    hasher.update(query.as_bytes());
    hasher.finalize().to_vec()
}

/// The frame's consistency code as the wire level and the simulator's level.
pub(crate) fn consistency_level(
    code: i16,
    write: bool,
) -> Result<(WireConsistency, Consistency), CqlError> {
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

/// Checks a keyspace's replication map against the simulated cluster and returns it as
/// `system_schema.keyspaces` shows it.
fn replication_map(
    entries: &[(Constant, Constant)],
    rf: usize,
) -> Result<BTreeMap<String, String>, CqlError> {
    let mut map: BTreeMap<String, String> = entries
        .iter()
        .map(|(key, value)| (key.as_text(), value.as_text()))
        .collect();
    let class = map
        .remove("class")
        .ok_or_else(|| CqlError::Invalid("Missing replication strategy class".into()))?;
    let short = class
        .strip_prefix("org.apache.cassandra.locator.")
        .unwrap_or(&class)
        .to_owned();
    let factors: Vec<(String, String)> = map.into_iter().collect();
    let matches = |factor: &str| factor.parse::<usize>().ok() == Some(rf);
    let ok = match short.as_str() {
        "SimpleStrategy" => {
            matches!(factors.as_slice(), [(key, factor)] if key == "replication_factor" && matches(factor))
        }
        "NetworkTopologyStrategy" => {
            matches!(factors.as_slice(), [(dc, factor)] if dc == DATA_CENTER && matches(factor))
        }
        _ => false,
    };
    if !ok {
        return Err(CqlError::Invalid(format!(
            "this endpoint's simulated cluster has one data centre '{DATA_CENTER}' and \
             replication factor {rf} (set by the server's ClusterConfig); the keyspace must ask \
             for exactly that, with SimpleStrategy (replication_factor: {rf}) or \
             NetworkTopologyStrategy ('{DATA_CENTER}': {rf}), got class {class} with {factors:?}"
        )));
    }
    let mut replication: BTreeMap<String, String> = factors.into_iter().collect();
    replication.insert(
        "class".into(),
        format!("org.apache.cassandra.locator.{short}"),
    );
    Ok(replication)
}

/// Checks that a CREATE TABLE describes the lock table, the only shape the simulated
/// cluster can store.
fn check_lock_table_shape(create: &CreateTable) -> Result<(), CqlError> {
    let wanted = "(lock_id text, row_kind text, column_name text, value blob, PRIMARY KEY \
                  ((lock_id, row_kind), column_name)) WITH CLUSTERING ORDER BY (column_name ASC)";
    let mut columns: Vec<(String, String)> = create
        .columns
        .iter()
        .map(|(name, ty)| {
            let ty = if ty == "varchar" { "text" } else { ty.as_str() };
            (name.clone(), ty.to_owned())
        })
        .collect();
    columns.sort();
    let mut expected: Vec<(String, String)> = LOCK_COLUMNS
        .iter()
        .map(|(name, ty, _, _)| ((*name).to_owned(), ty.cql_name().to_owned()))
        .collect();
    expected.sort();
    let ordered = create.clustering_order.is_empty()
        || create.clustering_order == [("column_name".to_owned(), Order::Asc)];
    if columns != expected
        || create.partition_key != ["lock_id", "row_kind"]
        || create.clustering != ["column_name"]
        || !ordered
    {
        return Err(CqlError::Invalid(format!(
            "this endpoint stores only the lock table's shape {wanted}; {} differs",
            create.table
        )));
    }
    Ok(())
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

/// Turns a statement into a plan, recording the bind markers' names and types.
struct Planner<'a> {
    schema: &'a Schema,
    session: &'a Session,
    binds: Vec<Option<BindSpec>>,
    bind_table: (String, String),
}

/// Where a statement's table is.
enum Target {
    Lock(LockTable),
    System(SystemTable),
}

impl Planner<'_> {
    fn plan(
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
    fn bind(&mut self, term: &Term, name: &str, ty: CqlType) {
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
            Plan::Write {
                table,
                lock_id,
                row_kind,
                column,
                value,
                ttl: insert.ttl,
                timestamp: insert.timestamp,
            },
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
            Plan::Delete {
                table,
                lock_id,
                row_kind,
                column,
                timestamp: delete.timestamp,
            },
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
            Plan::Read {
                table,
                lock_id,
                row_kind,
                start,
                limit: select.limit,
                selection,
            },
            Some(spec),
            pk,
        ))
    }

    fn system_select(
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
            Plan::System {
                keyspace: table.keyspace.to_owned(),
                name: table.name.to_owned(),
                selection,
                filters,
                limit: select.limit,
            },
            Some(spec),
            Vec::new(),
        ))
    }
}

/// The values a request bound, in bind-marker order.
struct Values<'a> {
    raw: Vec<&'a RawValue>,
    specs: &'a [BindSpec],
}

impl<'a> Values<'a> {
    fn new(prepared: &'a Prepared, params: &'a QueryParams) -> Result<Self, CqlError> {
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

    fn ty(&self, term: &Term) -> Option<CqlType> {
        match term {
            Term::Bind(index) => self.specs.get(*index).map(|spec| spec.ty),
            _ => None,
        }
    }

    fn is_null(&self, term: &Term) -> bool {
        matches!(term, Term::Bind(index) if matches!(self.raw.get(*index), Some(RawValue::Null)))
    }

    /// The value of `term` as type `ty`: `None` for a null or unset bound value.
    fn get(&self, term: &Term, ty: CqlType, name: &str) -> Result<Option<CqlValue>, CqlError> {
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
    fn text(&self, term: &Term, ty: CqlType, name: &str) -> Result<String, CqlError> {
        match self.get(term, ty, name)? {
            Some(CqlValue::Text(text)) => Ok(text),
            _ => Err(CqlError::Invalid(format!("Invalid null value for {name}"))),
        }
    }
}

fn row_key(values: &Values<'_>, lock_id: &Term, row_kind: &Term) -> Result<RowKey, CqlError> {
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

fn column_name(values: &Values<'_>, term: &Term) -> Result<ColumnName, CqlError> {
    values
        .text(term, CqlType::Text, "clustering column column_name")
        .map(ColumnName::new)
}

fn ttl_of(values: &Values<'_>, term: Option<&Term>) -> Result<Option<Ttl>, CqlError> {
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

fn limit_of(values: &Values<'_>, term: Option<&Term>) -> Result<Option<u32>, CqlError> {
    let Some(term) = term else { return Ok(None) };
    match values.get(term, CqlType::Int, "[limit]")? {
        None => Ok(None),
        Some(CqlValue::Int(limit)) if limit > 0 => Ok(u32::try_from(limit).ok()),
        Some(_) => Err(CqlError::Invalid("LIMIT must be strictly positive".into())),
    }
}
