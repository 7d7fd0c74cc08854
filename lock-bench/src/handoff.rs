//! Where a hand-off's time goes, from the simulated cluster's history of a run.
//!
//! A hand-off of the queue algorithm (docs/algorithm.md, section 8.5) runs from the
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

use std::collections::BTreeMap;
use std::time::Duration;

use lock_core::storage::{RowKind, StorageRequest, StorageResponse};
use lock_storage_memory::{ClientId, HistoryEntry, HistoryEvent};
use serde::Serialize;

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

    /// Splits the hand-offs recorded in `history` (a run's, with
    /// `ClusterConfig::record_history` on).
    pub fn of(history: &[HistoryEntry]) -> Self {
        let requests = client_requests(history);
        let mut holds = Vec::new();
        for (client, sent) in &requests {
            holds.extend(holds_of(*client, sent));
        }
        let mut releases: Vec<(Duration, ClientId)> = holds
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

/// What a request did, as far as hand-offs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    QueueRead,
    MainWrite,
    MainRead,
    MainDelete,
    Other,
}

/// One request of one client: when it was sent, what it did, and how many cells a read
/// returned (none before its answer, or for a failed read).
#[derive(Clone, Copy, Debug)]
struct Sent {
    at: Duration,
    op: Op,
    cells: Option<usize>,
}

/// The sends of the normal path to a hold.
#[derive(Clone, Copy, Debug)]
struct Path {
    queue_read: Duration,
    main_write: Duration,
    main_read: Duration,
}

/// A hold: who, when it ended, and how it was reached (`None`: not by the normal path).
#[derive(Clone, Copy, Debug)]
struct Hold {
    client: ClientId,
    released_at: Duration,
    path: Option<Path>,
}

/// Every client's requests in the order it sent them, with the answers' cell counts.
fn client_requests(history: &[HistoryEntry]) -> BTreeMap<ClientId, Vec<Sent>> {
    let mut by_client: BTreeMap<ClientId, Vec<Sent>> = BTreeMap::new();
    let mut where_sent: BTreeMap<u64, (ClientId, usize)> = BTreeMap::new();
    for entry in history {
        match &entry.event {
            HistoryEvent::Requested {
                client,
                request,
                operation,
            } => {
                let sent = by_client.entry(*client).or_default();
                where_sent.insert(*request, (*client, sent.len()));
                sent.push(Sent {
                    at: entry.at,
                    op: op_of(operation),
                    cells: None,
                });
            }
            HistoryEvent::Answered {
                request,
                result: Ok(StorageResponse::Cells(cells)),
                ..
            } => {
                if let Some((client, at)) = where_sent.get(request)
                    && let Some(sent) = by_client.get_mut(client).and_then(|list| list.get_mut(*at))
                {
                    sent.cells = Some(cells.len());
                }
            }
            _ => {}
        }
    }
    by_client
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

/// One client's holds: each main read that found exactly one cell and was followed by a
/// main-row delete before any other queue or main read (its release; writes in between
/// are fencing or lease renewals). Its path is the normal one if the two requests before
/// that main read were a queue read and a main write.
fn holds_of(client: ClientId, sent: &[Sent]) -> impl Iterator<Item = Hold> + '_ {
    sent.iter().enumerate().filter_map(move |(at, read)| {
        if read.op != Op::MainRead || read.cells != Some(1) {
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
    use lock_core::storage::{Cell, CellDelete, CellWrite, RowKey, RowRead};
    use lock_core::{ColumnName, LockId, Timestamp};

    use super::*;

    /// Builds a history from `(ms, client, request)` sends; a main read answers with
    /// `cells` cells at the same instant.
    struct History {
        entries: Vec<HistoryEntry>,
        next_request: u64,
    }

    #[derive(Clone, Copy)]
    enum Request {
        QueueWrite,
        QueueRead,
        MainWrite,
        MainRead { cells: usize },
        MainDelete,
        QueueDelete,
    }

    impl History {
        fn new() -> Self {
            History {
                entries: Vec::new(),
                next_request: 0,
            }
        }

        fn send(&mut self, ms: u64, client: usize, request: Request) -> &mut Self {
            let lock_id = LockId::new("l").unwrap();
            let row = |kind| RowKey::new(kind, lock_id.clone());
            let column = ColumnName::new("c");
            let write = |kind| {
                StorageRequest::Write(CellWrite {
                    row: row(kind),
                    column: column.clone(),
                    value: Vec::new(),
                    timestamp: Timestamp::from_micros(1),
                    ttl: None,
                })
            };
            let delete = |kind| {
                StorageRequest::Delete(CellDelete {
                    row: row(kind),
                    column: column.clone(),
                    timestamp: Timestamp::from_micros(1),
                })
            };
            let (operation, answer) = match request {
                Request::QueueWrite => (write(RowKind::Queue), None),
                Request::QueueRead => (
                    StorageRequest::Read(RowRead::first(row(RowKind::Queue), 64)),
                    Some(1),
                ),
                Request::MainWrite => (write(RowKind::Main), None),
                Request::MainRead { cells } => (
                    StorageRequest::Read(RowRead::first(row(RowKind::Main), 2)),
                    Some(cells),
                ),
                Request::MainDelete => (delete(RowKind::Main), None),
                Request::QueueDelete => (delete(RowKind::Queue), None),
            };
            let at = Duration::from_millis(ms);
            let request = self.next_request;
            self.next_request += 1;
            let client = ClientId(client);
            self.entries.push(HistoryEntry {
                at,
                event: HistoryEvent::Requested {
                    client,
                    request,
                    operation,
                },
            });
            let cell = Cell {
                column: ColumnName::new("c"),
                value: Vec::new(),
                write_timestamp: Timestamp::from_micros(1),
            };
            let response = match answer {
                Some(cells) => StorageResponse::Cells(vec![cell; cells]),
                None => StorageResponse::Done,
            };
            self.entries.push(HistoryEntry {
                at,
                event: HistoryEvent::Answered {
                    client,
                    request,
                    result: Ok(response),
                },
            });
            self
        }

        /// A release: both deletes at once.
        fn release(&mut self, ms: u64, client: usize) -> &mut Self {
            self.send(ms, client, Request::MainDelete)
                .send(ms, client, Request::QueueDelete)
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
        let breakdown = HandoffBreakdown::of(&history.entries);
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
        let summary = HandoffBreakdown::of(&history.entries).summary();
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
        let breakdown = HandoffBreakdown::of(&history.entries);
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
        let summary = HandoffBreakdown::of(&history.entries).summary();
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
        let breakdown = HandoffBreakdown::of(&history.entries);
        assert_eq!(breakdown, HandoffBreakdown::default());
    }
}
