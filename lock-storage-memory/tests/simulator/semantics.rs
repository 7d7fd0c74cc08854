//! What the cluster stores and returns: reads, merges, tombstones, TTLs, quorums.

use std::time::Duration;

use lock_core::storage::{Expiry, RowRead, StorageRequest, StorageResponse};
use lock_core::{ColumnName, LockStorage, Timestamp};
use lock_storage_memory::{
    CellState, CellVersion, ClientOptions, ClockSkew, ClusterConfig, Consistency, Latency,
    MemoryCluster, ReplicaId,
};

use crate::common::{delete, holds_value, names, read_names, row, stored, write, write_with_ttl};

const SECOND: i64 = 1_000_000;

#[tokio::test(start_paused = true)]
async fn a_default_cluster_is_one_line_and_serves_quorum_requests() {
    let storage = MemoryCluster::default().client();
    let queue = row("one-line");
    storage.write_cell(write(&queue, "a", 1)).await.unwrap();
    assert_eq!(read_names(&storage, &queue).await, ["a"]);

    let counters = storage.cluster().counters();
    assert_eq!(counters.requests.writes, 1);
    assert_eq!(counters.requests.reads, 1);
    assert_eq!(counters.succeeded, 2);
    let served: Vec<_> = counters.replicas.iter().map(|r| r.requests).collect();
    assert!(served.iter().all(|requests| requests.writes == 1));
    assert_eq!(served.iter().map(|requests| requests.reads).sum::<u64>(), 2);
}

#[tokio::test(start_paused = true)]
async fn reads_return_the_first_live_cells_from_the_start_column_in_order() {
    let storage = MemoryCluster::default().client();
    let queue = row("slices");
    for column in ["c", "a", "d", "b", "e"] {
        storage.write_cell(write(&queue, column, 1)).await.unwrap();
    }
    storage.delete_cell(delete(&queue, "b", 2)).await.unwrap();

    let first_two = storage
        .read_row(RowRead::first(queue.clone(), 2))
        .await
        .unwrap();
    assert_eq!(names(&first_two), ["a", "c"]);
    let from_b = RowRead {
        start: Some(ColumnName::new("b")),
        ..RowRead::first(queue.clone(), 2)
    };
    assert_eq!(names(&storage.read_row(from_b).await.unwrap()), ["c", "d"]);
    let single = RowRead::single(queue.clone(), ColumnName::new("d"));
    let cells = storage.read_row(single).await.unwrap();
    assert_eq!(names(&cells), ["d"]);
    assert_eq!(cells[0].value, b"d");
    assert_eq!(cells[0].write_timestamp, Timestamp::from_micros(1));
    assert_eq!(read_names(&storage, &queue).await, ["a", "c", "d", "e"]);

    let response = storage
        .execute(StorageRequest::Read(RowRead::first(queue, 1)))
        .await
        .unwrap();
    assert!(matches!(response, StorageResponse::Cells(cells) if names(&cells) == ["a"]));
}

#[tokio::test(start_paused = true)]
async fn a_newer_tombstone_on_one_replica_hides_a_cell_and_the_read_still_fills_its_limit() {
    let cluster = MemoryCluster::default();
    let writer = cluster.client();
    let queue = row("short-read");
    writer.write_cell(write(&queue, "a", 1)).await.unwrap();
    writer.write_cell(write(&queue, "b", 1)).await.unwrap();
    // The delete reaches replicas 1 and 2 only.
    let deleter = cluster
        .client_with(ClientOptions {
            partitioned_from: vec![ReplicaId(0)],
            ..ClientOptions::default()
        })
        .unwrap();
    deleter.delete_cell(delete(&queue, "a", 2)).await.unwrap();
    assert!(holds_value(&cluster, 0, &queue, "a"));

    // A fresh client's first read is coordinated by replica 0 and asks replicas 0 and 1.
    let reader = cluster.client();
    let cells = reader
        .read_row(RowRead::first(queue.clone(), 1))
        .await
        .unwrap();
    assert_eq!(names(&cells), ["b"]);
    // Read repair gave replica 0 the tombstone.
    let repaired = stored(&cluster, 0, &queue, "a").unwrap();
    assert!(matches!(repaired.state, CellState::Tombstone { .. }));
    assert_eq!(repaired.timestamp, Timestamp::from_micros(2));
}

#[tokio::test(start_paused = true)]
async fn tombstones_shadow_older_and_equal_timestamps_but_not_newer_ones() {
    let storage = MemoryCluster::default().client();
    let queue = row("shadow");
    storage.delete_cell(delete(&queue, "a", 10)).await.unwrap();
    storage.write_cell(write(&queue, "a", 5)).await.unwrap();
    assert!(read_names(&storage, &queue).await.is_empty());
    storage.write_cell(write(&queue, "a", 10)).await.unwrap();
    assert!(
        read_names(&storage, &queue).await.is_empty(),
        "a tie goes to the tombstone"
    );
    storage.write_cell(write(&queue, "a", 11)).await.unwrap();
    assert_eq!(read_names(&storage, &queue).await, ["a"]);
    storage.delete_cell(delete(&queue, "a", 9)).await.unwrap();
    assert_eq!(
        read_names(&storage, &queue).await,
        ["a"],
        "an older delete changes nothing"
    );
}

/// Cassandra 5.0's tie rule (lock-core's `storage::merge`): between two values with equal
/// timestamps and no TTL, the greater value, compared as unsigned bytes, wins, whichever
/// arrives first. "a" and "b" tell it from the thesis's rule, which kept the smaller MD5:
/// md5("a") = 0cc175b9… < md5("b") = 92eb5ffe….
#[tokio::test(start_paused = true)]
async fn equal_timestamps_between_values_go_to_the_greater_bytes() {
    for (row_name, order) in [("ab", [b"a", b"b"]), ("ba", [b"b", b"a"])] {
        let storage = MemoryCluster::default().client();
        let main = row(row_name);
        for value in order {
            let mut cell = write(&main, "owner", 7);
            cell.value = value.to_vec();
            storage.write_cell(cell).await.unwrap();
        }
        let cells = storage.read_row(RowRead::first(main, 1)).await.unwrap();
        assert_eq!(cells[0].value, b"b", "written in the order {order:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn tombstones_are_purged_after_gc_grace_on_each_replicas_own_clock() {
    let cluster = MemoryCluster::new(ClusterConfig {
        gc_grace: Duration::from_secs(60),
        read_repair: false,
        replica_clocks: vec![
            ClockSkew::default(),
            ClockSkew::default(),
            ClockSkew::offset(-30 * SECOND),
        ],
        ..ClusterConfig::default()
    })
    .unwrap();
    let storage = cluster
        .client_with(ClientOptions {
            read_consistency: Some(Consistency::All),
            ..ClientOptions::default()
        })
        .unwrap();
    let queue = row("purge");
    // Replica 0 coordinates the delete, so the tombstone is stamped with its clock.
    storage.delete_cell(delete(&queue, "a", 20)).await.unwrap();

    tokio::time::sleep(Duration::from_secs(60)).await;
    storage.write_cell(write(&queue, "a", 15)).await.unwrap();
    assert!(read_names(&storage, &queue).await.is_empty());
    assert!(
        stored(&cluster, 0, &queue, "a").is_some(),
        "kept for the whole grace period"
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(read_names(&storage, &queue).await.is_empty());
    assert_eq!(
        stored(&cluster, 0, &queue, "a"),
        None,
        "purged once past the grace period"
    );
    assert_eq!(stored(&cluster, 1, &queue, "a"), None);
    assert!(
        stored(&cluster, 2, &queue, "a").is_some(),
        "replica 2's clock is 30 s behind: not purged yet"
    );

    // As in Cassandra, a late write older than a purged tombstone resurfaces.
    let late = cluster.client();
    late.write_cell(write(&queue, "a", 5)).await.unwrap();
    assert!(holds_value(&cluster, 0, &queue, "a"));
    assert!(!holds_value(&cluster, 2, &queue, "a"));
}

#[tokio::test(start_paused = true)]
async fn a_ttl_runs_from_the_coordinators_truncated_second() {
    let storage = MemoryCluster::default().client();
    let queue = row("ttl");
    tokio::time::sleep(Duration::from_millis(500)).await;
    storage
        .write_cell(write_with_ttl(&queue, "a", 1, 10))
        .await
        .unwrap();
    // Written at 0.5 s into second 0: it expires at second 10, 9.5 s later.
    tokio::time::sleep(Duration::from_millis(9_400)).await;
    assert_eq!(read_names(&storage, &queue).await, ["a"]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(read_names(&storage, &queue).await.is_empty());
    // Expired, the cell still shadows an older write.
    storage.write_cell(write(&queue, "a", 0)).await.unwrap();
    assert!(read_names(&storage, &queue).await.is_empty());
}

/// A client that talks to `replica` alone and reads at ONE: that replica's view.
fn view_of(cluster: &MemoryCluster, replica: usize) -> lock_storage_memory::MemoryClient {
    let others = (0..3)
        .filter(|&other| other != replica)
        .map(ReplicaId)
        .collect();
    cluster
        .client_with(ClientOptions {
            partitioned_from: others,
            read_consistency: Some(Consistency::One),
            ..ClientOptions::default()
        })
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_replica_ahead_of_the_coordinator_by_more_than_the_ttl_sees_the_cell_born_dead() {
    let cluster = MemoryCluster::new(ClusterConfig {
        replica_clocks: vec![
            ClockSkew::default(),
            ClockSkew::default(),
            ClockSkew::offset(20 * SECOND),
        ],
        ..ClusterConfig::default()
    })
    .unwrap();
    let queue = row("born-dead");
    // A fresh client's first request is coordinated by replica 0.
    cluster
        .client()
        .write_cell(write_with_ttl(&queue, "a", 1, 10))
        .await
        .unwrap();

    assert_eq!(read_names(&view_of(&cluster, 0), &queue).await, ["a"]);
    assert_eq!(read_names(&view_of(&cluster, 1), &queue).await, ["a"]);
    assert!(read_names(&view_of(&cluster, 2), &queue).await.is_empty());
    let expiry = cluster.replica_clock(ReplicaId(0)).unwrap().as_micros() / 1_000_000 + 10;
    // Replica 2 keeps the version as written, as a Cassandra memtable does (reconciling
    // never looks at a clock); its reads judge it expired.
    assert_eq!(
        stored(&cluster, 2, &queue, "a").map(|version| version.state),
        Some(CellState::Live {
            value: b"a".as_slice().into(),
            expiry: Some(Expiry {
                at: expiry,
                ttl: 10
            }),
        }),
        "replica 2 stores the write as written"
    );
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_behind_by_more_than_the_ttl_writes_cells_every_replica_sees_dead() {
    let cluster = MemoryCluster::new(ClusterConfig {
        replica_clocks: vec![
            ClockSkew::offset(-20 * SECOND),
            ClockSkew::default(),
            ClockSkew::default(),
        ],
        ..ClusterConfig::default()
    })
    .unwrap();
    let storage = cluster.client();
    let queue = row("stale-coordinator");
    storage
        .write_cell(write_with_ttl(&queue, "a", 1, 10))
        .await
        .unwrap();
    assert!(read_names(&storage, &queue).await.is_empty());
    assert!(read_names(&view_of(&cluster, 1), &queue).await.is_empty());
    // The same write coordinated by replica 1 (the client's next coordinator) lives.
    storage
        .write_cell(write_with_ttl(&queue, "b", 1, 10))
        .await
        .unwrap();
    assert_eq!(read_names(&storage, &queue).await, ["b"]);
}

async fn lemma_one_holds(seed: u64, consistency: Consistency) -> bool {
    let cluster = MemoryCluster::new(ClusterConfig {
        write_consistency: consistency,
        read_consistency: consistency,
        latency: Latency::Uniform {
            min: Duration::from_micros(100),
            max: Duration::from_millis(20),
        },
        seed,
        ..ClusterConfig::default()
    })
    .unwrap();
    let queue = row("lemma-1");
    let (alice, bob) = (cluster.client(), cluster.client());
    let write_then_read = |client: lock_storage_memory::MemoryClient, column: &'static str| {
        let queue = queue.clone();
        async move {
            client.write_cell(write(&queue, column, 1)).await.unwrap();
            read_names(&client, &queue).await
        }
    };
    let (seen_by_alice, seen_by_bob) =
        tokio::join!(write_then_read(alice, "alice"), write_then_read(bob, "bob"));
    seen_by_alice.len() == 2 || seen_by_bob.len() == 2
}

#[tokio::test(start_paused = true)]
async fn lemma_one_two_quorum_writers_that_read_back_at_quorum_cannot_both_miss() {
    for seed in 0..300 {
        assert!(
            lemma_one_holds(seed, Consistency::Quorum).await,
            "seed {seed}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn lemma_one_fails_at_consistency_one_so_the_check_can_fail() {
    let mut violations = 0;
    for seed in 0..300 {
        if !lemma_one_holds(seed, Consistency::One).await {
            violations += 1;
        }
    }
    assert!(violations > 0, "ONE never violated the lemma in 300 runs");
}

#[tokio::test(start_paused = true)]
async fn with_more_replicas_than_rf_each_row_lives_on_rf_consecutive_replicas() {
    let cluster = MemoryCluster::new(ClusterConfig {
        replicas: 5,
        replication_factor: 3,
        ..ClusterConfig::default()
    })
    .unwrap();
    let storage = cluster.client();
    let mut first_replicas = std::collections::BTreeSet::new();
    for lock in 0..20 {
        let queue = row(&format!("lock-{lock}"));
        storage.write_cell(write(&queue, "a", 1)).await.unwrap();
        let holders: Vec<usize> = (0..5)
            .filter(|&replica| holds_value(&cluster, replica, &queue, "a"))
            .collect();
        assert_eq!(holders.len(), 3, "{holders:?}");
        let first = (0..5)
            .find(|&start| (0..3).all(|step| holders.contains(&((start + step) % 5))))
            .expect("the holders are consecutive on the ring");
        first_replicas.insert(first);
        assert_eq!(read_names(&storage, &queue).await, ["a"]);
    }
    assert!(first_replicas.len() > 1, "rows spread over the ring");
}

#[test]
fn versions_are_plain_data() {
    let version = CellVersion {
        timestamp: Timestamp::from_micros(3),
        state: CellState::Live {
            value: b"x".as_slice().into(),
            expiry: Some(Expiry::after(0, 10)),
        },
    };
    assert!(version.is_live_at(9));
    assert!(!version.clone().judged_at(10).is_live_at(0));
}
