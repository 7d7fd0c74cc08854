//! The leased work queue on the memory simulator (3 replicas, QUORUM), in virtual time:
//! exactly one completion per item, oldest first, redelivery after a worker dies or pauses
//! past its lease, and no late completion by a paused worker.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{FencingToken, LockConfig};
use lock_recipes::{Claim, Error, WorkItemId, WorkQueue, WorkQueueConfig};
use lock_storage_memory::MemoryClient;
use lock_tests::backend::{Contender, MemoryBackend};
use lock_tests::gate::{Gate, GateHandle, GateMode};
use lock_tests::work_queue::assert_redelivered_after_the_lease;

type Queue = WorkQueue<Gate<MemoryClient>>;

const NAME: &str = "jobs";

/// A worker (or producer): a work queue handle on its own client, behind a gate.
fn worker(backend: &MemoryBackend, seed: u64) -> (Queue, GateHandle) {
    let contender = Contender::new(backend, seed);
    let queue = WorkQueue::new(contender.locker, NAME, WorkQueueConfig::default())
        .unwrap_or_else(|error| panic!("work queue: {error}"));
    (queue, contender.gate)
}

/// What the workers reported: per item, the tokens of the claims whose `complete` returned
/// `Ok`, and how many times it was claimed.
#[derive(Default)]
struct Ledger {
    completed: BTreeMap<WorkItemId, Vec<FencingToken>>,
    claims: BTreeMap<WorkItemId, u32>,
}

impl Ledger {
    fn claimed(&mut self, id: &WorkItemId) {
        *self.claims.entry(id.clone()).or_default() += 1;
    }

    fn redeliveries(&self) -> u32 {
        self.claims.values().map(|claims| claims - 1).sum()
    }

    /// Every enqueued item completed by exactly one claim, that claim's token recorded.
    async fn assert_exactly_once(&self, ids: &[WorkItemId], queue: &Queue) {
        for id in ids {
            let tokens = self.completed.get(id).map_or(&[][..], Vec::as_slice);
            assert_eq!(
                tokens.len(),
                1,
                "item {id} completed {} times",
                tokens.len()
            );
            assert_eq!(
                queue.completed_by(id).await.unwrap(),
                Some(tokens[0]),
                "item {id}'s record names another claim"
            );
        }
        assert_eq!(
            self.completed.len(),
            ids.len(),
            "completions of unknown items"
        );
    }
}

/// Completes `claim`, which must succeed, and records its token in the ledger.
async fn complete_and_record(claim: Claim<Gate<MemoryClient>>, ledger: &Mutex<Ledger>) {
    let (id, token) = (claim.id().clone(), claim.fencing_token());
    claim.complete().await.unwrap();
    ledger
        .lock()
        .unwrap()
        .completed
        .entry(id)
        .or_default()
        .push(token);
}

async fn enqueue_all(producer: &Queue, count: u32, spacing: Duration) -> Vec<WorkItemId> {
    let mut ids = Vec::new();
    for index in 0..count {
        ids.push(producer.enqueue(index.to_be_bytes()).await.unwrap());
        tokio::time::sleep(spacing).await;
    }
    ids
}

/// One worker drains a queue whose items span several buckets: it gets them in the order
/// they were enqueued, each once.
#[test]
fn a_single_worker_claims_oldest_first() {
    fair_lock::testing::in_virtual_time("a_single_worker_claims_oldest_first", async {
        let backend = MemoryBackend::new(1);
        let (producer, _) = worker(&backend, 1);
        let (worker, _) = worker(&backend, 2);
        let ids = enqueue_all(&producer, 12, Duration::from_secs(13)).await;
        let mut seen = Vec::new();
        while let Some(claim) = worker.try_claim().await.unwrap() {
            seen.push(claim.id().clone());
            claim.complete().await.unwrap();
        }
        assert_eq!(seen, ids, "not oldest first, or an item missing");
    });
}

/// Four workers drain 40 items enqueued while they run, with processing times longer than
/// a lease renewal period: every item is completed exactly once, none is lost, and with no
/// crash nothing is delivered twice.
#[test]
fn concurrent_workers_complete_every_item_exactly_once() {
    fair_lock::testing::in_virtual_time(
        "concurrent_workers_complete_every_item_exactly_once",
        async {
            let backend = MemoryBackend::new(2);
            let (producer, _) = worker(&backend, 1);
            let ledger = Arc::new(Mutex::new(Ledger::default()));
            let total = 40u32;
            let workers: Vec<_> = (0..4u64)
                .map(|index| {
                    let (queue, _) = worker(&backend, 10 + index);
                    let ledger = ledger.clone();
                    tokio::spawn(async move {
                        for round in 0u64.. {
                            let done = ledger.lock().unwrap().completed.len();
                            if done == total as usize {
                                return;
                            }
                            let claim =
                                match tokio::time::timeout(Duration::from_secs(5), queue.claim())
                                    .await
                                {
                                    Ok(claim) => claim.unwrap(),
                                    Err(_) => continue,
                                };
                            ledger.lock().unwrap().claimed(claim.id());
                            // Some items outlive a renewal period (5 s), so leases are renewed.
                            let work = if (round + index) % 7 == 0 { 6_000 } else { 50 };
                            tokio::time::sleep(Duration::from_millis(work)).await;
                            complete_and_record(claim, &ledger).await;
                        }
                    })
                })
                .collect();
            let ids = enqueue_all(&producer, total, Duration::from_millis(700)).await;
            for task in workers {
                tokio::time::timeout(Duration::from_secs(600), task)
                    .await
                    .expect("the workers drained the queue")
                    .unwrap();
            }
            let ledger = std::mem::take(&mut *ledger.lock().unwrap());
            ledger.assert_exactly_once(&ids, &producer).await;
            assert_eq!(
                ledger.redeliveries(),
                0,
                "an item was delivered twice without a crash"
            );
        },
    );
}

/// A worker dies holding a claim (its process cut off from storage, the claim dropped): the
/// item is delivered again once the lease has run out, not before, and completed once.
#[test]
fn an_item_whose_worker_dies_is_delivered_again_after_the_lease() {
    fair_lock::testing::in_virtual_time(
        "an_item_whose_worker_dies_is_delivered_again_after_the_lease",
        async {
            let backend = MemoryBackend::new(3);
            let ttl = LockConfig::default().lease_ttl;
            let (producer, _) = worker(&backend, 1);
            let (dying, dying_gate) = worker(&backend, 2);
            let (survivor, _) = worker(&backend, 3);
            let ids = enqueue_all(&producer, 3, Duration::from_millis(10)).await;
            let claim = dying.claim().await.unwrap();
            assert_eq!(claim.id(), &ids[0]);
            let died_token = claim.fencing_token();
            dying_gate.set(GateMode::Crashed);
            drop(claim);
            let died_at = tokio::time::Instant::now();

            // The survivor gets the other two at once, oldest first, and not the dead worker's.
            for id in &ids[1..] {
                let claim = survivor.try_claim().await.unwrap().expect("a free item");
                assert_eq!(claim.id(), id);
                claim.complete().await.unwrap();
            }
            assert!(survivor.try_claim().await.unwrap().is_none());
            assert_redelivered_after_the_lease(
                &producer, &survivor, &ids[0], died_token, died_at, ttl,
            )
            .await;
            assert!(
                survivor.try_claim().await.unwrap().is_none(),
                "no item left"
            );
        },
    );
}

/// A worker pauses past its lease (its storage traffic stalls, its renewals with it), once
/// before completing and once in the middle of completing, while another worker claims,
/// processes and completes the item. When the paused worker resumes, its `complete` fails,
/// and the item stays completed once, under the other claim's token.
#[test]
fn a_paused_worker_that_wakes_late_does_not_complete_again() {
    fair_lock::testing::in_virtual_time(
        "a_paused_worker_that_wakes_late_does_not_complete_again",
        async {
            let backend = MemoryBackend::new(4);
            let ttl = LockConfig::default().lease_ttl;
            let (producer, _) = worker(&backend, 1);
            let (paused, paused_gate) = worker(&backend, 2);
            let (other, _) = worker(&backend, 3);
            for pause_midway in [false, true] {
                let id = producer.enqueue("job").await.unwrap();
                let claim = paused.claim().await.unwrap();
                assert_eq!(claim.id(), &id);
                let paused_token = claim.fencing_token();
                paused_gate.set(GateMode::Paused);
                let completing = if pause_midway {
                    // The completion starts while the lease is held, then stalls.
                    let completing = tokio::spawn(claim.complete());
                    tokio::time::sleep(ttl * 2).await;
                    Some(completing)
                } else {
                    tokio::time::sleep(ttl * 2).await;
                    assert!(!claim.is_held(), "the lease outlived the pause");
                    paused_gate.set(GateMode::Open);
                    assert!(matches!(
                        claim.complete().await,
                        Err(Error::Lock(lock_core::Error::LockLost { .. }))
                    ));
                    None
                };
                let second = other.claim().await.unwrap();
                assert_eq!(second.id(), &id, "the item was not delivered again");
                let second_token = second.fencing_token();
                assert!(second_token > paused_token);
                second.complete().await.unwrap();
                paused_gate.set(GateMode::Open);
                if let Some(completing) = completing {
                    let late = completing.await.unwrap();
                    assert!(
                        matches!(late, Err(Error::Lock(lock_core::Error::LockLost { .. }))),
                        "a completion past the lease was accepted: {late:?}"
                    );
                }
                assert_eq!(
                    producer.completed_by(&id).await.unwrap(),
                    Some(second_token)
                );
                assert!(
                    paused.try_claim().await.unwrap().is_none(),
                    "a completed item came back"
                );
            }
        },
    );
}

/// Sixteen items, four workers, and workers that die holding a claim (cut off, claim
/// dropped) every few items, each replaced by a fresh one: every item is completed exactly
/// once, none is lost, and the redeliveries are no more than the deaths.
#[test]
fn with_worker_deaths_every_item_is_completed_once_and_redeliveries_are_bounded() {
    fair_lock::testing::in_virtual_time(
        "with_worker_deaths_every_item_is_completed_once_and_redeliveries_are_bounded",
        async {
            let backend = MemoryBackend::new(5);
            let (producer, _) = worker(&backend, 1);
            let total = 16u32;
            let ids = enqueue_all(&producer, total, Duration::from_millis(5)).await;
            let ledger = Arc::new(Mutex::new(Ledger::default()));
            let deaths = Arc::new(Mutex::new(0u32));
            let workers: Vec<_> = (0..4u64)
                .map(|slot| {
                    let backend = backend.clone();
                    let (ledger, deaths) = (ledger.clone(), deaths.clone());
                    tokio::spawn(async move {
                        let mut seed = 100 + slot * 1000;
                        let (mut queue, mut gate) = worker(&backend, seed);
                        for round in 0u64.. {
                            if ledger.lock().unwrap().completed.len() == total as usize {
                                return;
                            }
                            let claim =
                                match tokio::time::timeout(Duration::from_secs(3), queue.claim())
                                    .await
                                {
                                    Ok(claim) => claim.unwrap(),
                                    Err(_) => continue,
                                };
                            ledger.lock().unwrap().claimed(claim.id());
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            if (round + slot) % 3 == 1 {
                                // This worker dies with the claim; a new one takes its place.
                                gate.set(GateMode::Crashed);
                                drop(claim);
                                *deaths.lock().unwrap() += 1;
                                seed += 1;
                                (queue, gate) = worker(&backend, seed);
                                continue;
                            }
                            complete_and_record(claim, &ledger).await;
                        }
                    })
                })
                .collect();
            for task in workers {
                tokio::time::timeout(Duration::from_secs(900), task)
                    .await
                    .expect("the workers drained the queue")
                    .unwrap();
            }
            let ledger = std::mem::take(&mut *ledger.lock().unwrap());
            ledger.assert_exactly_once(&ids, &producer).await;
            let deaths = *deaths.lock().unwrap();
            assert!(deaths > 0, "no worker died: the test tests nothing");
            assert_eq!(
                ledger.redeliveries(),
                deaths,
                "every death is one redelivery, and nothing else is delivered twice"
            );
        },
    );
}

/// A handle passes over an item it found held by another claim for `held_item_recheck`,
/// then tries it again: an item given back early is claimed once the recheck is due.
#[test]
fn a_held_item_is_passed_over_until_its_recheck_is_due() {
    fair_lock::testing::in_virtual_time(
        "a_held_item_is_passed_over_until_its_recheck_is_due",
        async {
            let backend = MemoryBackend::new(5);
            let (producer, _) = worker(&backend, 1);
            let first = producer.enqueue("first").await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
            let second = producer.enqueue("second").await.unwrap();
            let (holder, _) = worker(&backend, 2);
            let (other, _) = worker(&backend, 3);
            let held = holder.claim().await.unwrap();
            assert_eq!(held.id(), &first);
            let claim = other.claim().await.unwrap();
            assert_eq!(claim.id(), &second, "the held item was not passed over");
            claim.complete().await.unwrap();
            held.abandon().await.unwrap();
            assert!(
                other.try_claim().await.unwrap().is_none(),
                "an item found held was tried again before its recheck was due"
            );
            tokio::time::sleep(WorkQueueConfig::default().held_item_recheck).await;
            let again = other
                .try_claim()
                .await
                .unwrap()
                .expect("the given-back item");
            assert_eq!(again.id(), &first);
            again.complete().await.unwrap();
        },
    );
}
