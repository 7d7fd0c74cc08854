//! Random schedules on the deterministic memory cluster, in virtual time.
//!
//! A [`Schedule`] says everything about one run: the cluster (replicas, latency, replica
//! clocks, seed), the contenders (their clock offsets and drift, when they start, how many
//! times they take the lock and for how long, how long they think in between), the faults
//! and when they strike, whether the contenders follow the time service, and, for the
//! runs beyond the assumptions, a holder that pauses past its lease or replica clocks that
//! jump beyond the TTL. [`run`] plays a schedule on a fresh current-thread Tokio runtime
//! with the clock paused and returns what happened ([`Run`]); the same schedule gives the
//! same run (see [`crate::sim`]'s determinism note in the crate docs).
//!
//! Every contender is a task with its own [`MemoryClient`] behind a [`Gate`] (for pauses
//! and crashes), its own skewed clock, and a locker seeded from the schedule's seed. It
//! acquires the lock `sections.len()` times; inside each critical section it writes to a
//! shared [`FencedResource`] every [`WRITE_EVERY`] with its fencing token. A well-behaved
//! application stops working when its guard's `lost()` fires; the paused victim of regime
//! (b) does not.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fair_lock::{Clock, LockGuard, Locker, TimeService, TimeServiceConfig};
use lock_core::machine::UpdateGlobalTime;
use lock_core::storage::{RowKey, RowKind};
use lock_core::{Error, LockConfig, LockId, PollConfig};
use lock_storage_memory::{
    CellState, ClientId, ClientOptions, ClockSkew, ClusterConfig, Latency, MemoryClient,
    MemoryCluster, ReplicaId,
};

use crate::gate::{Gate, GateHandle, GateMode, Operation, RequestRecord};
use crate::history::{AcqId, Acquisition, FencedResource, Recorder, ResourceWrite};

/// The one lock every contender of a run takes.
pub const LOCK_ID: &str = "resource";
/// How often an application inside its critical section writes to the resource.
pub const WRITE_EVERY: Duration = Duration::from_millis(100);
/// How long an application waits before calling `lock()` again after it failed.
pub const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// The coordinator timeout of the simulated cluster (below the lock's `request_timeout`,
/// as a Cassandra server's timeout is below its clients').
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(1);
/// A run that has not finished after this much virtual time is stuck.
pub const RUN_LIMIT: Duration = Duration::from_secs(3600);

/// The lock configuration of every simulated contender: the library's defaults
/// (`lease_ttl` 10 s, `max_clock_skew` 1 s, so an effective lease of 8 s, renewal every
/// 5 s, `request_timeout` 2 s, polls between 1 ms and 250 ms).
pub fn lock_config() -> LockConfig {
    LockConfig::default()
}

/// [`lock_config`] with the schedule's `queue_read_limit`, `wait_in_main_row`, `linger`
/// and `margin_acquisitions`.
pub fn lock_config_for(schedule: &Schedule) -> LockConfig {
    let config = lock_config();
    LockConfig {
        poll: PollConfig {
            queue_read_limit: schedule.queue_read_limit,
            margin_acquisitions: schedule.margin_acquisitions,
            ..config.poll
        },
        wait_in_main_row: schedule.wait_in_main_row,
        linger: schedule.linger,
        ..config
    }
}

/// How often the simulation samples every replica's `GlobalTime` cell when the schedule
/// runs the time service.
pub const GLOBAL_TIME_SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// The time service as the contenders run it when a schedule asks for it: every contender
/// is one of its replicas.
pub fn time_service_config() -> TimeServiceConfig {
    TimeServiceConfig {
        update_every: Duration::from_millis(200),
        refresh_every: Duration::from_millis(50),
        request_timeout: CLUSTER_TIMEOUT,
        ..TimeServiceConfig::new(LockId::new("time").unwrap_or_else(|_| unreachable!()))
    }
}

/// One contender: a process with its own clock that takes the lock again and again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContenderPlan {
    /// Its wall clock's offset and drift.
    pub clock: ClockSkew,
    /// When it first asks for the lock.
    pub start: Duration,
    /// The length of each of its critical sections, one per acquisition.
    pub sections: Vec<Duration>,
    /// How long it waits after a release before asking again.
    pub think: Duration,
}

/// What a fault does while it lasts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// A replica stops (keeping its data), and starts again at the end.
    StopReplica(usize),
    /// The link between a contender and a replica is cut, then healed.
    Partition {
        /// The contender (taken modulo the number of contenders).
        contender: usize,
        /// The replica (taken modulo the number of replicas).
        replica: usize,
    },
    /// Every message takes this long (slow enough to time requests out: writes then have
    /// an unknown outcome and land later).
    Latency(Latency),
    /// Coordinators give up after this long (requests time out with unknown outcome while
    /// their writes land on some replicas).
    RequestTimeout(Duration),
    /// A contender's process freezes: nothing it sends or receives moves.
    Pause(usize),
    /// A contender's process dies for good (the duration is ignored).
    Crash(usize),
}

/// A fault and when it strikes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// When it starts.
    pub at: Duration,
    /// How long it lasts.
    pub duration: Duration,
    /// What it does.
    pub kind: FaultKind,
}

/// Regime (b): contender 0's first holder freezes past its lease and its application
/// ignores `lost()`, working on for its whole critical section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Victim {
    /// How long after its grant the freeze starts.
    pub pause_after: Duration,
    /// How long the freeze lasts (longer than the effective lease).
    pub pause: Duration,
}

/// Regime (b): replica clocks step far ahead (beyond the TTL) during the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaJump {
    /// When.
    pub at: Duration,
    /// Which replicas.
    pub replicas: Vec<usize>,
    /// Their new offset, in microseconds.
    pub offset_micros: i64,
}

/// Everything about one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Seeds the cluster's latencies and the lockers' owner ids and jitter.
    pub seed: u64,
    /// Replicas in the cluster (replication factor 3).
    pub replicas: usize,
    /// The message latency.
    pub latency: Latency,
    /// Each replica's clock.
    pub replica_clocks: Vec<ClockSkew>,
    /// The contenders.
    pub contenders: Vec<ContenderPlan>,
    /// The faults.
    pub faults: Vec<Fault>,
    /// Whether the contenders' lockers use the time service's clock.
    pub time_service: bool,
    /// Regime (b): a holder paused past its lease.
    pub victim: Option<Victim>,
    /// Regime (b): replica clocks skewed beyond the TTL.
    pub replica_jump: Option<ReplicaJump>,
    /// How many queue cells one queue read returns (`PollConfig::queue_read_limit`);
    /// queues longer than this are read a slice at a time.
    pub queue_read_limit: u32,
    /// Whether waiters wait in the main row (`LockConfig::wait_in_main_row`).
    pub wait_in_main_row: bool,
    /// How long a released lock found idle lingers for a retake (`LockConfig::linger`);
    /// each contender ends its lingers when its plan is done, as a process about to exit.
    pub linger: Duration,
    /// The adaptive queue margin (`PollConfig::margin_acquisitions`; 0, the default, off).
    pub margin_acquisitions: u32,
    /// Whether every contender's locker takes wake-up hints (`LockerBuilder::wake_hints`),
    /// each from the simulated cluster's hint network, which delays them like its messages.
    pub wake_hints: bool,
}

impl Schedule {
    /// Three replicas with agreeing clocks, no faults, no time service, nothing beyond
    /// the assumptions: the base the generators and tests change.
    pub fn simple(seed: u64, latency: Latency, contenders: Vec<ContenderPlan>) -> Self {
        Schedule {
            seed,
            replicas: 3,
            latency,
            replica_clocks: Vec::new(),
            contenders,
            faults: Vec::new(),
            time_service: false,
            victim: None,
            replica_jump: None,
            queue_read_limit: lock_config().poll.queue_read_limit,
            wait_in_main_row: lock_config().wait_in_main_row,
            linger: lock_config().linger,
            margin_acquisitions: lock_config().poll.margin_acquisitions,
            wake_hints: false,
        }
    }
}

/// The `lock()` calls of a run that failed (and were retried by the application), by the
/// kind of error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockErrors {
    /// `Error::StorageUnavailable`: nothing was applied.
    pub unavailable: usize,
    /// `Error::StorageOutcomeUnknown`: a write may or may not have landed.
    pub outcome_unknown: usize,
    /// Any other error, by its message: never expected from `lock()` on a healthy setup.
    pub other: Vec<String>,
}

impl LockErrors {
    /// Counts one failed call.
    pub fn record(&mut self, error: &Error) {
        match error {
            Error::StorageUnavailable { .. } => self.unavailable += 1,
            Error::StorageOutcomeUnknown { .. } => self.outcome_unknown += 1,
            other => self.other.push(other.to_string()),
        }
    }

    /// Every failed call.
    pub fn total(&self) -> usize {
        self.unavailable + self.outcome_unknown + self.other.len()
    }

    /// Adds another run's counts.
    pub fn add(&mut self, other: &LockErrors) {
        self.unavailable += other.unavailable;
        self.outcome_unknown += other.outcome_unknown;
        self.other.extend(other.other.iter().cloned());
    }
}

/// A cell some replica still held live: `(replica, row kind, column)`.
pub type LiveCell = (usize, &'static str, String);

/// What happened in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Every acquisition, in the order they were asked for.
    pub acquisitions: Vec<Acquisition>,
    /// Every write the resource was asked to make.
    pub writes: Vec<ResourceWrite>,
    /// The `lock()` calls that failed (and were retried), by kind.
    pub lock_errors: LockErrors,
    /// Queue and main cells of the lock that some replica still held live once every
    /// contender had finished (and released) and no message was in flight any more.
    pub live_at_quiescence: Vec<LiveCell>,
    /// The same, a lease TTL (plus clock margins) later: whatever a fault left behind has
    /// expired by then, so anything still live is renewed by no one's right.
    pub live_after_ttl: Vec<LiveCell>,
    /// With the time service: each replica's `GlobalTime` value whenever a sample found it
    /// changed, as (time, replica, microseconds); sampled every
    /// [`GLOBAL_TIME_SAMPLE_EVERY`].
    pub global_time: Vec<(Duration, usize, u64)>,
    /// When the last contender finished (or `None` if the run got stuck).
    pub finished_at: Option<Duration>,
    /// The longest round trip of a successful request sent outside every disturbed window.
    pub max_round_trip: Duration,
    /// Per contender, every request its gate saw complete, as (sent, answered) since the
    /// start, for the determinism check.
    pub request_times: Vec<Vec<(Duration, Duration, Operation, bool)>>,
}

/// Plays `schedule` on a fresh paused current-thread runtime.
pub fn run(schedule: &Schedule) -> Run {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|error| panic!("cannot build a runtime: {error}"));
    runtime.block_on(simulate(schedule))
}

struct Participant {
    client: ClientId,
    gate: GateHandle,
    task: tokio::task::AbortHandle,
}

async fn simulate(schedule: &Schedule) -> Run {
    let cluster = MemoryCluster::new(ClusterConfig {
        replicas: schedule.replicas,
        replication_factor: 3.min(schedule.replicas),
        latency: schedule.latency.clone(),
        request_timeout: CLUSTER_TIMEOUT,
        replica_clocks: schedule.replica_clocks.clone(),
        seed: schedule.seed,
        ..ClusterConfig::default()
    })
    .unwrap_or_else(|error| panic!("bad cluster in {schedule:?}: {error}"));
    let recorder = Recorder::new();
    let resource = Arc::new(Mutex::new(FencedResource::default()));
    let errors = Arc::new(Mutex::new(LockErrors::default()));
    let global_time = Arc::new(Mutex::new(GlobalTimeSamples::default()));
    let sampler = schedule.time_service.then(|| {
        let (cluster, recorder, samples) = (cluster.clone(), recorder.clone(), global_time.clone());
        tokio::spawn(async move {
            loop {
                samples
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .sample(&cluster, recorder.now());
                tokio::time::sleep(GLOBAL_TIME_SAMPLE_EVERY).await;
            }
        })
    });
    let mut participants = Vec::new();
    let mut tasks = Vec::new();
    let mut services = Vec::new();
    for (index, plan) in schedule.contenders.iter().enumerate() {
        let client = cluster
            .client_with(ClientOptions {
                clock: plan.clock,
                ..ClientOptions::default()
            })
            .unwrap_or_else(|error| panic!("bad client clock {:?}: {error}", plan.clock));
        let (gate, handle) = Gate::logged(client.clone());
        let clock: Arc<dyn Clock> = if schedule.time_service {
            let service = TimeService::start(
                Arc::new(gate.clone()),
                client.clock(),
                time_service_config(),
            )
            .await
            .unwrap_or_else(|error| panic!("time service: {error}"));
            let clock = Arc::new(service.clock());
            services.push(service);
            clock
        } else {
            Arc::new(client.clock())
        };
        let builder = Locker::builder(gate)
            .config(lock_config_for(schedule))
            .clock(clock)
            .replay_owner_ids_unsafe(
                schedule
                    .seed
                    .wrapping_mul(0x9E37_79B9)
                    .wrapping_add(index as u64),
            );
        let builder = if schedule.wake_hints {
            builder.wake_hints(client.wake_hints())
        } else {
            builder
        };
        let locker = builder
            .build()
            .unwrap_or_else(|error| panic!("lock config: {error}"));
        let victim = (index == 0).then(|| schedule.victim.clone()).flatten();
        let task = tokio::spawn(contend(Contender {
            index,
            plan: plan.clone(),
            locker,
            gate: handle.clone(),
            recorder: recorder.clone(),
            resource: resource.clone(),
            errors: errors.clone(),
            victim,
        }));
        participants.push(Participant {
            client: client.id(),
            gate: handle,
            task: task.abort_handle(),
        });
        tasks.push(task);
    }
    let participants = Arc::new(participants);
    for fault in &schedule.faults {
        tokio::spawn(inject(
            fault.clone(),
            cluster.clone(),
            participants.clone(),
            recorder.clone(),
            schedule.latency.clone(),
        ));
    }
    if let Some(jump) = schedule.replica_jump.clone() {
        let (faults, replicas) = (cluster.faults(), schedule.replicas);
        tokio::spawn(async move {
            tokio::time::sleep(jump.at).await;
            for replica in &jump.replicas {
                let replica = ReplicaId(replica % replicas);
                let _ = faults.set_replica_clock(replica, ClockSkew::offset(jump.offset_micros));
            }
        });
    }
    let all = futures_join(tasks);
    let finished = tokio::time::timeout(RUN_LIMIT, all).await.is_ok();
    let finished_at = finished.then(|| recorder.now());
    drop(services);
    // Quiescence: every contender finished, and nothing is in flight any more.
    let settle = |cluster: MemoryCluster| async move {
        let _ = tokio::time::timeout(Duration::from_secs(60), cluster.settle()).await;
    };
    settle(cluster.clone()).await;
    let live_at_quiescence = live_lock_cells(&cluster);
    let config = lock_config();
    tokio::time::sleep(config.lease_ttl + config.max_clock_skew * 2 + Duration::from_secs(2)).await;
    settle(cluster.clone()).await;
    let live_after_ttl = live_lock_cells(&cluster);
    if let Some(sampler) = sampler {
        sampler.abort();
        global_time
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sample(&cluster, recorder.now());
    }
    let global_time = std::mem::take(
        &mut global_time
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .changes,
    );
    let mut acquisitions = recorder.acquisitions();
    let logs: Vec<Vec<RequestRecord>> = participants.iter().map(|p| p.gate.log()).collect();
    annotate_queue_writes(&mut acquisitions, &logs, &recorder);
    let windows = crate::bounds::disturbed_windows(schedule);
    let max_round_trip = logs
        .iter()
        .flatten()
        .filter(|record| record.ok)
        .filter(|record| {
            let sent = recorder.since_origin(record.sent);
            !windows.iter().any(|&(from, to)| from <= sent && sent <= to)
        })
        .map(|record| record.answered.saturating_duration_since(record.sent))
        .max()
        .unwrap_or_default();
    let request_times = logs
        .iter()
        .map(|log| {
            log.iter()
                .map(|record| {
                    (
                        recorder.since_origin(record.sent),
                        recorder.since_origin(record.answered),
                        record.operation,
                        record.ok,
                    )
                })
                .collect()
        })
        .collect();
    let writes = resource
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .log
        .clone();
    let lock_errors = errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    Run {
        acquisitions,
        writes,
        lock_errors,
        live_at_quiescence,
        live_after_ttl,
        global_time,
        finished_at,
        max_round_trip,
        request_times,
    }
}

/// Every queue and main cell of [`LOCK_ID`] that some replica holds live, judged by that
/// replica's own clock, as last-write-wins merges its versions.
fn live_lock_cells(cluster: &MemoryCluster) -> Vec<LiveCell> {
    let lock = LockId::new(LOCK_ID).unwrap_or_else(|_| unreachable!());
    let mut live = Vec::new();
    for replica in 0..cluster.config().replicas {
        let Ok(now) = cluster.replica_clock(ReplicaId(replica)) else {
            continue;
        };
        let second = now.as_micros() / 1_000_000;
        for kind in [RowKind::Queue, RowKind::Main] {
            let row = RowKey::new(kind, lock.clone());
            let Ok(versions) = cluster.replica_row(ReplicaId(replica), &row) else {
                continue;
            };
            let mut columns: Vec<_> = versions.iter().map(|(column, _)| column).collect();
            columns.dedup();
            for column in columns {
                let of_column = versions.iter().filter(|(c, _)| c == column);
                let Some(newest) = of_column.clone().map(|(_, v)| v.timestamp).max() else {
                    continue;
                };
                // A tombstone wins a tie, as in Cassandra.
                let alive = of_column
                    .filter(|(_, version)| version.timestamp == newest)
                    .all(|(_, version)| version.is_live_at(second));
                if alive {
                    live.push((replica, kind.as_str(), column.as_str().to_owned()));
                }
            }
        }
    }
    live
}

/// The `GlobalTime` value of every replica, noted whenever it changes.
#[derive(Default)]
struct GlobalTimeSamples {
    last: BTreeMap<usize, u64>,
    changes: Vec<(Duration, usize, u64)>,
}

impl GlobalTimeSamples {
    fn sample(&mut self, cluster: &MemoryCluster, at: Duration) {
        let domain = time_service_config().domain;
        let row = RowKey::new(RowKind::GlobalTime, domain);
        for replica in 0..cluster.config().replicas {
            let Ok(versions) = cluster.replica_row(ReplicaId(replica), &row) else {
                continue;
            };
            let value = versions
                .iter()
                .filter(|(column, _)| column.as_str() == UpdateGlobalTime::COLUMN)
                .max_by_key(|(_, version)| version.timestamp)
                .and_then(|(_, version)| match &version.state {
                    CellState::Live { value, .. } => UpdateGlobalTime::decode(value),
                    CellState::Tombstone { .. } => None,
                })
                .map(|time| time.as_micros());
            if let Some(value) = value
                && self.last.insert(replica, value) != Some(value)
            {
                self.changes.push((at, replica, value));
            }
        }
    }
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        // A crashed contender's task was aborted: that is part of the schedule.
        let _ = task.await;
    }
}

/// Fills in, for each granted acquisition, when its queue cell was first acknowledged and
/// whether it may have expired while the acquisition waited, for the queue cell it was
/// granted with: the last one its call wrote. A call whose first queue write was
/// acknowledged more than `request_timeout` after the time in the cell's name deletes that
/// cell and enqueues again under the current time (lock-core's `Acquire`, on tombstones);
/// its enqueue is then dated at the acknowledgement of that delete, when the new cell's time
/// was taken.
fn annotate_queue_writes(
    acquisitions: &mut [Acquisition],
    logs: &[Vec<RequestRecord>],
    recorder: &Recorder,
) {
    // A waiter's queue cell lives at least the waiter TTL's effective life after a write
    // was sent (`min(waiter_ttl, lease_ttl) - 1 s - max_clock_skew`).
    let effective_life = lock_config()
        .validate()
        .map(|valid| valid.waiter_effective())
        .unwrap_or_default();
    for acquisition in acquisitions.iter_mut() {
        let (Some(owner), Some(granted)) = (&acquisition.owner, acquisition.granted) else {
            continue;
        };
        // Successful requests on this call's queue cells, sent by the grant.
        let ours: Vec<&RequestRecord> = logs[acquisition.contender]
            .iter()
            .filter(|record| {
                record.ok
                    && record.row == lock_core::storage::RowKind::Queue
                    && recorder.since_origin(record.sent) <= granted
                    && record
                        .column
                        .as_ref()
                        .is_some_and(|column| column.as_str().ends_with(owner.as_str()))
            })
            .collect();
        let held = ours
            .iter()
            .rev()
            .find(|record| record.operation == Operation::Write)
            .and_then(|record| record.column.clone());
        let writes: Vec<(Duration, Duration)> = ours
            .iter()
            .filter(|record| record.operation == Operation::Write && record.column == held)
            .map(|record| {
                (
                    recorder.since_origin(record.sent),
                    recorder.since_origin(record.answered),
                )
            })
            .collect();
        if let Some(&(first_sent, _)) = writes.first() {
            let requeued = ours
                .iter()
                .filter(|record| record.operation == Operation::Delete && record.column != held)
                .map(|record| recorder.since_origin(record.answered))
                .filter(|&answered| answered <= first_sent)
                .max();
            if let Some(requeued) = requeued {
                acquisition.enqueued = acquisition.enqueued.max(requeued);
            }
        }
        acquisition.queue_visible = writes.first().map(|&(_, answered)| answered);
        let mut previous = None;
        for &(sent, _) in &writes {
            if previous.is_some_and(|before: Duration| sent.saturating_sub(before) > effective_life)
            {
                acquisition.queue_gap = true;
            }
            previous = Some(sent);
        }
        if previous.is_none_or(|last| granted.saturating_sub(last) > effective_life) {
            acquisition.queue_gap = true;
        }
    }
}

struct Contender {
    index: usize,
    plan: ContenderPlan,
    locker: Locker<Gate<MemoryClient>>,
    gate: GateHandle,
    recorder: Arc<Recorder>,
    resource: Arc<Mutex<FencedResource>>,
    errors: Arc<Mutex<LockErrors>>,
    victim: Option<Victim>,
}

async fn contend(contender: Contender) {
    let Contender {
        index,
        plan,
        locker,
        gate,
        recorder,
        resource,
        errors,
        victim,
    } = contender;
    tokio::time::sleep(plan.start).await;
    for (round, &section) in plan.sections.iter().enumerate() {
        let victim = victim.as_ref().filter(|_| round == 0);
        let id = recorder.request(index, round, victim.is_none());
        let guard = loop {
            recorder.attempt(id);
            match locker.lock(LOCK_ID).await {
                Ok(guard) => break guard,
                Err(error) => {
                    errors
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .record(&error);
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        };
        let guard = Arc::new(guard);
        recorder.granted(id, &guard);
        let watcher = {
            let (lost, recorder) = (guard.lost(), recorder.clone());
            tokio::spawn(async move {
                lost.await;
                recorder.lost(id);
            })
        };
        if let Some(victim) = victim {
            let (gate, victim) = (gate.clone(), victim.clone());
            tokio::spawn(async move {
                tokio::time::sleep(victim.pause_after).await;
                gate.set(GateMode::Paused);
                tokio::time::sleep(victim.pause).await;
                gate.set(GateMode::Open);
            });
        }
        critical_section(id, &guard, section, victim.is_none(), &recorder, &resource).await;
        recorder.left(id);
        if let Ok(guard) = Arc::try_unwrap(guard) {
            // An error here is the lease that was lost, or a storage fault: the cells then
            // expire after the TTL, which the bounds account for.
            let _ = guard.release().await;
        }
        watcher.abort();
        tokio::time::sleep(plan.think).await;
    }
    // As a process about to exit: a lock still lingering is released now.
    let _ = locker.release_lingering().await;
}

async fn critical_section(
    id: AcqId,
    guard: &LockGuard,
    section: Duration,
    honours_lost: bool,
    recorder: &Recorder,
    resource: &Mutex<FencedResource>,
) {
    let token = guard.fencing_token().map_or(0, |token| token.get());
    let work = async {
        loop {
            resource
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write(recorder.now(), id, token);
            tokio::time::sleep(WRITE_EVERY).await;
        }
    };
    let lost = async {
        if honours_lost {
            guard.lost().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        biased;
        () = lost => {}
        () = tokio::time::sleep(section) => {}
        () = work => {}
    }
}

async fn inject(
    fault: Fault,
    cluster: MemoryCluster,
    participants: Arc<Vec<Participant>>,
    recorder: Arc<Recorder>,
    latency: Latency,
) {
    let faults = cluster.faults();
    let replicas = cluster.config().replicas;
    let contenders = participants.len();
    tokio::time::sleep(fault.at).await;
    // Faults that cannot be applied (an index out of range) are ignored: the generators
    // take indices modulo the sizes, so this does not happen.
    match &fault.kind {
        FaultKind::StopReplica(replica) => {
            let replica = ReplicaId(replica % replicas);
            let _ = faults.stop_replica(replica);
            tokio::time::sleep(fault.duration).await;
            let _ = faults.start_replica(replica);
        }
        FaultKind::Partition { contender, replica } => {
            let client = participants[contender % contenders].client;
            let replica = ReplicaId(replica % replicas);
            let _ = faults.partition(client, replica);
            tokio::time::sleep(fault.duration).await;
            let _ = faults.heal(client, replica);
        }
        FaultKind::Latency(spike) => {
            let _ = faults.set_latency(spike.clone());
            tokio::time::sleep(fault.duration).await;
            let _ = faults.set_latency(latency);
        }
        FaultKind::RequestTimeout(timeout) => {
            let _ = faults.set_request_timeout(*timeout);
            tokio::time::sleep(fault.duration).await;
            let _ = faults.set_request_timeout(CLUSTER_TIMEOUT);
        }
        FaultKind::Pause(contender) => {
            let gate = &participants[contender % contenders].gate;
            if gate.mode() == GateMode::Open {
                gate.set(GateMode::Paused);
                tokio::time::sleep(fault.duration).await;
                if gate.mode() == GateMode::Paused {
                    gate.set(GateMode::Open);
                }
            }
        }
        FaultKind::Crash(contender) => {
            let index = contender % contenders;
            let participant = &participants[index];
            participant.gate.set(GateMode::Crashed);
            participant.task.abort();
            recorder.crashed(index);
        }
    }
}
