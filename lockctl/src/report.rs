//! A lock's report, written for a terminal, and what `watch` compares between two of them.

use std::fmt::Write as _;
use std::time::Duration;

use lock_core::machine::{CellReport, LockReport};
use lock_core::{ColumnName, FencingToken, OwnerId, Timestamp};

/// How many cells per row an inspection reads.
pub const INSPECT_LIMIT: u32 = 1000;

/// What a live main cell is, told as the lock's own machines tell it (docs/algorithm.md,
/// sections "Who holds the lock" and "Waiting in the main row").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MainRole {
    /// The holder lock-core names ([`LockReport::holder`]): the only main cell, or among
    /// several the only one whose owner is not in the queue (a holder leaves the queue
    /// once it holds).
    Holder,
    /// The next owner, waiting in the main row for the holder to leave: its owner is first
    /// in the queue and every other main cell carries a queue column that sorts before its
    /// own, which is exactly when the acquire machine keeps its cell and waits.
    Waiting,
    /// An owner in the queue whose cell the acquire machine would not keep waiting: not
    /// first in the queue (a fast-path write), or beside a cell with a later column or none
    /// (two owners meeting at step 5). An acquisition being decided: the owner deletes its
    /// cell unless it finds it alone.
    Contending,
    /// An owner that is not in the queue while lock-core names no holder: a holder (it
    /// left the queue), or an owner whose queue cell ran out (a waiter that died). The data
    /// cannot tell which.
    Unqueued,
}

impl MainRole {
    /// The words a report prints for the role.
    pub fn label(self) -> &'static str {
        match self {
            MainRole::Holder => "holder",
            MainRole::Waiting => "next owner, waiting in the main row",
            MainRole::Contending => {
                "contending, not next in line (it deletes its cell unless it finds it alone)"
            }
            MainRole::Unqueued => {
                "not in the queue (a holder, or a waiter whose queue cell ran out)"
            }
        }
    }

    /// What a change line says of an owner whose cell entered the main row in this role;
    /// nothing for the holder, which the line names already.
    fn entered(self) -> Option<&'static str> {
        match self {
            MainRole::Holder => None,
            MainRole::Waiting => Some("waits in the main row"),
            MainRole::Contending => Some("contends in the main row"),
            MainRole::Unqueued => Some("is in the main row, not in the queue"),
        }
    }
}

/// The role of each of `report`'s main cells, in the order of [`LockReport::main`].
///
/// The rules are the acquire machine's (lock-core, `Acquire::may_wait_in_main`): an owner
/// first in the queue keeps its main cell and waits when every other main cell carries a
/// queue column that sorts before its own; those owners were ahead of it and have left the
/// queue. The holder is the one lock-core names.
pub fn main_roles(report: &LockReport) -> Vec<MainRole> {
    let head = report.queue.first().map(|entry| &entry.owner);
    report
        .main
        .iter()
        .map(|cell| {
            if report.holder.as_ref() == Some(&cell.owner) {
                return MainRole::Holder;
            }
            if !report.queue.iter().any(|entry| entry.owner == cell.owner) {
                return MainRole::Unqueued;
            }
            let waits = head == Some(&cell.owner)
                && cell.queue_column.as_ref().is_some_and(|ours| {
                    report
                        .main
                        .iter()
                        .filter(|other| other.owner != cell.owner)
                        .all(|other| {
                            other
                                .queue_column
                                .as_ref()
                                .is_some_and(|theirs| theirs < ours)
                        })
                });
            if waits {
                MainRole::Waiting
            } else {
                MainRole::Contending
            }
        })
        .collect()
}

/// The mark of a stale cell.
const STALE: &str = "  STALE (owner probably dead)";

/// Renders `report` for a terminal; ages are measured from `now`. Each main cell is
/// labelled with its [`MainRole`], and every cell not rewritten for longer than a live owner
/// lets pass is marked `STALE`.
pub fn render(report: &LockReport, now: Timestamp) -> String {
    let mut out = String::new();
    let age = |at: Timestamp| {
        format!(
            "{:.1} ms",
            now.saturating_duration_since(at).as_secs_f64() * 1e3
        )
    };
    let stale = |flag: bool| if flag { STALE } else { "" };
    let _ = writeln!(out, "lock {}", report.lock_id);
    match &report.holder {
        Some(holder) => {
            let _ = writeln!(out, "  holder: {holder}");
        }
        None => {
            let _ = writeln!(out, "  holder: none");
        }
    }
    let _ = writeln!(out, "  main row: {} live cell(s)", report.main.len());
    for (cell, role) in report.main.iter().zip(main_roles(report)) {
        let _ = writeln!(
            out,
            "    {}  {}, written {} ago{}",
            cell.owner,
            role.label(),
            age(cell.last_write),
            stale(cell.stale)
        );
    }
    let _ = writeln!(
        out,
        "  queue: {} waiting or holding, in order",
        report.queue.len()
    );
    for entry in &report.queue {
        let _ = writeln!(
            out,
            "    #{:<3} {}  enqueued {} ago, written {} ago{}",
            entry.position,
            entry.owner,
            age(entry.enqueued_at),
            age(entry.last_write),
            stale(entry.stale)
        );
    }
    if !report.shadow.is_empty() {
        let _ = writeln!(out, "  shadow row: {} live cell(s)", report.shadow.len());
        for cell in &report.shadow {
            let _ = writeln!(
                out,
                "    {}  written {} ago{}",
                cell.owner,
                age(cell.last_write),
                stale(cell.stale)
            );
        }
    }
    match report.fence {
        Some(fence) => {
            let _ = writeln!(out, "  fence: {fence}");
        }
        None => {
            let _ = writeln!(out, "  fence: none (no fencing token handed out yet)");
        }
    }
    if !report.malformed.is_empty() {
        let _ = writeln!(
            out,
            "  malformed cells (not written by the lock): {:?}",
            report.malformed
        );
    }
    if report.truncated {
        let _ = writeln!(
            out,
            "  (a row had {INSPECT_LIMIT} cells or more: only the first were read)"
        );
    }
    out
}

/// What `watch` compares from one inspection to the next: who holds the lock, who is in
/// the main row in which role, who waits in which order, which cells are stale, the fence.
/// Not the ages, which change every time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    holder: Option<OwnerId>,
    main: Vec<(OwnerId, MainRole, bool)>,
    queue: Vec<(OwnerId, bool)>,
    shadow: Vec<(OwnerId, bool)>,
    fence: Option<FencingToken>,
    malformed: Vec<ColumnName>,
    truncated: bool,
}

/// The most owner ids a change line lists for one kind of change; more are counted.
const NAMED_IN_A_LINE: usize = 2;

impl Shape {
    /// The shape of `report`.
    pub fn of(report: &LockReport) -> Shape {
        let cells = |cells: &[CellReport]| {
            cells
                .iter()
                .map(|cell| (cell.owner.clone(), cell.stale))
                .collect()
        };
        Shape {
            holder: report.holder.clone(),
            main: report
                .main
                .iter()
                .zip(main_roles(report))
                .map(|(cell, role)| (cell.owner.clone(), role, cell.stale))
                .collect(),
            queue: report
                .queue
                .iter()
                .map(|entry| (entry.owner.clone(), entry.stale))
                .collect(),
            shadow: cells(&report.shadow),
            fence: report.fence,
            malformed: report.malformed.clone(),
            truncated: report.truncated,
        }
    }

    /// The holder, or `none`.
    fn holder_name(&self) -> String {
        match &self.holder {
            Some(holder) => holder.to_string(),
            None => "none".to_owned(),
        }
    }

    /// How many queue cells are not the holder's: the owners waiting.
    fn waiting(&self) -> usize {
        self.queue
            .iter()
            .filter(|(owner, _)| Some(owner) != self.holder.as_ref())
            .count()
    }

    /// One line for an inspection that found the lock as before: the holder and how many
    /// wait in the queue.
    pub fn summary(&self) -> String {
        format!(
            "holder {}, queue {} waiting",
            self.holder_name(),
            self.waiting()
        )
    }

    /// One line saying what changed from `before` to this shape, comma-separated, then how
    /// many wait in the queue: `holder A -> B, queue 3 waiting`. The clauses, in this order:
    /// another holder; an owner entering the main row in a role other than holder, or
    /// leaving it; owners joining or leaving the queue (named up to two, counted beyond; the
    /// new holder leaving the queue as it takes the lock is implied); its order changing; a
    /// cell turning stale or being rewritten after it was; the fence moving without another
    /// holder; the shadow row, malformed cells or a truncated read changing.
    pub fn changes_since(&self, before: &Shape) -> String {
        let mut clauses = Vec::new();
        if self.holder != before.holder {
            clauses.push(format!(
                "holder {} -> {}",
                before.holder_name(),
                self.holder_name()
            ));
        }
        for (owner, role, _) in &self.main {
            let entered = !before
                .main
                .iter()
                .any(|(was, was_role, _)| was == owner && was_role == role);
            if let Some(words) = role.entered().filter(|_| entered) {
                clauses.push(format!("{owner} {words}"));
            }
        }
        for (owner, _, _) in &before.main {
            let gone = !self.main.iter().any(|(now, _, _)| now == owner);
            if gone && before.holder.as_ref() != Some(owner) {
                clauses.push(format!("{owner} left the main row"));
            }
        }
        let owners = |cells: &[(OwnerId, bool)]| -> Vec<OwnerId> {
            cells.iter().map(|(owner, _)| owner.clone()).collect()
        };
        let (queued_before, queued_now) = (owners(&before.queue), owners(&self.queue));
        let joined: Vec<&OwnerId> = queued_now
            .iter()
            .filter(|owner| !queued_before.contains(owner))
            .collect();
        let left: Vec<&OwnerId> = queued_before
            .iter()
            .filter(|owner| !queued_now.contains(owner) && self.holder.as_ref() != Some(*owner))
            .collect();
        for (moved, what) in [(&joined, "joined the queue"), (&left, "left the queue")] {
            if moved.len() > NAMED_IN_A_LINE {
                clauses.push(format!("{} owners {what}", moved.len()));
            } else {
                clauses.extend(moved.iter().map(|owner| format!("{owner} {what}")));
            }
        }
        let kept_before: Vec<&OwnerId> = queued_before
            .iter()
            .filter(|owner| queued_now.contains(owner))
            .collect();
        let kept_now: Vec<&OwnerId> = queued_now
            .iter()
            .filter(|owner| queued_before.contains(owner))
            .collect();
        if kept_before != kept_now {
            clauses.push("the queue's order changed".to_owned());
        }
        let flags = |shape: &Shape| -> Vec<(String, OwnerId, bool)> {
            let main = shape
                .main
                .iter()
                .map(|(owner, _, stale)| ("main", owner, *stale));
            let queue = shape
                .queue
                .iter()
                .map(|(owner, stale)| ("queue", owner, *stale));
            let shadow = shape
                .shadow
                .iter()
                .map(|(owner, stale)| ("shadow", owner, *stale));
            main.chain(queue)
                .chain(shadow)
                .map(|(row, owner, stale)| (row.to_owned(), owner.clone(), stale))
                .collect()
        };
        let was_flagged = flags(before);
        for (row, owner, stale) in flags(self) {
            let was = was_flagged
                .iter()
                .find(|(was_row, was_owner, _)| *was_row == row && *was_owner == owner)
                .map(|(_, _, was)| *was);
            match (was, stale) {
                (Some(false), true) | (None, true) => {
                    clauses.push(format!("{owner}'s {row} cell STALE"));
                }
                (Some(true), false) => {
                    clauses.push(format!("{owner}'s {row} cell rewritten, no longer STALE"));
                }
                _ => {}
            }
        }
        if self.fence != before.fence && self.holder == before.holder {
            match self.fence {
                Some(fence) => clauses.push(format!("fence {fence}")),
                None => clauses.push("fence gone".to_owned()),
            }
        }
        if owners(&self.shadow) != owners(&before.shadow) {
            clauses.push(format!("shadow row {} cell(s)", self.shadow.len()));
        }
        if self.malformed != before.malformed {
            clauses.push(format!("{} malformed cell(s)", self.malformed.len()));
        }
        if self.truncated != before.truncated {
            clauses.push(if self.truncated {
                format!("a row now has {INSPECT_LIMIT} cells or more")
            } else {
                format!("every row under {INSPECT_LIMIT} cells again")
            });
        }
        clauses.push(format!("queue {} waiting", self.waiting()));
        clauses.join(", ")
    }
}

/// The first microsecond RFC 3339 cannot write (year 10000), where `humantime` stops.
const RFC3339_END_MICROS: u64 = 253_402_300_800_000_000;

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of a timestamp (microseconds since the Unix epoch); a
/// timestamp past the year 9999, which only a broken clock gives, as its microseconds.
pub fn utc(at: Timestamp) -> String {
    let micros = at.as_micros();
    if micros >= RFC3339_END_MICROS {
        return format!("{micros} us after the Unix epoch");
    }
    let time = std::time::UNIX_EPOCH + Duration::from_micros(micros);
    humantime::format_rfc3339_millis(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::machine::QueueEntry;
    use lock_core::{LockId, QueueColumn};

    const EPOCH: u64 = 1_735_689_600_000_000;

    fn owner(name: &str) -> OwnerId {
        OwnerId::new(name).unwrap()
    }

    fn at(millis: u64) -> Timestamp {
        Timestamp::from_micros(EPOCH + millis * 1000)
    }

    /// A main cell of `name`, carrying the queue column of its enqueue at `enqueued`
    /// (milliseconds after the epoch) or none.
    fn main(name: &str, enqueued: Option<u64>, stale: bool) -> CellReport {
        CellReport {
            column: ColumnName::new(format!("{name}.0")),
            owner: owner(name),
            queue_column: enqueued.map(|millis| QueueColumn::new(at(millis), owner(name))),
            last_write: at(100),
            stale,
        }
    }

    /// A lock whose main row holds `main` and whose queue holds `queued` (name, enqueue
    /// time) in that order; the holder is named as lock-core names it.
    fn lock(main: Vec<CellReport>, queued: &[(&str, u64)]) -> LockReport {
        let queue: Vec<QueueEntry> = queued
            .iter()
            .enumerate()
            .map(|(position, (name, enqueued))| QueueEntry {
                position,
                owner: owner(name),
                enqueued_at: at(*enqueued),
                age: Duration::ZERO,
                last_write: at(*enqueued),
                stale: false,
            })
            .collect();
        let unqueued: Vec<&CellReport> = main
            .iter()
            .filter(|cell| queue.iter().all(|entry| entry.owner != cell.owner))
            .collect();
        let holder = match (main.as_slice(), unqueued.as_slice()) {
            ([only], _) => Some(only.owner.clone()),
            (_, [only]) => Some(only.owner.clone()),
            _ => None,
        };
        LockReport {
            lock_id: LockId::new("account:42").unwrap(),
            holder,
            main,
            queue,
            shadow: Vec::new(),
            fence: None,
            malformed: Vec::new(),
            truncated: false,
        }
    }

    #[test]
    fn main_cells_are_labelled_as_the_acquire_machine_tells_them_apart() {
        use MainRole::{Contending, Holder, Unqueued, Waiting};
        // The holder left the queue; b, first in it, waits behind a's earlier column.
        let waiting = lock(
            vec![main("a", Some(1), false), main("b", Some(2), false)],
            &[("b", 2), ("c", 3)],
        );
        assert_eq!(waiting.holder, Some(owner("a")));
        assert_eq!(main_roles(&waiting), [Holder, Waiting]);
        // c is not first in the queue (a fast-path write), and b, finding c's later column
        // beside its own, does not wait either: both back off, as the acquire machine does.
        let fast_path = lock(
            vec![
                main("a", Some(1), false),
                main("b", Some(2), false),
                main("c", Some(3), false),
            ],
            &[("b", 2), ("c", 3)],
        );
        assert_eq!(main_roles(&fast_path), [Holder, Contending, Contending]);
        // b is first, but beside a cell whose column sorts after its own, or a cell with
        // no column (a bare owner id): a conflict, not a wait.
        for other in [main("a", Some(5), false), main("a", None, false)] {
            let conflict = lock(vec![other, main("b", Some(2), false)], &[("b", 2)]);
            assert_eq!(main_roles(&conflict), [Holder, Contending]);
        }
        // Two owners met at step 5 with the holder still queued (waiting in the main row
        // off): no holder is named, and both contend.
        let met = lock(
            vec![main("a", Some(1), false), main("b", Some(2), false)],
            &[("a", 1), ("b", 2)],
        );
        assert_eq!(met.holder, None);
        assert_eq!(main_roles(&met), [Contending, Contending]);
        // Two cells whose owners are not queued: one may be the holder, the other a
        // waiter whose queue cell ran out; the data cannot tell which.
        let lapsed = lock(
            vec![main("a", Some(1), true), main("b", Some(2), false)],
            &[("c", 3)],
        );
        assert_eq!(lapsed.holder, None);
        assert_eq!(main_roles(&lapsed), [Unqueued, Unqueued]);
    }

    #[test]
    fn a_report_labels_each_main_cell_and_marks_stale_ones() {
        let report = lock(
            vec![main("a", Some(1), true), main("b", Some(2), false)],
            &[("b", 2)],
        );
        let text = render(&report, at(8200));
        assert!(
            text.contains(
                "  main row: 2 live cell(s)\n    a  holder, written 8100.0 ms ago  STALE (owner \
                 probably dead)\n    b  next owner, waiting in the main row, written 8100.0 ms \
                 ago\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_change_line_says_what_changed_and_how_many_wait() {
        let before = Shape::of(&lock(
            vec![main("a", Some(1), false), main("b", Some(2), false)],
            &[("b", 2), ("c", 3)],
        ));
        assert_eq!(before.summary(), "holder a, queue 2 waiting");
        // a released: b holds and left the queue (implied), c is first and waits in the
        // main row, d, e and f joined.
        let after = Shape::of(&lock(
            vec![main("b", Some(2), false), main("c", Some(3), false)],
            &[("c", 3), ("d", 4), ("e", 5), ("f", 6)],
        ));
        assert_eq!(
            after.changes_since(&before),
            "holder a -> b, c waits in the main row, 3 owners joined the queue, queue 4 waiting"
        );
        // c gave up: it left the main row and the queue; b's cell turned stale.
        let gone = Shape::of(&lock(vec![main("b", Some(2), true)], &[("d", 4)]));
        assert_eq!(
            gone.changes_since(&after),
            "c left the main row, 3 owners left the queue, b's main cell STALE, queue 1 waiting"
        );
    }

    #[test]
    fn utc_times_are_civil_dates() {
        assert_eq!(utc(Timestamp::from_micros(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            utc(lock_storage_memory::ClusterConfig::DEFAULT_EPOCH),
            "2025-01-01T00:00:00.000Z"
        );
        // 2024-02-29T23:59:59.999Z, a leap day.
        assert_eq!(
            utc(Timestamp::from_micros(1_709_251_199_999_000)),
            "2024-02-29T23:59:59.999Z"
        );
        assert_eq!(
            utc(Timestamp::from_micros(RFC3339_END_MICROS - 1)),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            utc(Timestamp::from_micros(RFC3339_END_MICROS)),
            "253402300800000000 us after the Unix epoch"
        );
    }
}
