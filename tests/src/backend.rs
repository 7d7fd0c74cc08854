//! What the conformance suite needs from a storage backend, and the two backends we have.
//!
//! A [`Backend`] hands out independent storage clients on one shared cluster, each with the
//! clock its locker should use, and says which [`LockConfig`] suits it and how much slack
//! its timing assertions need. Everything else (crashing a client, pausing it, counting its
//! requests) is done by a [`Gate`] in front of the client, so it works on every backend.
//!
//! * [`MemoryBackend`]: the deterministic quorum simulator of `lock-storage-memory`, on
//!   Tokio's paused clock (virtual time), with the default lock configuration.
//! * [`CassandraBackend`]: a real Cassandra or ScyllaDB cluster (or anything that speaks
//!   CQL v4), on real time, with short leases ([`CassandraBackend::lock_config`]). Each
//!   test gets a throwaway keyspace.
//! * [`CqlBackend`]: the same `CassandraStorage` and real `scylla` driver, against the
//!   memory simulator's CQL endpoint started in-process on an ephemeral loopback port,
//!   with the simulated cluster at hand for fault injection ([`CqlBackend::cluster`]).
//!
//! [`Bakery`] wraps any of them to run the suite on the bakery algorithm: its lockers need
//! a client id each, which [`Backend::locker_config`] hands out.

use std::fmt;
use std::future::Future;
use std::io::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql_endpoint::CqlServer;
use fair_lock::{Clock, Locker, SystemClock};
use lock_core::config::BakeryConfig;
use lock_core::{Algorithm, LockConfig, LockStorage};
use lock_local_cluster::{
    CassandraVersion, ClusterError, LocalCluster, TestTarget, test_target, test_target_release,
};
use lock_storage_cassandra::scylla::statement::Statement;
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, Replication, SchemaConfig,
};
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster, MemoryError};

use crate::gate::{Gate, GateHandle};

/// A storage backend under test: a cluster and a way to get clients of it.
pub trait Backend: Send + Sync {
    /// One client's storage.
    type Storage: LockStorage + Clone;

    /// A short name for messages.
    fn name(&self) -> &str;

    /// The lock configuration the scenarios use on this backend.
    fn lock_config(&self) -> LockConfig;

    /// The configuration of the next locker a scenario creates ([`Contender::new`]): the
    /// same [`Backend::lock_config`] for every locker, except where lockers must differ,
    /// as the bakery's client ids do ([`Bakery`]).
    fn locker_config(&self) -> LockConfig {
        self.lock_config()
    }

    /// A new, independent client of the shared cluster and the clock its locker should use.
    fn client(&self) -> (Self::Storage, Arc<dyn Clock>);

    /// How late an "at once" event (a grant after a release, a busy answer) may be, on top
    /// of what the lock configuration implies. Virtual time needs little; real clusters more.
    fn slack(&self) -> Duration;

    /// The lock id to use for `name` (backends on shared clusters make it unique).
    fn lock_id(&self, name: &str) -> String {
        name.to_owned()
    }

    /// Removes whatever the test left on the cluster (best effort).
    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// A locker on one client of a backend, behind a [`Gate`].
pub struct Contender<S: LockStorage> {
    /// The locker.
    pub locker: Locker<Gate<S>>,
    /// The switch of its gate: pause, crash or cut off this client.
    pub gate: GateHandle,
}

impl<S: LockStorage + Clone> Contender<S> {
    /// A contender on a new client of `backend`, its locker seeded with `seed` and
    /// configured by [`Backend::locker_config`].
    pub fn new<B: Backend<Storage = S>>(backend: &B, seed: u64) -> Self {
        Self::with_config(backend, seed, backend.locker_config())
    }

    /// Like [`Contender::new`], with another lock configuration.
    pub fn with_config<B: Backend<Storage = S>>(
        backend: &B,
        seed: u64,
        config: LockConfig,
    ) -> Self {
        Self::build(backend, seed, config, false)
    }

    /// Like [`Contender::new`], with a gate that logs every completed request
    /// ([`crate::gate::GateHandle::log`]).
    pub fn logged<B: Backend<Storage = S>>(backend: &B, seed: u64) -> Self {
        Self::build(backend, seed, backend.locker_config(), true)
    }

    /// Like [`Contender::logged`], with another lock configuration.
    pub fn logged_with_config<B: Backend<Storage = S>>(
        backend: &B,
        seed: u64,
        config: LockConfig,
    ) -> Self {
        Self::build(backend, seed, config, true)
    }

    fn build<B: Backend<Storage = S>>(
        backend: &B,
        seed: u64,
        config: LockConfig,
        log: bool,
    ) -> Self {
        let (storage, clock) = backend.client();
        let (gate, handle) = if log {
            Gate::logged(storage)
        } else {
            Gate::new(storage)
        };
        let locker = Locker::builder(gate)
            .config(config)
            .clock(clock)
            .replay_owner_ids_unsafe(seed)
            .build()
            .unwrap_or_else(|error| panic!("{}: invalid lock config: {error}", backend.name()));
        Contender {
            locker,
            gate: handle,
        }
    }
}

/// How many clients a bakery lock of the suite has ([`BakeryConfig::max_clients`]): more
/// than any scenario creates lockers (six at most).
pub const BAKERY_CLIENTS: u32 = 8;

/// Any backend, with its lockers on [`Algorithm::Bakery`] (docs/algorithm.md, section "The bakery baseline"):
/// the backend's lock configuration with fencing off (the bakery takes no tokens) and
/// [`BAKERY_CLIENTS`] clients, and every locker a scenario creates given the next client
/// id, from 1. One backend serves one scenario, so ids start again at 1 for each.
#[derive(Debug)]
pub struct Bakery<B> {
    inner: B,
    name: String,
    next_client: AtomicU32,
}

impl<B: Backend> Bakery<B> {
    /// The bakery on `inner`.
    pub fn new(inner: B) -> Self {
        let name = format!("bakery on {}", inner.name());
        Bakery {
            inner,
            name,
            next_client: AtomicU32::new(1),
        }
    }

    /// The backend underneath.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn config(&self, client_id: u32) -> LockConfig {
        LockConfig {
            algorithm: Algorithm::Bakery,
            fencing: false,
            bakery: BakeryConfig {
                max_clients: BAKERY_CLIENTS,
                client_id,
                lease: true,
            },
            ..self.inner.lock_config()
        }
    }
}

impl<B: Backend> Backend for Bakery<B> {
    type Storage = B::Storage;

    fn name(&self) -> &str {
        &self.name
    }

    /// The configuration of client 1 (every locker's differs only in its id).
    fn lock_config(&self) -> LockConfig {
        self.config(1)
    }

    /// The next client id's configuration. Panics past [`BAKERY_CLIENTS`] lockers: two
    /// lockers with one id could hold together, which would be the suite's fault.
    fn locker_config(&self) -> LockConfig {
        let client_id = self.next_client.fetch_add(1, Ordering::Relaxed);
        assert!(
            client_id <= BAKERY_CLIENTS,
            "{}: a scenario created more than {BAKERY_CLIENTS} bakery lockers",
            self.name
        );
        self.config(client_id)
    }

    fn client(&self) -> (Self::Storage, Arc<dyn Clock>) {
        self.inner.client()
    }

    fn slack(&self) -> Duration {
        self.inner.slack()
    }

    fn lock_id(&self, name: &str) -> String {
        self.inner.lock_id(name)
    }

    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        self.inner.cleanup()
    }
}

/// Any backend, with its lockers never waiting in the main row
/// ([`LockConfig::wait_in_main_row`], on by default; docs/algorithm.md, section "Waiting in
/// the main row"): the backend's lock configuration with that option off.
#[derive(Debug)]
pub struct WithoutWaitInMainRow<B> {
    inner: B,
    name: String,
}

impl<B: Backend> WithoutWaitInMainRow<B> {
    /// No waiting in the main row on `inner`.
    pub fn new(inner: B) -> Self {
        let name = format!("no waiting in the main row on {}", inner.name());
        WithoutWaitInMainRow { inner, name }
    }
}

impl<B: Backend> Backend for WithoutWaitInMainRow<B> {
    type Storage = B::Storage;

    fn name(&self) -> &str {
        &self.name
    }

    fn lock_config(&self) -> LockConfig {
        LockConfig {
            wait_in_main_row: false,
            ..self.inner.lock_config()
        }
    }

    fn client(&self) -> (Self::Storage, Arc<dyn Clock>) {
        self.inner.client()
    }

    fn slack(&self) -> Duration {
        self.inner.slack()
    }

    fn lock_id(&self, name: &str) -> String {
        self.inner.lock_id(name)
    }

    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        self.inner.cleanup()
    }
}

/// The memory simulator: three replicas, replication factor 3, QUORUM, a little latency,
/// virtual time. Create it inside a runtime with the clock paused.
#[derive(Clone, Debug)]
pub struct MemoryBackend {
    cluster: MemoryCluster,
}

impl MemoryBackend {
    /// A cluster with 0.3–0.9 ms message latency drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        let cluster = MemoryCluster::new(ClusterConfig {
            latency: Latency::Uniform {
                min: Duration::from_micros(300),
                max: Duration::from_micros(900),
            },
            request_timeout: Duration::from_secs(1),
            seed,
            ..ClusterConfig::default()
        })
        .unwrap_or_else(|error| panic!("memory cluster config: {error}"));
        MemoryBackend { cluster }
    }

    /// The simulated cluster, for fault injection.
    pub fn cluster(&self) -> &MemoryCluster {
        &self.cluster
    }
}

impl Backend for MemoryBackend {
    type Storage = lock_storage_memory::MemoryClient;

    fn name(&self) -> &str {
        "memory"
    }

    fn lock_config(&self) -> LockConfig {
        LockConfig::default()
    }

    fn client(&self) -> (Self::Storage, Arc<dyn Clock>) {
        let client = self.cluster.client();
        let clock = Arc::new(client.clock());
        (client, clock)
    }

    fn slack(&self) -> Duration {
        Duration::from_millis(50)
    }
}

/// A real Cassandra or ScyllaDB cluster (or any CQL v4 endpoint), on real time. On the
/// local cluster of the harness every backend of the process shares one keyspace, with
/// lock ids of its own; on any other cluster each backend creates its own keyspace and
/// drops it in [`Backend::cleanup`].
#[derive(Clone, Debug)]
pub struct CassandraBackend {
    storage: Arc<CassandraStorage>,
    /// The keyspace, and whether this backend made it for itself (and drops it when done).
    keyspace: String,
    owns_keyspace: bool,
    /// What this backend's lock ids start with, on a keyspace shared with other tests.
    lock_prefix: String,
    local: Option<&'static LocalCluster>,
}

impl CassandraBackend {
    /// The lock configuration for real time: a 3 s lease with no clock-skew allowance
    /// (one machine's clock, or NTP well within a millisecond), so that crash recovery
    /// takes seconds, not tens of seconds. Valid under [`LockConfig::validate`]:
    /// effective lease 3 − 1 − 0 = 2 s, renewal every 1.5 s, plus the 400 ms timeout = 1.9 s.
    pub fn lock_config() -> LockConfig {
        LockConfig {
            lease_ttl: Duration::from_secs(3),
            max_clock_skew: Duration::ZERO,
            request_timeout: Duration::from_millis(400),
            ..LockConfig::default()
        }
    }

    /// Connects to the cluster behind `contact_points` and creates a throwaway keyspace
    /// named after `test` with `replication_factor`.
    ///
    /// The name is unique within the process by a sequence number, not only by the time:
    /// tests released together by the shared cluster's start read the clock in the same
    /// microsecond, and two of them with one name prefix then shared a keyspace, created
    /// it concurrently through two coordinators, and got two table ids, so that reads
    /// failed with `Unknown CF` on a replica that kept the other one.
    pub async fn connect_with(
        contact_points: Vec<String>,
        test: &str,
        replication_factor: u32,
    ) -> Result<Self, CassandraError> {
        static KEYSPACES: AtomicU32 = AtomicU32::new(0);
        let sequence = KEYSPACES.fetch_add(1, Ordering::Relaxed);
        let nonce = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_micros() % 1_000_000_000)
            .unwrap_or_default();
        let name: String = test
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(14)
            .collect::<String>()
            .to_ascii_lowercase();
        // Cassandra allows 48 characters: 10 + 14 + 1 + 7 (a Linux process id) + 1 + 9 + 1
        // leaves 5 digits for the sequence.
        let keyspace = format!("lock_conf_{name}_{}_{nonce}_{sequence}", std::process::id());
        Self::connect_on(
            contact_points,
            keyspace,
            replication_factor,
            String::new(),
            true,
            true,
        )
        .await
    }

    /// A backend on `keyspace`, its lock ids starting with `lock_prefix`; with
    /// `create_schema` it creates the keyspace and table if missing and waits until every
    /// node has them. It drops the keyspace at its cleanup if it `owns_keyspace`.
    async fn connect_on(
        contact_points: Vec<String>,
        keyspace: String,
        replication_factor: u32,
        lock_prefix: String,
        owns_keyspace: bool,
        create_schema: bool,
    ) -> Result<Self, CassandraError> {
        let config = CassandraConfig {
            local_dc: std::env::var("LOCK_CASSANDRA_LOCAL_DC").ok(),
            request_timeout: Self::lock_config().request_timeout,
            schema: create_schema
                .then(|| SchemaConfig::new(Replication::Simple { replication_factor })),
            ..CassandraConfig::new(contact_points, keyspace.clone())
        };
        config.check_lock_config(&Self::lock_config())?;
        let storage = CassandraStorage::connect(config).await?;
        storage.check_lock_config(&Self::lock_config()).await?;
        Ok(CassandraBackend {
            storage: Arc::new(storage),
            keyspace,
            owns_keyspace,
            lock_prefix,
            local: None,
        })
    }

    /// A backend on the keyspace every test of this process shares on the local cluster,
    /// with lock ids of its own (a prefix unique within the process). Creating and
    /// dropping a keyspace per test waits for schema agreement among the nodes each time,
    /// which took most of a real-cluster conformance test's time; the local cluster is
    /// this process's alone and goes with it, so nothing is left behind.
    async fn connect_shared(
        contact_points: Vec<String>,
        replication_factor: u32,
    ) -> Result<Self, CassandraError> {
        static KEYSPACE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        static BACKENDS: AtomicU32 = AtomicU32::new(0);
        let keyspace = KEYSPACE
            .get_or_init(|| format!("lock_conf_shared_{}", std::process::id()))
            .clone();
        // The first test creates the keyspace and table and waits until every node has
        // them; the others wait for it and create nothing. Tests that each ran `IF NOT
        // EXISTS` at once raced: one saw the keyspace exist, then sent its table to a node
        // that did not know the keyspace yet.
        static SCHEMA_MADE: std::sync::OnceLock<tokio::sync::Mutex<bool>> =
            std::sync::OnceLock::new();
        let mut made = SCHEMA_MADE
            .get_or_init(|| tokio::sync::Mutex::new(false))
            .lock()
            .await;
        let lock_prefix = format!("t{}-", BACKENDS.fetch_add(1, Ordering::Relaxed));
        let create_schema = !*made;
        if !create_schema {
            drop(made);
            return Self::connect_on(
                contact_points,
                keyspace,
                replication_factor,
                lock_prefix,
                false,
                false,
            )
            .await;
        }
        let backend = Self::connect_on(
            contact_points,
            keyspace,
            replication_factor,
            lock_prefix,
            false,
            true,
        )
        .await?;
        *made = true;
        Ok(backend)
    }

    /// The backend for `test` on a real cluster: the one named in
    /// `LOCK_CASSANDRA_CONTACT_POINTS` (on a keyspace of the test's own, dropped at its
    /// cleanup), or else the local 3-node Cassandra shared by the tests of this process
    /// (started on first use; one keyspace for them all, each test with lock ids of its
    /// own), with replication factor 3. `None` when the test is skipped (no `java` or
    /// `mvn`, and `CI` is not `true`; the harness printed why). Panics if the cluster
    /// cannot be started or reached.
    pub async fn real(test: &str) -> Option<Self> {
        let name = test.to_owned();
        Self::real_on(test, move || test_target(&name, 3)).await
    }

    /// [`CassandraBackend::real`] on a local 3-node cluster of `release` (such as
    /// `"4.1.10"`), whatever the environment names: for a test binary that pins a release.
    /// Panics on a release the harness does not support.
    pub async fn real_release(test: &str, release: &str) -> Option<Self> {
        let version: CassandraVersion = release
            .parse()
            .unwrap_or_else(|error| panic!("{test}: {error}"));
        let name = test.to_owned();
        Self::real_on(test, move || test_target_release(&name, 3, version)).await
    }

    async fn real_on(
        test: &str,
        target: impl FnOnce() -> Result<Option<TestTarget>, ClusterError> + Send + 'static,
    ) -> Option<Self> {
        let target = tokio::task::spawn_blocking(target)
            .await
            .unwrap_or_else(|error| panic!("{test}: the harness thread failed: {error}"))
            .unwrap_or_else(|error| panic!("{test}: {error}"))?;
        let connected = if target.local.is_some() {
            Self::connect_shared(target.contact_points, target.replication_factor).await
        } else {
            Self::connect_with(target.contact_points, test, target.replication_factor).await
        };
        match connected {
            Ok(backend) => Some(backend.with_local(target.local)),
            Err(error) => panic!("{test}: cannot use the real cluster: {error}"),
        }
    }

    fn with_local(mut self, local: Option<&'static LocalCluster>) -> Self {
        self.local = local;
        self
    }

    /// The local cluster under this backend, for fault injection (`None` for a cluster
    /// named in the environment).
    pub fn local_cluster(&self) -> Option<&'static LocalCluster> {
        self.local
    }

    /// The storage every client of this backend shares (one driver session).
    pub fn storage(&self) -> &Arc<CassandraStorage> {
        &self.storage
    }
}

impl Backend for CassandraBackend {
    type Storage = Arc<CassandraStorage>;

    fn name(&self) -> &str {
        "cassandra"
    }

    fn lock_config(&self) -> LockConfig {
        Self::lock_config()
    }

    fn client(&self) -> (Self::Storage, Arc<dyn Clock>) {
        (self.storage.clone(), Arc::new(SystemClock::new()))
    }

    fn slack(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn lock_id(&self, name: &str) -> String {
        format!("{}{name}", self.lock_prefix)
    }

    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        let session = self.storage.session().clone();
        // Not the session's short request timeout: dropping a keyspace on a real cluster
        // waits for schema agreement.
        let mut drop = Statement::new(format!("DROP KEYSPACE IF EXISTS {}", self.keyspace));
        drop.set_request_timeout(Some(Duration::from_secs(60)));
        let owns_keyspace = self.owns_keyspace;
        async move {
            if !owns_keyspace {
                return;
            }
            if let Err(error) = session.query_unpaged(drop, ()).await {
                let _ = writeln!(std::io::stderr(), "could not drop a test keyspace: {error}");
            }
        }
    }
}

/// The replicas of the simulated cluster behind a [`CqlBackend`], and its replication factor.
const CQL_REPLICAS: u32 = 3;

/// Why a [`CqlBackend`] could not start.
#[derive(Debug)]
pub enum CqlBackendError {
    /// The simulated cluster or its CQL endpoint could not be set up (a bad cluster
    /// configuration, or no free loopback port).
    Endpoint(MemoryError),
    /// `CassandraStorage` could not connect to the endpoint or create the schema there.
    Connect(CassandraError),
}

impl fmt::Display for CqlBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CqlBackendError::Endpoint(error) => {
                write!(f, "cannot start the simulator's CQL endpoint: {error}")
            }
            CqlBackendError::Connect(error) => write!(
                f,
                "CassandraStorage cannot use the simulator's CQL endpoint: {error}"
            ),
        }
    }
}

impl std::error::Error for CqlBackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CqlBackendError::Endpoint(error) => Some(error),
            CqlBackendError::Connect(error) => Some(error),
        }
    }
}

/// `CassandraStorage`, through the real `scylla` driver and the CQL native protocol on
/// loopback, against the memory simulator's CQL endpoint (`cql-endpoint`) started in this
/// process: three replicas, replication factor 3, `QUORUM`, about a millisecond of latency
/// per message, replica clocks starting at the wall clock. Real
/// time throughout (the driver's sockets and timeouts do not follow a paused clock), with
/// [`CassandraBackend::lock_config`]'s short leases.
///
/// Every backend has its own cluster and endpoint, so tests never share state;
/// [`Backend::cleanup`] drops the keyspace and stops the endpoint. The cluster stays
/// reachable for fault injection ([`CqlBackend::cluster`]) while the driver is connected.
#[derive(Debug)]
pub struct CqlBackend {
    cassandra: CassandraBackend,
    cluster: MemoryCluster,
    server: Mutex<Option<CqlServer>>,
}

impl CqlBackend {
    /// Starts a simulated cluster and its CQL endpoint on `127.0.0.1:0`, connects a
    /// `CassandraStorage` to it and creates a keyspace named after `test`. Must run inside
    /// a multi-thread Tokio runtime with I/O and time enabled ([`crate::real_time`]).
    pub async fn start(test: &str) -> Result<Self, CqlBackendError> {
        let cluster = MemoryCluster::new(ClusterConfig {
            replicas: CQL_REPLICAS as usize,
            replication_factor: CQL_REPLICAS as usize,
            latency: Latency::Uniform {
                min: Duration::from_micros(300),
                max: Duration::from_micros(900),
            },
            // Below the driver's timeout, as on a real cluster, so that a slow quorum is
            // answered with a server-side timeout frame rather than a client-side timeout.
            request_timeout: CassandraBackend::lock_config().request_timeout * 3 / 4,
            epoch: SystemClock::new().now().timestamp,
            ..ClusterConfig::default()
        })
        .map_err(CqlBackendError::Endpoint)?;
        let server = CqlServer::start(cluster.clone(), "127.0.0.1:0")
            .await
            .map_err(CqlBackendError::Endpoint)?;
        let cassandra =
            CassandraBackend::connect_with(vec![server.contact_point()], test, CQL_REPLICAS)
                .await
                .map_err(CqlBackendError::Connect)?;
        Ok(CqlBackend {
            cassandra,
            cluster,
            server: Mutex::new(Some(server)),
        })
    }

    /// The simulated cluster behind the endpoint: stop replicas, partition the endpoint's
    /// node from them, step clocks ([`MemoryCluster::faults`]).
    pub fn cluster(&self) -> &MemoryCluster {
        &self.cluster
    }

    /// The storage every client of this backend shares (one driver session).
    pub fn storage(&self) -> &Arc<CassandraStorage> {
        &self.cassandra.storage
    }
}

impl Backend for CqlBackend {
    type Storage = Arc<CassandraStorage>;

    fn name(&self) -> &str {
        "cassandra over the simulator's CQL endpoint"
    }

    fn lock_config(&self) -> LockConfig {
        CassandraBackend::lock_config()
    }

    fn client(&self) -> (Self::Storage, Arc<dyn Clock>) {
        self.cassandra.client()
    }

    fn slack(&self) -> Duration {
        self.cassandra.slack()
    }

    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        let drop_keyspace = self.cassandra.cleanup();
        let server = self
            .server
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        async move {
            drop_keyspace.await;
            if let Some(server) = server {
                server.shutdown().await;
            }
        }
    }
}
