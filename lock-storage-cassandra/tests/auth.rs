//! The backend on a real local Apache Cassandra 5.0 that requires a password
//! (`PasswordAuthenticator`) and checks permissions (`CassandraAuthorizer`): one node,
//! started by this crate's harness for this file alone. Without `java` or `mvn` the test
//! says it was skipped; under `CI=true` that is a failure.

mod checks;

use std::time::Duration;

use checks::{lock_and_release, row, wall_clock, write};
use fair_lock::testing::StorageChecks;
use lock_core::Error;
use lock_core::storage::{LockStorage, RowKind, RowRead};
use lock_local_cluster::{
    DEFAULT_SUPERUSER, LocalCluster, LocalClusterConfig, check_on_own_cluster,
};
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, Credentials, Replication, SchemaConfig,
};

const KEYSPACE: &str = "locks_with_auth";

/// A configuration for [`KEYSPACE`] on `cluster`, logging in as `user` with `password`
/// (no credentials if `user` is empty), creating the schema if `create`.
fn config(cluster: &LocalCluster, user: &str, password: &str, create: bool) -> CassandraConfig {
    CassandraConfig {
        credentials: (!user.is_empty()).then(|| Credentials {
            username: user.to_owned(),
            password: password.to_owned(),
        }),
        request_timeout: Duration::from_secs(10),
        schema: create.then(|| {
            SchemaConfig::new(Replication::Simple {
                replication_factor: 1,
            })
        }),
        ..CassandraConfig::new(cluster.contact_points(), KEYSPACE)
    }
}

/// Connects, expecting a failure; says which.
async fn refused(config: CassandraConfig) -> Result<CassandraError, String> {
    match CassandraStorage::connect(config).await {
        Ok(_) => Err("connected".into()),
        Err(error) => Ok(error),
    }
}

/// Runs `statement` as `storage`'s user.
async fn run(storage: &CassandraStorage, statement: &str) -> Result<(), String> {
    storage
        .session()
        .query_unpaged(statement, ())
        .await
        .map(|_| ())
        .map_err(|error| format!("{statement}: {error}"))
}

async fn check(cluster: &LocalCluster) -> Result<(), String> {
    let (superuser, superuser_password) = DEFAULT_SUPERUSER;
    // No credentials, or a wrong password: refused at connect, as a connect error.
    match refused(config(cluster, "", "", false)).await? {
        CassandraError::Connect { .. } => {}
        other => return Err(format!("no credentials gave {other}")),
    }
    match refused(config(cluster, superuser, "not-the-password", false)).await? {
        CassandraError::Connect { .. } => {}
        other => return Err(format!("a wrong password gave {other}")),
    }
    // The superuser creates the schema, and the storage checks pass through its session.
    let admin = CassandraStorage::connect(config(cluster, superuser, superuser_password, true))
        .await
        .map_err(|error| format!("the superuser's connect: {error}"))?;
    let checks = StorageChecks::new("auth", wall_clock()).map_err(|error| error.to_string())?;
    checks
        .run(&admin)
        .await
        .map_err(|failure| failure.to_string())?;
    // A role that may read and write the keyspace takes a lock without creating anything.
    for statement in [
        "CREATE ROLE locker WITH PASSWORD = 'locker-secret' AND LOGIN = true",
        "GRANT SELECT ON KEYSPACE locks_with_auth TO locker",
        "GRANT MODIFY ON KEYSPACE locks_with_auth TO locker",
        "CREATE ROLE reader WITH PASSWORD = 'reader-secret' AND LOGIN = true",
        "GRANT SELECT ON KEYSPACE locks_with_auth TO reader",
    ] {
        run(&admin, statement).await?;
    }
    lock_and_release(
        config(cluster, "locker", "locker-secret", false),
        "with-auth",
        "the locker role",
    )
    .await?;
    // Without the permission to create keyspaces, asking for the schema is a schema error.
    match refused(config(cluster, "locker", "locker-secret", true)).await? {
        CassandraError::Schema { .. } => {}
        other => return Err(format!("schema creation without permission gave {other}")),
    }
    // A role that may only read connects, but its writes are rejected as such.
    let reader = CassandraStorage::connect(config(cluster, "reader", "reader-secret", false))
        .await
        .map_err(|error| format!("the reader role's connect: {error}"))?;
    let main = row(RowKind::Main, "with-auth");
    reader
        .read_row(RowRead::first(main.clone(), 1))
        .await
        .map_err(|error| format!("a read as the reader role: {error}"))?;
    match reader
        .write_cell(write(&main, "reader", b"", wall_clock().as_micros(), None))
        .await
    {
        Err(Error::StorageRejected { .. }) => Ok(()),
        Err(other) => Err(format!("a write as the reader role gave {other}")),
        Ok(()) => Err("a write as the reader role was accepted".into()),
    }
}

/// A cluster that requires a password: no credentials and a wrong password fail at
/// connect with a typed error; the superuser creates the schema and passes the storage
/// checks; a role with `SELECT` and `MODIFY` on the keyspace takes and releases a lock
/// without creating anything, and is refused schema creation with a schema error; a role
/// that may only read has its writes rejected as `StorageRejected`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_requires_a_password() {
    let test = "a_cluster_that_requires_a_password";
    let config = LocalClusterConfig {
        password_authentication: true,
        ..LocalClusterConfig::for_tests(1)
    };
    if let Err(failure) =
        check_on_own_cluster(test, config, async |cluster| check(cluster).await).await
    {
        panic!("{failure}");
    }
}
