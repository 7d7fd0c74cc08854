//! The CQL frame decoder on arbitrary bytes: never a panic, never a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = cql_endpoint::fuzzing::decode_frames(bytes);
});
