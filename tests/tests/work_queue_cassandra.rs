//! The leased work queue on a real cluster, in real time: a local 3-node Apache Cassandra
//! 5.0 started by `lock-storage-cassandra`'s harness (replication factor 3, QUORUM), or the
//! cluster named in `LOCK_CASSANDRA_CONTACT_POINTS`, with the short 3 s lease of
//! `CassandraBackend::lock_config`. Without `java` or `mvn` each test says it was skipped;
//! under `CI=true` that is a failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{FencingToken, LockStorage};
use lock_recipes::{Error, WorkItemId, WorkQueue, WorkQueueConfig};
use lock_tests::backend::{Backend, CassandraBackend, Contender};
use lock_tests::gate::{Gate, GateHandle, GateMode};
use lock_tests::work_queue::assert_redelivered_after_the_lease;
use tokio::sync::Mutex;
use tokio::time::{Instant, timeout};

type Queue = WorkQueue<Gate<Arc<lock_storage_cassandra::CassandraStorage>>>;

/// A worker on its own gate; idle pauses capped at 100 ms to keep the test short.
fn worker(backend: &CassandraBackend, name: &str, seed: u64) -> (Queue, GateHandle) {
    let contender = Contender::new(backend, seed);
    let config = WorkQueueConfig {
        idle_backoff_max: Duration::from_millis(100),
        ..WorkQueueConfig::default()
    };
    let queue = WorkQueue::new(contender.locker, name, config).unwrap();
    (queue, contender.gate)
}

async fn assert_completed_once<S: LockStorage>(
    completed: &BTreeMap<WorkItemId, Vec<FencingToken>>,
    ids: &[WorkItemId],
    queue: &WorkQueue<S>,
) {
    assert_eq!(
        completed.len(),
        ids.len(),
        "an item lost, or an unknown one completed"
    );
    for id in ids {
        let tokens = &completed[id];
        assert_eq!(
            tokens.len(),
            1,
            "item {id} completed {} times",
            tokens.len()
        );
        assert_eq!(queue.completed_by(id).await.unwrap(), Some(tokens[0]));
    }
}

/// One worker gets items oldest first; then three workers drain twelve more concurrently,
/// each item completed exactly once and none delivered twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_cassandra_work_queue_is_ordered_and_completes_each_item_once() {
    let test = "real_cassandra_work_queue_is_ordered_and_completes_each_item_once";
    let Some(backend) = CassandraBackend::real(test).await else {
        return;
    };
    let name = backend.lock_id("ordered");
    let (producer, _) = worker(&backend, &name, 1);
    let mut ids = Vec::new();
    for index in 0..6u32 {
        ids.push(producer.enqueue(index.to_be_bytes()).await.unwrap());
    }
    let (single, _) = worker(&backend, &name, 2);
    let mut seen = Vec::new();
    while let Some(claim) = single.try_claim().await.unwrap() {
        seen.push(claim.id().clone());
        claim.complete().await.unwrap();
    }
    assert_eq!(seen, ids, "not oldest first, or an item missing");

    let mut ids = Vec::new();
    for index in 0..12u32 {
        ids.push(producer.enqueue(index.to_be_bytes()).await.unwrap());
    }
    let completed = Arc::new(Mutex::new(BTreeMap::<WorkItemId, Vec<FencingToken>>::new()));
    let claims = Arc::new(Mutex::new(0u32));
    let tasks: Vec<_> = (0..3u64)
        .map(|index| {
            let (queue, _) = worker(&backend, &name, 10 + index);
            let (completed, claims) = (completed.clone(), claims.clone());
            tokio::spawn(async move {
                while completed.lock().await.len() < 12 {
                    let Ok(claim) = timeout(Duration::from_millis(500), queue.claim()).await else {
                        continue;
                    };
                    let claim = claim.unwrap();
                    *claims.lock().await += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let (id, token) = (claim.id().clone(), claim.fencing_token());
                    claim.complete().await.unwrap();
                    completed.lock().await.entry(id).or_default().push(token);
                }
            })
        })
        .collect();
    for task in tasks {
        timeout(Duration::from_secs(120), task)
            .await
            .expect("the workers drained the queue")
            .unwrap();
    }
    assert_completed_once(&*completed.lock().await, &ids, &producer).await;
    assert_eq!(
        *claims.lock().await,
        12,
        "an item delivered twice without a crash"
    );
    backend.cleanup().await;
}

/// A worker dies holding a claim: the item comes back after the lease (3 s), not before.
/// Another worker pauses past its lease while completing: its completion fails and the item
/// is completed once, by the claim that took it next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_cassandra_work_queue_redelivers_after_death_and_refuses_late_completion() {
    let test = "real_cassandra_work_queue_redelivers_after_death_and_refuses_late_completion";
    let Some(backend) = CassandraBackend::real(test).await else {
        return;
    };
    let ttl = CassandraBackend::lock_config().lease_ttl;
    let name = backend.lock_id("redelivery");
    let (producer, _) = worker(&backend, &name, 1);
    let (survivor, _) = worker(&backend, &name, 2);

    let died = producer.enqueue("died").await.unwrap();
    let (dying, dying_gate) = worker(&backend, &name, 3);
    let claim = dying.claim().await.unwrap();
    assert_eq!(claim.id(), &died);
    let died_token = claim.fencing_token();
    dying_gate.set(GateMode::Crashed);
    drop(claim);
    let died_at = Instant::now();
    assert_redelivered_after_the_lease(&producer, &survivor, &died, died_token, died_at, ttl).await;

    let late = producer.enqueue("late").await.unwrap();
    let (paused, paused_gate) = worker(&backend, &name, 4);
    let claim = paused.claim().await.unwrap();
    assert_eq!(claim.id(), &late);
    paused_gate.set(GateMode::Paused);
    let completing = tokio::spawn(claim.complete());
    tokio::time::sleep(ttl * 2).await;
    let second = timeout(ttl * 4, survivor.claim()).await.unwrap().unwrap();
    assert_eq!(second.id(), &late, "the item was not delivered again");
    let second_token = second.fencing_token();
    second.complete().await.unwrap();
    paused_gate.set(GateMode::Open);
    let result = completing.await.unwrap();
    assert!(
        matches!(result, Err(Error::Lock(lock_core::Error::LockLost { .. }))),
        "a completion past the lease was accepted: {result:?}"
    );
    assert_eq!(
        producer.completed_by(&late).await.unwrap(),
        Some(second_token)
    );
    assert!(
        survivor.try_claim().await.unwrap().is_none(),
        "an item left over"
    );
    backend.cleanup().await;
}
