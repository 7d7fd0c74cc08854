//! Running statements on the simulated cluster.
//!
//! A statement is planned once (at PREPARE, or for each QUERY): its table is resolved,
//! its shape checked against what the lock table can express, and every bind marker
//! given a name and a type. Running a plan decodes the bound values and makes exactly
//! one [`LockStorage`](lock_core::LockStorage)-equivalent request, at the consistency
//! level the frame carries.
//!
//! By job:
//!
//! * this module: what every connection shares (`Engine`), the requests kept for
//!   `CqlServer::requests_seen`, and the dispatch of a planned statement to the job that
//!   runs it;
//! * `prepared`: PREPARE, QUERY and EXECUTE: planning a statement's text (apart, when it
//!   is long) and the bounded cache of prepared statements;
//! * `plan`: checking a statement against the schema: its table, its shape, and each bind
//!   marker's name and type;
//! * `values`: the values a request bound, decoded as the plan's types;
//! * `lock_table`: the lock table's writes, deletes and reads, one storage request each;
//! * `ddl`: the schema statements (CREATE and DROP of the keyspace and the table, USE)
//!   and the schema change events they send;
//! * `system`: the system tables the drivers read (`system.local`, `system.peers`,
//!   `system_schema.*`).

mod ddl;
mod lock_table;
mod plan;
mod prepared;
mod system;
mod values;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cassandra_protocol::frame::events::SchemaChange;
use lock_storage_memory::{MemoryClient, MemoryCluster};
use tokio::sync::broadcast;

use plan::Plan;
pub(crate) use plan::ResultSpec;
pub(crate) use prepared::Prepared;
use prepared::{MAX_LONG_PLANS, PreparedCache};
use values::Values;

use crate::error::CqlError;
use crate::frame::QueryParams;
use crate::schema::{NodeInfo, Schema};
use crate::value::CqlValue;

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

    /// Runs a planned statement: each kind of plan goes to the job that runs it.
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
            Plan::Write(write) => self.write(write, &values, params).await,
            Plan::Delete(delete) => self.delete(delete, &values, params).await,
            Plan::Read(read) => self.read(read, prepared, &values, params).await,
            Plan::System(system) => self.select_system(system, prepared, session, &values, params),
            Plan::CreateKeyspace(create) => self.create_keyspace(create),
            Plan::CreateTable { keyspace, create } => self.create_table(keyspace, create),
            Plan::DropKeyspace { name, if_exists } => self.drop(name, None, *if_exists),
            Plan::DropTable {
                keyspace,
                name,
                if_exists,
            } => self.drop(keyspace, Some(name), *if_exists),
            Plan::Use(keyspace) => self.use_keyspace(session, keyspace),
        }
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
