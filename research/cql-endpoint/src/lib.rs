//! A CQL native protocol v4 server over `lock-storage-memory`'s simulated cluster, for
//! testing real CQL drivers: a driver (the `scylla` crate, through
//! `lock-storage-cassandra`) talks over the real wire to a store that honours TTLs, write
//! timestamps, tombstones and consistency levels, with the simulator's fault injection
//! at hand. It is a test server with a protocol, not a storage backend: the lock never
//! depends on it.
//!
//! ```no_run
//! use cql_endpoint::CqlServer;
//! use lock_storage_memory::{MemoryCluster, ReplicaId};
//!
//! # async fn example() -> Result<(), lock_storage_memory::MemoryError> {
//! let cluster = MemoryCluster::default();
//! let server = CqlServer::start(cluster.clone(), "127.0.0.1:0").await?;
//! let contact_point = server.contact_point(); // give this to the driver
//! cluster.faults().stop_replica(ReplicaId(2))?; // QUORUM still succeeds
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Running `cql-server`
//!
//! The `cql-server` binary serves a simulated cluster until interrupted (Ctrl-C), on
//! 127.0.0.1:9042 unless told otherwise:
//!
//! ```text
//! cargo run --release -p cql-endpoint --bin cql-server -- --listen 127.0.0.1:9042 \
//!     --replicas 3 --rf 3 --latency-ms 1-5 --max-buffered-mib 64
//! ```
//!
//! `cql-server --help` lists the options (replicas, replication factor, latency, the
//! coordinator's timeout, the latency seed, [`CqlLimits::max_buffered_bytes`]); a driver
//! then connects to the address printed.
//!
//! # What is served
//!
//! **Frames** (protocol v4 only, no compression, no authentication): OPTIONS (answered
//! with SUPPORTED: `CQL_VERSION`, `PROTOCOL_VERSIONS` 4/v4, no `COMPRESSION`), STARTUP
//! (READY), REGISTER (READY; `SCHEMA_CHANGE` events are pushed after DDL, topology and
//! status events never happen), QUERY, PREPARE and EXECUTE. Requests on one connection
//! run concurrently and are answered as they complete. Results come in one page: a
//! result with more rows than the request's page size is refused (Invalid), never cut
//! short, and a request carrying a paging state is refused too.
//!
//! **Statements** on the one keyspace and table the endpoint serves, which must have the
//! lock table's shape (`lock_id text, row_kind text, column_name text, value blob,
//! PRIMARY KEY ((lock_id, row_kind), column_name)`, clustering `ASC`):
//!
//! * `INSERT INTO t (lock_id, row_kind, column_name, value) VALUES (...) [USING TTL t
//!   [AND TIMESTAMP ts]]`: one [`CellWrite`](lock_core::storage::CellWrite). `TTL 0` or
//!   an unset TTL means none. Without `USING TIMESTAMP` the frame's default timestamp is
//!   used, else the simulated cluster's clock.
//! * `DELETE FROM t [USING TIMESTAMP ts] WHERE lock_id = ? AND row_kind = ? AND
//!   column_name = ?`: one [`CellDelete`](lock_core::storage::CellDelete).
//! * `SELECT column_name, value, WRITETIME(value) FROM t WHERE lock_id = ? AND row_kind =
//!   ? [AND column_name >= ?] [LIMIT n]`: one [`RowRead`](lock_core::storage::RowRead);
//!   `*`, `lock_id`, `row_kind` and `column_name = ?` are served too.
//! * `CREATE KEYSPACE [IF NOT EXISTS]` with `SimpleStrategy` or `NetworkTopologyStrategy`
//!   whose replication factor must equal the simulated cluster's (one data centre,
//!   `datacenter1`); `CREATE TABLE [IF NOT EXISTS]` of the lock table, whose
//!   `gc_grace_seconds` becomes the cluster's (`FaultHandle::set_gc_grace`), whose
//!   `compaction` options are recorded with a warning (they change nothing here), whose
//!   `memtable_flush_period_in_ms` is accepted with a warning (there are no memtables), and whose
//!   `id`, a quoted UUID, is what `system_schema.tables` shows (else one derived from the
//!   name);
//!   `DROP KEYSPACE`/`DROP TABLE [IF EXISTS]`, which wipe every replica; `USE`.
//!   One keyspace and one table at a time.
//!
//! Values may be bound (`?`, positionally or by name) or literal (`'text'`, integers,
//! `0x..` blobs). Each statement runs at the consistency level of its frame: `ONE` and
//! `LOCAL_ONE` as ONE, `QUORUM`, `LOCAL_QUORUM` and `EACH_QUORUM` as QUORUM (one data
//! centre), `ALL` as ALL; `ANY`, `TWO`, `THREE` and the serial levels are refused.
//!
//! **System tables** for a one-node cluster: `system.local` (one row: data centre
//! `datacenter1`, rack `rack1`, release 4.1.0, Murmur3 partitioner, token 0, the address
//! the client connected to), empty `system.peers` and `system.peers_v2`, and
//! `system_schema.keyspaces`, `tables`, `columns` (describing the served keyspace and
//! table), `types`, `views`, `functions`, `aggregates`, `indexes` and `triggers` (empty),
//! filtered by `=` or `IN` on their key columns. ScyllaDB's own tables
//! (`system_schema.scylla_tables`, ...) are "unconfigured", as on Cassandra.
//!
//! # Errors
//!
//! Every refusal is an ERROR frame, never a dropped connection or an ignored clause:
//!
//! | cause | frame |
//! |---|---|
//! | not CQL | Syntax error (0x2000), with line and column |
//! | CQL this endpoint does not serve (`IF`, `ORDER BY`, `ALLOW FILTERING`, `UPDATE`, `BATCH`, other `WHERE` shapes, `TTL()`, other table shapes) | Invalid (0x2200), naming the feature |
//! | unknown keyspace, table or column; a bad value (`row_kind` not a lock row, a negative TTL, a null key) | Invalid (0x2200) |
//! | a result larger than the page size asked for, a paging state | Invalid (0x2200) |
//! | fewer replicas up than the level needs | Unavailable (0x1000) with consistency, required, alive |
//! | a write or delete that timed out | Write timeout (0x1100) with received and block-for |
//! | a read (or its read repair) that timed out | Read timeout (0x1200) |
//! | `CREATE` of something that exists without `IF NOT EXISTS` | Already exists (0x2400) |
//! | EXECUTE of an unknown id | Unprepared (0x2500), and the driver prepares again |
//! | a malformed frame or body, an unsupported flag or version, a request before STARTUP | Protocol error (0x000A); the connection closes only if the frame header itself is unusable |
//! | a frame header announcing a body longer than [`CqlLimits::max_body_bytes`] | Protocol error (0x000A), then the connection closes |
//! | a frame that would take the bytes held across connections over [`CqlLimits::max_buffered_bytes`] | Overloaded (0x1001); the frame is skipped unread and the connection lives on |
//!
//! Error messages are cut to 1,024 bytes (they may quote the client's text).
//!
//! # Limits
//!
//! The endpoint is meant to survive hostile input: nothing a client sends can make it
//! panic, recurse without bound, or hold memory without bound.
//!
//! * **Frames**: a connection's bytes are cut into frames by a `tokio-util` codec that
//!   reads each header before its body. A body is at most [`CqlLimits::max_body_bytes`]
//!   (16 MiB by default, Cassandra's `native_transport_max_frame_size`); a header that
//!   announces more, or another protocol version, gets a protocol error and the
//!   connection closes, with nothing of the announced size allocated.
//! * **Bytes held across connections**: a frame counts from when its header arrives until
//!   it is answered, and the total is capped by [`CqlLimits::max_buffered_bytes`] (64 MiB
//!   by default; `cql-server --max-buffered-mib`). A frame over the cap is refused
//!   (Overloaded) and its body dropped as it arrives. A connection's buffer grows to a
//!   frame's size only once the cap has granted its bytes, and holds at most that frame
//!   and what one read brings after it (a read fills only the buffer's spare room,
//!   64 KiB at first).
//! * **Statements**: at most 1 MiB of text (longer is Invalid, unparsed). Tokenising and
//!   parsing are linear in the text. Statements over 64 KiB are parsed on a blocking
//!   thread, at most 2 at a time, so that they never hold up other connections.
//! * **Nesting**: types nest at most 32 deep (`frozen<list<...>>`; deeper is Invalid).
//!   No other part of the parser or the frame decoder recurses.
//! * **Requests kept** for [`CqlServer::requests_seen`]: at most 1,000 distinct ones, each
//!   cut to its first 256 bytes of text (plus its full length), so at most about 300 kB.
//! * **Prepared statements**: at most 10,000, and at most 64 MiB of statement text in
//!   all; past either the oldest are forgotten (EXECUTE of one gets Unprepared, and the
//!   driver prepares it again).
//!
//! Not served: protocol v3 and v5, compression, authentication, tracing, custom payloads,
//! paging (results come whole), batches, lightweight transactions, `UPDATE`, secondary
//! indexes, user types, functions, more than one keyspace or table, `TTL()`, and
//! ScyllaDB's shard-aware port and protocol extensions (the driver sees a Cassandra
//! 4.1 node).

mod codec;
mod error;
mod exec;
mod frame;
mod parse;
mod schema;
mod server;
mod value;

pub use server::{CqlLimits, CqlServer};

/// Entry points for the fuzz targets (`research/cql-endpoint/fuzz`) and the property tests:
/// the frame decoder and the statement parser on arbitrary input. Not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    /// Feeds `bytes` in pieces to the frame decoder a connection runs, and decodes every
    /// request body; returns how many frames were decoded or refused.
    pub fn decode_frames(bytes: &[u8]) -> usize {
        super::codec::fuzz_frames(bytes)
    }

    /// Parses `text` as one statement; true when it parsed.
    pub fn parse_statement(text: &str) -> bool {
        super::parse::parse(text).is_ok()
    }

    /// Parses `text` as a table's `id` property (a UUID); true when it parsed.
    pub fn parse_table_id(text: &str) -> bool {
        super::schema::parse_uuid(text).is_some()
    }
}
