//! What libfaketime does to a Cassandra node: starts a local 3-node cluster with node 1's
//! JVM under libfaketime, its wall clock `--offset` seconds off (3 by default), and shows
//! each node's clock (`currentTimestamp()` through it as coordinator), how much TTL each
//! coordinator sees left on a cell written through each, when a 5 s TTL cell vanishes
//! through each, and that rewriting the offset file moves the running node's clock.
//!
//! ```text
//! cargo run -p lock-jepsen --example node_clock -- [OFFSET_SECONDS]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lock_jepsen::BoxError;
use lock_jepsen::clocks::{self, ClockFile, Reread};
use lock_local_cluster::{LocalCluster, LocalClusterConfig};
use lock_storage_cassandra::scylla::client::session::Session;
use lock_storage_cassandra::scylla::client::session_builder::SessionBuilder;
use lock_storage_cassandra::scylla::policies::host_filter::AllowListHostFilter;
use lock_storage_cassandra::scylla::statement::{Consistency, Statement};

const NODES: usize = 3;

fn main() -> Result<(), BoxError> {
    let offset: f64 = match std::env::args().nth(1) {
        Some(text) => text
            .parse()
            .map_err(|error| format!("OFFSET_SECONDS {text:?}: {error}"))?,
        None => 3.0,
    };
    let offset_us = (offset * 1e6).round() as i64;
    let library = clocks::library()?;
    let dir = std::env::temp_dir().join(format!("lock-jepsen-node-clock-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let clock = ClockFile::create(dir.join("node-1.faketime"))?;
    clock.set(offset_us)?;
    let mut node_environment = vec![Vec::new(); NODES];
    node_environment[0] = clock.environment(&library, Reread::EverySecond);
    let started = Instant::now();
    let cluster = LocalCluster::start(LocalClusterConfig {
        node_environment,
        ..LocalClusterConfig::new(NODES)
    })?;
    println!(
        "cluster up in {:.1} s, node 1 under libfaketime at {offset:+.3} s",
        started.elapsed().as_secs_f64()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(experiment(&cluster, &clock, offset_us));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// Wall-clock milliseconds of this (unfaked) process.
fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

async fn query(
    session: &Session,
    text: &str,
    consistency: Consistency,
) -> Result<Option<i64>, BoxError> {
    let mut statement = Statement::new(text.to_owned());
    statement.set_consistency(consistency);
    statement.set_request_timeout(Some(Duration::from_secs(10)));
    let result = session.query_unpaged(statement, ()).await?;
    if !result.is_rows() {
        return Ok(None);
    }
    let rows = result.into_rows_result()?;
    Ok(rows
        .maybe_first_row::<(Option<i64>,)>()?
        .and_then(|(value,)| value))
}

async fn experiment(
    cluster: &LocalCluster,
    clock: &ClockFile,
    offset_us: i64,
) -> Result<(), BoxError> {
    let contact_points = cluster.contact_points();
    let mut sessions = Vec::new();
    for point in &contact_points {
        let filter = AllowListHostFilter::new([point.as_str()])?;
        sessions.push(
            SessionBuilder::new()
                .known_node(point)
                .host_filter(Arc::new(filter))
                .build()
                .await?,
        );
    }
    let clocks = async |sessions: &[Session]| -> Result<String, BoxError> {
        let mut line = Vec::new();
        for (node, session) in sessions.iter().enumerate() {
            let before = now_ms();
            let theirs = query(
                session,
                "SELECT toUnixTimestamp(currentTimestamp()) FROM system.local",
                Consistency::One,
            )
            .await?
            .unwrap_or(0);
            let after = now_ms();
            line.push(format!(
                "node {}: {:+.3} s",
                node + 1,
                (theirs - (before + after) / 2) as f64 / 1e3
            ));
        }
        Ok(line.join(", "))
    };
    println!(
        "clocks through each node as coordinator: {}",
        clocks(&sessions).await?
    );
    let first = &sessions[1];
    query(
        first,
        "CREATE KEYSPACE IF NOT EXISTS clock_experiment WITH replication = \
         {'class': 'SimpleStrategy', 'replication_factor': 3}",
        Consistency::All,
    )
    .await?;
    query(
        first,
        "CREATE TABLE IF NOT EXISTS clock_experiment.cells (k int PRIMARY KEY, v bigint)",
        Consistency::All,
    )
    .await?;
    // Wait until every coordinator knows the table.
    for (node, session) in sessions.iter().enumerate() {
        let asked = Instant::now();
        while let Err(error) = query(
            session,
            "SELECT v FROM clock_experiment.cells WHERE k = -1",
            Consistency::One,
        )
        .await
        {
            if asked.elapsed() > Duration::from_secs(60) {
                return Err(format!("node {} never learnt the table: {error}", node + 1).into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        println!(
            "node {} knew the table {:.1} s after its creation",
            node + 1,
            asked.elapsed().as_secs_f64()
        );
    }
    // TTL left, as each coordinator sees it, of a cell written with TTL 100 through each.
    println!(
        "TTL left (s) of a cell written with TTL 100, read at QUORUM (rows: written through; \
         columns: read through node 1, 2, 3)"
    );
    for (writer, session) in sessions.iter().enumerate() {
        let insert =
            format!("INSERT INTO clock_experiment.cells (k, v) VALUES ({writer}, 1) USING TTL 100");
        let written = match query(session, &insert, Consistency::All).await {
            Ok(_) => "ALL",
            Err(error) => {
                println!(
                    "  (node {}: the write at ALL failed: {error}; written at QUORUM)",
                    writer + 1
                );
                query(session, &insert, Consistency::Quorum).await?;
                "QUORUM"
            }
        };
        let mut row = vec![format!("(written at {written})")];
        for reader in &sessions {
            let ttl = query(
                reader,
                &format!(
                    "SELECT CAST(TTL(v) AS bigint) FROM clock_experiment.cells WHERE k = {writer}"
                ),
                Consistency::Quorum,
            )
            .await?;
            row.push(ttl.map_or_else(|| "gone".to_owned(), |ttl| ttl.to_string()));
        }
        println!("  node {}: {}", writer + 1, row.join(", "));
    }
    // When a 5 s TTL cell, written through node 2, vanishes through each coordinator.
    let sent = Instant::now();
    query(
        first,
        "INSERT INTO clock_experiment.cells (k, v) VALUES (100, 1) USING TTL 5",
        Consistency::Quorum,
    )
    .await?;
    let mut vanished: Vec<Option<f64>> = vec![None; sessions.len()];
    while vanished.iter().any(Option::is_none) && sent.elapsed() < Duration::from_secs(12) {
        for (node, session) in sessions.iter().enumerate() {
            if vanished[node].is_some() {
                continue;
            }
            let seen = query(
                session,
                "SELECT v FROM clock_experiment.cells WHERE k = 100",
                Consistency::Quorum,
            )
            .await?;
            if seen.is_none() {
                vanished[node] = Some(sent.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "a cell written through node 2 with TTL 5 vanished, after its write was sent, through {}",
        vanished
            .iter()
            .enumerate()
            .map(|(node, at)| format!(
                "node {}: {}",
                node + 1,
                at.map_or_else(|| "never (12 s)".to_owned(), |at| format!("{at:.2} s"))
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    clock.set(-offset_us)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "offset file rewritten to {:+.3} s; 3 s later: {}",
        -offset_us as f64 / 1e6,
        clocks(&sessions).await?
    );
    clock.set(0)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "offset file rewritten to 0; 3 s later: {}",
        clocks(&sessions).await?
    );
    Ok(())
}
