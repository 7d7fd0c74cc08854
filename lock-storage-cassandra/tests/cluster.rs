//! The storage checks against a real Apache Cassandra cluster: a local 3-node Cassandra 5.0
//! started by this crate's harness (feature `local-cluster`) and shared by the tests of
//! this file, or the cluster named in `LOCK_CASSANDRA_CONTACT_POINTS` (a ScyllaDB cluster,
//! for example). Each run creates a throwaway keyspace with replication factor 3 (on the
//! local cluster) and drops it afterwards. Without `java` or `mvn` the tests say they were
//! skipped; under `CI=true` that is a failure.

mod checks;

use std::io::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use checks::{check_missing_table_is_reported, wall_clock};
use lock_core::testing::StorageChecks;
use lock_storage_cassandra::local_cluster::test_target;
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, Replication, SchemaConfig,
};

/// Writes past the test harness's output capture.
fn announce(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// The cluster's configuration, or `None` when the test is skipped (the harness said why).
fn cluster_config(test: &str) -> Option<CassandraConfig> {
    let target = test_target(test, 3).unwrap_or_else(|error| panic!("{test}: {error}"))?;
    // The sequence number keeps names apart when tests released together by the
    // cluster's start read the clock in the same microsecond: two tests on one keyspace
    // create it concurrently, and its table can get two ids.
    static KEYSPACES: AtomicU32 = AtomicU32::new(0);
    let keyspace = format!(
        "lock_test_{}_{}_{}",
        std::process::id(),
        wall_clock().as_micros() % 1_000_000_000,
        KEYSPACES.fetch_add(1, Ordering::Relaxed)
    );
    Some(CassandraConfig {
        local_dc: std::env::var("LOCK_CASSANDRA_LOCAL_DC").ok(),
        request_timeout: Duration::from_secs(10),
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor: target.replication_factor,
        })),
        ..CassandraConfig::new(target.contact_points, keyspace)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_conformance_on_a_real_cluster() {
    let Some(config) =
        tokio::task::spawn_blocking(|| cluster_config("storage_conformance_on_a_real_cluster"))
            .await
            .expect("the harness thread")
    else {
        return;
    };
    let keyspace = config.keyspace.clone();
    let storage = CassandraStorage::connect(config.clone())
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let checks =
        StorageChecks::new("cluster", wall_clock()).unwrap_or_else(|error| panic!("{error}"));
    let outcome = match checks
        .run(&storage)
        .await
        .map_err(|failure| failure.to_string())
    {
        Ok(()) => check_missing_table_is_reported(&config).await,
        failed => failed,
    };
    let drop = format!("DROP KEYSPACE IF EXISTS {keyspace}");
    if let Err(error) = storage.session().query_unpaged(drop, ()).await {
        announce(&format!(
            "could not drop the test keyspace {keyspace}: {error}"
        ));
    }
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

#[tokio::test]
async fn connecting_to_nothing_fails_with_a_connect_error() {
    let config = CassandraConfig {
        connection_timeout: Duration::from_secs(2),
        ..CassandraConfig::new(["127.0.0.1:1"], "locks")
    };
    let outcome = tokio::time::timeout(Duration::from_secs(60), CassandraStorage::connect(config))
        .await
        .expect("connect gave up within a minute");
    match outcome {
        Err(error @ CassandraError::Connect { .. }) => {
            let message = error.to_string();
            assert!(message.contains("127.0.0.1:1"), "{message}");
        }
        Err(other) => panic!("expected a connect error, got {other}"),
        Ok(storage) => panic!("connected to nothing: {storage:?}"),
    }
}

#[tokio::test]
async fn invalid_configurations_fail_before_any_connection() {
    let config = CassandraConfig {
        keyspace: "Bad Name".into(),
        ..CassandraConfig::new(["127.0.0.1:1"], "locks")
    };
    match CassandraStorage::connect(config).await {
        Err(CassandraError::InvalidConfig { field, .. }) => assert_eq!(field, "keyspace"),
        other => panic!("expected a config error, got {other:?}"),
    }
}
