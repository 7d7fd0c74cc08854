//! The conformance suite on a real cluster, in real time: a local 3-node Apache Cassandra
//! (5.0.6, or the release `LOCK_CASSANDRA_VERSION` names: 4.0.x, 4.1.x, 5.0.x) started by
//! `lock-storage-cassandra`'s harness and shared by every test of this file
//! (one keyspace, replication factor 3, each test with lock ids of its own), or the
//! cluster named in `LOCK_CASSANDRA_CONTACT_POINTS` (a keyspace per test, dropped when
//! done). Without `java` or `mvn` each test says it was
//! skipped; under `CI=true` that is a failure. The same suite runs against
//! `CassandraStorage` over the simulator's CQL endpoint in `conformance_cql.rs`. Module
//! `bakery` runs the scenarios that apply to the bakery algorithm, and module
//! `no_wait_in_main_row` the queue's with waiters that never wait in the main row (they do by
//! default).

lock_tests::conformance_suite!(real_time, |scenario: &'static str| async move {
    lock_tests::backend::CassandraBackend::real(scenario).await
});

/// The bakery algorithm on the same cluster, every locker with its own client id.
mod bakery {
    lock_tests::conformance_suite!(bakery, real_time, |scenario: &'static str| async move {
        lock_tests::backend::CassandraBackend::real(scenario).await
    });
}

/// The queue algorithm with waiters that never wait in the main row, on the same cluster.
mod no_wait_in_main_row {
    lock_tests::conformance_suite!(
        no_wait_in_main_row,
        real_time,
        |scenario: &'static str| async move {
            lock_tests::backend::CassandraBackend::real(scenario).await
        }
    );
}
