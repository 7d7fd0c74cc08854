//! The listener, the connections, and the answers as frames.

use std::net::SocketAddr;
use std::sync::Arc;

use cassandra_protocol::frame::events::{SchemaChange, ServerEvent};
use cassandra_protocol::frame::message_event::BodyResEvent;
use cassandra_protocol::frame::message_result::{
    BodyResResultPrepared, BodyResResultRows, BodyResResultSetKeyspace, ColSpec, PreparedMetadata,
    ResResultBody, RowsMetadata, RowsMetadataFlags, TableSpec,
};
use cassandra_protocol::frame::{Opcode, Serialize, Version};
use cassandra_protocol::types::CBytesShort;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::{broadcast, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::error::CqlError;
use super::exec::{Answer, Engine, Outcome, Prepared, ResultSpec, Session};
use super::frame::{
    self, BadHeader, HEADER_LEN, Header, Request, encode_response, error_frame, supported_body,
};
use super::schema::{self, NodeInfo};
use crate::MemoryCluster;
use crate::error::MemoryError;
use crate::id::ClientId;

/// A CQL native protocol v4 endpoint serving a [`MemoryCluster`]; see the [module
/// docs](crate::cql) for what it serves.
///
/// It runs on the Tokio runtime it was started in, until [`CqlServer::shutdown`] or until
/// it is dropped. Start the cluster and the server in a runtime with real time (the
/// driver's sockets and timeouts do not follow a paused clock).
#[derive(Debug)]
pub struct CqlServer {
    address: SocketAddr,
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
        let (shutdown, stop) = watch::channel(false);
        let task = tokio::spawn(accept(listener, Arc::clone(&engine), stop));
        tracing::info!(%address, "CQL endpoint listening");
        Ok(CqlServer {
            address,
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
    /// [`FaultHandle::partition`](crate::FaultHandle::partition) to make requests time out.
    pub fn client_id(&self) -> ClientId {
        self.engine.client().id()
    }

    /// Every distinct request received so far, in order of first arrival: `OPTIONS`,
    /// `STARTUP {options}`, `REGISTER [events]`, `QUERY <text>`, `PREPARE <text>`, `BATCH`
    /// (at most 1000). Shows what a driver asks for, refused requests included.
    pub fn requests_seen(&self) -> Vec<String> {
        self.engine.requests()
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

impl Drop for CqlServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

async fn accept(listener: TcpListener, engine: Arc<Engine>, mut stop: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tracing::debug!(%peer, "CQL connection accepted");
                    // Small frames: send them at once.
                    let _ = stream.set_nodelay(true);
                    connections.spawn(serve(stream, Arc::clone(&engine), stop.clone()));
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

/// One connection: frames in, frames out. Requests run concurrently (the driver
/// multiplexes streams); the answers are written as they complete.
async fn serve(stream: TcpStream, engine: Arc<Engine>, mut stop: watch::Receiver<bool>) {
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
    let (mut reader, mut writer) = stream.into_split();
    let mut buffer = Vec::new();
    let mut chunk = vec![0_u8; 64 * 1024];
    loop {
        // Answer every complete frame received so far.
        loop {
            match take_frame(&mut buffer) {
                Ok(Some((header, body))) => {
                    if let Some(frame) = connection.handle(header, body)
                        && writer.write_all(&frame).await.is_err()
                    {
                        return;
                    }
                }
                Ok(None) => break,
                Err((stream_id, error)) => {
                    // The framing cannot be trusted any more: answer and close.
                    tracing::debug!(%error, "closing a CQL connection after a bad frame header");
                    let _ = writer.write_all(&error_frame(stream_id, &error)).await;
                    let _ = writer.shutdown().await;
                    return;
                }
            }
        }
        tokio::select! {
            read = reader.read(&mut chunk) => match read {
                Ok(0) | Err(_) => return,
                Ok(count) => buffer.extend_from_slice(&chunk[..count]),
            },
            Some(done) = connection.requests.join_next(), if !connection.requests.is_empty() => {
                let frame = match done {
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
                };
                if writer.write_all(&frame).await.is_err() {
                    return;
                }
            }
            event = next_event(&mut connection.events) => {
                if let Some(change) = event {
                    let body = BodyResEvent { event: ServerEvent::SchemaChange(change) }
                        .serialize_to_vec(Version::V4);
                    let frame = encode_response(-1, Opcode::Event, body, Vec::new());
                    if writer.write_all(&frame).await.is_err() {
                        return;
                    }
                }
            }
            _ = stop.changed() => return,
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

/// Takes one complete frame off the front of `buffer`, if there is one.
#[allow(clippy::type_complexity)]
fn take_frame(buffer: &mut Vec<u8>) -> Result<Option<(Header, Vec<u8>)>, (i16, CqlError)> {
    let Some(head) = buffer.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let stream_id = i16::from_be_bytes([head[2], head[3]]);
    let header = Header::parse(head).map_err(|bad| {
        let error = match bad {
            BadHeader::Version(version) => CqlError::Protocol(format!(
                "Invalid or unsupported protocol version ({}); supported versions are (4/v4)",
                version & 0x7f
            )),
            BadHeader::Length(length) => CqlError::Protocol(format!(
                "invalid frame body length {length} (at most {} bytes)",
                frame::MAX_BODY_LEN
            )),
        };
        (stream_id, error)
    })?;
    if buffer.len() < HEADER_LEN + header.length {
        return Ok(None);
    }
    let body = buffer[HEADER_LEN..HEADER_LEN + header.length].to_vec();
    buffer.drain(..HEADER_LEN + header.length);
    Ok(Some((header, body)))
}

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
    fn handle(&mut self, header: Header, body: Vec<u8>) -> Option<Vec<u8>> {
        let stream = header.stream;
        let request = match frame::decode_request(&header, &body) {
            Ok(request) => request,
            Err(error) => return Some(error_frame(stream, &error)),
        };
        self.engine.note(describe(&request));
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
                let frame = match self.engine.prepare(&self.session, &query) {
                    Ok(prepared) => {
                        answer_frame(stream, Answer::from(Outcome::Prepared(prepared)), false)
                    }
                    Err(error) => {
                        tracing::debug!(%query, %error, "CQL PREPARE refused");
                        error_frame(stream, &error)
                    }
                };
                Some(frame)
            }
            Request::Query { query, params } => {
                let engine = Arc::clone(&self.engine);
                let mut session = self.session.clone();
                self.requests.spawn(async move {
                    let answer = engine.query(&mut session, &query, &params).await;
                    if let Err(error) = &answer {
                        tracing::debug!(%query, %error, "CQL QUERY failed");
                    }
                    finish(stream, answer, params.skip_metadata)
                });
                None
            }
            Request::Execute { id, params } => {
                let engine = Arc::clone(&self.engine);
                let mut session = self.session.clone();
                self.requests.spawn(async move {
                    let answer = engine.execute(&mut session, &id, &params).await;
                    finish(stream, answer, params.skip_metadata)
                });
                None
            }
        }
    }
}

/// A request as [`CqlServer::requests_seen`] lists it.
fn describe(request: &Request) -> String {
    match request {
        Request::Startup(options) => {
            let options: Vec<&str> = options.keys().map(String::as_str).collect();
            format!("STARTUP {options:?}")
        }
        Request::Options => "OPTIONS".into(),
        Request::Query { query, .. } => format!("QUERY {query}"),
        Request::Prepare { query } => format!("PREPARE {query}"),
        Request::Execute { .. } => "EXECUTE".into(),
        Request::Batch => "BATCH".into(),
        Request::Register(events) => format!("REGISTER {events:?}"),
        Request::AuthResponse => "AUTH_RESPONSE".into(),
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
