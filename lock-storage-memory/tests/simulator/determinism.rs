//! Deterministic mode: a seed and Tokio's paused clock replay the same history.

use std::time::Duration;

use fair_lock::Clock;
use lock_core::LockStorage;
use lock_core::storage::RowRead;
use lock_storage_memory::{
    ApplyCause, ClockSkew, ClusterConfig, HistoryEntry, HistoryEvent, Latency, MemoryClient,
    MemoryCluster, ReplicaId,
};

use crate::common::{delete, row, write_with_ttl};

/// Three clients take turns on three rows while replicas stop, links break and clocks
/// jump; returns everything the cluster recorded.
async fn chaotic_run(seed: u64) -> Vec<HistoryEntry> {
    let cluster = MemoryCluster::new(ClusterConfig {
        replicas: 5,
        replication_factor: 3,
        latency: Latency::LogNormal {
            median: Duration::from_millis(1),
            p99: Duration::from_millis(15),
        },
        request_timeout: Duration::from_millis(40),
        replica_clocks: vec![
            ClockSkew::default(),
            ClockSkew::offset(1_500_000),
            ClockSkew::offset(-700_000),
            ClockSkew {
                offset_micros: 0,
                drift_ppm: 50_000,
            },
            ClockSkew::default(),
        ],
        seed,
        record_history: true,
        ..ClusterConfig::default()
    })
    .unwrap();
    let clients: Vec<MemoryClient> = (0..3).map(|_| cluster.client()).collect();
    let faults = cluster.faults();

    let workload = |client: MemoryClient, name: &'static str| async move {
        let clock = client.clock();
        for round in 0..40_u32 {
            let queue = row(&format!("lock-{}", round % 3));
            let timestamp = clock.now().timestamp.as_micros();
            let _ = client
                .write_cell(write_with_ttl(&queue, name, timestamp, 1 + round % 2))
                .await;
            let _ = client.read_row(RowRead::first(queue.clone(), 2)).await;
            if round % 4 == 3 {
                let _ = client
                    .delete_cell(delete(&queue, name, timestamp + 1))
                    .await;
            }
        }
    };
    let chaos = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        faults.stop_replica(ReplicaId(1)).unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
        faults.partition(clients[0].id(), ReplicaId(2)).unwrap();
        faults
            .set_replica_clock(ReplicaId(4), ClockSkew::offset(3_000_000))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
        faults.start_replica(ReplicaId(1)).unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
        faults.heal_all();
    };
    tokio::join!(
        workload(clients[0].clone(), "a"),
        workload(clients[1].clone(), "b"),
        workload(clients[2].clone(), "c"),
        chaos
    );
    cluster.settle().await;
    cluster.history()
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_replays_the_same_history_and_another_seed_does_not() {
    let first = chaotic_run(11).await;
    let replay = chaotic_run(11).await;
    assert_eq!(first.len(), replay.len());
    assert_eq!(first, replay);

    // The run exercised what it claims to.
    let has = |wanted: fn(&HistoryEvent) -> bool| first.iter().any(|entry| wanted(&entry.event));
    assert!(has(|event| matches!(
        event,
        HistoryEvent::Answered { result: Err(_), .. }
    )));
    assert!(has(|event| matches!(
        event,
        HistoryEvent::Answered { result: Ok(_), .. }
    )));
    assert!(has(|event| matches!(
        event,
        HistoryEvent::Applied {
            cause: ApplyCause::Hint,
            ..
        }
    )));
    assert!(has(|event| matches!(
        event,
        HistoryEvent::Applied {
            cause: ApplyCause::ReadRepair,
            ..
        }
    )));
    assert!(first.windows(2).all(|pair| pair[0].at <= pair[1].at));

    let other = chaotic_run(12).await;
    assert_ne!(first, other);
}
