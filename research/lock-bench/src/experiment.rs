//! The thesis's experiment: P processes take one lock N times each with the mandatory lock,
//! one run per algorithm and process count, on a simulated cluster or on Cassandra.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::timeline::Timeline;
use fair_lock::{Clock, Locker, SystemClock};
use fair_lock::{LockMetrics, RequestKind, UdpWakeHints, WakeHintTransport};
use lock_core::storage::{CellDelete, CellWrite, RowKey, RowKind, RowRead, Ttl};
use lock_core::{Algorithm, ColumnName, Error, LockConfig, LockId, LockStorage, MonotonicTime};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};
use lock_storage_memory::{ClusterConfig, MemoryClient, MemoryCluster};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::BoxError;
use crate::handoff::{HandoffBreakdown, Recorded, RequestLog};
use crate::progress::{Mode, RunProgress};

/// Where the processes take their locks.
#[derive(Clone, Debug)]
pub enum Backend {
    /// A fresh simulated cluster per run; every process gets its own client and clock.
    Simulated(ClusterConfig),
    /// A real Cassandra or ScyllaDB cluster; every process gets its own session.
    Cassandra(Box<CassandraConfig>),
}

impl Backend {
    /// A new [`Timeline`] for a run on this backend: dilated by the simulated cluster's
    /// timer dilation, at Tokio's pace on a real cluster.
    pub fn timeline(&self) -> Timeline {
        match self {
            Backend::Simulated(config) => Timeline::dilated(config.timer_dilation),
            Backend::Cassandra(_) => Timeline::start(),
        }
    }

    /// Readies a simulated cluster for a run on the wall clock (`--real-time`): there its
    /// timer dilation would make simulated time pass a thousand times slower than the
    /// wall's, so it runs at Tokio's pace, on Tokio's millisecond timer.
    pub fn for_wall_clock(mut self) -> Self {
        if let Backend::Simulated(config) = &mut self {
            config.timer_dilation = 1;
        }
        self
    }

    /// A short description for reports.
    pub fn describe(&self) -> String {
        match self {
            Backend::Simulated(config) => format!(
                "simulated cluster: {} replicas, RF {}, QUORUM, one-way latency {}, gc_grace {} s",
                config.replicas,
                config.replication_factor,
                crate::units::describe_latency(&config.latency),
                config.gc_grace.as_secs()
            ),
            Backend::Cassandra(config) => format!(
                "Cassandra at {} (keyspace {}, table {}, {:?})",
                config.contact_points.join(","),
                config.keyspace,
                config.table,
                config.consistency
            ),
        }
    }
}

/// What every run shares.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Acquisitions per process.
    pub acquisitions: u32,
    /// How long a process holds the lock before releasing it.
    pub critical_section: Duration,
    /// How long a process pauses after a release before asking again.
    pub pause: Duration,
    /// The seed every run's seeds derive from.
    pub seed: u64,
    /// The lock id; each run uses `<lock_id>-<algorithm>-p<P>` so runs never share rows.
    pub lock_id: String,
    /// The lock configuration; each run sets `algorithm` and `fencing` (and, for the
    /// bakery, each process its `bakery.client_id` out of `bakery.max_clients = P`).
    pub lock: LockConfig,
    /// Print progress lines on stderr.
    pub progress: bool,
    /// Log every request of each run to split its hand-offs into stages
    /// ([`crate::handoff`]).
    pub handoffs: bool,
    /// Give every locker a wake-up hint transport (lock-core's `LockerBuilder::wake_hints`):
    /// the simulated cluster's, or a UDP socket on loopback with Cassandra.
    pub wake_hints: bool,
}

/// Which algorithm a run uses, and whether with fencing tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Variant {
    /// The algorithm.
    #[serde(serialize_with = "serialize_algorithm")]
    pub algorithm: Algorithm,
    /// Whether each acquisition takes a fencing token (queue algorithm only).
    pub fencing: bool,
}

fn serialize_algorithm<S: serde::Serializer>(
    algorithm: &Algorithm,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(algorithm_name(*algorithm))
}

/// `queue`, `baseline`, `combined` or `bakery`.
pub fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::Queue => "queue",
        Algorithm::Baseline => "baseline",
        Algorithm::Combined => "combined",
        Algorithm::Bakery => "bakery",
    }
}

impl Variant {
    /// The thesis's new algorithm, without fencing (as in the thesis).
    pub const QUEUE: Variant = Variant {
        algorithm: Algorithm::Queue,
        fencing: false,
    };
    /// The thesis's old algorithm.
    pub const BASELINE: Variant = Variant {
        algorithm: Algorithm::Baseline,
        fencing: false,
    };
    /// The new algorithm with lock-core's default fencing tokens.
    pub const QUEUE_FENCED: Variant = Variant {
        algorithm: Algorithm::Queue,
        fencing: true,
    };
    /// The Cassandra wiki's bakery lock, with our lease: a third point of
    /// comparison. Each process of a run is one bakery client, ids `1..=P`.
    pub const BAKERY: Variant = Variant {
        algorithm: Algorithm::Bakery,
        fencing: false,
    };

    /// A label such as `queue`, `queue+fencing` or `baseline`.
    pub fn label(self) -> String {
        let name = algorithm_name(self.algorithm);
        if self.fencing && self.algorithm == Algorithm::Queue {
            format!("{name}+fencing")
        } else {
            name.to_owned()
        }
    }
}

/// One run: a variant and a process count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RunSpec {
    /// The algorithm.
    pub variant: Variant,
    /// How many processes contend.
    pub processes: usize,
}

/// One completed acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Acquisition {
    /// Which process (0-based).
    pub process: usize,
    /// Its acquisition number within the process (1-based): the figures' x.
    pub number: u32,
    /// When it completed, since the run started: the figures' y.
    pub acquired_at: Duration,
    /// How long `lock()` took (the guard's `wait()`).
    pub wait: Duration,
    /// Storage requests the acquisition itself made (the guard's `stats().requests`).
    pub requests: u32,
    /// Times a short queue margin hid this acquisition's queue cell from an owner that
    /// passed it, so that it joined the queue again (the guard's `stats().rejoins`; 0 for
    /// other locks).
    pub rejoins: u32,
}

/// Storage requests the lockers made, as their metrics saw them.
#[derive(Debug, Default)]
pub struct RequestTally {
    reads: AtomicU64,
    writes: AtomicU64,
    deletes: AtomicU64,
    failed: AtomicU64,
    read_micros: AtomicU64,
    write_micros: AtomicU64,
    delete_micros: AtomicU64,
}

/// A snapshot of a [`RequestTally`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounts {
    /// Row reads.
    pub reads: u64,
    /// Cell writes.
    pub writes: u64,
    /// Cell deletes.
    pub deletes: u64,
    /// Requests that failed.
    pub failed: u64,
    /// The reads' round trips added up, in microseconds, as the lockers timed them (sent
    /// to answered, under the run's own load).
    pub read_micros: u64,
    /// The same for the writes.
    pub write_micros: u64,
    /// The same for the deletes.
    pub delete_micros: u64,
}

impl RequestCounts {
    /// Every request.
    pub fn total(&self) -> u64 {
        self.reads + self.writes + self.deletes
    }

    /// The requests' mean round trip, if there were any.
    pub fn mean_round_trip(&self) -> Option<Duration> {
        let total = self.read_micros + self.write_micros + self.delete_micros;
        Some(Duration::from_micros(total.checked_div(self.total())?))
    }

    /// The mean round trip of reads, writes and deletes, each if there were any.
    pub fn mean_round_trips(&self) -> [Option<Duration>; 3] {
        [
            (self.read_micros, self.reads),
            (self.write_micros, self.writes),
            (self.delete_micros, self.deletes),
        ]
        .map(|(micros, count)| micros.checked_div(count).map(Duration::from_micros))
    }
}

impl RequestTally {
    /// The counts so far.
    pub fn counts(&self) -> RequestCounts {
        RequestCounts {
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            deletes: self.deletes.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            read_micros: self.read_micros.load(Ordering::Relaxed),
            write_micros: self.write_micros.load(Ordering::Relaxed),
            delete_micros: self.delete_micros.load(Ordering::Relaxed),
        }
    }
}

impl LockMetrics for RequestTally {
    fn storage_request(&self, kind: RequestKind, latency: Duration, error: Option<&Error>) {
        let (counter, micros) = match kind {
            RequestKind::Read => (&self.reads, &self.read_micros),
            RequestKind::Write => (&self.writes, &self.write_micros),
            RequestKind::Delete => (&self.deletes, &self.delete_micros),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        micros.fetch_add(
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        if error.is_some() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the simulated cluster itself counted during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClusterTally {
    /// Requests the cluster served.
    pub requests: u64,
    /// Reads among them.
    pub reads: u64,
    /// Dead cells (tombstones, expired cells) the replicas stepped over while reading.
    pub dead_cells_scanned: u64,
    /// Reads that met replicas answering differently and waited for the blocking read
    /// repair (Cassandra's `Mismatch (Blocking)` in `nodetool netstats`).
    pub repaired_reads: u64,
}

/// Everything one run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// What ran.
    pub spec: RunSpec,
    /// Every acquisition, in completion order.
    pub acquisitions: Vec<Acquisition>,
    /// From the start until the last process finished its last release.
    pub duration: Duration,
    /// Requests the lockers made (acquisitions, releases, lease renewals).
    pub requests: RequestCounts,
    /// What the simulated cluster counted (none on Cassandra).
    pub cluster: Option<ClusterTally>,
    /// Times a process got the lock while another process held it (must be 0).
    pub exclusion_violations: u64,
    /// Where the hand-offs' time went, if the run logged its requests
    /// ([`Settings::handoffs`]).
    #[serde(skip)]
    pub handoffs: Option<HandoffBreakdown>,
    /// Wall-clock time the run took to compute.
    pub wall_time: Duration,
}

/// The measured storage round trip: the mean time of uncontended requests on a fresh
/// row, as a process sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RoundTrip {
    /// How many requests of each kind were timed.
    pub samples: u32,
    /// Mean time of a QUORUM write.
    pub write: Duration,
    /// Mean time of a QUORUM read.
    pub read: Duration,
    /// Mean time of a QUORUM delete.
    pub delete: Duration,
}

impl RoundTrip {
    /// `r`: the mean of the three.
    pub fn r(&self) -> Duration {
        (self.write + self.read + self.delete) / 3
    }

    /// The hand-off floor of the queue algorithm without fencing: the holder's release
    /// (a delete), then the next owner's main-row write and read.
    pub fn handoff_floor(&self) -> Duration {
        self.delete + self.write + self.read
    }
}

/// A deterministic 64-bit mix (SplitMix64's finaliser), to derive seeds.
pub fn mix(seed: u64, salt: u64) -> u64 {
    let mut z = seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn run_seed(seed: u64, spec: RunSpec) -> u64 {
    let algorithm = match spec.variant.algorithm {
        Algorithm::Queue => 1,
        Algorithm::Baseline => 2,
        Algorithm::Combined => 3,
        Algorithm::Bakery => 4,
    };
    mix(
        seed,
        algorithm * 1000 + u64::from(spec.variant.fencing) * 100 + spec.processes as u64,
    )
}

impl Settings {
    /// The lockers of `spec`'s run: one per process, each configured by
    /// [`Settings::lock_config`], seeded from `seed`, counting in `tally`, noting each
    /// request in `log`, if given, and with wake-up hints if the settings ask for them.
    fn locker_setup<'a>(
        &'a self,
        spec: RunSpec,
        seed: u64,
        tally: &'a Arc<RequestTally>,
        log: Option<&'a Arc<RequestLog>>,
    ) -> LockerSetup<'a, impl Fn(usize) -> LockConfig + 'a> {
        LockerSetup {
            log,
            wake_hints: self.wake_hints,
            ..LockerSetup::new(
                spec.processes,
                move |process| self.lock_config(spec, process),
                seed,
                tally,
            )
        }
    }

    /// The configuration of process `process` (from 0) of `spec`'s run: the bakery gives
    /// each process its own client id out of `P`.
    fn lock_config(&self, spec: RunSpec, process: usize) -> LockConfig {
        let mut bakery = self.lock.bakery.clone();
        if spec.variant.algorithm == Algorithm::Bakery {
            bakery.max_clients = u32::try_from(spec.processes).unwrap_or(u32::MAX);
            bakery.client_id = u32::try_from(process + 1).unwrap_or(u32::MAX);
        }
        LockConfig {
            algorithm: spec.variant.algorithm,
            fencing: spec.variant.fencing,
            bakery,
            ..self.lock.clone()
        }
    }

    fn run_lock_id(&self, spec: RunSpec) -> Result<LockId, Error> {
        LockId::new(format!(
            "{}-{}-p{}",
            self.lock_id,
            spec.variant.label(),
            spec.processes
        ))
    }
}

/// Measures `r` on `backend` with `samples` uncontended write, read and delete requests.
pub async fn measure_round_trip(
    backend: &Backend,
    settings: &Settings,
    samples: u32,
) -> Result<RoundTrip, BoxError> {
    match backend {
        Backend::Simulated(config) => {
            let cluster = MemoryCluster::new(ClusterConfig {
                seed: mix(settings.seed, 0x005E_ED0F_0001),
                ..config.clone()
            })?;
            let client = cluster.client();
            let clock = client.clock();
            time_requests(&client, &clock, settings, samples).await
        }
        Backend::Cassandra(config) => {
            let storage = CassandraStorage::connect((**config).clone()).await?;
            time_requests(&storage, &SystemClock::new(), settings, samples).await
        }
    }
}

async fn time_requests<S: LockStorage>(
    storage: &S,
    clock: &dyn Clock,
    settings: &Settings,
    samples: u32,
) -> Result<RoundTrip, BoxError> {
    let probe = RoundTripProbe::new(settings)?;
    let (mut write, mut read, mut delete) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..samples {
        let timed = probe.once(storage, clock).await?;
        write += timed.write;
        read += timed.read;
        delete += timed.delete;
    }
    let samples = samples.max(1);
    Ok(RoundTrip {
        samples,
        write: write / samples,
        read: read / samples,
        delete: delete / samples,
    })
}

/// One uncontended write, read and delete of a probe cell: what a round trip is timed by.
#[derive(Clone, Debug)]
pub struct RoundTripProbe {
    row: RowKey,
    column: ColumnName,
    ttl: Ttl,
}

/// How long each request of one [`RoundTripProbe::once`] took.
#[derive(Clone, Copy, Debug)]
pub struct ProbeTimes {
    /// The write of the probe cell.
    pub write: Duration,
    /// The read of the first two cells of its row.
    pub read: Duration,
    /// The delete of the probe cell.
    pub delete: Duration,
}

impl RoundTripProbe {
    /// A probe cell in a row of its own, next to the experiment's lock.
    pub fn new(settings: &Settings) -> Result<Self, BoxError> {
        Ok(RoundTripProbe {
            row: RowKey::new(
                RowKind::Main,
                LockId::new(format!("{}-round-trip-probe", settings.lock_id))?,
            ),
            column: ColumnName::new("lock-bench-probe"),
            ttl: Ttl::from_duration(settings.lock.lease_ttl)?,
        })
    }

    /// Writes, reads and deletes the probe cell once on `storage`, timing each request.
    pub async fn once<S: LockStorage>(
        &self,
        storage: &S,
        clock: &dyn Clock,
    ) -> Result<ProbeTimes, BoxError> {
        let started = clock.now();
        let timestamp = started.timestamp;
        let started = started.instant;
        storage
            .write_cell(CellWrite {
                row: self.row.clone(),
                column: self.column.clone(),
                value: Vec::new(),
                timestamp,
                ttl: Some(self.ttl),
            })
            .await?;
        let since = |started: MonotonicTime| clock.now().instant.saturating_duration_since(started);
        let write = since(started);
        let started = clock.now().instant;
        storage
            .read_row(RowRead::first(self.row.clone(), 2))
            .await?;
        let read = since(started);
        let started = clock.now().instant;
        storage
            .delete_cell(CellDelete {
                row: self.row.clone(),
                column: self.column.clone(),
                timestamp: timestamp.next(),
            })
            .await?;
        Ok(ProbeTimes {
            write,
            read,
            delete: since(started),
        })
    }
}

/// Runs every spec in turn on `backend`, noting
/// each as it finishes (unless `settings.progress` is off) under a label that starts with
/// `prefix`, such as `real `.
pub async fn run_all(
    backend: &Backend,
    settings: &Settings,
    specs: &[RunSpec],
    prefix: &str,
) -> Result<Vec<RunResult>, BoxError> {
    let mut runs = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        let label = format!(
            "{prefix}[{}/{}] {} P={}",
            index + 1,
            specs.len(),
            spec.variant.label(),
            spec.processes
        );
        let run = run(backend, settings, *spec, &label).await?;
        if settings.progress {
            crate::note(&format!(
                "{label}: done, {:.1} s of run time in {:.1} s wall",
                run.duration.as_secs_f64(),
                run.wall_time.as_secs_f64()
            ));
        }
        runs.push(run);
    }
    Ok(runs)
}

/// Runs one experiment run on `backend`.
pub async fn run(
    backend: &Backend,
    settings: &Settings,
    spec: RunSpec,
    label: &str,
) -> Result<RunResult, BoxError> {
    Ok(run_sampled(backend, settings, spec, label, 0).await?.0)
}

/// What a run looked like after its first `acquisitions` acquisitions (see [`run_sampled`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Acquisitions completed by all processes (each followed by its release).
    pub acquisitions: u64,
    /// Run time since the start.
    pub at: Duration,
    /// Wall-clock time since the start.
    pub wall: Duration,
    /// Storage requests the lockers made so far (acquisitions, releases, renewals).
    pub requests: u64,
    /// Reads the simulated cluster served so far (0 on Cassandra).
    pub reads: u64,
    /// Dead cells the simulated replicas stepped over while reading so far (0 on Cassandra).
    pub dead_cells_scanned: u64,
    /// Dead cells (tombstones, expired values) replica 0 stores in the lock's queue, main
    /// and shadow rows now (0 on Cassandra).
    pub stored_dead_cells: u64,
}

/// Runs one experiment run on `backend`, sampling the counters after every `every`-th
/// acquisition and after the last (counted over all processes; `0` for no samples). The
/// samples start with one taken before the first acquisition.
pub async fn run_sampled(
    backend: &Backend,
    settings: &Settings,
    spec: RunSpec,
    label: &str,
    every: u64,
) -> Result<(RunResult, Vec<Sample>), BoxError> {
    let seed = run_seed(settings.seed, spec);
    let tally = Arc::new(RequestTally::default());
    let timeline = backend.timeline();
    let log = settings
        .handoffs
        .then(|| Arc::new(RequestLog::new(spec.processes, timeline)));
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut result = match backend {
        Backend::Simulated(cluster_config) => {
            let cluster = MemoryCluster::new(ClusterConfig {
                seed,
                ..cluster_config.clone()
            })?;
            let lockers = simulated_lockers(
                &cluster,
                settings.locker_setup(spec, seed, &tally, log.as_ref()),
            )?;
            let before = cluster.counters();
            let sampler = Sampler {
                origin: timeline,
                wall_origin: std::time::Instant::now(),
                tally: tally.clone(),
                cluster: Some((cluster.clone(), before.clone(), settings.run_lock_id(spec)?)),
                samples: samples.clone(),
                progress: settings.progress.then(|| label.to_owned()),
            };
            let checkpoint = sampler.checkpoint(every);
            let mut result =
                contend(lockers, settings, spec, tally, label, checkpoint, timeline).await?;
            let after = cluster.counters();
            result.cluster = Some(ClusterTally {
                requests: after.requests.total() - before.requests.total(),
                reads: after.requests.reads - before.requests.reads,
                dead_cells_scanned: after.dead_cells_scanned - before.dead_cells_scanned,
                repaired_reads: after.repaired_reads - before.repaired_reads,
            });
            result
        }
        Backend::Cassandra(cassandra_config) => {
            let setup = settings.locker_setup(spec, seed, &tally, log.as_ref());
            let lockers = cassandra_lockers(cassandra_config, setup).await?;
            let sampler = Sampler {
                origin: timeline,
                wall_origin: std::time::Instant::now(),
                tally: tally.clone(),
                cluster: None,
                samples: samples.clone(),
                progress: settings.progress.then(|| label.to_owned()),
            };
            let checkpoint = sampler.checkpoint(every);
            contend(lockers, settings, spec, tally, label, checkpoint, timeline).await?
        }
    };
    result.handoffs = log.map(|log| log.breakdown());
    Ok((result, take_samples(&samples)))
}

/// What every locker of a run shares: how many there are (one per process), how each is
/// configured (`config_of(process)`), the seed each one's is mixed from, the tally that
/// counts their requests, the log that notes each request, if any, and whether they take
/// wake-up hints.
pub struct LockerSetup<'a, F> {
    /// Lockers, one per process.
    pub processes: usize,
    /// The configuration of the locker of each process.
    pub config_of: F,
    /// The run's seed; each locker's is mixed from it and its process.
    pub seed: u64,
    /// Counts every locker's requests.
    pub tally: &'a Arc<RequestTally>,
    /// Notes every request, for the hand-off split.
    pub log: Option<&'a Arc<RequestLog>>,
    /// Whether the lockers take wake-up hints.
    pub wake_hints: bool,
}

impl<'a, F: Fn(usize) -> LockConfig> LockerSetup<'a, F> {
    /// `processes` lockers configured by `config_of`, seeded from `seed`, counting in
    /// `tally`; no request log, no wake-up hints.
    pub fn new(processes: usize, config_of: F, seed: u64, tally: &'a Arc<RequestTally>) -> Self {
        LockerSetup {
            processes,
            config_of,
            seed,
            tally,
            log: None,
            wake_hints: false,
        }
    }
}

/// One locker per process on `cluster`, each on a client and clock of its own, as `setup`
/// says; with wake-up hints, the client's own.
pub fn simulated_lockers<F: Fn(usize) -> LockConfig>(
    cluster: &MemoryCluster,
    setup: LockerSetup<'_, F>,
) -> Result<Vec<Locker<Recorded<MemoryClient>>>, BoxError> {
    let mut lockers = Vec::with_capacity(setup.processes);
    for process in 0..setup.processes {
        let client = cluster.client();
        let clock: Arc<dyn Clock> = Arc::new(client.clock());
        let hints = setup
            .wake_hints
            .then(|| client.wake_hints() as Arc<dyn WakeHintTransport>);
        let builder = Locker::builder(Recorded::new(client, setup.log, process))
            .config((setup.config_of)(process))
            .clock(clock)
            .replay_owner_ids_unsafe(mix(setup.seed, process as u64 + 1))
            .metrics(setup.tally.clone());
        lockers.push(with_hints(builder, hints).build()?);
    }
    Ok(lockers)
}

/// `builder` with the wake-up hint transport `hints`, if there is one.
fn with_hints<S: lock_core::LockStorage>(
    builder: fair_lock::LockerBuilder<S>,
    hints: Option<Arc<dyn WakeHintTransport>>,
) -> fair_lock::LockerBuilder<S> {
    match hints {
        Some(hints) => builder.wake_hints(hints),
        None => builder,
    }
}

/// One locker per process on the cluster `cassandra`, each with a session of its own, as
/// `setup` says (each configuration checked against the backend first); with wake-up
/// hints, on a UDP socket of its own on loopback.
pub async fn cassandra_lockers<F: Fn(usize) -> LockConfig>(
    cassandra: &CassandraConfig,
    setup: LockerSetup<'_, F>,
) -> Result<Vec<Locker<Recorded<CassandraStorage>>>, BoxError> {
    let mut lockers = Vec::with_capacity(setup.processes);
    for process in 0..setup.processes {
        let config = (setup.config_of)(process);
        cassandra.check_lock_config(&config)?;
        let storage = CassandraStorage::connect(cassandra.clone()).await?;
        let hints: Option<Arc<dyn WakeHintTransport>> = if setup.wake_hints {
            let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
            Some(Arc::new(UdpWakeHints::bind(loopback, None).await?))
        } else {
            None
        };
        let builder = Locker::builder(Recorded::new(storage, setup.log, process))
            .config(config)
            .seed(mix(setup.seed, process as u64 + 1))
            .metrics(setup.tally.clone());
        lockers.push(with_hints(builder, hints).build()?);
    }
    Ok(lockers)
}

fn take_samples(samples: &std::sync::Mutex<Vec<Sample>>) -> Vec<Sample> {
    std::mem::take(
        &mut *samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// Takes [`Sample`]s during a run.
struct Sampler {
    origin: Timeline,
    wall_origin: std::time::Instant,
    tally: Arc<RequestTally>,
    /// The simulated cluster, its counters before the run, and the run's lock.
    cluster: Option<(MemoryCluster, lock_storage_memory::Counters, LockId)>,
    samples: Arc<std::sync::Mutex<Vec<Sample>>>,
    /// The run's label, to show a line per window on stderr; `None` for quiet.
    progress: Option<String>,
}

impl Sampler {
    fn sample(&self, acquisitions: u64) -> Sample {
        let mut sample = Sample {
            acquisitions,
            at: self.origin.elapsed(),
            wall: self.wall_origin.elapsed(),
            requests: self.tally.counts().total(),
            ..Sample::default()
        };
        if let Some((cluster, before, lock_id)) = &self.cluster {
            let counters = cluster.counters();
            sample.reads = counters.requests.reads - before.requests.reads;
            sample.dead_cells_scanned = counters.dead_cells_scanned - before.dead_cells_scanned;
            let replica = lock_storage_memory::ReplicaId(0);
            let second = cluster
                .replica_clock(replica)
                .map_or(0, |clock| clock.as_micros() / 1_000_000);
            for kind in [RowKind::Queue, RowKind::Main, RowKind::Shadow] {
                let row = RowKey::new(kind, lock_id.clone());
                let stored = cluster.replica_row(replica, &row).unwrap_or_default();
                sample.stored_dead_cells += stored
                    .iter()
                    .filter(|(_, version)| !version.is_live_at(second))
                    .count() as u64;
            }
        }
        sample
    }

    /// Records a first sample now and returns the checkpoint that records the others.
    fn checkpoint(self, every: u64) -> Option<Checkpoint> {
        if every == 0 {
            return None;
        }
        let first = self.sample(0);
        self.samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(first);
        let sampler = Arc::new(self);
        Some(Checkpoint {
            every,
            callback: Arc::new(move |done| {
                let sample = sampler.sample(done);
                let mut samples = sampler
                    .samples
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let line = match (&sampler.progress, samples.last()) {
                    (Some(label), Some(previous)) => {
                        let count = sample
                            .acquisitions
                            .saturating_sub(previous.acquisitions)
                            .max(1);
                        let per = |value: u64| value as f64 / count as f64;
                        Some(format!(
                            "  {label}: acquisitions {}-{}: {:.3} ms/acq, {:.2} req/acq, {:.1} \
                             dead cells per read, {} stored; {:.1} s wall",
                            previous.acquisitions + 1,
                            sample.acquisitions,
                            crate::units::ms(sample.at.saturating_sub(previous.at)) / count as f64,
                            per(sample.requests - previous.requests),
                            (sample.dead_cells_scanned - previous.dead_cells_scanned) as f64
                                / (sample.reads - previous.reads).max(1) as f64,
                            sample.stored_dead_cells,
                            sample.wall.saturating_sub(previous.wall).as_secs_f64()
                        ))
                    }
                    _ => None,
                };
                samples.push(sample);
                line
            }),
        })
    }
}

/// A callback run after every `every`-th acquisition of a run and after the last (counted
/// over all processes, after the release), with the count so far: for measurements taken
/// during a run. It may return a line to show with the run's progress on stderr.
#[derive(Clone)]
pub struct Checkpoint {
    /// How many acquisitions apart the callback runs.
    pub every: u64,
    /// The callback.
    pub callback: Arc<dyn Fn(u64) -> Option<String> + Send + Sync>,
}

/// A run's progress on stderr, and its checkpoint.
struct Progress {
    view: RunProgress,
    checkpoint: Option<Checkpoint>,
}

impl Progress {
    /// Counts one more completed acquisition, runs the checkpoint when it is due (showing
    /// the line it returns), then shows the progress.
    fn tick(&self) {
        let done = self.view.count();
        if let Some(checkpoint) = &self.checkpoint
            && (done.is_multiple_of(checkpoint.every.max(1)) || done == self.view.total())
            && let Some(line) = (checkpoint.callback)(done)
        {
            self.view.line(&line);
        }
        self.view.show(done);
    }
}

/// Runs every process to the end on the current runtime.
async fn contend<S: LockStorage>(
    lockers: Vec<Locker<S>>,
    settings: &Settings,
    spec: RunSpec,
    tally: Arc<RequestTally>,
    label: &str,
    checkpoint: Option<Checkpoint>,
    origin: Timeline,
) -> Result<RunResult, BoxError> {
    let lock_id = settings.run_lock_id(spec)?;
    let wall_origin = std::time::Instant::now();
    let progress = Arc::new(Progress {
        view: RunProgress::new(
            label,
            u64::from(settings.acquisitions) * spec.processes as u64,
            origin,
            Mode::for_stderr(settings.progress),
        ),
        checkpoint,
    });
    let inside = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for (process, locker) in lockers.into_iter().enumerate() {
        let process_run = ProcessRun {
            process,
            locker,
            lock_id: lock_id.clone(),
            acquisitions: settings.acquisitions,
            critical_section: settings.critical_section,
            pause: settings.pause,
            origin,
            inside: inside.clone(),
            violations: violations.clone(),
            progress: progress.clone(),
        };
        tasks.spawn(process_run.run());
    }
    let mut acquisitions: Vec<_> = crate::tasks::join_all(&mut tasks, label, "process")
        .await?
        .into_iter()
        .flatten()
        .collect();
    progress.view.finish();
    let duration = origin.elapsed();
    acquisitions.sort_by_key(|acquisition| (acquisition.acquired_at, acquisition.process));
    Ok(RunResult {
        spec,
        acquisitions,
        duration,
        requests: tally.counts(),
        cluster: None,
        exclusion_violations: violations.load(Ordering::Relaxed),
        handoffs: None,
        wall_time: wall_origin.elapsed(),
    })
}

/// One process of a run.
struct ProcessRun<S: LockStorage> {
    process: usize,
    locker: Locker<S>,
    lock_id: LockId,
    acquisitions: u32,
    critical_section: Duration,
    pause: Duration,
    origin: Timeline,
    inside: Arc<AtomicUsize>,
    violations: Arc<AtomicU64>,
    progress: Arc<Progress>,
}

impl<S: LockStorage> ProcessRun<S> {
    async fn run(self) -> Result<Vec<Acquisition>, Error> {
        let mut samples = Vec::with_capacity(self.acquisitions as usize);
        for number in 1..=self.acquisitions {
            let guard = self.locker.lock(&self.lock_id).await?;
            let acquired_at = self.origin.elapsed();
            if self.inside.fetch_add(1, Ordering::SeqCst) != 0 {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
            samples.push(Acquisition {
                process: self.process,
                number,
                acquired_at,
                wait: guard.wait(),
                requests: guard.stats().requests,
                rejoins: guard.stats().rejoins,
            });
            if !self.critical_section.is_zero() {
                self.origin.sleep(self.critical_section).await;
            }
            self.inside.fetch_sub(1, Ordering::SeqCst);
            guard.release().await?;
            self.progress.tick();
            if !self.pause.is_zero() {
                self.origin.sleep(self.pause).await;
            }
        }
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(variant: Variant, processes: usize) -> RunSpec {
        RunSpec { variant, processes }
    }

    #[test]
    fn the_tally_averages_round_trips_by_kind_and_overall() {
        let tally = RequestTally::default();
        let us = Duration::from_micros;
        tally.storage_request(RequestKind::Read, us(400), None);
        tally.storage_request(RequestKind::Read, us(200), None);
        tally.storage_request(RequestKind::Write, us(90), None);
        let counts = tally.counts();
        assert_eq!(
            counts.mean_round_trips(),
            [Some(us(300)), Some(us(90)), None]
        );
        assert_eq!(counts.mean_round_trip(), Some(us(230)));
        assert_eq!(RequestCounts::default().mean_round_trip(), None);
    }

    #[test]
    fn each_bakery_process_is_its_own_client_and_the_configuration_is_valid() {
        let settings = Settings {
            acquisitions: 1,
            critical_section: Duration::ZERO,
            pause: Duration::ZERO,
            seed: 1,
            lock_id: "l".into(),
            lock: LockConfig::default(),
            progress: false,
            handoffs: false,
            wake_hints: false,
        };
        for process in 0..5 {
            let config = settings.lock_config(spec(Variant::BAKERY, 5), process);
            assert_eq!(config.bakery.max_clients, 5);
            assert_eq!(config.bakery.client_id, process as u32 + 1);
            assert!(config.validate().is_ok());
        }
        let queue = settings.lock_config(spec(Variant::QUEUE, 5), 2);
        assert_eq!(queue.bakery, lock_core::config::BakeryConfig::default());
    }
}
