//! A tiny experiment end to end (2 processes, 20 acquisitions each, virtual time): the
//! report has every run, table and target, the queue algorithm is fair, mutual exclusion
//! holds, and the files and pictures are written.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use lock_bench::experiment::{self, Backend, RunSpec, Settings, Variant};
use lock_bench::report::{Report, SettingsReport};
use lock_core::{LockConfig, PollConfig};
use lock_storage_memory::ClusterConfig;

const PROCESSES: usize = 2;
const ACQUISITIONS: u32 = 20;

#[test]
fn a_tiny_experiment_reports_every_run_and_the_queue_is_fair() {
    let backend = Backend::Simulated(ClusterConfig {
        latency: lock_bench::units::LAN,
        gc_grace: Duration::from_secs(13),
        ..ClusterConfig::default()
    });
    let settings = Settings {
        acquisitions: ACQUISITIONS,
        critical_section: Duration::ZERO,
        pause: Duration::ZERO,
        seed: 7,
        lock_id: "e2e".into(),
        lock: LockConfig::default(),
        progress: false,
        handoffs: true,
        wake_hints: false,
    };
    let specs: Vec<RunSpec> = [1, PROCESSES]
        .into_iter()
        .flat_map(|processes| {
            [Variant::QUEUE, Variant::QUEUE_FENCED, Variant::BASELINE]
                .map(|variant| RunSpec { variant, processes })
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (round_trip, runs) = runtime.block_on(async {
        let round_trip = experiment::measure_round_trip(&backend, &settings, 50)
            .await
            .unwrap();
        let mut runs = Vec::new();
        for spec in &specs {
            runs.push(
                experiment::run(&backend, &settings, *spec, "test")
                    .await
                    .unwrap(),
            );
        }
        (round_trip, runs)
    });
    assert!(
        round_trip.r() >= Duration::from_millis(1),
        "r is at least one timer tick"
    );

    for run in &runs {
        assert_eq!(
            run.acquisitions.len(),
            run.spec.processes * ACQUISITIONS as usize
        );
        assert_eq!(run.exclusion_violations, 0, "{:?}", run.spec);
        for process in 0..run.spec.processes {
            let numbers: Vec<u32> = run
                .acquisitions
                .iter()
                .filter(|a| a.process == process)
                .map(|a| a.number)
                .collect();
            assert_eq!(numbers, (1..=ACQUISITIONS).collect::<Vec<_>>());
        }
    }

    let settings_report = SettingsReport::new(&settings, backend.describe(), "virtual");
    let report = Report::new(
        settings_report,
        round_trip,
        &runs,
        Variant::QUEUE,
        Duration::ZERO,
    );
    assert_eq!(report.runs.len(), specs.len());
    assert_eq!(report.targets.len(), 4, "{:?}", report.targets);

    let queue = report.run(Variant::QUEUE, PROCESSES).unwrap();
    assert!(
        queue.max_over_mean <= 3.0,
        "queue max/mean {}",
        queue.max_over_mean
    );
    assert!(
        queue.fairness.mean > 0.9,
        "queue fairness {:?}",
        queue.fairness
    );
    // Write and read the queue, write and read the main row, every acquisition on the fast
    // path: the first because the locker knows nothing of the lock yet, the others because
    // the previous one found it idle.
    let alone = report.run(Variant::QUEUE, 1).unwrap();
    assert_eq!(
        alone.acquire_requests_per_acquisition, 4.0,
        "write+read queue, write+read main"
    );
    let fenced = report.run(Variant::QUEUE_FENCED, 1).unwrap();
    // Two more for the token, and the queue delete that goes with the fence write (the
    // holder leaves the queue as it takes the lock; without fencing its lease sends it).
    assert_eq!(
        fenced.acquire_requests_per_acquisition, 7.0,
        "two more for the token and the queue delete"
    );

    let text = report.render();
    for needle in [
        "Table 1: Mean time to acquire the lock",
        "Table 2: Maximum time to acquire the lock",
        "thesis new",
        "Jain",
        "Cost of fencing tokens",
        "Where a hand-off's time goes",
        "Targets: the new lock's maximum wait at most 3 times its mean",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    // Two processes take turns: nearly every hold of one follows a release by the other.
    let handoffs = queue.handoffs.unwrap();
    assert!(
        handoffs.handoffs + handoffs.other_holds == 2 * u64::from(ACQUISITIONS)
            && handoffs.handoffs >= u64::from(ACQUISITIONS),
        "{handoffs:?}"
    );
    assert!(
        handoffs.main_write_ms >= 1.0 && handoffs.total_ms >= 3.0,
        "a round trip a step at least: {handoffs:?}"
    );

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("lock-bench-e2e");
    std::fs::create_dir_all(&dir).unwrap();
    lock_bench::report::write_files(&dir, &report, &runs).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), specs.len());
    assert!(json["round_trip"]["r_ms"].as_f64().unwrap() > 0.0);
    let mut csv = csv::Reader::from_path(dir.join("acquisitions.csv")).unwrap();
    assert_eq!(
        csv.headers().unwrap(),
        vec![
            "algorithm",
            "processes",
            "process",
            "number",
            "acquired_at_ms",
            "wait_ms",
            "requests"
        ]
    );
    let expected_rows: usize = runs.iter().map(|run| run.acquisitions.len()).sum();
    assert_eq!(csv.records().map(Result::unwrap).count(), expected_rows);
    // Only the contended runs' pictures: drawing is slow in a debug build.
    let contended: Vec<_> = runs
        .iter()
        .filter(|run| run.spec.processes == PROCESSES)
        .cloned()
        .collect();
    let pictures = lock_bench::plot::draw_all(&dir, &contended, Variant::QUEUE).unwrap();
    assert!(pictures.iter().any(|p| p.ends_with("figure1-queue-p2.png")));
    assert!(
        pictures
            .iter()
            .any(|p| p.ends_with("figure2-baseline-p2.png"))
    );
    assert!(
        pictures
            .iter()
            .any(|p| p.ends_with("wait-distribution.png"))
    );
    for picture in pictures {
        let bytes = std::fs::read(&picture).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{}", picture.display());
    }
}

/// `tombstones` in miniature: within gc_grace, every acquisition leaves dead cells that the
/// next reads step over, so with every read starting the safe 4 s margin back (lock-core's
/// default) the windows show them piling up and, with a read cost per dead cell,
/// acquisitions slowing down; with the experiment's 1 s gc_grace they stay few, and so
/// they do with the adaptive margin, which looks back 200 acquisitions' worth.
#[test]
fn tombstones_pile_up_within_gc_grace_and_slow_acquisition() {
    let settings = Settings {
        acquisitions: 300,
        critical_section: Duration::ZERO,
        pause: Duration::ZERO,
        seed: 7,
        lock_id: "e2e-tombstones".into(),
        lock: LockConfig::default(),
        progress: false,
        handoffs: false,
        wake_hints: false,
    };
    let spec = RunSpec {
        variant: Variant::QUEUE,
        processes: 2,
    };
    let run = |gc_grace: u64, settings: &Settings| {
        let backend = Backend::Simulated(ClusterConfig {
            latency: lock_bench::units::LAN,
            gc_grace: Duration::from_secs(gc_grace),
            dead_cell_read_cost: Duration::from_micros(10),
            ..ClusterConfig::default()
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (result, samples) = runtime
            .block_on(experiment::run_sampled(
                &backend, settings, spec, "test", 200,
            ))
            .unwrap();
        assert_eq!(result.exclusion_violations, 0);
        assert_eq!(samples.len(), 4, "before, after 200, 400, and 600");
        lock_bench::tombstones::TombstoneReport::new(String::new(), &result, &samples, true)
    };
    let kept = run(60, &settings);
    let first = &kept.windows[0];
    let last = &kept.windows[2];
    assert!(
        last.stored_dead_cells.unwrap() > first.stored_dead_cells.unwrap(),
        "{kept:?}"
    );
    assert!(
        last.dead_cells_per_read.unwrap() > 2.0 * first.dead_cells_per_read.unwrap(),
        "{kept:?}"
    );
    assert!(kept.slowdown > 1.2, "{kept:?}");
    let purged = run(1, &settings);
    assert!(
        purged.windows[2].dead_cells_per_read.unwrap() < last.dead_cells_per_read.unwrap() / 2.0,
        "{purged:?}"
    );
    let adapted = run(
        60,
        &Settings {
            lock: LockConfig {
                poll: PollConfig {
                    margin_acquisitions: lock_core::config::RECOMMENDED_MARGIN_ACQUISITIONS,
                    ..PollConfig::default()
                },
                ..LockConfig::default()
            },
            ..settings.clone()
        },
    );
    assert!(
        adapted.windows[2].dead_cells_per_read.unwrap() < last.dead_cells_per_read.unwrap() / 2.0,
        "{adapted:?}"
    );
}
