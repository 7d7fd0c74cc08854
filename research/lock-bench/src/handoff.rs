//! Where a hand-off's time goes, from a log of every request the lockers of a run sent.
//!
//! A hand-off of the queue algorithm (docs/algorithm.md, section "The hand-off floor") runs from the
//! holder's release to the next owner's, through the next owner's queue read that sees
//! the release, its main write and its main read. This module takes each hand-off whose
//! next owner took exactly that path and splits its time into four stages, measured from
//! the send of one request to the send of the next, as the owners' drivers sent them:
//!
//! * **detection**: from the release's send to the send of the queue read that saw it
//!   (negative when that read was already on its way);
//! * **seeing read**: from that read's send to the main write's send;
//! * **main write**: to the main read's send;
//! * **main read and turn**: to the next owner's own release (its main read's round trip,
//!   then its fencing requests and critical section, if any).
//!
//! The four add up to the time from one release to the next. Holds reached another way
//! (the fast path, waiting in the main row) are counted apart; a hold after a conflict
//! counts from the queue read that preceded its last main write.
//!
//! The log is kept by [`Recorded`], a storage wrapper that notes each request as the
//! locker's driver hands it to the backend, on one clock for every locker of the run: on
//! the simulator that is virtual time, on a real cluster the machine's, so the same split
//! runs on both.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::timeline::Timeline;
use async_trait::async_trait;
use lock_core::storage::{
    Cell, CellDelete, CellWrite, RowKind, RowRead, StorageRequest, StorageResponse,
};
use lock_core::{ColumnName, Error, LockStorage};
use serde::Serialize;

/// Every request the lockers of one run sent, by locker, in the order each sent them.
#[derive(Debug)]
pub struct RequestLog {
    origin: Timeline,
    by_locker: Mutex<Vec<Vec<Sent>>>,
    /// The columns of each locker's latest main-row and queue writes: a hold is a main read
    /// that returns its main cell alone, after a queue read that showed its queue cell
    /// first.
    own_columns: Mutex<Vec<OwnColumns>>,
}

impl RequestLog {
    /// An empty log for `lockers` lockers, on `timeline` (the run's).
    pub fn new(lockers: usize, timeline: Timeline) -> Self {
        RequestLog {
            origin: timeline,
            by_locker: Mutex::new(vec![Vec::new(); lockers]),
            own_columns: Mutex::new(vec![OwnColumns::default(); lockers]),
        }
    }

    /// Notes that `locker` sent `request` now; returns where, for [`Self::answered`].
    fn sent(&self, locker: usize, request: &StorageRequest) -> Option<usize> {
        if let StorageRequest::Write(write) = request
            && let Some(own) = self
                .own_columns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(locker)
        {
            match write.row.kind {
                RowKind::Main => own.main = Some(write.column.clone()),
                RowKind::Queue => own.queue = Some(write.column.clone()),
                _ => {}
            }
        }
        let mut by_locker = self
            .by_locker
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let sent = by_locker.get_mut(locker)?;
        sent.push(Sent {
            at: self.origin.elapsed(),
            op: op_of(request),
            cells: None,
            ours: false,
        });
        Some(sent.len() - 1)
    }

    /// Notes that the read of `row` that `locker` sent `index`-th returned `cells`.
    fn answered(&self, locker: usize, index: usize, row: RowKind, cells: &[Cell]) {
        let own = self
            .own_columns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(locker)
            .cloned()
            .unwrap_or_default();
        let ours = match (row, cells) {
            (RowKind::Main, [cell]) => own.main.as_ref() == Some(&cell.column),
            (RowKind::Queue, [first, ..]) => own.queue.as_ref() == Some(&first.column),
            _ => false,
        };
        let mut by_locker = self
            .by_locker
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(sent) = by_locker
            .get_mut(locker)
            .and_then(|sent| sent.get_mut(index))
        {
            sent.cells = Some(cells.len());
            sent.ours = ours;
        }
    }

    /// The hand-offs of the requests logged so far.
    pub fn breakdown(&self) -> HandoffBreakdown {
        HandoffBreakdown::of(
            &self
                .by_locker
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

/// A locker's storage that notes every request in a [`RequestLog`] (or, without one, only
/// passes it on).
#[derive(Debug)]
pub struct Recorded<S> {
    storage: S,
    log: Option<(Arc<RequestLog>, usize)>,
}

impl<S> Recorded<S> {
    /// `storage`, noting its requests in `log` as those of locker `locker`, if given.
    pub fn new(storage: S, log: Option<&Arc<RequestLog>>, locker: usize) -> Self {
        Recorded {
            storage,
            log: log.map(|log| (log.clone(), locker)),
        }
    }
}

#[async_trait]
impl<S: LockStorage> LockStorage for Recorded<S> {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        self.execute(StorageRequest::Write(write)).await.map(drop)
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        self.execute(StorageRequest::Delete(delete)).await.map(drop)
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        match self.execute(StorageRequest::Read(read)).await? {
            StorageResponse::Cells(cells) => Ok(cells),
            StorageResponse::Done => Ok(Vec::new()),
        }
    }

    async fn execute(&self, request: StorageRequest) -> Result<StorageResponse, Error> {
        let Some((log, locker)) = &self.log else {
            return self.storage.execute(request).await;
        };
        let index = log.sent(*locker, &request);
        let row = request.row().kind;
        let result = self.storage.execute(request).await;
        if let (Some(index), Ok(StorageResponse::Cells(cells))) = (index, &result) {
            log.answered(*locker, index, row, cells);
        }
        result
    }
}

/// The four stages of the hand-offs of one run, summed in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandoffBreakdown {
    /// Hand-offs whose next owner read the queue, wrote the main row and read it.
    pub handoffs: u64,
    /// Holds reached another way, or with no earlier release to measure from.
    pub other_holds: u64,
    /// Sum over the hand-offs of the detection stage.
    pub detection_micros: i64,
    /// Sum of the seeing read stage.
    pub seeing_read_micros: i64,
    /// Sum of the main write stage.
    pub main_write_micros: i64,
    /// Sum of the main read and turn stage.
    pub main_read_and_turn_micros: i64,
}

impl HandoffBreakdown {
    /// The means over the hand-offs, in ms (`NaN` without any), for reports.
    pub fn summary(&self) -> HandoffSummary {
        let mean_ms = |sum: i64| {
            if self.handoffs == 0 {
                f64::NAN
            } else {
                sum as f64 / self.handoffs as f64 / 1e3
            }
        };
        HandoffSummary {
            handoffs: self.handoffs,
            other_holds: self.other_holds,
            detection_ms: mean_ms(self.detection_micros),
            seeing_read_ms: mean_ms(self.seeing_read_micros),
            main_write_ms: mean_ms(self.main_write_micros),
            main_read_and_turn_ms: mean_ms(self.main_read_and_turn_micros),
            total_ms: mean_ms(
                self.detection_micros
                    + self.seeing_read_micros
                    + self.main_write_micros
                    + self.main_read_and_turn_micros,
            ),
        }
    }

    /// Splits the hand-offs of `requests`, each locker's in the order it sent them.
    fn of(requests: &[Vec<Sent>]) -> Self {
        let mut holds = Vec::new();
        for (locker, sent) in requests.iter().enumerate() {
            holds.extend(holds_of(locker, sent));
        }
        let mut releases: Vec<(Duration, usize)> = holds
            .iter()
            .map(|hold| (hold.released_at, hold.client))
            .collect();
        releases.sort();
        let mut breakdown = HandoffBreakdown::default();
        for hold in &holds {
            let Some(path) = hold.path else {
                breakdown.other_holds += 1;
                continue;
            };
            let sent_before_the_main_write =
                releases.partition_point(|(at, _)| *at <= path.main_write);
            let previous = releases[..sent_before_the_main_write]
                .iter()
                .rev()
                .find(|(_, client)| *client != hold.client);
            let Some(&(released_before, _)) = previous else {
                breakdown.other_holds += 1;
                continue;
            };
            breakdown.handoffs += 1;
            breakdown.detection_micros += micros_between(released_before, path.queue_read);
            breakdown.seeing_read_micros += micros_between(path.queue_read, path.main_write);
            breakdown.main_write_micros += micros_between(path.main_write, path.main_read);
            breakdown.main_read_and_turn_micros += micros_between(path.main_read, hold.released_at);
        }
        breakdown
    }
}

/// The mean stages of a run's hand-offs, in ms (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HandoffSummary {
    /// Hand-offs whose next owner read the queue, wrote the main row and read it.
    pub handoffs: u64,
    /// Holds reached another way, or with no earlier release to measure from.
    pub other_holds: u64,
    /// From the release's send to the send of the queue read that saw it.
    pub detection_ms: f64,
    /// From that read's send to the main write's send.
    pub seeing_read_ms: f64,
    /// From the main write's send to the main read's send.
    pub main_write_ms: f64,
    /// From the main read's send to the next owner's release.
    pub main_read_and_turn_ms: f64,
    /// From one release to the next: the four stages together.
    pub total_ms: f64,
}

/// One line of the hand-off table: a run and its split.
pub struct HandoffRow<'a> {
    /// The algorithm's label.
    pub label: &'a str,
    /// Processes contending.
    pub processes: usize,
    /// The run's split.
    pub handoffs: &'a HandoffSummary,
    /// Reads per acquisition that waited for a blocking read repair, where counted (the
    /// simulator).
    pub repaired_reads_per_acquisition: Option<f64>,
}

/// The table of the hand-offs' stages, in ms and the total over `3r`, with the reads per
/// acquisition that waited for a read repair where they were counted.
pub fn render_table<'a>(rows: impl Iterator<Item = HandoffRow<'a>>, round_trip_ms: f64) -> String {
    let mut text = format!(
        "Where a hand-off's time goes (ms from send to send; hand-offs through a queue read, a main write and a main read; r = {round_trip_ms:.3} ms; repaired/acq = reads per acquisition, of any row, that waited for a blocking read repair)\n"
    );
    let _ = writeln!(
        text,
        "  {:<10} {:>4} {:>9} {:>7} {:>10} {:>13} {:>11} {:>10} {:>8} {:>9} {:>13}",
        "algorithm",
        "P",
        "hand-offs",
        "other",
        "detection",
        "seeing read",
        "main write",
        "main read",
        "total",
        "total/3r",
        "repaired/acq"
    );
    for row in rows {
        let split = row.handoffs;
        if split.handoffs == 0 {
            let _ = writeln!(
                text,
                "  {:<10} {:>4} {:>9} {:>7}   (no hand-off took that path)",
                row.label, row.processes, 0, split.other_holds
            );
            continue;
        }
        let repaired = row
            .repaired_reads_per_acquisition
            .map_or_else(|| "-".to_owned(), |repaired| format!("{repaired:.3}"));
        let _ = writeln!(
            text,
            "  {:<10} {:>4} {:>9} {:>7} {:>10.3} {:>13.3} {:>11.3} {:>10.3} {:>8.3} {:>9.2} {:>13}",
            row.label,
            row.processes,
            split.handoffs,
            split.other_holds,
            split.detection_ms,
            split.seeing_read_ms,
            split.main_write_ms,
            split.main_read_and_turn_ms,
            split.total_ms,
            split.total_ms / (3.0 * round_trip_ms),
            repaired
        );
    }
    text
}

/// What a request did, as far as hand-offs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    QueueRead,
    MainWrite,
    MainRead,
    MainDelete,
    Other,
}

/// One request of one locker: when it was sent, what it did, and how many cells a read
/// returned (none before its answer, or for a failed read).
#[derive(Clone, Copy, Debug)]
struct Sent {
    at: Duration,
    op: Op,
    cells: Option<usize>,
    /// A main read that returned the locker's own main cell alone, or a queue read whose
    /// first cell was the locker's own queue cell (each as it last wrote it).
    ours: bool,
}

/// The columns a locker last wrote in the main and queue rows.
#[derive(Clone, Debug, Default)]
struct OwnColumns {
    main: Option<ColumnName>,
    queue: Option<ColumnName>,
}

/// The sends of the normal path to a hold.
#[derive(Clone, Copy, Debug)]
struct Path {
    queue_read: Duration,
    main_write: Duration,
    main_read: Duration,
}

/// A hold: whose, when it ended, and how it was reached (`None`: not by the normal path).
#[derive(Clone, Copy, Debug)]
struct Hold {
    client: usize,
    released_at: Duration,
    path: Option<Path>,
}

fn op_of(operation: &StorageRequest) -> Op {
    match (operation, operation.row().kind) {
        (StorageRequest::Read(_), RowKind::Queue) => Op::QueueRead,
        (StorageRequest::Write(_), RowKind::Main) => Op::MainWrite,
        (StorageRequest::Read(_), RowKind::Main) => Op::MainRead,
        (StorageRequest::Delete(_), RowKind::Main) => Op::MainDelete,
        _ => Op::Other,
    }
}

/// One client's holds: each main read that found only the client's own cell, after a queue
/// read that showed the client first (a fast path whose queue read shows an owner ahead
/// retreats, whatever its main read found), and was followed by a
/// main-row delete before any other queue or main read (its release; writes in between
/// are fencing or lease renewals). Its path is the normal one if the two requests before
/// that main read were a queue read and a main write.
fn holds_of(client: usize, sent: &[Sent]) -> impl Iterator<Item = Hold> + '_ {
    sent.iter().enumerate().filter_map(move |(at, read)| {
        if read.op != Op::MainRead || !read.ours {
            return None;
        }
        let first_in_queue = sent[..at]
            .iter()
            .rev()
            .find(|earlier| earlier.op == Op::QueueRead)
            .is_some_and(|queue_read| queue_read.ours);
        if !first_in_queue {
            return None;
        }
        let release = sent[at + 1..]
            .iter()
            .find(|later| matches!(later.op, Op::MainDelete | Op::QueueRead | Op::MainRead))
            .filter(|later| later.op == Op::MainDelete)?;
        let path = match at.checked_sub(2).map(|start| &sent[start..at]) {
            Some([queue_read, main_write])
                if queue_read.op == Op::QueueRead && main_write.op == Op::MainWrite =>
            {
                Some(Path {
                    queue_read: queue_read.at,
                    main_write: main_write.at,
                    main_read: read.at,
                })
            }
            _ => None,
        };
        Some(Hold {
            client,
            released_at: release.at,
            path,
        })
    })
}

/// `to − from` in microseconds, negative if `to` came first.
fn micros_between(from: Duration, to: Duration) -> i64 {
    let micros = |at: Duration| i64::try_from(at.as_micros()).unwrap_or(i64::MAX);
    micros(to) - micros(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds each locker's requests from `(ms, locker, request)` sends; a read is
    /// answered with its cells.
    struct History {
        lockers: Vec<Vec<Sent>>,
    }

    #[derive(Clone, Copy)]
    enum Request {
        QueueWrite,
        QueueRead,
        MainWrite,
        MainRead {
            cells: usize,
        },
        /// A main read that returned one cell, another owner's.
        MainReadOther,
        /// A queue read whose first cell was another owner's.
        QueueReadBehind,
        MainDelete,
        QueueDelete,
    }

    impl History {
        fn new() -> Self {
            History {
                lockers: Vec::new(),
            }
        }

        fn send(&mut self, ms: u64, locker: usize, request: Request) -> &mut Self {
            let (op, cells, ours) = match request {
                Request::QueueWrite | Request::QueueDelete => (Op::Other, None, false),
                Request::QueueRead => (Op::QueueRead, Some(1), true),
                Request::QueueReadBehind => (Op::QueueRead, Some(2), false),
                Request::MainWrite => (Op::MainWrite, None, false),
                Request::MainRead { cells } => (Op::MainRead, Some(cells), cells == 1),
                Request::MainReadOther => (Op::MainRead, Some(1), false),
                Request::MainDelete => (Op::MainDelete, None, false),
            };
            if self.lockers.len() <= locker {
                self.lockers.resize(locker + 1, Vec::new());
            }
            self.lockers[locker].push(Sent {
                at: Duration::from_millis(ms),
                op,
                cells,
                ours,
            });
            self
        }

        /// A release: both deletes at once.
        fn release(&mut self, ms: u64, locker: usize) -> &mut Self {
            self.send(ms, locker, Request::MainDelete)
                .send(ms, locker, Request::QueueDelete)
        }
    }

    #[test]
    fn a_hand_off_through_the_queue_splits_into_four_stages_that_add_up() {
        let mut history = History::new();
        history
            .send(0, 0, Request::QueueWrite)
            .send(1, 0, Request::QueueRead)
            .send(2, 0, Request::MainWrite)
            .send(3, 0, Request::MainRead { cells: 1 })
            .send(0, 1, Request::QueueWrite)
            .send(2, 1, Request::QueueRead)
            .release(4, 0)
            .send(5, 1, Request::QueueRead)
            .send(7, 1, Request::MainWrite)
            .send(8, 1, Request::MainRead { cells: 1 })
            .release(10, 1);
        let breakdown = HandoffBreakdown::of(&history.lockers);
        // Client 0's hold had no release before it; client 1's is the hand-off.
        assert_eq!((breakdown.handoffs, breakdown.other_holds), (1, 1));
        let summary = breakdown.summary();
        assert_eq!(summary.detection_ms, 1.0);
        assert_eq!(summary.seeing_read_ms, 2.0);
        assert_eq!(summary.main_write_ms, 1.0);
        assert_eq!(summary.main_read_and_turn_ms, 2.0);
        assert_eq!(summary.total_ms, 6.0);
    }

    #[test]
    fn a_read_sent_before_the_release_counts_a_negative_detection() {
        let mut history = History::new();
        history
            .send(1, 0, Request::QueueRead)
            .send(2, 0, Request::MainWrite)
            .send(3, 0, Request::MainRead { cells: 1 })
            .send(4, 1, Request::QueueRead)
            .release(5, 0)
            .send(6, 1, Request::MainWrite)
            .send(7, 1, Request::MainRead { cells: 1 })
            .release(8, 1);
        let summary = HandoffBreakdown::of(&history.lockers).summary();
        assert_eq!(summary.handoffs, 1);
        assert_eq!(summary.detection_ms, -1.0);
        assert_eq!(summary.total_ms, 3.0);
    }

    #[test]
    fn the_fast_path_and_waiting_in_the_main_row_are_not_hand_offs_through_the_queue() {
        let mut history = History::new();
        history
            // A hold by the fast path: queue and main writes together, then both reads.
            .send(0, 0, Request::QueueWrite)
            .send(0, 0, Request::MainWrite)
            .send(1, 0, Request::QueueRead)
            .send(1, 0, Request::MainRead { cells: 1 })
            .release(2, 0)
            // Waiting in the main row: a main read shows two cells, a later one only ours.
            .send(3, 1, Request::QueueRead)
            .send(4, 1, Request::MainWrite)
            .send(5, 1, Request::MainRead { cells: 2 })
            .send(6, 1, Request::MainRead { cells: 1 })
            .release(7, 1);
        let breakdown = HandoffBreakdown::of(&history.lockers);
        assert_eq!((breakdown.handoffs, breakdown.other_holds), (0, 2));
        assert!(breakdown.summary().total_ms.is_nan());
    }

    #[test]
    fn after_a_conflict_the_hand_off_counts_from_the_queue_read_before_the_last_main_write() {
        let mut history = History::new();
        history
            .send(0, 0, Request::QueueRead)
            .send(1, 0, Request::MainWrite)
            .send(2, 0, Request::MainRead { cells: 1 })
            .send(2, 1, Request::QueueRead)
            .release(3, 0)
            .send(3, 1, Request::QueueRead)
            .send(4, 1, Request::MainWrite)
            // Another owner's cell: a conflict, the main cell deleted, the queue read again.
            .send(5, 1, Request::MainRead { cells: 2 })
            .send(6, 1, Request::MainDelete)
            .send(8, 1, Request::QueueRead)
            .send(9, 1, Request::MainWrite)
            .send(10, 1, Request::MainRead { cells: 1 })
            .release(12, 1);
        let summary = HandoffBreakdown::of(&history.lockers).summary();
        assert_eq!((summary.handoffs, summary.other_holds), (1, 1));
        assert_eq!(summary.detection_ms, 5.0);
        assert_eq!(summary.total_ms, 9.0);
    }

    #[test]
    fn a_hold_without_a_release_is_not_counted() {
        let mut history = History::new();
        history
            .send(1, 0, Request::QueueRead)
            .send(2, 0, Request::MainWrite)
            .send(3, 0, Request::MainRead { cells: 1 })
            .send(4, 0, Request::QueueRead);
        let breakdown = HandoffBreakdown::of(&history.lockers);
        assert_eq!(breakdown, HandoffBreakdown::default());
    }

    #[test]
    fn a_main_read_that_shows_only_another_owners_cell_is_no_hold() {
        let mut history = History::new();
        history
            .send(1, 0, Request::QueueRead)
            .send(2, 0, Request::MainWrite)
            .send(3, 0, Request::MainRead { cells: 1 })
            .release(4, 0)
            // Our main write not yet visible, the holder's cell alone: we retreat.
            .send(1, 1, Request::QueueRead)
            .send(2, 1, Request::MainWrite)
            .send(3, 1, Request::MainReadOther)
            .send(3, 1, Request::MainDelete)
            .send(5, 1, Request::QueueRead)
            .send(6, 1, Request::MainWrite)
            .send(7, 1, Request::MainRead { cells: 1 })
            .release(8, 1);
        let summary = HandoffBreakdown::of(&history.lockers).summary();
        assert_eq!((summary.handoffs, summary.other_holds), (1, 1));
    }

    #[test]
    fn a_fast_path_that_finds_an_owner_ahead_in_the_queue_is_no_hold() {
        let mut history = History::new();
        history
            .send(1, 0, Request::QueueRead)
            .send(2, 0, Request::MainWrite)
            .send(3, 0, Request::MainRead { cells: 1 })
            .release(6, 0)
            // The fast path: both writes, then both reads; the queue shows client 0 ahead
            // (whose main cell is not visible yet), so client 1 deletes its main cell.
            .send(3, 1, Request::QueueWrite)
            .send(3, 1, Request::MainWrite)
            .send(4, 1, Request::QueueReadBehind)
            .send(4, 1, Request::MainRead { cells: 1 })
            .send(5, 1, Request::MainDelete)
            .send(7, 1, Request::QueueRead)
            .send(8, 1, Request::MainWrite)
            .send(9, 1, Request::MainRead { cells: 1 })
            .release(10, 1);
        let summary = HandoffBreakdown::of(&history.lockers).summary();
        assert_eq!((summary.handoffs, summary.other_holds), (1, 1));
    }
}
