//! The storage checks against a real Apache Cassandra cluster: a local 3-node Cassandra 5.0
//! started by the harness (lock-local-cluster) and shared by the tests of
//! this file, or the cluster named in `LOCK_CASSANDRA_CONTACT_POINTS` (a ScyllaDB cluster,
//! for example). Each run creates a throwaway keyspace with replication factor 3 (on the
//! local cluster) and drops it afterwards. Without `java` or `mvn` the tests say they were
//! skipped; under `CI=true` that is a failure.

mod checks;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use checks::{check_missing_table_is_reported, row, wall_clock, write};
use fair_lock::testing::StorageChecks;
use lock_core::storage::{LockStorage, RowKey, RowKind, RowRead};
use lock_local_cluster::test_target;
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, Replication, SchemaConfig, Statements,
};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::Node;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::Statement;
use scylla::value::CqlValue;

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

/// Services deployed together each connect with schema creation on, and each one's
/// `CREATE TABLE IF NOT EXISTS` may reach a different coordinator before the others'
/// have spread. The test sends the table's creation to every node at once, then connects
/// several services at once, and they must end with one table: one id on every node, and
/// every cell any service wrote visible to all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_creating_one_new_keyspace_at_once_agree_on_its_table() {
    const SERVICES: usize = 4;
    let test = "services_creating_one_new_keyspace_at_once_agree_on_its_table";
    let Some(config) = tokio::task::spawn_blocking(|| cluster_config(test))
        .await
        .expect("the harness thread")
    else {
        return;
    };
    let session = SessionBuilder::new()
        .known_nodes(&config.contact_points)
        .auto_await_schema_agreement(false)
        .build()
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let create_keyspace = Statements::new(&config)
        .unwrap_or_else(|error| panic!("{error}"))
        .create_keyspace
        .expect("schema creation is on");
    session
        .query_unpaged(create_keyspace, ())
        .await
        .unwrap_or_else(|error| panic!("creating the keyspace: {error}"));
    session
        .await_schema_agreement()
        .await
        .unwrap_or_else(|error| panic!("waiting for schema agreement: {error}"));
    // One creation at a time on every node usually makes a table per node; a few rounds
    // make it near certain, were the id not fixed.
    let mut created = Ok(());
    for round in 0..3 {
        let table = CassandraConfig {
            table: format!("{}_{round}", config.table),
            ..config.clone()
        };
        let statements = Statements::new(&table).unwrap_or_else(|error| panic!("{error}"));
        let create_table = statements.create_table.expect("schema creation is on");
        let creations: Vec<_> = session
            .get_cluster_state()
            .get_nodes_info()
            .iter()
            .map(|node| session.query_unpaged(on_node(node, &create_table), ()))
            .collect();
        for outcome in futures::future::join_all(creations).await {
            outcome.unwrap_or_else(|error| panic!("creating the table: {error}"));
        }
        created = created.and(one_table_id(&table, &session).await);
    }
    let connects: Vec<_> = (0..SERVICES)
        .map(|_| tokio::spawn(CassandraStorage::connect(config.clone())))
        .collect();
    let mut services = Vec::new();
    for connect in connects {
        let storage = connect.await.expect("the connect task");
        services.push(storage.unwrap_or_else(|error| panic!("connect: {error}")));
    }
    let outcome = match created {
        Ok(()) => check_one_table(&config, &session, &services).await,
        failed => failed,
    };
    let drop = format!("DROP KEYSPACE IF EXISTS {}", config.keyspace);
    if let Err(error) = session.query_unpaged(drop, ()).await {
        announce(&format!(
            "could not drop the test keyspace {}: {error}",
            config.keyspace
        ));
    }
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// Asks every node for the table's id: each must have the table, under one id. Two ids
/// fail at once; a node without the table yet (the creations are still spreading, as seen
/// once in CI) is asked again, for up to ten seconds.
async fn one_table_id(config: &CassandraConfig, session: &Session) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let ids = table_ids(config, session).await?;
        let mut known = ids.iter().filter_map(|(_, id)| id.as_ref());
        let first = known.next();
        if known.any(|id| Some(id) != first) {
            return Err(format!("the nodes disagree on the table: {ids:?}"));
        }
        if ids.iter().all(|(_, id)| id.is_some()) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("a node still lacks the table after 10 s: {ids:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every node's id for the table, none where a node does not have it.
async fn table_ids(
    config: &CassandraConfig,
    session: &Session,
) -> Result<Vec<(String, Option<CqlValue>)>, String> {
    let mut ids = Vec::new();
    for node in session.get_cluster_state().get_nodes_info() {
        let query = on_node(
            node,
            "SELECT id FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?",
        );
        let rows = session
            .query_unpaged(query, (&config.keyspace, &config.table))
            .await
            .map_err(|error| format!("reading the table id from {}: {error}", node.address))?
            .into_rows_result()
            .map_err(|error| format!("the table id from {}: {error}", node.address))?;
        let id: Option<(CqlValue,)> = rows
            .maybe_first_row()
            .map_err(|error| format!("the table id from {}: {error}", node.address))?;
        ids.push((node.address.to_string(), id.map(|(id,)| id)));
    }
    Ok(ids)
}

/// `text` as a statement sent to `node` alone.
fn on_node(node: &Arc<Node>, text: &str) -> Statement {
    let target = SingleTargetLoadBalancingPolicy::new(NodeIdentifier::Node(node.clone()), None);
    let profile = ExecutionProfile::builder()
        .load_balancing_policy(target)
        .build()
        .into_handle();
    let mut statement = Statement::new(text);
    statement.set_execution_profile_handle(Some(profile));
    statement
}

/// Has each service write a cell, waits for the nodes to agree on the schema, asks every
/// node for the table's id, reads every cell back through each service, and drops and
/// creates the table again.
async fn check_one_table(
    config: &CassandraConfig,
    session: &Session,
    services: &[CassandraStorage],
) -> Result<(), String> {
    let queue_row = row(RowKind::Queue, "services-at-once");
    for (service, storage) in services.iter().enumerate() {
        let cell = write(&queue_row, &format!("service-{service}"), b"here", 1, None);
        storage
            .write_cell(cell)
            .await
            .map_err(|error| format!("service {service} writing: {error}"))?;
    }
    session
        .await_schema_agreement()
        .await
        .map_err(|error| format!("waiting for schema agreement: {error}"))?;
    one_table_id(config, session).await?;
    for (service, storage) in services.iter().enumerate() {
        let cells = storage
            .read_row(RowRead::first(queue_row.clone(), 100))
            .await
            .map_err(|error| format!("service {service} reading: {error}"))?;
        if cells.len() != services.len() {
            return Err(format!(
                "service {service} read {} of the {} cells written",
                cells.len(),
                services.len()
            ));
        }
    }
    dropped_table_is_created_again(config, session, &queue_row).await
}

/// A table dropped (to start afresh, say) is created again under the same id, empty.
async fn dropped_table_is_created_again(
    config: &CassandraConfig,
    session: &Session,
    queue_row: &RowKey,
) -> Result<(), String> {
    let drop = format!("DROP TABLE {}.{}", config.keyspace, config.table);
    session
        .query_unpaged(drop, ())
        .await
        .map_err(|error| format!("dropping the table: {error}"))?;
    session
        .await_schema_agreement()
        .await
        .map_err(|error| format!("waiting for schema agreement: {error}"))?;
    let storage = CassandraStorage::connect(config.clone())
        .await
        .map_err(|error| format!("connecting after the drop: {error}"))?;
    let cell = write(queue_row, "after-the-drop", b"here", 2, None);
    storage
        .write_cell(cell)
        .await
        .map_err(|error| format!("writing after the drop: {error}"))?;
    let cells = storage
        .read_row(RowRead::first(queue_row.clone(), 100))
        .await
        .map_err(|error| format!("reading after the drop: {error}"))?;
    if cells.len() != 1 {
        return Err(format!("read {} cells after the drop, not 1", cells.len()));
    }
    one_table_id(config, session).await
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
