//! The rules of a release that reads the queue for owners to wake (docs/algorithm.md,
//! section "Wake-up hints"), each pinned on its own: which releases read, and that the
//! outcome waits for the read.

use std::net::SocketAddr;

use super::*;

/// A mandatory acquisition by `name`, listening for hints at `listener` if given.
fn acquire_listening(world: &World, name: &str, listener: Option<SocketAddr>) -> Acquire {
    let options = AcquireOptions {
        wake_hint_listener: listener,
        ..AcquireOptions::default()
    };
    Acquire::with_options(
        world.now(),
        config(),
        Mode::Mandatory,
        lock(),
        owner(name),
        7,
        options,
    )
}

fn listener(port: u16) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 9], port))
}

/// The holding of `holder`, taken with an owner `b` queued behind it before its first
/// queue read: a lock it did not find idle. Returns `b` too, still waiting.
fn held_with_a_waiter(world: &mut World, mut holder: Acquire) -> (Holding, Acquire) {
    // The holder's queue write lands; its queue read waits until b has queued.
    world.answer_after(&mut holder, Duration::ZERO);
    world.advance(Duration::from_micros(10));
    let mut waiter = acquire_listening(world, "b", Some(listener(2)));
    world.settle(&mut waiter);
    assert!(waiter.poll_outcome().is_none(), "b waits behind");
    let holding = holding(world.finish(&mut holder).0);
    assert!(!holding.stats.found_idle());
    (holding, waiter)
}

/// A release that reads the queue for owners to wake gives its outcome only once that
/// read is answered: the driver sends the hints when the outcome is in, to the owners
/// found by then.
#[test]
fn a_release_reading_for_successors_ends_only_once_the_read_is_answered() {
    let mut world = World::new();
    let holder = acquire_listening(&world, "a", Some(listener(1)));
    let (holding, mut waiter) = held_with_a_waiter(&mut world, holder);
    let mut release =
        Lease::new(world.now(), config(), holding).release_finding_successors(world.now());
    let sent: Vec<Outgoing> = std::iter::from_fn(|| release.poll_request()).collect();
    let (reads, deletes): (Vec<Outgoing>, Vec<Outgoing>) = sent
        .into_iter()
        .partition(|outgoing| matches!(outgoing.request, StorageRequest::Read(_)));
    assert_eq!((deletes.len(), reads.len()), (2, 1));
    for delete in deletes {
        let response = world.apply(delete.request);
        release.handle_response(world.now(), delete.id, Ok(response));
    }
    assert_eq!(
        release.poll_outcome(),
        None,
        "the deletes are in, the queue read is not"
    );
    let read = reads.into_iter().next().unwrap();
    let response = world.apply(read.request);
    release.handle_response(world.now(), read.id, Ok(response));
    assert_eq!(release.poll_outcome(), Some(Ok(())));
    assert_eq!(
        release
            .successors_found()
            .iter()
            .map(|successor| successor.owner.clone())
            .collect::<Vec<_>>(),
        [owner("b")]
    );
    waiter.abandon(world.now());
}

/// A holder that does not listen for hints never reads the queue at its release, even if
/// it did not find the lock idle or was told an owner waits ([`Lease::note_waiter`]):
/// without hints, a release is its deletes alone.
#[test]
fn the_release_of_a_holder_that_does_not_listen_reads_no_queue() {
    let mut world = World::new();
    let holder = acquire_listening(&world, "a", None);
    let (holding, mut waiter) = held_with_a_waiter(&mut world, holder);
    for told in [false, true] {
        let mut lease = Lease::new(world.now(), config(), holding.clone());
        if told {
            lease.note_waiter();
        }
        let mut release = lease.release_finding_successors(world.now());
        let sent = world.settle(&mut release);
        assert_eq!(
            kinds(&sent),
            ["delete main", "delete queue"],
            "told: {told}"
        );
        assert_eq!(release.poll_outcome(), Some(Ok(())));
    }
    waiter.abandon(world.now());
}
