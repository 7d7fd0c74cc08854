//! The storage checks against a real Cassandra or ScyllaDB cluster.
//!
//! Set `LOCK_CASSANDRA_CONTACT_POINTS` to a comma-separated list of `host:port` to run
//! them; each run creates a throwaway keyspace (`SimpleStrategy`, replication factor
//! `LOCK_CASSANDRA_REPLICATION_FACTOR`, default 1) and drops it afterwards. Set
//! `LOCK_CASSANDRA_LOCAL_DC` if the cluster's data centre should be preferred. Without the
//! contact points the cluster checks report that they were skipped, and pass.

mod checks;

use std::io::Write as _;
use std::time::Duration;

use checks::{check_missing_table_is_reported, run_checks, wall_clock};
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, Replication, SchemaConfig,
};

const CONTACT_POINTS: &str = "LOCK_CASSANDRA_CONTACT_POINTS";

/// Writes past the test harness's output capture, so that a skip is visible in every run.
fn announce(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// The cluster's configuration, or `None` (and a note) when no cluster is configured.
fn cluster_config(test: &str) -> Option<CassandraConfig> {
    let points: Vec<String> = std::env::var(CONTACT_POINTS)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|point| !point.is_empty())
        .map(str::to_owned)
        .collect();
    if points.is_empty() {
        announce(&format!(
            "{test}: skipped, no cluster (set {CONTACT_POINTS}=host:port[,host:port] to run it)"
        ));
        return None;
    }
    let replication_factor = std::env::var("LOCK_CASSANDRA_REPLICATION_FACTOR")
        .ok()
        .and_then(|factor| factor.parse().ok())
        .unwrap_or(1);
    let keyspace = format!(
        "lock_test_{}_{}",
        std::process::id(),
        wall_clock().as_micros() % 1_000_000_000
    );
    Some(CassandraConfig {
        local_dc: std::env::var("LOCK_CASSANDRA_LOCAL_DC").ok(),
        request_timeout: Duration::from_secs(10),
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor,
        })),
        ..CassandraConfig::new(points, keyspace)
    })
}

#[tokio::test]
async fn storage_conformance_on_a_real_cluster() {
    let Some(config) = cluster_config("storage_conformance_on_a_real_cluster") else {
        return;
    };
    let keyspace = config.keyspace.clone();
    let storage = CassandraStorage::connect(config.clone())
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let outcome = match run_checks(&storage).await {
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
