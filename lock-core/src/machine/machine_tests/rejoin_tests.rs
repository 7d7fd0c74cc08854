//! A queue margin shorter than the default (docs/algorithm.md, section "Dead cells per
//! queue read: the bound"): an owner whose cell the margin hid from a later owner joins the
//! queue again just behind it.

use super::*;
use crate::config::PollConfig;

const SHORT_MARGIN: Duration = Duration::from_millis(100);

fn short_margin() -> ValidConfig {
    LockConfig {
        poll: PollConfig {
            queue_margin: Some(SHORT_MARGIN),
            ..PollConfig::default()
        },
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

/// The adaptive margin on (`PollConfig::margin_acquisitions` at the recommended 200; off
/// by default, where every queue read starts the safe margin back, no cell enqueued in
/// time is hidden, and no owner ever joins again).
fn adaptive() -> ValidConfig {
    LockConfig {
        poll: PollConfig {
            margin_acquisitions: crate::config::RECOMMENDED_MARGIN_ACQUISITIONS,
            ..PollConfig::default()
        },
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

/// A mandatory acquisition by `name` in `seat` with a short margin, its reads starting the
/// margin before `floor`, if given.
fn seated_short(world: &World, name: &str, seat: &str, floor: Option<Timestamp>) -> Acquire {
    let options = AcquireOptions {
        seat: Some(Seat {
            column: ColumnName::new(seat),
            after: Timestamp::ZERO,
        }),
        queue_floor: floor,
        ..AcquireOptions::default()
    };
    Acquire::with_options(
        world.now(),
        short_margin(),
        Mode::Mandatory,
        lock(),
        owner(name),
        7,
        options,
    )
}

/// `hidden` (owner id `waiter`, which sorts after `passer`, so that its column under
/// `passer`'s time sorts behind `passer`'s) waits behind a holder; the holder releases, and before `hidden` polls again
/// `passer`, whose floor is more than the margin after `hidden`'s cell, reads the queue,
/// sees itself first and holds. `hidden`, first in its own reads, meets `passer`'s main
/// cell, marked as a head with a later column: it deletes its main cell and its queue cell
/// and joins again under `passer`'s time, where an owner whose floor came from `passer`'s
/// head sees it, and goes before that owner.
#[test]
fn an_owner_hidden_by_a_short_margin_joins_again_just_behind_the_owner_that_passed_it() {
    let mut world = World::new();
    let held = unrenewed_holder(&mut world, "h");
    world.advance(Duration::from_millis(1));
    let mut hidden = seated_short(&world, "waiter", "s.0", None);
    let first_column = hidden.queue_column().clone();
    world.settle(&mut hidden);
    assert!(hidden.poll_outcome().is_none(), "h holds");
    release(&mut world, &held);

    world.advance(Duration::from_millis(300));
    let mut passer = seated_short(&world, "passer", "s.1", Some(world.now().timestamp));
    let (outcome, sent) = world.finish(&mut passer);
    let passed = holding(outcome);
    let start = QueueColumn::time_prefix(passer.queue_column().timestamp - SHORT_MARGIN);
    assert_eq!(queue_read_starts(&sent), [Some(start.clone())]);
    assert!(first_column.encode() < start, "the margin hides the waiter");

    let wake = hidden.poll_timeout().expect("hidden polls");
    world.advance_to(wake);
    hidden.handle_timeout(world.now());
    let sent = world.settle(&mut hidden);
    assert_eq!(
        kinds(&sent),
        [
            "read queue",
            "write main",
            "read main",
            "delete main",
            "delete queue",
            "write queue",
            "read queue"
        ],
        "first in its own read, it meets the passer's head and joins again behind it"
    );
    assert_eq!(
        hidden.queue_column().timestamp,
        passer.queue_column().timestamp
    );
    assert_eq!(hidden.stats().rejoins, 1);
    assert_eq!(hidden.stats().requeues, 0);
    assert!(!world.live(RowKind::Queue).contains(&first_column.encode()));
    assert!(hidden.poll_outcome().is_none(), "the passer still holds");

    // An owner whose floor is the passer's head sees the rejoined cell ahead of its own.
    world.advance(Duration::from_millis(1));
    let mut next = seated_short(&world, "next", "s.2", Some(passer.queue_column().timestamp));
    world.settle(&mut next);
    release(&mut world, &passed);
    let (outcome, _) = world.finish(&mut hidden);
    let rejoined = holding(outcome);
    assert_eq!(rejoined.owner, owner("waiter"));
    assert!(
        next.poll_outcome().is_none(),
        "next waits for the rejoined owner"
    );
    release(&mut world, &rejoined);
    let (outcome, _) = world.finish(&mut next);
    assert_eq!(holding(outcome).owner, owner("next"));
}

/// A later head in the main row within the least margin the adaptive margin may take (50
/// ms by default) is a plain conflict: the reads that start from it, whatever margin they
/// take, still see the owner, which backs off and keeps its place.
#[test]
fn a_later_head_within_the_least_margin_is_a_conflict_without_a_rejoin() {
    let config = adaptive();
    assert!(config.config().rejoins_when_passed());
    assert_eq!(
        config.config().least_queue_margin(),
        Duration::from_millis(50)
    );
    assert!(short_margin().config().rejoins_when_passed());
    assert!(!super::config().config().rejoins_when_passed());
    let mut world = World::new();
    let mut later = world.acquire(Mode::Mandatory, "later");
    let (outcome, _) = world.finish(&mut later);
    let held = holding(outcome);
    // An owner with an earlier column that only now finds itself first.
    let mut early = Acquire::new(
        Now::new(
            world.now().instant,
            later.queue_column().timestamp - Duration::from_millis(1),
        ),
        config,
        Mode::Mandatory,
        lock(),
        owner("early"),
        7,
        None,
    );
    let sent = world.settle(&mut early);
    assert_eq!(
        kinds(&sent),
        [
            "write queue",
            "read queue",
            "write main",
            "read main",
            "delete main"
        ]
    );
    assert_eq!(early.stats().rejoins, 0);
    release(&mut world, &held);
    let (outcome, _) = world.finish(&mut early);
    let taken = holding(outcome);
    assert_eq!(taken.stats.rejoins, 0);
    assert_eq!(
        taken.queue.unwrap().column,
        QueueColumn::new(
            later.queue_column().timestamp - Duration::from_millis(1),
            owner("early")
        )
        .encode()
    );
}

#[test]
fn a_queue_margin_beyond_the_default_is_refused() {
    let config = LockConfig {
        poll: PollConfig {
            queue_margin: Some(
                LockConfig::default().safe_queue_margin() + Duration::from_micros(1),
            ),
            ..PollConfig::default()
        },
        ..LockConfig::default()
    };
    match config.validate() {
        Err(Error::InvalidConfig { field, .. }) => assert_eq!(field, "poll.queue_margin"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let at_default = LockConfig {
        poll: PollConfig {
            queue_margin: Some(LockConfig::default().safe_queue_margin()),
            ..PollConfig::default()
        },
        ..LockConfig::default()
    };
    assert!(
        !at_default
            .validate()
            .unwrap()
            .config()
            .rejoins_when_passed()
    );
}

/// On a contended lock the margin adapts to the time between acquisitions: three owners
/// queued 2 ms apart behind a holder tell the last of them that the lock changes hands
/// about every 2 ms, so its next poll starts `margin_acquisitions` (200) times that, 400
/// ms, before the head instead of the safe 4 s. With the adaptation off it starts 4 s back.
#[test]
fn a_waiters_polls_start_margin_acquisitions_hand_offs_before_the_head() {
    for (config, margin) in [
        (adaptive(), Duration::from_millis(400)),
        (config(), Duration::from_secs(4)),
    ] {
        let mut world = World::new();
        let held = unrenewed_holder(&mut world, "h");
        let mut waiters = Vec::new();
        for name in ["b", "c", "d"] {
            world.advance(Duration::from_millis(2));
            let mut waiter = world.acquire_with(config.clone(), name);
            world.settle(&mut waiter);
            waiters.push(waiter);
        }
        let last = waiters.last_mut().unwrap();
        // h at 0 and b, c and d 2 ms apart after it: 2 ms apart, measured only when the
        // margin adapts.
        let measured = if config.config().adapts_queue_margin() {
            Duration::from_millis(2)
        } else {
            Duration::ZERO
        };
        assert_eq!(last.stats().lock_interval, measured);
        assert_eq!(last.queue_margin(), margin);
        let wake = last.poll_timeout().unwrap();
        world.advance_to(wake);
        last.handle_timeout(world.now());
        let sent = world.settle(last);
        let head = held.queue.as_ref().unwrap().column.as_str();
        let head = QueueColumn::decode_timestamp(head).unwrap();
        assert_eq!(
            queue_read_starts(&sent).first().cloned(),
            Some(Some(QueueColumn::time_prefix(head - margin))),
        );
    }
}

/// A locker that took the lock a moment ago (its floor, the head its previous acquisition
/// saw, is its own column of then) starts its first read `margin_acquisitions` times the
/// floor's age back, or that many of the intervals its previous acquisition measured if
/// they are shorter, unless that measurement is older than the margin it sets.
#[test]
fn a_first_read_takes_its_margin_from_the_floors_age_or_the_last_measurement() {
    let world = World::new();
    let now = world.now();
    let floor = now.timestamp - Duration::from_millis(1);
    let options = |lock_interval: Option<Duration>| AcquireOptions {
        queue_floor: Some(floor),
        lock_interval,
        ..AcquireOptions::default()
    };
    let acquire = |options| {
        Acquire::with_options(
            now,
            adaptive(),
            Mode::Mandatory,
            lock(),
            owner("a"),
            7,
            options,
        )
    };
    // 1 ms since the floor: 200 ms, above the least 50 ms.
    assert_eq!(
        acquire(options(None)).queue_margin(),
        Duration::from_millis(200)
    );
    let measured = Some(Duration::from_micros(500));
    assert_eq!(
        acquire(options(measured)).queue_margin(),
        Duration::from_millis(100)
    );
    // A floor an hour old: the lock is seldom taken, the margin the safe one, and a
    // measurement of then (a hot minute an hour ago) no longer counts.
    for lock_interval in [None, measured] {
        let idle = AcquireOptions {
            queue_floor: Some(now.timestamp - Duration::from_secs(3600)),
            lock_interval,
            ..AcquireOptions::default()
        };
        assert_eq!(acquire(idle).queue_margin(), Duration::from_secs(4));
    }
}
