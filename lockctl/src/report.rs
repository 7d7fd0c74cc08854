//! A lock's report, written for a terminal, and what `watch` compares between two of them.

use std::fmt::Write as _;
use std::time::Duration;

use lock_core::machine::{CellReport, LockReport};
use lock_core::{ColumnName, FencingToken, OwnerId, Timestamp};

/// How many cells per row an inspection reads.
pub const INSPECT_LIMIT: u32 = 1000;

/// Renders `report` for a terminal; ages are measured from `now`. Every cell not rewritten
/// for longer than a live owner lets pass is marked `STALE`.
pub fn render(report: &LockReport, now: Timestamp) -> String {
    let mut out = String::new();
    let age = |at: Timestamp| {
        format!(
            "{:.1} ms",
            now.saturating_duration_since(at).as_secs_f64() * 1e3
        )
    };
    let stale = |flag: bool| {
        if flag {
            "  STALE (owner probably dead)"
        } else {
            ""
        }
    };
    let _ = writeln!(out, "lock {}", report.lock_id);
    match &report.holder {
        Some(holder) => {
            let _ = writeln!(out, "  holder: {holder}");
        }
        None => {
            let _ = writeln!(out, "  holder: none");
        }
    }
    let cells = |out: &mut String, row: &str, cells: &[CellReport]| {
        let _ = writeln!(out, "  {row}: {} live cell(s)", cells.len());
        for cell in cells {
            let _ = writeln!(
                out,
                "    {}  written {} ago{}",
                cell.owner,
                age(cell.last_write),
                stale(cell.stale)
            );
        }
    };
    cells(&mut out, "main row", &report.main);
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
        cells(&mut out, "shadow row", &report.shadow);
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

/// What `watch` compares from one inspection to the next: who holds the lock and who waits,
/// in which order, which cells are stale, the fence. Not the ages, which change every time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    holder: Option<OwnerId>,
    main: Vec<(OwnerId, bool)>,
    queue: Vec<(OwnerId, bool)>,
    shadow: Vec<(OwnerId, bool)>,
    fence: Option<FencingToken>,
    malformed: Vec<ColumnName>,
    truncated: bool,
}

impl Shape {
    /// The shape of `report`.
    pub fn of(report: &LockReport) -> Shape {
        let cells = |cells: &[lock_core::machine::CellReport]| {
            cells
                .iter()
                .map(|cell| (cell.owner.clone(), cell.stale))
                .collect()
        };
        Shape {
            holder: report.holder.clone(),
            main: cells(&report.main),
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

    /// One line for an inspection that found the lock as before: the holder and the length
    /// of the queue.
    pub fn summary(&self) -> String {
        let holder = match &self.holder {
            Some(holder) => holder.to_string(),
            None => "none".to_owned(),
        };
        format!("holder {holder}, {} in the queue", self.queue.len())
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
