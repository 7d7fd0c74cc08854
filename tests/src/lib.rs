//! The fair lock's trust suite: one conformance suite for every storage backend, and
//! property tests on the deterministic memory cluster with injected clock skew and faults.
//!
//! * [`conformance`] holds the scenarios, each a `pub async fn` over `&impl`
//!   [`backend::Backend`]; [`conformance_suite!`] instantiates all of them as `#[test]`s for
//!   one backend. `tests/conformance_memory.rs` runs them on the memory simulator in
//!   virtual time, `tests/conformance_cql.rs` on `CassandraStorage` through the real `scylla`
//!   driver against the simulator's CQL endpoint on loopback (both always), and
//!   `tests/conformance_cassandra.rs` on a real local 3-node Apache Cassandra started by
//!   `lock-storage-cassandra`'s harness (or the cluster in `LOCK_CASSANDRA_CONTACT_POINTS`).
//! * [`gate`] puts a switch in front of any backend's client to pause it, crash it or make
//!   it refuse, so client faults work the same everywhere.
//! * [`sim`] plays a generated [`sim::Schedule`] on the memory cluster in virtual time;
//!   [`strategies`] generates schedules; [`history`] records critical sections in true time
//!   and checks them; [`bounds`] derives and checks the acquisition-time and bypass bounds,
//!   and the behaviour beyond the assumptions.
//!
//! # Replay
//!
//! A schedule fixes the cluster's seed (latencies), the lockers' seeds (owner ids, jitter)
//! and every fault time, and runs on a current-thread runtime with Tokio's clock paused, so
//! a failing case that proptest records in `proptest-regressions/` replays the same run.
//! Nothing in the run depends on Tokio's own randomness: the driver (fair-lock) and time
//! service use biased `select!`s, and the [`gate`] wakes paused requests through a `Notify`
//! rather than a `watch` channel (which wakes its waiters in a random order). The
//! determinism tests in `tests/properties.rs` run schedules twice, with and without the
//! time service, and compare every request's timing.

pub mod backend;
pub mod bounds;
pub mod conformance;
pub mod differential;
pub mod gate;
pub mod history;
pub mod sim;
pub mod strategies;
pub mod work_queue;

use std::future::Future;

/// Runs the test `test`'s `future` on a current-thread runtime with Tokio's clock paused
/// (virtual time), under lock-core's watchdog: a spin fails the test, naming it.
pub fn virtual_time<F: Future>(test: &str, future: F) -> F::Output {
    fair_lock::testing::in_virtual_time(test, future)
}

/// Runs the test `test`'s `future` on a multi-thread runtime in real time, with I/O (for
/// real clusters).
pub fn real_time<F: Future>(test: &str, future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("{test}: cannot build a runtime: {error}"))
        .block_on(future)
}

/// How long one conformance scenario may run (in virtual time, on the memory simulator,
/// this costs nothing; in real time every scenario takes seconds).
pub const SCENARIO_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs one scenario, failing (instead of hanging) if a backend never delivers what the
/// scenario waits for, such as a cell that never expires.
pub async fn within_limit<F: Future<Output = ()>>(scenario: &str, future: F) {
    if tokio::time::timeout(SCENARIO_LIMIT, future).await.is_err() {
        panic!("{scenario} did not finish within {SCENARIO_LIMIT:?}");
    }
}

/// Instantiates every conformance scenario as a `#[test]` for one backend; each fails if
/// it does not finish within [`SCENARIO_LIMIT`].
///
/// `$runtime` is [`virtual_time`] or [`real_time`]; `$backend` is an expression that,
/// called with the scenario's name, returns a future of `Option<impl Backend>` (`None`:
/// the backend is not available here, and the test passes after saying so):
///
/// ```ignore
/// lock_tests::conformance_suite!(virtual_time, |_name| async {
///     Some(lock_tests::backend::MemoryBackend::new(7))
/// });
/// ```
///
/// With `bakery,` first, the scenarios that apply to the bakery algorithm run on the same
/// backend wrapped in [`backend::Bakery`] (each locker its own client id); invoke it in a
/// module of its own, since the tests are named after the scenarios:
///
/// ```ignore
/// mod bakery {
///     lock_tests::conformance_suite!(bakery, virtual_time, |_name| async {
///         Some(lock_tests::backend::MemoryBackend::new(7))
///     });
/// }
/// ```
///
/// With `no_wait_in_main_row,` first, every scenario but the storage checks runs with
/// [`lock_core::LockConfig::wait_in_main_row`] off ([`backend::WithoutWaitInMainRow`]; it is
/// on by default), likewise in a module of its own.
#[macro_export]
macro_rules! conformance_suite {
    (bakery, $runtime:ident, $backend:expr) => {
        $crate::conformance_suite!(@each $runtime, $backend, $crate::backend::Bakery::new, [
            one_owner_at_a_time,
            lock_ids_are_independent,
            try_lock_while_held_returns_none,
            mandatory_lock_waits_then_gets_it,
            lease_kept_alive_across_many_ttls,
            lease_expires_after_holder_crash,
            release_frees_at_once,
            dropping_a_guard_releases,
            cancelled_acquire_leaves_no_stuck_entry,
            many_locks_many_owners,
            bad_lock_ids_rejected,
            lock_timeout_gives_up_and_leaves_no_entry,
            lost_never_fires_after_a_clean_release,
            concurrent_try_locks_admit_at_most_one,
            // Not registered for the bakery, each for a reason:
            // * storage_semantics checks the storage client, whatever the algorithm; the
            //   backend's plain suite runs it.
            // * crashed_waiter_entry_expires_after_ttl and
            //   dead_head_waiter_blocks_at_most_the_waiter_ttl bound a dead waiter by the
            //   waiter TTL of the queue's cells; the bakery has no queue and no waiter TTL
            //   (a waiter's number carries lease_ttl, docs/algorithm.md section "The bakery baseline: Leases"), and
            //   lease_expires_after_holder_crash already covers a dead client's cells
            //   expiring.
            // * fencing_tokens_grow_with_each_holder: the bakery takes no fencing tokens
            //   (its configuration refuses fencing).
        ]);
    };
    (no_wait_in_main_row, $runtime:ident, $backend:expr) => {
        // storage_semantics checks the storage client, whatever the lock does; the
        // backend's plain suite runs it.
        $crate::conformance_suite!(@queue $runtime, $backend, $crate::backend::WithoutWaitInMainRow::new, []);
    };
    ($runtime:ident, $backend:expr) => {
        $crate::conformance_suite!(@queue $runtime, $backend, ::std::convert::identity, [
            storage_semantics,
        ]);
    };
    (@queue $runtime:ident, $backend:expr, $wrap:expr, [$($extra:ident),* $(,)?]) => {
        $crate::conformance_suite!(@each $runtime, $backend, $wrap, [
            $($extra,)*
            one_owner_at_a_time,
            lock_ids_are_independent,
            try_lock_while_held_returns_none,
            mandatory_lock_waits_then_gets_it,
            lease_kept_alive_across_many_ttls,
            lease_expires_after_holder_crash,
            release_frees_at_once,
            dropping_a_guard_releases,
            cancelled_acquire_leaves_no_stuck_entry,
            crashed_waiter_entry_expires_after_ttl,
            dead_head_waiter_blocks_at_most_the_waiter_ttl,
            many_locks_many_owners,
            bad_lock_ids_rejected,
            lock_timeout_gives_up_and_leaves_no_entry,
            fencing_tokens_grow_with_each_holder,
            lost_never_fires_after_a_clean_release,
            concurrent_try_locks_admit_at_most_one,
            a_new_lockers_first_read_starts_at_the_holders_head,
            a_lingering_lock_is_retaken_and_yields_to_a_waiter,
        ]);
    };
    (@each $runtime:ident, $backend:expr, $wrap:expr, [$($scenario:ident),* $(,)?]) => {
        $(
            #[test]
            fn $scenario() {
                $crate::$runtime(stringify!($scenario), async {
                    let make = $backend;
                    let Some(backend) = make(stringify!($scenario)).await else {
                        return;
                    };
                    let backend = $wrap(backend);
                    $crate::within_limit(
                        stringify!($scenario),
                        $crate::conformance::$scenario(&backend),
                    )
                    .await;
                    $crate::backend::Backend::cleanup(&backend).await;
                });
            }
        )*
    };
}
