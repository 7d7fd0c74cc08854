//! `local-lines`: many tasks of one process waiting for one lock, against many processes
//! with one task each, on the simulator (virtual time) or on a real cluster.
//!
//! Tasks of one `Locker` (and its clones) that want the same lock wait for it in the
//! process, in order, and only the first of them stands in the distributed queue (a *local
//! line*; lock-core's `driver/local_line.rs`). The next task of a line enqueues afresh,
//! behind every owner of another process that enqueued meanwhile, so that a busy process
//! gets one turn per pass of the queue. Three scenarios, each for `--run-time` (or until
//! `--acquisitions` in all) of tasks that take one lock again and again with no critical
//! section and fencing off:
//!
//! * `--tasks` processes with one task each;
//! * one process with `--tasks` tasks;
//! * one busy process with a fifth of `--tasks` tasks, beside as many processes with one
//!   task each.
//!
//! Per scenario it prints the acquisitions, the storage requests per acquisition (release
//! included), the time per acquisition, the mean and maximum wait, the busy (first)
//! process's share of the acquisitions and Jain's fairness index over processes
//! (`(Σx)² / (n·Σx²)`, 1 for equal shares). It fails if two tasks ever held the lock at
//! once. Every scenario has a lock of its own: `--lock-id` with the scenario's number.
//! `--cassandra local` starts a local cluster for the run (`--local-nodes`, default 3) and
//! stops it after.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::timeline::Timeline;
use clap::Args;
use fair_lock::Locker;
use lock_core::{Error, LockConfig, LockId, LockStorage};
use lock_storage_memory::{ClusterConfig, MemoryCluster};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::BoxError;
use crate::experiment::{
    Backend, LockerSetup, RequestTally, cassandra_lockers, mix, simulated_lockers,
};
use crate::options::{BackendArgs, SimulationDefaults};
use crate::units::{ms, parse_duration};

/// The shortest `--run-time` accepted.
const MIN_RUN_TIME: Duration = Duration::from_millis(100);
/// The longest `--run-time` accepted.
const MAX_RUN_TIME: Duration = Duration::from_secs(600);

/// The options of `lock-bench local-lines`.
#[derive(Debug, Args)]
pub struct LocalLinesArgs {
    /// Processes of the first scenario and tasks of the second's one process (5 to 200);
    /// the third has a fifth of them in one process, beside as many one-task processes.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(5..=200))]
    pub tasks: u16,
    /// How long each scenario's tasks keep taking the lock (virtual time on the
    /// simulator), 100ms to 10min; tasks finish the acquisition they started.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub run_time: Duration,
    /// End each scenario after this many acquisitions in all (1 to 1,000,000) instead of
    /// after `--run-time`; tasks finish the acquisition they started, so a scenario may
    /// have up to one more per task.
    #[arg(long, conflicts_with = "run_time", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub acquisitions: Option<u64>,
    /// The lock id; each scenario appends its number.
    #[arg(long, default_value = "local-lines")]
    pub lock_id: String,
    /// Where to write local-lines.json (default: as for the experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With `--cassandra local`: how many nodes the local cluster has, 1 or 3.
    #[arg(long, default_value = "3", value_parser = crate::options::parse_node_count)]
    pub local_nodes: usize,
    /// The storage: the simulator by default, `--cassandra local` (a local cluster started
    /// for the run and stopped after it) or contact points of a real cluster.
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// When a scenario's tasks stop taking the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenarioEnd {
    /// Once this much time has passed since the start.
    After(Duration),
    /// Once the tasks have made this many acquisitions in all.
    Acquisitions(u64),
}

impl ScenarioEnd {
    /// `--acquisitions` if given, else `--run-time`.
    fn of(args: &LocalLinesArgs) -> Self {
        args.acquisitions
            .map_or(ScenarioEnd::After(args.run_time), ScenarioEnd::Acquisitions)
    }

    /// How the report names it.
    fn describe(self) -> String {
        match self {
            ScenarioEnd::After(run_time) => format!("{run_time:?}"),
            ScenarioEnd::Acquisitions(count) => format!("{count} acquisitions"),
        }
    }
}

/// One scenario: how many tasks each process has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// What it is, for the report.
    pub name: String,
    /// Tasks per process; process 0 is the one whose share is reported.
    pub tasks_per_process: Vec<usize>,
}

/// The three scenarios for `tasks` (see the module documentation).
pub fn scenarios(tasks: usize) -> [Scenario; 3] {
    let fifth = (tasks / 5).max(1);
    [
        Scenario {
            name: format!("{tasks} processes x 1 task"),
            tasks_per_process: vec![1; tasks],
        },
        Scenario {
            name: format!("1 process x {tasks} tasks"),
            tasks_per_process: vec![tasks],
        },
        Scenario {
            name: format!("1 process x {fifth} tasks + {fifth} processes x 1 task"),
            tasks_per_process: std::iter::once(fifth)
                .chain(std::iter::repeat_n(1, fifth))
                .collect(),
        },
    ]
}

/// What one scenario measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Acquisitions of each process (all its tasks together).
    pub acquisitions_per_process: Vec<u64>,
    /// Storage requests of every locker (acquisitions and releases).
    pub requests: u64,
    /// From the start until the last task released.
    pub elapsed: Duration,
    /// The waits added up, from calling `lock` to holding, local line included.
    pub total_wait: Duration,
    /// The longest wait.
    pub max_wait: Duration,
    /// Times a task took the lock while another held it.
    pub exclusion_violations: u64,
}

impl Outcome {
    /// Every acquisition of every process.
    pub fn acquisitions(&self) -> u64 {
        self.acquisitions_per_process.iter().sum()
    }

    /// Storage requests per acquisition.
    pub fn requests_per_acquisition(&self) -> f64 {
        self.requests as f64 / self.acquisitions().max(1) as f64
    }

    /// The first process's share of the acquisitions.
    pub fn first_share(&self) -> f64 {
        let first = self.acquisitions_per_process.first().copied().unwrap_or(0);
        first as f64 / self.acquisitions().max(1) as f64
    }

    /// Jain's index over processes, if there is more than one.
    pub fn jain(&self) -> Option<f64> {
        let shares: Vec<f64> = self
            .acquisitions_per_process
            .iter()
            .map(|&count| count as f64)
            .collect();
        (shares.len() > 1).then(|| crate::stats::jain(&shares))
    }
}

/// One scenario's figures as `local-lines.json` has them.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// What the scenario is.
    pub scenario: String,
    /// Tasks per process; process 0 is the busy one.
    pub tasks_per_process: Vec<usize>,
    /// Acquisitions of each process.
    pub acquisitions_per_process: Vec<u64>,
    /// Storage requests per acquisition, release included.
    pub requests_per_acquisition: f64,
    /// Run time per acquisition, in ms.
    pub ms_per_acquisition: f64,
    /// Mean wait from the call to `lock`, in ms.
    pub mean_wait_ms: f64,
    /// Longest wait, in ms.
    pub max_wait_ms: f64,
    /// The first process's share of the acquisitions.
    pub first_share: f64,
    /// Jain's index over processes (none with one process).
    pub jain: Option<f64>,
    /// Times a task took the lock while another held it.
    pub exclusion_violations: u64,
}

impl ScenarioReport {
    fn new(scenario: &Scenario, outcome: &Outcome) -> Self {
        let acquisitions = outcome.acquisitions().max(1) as f64;
        ScenarioReport {
            scenario: scenario.name.clone(),
            tasks_per_process: scenario.tasks_per_process.clone(),
            acquisitions_per_process: outcome.acquisitions_per_process.clone(),
            requests_per_acquisition: outcome.requests_per_acquisition(),
            ms_per_acquisition: ms(outcome.elapsed) / acquisitions,
            mean_wait_ms: ms(outcome.total_wait) / acquisitions,
            max_wait_ms: ms(outcome.max_wait),
            first_share: outcome.first_share(),
            jain: outcome.jain(),
            exclusion_violations: outcome.exclusion_violations,
        }
    }

    /// The report's line.
    fn row(&self) -> String {
        format!(
            "{:<46} {:>12} {:>8.2} {:>8.3} {:>10.2} {:>9.1} {:>13.1}% {:>6}",
            self.scenario,
            self.acquisitions_per_process.iter().sum::<u64>(),
            self.requests_per_acquisition,
            self.ms_per_acquisition,
            self.mean_wait_ms,
            self.max_wait_ms,
            self.first_share * 100.0,
            self.jain
                .map_or_else(|| "-".to_owned(), |jain| format!("{jain:.3}"))
        )
    }
}

/// Runs `local-lines`.
pub fn run(args: &LocalLinesArgs) -> Result<(), BoxError> {
    if !(MIN_RUN_TIME..=MAX_RUN_TIME).contains(&args.run_time) {
        return Err(format!(
            "--run-time must be between {MIN_RUN_TIME:?} and {MAX_RUN_TIME:?}, not {:?}",
            args.run_time
        )
        .into());
    }
    let lock = LockConfig {
        fencing: false,
        ..LockConfig::default()
    };
    let scenarios = scenarios(usize::from(args.tasks));
    let mut lock_ids = Vec::new();
    for index in 1..=scenarios.len() {
        lock_ids.push(
            LockId::new(format!("{}-{index}", args.lock_id))
                .map_err(|error| format!("--lock-id: {error}"))?,
        );
    }
    let out = crate::options::create_out_dir(args.out.as_ref())?;
    // A local cluster lives until the end of the run.
    let (_cluster, backend) = if crate::options::is_local(&args.backend.cassandra) {
        let (cluster, config) =
            crate::local::start_for_run(args.local_nodes, &args.backend, &lock, true)?;
        (Some(cluster), Backend::Cassandra(Box::new(config)))
    } else {
        let backend = args
            .backend
            .backend(&lock, SimulationDefaults::EXPERIMENT)?;
        (None, backend)
    };
    let mut reports = Vec::with_capacity(scenarios.len());
    let virtual_time = matches!(backend, Backend::Simulated(_));
    let runtime = crate::options::runtime(virtual_time, !virtual_time)?;
    let mut text = format!(
        "Local lines: {}; each scenario {} of {}, no critical section, fencing off\n",
        backend.describe(),
        ScenarioEnd::of(args).describe(),
        if virtual_time {
            "virtual time"
        } else {
            "wall-clock time"
        }
    );
    let _ = writeln!(
        text,
        "  {:<46} {:>12} {:>8} {:>8} {:>10} {:>9} {:>14} {:>6}",
        "scenario",
        "acquisitions",
        "req/acq",
        "ms/acq",
        "mean wait",
        "max wait",
        "first's share",
        "Jain"
    );
    let mut violations = 0;
    for (index, (scenario, lock_id)) in scenarios.iter().zip(&lock_ids).enumerate() {
        let seed = mix(args.backend.seed, 0x0011_0000 + index as u64);
        let outcome = runtime.block_on(run_scenario(
            &backend,
            &lock,
            seed,
            scenario,
            ScenarioEnd::of(args),
            lock_id,
        ))?;
        violations += outcome.exclusion_violations;
        let report = ScenarioReport::new(scenario, &outcome);
        let _ = writeln!(text, "  {}", report.row());
        reports.push(report);
    }
    let _ = writeln!(text, "  mutual exclusion violations: {violations}");
    crate::options::write_json_and_report(&out, "local-lines.json", &reports, text, violations)
}

/// Runs one scenario on `backend`: a locker per process, shared by its tasks.
pub async fn run_scenario(
    backend: &Backend,
    lock: &LockConfig,
    seed: u64,
    scenario: &Scenario,
    end: ScenarioEnd,
    lock_id: &LockId,
) -> Result<Outcome, BoxError> {
    let tally = Arc::new(RequestTally::default());
    let processes = scenario.tasks_per_process.len();
    match backend {
        Backend::Simulated(cluster_config) => {
            let cluster = MemoryCluster::new(ClusterConfig {
                seed,
                ..cluster_config.clone()
            })?;
            let lockers = simulated_lockers(
                &cluster,
                LockerSetup::new(processes, |_| lock.clone(), seed, &tally),
            )?;
            take_turns(lockers, scenario, end, lock_id, &tally, backend.timeline()).await
        }
        Backend::Cassandra(cassandra_config) => {
            let lockers = cassandra_lockers(
                cassandra_config,
                LockerSetup::new(processes, |_| lock.clone(), seed, &tally),
            )
            .await?;
            take_turns(lockers, scenario, end, lock_id, &tally, backend.timeline()).await
        }
    }
}

/// What one task saw.
#[derive(Default)]
struct TaskTurns {
    acquisitions: u64,
    total_wait: Duration,
    max_wait: Duration,
}

/// Has every task of `scenario` take the lock again and again until `end`.
async fn take_turns<S: LockStorage>(
    lockers: Vec<Locker<S>>,
    scenario: &Scenario,
    end: ScenarioEnd,
    lock_id: &LockId,
    tally: &RequestTally,
    started: Timeline,
) -> Result<Outcome, BoxError> {
    let taken = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for (process, (locker, &task_count)) in
        lockers.iter().zip(&scenario.tasks_per_process).enumerate()
    {
        for _ in 0..task_count {
            let (locker, lock_id) = (locker.clone(), lock_id.clone());
            let (taken, inside, violations) = (taken.clone(), inside.clone(), violations.clone());
            tasks.spawn(async move {
                let mut turns = TaskTurns::default();
                let ended = || match end {
                    ScenarioEnd::After(run_time) => started.elapsed() >= run_time,
                    ScenarioEnd::Acquisitions(count) => taken.load(Ordering::SeqCst) >= count,
                };
                while !ended() {
                    // From the call, local line included (the guard's own wait counts only
                    // the time in the distributed queue).
                    let asked = started.elapsed();
                    let guard = locker.lock(&lock_id).await?;
                    let wait = started.elapsed().saturating_sub(asked);
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::Relaxed);
                    }
                    turns.acquisitions += 1;
                    taken.fetch_add(1, Ordering::SeqCst);
                    turns.total_wait += wait;
                    turns.max_wait = turns.max_wait.max(wait);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await?;
                }
                Ok::<_, Error>((process, turns))
            });
        }
    }
    let mut outcome = Outcome {
        acquisitions_per_process: vec![0; lockers.len()],
        ..Outcome::default()
    };
    for (process, turns) in crate::tasks::join_all(&mut tasks, &scenario.name, "task").await? {
        outcome.acquisitions_per_process[process] += turns.acquisitions;
        outcome.total_wait += turns.total_wait;
        outcome.max_wait = outcome.max_wait.max(turns.max_wait);
    }
    outcome.elapsed = started.elapsed();
    outcome.requests = tally.counts().total();
    outcome.exclusion_violations = violations.load(Ordering::Relaxed);
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenarios_put_the_busy_process_first() {
        let [spread, busy, mixed] = scenarios(50);
        assert_eq!(spread.tasks_per_process, vec![1; 50]);
        assert_eq!(busy.tasks_per_process, vec![50]);
        assert_eq!(mixed.tasks_per_process.len(), 11);
        assert_eq!(mixed.tasks_per_process[0], 10);
        assert!(mixed.tasks_per_process[1..].iter().all(|&tasks| tasks == 1));
        assert_eq!(mixed.name, "1 process x 10 tasks + 10 processes x 1 task");
    }

    #[test]
    fn shares_and_fairness_come_from_the_per_process_counts() {
        let outcome = Outcome {
            acquisitions_per_process: vec![30, 10, 20],
            requests: 360,
            ..Outcome::default()
        };
        assert_eq!(outcome.acquisitions(), 60);
        assert!((outcome.requests_per_acquisition() - 6.0).abs() < 1e-9);
        assert!((outcome.first_share() - 0.5).abs() < 1e-9);
        // (60)² / (3 × (900 + 100 + 400)) = 3600 / 4200.
        assert!((outcome.jain().unwrap_or(0.0) - 3600.0 / 4200.0).abs() < 1e-9);
        let alone = Outcome {
            acquisitions_per_process: vec![7],
            ..Outcome::default()
        };
        assert_eq!(alone.jain(), None);
    }
}
