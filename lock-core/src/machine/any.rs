//! One acquisition of whichever algorithm the configuration names: the choice of algorithm
//! made once, where the model checker sees it, for the locker and the models alike.

use crate::config::{Algorithm, ValidConfig};
use crate::error::Error;
use crate::id::{LockId, OwnerId};
use crate::storage::StorageResponse;
use crate::time::{MonotonicTime, Now};

use super::{
    Acquire, AcquireOptions, AcquireOutcome, BakeryAcquire, BaselineAcquire, Machine, Mode,
    Outgoing, RequestId,
};

/// An acquisition machine of any algorithm, driven like each of them.
///
/// [`AnyAcquire::new`] picks the machine from [`crate::LockConfig::algorithm`]: the queue
/// algorithm for [`Algorithm::Queue`] and [`Algorithm::Combined`] (the combined mode is a
/// setting of [`Acquire`]), the shadow-row algorithm for [`Algorithm::Baseline`] and the
/// bakery for [`Algorithm::Bakery`]; the last two have no seats and no queue floor and
/// ignore those options.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AnyAcquire {
    /// The queue algorithm (also in the combined migration mode).
    Queue(Box<Acquire>),
    /// The baseline shadow-row algorithm.
    Baseline(Box<BaselineAcquire>),
    /// The bakery algorithm.
    Bakery(Box<BakeryAcquire>),
}

impl AnyAcquire {
    /// Starts acquiring `lock_id` as `owner` with the configured algorithm. `seed` drives
    /// the poll jitter (queue, bakery) or the random backoff (baseline).
    pub fn new(
        now: Now,
        config: ValidConfig,
        mode: Mode,
        lock_id: LockId,
        owner: OwnerId,
        seed: u64,
        options: AcquireOptions,
    ) -> Self {
        match config.config().algorithm {
            Algorithm::Queue | Algorithm::Combined => AnyAcquire::Queue(Box::new(
                Acquire::with_options(now, config, mode, lock_id, owner, seed, options),
            )),
            Algorithm::Baseline => AnyAcquire::Baseline(Box::new(BaselineAcquire::new(
                now,
                config,
                mode,
                lock_id,
                owner,
                seed,
                options.give_up_at,
            ))),
            Algorithm::Bakery => AnyAcquire::Bakery(Box::new(BakeryAcquire::new(
                now,
                config,
                mode,
                lock_id,
                owner,
                seed,
                options.give_up_at,
            ))),
        }
    }

    /// Gives up, deleting whatever may have been written.
    pub fn abandon(&mut self, now: Now) {
        match self {
            AnyAcquire::Queue(machine) => machine.abandon(now),
            AnyAcquire::Baseline(machine) => machine.abandon(now),
            AnyAcquire::Bakery(machine) => machine.abandon(now),
        }
    }

    /// The queue acquisition, if this is one (only it has a seat and a queue head).
    pub fn as_queue(&self) -> Option<&Acquire> {
        match self {
            AnyAcquire::Queue(machine) => Some(machine),
            AnyAcquire::Baseline(_) | AnyAcquire::Bakery(_) => None,
        }
    }
}

impl Machine for AnyAcquire {
    type Outcome = AcquireOutcome;

    fn handle_response(
        &mut self,
        now: Now,
        id: RequestId,
        response: Result<StorageResponse, Error>,
    ) {
        match self {
            AnyAcquire::Queue(machine) => machine.handle_response(now, id, response),
            AnyAcquire::Baseline(machine) => machine.handle_response(now, id, response),
            AnyAcquire::Bakery(machine) => machine.handle_response(now, id, response),
        }
    }

    fn handle_timeout(&mut self, now: Now) {
        match self {
            AnyAcquire::Queue(machine) => machine.handle_timeout(now),
            AnyAcquire::Baseline(machine) => machine.handle_timeout(now),
            AnyAcquire::Bakery(machine) => machine.handle_timeout(now),
        }
    }

    fn poll_request(&mut self) -> Option<Outgoing> {
        match self {
            AnyAcquire::Queue(machine) => machine.poll_request(),
            AnyAcquire::Baseline(machine) => machine.poll_request(),
            AnyAcquire::Bakery(machine) => machine.poll_request(),
        }
    }

    fn poll_timeout(&self) -> Option<MonotonicTime> {
        match self {
            AnyAcquire::Queue(machine) => machine.poll_timeout(),
            AnyAcquire::Baseline(machine) => machine.poll_timeout(),
            AnyAcquire::Bakery(machine) => machine.poll_timeout(),
        }
    }

    fn handle_wake_hint(&mut self, now: Now) {
        match self {
            AnyAcquire::Queue(machine) => machine.handle_wake_hint(now),
            AnyAcquire::Baseline(_) | AnyAcquire::Bakery(_) => {}
        }
    }

    fn poll_wake_hint(&mut self) -> Option<(std::net::SocketAddr, crate::hint::WakeHint)> {
        match self {
            AnyAcquire::Queue(machine) => machine.poll_wake_hint(),
            AnyAcquire::Baseline(_) | AnyAcquire::Bakery(_) => None,
        }
    }

    fn poll_outcome(&mut self) -> Option<AcquireOutcome> {
        match self {
            AnyAcquire::Queue(machine) => machine.poll_outcome(),
            AnyAcquire::Baseline(machine) => machine.poll_outcome(),
            AnyAcquire::Bakery(machine) => machine.poll_outcome(),
        }
    }
}
