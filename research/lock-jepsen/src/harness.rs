//! The run: the lock across separate OS processes on a real Cassandra cluster, under
//! faults, checked from the processes' own logs.
//!
//! The parent starts a local 3-node cluster, creates a register table beside the lock's,
//! and spawns `--processes` workers (`lock-jepsen worker`, this same binary). Each
//! worker loops: take the lock (fencing on, lock-core's defaults), read the two registers
//! (QUORUM), wait 20 ms, write the *plain* register plus one (QUORUM, the server's
//! timestamps, only while the lease has `request_timeout` left), write the *fenced*
//! register plus one `USING TIMESTAMP <fencing token>` (always, even late), read the fenced
//! register back, release. Every step is a line of its JSON log on `CLOCK_MONOTONIC`,
//! which is one clock for every process of the machine.
//!
//! Meanwhile the nemesis, in the parent, cycles through the faults `--nemesis` names, in
//! an order drawn from `--seed`, until `--duration` has passed (at least one cycle): a node
//! killed with SIGKILL and restarted on its data; a node frozen with SIGSTOP for 6 s, past
//! the 2 s request timeout, then SIGCONT; a worker that holds the lock stopped with
//! SIGSTOP for 13 s, past its 10 s lease, then SIGCONT; and five network partitions made
//! with iptables on the loopback addresses (each worker connects from its own): a node cut
//! off from its peers, a node cut off from the workers, the holder cut off from every node
//! past its lease, a bridge, and a node's links flapping. Each partition is healed after a
//! stated time, and its rules are removed however the run ends. Then the workers are told
//! to stop, the registers are read, and [`check::check`] judges the history.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use lock_core::LockConfig;
use lock_local_cluster::{
    self, CassandraVersion, LocalCluster, LocalClusterConfig, Partitions, STORAGE_PORT,
};
use lock_storage_cassandra::scylla::client::session::Session;
use lock_storage_cassandra::scylla::statement::{Consistency, Statement};
use lock_storage_cassandra::{CassandraConfig, CassandraStorage, Replication, SchemaConfig};
use serde::Serialize;

use crate::check::{self, ClockSkew, Event, Fault, FaultKind, FinalRegisters, Verdict};
use crate::clocks::{ClockFile, DRIFT_STEP, Reread};
use crate::{BoxError, REGISTER_TABLE, monotonic_us};
use lock_cli_support::duration::parse_duration;

/// Nodes of the cluster: three, so that one down leaves a quorum.
const NODES: usize = 3;
/// How long a killed node stays down before its restart.
const KILL_DOWN: Duration = Duration::from_secs(5);
/// How long a node stays frozen: past the client's 2 s request timeout and Cassandra's own
/// read (5 s) and write (2 s) timeouts.
const FREEZE: Duration = Duration::from_secs(6);
/// The quiet time between faults.
const QUIET: Duration = Duration::from_secs(5);
/// How long a node stays cut off from its peers or from the workers, and a bridge lasts:
/// past the client's 2 s request timeout and Cassandra's read (5 s) and write (2 s)
/// timeouts, and long enough for gossip to mark the far side down.
const PARTITION: Duration = Duration::from_secs(10);
/// How long a node's links flap.
const FLAP_FOR: Duration = Duration::from_secs(6);
/// The shortest and longest spell of a flapping link, cut or healed (drawn from the seed).
const FLAP_SPELL_MS: (u64, u64) = (200, 600);
/// The source address of Cassandra's internode connections on loopback: the nodes do not
/// bind their listen address for them (`ss -tnp` on a running cluster shows peers
/// connecting to `127.0.S.n:7000` from `127.0.0.1`), so a rule can name a node's
/// internode traffic only by its destination, or a connection by its ports.
const INTERNODE_SOURCE: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// Every fault kind, the default of `--nemesis`.
const ALL_FAULTS: &str =
    "kill,freeze,pause,node-cut,clients-cut,holder-cut,bridge,flap,skew,skew-beyond,node-skew";
/// How long the workers' clocks stay set off (past a lease, and long enough for many
/// acquisitions), and a node's.
const SKEW_FOR: Duration = Duration::from_secs(20);
/// The fastest drift of a worker's clock, fast or slow, in parts per million: 1 %
/// (libfaketime's `x1.01`), 0.2 s over [`SKEW_FOR`].
const SKEW_DRIFT_PPM: i64 = 10_000;

/// The options of a run.
#[derive(Debug, Args)]
pub struct JepsenArgs {
    /// Worker processes, 2 to 16.
    #[arg(short, long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(2..=16))]
    pub processes: u16,
    /// How long the workers run (at least one cycle of the three faults, about a minute).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Where the cluster runs: `local` (a 3-node Apache Cassandra started for the run; the
    /// nemesis needs its nodes' processes).
    #[arg(long, value_name = "local", value_delimiter = ',', required = true)]
    pub cassandra: Vec<String>,
    /// The Apache Cassandra release the local cluster runs: 4.0.x or 4.1.x (on a Java 11
    /// fetched into the jar cache) or 5.0.x (on the system's Java 17); a line alone (4.0,
    /// 4.1, 5.0) is the release it was tested on (4.0.19, 4.1.10, 5.0.6).
    #[arg(long, default_value = "5.0.6")]
    pub cassandra_version: CassandraVersion,
    /// The keyspace of the lock and the registers.
    #[arg(long, default_value = "lock_bench_jepsen")]
    pub keyspace: String,
    /// The lock id.
    #[arg(long, default_value = "jepsen")]
    pub lock_id: String,
    /// The seed of the workers' lockers and of the nemesis's schedule (the order of the
    /// faults in each cycle, their targets, the flapping spells): a run is replayable.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The faults to cycle through, comma-separated: kill, freeze, pause (no privilege
    /// needed), node-cut, clients-cut, holder-cut, bridge, flap (network partitions with
    /// iptables, which need root), skew, skew-beyond (the workers' wall clocks set off and
    /// drifting, within `max_clock_skew` and beyond it) and node-skew (a node's wall clock
    /// set off within the bound), with libfaketime (installed as root if missing).
    #[arg(long, value_enum, value_delimiter = ',', default_value = ALL_FAULTS)]
    pub nemesis: Vec<FaultKind>,
    /// Where to write the logs and jepsen.json, in a directory `jepsen` under it (default:
    /// `lock-jepsen` in Cargo's target directory, or `lock-jepsen-results`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Whether `contact_points` is `local`: a local cluster that the run starts itself.
fn is_local(contact_points: &[String]) -> bool {
    matches!(contact_points, [only] if only.trim().eq_ignore_ascii_case("local"))
}

/// Creates the output directory: `out`, or `lock-jepsen` in the Cargo target directory the
/// binary runs from (else `lock-jepsen-results`).
fn create_out_dir(out: Option<&PathBuf>) -> Result<PathBuf, BoxError> {
    Ok(lock_cli_support::create_out_dir(
        out.map(PathBuf::as_path),
        "lock-jepsen",
    )?)
}

/// A signal to a worker process.
fn signal(child: &Child, signal: rustix::process::Signal) -> Result<(), BoxError> {
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or("a worker has no valid pid")?;
    rustix::process::kill_process(pid, signal)
        .map_err(|error| format!("cannot signal worker {}: {error}", child.id()).into())
}

/// Whether the last event of the log at `path` says its worker holds the lock.
fn holds(path: &Path) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let length = file.metadata().map_or(0, |meta| meta.len());
    if file
        .seek(SeekFrom::Start(length.saturating_sub(4096)))
        .is_err()
    {
        return false;
    }
    let mut tail = String::new();
    if file.read_to_string(&mut tail).is_err() {
        return false;
    }
    tail.lines()
        .rev()
        .find_map(|line| serde_json::from_str::<Event>(line).ok())
        .is_some_and(|event| matches!(event, Event::Acquired { .. } | Event::Read { .. }))
}

/// Whether a worker's log shows an acquisition after `since`.
fn acquired_since(logs: &[PathBuf], since: u64) -> bool {
    logs.iter().any(|path| {
        std::fs::read_to_string(path).is_ok_and(|text| {
            text.lines().rev().any(|line| {
                matches!(serde_json::from_str::<Event>(line),
                    Ok(Event::Acquired { at, .. }) if at > since)
            })
        })
    })
}

/// SplitMix64: the nemesis's seeded choices.
struct Schedule(u64);

impl Schedule {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..below` (`below` > 0).
    fn below(&mut self, below: usize) -> usize {
        (self.next() % below as u64) as usize
    }

    /// A number in `low..=high` (`low` ≤ `high`).
    fn between(&mut self, low: i64, high: i64) -> i64 {
        let span = high.abs_diff(low).saturating_add(1);
        low.saturating_add_unsigned(self.next() % span)
    }

    /// `kinds` in an order drawn from the schedule.
    fn shuffled(&mut self, kinds: &[FaultKind]) -> Vec<FaultKind> {
        let mut order = kinds.to_vec();
        for index in (1..order.len()).rev() {
            order.swap(index, self.below(index + 1));
        }
        order
    }
}

/// The workers' clocks for a skew fault, one per worker, drawn from `schedule`, with
/// `bound` the lock's `max_clock_skew`.
///
/// Within the bound, each clock starts off by up to `bound / 2 − drift` either way and
/// drifts by up to [`SKEW_DRIFT_PPM`] either way, so that over [`SKEW_FOR`] every clock
/// stays within `bound / 2` of the machine's (the nodes'), and every two within `bound`.
/// Beyond it, even workers' clocks start between 1.5 and 3 times `bound` ahead and odd
/// ones as far behind, drifting as much, so that an even and an odd worker stay more
/// than twice `bound` apart.
fn skew_plan(
    schedule: &mut Schedule,
    workers: usize,
    beyond: bool,
    bound: Duration,
) -> Vec<ClockSkew> {
    let bound_us = i64::try_from(bound.as_micros()).unwrap_or(i64::MAX);
    let drift_us = SKEW_DRIFT_PPM * i64::try_from(SKEW_FOR.as_secs()).unwrap_or(0);
    (0..workers)
        .map(|worker| {
            let drift_ppm = schedule.between(-SKEW_DRIFT_PPM, SKEW_DRIFT_PPM);
            let offset_us = if beyond {
                let magnitude = schedule.between(bound_us * 3 / 2, bound_us * 3);
                if worker % 2 == 0 {
                    magnitude
                } else {
                    -magnitude
                }
            } else {
                let most = (bound_us / 2 - drift_us).max(0);
                schedule.between(-most, most)
            };
            ClockSkew {
                offset_us,
                drift_ppm,
            }
        })
        .collect()
}

/// A node's clock for a node-skew fault: between a quarter and a half of `bound` ahead or
/// behind (the side drawn too), without drift (its JVM re-reads the offset only once a
/// second).
fn node_skew_plan(schedule: &mut Schedule, bound: Duration) -> ClockSkew {
    let bound_us = i64::try_from(bound.as_micros()).unwrap_or(i64::MAX);
    let magnitude = schedule.between(bound_us / 4, bound_us / 2);
    ClockSkew {
        offset_us: if schedule.below(2) == 0 {
            magnitude
        } else {
            -magnitude
        },
        drift_ppm: 0,
    }
}

/// Microseconds of `duration`.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The established internode connections that node `pid` opened to `to`'s storage port:
/// their local (source) addresses, from `ss`.
fn internode_connections(pid: u32, to: Ipv4Addr) -> Result<Vec<SocketAddrV4>, BoxError> {
    let out = Command::new("ss")
        .args(["-tnpH", "state", "established"])
        .output()
        .map_err(|error| format!("cannot run `ss` to find internode connections: {error}"))?;
    if !out.status.success() {
        return Err(format!(
            "`ss -tnpH state established` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let peer = SocketAddrV4::new(to, STORAGE_PORT).to_string();
    let owner = format!("pid={pid},");
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| line.contains(&owner))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, _, local, remote, ..] if *remote == peer => local.parse().ok(),
                _ => None,
            }
        })
        .collect())
}

/// The nemesis: the faults, done in turn, and their record.
struct Nemesis<'a> {
    cluster: &'a LocalCluster,
    workers: &'a [Child],
    logs: &'a [PathBuf],
    /// Each worker's source address.
    worker_addresses: &'a [Ipv4Addr],
    /// The partition rules, when a partition was asked for.
    partitions: Option<&'a Partitions>,
    /// Each worker's clock, when a worker clock fault was asked for.
    worker_clocks: &'a [ClockFile],
    /// The node that runs on a clock of its own (from 0), and its clock, when a node clock
    /// fault was asked for.
    node_clock: Option<&'a (usize, ClockFile)>,
    /// The lock's `max_clock_skew`.
    max_clock_skew: Duration,
    /// How long the next acquisition may take after a heal.
    progress_bound: Duration,
    schedule: Schedule,
    faults: Vec<Fault>,
    progress: bool,
}

impl Nemesis<'_> {
    fn note(&self, line: &str) {
        if self.progress {
            crate::note(&format!("  nemesis: {line}"));
        }
    }

    fn kill_and_restart(&mut self, node: usize) -> Result<(), BoxError> {
        self.note(&format!("SIGKILL node {}", node + 1));
        let from = monotonic_us();
        self.cluster.kill(node)?;
        std::thread::sleep(KILL_DOWN);
        self.note(&format!("restarting node {}", node + 1));
        self.cluster.restart(node)?;
        let to = monotonic_us();
        self.note(&format!(
            "node {} back after {:.1} s",
            node + 1,
            (to - from) as f64 / 1e6
        ));
        self.faults.push(Fault {
            kind: FaultKind::Kill,
            target: node + 1,
            from,
            to,
            while_holding: false,
            clock: None,
        });
        Ok(())
    }

    fn freeze(&mut self, node: usize) -> Result<(), BoxError> {
        self.note(&format!("SIGSTOP node {} for {FREEZE:?}", node + 1));
        let from = monotonic_us();
        self.cluster.freeze(node)?;
        std::thread::sleep(FREEZE);
        self.cluster.thaw(node)?;
        self.faults.push(Fault {
            kind: FaultKind::Freeze,
            target: node + 1,
            from,
            to: monotonic_us(),
            while_holding: false,
            clock: None,
        });
        Ok(())
    }

    /// Does one fault of `kind`, its target drawn from the schedule.
    fn strike(&mut self, kind: FaultKind, pause: Duration, cut: Duration) -> Result<(), BoxError> {
        let node = self.schedule.below(NODES);
        match kind {
            FaultKind::Kill => self.kill_and_restart(node),
            FaultKind::Freeze => self.freeze(node),
            FaultKind::Pause => {
                let first = self.schedule.below(self.workers.len());
                self.pause(first, pause)
            }
            FaultKind::NodeCut => {
                let node = self.node_apart_from_internode_source(node)?;
                self.partition(kind, node, PARTITION)
            }
            FaultKind::ClientsCut | FaultKind::Bridge => self.partition(kind, node, PARTITION),
            FaultKind::Flap => {
                let node = self.node_apart_from_internode_source(node)?;
                self.flap(node)
            }
            FaultKind::HolderCut => {
                let first = self.schedule.below(self.workers.len());
                self.cut_holder(first, cut)
            }
            FaultKind::Skew | FaultKind::SkewBeyond => self.skew_workers(kind),
            FaultKind::NodeSkew => self.skew_node(),
        }
    }

    /// Sets every worker's clock off as [`skew_plan`] draws it, drifting, for
    /// [`SKEW_FOR`]; then sets them right.
    fn skew_workers(&mut self, kind: FaultKind) -> Result<(), BoxError> {
        let plan = skew_plan(
            &mut self.schedule,
            self.worker_clocks.len(),
            kind == FaultKind::SkewBeyond,
            self.max_clock_skew,
        );
        self.note(&format!(
            "workers' clocks set off for {SKEW_FOR:?}: {}",
            plan.iter()
                .map(describe_skew)
                .collect::<Vec<_>>()
                .join("; ")
        ));
        let from = monotonic_us();
        let started = Instant::now();
        let mut outcome = Ok(());
        while outcome.is_ok() && started.elapsed() < SKEW_FOR {
            let elapsed = micros(started.elapsed());
            outcome = self
                .worker_clocks
                .iter()
                .zip(&plan)
                .try_for_each(|(clock, skew)| clock.set(skew.offset_after(elapsed)));
            std::thread::sleep(DRIFT_STEP);
        }
        let reset = set_right(self.worker_clocks);
        let to = monotonic_us();
        outcome.map_err(|error| format!("cannot set a worker's clock: {error}"))?;
        reset?;
        for (worker, skew) in plan.into_iter().enumerate() {
            self.faults.push(Fault {
                kind,
                target: worker,
                from,
                to,
                while_holding: false,
                clock: Some(skew),
            });
        }
        Ok(())
    }

    /// Sets the clock of the node that has one off as [`node_skew_plan`] draws it for
    /// [`SKEW_FOR`]; then sets it right.
    fn skew_node(&mut self) -> Result<(), BoxError> {
        let skew = node_skew_plan(&mut self.schedule, self.max_clock_skew);
        let (node, clock) = self
            .node_clock
            .ok_or("a node clock fault was scheduled without a node's clock")?;
        let node = *node;
        self.note(&format!(
            "node {}'s clock set off for {SKEW_FOR:?}: {}",
            node + 1,
            describe_skew(&skew)
        ));
        let from = monotonic_us();
        let outcome = clock.set(skew.offset_us);
        if outcome.is_ok() {
            std::thread::sleep(SKEW_FOR);
        }
        let reset = clock.set(0);
        let to = monotonic_us();
        outcome
            .and(reset)
            .map_err(|error| format!("cannot set node {}'s clock: {error}", node + 1))?;
        self.faults.push(Fault {
            kind: FaultKind::NodeSkew,
            target: node + 1,
            from,
            to,
            while_holding: false,
            clock: Some(skew),
        });
        Ok(())
    }

    /// `node`, or the next node after it whose address is not [`INTERNODE_SOURCE`]: a rule
    /// on that address would hit every node's internode traffic (in slot 0, node 1 listens
    /// on 127.0.0.1 itself), not one node's.
    fn node_apart_from_internode_source(&self, node: usize) -> Result<usize, BoxError> {
        for offset in 0..NODES {
            let candidate = (node + offset) % NODES;
            if self.cluster.address(candidate)? != INTERNODE_SOURCE {
                return Ok(candidate);
            }
        }
        Err("every node listens on the internode source address".into())
    }

    fn partitions(&self) -> Result<&Partitions, BoxError> {
        self.partitions
            .ok_or_else(|| "a partition was scheduled without its iptables chain".into())
    }

    /// Adds the rules of `kind` around node `node` (from 0).
    fn cut(&self, kind: FaultKind, node: usize) -> Result<(), BoxError> {
        let partitions = self.partitions()?;
        let address = self.cluster.address(node)?;
        match kind {
            FaultKind::NodeCut => {
                // Every internode packet to the node (its peers' messages, and the acks of
                // its own connections' data), and every packet of its listen address to
                // the internode source (its answers on the connections its peers opened):
                // no request between it and a peer gets an answer, either way.
                partitions.cut(INTERNODE_SOURCE, address)?;
                partitions.cut(address, INTERNODE_SOURCE)?;
            }
            FaultKind::ClientsCut => {
                for worker in self.worker_addresses {
                    partitions.cut(*worker, address)?;
                    partitions.cut(address, *worker)?;
                }
            }
            FaultKind::Bridge => {
                // `node` is the bridge; the other two lose each other. Their internode
                // connections share one source address with the bridge's, so each is
                // cut by its ports, and new internode connections to either are refused
                // (the bridge keeps the connections it has).
                let sides: Vec<usize> = (0..NODES).filter(|other| *other != node).collect();
                for (from, to) in [(sides[0], sides[1]), (sides[1], sides[0])] {
                    let target = SocketAddrV4::new(self.cluster.address(to)?, STORAGE_PORT);
                    let pid = self
                        .cluster
                        .pid(from)?
                        .ok_or_else(|| format!("node {} has no process to bridge", from + 1))?;
                    for local in internode_connections(pid, *target.ip())? {
                        partitions.cut_connection(local, target)?;
                        partitions.cut_connection(target, local)?;
                    }
                    partitions.refuse_connections(target)?;
                }
            }
            FaultKind::Flap => partitions.isolate(address)?,
            FaultKind::Kill
            | FaultKind::Freeze
            | FaultKind::Pause
            | FaultKind::HolderCut
            | FaultKind::Skew
            | FaultKind::SkewBeyond
            | FaultKind::NodeSkew => {
                return Err(format!("{kind:?} is not a partition around a node").into());
            }
        }
        Ok(())
    }

    /// After a heal at `healed`, waits until a worker's log shows the lock granted again,
    /// for at most the progress bound, so that the logs cover the checker's window.
    fn await_progress(&self, healed: u64) {
        let give_up = Instant::now() + self.progress_bound + Duration::from_secs(1);
        while Instant::now() < give_up && !acquired_since(self.logs, healed) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Cuts around node `node` (from 0) as `kind` says for `length`, then heals.
    fn partition(
        &mut self,
        kind: FaultKind,
        node: usize,
        length: Duration,
    ) -> Result<(), BoxError> {
        let what = match kind {
            FaultKind::NodeCut => format!("node {} cut off from its peers", node + 1),
            FaultKind::ClientsCut => format!("node {} cut off from the workers", node + 1),
            _ => format!("bridge: only node {} sees both others", node + 1),
        };
        self.note(&format!("{what} for {length:?}"));
        let from = monotonic_us();
        let outcome = self.cut(kind, node);
        if outcome.is_ok() {
            std::thread::sleep(length);
        }
        self.partitions()?.heal()?;
        let to = monotonic_us();
        outcome?;
        self.faults.push(Fault {
            kind,
            target: node + 1,
            from,
            to,
            while_holding: false,
            clock: None,
        });
        self.await_progress(to);
        Ok(())
    }

    /// Cuts every link of node `node` (from 0) and heals them, spells drawn from the
    /// schedule, for [`FLAP_FOR`]; then leaves them healed.
    fn flap(&mut self, node: usize) -> Result<(), BoxError> {
        self.note(&format!(
            "node {}'s links flapping for {FLAP_FOR:?}",
            node + 1
        ));
        let from = monotonic_us();
        let end = Instant::now() + FLAP_FOR;
        let (shortest, longest) = FLAP_SPELL_MS;
        let mut outcome = Ok(());
        while outcome.is_ok() && Instant::now() < end {
            outcome = self.cut(FaultKind::Flap, node);
            let spell = shortest + self.schedule.next() % (longest - shortest);
            std::thread::sleep(Duration::from_millis(spell));
            self.partitions()?.heal()?;
            let spell = shortest + self.schedule.next() % (longest - shortest);
            std::thread::sleep(Duration::from_millis(spell));
        }
        self.partitions()?.heal()?;
        let to = monotonic_us();
        outcome?;
        self.faults.push(Fault {
            kind: FaultKind::Flap,
            target: node + 1,
            from,
            to,
            while_holding: false,
            clock: None,
        });
        self.await_progress(to);
        Ok(())
    }

    /// Cuts a worker that holds the lock (trying for up to 10 s to catch one holding,
    /// else any) off from every node for `length`, then heals.
    fn cut_holder(&mut self, first: usize, length: Duration) -> Result<(), BoxError> {
        let partitions = self.partitions()?;
        let count = self.workers.len();
        let give_up = Instant::now() + Duration::from_secs(10);
        let mut chosen = None;
        'search: while Instant::now() < give_up {
            for offset in 0..count {
                let index = (first + offset) % count;
                if !holds(&self.logs[index]) {
                    continue;
                }
                partitions.isolate(self.worker_addresses[index])?;
                let from = monotonic_us();
                // It may have released between our look and the cut.
                std::thread::sleep(Duration::from_millis(5));
                if holds(&self.logs[index]) {
                    chosen = Some((index, from, true));
                    break 'search;
                }
                partitions.heal()?;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let (index, from, while_holding) = match chosen {
            Some(chosen) => chosen,
            None => {
                let index = first % count;
                partitions.isolate(self.worker_addresses[index])?;
                (index, monotonic_us(), false)
            }
        };
        self.note(&format!(
            "worker {index} cut off from every node ({}) for {length:?}",
            if while_holding {
                "holding the lock"
            } else {
                "not caught holding the lock"
            }
        ));
        std::thread::sleep(length);
        partitions.heal()?;
        let to = monotonic_us();
        self.faults.push(Fault {
            kind: FaultKind::HolderCut,
            target: index,
            from,
            to,
            while_holding,
            clock: None,
        });
        self.await_progress(to);
        Ok(())
    }

    /// Stops a worker that holds the lock (trying for up to 10 s to catch one holding,
    /// else any) for `length`, then continues it.
    fn pause(&mut self, first: usize, length: Duration) -> Result<(), BoxError> {
        let count = self.workers.len();
        let give_up = Instant::now() + Duration::from_secs(10);
        let mut chosen = None;
        'search: while Instant::now() < give_up {
            for offset in 0..count {
                let index = (first + offset) % count;
                if !holds(&self.logs[index]) {
                    continue;
                }
                let worker = &self.workers[index];
                signal(worker, rustix::process::Signal::STOP)?;
                let from = monotonic_us();
                // It may have released between our look and the signal.
                std::thread::sleep(Duration::from_millis(5));
                if holds(&self.logs[index]) {
                    chosen = Some((index, from, true));
                    break 'search;
                }
                signal(worker, rustix::process::Signal::CONT)?;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let (index, from, while_holding) = match chosen {
            Some(chosen) => chosen,
            None => {
                let index = first % count;
                signal(&self.workers[index], rustix::process::Signal::STOP)?;
                (index, monotonic_us(), false)
            }
        };
        self.note(&format!(
            "SIGSTOP worker {index} ({}) for {length:?}",
            if while_holding {
                "holding the lock"
            } else {
                "not caught holding the lock"
            }
        ));
        std::thread::sleep(length);
        signal(&self.workers[index], rustix::process::Signal::CONT)?;
        self.faults.push(Fault {
            kind: FaultKind::Pause,
            target: index,
            from,
            to: monotonic_us(),
            while_holding,
            clock: None,
        });
        Ok(())
    }
}

/// Sets every clock of `clocks` right.
fn set_right(clocks: &[ClockFile]) -> Result<(), BoxError> {
    clocks
        .iter()
        .try_for_each(|clock| clock.set(0))
        .map_err(|error| format!("cannot set a clock right: {error}").into())
}

/// `+0.213 s, drifting +0.80 %`.
fn describe_skew(skew: &ClockSkew) -> String {
    format!(
        "{:+.3} s, drifting {:+.2} %",
        skew.offset_us as f64 / 1e6,
        skew.drift_ppm as f64 / 1e4
    )
}

/// What a run produced.
#[derive(Debug, Serialize)]
pub struct JepsenReport {
    /// What ran.
    pub setup: String,
    /// `/proc/loadavg` at the start and at the end.
    pub load: [String; 2],
    /// Seconds the workers ran.
    pub ran_s: f64,
    /// Acquisitions per worker.
    pub per_worker: Vec<u64>,
    /// Errors the workers logged (failed requests, mostly during faults).
    pub errors: u64,
    /// The faults.
    pub faults: Vec<Fault>,
    /// The checker's verdict.
    pub verdict: Verdict,
}

impl JepsenReport {
    /// The report printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let verdict = &self.verdict;
        let _ = writeln!(out, "{}", self.setup);
        let _ = writeln!(
            out,
            "load average (1, 5, 15 min): {} at the start, {} at the end; the workers ran {:.1} s\n",
            self.load[0], self.load[1], self.ran_s
        );
        let _ = writeln!(out, "Faults:");
        let origin = self
            .faults
            .iter()
            .map(|fault| fault.from)
            .min()
            .unwrap_or(0);
        for fault in &self.faults {
            let caught = if fault.while_holding {
                "while holding the lock"
            } else {
                "not caught holding the lock"
            };
            let what = match fault.kind {
                FaultKind::Kill => format!("node {} SIGKILL, restarted", fault.target),
                FaultKind::Freeze => format!("node {} SIGSTOP, SIGCONT", fault.target),
                FaultKind::Pause => {
                    format!("worker {} SIGSTOP, SIGCONT ({caught})", fault.target)
                }
                FaultKind::NodeCut => format!("node {} cut off from its peers", fault.target),
                FaultKind::ClientsCut => {
                    format!("node {} cut off from the workers", fault.target)
                }
                FaultKind::HolderCut => {
                    format!("worker {} cut off from every node ({caught})", fault.target)
                }
                FaultKind::Bridge => format!("bridge through node {}", fault.target),
                FaultKind::Flap => format!("node {}'s links flapping", fault.target),
                FaultKind::Skew | FaultKind::SkewBeyond => format!(
                    "worker {}'s clock {}{}",
                    fault.target,
                    fault.clock.as_ref().map_or_else(String::new, describe_skew),
                    if fault.kind == FaultKind::SkewBeyond {
                        " (beyond the bound)"
                    } else {
                        ""
                    }
                ),
                FaultKind::NodeSkew => format!(
                    "node {}'s clock {}",
                    fault.target,
                    fault.clock.as_ref().map_or_else(String::new, describe_skew)
                ),
            };
            let _ = writeln!(
                out,
                "  +{:>6.1} s  {what:<52} {:.1} s",
                (fault.from - origin) as f64 / 1e6,
                (fault.to - fault.from) as f64 / 1e6
            );
        }
        let min_margin = verdict
            .overlaps_beyond
            .iter()
            .map(|overlap| overlap.after_lost_us)
            .min();
        let _ = writeln!(
            out,
            "\nAcquisitions: {} ({} per worker), {} released as lost, {} holdings paused, {} \
             cut off; {} errors logged by the workers",
            verdict.acquisitions,
            self.per_worker
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            verdict.lost,
            verdict.paused_holdings,
            verdict.cut_off_holdings,
            self.errors
        );
        if !verdict.heals.is_empty() {
            let _ = writeln!(
                out,
                "After {} partition heals the lock was granted again within {} (bound {:.2} s: \
                 lease TTL + retry window + a poll and a request)",
                verdict.heals.len(),
                verdict.worst_wait_after_heal_us.map_or_else(
                    || "no judged heal".to_owned(),
                    |worst| format!("{:.3} s at worst", worst as f64 / 1e6)
                ),
                verdict.progress_bound_us as f64 / 1e6
            );
        }
        let _ = writeln!(
            out,
            "Queue order: {} requests judged (no fault near them but clocks within the bound), \
             none passed by a request made more than {:.1} s after it; {} passes beyond the \
             bound (clocks skewed beyond it); longest head start of a passed waiter: {}",
            verdict.order_judged,
            verdict.order_margin_us as f64 / 1e6,
            verdict.order_passed_beyond,
            verdict.worst_pass_us.map_or_else(
                || "none passed".to_owned(),
                |worst| format!("{:.3} s", worst as f64 / 1e6)
            )
        );
        if verdict.skewed_beyond_holdings > 0 {
            let _ = writeln!(
                out,
                "Holdings while the workers' clocks were beyond the bound: {}",
                verdict.skewed_beyond_holdings
            );
        }
        let _ = writeln!(
            out,
            "Overlapping holders within the assumptions: {}",
            verdict.overlaps_within.len()
        );
        let _ = writeln!(
            out,
            "Overlapping holders beyond them (holder paused or cut off past its lease): {}{}",
            verdict.overlaps_beyond.len(),
            min_margin.map_or_else(String::new, |margin| format!(
                ", each beginning at least {:.3} s after the earlier holder's lease counted as lost",
                margin as f64 / 1e6
            ))
        );
        let _ = writeln!(
            out,
            "Plain register (QUORUM read-modify-write): ends at {}, {} acknowledged increments, {} \
             of unknown outcome, {} possibly late (acknowledged after the lease's deadline), {} \
             with a failed attempt that may have landed late, {} skipped (lease lost before the \
             write){}{}",
            verdict.registers.plain,
            verdict.plain_acked,
            verdict.plain_unknown,
            verdict.plain_late,
            verdict.plain_failed_attempts,
            verdict.plain_skipped,
            if verdict.plain_set_back_beyond_assumptions {
                "; set back below its acknowledged increments by a write that may have landed \
                 after a later holder's: beyond the assumptions, as no lock keeps a \
                 read-modify-write without a token safe across a pause or a late retry"
            } else {
                ""
            },
            if verdict.plain_set_back_by_node_clocks {
                "; set back below its acknowledged increments while a node's clock was off: \
                 its writes carry their coordinators' timestamps, which no lock orders (a \
                 token does)"
            } else {
                ""
            }
        );
        let _ = writeln!(
            out,
            "Fenced register (USING TIMESTAMP token): ends at {} with timestamp {} (highest \
             acknowledged token {}), {} acknowledged in-lease increments, {} of unknown outcome",
            verdict.registers.fenced,
            verdict.registers.fenced_writetime,
            verdict.highest_fenced_token,
            verdict.fenced_in_lease,
            verdict.fenced_unknown
        );
        let _ = writeln!(
            out,
            "Late fenced writes (possibly applied after the holder's lease was lost): {}; refused after a \
             later holder's write: {}; taken, no later holder having written yet: {}",
            verdict.late_writes.len(),
            verdict.late_refused,
            verdict.late_accepted
        );
        if verdict.passed() {
            let _ = writeln!(out, "\nChecker: PASS");
        } else {
            let _ = writeln!(out, "\nChecker: FAIL");
            for failure in &verdict.failures {
                let _ = writeln!(out, "  {failure}");
            }
        }
        out
    }
}

/// Runs the workers and the nemesis, then the checker; an error if it found a failure.
pub fn run(args: &JepsenArgs) -> Result<(), BoxError> {
    if !is_local(&args.cassandra) {
        return Err(
            "lock-jepsen needs --cassandra local: its nemesis kills, freezes and restarts the nodes of \
             a cluster it starts itself"
                .into(),
        );
    }
    if args.duration < Duration::from_secs(10) || args.duration > Duration::from_secs(3600) {
        return Err(format!(
            "--duration must be between 10s and 1h, got {}",
            humantime::format_duration(args.duration)
        )
        .into());
    }
    lock_core::LockId::new(args.lock_id.as_str()).map_err(|error| format!("--lock-id: {error}"))?;
    let lock = LockConfig::default();
    let config_for = |contact_points: &[String]| CassandraConfig {
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor: 3,
        })),
        ..CassandraConfig::new(contact_points.iter().map(String::as_str), &args.keyspace)
    };
    config_for(&["127.0.0.1".to_owned()]).validate()?;
    let out = create_out_dir(args.out.as_ref())?.join("jepsen");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)
        .map_err(|error| format!("cannot create {}: {error}", out.display()))?;
    let progress = !args.quiet;
    if args.nemesis.is_empty() {
        return Err("--nemesis names no fault; give at least one".into());
    }
    // The clocks' files, made before anything starts so that a missing libfaketime stops
    // the run at once.
    let wants = |test: fn(&FaultKind) -> bool| args.nemesis.iter().any(test);
    let faketime = if wants(|kind| kind.is_worker_clock() || *kind == FaultKind::NodeSkew) {
        Some(crate::clocks::library()?)
    } else {
        None
    };
    let worker_clocks = if wants(|kind| kind.is_worker_clock()) {
        (0..args.processes)
            .map(|worker| ClockFile::create(out.join(format!("worker-{worker}.faketime"))))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| format!("cannot write a clock file in {}: {error}", out.display()))?
    } else {
        Vec::new()
    };
    // One node, drawn from the seed, runs under libfaketime: a JVM under it reads its
    // clocks several times slower (0.7 µs instead of 30 ns for `currentTimeMillis` on
    // the shared 2-core machine), so the others run without it.
    let node_clock = if wants(|kind| *kind == FaultKind::NodeSkew) {
        let node = Schedule(args.seed ^ 0x6E6F_6465_636C_6F63).below(NODES);
        let file = ClockFile::create(out.join(format!("node-{}.faketime", node + 1)))
            .map_err(|error| format!("cannot write a clock file in {}: {error}", out.display()))?;
        Some((node, file))
    } else {
        None
    };
    let mut node_environment = vec![Vec::new(); NODES];
    if let (Some(library), Some((node, clock))) = (&faketime, &node_clock) {
        node_environment[*node] = clock.environment(library, Reread::EverySecond);
    }
    let cluster_config = LocalClusterConfig {
        node_environment,
        version: Some(args.cassandra_version),
        ..LocalClusterConfig::new(NODES)
    };
    lock_local_cluster::check_tools(&cluster_config)?;
    // The partitions' chain, made before anything starts so that a missing privilege
    // stops the run at once; dropped (every rule removed) however the run ends.
    let partitions = if args.nemesis.iter().any(|kind| kind.is_partition()) {
        Some(
            Partitions::new()
                .map_err(|error| format!("the partition faults need iptables as root: {error}"))?,
        )
    } else {
        None
    };
    if progress {
        crate::note(&format!(
            "starting a local {NODES}-node Apache Cassandra {} cluster...",
            args.cassandra_version
        ));
    }
    let cluster = LocalCluster::start(cluster_config)?;
    let contact_points = cluster.contact_points();
    // Each worker's own loopback address, 127.0.S.(10 + i) beside its nodes' 127.0.S.n.
    let [_, _, slot, _] = cluster.address(0)?.octets();
    let worker_addresses: Vec<Ipv4Addr> = (0..args.processes)
        .map(|worker| Ipv4Addr::new(127, 0, slot, 10 + worker as u8))
        .collect();
    let config = config_for(&contact_points);
    let runtime = crate::runtime()?;
    let session = runtime.block_on(async {
        let storage = CassandraStorage::connect(config.clone()).await?;
        let session = storage.session().clone();
        create_registers(&session, &args.keyspace).await?;
        Ok::<_, BoxError>(session)
    })?;
    let setup = format!(
        "Jepsen-style run: {} worker processes on one lock for at least {:?}, a local \
         {NODES}-node Apache Cassandra {} at {} (RF 3, QUORUM), lock-core's \
         defaults (lease {:?}, request timeout {:?}, fencing on); nemesis {}, seed {}",
        args.processes,
        args.duration,
        args.cassandra_version,
        contact_points.join(","),
        lock.lease_ttl,
        lock.request_timeout,
        args.nemesis
            .iter()
            .map(|kind| format!("{kind:?}"))
            .collect::<Vec<_>>()
            .join(","),
        args.seed
    );
    if progress {
        crate::note(&setup);
    }
    let load_start = lock_cli_support::load_average();
    let stop = out.join("stop");
    let logs: Vec<PathBuf> = (0..usize::from(args.processes))
        .map(|worker| out.join(format!("worker-{worker}.jsonl")))
        .collect();
    let exe = std::env::current_exe()?;
    let mut workers = Vec::new();
    for (worker, log) in logs.iter().enumerate() {
        let output = std::fs::File::create(out.join(format!("worker-{worker}.stderr")))?;
        let clock = match (&faketime, worker_clocks.get(worker)) {
            (Some(library), Some(clock)) => clock.environment(library, Reread::Always),
            _ => Vec::new(),
        };
        let child = Command::new(&exe)
            .envs(clock)
            .arg(crate::worker::COMMAND)
            .arg("--worker")
            .arg(worker.to_string())
            .arg("--contact-points")
            .arg(contact_points.join(","))
            .arg("--keyspace")
            .arg(&args.keyspace)
            .arg("--lock-id")
            .arg(&args.lock_id)
            .arg("--log")
            .arg(log)
            .arg("--stop")
            .arg(&stop)
            .arg("--seed")
            .arg(args.seed.to_string())
            .arg("--local-address")
            .arg(worker_addresses[worker].to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(output)
            .spawn()
            .map_err(|error| format!("cannot start worker {worker}: {error}"))?;
        workers.push(child);
    }
    let started = Instant::now();
    let mut nemesis = Nemesis {
        cluster: &cluster,
        workers: &workers,
        logs: &logs,
        worker_addresses: &worker_addresses,
        partitions: partitions.as_ref(),
        worker_clocks: &worker_clocks,
        node_clock: node_clock.as_ref(),
        max_clock_skew: lock.max_clock_skew,
        progress_bound: check::progress_bound(&lock),
        schedule: Schedule(args.seed ^ 0x6E65_6D65_7369_7321),
        faults: Vec::new(),
        progress,
    };
    // A holder stopped or cut off past its lease and the clock skew, by 2 s (a pause) or
    // 4 s (a cut, so that another worker takes the lock while it is still cut off).
    let pause = lock.lease_ttl + lock.max_clock_skew + Duration::from_secs(2);
    let cut = lock.lease_ttl + lock.max_clock_skew + Duration::from_secs(4);
    let outcome = (|| {
        std::thread::sleep(QUIET);
        loop {
            for kind in nemesis.schedule.shuffled(&args.nemesis) {
                nemesis.strike(kind, pause, cut)?;
                std::thread::sleep(QUIET);
            }
            if started.elapsed() >= args.duration {
                break;
            }
        }
        Ok::<_, BoxError>(())
    })();
    let faults = std::mem::take(&mut nemesis.faults);
    // Whatever happened, no rule stays in force and every clock is right while the
    // workers finish.
    let healed = partitions.as_ref().map_or(Ok(()), Partitions::heal);
    let clocks_right = set_right(&worker_clocks).and(
        node_clock
            .as_ref()
            .map_or(Ok(()), |(_, clock)| set_right(std::slice::from_ref(clock))),
    );
    // Whatever happened, stop the workers: ask, then wait, then kill.
    std::fs::write(&stop, b"stop")?;
    let deadline = Instant::now() + Duration::from_secs(90);
    for (index, worker) in workers.iter_mut().enumerate() {
        let _ = signal(worker, rustix::process::Signal::CONT);
        loop {
            match worker.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    crate::note(&format!("worker {index} did not stop in time; killed"));
                    let _ = worker.kill();
                    let _ = worker.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
    let ran_s = started.elapsed().as_secs_f64();
    outcome?;
    healed?;
    clocks_right?;
    let registers = runtime.block_on(read_registers(&session, &args.keyspace))?;
    let load_end = lock_cli_support::load_average();
    drop(partitions);
    drop(cluster);
    let mut histories = Vec::new();
    for log in &logs {
        let text = std::fs::read_to_string(log)
            .map_err(|error| format!("cannot read {}: {error}", log.display()))?;
        histories
            .push(check::parse_log(&text).map_err(|error| format!("{}: {error}", log.display()))?);
    }
    let verdict = check::check(&histories, &faults, registers);
    let per_worker = histories
        .iter()
        .map(|events| {
            events
                .iter()
                .filter(|event| matches!(event, Event::Acquired { .. }))
                .count() as u64
        })
        .collect();
    let errors = histories
        .iter()
        .flatten()
        .filter(|event| matches!(event, Event::Error { .. }))
        .count() as u64;
    let report = JepsenReport {
        setup,
        load: [load_start, load_end],
        ran_s,
        per_worker,
        errors,
        faults,
        verdict,
    };
    let path = out.join("jepsen.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    crate::emit(&format!(
        "{}\nWrote {} and the workers' logs beside it\n",
        report.render(),
        path.display()
    ))?;
    if report.verdict.passed() {
        Ok(())
    } else {
        Err(format!(
            "the checker found {} failure(s)",
            report.verdict.failures.len()
        )
        .into())
    }
}

/// Creates the register table and sets both registers to 0 (the fenced one with write
/// timestamp 1, below every token).
async fn create_registers(session: &Session, keyspace: &str) -> Result<(), BoxError> {
    let table = format!("{keyspace}.{REGISTER_TABLE}");
    let run = async |text: String| -> Result<(), BoxError> {
        let mut statement = Statement::new(text);
        statement.set_consistency(Consistency::All);
        statement.set_request_timeout(Some(Duration::from_secs(30)));
        session.query_unpaged(statement, ()).await?;
        Ok(())
    };
    run(format!(
        "CREATE TABLE IF NOT EXISTS {table} (name text PRIMARY KEY, value bigint)"
    ))
    .await?;
    run(format!(
        "INSERT INTO {table} (name, value) VALUES ('plain', 0)"
    ))
    .await?;
    run(format!(
        "INSERT INTO {table} (name, value) VALUES ('fenced', 0) USING TIMESTAMP 1"
    ))
    .await
}

/// The registers, read at QUORUM once every worker ended.
async fn read_registers(session: &Session, keyspace: &str) -> Result<FinalRegisters, BoxError> {
    let table = format!("{keyspace}.{REGISTER_TABLE}");
    let read = async |name: &str| -> Result<(i64, i64), BoxError> {
        let mut statement = Statement::new(format!(
            "SELECT value, WRITETIME(value) FROM {table} WHERE name = '{name}'"
        ));
        statement.set_consistency(Consistency::Quorum);
        statement.set_request_timeout(Some(Duration::from_secs(10)));
        let rows = session
            .query_unpaged(statement, ())
            .await?
            .into_rows_result()?;
        Ok(rows
            .maybe_first_row::<(Option<i64>, Option<i64>)>()?
            .map_or((0, 0), |(value, writetime)| {
                (value.unwrap_or(0), writetime.unwrap_or(0))
            }))
    };
    let (plain, _) = read("plain").await?;
    let (fenced, fenced_writetime) = read("fenced").await?;
    Ok(FinalRegisters {
        plain,
        fenced,
        fenced_writetime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets of `plan`'s clocks at the start and at the end of [`SKEW_FOR`] (the
    /// offsets move linearly in between, so these are the extremes).
    fn extremes(plan: &[ClockSkew]) -> Vec<[i64; 2]> {
        plan.iter()
            .map(|skew| [skew.offset_after(0), skew.offset_after(micros(SKEW_FOR))])
            .collect()
    }

    #[test]
    fn skew_within_the_bound_keeps_every_two_clocks_within_it() {
        let bound = LockConfig::default().max_clock_skew;
        let bound_us = micros(bound);
        let mut widest = 0;
        for seed in 0..500 {
            let plan = skew_plan(&mut Schedule(seed), 5, false, bound);
            let ends = extremes(&plan);
            for at in 0..2 {
                for clock in &ends {
                    assert!(clock[at].unsigned_abs() <= bound_us / 2, "{seed}: {plan:?}");
                }
                let most = ends.iter().map(|clock| clock[at]).max().unwrap_or(0);
                let least = ends.iter().map(|clock| clock[at]).min().unwrap_or(0);
                widest = widest.max(most.abs_diff(least));
            }
            assert!(
                plan.iter()
                    .all(|skew| skew.drift_ppm.abs() <= SKEW_DRIFT_PPM)
            );
        }
        // The draws use most of the room, not a corner of it.
        assert!(widest > bound_us * 3 / 4 && widest <= bound_us, "{widest}");
    }

    #[test]
    fn skew_beyond_the_bound_keeps_even_and_odd_workers_apart() {
        let bound = LockConfig::default().max_clock_skew;
        let bound_us = micros(bound);
        for seed in 0..500 {
            let plan = skew_plan(&mut Schedule(seed), 4, true, bound);
            let ends = extremes(&plan);
            for at in 0..2 {
                for (worker, clock) in ends.iter().enumerate() {
                    // Beyond the bound from the nodes' clocks, on its side.
                    assert!(clock[at].unsigned_abs() > bound_us, "{seed}: {plan:?}");
                    assert_eq!(clock[at] > 0, worker % 2 == 0, "{seed}: {plan:?}");
                }
                assert!(ends[0][at].abs_diff(ends[1][at]) > 2 * bound_us);
            }
        }
    }

    #[test]
    fn a_node_clock_stays_within_half_the_bound() {
        let bound = LockConfig::default().max_clock_skew;
        let bound_us = micros(bound);
        let plans: Vec<ClockSkew> = (0..200)
            .map(|seed| node_skew_plan(&mut Schedule(seed), bound))
            .collect();
        for plan in &plans {
            let offset = plan.offset_us.unsigned_abs();
            assert!(offset >= bound_us / 4 && offset <= bound_us / 2, "{plan:?}");
            assert_eq!(plan.drift_ppm, 0);
        }
        assert!(plans.iter().any(|plan| plan.offset_us > 0));
        assert!(plans.iter().any(|plan| plan.offset_us < 0));
    }

    #[test]
    fn a_skew_plan_repeats_from_its_seed() {
        let bound = Duration::from_secs(1);
        assert_eq!(
            skew_plan(&mut Schedule(7), 3, false, bound),
            skew_plan(&mut Schedule(7), 3, false, bound)
        );
        assert_ne!(
            skew_plan(&mut Schedule(7), 3, false, bound),
            skew_plan(&mut Schedule(8), 3, false, bound)
        );
    }
}
