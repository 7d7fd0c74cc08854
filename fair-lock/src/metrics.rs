//! Measurements the locker reports, through a small trait that costs nothing when unset.

use std::time::Duration;

use lock_core::error::Error;
use lock_core::id::LockId;
use lock_core::machine::AcquireStats;
use lock_core::storage::StorageRequest;

/// The kind of a storage request, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// A cell write.
    Write,
    /// A cell delete.
    Delete,
    /// A row read.
    Read,
}

impl RequestKind {
    /// The kind of `request`.
    pub fn of(request: &StorageRequest) -> Self {
        match request {
            StorageRequest::Write(_) => RequestKind::Write,
            StorageRequest::Delete(_) => RequestKind::Delete,
            StorageRequest::Read(_) => RequestKind::Read,
        }
    }

    /// A lowercase label.
    pub const fn as_str(self) -> &'static str {
        match self {
            RequestKind::Write => "write",
            RequestKind::Delete => "delete",
            RequestKind::Read => "read",
        }
    }
}

/// Why an acquisition ended without the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotAcquired {
    /// A soft lock found the lock taken.
    Busy,
    /// The caller's deadline passed.
    TimedOut,
    /// Storage failed or refused.
    Failed,
}

impl NotAcquired {
    /// A lowercase label.
    pub const fn as_str(self) -> &'static str {
        match self {
            NotAcquired::Busy => "busy",
            NotAcquired::TimedOut => "timed_out",
            NotAcquired::Failed => "failed",
        }
    }
}

/// Receives what the locker measures. Every method does nothing by default; implement the
/// ones you want and pass the value to [`super::LockerBuilder::metrics`]. Without one, the
/// locker skips these calls entirely.
///
/// With the `metrics` cargo feature, `MetricsFacade` forwards everything to the `metrics`
/// crate's global recorder (Prometheus, StatsD, ...).
pub trait LockMetrics: Send + Sync + 'static {
    /// A lock was acquired after waiting `wait`.
    fn acquired(&self, lock_id: &LockId, wait: Duration, stats: &AcquireStats) {
        let _ = (lock_id, wait, stats);
    }

    /// An acquisition ended without the lock.
    fn not_acquired(&self, lock_id: &LockId, reason: NotAcquired) {
        let _ = (lock_id, reason);
    }

    /// A held lock was released after being held for `held`.
    fn released(&self, lock_id: &LockId, held: Duration) {
        let _ = (lock_id, held);
    }

    /// A lease renewal succeeded.
    fn renewed(&self, lock_id: &LockId) {
        let _ = lock_id;
    }

    /// A lease renewal failed (the lease is in doubt).
    fn renewal_failed(&self, lock_id: &LockId) {
        let _ = lock_id;
    }

    /// A lease was lost.
    fn lost(&self, lock_id: &LockId) {
        let _ = lock_id;
    }

    /// A storage request finished after `latency`, with `error` if it failed.
    fn storage_request(&self, kind: RequestKind, latency: Duration, error: Option<&Error>) {
        let _ = (kind, latency, error);
    }
}

/// Forwards the locker's measurements to the `metrics` crate facade: counters
/// `lock_acquisitions_total{result}`, `lock_renewals_total{result}`, `lock_lost_total`,
/// `lock_storage_requests_total{kind,result}` and histograms `lock_wait_seconds`,
/// `lock_hold_seconds`, `lock_storage_request_seconds{kind}`; each carries a `lock_id`
/// label only where `per_lock_labels` is set (beware of cardinality).
#[cfg(feature = "metrics")]
#[derive(Clone, Copy, Debug, Default)]
pub struct MetricsFacade {
    /// Whether to label lock-level metrics with the lock id.
    pub per_lock_labels: bool,
}

#[cfg(feature = "metrics")]
impl MetricsFacade {
    fn lock_label(&self, lock_id: &LockId) -> Vec<(&'static str, String)> {
        if self.per_lock_labels {
            vec![("lock_id", lock_id.to_string())]
        } else {
            Vec::new()
        }
    }
}

#[cfg(feature = "metrics")]
impl LockMetrics for MetricsFacade {
    fn acquired(&self, lock_id: &LockId, wait: Duration, _stats: &AcquireStats) {
        let labels = self.lock_label(lock_id);
        metrics::histogram!("lock_wait_seconds", &labels).record(wait.as_secs_f64());
        let mut labels = labels;
        labels.push(("result", "acquired".into()));
        metrics::counter!("lock_acquisitions_total", &labels).increment(1);
    }

    fn not_acquired(&self, lock_id: &LockId, reason: NotAcquired) {
        let mut labels = self.lock_label(lock_id);
        labels.push(("result", reason.as_str().into()));
        metrics::counter!("lock_acquisitions_total", &labels).increment(1);
    }

    fn released(&self, lock_id: &LockId, held: Duration) {
        let labels = self.lock_label(lock_id);
        metrics::histogram!("lock_hold_seconds", &labels).record(held.as_secs_f64());
    }

    fn renewed(&self, lock_id: &LockId) {
        let mut labels = self.lock_label(lock_id);
        labels.push(("result", "ok".into()));
        metrics::counter!("lock_renewals_total", &labels).increment(1);
    }

    fn renewal_failed(&self, lock_id: &LockId) {
        let mut labels = self.lock_label(lock_id);
        labels.push(("result", "failed".into()));
        metrics::counter!("lock_renewals_total", &labels).increment(1);
    }

    fn lost(&self, lock_id: &LockId) {
        let labels = self.lock_label(lock_id);
        metrics::counter!("lock_lost_total", &labels).increment(1);
    }

    fn storage_request(&self, kind: RequestKind, latency: Duration, error: Option<&Error>) {
        let result = match error {
            None => "ok",
            Some(error) if error.is_outcome_unknown() => "outcome_unknown",
            Some(_) => "failed",
        };
        metrics::histogram!("lock_storage_request_seconds", "kind" => kind.as_str())
            .record(latency.as_secs_f64());
        metrics::counter!("lock_storage_requests_total", "kind" => kind.as_str(), "result" => result)
            .increment(1);
    }
}
