//! What every recipe needs from the runtime, on lock-core's public API: pauses on the
//! locker's clock, single storage requests with the lock's timeout, a seeded generator, and
//! the check that a Tokio runtime is running.

use std::time::Duration;

use fair_lock::{Clock, Locker};
use lock_core::LockStorage;
use lock_core::storage::{StorageRequest, StorageResponse};

use crate::Error;

/// Sleeps until `clock` has advanced by `duration`: on Tokio's timer, for as long as the
/// clock says that takes (a simulation may dilate its time, see
/// [`Clock::timer_duration`]).
pub(crate) async fn sleep(clock: &dyn Clock, duration: Duration) {
    tokio::time::sleep(clock.timer_duration(duration)).await;
}

/// [`lock_core::Error::NoRuntime`] naming `what` unless a Tokio runtime is running:
/// checked by the recipes' async entry points before they set a timer.
pub(crate) fn require_runtime(what: &'static str) -> Result<(), Error> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => Ok(()),
        Err(_) => Err(Error::Lock(lock_core::Error::NoRuntime(what))),
    }
}

/// Sends one request as the locker sends its own: an answer that does not come within
/// the lock's `request_timeout` (on the locker's clock) is
/// [`lock_core::Error::StorageOutcomeUnknown`].
pub(crate) async fn send<S: LockStorage>(
    locker: &Locker<S>,
    request: StorageRequest,
) -> Result<StorageResponse, lock_core::Error> {
    let timeout = locker.config().config().request_timeout;
    // Described only if it times out.
    let (verb, row) = (request.verb(), request.row().clone());
    let answer = locker.storage().execute(request);
    match tokio::time::timeout(locker.clock().timer_duration(timeout), answer).await {
        Ok(answer) => answer,
        Err(_) => Err(lock_core::Error::outcome_unknown(
            format!("{verb} {row}"),
            format!("no answer within request_timeout ({timeout:?})"),
        )),
    }
}

/// A uniform value in `0..bound` from the random word `random` (0 when `bound` is 0).
/// Draw `random` from [`Locker::next_seed`], so that a simulation with seeded lockers
/// replays exactly.
pub(crate) fn below(random: u64, bound: u64) -> u64 {
    let scaled = (u128::from(random) * u128::from(bound)) >> 64;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_below_a_bound_stay_below_it() {
        assert_eq!(below(u64::MAX, 0), 0);
        for bound in [1, 2, 3, 1000, u64::MAX] {
            for random in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
                assert!(below(random, bound) < bound, "{random} below {bound}");
            }
        }
        assert_eq!(below(u64::MAX / 2, 1000), 499);
    }
}
