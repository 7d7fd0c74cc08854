//! What the cluster has done, counted: for the benchmark and for tests.

/// Requests by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestCounts {
    /// Cell writes.
    pub writes: u64,
    /// Cell deletes.
    pub deletes: u64,
    /// Row reads.
    pub reads: u64,
}

impl RequestCounts {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.writes + self.deletes + self.reads
    }
}

/// What one replica has handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReplicaCounters {
    /// Request messages that reached this replica and were served, by kind.
    pub requests: RequestCounts,
    /// Cells this replica was sent by read repair.
    pub read_repairs: u64,
    /// Hinted writes replayed to this replica.
    pub hints_applied: u64,
    /// Dead cells (tombstones and expired values) this replica scanned while reading.
    pub dead_cells_scanned: u64,
}

/// A snapshot of the cluster's counters, from [`crate::MemoryCluster::counters`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    /// Requests clients made, by kind.
    pub requests: RequestCounts,
    /// Requests that succeeded.
    pub succeeded: u64,
    /// Requests refused up front because too few replicas (or no coordinator) were
    /// reachable: nothing was applied.
    pub unavailable: u64,
    /// Requests that timed out: writes among them may have been applied.
    pub timed_out: u64,
    /// Per replica, indexed by replica id.
    pub replicas: Vec<ReplicaCounters>,
    /// Messages that reached their destination or were lost there: requests, replies,
    /// read repairs and hints (a message still in flight is not counted yet).
    pub messages_sent: u64,
    /// Messages lost because their receiver was down or cut off when they arrived.
    pub messages_dropped: u64,
    /// Dead cells scanned by all replicas' reads.
    pub dead_cells_scanned: u64,
    /// Cells sent by read repair.
    pub read_repairs: u64,
    /// Reads whose replicas answered differently and that waited for the read repair
    /// before answering: what Cassandra's coordinators count as `Mismatch (Blocking)`
    /// (`nodetool netstats`).
    pub repaired_reads: u64,
    /// Hints written for replicas that were down.
    pub hints_written: u64,
    /// Hints replayed to their replica.
    pub hints_delivered: u64,
}
