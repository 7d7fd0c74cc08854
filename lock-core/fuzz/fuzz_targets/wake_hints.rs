//! What a wake-up hint listener and a queue read parse from the network: a datagram as a
//! hint, and a queue cell's value as a listener's address. Never a panic, never a hang;
//! and a datagram that parses encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lock_core::hint::{self, WakeHint};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(wake) = WakeHint::decode(bytes) {
        assert_eq!(wake.encode(), bytes);
    }
    if let Some(listener) = hint::listener_in_queue_value(bytes) {
        assert_eq!(
            hint::listener_in_queue_value(&hint::queue_value(listener)),
            Some(listener)
        );
    }
});
