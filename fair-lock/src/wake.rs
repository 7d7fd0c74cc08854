//! Wake-up hints between lockers ([`lock_core::hint`]; docs/algorithm.md, section "Wake-up
//! hints"): the transport a locker sends them on and receives them from, and the inbox that
//! hands each received hint to the acquisition it names.
//!
//! [`UdpWakeHints`] is the transport for real deployments: one UDP socket per process,
//! shared by all its lockers. A simulation supplies its own (lock-storage-memory has one
//! that delays hints like its network).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use lock_core::error::Error;
use lock_core::hint::{HintKind, MAX_DATAGRAM_LEN, WakeHint};
use lock_core::id::{LockId, OwnerId};

/// Carries wake-up hints between lockers. Give one to
/// [`super::LockerBuilder::wake_hints`]; several lockers of a process may share it.
///
/// A transport may lose, delay, repeat or reorder hints: they only make a waiter read
/// sooner, and polling remains the fallback.
pub trait WakeHintTransport: Send + Sync + fmt::Debug {
    /// The address other lockers send this one's hints to: written into its queue cells,
    /// so it must be reachable from every other locker of the locks.
    fn listener(&self) -> SocketAddr;

    /// Sends `datagram` to `to`, without waiting and without reporting a loss.
    fn send(&self, to: SocketAddr, datagram: Vec<u8>);

    /// Where the transport delivers the hints it receives.
    fn inbox(&self) -> &WakeHintInbox;
}

/// The owners of this process that hear hints, by lock and owner.
type Listening = BTreeMap<(LockId, OwnerId), Arc<Ears>>;

/// What one owner's hints wake: its acquisition's next read, and (once it holds) its
/// release's choice to linger.
#[derive(Debug, Default)]
struct Ears {
    moved: Notify,
    wanted: Notify,
    wanted_once: AtomicBool,
}

impl Ears {
    /// True once a [`HintKind::Wanted`] hint has arrived.
    fn wanted_arrived(&self) -> bool {
        self.wanted_once.load(Ordering::Acquire)
    }
}

/// Hands received hints to the owners they name, by lock and owner: a
/// [`HintKind::Moved`] hint to an acquisition waiting for the lock, a [`HintKind::Wanted`]
/// one to an owner that holds the lock or lingers with it.
///
/// A transport calls [`WakeHintInbox::deliver`] with every datagram it receives. A hint for
/// an owner not listening (finished, or never of this process) is dropped.
#[derive(Clone, Debug, Default)]
pub struct WakeHintInbox {
    listening: Arc<Mutex<Listening>>,
}

impl WakeHintInbox {
    /// Delivers one received datagram; a datagram that is not a hint is refused with
    /// [`Error::MalformedWakeHint`] (or an invalid-id error) and changes nothing.
    pub fn deliver(&self, datagram: &[u8]) -> Result<(), Error> {
        let hint = WakeHint::decode(datagram)?;
        let key = (hint.lock_id, hint.owner);
        if let Some(ears) = self.lock().get(&key) {
            match hint.kind {
                HintKind::Moved => ears.moved.notify_one(),
                HintKind::Wanted => {
                    ears.wanted_once.store(true, Ordering::Release);
                    ears.wanted.notify_one();
                }
            }
        }
        Ok(())
    }

    /// Registers an owner as listening for hints until the returned registration is
    /// dropped.
    pub(crate) fn register(&self, lock_id: LockId, owner: OwnerId) -> WakeRegistration {
        let ears = Arc::new(Ears::default());
        let key = (lock_id, owner);
        self.lock().insert(key.clone(), ears.clone());
        WakeRegistration {
            inbox: self.clone(),
            key,
            ears,
        }
    }

    /// How many owners listen for hints now (acquiring, or holding a lock that may
    /// linger).
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Listening> {
        self.listening
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// An owner's place in the inbox; dropping it leaves.
#[derive(Debug)]
pub(crate) struct WakeRegistration {
    inbox: WakeHintInbox,
    key: (LockId, OwnerId),
    ears: Arc<Ears>,
}

impl WakeRegistration {
    /// Completes when a [`HintKind::Moved`] hint for this owner arrives (or has arrived
    /// since the last one was taken: hints are not lost between two waits, and several
    /// count as one).
    pub(crate) async fn hinted(&self) {
        self.ears.moved.notified().await;
    }

    /// True once a [`HintKind::Wanted`] hint for this owner has arrived.
    pub(crate) fn is_wanted(&self) -> bool {
        self.ears.wanted_arrived()
    }

    /// Whether a [`HintKind::Wanted`] hint for this owner arrives, as a handle a task can
    /// keep without borrowing the registration.
    pub(crate) fn wanted(&self) -> Wanted {
        Wanted(self.ears.clone())
    }
}

/// Whether a [`HintKind::Wanted`] hint reached an owner: another owner waits behind it.
#[derive(Clone, Debug)]
pub(crate) struct Wanted(Arc<Ears>);

impl Wanted {
    /// Completes once the hint has arrived (at once if it came before).
    pub(crate) async fn arrived(&self) {
        if !self.0.wanted_arrived() {
            self.0.wanted.notified().await;
        }
    }
}

impl Drop for WakeRegistration {
    fn drop(&mut self) {
        self.inbox.lock().remove(&self.key);
    }
}

/// An acquisition's way to the hint transport: where hints for it come in, and where the
/// ones it sends ([`lock_core::machine::Machine::poll_wake_hint`]) go out.
#[derive(Clone, Copy)]
pub(crate) struct HintLink<'a> {
    pub(crate) transport: &'a dyn WakeHintTransport,
    pub(crate) registration: &'a WakeRegistration,
}

/// Sends every hint in `hints` on `transport`.
pub(crate) fn send_all(
    transport: &dyn WakeHintTransport,
    hints: impl IntoIterator<Item = (SocketAddr, WakeHint)>,
) {
    for (to, hint) in hints {
        transport.send(to, hint.encode());
    }
}

/// Wake-up hints over UDP: a socket bound to a local address, a task that receives on it,
/// and the address written into queue cells.
///
/// Bind it once per process and give it to every locker. Dropping the last handle stops
/// the receiving task. Datagrams that are not hints are dropped (and counted at the
/// `debug` level of `tracing`); a hint costs a waiter at most one read per round trip,
/// whoever sent it.
///
/// ```no_run
/// # async fn run() -> Result<(), lock_core::Error> {
/// use std::sync::Arc;
/// use fair_lock::UdpWakeHints;
///
/// // Listen on every interface, and tell other lockers to use the host's own address.
/// let hints = UdpWakeHints::bind(
///     "0.0.0.0:7401".parse().unwrap(),
///     Some("192.0.2.7:7401".parse().unwrap()),
/// )
/// .await?;
/// # let _ = Arc::new(hints);
/// # Ok(()) }
/// ```
pub struct UdpWakeHints {
    /// The socket for sending: a non-blocking clone of the receiving one, so that a send
    /// needs neither a task nor the runtime's readiness for it.
    socket: std::net::UdpSocket,
    listener: SocketAddr,
    inbox: WakeHintInbox,
    receiver: tokio::task::JoinHandle<()>,
}

impl UdpWakeHints {
    /// Binds `bind` (port 0 picks a free port) and starts receiving. `advertise` is the
    /// address written into queue cells; without one it is the bound address, which must
    /// then not be unspecified (`0.0.0.0` or `::`). Needs a Tokio runtime with I/O enabled.
    pub async fn bind(bind: SocketAddr, advertise: Option<SocketAddr>) -> Result<Self, Error> {
        super::locker::require_runtime("UdpWakeHints::bind was polled outside one")?;
        let invalid = |reason: String| Error::InvalidConfig {
            field: "wake_hints",
            reason,
        };
        let socket = std::net::UdpSocket::bind(bind)
            .map_err(|error| invalid(format!("cannot bind {bind}: {error}")))?;
        let bound = socket
            .local_addr()
            .map_err(|error| invalid(format!("cannot read the bound address: {error}")))?;
        let listener = match advertise {
            Some(advertise) => advertise,
            None if bound.ip().is_unspecified() => {
                return Err(invalid(format!(
                    "the listener is bound to {bound}, which other lockers cannot send to; \
                     give the address they reach this host at to advertise"
                )));
            }
            None => bound,
        };
        let receiving = socket
            .try_clone()
            .and_then(|receiving| {
                socket.set_nonblocking(true)?;
                tokio::net::UdpSocket::from_std(receiving)
            })
            .map_err(|error| invalid(format!("cannot set the socket up: {error}")))?;
        let inbox = WakeHintInbox::default();
        let receiver = tokio::spawn(receive(receiving, inbox.clone()));
        Ok(UdpWakeHints {
            socket,
            listener,
            inbox,
            receiver,
        })
    }

    /// The address the socket is bound to (with the port picked, if 0 was asked for).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.socket
            .local_addr()
            .map_err(|error| Error::InvalidConfig {
                field: "wake_hints",
                reason: format!("cannot read the bound address: {error}"),
            })
    }
}

impl fmt::Debug for UdpWakeHints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpWakeHints")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl Drop for UdpWakeHints {
    fn drop(&mut self) {
        self.receiver.abort();
    }
}

impl WakeHintTransport for UdpWakeHints {
    fn listener(&self) -> SocketAddr {
        self.listener
    }

    fn send(&self, to: SocketAddr, datagram: Vec<u8>) {
        // A full send buffer or an unreachable peer loses the hint, which is allowed.
        if let Err(error) = self.socket.send_to(&datagram, to) {
            tracing::debug!(%to, %error, "a wake-up hint was not sent");
        }
    }

    fn inbox(&self) -> &WakeHintInbox {
        &self.inbox
    }
}

/// Receives datagrams until the socket fails for good, delivering each to `inbox`.
async fn receive(socket: tokio::net::UdpSocket, inbox: WakeHintInbox) {
    // One byte more than the longest hint, so that a longer datagram is seen as one.
    let mut buffer = vec![0; MAX_DATAGRAM_LEN + 1];
    loop {
        match socket.recv_from(&mut buffer).await {
            Ok((length, from)) => {
                if let Err(error) = inbox.deliver(&buffer[..length]) {
                    tracing::debug!(%from, %error, "dropped a datagram on the wake-up hint listener");
                }
            }
            // An ICMP error from an earlier send (a waiter gone) shows here on some
            // systems; the socket itself is still good. The pause keeps a socket that
            // fails for good from spinning.
            Err(error) => {
                tracing::debug!(%error, "wake-up hint listener");
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }
}
