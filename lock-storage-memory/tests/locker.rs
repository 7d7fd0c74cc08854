//! lock-core's locker on the simulated cluster: mutual exclusion and progress with 1, 3 and
//! 5 contenders, with all replicas up and with one replica of three down.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fair_lock::{Clock, Locker};
use lock_core::{LockConfig, LockStorage};
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster, ReplicaId};

const ROUNDS: usize = 20;

async fn contend(contenders: usize, replica_down: bool, seed: u64) {
    let cluster = MemoryCluster::new(ClusterConfig {
        latency: Latency::Uniform {
            min: Duration::from_micros(300),
            max: Duration::from_micros(900),
        },
        seed,
        ..ClusterConfig::default()
    })
    .unwrap();
    if replica_down {
        cluster.faults().stop_replica(ReplicaId(2)).unwrap();
    }
    let inside = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..contenders)
        .map(|index| {
            let client = cluster.client();
            let locker = Locker::builder(client.clone())
                .config(LockConfig::default())
                .clock(Arc::new(client.clock()))
                .replay_owner_ids_unsafe(seed * 100 + index as u64)
                .build()
                .unwrap();
            let inside = inside.clone();
            tokio::spawn(async move {
                let mut waits = Vec::new();
                for _ in 0..ROUNDS {
                    let guard = locker.lock("account:42").await.unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders at once"
                    );
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    assert!(guard.is_held());
                    inside.fetch_sub(1, Ordering::SeqCst);
                    waits.push(guard.wait());
                    guard.release().await.unwrap();
                }
                waits
            })
        })
        .collect();
    let mut waits = Vec::new();
    for task in tasks {
        waits.extend(task.await.unwrap());
    }
    assert_eq!(
        waits.len(),
        contenders * ROUNDS,
        "every acquisition completed"
    );
    let longest = waits.iter().max().unwrap();
    let bound = Duration::from_millis(100) * u32::try_from(contenders).unwrap();
    assert!(
        *longest < bound,
        "longest wait {longest:?} with {contenders} contenders"
    );
    eprintln!(
        "{contenders} contenders, replica down: {replica_down}: longest wait {longest:?}, mean {:?}",
        waits.iter().sum::<Duration>() / u32::try_from(waits.len()).unwrap()
    );
}

#[test]
fn one_contender() {
    fair_lock::testing::in_virtual_time("one_contender", async {
        contend(1, false, 1).await;
    });
}

#[test]
fn three_contenders() {
    fair_lock::testing::in_virtual_time("three_contenders", async {
        contend(3, false, 2).await;
    });
}

#[test]
fn five_contenders() {
    fair_lock::testing::in_virtual_time("five_contenders", async {
        contend(5, false, 3).await;
    });
}

#[test]
fn three_contenders_with_one_replica_down() {
    fair_lock::testing::in_virtual_time("three_contenders_with_one_replica_down", async {
        contend(3, true, 4).await;
    });
}

#[test]
fn five_contenders_with_one_replica_down() {
    fair_lock::testing::in_virtual_time("five_contenders_with_one_replica_down", async {
        contend(5, true, 5).await;
    });
}

/// Every acquisition leaves tombstones; with `gc_grace` far longer than the run none is
/// purged, as in Cassandra before compaction. Reads must not walk them all: the dead cells
/// scanned per acquisition stay flat instead of growing with the number of acquisitions.
/// (Queue reads start `2 × max_clock_skew + request_timeout` before the last head seen, so
/// the plateau is about the tombstones of that much time; tight clocks keep it low.)
#[test]
fn reads_skip_the_tombstones_of_earlier_acquisitions() {
    fair_lock::testing::in_virtual_time(
        "reads_skip_the_tombstones_of_earlier_acquisitions",
        async {
            let config = LockConfig {
                max_clock_skew: Duration::from_millis(5),
                request_timeout: Duration::from_millis(50),
                ..LockConfig::default()
            };
            let cluster = MemoryCluster::new(ClusterConfig {
                latency: Latency::Fixed(Duration::from_micros(500)),
                gc_grace: Duration::from_secs(3600),
                ..ClusterConfig::default()
            })
            .unwrap();
            let lockers: Vec<_> = (0..3)
                .map(|index| {
                    let client = cluster.client();
                    Locker::builder(client.clone())
                        .config(config.clone())
                        .clock(Arc::new(client.clock()))
                        .replay_owner_ids_unsafe(index)
                        .build()
                        .unwrap()
                })
                .collect();
            let mut scanned_per_window = Vec::new();
            for _window in 0..4 {
                let before = cluster.counters().dead_cells_scanned;
                let tasks: Vec<_> = lockers
                    .iter()
                    .map(|locker| {
                        let locker = locker.clone();
                        tokio::spawn(async move {
                            for _ in 0..100 {
                                locker.lock("hot").await.unwrap().release().await.unwrap();
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
                scanned_per_window.push((cluster.counters().dead_cells_scanned - before) / 300);
            }
            eprintln!(
                "dead cells scanned per acquisition, by window of 300: {scanned_per_window:?}"
            );
            let (first, last) = (scanned_per_window[0], scanned_per_window[3]);
            assert!(
                last <= first.max(1) * 2 && last < 200,
                "dead cells scanned per acquisition grew from {first} to {last}: {scanned_per_window:?}"
            );
        },
    );
}

/// Tokio's timer wakes sleepers on whole milliseconds, so without dilation a 50 µs
/// one-way latency takes a whole millisecond per round trip as the client sees it; with a
/// timer dilation of 1,000 it takes the 100 µs it should, and the lock driver, which sets
/// its timers through the client's clock, keeps working at that pace (an uncontended
/// acquisition takes the two round trips of the fast path, the second onwards).
#[test]
fn a_dilated_simulation_simulates_round_trips_finer_than_tokios_millisecond() {
    fair_lock::testing::in_virtual_time(
        "a_dilated_simulation_simulates_round_trips_finer_than_tokios_millisecond",
        async {
            let mut round_trips = Vec::new();
            for dilation in [1, 1_000] {
                let cluster = MemoryCluster::new(ClusterConfig {
                    latency: Latency::Fixed(Duration::from_micros(50)),
                    timer_dilation: dilation,
                    ..ClusterConfig::default()
                })
                .unwrap();
                let client = cluster.client();
                let clock = client.clock();
                let started = clock.now().instant;
                client
                    .read_row(lock_core::storage::RowRead::first(
                        lock_core::storage::RowKey::new(
                            lock_core::storage::RowKind::Main,
                            lock_core::LockId::new("probe").unwrap(),
                        ),
                        1,
                    ))
                    .await
                    .unwrap();
                round_trips.push(clock.now().instant.saturating_duration_since(started));
                let locker = Locker::builder(client.clone())
                    .clock(Arc::new(clock.clone()))
                    .replay_owner_ids_unsafe(7)
                    .build()
                    .unwrap();
                locker.lock("hot").await.unwrap().release().await.unwrap();
                let second = clock.now().instant;
                let guard = locker.lock("hot").await.unwrap();
                let took = clock.now().instant.saturating_duration_since(second);
                guard.release().await.unwrap();
                if dilation > 1 {
                    // Two round trips, four with fencing (on by default): 0.4 ms.
                    assert_eq!(took, Duration::from_micros(400), "dilation {dilation}");
                }
            }
            assert_eq!(
                round_trips,
                [Duration::from_millis(1), Duration::from_micros(100)]
            );
        },
    );
}
