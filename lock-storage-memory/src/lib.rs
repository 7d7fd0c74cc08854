//! An in-memory simulator of a Cassandra-like quorum cluster, implementing
//! [`lock_core::LockStorage`]: the embedded default backend of the lock, the substrate of
//! its benchmark and of its property tests.
//!
//! ```
//! use lock_core::storage::{CellWrite, RowKey, RowKind, RowRead};
//! use lock_core::{ColumnName, LockId, LockStorage, Timestamp};
//! use lock_storage_memory::MemoryCluster;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let storage = MemoryCluster::default().client();
//! let row = RowKey::new(RowKind::Main, LockId::new("account:1")?);
//! storage
//!     .write_cell(CellWrite {
//!         row: row.clone(),
//!         column: ColumnName::new("owner-a"),
//!         value: b"owner-a".to_vec(),
//!         timestamp: Timestamp::from_micros(1),
//!         ttl: None,
//!     })
//!     .await?;
//! let cells = storage.read_row(RowRead::first(row, 10)).await?;
//! assert_eq!(cells[0].column.as_str(), "owner-a");
//! # Ok::<(), lock_core::Error>(())
//! # }).unwrap();
//! ```
//!
//! Faults are injected through [`MemoryCluster::faults`] while clients run; a
//! [`ClusterConfig`] sets the shape, latency, timeouts and seed:
//!
//! ```
//! use std::time::Duration;
//! use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster, ReplicaId};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
//! let cluster = MemoryCluster::new(ClusterConfig {
//!     replicas: 5,
//!     replication_factor: 3,
//!     latency: Latency::LogNormal {
//!         median: Duration::from_millis(1),
//!         p99: Duration::from_millis(20),
//!     },
//!     seed: 7,
//!     ..ClusterConfig::default()
//! })?;
//! let (alice, bob) = (cluster.client(), cluster.client());
//! let faults = cluster.faults();
//! faults.stop_replica(ReplicaId(4))?;
//! faults.partition(bob.id(), ReplicaId(0))?;
//! # Ok::<(), lock_storage_memory::MemoryError>(())
//! # }).unwrap();
//! ```
//!
//! # The model
//!
//! **Replicas and rows.** The cluster has `replicas` nodes (N) and replication factor RF
//! (default 3 and 3). A row lives on RF consecutive nodes of the ring, from the one that
//! owns the MD5 token of its key (as `RandomPartitioner` with `SimpleStrategy`); with
//! N = RF every node holds every row. Each replica keeps its rows as cells sorted by
//! column name (byte order). A cell version has a value, the writer's timestamp and an
//! optional expiry, or is a tombstone.
//!
//! **Merging** follows lock-core's merge rule ([`lock_core::storage::merge`]), which is
//! Apache Cassandra 5.0's: the higher timestamp wins; on a tie a tombstone wins, then a
//! value with a TTL over one without, then the later expiry, then the greater value bytes
//! (unsigned). The order is total, so the merge is commutative, associative and
//! idempotent. Replicas merge incoming writes this way, on the versions as written (an
//! expired value still ranks as a value with a TTL, as in a Cassandra memtable), and read
//! coordinators merge the replicas' answers this way. The model checker's store and
//! lock-core's test store use the same rule. See [Faithful to Cassandra 5.0](#faithful-to-cassandra-50)
//! for how this was checked and what changed.
//!
//! **TTL and clocks.** Every replica and every client has its own wall clock: Tokio's time
//! mapped to microseconds since the Unix epoch from [`ClusterConfig::epoch`], plus an
//! offset and a drift ([`ClockSkew`]) that [`FaultHandle`] can change at run time. As in
//! Cassandra, a TTL becomes an expiry second at the *coordinator*: the coordinator's clock
//! truncated to whole seconds, plus the TTL. A delete's tombstone is stamped with the
//! coordinator's second too. Each replica then judges liveness by *its own* clock in whole
//! seconds (`now < expiry`) when it answers a read; so a replica whose clock runs ahead of
//! the coordinator's by more than the TTL sees the cell born dead (the thesis's problem 2).
//! A read sees an expired value as a tombstone with the value's timestamp: it still
//! shadows older versions and wins ties against what other replicas answer. A replica
//! purges a
//! tombstone or an expired value once its own clock is past the deletion (or expiry)
//! second plus [`ClusterConfig::gc_grace`]; after that, a late write with a lower timestamp
//! can resurface, as in Cassandra.
//!
//! **Coordinators.** Each request has a coordinator: the client's driver is token-aware
//! and picks, round-robin per client, among the row's replicas that are up and reachable
//! from the client. The coordinator's clock stamps expiries and deletions. The network is
//! modelled as one link per (client, replica) pair: a request message goes from the client
//! (through its coordinator, a hop folded into the one latency draw) to each replica, and
//! the reply comes back the same way; every message's latency is drawn independently
//! from [`ClusterConfig::latency`].
//!
//! **Writes and deletes** go to all RF replicas. If fewer replicas than the consistency
//! level needs are *up* (the coordinator's failure detector is perfect and instant about
//! stopped replicas, but blind to cut links), the request fails at once with
//! [`lock_core::Error::StorageUnavailable`] and nothing is applied (Cassandra's
//! `UnavailableException`). Otherwise the mutation is sent to every up replica; a message
//! is lost if, when it arrives, its replica is down or its link is cut. The request
//! succeeds when enough acknowledgements arrive within [`ClusterConfig::request_timeout`];
//! else, after the timeout, it fails with [`lock_core::Error::StorageOutcomeUnknown`] and
//! whatever reached replicas stays there (Cassandra's `WriteTimeoutException`). Deliveries
//! still in flight carry on after the coordinator has answered, and after the caller drops
//! the future.
//!
//! **Reads** ask exactly as many replicas as the consistency level needs: the coordinator
//! itself, then the next up replicas of the row in ring order. Each replica answers with
//! its versions from the start column to the end of the row, judged by its clock; the
//! coordinator merges them column by column and returns the first `limit` live cells, so
//! the result is exact, as if Cassandra's short-read protection were perfect. A replica
//! counts the dead cells (tombstones and expired values) it scans before its own
//! `limit`-th live cell; [`ClusterConfig::dead_cell_read_cost`] optionally delays its
//! answer by that many times a fixed cost. A read that times out fails with
//! [`lock_core::Error::StorageUnavailable`]: a read applies nothing.
//!
//! **Read repair** (on by default, [`ClusterConfig::read_repair`]) is blocking, as in
//! Cassandra 4: before answering, the coordinator sends each answering replica that
//! missed a merged version (among the columns it read) the winning one, and waits for
//! their acknowledgements. So once a quorum read has returned a cell, every later quorum
//! read sees it.
//!
//! **Hinted handoff** is modelled ([`ClusterConfig::hint_window`], on by default with
//! Cassandra's three hours): the coordinator keeps a hint for every replica it knows to be
//! down (if it has been down for less than the window) and replays it when both are up
//! again. Writes lost to a cut link or a timeout leave no hint; read repair mends those.
//!
//! **Faults** ([`FaultHandle`]): replicas stop and start (keeping their data) or are
//! wiped, links between a client and a replica are cut and healed, and the latency
//! distribution, the timeout, the dead-cell cost and every clock can be changed while
//! clients run.
//!
//! **Determinism.** On a current-thread Tokio runtime with the clock paused
//! (`#[tokio::test(start_paused = true)]`), a run is a function of the seed and of what the
//! clients do: latencies come from a seeded ChaCha generator, all state is kept in ordered
//! collections (rows, found only by key, in a hash map with an unkeyed hasher, which no
//! result depends on the order of), messages with a latency are processed in (arrival time,
//! send order), and a
//! message with zero latency is handled the moment it is sent. With
//! [`ClusterConfig::record_history`] the cluster records every request, answer and applied
//! mutation ([`MemoryCluster::history`]) to compare runs.
//!
//! **Cost.** A request with zero latency is served inline, under one lock, without spawning
//! or sleeping (it sleeps only if it must wait for its timeout); when every replica asked
//! answers and their rows agree, a read walks the rows in step instead of copying them out
//! (the answer, counters and dead cells scanned are those of the full merge). A row keeps
//! its cells in a sorted vector up to 4096 cells (a B-tree beyond), so that the millions of
//! one-cell rows a long run leaves cost little memory, and a queue row is written at its
//! end and read from its start without searching its middle. The `throughput` example
//! measures this path. Messages with latency wait in an event queue that whoever touches
//! the cluster next processes up to the current time, so no background task is needed;
//! [`MemoryCluster::settle`] waits until nothing is in flight. Tokio's
//! timer has millisecond resolution: a client may see an answer up to a millisecond after
//! the simulated time it arrived at (the simulation itself is exact to the microsecond).
//!
//! # Deviations from Cassandra
//!
//! * Liveness at read time is judged by each replica's own clock, as this project's spec
//!   asks. Real Cassandra (3.0 and later) sends the read coordinator's `nowInSec` along with
//!   the read command and judges expiry by it on every replica; its replicas' own clocks
//!   only decide purging.
//! * The client-to-coordinator hop is folded into the replica links; a cut link only stops
//!   the client from using that replica as coordinator and loses the messages of that
//!   pair. Coordinators never learn of cut links (no failure detection by timeouts) and do
//!   no speculative retry.
//! * Read repair and short-read protection are exact and cost no extra round trip beyond
//!   the repair itself; digest reads are not modelled (every contacted replica sends data).
//! * Purging happens whenever a replica touches a row, not in compaction; hints are not
//!   expired by `gc_grace`; there are no anti-entropy repairs, no lightweight transactions,
//!   no multi-datacentre levels. Consistency levels are per client, except through
//!   [`MemoryClient::execute_at`], which runs one request at a given level (as a CQL
//!   statement carries its own) and reports failures with the coordinator's detail
//!   ([`FailureDetail`]).
//!
//! # Faithful to Cassandra 5.0
//!
//! `lock-tests`'s differential test (`tests/tests/differential.rs`) plays the same random
//! sequences of writes (explicit timestamps, ties, TTLs of 1 and 2 s that expire during
//! the sequence, no TTL), deletes and slice reads (start column, `LIMIT` across
//! tombstones) at `QUORUM`, `ALL`, `LOCAL_QUORUM` and `EACH_QUORUM` on a real local 3-node
//! Apache Cassandra 5.0.6, on this simulator's client and on `CassandraStorage` over
//! this simulator's CQL endpoint, and requires identical answers. Its first run found the
//! first difference below; reading Cassandra's reconciliation (`Cells.resolveRegular`,
//! `LivenessInfo.supersedes`) gave the others, and hand-written cases in the same test
//! (`known_cases` in `lock_tests::differential`) confirmed each on the real cluster; the
//! old simulator failed each of those cases. Each is now changed to what Cassandra does:
//!
//! * **Two values with equal timestamps.** The simulator kept the value with the smaller
//!   MD5 (the thesis's `GetBestCell`); Cassandra keeps the greater value, bytes compared
//!   unsigned (`0x80…` beats `0x7f`, `"ab"` beats `"a"`): `"a"` and `"b"` written with
//!   one timestamp read back as `"b"` on Cassandra, `"a"` here.
//! * **A value with a TTL against one without, equal timestamps.** The simulator decided
//!   by MD5; Cassandra keeps the one with the TTL (CASSANDRA-14592), even after it has
//!   expired, so the cell is then dead (`"a"` without TTL and `""` with one: `""`).
//! * **Two values with TTLs, equal timestamps.** The simulator decided by MD5 and only then
//!   by expiry; Cassandra keeps the later expiry first, and compares values only between
//!   equal expiries (`""` for 2 s and `"a"` for 1 s: `""`, live for 2 s, where the
//!   simulator kept `"a"` and lost the cell after 1 s).
//! * **Two values with TTLs, equal timestamps and equal expiries.** Found by the test
//!   after those fixes: `"b"` written with a TTL of 2 s and, a second later, `""` with the
//!   same timestamp and a TTL of 1 s expire in the same second; the simulator compared the
//!   values and kept `"b"`, Cassandra keeps the smaller TTL, `""`.
//! * **Merging expired values.** A replica judged versions by its clock before merging a
//!   write, so an expired value became a tombstone that beat a rewrite with the same
//!   timestamp and a later expiry. A Cassandra memtable reconciles cells as written,
//!   without a clock, so the rewrite wins and the cell lives again; replicas here now
//!   merge as written too, and judge expiry only when they answer a read. (Per
//!   Cassandra's source, compaction turns an expired value into a tombstone, after which
//!   such a rewrite loses; the simulator has no compaction, and the test does not reach
//!   one.)
//!
//! The rule lives in lock-core ([`lock_core::storage::merge`]), shared with the model
//! checker's store and lock-core's test store; the thesis's MD5 rule is not kept. The CQL
//! endpoint showed no divergence of its own. Ties between a delete and a write already
//! matched (a tombstone wins a tie with any value, with or without TTL), as did slices
//! with a start column and a `LIMIT` across tombstones and expired values.

mod cells;
mod clock;
mod cluster;
mod config;
mod counters;
mod error;
mod failure;
mod history;
mod id;
mod latency;
mod read;
mod replica;
mod sim;
mod version;

pub use clock::ClockSkew;
pub use cluster::{ClientClock, FaultHandle, MemoryClient, MemoryCluster, SimulatedWakeHints};
pub use config::{ClientOptions, ClusterConfig, Consistency};
pub use counters::{Counters, ReplicaCounters, RequestCounts};
pub use error::MemoryError;
pub use failure::{FailureDetail, RequestFailure};
pub use history::{ApplyCause, HistoryEntry, HistoryEvent};
pub use id::{ClientId, ReplicaId};
pub use latency::Latency;
pub use version::{CellState, CellVersion};

/// This crate's README, compiled with its doctests so that its examples cannot drift from
/// the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
