//! The conformance suite on the memory simulator, in virtual time: the queue algorithm's
//! (the default configuration, in which waiters wait in the main row), in `bakery` the scenarios that apply to the bakery, and in
//! `no_wait_in_main_row` the queue's again with waiters that never wait in the main row.

lock_tests::conformance_suite!(virtual_time, |scenario: &'static str| async move {
    // A different latency seed per scenario, fixed so that a failure replays.
    let seed = scenario.bytes().fold(7u64, |hash, byte| {
        hash.wrapping_mul(31).wrapping_add(u64::from(byte))
    });
    Some(lock_tests::backend::MemoryBackend::new(seed))
});

/// The bakery algorithm on the same backend, every locker with its own client id.
mod bakery {
    lock_tests::conformance_suite!(bakery, virtual_time, |scenario: &'static str| async move {
        let seed = scenario.bytes().fold(11u64, |hash, byte| {
            hash.wrapping_mul(31).wrapping_add(u64::from(byte))
        });
        Some(lock_tests::backend::MemoryBackend::new(seed))
    });
}

/// The queue algorithm with waiters that never wait in the main row, on the same backend.
mod no_wait_in_main_row {
    lock_tests::conformance_suite!(
        no_wait_in_main_row,
        virtual_time,
        |scenario: &'static str| async move {
            let seed = scenario.bytes().fold(13u64, |hash, byte| {
                hash.wrapping_mul(31).wrapping_add(u64::from(byte))
            });
            Some(lock_tests::backend::MemoryBackend::new(seed))
        }
    );
}
