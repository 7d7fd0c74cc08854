//! Regression tests for defects found through the public API, on Tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use crate::test_client::{TestClient, TestStore};
use crate::{Locker, VirtualClock};
use lock_core::config::LockConfig;
use lock_core::error::Error;
use lock_core::machine::LeaseStatus;
use lock_core::time::Timestamp;

const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

fn store() -> (TestStore, VirtualClock) {
    let clock = VirtualClock::starting_at(EPOCH);
    (TestStore::new(clock.clone()), clock)
}

fn locker(client: TestClient, clock: &VirtualClock, seed: u64) -> Locker<TestClient> {
    Locker::builder(client)
        .clock(Arc::new(clock.clone()))
        .replay_owner_ids_unsafe(seed)
        .build()
        .unwrap()
}

/// Jumps the paused clock forward without yielding, as if the process had been frozen:
/// no task (not the lease keeper either) runs before the caller's next await.
fn freeze_for(duration: Duration) {
    // `advance` moves the clock on its first poll, then yields; dropping it there skips
    // the yield.
    let _ = tokio::time::advance(duration).now_or_never();
}

#[test]
fn a_release_after_the_lease_lapsed_before_its_first_renewal_reports_the_loss() {
    crate::watchdog::in_virtual_time(
        "a_release_after_the_lease_lapsed_before_its_first_renewal_reports_the_loss",
        async {
            let (store, clock) = store();
            let first = locker(store.client(), &clock, 1);
            let second = locker(store.client(), &clock, 2);
            let guard = first.lock("account:42").await.unwrap();
            assert_eq!(guard.status(), LeaseStatus::Held);
            let config = LockConfig::default();
            // Frozen right after acquiring, past the lease TTL (so the cells expired too).
            freeze_for(config.lease_ttl + Duration::from_secs(1));
            assert_eq!(guard.status(), LeaseStatus::Lost);
            assert!(!guard.is_held());
            assert_eq!(guard.time_left(), Duration::ZERO);
            // Another owner takes the lock meanwhile and lets it go.
            let other = second
                .try_lock("account:42")
                .await
                .unwrap()
                .expect("the lapsed lock is free");
            other.release().await.unwrap();
            assert_eq!(guard.status(), LeaseStatus::Lost);
            match guard.release().await {
                Err(Error::LockLost { lock_id, .. }) => assert_eq!(lock_id.as_str(), "account:42"),
                other => panic!("a lapsed lease must release with LockLost, got {other:?}"),
            }
        },
    );
}

#[test]
fn a_release_after_a_started_lease_lapsed_unnoticed_reports_the_loss() {
    crate::watchdog::in_virtual_time(
        "a_release_after_a_started_lease_lapsed_unnoticed_reports_the_loss",
        async {
            let (store, clock) = store();
            let first = locker(store.client(), &clock, 1);
            let guard = first.lock("account:42").await.unwrap();
            let config = LockConfig::default();
            // The lease task starts and renews once.
            tokio::time::sleep(config.lease_ttl).await;
            assert_eq!(guard.status(), LeaseStatus::Held);
            freeze_for(config.lease_ttl * 2);
            assert_eq!(guard.status(), LeaseStatus::Lost);
            assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
        },
    );
}

#[test]
fn dropping_the_locker_and_its_guards_stops_all_background_work() {
    crate::watchdog::in_virtual_time(
        "dropping_the_locker_and_its_guards_stops_all_background_work",
        async {
            let (store, clock) = store();
            let client = store.client();
            let first = locker(client.clone(), &clock, 1);
            let ttl = LockConfig::default().lease_ttl;
            // One lease that will have its own task, one still parked in the keeper, one dropped
            // while acquiring.
            let renewed = first.lock("account:1").await.unwrap();
            tokio::time::sleep(ttl).await;
            let parked = first.lock("account:2").await.unwrap();
            let waiting = {
                let blocker = locker(store.client(), &clock, 2);
                let held = blocker.lock("account:3").await.unwrap();
                let waiter = first.clone();
                let pending = tokio::spawn(async move { waiter.lock("account:3").await });
                tokio::time::sleep(Duration::from_millis(50)).await;
                pending.abort();
                held
            };
            drop(waiting);
            drop(renewed);
            drop(parked);
            drop(first);
            // Let the background releases finish, then count.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let settled = client.sent().len();
            for _ in 0..10 {
                tokio::time::sleep(ttl).await;
            }
            assert_eq!(
                client.sent().len(),
                settled,
                "requests after the locker and every guard were dropped: {:?}",
                &client.sent()[settled..]
            );
        },
    );
}

// --- Configuration: no overflow, and a floor under every period. ---

mod config_bounds {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use lock_core::config::{
        Algorithm, BakeryConfig, BaselineConfig, Fraction, MAX_BAKERY_CLIENTS, MIN_PERIOD,
        MIN_RENEW_EVERY, PollConfig, ValidConfig,
    };
    use lock_core::machine::Acquire;

    fn field_of(result: Result<ValidConfig, Error>) -> &'static str {
        match result {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn absurd_durations_are_refused_without_overflowing() {
        let base = LockConfig::default();
        let skew = LockConfig {
            max_clock_skew: Duration::MAX,
            ..base.clone()
        };
        assert_eq!(field_of(skew.validate()), "lease_ttl");
        let all_max = LockConfig {
            lease_ttl: Duration::MAX,
            max_clock_skew: Duration::MAX,
            request_timeout: Duration::MAX,
            retry_backoff: Duration::MAX,
            poll: PollConfig {
                min_interval: Duration::MAX,
                max_interval: Duration::MAX,
                cold_lookback: Duration::MAX,
                queue_read_limit: u32::MAX,
                jitter_percent: u32::MAX,
                queue_margin: Some(Duration::MAX),
                margin_acquisitions: u32::MAX,
                least_queue_margin: Duration::MAX,
            },
            renew_fraction: Fraction::new(u32::MAX - 1, u32::MAX),
            storage_retries: u32::MAX,
            soft_attempts: u32::MAX,
            baseline: BaselineConfig {
                owner_backoff_max: Duration::MAX,
                concurrent_backoff_step: Duration::MAX,
            },
            ..base
        };
        assert_eq!(field_of(all_max.validate()), "lease_ttl");
        assert_eq!(
            Acquire::floor_margin(&LockConfig {
                max_clock_skew: Duration::MAX,
                request_timeout: Duration::MAX,
                ..LockConfig::default()
            }),
            Duration::MAX
        );
    }

    #[test]
    fn every_period_has_a_floor() {
        let base = LockConfig::default();
        let tiny = Duration::from_nanos(1);
        let cases: Vec<(LockConfig, &str)> = vec![
            (
                LockConfig {
                    renew_fraction: Fraction::new(1, u32::MAX),
                    ..base.clone()
                },
                "renew_fraction",
            ),
            (
                LockConfig {
                    poll: PollConfig {
                        min_interval: tiny,
                        ..PollConfig::default()
                    },
                    ..base.clone()
                },
                "poll.min_interval",
            ),
            (
                LockConfig {
                    poll: PollConfig {
                        min_interval: tiny,
                        max_interval: tiny,
                        ..PollConfig::default()
                    },
                    ..base.clone()
                },
                "poll.min_interval",
            ),
            (
                LockConfig {
                    poll: PollConfig {
                        jitter_percent: 100,
                        ..PollConfig::default()
                    },
                    ..base.clone()
                },
                "poll.jitter_percent",
            ),
            (
                LockConfig {
                    retry_backoff: tiny,
                    ..base.clone()
                },
                "retry_backoff",
            ),
            (
                LockConfig {
                    baseline: BaselineConfig {
                        owner_backoff_max: tiny,
                        ..BaselineConfig::default()
                    },
                    ..base.clone()
                },
                "baseline.owner_backoff_max",
            ),
            (
                LockConfig {
                    baseline: BaselineConfig {
                        concurrent_backoff_step: tiny,
                        ..BaselineConfig::default()
                    },
                    ..base.clone()
                },
                "baseline.concurrent_backoff_step",
            ),
        ];
        for (config, field) in cases {
            assert_eq!(field_of(config.validate()), field);
        }
        let message = LockConfig {
            renew_fraction: Fraction::new(1, u32::MAX),
            ..base
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(message.contains("use a larger fraction"), "{message}");
    }

    /// The most aggressive configuration validation accepts: renewal at the 10 ms floor,
    /// polls and retries at the 1 ms floor, the most jitter.
    fn fastest() -> LockConfig {
        let config = LockConfig {
            lease_ttl: Duration::from_secs(3),
            max_clock_skew: Duration::ZERO,
            renew_fraction: Fraction::new(1, 300),
            request_timeout: Duration::from_millis(500),
            retry_backoff: MIN_PERIOD,
            poll: PollConfig {
                min_interval: MIN_PERIOD,
                max_interval: MIN_PERIOD,
                jitter_percent: lock_core::config::MAX_JITTER_PERCENT,
                ..PollConfig::default()
            },
            ..LockConfig::default()
        };
        let valid = config.clone().validate().unwrap();
        assert_eq!(valid.renew_every(), MIN_RENEW_EVERY);
        config
    }

    #[test]
    fn a_held_and_an_awaited_lock_make_a_bounded_number_of_requests_per_second() {
        crate::watchdog::in_virtual_time(
            "a_held_and_an_awaited_lock_make_a_bounded_number_of_requests_per_second",
            async {
                let (store, clock) = store();
                let (holder_link, waiter_link) = (store.client(), store.client());
                let build = |client: TestClient, seed| {
                    Locker::builder(client)
                        .config(fastest())
                        .clock(Arc::new(clock.clone()))
                        .replay_owner_ids_unsafe(seed)
                        .build()
                        .unwrap()
                };
                let (holder, waiter) =
                    (build(holder_link.clone(), 1), build(waiter_link.clone(), 2));
                let guard = holder.lock("account:42").await.unwrap();
                let waiting = tokio::spawn(async move { waiter.lock("account:42").await });
                // Settle, then measure ten seconds of one held lock and one waiter.
                tokio::time::sleep(Duration::from_secs(1)).await;
                let (held_before, waited_before) =
                    (holder_link.sent().len(), waiter_link.sent().len());
                let window = 10;
                tokio::time::sleep(Duration::from_secs(window)).await;
                assert!(guard.is_held());
                let held = (holder_link.sent().len() - held_before) as u64 / window;
                let waited = (waiter_link.sent().len() - waited_before) as u64 / window;
                eprintln!("at the floors: held lock {held} requests/s, waiter {waited} requests/s");
                // Documented on `LockConfig`: a held lock renews at most 100 times a second (3
                // requests a round for the queue algorithm); a waiter polls at most about 2000 times
                // a second (each poll at most 2 reads).
                assert!(held <= 300, "held lock: {held} requests/s");
                assert!(waited <= 4000, "waiter: {waited} requests/s");
                guard.release().await.unwrap();
                waiting.await.unwrap().unwrap().release().await.unwrap();
            },
        );
    }

    /// Any duration at all: zero, the maximum, and the whole range in between.
    fn any_duration() -> impl Strategy<Value = Duration> {
        prop_oneof![
            Just(Duration::ZERO),
            Just(Duration::MAX),
            Just(Duration::from_nanos(1)),
            (any::<u64>(), 0..1_000_000_000u32).prop_map(|(s, n)| Duration::new(s, n)),
        ]
    }

    /// `plausible`, except one time in `100 / hostile` anything: the generator mixes
    /// hostile configurations (`HOSTILE`, where most draws have some field out of range)
    /// with mostly plausible ones (`MILD`, so that a good share of the configurations
    /// drawn pass validation and get run).
    fn duration(
        plausible: impl Strategy<Value = Duration> + 'static,
        hostile: u32,
    ) -> BoxedStrategy<Duration> {
        prop_oneof![100 - hostile => plausible, hostile => any_duration()].boxed()
    }

    /// How often (in percent) each field of a hostile configuration is drawn from its
    /// full range instead of its plausible one.
    const HOSTILE: u32 = 10;
    /// The same, for the mostly plausible configurations.
    const MILD: u32 = 1;

    fn millis(range: std::ops::Range<u64>, hostile: u32) -> BoxedStrategy<Duration> {
        duration(range.prop_map(Duration::from_millis), hostile)
    }

    fn count(plausible: std::ops::Range<u32>, hostile: u32) -> BoxedStrategy<u32> {
        prop_oneof![100 - hostile => plausible, hostile => any::<u32>()].boxed()
    }

    fn any_fraction(hostile: u32) -> BoxedStrategy<Fraction> {
        prop_oneof![
            100 - hostile => (1u32..4, 2u32..10)
                .prop_map(|(n, d)| Fraction::new(n.min(d - 1), d)),
            hostile => prop_oneof![
                (any::<u32>(), any::<u32>()).prop_map(|(n, d)| Fraction::new(n, d)),
                (1u32..4, 2u32..10).prop_map(|(n, d)| Fraction::new(n, d)),
                Just(Fraction::new(0, 0)),
                Just(Fraction::new(1, 1)),
                Just(Fraction::new(1, u32::MAX)),
                Just(Fraction::new(u32::MAX - 1, u32::MAX)),
            ],
        ]
        .boxed()
    }

    /// Any owner prefix: none, plausible ones, the 50-character limit and one past it, and
    /// hostile text (empty, spaces, control, invisible and direction-changing characters,
    /// any string at all).
    fn any_owner_prefix(hostile: u32) -> BoxedStrategy<Option<String>> {
        let hostile_prefix = prop_oneof![
            Just(Some("h".repeat(51))),
            Just(Some(String::new())),
            prop::sample::select(vec![
                "my host",
                "web\n1",
                "web\u{0}1",
                "web\u{200B}1",
                "web\u{202E}1",
                "wéb-1",
                "web/1",
                "\u{FEFF}",
            ])
            .prop_map(|prefix| Some(prefix.to_owned())),
            any::<String>().prop_map(Some),
        ];
        prop_oneof![
            (100 - hostile) / 2 => Just(None),
            (100 - hostile) / 2 => prop_oneof![
                "[A-Za-z0-9._:@-]{1,12}".prop_map(Some),
                Just(Some("h".repeat(50))),
            ],
            hostile => hostile_prefix,
        ]
        .boxed()
    }

    /// The bakery's settings over their full range: client counts and ids from 0 to
    /// `u32::MAX` (mostly near the valid `1..=max_clients`, and its edges), with and
    /// without the lease.
    fn any_bakery(hostile: u32) -> BoxedStrategy<BakeryConfig> {
        let max_clients = prop_oneof![
            100 - hostile => prop_oneof![1u32..10, Just(MAX_BAKERY_CLIENTS)],
            hostile => prop_oneof![Just(0u32), Just(MAX_BAKERY_CLIENTS + 1), any::<u32>()],
        ];
        (max_clients, any::<bool>(), any::<u32>())
            .prop_flat_map(move |(max_clients, lease, any_id)| {
                let client_id = prop_oneof![
                    100 - hostile => prop_oneof![1..=max_clients.max(1), Just(max_clients)],
                    hostile => prop_oneof![
                        Just(0),
                        Just(max_clients.saturating_add(1)),
                        Just(any_id),
                    ],
                ];
                (
                    client_id,
                    prop_oneof![100 - hostile => Just(true), hostile => Just(lease)],
                )
                    .prop_map(move |(client_id, lease)| BakeryConfig {
                        max_clients,
                        client_id,
                        lease,
                    })
            })
            .boxed()
    }

    prop_compose! {
        fn config_with(hostile: u32)(
            algorithm in prop_oneof![
                Just(Algorithm::Queue),
                Just(Algorithm::Baseline),
                Just(Algorithm::Combined),
                Just(Algorithm::Bakery),
            ],
            lease_ttl in duration((2u64..120).prop_map(Duration::from_secs), hostile),
            waiter_ttl in prop_oneof![
                100 - hostile => duration((2u64..10).prop_map(Duration::from_secs), hostile),
                hostile => prop_oneof![
                    millis(0..10_000, hostile),
                    (0u64..2).prop_map(Duration::from_secs),
                ],
            ],
            renew_fraction in any_fraction(hostile),
            max_clock_skew in millis(0..1000, hostile),
            request_timeout in millis(1..2000, hostile),
            poll in (
                millis(1..50, hostile),
                millis(50..1000, hostile),
                count(2..20, hostile),
                count(0..51, hostile),
                millis(1..120_000, hostile),
                prop::option::of(millis(0..5000, hostile)),
                count(0..1001, hostile),
                millis(1..5000, hostile),
            ),
            storage_retries in count(0..10, hostile),
            storage_retry_window in millis(0..20_000, hostile),
            retry_backoff in millis(1..200, hostile),
            soft_attempts in count(1..10, hostile),
            owner_prefix in any_owner_prefix(hostile),
            fencing in any::<bool>(),
            fast_path in any::<bool>(),
            wait_in_main_row in any::<bool>(),
            linger in prop_oneof![Just(Duration::ZERO), millis(1..2000, hostile)],
            fencing_anyway in prop::bool::weighted(f64::from(hostile) / 10.0),
            baseline in (millis(1..2000, hostile), millis(1..200, hostile)),
            bakery in any_bakery(hostile),
        ) -> LockConfig {
            LockConfig {
                algorithm,
                lease_ttl,
                waiter_ttl,
                renew_fraction,
                max_clock_skew,
                request_timeout,
                poll: PollConfig {
                    min_interval: poll.0,
                    max_interval: poll.1,
                    queue_read_limit: poll.2,
                    jitter_percent: poll.3,
                    cold_lookback: poll.4,
                    queue_margin: poll.5,
                    margin_acquisitions: poll.6,
                    least_queue_margin: poll.7,
                },
                storage_retries,
                storage_retry_window,
                retry_backoff,
                soft_attempts,
                owner_prefix,
                // The baseline and the bakery, which take no tokens, are drawn with fencing
                // on too (and must be refused), more often among the hostile draws.
                fencing: fencing
                    && (fencing_anyway
                        || !matches!(algorithm, Algorithm::Baseline | Algorithm::Bakery)),
                fast_path,
                wait_in_main_row,
                linger,
                baseline: BaselineConfig {
                    owner_backoff_max: baseline.0,
                    concurrent_backoff_step: baseline.1,
                },
                bakery,
            }
        }
    }

    /// Configurations with every field and algorithm drawn from its full range: hostile
    /// ones and mostly plausible ones, half and half.
    fn any_config() -> BoxedStrategy<LockConfig> {
        prop_oneof![config_with(HOSTILE).boxed(), config_with(MILD).boxed()].boxed()
    }

    /// The configuration of the second, contending locker: the same, except that a bakery
    /// client needs its own client id. `None` when there is no other id to give (a bakery
    /// of one client).
    fn contender(config: &LockConfig) -> Option<LockConfig> {
        if config.algorithm != Algorithm::Bakery {
            return Some(config.clone());
        }
        let BakeryConfig {
            max_clients,
            client_id,
            ..
        } = config.bakery;
        let other = client_id % max_clients + 1;
        (other != client_id).then(|| LockConfig {
            bakery: BakeryConfig {
                client_id: other,
                ..config.bakery.clone()
            },
            ..config.clone()
        })
    }

    /// What one [`exercise`] cost: storage requests sent by both lockers, over how much
    /// virtual time.
    #[derive(Debug)]
    struct Cost {
        requests: usize,
        elapsed: Duration,
    }

    /// Takes and releases a lock twice with `config`, once under contention, on the paused
    /// clock: every timing the machines derive from the configuration gets computed. The
    /// locker refuses nothing that validation accepts.
    fn exercise(config: LockConfig) -> Result<Cost, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (store, clock) = store();
            let (first_link, second_link) = (store.client(), store.client());
            let build = |client: TestClient, config: LockConfig, seed| {
                Locker::builder(client)
                    .config(config)
                    .clock(Arc::new(clock.clone()))
                    .replay_owner_ids_unsafe(seed)
                    .build()
            };
            let first = match build(first_link.clone(), config.clone(), 1) {
                Ok(first) => first,
                Err(error) => return Err(format!("accepted, then refused by the locker: {error}")),
            };
            let second = match contender(&config) {
                Some(config) => Some(
                    build(second_link.clone(), config, 2)
                        .map_err(|error| format!("the contender refused: {error}"))?,
                ),
                None => None,
            };
            let started = tokio::time::Instant::now();
            let guard = first
                .lock("account:42")
                .await
                .map_err(|error| format!("lock: {error}"))?;
            let waiting = second.map(|second| {
                tokio::spawn(async move {
                    second
                        .lock_timeout("account:42", Duration::from_secs(3600))
                        .await
                })
            });
            let renew_every = first.config().renew_every();
            tokio::time::sleep(renew_every.saturating_mul(2).min(Duration::from_secs(3600))).await;
            let _ = first.inspect("account:42", 10).await.unwrap();
            let _ = guard.time_left();
            let _ = guard.release().await;
            if let Some(waiting) = waiting
                && let Ok(Ok(Some(next))) = waiting.await
            {
                let _ = next.release().await;
            }
            Ok(Cost {
                requests: first_link.sent().len() + second_link.sent().len(),
                elapsed: started.elapsed(),
            })
        })
    }

    /// Runs [`exercise`] on its own thread and waits a bounded wall-clock time: on the
    /// paused clock a task that spins (re-arms a zero-length timer, or never yields) never
    /// lets virtual time move, so it shows as a run that does not finish.
    fn exercise_within_wall_time(config: LockConfig) -> Result<Cost, String> {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(exercise(config));
        });
        match finished.recv_timeout(Duration::from_secs(60)) {
            Ok(cost) => cost,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                Err("did not finish within 60 s of wall time: it spins".into())
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err("it panicked".into()),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn validation_never_panics_and_accepted_configurations_run(config in any_config()) {
            let valid = match config.clone().validate() {
                Ok(valid) => valid,
                Err(Error::InvalidConfig { field, reason }) => {
                    prop_assert!(!reason.is_empty());
                    if config.fencing
                        && matches!(config.algorithm, Algorithm::Baseline | Algorithm::Bakery)
                    {
                        prop_assert_eq!(field, "fencing", "{}", reason);
                    }
                    return Ok(());
                }
                Err(error) => return Err(TestCaseError::fail(format!("untyped: {error:?}"))),
            };
            prop_assert!(
                !(config.fencing
                    && matches!(config.algorithm, Algorithm::Baseline | Algorithm::Bakery)),
                "fencing accepted for {:?}",
                config.algorithm
            );
            prop_assert!(
                config.algorithm != Algorithm::Bakery || config.bakery.lease,
                "the bakery without its lease accepted"
            );
            prop_assert!(valid.renew_every() >= MIN_RENEW_EVERY);
            prop_assert!(valid.effective_lease() > valid.renew_every());
            prop_assert!(valid.waiter_renew_every() >= MIN_RENEW_EVERY);
            prop_assert!(valid.waiter_effective() > valid.waiter_renew_every());
            prop_assert!(valid.waiter_ttl() <= valid.ttl());
            prop_assert!(config.poll.min_interval >= MIN_PERIOD);
            prop_assert!(config.retry_backoff >= MIN_PERIOD);
            let _ = Acquire::floor_margin(&config);
            let cost = exercise_within_wall_time(config).map_err(TestCaseError::fail)?;
            // No flood: a fixed allowance for the acquisitions and releases, then at most
            // the documented rates of one held lock (300 requests/s) and one waiter (about
            // 4000) over the virtual time the run took.
            let allowed = 200.0 + 5000.0 * cost.elapsed.as_secs_f64();
            prop_assert!(
                cost.requests as f64 <= allowed,
                "{} requests in {:?} of virtual time",
                cost.requests,
                cost.elapsed
            );
        }

        #[test]
        fn validation_never_panics_on_the_full_range(config in any_config()) {
            let _ = config.validate();
        }
    }
}

// --- Entry points outside a runtime, and hostile lock ids. ---

#[test]
fn polling_lock_outside_a_runtime_returns_no_runtime() {
    let (store, clock) = store();
    let locker = locker(store.client(), &clock, 1);
    let lock = futures::executor::block_on(locker.lock("account:42"));
    match lock {
        Err(Error::NoRuntime(what)) => assert!(what.contains("lock"), "{what}"),
        other => panic!("expected NoRuntime, got {other:?}"),
    }
    let message = futures::executor::block_on(locker.try_lock("account:42"))
        .unwrap_err()
        .to_string();
    assert!(message.contains("enable_time"), "{message}");
    assert!(matches!(
        futures::executor::block_on(locker.lock_timeout("account:42", Duration::from_secs(1))),
        Err(Error::NoRuntime(_))
    ));
    assert!(matches!(
        futures::executor::block_on(locker.inspect("account:42", 10)),
        Err(Error::NoRuntime(_))
    ));
    let owner = lock_core::id::OwnerId::new("someone").unwrap();
    assert!(matches!(
        futures::executor::block_on(locker.force_release("account:42", &owner)),
        Err(Error::NoRuntime(_))
    ));
    assert!(matches!(
        futures::executor::block_on(crate::TimeService::start(
            Arc::new(store.client()),
            clock.clone(),
            crate::TimeServiceConfig::new(lock_core::id::LockId::new("time").unwrap()),
        )),
        Err(Error::NoRuntime(_))
    ));
}

#[test]
fn a_guard_released_outside_a_runtime_returns_no_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (guard, _locker) = runtime.block_on(async {
        let (store, clock) = store();
        let locker = locker(store.client(), &clock, 1);
        (locker.lock("account:42").await.unwrap(), locker)
    });
    assert!(matches!(
        futures::executor::block_on(guard.release()),
        Err(Error::NoRuntime(_))
    ));
}

#[test]
fn lock_ids_with_invisible_or_direction_changing_characters_are_refused() {
    use lock_core::id::LockId;
    let hostile = [
        ("account\u{200B}42", 0x200B, 7),
        ("\u{200E}account", 0x200E, 0),
        ("account\u{200F}", 0x200F, 7),
        ("acc\u{202A}ount", 0x202A, 3),
        ("acc\u{202E}ount", 0x202E, 3),
        ("x\u{2066}y", 0x2066, 1),
        ("x\u{2069}y", 0x2069, 1),
        ("\u{FEFF}account", 0xFEFF, 0),
        ("soft\u{00AD}hyphen", 0x00AD, 4),
        ("tag\u{E0041}", 0xE0041, 3),
        ("line\u{2028}sep", 0x2028, 4),
        ("tab\there", 0x9, 3),
    ];
    for (id, code, position) in hostile {
        match LockId::new(id) {
            Err(Error::InvalidLockId { reason, .. }) => {
                let code = format!("U+{code:04X}");
                assert!(reason.contains(&code), "{reason} should name {code}");
                assert!(
                    reason.contains(&format!("at character {position} ")),
                    "{reason} should say character {position}"
                );
            }
            other => panic!("{id:?} must be refused, got {other:?}"),
        }
    }
    for fine in ["account:42", "счёт/42 ✓", "مرحبا", "👍🏽", "e\u{301}"] {
        assert!(LockId::new(fine).is_ok(), "{fine:?}");
    }
}

#[test]
fn a_zero_lock_timeout_on_a_held_lock_gives_up() {
    crate::watchdog::in_virtual_time("a_zero_lock_timeout_on_a_held_lock_gives_up", async {
        let (store, clock) = store();
        let a = locker(store.client(), &clock, 1);
        let b = locker(store.client(), &clock, 2);
        let held = a.lock("account:42").await.unwrap();
        let got = b.lock_timeout("account:42", Duration::ZERO).await.unwrap();
        assert!(got.is_none(), "{got:?} while {held:?}");
    });
}
