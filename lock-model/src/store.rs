//! A replicated last-write-wins store: replicas, the unordered network between them and the
//! clients, and the quorum coordinator that turns one machine request into messages.
//!
//! lock-core's machines speak [`StorageRequest`]s and expect one [`StorageResponse`] each.
//! Cassandra answers such a request through a *coordinator*: it sends the mutation or read to
//! every replica of the row, waits for `QUORUM = RF/2 + 1` of them and, for a read, merges
//! their versions cell by cell with its last-write-wins rule (below). That coordinator
//! is not part of lock-core, so it lives here, one per client, inside [`QuorumStore`].
//!
//! * A request becomes one [`Message`] per live replica. Messages sit in a set and may be
//!   delivered in any order (stateright's "unordered, non-duplicating" network); a crashed
//!   replica's messages are dropped and it never answers again.
//! * A write is acknowledged to the machine after `QUORUM` replicas applied it; the other
//!   replicas still apply it whenever their message is delivered.
//! * A read is answered after `QUORUM` replicas sent their whole row: versions of every cell,
//!   tombstones included, and a cell whose TTL has run out on that replica's clock reported as
//!   a tombstone with the cell's timestamp (as Cassandra turns an expired cell into one). The
//!   coordinator merges the rows, drops tombstones and returns the first `limit` live cells
//!   from `start`. Reading whole rows stands in for Cassandra's short-read protection, which
//!   gives the same answer for slices.
//! * With `read_repair`, a read that found replicas disagreeing first writes the merged
//!   version back to the stale replicas among those that answered and waits for their
//!   acknowledgements (Cassandra's blocking read repair, the default since 4.0).
//! * With `one_replica_reads`, reads of the rows listed there are answered after the first
//!   reply (consistency `ONE`): a broken store, used to show that a property depends on
//!   quorum reads.
//! * With `lost_deletes`, deletes of the rows listed there are acknowledged and never
//!   applied: a broken store that stands for a release forgetting those cells, used to show
//!   that the lock model notices cells left behind.
//!
//! Ties: two versions of a cell with the same timestamp are resolved by lock-core's merge
//! rule ([`lock_core::storage::merge`], Cassandra 5.0's): a tombstone wins, then a cell with
//! a TTL over one without, then the later expiry, then the greater value bytes. In the lock
//! models ties of live cells never carry different values (queue cells are empty, a main
//! cell's value is its owner's queue column and only that owner's client writes its seat,
//! with strictly increasing timestamps; a `GlobalTime` value *is* its timestamp), so only
//! the first rule ever decides anything there, unless a broken seat rule (`SeatFault`) lets
//! two writes with one timestamp meet in a seat.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use lock_core::ColumnName;
use lock_core::machine::{Outgoing, RequestId};
use lock_core::storage::{
    Cell, Expiry, RowKey, RowKind, RowRead, StorageRequest, StorageResponse, VersionRef,
};
use lock_core::time::Timestamp;

/// A client of the store (a lock client or a time-service replica), by index.
pub type ClientIndex = usize;

/// A storage replica, by index.
pub type ReplicaIndex = usize;

/// One version of a cell, as a replica stores it or sends it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// The write timestamp.
    pub timestamp: Timestamp,
    /// The value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// When the cell expires, in microseconds of storage time (see [`Version::expired`]),
    /// and the TTL it was written with.
    pub expiry: Option<Expiry>,
}

impl Version {
    /// The version as lock-core's merge rule sees it (tombstones carry no deletion time
    /// here: two tombstones of one cell with one timestamp are the same).
    pub fn as_merged(&self) -> VersionRef<'_> {
        match &self.value {
            Some(value) => VersionRef::live(self.timestamp, value, self.expiry),
            None => VersionRef::tombstone(self.timestamp, 0),
        }
    }

    /// True if `self` wins over `other` by lock-core's merge rule
    /// ([`lock_core::storage::merge`]): the higher timestamp; on a tie a tombstone, then a
    /// cell with a TTL, then the later expiry, then the smaller TTL, then the greater value.
    pub fn beats(&self, other: &Version) -> bool {
        self.as_merged().supersedes(&other.as_merged())
    }

    /// True once a replica whose clock reads `clock` must treat the cell as absent.
    pub fn expired(&self, clock: u64) -> bool {
        self.expiry.is_some_and(|expiry| clock >= expiry.at)
    }

    /// The version as a replica with clock `clock` reports it: an expired cell becomes a
    /// tombstone with the same timestamp.
    fn seen_at(&self, clock: u64) -> Version {
        if self.expired(clock) {
            Version {
                timestamp: self.timestamp,
                value: None,
                expiry: None,
            }
        } else {
            self.clone()
        }
    }
}

/// A cell's versions keyed by row and column.
pub type Cells = BTreeMap<(RowKey, ColumnName), Version>;

/// One storage replica.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Replica {
    /// Its cells.
    pub cells: Cells,
    /// A crashed replica answers nothing, ever again.
    pub crashed: bool,
}

impl Replica {
    /// Merges `version` into the shared `replica`, copying it only if the version wins.
    fn apply(replica: &mut Arc<Replica>, row: &RowKey, column: &ColumnName, version: Version) {
        let key = (row.clone(), column.clone());
        if replica.cells.get(&key).is_none_or(|old| version.beats(old)) {
            Arc::make_mut(replica).cells.insert(key, version);
        }
    }

    fn row(&self, row: &RowKey, clock: u64) -> Vec<(ColumnName, Version)> {
        self.cells
            .iter()
            .filter(|((cell_row, _), _)| cell_row == row)
            .map(|((_, column), version)| (column.clone(), version.seen_at(clock)))
            .collect()
    }
}

/// What a replica is asked to do.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicaRequest {
    /// Write (or delete, with a tombstone) one cell. A TTL is turned into an expiry time by
    /// the coordinator when it sends the write.
    Mutate {
        /// The row.
        row: RowKey,
        /// The column.
        column: ColumnName,
        /// The version to merge in.
        version: Version,
    },
    /// Send the whole row.
    Read {
        /// The row.
        row: RowKey,
    },
}

/// What a replica answers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicaReply {
    /// The mutation was applied.
    Ack,
    /// The row's versions, expired cells reported as tombstones.
    Row(Vec<(ColumnName, Version)>),
}

/// A message in flight: a request from a client's coordinator to a replica.
///
/// Replies are not messages of their own: a replica's reply reaches the coordinator in the
/// same step in which the replica handles the request. Delaying replies adds no behaviour
/// that matters: a write's effect on the replica happens at delivery either way, a read
/// takes its snapshot at delivery either way, and a reply that arrives after the quorum was
/// complete is ignored, which is the same as its request being handled later. (The reply
/// that completes a quorum also arrives at once; the client's next request can still be
/// delayed for as long as any other message.)
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Message {
    /// The sender.
    pub client: ClientIndex,
    /// The coordinator's operation number.
    pub op: u32,
    /// The receiver.
    pub replica: ReplicaIndex,
    /// What to do.
    pub body: ReplicaRequest,
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{} -> r{} op{}: ", self.client, self.replica, self.op)?;
        match &self.body {
            ReplicaRequest::Mutate {
                row,
                column,
                version,
            } => {
                let verb = if version.value.is_some() {
                    "write"
                } else {
                    "delete"
                };
                write!(
                    f,
                    "{verb} {}/{column} ts {}",
                    row.kind.as_str(),
                    version.timestamp.as_micros()
                )
            }
            ReplicaRequest::Read { row } => write!(f, "read {}", row.kind.as_str()),
        }
    }
}

/// Where one coordinated operation stands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Stage {
    /// Waiting for a quorum of replies.
    Collecting(BTreeMap<ReplicaIndex, ReplicaReply>),
    /// A read's answer is known; waiting for the repair writes to be acknowledged.
    Repairing {
        response: StorageResponse,
        awaiting: BTreeSet<ReplicaIndex>,
    },
}

/// One operation a coordinator is running for a machine request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Operation {
    request_id: RequestId,
    request: StorageRequest,
    stage: Stage,
}

/// A machine request answered by the coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Whose request.
    pub client: ClientIndex,
    /// The machine's request id.
    pub request_id: RequestId,
    /// The request, for bookkeeping by the model.
    pub request: StorageRequest,
    /// The answer to give the machine.
    pub response: StorageResponse,
}

/// The fixed parameters of a store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoreConfig {
    /// How many replicas hold each row.
    pub replication_factor: usize,
    /// Whether reads repair stale replicas before answering (blocking read repair).
    pub read_repair: bool,
    /// How far each replica's clock runs ahead of true time, in microseconds; it judges TTL
    /// expiry on that clock. Missing entries mean no skew.
    pub replica_skew_micros: Vec<u64>,
    /// Whether a write's copies to the replicas outside its acknowledging quorum stay in
    /// flight after the acknowledgement (and may land at any later moment) or are lost.
    pub late_writes: bool,
    /// Rows whose reads are answered as soon as one replica replied (Cassandra's
    /// consistency `ONE`) instead of a quorum. lock-core needs `QUORUM` everywhere; this is a
    /// deliberately broken backend, to show which property a weak read breaks.
    pub one_replica_reads: Vec<RowKind>,
    /// Rows whose deletes every replica acknowledges without applying: a deliberately broken
    /// backend, standing for a release that forgets those cells, to show that the lock model
    /// notices cells left behind.
    pub lost_deletes: Vec<RowKind>,
}

impl StoreConfig {
    /// `replication_factor` replicas, no read repair, no skew.
    pub fn new(replication_factor: usize) -> Self {
        StoreConfig {
            replication_factor,
            read_repair: false,
            replica_skew_micros: Vec::new(),
            late_writes: false,
            one_replica_reads: Vec::new(),
            lost_deletes: Vec::new(),
        }
    }

    /// `floor(RF/2) + 1`.
    pub fn quorum(&self) -> usize {
        self.replication_factor / 2 + 1
    }

    /// How many replicas must answer `request`: a quorum, or one for a read of a row in
    /// [`StoreConfig::one_replica_reads`].
    fn replies_needed(&self, request: &StorageRequest) -> usize {
        match request {
            StorageRequest::Read(read) if self.one_replica_reads.contains(&read.row.kind) => 1,
            _ => self.quorum(),
        }
    }

    fn clock(&self, replica: ReplicaIndex, true_micros: u64) -> u64 {
        true_micros.saturating_add(self.replica_skew_micros.get(replica).copied().unwrap_or(0))
    }
}

/// What [`QuorumStore::with_canonical_replicas`] sorts replicas by: the replica, the messages
/// addressed to it (sender, operation, body), and per running operation (in key order) its
/// reply so far and whether a repair awaits it.
type ReplicaKey<'a> = (
    &'a Arc<Replica>,
    Vec<(ClientIndex, u32, &'a ReplicaRequest)>,
    Vec<(Option<&'a ReplicaReply>, bool)>,
);

/// The replicas, the messages in flight and every client's coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuorumStore {
    /// The replicas, each shared with the states it has not changed since (a step changes
    /// at most one replica, and copies it on write).
    pub replicas: Vec<Arc<Replica>>,
    /// Messages sent and not yet delivered.
    pub in_flight: BTreeSet<Message>,
    operations: BTreeMap<(ClientIndex, u32), Operation>,
    next_op: BTreeMap<ClientIndex, u32>,
}

impl QuorumStore {
    /// An empty store with the configured number of replicas.
    pub fn new(config: &StoreConfig) -> Self {
        QuorumStore {
            // One empty replica, shared until a write copies it.
            replicas: std::iter::repeat_n(Arc::new(Replica::default()), config.replication_factor)
                .collect(),
            in_flight: BTreeSet::new(),
            operations: BTreeMap::new(),
            next_op: BTreeMap::new(),
        }
    }

    /// True when no message is in flight.
    pub fn is_quiet(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// How many operations the coordinators have started, over all clients; it never
    /// decreases.
    pub fn operations_started(&self) -> u64 {
        self.next_op.values().map(|&count| u64::from(count)).sum()
    }

    /// How many replicas have crashed.
    pub fn crashed(&self) -> usize {
        self.replicas
            .iter()
            .filter(|replica| replica.crashed)
            .count()
    }

    /// The same store with its replicas renumbered into a canonical order: sorted by
    /// everything the state says about each replica (its cells, whether it crashed, the
    /// messages addressed to it, and, for every running operation, its reply or whether a
    /// repair awaits it), with every replica index in messages and operations renamed to
    /// match.
    ///
    /// Renumbering replicas is an automorphism of every model built on this store as long as
    /// the replicas are interchangeable, that is, all of them run on the same clock
    /// ([`StoreConfig::replica_skew_micros`] empty or uniform): no lock-core machine ever sees
    /// a replica index, the coordinator treats replicas alike (it counts replies and merges
    /// them, whose order the merge rule ignores), and no property mentions one. Two replicas
    /// with equal sort keys are interchangeable in this very state (swapping them gives the
    /// same state), so the result is the same for every state of one orbit: a canonical
    /// representative for symmetry reduction.
    pub fn with_canonical_replicas(&self) -> QuorumStore {
        let count = self.replicas.len();
        let keys: Vec<_> = (0..count)
            .map(|replica| self.replica_key(replica))
            .collect();
        let mut order: Vec<ReplicaIndex> = (0..count).collect();
        order.sort_by(|a, b| keys[*a].cmp(&keys[*b]));
        let mut renamed = vec![0; count];
        for (new, old) in order.iter().enumerate() {
            renamed[*old] = new;
        }
        QuorumStore {
            replicas: order
                .iter()
                .map(|old| self.replicas[*old].clone())
                .collect(),
            in_flight: self
                .in_flight
                .iter()
                .map(|message| Message {
                    replica: renamed[message.replica],
                    ..message.clone()
                })
                .collect(),
            operations: self
                .operations
                .iter()
                .map(|(key, operation)| {
                    let stage = match &operation.stage {
                        Stage::Collecting(replies) => Stage::Collecting(
                            replies
                                .iter()
                                .map(|(replica, reply)| (renamed[*replica], reply.clone()))
                                .collect(),
                        ),
                        Stage::Repairing { response, awaiting } => Stage::Repairing {
                            response: response.clone(),
                            awaiting: awaiting.iter().map(|replica| renamed[*replica]).collect(),
                        },
                    };
                    (
                        *key,
                        Operation {
                            stage,
                            ..operation.clone()
                        },
                    )
                })
                .collect(),
            next_op: self.next_op.clone(),
        }
    }

    /// Every cell that some quorum of live replicas, read at true time `now_micros`, would
    /// return live: the cells a quorum read could still find. Crashed replicas never answer,
    /// so they take no part; with fewer live replicas than a quorum, no read succeeds and the
    /// set is empty.
    pub fn readable_live_cells(
        &self,
        config: &StoreConfig,
        now_micros: u64,
    ) -> BTreeSet<(RowKey, ColumnName)> {
        let live = self.live_replicas();
        let keys: BTreeSet<&(RowKey, ColumnName)> = live
            .iter()
            .flat_map(|replica| self.replicas[*replica].cells.keys())
            .collect();
        let quorums = self.live_quorums(config);
        keys.into_iter()
            .filter(|key| {
                quorums.iter().any(|quorum| {
                    self.merged_at(config, now_micros, quorum, key)
                        .is_some_and(|best| best.value.is_some())
                })
            })
            .cloned()
            .collect()
    }

    /// Whether every quorum of live replicas, read at true time `now_micros`, returns the
    /// cell `(row, column)` live with value `value` (true when no quorum is left).
    pub fn reads_as_on_every_quorum(
        &self,
        config: &StoreConfig,
        now_micros: u64,
        row: &RowKey,
        column: &ColumnName,
        value: &[u8],
    ) -> bool {
        let key = (row.clone(), column.clone());
        self.live_quorums(config).iter().all(|quorum| {
            self.merged_at(config, now_micros, quorum, &key)
                .is_some_and(|best| best.value.as_deref() == Some(value))
        })
    }

    fn live_replicas(&self) -> Vec<ReplicaIndex> {
        (0..self.replicas.len())
            .filter(|replica| !self.replicas[*replica].crashed)
            .collect()
    }

    /// Every set of `QUORUM` live replicas.
    fn live_quorums(&self, config: &StoreConfig) -> Vec<Vec<ReplicaIndex>> {
        let live = self.live_replicas();
        (0u32..1 << live.len())
            .filter(|members| members.count_ones() as usize == config.quorum())
            .map(|members| {
                live.iter()
                    .enumerate()
                    .filter(|(bit, _)| members & 1 << bit != 0)
                    .map(|(_, replica)| *replica)
                    .collect()
            })
            .collect()
    }

    /// The version of `key` that a read answered by `quorum` at true time `now_micros`
    /// merges to (an expired cell seen as a tombstone), if any replica has one.
    fn merged_at(
        &self,
        config: &StoreConfig,
        now_micros: u64,
        quorum: &[ReplicaIndex],
        key: &(RowKey, ColumnName),
    ) -> Option<Version> {
        let mut best: Option<Version> = None;
        for replica in quorum {
            let clock = config.clock(*replica, now_micros);
            if let Some(version) = self.replicas[*replica].cells.get(key) {
                let seen = version.seen_at(clock);
                if best.as_ref().is_none_or(|best| seen.beats(best)) {
                    best = Some(seen);
                }
            }
        }
        best
    }

    /// The operations `client`'s coordinator is still collecting replies for.
    pub fn pending(&self, client: ClientIndex) -> Vec<u32> {
        self.operations
            .iter()
            .filter(|((owner, _), operation)| {
                *owner == client && matches!(operation.stage, Stage::Collecting(_))
            })
            .map(|((_, op), _)| *op)
            .collect()
    }

    /// Times out `client`'s operation `op` (assumption A6): the coordinator stops waiting
    /// and returns the machine's request id, to be answered with *outcome unknown*; the
    /// mutations already sent stay in flight and may still land, reads are dropped. `None`
    /// if there is no such operation.
    pub fn time_out(&mut self, client: ClientIndex, op: u32) -> Option<RequestId> {
        let operation = self.operations.remove(&(client, op))?;
        self.in_flight.retain(|message| {
            (message.client, message.op) != (client, op)
                || matches!(message.body, ReplicaRequest::Mutate { .. })
        });
        Some(operation.request_id)
    }

    /// Everything the state says about `replica`, in a form that does not name it.
    fn replica_key(&self, replica: ReplicaIndex) -> ReplicaKey<'_> {
        let messages = self
            .in_flight
            .iter()
            .filter(|message| message.replica == replica)
            .map(|message| (message.client, message.op, &message.body))
            .collect();
        let roles = self
            .operations
            .values()
            .map(|operation| match &operation.stage {
                Stage::Collecting(replies) => (replies.get(&replica), false),
                Stage::Repairing { awaiting, .. } => (None, awaiting.contains(&replica)),
            })
            .collect();
        (&self.replicas[replica], messages, roles)
    }

    /// Starts coordinating `outgoing` for `client` at true time `now_micros` (used to turn a
    /// TTL into an expiry time).
    pub fn submit(&mut self, client: ClientIndex, outgoing: Outgoing, now_micros: u64) {
        let op = self.next_op.entry(client).or_insert(0);
        let number = *op;
        *op += 1;
        let body = match &outgoing.request {
            StorageRequest::Write(write) => ReplicaRequest::Mutate {
                row: write.row.clone(),
                column: write.column.clone(),
                version: Version {
                    timestamp: write.timestamp,
                    value: Some(write.value.clone()),
                    expiry: write.ttl.map(|ttl| {
                        Expiry::after(
                            now_micros,
                            u64::from(ttl.as_secs()).saturating_mul(1_000_000),
                        )
                    }),
                },
            },
            StorageRequest::Delete(delete) => ReplicaRequest::Mutate {
                row: delete.row.clone(),
                column: delete.column.clone(),
                version: Version {
                    timestamp: delete.timestamp,
                    value: None,
                    expiry: None,
                },
            },
            StorageRequest::Read(read) => ReplicaRequest::Read {
                row: read.row.clone(),
            },
        };
        self.broadcast(client, number, &body, 0..self.replicas.len());
        self.operations.insert(
            (client, number),
            Operation {
                request_id: outgoing.id,
                request: outgoing.request,
                stage: Stage::Collecting(BTreeMap::new()),
            },
        );
    }

    fn broadcast(
        &mut self,
        client: ClientIndex,
        op: u32,
        body: &ReplicaRequest,
        replicas: impl IntoIterator<Item = ReplicaIndex>,
    ) {
        for replica in replicas {
            if !self.replicas[replica].crashed {
                self.in_flight.insert(Message {
                    client,
                    op,
                    replica,
                    body: body.clone(),
                });
            }
        }
    }

    /// Drops `client`'s operations (its machine finished or was replaced): their replies will
    /// be ignored, but mutations already sent still reach their replicas.
    pub fn forget(&mut self, client: ClientIndex) {
        self.operations.retain(|(owner, _), _| *owner != client);
        self.in_flight.retain(|message| {
            message.client != client || matches!(message.body, ReplicaRequest::Mutate { .. })
        });
    }

    /// Crashes `replica`: its messages are lost and it never answers again.
    pub fn crash(&mut self, replica: ReplicaIndex) {
        Arc::make_mut(&mut self.replicas[replica]).crashed = true;
        self.in_flight.retain(|message| message.replica != replica);
    }

    /// Delivers `message` at true time `now_micros`; returns the machine request it completed,
    /// if any.
    pub fn deliver(
        &mut self,
        config: &StoreConfig,
        message: &Message,
        now_micros: u64,
    ) -> Option<Completion> {
        if !self.in_flight.remove(message) {
            return None;
        }
        let Message {
            client,
            op,
            replica,
            body,
        } = message;
        let target = &mut self.replicas[*replica];
        let reply = match body {
            ReplicaRequest::Mutate {
                row,
                column,
                version,
            } => {
                if version.value.is_some() || !config.lost_deletes.contains(&row.kind) {
                    Replica::apply(target, row, column, version.clone());
                }
                ReplicaReply::Ack
            }
            ReplicaRequest::Read { row } => {
                ReplicaReply::Row(target.row(row, config.clock(*replica, now_micros)))
            }
        };
        self.on_reply(config, *client, *op, *replica, reply)
    }

    fn on_reply(
        &mut self,
        config: &StoreConfig,
        client: ClientIndex,
        op: u32,
        replica: ReplicaIndex,
        reply: ReplicaReply,
    ) -> Option<Completion> {
        let key = (client, op);
        let operation = self.operations.get_mut(&key)?;
        match &mut operation.stage {
            Stage::Collecting(replies) => {
                replies.insert(replica, reply);
                if replies.len() < config.replies_needed(&operation.request) {
                    return None;
                }
            }
            Stage::Repairing { awaiting, .. } => {
                if reply != ReplicaReply::Ack {
                    return None;
                }
                awaiting.remove(&replica);
                if !awaiting.is_empty() {
                    return None;
                }
            }
        }
        let operation = self.operations.remove(&key)?;
        let response = match operation.stage {
            Stage::Repairing { response, .. } => response,
            Stage::Collecting(replies) => match &operation.request {
                StorageRequest::Write(_) | StorageRequest::Delete(_) => {
                    if !config.late_writes {
                        self.drop_unanswered(client, op);
                    }
                    StorageResponse::Done
                }
                StorageRequest::Read(read) => {
                    self.drop_unanswered(client, op);
                    let merged = merge(replies.values());
                    let response = StorageResponse::Cells(slice(&merged, read));
                    if config.read_repair
                        && self.repair(client, op, &operation.request, &replies, &merged)
                    {
                        self.operations.insert(
                            key,
                            Operation {
                                stage: Stage::Repairing {
                                    response,
                                    awaiting: stale(&replies, &merged),
                                },
                                ..operation
                            },
                        );
                        return None;
                    }
                    response
                }
            },
        };
        Some(Completion {
            client,
            request_id: operation.request_id,
            request: operation.request,
            response,
        })
    }

    /// Drops the requests of an operation that has its quorum: for a read they have no
    /// effect; for a write this loses the copies outside the quorum (see
    /// [`StoreConfig::late_writes`]).
    fn drop_unanswered(&mut self, client: ClientIndex, op: u32) {
        self.in_flight
            .retain(|message| (message.client, message.op) != (client, op));
    }

    /// Sends the merged versions to the stale replicas among `replies`; false if none is
    /// stale.
    fn repair(
        &mut self,
        client: ClientIndex,
        op: u32,
        request: &StorageRequest,
        replies: &BTreeMap<ReplicaIndex, ReplicaReply>,
        merged: &BTreeMap<ColumnName, Version>,
    ) -> bool {
        let stale_replicas = stale(replies, merged);
        if stale_replicas.is_empty() {
            return false;
        }
        let row = request.row().clone();
        for replica in &stale_replicas {
            for (column, version) in merged {
                let body = ReplicaRequest::Mutate {
                    row: row.clone(),
                    column: column.clone(),
                    version: version.clone(),
                };
                self.broadcast(client, op, &body, [*replica]);
            }
        }
        true
    }
}

/// The replicas whose row differs from the merge.
fn stale(
    replies: &BTreeMap<ReplicaIndex, ReplicaReply>,
    merged: &BTreeMap<ColumnName, Version>,
) -> BTreeSet<ReplicaIndex> {
    replies
        .iter()
        .filter(|(_, reply)| match reply {
            ReplicaReply::Row(cells) => {
                let theirs: BTreeMap<ColumnName, Version> = cells.iter().cloned().collect();
                theirs != *merged
            }
            ReplicaReply::Ack => false,
        })
        .map(|(replica, _)| *replica)
        .collect()
}

/// Merges replicas' rows cell by cell with lock-core's merge rule ([`Version::beats`]).
pub fn merge<'a>(
    replies: impl IntoIterator<Item = &'a ReplicaReply>,
) -> BTreeMap<ColumnName, Version> {
    let mut merged: BTreeMap<ColumnName, Version> = BTreeMap::new();
    for reply in replies {
        let ReplicaReply::Row(cells) = reply else {
            continue;
        };
        for (column, version) in cells {
            if merged.get(column).is_none_or(|best| version.beats(best)) {
                merged.insert(column.clone(), version.clone());
            }
        }
    }
    merged
}

/// The live cells of a merged row that `read` asks for.
pub fn slice(merged: &BTreeMap<ColumnName, Version>, read: &RowRead) -> Vec<Cell> {
    merged
        .iter()
        .filter(|(column, _)| read.start.as_ref().is_none_or(|start| *column >= start))
        .filter_map(|(column, version)| {
            version.value.as_ref().map(|value| Cell {
                column: column.clone(),
                value: value.clone(),
                write_timestamp: version.timestamp,
            })
        })
        .take(read.limit.get() as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(timestamp: u64, value: Option<&[u8]>) -> Version {
        Version {
            timestamp: Timestamp::from_micros(timestamp),
            value: value.map(<[u8]>::to_vec),
            expiry: None,
        }
    }

    #[test]
    fn merging_prefers_the_later_then_the_tombstone_then_the_greater_value() {
        assert!(version(2, Some(b"")).beats(&version(1, None)));
        assert!(version(1, None).beats(&version(1, Some(b""))));
        assert!(!version(1, Some(b"")).beats(&version(1, None)));
        assert!(!version(1, None).beats(&version(1, None)));
        let (a, b) = (b"a".as_slice(), b"b".as_slice());
        assert!(version(1, Some(b)).beats(&version(1, Some(a))));
        assert!(!version(1, Some(a)).beats(&version(1, Some(b))));
        let expiring = Version {
            expiry: Some(Expiry::after(0, 10)),
            ..version(1, Some(a))
        };
        assert!(expiring.beats(&version(1, Some(b))));
    }

    #[test]
    fn an_expired_cell_is_reported_as_a_tombstone_that_wins_the_tie() {
        let live = Version {
            expiry: Some(Expiry::after(0, 10)),
            ..version(5, Some(b""))
        };
        assert_eq!(live.seen_at(9), live);
        let seen = live.seen_at(10);
        assert_eq!(seen, version(5, None));
        assert!(seen.beats(&live));
    }
}
