//! The conformance suite on a real Cassandra or ScyllaDB cluster, in real time. Runs only
//! when `LOCK_CASSANDRA_CONTACT_POINTS` is set (each test then creates and drops a
//! throwaway keyspace); otherwise each test says it was skipped, and passes. The same
//! suite always runs against `CassandraStorage` over the simulator's CQL endpoint, in
//! `conformance_cql.rs`.

lock_tests::conformance_suite!(real_time, |scenario: &'static str| async move {
    lock_tests::backend::CassandraBackend::from_env(scenario).await
});
