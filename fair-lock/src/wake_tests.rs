//! Wake-up hints through the driver (docs/algorithm.md, section "Wake-up hints"): on the
//! single-node test store and Tokio's paused clock with a test transport, and over real
//! UDP on loopback.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::driver_tests::store;
use crate::test_client::{Link, TestClient};
use crate::{Locker, UdpWakeHints, VirtualClock, WakeHintInbox, WakeHintTransport};
use lock_core::config::LockConfig;
use lock_core::error::Error;
use lock_core::hint::{HintKind, WakeHint};
use lock_core::id::{LockId, OwnerId};
use lock_core::machine::AcquireStats;

const LOCK: &str = "account:42";

/// The one-way delay of a test hint.
const HINT_DELAY: Duration = Duration::from_micros(500);

/// Test transports that deliver to each other after [`HINT_DELAY`], recording what they send.
#[derive(Clone, Default)]
pub(super) struct TestNetwork {
    inboxes: Arc<Mutex<BTreeMap<SocketAddr, WakeHintInbox>>>,
}

impl TestNetwork {
    pub(super) fn endpoint(&self, port: u16) -> Arc<TestHints> {
        let listener = SocketAddr::from(([192, 0, 2, 1], port));
        let inbox = WakeHintInbox::default();
        self.inboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(listener, inbox.clone());
        Arc::new(TestHints {
            network: self.clone(),
            listener,
            inbox,
            sent: Mutex::default(),
        })
    }
}

#[derive(Debug)]
pub(super) struct TestHints {
    network: TestNetwork,
    listener: SocketAddr,
    inbox: WakeHintInbox,
    sent: Mutex<Vec<(SocketAddr, WakeHint)>>,
}

impl std::fmt::Debug for TestNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestNetwork")
    }
}

impl TestHints {
    pub(super) fn sent(&self) -> Vec<(SocketAddr, WakeHint)> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl WakeHintTransport for TestHints {
    fn listener(&self) -> SocketAddr {
        self.listener
    }

    fn send(&self, to: SocketAddr, datagram: Vec<u8>) {
        let hint = WakeHint::decode(&datagram).expect("the driver sends well-formed hints");
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((to, hint));
        let inbox = self
            .network
            .inboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&to)
            .cloned();
        if let Some(inbox) = inbox {
            tokio::spawn(async move {
                tokio::time::sleep(HINT_DELAY).await;
                inbox.deliver(&datagram).expect("a well-formed hint");
            });
        }
    }

    fn inbox(&self) -> &WakeHintInbox {
        &self.inbox
    }
}

fn locker(
    client: TestClient,
    clock: &VirtualClock,
    seed: u64,
    hints: Option<Arc<TestHints>>,
) -> Locker<TestClient> {
    let builder = Locker::builder(client)
        .config(LockConfig::default())
        .clock(Arc::new(clock.clone()))
        .replay_owner_ids_unsafe(seed);
    match hints {
        Some(hints) => builder.wake_hints(hints),
        None => builder,
    }
    .build()
    .unwrap()
}

/// What one run of [`hand_off_after_a_long_hold`] saw.
struct HandOff {
    /// From the holder's release returning to the waiter holding.
    took: Duration,
    hinted_reads: u32,
    /// The hints the holder sent, by owner.
    sent_to: Vec<OwnerId>,
    waiter: OwnerId,
}

/// A holds for a second while B waits behind it (queued before A's turn, so A records it),
/// then releases. A's requests take 2 ms each, B's none.
async fn hand_off_after_a_long_hold(with_hints: bool) -> HandOff {
    let (store, clock) = store();
    let network = TestNetwork::default();
    let (a_hints, b_hints) = (network.endpoint(1), network.endpoint(2));
    let a_client = store.client();
    a_client.set_link(Link::Delayed(Duration::from_millis(2)));
    let a = locker(a_client, &clock, 1, with_hints.then(|| a_hints.clone()));
    let b = locker(
        store.client(),
        &clock,
        2,
        with_hints.then(|| b_hints.clone()),
    );
    let taking = tokio::spawn(async move {
        let guard = a.lock(LOCK).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        (a, guard)
    });
    // A's queue write lands at 2 ms and its queue read at 4 ms: B queues in between.
    tokio::time::sleep(Duration::from_millis(3)).await;
    let waiting = tokio::spawn(async move {
        let guard = b.lock(LOCK).await.unwrap();
        let held_at = tokio::time::Instant::now();
        (b, guard, held_at)
    });
    let (_a, held) = taking.await.unwrap();
    held.release().await.unwrap();
    let released_at = tokio::time::Instant::now();
    let (_b, guard, held_at) = waiting.await.unwrap();
    let hand_off = HandOff {
        took: held_at.saturating_duration_since(released_at),
        hinted_reads: guard.stats().hinted_reads,
        sent_to: a_hints
            .sent()
            .into_iter()
            .map(|(_, hint)| hint.owner)
            .collect(),
        waiter: guard.owner_id().clone(),
    };
    guard.release().await.unwrap();
    hand_off
}

#[test]
fn a_release_hints_the_owner_behind_and_it_takes_the_lock_at_once() {
    crate::watchdog::in_virtual_time(
        "a_release_hints_the_owner_behind_and_it_takes_the_lock_at_once",
        async {
            let hinted = hand_off_after_a_long_hold(true).await;
            // A hinted B when it took the lock, as its release's deletes went out, and
            // once its release read showed B queued.
            assert_eq!(hinted.sent_to, vec![hinted.waiter.clone(); 3]);
            assert!(hinted.hinted_reads >= 1);
            assert!(
                hinted.took <= Duration::from_millis(2),
                "hinted, B took {:?} to see the release",
                hinted.took
            );
            // Without hints B sees the release only at its next poll, which after a
            // second's hold is far apart.
            let polled = hand_off_after_a_long_hold(false).await;
            assert!(polled.sent_to.is_empty());
            assert_eq!(polled.hinted_reads, 0);
            assert!(
                polled.took >= Duration::from_millis(20),
                "unhinted, B took only {:?}",
                polled.took
            );
        },
    );
}

#[test]
fn malformed_forged_and_repeated_hints_cost_at_most_a_read_a_round_trip() {
    crate::watchdog::in_virtual_time(
        "malformed_forged_and_repeated_hints_cost_at_most_a_read_a_round_trip",
        async {
            let (store, clock) = store();
            let network = TestNetwork::default();
            let b_hints = network.endpoint(2);
            let a = locker(store.client(), &clock, 1, None);
            let b_client = store.client();
            b_client.set_link(Link::Delayed(Duration::from_millis(1)));
            let b = locker(b_client.clone(), &clock, 2, Some(b_hints.clone()));
            let held = a.lock(LOCK).await.unwrap();
            // Later than A's queue time, so that B is behind A and waits in the main row.
            tokio::time::sleep(Duration::from_millis(1)).await;
            let waiting = tokio::spawn(async move { b.lock(LOCK).await });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let report = a.inspect(LOCK, 10).await.unwrap();
            let waiter = report.queue.first().expect("B queued").owner.clone();
            let inbox = b_hints.inbox();
            assert_eq!(inbox.waiting(), 1);
            assert!(matches!(
                inbox.deliver(b"not a hint"),
                Err(Error::MalformedWakeHint { .. })
            ));
            let stranger = WakeHint {
                lock_id: LockId::new(LOCK).unwrap(),
                owner: OwnerId::new("nobody-here").unwrap(),
                kind: HintKind::Moved,
            };
            inbox.deliver(&stranger.encode()).unwrap();
            // A thousand hints for B, ten every millisecond: B's reads take a millisecond,
            // so it sends at most one per millisecond, its own polls included.
            let forged = WakeHint {
                lock_id: LockId::new(LOCK).unwrap(),
                owner: waiter,
                kind: HintKind::Moved,
            }
            .encode();
            let before = b_client.sent().len();
            for _ in 0..100 {
                for _ in 0..10 {
                    inbox.deliver(&forged).unwrap();
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let during = b_client.sent().len() - before;
            assert!(
                (50..=120).contains(&during),
                "{during} requests in 100 ms of hints"
            );
            assert!(!waiting.is_finished(), "a hint never takes the lock");
            held.release().await.unwrap();
            let guard = waiting.await.unwrap().unwrap();
            assert!(
                guard.stats().hinted_reads >= 50,
                "{:?} {during}",
                guard.stats()
            );
            guard.release().await.unwrap();
            assert_eq!(
                inbox.waiting(),
                0,
                "a finished acquisition leaves the inbox"
            );
        },
    );
}

#[tokio::test]
async fn udp_hints_reach_the_registered_acquisition_and_garbage_is_dropped() {
    let bound = UdpWakeHints::bind(SocketAddr::from(([127, 0, 0, 1], 0)), None)
        .await
        .unwrap();
    let address = bound.local_addr().unwrap();
    assert_eq!(bound.listener(), address);
    let lock_id = LockId::new(LOCK).unwrap();
    let owner = OwnerId::new("waiter-1").unwrap();
    let registration = bound.inbox().register(lock_id.clone(), owner.clone());
    let sender = UdpWakeHints::bind(SocketAddr::from(([127, 0, 0, 1], 0)), None)
        .await
        .unwrap();
    sender.send(address, b"garbage first".to_vec());
    sender.send(address, vec![0; lock_core::hint::MAX_DATAGRAM_LEN + 50]);
    sender.send(
        address,
        WakeHint {
            lock_id,
            owner,
            kind: HintKind::Moved,
        }
        .encode(),
    );
    // Loopback delivers in microseconds; the limit only keeps a broken socket from
    // hanging the test.
    tokio::time::timeout(Duration::from_secs(30), registration.hinted())
        .await
        .expect("the hint arrives over loopback");
    drop(registration);
    assert_eq!(bound.inbox().waiting(), 0);
}

#[tokio::test]
async fn a_listener_on_every_interface_needs_an_address_to_advertise() {
    let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
    match UdpWakeHints::bind(unspecified, None).await {
        Err(Error::InvalidConfig { field, reason }) => {
            assert_eq!(field, "wake_hints");
            assert!(reason.contains("advertise"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let advertised = SocketAddr::from(([192, 0, 2, 7], 7401));
    let bound = UdpWakeHints::bind(unspecified, Some(advertised))
        .await
        .unwrap();
    assert_eq!(bound.listener(), advertised);
}

/// The linger of [`wait_behind_a_lingering_lock`].
const LINGER: Duration = Duration::from_millis(400);

/// A takes the idle lock, holds it for `hold` and releases it, its release lingering for
/// [`LINGER`]; B asks for the lock 10 ms after A took it. Returns how long after A's
/// release B held, and B's counters.
async fn wait_behind_a_lingering_lock(
    with_hints: bool,
    hold: Duration,
) -> (Duration, AcquireStats) {
    let (store, clock) = store();
    let network = TestNetwork::default();
    let config = LockConfig {
        linger: LINGER,
        ..LockConfig::default()
    };
    let build = |seed, port| {
        let builder = Locker::builder(store.client())
            .config(config.clone())
            .clock(Arc::new(clock.clone()))
            .replay_owner_ids_unsafe(seed);
        match with_hints {
            true => builder.wake_hints(network.endpoint(port)),
            false => builder,
        }
        .build()
        .unwrap()
    };
    let (a, b) = (build(1, 1), build(2, 2));
    let held = a.lock(LOCK).await.unwrap();
    assert!(held.stats().found_idle());
    let waiting = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let guard = b.lock(LOCK).await.unwrap();
        (tokio::time::Instant::now(), guard)
    });
    tokio::time::sleep(hold).await;
    held.release().await.unwrap();
    let released_at = tokio::time::Instant::now();
    let (held_at, guard) = waiting.await.unwrap();
    let stats = guard.stats();
    guard.release().await.unwrap();
    (held_at.saturating_duration_since(released_at), stats)
}

#[test]
fn an_owner_next_in_line_ends_the_linger_of_the_lock_it_waits_for() {
    crate::watchdog::in_virtual_time(
        "an_owner_next_in_line_ends_the_linger_of_the_lock_it_waits_for",
        async {
            // A releases at once and lingers; B, queued 10 ms later, asks it to stop.
            let (took, stats) = wait_behind_a_lingering_lock(true, Duration::ZERO).await;
            assert_eq!(stats.wanted_hints, 1);
            assert!(
                took <= Duration::from_millis(15),
                "B held {took:?} after A's release, which lingers {LINGER:?}"
            );
            // Without hints B waits out the linger.
            let (took, stats) = wait_behind_a_lingering_lock(false, Duration::ZERO).await;
            assert_eq!(stats.wanted_hints, 0);
            assert!(
                took >= LINGER,
                "unasked, B held only {took:?} after the release"
            );
        },
    );
}

#[test]
fn a_holder_asked_while_it_holds_does_not_linger() {
    crate::watchdog::in_virtual_time("a_holder_asked_while_it_holds_does_not_linger", async {
        // B queues 10 ms into A's 100 ms hold and asks; A's release then deletes its cells
        // and reads the queue, and the hint it sends B makes B read at once.
        let hold = Duration::from_millis(100);
        let (took, stats) = wait_behind_a_lingering_lock(true, hold).await;
        assert_eq!(stats.wanted_hints, 1);
        assert_eq!(stats.hinted_reads, 1);
        assert!(
            took <= Duration::from_millis(5),
            "B held {took:?} after A's release"
        );
        let (took, _) = wait_behind_a_lingering_lock(false, hold).await;
        assert!(
            took >= LINGER,
            "unasked, B held only {took:?} after the release"
        );
    });
}
