//! The conformance suite on the memory simulator, in virtual time: the queue algorithm's
//! (the default configuration), and in `bakery` the scenarios that apply to the bakery.

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
