//! PREPARE, QUERY and EXECUTE: a statement's text planned (on a blocking thread when it
//! is long, and refused unparsed when it is too long), and the prepared statements kept
//! for EXECUTE, bounded in number and in text.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use md5::{Digest, Md5};

use super::plan::{Plan, Planner, ResultSpec};
use super::{Answer, Engine, Session, lock};
use crate::error::CqlError;
use crate::frame::QueryParams;
use crate::parse::{self, ParseError};
use crate::value::CqlType;

/// The most prepared statements kept; past it the oldest are forgotten (a client that
/// executes one gets UNPREPARED and prepares it again, as with Cassandra's cache).
const MAX_PREPARED: usize = 10_000;

/// The most statement text, in bytes, behind the prepared statements kept (a plan keeps
/// the literals of its text, so this bounds their memory too); past it the oldest are
/// forgotten, as past [`MAX_PREPARED`].
const MAX_PREPARED_BYTES: usize = 64 * 1024 * 1024;

/// Statements longer than this are planned on a blocking thread, so that parsing a long
/// statement never holds up a runtime worker and with it other connections.
const PLAN_INLINE_MAX: usize = 64 * 1024;

/// The longest statement served, in bytes; a longer one is refused (Invalid) unparsed.
/// Parsing takes memory and time in proportion to the text, and the lock table's
/// statements are a few hundred bytes.
const MAX_STATEMENT_LEN: usize = 1024 * 1024;

/// The most statements longer than [`PLAN_INLINE_MAX`] planned at once; the others wait.
/// This bounds the memory and the threads that long statements take.
pub(super) const MAX_LONG_PLANS: usize = 2;

/// A bind marker's name (as prepared metadata shows it) and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BindSpec {
    pub(crate) name: String,
    pub(crate) ty: CqlType,
}

/// A statement ready to run: what PREPARE returns and EXECUTE runs.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) id: Vec<u8>,
    pub(super) plan: Plan,
    pub(crate) binds: Vec<BindSpec>,
    /// The table the bind markers belong to (keyspace, table).
    pub(crate) bind_table: (String, String),
    pub(crate) pk_indexes: Vec<i16>,
    pub(crate) result: Option<ResultSpec>,
}

#[derive(Debug, Default)]
pub(super) struct PreparedCache {
    statements: HashMap<Vec<u8>, Arc<Prepared>>,
    /// Ids from oldest to newest, with the length of their statement's text.
    order: VecDeque<(Vec<u8>, usize)>,
    /// The sum of the lengths in `order`.
    bytes: usize,
}

impl Engine {
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
}

/// The id of a prepared statement: the MD5 of its keyspace and text, as Cassandra's.
fn statement_id(keyspace: Option<&str>, query: &str) -> Vec<u8> {
    let mut hasher = Md5::new();
    hasher.update(keyspace.unwrap_or_default().as_bytes());
    hasher.update([0]);
    hasher.update(query.as_bytes());
    hasher.finalize().to_vec()
}
