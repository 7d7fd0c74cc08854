//! Cluster and client configuration, checked before anything runs.

use std::fmt;
use std::time::Duration;

use lock_core::Timestamp;
use lock_core::storage::Ttl;

use crate::clock::ClockSkew;
use crate::error::MemoryError;
use crate::id::ReplicaId;
use crate::latency::Latency;

/// A Cassandra consistency level: how many of a row's replicas must answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Consistency {
    /// One replica.
    One,
    /// A majority of the replicas: `floor(RF / 2) + 1`.
    #[default]
    Quorum,
    /// Every replica.
    All,
}

impl Consistency {
    /// How many of `replication_factor` replicas must answer.
    pub const fn required(self, replication_factor: usize) -> usize {
        match self {
            Consistency::One => 1,
            Consistency::Quorum => replication_factor / 2 + 1,
            Consistency::All => replication_factor,
        }
    }
}

impl fmt::Display for Consistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Consistency::One => "ONE",
            Consistency::Quorum => "QUORUM",
            Consistency::All => "ALL",
        })
    }
}

/// Everything about a simulated cluster. Start from [`ClusterConfig::default`] (three
/// replicas, replication factor 3, QUORUM, zero latency) and change what the test needs:
///
/// ```
/// use std::time::Duration;
/// use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster};
///
/// let cluster = MemoryCluster::new(ClusterConfig {
///     replicas: 5,
///     latency: Latency::Uniform { min: Duration::from_micros(200), max: Duration::from_millis(3) },
///     seed: 42,
///     ..ClusterConfig::default()
/// })?;
/// # Ok::<(), lock_storage_memory::MemoryError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// How many replicas (nodes) the cluster has: 1 to [`ClusterConfig::MAX_REPLICAS`].
    pub replicas: usize,
    /// On how many replicas each row lives: 1 to `replicas`.
    pub replication_factor: usize,
    /// The consistency level of writes and deletes, unless a client overrides it.
    pub write_consistency: Consistency,
    /// The consistency level of reads, unless a client overrides it.
    pub read_consistency: Consistency,
    /// The latency of every message.
    pub latency: Latency,
    /// How long a coordinator waits for enough replicas before answering with a timeout:
    /// from 1 ms to [`ClusterConfig::MAX_TIMEOUT`]. Cassandra's default write timeout is 2 s.
    pub request_timeout: Duration,
    /// How long a replica keeps a tombstone (or an expired cell) before purging it,
    /// counted on the replica's own clock; whole seconds, as Cassandra's
    /// `gc_grace_seconds` (default ten days).
    pub gc_grace: Duration,
    /// Whether a read brings the replicas that answered up to date before it returns
    /// (Cassandra's blocking read repair).
    pub read_repair: bool,
    /// Hinted handoff: `Some(window)` to let a coordinator keep writes for replicas that
    /// have been down for less than `window` (Cassandra's `max_hint_window`, default three
    /// hours) and replay them when the replica is back; `None` to lose such writes.
    pub hint_window: Option<Duration>,
    /// Extra time a replica takes to answer a read per dead cell (tombstone or expired
    /// value) it scans, to model tombstone build-up; zero by default.
    pub dead_cell_read_cost: Duration,
    /// The clock skew of each replica, by id. Empty for no skew; otherwise exactly one entry
    /// per replica.
    pub replica_clocks: Vec<ClockSkew>,
    /// The wall time every unskewed clock reads when the cluster is created.
    pub epoch: Timestamp,
    /// The seed of the random number generator that draws latencies.
    pub seed: u64,
    /// Whether to record a [`crate::HistoryEntry`] for every request, answer and applied
    /// mutation (for replaying and comparing runs; costs memory).
    pub record_history: bool,
    /// How many units of Tokio time one unit of simulated time takes: 1 to
    /// [`ClusterConfig::MAX_TIMER_DILATION`], default 1. The simulation keeps time in
    /// microseconds, but Tokio's timer (paused or not) wakes sleepers only on whole
    /// milliseconds, so at 1 every request is answered, and every pause ends, on a
    /// millisecond boundary: a round trip over a 50 µs network takes a whole millisecond.
    /// At 1,000 a Tokio millisecond is a simulated microsecond, and a 50 µs latency is
    /// simulated as 50 µs. The clients' clocks ([`crate::MemoryClient::clock`]) run at the
    /// simulation's pace and tell the lock driver how long to set Tokio's timers for
    /// (`fair_lock::Clock::timer_duration`); a caller that sleeps or measures on Tokio's
    /// time itself must scale by this factor.
    pub timer_dilation: u32,
}

impl ClusterConfig {
    /// The most replicas a simulated cluster may have.
    pub const MAX_REPLICAS: usize = 1024;
    /// The longest request timeout accepted.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
    /// The largest per-dead-cell read cost accepted.
    pub const MAX_DEAD_CELL_READ_COST: Duration = Duration::from_secs(1);
    /// The largest timer dilation accepted: a simulated microsecond as a Tokio millisecond.
    pub const MAX_TIMER_DILATION: u32 = 1_000;
    /// 2025-01-01T00:00:00Z, the default epoch.
    pub const DEFAULT_EPOCH: Timestamp = Timestamp::from_micros(1_735_689_600_000_000);

    /// Checks every field; the cluster is only ever built from a configuration that passes.
    pub fn validate(&self) -> Result<(), MemoryError> {
        if self.replicas == 0 || self.replicas > Self::MAX_REPLICAS {
            return Err(MemoryError::config(
                "replicas",
                format!("must be 1 to {}, got {}", Self::MAX_REPLICAS, self.replicas),
            ));
        }
        if self.replication_factor == 0 || self.replication_factor > self.replicas {
            return Err(MemoryError::config(
                "replication_factor",
                format!(
                    "must be 1 to the number of replicas ({}), got {}",
                    self.replicas, self.replication_factor
                ),
            ));
        }
        self.latency.validate()?;
        if self.timer_dilation == 0 || self.timer_dilation > Self::MAX_TIMER_DILATION {
            return Err(MemoryError::config(
                "timer_dilation",
                format!(
                    "must be 1 to {}, got {}",
                    Self::MAX_TIMER_DILATION,
                    self.timer_dilation
                ),
            ));
        }
        validate_timeout(self.request_timeout)?;
        validate_gc_grace(self.gc_grace)?;
        if let Some(window) = self.hint_window
            && window > TWENTY_YEARS
        {
            return Err(MemoryError::config(
                "hint_window",
                format!("must be at most 20 years, got {window:?}"),
            ));
        }
        validate_dead_cell_read_cost(self.dead_cell_read_cost)?;
        if !self.replica_clocks.is_empty() && self.replica_clocks.len() != self.replicas {
            return Err(MemoryError::config(
                "replica_clocks",
                format!(
                    "must be empty or have one entry per replica ({}), got {}",
                    self.replicas,
                    self.replica_clocks.len()
                ),
            ));
        }
        for skew in &self.replica_clocks {
            skew.validate("replica_clocks")?;
        }
        Ok(())
    }

    /// The skew of `replica`'s clock.
    pub(crate) fn replica_clock(&self, replica: ReplicaId) -> ClockSkew {
        self.replica_clocks
            .get(replica.0)
            .copied()
            .unwrap_or_default()
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            replicas: 3,
            replication_factor: 3,
            write_consistency: Consistency::Quorum,
            read_consistency: Consistency::Quorum,
            latency: Latency::Zero,
            request_timeout: Duration::from_secs(2),
            gc_grace: Duration::from_secs(10 * 24 * 3600),
            read_repair: true,
            hint_window: Some(Duration::from_secs(3 * 3600)),
            dead_cell_read_cost: Duration::ZERO,
            replica_clocks: Vec::new(),
            epoch: Self::DEFAULT_EPOCH,
            seed: 0,
            record_history: false,
            timer_dilation: 1,
        }
    }
}

/// How one client differs from the cluster's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientOptions {
    /// The skew of the client's own clock (see [`crate::ClientClock`]).
    pub clock: ClockSkew,
    /// Replicas this client starts cut off from.
    pub partitioned_from: Vec<ReplicaId>,
    /// The consistency level of this client's writes and deletes, if not the cluster's.
    pub write_consistency: Option<Consistency>,
    /// The consistency level of this client's reads, if not the cluster's.
    pub read_consistency: Option<Consistency>,
}

/// Cassandra's longest TTL, 20 years: also the bound on grace periods and hint windows.
const TWENTY_YEARS: Duration = Duration::from_secs(Ttl::MAX_SECONDS as u64);

pub(crate) fn validate_timeout(timeout: Duration) -> Result<(), MemoryError> {
    if timeout < Duration::from_millis(1) || timeout > ClusterConfig::MAX_TIMEOUT {
        return Err(MemoryError::config(
            "request_timeout",
            format!(
                "must be 1 ms to {:?}, got {timeout:?}",
                ClusterConfig::MAX_TIMEOUT
            ),
        ));
    }
    Ok(())
}

pub(crate) fn validate_gc_grace(gc_grace: Duration) -> Result<(), MemoryError> {
    if gc_grace.subsec_nanos() != 0 || gc_grace > TWENTY_YEARS {
        return Err(MemoryError::config(
            "gc_grace",
            format!("must be a whole number of seconds up to 20 years, got {gc_grace:?}"),
        ));
    }
    Ok(())
}

pub(crate) fn validate_dead_cell_read_cost(cost: Duration) -> Result<(), MemoryError> {
    if cost > ClusterConfig::MAX_DEAD_CELL_READ_COST {
        return Err(MemoryError::config(
            "dead_cell_read_cost",
            format!(
                "must be at most {:?} per cell, got {cost:?}",
                ClusterConfig::MAX_DEAD_CELL_READ_COST
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected_field(config: ClusterConfig) -> &'static str {
        match config.validate() {
            Err(MemoryError::InvalidConfig { field, .. }) => field,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn the_default_is_valid() {
        assert_eq!(ClusterConfig::default().validate(), Ok(()));
    }

    #[test]
    fn bad_shapes_and_durations_name_their_field() {
        let base = ClusterConfig::default;
        assert_eq!(
            rejected_field(ClusterConfig {
                replicas: 0,
                ..base()
            }),
            "replicas"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                replication_factor: 4,
                ..base()
            }),
            "replication_factor"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                replication_factor: 0,
                ..base()
            }),
            "replication_factor"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                request_timeout: Duration::ZERO,
                ..base()
            }),
            "request_timeout"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                request_timeout: Duration::from_secs(86_400 * 365),
                ..base()
            }),
            "request_timeout"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                gc_grace: Duration::from_millis(1500),
                ..base()
            }),
            "gc_grace"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                hint_window: Some(Duration::from_secs(u64::MAX)),
                ..base()
            }),
            "hint_window"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                dead_cell_read_cost: Duration::from_secs(5),
                ..base()
            }),
            "dead_cell_read_cost"
        );
        for timer_dilation in [0, ClusterConfig::MAX_TIMER_DILATION + 1] {
            assert_eq!(
                rejected_field(ClusterConfig {
                    timer_dilation,
                    ..base()
                }),
                "timer_dilation"
            );
        }
        assert_eq!(
            rejected_field(ClusterConfig {
                replica_clocks: vec![ClockSkew::default()],
                ..base()
            }),
            "replica_clocks"
        );
        assert_eq!(
            rejected_field(ClusterConfig {
                latency: Latency::Uniform {
                    min: Duration::from_millis(2),
                    max: Duration::from_millis(1)
                },
                ..base()
            }),
            "latency"
        );
    }

    #[test]
    fn consistency_levels_count_replicas() {
        assert_eq!(Consistency::One.required(3), 1);
        assert_eq!(Consistency::Quorum.required(3), 2);
        assert_eq!(Consistency::Quorum.required(4), 3);
        assert_eq!(Consistency::Quorum.required(5), 3);
        assert_eq!(Consistency::All.required(5), 5);
    }
}
