//! The rules of lingering after a release and of the retake (docs/algorithm.md, section
//! "Lingering after a release"), each pinned on its own: when a release may linger
//! ([`Retake::lingers`]), and when a retake keeps the lock ([`RetakeOutcome::Held`]) or
//! gives it back.

use super::*;
use crate::storage::CellWrite;

/// How long the releases of [`lingering`] linger.
const LINGER: Duration = Duration::from_millis(20);

/// A configuration whose releases linger for [`LINGER`].
fn lingering() -> ValidConfig {
    LockConfig {
        linger: LINGER,
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

/// The lease of `name`, which took the idle lock with [`lingering`], and its acquisition's
/// counters.
fn idle_lease(world: &mut World, name: &str) -> (Lease, AcquireStats) {
    let mut acquire = world.acquire_with(lingering(), name);
    let holding = holding(world.finish(&mut acquire).0);
    let stats = holding.stats;
    assert!(stats.found_idle(), "{stats:?}");
    let lease = Lease::new(world.now(), lingering(), holding);
    assert!(lease.queue_column().is_some());
    (lease, stats)
}

/// Answers every read `retake` has sent `delay` after it sent them (both at once), and
/// returns its outcome.
fn answer_retake(world: &mut World, retake: &mut Retake, delay: Duration) -> RetakeOutcome {
    let reads: Vec<Outgoing> = std::iter::from_fn(|| retake.poll_request()).collect();
    assert_eq!(
        kinds(
            &reads
                .iter()
                .map(|read| read.request.clone())
                .collect::<Vec<_>>()
        ),
        ["read queue", "read main"]
    );
    world.advance(delay);
    for read in reads {
        let response = world.apply(read.request);
        retake.handle_response(world.now(), read.id, Ok(response));
    }
    retake.poll_outcome().expect("both reads answered")
}

fn is_held(outcome: &RetakeOutcome) -> bool {
    matches!(outcome, RetakeOutcome::Held(..))
}

/// What a retake decided, without the lease's details.
fn decided(outcome: &RetakeOutcome) -> &'static str {
    match outcome {
        RetakeOutcome::Held(..) => "held",
        RetakeOutcome::GiveBack(_) => "gave back",
    }
}

/// Writes a live cell of another owner into `kind`'s row, in `column`.
fn write_foreign_cell(world: &mut World, kind: RowKind, column: ColumnName) {
    world.apply(StorageRequest::Write(CellWrite {
        row: row(kind),
        column,
        value: b"someone else".to_vec(),
        timestamp: world.now().timestamp,
        ttl: Some(lingering().ttl()),
    }));
}

/// A release an owner waiting behind asked not to linger
/// ([`crate::hint::HintKind::Wanted`]) deletes its cells at once, even though everything
/// else about it would linger.
#[test]
fn a_release_asked_not_to_linger_does_not_linger() {
    let mut world = World::new();
    let (lease, stats) = idle_lease(&mut world, "a");
    let now = world.now().instant;
    assert!(Retake::lingers(&lingering(), &lease, &stats, now, false));
    assert!(!Retake::lingers(&lingering(), &lease, &stats, now, true));
}

/// A release lingers only if its lease can still be renewed when the linger ends, since a
/// retake then must be able to keep it: renewable now is not enough.
#[test]
fn a_release_lingers_only_if_its_lease_is_renewable_when_the_linger_ends() {
    let mut world = World::new();
    let (lease, stats) = idle_lease(&mut world, "a");
    let config = lingering();
    let request_timeout = config.config().request_timeout;
    let deadline = lease.deadline();
    let last_lingering = MonotonicTime::from_micros(
        deadline.as_micros() - u64::try_from((request_timeout + LINGER).as_micros()).unwrap() - 1,
    );
    assert!(Retake::lingers(
        &config,
        &lease,
        &stats,
        last_lingering,
        false
    ));
    // Half a linger later the lease is still renewable, but no longer at the linger's end.
    let too_late = last_lingering + LINGER / 2;
    assert!(config.renewable(too_late, deadline));
    assert!(!config.renewable(too_late + LINGER, deadline));
    assert!(!Retake::lingers(&config, &lease, &stats, too_late, false));
}

/// A retake keeps the lock only with at least `request_timeout` of lease left when its
/// answers are in, as an acquisition would: reads answered late give the lease back.
#[test]
fn a_retake_whose_reads_come_back_late_gives_the_lease_back() {
    let config = lingering();
    let request_timeout = config.config().request_timeout;
    let retake_by = |delay: Duration| {
        let mut world = World::new();
        let (lease, _) = idle_lease(&mut world, "a");
        // The retake starts a millisecond before the lease stops being renewable.
        let start = MonotonicTime::from_micros(
            lease.deadline().as_micros()
                - u64::try_from((request_timeout + Duration::from_millis(1)).as_micros()).unwrap(),
        );
        world.advance_to(start);
        let mut retake = Retake::new(world.now(), config.clone(), lease);
        answer_retake(&mut world, &mut retake, delay)
    };
    let in_time = retake_by(Duration::from_micros(500));
    assert!(is_held(&in_time), "{}", decided(&in_time));
    let late = retake_by(Duration::from_micros(1_500));
    assert!(
        matches!(late, RetakeOutcome::GiveBack(_)),
        "kept with less than request_timeout left: {}",
        decided(&late)
    );
}

/// Only our main cell alone lets a retake keep the lock: another owner's main cell beside
/// it (one waiting in the main row, or one left over), or no cell of ours, gives the lease
/// back.
#[test]
fn a_retake_keeps_the_lock_only_if_its_main_cell_is_alone_in_the_main_row() {
    for (beside, name) in [(true, "0-before-ours"), (true, "z-after-ours"), (false, "")] {
        let mut world = World::new();
        let (lease, _) = idle_lease(&mut world, "m");
        if beside {
            write_foreign_cell(&mut world, RowKind::Main, ColumnName::new(name));
        }
        let mut retake = Retake::new(world.now(), lingering(), lease);
        let outcome = answer_retake(&mut world, &mut retake, Duration::from_micros(300));
        if beside {
            assert!(
                matches!(outcome, RetakeOutcome::GiveBack(_)),
                "kept beside {name}: {}",
                decided(&outcome)
            );
        } else {
            assert!(is_held(&outcome), "our cell alone: {}", decided(&outcome));
        }
    }
    // Our main cell gone (forced out): no lock to keep.
    let mut world = World::new();
    let (lease, _) = idle_lease(&mut world, "m");
    let ours = world.live(RowKind::Main);
    world.apply(StorageRequest::Delete(crate::storage::CellDelete {
        row: row(RowKind::Main),
        column: ours[0].clone(),
        timestamp: world.now().timestamp + Duration::from_secs(1),
    }));
    let mut retake = Retake::new(world.now(), lingering(), lease);
    let outcome = answer_retake(&mut world, &mut retake, Duration::from_micros(300));
    assert!(
        matches!(outcome, RetakeOutcome::GiveBack(_)),
        "kept without its main cell: {}",
        decided(&outcome)
    );
}

/// An owner queued behind the lingering holder, found by the retake's queue read next to
/// our own queue cell, gets the lock first: the retake gives the lease back.
#[test]
fn a_retake_gives_way_to_an_owner_queued_behind_it() {
    let mut world = World::new();
    let (lease, _) = idle_lease(&mut world, "a");
    world.advance(Duration::from_millis(1));
    let mut behind = world.acquire_with(lingering(), "b");
    world.settle(&mut behind);
    assert!(behind.poll_outcome().is_none(), "b waits behind a");
    assert_eq!(world.live(RowKind::Queue).len(), 2);
    let mut retake = Retake::new(world.now(), lingering(), lease);
    let outcome = answer_retake(&mut world, &mut retake, Duration::from_micros(300));
    assert!(
        matches!(outcome, RetakeOutcome::GiveBack(_)),
        "kept ahead of b: {}",
        decided(&outcome)
    );
    behind.abandon(world.now());
}

/// An owner whose queue cell is older than ours but within the margin before it (it
/// enqueued before us and its cell landed late) is passed over by no retake either.
#[test]
fn a_retake_gives_way_to_an_owner_queued_just_before_it() {
    let mut world = World::new();
    let (lease, _) = idle_lease(&mut world, "b");
    let ours = lease.queue_column().unwrap().clone();
    let just_before = QueueColumn::new(ours.timestamp - Duration::from_micros(200), owner("a"));
    write_foreign_cell(&mut world, RowKind::Queue, just_before.encode());
    let mut retake = Retake::new(world.now(), lingering(), lease);
    let outcome = answer_retake(&mut world, &mut retake, Duration::from_micros(300));
    assert!(
        matches!(outcome, RetakeOutcome::GiveBack(_)),
        "kept ahead of a: {}",
        decided(&outcome)
    );
}

/// A retake whose queue read and main read find only our cells keeps the lease, with the
/// counters of one round trip.
#[test]
fn a_retake_that_finds_only_our_cells_keeps_the_lease() {
    let mut world = World::new();
    let (lease, _) = idle_lease(&mut world, "a");
    let deadline = lease.deadline();
    let mut retake = Retake::new(world.now(), lingering(), lease);
    let outcome = answer_retake(&mut world, &mut retake, Duration::from_micros(300));
    let RetakeOutcome::Held(kept, stats) = outcome else {
        panic!("nobody else was there: {}", decided(&outcome));
    };
    assert_eq!(kept.deadline(), deadline);
    assert_eq!((stats.requests, stats.queue_reads), (2, 1));
    assert_eq!(stats.round_trip, Duration::from_micros(300));
}

/// Only a release with a linger configured, of a lease still held, of a lock its holder
/// found idle lingers: a holder that waited, or found owners behind it, releases at once
/// (whoever it passed or who waits likely wants the lock next), and a lost lease has
/// nothing to keep.
#[test]
fn only_a_held_lease_of_a_lock_found_idle_lingers() {
    let mut world = World::new();
    let (mut lease, stats) = idle_lease(&mut world, "a");
    let now = world.now().instant;
    assert!(Retake::lingers(&lingering(), &lease, &stats, now, false));
    assert!(
        !Retake::lingers(&config(), &lease, &stats, now, false),
        "no linger configured"
    );
    for not_idle in [
        AcquireStats {
            behind_at_turn: 1,
            ..stats
        },
        AcquireStats {
            conflicts: 1,
            ..stats
        },
        AcquireStats {
            queue_reads: 2,
            ..stats
        },
    ] {
        assert!(
            !Retake::lingers(&lingering(), &lease, &not_idle, now, false),
            "{not_idle:?}"
        );
    }
    assert!(lease.check_lapsed(lease.deadline()).is_some());
    assert_eq!(lease.status(), LeaseStatus::Lost);
    assert!(!Retake::lingers(&lingering(), &lease, &stats, now, false));
}
