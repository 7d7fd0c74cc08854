//! The leader election on the simulated cluster, in virtual time: one leader at a time,
//! terms that only grow, hand-overs on resignation, crash and pause, and the inputs an
//! election refuses.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fair_lock::Clock;
use futures::FutureExt;
use lock_core::storage::{RowKey, RowKind, RowRead};
use lock_core::{LeaseStatus, LockConfig, LockId, LockStorage, MonotonicTime};
use lock_recipes::{Election, Error};
use lock_storage_memory::ClientClock;

use common::{Link, Linked, cluster};

const NAME: &str = "scheduler";

fn election(client: &Linked, seed: u64) -> Election<Linked> {
    Election::new(client.locker(LockConfig::default(), seed).unwrap(), NAME).unwrap()
}

fn since(clock: &ClientClock, start: MonotonicTime) -> Duration {
    clock.now().instant.saturating_duration_since(start)
}

/// Jumps the paused clock forward without yielding, as if the process had been frozen:
/// no task runs before the caller's next await.
fn freeze_for(duration: Duration) {
    let _ = tokio::time::advance(duration).now_or_never();
}

/// A lock-core error, as an election returns it.
fn lock_lost(result: Result<(), Error>) -> bool {
    matches!(result, Err(Error::Lock(lock_core::Error::LockLost { .. })))
}

#[test]
fn one_leader_at_a_time_and_terms_strictly_increase() {
    fair_lock::testing::in_virtual_time(
        "one_leader_at_a_time_and_terms_strictly_increase",
        async {
            let cluster = cluster();
            let leading = Arc::new(AtomicUsize::new(0));
            let terms = Arc::new(Mutex::new(Vec::new()));
            let ttl = LockConfig::default().lease_ttl;
            let tasks: Vec<_> = (0..4u64)
                .map(|seed| {
                    let election = election(&Linked::new(&cluster), seed);
                    let (leading, terms) = (leading.clone(), terms.clone());
                    tokio::spawn(async move {
                        for round in 0..6u32 {
                            let leadership = election.campaign().await.unwrap();
                            assert_eq!(leading.fetch_add(1, Ordering::SeqCst), 0, "two leaders");
                            terms.lock().unwrap().push(leadership.term());
                            // Some terms outlive the lease, so they must be renewed.
                            let term_length = if round % 3 == 0 {
                                ttl + Duration::from_secs(3)
                            } else {
                                Duration::from_millis(5)
                            };
                            tokio::time::sleep(term_length).await;
                            assert!(leadership.is_leader());
                            leading.fetch_sub(1, Ordering::SeqCst);
                            leadership.resign().await.unwrap();
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            let terms = terms.lock().unwrap();
            assert_eq!(terms.len(), 24);
            assert!(
                terms.windows(2).all(|pair| pair[0] < pair[1]),
                "terms must strictly increase from leader to leader: {terms:?}"
            );
        },
    );
}

#[test]
fn leader_reports_the_current_leader_without_campaigning() {
    fair_lock::testing::in_virtual_time(
        "leader_reports_the_current_leader_without_campaigning",
        async {
            let cluster = cluster();
            let reader = Linked::new(&cluster);
            let observer = election(&reader, 9);
            let candidate = election(&Linked::new(&cluster), 1);
            assert_eq!(observer.leader().await.unwrap(), None, "no one leads yet");

            let leadership = candidate.campaign().await.unwrap();
            for _ in 0..3 {
                let leader = observer.leader().await.unwrap().expect("a leader");
                assert_eq!(&leader.owner, leadership.owner_id());
                assert_eq!(leader.term, Some(leadership.term()));
                assert!(!leader.stale);
                tokio::time::sleep(LockConfig::default().lease_ttl).await;
            }
            let queue = RowKey::new(RowKind::Queue, LockId::new(NAME).unwrap());
            let queued = reader.read_row(RowRead::first(queue, 64)).await.unwrap();
            // The leader left the queue as it took the lock (waiting in the main row, on
            // by default), so any cell here would be the observer's.
            assert_eq!(
                queued.len(),
                0,
                "nobody stands in the queue: observing is not campaigning"
            );
            leadership.resign().await.unwrap();
            assert_eq!(
                observer.leader().await.unwrap(),
                None,
                "the leader resigned"
            );
        },
    );
}

#[test]
fn resign_hands_leadership_to_the_next_campaigner_at_once() {
    fair_lock::testing::in_virtual_time(
        "resign_hands_leadership_to_the_next_campaigner_at_once",
        async {
            let cluster = cluster();
            let clock = cluster.client().clock();
            let observer = election(&Linked::new(&cluster), 9);
            let first = election(&Linked::new(&cluster), 1)
                .campaign()
                .await
                .unwrap();
            let next = {
                let second = election(&Linked::new(&cluster), 2);
                tokio::spawn(async move { second.campaign().await })
            };
            tokio::time::sleep(Duration::from_secs(30)).await;
            assert!(!next.is_finished(), "a candidate led beside the leader");
            assert_eq!(
                observer.leader().await.unwrap().map(|leader| leader.owner),
                Some(first.owner_id().clone())
            );
            let first_term = first.term();
            let resigned_at = clock.now().instant;
            first.resign().await.unwrap();
            let second = next.await.unwrap().unwrap();
            let handover = since(&clock, resigned_at);
            assert!(
                handover < Duration::from_secs(1),
                "the next campaigner took {handover:?} to lead"
            );
            assert!(second.term() > first_term);
            let leader = observer.leader().await.unwrap().expect("a leader");
            assert_eq!(&leader.owner, second.owner_id());
            assert_eq!(leader.term, Some(second.term()));
            second.resign().await.unwrap();
        },
    );
}

#[test]
fn a_crashed_leader_is_replaced_after_its_lease_with_a_larger_term() {
    fair_lock::testing::in_virtual_time(
        "a_crashed_leader_is_replaced_after_its_lease_with_a_larger_term",
        async {
            let cluster = cluster();
            let clock = cluster.client().clock();
            let ttl = LockConfig::default().lease_ttl;
            let observer = election(&Linked::new(&cluster), 9);
            let crashing_link = Linked::new(&cluster);
            let crashing = election(&crashing_link, 1);
            let leadership = crashing.campaign().await.unwrap();
            // Between two renewals, so the last one certainly reached the storage.
            tokio::time::sleep(ttl + Duration::from_secs(1)).await;
            let crashed_term = leadership.term();
            let crashed_owner = leadership.owner_id().clone();
            // The process dies: nothing it sends reaches the storage any more, and its
            // leadership goes without a resignation.
            crashing_link.set_link(Link::Silent);
            drop(leadership);
            let crashed_at = clock.now().instant;
            let next = {
                let successor = election(&Linked::new(&cluster), 2);
                tokio::spawn(async move { successor.campaign().await })
            };
            tokio::time::sleep(ttl - Duration::from_secs(2)).await;
            assert!(
                !next.is_finished(),
                "a successor led before the crashed leader's lease ran out"
            );
            let leader = observer
                .leader()
                .await
                .unwrap()
                .expect("the crashed leader");
            assert_eq!(leader.owner, crashed_owner);
            assert!(leader.stale, "a leader that stopped renewing looks stale");

            let successor = next.await.unwrap().unwrap();
            let recovery = since(&clock, crashed_at);
            assert!(
                recovery <= ttl + Duration::from_secs(1),
                "took {recovery:?} to replace the crashed leader"
            );
            assert!(successor.term() > crashed_term);
            let leader = observer.leader().await.unwrap().expect("the successor");
            assert_eq!(&leader.owner, successor.owner_id());
            assert_eq!(leader.term, Some(successor.term()));
            assert!(!leader.stale);
            successor.resign().await.unwrap();
        },
    );
}

#[test]
fn a_paused_leader_is_told_it_lost_leadership() {
    fair_lock::testing::in_virtual_time("a_paused_leader_is_told_it_lost_leadership", async {
        let cluster = cluster();
        let ttl = LockConfig::default().lease_ttl;
        let paused = election(&Linked::new(&cluster), 1);
        let successor = election(&Linked::new(&cluster), 2);
        let leadership = paused.campaign().await.unwrap();
        tokio::time::sleep(ttl).await;
        assert!(leadership.is_leader(), "renewals keep it leading");
        let lost = tokio::spawn(leadership.lost());
        // The whole process is frozen past its lease: not even its renewal task runs.
        freeze_for(ttl * 2);
        assert_eq!(leadership.status(), LeaseStatus::Lost);
        assert!(!leadership.is_leader());
        assert_eq!(leadership.time_left(), Duration::ZERO);
        tokio::time::timeout(Duration::from_millis(1), lost)
            .await
            .expect("the paused leader's lost() must complete once it runs again")
            .unwrap();
        let next = tokio::time::timeout(ttl, successor.campaign())
            .await
            .expect("the lapsed leadership is free")
            .unwrap();
        assert!(next.term() > leadership.term());
        assert!(
            lock_lost(leadership.resign().await),
            "a resignation after the lease lapsed reports the loss"
        );
        assert!(next.is_leader());
        next.resign().await.unwrap();
    });
}

#[test]
fn a_cut_off_leader_is_told_before_anyone_else_leads() {
    fair_lock::testing::in_virtual_time(
        "a_cut_off_leader_is_told_before_anyone_else_leads",
        async {
            let cluster = cluster();
            let clock = cluster.client().clock();
            let leader_link = Linked::new(&cluster);
            let leadership = election(&leader_link, 1).campaign().await.unwrap();
            let lost = leadership.lost();
            let lost_at = tokio::spawn({
                let clock = clock.clone();
                async move {
                    lost.await;
                    clock.now().instant
                }
            });
            tokio::time::sleep(Duration::from_secs(12)).await;
            assert_eq!(leadership.status(), LeaseStatus::Held);
            leader_link.set_link(Link::Refused);
            let next = election(&Linked::new(&cluster), 2)
                .campaign()
                .await
                .unwrap();
            let led_at = clock.now().instant;
            let lost_at = lost_at.await.unwrap();
            assert!(
                lost_at <= led_at,
                "told at {lost_at:?}, successor led at {led_at:?}"
            );
            assert!(next.term() > leadership.term());
            assert!(lock_lost(leadership.resign().await));
            next.resign().await.unwrap();
        },
    );
}

#[test]
fn an_election_refuses_a_locker_without_fencing() {
    fair_lock::testing::in_virtual_time("an_election_refuses_a_locker_without_fencing", async {
        let cluster = cluster();
        let config = LockConfig {
            fencing: false,
            ..LockConfig::default()
        };
        let locker = Linked::new(&cluster).locker(config, 1).unwrap();
        match Election::new(locker, NAME) {
            Err(Error::InvalidConfig { field, .. }) => assert_eq!(field, "fencing"),
            other => panic!("expected InvalidConfig for fencing, got {other:?}"),
        }
    });
}

/// The algorithms that take no fencing tokens run only with fencing off, so an election
/// refuses their lockers too, saying what to set.
#[test]
fn an_election_refuses_the_lockers_of_algorithms_without_terms() {
    fair_lock::testing::in_virtual_time(
        "an_election_refuses_the_lockers_of_algorithms_without_terms",
        async {
            use lock_core::Algorithm;
            use lock_core::config::BakeryConfig;
            let cluster = cluster();
            let configs = [
                LockConfig {
                    algorithm: Algorithm::Baseline,
                    fencing: false,
                    ..LockConfig::default()
                },
                LockConfig {
                    algorithm: Algorithm::Bakery,
                    fencing: false,
                    bakery: BakeryConfig {
                        client_id: 1,
                        ..BakeryConfig::default()
                    },
                    ..LockConfig::default()
                },
            ];
            for config in configs {
                let algorithm = config.algorithm;
                let locker = Linked::new(&cluster).locker(config, 1).unwrap();
                match Election::new(locker, NAME) {
                    Err(Error::InvalidConfig { field, reason }) => {
                        assert_eq!(field, "fencing", "{algorithm:?}");
                        assert!(reason.contains("fencing: true"), "{reason}");
                    }
                    other => panic!("{algorithm:?}: expected fencing refused, got {other:?}"),
                }
            }
        },
    );
}

/// A hostile election name is refused as a lock id is, naming the problem, and an
/// election is never created under it.
#[test]
fn an_election_refuses_hostile_names() {
    fair_lock::testing::in_virtual_time("an_election_refuses_hostile_names", async {
        let cluster = cluster();
        let too_long = "n".repeat(LockId::MAX_LEN + 1);
        let hostile: [(&str, &str); 6] = [
            ("", "empty"),
            (&too_long, "too long"),
            ("leader\nelection", "U+000A"),
            ("leader\u{0}", "U+0000"),
            ("lead\u{202E}er", "U+202E"),
            ("\u{200B}", "U+200B"),
        ];
        for (name, says) in hostile {
            let locker = Linked::new(&cluster)
                .locker(LockConfig::default(), 1)
                .unwrap();
            match Election::new(locker, name) {
                Err(Error::Lock(lock_core::Error::InvalidLockId { reason, .. })) => {
                    assert!(
                        reason.contains(says),
                        "{name:?}: {reason} should say {says:?}"
                    )
                }
                other => panic!("{name:?}: expected InvalidLockId, got {other:?}"),
            }
        }
    });
}

/// Campaigning or asking for the leader outside a Tokio runtime returns
/// `lock_core::Error::NoRuntime` instead of panicking.
#[test]
fn campaigning_outside_a_runtime_returns_no_runtime() {
    let election = election(&Linked::new(&cluster()), 1);
    match futures::executor::block_on(election.campaign()) {
        Err(Error::Lock(lock_core::Error::NoRuntime(_))) => {}
        other => panic!("expected NoRuntime, got {other:?}"),
    }
    assert!(matches!(
        futures::executor::block_on(election.leader()),
        Err(Error::Lock(lock_core::Error::NoRuntime(_)))
    ));
}
