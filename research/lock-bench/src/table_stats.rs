//! What each node of a real cluster says about the lock table, read over CQL from its own
//! `system_views` virtual tables (Cassandra 4.0 and later), so that no JMX port or
//! `nodetool` is needed:
//!
//! - `max_partition_size`: the largest partition in the table's SSTables on that node, in
//!   whole MiB as Cassandra rounds it (the memtable is not counted until it is flushed);
//! - `disk_usage`: the table's SSTables on that node, in whole MiB;
//! - `tombstones_per_read`: Cassandra's histogram of the tombstones each local read of the
//!   table scanned on that node, since the node started.
//!
//! Virtual tables are node-local, so each query goes to one node.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_storage_cassandra::scylla::client::session::Session;
use lock_storage_cassandra::scylla::cluster::Node;
use lock_storage_cassandra::scylla::deserialize::row::DeserializeRow;
use lock_storage_cassandra::scylla::policies::load_balancing::{
    NodeIdentifier, SingleTargetLoadBalancingPolicy,
};
use lock_storage_cassandra::scylla::serialize::row::SerializeRow;
use lock_storage_cassandra::scylla::statement::Statement;
use serde::Serialize;
use tokio::sync::oneshot;

/// Cassandra's histogram of tombstones scanned per local read of one table on one node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TombstoneHistogram {
    /// Local reads counted.
    pub reads: i64,
    /// Median tombstones per read.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// The most in one read.
    pub max: f64,
}

/// One node's figures for the lock table, or why they could not be had.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeTableStats {
    /// The node's address, `ip:port`.
    pub node: String,
    /// The largest partition in the table's SSTables, whole MiB.
    pub max_partition_mib: Option<i64>,
    /// The table's SSTables on disk, whole MiB.
    pub disk_mib: Option<i64>,
    /// Tombstones per local read.
    pub tombstones_per_read: Option<TombstoneHistogram>,
    /// The first query that failed, and how.
    pub error: Option<String>,
}

/// Every node's figures at one moment of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableSample {
    /// Seconds since the run started.
    pub at_seconds: f64,
    /// One entry per node the driver knows.
    pub nodes: Vec<NodeTableStats>,
}

impl TableSample {
    /// The largest partition any node reported.
    pub fn max_partition_mib(&self) -> Option<i64> {
        self.nodes
            .iter()
            .filter_map(|node| node.max_partition_mib)
            .max()
    }
}

/// Reads every node's figures for `keyspace.table`.
pub async fn read(session: &Session, keyspace: &str, table: &str) -> Vec<NodeTableStats> {
    let mut found = Vec::new();
    for node in session.get_cluster_state().get_nodes_info() {
        found.push(node_stats(session, node, keyspace, table).await);
    }
    found
}

/// The first row `text` returns with `values` when `node` alone runs it (a query of the
/// node's own virtual tables, which no coordinator forwards), or why it could not be read.
pub(crate) async fn first_row_on<Row, Values>(
    session: &Session,
    node: &Arc<Node>,
    text: &str,
    values: Values,
) -> Result<Option<Row>, String>
where
    Row: for<'frame> DeserializeRow<'frame, 'frame>,
    Values: SerializeRow,
{
    let mut statement = Statement::new(text);
    statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
        NodeIdentifier::Node(Arc::clone(node)),
        None,
    )));
    let rows = session
        .query_unpaged(statement, values)
        .await
        .map_err(|error| error.to_string())?
        .into_rows_result()
        .map_err(|error| error.to_string())?;
    rows.maybe_first_row::<Row>()
        .map_err(|error| error.to_string())
}

async fn node_stats(
    session: &Session,
    node: &Arc<Node>,
    keyspace: &str,
    table: &str,
) -> NodeTableStats {
    let mut stats = NodeTableStats {
        node: format!("{}:{}", node.address.ip(), node.address.port()),
        max_partition_mib: None,
        disk_mib: None,
        tombstones_per_read: None,
        error: None,
    };
    let key = (keyspace, table);
    let mebibytes = async |view: &str| -> Result<Option<i64>, String> {
        let text = format!(
            "SELECT mebibytes FROM system_views.{view} WHERE keyspace_name = ? AND table_name = ?"
        );
        let row = first_row_on::<(Option<i64>,), _>(session, node, &text, key).await;
        Ok(row
            .map_err(|error| format!("{view}: {error}"))?
            .and_then(|(mebibytes,)| mebibytes))
    };
    match mebibytes("max_partition_size").await {
        Ok(value) => stats.max_partition_mib = value,
        Err(error) => stats.error = Some(error),
    }
    match mebibytes("disk_usage").await {
        Ok(value) => stats.disk_mib = value,
        Err(error) => {
            stats.error.get_or_insert(error);
        }
    }
    let histogram = async || -> Result<Option<TombstoneHistogram>, String> {
        let text = "SELECT count, p50th, p99th, max FROM system_views.tombstones_per_read \
                    WHERE keyspace_name = ? AND table_name = ?";
        let row = first_row_on::<(Option<i64>, Option<f64>, Option<f64>, Option<f64>), _>(
            session, node, text, key,
        )
        .await
        .map_err(|error| format!("tombstones_per_read: {error}"))?;
        Ok(row.map(|(reads, p50, p99, max)| TombstoneHistogram {
            reads: reads.unwrap_or(0),
            p50: p50.unwrap_or(0.0),
            p99: p99.unwrap_or(0.0),
            max: max.unwrap_or(0.0),
        }))
    };
    match histogram().await {
        Ok(value) => stats.tombstones_per_read = value,
        Err(error) => {
            stats.error.get_or_insert(error);
        }
    }
    stats
}

/// Samples every node's figures every `every` until `stop` fires, then once more.
pub async fn watch(
    session: Arc<Session>,
    keyspace: String,
    table: String,
    every: Duration,
    stop: oneshot::Receiver<()>,
) -> Vec<TableSample> {
    let started = Instant::now();
    let mut samples = Vec::new();
    tokio::pin!(stop);
    loop {
        let stopped = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            _ = &mut stop => true,
        };
        samples.push(TableSample {
            at_seconds: started.elapsed().as_secs_f64(),
            nodes: read(&session, &keyspace, &table).await,
        });
        if stopped {
            return samples;
        }
    }
}

/// Lines for the report: the largest partition seen over the samples, and the last
/// sample node by node.
pub fn describe(samples: &[TableSample]) -> String {
    let mut out = String::new();
    let Some(last) = samples.last() else {
        return "  lock table: no sample of the nodes' system_views was taken\n".to_owned();
    };
    let largest = samples
        .iter()
        .filter_map(TableSample::max_partition_mib)
        .max();
    let _ = writeln!(
        out,
        "  lock table, from every node's system_views over {} samples: the largest partition \
         in any node's SSTables {}",
        samples.len(),
        largest.map_or_else(|| "was never reported".to_owned(), mebibytes)
    );
    for node in &last.nodes {
        let histogram = node.tombstones_per_read.as_ref().map_or_else(
            || "-".to_owned(),
            |histogram| {
                format!(
                    "{} reads, p50 {:.0}, p99 {:.0}, max {:.0}",
                    histogram.reads, histogram.p50, histogram.p99, histogram.max
                )
            },
        );
        let _ = writeln!(
            out,
            "    {} at the end: largest partition {}, SSTables {}, tombstones per local read \
             since the node started: {}{}",
            node.node,
            node.max_partition_mib
                .map_or_else(|| "-".to_owned(), mebibytes),
            node.disk_mib.map_or_else(|| "-".to_owned(), mebibytes),
            histogram,
            node.error
                .as_ref()
                .map_or_else(String::new, |error| format!(" (could not read {error})")),
        );
    }
    out
}

/// Cassandra's whole MiB, with 0 said as what it means.
fn mebibytes(value: i64) -> String {
    if value == 0 {
        "under 1 MiB".to_owned()
    } else {
        format!("{value} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(max_partition_mib: Option<i64>) -> NodeTableStats {
        NodeTableStats {
            node: "127.0.0.1:9042".to_owned(),
            max_partition_mib,
            disk_mib: Some(3),
            tombstones_per_read: Some(TombstoneHistogram {
                reads: 10,
                p50: 2.0,
                p99: 35.0,
                max: 42.0,
            }),
            error: None,
        }
    }

    #[test]
    fn the_largest_partition_is_the_largest_over_every_sample_and_node() {
        let samples = [
            TableSample {
                at_seconds: 30.0,
                nodes: vec![node(Some(4)), node(None)],
            },
            TableSample {
                at_seconds: 60.0,
                nodes: vec![node(Some(0)), node(Some(2))],
            },
        ];
        let text = describe(&samples);
        assert!(
            text.contains("over 2 samples: the largest partition in any node's SSTables 4 MiB")
        );
        assert!(text.contains("largest partition under 1 MiB, SSTables 3 MiB"));
        assert!(text.contains("10 reads, p50 2, p99 35, max 42"));
    }

    #[test]
    fn no_sample_and_no_figure_are_said_so() {
        assert!(describe(&[]).contains("no sample"));
        let samples = [TableSample {
            at_seconds: 1.0,
            nodes: vec![NodeTableStats {
                error: Some("max_partition_size: unknown table".to_owned()),
                ..node(None)
            }],
        }];
        let text = describe(&samples);
        assert!(text.contains("was never reported"));
        assert!(text.contains("(could not read max_partition_size: unknown table)"));
    }
}
