//! The CQL endpoint on raw frames: the handshake, concurrent streams, and garbage of
//! every kind, which must always get an answer (or, for an unusable header, an answer
//! and a closed connection) and never take the server down.
#![allow(
    clippy::unwrap_used,
    reason = "a failed unwrap in a test is a failed test"
)]

use std::time::Duration;

use cql_endpoint::{CqlLimits, CqlServer};
use lock_storage_memory::MemoryCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ERROR: u8 = 0x00;
const READY: u8 = 0x02;
const SUPPORTED: u8 = 0x06;
const RESULT: u8 = 0x08;

const STARTUP: u8 = 0x01;
const OPTIONS: u8 = 0x05;
const QUERY: u8 = 0x07;
const PREPARE: u8 = 0x09;
const EXECUTE: u8 = 0x0A;
const REGISTER: u8 = 0x0B;
const BATCH: u8 = 0x0D;

fn frame(stream: i16, opcode: u8, body: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x04, 0];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.push(opcode);
    frame.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

fn long_string(text: &str) -> Vec<u8> {
    let mut bytes = u32::try_from(text.len()).unwrap().to_be_bytes().to_vec();
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

fn query_body(text: &str) -> Vec<u8> {
    let mut body = long_string(text);
    body.extend_from_slice(&[0, 4, 0]); // QUORUM, no flags
    body
}

fn startup_body() -> Vec<u8> {
    let mut body = vec![0, 1];
    for text in ["CQL_VERSION", "3.0.0"] {
        body.extend_from_slice(&u16::try_from(text.len()).unwrap().to_be_bytes());
        body.extend_from_slice(text.as_bytes());
    }
    body
}

/// A response: stream id, opcode, body.
async fn response(socket: &mut TcpStream) -> Option<(i16, u8, Vec<u8>)> {
    let mut header = [0_u8; 9];
    let read = tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut header))
        .await
        .expect("an answer within 5 s");
    read.ok()?;
    assert_eq!(header[0], 0x84, "a v4 response");
    let length = usize::try_from(u32::from_be_bytes(header[5..9].try_into().unwrap())).unwrap();
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.unwrap();
    let stream = i16::from_be_bytes([header[2], header[3]]);
    let flags = header[1];
    if flags & 0x08 != 0 {
        // Skip the warnings.
        let count = u16::from_be_bytes([body[0], body[1]]);
        let mut at = 2;
        for _ in 0..count {
            at += 2 + usize::from(u16::from_be_bytes([body[at], body[at + 1]]));
        }
        body.drain(..at);
    }
    Some((stream, header[4], body))
}

fn error_code(body: &[u8]) -> i32 {
    i32::from_be_bytes(body[..4].try_into().unwrap())
}

async fn ask(socket: &mut TcpStream, stream: i16, opcode: u8, body: &[u8]) -> (u8, Vec<u8>) {
    socket
        .write_all(&frame(stream, opcode, body))
        .await
        .unwrap();
    let (answered, opcode, body) = response(socket).await.expect("an answer, not a close");
    assert_eq!(answered, stream);
    (opcode, body)
}

async fn started(server: &CqlServer) -> TcpStream {
    let mut socket = TcpStream::connect(server.local_addr()).await.unwrap();
    let (opcode, _) = ask(&mut socket, 1, STARTUP, &startup_body()).await;
    assert_eq!(opcode, READY);
    socket
}

/// A small deterministic generator, so that a failure can be replayed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(bound).unwrap()).unwrap()
    }

    fn bytes(&mut self, count: usize) -> Vec<u8> {
        (0..count).map(|_| self.next().to_le_bytes()[0]).collect()
    }
}

#[tokio::test]
async fn the_handshake_and_a_query() {
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut socket = TcpStream::connect(server.local_addr()).await.unwrap();
    let (opcode, body) = ask(&mut socket, 0, OPTIONS, &[]).await;
    assert_eq!(opcode, SUPPORTED);
    assert!(body.windows(4).any(|window| window == b"4/v4"));
    let (opcode, body) = ask(
        &mut socket,
        1,
        QUERY,
        &query_body("SELECT * FROM system.local"),
    )
    .await;
    assert_eq!(
        (opcode, error_code(&body)),
        (ERROR, 0x000A),
        "STARTUP comes first"
    );
    let (opcode, _) = ask(&mut socket, 2, STARTUP, &startup_body()).await;
    assert_eq!(opcode, READY);
    let register = [&[0, 1, 0, 13][..], b"SCHEMA_CHANGE"].concat();
    let (opcode, _) = ask(&mut socket, 3, REGISTER, &register).await;
    assert_eq!(opcode, READY);
    let (opcode, body) = ask(
        &mut socket,
        4,
        QUERY,
        &query_body("SELECT release_version FROM system.local WHERE key = 'local'"),
    )
    .await;
    assert_eq!(opcode, RESULT);
    assert_eq!(&body[..4], &[0, 0, 0, 2], "rows");
    assert!(body.windows(5).any(|window| window == b"4.1.0"));

    // DDL pushes a SCHEMA_CHANGE event to the registered connection, on stream -1.
    let create = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}";
    socket
        .write_all(&frame(5, QUERY, &query_body(create)))
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (stream, opcode, _) = response(&mut socket).await.unwrap();
        seen.push((stream, opcode));
    }
    seen.sort_unstable();
    assert_eq!(seen, [(-1, 0x0C), (5, RESULT)]);
    assert!(server.requests_seen().contains(&format!("QUERY {create}")));
    server.shutdown().await;
}

#[tokio::test]
async fn streams_are_answered_concurrently_each_on_its_own_id() {
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut socket = started(&server).await;
    let mut batch = Vec::new();
    for stream in 10..40 {
        batch.extend(frame(
            stream,
            QUERY,
            &query_body("SELECT key FROM system.local"),
        ));
    }
    socket.write_all(&batch).await.unwrap();
    let mut streams = Vec::new();
    for _ in 10..40 {
        let (stream, opcode, _) = response(&mut socket).await.unwrap();
        assert_eq!(opcode, RESULT);
        streams.push(stream);
    }
    streams.sort_unstable();
    assert_eq!(streams, (10..40).collect::<Vec<i16>>());
    server.shutdown().await;
}

#[tokio::test]
async fn garbage_bodies_get_error_frames_and_the_connection_lives_on() {
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut socket = started(&server).await;
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    let opcodes = [
        STARTUP, OPTIONS, QUERY, PREPARE, EXECUTE, REGISTER, BATCH, 0x0F, 0x03, 0x42,
    ];
    let valid = [
        query_body("SELECT * FROM system.local"),
        query_body("INSERT INTO ks.t (lock_id, row_kind, column_name, value) VALUES (?, ?, ?, ?)"),
        long_string("SELECT * FROM system_schema.columns WHERE keyspace_name IN ?"),
        startup_body(),
    ];
    for round in 0..600_u16 {
        let stream = i16::try_from(round % 30_000).unwrap() + 100;
        let (opcode, body) = match round % 3 {
            // Random bytes under a random opcode.
            0 => {
                let length = random.below(48);
                (opcodes[random.below(opcodes.len())], random.bytes(length))
            }
            // A valid body, cut short.
            1 => {
                let body = &valid[random.below(valid.len())];
                let cut = random.below(body.len());
                (QUERY, body[..cut].to_vec())
            }
            // A valid body with a few bytes changed.
            _ => {
                let mut body = valid[random.below(valid.len())].clone();
                for _ in 0..=random.below(3) {
                    let at = random.below(body.len());
                    body[at] = random.bytes(1)[0];
                }
                (opcodes[random.below(3) + 1], body)
            }
        };
        let (answer, reply) = ask(&mut socket, stream, opcode, &body).await;
        assert!(
            [ERROR, READY, SUPPORTED, RESULT].contains(&answer),
            "round {round}: opcode {answer:#x}"
        );
        if answer == ERROR {
            assert!(reply.len() >= 6, "round {round}: an error body");
        }
    }
    // Still serving on the same connection.
    let (opcode, _) = ask(
        &mut socket,
        7,
        QUERY,
        &query_body("SELECT key FROM system.local"),
    )
    .await;
    assert_eq!(opcode, RESULT);
    server.shutdown().await;
}

#[tokio::test]
async fn unusable_headers_get_a_protocol_error_then_a_close() {
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let bad_headers: [&[u8]; 4] = [
        &[0x05, 0, 0, 9, OPTIONS, 0, 0, 0, 0],
        &[0x03, 0, 0, 9, OPTIONS, 0, 0, 0, 0],
        &[0x04, 0, 0, 9, OPTIONS, 0xff, 0xff, 0xff, 0xff],
        &[0x04, 0, 0, 9, OPTIONS, 0x7f, 0, 0, 0],
    ];
    for header in bad_headers {
        let mut socket = TcpStream::connect(server.local_addr()).await.unwrap();
        socket.write_all(header).await.unwrap();
        let (stream, opcode, body) = response(&mut socket).await.unwrap();
        assert_eq!(
            (stream, opcode, error_code(&body)),
            (9, ERROR, 0x000A),
            "{header:?}"
        );
        assert!(
            response(&mut socket).await.is_none(),
            "closed after {header:?}"
        );
    }
    // A connection that sends half a frame and leaves does no harm either.
    let mut socket = TcpStream::connect(server.local_addr()).await.unwrap();
    socket.write_all(&[0x04, 0, 0]).await.unwrap();
    drop(socket);
    let mut socket = started(&server).await;
    let (opcode, _) = ask(&mut socket, 2, OPTIONS, &[]).await;
    assert_eq!(opcode, SUPPORTED);
    server.shutdown().await;
}

#[tokio::test]
async fn bodies_up_to_the_configured_limit_are_read_longer_ones_close() {
    let limit = 64;
    let limits = CqlLimits::default().with_max_body_bytes(limit);
    let server = CqlServer::start_with_limits(MemoryCluster::default(), "127.0.0.1:0", limits)
        .await
        .unwrap();
    let mut socket = started(&server).await;
    let at_limit = query_body(&"x".repeat(limit - 4 - 3));
    assert_eq!(at_limit.len(), limit);
    let (opcode, body) = ask(&mut socket, 3, QUERY, &at_limit).await;
    assert_eq!(
        (opcode, error_code(&body)),
        (ERROR, 0x2000),
        "parsed, not refused"
    );
    let over = query_body(&"x".repeat(limit));
    socket.write_all(&frame(4, QUERY, &over)).await.unwrap();
    let (stream, opcode, body) = response(&mut socket).await.unwrap();
    assert_eq!((stream, opcode, error_code(&body)), (4, ERROR, 0x000A));
    assert!(error_message(&body).contains("at most 64 bytes"));
    assert!(response(&mut socket).await.is_none(), "closed");
    assert_eq!(server.buffered_bytes(), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_the_listener_and_the_connections() {
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let address = server.local_addr();
    let mut socket = started(&server).await;
    server.shutdown().await;
    assert!(
        response(&mut socket).await.is_none(),
        "the connection closed"
    );
    assert!(TcpStream::connect(address).await.is_err(), "nobody listens");
}

#[tokio::test]
async fn executing_an_unknown_id_is_unprepared_with_the_id() {
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut socket = started(&server).await;
    let id = [0xde, 0xad, 0xbe, 0xef];
    let mut body = vec![0, 4];
    body.extend_from_slice(&id);
    body.extend_from_slice(&[0, 4, 0]); // QUORUM, no flags
    let (opcode, reply) = ask(&mut socket, 3, EXECUTE, &body).await;
    assert_eq!((opcode, error_code(&reply)), (ERROR, 0x2500));
    // [int code][string message][short bytes id]: the id comes back so that the driver
    // knows which statement to prepare again.
    let message_len = usize::from(u16::from_be_bytes([reply[4], reply[5]]));
    let rest = &reply[6 + message_len..];
    assert_eq!(rest, [&[0, 4][..], &id].concat(), "the unknown id");
    server.shutdown().await;
}

/// The message of an ERROR body, checking that its `[string]` length is the truth.
fn error_message(body: &[u8]) -> String {
    let length = usize::from(u16::from_be_bytes([body[4], body[5]]));
    assert!(body.len() >= 6 + length, "the message fits its body");
    String::from_utf8(body[6..6 + length].to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_types_get_an_error_frame_and_the_server_lives_on() {
    // Regression: this statement used to overflow the stack and abort the process.
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut socket = started(&server).await;
    let statement = format!(
        "CREATE TABLE ks.t (a text, b {}text{}, PRIMARY KEY (a))",
        "frozen<".repeat(10_000),
        ">".repeat(10_000)
    );
    let (opcode, reply) = ask(&mut socket, 2, QUERY, &query_body(&statement)).await;
    assert_eq!((opcode, error_code(&reply)), (ERROR, 0x2200));
    assert!(error_message(&reply).contains("nested"));
    let (opcode, reply) = ask(&mut socket, 3, PREPARE, &long_string(&statement)).await;
    assert_eq!((opcode, error_code(&reply)), (ERROR, 0x2200));
    let (opcode, _) = ask(&mut socket, 4, OPTIONS, &[]).await;
    assert_eq!(opcode, SUPPORTED);
    server.shutdown().await;
}

/// A one-line statement of `size` bytes with a token every two bytes.
fn long_statement(size: usize) -> String {
    let mut text = String::from("SELECT key FROM system.local WHERE key IN ('local'");
    while text.len() + 3 <= size {
        text.push_str(",'");
        text.push('\'');
    }
    text.push(')');
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_statements_hold_up_no_other_connection() {
    // Regression: a 1 MB statement used to take 17 s or more to tokenise, on a runtime worker;
    // two of them held up every other connection for as long.
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut long = started(&server).await;
    let statement = long_statement(1024 * 1024 - 16);
    let body = query_body(&statement);
    for stream in 2..6 {
        let opcode = if stream % 2 == 0 { QUERY } else { PREPARE };
        let body = if opcode == QUERY {
            body.clone()
        } else {
            long_string(&statement)
        };
        long.write_all(&frame(stream, opcode, &body)).await.unwrap();
    }
    // Meanwhile another connection is answered at once, every time.
    let mut other = started(&server).await;
    let mut slowest = Duration::ZERO;
    for stream in 10..40 {
        let started = std::time::Instant::now();
        let (opcode, _) = ask(&mut other, stream, OPTIONS, &[]).await;
        assert_eq!(opcode, SUPPORTED);
        slowest = slowest.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    for _ in 2..6 {
        let (_, opcode, body) = response(&mut long).await.unwrap();
        assert_ne!(opcode, ERROR, "{}", error_message(&body));
    }
    // Longer than the endpoint serves: refused unparsed.
    let too_long = long_statement(1024 * 1024 + 16);
    let (opcode, reply) = ask(&mut long, 7, QUERY, &query_body(&too_long)).await;
    assert_eq!((opcode, error_code(&reply)), (ERROR, 0x2200));
    assert!(error_message(&reply).contains("longer"));
    server.shutdown().await;
}

#[tokio::test]
async fn refused_requests_are_kept_small() {
    // Regression: the whole text of up to 1,000 refused requests used to be kept; 30 requests
    // of 4 MiB held 170 MB for good.
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut socket = started(&server).await;
    for round in 0..30_i16 {
        let text = format!("{round} {}", "x".repeat(512 * 1024));
        let (opcode, _) = ask(&mut socket, round + 2, QUERY, &query_body(&text)).await;
        assert_eq!(opcode, ERROR);
    }
    for round in 0..1_200_i16 {
        let text = format!("nonsense {round}");
        let (opcode, _) = ask(&mut socket, 100, PREPARE, &long_string(&text)).await;
        assert_eq!(opcode, ERROR);
    }
    let seen = server.requests_seen();
    assert_eq!(seen.len(), 1000);
    let kept: usize = seen.iter().map(String::len).sum();
    assert!(kept <= 1000 * 300, "{kept} bytes kept");
    let longest = seen.iter().map(String::len).max().unwrap();
    assert!(longest <= 300, "{longest} bytes");
    assert!(
        seen.iter().any(|seen| seen.contains("(524291 bytes)")),
        "{seen:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn long_error_messages_are_cut_and_the_frame_stays_well_formed() {
    // A message quoting a client's 100 kB literal overflowed the `[string]` length.
    let server = CqlServer::start(MemoryCluster::default(), "127.0.0.1:0")
        .await
        .unwrap();
    let mut socket = started(&server).await;
    let text = format!("SELECT '{}' extra", "y".repeat(100_000));
    let (opcode, reply) = ask(&mut socket, 2, QUERY, &query_body(&text)).await;
    assert_eq!((opcode, error_code(&reply)), (ERROR, 0x2000));
    let message = error_message(&reply);
    assert!(message.len() <= 1024, "{} bytes", message.len());
    assert_eq!(reply.len(), 6 + message.len(), "nothing after the message");
    let (opcode, _) = ask(&mut socket, 3, OPTIONS, &[]).await;
    assert_eq!(opcode, SUPPORTED);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_over_the_buffer_cap_are_overloaded_not_buffered() {
    // Regression: each connection used to be able to buffer a 16 MiB frame, and nothing
    // capped the total.
    let limits = CqlLimits::default().with_max_buffered_bytes(1024 * 1024);
    let server = CqlServer::start_with_limits(MemoryCluster::default(), "127.0.0.1:0", limits)
        .await
        .unwrap();
    // One connection sends the start of a 900 kB frame, and holds that much.
    let mut slow = started(&server).await;
    let padded = format!("{}SELECT key FROM system.local", " ".repeat(900_000));
    let whole = frame(2, QUERY, &query_body(&padded));
    slow.write_all(&whole[..1000]).await.unwrap();
    for _ in 0..500 {
        if server.buffered_bytes() >= 900_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(server.buffered_bytes() >= 900_000);
    // Another's 200 kB frame would go over: refused, skipped, and the connection lives on.
    let mut other = started(&server).await;
    let big = format!("{}SELECT key FROM system.local", " ".repeat(200_000));
    let (opcode, reply) = ask(&mut other, 3, QUERY, &query_body(&big)).await;
    assert_eq!((opcode, error_code(&reply)), (ERROR, 0x1001));
    assert!(server.buffered_bytes() < 1024 * 1024);
    let (opcode, _) = ask(&mut other, 4, OPTIONS, &[]).await;
    assert_eq!(opcode, SUPPORTED);
    // Once the first frame is answered, its bytes are free again.
    slow.write_all(&whole[1000..]).await.unwrap();
    let (stream, opcode, _) = response(&mut slow).await.unwrap();
    assert_eq!((stream, opcode), (2, RESULT));
    for _ in 0..500 {
        if server.buffered_bytes() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.buffered_bytes(), 0);
    let (opcode, _) = ask(&mut other, 5, QUERY, &query_body(&big)).await;
    assert_eq!(opcode, RESULT);
    server.shutdown().await;
}
