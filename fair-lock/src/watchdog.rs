//! A watchdog for tests that drive the machines or the driver on Tokio's paused clock: a
//! test whose code under test loops forever fails in bounded time, naming itself, instead
//! of spinning until something outside kills it.
//!
//! Two limits, since a loop can spin in two ways:
//! * one that keeps awaiting timers (a waiter that polls forever) advances the paused clock
//!   at full speed: [`VIRTUAL_LIMIT`] of virtual time ends it with a panic, a failure of
//!   that test alone;
//! * one that never awaits cannot be interrupted from inside its thread: [`WALL_LIMIT`] of
//!   wall time ends the whole test binary with a message naming the test.

use std::future::Future;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// The virtual time a test may run. The longest test of the driver sleeps an hour; a waiter
/// that never gets the lock, polling and renewing, passes this in seconds of wall time.
pub const VIRTUAL_LIMIT: Duration = Duration::from_secs(2 * 3600);

/// The wall time a test may run. A test on the paused clock takes well under a second of
/// CPU; the limit leaves room for a 2-core machine loaded several times over, and is still
/// far below the hour a CI run would otherwise lose to one spinning test.
pub const WALL_LIMIT: Duration = Duration::from_secs(300);

/// Runs `future` on a fresh current-thread runtime whose clock starts paused (what
/// `#[tokio::test(start_paused = true)]` builds), under both limits. `test` names the test
/// in the failure.
///
/// # Panics
///
/// If the runtime cannot be built, or if `future` is still running after
/// [`VIRTUAL_LIMIT`] of virtual time. After [`WALL_LIMIT`] of wall time the process aborts.
pub fn in_virtual_time<F: Future>(test: &str, future: F) -> F::Output {
    let (finished, watched) = mpsc::channel::<()>();
    let name = test.to_owned();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = watched.recv_timeout(WALL_LIMIT) {
            eprintln!(
                "watchdog: test {name} was still running after {WALL_LIMIT:?} of wall time: the \
                 code under it spins without awaiting; aborting the test binary"
            );
            std::process::abort();
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap_or_else(|error| panic!("{test}: cannot build a runtime: {error}"));
    let outcome = runtime.block_on(async { tokio::time::timeout(VIRTUAL_LIMIT, future).await });
    drop(finished);
    outcome.unwrap_or_else(|_| {
        panic!(
            "watchdog: test {test} was still running after {VIRTUAL_LIMIT:?} of virtual time: \
             the code under it loops without end"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_that_finishes_returns_its_value() {
        let value = in_virtual_time("finishes", async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            7
        });
        assert_eq!(value, 7);
    }

    #[test]
    #[should_panic(expected = "watchdog: test polls_forever was still running after")]
    fn a_test_that_polls_forever_fails_after_the_virtual_limit() {
        in_virtual_time("polls_forever", async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
}
