//! The public handles: the cluster, its clients, their clocks and the fault injector.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use fair_lock::Clock;
use fair_lock::{WakeHintInbox, WakeHintTransport};
use lock_core::storage::{
    Cell, CellDelete, CellWrite, RowKey, RowRead, StorageRequest, StorageResponse,
};
use lock_core::time::duration_micros;
use lock_core::{ColumnName, Error, LockStorage, Now, Timestamp};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant as TokioInstant;

use crate::clock::ClockSkew;
use crate::config::{
    ClientOptions, ClusterConfig, Consistency, validate_dead_cell_read_cost, validate_gc_grace,
    validate_timeout,
};
use crate::counters::Counters;
use crate::error::MemoryError;
use crate::failure::RequestFailure;
use crate::history::HistoryEntry;
use crate::id::{ClientId, ReplicaId};
use crate::latency::Latency;
use crate::sim::{Poll, Simulation, Started};
use crate::version::CellVersion;

/// What every handle shares: the simulation and the Tokio instant it started at.
#[derive(Debug)]
struct Shared {
    origin: TokioInstant,
    /// [`ClusterConfig::timer_dilation`].
    dilation: u32,
    simulation: Mutex<Simulation>,
    /// The wake-up hint network between the clients ([`MemoryClient::wake_hints`]).
    hints: Mutex<HintNetwork>,
}

/// Where each client's hint listener is, and the generator of hint latencies: its own,
/// seeded from the cluster's seed, so that sending hints leaves the storage's latencies as
/// they are without them.
#[derive(Debug)]
struct HintNetwork {
    inboxes: BTreeMap<SocketAddr, WakeHintInbox>,
    rng: ChaCha8Rng,
}

/// What the hint network's generator is seeded with, besides the cluster's seed.
const HINT_SEED: u64 = 0x6869_6e74_7320_2121;

impl Shared {
    fn new(config: ClusterConfig) -> Arc<Self> {
        Arc::new(Shared {
            origin: TokioInstant::now(),
            dilation: config.timer_dilation,
            hints: Mutex::new(HintNetwork {
                inboxes: BTreeMap::new(),
                rng: ChaCha8Rng::seed_from_u64(config.seed ^ HINT_SEED),
            }),
            simulation: Mutex::new(Simulation::new(config)),
        })
    }

    /// Locks the simulation, reads the time and processes every event due by then. The
    /// time is read under the lock so that it never goes back from one holder to the next.
    fn at_now(&self) -> (MutexGuard<'_, Simulation>, u64) {
        let mut simulation = self
            .simulation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let elapsed = TokioInstant::now().saturating_duration_since(self.origin);
        let now = duration_micros(elapsed / self.dilation);
        simulation.advance_to(now);
        (simulation, now)
    }

    fn hints(&self) -> MutexGuard<'_, HintNetwork> {
        self.hints.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The Tokio instant at which `micros` of simulated time have passed.
    fn instant(&self, micros: u64) -> TokioInstant {
        self.origin + self.timer_duration(Duration::from_micros(micros))
    }

    /// How long Tokio's timer runs while `duration` of simulated time passes.
    fn timer_duration(&self, duration: Duration) -> Duration {
        duration.saturating_mul(self.dilation)
    }
}

fn check_replica(simulation: &Simulation, replica: ReplicaId) -> Result<(), MemoryError> {
    let replicas = simulation.replica_count();
    if replica.0 < replicas {
        Ok(())
    } else {
        Err(MemoryError::UnknownReplica { replica, replicas })
    }
}

fn check_client(simulation: &Simulation, client: ClientId) -> Result<(), MemoryError> {
    if client.0 < simulation.client_count() {
        Ok(())
    } else {
        Err(MemoryError::UnknownClient { client })
    }
}

/// A simulated Cassandra cluster. Cloning it is cheap and every clone is the same cluster.
///
/// The cluster's time is Tokio's: create it inside the runtime that will drive it (with
/// `tokio::time::pause` for virtual time).
#[derive(Clone, Debug)]
pub struct MemoryCluster {
    shared: Arc<Shared>,
}

impl MemoryCluster {
    /// A cluster as `config` describes, or the reason it cannot exist.
    pub fn new(config: ClusterConfig) -> Result<Self, MemoryError> {
        config.validate()?;
        Ok(MemoryCluster {
            shared: Shared::new(config),
        })
    }

    /// A new client with the cluster's default consistency levels, an exact clock and
    /// every link up.
    pub fn client(&self) -> MemoryClient {
        let (mut simulation, now) = self.shared.at_now();
        let id = simulation.add_client(ClockSkew::default(), &[], None, None, now);
        MemoryClient {
            shared: Arc::clone(&self.shared),
            id,
        }
    }

    /// A new client that differs from the defaults as `options` says.
    pub fn client_with(&self, options: ClientOptions) -> Result<MemoryClient, MemoryError> {
        let skew = options.clock.validate("clock")?;
        let (mut simulation, now) = self.shared.at_now();
        for &replica in &options.partitioned_from {
            check_replica(&simulation, replica)?;
        }
        let id = simulation.add_client(
            skew,
            &options.partitioned_from,
            options.write_consistency,
            options.read_consistency,
            now,
        );
        Ok(MemoryClient {
            shared: Arc::clone(&self.shared),
            id,
        })
    }

    /// The handle that injects faults while clients run.
    pub fn faults(&self) -> FaultHandle {
        FaultHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> Counters {
        self.shared.at_now().0.counters()
    }

    /// Everything recorded so far, in order; empty unless
    /// [`ClusterConfig::record_history`] is set.
    pub fn history(&self) -> Vec<HistoryEntry> {
        self.shared.at_now().0.history()
    }

    /// The configuration in force, including the changes made through [`FaultHandle`].
    pub fn config(&self) -> ClusterConfig {
        self.shared.at_now().0.config().clone()
    }

    /// Simulated time since the cluster was created.
    pub fn elapsed(&self) -> Duration {
        Duration::from_micros(self.shared.at_now().1)
    }

    /// What `replica` stores for `row` right now: every version of every cell, tombstones
    /// and expired values included, in column order.
    pub fn replica_row(
        &self,
        replica: ReplicaId,
        row: &RowKey,
    ) -> Result<Vec<(ColumnName, CellVersion)>, MemoryError> {
        let (simulation, _) = self.shared.at_now();
        check_replica(&simulation, replica)?;
        Ok(simulation.replica_row(replica, row))
    }

    /// What `replica`'s wall clock reads now.
    pub fn replica_clock(&self, replica: ReplicaId) -> Result<Timestamp, MemoryError> {
        let (simulation, now) = self.shared.at_now();
        check_replica(&simulation, replica)?;
        Ok(simulation.replica_wall(replica, now))
    }

    /// Whether `replica` is up.
    pub fn is_up(&self, replica: ReplicaId) -> Result<bool, MemoryError> {
        let (simulation, _) = self.shared.at_now();
        check_replica(&simulation, replica)?;
        Ok(simulation.is_up(replica))
    }

    /// Waits (in Tokio time) until no message is in flight any more: every delivery,
    /// reply, read repair and hint sent so far has arrived or been lost.
    pub async fn settle(&self) {
        loop {
            let next = self.shared.at_now().0.next_event_at();
            match next {
                Some(at) => tokio::time::sleep_until(self.shared.instant(at)).await,
                None => return,
            }
        }
    }
}

impl Default for MemoryCluster {
    /// Three replicas, replication factor 3, QUORUM reads and writes, zero latency, no
    /// skew, a 2 s timeout, read repair and hinted handoff on, seed 0.
    fn default() -> Self {
        MemoryCluster {
            shared: Shared::new(ClusterConfig::default()),
        }
    }
}

/// One client of the cluster: implements [`LockStorage`]. Clones share the id, the clock and
/// the links.
#[derive(Clone, Debug)]
pub struct MemoryClient {
    shared: Arc<Shared>,
    id: ClientId,
}

impl MemoryClient {
    /// The client's id, for [`FaultHandle`].
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// This client's wake-up hint transport (lock-core's `LockerBuilder::wake_hints`): a
    /// listener at an address made up from the client's id, and hints to other clients'
    /// listeners that arrive after a one-way latency drawn from the cluster's
    /// [`Latency`], as a storage message's would be, from a generator of their own. Hints
    /// ignore partitions and stopped replicas; a hint to an address no client listens at
    /// is lost. Every call returns the same listener.
    pub fn wake_hints(&self) -> Arc<SimulatedWakeHints> {
        let listener = SocketAddr::new(
            std::net::Ipv6Addr::from(0xfd00_u128 << 112 | self.id.0 as u128).into(),
            7401,
        );
        let inbox = self
            .shared
            .hints()
            .inboxes
            .entry(listener)
            .or_default()
            .clone();
        Arc::new(SimulatedWakeHints {
            shared: Arc::clone(&self.shared),
            listener,
            inbox,
        })
    }

    /// The client's own clock, skewed as configured: give it to the lock driver so that
    /// write timestamps and queue positions come from this simulated machine.
    pub fn clock(&self) -> ClientClock {
        ClientClock {
            shared: Arc::clone(&self.shared),
            client: self.id,
        }
    }

    /// The cluster this client talks to.
    pub fn cluster(&self) -> MemoryCluster {
        MemoryCluster {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Runs `request` at `consistency` instead of the client's own level, and reports a
    /// failure with the detail a Cassandra coordinator would send (the consistency level,
    /// the replicas it needed, the replicas alive or answering): what a CQL front end puts
    /// in its error frames. Otherwise the same as [`LockStorage::execute`].
    pub async fn execute_at(
        &self,
        request: StorageRequest,
        consistency: Consistency,
    ) -> Result<StorageResponse, RequestFailure> {
        self.run(request, Some(consistency)).await
    }

    async fn run(
        &self,
        request: StorageRequest,
        consistency: Option<Consistency>,
    ) -> Result<StorageResponse, RequestFailure> {
        let (key, mut wake_at) = {
            let (mut simulation, now) = self.shared.at_now();
            let key = match simulation.start(self.id, request, consistency, now) {
                Started::Answered(result) => return result,
                Started::Waiting(key) => key,
            };
            match simulation.poll(key, now) {
                Poll::Ready(result) => return result,
                Poll::Pending { wake_at } => (key, wake_at),
            }
        };
        let mut waiter = Waiter {
            shared: &self.shared,
            key,
            waiting: true,
        };
        loop {
            tokio::time::sleep_until(self.shared.instant(wake_at)).await;
            let (mut simulation, now) = self.shared.at_now();
            match simulation.poll(key, now) {
                Poll::Ready(result) => {
                    waiter.waiting = false;
                    return result;
                }
                Poll::Pending { wake_at: next } => wake_at = next,
            }
        }
    }
}

/// Tells the simulation when a caller drops a request's future before its answer.
struct Waiter<'a> {
    shared: &'a Shared,
    key: usize,
    waiting: bool,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.waiting {
            self.shared.at_now().0.abandon(self.key);
        }
    }
}

#[async_trait]
impl LockStorage for MemoryClient {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        self.execute(StorageRequest::Write(write)).await.map(drop)
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        self.execute(StorageRequest::Delete(delete)).await.map(drop)
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        match self.execute(StorageRequest::Read(read)).await? {
            StorageResponse::Cells(cells) => Ok(cells),
            StorageResponse::Done => Ok(Vec::new()),
        }
    }

    async fn execute(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        self.run(request, None)
            .await
            .map_err(RequestFailure::into_error)
    }
}

/// A simulated client's wake-up hint transport ([`MemoryClient::wake_hints`]).
#[derive(Debug)]
pub struct SimulatedWakeHints {
    shared: Arc<Shared>,
    listener: SocketAddr,
    inbox: WakeHintInbox,
}

impl WakeHintTransport for SimulatedWakeHints {
    fn listener(&self) -> SocketAddr {
        self.listener
    }

    fn send(&self, to: SocketAddr, datagram: Vec<u8>) {
        // Outside a runtime there is nothing to deliver with: the hint is lost.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (latency, now) = {
            let (simulation, now) = self.shared.at_now();
            (simulation.config().latency.clone(), now)
        };
        let (inbox, delay) = {
            let mut hints = self.shared.hints();
            let Some(inbox) = hints.inboxes.get(&to).cloned() else {
                return;
            };
            (inbox, latency.sample_micros(&mut hints.rng))
        };
        let arrive_at = self.shared.instant(now.saturating_add(delay));
        runtime.spawn(async move {
            tokio::time::sleep_until(arrive_at).await;
            // Only this crate's lockers send here, and they send well-formed hints.
            let _ = inbox.deliver(&datagram);
        });
    }

    fn inbox(&self) -> &WakeHintInbox {
        &self.inbox
    }
}

/// A client's wall clock: the cluster's epoch plus Tokio time, skewed as configured, made
/// non-decreasing (a backward step holds the reading until real time catches up). Its
/// monotonic reading is the simulated time since the cluster was created.
#[derive(Clone, Debug)]
pub struct ClientClock {
    shared: Arc<Shared>,
    client: ClientId,
}

impl Clock for ClientClock {
    fn now(&self) -> Now {
        let (mut simulation, now) = self.shared.at_now();
        simulation.client_now(self.client, now)
    }

    fn timer_duration(&self, duration: Duration) -> Duration {
        self.shared.timer_duration(duration)
    }
}

/// Injects faults into a running cluster: cheap to clone, usable from any task while
/// clients run. Every change takes effect at the current Tokio instant, after every
/// message due by then has been delivered.
#[derive(Clone, Debug)]
pub struct FaultHandle {
    shared: Arc<Shared>,
}

impl FaultHandle {
    /// Stops `replica`: coordinators see it down (so too few live replicas fail requests
    /// up front), and messages reaching it are lost. Its data stays on its disk.
    pub fn stop_replica(&self, replica: ReplicaId) -> Result<(), MemoryError> {
        let (mut simulation, now) = self.shared.at_now();
        check_replica(&simulation, replica)?;
        simulation.set_up(replica, false, now);
        Ok(())
    }

    /// Starts `replica` again with the data it had; coordinators replay the hints they
    /// kept for it.
    pub fn start_replica(&self, replica: ReplicaId) -> Result<(), MemoryError> {
        let (mut simulation, now) = self.shared.at_now();
        check_replica(&simulation, replica)?;
        simulation.set_up(replica, true, now);
        Ok(())
    }

    /// Empties `replica`'s disk (and the hints it kept), as a node replaced without
    /// streaming; whether it is up does not change.
    pub fn wipe_replica(&self, replica: ReplicaId) -> Result<(), MemoryError> {
        let (mut simulation, _) = self.shared.at_now();
        check_replica(&simulation, replica)?;
        simulation.wipe(replica);
        Ok(())
    }

    /// Cuts the link between `client` and `replica`: messages either way are lost, and the
    /// client no longer picks that replica as coordinator. Coordinators do not learn of
    /// the cut, so requests that need the replica time out.
    pub fn partition(&self, client: ClientId, replica: ReplicaId) -> Result<(), MemoryError> {
        self.set_link(client, replica, true)
    }

    /// Restores the link between `client` and `replica`.
    pub fn heal(&self, client: ClientId, replica: ReplicaId) -> Result<(), MemoryError> {
        self.set_link(client, replica, false)
    }

    /// Cuts `client` off from every replica.
    pub fn isolate(&self, client: ClientId) -> Result<(), MemoryError> {
        let (mut simulation, _) = self.shared.at_now();
        check_client(&simulation, client)?;
        for replica in 0..simulation.replica_count() {
            simulation.set_cut_off(client, ReplicaId(replica), true);
        }
        Ok(())
    }

    /// Restores every link of every client.
    pub fn heal_all(&self) {
        self.shared.at_now().0.heal_all();
    }

    /// Draws the latency of messages sent from now on from `latency`.
    pub fn set_latency(&self, latency: Latency) -> Result<(), MemoryError> {
        latency.validate()?;
        self.shared.at_now().0.set_latency(latency);
        Ok(())
    }

    /// Gives requests started from now on this timeout.
    pub fn set_request_timeout(&self, timeout: Duration) -> Result<(), MemoryError> {
        validate_timeout(timeout)?;
        self.shared.at_now().0.set_request_timeout(timeout);
        Ok(())
    }

    /// Gives replicas this `gc_grace` from now on (as `ALTER TABLE ... WITH
    /// gc_grace_seconds`): whole seconds, at most 20 years.
    pub fn set_gc_grace(&self, gc_grace: Duration) -> Result<(), MemoryError> {
        validate_gc_grace(gc_grace)?;
        self.shared.at_now().0.set_gc_grace(gc_grace);
        Ok(())
    }

    /// Charges reads this much extra time per dead cell scanned.
    pub fn set_dead_cell_read_cost(&self, cost: Duration) -> Result<(), MemoryError> {
        validate_dead_cell_read_cost(cost)?;
        self.shared.at_now().0.set_dead_cell_read_cost(cost);
        Ok(())
    }

    /// Steps `replica`'s clock to `skew` (see [`ClockSkew`]).
    pub fn set_replica_clock(
        &self,
        replica: ReplicaId,
        skew: ClockSkew,
    ) -> Result<(), MemoryError> {
        let skew = skew.validate("replica_clocks")?;
        let (mut simulation, now) = self.shared.at_now();
        check_replica(&simulation, replica)?;
        simulation.set_replica_clock(replica, skew, now);
        Ok(())
    }

    /// Steps `client`'s clock to `skew`; its readings still never decrease.
    pub fn set_client_clock(&self, client: ClientId, skew: ClockSkew) -> Result<(), MemoryError> {
        let skew = skew.validate("clock")?;
        let (mut simulation, now) = self.shared.at_now();
        check_client(&simulation, client)?;
        simulation.set_client_clock(client, skew, now);
        Ok(())
    }

    fn set_link(
        &self,
        client: ClientId,
        replica: ReplicaId,
        cut_off: bool,
    ) -> Result<(), MemoryError> {
        let (mut simulation, _) = self.shared.at_now();
        check_client(&simulation, client)?;
        check_replica(&simulation, replica)?;
        simulation.set_cut_off(client, replica, cut_off);
        Ok(())
    }
}
