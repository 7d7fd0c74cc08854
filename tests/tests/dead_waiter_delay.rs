//! Measures how long a waiter that dies first in line keeps a free lock from the owner
//! behind it, on the memory simulator in virtual time with the default configuration: with
//! the short waiter TTL (the default, 3 s), and with `waiter_ttl` at `lease_ttl` (10 s), which
//! writes and renews queue cells as lock-core did before waiter TTLs existed.
//!
//! `cargo test -p lock-tests --test dead_waiter_delay -- --nocapture` prints both.

use std::time::Duration;

use lock_core::LockConfig;
use lock_tests::backend::MemoryBackend;
use lock_tests::conformance::dead_head_waiter_delay;
use lock_tests::virtual_time;

/// How long both waiters wait before the first dies: several rewrites of their queue cells.
const SETTLE: Duration = Duration::from_secs(2);

#[test]
fn a_dead_head_waiter_costs_the_waiter_ttl_instead_of_the_lease_ttl() {
    let (before, after) = virtual_time(
        "a_dead_head_waiter_costs_the_waiter_ttl_instead_of_the_lease_ttl",
        async {
            let defaults = LockConfig::default();
            let as_before = LockConfig {
                waiter_ttl: defaults.lease_ttl,
                ..LockConfig::default()
            };
            let before = dead_head_waiter_delay(&MemoryBackend::new(7), &as_before, SETTLE).await;
            let after = dead_head_waiter_delay(&MemoryBackend::new(7), &defaults, SETTLE).await;
            (before, after)
        },
    );
    println!(
        "a dead head waiter kept a free lock from the next owner: {before:?} with waiter_ttl = \
         lease_ttl = 10 s (as before), {after:?} with the default waiter_ttl of 3 s"
    );
    assert!(
        after <= Duration::from_secs(3) + Duration::from_millis(300),
        "{after:?}"
    );
    assert!(before > Duration::from_secs(7), "{before:?}");
}
