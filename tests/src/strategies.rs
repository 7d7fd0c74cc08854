//! Proptest generators of [`Schedule`]s for both regimes.
//!
//! Regime (a), [`within_assumptions`]: 1–8 contenders, 1–3 acquisitions each, critical
//! sections of 1 ms to 1.5 s, think times up to 300 ms, start times up to 2 s; client clock
//! offsets up to ±0.5 s and drift up to ±200 ppm (so any two client clocks agree within
//! `max_clock_skew` = 1 s, as lock-core asks; wider client skews are the subject of
//! [`skewed_clients`], without faults); 3 or 5 replicas (replication factor 3)
//! whose clocks are within ±0.4 s of true time with at most ±100 ppm drift (so any two
//! replicas stay well within `max_clock_skew` = 1 s of each other); a latency distribution
//! (zero, fixed, uniform, exponential or log-normal, medians around a millisecond); up to
//! four faults in the first 20 s: replica crash and restart, a cut between a contender and
//! a replica, a latency spike or a coordinator timeout short enough to time requests out
//! with unknown outcome, a contender's process pausing, or a contender crashing for good;
//! the time service on or off; and a queue read limit of the default 8 or, in a quarter of
//! the schedules, 2–4, so that queues are longer than one read returns.
//!
//! [`crowded`]: regime (a) with 9–32 contenders on the one lock, mostly with a queue read
//! limit of 2–4 (otherwise the default 8), so queues run to several slices; short critical
//! sections and starts within 0.5 s keep them long.
//!
//! Regime (b), [`paused_holder`]: 2–6 contenders; contender 0 takes the lock first and its
//! process freezes shortly after for longer than the effective lease, while its application
//! works on well past the freeze and ignores `lost()`. [`skewed_replicas`]: 2–5 contenders
//! while two of three replicas step their clocks ahead by more than the TTL.

use std::time::Duration;

use lock_storage_memory::{ClockSkew, Latency};
use proptest::prelude::*;

use crate::sim::{ContenderPlan, Fault, FaultKind, ReplicaJump, Schedule, Victim, lock_config};

fn millis(range: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = Duration> {
    range.prop_map(Duration::from_millis)
}

fn micros(range: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = Duration> {
    range.prop_map(Duration::from_micros)
}

/// A message latency distribution with a median around a millisecond and a tail that stays
/// far below the cluster's 1 s coordinator timeout.
pub fn latency() -> impl Strategy<Value = Latency> {
    prop_oneof![
        1 => Just(Latency::Zero),
        2 => micros(50..=2_000).prop_map(Latency::Fixed),
        3 => (micros(0..=1_000), micros(0..=3_000))
            .prop_map(|(min, extra)| Latency::Uniform { min, max: min + extra }),
        2 => (micros(0..=1_000), micros(1..=2_000))
            .prop_map(|(min, mean_extra)| Latency::Exponential { min, mean_extra }),
        2 => (micros(200..=2_000), 1u32..=5)
            .prop_map(|(median, factor)| Latency::LogNormal { median, p99: median * factor }),
    ]
}

/// A clock off by up to `offset_micros` either way, drifting up to `drift_ppm` either way.
pub fn clock(offset_micros: i64, drift_ppm: i32) -> impl Strategy<Value = ClockSkew> {
    (-offset_micros..=offset_micros, -drift_ppm..=drift_ppm).prop_map(
        |(offset_micros, drift_ppm)| ClockSkew {
            offset_micros,
            drift_ppm,
        },
    )
}

prop_compose! {
    /// One contender of regime (a).
    pub fn contender()(
        clock in clock(500_000, 200),
        start in millis(0..=2_000),
        sections in prop::collection::vec(millis(1..=1_500), 1..=3),
        think in millis(0..=300),
    ) -> ContenderPlan {
        ContenderPlan { clock, start, sections, think }
    }
}

/// One fault of regime (a). Indices are taken modulo the number of contenders or
/// replicas when the fault is applied.
pub fn fault() -> impl Strategy<Value = Fault> {
    let kind = prop_oneof![
        3 => (0usize..5).prop_map(FaultKind::StopReplica),
        3 => (0usize..8, 0usize..5)
            .prop_map(|(contender, replica)| FaultKind::Partition { contender, replica }),
        1 => millis(1_100..=3_000).prop_map(|spike| FaultKind::Latency(Latency::Fixed(spike))),
        1 => (millis(20..=200), 2u32..=50).prop_map(|(median, factor)| {
            FaultKind::Latency(Latency::LogNormal { median, p99: median * factor })
        }),
        2 => millis(1..=4).prop_map(FaultKind::RequestTimeout),
        3 => (0usize..8).prop_map(FaultKind::Pause),
        1 => (0usize..8).prop_map(FaultKind::Crash),
    ];
    (millis(0..=20_000), millis(50..=6_000), kind).prop_map(|(at, duration, kind)| Fault {
        at,
        duration,
        kind,
    })
}

prop_compose! {
    /// A schedule within the library's assumptions.
    pub fn within_assumptions()(
        seed in any::<u64>(),
        replicas in prop_oneof![3 => Just(3usize), 1 => Just(5usize)],
        latency in latency(),
        replica_clocks in prop::collection::vec(clock(400_000, 100), 5),
        contenders in prop::collection::vec(contender(), 1..=8),
        faults in prop_oneof![
            1 => Just(Vec::new()),
            3 => prop::collection::vec(fault(), 1..=4),
        ],
        time_service in any::<bool>(),
        queue_read_limit in queue_read_limit(3),
        wait_in_main_row in any::<bool>(),
        linger in linger(),
    ) -> Schedule {
        Schedule {
            seed,
            replicas,
            latency,
            replica_clocks: replica_clocks[..replicas].to_vec(),
            contenders,
            faults,
            time_service,
            victim: None,
            replica_jump: None,
            queue_read_limit,
            wait_in_main_row,
            linger,
            margin_acquisitions: 0,
            wake_hints: false,
        }
    }
}

/// A `LockConfig::linger`: off half the time (the default), otherwise 5 or 50 ms.
pub fn linger() -> impl Strategy<Value = Duration> {
    prop_oneof![
        2 => Just(Duration::ZERO),
        1 => Just(Duration::from_millis(5)),
        1 => Just(Duration::from_millis(50)),
    ]
}

/// A queue read limit: the default (8) `default_weight` times in `default_weight + 1`,
/// otherwise 2–4.
pub fn queue_read_limit(default_weight: u32) -> impl Strategy<Value = u32> {
    let default = lock_config().poll.queue_read_limit;
    prop_oneof![
        default_weight => Just(default),
        1 => 2u32..=4,
    ]
}

prop_compose! {
    /// One contender of [`crowded`]: short sections, an early start.
    pub fn crowded_contender()(
        clock in clock(500_000, 200),
        start in millis(0..=500),
        sections in prop::collection::vec(millis(1..=300), 1..=2),
        think in millis(0..=100),
    ) -> ContenderPlan {
        ContenderPlan { clock, start, sections, think }
    }
}

prop_compose! {
    /// Regime (a) with 9–32 contenders on one lock, queues longer than the read limit by
    /// construction: the limit (2–8) is always below the number of contenders.
    pub fn crowded()(
        schedule in within_assumptions(),
        contenders in prop::collection::vec(crowded_contender(), 9..=32),
        faults in prop_oneof![
            1 => Just(Vec::new()),
            1 => prop::collection::vec(fault(), 1..=2),
        ],
        queue_read_limit in 2u32..=8,
    ) -> Schedule {
        Schedule { contenders, faults, queue_read_limit, ..schedule }
    }
}

prop_compose! {
    /// A schedule within the assumptions but for client clocks: offsets up to ±`offset`
    /// seconds, no faults, agreeing replicas; for comparing bypass with and without the
    /// time service.
    pub fn skewed_clients(offset_secs: i64, time_service: bool)(
        seed in any::<u64>(),
        latency in latency(),
        clocks in prop::collection::vec(clock(offset_secs * 1_000_000, 200), 2..=8),
        sections in prop::collection::vec(prop::collection::vec(millis(1..=300), 2..=4), 8),
        starts in prop::collection::vec(millis(0..=1_000), 8),
    ) -> Schedule {
        let contenders = clocks
            .into_iter()
            .zip(sections)
            .zip(starts)
            .map(|((clock, sections), start)| ContenderPlan {
                clock,
                start,
                sections,
                think: Duration::ZERO,
            })
            .collect();
        Schedule {
            time_service,
            ..Schedule::simple(seed, latency, contenders)
        }
    }
}

prop_compose! {
    /// Regime (b): contender 0's first holder freezes past its lease and works on.
    pub fn paused_holder()(
        seed in any::<u64>(),
        latency in latency(),
        others in prop::collection::vec(contender(), 1..=5),
        victim_clock in clock(1_500_000, 200),
        pause_after in millis(0..=1_000),
        beyond in millis(1_000..=15_000),
        extra in millis(1_000..=5_000),
    ) -> Schedule {
        let config = lock_config();
        let effective = config.lease_ttl - Duration::from_secs(1) - config.max_clock_skew;
        let pause = effective + beyond;
        let victim = ContenderPlan {
            clock: victim_clock,
            start: Duration::ZERO,
            sections: vec![pause_after + pause + config.lease_ttl + extra],
            think: Duration::ZERO,
        };
        let contenders = std::iter::once(victim)
            .chain(others.into_iter().map(|plan| ContenderPlan {
                start: plan.start + Duration::from_millis(50),
                ..plan
            }))
            .collect();
        Schedule {
            victim: Some(Victim { pause_after, pause }),
            ..Schedule::simple(seed, latency, contenders)
        }
    }
}

prop_compose! {
    /// Regime (b): two of three replicas step their clocks ahead by more than the TTL.
    pub fn skewed_replicas()(
        seed in any::<u64>(),
        latency in latency(),
        contenders in prop::collection::vec(contender(), 2..=5),
        at in millis(0..=3_000),
        beyond in millis(1_000..=20_000),
        first in 0usize..3,
    ) -> Schedule {
        let ttl = lock_config().lease_ttl;
        let offset = i64::try_from((ttl + beyond).as_micros()).unwrap_or(i64::MAX);
        Schedule {
            replica_jump: Some(ReplicaJump { at, replicas: vec![first, first + 1], offset_micros: offset }),
            ..Schedule::simple(seed, latency, contenders)
        }
    }
}
