//! The listener, the connections, and the answers as frames.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use cassandra_protocol::frame::events::{SchemaChange, ServerEvent};
use cassandra_protocol::frame::message_event::BodyResEvent;
use cassandra_protocol::frame::message_result::{
    BodyResResultPrepared, BodyResResultRows, BodyResResultSetKeyspace, ColSpec, PreparedMetadata,
    ResResultBody, RowsMetadata, RowsMetadataFlags, TableSpec,
};
use cassandra_protocol::frame::{Opcode, Serialize, Version};
use cassandra_protocol::types::CBytesShort;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::{broadcast, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::FramedRead;

use crate::codec::{Budget, FrameDecoder, FrameError, Inbound, Reservation};
use crate::error::CqlError;
use crate::exec::{self, Answer, Engine, Outcome, Prepared, ResultSpec, Session};
use crate::frame::{self, Header, Request, encode_response, error_frame, supported_body};
use crate::schema::{self, NodeInfo};
use lock_storage_memory::{ClientId, MemoryCluster, MemoryError};

/// A CQL native protocol v4 endpoint serving a [`MemoryCluster`]; see the [module
/// docs](crate) for what it serves.
///
/// It runs on the Tokio runtime it was started in, until [`CqlServer::shutdown`] or until
/// it is dropped. Start the cluster and the server in a runtime with real time (the
/// driver's sockets and timeouts do not follow a paused clock).
#[derive(Debug)]
pub struct CqlServer {
    address: SocketAddr,
    budget: Arc<Budget>,
    engine: Arc<Engine>,
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl CqlServer {
    /// Listens on `address` (use port 0 for any free port, and read the port back from
    /// [`CqlServer::local_addr`]) and serves `cluster` there. Must be called inside a Tokio
    /// runtime with IO and time enabled.
    pub async fn start(
        cluster: MemoryCluster,
        address: impl ToSocketAddrs,
    ) -> Result<CqlServer, MemoryError> {
        CqlServer::start_with_limits(cluster, address, CqlLimits::default()).await
    }

    /// [`CqlServer::start`], with `limits` instead of the defaults.
    pub async fn start_with_limits(
        cluster: MemoryCluster,
        address: impl ToSocketAddrs,
        limits: CqlLimits,
    ) -> Result<CqlServer, MemoryError> {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|error| MemoryError::Network {
                address: "the requested address".into(),
                reason: error.to_string(),
            })?;
        let address = listener
            .local_addr()
            .map_err(|error| MemoryError::Network {
                address: "the bound socket".into(),
                reason: error.to_string(),
            })?;
        let engine = Arc::new(Engine::new(cluster));
        let budget = Budget::new(limits.max_buffered_bytes);
        let (shutdown, stop) = watch::channel(false);
        let task = tokio::spawn(accept(
            listener,
            Arc::clone(&engine),
            Arc::clone(&budget),
            limits.max_body_bytes,
            stop,
        ));
        tracing::info!(%address, "CQL endpoint listening");
        Ok(CqlServer {
            address,
            budget,
            engine,
            shutdown,
            task: Some(task),
        })
    }

    /// The address the endpoint listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// The endpoint's address as a driver contact point, `host:port`.
    pub fn contact_point(&self) -> String {
        self.address.to_string()
    }

    /// The cluster served.
    pub fn cluster(&self) -> &MemoryCluster {
        self.engine.cluster()
    }

    /// The simulator client every CQL request goes through: the one node the driver sees
    /// is this client's coordinator. Cut its links with
    /// [`FaultHandle::partition`](lock_storage_memory::FaultHandle::partition) to make requests time out.
    pub fn client_id(&self) -> ClientId {
        self.engine.client().id()
    }

    /// Every distinct request received so far, in order of first arrival: `OPTIONS`,
    /// `STARTUP {options}`, `REGISTER [events]`, `QUERY <text>`, `PREPARE <text>`, `BATCH`
    /// (at most 1000, each text cut to its first 256 bytes and its length). Shows what a
    /// driver asks for, refused requests included.
    pub fn requests_seen(&self) -> Vec<String> {
        self.engine.requests()
    }

    /// The bytes of request frames held right now, across every connection: frames being
    /// received and requests not yet answered. At most [`CqlLimits::max_buffered_bytes`].
    pub fn buffered_bytes(&self) -> usize {
        self.budget.used()
    }

    /// Stops listening and closes every connection; requests in flight are abandoned.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(task) = self.task.take() {
            // The task ends by itself once told to; a panic in it is already logged.
            let _ = task.await;
        }
    }
}

/// Limits of a [`CqlServer`] that are not fixed by the protocol; see the [module
/// docs](crate#limits).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CqlLimits {
    /// The most bytes of request frames held at once across every connection: a frame
    /// counts from when its header arrives until it is answered. A frame that would go
    /// over it is not read in but skipped, and answered with an Overloaded error (0x1001).
    /// 64 MiB by default; a single frame is at most [`CqlLimits::max_body_bytes`] (and
    /// its 9-byte header) whatever this is.
    pub max_buffered_bytes: usize,
    /// The longest frame body accepted, in bytes: a frame header announcing more is
    /// answered with a protocol error (0x000A) before any of its body is read, and the
    /// connection closes. 16 MiB by default (Cassandra's
    /// `native_transport_max_frame_size`).
    pub max_body_bytes: usize,
}

impl Default for CqlLimits {
    fn default() -> Self {
        CqlLimits {
            max_buffered_bytes: DEFAULT_MAX_BUFFERED_BYTES,
            max_body_bytes: frame::DEFAULT_MAX_BODY_BYTES,
        }
    }
}

impl CqlLimits {
    /// These limits with [`CqlLimits::max_buffered_bytes`] set to `bytes`.
    #[must_use]
    pub fn with_max_buffered_bytes(mut self, bytes: usize) -> Self {
        self.max_buffered_bytes = bytes;
        self
    }

    /// These limits with [`CqlLimits::max_body_bytes`] set to `bytes`.
    #[must_use]
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }
}

/// The default of [`CqlLimits::max_buffered_bytes`].
pub(crate) const DEFAULT_MAX_BUFFERED_BYTES: usize = 64 * 1024 * 1024;

impl Drop for CqlServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

async fn accept(
    listener: TcpListener,
    engine: Arc<Engine>,
    budget: Arc<Budget>,
    max_body: usize,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tracing::debug!(%peer, "CQL connection accepted");
                    // Small frames: send them at once.
                    let _ = stream.set_nodelay(true);
                    let decoder = FrameDecoder::new(max_body, Arc::clone(&budget));
                    connections.spawn(serve(stream, Arc::clone(&engine), decoder, stop.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "CQL endpoint could not accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    // Dropping the set aborts every connection, and each connection its requests.
    drop(connections);
}

/// One connection: frames in (cut by a [`FrameDecoder`]), frames out. Requests run
/// concurrently (the driver multiplexes streams); the answers are written as they
/// complete.
async fn serve(
    stream: TcpStream,
    engine: Arc<Engine>,
    decoder: FrameDecoder,
    mut stop: watch::Receiver<bool>,
) {
    let node = match stream.local_addr() {
        Ok(address) => NodeInfo {
            address: address.ip(),
            port: address.port(),
        },
        Err(_) => return,
    };
    let mut connection = Connection {
        engine,
        session: Session {
            keyspace: None,
            node,
        },
        started: false,
        events: None,
        requests: JoinSet::new(),
    };
    let (reader, mut writer) = stream.into_split();
    let mut frames = FramedRead::with_capacity(reader, decoder, READ_CAPACITY);
    loop {
        let frame = tokio::select! {
            inbound = frames.next() => match inbound {
                Some(Ok(Inbound::Frame { header, body, reservation })) => {
                    match connection.handle(header, body, reservation) {
                        Some(frame) => frame,
                        None => continue,
                    }
                }
                Some(Ok(Inbound::Overloaded { stream, error })) => error_frame(stream, &error),
                Some(Err(FrameError::Header { stream, bad })) => {
                    // The framing cannot be trusted any more: answer and close.
                    let error = bad.error();
                    tracing::debug!(%error, "closing a CQL connection after a bad frame header");
                    let _ = writer.write_all(&error_frame(stream, &error)).await;
                    let _ = writer.shutdown().await;
                    return;
                }
                // Closed, or failed.
                None | Some(Err(FrameError::Io(_))) => return,
            },
            Some(done) = connection.requests.join_next(), if !connection.requests.is_empty() => {
                match done {
                    Ok((frame, keyspace)) => {
                        if let Some(keyspace) = keyspace {
                            connection.session.keyspace = Some(keyspace);
                        }
                        frame
                    }
                    // A request task panicked (a bug): its stream id is lost with it.
                    Err(error) => {
                        tracing::error!(%error, "a CQL request task failed");
                        continue;
                    }
                }
            }
            event = next_event(&mut connection.events) => match event {
                Some(change) => {
                    let body = BodyResEvent { event: ServerEvent::SchemaChange(change) }
                        .serialize_to_vec(Version::V4);
                    encode_response(-1, Opcode::Event, body, Vec::new())
                }
                None => continue,
            },
            _ = stop.changed() => return,
        };
        if writer.write_all(&frame).await.is_err() {
            return;
        }
    }
}

/// The next schema change for a connection registered for them; never, otherwise.
async fn next_event(
    events: &mut Option<broadcast::Receiver<SchemaChange>>,
) -> Option<SchemaChange> {
    match events {
        Some(receiver) => match receiver.recv().await {
            Ok(change) => Some(change),
            Err(broadcast::error::RecvError::Lagged(_)) => None,
            Err(broadcast::error::RecvError::Closed) => {
                *events = None;
                None
            }
        },
        None => std::future::pending().await,
    }
}

/// The buffer a connection starts reading into; it grows to hold a longer frame once the
/// frame's header has been accepted (see [`crate::codec`]).
const READ_CAPACITY: usize = 64 * 1024;

/// What one connection knows.
struct Connection {
    engine: Arc<Engine>,
    session: Session,
    started: bool,
    events: Option<broadcast::Receiver<SchemaChange>>,
    /// Requests in flight: each yields its answer frame and, after `USE`, the new keyspace.
    requests: JoinSet<(Vec<u8>, Option<String>)>,
}

const SUPPORTED: [(&str, &[&str]); 3] = [
    ("CQL_VERSION", &[schema::CQL_VERSION]),
    ("COMPRESSION", &[]),
    ("PROTOCOL_VERSIONS", &["4/v4"]),
];

const EVENT_TYPES: [&str; 3] = ["TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"];

impl Connection {
    /// Answers a frame at once, or starts a request task and returns `None`.
    /// `reservation` holds the frame's bytes against the budget until it is answered.
    fn handle(
        &mut self,
        header: Header,
        body: BytesMut,
        reservation: Reservation,
    ) -> Option<Vec<u8>> {
        let stream = header.stream;
        let request = match frame::decode_request(&header, &body) {
            Ok(request) => request,
            Err(error) => return Some(error_frame(stream, &error)),
        };
        drop(body);
        let (kind, detail) = describe(&request);
        self.engine.note(kind, detail.as_deref());
        let ready = || encode_response(stream, Opcode::Ready, Vec::new(), Vec::new());
        let error = |error: CqlError| Some(error_frame(stream, &error));
        match request {
            Request::Options => Some(encode_response(
                stream,
                Opcode::Supported,
                supported_body(&SUPPORTED),
                Vec::new(),
            )),
            Request::Startup(options) => {
                if let Some(compression) = options.get("COMPRESSION") {
                    return error(CqlError::Protocol(format!(
                        "compression {compression} is not supported by this server"
                    )));
                }
                self.started = true;
                Some(ready())
            }
            _ if !self.started => error(CqlError::Protocol(
                "Unexpected message, expecting STARTUP or OPTIONS".into(),
            )),
            Request::AuthResponse => error(CqlError::Protocol(
                "this server requires no authentication".into(),
            )),
            Request::Register(events) => {
                if let Some(unknown) = events
                    .iter()
                    .find(|event| !EVENT_TYPES.contains(&event.as_str()))
                {
                    return error(CqlError::Protocol(format!("unknown event type {unknown}")));
                }
                if events.iter().any(|event| event == "SCHEMA_CHANGE") && self.events.is_none() {
                    self.events = Some(self.engine.subscribe());
                }
                Some(ready())
            }
            Request::Batch => error(CqlError::Invalid(
                "BATCH is not supported by this endpoint: it serves single INSERT, DELETE and \
                 SELECT statements on the lock table (the lock backend sends no batches)"
                    .into(),
            )),
            Request::Prepare { query } => {
                let engine = Arc::clone(&self.engine);
                let session = self.session.clone();
                self.requests.spawn(async move {
                    let shown = exec::noted(&query);
                    let frame = match engine.prepare(&session, query).await {
                        Ok(prepared) => {
                            answer_frame(stream, Answer::from(Outcome::Prepared(prepared)), false)
                        }
                        Err(error) => {
                            tracing::debug!(query = %shown, %error, "CQL PREPARE refused");
                            error_frame(stream, &error)
                        }
                    };
                    drop(reservation);
                    (frame, None)
                });
                None
            }
            Request::Query { query, params } => {
                let engine = Arc::clone(&self.engine);
                let mut session = self.session.clone();
                self.requests.spawn(async move {
                    let shown = exec::noted(&query);
                    let answer = engine.query(&mut session, query, &params).await;
                    if let Err(error) = &answer {
                        tracing::debug!(query = %shown, %error, "CQL QUERY failed");
                    }
                    drop(reservation);
                    finish(stream, answer, params.skip_metadata)
                });
                None
            }
            Request::Execute { id, params } => {
                let engine = Arc::clone(&self.engine);
                let mut session = self.session.clone();
                self.requests.spawn(async move {
                    let answer = engine.execute(&mut session, &id, &params).await;
                    drop(reservation);
                    finish(stream, answer, params.skip_metadata)
                });
                None
            }
        }
    }
}

/// A request as [`CqlServer::requests_seen`] lists it: its kind and what follows (which
/// [`Engine::note`] cuts short).
fn describe(request: &Request) -> (&'static str, Option<Cow<'_, str>>) {
    match request {
        Request::Startup(options) => {
            let options: Vec<&str> = options.keys().map(String::as_str).collect();
            ("STARTUP", Some(format!("{options:?}").into()))
        }
        Request::Options => ("OPTIONS", None),
        Request::Query { query, .. } => ("QUERY", Some(query.as_str().into())),
        Request::Prepare { query } => ("PREPARE", Some(query.as_str().into())),
        Request::Execute { .. } => ("EXECUTE", None),
        Request::Batch => ("BATCH", None),
        Request::Register(events) => ("REGISTER", Some(format!("{events:?}").into())),
        Request::AuthResponse => ("AUTH_RESPONSE", None),
    }
}

fn finish(
    stream: i16,
    answer: Result<Answer, CqlError>,
    skip_metadata: bool,
) -> (Vec<u8>, Option<String>) {
    match answer {
        Ok(answer) => {
            let keyspace = match &answer.outcome {
                Outcome::SetKeyspace(keyspace) => Some(keyspace.clone()),
                _ => None,
            };
            (answer_frame(stream, answer, skip_metadata), keyspace)
        }
        Err(error) => (error_frame(stream, &error), None),
    }
}

fn answer_frame(stream: i16, answer: Answer, skip_metadata: bool) -> Vec<u8> {
    let body = match answer.outcome {
        Outcome::Void => ResResultBody::Void,
        Outcome::Rows { spec, rows } => ResResultBody::Rows(BodyResResultRows {
            metadata: rows_metadata(&spec, skip_metadata),
            rows_count: i32::try_from(rows.len()).unwrap_or(i32::MAX),
            rows_content: rows
                .iter()
                .map(|row| row.iter().map(|value| value.encode()).collect())
                .collect(),
            protocol_version: Version::V4,
        }),
        Outcome::SetKeyspace(keyspace) => {
            ResResultBody::SetKeyspace(BodyResResultSetKeyspace { body: keyspace })
        }
        Outcome::SchemaChange(change) => ResResultBody::SchemaChange(change),
        Outcome::Prepared(prepared) => ResResultBody::Prepared(prepared_body(&prepared)),
    };
    encode_response(
        stream,
        Opcode::Result,
        body.serialize_to_vec(Version::V4),
        answer.warnings,
    )
}

fn table_spec(keyspace: &str, table: &str) -> TableSpec {
    TableSpec {
        ks_name: keyspace.to_owned(),
        table_name: table.to_owned(),
    }
}

fn rows_metadata(spec: &ResultSpec, skip_metadata: bool) -> RowsMetadata {
    let columns_count = i32::try_from(spec.columns.len()).unwrap_or(i32::MAX);
    if skip_metadata || spec.columns.is_empty() {
        return RowsMetadata {
            flags: RowsMetadataFlags::NO_METADATA,
            columns_count,
            paging_state: None,
            new_metadata_id: None,
            global_table_spec: None,
            col_specs: Vec::new(),
        };
    }
    RowsMetadata {
        flags: RowsMetadataFlags::GLOBAL_TABLE_SPACE,
        columns_count,
        paging_state: None,
        new_metadata_id: None,
        global_table_spec: Some(table_spec(&spec.keyspace, &spec.table)),
        col_specs: spec
            .columns
            .iter()
            .map(|(name, ty)| ColSpec {
                table_spec: None,
                name: name.clone(),
                col_type: ty.option(),
            })
            .collect(),
    }
}

fn prepared_body(prepared: &Prepared) -> BodyResResultPrepared {
    let (keyspace, table) = &prepared.bind_table;
    let no_result = ResultSpec {
        keyspace: keyspace.clone(),
        table: table.clone(),
        columns: Vec::new(),
    };
    BodyResResultPrepared {
        id: CBytesShort::new(prepared.id.clone()),
        result_metadata_id: None,
        metadata: PreparedMetadata {
            pk_indexes: prepared.pk_indexes.clone(),
            global_table_spec: (!prepared.binds.is_empty()).then(|| table_spec(keyspace, table)),
            col_specs: prepared
                .binds
                .iter()
                .map(|bind| ColSpec {
                    table_spec: None,
                    name: bind.name.clone(),
                    col_type: bind.ty.option(),
                })
                .collect(),
        },
        result_metadata: rows_metadata(prepared.result.as_ref().unwrap_or(&no_result), false),
    }
}
