//! Wake-up hints in the queue machine (docs/algorithm.md, section "Wake-up hints"): the
//! listener's address in the queue cell, the successors a holder records, and a hint that
//! only ever brings a poll's read forward.

use std::net::SocketAddr;

use super::*;
use crate::hint::{self, HintKind, Successor, WakeHint};

fn listener(port: u16) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 7], port))
}

/// A mandatory acquisition by `name`, listening for hints at `listener` if given.
fn acquire(world: &World, name: &str, listener: Option<SocketAddr>) -> Acquire {
    acquire_with(world, name, listener, config())
}

/// [`acquire`] with `config`.
fn acquire_with(
    world: &World,
    name: &str,
    listener: Option<SocketAddr>,
    config: ValidConfig,
) -> Acquire {
    let options = AcquireOptions {
        wake_hint_listener: listener,
        ..AcquireOptions::default()
    };
    Acquire::with_options(
        world.now(),
        config,
        Mode::Mandatory,
        lock(),
        owner(name),
        7,
        options,
    )
}

/// Runs `waiter` until it pauses behind the owners ahead, and returns how long it pauses.
fn pause_behind(world: &mut World, waiter: &mut Acquire) -> Duration {
    world.settle(waiter);
    assert!(waiter.poll_outcome().is_none());
    let wake = waiter.poll_timeout().expect("a paused waiter");
    wake.saturating_duration_since(world.now().instant)
}

#[test]
fn a_holder_records_the_listener_behind_it_and_its_release_finds_the_first_two_queued() {
    let mut world = World::new();
    let mut holder = acquire(&world, "a", Some(listener(1)));
    // The holder's queue write lands; its queue read waits until the others have queued.
    world.answer_after(&mut holder, Duration::ZERO);
    let mut waiters: Vec<Acquire> = [("b", Some(2)), ("c", None), ("d", Some(4)), ("e", Some(5))]
        .into_iter()
        .map(|(name, port)| {
            world.advance(Duration::from_micros(10));
            let mut waiter = acquire(&world, name, port.map(listener));
            pause_behind(&mut world, &mut waiter);
            waiter
        })
        .collect();
    let queue = world.cells.read(
        &crate::storage::RowRead::first(row(RowKind::Queue), 10),
        world.now().timestamp,
    );
    let listeners: Vec<_> = queue
        .iter()
        .map(|cell| hint::listener_in_queue_value(&cell.value))
        .collect();
    let expected = [1, 2, 0, 4, 5].map(|port| (port > 0).then(|| listener(port)));
    assert_eq!(listeners, expected);
    let (outcome, _) = world.finish(&mut holder);
    let holding = holding(outcome);
    let successor = |name: &str, port| Successor {
        owner: owner(name),
        listener: listener(port),
    };
    // The owner next in line is hinted when the lock is taken.
    assert_eq!(holding.successors, vec![successor("b", 2)]);
    let hint_for_b = WakeHint {
        lock_id: lock(),
        owner: owner("b"),
        kind: HintKind::Moved,
    };
    assert_eq!(holding.wake_hints(), vec![(listener(2), hint_for_b)]);
    // The release reads the queue with its deletes; c names no listener, and e is third.
    let lease = Lease::new(world.now(), config(), holding);
    let mut release = lease.release_finding_successors(world.now());
    let sent = world.settle(&mut release);
    assert_eq!(kinds(&sent), ["delete main", "delete queue", "read queue"]);
    assert_eq!(release.poll_outcome(), Some(Ok(())));
    assert_eq!(
        release.successors_found(),
        [successor("b", 2), successor("d", 4)]
    );
    for waiter in &mut waiters {
        waiter.abandon(world.now());
    }
}

#[test]
fn a_release_whose_queue_read_fails_still_releases_and_finds_nobody() {
    let mut world = World::new();
    let mut holder = acquire(&world, "a", Some(listener(1)));
    world.answer_after(&mut holder, Duration::ZERO);
    world.advance(Duration::from_micros(10));
    let mut waiter = acquire(&world, "b", Some(listener(2)));
    pause_behind(&mut world, &mut waiter);
    let (outcome, _) = world.finish(&mut holder);
    let lease = Lease::new(world.now(), config(), holding(outcome));
    let mut release = lease.release_finding_successors(world.now());
    while let Some(outgoing) = release.poll_request() {
        let response = match outgoing.request {
            StorageRequest::Read(_) => Err(Error::unavailable("read", "partition")),
            request => Ok(world.apply(request)),
        };
        release.handle_response(world.now(), outgoing.id, response);
    }
    assert_eq!(release.poll_outcome(), Some(Ok(())));
    assert!(release.successors_found().is_empty());
    assert!(world.live(RowKind::Main).is_empty());
}

#[test]
fn a_holder_that_does_not_listen_records_no_successors() {
    let mut world = World::new();
    let mut holder = acquire(&world, "a", None);
    world.answer_after(&mut holder, Duration::ZERO);
    let mut waiter = acquire(&world, "b", Some(listener(2)));
    pause_behind(&mut world, &mut waiter);
    let (outcome, _) = world.finish(&mut holder);
    let holding = holding(outcome);
    assert!(holding.successors.is_empty());
    assert!(holding.wake_hints().is_empty());
}

#[test]
fn a_hint_sends_the_paused_read_now_and_at_most_once_a_round_trip() {
    let mut world = World::new();
    let (_, _) = world.finish(&mut acquire(&world, "a", None));
    for name in ["b", "c"] {
        let mut ahead = acquire(&world, name, None);
        pause_behind(&mut world, &mut ahead);
    }
    // Three places back: a long pause, waiting for hints.
    let mut waiter = acquire(&world, "d", Some(listener(4)));
    assert_eq!(pause_behind(&mut world, &mut waiter), hint::FALLBACK_POLL);

    waiter.handle_wake_hint(world.now());
    let read = waiter.poll_request().expect("the hinted read");
    assert!(matches!(&read.request, StorageRequest::Read(read) if read.row.kind == RowKind::Queue));
    assert_eq!(waiter.stats().hinted_reads, 1);
    // A hint while the read is in flight sends nothing then; the pause after its answer
    // is skipped instead, since that read may have left before the lock moved.
    waiter.handle_wake_hint(world.now());
    assert!(waiter.poll_request().is_none());
    let response = world.apply(read.request);
    waiter.handle_response(world.now(), read.id, Ok(response));
    assert!(waiter.poll_request().is_none());
    assert!(waiter.poll_timeout().unwrap() <= world.now().instant);
    waiter.handle_timeout(world.now());
    let read = waiter
        .poll_request()
        .expect("the read the hint in flight asked for");
    assert_eq!(waiter.stats().hinted_reads, 2);
    let response = world.apply(read.request);
    waiter.handle_response(world.now(), read.id, Ok(response));
    assert!(
        waiter.poll_request().is_none(),
        "still behind the holder: a pause"
    );

    // The next hint at once is one too many; one a round trip later is honoured.
    waiter.handle_wake_hint(world.now());
    assert!(waiter.poll_request().is_none());
    world.advance(crate::config::MIN_NEXT_IN_LINE_PERIOD);
    waiter.handle_wake_hint(world.now());
    assert!(waiter.poll_request().is_some());
    assert_eq!(waiter.stats().hinted_reads, 3);
}

#[test]
fn a_hint_is_ignored_by_an_acquisition_that_does_not_listen_and_during_a_backoff() {
    let mut world = World::new();
    let (_, _) = world.finish(&mut acquire(&world, "a", None));
    let mut deaf = acquire(&world, "b", None);
    pause_behind(&mut world, &mut deaf);
    deaf.handle_wake_hint(world.now());
    assert!(deaf.poll_request().is_none());
    assert_eq!(deaf.stats().hinted_reads, 0);

    let mut waiter = acquire(&world, "c", Some(listener(3)));
    let write = waiter.poll_request().unwrap();
    let response = world.apply(write.request);
    waiter.handle_response(world.now(), write.id, Ok(response));
    let read = waiter.poll_request().unwrap();
    waiter.handle_response(
        world.now(),
        read.id,
        Err(Error::unavailable("read", "partition")),
    );
    assert!(waiter.poll_timeout().is_some(), "a backoff");
    waiter.handle_wake_hint(world.now());
    assert!(waiter.poll_request().is_none(), "a backoff is kept");
    assert_eq!(waiter.stats().hinted_reads, 0);
}

#[test]
fn a_listener_far_back_polls_no_more_often_than_the_fallback() {
    let pause_third_back = |listens: bool| {
        let mut world = World::new();
        let mut holder = acquire(&world, "a", None);
        world.settle(&mut holder);
        for name in ["b", "c"] {
            let mut waiter = acquire(&world, name, None);
            pause_behind(&mut world, &mut waiter);
        }
        let mut waiter = acquire(&world, "d", listens.then(|| listener(4)));
        pause_behind(&mut world, &mut waiter)
    };
    let deaf = pause_third_back(false);
    let listening = pause_third_back(true);
    assert!(deaf < hint::FALLBACK_POLL, "{deaf:?}");
    assert_eq!(listening, hint::FALLBACK_POLL);
}

#[test]
fn the_release_of_a_lock_found_idle_reads_no_queue_unless_an_owner_asked() {
    let mut world = World::new();
    let (outcome, _) = world.finish(&mut acquire(&world, "a", Some(listener(1))));
    let holding = holding(outcome);
    assert!(holding.stats.found_idle());
    let mut release =
        Lease::new(world.now(), config(), holding.clone()).release_finding_successors(world.now());
    let sent = world.settle(&mut release);
    assert_eq!(kinds(&sent), ["delete main", "delete queue"]);
    assert_eq!(release.poll_outcome(), Some(Ok(())));
    // Unless an owner asked it not to linger: that owner waits, and the read finds it.
    let mut lease = Lease::new(world.now(), config(), holding);
    lease.note_waiter();
    let mut release = lease.release_finding_successors(world.now());
    let sent = world.settle(&mut release);
    assert_eq!(kinds(&sent), ["delete main", "delete queue", "read queue"]);
}

/// The pause after a conflict lets the other owner's delete land before we look again: a
/// hint does not cut it short, nor does one that came while the delete was in flight.
#[test]
fn a_hint_never_cuts_the_pause_after_a_conflict_short() {
    let mut world = World::new();
    // A main cell of an owner not in the queue: our main read meets it.
    world.apply(StorageRequest::Write(crate::storage::CellWrite {
        row: row(RowKind::Main),
        column: ColumnName::new("stranger"),
        value: b"x".to_vec(),
        timestamp: Timestamp::from_micros(EPOCH),
        ttl: Some(config().ttl()),
    }));
    let mut waiter = acquire(&world, "b", Some(listener(2)));
    loop {
        let outgoing = waiter
            .poll_request()
            .expect("a request before the conflict");
        let deletes_main = matches!(&outgoing.request, StorageRequest::Delete(delete) if delete.row.kind == RowKind::Main);
        if deletes_main {
            waiter.handle_wake_hint(world.now());
        }
        let response = world.apply(outgoing.request);
        waiter.handle_response(world.now(), outgoing.id, Ok(response));
        if deletes_main {
            break;
        }
    }
    assert_eq!(waiter.stats().conflicts, 1);
    let pause_end = waiter.poll_timeout().expect("the pause after the conflict");
    assert!(pause_end > world.now().instant);
    waiter.handle_wake_hint(world.now());
    assert!(waiter.poll_request().is_none());
    assert_eq!(waiter.poll_timeout(), Some(pause_end));
    assert_eq!(waiter.stats().hinted_reads, 0);
}

/// Every hint `machine` wants sent now.
fn hints_out(machine: &mut Acquire) -> Vec<(SocketAddr, WakeHint)> {
    std::iter::from_fn(|| machine.poll_wake_hint()).collect()
}

/// A configuration whose releases linger ([`crate::LockConfig::linger`]).
fn lingering() -> ValidConfig {
    crate::LockConfig {
        linger: Duration::from_millis(20),
        ..without_waiting_in_main()
    }
    .validate()
    .unwrap()
}

#[test]
fn the_owner_next_in_line_asks_the_listening_head_once_not_to_linger() {
    let mut world = World::new();
    let mut holder = acquire_with(&world, "a", Some(listener(1)), lingering());
    let (outcome, _) = world.finish(&mut holder);
    holding(outcome);
    assert!(hints_out(&mut holder).is_empty());
    let mut next = acquire_with(&world, "b", Some(listener(2)), lingering());
    let pause = pause_behind(&mut world, &mut next);
    let wanted = WakeHint {
        lock_id: lock(),
        owner: owner("a"),
        kind: HintKind::Wanted,
    };
    assert_eq!(hints_out(&mut next), vec![(listener(1), wanted)]);
    assert_eq!(next.stats().wanted_hints, 1);
    // Its next read finds the same owner first: it is not asked again.
    world.advance(pause);
    next.handle_timeout(world.now());
    pause_behind(&mut world, &mut next);
    assert!(hints_out(&mut next).is_empty());
    assert_eq!(next.stats().wanted_hints, 1);
    // Two places back, an owner asks nobody.
    let mut further = acquire_with(&world, "c", Some(listener(3)), lingering());
    pause_behind(&mut world, &mut further);
    assert!(hints_out(&mut further).is_empty());
}

#[test]
fn nobody_is_asked_without_listeners_on_both_sides_or_without_lingering() {
    // (holder listens, waiter listens, configuration lingers)
    for (holder_listens, waiter_listens, lingers) in [
        (false, true, true),
        (true, false, true),
        (true, true, false),
    ] {
        let config = if lingers { lingering() } else { config() };
        let mut world = World::new();
        let port = |listens: bool, port| listens.then(|| listener(port));
        let mut holder = acquire_with(&world, "a", port(holder_listens, 1), config.clone());
        world.finish(&mut holder);
        let mut next = acquire_with(&world, "b", port(waiter_listens, 2), config);
        pause_behind(&mut world, &mut next);
        assert!(hints_out(&mut next).is_empty());
        assert_eq!(next.stats().wanted_hints, 0);
    }
}

#[test]
fn a_holder_that_found_the_lock_idle_and_may_linger_stays_queued_to_be_asked() {
    // Waiting in the main row, a holder leaves the queue as it holds, unless it listens and
    // its release may linger: then the owner behind must see its cell to ask it.
    let exits: Vec<QueueExit> = [(true, true), (true, false), (false, true)]
        .into_iter()
        .map(|(listens, lingers)| {
            let config = crate::LockConfig {
                linger: if lingers {
                    Duration::from_millis(20)
                } else {
                    Duration::ZERO
                },
                ..crate::LockConfig::default()
            };
            let mut world = World::new();
            let mut holder = acquire_with(
                &world,
                "a",
                listens.then(|| listener(1)),
                config.validate().unwrap(),
            );
            let (outcome, _) = world.finish(&mut holder);
            holding(outcome).queue_exit
        })
        .collect();
    assert_eq!(
        exits,
        [QueueExit::AtRelease, QueueExit::Done, QueueExit::Done]
    );
}
