//! What every recipe needs from the runtime, on lock-core's public API: pauses on the
//! locker's clock, single storage requests with the lock's timeout, a seeded generator, and
//! the check that a Tokio runtime is running.

use std::time::Duration;

use lock_core::storage::{StorageRequest, StorageResponse};
use lock_core::{Clock, LockStorage, Locker};

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

/// SplitMix64, a seeded generator whose state is one `u64`: seeded from the locker
/// ([`Locker::next_seed`]), it makes a simulation with seeded lockers replay exactly.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// A uniform value in `0..bound` (0 when `bound` is 0).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        let scaled = (u128::from(self.next_u64()) * u128::from(bound)) >> 64;
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_below_a_bound_stay_below_it() {
        let mut random = SplitMix64::new(7);
        assert_eq!(random.below(0), 0);
        for bound in [1, 2, 3, 1000, u64::MAX] {
            for _ in 0..100 {
                assert!(random.below(bound) < bound);
            }
        }
        let (mut run, mut replay) = (SplitMix64::new(7), SplitMix64::new(7));
        assert_eq!(run.next_u64(), replay.next_u64(), "seeded: it replays");
    }
}
