//! Test support (feature `testing`): [`in_virtual_time`], the watchdog that runs a test on
//! Tokio's paused clock and fails it if it never ends, and the storage conformance checks:
//! what the lock needs from a
//! [`LockStorage`] backend, checked through the trait alone, so that every backend runs the
//! same checks (the memory simulator, the CQL endpoint, real Cassandra, and yours).
//!
//! The lock scenarios that complete the conformance kit drive a whole locker over a backend
//! and live in the workspace's `tests` crate, whose suite runs these checks too.
//!
//! ```no_run
//! # async fn check(storage: impl lock_core::LockStorage) {
//! use fair_lock::testing::StorageChecks;
//!
//! // `now` is the write timestamp the checks start from (your cluster's wall clock).
//! let now = lock_core::Timestamp::from_micros(1_700_000_000_000_000);
//! let checks = StorageChecks::new("my-backend", now).expect("a valid lock-id prefix");
//! if let Err(failure) = checks.run(&storage).await {
//!     panic!("{failure}");
//! }
//! # }
//! ```
//!
//! What is checked (docs/algorithm.md, section "The storage model"):
//! * a written cell reads back with its column, value and write timestamp;
//! * a row's cells come sorted by column name (UTF-8 byte order), a read takes at most its
//!   limit and starts at its start column, inclusive;
//! * rows of different kinds and locks are separate;
//! * the higher write timestamp wins; a delete wins a tie with a write; a delete older
//!   than the write changes nothing; deleting a cell never written succeeds;
//! * a cell with a TTL disappears once it has passed (the check waits 4.5 s, on Tokio's
//!   clock, for a 3 s TTL) and a cell without one stays.

use std::fmt::{self, Debug};
use std::time::Duration;

use lock_core::column::ColumnName;
use lock_core::error::Error;
use lock_core::id::LockId;
use lock_core::storage::{CellDelete, CellWrite, LockStorage, RowKey, RowKind, RowRead, Ttl};
use lock_core::time::Timestamp;

pub use crate::watchdog::{VIRTUAL_LIMIT, WALL_LIMIT, in_virtual_time};

/// The first expectation a backend did not meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckFailure {
    /// Which check.
    pub check: &'static str,
    /// What was expected and what came instead, or the storage error.
    pub detail: String,
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "storage check {}: {}", self.check, self.detail)
    }
}

impl std::error::Error for CheckFailure {}

/// The storage checks, with the lock-id prefix and the first write timestamp to use.
#[derive(Clone, Debug)]
pub struct StorageChecks {
    prefix: String,
    now: Timestamp,
}

/// One check's context: its name, for failures.
struct Check<'a, S> {
    name: &'static str,
    storage: &'a S,
}

impl StorageChecks {
    /// Checks that name their lock ids `<prefix>-<check>` (unique per run on a shared
    /// cluster) and write with timestamps from `now` on (a value near the cluster's wall
    /// clock, so that TTLs and tombstones behave as in production).
    ///
    /// Fails with [`Error::InvalidLockId`] if the prefix cannot start a lock id.
    pub fn new(prefix: impl Into<String>, now: Timestamp) -> Result<Self, Error> {
        let checks = StorageChecks {
            prefix: prefix.into(),
            now,
        };
        // The longest name the checks use.
        LockId::new(checks.lock_name("separate-2"))?;
        Ok(checks)
    }

    fn lock_name(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Runs every check in turn and returns the first failure.
    pub async fn run<S: LockStorage>(&self, storage: &S) -> Result<(), CheckFailure> {
        self.write_then_read(storage).await?;
        self.order_limit_and_start(storage).await?;
        self.rows_are_separate(storage).await?;
        self.timestamps_decide(storage).await?;
        self.ttls_expire(storage).await
    }

    fn row(&self, check: &'static str, kind: RowKind, name: &str) -> Result<RowKey, CheckFailure> {
        LockId::new(self.lock_name(name))
            .map(|lock_id| RowKey::new(kind, lock_id))
            .map_err(|error| CheckFailure {
                check,
                detail: error.to_string(),
            })
    }

    fn write(
        &self,
        row: &RowKey,
        column: &str,
        value: &[u8],
        after: u64,
        ttl: Option<u32>,
    ) -> CellWrite {
        CellWrite {
            row: row.clone(),
            column: ColumnName::new(column),
            value: value.to_vec(),
            timestamp: self.at(after),
            ttl: ttl.and_then(|seconds| Ttl::from_secs(seconds).ok()),
        }
    }

    fn delete(&self, row: &RowKey, column: &str, after: u64) -> CellDelete {
        CellDelete {
            row: row.clone(),
            column: ColumnName::new(column),
            timestamp: self.at(after),
        }
    }

    fn at(&self, after: u64) -> Timestamp {
        self.now + Duration::from_micros(after)
    }

    /// A written cell reads back whole.
    pub async fn write_then_read<S: LockStorage>(&self, storage: &S) -> Result<(), CheckFailure> {
        let check = Check {
            name: "write then read",
            storage,
        };
        let main = self.row(check.name, RowKind::Main, "read-back")?;
        check
            .write(self.write(&main, "owner-1", b"\x00v\xff", 0, Some(60)))
            .await?;
        let cells = check.read(RowRead::first(main, 10)).await?;
        let got: Vec<(&str, &[u8], Timestamp)> = cells
            .iter()
            .map(|cell| {
                (
                    cell.column.as_str(),
                    cell.value.as_slice(),
                    cell.write_timestamp,
                )
            })
            .collect();
        check.expect(
            "the cell",
            got,
            vec![("owner-1", b"\x00v\xff".as_slice(), self.at(0))],
        )
    }

    /// Cells come sorted by column name; limits and start columns are honoured.
    pub async fn order_limit_and_start<S: LockStorage>(
        &self,
        storage: &S,
    ) -> Result<(), CheckFailure> {
        let check = Check {
            name: "order, limit and start",
            storage,
        };
        let queue = self.row(check.name, RowKind::Queue, "ordering")?;
        for name in ["b", "é", "aa", "B", "a"] {
            check
                .write(self.write(&queue, name, b"", 0, Some(60)))
                .await?;
        }
        check.expect(
            "the whole row",
            check.columns(&queue, None, 10).await?,
            vec!["B", "a", "aa", "b", "é"],
        )?;
        check.expect(
            "the first two",
            check.columns(&queue, None, 2).await?,
            vec!["B", "a"],
        )?;
        check.expect(
            "two from \"aa\", inclusive",
            check.columns(&queue, Some("aa"), 2).await?,
            vec!["aa", "b"],
        )?;
        check.expect(
            "from between two names",
            check.columns(&queue, Some("ab"), 10).await?,
            vec!["b", "é"],
        )?;
        check.expect(
            "from past the end",
            check.columns(&queue, Some("\u{10ffff}"), 10).await?,
            Vec::<String>::new(),
        )
    }

    /// Rows of different kinds and locks do not mix.
    pub async fn rows_are_separate<S: LockStorage>(&self, storage: &S) -> Result<(), CheckFailure> {
        let check = Check {
            name: "rows are separate",
            storage,
        };
        let queue = self.row(check.name, RowKind::Queue, "separate")?;
        let main = self.row(check.name, RowKind::Main, "separate")?;
        let other = self.row(check.name, RowKind::Queue, "separate-2")?;
        check
            .write(self.write(&queue, "q", b"", 0, Some(60)))
            .await?;
        check
            .write(self.write(&main, "m", b"", 0, Some(60)))
            .await?;
        check.expect(
            "the queue row",
            check.columns(&queue, None, 10).await?,
            vec!["q"],
        )?;
        check.expect(
            "the main row",
            check.columns(&main, None, 10).await?,
            vec!["m"],
        )?;
        check.expect(
            "another lock's queue row",
            check.columns(&other, None, 10).await?,
            Vec::<String>::new(),
        )
    }

    /// Last write wins by timestamp, and a delete wins a tie.
    pub async fn timestamps_decide<S: LockStorage>(&self, storage: &S) -> Result<(), CheckFailure> {
        let check = Check {
            name: "timestamps decide",
            storage,
        };
        let main = self.row(check.name, RowKind::Main, "timestamps")?;
        check
            .write(self.write(&main, "c", b"new", 10, Some(60)))
            .await?;
        check
            .write(self.write(&main, "c", b"old", 0, Some(60)))
            .await?;
        let cells = check.read(RowRead::first(main.clone(), 10)).await?;
        let kept: Vec<(&[u8], Timestamp)> = cells
            .iter()
            .map(|cell| (cell.value.as_slice(), cell.write_timestamp))
            .collect();
        check.expect(
            "after an older write",
            kept,
            vec![(b"new".as_slice(), self.at(10))],
        )?;
        check.delete(self.delete(&main, "c", 5)).await?;
        check.expect(
            "after an older delete",
            check.columns(&main, None, 10).await?,
            vec!["c"],
        )?;
        check.delete(self.delete(&main, "c", 10)).await?;
        check.expect(
            "after a delete at the write's timestamp",
            check.columns(&main, None, 10).await?,
            Vec::<String>::new(),
        )?;
        check
            .write(self.write(&main, "c", b"late", 10, Some(60)))
            .await?;
        check.expect(
            "after a write at the tombstone's timestamp",
            check.columns(&main, None, 10).await?,
            Vec::<String>::new(),
        )?;
        check
            .write(self.write(&main, "c", b"again", 11, Some(60)))
            .await?;
        check.expect(
            "after a newer write",
            check.columns(&main, None, 10).await?,
            vec!["c"],
        )?;
        check
            .delete(self.delete(&main, "never-written", 20))
            .await?;
        check.expect(
            "after deleting a cell never written",
            check.columns(&main, None, 10).await?,
            vec!["c"],
        )
    }

    /// A cell's TTL runs out; a cell without one stays.
    pub async fn ttls_expire<S: LockStorage>(&self, storage: &S) -> Result<(), CheckFailure> {
        let check = Check {
            name: "TTLs expire",
            storage,
        };
        let queue = self.row(check.name, RowKind::Queue, "ttl")?;
        let time = self.row(check.name, RowKind::GlobalTime, "ttl")?;
        check
            .write(self.write(&queue, "short", b"", 0, Some(3)))
            .await?;
        check
            .write(self.write(&queue, "long", b"", 0, Some(600)))
            .await?;
        check.write(self.write(&time, "now", b"", 0, None)).await?;
        check.expect(
            "right after writing",
            check.columns(&queue, None, 10).await?,
            vec!["long", "short"],
        )?;
        // TTLs count whole seconds on the replica's clock: a cell written with a TTL of 3 s
        // expires at the third whole second after the one it was written in, between 2 and
        // 3 s after the write (with a TTL of 1 s, a write late in a second lived only
        // milliseconds, too short to read back on a loaded cluster). Wait well past 3 s.
        tokio::time::sleep(Duration::from_millis(4_500)).await;
        check.expect(
            "after the 3 s TTL ran out",
            check.columns(&queue, None, 10).await?,
            vec!["long"],
        )?;
        check.expect(
            "a cell without a TTL",
            check.columns(&time, None, 10).await?,
            vec!["now"],
        )
    }
}

impl<S: LockStorage> Check<'_, S> {
    fn fail(&self, detail: String) -> CheckFailure {
        CheckFailure {
            check: self.name,
            detail,
        }
    }

    async fn write(&self, write: CellWrite) -> Result<(), CheckFailure> {
        let what = format!("write {}", write.column.as_str());
        self.storage
            .write_cell(write)
            .await
            .map_err(|error| self.fail(format!("{what}: {error}")))
    }

    async fn delete(&self, delete: CellDelete) -> Result<(), CheckFailure> {
        let what = format!("delete {}", delete.column.as_str());
        self.storage
            .delete_cell(delete)
            .await
            .map_err(|error| self.fail(format!("{what}: {error}")))
    }

    async fn read(&self, read: RowRead) -> Result<Vec<lock_core::storage::Cell>, CheckFailure> {
        self.storage
            .read_row(read)
            .await
            .map_err(|error| self.fail(format!("read: {error}")))
    }

    async fn columns(
        &self,
        row: &RowKey,
        start: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>, CheckFailure> {
        let read = RowRead {
            start: start.map(ColumnName::new),
            ..RowRead::first(row.clone(), limit)
        };
        let cells = self.read(read).await?;
        Ok(cells
            .into_iter()
            .map(|cell| cell.column.as_str().to_owned())
            .collect())
    }

    fn expect<G: PartialEq<W> + Debug, W: Debug>(
        &self,
        what: &str,
        got: G,
        want: W,
    ) -> Result<(), CheckFailure> {
        if got == want {
            Ok(())
        } else {
            Err(self.fail(format!("{what}: got {got:?}, want {want:?}")))
        }
    }
}
