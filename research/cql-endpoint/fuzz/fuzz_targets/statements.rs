//! The CQL statement parser, and the parser of a table's `id` property, on arbitrary
//! text: never a panic, never a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = cql_endpoint::fuzzing::parse_statement(text);
        let _ = cql_endpoint::fuzzing::parse_table_id(text);
    }
});
