//! The conformance suite on a real local 3-node Apache Cassandra 4.1 (replication factor 3,
//! `QUORUM`), whatever `LOCK_CASSANDRA_VERSION` says, on the Java 11 runtime the harness
//! fetches: the release line most production clusters run, beside the 5.0 that
//! `conformance_cassandra.rs` runs. Without `java`, `mvn` or `python3 -m pip` each test
//! says it was skipped; under `CI=true` that is a failure.

/// The release this binary runs on.
const RELEASE: &str = "4.1.10";

lock_tests::conformance_suite!(real_time, |scenario: &'static str| async move {
    lock_tests::backend::CassandraBackend::real_release(scenario, RELEASE).await
});
