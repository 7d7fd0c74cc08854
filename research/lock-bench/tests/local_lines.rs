//! `local-lines` on the simulator (virtual time, 2 s per scenario, 20 tasks): one process's
//! tasks cost the storage what one uncontended owner costs, and a busy process among
//! one-task processes gets one turn per pass of the queue. A scenario can also end after a
//! count of acquisitions instead.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use lock_bench::experiment::Backend;
use lock_bench::local_lines::{Outcome, ScenarioEnd, run_scenario, scenarios};
use lock_core::{LockConfig, LockId};
use lock_storage_memory::ClusterConfig;

const TASKS: usize = 20;
const RUN_TIME: Duration = Duration::from_secs(2);

fn run_all(end: ScenarioEnd) -> Vec<Outcome> {
    let backend = Backend::Simulated(ClusterConfig {
        latency: lock_bench::units::LAN,
        gc_grace: Duration::from_secs(1),
        ..ClusterConfig::default()
    });
    let lock = LockConfig {
        fencing: false,
        ..LockConfig::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    scenarios(TASKS)
        .iter()
        .enumerate()
        .map(|(index, scenario)| {
            let lock_id = LockId::new(format!("local-lines-test-{index}")).unwrap();
            runtime
                .block_on(run_scenario(
                    &backend,
                    &lock,
                    11 + index as u64,
                    scenario,
                    end,
                    &lock_id,
                ))
                .unwrap()
        })
        .collect()
}

#[test]
fn one_process_costs_one_waiter_and_a_busy_process_gets_one_turn_per_pass() {
    let [spread, busy, mixed]: [Outcome; 3] =
        run_all(ScenarioEnd::After(RUN_TIME)).try_into().unwrap();
    for (name, outcome) in [("spread", &spread), ("busy", &busy), ("mixed", &mixed)] {
        assert_eq!(outcome.exclusion_violations, 0, "{name}");
        assert!(outcome.acquisitions() > 200, "{name}: {outcome:?}");
        assert!(outcome.elapsed >= RUN_TIME, "{name}: {:?}", outcome.elapsed);
    }
    // Twenty processes contend in the distributed queue and poll it; twenty tasks of one process
    // wait in the process, and its lock is idle for each (the fast path: six requests, the
    // release included).
    assert!(
        spread.requests_per_acquisition() > 7.0,
        "{}",
        spread.requests_per_acquisition()
    );
    assert!(
        busy.requests_per_acquisition() < 6.1,
        "{}",
        busy.requests_per_acquisition()
    );
    assert_eq!(busy.first_share(), 1.0);
    // Among 4 tasks of one process and 4 processes of one task, the busy process gets about
    // a fifth of the turns, not half or more: one per pass of the queue.
    assert_eq!(mixed.acquisitions_per_process.len(), 5);
    let share = mixed.first_share();
    assert!((0.17..=0.23).contains(&share), "busy share {share}");
    assert!(mixed.jain().unwrap() > 0.98, "{mixed:?}");
}

#[test]
fn a_scenario_ends_after_its_count_of_acquisitions() {
    const COUNT: u64 = 60;
    for (outcome, scenario) in run_all(ScenarioEnd::Acquisitions(COUNT))
        .iter()
        .zip(scenarios(TASKS))
    {
        let tasks = scenario.tasks_per_process.iter().sum::<usize>() as u64;
        // Each task finishes the acquisition it started when the count is reached.
        assert!(
            (COUNT..COUNT + tasks).contains(&outcome.acquisitions()),
            "{}: {outcome:?}",
            scenario.name
        );
        assert_eq!(outcome.exclusion_violations, 0, "{}", scenario.name);
    }
}
