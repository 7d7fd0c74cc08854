//! The backend over the real wire, against the simulated cluster's CQL endpoint
//! (`cql-endpoint`) on loopback: the storage checks shared with
//! `cluster.rs`, faults injected while the driver is connected, the lock itself, and
//! refusals of everything the endpoint does not serve. Real time throughout: the driver's
//! sockets and timeouts do not follow a paused clock.
#![allow(
    clippy::unwrap_used,
    reason = "a failed unwrap in a test is a failed test"
)]

mod checks;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use checks::{check_missing_table_is_reported, row, wall_clock, write};
use cql_endpoint::CqlServer;
use fair_lock::Locker;
use fair_lock::testing::StorageChecks;
use lock_core::storage::{LockStorage, RowKind, RowRead};
use lock_core::{Error, LockConfig};
use lock_storage_cassandra::scylla::client::session_builder::SessionBuilder;
use lock_storage_cassandra::scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use lock_storage_cassandra::scylla::response::PagingState;
use lock_storage_cassandra::scylla::statement::Statement;
use lock_storage_cassandra::scylla::statement::batch::Batch;
use lock_storage_cassandra::scylla::value::CqlValue;
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, LockConsistency, Replication, SchemaConfig,
    storage_error,
};
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster, ReplicaId};

/// A three-replica cluster whose clocks start at the wall clock, served on loopback.
async fn serve() -> CqlServer {
    let cluster = MemoryCluster::new(ClusterConfig {
        epoch: wall_clock(),
        ..ClusterConfig::default()
    })
    .unwrap();
    CqlServer::start(cluster, "127.0.0.1:0").await.unwrap()
}

fn config(server: &CqlServer) -> CassandraConfig {
    CassandraConfig {
        schema: Some(SchemaConfig::new(Replication::Simple {
            replication_factor: 3,
        })),
        request_timeout: Duration::from_secs(2),
        ..CassandraConfig::new([server.contact_point()], "locks")
    }
}

async fn connect(server: &CqlServer) -> CassandraStorage {
    CassandraStorage::connect(config(server)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_conformance_over_the_cql_endpoint() {
    let server = serve().await;
    // LOCAL_QUORUM with NetworkTopologyStrategy exercises the data-centre check and the
    // other replication class; QUORUM and SimpleStrategy run in the other tests.
    let data_centers = BTreeMap::from([("datacenter1".to_owned(), 3)]);
    let config = CassandraConfig {
        local_dc: Some("datacenter1".into()),
        consistency: LockConsistency::LocalQuorum,
        schema: Some(SchemaConfig::new(Replication::NetworkTopology {
            data_centers,
        })),
        ..config(&server)
    };
    let storage = CassandraStorage::connect(config.clone()).await.unwrap();
    let checks = StorageChecks::new("endpoint", wall_clock()).unwrap();
    checks.run(&storage).await.unwrap();
    check_missing_table_is_reported(&config).await.unwrap();
    // Connecting again finds the schema in place (IF NOT EXISTS).
    let again = CassandraStorage::connect(config).await.unwrap();
    let read = RowRead::first(row(RowKind::Main, "endpoint-read-back"), 10);
    assert_eq!(again.read_row(read.clone()).await.unwrap().len(), 1);
    // A clone shares the session and reads the same.
    let clone = again.clone();
    assert!(std::sync::Arc::ptr_eq(clone.session(), again.session()));
    assert_eq!(clone.read_row(read).await.unwrap().len(), 1);
    // The table has the id the backend created it with.
    let (id,) = again
        .session()
        .query_unpaged(
            "SELECT id FROM system_schema.tables WHERE keyspace_name = 'locks' \
             AND table_name = 'lock_cells'",
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row::<(CqlValue,)>()
        .unwrap();
    let CqlValue::Uuid(id) = id else {
        panic!("the table id is not a UUID: {id:?}");
    };
    let create_table = again.statements().create_table.clone().unwrap_or_default();
    assert!(
        create_table.contains(&format!("id = '{id}'")),
        "{id}: {create_table}"
    );
    eprintln!("what the driver and the backend asked for:");
    for request in server.requests_seen() {
        eprintln!("  {request}");
    }
    // The table's gc_grace_seconds reached the simulated cluster (whose own default is
    // ten days).
    assert_eq!(
        server.cluster().config().gc_grace,
        Duration::from_secs(u64::from(
            lock_storage_cassandra::config::DEFAULT_GC_GRACE_SECONDS
        ))
    );
    server.shutdown().await;
}

/// An application's own session carries the backend as well as one `connect` opens: the
/// schema is created, the storage checks pass, and a bad configuration is refused before
/// anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_on_the_applications_own_session() {
    let server = serve().await;
    let session = SessionBuilder::new()
        .known_node(server.contact_point())
        .build()
        .await
        .unwrap();
    let session = Arc::new(session);
    let bad = CassandraConfig {
        keyspace: "Not A Keyspace".into(),
        ..config(&server)
    };
    let refused = CassandraStorage::from_session(session.clone(), bad).await;
    assert!(
        matches!(refused, Err(CassandraError::InvalidConfig { .. })),
        "{refused:?}"
    );
    let storage = CassandraStorage::from_session(session.clone(), config(&server))
        .await
        .unwrap();
    assert!(
        Arc::ptr_eq(storage.session(), &session),
        "the session is shared"
    );
    let checks = StorageChecks::new("from-session", wall_clock()).unwrap();
    checks.run(&storage).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_injected_while_the_driver_is_connected() {
    let server = serve().await;
    let storage = connect(&server).await;
    let faults = server.cluster().faults();
    let main = row(RowKind::Main, "faults");
    let now = wall_clock().as_micros();
    let read = || RowRead::first(main.clone(), 10);

    // One replica of three down: QUORUM writes and reads still succeed.
    faults.stop_replica(ReplicaId(2)).unwrap();
    storage
        .write_cell(write(&main, "a", b"", now, Some(60)))
        .await
        .unwrap();
    assert_eq!(storage.read_row(read()).await.unwrap().len(), 1);

    // Two down: refused up front, as Unavailable, and nothing is applied.
    faults.stop_replica(ReplicaId(1)).unwrap();
    let error = storage
        .write_cell(write(&main, "b", b"", now, Some(60)))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::StorageUnavailable { .. }), "{error}");
    assert!(
        error.to_string().contains("required: 2, alive: 1"),
        "{error}"
    );
    let error = storage.read_row(read()).await.unwrap_err();
    assert!(matches!(error, Error::StorageUnavailable { .. }), "{error}");
    faults.start_replica(ReplicaId(1)).unwrap();
    faults.start_replica(ReplicaId(2)).unwrap();
    let names: Vec<_> = storage
        .read_row(read())
        .await
        .unwrap()
        .into_iter()
        .map(|cell| cell.column.as_str().to_owned())
        .collect();
    assert_eq!(names, ["a"], "the refused write left nothing");

    // The endpoint's node cut off from two replicas: the write reaches one replica and
    // times out on the server, which the backend reports as an unknown outcome.
    faults
        .set_request_timeout(Duration::from_millis(200))
        .unwrap();
    faults.partition(server.client_id(), ReplicaId(1)).unwrap();
    faults.partition(server.client_id(), ReplicaId(2)).unwrap();
    let error = storage
        .write_cell(write(&main, "c", b"", now, Some(60)))
        .await
        .unwrap_err();
    assert!(error.is_outcome_unknown(), "{error}");
    assert!(
        error.to_string().contains("received: 1, required: 2"),
        "a WriteTimeout frame with its counts: {error}"
    );
    let error = storage.read_row(read()).await.unwrap_err();
    assert!(error.is_outcome_unknown(), "{error}");
    assert!(
        error.to_string().contains("read request in time"),
        "a ReadTimeout frame: {error}"
    );
    faults.heal_all();
    faults.set_request_timeout(Duration::from_secs(2)).unwrap();

    // The timed-out write stayed where it landed (replica 0 only): an ALL read sees it
    // and repairs the others.
    let all = CassandraStorage::connect(CassandraConfig {
        consistency: LockConsistency::All,
        schema: None,
        ..config(&server)
    })
    .await
    .unwrap();
    assert_eq!(all.read_row(read()).await.unwrap().len(), 2);

    // ALL needs every replica: one down is enough to refuse it, QUORUM still reads.
    faults.stop_replica(ReplicaId(0)).unwrap();
    let error = all.read_row(read()).await.unwrap_err();
    assert!(matches!(error, Error::StorageUnavailable { .. }), "{error}");
    assert!(error.to_string().contains("consistency: All"), "{error}");
    assert_eq!(
        storage.read_row(read()).await.unwrap().len(),
        2,
        "QUORUM still reads, and read repair spread the cell"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_side_timeout_leaves_the_outcome_unknown() {
    let server = serve().await;
    let patient = connect(&server).await;
    let impatient = CassandraStorage::connect(CassandraConfig {
        request_timeout: Duration::from_millis(150),
        schema: None,
        ..config(&server)
    })
    .await
    .unwrap();
    let faults = server.cluster().faults();
    let main = row(RowKind::Main, "impatient");
    // Every message between the endpoint's node and the replicas takes 300 ms: a QUORUM
    // write is acknowledged after 600 ms, past the driver's 150 ms but well within the
    // coordinator's 2 s, so the driver gives up on a request the cluster goes on applying.
    faults
        .set_latency(Latency::Fixed(Duration::from_millis(300)))
        .unwrap();
    let error = impatient
        .write_cell(write(
            &main,
            "late",
            b"",
            wall_clock().as_micros(),
            Some(60),
        ))
        .await
        .unwrap_err();
    assert!(error.is_outcome_unknown(), "{error}");
    assert!(
        error.to_string().contains("150"),
        "the driver's timeout: {error}"
    );
    // It lands: exactly why the backend may not report it as failed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    faults.set_latency(Latency::Zero).unwrap();
    let cells = patient.read_row(RowRead::first(main, 10)).await.unwrap();
    assert_eq!(cells.len(), 1, "the timed-out write was applied");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_over_the_wire_never_has_two_holders() {
    const CONTENDERS: usize = 3;
    const ROUNDS: usize = 10;
    let server = serve().await;
    let lock_config = LockConfig {
        lease_ttl: Duration::from_secs(3),
        max_clock_skew: Duration::ZERO,
        request_timeout: Duration::from_millis(400),
        ..LockConfig::default()
    };
    let storage_config = CassandraConfig {
        request_timeout: Duration::from_millis(400),
        ..config(&server)
    };
    storage_config.check_lock_config(&lock_config).unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..CONTENDERS {
        let storage = Arc::new(
            CassandraStorage::connect(storage_config.clone())
                .await
                .unwrap(),
        );
        let locker = Locker::builder(storage)
            .config(lock_config.clone())
            .seed(index as u64)
            .build()
            .unwrap();
        let inside = Arc::clone(&inside);
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let guard = locker.lock("account:42").await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::time::sleep(Duration::from_millis(2)).await;
                assert!(guard.is_held());
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    eprintln!(
        "{} acquisitions by {CONTENDERS} contenders over CQL in {:?}",
        CONTENDERS * ROUNDS,
        started.elapsed()
    );

    // try_lock while another owner holds the lock finds it taken.
    // On a backend whose timeout is the lock's: the locker checks the pair first.
    let storage = || CassandraStorage::connect(storage_config.clone());
    let holder = Locker::new(Arc::new(storage().await.unwrap()), lock_config.clone()).unwrap();
    let other = Locker::new(Arc::new(storage().await.unwrap()), lock_config).unwrap();
    let guard = holder.try_lock("account:7").await.unwrap().unwrap();
    assert!(other.try_lock("account:7").await.unwrap().is_none());
    guard.release().await.unwrap();
    let second = other.try_lock("account:7").await.unwrap();
    assert!(second.is_some(), "free again after the release");
    second.unwrap().release().await.unwrap();
    server.shutdown().await;
}

/// The server's error for `statement`, run unprepared through the driver.
async fn refusal(storage: &CassandraStorage, statement: &str) -> (DbError, String) {
    match storage.session().query_unpaged(statement, ()).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(error, message))) => {
            (error, message)
        }
        Err(other) => panic!("{statement}: not a server error: {other}"),
        Ok(_) => panic!("{statement}: accepted"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_outside_the_served_grammar_get_error_frames() {
    let server = serve().await;
    let storage = connect(&server).await;
    let invalid = [
        (
            "UPDATE locks.lock_cells SET value = 0x00 WHERE lock_id = 'a' AND row_kind = 'main' AND column_name = 'c'",
            "UPDATE",
        ),
        (
            "INSERT INTO locks.lock_cells (lock_id, row_kind, column_name, value) VALUES ('a', 'main', 'c', 0x00) IF NOT EXISTS",
            "IF",
        ),
        (
            "DELETE FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'main' AND column_name = 'c' IF EXISTS",
            "IF",
        ),
        (
            "SELECT * FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'main' ORDER BY column_name DESC",
            "ORDER BY",
        ),
        (
            "SELECT * FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'main' ALLOW FILTERING",
            "ALLOW FILTERING",
        ),
        (
            "SELECT * FROM locks.lock_cells WHERE lock_id = 'a'",
            "row_kind",
        ),
        (
            "SELECT * FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'main' AND column_name > 'b'",
            "column_name >",
        ),
        (
            "SELECT * FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'main' AND value = 0x00",
            "value",
        ),
        (
            "SELECT TTL(value) FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'main'",
            "TTL",
        ),
        (
            "SELECT * FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'nope'",
            "row_kind",
        ),
        (
            "SELECT * FROM locks.other_table WHERE lock_id = 'a' AND row_kind = 'main'",
            "other_table",
        ),
        (
            "SELECT * FROM elsewhere.lock_cells WHERE lock_id = 'a' AND row_kind = 'main'",
            "elsewhere",
        ),
        (
            "DELETE FROM locks.lock_cells WHERE lock_id = 'a' AND row_kind = 'main'",
            "partition",
        ),
        (
            "INSERT INTO locks.lock_cells (lock_id, row_kind, column_name, value) VALUES ('a', 'main', 'c', 0x00) USING TTL -1",
            "TTL",
        ),
        (
            "BEGIN BATCH INSERT INTO locks.lock_cells (lock_id, row_kind, column_name, value) VALUES ('a', 'main', 'c', 0x00) APPLY BATCH",
            "BEGIN",
        ),
        ("CREATE TABLE locks.t2 (a text PRIMARY KEY)", "lock table"),
        (
            "CREATE KEYSPACE other WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            "one keyspace",
        ),
        (
            "SELECT keyspace_name, table_name, partitioner FROM system_schema.scylla_tables",
            "scylla_tables",
        ),
        ("TRUNCATE locks.lock_cells", "TRUNCATE"),
        (
            "CREATE TABLE IF NOT EXISTS locks.lock_cells (lock_id text, row_kind text, \
             column_name text, value blob, PRIMARY KEY ((lock_id, row_kind), column_name)) \
             WITH id = '5a1c395e-b41f-11e5-9f22'",
            "UUID",
        ),
    ];
    for (statement, mentions) in invalid {
        let (error, message) = refusal(&storage, statement).await;
        assert_eq!(error, DbError::Invalid, "{statement}: {message}");
        assert!(message.contains(mentions), "{statement}: {message}");
    }
    for statement in [
        "garbage",
        "SELECT * FROM",
        "SELECT * FROM locks.lock_cells WHERE lock_id = = 'a'",
    ] {
        let (error, message) = refusal(&storage, statement).await;
        assert_eq!(error, DbError::SyntaxError, "{statement}: {message}");
    }
    let (error, _) = refusal(
        &storage,
        "CREATE TABLE locks.lock_cells (lock_id text, row_kind text, column_name text, value blob, \
         PRIMARY KEY ((lock_id, row_kind), column_name))",
    )
    .await;
    assert!(matches!(error, DbError::AlreadyExists { .. }), "{error:?}");

    // A batch frame is refused whole.
    let mut batch = Batch::default();
    batch.append_statement(
        "INSERT INTO locks.lock_cells (lock_id, row_kind, column_name, value) VALUES ('a', 'main', 'c', 0x00)",
    );
    match storage.session().batch(&batch, ((),)).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            message,
        ))) => {
            assert!(message.contains("BATCH"), "{message}");
        }
        other => panic!("a batch gave {other:?}"),
    }

    // The backend maps those frames to the lock-core kinds it documents.
    let error = storage
        .session()
        .query_unpaged(
            "SELECT * FROM locks.other_table WHERE lock_id = 'a' AND row_kind = 'main'",
            (),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        storage_error("read", &error),
        Error::StorageRejected { .. }
    ));
    let error = storage
        .session()
        .query_unpaged("garbage", ())
        .await
        .unwrap_err();
    assert!(matches!(
        storage_error("read", &error),
        Error::StorageRejected { .. }
    ));

    // Literal statements are served, and the connection survived every refusal.
    storage
        .session()
        .query_unpaged(
            "INSERT INTO locks.lock_cells (lock_id, row_kind, column_name, value) \
             VALUES ('literal', 'main', 'c', 0xcafe) USING TIMESTAMP 10 AND TTL 60",
            (),
        )
        .await
        .unwrap();
    let cells = storage
        .read_row(RowRead::first(row(RowKind::Main, "literal"), 10))
        .await
        .unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].value, [0xca, 0xfe]);
    assert_eq!(cells[0].write_timestamp.as_micros(), 10);

    // Results come in one page: one larger than the page size asked for is refused, never
    // cut short (the lock table's schema has four columns).
    let columns = "SELECT column_name FROM system_schema.columns WHERE keyspace_name = 'locks'";
    let paged = |size| Statement::new(columns).with_page_size(size);
    match storage
        .session()
        .query_single_page(paged(3), (), PagingState::start())
        .await
    {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            message,
        ))) => assert!(message.contains("page size 3"), "{message}"),
        other => panic!("four rows in pages of three gave {other:?}"),
    }
    let (page, paging) = storage
        .session()
        .query_single_page(paged(4), (), PagingState::start())
        .await
        .unwrap();
    assert_eq!(page.into_rows_result().unwrap().rows_num(), 4);
    assert!(paging.finished(), "{paging:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_keyspace_empties_the_cluster() {
    let server = serve().await;
    let storage = connect(&server).await;
    let main = row(RowKind::Main, "dropped");
    storage
        .write_cell(write(&main, "a", b"", wall_clock().as_micros(), None))
        .await
        .unwrap();
    storage
        .session()
        .query_unpaged("DROP KEYSPACE IF EXISTS locks", ())
        .await
        .unwrap();
    let error = storage
        .read_row(RowRead::first(main.clone(), 1))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::StorageRejected { .. }), "{error}");
    let storage = connect(&server).await;
    assert!(
        storage
            .read_row(RowRead::first(main, 1))
            .await
            .unwrap()
            .is_empty()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_own_gc_grace_is_checked_against_the_lease() {
    let server = serve().await;
    let created = connect(&server).await;
    assert_eq!(created.table_gc_grace_seconds().await.unwrap(), 60);
    created
        .check_lock_config(&LockConfig::default())
        .await
        .unwrap();
    // A service that did not create the table (no `schema`) has only the table's own
    // gc_grace to go by: a lease it does not cover is refused, with the least that would.
    let joined = CassandraStorage::connect(CassandraConfig {
        schema: None,
        ..config(&server)
    })
    .await
    .unwrap();
    let long_lease = LockConfig {
        lease_ttl: Duration::from_secs(59),
        ..LockConfig::default()
    };
    // The configuration alone cannot tell.
    CassandraConfig {
        schema: None,
        ..config(&server)
    }
    .check_lock_config(&long_lease)
    .unwrap();
    let message = joined
        .check_lock_config(&long_lease)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("the table's gc_grace_seconds` (60)") && message.contains("at least 62"),
        "{message}"
    );
    // A locker makes the same check before its first request, unasked.
    let locker = Locker::new(joined, long_lease).unwrap();
    match locker.try_lock("account:1").await {
        Err(Error::InvalidConfig { field, reason }) => {
            assert_eq!(field, "the table's gc_grace_seconds");
            assert!(reason.contains("at least 62"), "{reason}");
        }
        other => panic!("expected the gc_grace refusal, got {other:?}"),
    }
    server.shutdown().await;
}
