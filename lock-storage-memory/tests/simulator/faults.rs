//! Faults, timeouts, latency and the bookkeeping around them.

use std::time::Duration;

use fair_lock::Clock;
use lock_core::LockStorage;
use lock_core::storage::{RowKey, RowRead, StorageRequest, StorageResponse};
use lock_storage_memory::{
    ClientId, ClientOptions, ClockSkew, ClusterConfig, Consistency, FailureDetail, Latency,
    MemoryClient, MemoryCluster, MemoryError, ReplicaId,
};
use tokio::time::Instant;

use crate::common::{delete, holds_value, read_names, row, stored, write};

fn with_latency(latency: Latency) -> MemoryCluster {
    MemoryCluster::new(ClusterConfig {
        latency,
        seed: 3,
        ..ClusterConfig::default()
    })
    .unwrap()
}

fn cut_off_from(cluster: &MemoryCluster, replicas: &[usize]) -> lock_storage_memory::MemoryClient {
    cluster
        .client_with(ClientOptions {
            partitioned_from: replicas.iter().copied().map(ReplicaId).collect(),
            ..ClientOptions::default()
        })
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_write_short_of_its_quorum_times_out_as_outcome_unknown_and_stays_where_it_landed() {
    let cluster = MemoryCluster::default();
    let queue = row("partial");
    let lonely = cut_off_from(&cluster, &[1, 2]);

    let started = Instant::now();
    let error = lonely.write_cell(write(&queue, "a", 1)).await.unwrap_err();
    assert!(error.is_outcome_unknown(), "{error}");
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "the caller waits the timeout"
    );
    assert!(holds_value(&cluster, 0, &queue, "a"));
    assert!(!holds_value(&cluster, 1, &queue, "a"));
    assert!(!holds_value(&cluster, 2, &queue, "a"));

    // A quorum read that includes replica 0 sees the partial write and repairs replica 1…
    let reader = cluster.client();
    assert_eq!(read_names(&reader, &queue).await, ["a"]);
    assert!(holds_value(&cluster, 1, &queue, "a"));
    // …so the next quorum read, from replicas 1 and 2, sees it too, and repairs replica 2.
    assert_eq!(read_names(&reader, &queue).await, ["a"]);
    assert!(holds_value(&cluster, 2, &queue, "a"));

    let counters = cluster.counters();
    assert_eq!(counters.timed_out, 1);
    assert_eq!(counters.read_repairs, 2);
    assert_eq!(counters.repaired_reads, 2);
    assert_eq!(counters.replicas[1].read_repairs, 1);
    assert_eq!(counters.replicas[2].read_repairs, 1);
    assert_eq!(counters.messages_dropped, 2);
}

/// The names `client` reads in `row`, and how long the read took.
async fn timed_read(client: &MemoryClient, row: &RowKey) -> (Vec<String>, Duration) {
    let started = Instant::now();
    let names = read_names(client, row).await;
    (names, started.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_read_that_meets_disagreeing_replicas_waits_a_round_trip_for_the_repair() {
    let cluster = with_latency(Latency::Fixed(Duration::from_millis(1)));
    let queue = row("mismatch");
    let lonely = cut_off_from(&cluster, &[1, 2]);
    assert!(lonely.write_cell(write(&queue, "a", 1)).await.is_err());
    let reader = cluster.client();
    let agreed = row("agreed");
    reader.write_cell(write(&agreed, "b", 1)).await.unwrap();
    cluster.settle().await;

    let one_round_trip = Duration::from_millis(2);
    assert_eq!(
        timed_read(&reader, &agreed).await,
        (vec!["b".to_owned()], one_round_trip)
    );
    assert_eq!(cluster.counters().repaired_reads, 0);
    assert_eq!(
        timed_read(&reader, &queue).await,
        (vec!["a".to_owned()], 2 * one_round_trip),
        "the read's round trip, then the repair's"
    );
    let counters = cluster.counters();
    assert_eq!(counters.repaired_reads, 1);
    assert_eq!(counters.read_repairs, 1);
}

#[tokio::test(start_paused = true)]
async fn without_read_repair_a_partial_write_stays_partial() {
    let cluster = MemoryCluster::new(ClusterConfig {
        read_repair: false,
        ..ClusterConfig::default()
    })
    .unwrap();
    let queue = row("no-repair");
    let lonely = cut_off_from(&cluster, &[1, 2]);
    assert!(lonely.write_cell(write(&queue, "a", 1)).await.is_err());
    let reader = cluster.client();
    assert_eq!(read_names(&reader, &queue).await, ["a"]);
    assert!(!holds_value(&cluster, 1, &queue, "a"));
    assert!(
        read_names(&reader, &queue).await.is_empty(),
        "replicas 1 and 2 never got it"
    );
    assert_eq!(cluster.counters().repaired_reads, 0);
}

#[tokio::test(start_paused = true)]
async fn too_few_live_replicas_fail_at_once_and_apply_nothing() {
    let cluster = MemoryCluster::default();
    let faults = cluster.faults();
    let storage = cluster.client();
    let queue = row("unavailable");
    faults.stop_replica(ReplicaId(1)).unwrap();
    faults.stop_replica(ReplicaId(2)).unwrap();

    let started = Instant::now();
    let error = storage.write_cell(write(&queue, "a", 1)).await.unwrap_err();
    assert!(
        matches!(error, lock_core::Error::StorageUnavailable { .. }),
        "{error}"
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(!holds_value(&cluster, 0, &queue, "a"));
    assert!(
        storage
            .read_row(RowRead::first(queue.clone(), 1))
            .await
            .is_err()
    );

    let at_one = cluster
        .client_with(ClientOptions {
            write_consistency: Some(Consistency::One),
            read_consistency: Some(Consistency::One),
            ..ClientOptions::default()
        })
        .unwrap();
    at_one.write_cell(write(&queue, "a", 1)).await.unwrap();
    assert_eq!(read_names(&at_one, &queue).await, ["a"]);
    assert_eq!(cluster.counters().unavailable, 2);

    let isolated = cluster.client();
    faults.isolate(isolated.id()).unwrap();
    let error = isolated
        .write_cell(write(&queue, "b", 1))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no replica of the row is reachable"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn all_needs_every_replica() {
    let cluster = MemoryCluster::new(ClusterConfig {
        write_consistency: Consistency::All,
        ..ClusterConfig::default()
    })
    .unwrap();
    let storage = cluster.client();
    let queue = row("all");
    storage.write_cell(write(&queue, "a", 1)).await.unwrap();
    cluster.faults().stop_replica(ReplicaId(0)).unwrap();
    assert!(
        !storage
            .write_cell(write(&queue, "b", 1))
            .await
            .unwrap_err()
            .is_outcome_unknown()
    );
}

#[tokio::test(start_paused = true)]
async fn hinted_handoff_replays_writes_to_a_replica_that_comes_back() {
    let cluster = MemoryCluster::default();
    let faults = cluster.faults();
    let storage = cluster.client();
    let queue = row("hints");
    faults.stop_replica(ReplicaId(2)).unwrap();
    storage.write_cell(write(&queue, "a", 1)).await.unwrap();
    storage.delete_cell(delete(&queue, "old", 1)).await.unwrap();
    assert!(!holds_value(&cluster, 2, &queue, "a"));
    faults.start_replica(ReplicaId(2)).unwrap();
    assert!(holds_value(&cluster, 2, &queue, "a"));
    let counters = cluster.counters();
    assert_eq!((counters.hints_written, counters.hints_delivered), (2, 2));
    assert_eq!(counters.replicas[2].hints_applied, 2);
}

#[tokio::test(start_paused = true)]
async fn no_hints_without_handoff_or_past_the_hint_window() {
    for (hint_window, down_for) in [(None, 0), (Some(Duration::from_secs(60)), 120)] {
        let cluster = MemoryCluster::new(ClusterConfig {
            hint_window,
            ..ClusterConfig::default()
        })
        .unwrap();
        let faults = cluster.faults();
        let storage = cluster.client();
        let queue = row("no-hints");
        faults.stop_replica(ReplicaId(2)).unwrap();
        tokio::time::sleep(Duration::from_secs(down_for)).await;
        storage.write_cell(write(&queue, "a", 1)).await.unwrap();
        faults.start_replica(ReplicaId(2)).unwrap();
        assert!(!holds_value(&cluster, 2, &queue, "a"), "{hint_window:?}");
        assert_eq!(cluster.counters().hints_written, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_restart_keeps_the_data_and_a_wipe_loses_it() {
    let cluster = MemoryCluster::default();
    let faults = cluster.faults();
    let storage = cluster.client();
    let queue = row("disk");
    storage.write_cell(write(&queue, "a", 1)).await.unwrap();
    faults.stop_replica(ReplicaId(0)).unwrap();
    assert!(!cluster.is_up(ReplicaId(0)).unwrap());
    faults.start_replica(ReplicaId(0)).unwrap();
    assert!(holds_value(&cluster, 0, &queue, "a"));
    faults.wipe_replica(ReplicaId(0)).unwrap();
    assert!(!holds_value(&cluster, 0, &queue, "a"));
    assert_eq!(
        read_names(&storage, &queue).await,
        ["a"],
        "the other replicas still have it"
    );
}

#[tokio::test(start_paused = true)]
async fn deliveries_go_on_after_the_caller_gives_up() {
    let cluster = with_latency(Latency::Fixed(Duration::from_millis(10)));
    let storage = cluster.client();
    let queue = row("dropped-future");
    let gave_up = tokio::time::timeout(
        Duration::from_millis(5),
        storage.write_cell(write(&queue, "a", 1)),
    )
    .await;
    assert!(gave_up.is_err());
    assert!((0..3).all(|replica| !holds_value(&cluster, replica, &queue, "a")));
    cluster.settle().await;
    assert!((0..3).all(|replica| holds_value(&cluster, replica, &queue, "a")));
    assert_eq!(
        cluster.counters().succeeded,
        1,
        "the coordinator completed the write though nobody was waiting"
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_that_outlives_its_timeout_still_lands() {
    let cluster = with_latency(Latency::Fixed(Duration::from_secs(3)));
    let storage = cluster.client();
    let queue = row("slow");
    let error = storage.write_cell(write(&queue, "a", 1)).await.unwrap_err();
    assert!(error.is_outcome_unknown());
    cluster.settle().await;
    assert!((0..3).all(|replica| holds_value(&cluster, replica, &queue, "a")));
    assert_eq!(
        cluster.elapsed(),
        Duration::from_secs(6),
        "the acks arrived too"
    );
}

#[tokio::test(start_paused = true)]
async fn a_successful_write_keeps_travelling_to_slower_replicas() {
    let cluster = with_latency(Latency::LogNormal {
        median: Duration::from_millis(2),
        p99: Duration::from_millis(40),
    });
    let storage = cluster.client();
    let mut lagging = 0;
    for lock in 0..20 {
        let queue = row(&format!("slow-{lock}"));
        storage.write_cell(write(&queue, "a", 1)).await.unwrap();
        let holders = (0..3)
            .filter(|&replica| holds_value(&cluster, replica, &queue, "a"))
            .count();
        assert!(holders >= 2, "a quorum acknowledged");
        if holders < 3 {
            lagging += 1;
        }
        cluster.settle().await;
        assert!((0..3).all(|replica| holds_value(&cluster, replica, &queue, "a")));
    }
    assert!(lagging > 0, "some write answered before its third delivery");
}

#[tokio::test(start_paused = true)]
async fn a_cut_link_times_reads_out_when_the_coordinator_picks_that_replica() {
    let cluster = MemoryCluster::default();
    let storage = cluster.client();
    let queue = row("cut-read");
    storage.write_cell(write(&queue, "a", 1)).await.unwrap();
    // The client can still reach replicas 0 and 1; coordinators pick replicas to read from
    // without knowing of the cut, so some reads include replica 2 and time out.
    cluster
        .faults()
        .partition(storage.id(), ReplicaId(2))
        .unwrap();
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let started = Instant::now();
        let result = storage.read_row(RowRead::first(queue.clone(), 1)).await;
        outcomes.push((result.is_ok(), started.elapsed()));
    }
    assert!(outcomes.contains(&(true, Duration::ZERO)), "{outcomes:?}");
    assert!(
        outcomes.contains(&(false, Duration::from_secs(2))),
        "{outcomes:?}"
    );
    cluster.faults().heal_all();
    assert_eq!(read_names(&storage, &queue).await, ["a"]);
}

#[tokio::test(start_paused = true)]
async fn dead_cells_are_counted_and_can_cost_read_time() {
    let cluster = MemoryCluster::default();
    let storage = cluster.client();
    let queue = row("tombstones");
    for column in ["a", "b", "c", "d", "e"] {
        storage.write_cell(write(&queue, column, 1)).await.unwrap();
    }
    for column in ["a", "b", "c", "d"] {
        storage
            .delete_cell(delete(&queue, column, 2))
            .await
            .unwrap();
    }
    let cells = storage
        .read_row(RowRead::first(queue.clone(), 1))
        .await
        .unwrap();
    assert_eq!(cells[0].column.as_str(), "e");
    let counters = cluster.counters();
    assert_eq!(
        counters.dead_cells_scanned, 8,
        "four on each of the two replicas read"
    );
    assert_eq!(
        counters
            .replicas
            .iter()
            .map(|r| r.dead_cells_scanned)
            .sum::<u64>(),
        8
    );

    cluster
        .faults()
        .set_dead_cell_read_cost(Duration::from_millis(1))
        .unwrap();
    let started = Instant::now();
    storage.read_row(RowRead::first(queue, 1)).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(4));
}

#[tokio::test(start_paused = true)]
async fn client_clocks_are_skewed_and_never_go_back() {
    let cluster = MemoryCluster::default();
    let epoch = ClusterConfig::DEFAULT_EPOCH;
    let client = cluster
        .client_with(ClientOptions {
            clock: ClockSkew::offset(5_000_000),
            ..ClientOptions::default()
        })
        .unwrap();
    let clock = client.clock();
    assert_eq!(clock.now().timestamp, epoch + Duration::from_secs(5));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = clock.now();
    assert_eq!(before.timestamp, epoch + Duration::from_secs(6));
    cluster
        .faults()
        .set_client_clock(client.id(), ClockSkew::offset(-10_000_000))
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = clock.now();
    assert_eq!(after.timestamp, before.timestamp, "held, not stepped back");
    assert_eq!(
        after.instant.saturating_duration_since(before.instant),
        Duration::from_secs(1)
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(clock.now().timestamp, epoch + Duration::from_secs(12));
}

#[tokio::test(start_paused = true)]
async fn replica_clocks_drift() {
    let cluster = MemoryCluster::default();
    cluster
        .faults()
        .set_replica_clock(
            ReplicaId(1),
            ClockSkew {
                offset_micros: 0,
                drift_ppm: 100_000,
            },
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let epoch = ClusterConfig::DEFAULT_EPOCH;
    assert_eq!(
        cluster.replica_clock(ReplicaId(0)).unwrap(),
        epoch + Duration::from_secs(10)
    );
    assert_eq!(
        cluster.replica_clock(ReplicaId(1)).unwrap(),
        epoch + Duration::from_secs(11)
    );
}

#[tokio::test(start_paused = true)]
async fn bad_input_is_a_typed_error() {
    let cluster = MemoryCluster::default();
    let faults = cluster.faults();
    assert_eq!(
        faults.stop_replica(ReplicaId(3)),
        Err(MemoryError::UnknownReplica {
            replica: ReplicaId(3),
            replicas: 3
        })
    );
    assert_eq!(
        faults.partition(ClientId(0), ReplicaId(0)),
        Err(MemoryError::UnknownClient {
            client: ClientId(0)
        })
    );
    assert!(faults.set_request_timeout(Duration::ZERO).is_err());
    assert!(
        faults
            .set_latency(Latency::Uniform {
                min: Duration::from_secs(1),
                max: Duration::ZERO
            })
            .is_err()
    );
    assert!(
        faults
            .set_replica_clock(
                ReplicaId(0),
                ClockSkew {
                    offset_micros: 0,
                    drift_ppm: i32::MAX
                }
            )
            .is_err()
    );
    assert!(
        cluster
            .client_with(ClientOptions {
                partitioned_from: vec![ReplicaId(9)],
                ..ClientOptions::default()
            })
            .is_err()
    );
    let too_few = MemoryCluster::new(ClusterConfig {
        replicas: 2,
        ..ClusterConfig::default()
    });
    let message = too_few.unwrap_err().to_string();
    assert!(message.contains("replication_factor"), "{message}");
    assert!(
        MemoryCluster::new(ClusterConfig {
            replicas: 0,
            ..ClusterConfig::default()
        })
        .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn the_timeout_can_be_changed_while_clients_run() {
    let cluster = MemoryCluster::default();
    let lonely = cut_off_from(&cluster, &[1, 2]);
    cluster
        .faults()
        .set_request_timeout(Duration::from_millis(250))
        .unwrap();
    let started = Instant::now();
    assert!(lonely.write_cell(write(&row("t"), "a", 1)).await.is_err());
    assert_eq!(started.elapsed(), Duration::from_millis(250));
    assert_eq!(cluster.config().request_timeout, Duration::from_millis(250));
}

#[tokio::test(start_paused = true)]
async fn a_request_can_run_at_its_own_consistency_and_says_why_it_failed() {
    let cluster = MemoryCluster::default();
    let faults = cluster.faults();
    let storage = cluster.client();
    let queue = row("per-request");
    let request = |column: &str| StorageRequest::Write(write(&queue, column, 1));
    faults.stop_replica(ReplicaId(2)).unwrap();

    // One replica down: QUORUM and ONE succeed, ALL is refused with the coordinator's count.
    for level in [Consistency::Quorum, Consistency::One] {
        storage.execute_at(request("a"), level).await.unwrap();
    }
    let failure = storage
        .execute_at(request("b"), Consistency::All)
        .await
        .unwrap_err();
    assert_eq!(
        failure.detail(),
        &FailureDetail::Unavailable {
            consistency: Consistency::All,
            required: 3,
            alive: 2
        }
    );
    assert!(matches!(
        failure.error(),
        lock_core::Error::StorageUnavailable { .. }
    ));
    assert!(
        !holds_value(&cluster, 0, &queue, "b"),
        "nothing was applied"
    );

    // Two down: QUORUM is refused, ONE still reads what QUORUM wrote; the client's own
    // level (QUORUM) is untouched by the per-request ones.
    faults.stop_replica(ReplicaId(1)).unwrap();
    let read = StorageRequest::Read(RowRead::first(queue.clone(), 10));
    let failure = storage
        .execute_at(read.clone(), Consistency::Quorum)
        .await
        .unwrap_err();
    assert_eq!(
        failure.detail(),
        &FailureDetail::Unavailable {
            consistency: Consistency::Quorum,
            required: 2,
            alive: 1
        }
    );
    let answer = storage.execute_at(read, Consistency::One).await.unwrap();
    assert!(matches!(answer, StorageResponse::Cells(cells) if cells.len() == 1));
    assert!(storage.write_cell(write(&queue, "c", 1)).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn timeouts_report_what_arrived() {
    let cluster = MemoryCluster::default();
    let queue = row("timeouts");
    let lonely = cut_off_from(&cluster, &[1, 2]);
    let failure = lonely
        .execute_at(
            StorageRequest::Write(write(&queue, "a", 1)),
            Consistency::Quorum,
        )
        .await
        .unwrap_err();
    assert_eq!(
        failure.detail(),
        &FailureDetail::WriteTimeout {
            consistency: Consistency::Quorum,
            required: 2,
            received: 1
        }
    );
    assert!(failure.error().is_outcome_unknown());

    // A read whose second replica never answers.
    let slow = with_latency(Latency::Fixed(Duration::from_millis(1)));
    slow.faults()
        .set_request_timeout(Duration::from_millis(10))
        .unwrap();
    let reader = slow.client();
    slow.faults().partition(reader.id(), ReplicaId(1)).unwrap();
    slow.faults().partition(reader.id(), ReplicaId(2)).unwrap();
    let failure = reader
        .execute_at(
            StorageRequest::Read(RowRead::first(queue.clone(), 1)),
            Consistency::Quorum,
        )
        .await
        .unwrap_err();
    assert_eq!(
        failure.detail(),
        &FailureDetail::ReadTimeout {
            consistency: Consistency::Quorum,
            required: 2,
            received: 1,
            data_present: false
        }
    );
    assert!(matches!(
        lock_core::Error::from(failure),
        lock_core::Error::StorageUnavailable { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn gc_grace_can_be_changed_while_clients_run() {
    let cluster = MemoryCluster::default();
    let storage = cluster.client();
    let queue = row("grace");
    storage.delete_cell(delete(&queue, "a", 5)).await.unwrap();
    assert!(stored(&cluster, 0, &queue, "a").is_some());
    let faults = cluster.faults();
    assert!(matches!(
        faults.set_gc_grace(Duration::from_millis(1500)),
        Err(MemoryError::InvalidConfig {
            field: "gc_grace",
            ..
        })
    ));
    faults.set_gc_grace(Duration::from_secs(1)).unwrap();
    assert_eq!(cluster.config().gc_grace, Duration::from_secs(1));
    tokio::time::sleep(Duration::from_secs(3)).await;
    // A read at ALL touches every replica, and each purges what its clock says it may.
    let read = StorageRequest::Read(RowRead::first(queue.clone(), 10));
    storage.execute_at(read, Consistency::All).await.unwrap();
    for replica in 0..3 {
        assert_eq!(stored(&cluster, replica, &queue, "a"), None, "purged");
    }
}
