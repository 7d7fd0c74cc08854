//! Differential testing of the simulator against Apache Cassandra: the same random sequence
//! of storage operations ([`Op`]) is played, operation by operation, on several
//! [`Target`]s (a real cluster through `CassandraStorage`, the memory cluster's client
//! directly, and `CassandraStorage` over the memory cluster's CQL endpoint), and every
//! answer must be the same.
//!
//! # Comparable clocks
//!
//! Cassandra stamps an expiring cell with `localExpirationTime = nowInSec + ttl`, where
//! `nowInSec` is the coordinator's wall clock in whole seconds, and judges it live while
//! the reading coordinator's `nowInSec < localExpirationTime`. Two expiring writes of a cell
//! with equal timestamps are reconciled by that expiry too. So an answer depends on which
//! wall second each operation ran in, and the targets must agree on it. A [`Case`] is
//! therefore played in *phases*: every operation of a phase, on every target, runs inside
//! one wall second, started at least [`MARGIN_MICROS`] after it began and finished at
//! least [`MARGIN_MICROS`] before it ends (the targets' clocks are this machine's wall
//! clock, or the simulator's copy of it, within a few milliseconds of each other).
//! [`Op::Pause`] starts a new phase that many seconds later. A case whose phase overran
//! its second is *inconclusive*: its answers are not compared.

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::collections::BTreeMap;

use cql_endpoint::CqlServer;
use fair_lock::{Clock, SystemClock};
use lock_core::storage::{Cell, CellDelete, CellWrite, RowKey, RowKind, RowRead, Ttl};
use lock_core::{ColumnName, LockId, LockStorage, Timestamp};
use lock_storage_cassandra::scylla::statement::Statement;
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, LockConsistency, Replication, SchemaConfig,
};
use lock_storage_memory::{ClientOptions, ClusterConfig, Consistency, Latency, MemoryCluster};
use proptest::prelude::*;

/// The column names a case writes to: few, so that operations meet on the same cells.
pub const COLUMNS: [&str; 4] = ["a", "b", "c", "d"];

/// The values a case writes: empty, ASCII, a prefix of another, and bytes above `0x7f`
/// (so that a signed and an unsigned byte order disagree).
pub const VALUES: [&[u8]; 6] = [b"", b"a", b"b", b"ab", b"\x7f", b"\x80\x00"];

/// The write timestamp an [`Op`]'s small timestamp stands for, in microseconds.
pub const TIMESTAMP_BASE: u64 = 1_600_000_000_000_000;

/// How far into a wall second a phase must start, and how far before its end it must
/// finish, in microseconds.
pub const MARGIN_MICROS: u64 = 25_000;

/// The latest point in a wall second at which a phase may start, in microseconds.
pub const LATEST_START_MICROS: u64 = 600_000;

/// A consistency level, as each target spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// `QUORUM` reads and writes.
    Quorum,
    /// `ALL` reads and writes.
    All,
    /// `LOCAL_QUORUM` reads and writes.
    LocalQuorum,
    /// `EACH_QUORUM` writes, `LOCAL_QUORUM` reads.
    EachQuorum,
}

impl Level {
    /// Every level, in the order a [`Target`]'s storages are given.
    pub const ALL: [Level; 4] = [
        Level::Quorum,
        Level::All,
        Level::LocalQuorum,
        Level::EachQuorum,
    ];

    fn index(self) -> usize {
        match self {
            Level::Quorum => 0,
            Level::All => 1,
            Level::LocalQuorum => 2,
            Level::EachQuorum => 3,
        }
    }
}

/// A TTL a write may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TtlChoice {
    /// No TTL.
    Never,
    /// A TTL of this many seconds.
    Secs(u32),
}

impl TtlChoice {
    fn ttl(self) -> Option<Ttl> {
        match self {
            TtlChoice::Never => None,
            TtlChoice::Secs(seconds) => Ttl::from_secs(seconds).ok(),
        }
    }
}

/// One storage operation of a case. Columns and values are indices into [`COLUMNS`] and
/// [`VALUES`]; timestamps are small offsets from [`TIMESTAMP_BASE`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `write_cell`.
    Write {
        /// Index into [`COLUMNS`].
        column: usize,
        /// Index into [`VALUES`].
        value: usize,
        /// Offset from [`TIMESTAMP_BASE`].
        timestamp: u64,
        /// The TTL.
        ttl: TtlChoice,
        /// The consistency level.
        level: Level,
    },
    /// `delete_cell`.
    Delete {
        /// Index into [`COLUMNS`].
        column: usize,
        /// Offset from [`TIMESTAMP_BASE`].
        timestamp: u64,
        /// The consistency level.
        level: Level,
    },
    /// `read_row`.
    Read {
        /// Index into [`COLUMNS`] of the first column, or the row's start.
        start: Option<usize>,
        /// The `LIMIT`.
        limit: u32,
        /// The consistency level.
        level: Level,
    },
    /// Start the next phase this many wall seconds after the current one's second.
    Pause {
        /// Whole seconds.
        seconds: u64,
    },
}

/// A sequence of operations on one row of a fresh lock id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Case {
    /// The operations, in order; a full read of the row is added at the end.
    pub ops: Vec<Op>,
}

impl Case {
    /// The operations as played: [`Case::ops`] and a final read of the whole row.
    pub fn played(&self) -> Vec<Op> {
        let mut ops = self.ops.clone();
        ops.push(Op::Read {
            start: None,
            limit: 10,
            level: Level::Quorum,
        });
        ops
    }

    /// How many wall seconds the case's pauses take, at least.
    pub fn paused_secs(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                Op::Pause { seconds } => *seconds,
                _ => 0,
            })
            .sum()
    }
}

fn level() -> impl Strategy<Value = Level> {
    prop_oneof![
        4 => Just(Level::Quorum),
        2 => Just(Level::All),
        1 => Just(Level::LocalQuorum),
        1 => Just(Level::EachQuorum),
    ]
}

fn ttl() -> impl Strategy<Value = TtlChoice> {
    prop_oneof![
        3 => Just(TtlChoice::Never),
        2 => Just(TtlChoice::Secs(1)),
        2 => Just(TtlChoice::Secs(2)),
        2 => Just(TtlChoice::Secs(3600)),
    ]
}

fn column() -> impl Strategy<Value = usize> {
    // Mostly the first two columns, so that writes, deletes and reads meet.
    prop_oneof![4 => 0..2_usize, 1 => 0..COLUMNS.len()]
}

fn timestamp() -> impl Strategy<Value = u64> {
    // Three timestamps: ties are common.
    1..4_u64
}

/// One operation; `pause_weight` of every 100 are pauses.
pub fn op(pause_weight: u32) -> impl Strategy<Value = Op> {
    let write = (column(), 0..VALUES.len(), timestamp(), ttl(), level()).prop_map(
        |(column, value, timestamp, ttl, level)| Op::Write {
            column,
            value,
            timestamp,
            ttl,
            level,
        },
    );
    let delete =
        (column(), timestamp(), level()).prop_map(|(column, timestamp, level)| Op::Delete {
            column,
            timestamp,
            level,
        });
    let read = (prop::option::of(0..COLUMNS.len()), 1..4_u32, level()).prop_map(
        |(start, limit, level)| Op::Read {
            start,
            limit,
            level,
        },
    );
    let pause = (1..3_u64).prop_map(|seconds| Op::Pause { seconds });
    prop_oneof![
        50 => write,
        20 => delete,
        30 - pause_weight.min(29) => read,
        pause_weight.min(29) => pause,
    ]
}

/// A case of up to `max_ops` operations, `pause_weight` percent of them pauses.
pub fn case(max_ops: usize, pause_weight: u32) -> impl Strategy<Value = Case> {
    prop::collection::vec(op(pause_weight), 1..=max_ops).prop_map(|ops| Case { ops })
}

/// One system under test: a storage per [`Level`] (in [`Level::ALL`]'s order), all on the
/// same cluster, and the wall clock its coordinators use.
pub struct Target {
    /// A short name for messages.
    pub name: String,
    /// The storages, one per level.
    pub storages: Vec<Arc<dyn LockStorage>>,
    /// The clock by which the phases of a case are aligned.
    pub clock: Arc<dyn Clock>,
    /// For a CQL target: a session and the keyspace to drop when done.
    keyspace: Option<(Arc<CassandraStorage>, String)>,
}

impl Target {
    /// Drops the target's keyspace, if it made one (best effort).
    pub async fn cleanup(&self) {
        if let Some((storage, keyspace)) = &self.keyspace {
            let mut drop = Statement::new(format!("DROP KEYSPACE IF EXISTS {keyspace}"));
            drop.set_request_timeout(Some(Duration::from_secs(60)));
            if let Err(error) = storage.session().query_unpaged(drop, ()).await {
                let _ = writeln!(std::io::stderr(), "could not drop {keyspace}: {error}");
            }
        }
    }

    fn storage(&self, level: Level) -> &Arc<dyn LockStorage> {
        &self.storages[level.index().min(self.storages.len() - 1)]
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target").field("name", &self.name).finish()
    }
}

/// What one operation answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A write, delete or pause that succeeded.
    Done,
    /// A read's live cells.
    Cells(Vec<Cell>),
    /// An error, as text.
    Failed(String),
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Done => f.write_str("ok"),
            Answer::Failed(error) => write!(f, "error: {error}"),
            Answer::Cells(cells) => {
                f.write_str("[")?;
                for (index, cell) in cells.iter().enumerate() {
                    if index > 0 {
                        f.write_str(", ")?;
                    }
                    let ts = cell
                        .write_timestamp
                        .as_micros()
                        .wrapping_sub(TIMESTAMP_BASE);
                    write!(
                        f,
                        "{}={}@{ts}",
                        cell.column.as_str(),
                        show_value(&cell.value)
                    )?;
                }
                f.write_str("]")
            }
        }
    }
}

fn show_value(value: &[u8]) -> String {
    if value.iter().all(u8::is_ascii_alphanumeric) {
        format!("{:?}", String::from_utf8_lossy(value))
    } else {
        let hex: String = value.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("0x{hex}")
    }
}

/// The outcome of playing a case on several targets.
#[derive(Clone, Debug)]
pub struct Played {
    /// Each target's answers, one per played operation, in the targets' order.
    pub answers: Vec<Vec<Answer>>,
    /// False when some phase did not fit in its wall second: the answers may then differ
    /// for reasons of timing alone.
    pub conclusive: bool,
}

impl Played {
    /// `None` if every target answered as the first; else a report of the differences.
    pub fn divergence(&self, case: &Case, targets: &[Target]) -> Option<String> {
        let reference = self.answers.first()?;
        if self.answers.iter().all(|answers| answers == reference) {
            return None;
        }
        let mut report = String::from("the targets answered differently:\n");
        for (index, op) in case.played().iter().enumerate() {
            report.push_str(&format!("  {op:?}\n"));
            for (target, answers) in targets.iter().zip(&self.answers) {
                let answer = &answers[index];
                let mark = if answer == &reference[index] {
                    ' '
                } else {
                    '!'
                };
                report.push_str(&format!("   {mark} {:<12} {answer}\n", target.name));
            }
        }
        Some(report)
    }
}

/// A lock id no earlier case of this process used.
pub fn fresh_lock_id() -> LockId {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros() % 1_000_000_000_000)
        .unwrap_or_default();
    let case = NEXT.fetch_add(1, Ordering::Relaxed);
    LockId::new(format!("diff-{}-{nonce}-{case}", std::process::id()))
        .unwrap_or_else(|error| panic!("a generated lock id is invalid: {error}"))
}

/// Waits until `clock` is at least [`MARGIN_MICROS`] and at most
/// [`LATEST_START_MICROS`] into a wall second not before `second`, and returns that second.
async fn align(clock: &dyn Clock, second: Option<u64>) -> u64 {
    loop {
        let micros = clock.now().timestamp.as_micros();
        let (now, into) = (micros / 1_000_000, micros % 1_000_000);
        let wait = match second {
            Some(second) if now < second => (second - now) * 1_000_000 - into + MARGIN_MICROS,
            _ if into < MARGIN_MICROS => MARGIN_MICROS - into,
            _ if into > LATEST_START_MICROS => 1_000_000 - into + MARGIN_MICROS,
            _ => return now,
        };
        tokio::time::sleep(Duration::from_micros(wait)).await;
    }
}

/// True while `clock` is still in `second`, at least [`MARGIN_MICROS`] before its end.
fn within(clock: &dyn Clock, second: u64) -> bool {
    let micros = clock.now().timestamp.as_micros();
    micros / 1_000_000 == second && micros % 1_000_000 <= 1_000_000 - MARGIN_MICROS
}

/// Plays `case` on every target, operation by operation (each operation on every target
/// before the next), on a fresh lock id; phases are aligned on the first target's clock.
pub async fn play(case: &Case, targets: &[Target]) -> Played {
    let row = RowKey::new(RowKind::Queue, fresh_lock_id());
    let clock = Arc::clone(&targets[0].clock);
    let mut answers = vec![Vec::new(); targets.len()];
    let mut conclusive = true;
    let mut second = align(clock.as_ref(), None).await;
    for op in case.played() {
        if let Op::Pause { seconds } = op {
            conclusive &= within(clock.as_ref(), second);
            second = align(clock.as_ref(), Some(second + seconds)).await;
            for answers in &mut answers {
                answers.push(Answer::Done);
            }
            continue;
        }
        for (target, answers) in targets.iter().zip(&mut answers) {
            answers.push(apply(target, &row, &op).await);
        }
    }
    conclusive &= within(clock.as_ref(), second);
    Played {
        answers,
        conclusive,
    }
}

async fn apply(target: &Target, row: &RowKey, op: &Op) -> Answer {
    let result = match *op {
        Op::Write {
            column,
            value,
            timestamp,
            ttl,
            level,
        } => target
            .storage(level)
            .write_cell(CellWrite {
                row: row.clone(),
                column: ColumnName::new(COLUMNS[column]),
                value: VALUES[value].to_vec(),
                timestamp: Timestamp::from_micros(TIMESTAMP_BASE + timestamp),
                ttl: ttl.ttl(),
            })
            .await
            .map(|()| Answer::Done),
        Op::Delete {
            column,
            timestamp,
            level,
        } => target
            .storage(level)
            .delete_cell(CellDelete {
                row: row.clone(),
                column: ColumnName::new(COLUMNS[column]),
                timestamp: Timestamp::from_micros(TIMESTAMP_BASE + timestamp),
            })
            .await
            .map(|()| Answer::Done),
        Op::Read {
            start,
            limit,
            level,
        } => {
            let mut read = RowRead::first(row.clone(), limit);
            read.start = start.map(|start| ColumnName::new(COLUMNS[start]));
            target
                .storage(level)
                .read_row(read)
                .await
                .map(Answer::Cells)
        }
        Op::Pause { .. } => Ok(Answer::Done),
    };
    result.unwrap_or_else(|error| Answer::Failed(error.to_string()))
}

/// The memory cluster's client, directly: three replicas, replication factor 3, a storage
/// per level (`LOCAL_QUORUM` and `EACH_QUORUM` are `QUORUM` in one data centre), its
/// clocks starting at `epoch`. Create it inside a Tokio runtime.
pub fn memory_target(name: &str, epoch: Timestamp, latency: Latency) -> Target {
    let cluster = MemoryCluster::new(ClusterConfig {
        latency,
        epoch,
        ..ClusterConfig::default()
    })
    .unwrap_or_else(|error| panic!("memory cluster config: {error}"));
    let storages = Level::ALL
        .iter()
        .map(|level| {
            let consistency = match level {
                Level::All => Consistency::All,
                _ => Consistency::Quorum,
            };
            let client = cluster
                .client_with(ClientOptions {
                    write_consistency: Some(consistency),
                    read_consistency: Some(consistency),
                    ..ClientOptions::default()
                })
                .unwrap_or_else(|error| panic!("memory client: {error}"));
            Arc::new(client) as Arc<dyn LockStorage>
        })
        .collect();
    Target {
        name: name.to_owned(),
        storages,
        clock: Arc::new(cluster.client().clock()),
        keyspace: None,
    }
}

/// A keyspace name for this process and `purpose`, unique within the process by a
/// sequence number (two calls in one microsecond would otherwise share it).
fn keyspace_name(purpose: &str) -> String {
    static KEYSPACES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let sequence = KEYSPACES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros() % 1_000_000_000)
        .unwrap_or_default();
    format!(
        "lock_diff_{purpose}_{}_{nonce}_{sequence}",
        std::process::id()
    )
}

/// `CassandraStorage` sessions on `contact_points`, one per [`Level`], on a new keyspace
/// replicated `replication_factor` times in data centre `dc` (`NetworkTopologyStrategy`,
/// so that the data-centre-local levels apply), with a generous request timeout: this is
/// about answers, not latency.
pub async fn cassandra_target(
    name: &str,
    contact_points: Vec<String>,
    replication_factor: u32,
    dc: &str,
) -> Result<Target, CassandraError> {
    let keyspace = keyspace_name(&name.replace(|c: char| !c.is_ascii_alphanumeric(), ""));
    let mut storages: Vec<Arc<dyn LockStorage>> = Vec::new();
    let mut first: Option<Arc<CassandraStorage>> = None;
    for level in Level::ALL {
        let consistency = match level {
            Level::Quorum => LockConsistency::Quorum,
            Level::All => LockConsistency::All,
            Level::LocalQuorum => LockConsistency::LocalQuorum,
            Level::EachQuorum => LockConsistency::EachQuorum,
        };
        let schema = storages.is_empty().then(|| {
            SchemaConfig::new(Replication::NetworkTopology {
                data_centers: BTreeMap::from([(dc.to_owned(), replication_factor)]),
            })
        });
        let config = CassandraConfig {
            consistency,
            local_dc: Some(dc.to_owned()),
            request_timeout: Duration::from_secs(10),
            schema,
            ..CassandraConfig::new(contact_points.clone(), keyspace.clone())
        };
        let storage = Arc::new(CassandraStorage::connect(config).await?);
        first.get_or_insert_with(|| Arc::clone(&storage));
        storages.push(storage);
    }
    Ok(Target {
        name: name.to_owned(),
        storages,
        clock: Arc::new(SystemClock::new()),
        keyspace: first.map(|storage| (storage, keyspace)),
    })
}

/// `CassandraStorage` over the memory cluster's CQL endpoint, started on an ephemeral
/// loopback port: three replicas, replication factor 3, a little latency, clocks starting
/// at this machine's wall clock. The endpoint is returned too, to keep it running.
pub async fn cql_target(name: &str) -> Result<(Target, CqlServer), String> {
    let cluster = MemoryCluster::new(ClusterConfig {
        latency: Latency::Uniform {
            min: Duration::from_micros(100),
            max: Duration::from_micros(400),
        },
        request_timeout: Duration::from_secs(5),
        epoch: SystemClock::new().now().timestamp,
        ..ClusterConfig::default()
    })
    .map_err(|error| error.to_string())?;
    let server = CqlServer::start(cluster, "127.0.0.1:0")
        .await
        .map_err(|error| error.to_string())?;
    let target = cassandra_target(name, vec![server.contact_point()], 3, "datacenter1")
        .await
        .map_err(|error| error.to_string())?;
    Ok((target, server))
}

/// Hand-written cases for each tie and expiry rule, with Cassandra 5.0's answers to their
/// reads as [`Answer`]'s `Display` shows them (timestamps as offsets from
/// [`TIMESTAMP_BASE`]), as the real cluster gave them: the divergences the differential
/// test found, and the rules it confirmed, kept as plain regression tests.
pub fn known_cases() -> Vec<(&'static str, Case, Vec<&'static str>)> {
    use Level::Quorum;
    let write = |column, value, timestamp, ttl| Op::Write {
        column,
        value,
        timestamp,
        ttl,
        level: Quorum,
    };
    let delete = |column, timestamp| Op::Delete {
        column,
        timestamp,
        level: Quorum,
    };
    let read = |start, limit| Op::Read {
        start,
        limit,
        level: Quorum,
    };
    let pause = |seconds| Op::Pause { seconds };
    let never = TtlChoice::Never;
    let long = TtlChoice::Secs(3600);
    // VALUES: 0 "", 1 "a", 2 "b", 3 "ab", 4 0x7f, 5 0x8000.
    vec![
        (
            "equal timestamps, two values: the greater bytes win (not the smaller MD5)",
            Case {
                ops: vec![write(0, 1, 3, never), write(0, 2, 3, never)],
            },
            vec![r#"[a="b"@3]"#],
        ),
        (
            "equal timestamps, two values: bytes compare unsigned",
            Case {
                ops: vec![write(0, 5, 3, never), write(0, 4, 3, never)],
            },
            vec!["[a=0x8000@3]"],
        ),
        (
            "equal timestamps, two values: a prefix loses to its extension",
            Case {
                ops: vec![write(0, 3, 3, never), write(0, 1, 3, never)],
            },
            vec![r#"[a="ab"@3]"#],
        ),
        (
            "equal timestamps: a value with a TTL beats one without, whatever the bytes",
            Case {
                // md5("") > md5("a") and "" < "a": neither older rule keeps "".
                ops: vec![write(0, 1, 3, never), write(0, 0, 3, long)],
            },
            vec![r#"[a=""@3]"#],
        ),
        (
            "equal timestamps, two TTLs: the later expiry wins, and the cell expires with it",
            Case {
                ops: vec![
                    write(0, 0, 3, TtlChoice::Secs(2)),
                    write(0, 1, 3, TtlChoice::Secs(1)),
                    read(None, 5),
                    pause(1),
                    read(None, 5),
                    pause(1),
                ],
            },
            vec![r#"[a=""@3]"#, r#"[a=""@3]"#, "[]"],
        ),
        (
            "equal timestamps, equal expiries: the smaller TTL (the later write) wins before \
             the bytes",
            Case {
                ops: vec![
                    write(0, 2, 3, TtlChoice::Secs(2)),
                    pause(1),
                    write(0, 0, 3, TtlChoice::Secs(1)),
                    read(None, 5),
                    pause(1),
                ],
            },
            vec![r#"[a=""@3]"#, "[]"],
        ),
        (
            "an expired value rewritten with its timestamp and a later expiry lives again",
            Case {
                ops: vec![
                    write(0, 2, 3, TtlChoice::Secs(1)),
                    pause(1),
                    read(None, 5),
                    write(0, 1, 3, long),
                ],
            },
            vec!["[]", r#"[a="a"@3]"#],
        ),
        (
            "an expired value still beats a value without TTL written with its timestamp",
            Case {
                ops: vec![
                    write(0, 1, 3, TtlChoice::Secs(1)),
                    pause(1),
                    write(0, 2, 3, never),
                ],
            },
            vec!["[]"],
        ),
        (
            "equal timestamps: a delete beats a value, with or without TTL, in either order",
            Case {
                ops: vec![
                    write(0, 1, 2, never),
                    delete(0, 2),
                    delete(1, 2),
                    write(1, 1, 2, long),
                    write(2, 1, 3, never),
                    delete(2, 2),
                ],
            },
            vec![r#"[c="a"@3]"#],
        ),
        (
            "a slice from a start column with a LIMIT skips tombstones and expired cells",
            Case {
                ops: vec![
                    write(0, 1, 1, never),
                    write(1, 1, 1, never),
                    delete(1, 1),
                    write(2, 2, 1, TtlChoice::Secs(1)),
                    write(3, 0, 2, never),
                    read(Some(1), 1),
                    pause(1),
                    read(Some(1), 1),
                    read(None, 2),
                ],
            },
            vec![
                r#"[c="b"@1]"#,
                r#"[d=""@2]"#,
                r#"[a="a"@1, d=""@2]"#,
                r#"[a="a"@1, d=""@2]"#,
            ],
        ),
    ]
}

/// The reads' answers of a played case, as [`known_cases`] lists them.
pub fn read_answers(case: &Case, answers: &[Answer]) -> Vec<String> {
    case.played()
        .iter()
        .zip(answers)
        .filter(|(op, _)| matches!(op, Op::Read { .. }))
        .map(|(_, answer)| answer.to_string())
        .collect()
}
