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

/// With the default margin nothing is hidden, and a later head in the main row is a plain
/// conflict: the owner backs off and keeps its place.
#[test]
fn with_the_default_margin_a_later_head_in_the_main_row_is_a_conflict_without_a_rejoin() {
    let config = config();
    assert!(!config.config().rejoins_when_passed());
    assert!(short_margin().config().rejoins_when_passed());
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
