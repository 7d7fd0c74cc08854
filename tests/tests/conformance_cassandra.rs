//! The conformance suite on a real Cassandra or ScyllaDB cluster, in real time. Runs only
//! when `LOCK_CASSANDRA_CONTACT_POINTS` is set (each test then creates and drops a
//! throwaway keyspace); otherwise each test says it was skipped, and passes.

lock_tests::conformance_suite!(real_time, |scenario: &'static str| async move {
    lock_tests::backend::CassandraBackend::from_env(scenario).await
});
