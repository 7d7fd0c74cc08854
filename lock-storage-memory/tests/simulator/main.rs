//! Integration tests of the simulator through its public interface, on virtual time.

#![allow(
    clippy::unwrap_used,
    reason = "a failed unwrap in a test helper is a failed test"
)]

mod common;
mod determinism;
mod faults;
mod semantics;
