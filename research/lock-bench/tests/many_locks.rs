//! `many-locks` on the simulator (virtual time, 1 s per scenario, 32 tasks over 4
//! processes): no two tasks ever hold one id, every acquisition succeeds, a hot Zipf id
//! serves its tasks at an even pace, and spreading the load over many ids multiplies the
//! throughput.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use lock_bench::experiment::Backend;
use lock_bench::many_locks::{
    Distribution, Load, ManyLocksAlgorithm, Outcome, Scenario, ScenarioReport, run_scenario,
};
use lock_core::LockConfig;
use lock_storage_memory::ClusterConfig;

fn run(keys: u64, distribution: Distribution) -> (Outcome, ScenarioReport) {
    let backend = Backend::Simulated(ClusterConfig {
        latency: lock_bench::units::LAN,
        gc_grace: Duration::from_secs(1),
        timer_dilation: 1_000,
        ..ClusterConfig::default()
    });
    let lock = LockConfig {
        fencing: false,
        ..LockConfig::default()
    };
    let load = Load {
        lockers: 32,
        processes: 4,
        critical_section: Duration::from_millis(1),
        run_time: Duration::from_secs(1),
        acquire_timeout: Duration::from_secs(10),
        zipf_exponent: 1.0,
        hot_ids: 3,
    };
    let scenario = Scenario {
        algorithm: ManyLocksAlgorithm::Queue,
        keys,
        distribution,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let outcome = runtime
        .block_on(run_scenario(
            &backend,
            &lock,
            &load,
            &scenario,
            "many-test",
            0,
            5,
        ))
        .unwrap();
    let report = ScenarioReport::new(&scenario, &outcome);
    (outcome, report)
}

#[test]
fn many_ids_multiply_the_throughput_and_a_hot_id_stays_fair() {
    let (hot_outcome, hot) = run(10, Distribution::Zipf);
    let (_, spread) = run(1000, Distribution::Uniform);
    for report in [&hot, &spread] {
        assert_eq!(report.exclusion_violations, 0, "{report:?}");
        assert_eq!((report.timeouts, report.errors), (0, 0), "{report:?}");
    }
    assert_eq!(hot_outcome.tasks.len(), 32);
    assert!(hot_outcome.elapsed >= Duration::from_secs(1));
    // One id takes about a third of the draws and holds its tasks in line: a few hundred
    // acquisitions a second. A thousand ids seldom meet.
    assert!(hot.acquisitions > 300, "{hot:?}");
    assert!(
        spread.acquisitions_per_second > 5.0 * hot.acquisitions_per_second,
        "{spread:?} against {hot:?}"
    );
    assert!(spread.wait_ms.p50 < 5.0, "{spread:?}");
    // Every task wanting a hot id is served at about the same pace.
    assert!(hot.hot_jain.unwrap() > 0.9, "{hot:?}");
}
