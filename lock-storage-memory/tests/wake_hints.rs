//! Wake-up hints between simulated clients (`MemoryClient::wake_hints`): they arrive after
//! the cluster's latency, and lockers that use them still exclude each other and make
//! progress, reading sooner than they would by polling.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fair_lock::WakeHintTransport;
use fair_lock::{Clock, Locker};
use lock_core::LockConfig;
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster};

const CONTENDERS: usize = 4;
const ROUNDS: usize = 10;
const HOLD: Duration = Duration::from_millis(20);

/// Every contender's acquisitions, as (hinted reads, requests) pairs.
async fn contend(hints: bool) -> Vec<(u32, u32)> {
    let cluster = MemoryCluster::new(ClusterConfig {
        latency: Latency::Fixed(Duration::from_micros(250)),
        timer_dilation: 1_000,
        seed: 3,
        ..ClusterConfig::default()
    })
    .unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|index| {
            let client = cluster.client();
            let mut builder = Locker::builder(client.clone())
                .config(LockConfig::default())
                .clock(Arc::new(client.clock()))
                .replay_owner_ids_unsafe(100 + index as u64);
            if hints {
                builder = builder.wake_hints(client.wake_hints());
            }
            let locker = builder.build().unwrap();
            let clock = client.clock();
            let inside = inside.clone();
            tokio::spawn(async move {
                let mut stats = Vec::new();
                for _ in 0..ROUNDS {
                    let guard = locker.lock("account:42").await.unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    tokio::time::sleep(clock.timer_duration(HOLD)).await;
                    assert!(guard.is_held());
                    inside.fetch_sub(1, Ordering::SeqCst);
                    stats.push((guard.stats().hinted_reads, guard.stats().requests));
                    guard.release().await.unwrap();
                }
                stats
            })
        })
        .collect();
    let mut stats = Vec::new();
    for task in tasks {
        stats.extend(task.await.unwrap());
    }
    assert_eq!(
        stats.len(),
        CONTENDERS * ROUNDS,
        "every acquisition completed"
    );
    stats
}

#[test]
fn lockers_with_simulated_hints_exclude_each_other_and_read_on_hints() {
    fair_lock::testing::in_virtual_time(
        "lockers_with_simulated_hints_exclude_each_other_and_read_on_hints",
        async {
            let hinted = contend(true).await;
            let polled = contend(false).await;
            let hinted_reads: u32 = hinted.iter().map(|(reads, _)| reads).sum();
            assert!(
                hinted_reads >= (CONTENDERS * ROUNDS / 2) as u32,
                "{hinted_reads} hinted reads"
            );
            assert!(polled.iter().all(|(reads, _)| *reads == 0));
            // Waiters far back wait for hints instead of polling: fewer requests.
            let requests = |stats: &[(u32, u32)]| stats.iter().map(|(_, sent)| sent).sum::<u32>();
            assert!(
                requests(&hinted) < requests(&polled),
                "{} requests with hints, {} without",
                requests(&hinted),
                requests(&polled)
            );
        },
    );
}

#[test]
fn each_client_listens_at_one_address_of_its_own() {
    fair_lock::testing::in_virtual_time("each_client_listens_at_one_address_of_its_own", async {
        let cluster = MemoryCluster::default();
        let (one, other) = (cluster.client(), cluster.client());
        assert_eq!(one.wake_hints().listener(), one.wake_hints().listener());
        assert_ne!(one.wake_hints().listener(), other.wake_hints().listener());
    });
}
