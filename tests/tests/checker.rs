//! The checks can fail: fabricated histories with the faults they look for, runs beyond
//! the assumptions judged by the regime-(a) checker, and backends broken on purpose run
//! through the conformance scenarios.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fair_lock::Clock;
use lock_core::storage::{Cell, CellDelete, CellWrite, RowRead};
use lock_core::{Error, LockConfig, LockStorage};
use lock_storage_memory::{ClockSkew, Latency, MemoryClient};
use lock_tests::backend::{Backend, MemoryBackend};
use lock_tests::bounds::{self, check_within_assumptions};
use lock_tests::history::{
    Acquisition, FencedResource, bypassers, global_time_regressions, overlaps,
    stale_writes_accepted, token_order_violations, untruthful_grants,
};
use lock_tests::sim::{self, ContenderPlan, Fault, FaultKind, LockErrors, Run, Schedule, Victim};
use lock_tests::{conformance, virtual_time};

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn held(
    id: usize,
    contender: usize,
    enqueued: u64,
    granted: u64,
    left: u64,
    token: u64,
) -> Acquisition {
    Acquisition {
        id,
        contender,
        requested: ms(enqueued),
        enqueued: ms(enqueued),
        attempts: 1,
        granted: Some(ms(granted)),
        left: Some(ms(left)),
        token: Some(token),
        honours_lost: true,
        queue_visible: Some(ms(enqueued + 1)),
        ..Acquisition::default()
    }
}

#[test]
fn overlapping_sections_are_found_and_adjacent_ones_are_not() {
    let history = [
        held(0, 0, 0, 0, 10, 1),
        held(1, 1, 0, 10, 20, 2),
        held(2, 2, 0, 15, 30, 3),
    ];
    let found = overlaps(&history);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].first, found[0].second), (1, 2));
    assert_eq!((found[0].from, found[0].to), (ms(15), Some(ms(20))));
}

#[test]
fn a_guard_claiming_the_lease_at_another_grant_is_found() {
    let mut history = [held(0, 0, 0, 0, 10, 1), held(1, 1, 0, 5, 20, 2)];
    assert!(untruthful_grants(&history).is_empty());
    history[1].inside_at_grant = vec![(0, true)];
    assert_eq!(untruthful_grants(&history), [(0, 1)]);
    history[1].inside_at_grant = vec![(0, false)];
    assert!(untruthful_grants(&history).is_empty());
}

#[test]
fn tokens_out_of_grant_order_are_found() {
    let history = [
        held(0, 0, 0, 0, 10, 5),
        held(1, 1, 0, 20, 30, 4),
        held(2, 0, 0, 40, 50, 6),
    ];
    assert_eq!(token_order_violations(&history), [(0, 1)]);
    let mut untokened = history.clone();
    untokened[2].token = None;
    assert_eq!(token_order_violations(&untokened), [(0, 1), (1, 2)]);
    // A retake: the same owner holds again with its token; another owner may not.
    let mut retaken = [held(0, 0, 0, 0, 10, 5), held(1, 0, 1, 20, 30, 5)];
    assert_eq!(token_order_violations(&retaken), [(0, 1)], "owners unknown");
    retaken[0].owner = Some("owner".to_owned());
    retaken[1].owner = Some("owner".to_owned());
    assert!(token_order_violations(&retaken).is_empty());
    retaken[1].owner = Some("another".to_owned());
    assert_eq!(token_order_violations(&retaken), [(0, 1)]);
}

#[test]
fn bypass_counts_other_contenders_granted_while_waiting() {
    let history = [
        held(0, 0, 0, 1, 10, 1),
        held(1, 1, 2, 10, 20, 2),
        held(2, 2, 5, 20, 30, 3),
        held(3, 1, 21, 30, 40, 4),
    ];
    let passed = bypassers(&history);
    assert_eq!(passed[&2], [1]);
    assert_eq!(passed[&1], Vec::<usize>::new());
}

#[test]
fn the_fenced_resource_refuses_lower_tokens_and_stale_acceptances_are_found() {
    let mut resource = FencedResource::default();
    assert!(resource.write(ms(1), 0, 10));
    assert!(resource.write(ms(2), 0, 10), "the same holder writes again");
    assert!(resource.write(ms(3), 1, 11));
    assert!(
        !resource.write(ms(4), 0, 10),
        "the earlier holder is refused"
    );
    let history = [held(0, 0, 0, 0, 10, 10), held(1, 1, 0, 3, 20, 11)];
    assert!(stale_writes_accepted(&resource.log, &history).is_empty());
    let mut forged = resource.log.clone();
    forged[3].accepted = true;
    let stale = stale_writes_accepted(&forged, &history);
    assert_eq!(stale.len(), 1);
    assert_eq!((stale[0].0.acquisition, stale[0].1.acquisition), (0, 1));
}

fn plan(sections: &[u64]) -> ContenderPlan {
    ContenderPlan {
        clock: ClockSkew::default(),
        start: Duration::ZERO,
        sections: sections.iter().copied().map(ms).collect(),
        think: Duration::ZERO,
    }
}

fn schedule(contenders: Vec<ContenderPlan>) -> Schedule {
    Schedule::simple(1, Latency::Fixed(Duration::from_micros(500)), contenders)
}

fn fabricated(acquisitions: Vec<Acquisition>) -> Run {
    Run {
        acquisitions,
        writes: Vec::new(),
        lock_errors: LockErrors::default(),
        live_at_quiescence: Vec::new(),
        live_after_ttl: Vec::new(),
        global_time: Vec::new(),
        finished_at: Some(ms(100_000)),
        max_round_trip: ms(1),
        request_times: Vec::new(),
    }
}

#[test]
fn the_regime_a_checker_passes_a_clean_history_and_rejects_broken_ones() {
    let plans = schedule(vec![plan(&[10]), plan(&[10])]);
    let clean = fabricated(vec![held(0, 0, 0, 1, 11, 1), held(1, 1, 2, 12, 22, 2)]);
    check_within_assumptions(&plans, &clean).unwrap();

    let overlap = fabricated(vec![held(0, 0, 0, 1, 11, 1), held(1, 1, 2, 5, 15, 2)]);
    let error = check_within_assumptions(&plans, &overlap).unwrap_err();
    assert!(error.contains("overlap"), "{error}");

    let starved = fabricated(vec![
        held(0, 0, 0, 1, 11, 1),
        held(1, 1, 2, 60_000, 60_010, 2),
    ]);
    let error = check_within_assumptions(&plans, &starved).unwrap_err();
    assert!(error.contains("above its bound"), "{error}");

    let unfinished = fabricated(vec![held(0, 0, 0, 1, 11, 1)]);
    let error = check_within_assumptions(&plans, &unfinished).unwrap_err();
    assert!(error.contains("completed 0 of 1"), "{error}");

    let three = schedule(vec![plan(&[10]), plan(&[10]), plan(&[10])]);
    // Acquisition 2 enqueued 100 ms after acquisition 1, with the same clock, after 1's
    // queue cell was visible, and was still granted first: an overtake no clock explains.
    let overtaken = fabricated(vec![
        held(0, 0, 0, 1, 300, 1),
        held(1, 1, 2, 320, 330, 3),
        held(2, 2, 102, 305, 315, 2),
    ]);
    let error = check_within_assumptions(&three, &overtaken).unwrap_err();
    assert!(error.contains("granted first"), "{error}");
    // The same order is fine when contender 2's clock runs 200 ms behind.
    let mut behind = three.clone();
    behind.contenders[2].clock = ClockSkew::offset(-200_000);
    check_within_assumptions(&behind, &overtaken).unwrap();
}

#[test]
fn failed_lock_calls_are_rejected_without_faults_and_unless_of_a_storage_kind() {
    let calm = schedule(vec![plan(&[10]), plan(&[10])]);
    let mut faulty = calm.clone();
    faulty.faults = vec![Fault {
        at: ms(0),
        duration: ms(5),
        kind: FaultKind::Pause(1),
    }];
    let mut run = fabricated(vec![held(0, 0, 0, 1, 11, 1), held(1, 1, 2, 12, 22, 2)]);
    check_within_assumptions(&calm, &run).unwrap();
    run.lock_errors
        .record(&Error::unavailable("write queue cell", "no quorum"));
    run.lock_errors
        .record(&Error::outcome_unknown("write main cell", "timed out"));
    assert_eq!(
        (run.lock_errors.unavailable, run.lock_errors.outcome_unknown),
        (1, 1)
    );
    let error = check_within_assumptions(&calm, &run).unwrap_err();
    assert!(error.contains("in a run without faults"), "{error}");
    check_within_assumptions(&faulty, &run).unwrap();
    run.lock_errors
        .record(&Error::Internal("a machine broke its contract"));
    assert_eq!(run.lock_errors.total(), 3);
    let error = check_within_assumptions(&faulty, &run).unwrap_err();
    assert!(error.contains("other than StorageUnavailable"), "{error}");
}

#[test]
fn cells_left_live_after_the_run_are_rejected() {
    let calm = schedule(vec![plan(&[10]), plan(&[10])]);
    let mut faulty = calm.clone();
    faulty.faults = vec![Fault {
        at: ms(0),
        duration: ms(5),
        kind: FaultKind::StopReplica(0),
    }];
    let clean = fabricated(vec![held(0, 0, 0, 1, 11, 1), held(1, 1, 2, 12, 22, 2)]);
    let mut left = clean.clone();
    left.live_at_quiescence = vec![(0, "queue", "1700000000000000_c1".into())];
    let error = check_within_assumptions(&calm, &left).unwrap_err();
    assert!(error.contains("finished and released"), "{error}");
    // With a fault a release's deletes may not land; the cells must expire instead.
    check_within_assumptions(&faulty, &left).unwrap();
    left.live_after_ttl = left.live_at_quiescence.clone();
    let error = check_within_assumptions(&faulty, &left).unwrap_err();
    assert!(error.contains("a lease TTL after"), "{error}");
}

#[test]
fn global_time_going_backwards_is_rejected() {
    let samples = vec![
        (ms(0), 0, 100),
        (ms(0), 1, 90),
        (ms(50), 1, 120),
        (ms(100), 0, 130),
        (ms(150), 1, 110),
    ];
    assert_eq!(
        global_time_regressions(&samples),
        [(1, (ms(50), 120), (ms(150), 110))]
    );
    assert!(global_time_regressions(&samples[..4]).is_empty());
    let plans = schedule(vec![plan(&[10]), plan(&[10])]);
    let mut run = fabricated(vec![held(0, 0, 0, 1, 11, 1), held(1, 1, 2, 12, 22, 2)]);
    run.global_time = samples[..4].to_vec();
    check_within_assumptions(&plans, &run).unwrap();
    run.global_time = samples;
    let error = check_within_assumptions(&plans, &run).unwrap_err();
    assert!(error.contains("GlobalTime went backwards"), "{error}");
}

#[test]
fn the_regime_a_checker_rejects_a_real_run_beyond_the_assumptions() {
    let mut paused = schedule(vec![plan(&[25_000]), plan(&[100, 100])]);
    paused.contenders[1].start = ms(50);
    paused.victim = Some(Victim {
        pause_after: ms(100),
        pause: Duration::from_secs(12),
    });
    let run = sim::run(&paused);
    let error = check_within_assumptions(&paused, &run).unwrap_err();
    assert!(error.contains("overlap"), "{error}");
    let report = bounds::check_paused_victim(&run).unwrap();
    assert!(report.overlaps >= 1 && report.refused >= 1, "{report:?}");
}

/// A backend broken on purpose: `client` makes its clients.
struct Broken<S> {
    client: Box<dyn Fn() -> (S, Arc<dyn Clock>) + Send + Sync>,
}

impl<S: LockStorage + Clone> Backend for Broken<S> {
    type Storage = S;

    fn name(&self) -> &str {
        "broken on purpose"
    }

    fn lock_config(&self) -> LockConfig {
        LockConfig::default()
    }

    fn client(&self) -> (S, Arc<dyn Clock>) {
        (self.client)()
    }

    fn slack(&self) -> Duration {
        ms(50)
    }
}

/// Every client gets a storage of its own: nothing is shared, as with a keyspace at
/// consistency ONE whose replicas never meet.
#[test]
#[should_panic(expected = "two holders")]
fn the_suite_catches_a_store_whose_clients_share_nothing() {
    virtual_time(
        "the_suite_catches_a_store_whose_clients_share_nothing",
        async {
            let disjoint = Broken {
                client: Box::new(|| MemoryBackend::new(1).client()),
            };
            conformance::one_owner_at_a_time(&disjoint).await;
        },
    );
}

/// A store that acknowledges deletes without applying them.
#[derive(Clone)]
struct IgnoresDeletes(MemoryClient);

#[async_trait]
impl LockStorage for IgnoresDeletes {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        self.0.write_cell(write).await
    }

    async fn delete_cell(&self, _delete: CellDelete) -> Result<(), Error> {
        Ok(())
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        self.0.read_row(read).await
    }
}

#[test]
#[should_panic(expected = "free after release")]
fn the_suite_catches_a_store_that_ignores_deletes() {
    virtual_time("the_suite_catches_a_store_that_ignores_deletes", async {
        let backend = MemoryBackend::new(1);
        let deletes_ignored = Broken {
            client: Box::new(move || {
                let (client, clock) = backend.client();
                (IgnoresDeletes(client), clock)
            }),
        };
        conformance::release_frees_at_once(&deletes_ignored).await;
    });
}
