//! The demonstration mode, for commands given no `--cassandra`: a simulated 3-replica
//! cluster inside lockctl where one owner holds the lock and others wait, so that the
//! commands can be tried without a cluster. Nothing in it touches Cassandra.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use fair_lock::{Clock, LockGuard, Locker};
use lock_core::{LockConfig, LockId};
use lock_storage_memory::{ClusterConfig, Latency, MemoryClient, MemoryCluster};
use tokio::sync::mpsc;

use crate::Error;
use crate::admin::{self, Action};
use crate::report::INSPECT_LIMIT;

/// How the demonstration is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demo {
    /// How many owners queue behind the holder.
    pub waiters: usize,
    /// Whether the holder crashes (its client is cut off from every replica) right after
    /// taking the lock.
    pub crashed: bool,
}

/// The one-way latency of every simulated message: log-normal with median 250 µs and 99th
/// percentile 1 ms, as on a LAN.
const LAN: Latency = Latency::LogNormal {
    median: Duration::from_micros(250),
    p99: Duration::from_millis(1),
};

/// The simulated cluster with the lock taken: one holder, `waiters` more queued behind it.
/// The lockers are seeded, so owner ids repeat from one run to the next: `inspect` shows
/// them, and `force-release` finds them.
pub struct Simulation {
    /// Inspects and force-releases; holds nothing.
    admin: Locker<MemoryClient>,
    /// The holder's lock, held until the simulation is dropped.
    _holder: LockGuard,
    /// The waiters' locks, as they get them.
    granted: mpsc::UnboundedReceiver<LockGuard>,
    /// What the simulation is and who holds and waits, for the terminal.
    intro: String,
    /// The lock configuration of every locker.
    config: LockConfig,
}

impl Simulation {
    /// Starts the cluster, has one owner take `lock_id` (and cuts its client off if
    /// `demo.crashed`), has `demo.waiters` more ask for the lock 3 ms apart, and returns
    /// once they are all queued (or, on a machine too slow for that, after a second).
    pub async fn start(lock_id: &LockId, demo: Demo) -> Result<Simulation, Error> {
        let cluster = MemoryCluster::new(ClusterConfig {
            latency: LAN,
            // The cells of released locks need not linger: nothing here partitions
            // replicas, so every delete reaches every replica within milliseconds.
            gc_grace: Duration::from_secs(1),
            ..ClusterConfig::default()
        })?;
        let config = LockConfig::default();
        let locker = |seed: u64| -> Result<(Locker<MemoryClient>, MemoryClient), Error> {
            let client = cluster.client();
            let clock: Arc<dyn Clock> = Arc::new(client.clock());
            let locker = Locker::builder(client.clone())
                .config(config.clone())
                .clock(clock)
                .replay_owner_ids_unsafe(seed)
                .build()?;
            Ok((locker, client))
        };
        let (holder_locker, holder_client) = locker(1)?;
        let holder = holder_locker.lock(lock_id).await?;
        let mut intro = format!(
            "DEMONSTRATION on a simulated 3-replica cluster inside lockctl (no --cassandra \
             given): nothing is read from or written to Cassandra, and times are the \
             simulation's clock.\n{} holds {lock_id}, {} more wait.\n",
            holder.owner_id(),
            demo.waiters
        );
        if demo.crashed {
            cluster.faults().isolate(holder_client.id())?;
            let _ = writeln!(
                intro,
                "Its client was cut off from every replica right after, as if it had crashed."
            );
        }
        let (granted_tx, granted) = mpsc::unbounded_channel();
        for waiter in 0..demo.waiters {
            let (locker, _) = locker(waiter as u64 + 2)?;
            let lock_id = lock_id.clone();
            let granted_tx = granted_tx.clone();
            tokio::spawn(async move {
                if let Ok(guard) = locker.lock(lock_id).await {
                    let _ = granted_tx.send(guard);
                }
            });
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let (admin, _) = locker(0)?;
        // Every waiter is queued within a few round trips (behind the holder's queue cell
        // too, unless holders leave the queue as they take the lock, which waiting in the
        // main row, on by default, makes them do); waiting for that, rather than for a
        // fixed time, keeps a slow machine from showing a shorter queue. A second is
        // plenty even then.
        let expected = demo.waiters + usize::from(!config.wait_in_main_row);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let queued = admin.inspect(lock_id, INSPECT_LIMIT).await?.queue.len();
            if queued >= expected || tokio::time::Instant::now() >= deadline {
                break;
            }
        }
        Ok(Simulation {
            admin,
            _holder: holder,
            granted,
            intro,
            config,
        })
    }

    /// The locker that inspects and force-releases.
    pub fn admin(&self) -> &Locker<MemoryClient> {
        &self.admin
    }

    /// What the simulation is and who holds and waits, for the terminal.
    pub fn intro(&self) -> &str {
        &self.intro
    }

    /// How long after its last write a live owner's cell is called stale: once a live
    /// owner would have renewed it (`renew_every + request_timeout + max_clock_skew`).
    pub fn stale_after(&self) -> Result<Duration, Error> {
        let valid = self.config.clone().validate()?;
        Ok(valid.renew_every() + self.config.request_timeout + self.config.max_clock_skew)
    }

    /// How long a cell lives unless renewed.
    pub fn lease_ttl(&self) -> Duration {
        self.config.lease_ttl
    }

    /// Waits until the crashed holder's cells are stale, and says so in the intro.
    async fn wait_until_stale(&mut self) -> Result<(), Error> {
        let wait = self.stale_after()? + Duration::from_millis(100);
        tokio::time::sleep(wait).await;
        let _ = writeln!(
            self.intro,
            "{:.1} s later its cells are stale, and without a force release the waiters wait \
             until they expire (lease TTL {} s).",
            wait.as_secs_f64(),
            self.lease_ttl().as_secs()
        );
        Ok(())
    }
}

/// `inspect` or `force-release` in the demonstration: sets the lock up as `demo` says,
/// waits until a crashed holder's cells are stale, then runs `action`. After a force
/// release, the lock is inspected again to show the next owner taking over. Meant for
/// Tokio's paused clock, where the waits take no wall time.
pub async fn act(
    lock_id: &LockId,
    demo: Demo,
    action: &Action,
    backend: &str,
) -> Result<String, Error> {
    let mut simulation = Simulation::start(lock_id, demo).await?;
    if demo.crashed {
        simulation.wait_until_stale().await?;
    }
    let mut out = format!("{}\n", simulation.intro);
    out.push_str(&admin::act(&simulation.admin, lock_id, action, backend).await?);
    if matches!(action, Action::ForceRelease(_)) {
        let next =
            tokio::time::timeout(Duration::from_millis(500), simulation.granted.recv()).await;
        if let Ok(Some(guard)) = next {
            let _ = writeln!(
                out,
                "\n{} took the lock after waiting {:.1} ms; the lock now:\n",
                guard.owner_id(),
                guard.wait().as_secs_f64() * 1e3
            );
            out.push_str(&admin::act(&simulation.admin, lock_id, &Action::Inspect, backend).await?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::OwnerId;

    fn paused() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    #[test]
    fn a_force_release_of_a_crashed_holder_lets_the_next_owner_in() {
        let lock_id = LockId::new("account:42").unwrap();
        let demo = Demo {
            waiters: 2,
            crashed: true,
        };
        let inspect = paused()
            .block_on(act(&lock_id, demo, &Action::Inspect, "test"))
            .unwrap();
        assert!(inspect.starts_with("DEMONSTRATION"), "{inspect}");
        let holder = inspect
            .lines()
            .find_map(|line| line.strip_prefix("  holder: "))
            .unwrap_or_else(|| panic!("no holder in:\n{inspect}"));
        // Its queue cell had only the waiter TTL (3 s) and no renewal: gone by now.
        assert_eq!(
            inspect.matches("STALE").count(),
            1,
            "the crashed holder's main cell, and no waiter's:\n{inspect}"
        );
        let owner = OwnerId::new(holder).unwrap();
        let released = paused()
            .block_on(act(
                &lock_id,
                demo,
                &Action::ForceRelease(owner.clone()),
                "test",
            ))
            .unwrap();
        assert!(
            released.contains(&format!("force-released {owner}")),
            "{released}"
        );
        let after = released
            .split("the lock now:")
            .nth(1)
            .unwrap_or_else(|| panic!("nobody took the lock:\n{released}"));
        assert!(!after.contains(holder), "{after}");
        assert!(!after.contains("STALE"), "{after}");
    }

    #[test]
    fn the_release_of_an_owner_without_cells_says_so() {
        let lock_id = LockId::new("account:42").unwrap();
        let demo = Demo {
            waiters: 0,
            crashed: false,
        };
        let nobody = OwnerId::new("nobody").unwrap();
        let out = paused()
            .block_on(act(&lock_id, demo, &Action::ForceRelease(nobody), "test"))
            .unwrap();
        assert!(
            out.contains("nobody has no cell on account:42: nothing to release"),
            "{out}"
        );
        assert!(out.contains("0 more wait"), "{out}");
    }
}
