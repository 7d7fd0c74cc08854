//! The time service (docs/algorithm.md, section "The time service"), and a [`Clock`] that follows it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;

use lock_core::error::Error;
use lock_core::id::LockId;
use lock_core::machine::{GlobalTimeFollower, GlobalTimeOutcome, UpdateGlobalTime};
use lock_core::storage::{LockStorage, StorageRequest, StorageResponse};
use lock_core::time::{Now, Timestamp};

use super::clock::Clock;
use super::run::Context;

/// How a process takes part in the time service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeServiceConfig {
    /// The `GlobalTime` cell's row key (one time domain per cluster is usual).
    pub domain: LockId,
    /// Whether this process is one of the service's replicas, running
    /// `TryUpdateGlobalTime` with its own clock every `update_every`.
    pub replica: bool,
    /// How often a replica runs `TryUpdateGlobalTime` (the thesis: 500 ms).
    pub update_every: Duration,
    /// How often the clock re-reads `GlobalTime`.
    pub refresh_every: Duration,
    /// The timeout of each storage request.
    pub request_timeout: Duration,
}

impl TimeServiceConfig {
    /// Checks the periods: `update_every` and `refresh_every` must be
    /// [`lock_core::config::MIN_PERIOD`] (1 ms) to one hour, so that one service makes at most
    /// about 2000 requests a second; `request_timeout` above zero and at most one hour.
    pub fn validate(&self) -> Result<(), Error> {
        const ONE_HOUR: Duration = Duration::from_secs(3600);
        let periods = [
            ("time_service.update_every", self.update_every),
            ("time_service.refresh_every", self.refresh_every),
        ];
        for (field, value) in periods {
            if !(lock_core::config::MIN_PERIOD..=ONE_HOUR).contains(&value) {
                return Err(Error::InvalidConfig {
                    field,
                    reason: format!(
                        "must be {:?} to {ONE_HOUR:?}, got {value:?}",
                        lock_core::config::MIN_PERIOD
                    ),
                });
            }
        }
        if self.request_timeout.is_zero() || self.request_timeout > ONE_HOUR {
            return Err(Error::InvalidConfig {
                field: "time_service.request_timeout",
                reason: format!(
                    "must be above zero and at most {ONE_HOUR:?}, got {:?}",
                    self.request_timeout
                ),
            });
        }
        Ok(())
    }

    /// A configuration for time domain `domain` with the thesis's 500 ms period.
    pub fn new(domain: LockId) -> Self {
        TimeServiceConfig {
            domain,
            replica: true,
            update_every: Duration::from_millis(500),
            refresh_every: Duration::from_millis(100),
            request_timeout: Duration::from_secs(2),
        }
    }
}

/// A clock that hands out time no earlier than the service's `GlobalTime`, by the rule of
/// [`GlobalTimeFollower`]: it re-reads `GlobalTime` every `refresh_every`, never
/// decreases, never runs behind the global time it last saw, and keeps advancing at the
/// monotonic rate while `GlobalTime` is frozen. All processes that follow the same
/// `GlobalTime` therefore agree to within about `refresh_every` plus their drift.
#[derive(Clone, Debug)]
pub struct GlobalTimeClock {
    local: Arc<dyn ClockDebug>,
    follower: Arc<Mutex<GlobalTimeFollower>>,
}

/// A [`Clock`] that can be printed (for `Debug` of the wrapper).
trait ClockDebug: Clock + std::fmt::Debug {}
impl<C: Clock + std::fmt::Debug> ClockDebug for C {}

impl GlobalTimeClock {
    fn new(local: Arc<dyn ClockDebug>) -> Self {
        let follower = GlobalTimeFollower::new(local.now());
        GlobalTimeClock {
            local,
            follower: Arc::new(Mutex::new(follower)),
        }
    }

    fn follower(&self) -> MutexGuard<'_, GlobalTimeFollower> {
        self.follower.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in a `GlobalTime` value known now ([`GlobalTimeFollower::observe`]).
    fn observe(&self, global: Timestamp) {
        let as_of = self.local.now().instant;
        self.follower().observe(global, as_of);
    }

    /// The last `GlobalTime` value this clock has seen.
    pub fn last_global(&self) -> Timestamp {
        self.follower().last_global()
    }
}

impl Clock for GlobalTimeClock {
    fn now(&self) -> Now {
        let local = self.local.now();
        self.follower().now(local)
    }

    fn follows_real_time(&self) -> bool {
        self.local.follows_real_time()
    }

    fn timer_duration(&self, duration: std::time::Duration) -> std::time::Duration {
        self.local.timer_duration(duration)
    }
}

/// A running time service: the background task and the clock it feeds.
#[derive(Debug)]
#[must_use = "dropping a TimeService stops its background task; keep it for as long as its clock is used"]
pub struct TimeService {
    clock: GlobalTimeClock,
    task: JoinHandle<()>,
}

impl TimeService {
    /// Reads `GlobalTime` once (so the clock starts in step), then starts the background
    /// task. `local` is this process's own clock, used as a replica's `localTime`.
    pub async fn start<S, C>(
        storage: Arc<S>,
        local: C,
        config: TimeServiceConfig,
    ) -> Result<Self, Error>
    where
        S: LockStorage,
        C: Clock + std::fmt::Debug,
    {
        config.validate()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::NoRuntime(
                "TimeService::start was polled outside one",
            ));
        }
        let clock = GlobalTimeClock::new(Arc::new(local));
        refresh(&*storage, &clock, &config).await?;
        let task = tokio::spawn(serve(storage, clock.clone(), config));
        Ok(TimeService { clock, task })
    }

    /// The clock to give a [`super::Locker`].
    pub fn clock(&self) -> GlobalTimeClock {
        self.clock.clone()
    }
}

impl Drop for TimeService {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn refresh<S: LockStorage + ?Sized>(
    storage: &S,
    clock: &GlobalTimeClock,
    config: &TimeServiceConfig,
) -> Result<(), Error> {
    let read = UpdateGlobalTime::read_request(config.domain.clone());
    let context = Context {
        storage,
        clock: &*clock.local,
        request_timeout: config.request_timeout,
        metrics: None,
    };
    if let StorageResponse::Cells(cells) = context.execute(StorageRequest::Read(read)).await? {
        // Anchor the value at the read's completion, not its start: the value may have been
        // written at any moment up to then, so anchoring it earlier would run the clock ahead
        // of every local clock by up to the read's latency, for good.
        clock.observe(UpdateGlobalTime::global_time(&cells));
    }
    Ok(())
}

async fn serve<S: LockStorage>(storage: Arc<S>, clock: GlobalTimeClock, config: TimeServiceConfig) {
    let mut refresh_timer = tokio::time::interval(clock.timer_duration(config.refresh_every));
    let mut update_timer = tokio::time::interval(clock.timer_duration(config.update_every));
    loop {
        // Biased: when both timers are due at once the refresh runs first, so that a run on
        // a paused clock replays exactly instead of following Tokio's random branch order.
        tokio::select! {
            biased;
            _ = refresh_timer.tick() => {
                if let Err(error) = refresh(&*storage, &clock, &config).await {
                    tracing::debug!(%error, "could not read GlobalTime");
                }
            }
            _ = update_timer.tick(), if config.replica => {
                let now = clock.local.now();
                let mut update = UpdateGlobalTime::new(now, config.domain.clone());
                let context = Context {
                    storage: &*storage,
                    clock: &*clock.local,
                    request_timeout: config.request_timeout,
                    metrics: None,
                };
                match context.run(&mut update).await {
                    Ok(GlobalTimeOutcome::Advanced(time)) => {
                        clock.observe(time);
                    }
                    Ok(GlobalTimeOutcome::AlreadyAhead(_)) => {}
                    Ok(GlobalTimeOutcome::Failed(error)) | Err(error) => {
                        tracing::debug!(%error, "TryUpdateGlobalTime failed");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VirtualClock;
    use crate::test_client::TestStore;

    const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

    fn config(replica: bool) -> TimeServiceConfig {
        TimeServiceConfig {
            replica,
            ..TimeServiceConfig::new(LockId::new("time").unwrap())
        }
    }

    #[test]
    fn followers_never_go_back_and_keep_moving_when_the_fast_replica_dies() {
        crate::watchdog::in_virtual_time(
            "followers_never_go_back_and_keep_moving_when_the_fast_replica_dies",
            async {
                let truth = VirtualClock::starting_at(EPOCH);
                let store = TestStore::new(truth.clone());
                let ahead = truth.clone().skewed(5_000_000, 0);
                let behind = truth.clone().skewed(-3_000_000, 0);
                let fast = TimeService::start(Arc::new(store.client()), ahead, config(true))
                    .await
                    .unwrap();
                let slow =
                    TimeService::start(Arc::new(store.client()), behind.clone(), config(true))
                        .await
                        .unwrap();
                let follower = slow.clock();
                let mut previous = follower.now().timestamp;
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    let now = follower.now().timestamp;
                    assert!(now > previous, "the clock must keep advancing");
                    previous = now;
                }
                let lead = Duration::from_secs(5);
                assert!(previous + Duration::from_millis(600) >= truth.now().timestamp + lead);
                drop(fast);
                let frozen = follower.last_global();
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    let now = follower.now().timestamp;
                    assert!(
                        now > previous,
                        "the clock froze or went back after the replica died"
                    );
                    assert!(now >= frozen);
                    previous = now;
                }
                assert!(
                    behind.now().timestamp < previous,
                    "it follows GlobalTime, not the slow local clock"
                );
            },
        );
    }

    #[test]
    fn a_follower_that_is_not_a_replica_only_reads() {
        crate::watchdog::in_virtual_time("a_follower_that_is_not_a_replica_only_reads", async {
            let truth = VirtualClock::starting_at(EPOCH);
            let store = TestStore::new(truth.clone());
            let replica = TimeService::start(
                Arc::new(store.client()),
                truth.clone().skewed(2_000_000, 0),
                config(true),
            )
            .await
            .unwrap();
            tokio::time::sleep(Duration::from_millis(600)).await;
            let reader = TimeService::start(Arc::new(store.client()), truth.clone(), config(false))
                .await
                .unwrap();
            assert!(
                reader.clock().now().timestamp
                    >= truth.now().timestamp + Duration::from_millis(1_400)
            );
            drop(replica);
        });
    }

    #[test]
    fn zero_periods_are_rejected() {
        crate::watchdog::in_virtual_time("zero_periods_are_rejected", async {
            let truth = VirtualClock::starting_at(EPOCH);
            let store = TestStore::new(truth.clone());
            let bad = TimeServiceConfig {
                update_every: Duration::ZERO,
                ..config(true)
            };
            let started = TimeService::start(Arc::new(store.client()), truth, bad).await;
            assert!(matches!(started, Err(Error::InvalidConfig { .. })));
        });
    }
}
