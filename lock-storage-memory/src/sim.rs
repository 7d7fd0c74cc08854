//! The simulation proper: replicas, clients, messages in flight and the coordinators of
//! requests, all behind the cluster's one lock.
//!
//! Time is simulated time: microseconds since the cluster was created, on Tokio's clock.
//! Messages with a latency wait in an event queue ordered by arrival time (then by send
//! order); whoever touches the cluster first processes every event that is due, so the
//! state is always exact at the moment it is observed and no background task is needed.
//!
//! With zero latency a request is served inline: the coordinator's messages are delivered
//! by plain function calls, and only a request that must wait for its timeout is kept as a
//! [`Coordinator`]. Both paths deliver through the same `deliver_*` functions and merge with
//! the same [`resolve`], so they cannot disagree about what a replica does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use lock_core::storage::{
    Cell, CellDelete, CellWrite, Expiry, RowKey, RowRead, StorageRequest, StorageResponse,
};
use lock_core::time::duration_micros;
use lock_core::{ColumnName, Error, MonotonicTime, Now, Timestamp};
use md5::{Digest, Md5};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use slab::Slab;
use smallvec::SmallVec;

use crate::clock::{ClockSkew, SkewedClock};
use crate::config::{ClusterConfig, Consistency};
use crate::counters::Counters;
use crate::failure::{FailureDetail, RequestFailure};
use crate::history::{ApplyCause, HistoryEntry, HistoryEvent};
use crate::id::{ClientId, ReplicaId};
use crate::latency::Latency;
use crate::read::{read_agreed, resolve};
use crate::replica::{ReplicaStore, RowSlice};
use crate::version::{CellState, CellVersion};

/// An event's place in the queue: arrival time, then send order.
type EventKey = (u64, u64);

/// One cell's new version, stamped by the coordinator.
#[derive(Clone, Debug)]
struct Mutation {
    row: RowKey,
    column: ColumnName,
    version: CellVersion,
}

#[derive(Debug)]
enum Message {
    Mutation(Mutation),
    Read(RowRead),
    Repair { row: RowKey, cells: RowSlice },
}

#[derive(Debug)]
enum Reply {
    Ack,
    Slice(RowSlice),
}

#[derive(Debug)]
struct Hint {
    holder: ReplicaId,
    target: ReplicaId,
    mutation: Mutation,
}

#[derive(Debug)]
enum Event {
    /// A message from a request's coordinator reaches a replica.
    Deliver {
        replica: ReplicaId,
        client: ClientId,
        request: usize,
        message: Message,
    },
    /// A replica's reply reaches the coordinator.
    Reply {
        replica: ReplicaId,
        client: ClientId,
        request: usize,
        reply: Reply,
    },
    /// A hinted write reaches the replica it was kept for.
    Hint(Hint),
}

impl Event {
    fn request(&self) -> Option<usize> {
        match self {
            Event::Deliver { request, .. } | Event::Reply { request, .. } => Some(*request),
            Event::Hint(_) => None,
        }
    }
}

#[derive(Debug)]
struct Replica {
    up: bool,
    down_since: u64,
    clock: SkewedClock,
    store: ReplicaStore,
}

#[derive(Debug)]
struct Client {
    clock: SkewedClock,
    last_timestamp: Timestamp,
    cut_off: Vec<bool>,
    next_coordinator: usize,
    write_consistency: Consistency,
    read_consistency: Consistency,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Write,
    Delete,
    Read,
}

/// What every request carries from start to answer.
#[derive(Clone, Copy, Debug)]
struct Header {
    id: u64,
    client: ClientId,
    kind: Kind,
    consistency: Consistency,
    required: usize,
}

impl Header {
    fn describe(&self, row: &RowKey) -> String {
        let verb = match self.kind {
            Kind::Write => "write",
            Kind::Delete => "delete from",
            Kind::Read => "read",
        };
        format!("{verb} {row}")
    }
}

#[derive(Debug)]
enum Phase {
    Writing {
        acks: usize,
    },
    Reading {
        limit: u32,
        slices: Vec<(ReplicaId, RowSlice)>,
    },
    Repairing {
        cells: Vec<Cell>,
        awaiting: usize,
    },
    Done,
}

/// The coordinator of one request that could not be answered at once.
#[derive(Debug)]
struct Coordinator {
    header: Header,
    row: RowKey,
    started: u64,
    deadline: u64,
    phase: Phase,
    outcome: Option<Result<StorageResponse, RequestFailure>>,
    /// Queued events that belong to this request; it is kept until they are processed.
    events: BTreeSet<EventKey>,
    /// The caller has its answer or stopped waiting.
    waiter_gone: bool,
}

impl Coordinator {
    fn timeout_error(&self) -> RequestFailure {
        let timeout = Duration::from_micros(self.deadline - self.started);
        let Header {
            consistency,
            required,
            ..
        } = self.header;
        let operation = self.header.describe(&self.row);
        match &self.phase {
            Phase::Writing { acks } => RequestFailure::new(
                Error::outcome_unknown(
                    operation,
                    format!(
                        "timed out after {timeout:?}: {acks} of the {required} acknowledgements \
                         {consistency} needs arrived; the write may have been applied on some \
                         replicas"
                    ),
                ),
                FailureDetail::WriteTimeout {
                    consistency,
                    required,
                    received: *acks,
                },
            ),
            Phase::Reading { slices, .. } => RequestFailure::new(
                Error::unavailable(
                    operation,
                    format!(
                        "read timed out after {timeout:?}: {} of the {required} replicas \
                         {consistency} needs answered",
                        slices.len()
                    ),
                ),
                FailureDetail::ReadTimeout {
                    consistency,
                    required,
                    received: slices.len(),
                    data_present: false,
                },
            ),
            Phase::Repairing { awaiting, .. } => RequestFailure::new(
                Error::unavailable(
                    operation,
                    format!(
                        "read timed out after {timeout:?}: read repair of {awaiting} replicas \
                         did not complete"
                    ),
                ),
                FailureDetail::ReadTimeout {
                    consistency,
                    required,
                    received: required,
                    data_present: true,
                },
            ),
            Phase::Done => RequestFailure::new(
                Error::unavailable(operation, "request abandoned"),
                FailureDetail::Lost,
            ),
        }
    }
}

/// A few replicas (those a read asks), kept inline: collected for every read.
type ReplicaList = SmallVec<[ReplicaId; 5]>;

/// The replicas of a row: `replication_factor` consecutive replicas on the ring, from the
/// one that owns the row's token.
#[derive(Clone, Copy, Debug)]
struct Placement {
    first: usize,
    count: usize,
    ring: usize,
}

impl Placement {
    fn iter(self) -> impl Iterator<Item = ReplicaId> {
        (0..self.count).map(move |step| ReplicaId((self.first + step) % self.ring))
    }

    /// The replicas after `from` in ring order, wrapping around, `from` first.
    fn iter_from(self, from: ReplicaId) -> impl Iterator<Item = ReplicaId> {
        let offset = (from.0 + self.ring - self.first) % self.ring;
        (0..self.count)
            .map(move |step| ReplicaId((self.first + (offset + step) % self.count) % self.ring))
    }
}

/// How a request started.
#[derive(Debug)]
pub(crate) enum Started {
    /// It was answered at once.
    Answered(Result<StorageResponse, RequestFailure>),
    /// It waits for messages or for its timeout: [`Simulation::poll`] it with this key.
    Waiting(usize),
}

/// What a caller waiting for a request finds.
#[derive(Debug)]
pub(crate) enum Poll {
    /// The answer.
    Ready(Result<StorageResponse, RequestFailure>),
    /// Not yet; look again at this simulated time.
    Pending { wake_at: u64 },
}

/// The whole simulated cluster.
#[derive(Debug)]
pub(crate) struct Simulation {
    config: ClusterConfig,
    /// `config.latency.is_always_zero()`, cached for the fast path.
    zero_latency: bool,
    replicas: Vec<Replica>,
    clients: Vec<Client>,
    rng: ChaCha8Rng,
    events: BTreeMap<EventKey, Event>,
    next_event: u64,
    requests: Slab<Coordinator>,
    next_request: u64,
    hints: Vec<Hint>,
    counters: Counters,
    history: Option<Vec<HistoryEntry>>,
}

impl Simulation {
    /// A cluster as `config` (already validated) describes, at simulated time zero.
    pub(crate) fn new(config: ClusterConfig) -> Self {
        let replicas = (0..config.replicas)
            .map(|index| Replica {
                up: true,
                down_since: 0,
                clock: SkewedClock::new(config.epoch, config.replica_clock(ReplicaId(index))),
                store: ReplicaStore::default(),
            })
            .collect();
        let counters = Counters {
            replicas: vec![Default::default(); config.replicas],
            ..Counters::default()
        };
        Simulation {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            zero_latency: config.latency.is_always_zero(),
            history: config.record_history.then(Vec::new),
            replicas,
            clients: Vec::new(),
            events: BTreeMap::new(),
            next_event: 0,
            requests: Slab::new(),
            next_request: 0,
            hints: Vec::new(),
            counters,
            config,
        }
    }

    pub(crate) fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub(crate) fn replica_count(&self) -> usize {
        self.replicas.len()
    }

    pub(crate) fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// Adds a client (options already validated) and returns its id.
    pub(crate) fn add_client(
        &mut self,
        skew: ClockSkew,
        partitioned_from: &[ReplicaId],
        write_consistency: Option<Consistency>,
        read_consistency: Option<Consistency>,
        now: u64,
    ) -> ClientId {
        let mut clock = SkewedClock::new(self.config.epoch, ClockSkew::default());
        clock.set_skew(skew, now);
        let mut cut_off = vec![false; self.replicas.len()];
        for replica in partitioned_from {
            cut_off[replica.0] = true;
        }
        self.clients.push(Client {
            clock,
            last_timestamp: Timestamp::ZERO,
            cut_off,
            next_coordinator: 0,
            write_consistency: write_consistency.unwrap_or(self.config.write_consistency),
            read_consistency: read_consistency.unwrap_or(self.config.read_consistency),
        });
        ClientId(self.clients.len() - 1)
    }

    /// Processes every queued event due at or before `now`, in order.
    pub(crate) fn advance_to(&mut self, now: u64) {
        while let Some(entry) = self.events.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (key, event) = entry.remove_entry();
            let request = event.request();
            if let Some(coordinator) = request.and_then(|request| self.requests.get_mut(request)) {
                coordinator.events.remove(&key);
            }
            self.handle(key.0, event);
            if let Some(request) = request {
                self.release_if_done(request);
            }
        }
    }

    /// The arrival time of the next queued event.
    pub(crate) fn next_event_at(&self) -> Option<u64> {
        self.events.first_key_value().map(|(key, _)| key.0)
    }

    // ----- requests -------------------------------------------------------------------

    /// Starts `request` from `client` at `now` (events due by then already processed), at
    /// `consistency` or else the client's own level.
    pub(crate) fn start(
        &mut self,
        client: ClientId,
        request: StorageRequest,
        consistency: Option<Consistency>,
        now: u64,
    ) -> Started {
        let id = self.next_request;
        self.next_request += 1;
        if self.history.is_some() {
            self.record(
                now,
                HistoryEvent::Requested {
                    client,
                    request: id,
                    operation: request.clone(),
                },
            );
        }
        let (kind, row) = match &request {
            StorageRequest::Write(write) => (Kind::Write, &write.row),
            StorageRequest::Delete(delete) => (Kind::Delete, &delete.row),
            StorageRequest::Read(read) => (Kind::Read, &read.row),
        };
        match kind {
            Kind::Write => self.counters.requests.writes += 1,
            Kind::Delete => self.counters.requests.deletes += 1,
            Kind::Read => self.counters.requests.reads += 1,
        }
        let consistency = consistency.unwrap_or(match kind {
            Kind::Read => self.clients[client.0].read_consistency,
            Kind::Write | Kind::Delete => self.clients[client.0].write_consistency,
        });
        let rf = self.config.replication_factor;
        let header = Header {
            id,
            client,
            kind,
            consistency,
            required: consistency.required(rf),
        };
        let placement = self.placement(row);
        let Some(coordinator) = self.pick_coordinator(client, placement) else {
            let message = format!("no replica of the row is reachable from {client}");
            return self.refuse(header, row, now, 0, message);
        };
        let up = placement
            .iter()
            .filter(|replica| self.replicas[replica.0].up)
            .count();
        if up < header.required {
            let message = format!(
                "{up} of the row's {rf} replicas are up and {consistency} needs {}",
                header.required
            );
            return self.refuse(header, row, now, up, message);
        }
        let coordinator_secs = self.replicas[coordinator.0].clock.wall_secs(now);
        let mutation = match request {
            StorageRequest::Write(write) => stamp_write(write, coordinator_secs),
            StorageRequest::Delete(delete) => stamp_delete(delete, coordinator_secs),
            StorageRequest::Read(read) => {
                return if self.zero_latency && self.config.dead_cell_read_cost.is_zero() {
                    self.read_inline(header, coordinator, placement, read, now)
                } else {
                    self.read_with_latency(header, coordinator, placement, read, now)
                };
            }
        };
        if self.zero_latency {
            self.write_inline(header, coordinator, placement, mutation, now)
        } else {
            self.write_with_latency(header, coordinator, placement, mutation, now)
        }
    }

    /// Sends a write or delete to every replica of the row at once.
    fn write_inline(
        &mut self,
        header: Header,
        coordinator: ReplicaId,
        placement: Placement,
        mutation: Mutation,
        now: u64,
    ) -> Started {
        let mut acks = 0;
        self.for_each_write_target(placement, coordinator, &mutation, now, |sim, replica| {
            if sim.deliver_mutation(now, header.client, replica, &mutation)
                && sim.reply_arrives(now, header.client, replica)
            {
                acks += 1;
            }
        });
        if acks >= header.required {
            self.answered(header, now, StorageResponse::Done)
        } else {
            self.wait(header, mutation.row, Phase::Writing { acks }, now)
        }
    }

    /// Sends a write or delete to every replica of the row, each after its latency.
    fn write_with_latency(
        &mut self,
        header: Header,
        coordinator: ReplicaId,
        placement: Placement,
        mutation: Mutation,
        now: u64,
    ) -> Started {
        let key = self.open(
            header,
            mutation.row.clone(),
            Phase::Writing { acks: 0 },
            now,
        );
        self.for_each_write_target(placement, coordinator, &mutation, now, |sim, replica| {
            let message = Message::Mutation(mutation.clone());
            sim.deliver_later(now, replica, header.client, key, message);
        });
        Started::Waiting(key)
    }

    /// Calls `send` for every replica of the row that is up, and keeps a hint for the
    /// others.
    fn for_each_write_target(
        &mut self,
        placement: Placement,
        coordinator: ReplicaId,
        mutation: &Mutation,
        now: u64,
        mut send: impl FnMut(&mut Self, ReplicaId),
    ) {
        for replica in placement.iter() {
            if self.replicas[replica.0].up {
                send(self, replica);
            } else {
                self.keep_hint(coordinator, replica, mutation, now);
            }
        }
    }

    /// Reads from as many replicas as the consistency level needs, at once.
    fn read_inline(
        &mut self,
        header: Header,
        coordinator: ReplicaId,
        placement: Placement,
        read: RowRead,
        now: u64,
    ) -> Started {
        if let Some(cells) = self.read_agreed(header, coordinator, placement, &read, now) {
            return self.answered(header, now, StorageResponse::Cells(cells));
        }
        let mut slices = Vec::with_capacity(header.required);
        self.for_each_read_target(placement, coordinator, header.required, |sim, replica| {
            if let Some((slice, _)) = sim.deliver_read(now, header.client, replica, &read)
                && sim.reply_arrives(now, header.client, replica)
            {
                slices.push((replica, slice));
            }
        });
        let limit = read.limit.get();
        if slices.len() < header.required {
            return self.wait(header, read.row, Phase::Reading { limit, slices }, now);
        }
        let resolution = resolve(&slices, limit);
        if !self.config.read_repair || resolution.repairs.is_empty() {
            return self.answered(header, now, StorageResponse::Cells(resolution.cells));
        }
        self.counters.repaired_reads += 1;
        let mut awaiting = resolution.repairs.len();
        for (replica, cells) in resolution.repairs {
            self.counters.read_repairs += cells.len() as u64;
            if self.deliver_repair(now, header.client, replica, &read.row, cells)
                && self.reply_arrives(now, header.client, replica)
            {
                awaiting -= 1;
            }
        }
        let cells = resolution.cells;
        if awaiting == 0 {
            self.answered(header, now, StorageResponse::Cells(cells))
        } else {
            self.wait(header, read.row, Phase::Repairing { cells, awaiting }, now)
        }
    }

    /// The common case of a read at once: every replica asked gets the request and answers,
    /// and their rows agree up to the answer's last cell. Then the answer is found by walking
    /// the rows in step instead of copying them out ([`read_agreed`]), with the same counts
    /// as [`Simulation::deliver_read`] and [`Simulation::reply_arrives`] would make. `None`
    /// (and nothing counted) otherwise.
    fn read_agreed(
        &mut self,
        header: Header,
        coordinator: ReplicaId,
        placement: Placement,
        read: &RowRead,
        now: u64,
    ) -> Option<Vec<Cell>> {
        let client = &self.clients[header.client.0];
        let targets: ReplicaList = self
            .read_targets(placement, coordinator, header.required)
            .collect();
        if targets.len() < header.required
            || targets.iter().any(|replica| client.cut_off[replica.0])
        {
            return None;
        }
        let gc_grace_secs = self.config.gc_grace.as_secs();
        for replica in &targets {
            let node = &mut self.replicas[replica.0];
            let now_secs = node.clock.wall_secs(now);
            node.store.purge_row(&read.row, now_secs, gc_grace_secs);
        }
        let views = targets.iter().map(|replica| {
            let node = &self.replicas[replica.0];
            node.store.view(&read.row, node.clock.wall_secs(now))
        });
        let agreed = read_agreed(views, read)?;
        for replica in targets {
            self.counters.messages_sent += 2;
            self.count_read(replica, agreed.dead);
        }
        Some(agreed.cells)
    }

    /// Sends a read to as many replicas as the consistency level needs, each after its
    /// latency.
    fn read_with_latency(
        &mut self,
        header: Header,
        coordinator: ReplicaId,
        placement: Placement,
        read: RowRead,
        now: u64,
    ) -> Started {
        let phase = Phase::Reading {
            limit: read.limit.get(),
            slices: Vec::with_capacity(header.required),
        };
        let key = self.open(header, read.row.clone(), phase, now);
        self.for_each_read_target(placement, coordinator, header.required, |sim, replica| {
            let message = Message::Read(read.clone());
            sim.deliver_later(now, replica, header.client, key, message);
        });
        Started::Waiting(key)
    }

    /// Calls `ask` for each of the [replicas a read goes to](Simulation::read_targets).
    fn for_each_read_target(
        &mut self,
        placement: Placement,
        coordinator: ReplicaId,
        required: usize,
        mut ask: impl FnMut(&mut Self, ReplicaId),
    ) {
        let targets: ReplicaList = self
            .read_targets(placement, coordinator, required)
            .collect();
        for replica in targets {
            ask(self, replica);
        }
    }

    /// The replicas a read goes to: the coordinator, then the next replicas of the row in
    /// ring order that are up, `required` in all.
    fn read_targets(
        &self,
        placement: Placement,
        coordinator: ReplicaId,
        required: usize,
    ) -> impl Iterator<Item = ReplicaId> + '_ {
        placement
            .iter_from(coordinator)
            .filter(|replica| self.replicas[replica.0].up)
            .take(required)
    }

    /// What the caller of request `key` finds at `now` (events due by then processed).
    pub(crate) fn poll(&mut self, key: usize, now: u64) -> Poll {
        let Some(coordinator) = self.requests.get_mut(key) else {
            return Poll::Ready(Err(RequestFailure::new(
                Error::unavailable(
                    "a storage request",
                    "the simulator lost track of the request",
                ),
                FailureDetail::Lost,
            )));
        };
        if let Some(outcome) = coordinator.outcome.take() {
            coordinator.waiter_gone = true;
            self.release_if_done(key);
            return Poll::Ready(outcome);
        }
        if now >= coordinator.deadline {
            let error = coordinator.timeout_error();
            let header = coordinator.header;
            coordinator.phase = Phase::Done;
            coordinator.waiter_gone = true;
            self.counters.timed_out += 1;
            tracing::debug!(client = %header.client, request = header.id, %error, "request timed out");
            self.record_answer(now, header, Err(error.error()));
            self.release_if_done(key);
            return Poll::Ready(Err(error));
        }
        let next_event = coordinator.events.first().map_or(u64::MAX, |key| key.0);
        Poll::Pending {
            wake_at: next_event.min(coordinator.deadline),
        }
    }

    /// The caller of request `key` stopped waiting; its messages still go their way.
    pub(crate) fn abandon(&mut self, key: usize) {
        if let Some(coordinator) = self.requests.get_mut(key) {
            coordinator.waiter_gone = true;
            self.release_if_done(key);
        }
    }

    fn release_if_done(&mut self, key: usize) {
        if self
            .requests
            .get(key)
            .is_some_and(|coordinator| coordinator.waiter_gone && coordinator.events.is_empty())
        {
            self.requests.remove(key);
        }
    }

    /// Keeps a coordinator for a request that must wait.
    fn open(&mut self, header: Header, row: RowKey, phase: Phase, now: u64) -> usize {
        self.requests.insert(Coordinator {
            header,
            row,
            started: now,
            deadline: now.saturating_add(duration_micros(self.config.request_timeout)),
            phase,
            outcome: None,
            events: BTreeSet::new(),
            waiter_gone: false,
        })
    }

    /// Keeps a coordinator for an inline request that can only time out.
    fn wait(&mut self, header: Header, row: RowKey, phase: Phase, now: u64) -> Started {
        Started::Waiting(self.open(header, row, phase, now))
    }

    /// Fails a request up front, `alive` of its replicas being up and reachable: nothing
    /// was sent.
    fn refuse(
        &mut self,
        header: Header,
        row: &RowKey,
        now: u64,
        alive: usize,
        message: String,
    ) -> Started {
        self.counters.unavailable += 1;
        let error = Error::unavailable(header.describe(row), message);
        self.record_answer(now, header, Err(&error));
        let detail = FailureDetail::Unavailable {
            consistency: header.consistency,
            required: header.required,
            alive,
        };
        Started::Answered(Err(RequestFailure::new(error, detail)))
    }

    /// Answers a request at once, successfully.
    fn answered(&mut self, header: Header, at: u64, response: StorageResponse) -> Started {
        self.counters.succeeded += 1;
        self.record_answer(at, header, Ok(&response));
        Started::Answered(Ok(response))
    }

    /// Gives request `key` its successful answer, for its caller to poll.
    fn finish(&mut self, key: usize, at: u64, response: StorageResponse) {
        let coordinator = &mut self.requests[key];
        coordinator.phase = Phase::Done;
        let header = coordinator.header;
        self.counters.succeeded += 1;
        self.record_answer(at, header, Ok(&response));
        self.requests[key].outcome = Some(Ok(response));
    }

    fn keep_hint(&mut self, holder: ReplicaId, target: ReplicaId, mutation: &Mutation, now: u64) {
        let Some(window) = self.config.hint_window else {
            return;
        };
        let down_for = now.saturating_sub(self.replicas[target.0].down_since);
        if down_for < duration_micros(window) {
            self.counters.hints_written += 1;
            self.hints.push(Hint {
                holder,
                target,
                mutation: mutation.clone(),
            });
        }
    }

    /// The next coordinator for `client` among the row's replicas it can reach and that are
    /// up, round-robin.
    fn pick_coordinator(&mut self, client: ClientId, placement: Placement) -> Option<ReplicaId> {
        let replicas = &self.replicas;
        let state = &mut self.clients[client.0];
        let reachable = |replica: &ReplicaId| replicas[replica.0].up && !state.cut_off[replica.0];
        let count = placement.iter().filter(reachable).count();
        if count == 0 {
            return None;
        }
        let pick = state.next_coordinator % count;
        let chosen = placement.iter().filter(reachable).nth(pick);
        state.next_coordinator = state.next_coordinator.wrapping_add(1);
        chosen
    }

    /// Where `row` lives. With as many replicas as the replication factor every replica
    /// holds every row; otherwise the row's token is the first 8 bytes of the MD5 of its
    /// key (as Cassandra's `RandomPartitioner`), and its first replica the token modulo
    /// the ring size (as `SimpleStrategy` on evenly spaced tokens).
    fn placement(&self, row: &RowKey) -> Placement {
        let ring = self.replicas.len();
        let count = self.config.replication_factor;
        let first = if count == ring {
            0
        } else {
            let digest: [u8; 16] = Md5::new()
                .chain_update(row.kind.as_str())
                .chain_update([0])
                .chain_update(row.lock_id.as_str())
                .finalize()
                .into();
            let mut token = [0; 8];
            token.copy_from_slice(&digest[..8]);
            let ring_size = u64::try_from(ring).unwrap_or(u64::MAX);
            usize::try_from(u64::from_be_bytes(token) % ring_size).unwrap_or(0)
        };
        Placement { first, count, ring }
    }

    // ----- messages -------------------------------------------------------------------

    fn delay(&mut self) -> u64 {
        if self.zero_latency {
            0
        } else {
            self.config.latency.sample_micros(&mut self.rng)
        }
    }

    /// Sends `message` of request `key` to `replica` at `at`, to arrive after a latency drawn
    /// for it.
    fn deliver_later(
        &mut self,
        at: u64,
        replica: ReplicaId,
        client: ClientId,
        key: usize,
        message: Message,
    ) {
        let delay = self.delay();
        let event = Event::Deliver {
            replica,
            client,
            request: key,
            message,
        };
        self.send(at, delay, event);
    }

    /// Sends `event`, sent at `at`, to arrive `delay` later: at once if the delay is zero.
    fn send(&mut self, at: u64, delay: u64, event: Event) {
        if delay == 0 {
            self.handle(at, event);
            return;
        }
        let key = (at.saturating_add(delay), self.next_event);
        self.next_event += 1;
        if let Some(coordinator) = event
            .request()
            .and_then(|request| self.requests.get_mut(request))
        {
            coordinator.events.insert(key);
        }
        self.events.insert(key, event);
    }

    fn handle(&mut self, at: u64, event: Event) {
        match event {
            Event::Deliver {
                replica,
                client,
                request,
                message,
            } => {
                let reply = match message {
                    Message::Mutation(mutation) => self
                        .deliver_mutation(at, client, replica, &mutation)
                        .then_some((Reply::Ack, 0)),
                    Message::Repair { row, cells } => self
                        .deliver_repair(at, client, replica, &row, cells)
                        .then_some((Reply::Ack, 0)),
                    Message::Read(read) => self
                        .deliver_read(at, client, replica, &read)
                        .map(|(slice, dead)| (Reply::Slice(slice), dead)),
                };
                if let Some((reply, dead)) = reply {
                    let scan_cost =
                        duration_micros(self.config.dead_cell_read_cost).saturating_mul(dead);
                    let delay = self.delay().saturating_add(scan_cost);
                    let event = Event::Reply {
                        replica,
                        client,
                        request,
                        reply,
                    };
                    self.send(at, delay, event);
                }
            }
            Event::Reply {
                replica,
                client,
                request,
                reply,
            } => {
                if self.reply_arrives(at, client, replica) {
                    self.on_reply(at, request, replica, reply);
                }
            }
            Event::Hint(hint) => {
                self.counters.messages_sent += 1;
                if !self.replicas[hint.target.0].up {
                    self.drop_message(at, "hint", hint.target);
                    self.hints.push(hint);
                    return;
                }
                self.counters.hints_delivered += 1;
                self.counters.replicas[hint.target.0].hints_applied += 1;
                self.apply(at, hint.target, &hint.mutation, ApplyCause::Hint);
            }
        }
    }

    /// A request message from `client` reaches `replica` at `at`: true if it is delivered
    /// (the replica is up and the link is open), false if it is lost.
    fn request_arrives(&mut self, at: u64, client: ClientId, replica: ReplicaId) -> bool {
        self.counters.messages_sent += 1;
        if self.replicas[replica.0].up && !self.clients[client.0].cut_off[replica.0] {
            true
        } else {
            self.drop_message(at, "request", replica);
            false
        }
    }

    /// A reply from `replica` reaches `client`'s coordinator at `at`: true unless the link
    /// is cut.
    fn reply_arrives(&mut self, at: u64, client: ClientId, replica: ReplicaId) -> bool {
        self.counters.messages_sent += 1;
        if self.clients[client.0].cut_off[replica.0] {
            self.drop_message(at, "reply", replica);
            false
        } else {
            true
        }
    }

    fn drop_message(&mut self, at: u64, what: &str, replica: ReplicaId) {
        self.counters.messages_dropped += 1;
        tracing::trace!(at, %replica, what, "message dropped");
    }

    /// A write or delete reaches `replica`; true if it was delivered and applied.
    fn deliver_mutation(
        &mut self,
        at: u64,
        client: ClientId,
        replica: ReplicaId,
        mutation: &Mutation,
    ) -> bool {
        if !self.request_arrives(at, client, replica) {
            return false;
        }
        let served = &mut self.counters.replicas[replica.0].requests;
        if mutation.version.is_tombstone() {
            served.deletes += 1;
        } else {
            served.writes += 1;
        }
        self.apply(at, replica, mutation, ApplyCause::Request);
        true
    }

    /// A read repair reaches `replica`; true if it was delivered and applied.
    fn deliver_repair(
        &mut self,
        at: u64,
        client: ClientId,
        replica: ReplicaId,
        row: &RowKey,
        cells: RowSlice,
    ) -> bool {
        if !self.request_arrives(at, client, replica) {
            return false;
        }
        self.counters.replicas[replica.0].read_repairs += cells.len() as u64;
        for (column, version) in cells {
            let mutation = Mutation {
                row: row.clone(),
                column,
                version,
            };
            self.apply(at, replica, &mutation, ApplyCause::ReadRepair);
        }
        true
    }

    /// A read reaches `replica`; its answer and the dead cells it scanned, if delivered.
    fn deliver_read(
        &mut self,
        at: u64,
        client: ClientId,
        replica: ReplicaId,
        read: &RowRead,
    ) -> Option<(RowSlice, u64)> {
        if !self.request_arrives(at, client, replica) {
            return None;
        }
        let gc_grace_secs = self.config.gc_grace.as_secs();
        let node = &mut self.replicas[replica.0];
        let now_secs = node.clock.wall_secs(at);
        let (slice, dead) = node.store.read(read, now_secs, gc_grace_secs);
        self.count_read(replica, dead);
        Some((slice, dead))
    }

    /// Counts a read served by `replica` that scanned `dead` dead cells.
    fn count_read(&mut self, replica: ReplicaId, dead: u64) {
        let counters = &mut self.counters.replicas[replica.0];
        counters.requests.reads += 1;
        counters.dead_cells_scanned += dead;
        self.counters.dead_cells_scanned += dead;
    }

    fn apply(&mut self, at: u64, replica: ReplicaId, mutation: &Mutation, cause: ApplyCause) {
        let gc_grace_secs = self.config.gc_grace.as_secs();
        let node = &mut self.replicas[replica.0];
        let now_secs = node.clock.wall_secs(at);
        node.store.apply(
            &mutation.row,
            &mutation.column,
            mutation.version.clone(),
            now_secs,
            gc_grace_secs,
        );
        if self.history.is_some() {
            self.record(
                at,
                HistoryEvent::Applied {
                    replica,
                    row: mutation.row.clone(),
                    column: mutation.column.clone(),
                    version: mutation.version.clone(),
                    cause,
                },
            );
        }
    }

    /// The coordinator of request `key` receives a reply.
    fn on_reply(&mut self, at: u64, key: usize, replica: ReplicaId, reply: Reply) {
        let read_repair = self.config.read_repair;
        let Some(coordinator) = self.requests.get_mut(key) else {
            return;
        };
        if at > coordinator.deadline {
            return;
        }
        let required = coordinator.header.required;
        let answer = match (&mut coordinator.phase, reply) {
            (Phase::Writing { acks }, Reply::Ack) => {
                *acks += 1;
                if *acks < required {
                    return;
                }
                StorageResponse::Done
            }
            (Phase::Reading { limit, slices }, Reply::Slice(slice)) => {
                slices.push((replica, slice));
                if slices.len() < required {
                    return;
                }
                let resolution = resolve(slices, *limit);
                if read_repair && !resolution.repairs.is_empty() {
                    self.counters.repaired_reads += 1;
                    coordinator.phase = Phase::Repairing {
                        cells: resolution.cells,
                        awaiting: resolution.repairs.len(),
                    };
                    let (client, row) = (coordinator.header.client, coordinator.row.clone());
                    self.send_repairs(at, key, client, &row, resolution.repairs);
                    return;
                }
                StorageResponse::Cells(resolution.cells)
            }
            (Phase::Repairing { cells, awaiting }, Reply::Ack) => {
                *awaiting -= 1;
                if *awaiting > 0 {
                    return;
                }
                StorageResponse::Cells(std::mem::take(cells))
            }
            _ => return,
        };
        self.finish(key, at, answer);
    }

    /// Sends a read's coordinator's repairs to the replicas that answered out of date.
    fn send_repairs(
        &mut self,
        at: u64,
        key: usize,
        client: ClientId,
        row: &RowKey,
        repairs: Vec<(ReplicaId, RowSlice)>,
    ) {
        for (replica, cells) in repairs {
            self.counters.read_repairs += cells.len() as u64;
            let message = Message::Repair {
                row: row.clone(),
                cells,
            };
            self.deliver_later(at, replica, client, key, message);
        }
    }

    // ----- faults ---------------------------------------------------------------------

    pub(crate) fn set_up(&mut self, replica: ReplicaId, up: bool, now: u64) {
        let node = &mut self.replicas[replica.0];
        if node.up == up {
            return;
        }
        node.up = up;
        if up {
            self.dispatch_hints(now);
        } else {
            node.down_since = now;
        }
    }

    pub(crate) fn is_up(&self, replica: ReplicaId) -> bool {
        self.replicas[replica.0].up
    }

    /// Sends every hint whose holder and target are both up.
    fn dispatch_hints(&mut self, now: u64) {
        let replicas = &self.replicas;
        let (ready, waiting): (Vec<Hint>, Vec<Hint>) = self
            .hints
            .drain(..)
            .partition(|hint| replicas[hint.holder.0].up && replicas[hint.target.0].up);
        self.hints = waiting;
        for hint in ready {
            let delay = self.delay();
            self.send(now, delay, Event::Hint(hint));
        }
    }

    pub(crate) fn wipe(&mut self, replica: ReplicaId) {
        self.replicas[replica.0].store.wipe();
        self.hints.retain(|hint| hint.holder != replica);
    }

    pub(crate) fn set_cut_off(&mut self, client: ClientId, replica: ReplicaId, cut_off: bool) {
        self.clients[client.0].cut_off[replica.0] = cut_off;
    }

    pub(crate) fn heal_all(&mut self) {
        for client in &mut self.clients {
            client.cut_off.fill(false);
        }
    }

    pub(crate) fn set_latency(&mut self, latency: Latency) {
        self.zero_latency = latency.is_always_zero();
        self.config.latency = latency;
    }

    pub(crate) fn set_request_timeout(&mut self, timeout: Duration) {
        self.config.request_timeout = timeout;
    }

    pub(crate) fn set_gc_grace(&mut self, gc_grace: Duration) {
        self.config.gc_grace = gc_grace;
        for replica in &mut self.replicas {
            replica.store.reschedule_purges();
        }
    }

    pub(crate) fn set_dead_cell_read_cost(&mut self, cost: Duration) {
        self.config.dead_cell_read_cost = cost;
    }

    pub(crate) fn set_replica_clock(&mut self, replica: ReplicaId, skew: ClockSkew, now: u64) {
        self.replicas[replica.0].clock.set_skew(skew, now);
    }

    pub(crate) fn set_client_clock(&mut self, client: ClientId, skew: ClockSkew, now: u64) {
        self.clients[client.0].clock.set_skew(skew, now);
    }

    // ----- observation ----------------------------------------------------------------

    /// `client`'s clock reading at `now`; the timestamp never decreases.
    pub(crate) fn client_now(&mut self, client: ClientId, now: u64) -> Now {
        let state = &mut self.clients[client.0];
        let timestamp = state.clock.wall(now).max(state.last_timestamp);
        state.last_timestamp = timestamp;
        Now::new(MonotonicTime::from_micros(now), timestamp)
    }

    pub(crate) fn replica_wall(&self, replica: ReplicaId, now: u64) -> Timestamp {
        self.replicas[replica.0].clock.wall(now)
    }

    pub(crate) fn replica_row(&self, replica: ReplicaId, row: &RowKey) -> RowSlice {
        self.replicas[replica.0].store.row(row)
    }

    pub(crate) fn counters(&self) -> Counters {
        self.counters.clone()
    }

    pub(crate) fn history(&self) -> Vec<HistoryEntry> {
        self.history.clone().unwrap_or_default()
    }

    fn record(&mut self, at: u64, event: HistoryEvent) {
        if let Some(history) = &mut self.history {
            history.push(HistoryEntry {
                at: Duration::from_micros(at),
                event,
            });
        }
    }

    fn record_answer(&mut self, at: u64, header: Header, result: Result<&StorageResponse, &Error>) {
        if self.history.is_some() {
            self.record(
                at,
                HistoryEvent::Answered {
                    client: header.client,
                    request: header.id,
                    result: result.cloned().map_err(Clone::clone),
                },
            );
        }
    }
}

/// The version a write creates: its TTL becomes an expiry second on the coordinator's clock.
fn stamp_write(write: CellWrite, coordinator_secs: u64) -> Mutation {
    Mutation {
        row: write.row,
        column: write.column,
        version: CellVersion {
            timestamp: write.timestamp,
            state: CellState::Live {
                value: Arc::from(write.value),
                expiry: write
                    .ttl
                    .map(|ttl| Expiry::after(coordinator_secs, u64::from(ttl.as_secs()))),
            },
        },
    }
}

/// The tombstone a delete creates, deleted at the coordinator's second.
fn stamp_delete(delete: CellDelete, coordinator_secs: u64) -> Mutation {
    Mutation {
        row: delete.row,
        column: delete.column,
        version: CellVersion {
            timestamp: delete.timestamp,
            state: CellState::Tombstone {
                deleted_at: coordinator_secs,
            },
        },
    }
}
