//! `watch`: a live view of a lock, inspected again and again.
//!
//! Each inspection prints on standard output one line that starts with the time (the
//! lock's clock: the wall clock on Cassandra, the simulation's in the demonstration):
//!
//! * `<time>` and the whole report below it, for the first inspection and the first after
//!   a failed one;
//! * `<time> <what changed>, queue N waiting` when the lock changed (another holder, an
//!   owner entering or leaving the main row or the queue, a cell turning stale, the fence
//!   moving: [`Shape::changes_since`]); after every [`Plan::full_every`] such lines the
//!   next change prints the whole report below its line, so that a recent full report is
//!   never far up the scrollback;
//! * `<time> unchanged: holder ..., queue N waiting` when it did not: the ages in the
//!   report change every time, so they do not count;
//! * `<time> inspection failed: <error>; still watching` when the inspection failed (a
//!   timeout, a node down): the watch goes on, and the next report is whole.
//!
//! It runs until Ctrl-C, until `--count` inspections are done, or until standard output
//! is closed (`lockctl watch ... | head`).

use std::future::Future;
use std::io::Write;
use std::ops::ControlFlow;
use std::time::Duration;

use fair_lock::Locker;
use lock_core::machine::LockReport;
use lock_core::{LockId, LockStorage, Timestamp};
use tokio::time::MissedTickBehavior;

use crate::Error;
use crate::report::{INSPECT_LIMIT, Shape, render, utc};

/// The longest `--every` accepted.
pub const MAX_EVERY: Duration = Duration::from_secs(3600);

/// Parses `--every`: a positive duration of at most an hour, in `humantime`'s syntax
/// (`500ms`, `2s`, `1min`, `1s 500ms`).
pub fn parse_every(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let example = "give a positive interval of at most an hour, e.g. 500ms, 2s or 1min";
    if text.starts_with('-') {
        return Err(format!("{text:?} is negative; {example}"));
    }
    let every = humantime::parse_duration(text)
        .map_err(|error| format!("{text:?} is not a duration ({error}); {example}"))?;
    if every.is_zero() {
        return Err(format!(
            "{text:?} is zero, which would inspect without pause; {example}"
        ));
    }
    if every > MAX_EVERY {
        return Err(format!("{text:?} is longer than an hour; {example}"));
    }
    Ok(every)
}

/// How often and how many times to inspect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The time from the start of one inspection to the start of the next.
    pub every: Duration,
    /// How many inspections, failed ones included; `None` for no limit.
    pub count: Option<u64>,
    /// How many change lines are printed between two full reports (at least 1): the next
    /// change after that many prints the whole report below its line.
    pub full_every: u64,
}

/// The default of `--full-every`: a full report after every 10 change lines.
pub const FULL_EVERY: u64 = 10;

/// Why a watch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `stop` completed (Ctrl-C) after this many inspections.
    Stopped(u64),
    /// The planned count of inspections was done.
    Counted,
    /// Standard output (or whatever `out` is) was closed.
    OutputClosed,
}

/// Watches `lock_id` with `locker` as `plan` says, writing to `out` (see the module docs),
/// until `stop` completes, the count is done or `out` is closed. After writing each
/// inspection (but the last of the count) it calls `pause`, which may wait (the
/// demonstration waits for the wall clock there, its simulation's clock being frozen
/// meanwhile) and ends the watch with [`End::Stopped`] by returning `Break`. Inspections
/// that fail are written and the watch goes on; only a failure to write to `out` (other
/// than its being closed) ends it with an error.
pub async fn watch<S: LockStorage>(
    locker: &Locker<S>,
    lock_id: &LockId,
    plan: Plan,
    stop: impl Future<Output = ()>,
    mut pause: impl FnMut() -> ControlFlow<()>,
    out: &mut impl Write,
) -> Result<End, Error> {
    let mut ticks = tokio::time::interval(plan.every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(stop);
    let mut report = Reporter::new(plan.full_every);
    let mut done = 0;
    loop {
        let inspected = tokio::select! {
            biased;
            () = &mut stop => return Ok(End::Stopped(done)),
            inspected = async {
                ticks.tick().await;
                locker.inspect(lock_id, INSPECT_LIMIT).await
            } => inspected,
        };
        done += 1;
        let text = report.text(inspected, locker.clock().now().timestamp);
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                return Ok(End::OutputClosed);
            }
            Err(source) => {
                return Err(Error::Io {
                    what: "cannot write to standard output",
                    source,
                });
            }
        }
        if plan.count.is_some_and(|count| done >= count) {
            return Ok(End::Counted);
        }
        if pause().is_break() {
            return Ok(End::Stopped(done));
        }
    }
}

/// What `watch` remembers between inspections to decide what to print.
struct Reporter {
    /// The shape of the last successful inspection.
    last: Option<Shape>,
    /// Whether the next successful inspection prints the whole report: the first, and the
    /// first after a failed one.
    whole: bool,
    /// Change lines printed since the last whole report.
    lines: u64,
    /// [`Plan::full_every`].
    full_every: u64,
}

impl Reporter {
    fn new(full_every: u64) -> Reporter {
        Reporter {
            last: None,
            whole: true,
            lines: 0,
            full_every: full_every.max(1),
        }
    }

    /// What to print for one inspection made at `now`.
    fn text(&mut self, inspected: Result<LockReport, lock_core::Error>, now: Timestamp) -> String {
        let report = match inspected {
            Ok(report) => report,
            Err(error) => {
                self.whole = true;
                return format!("{} inspection failed: {error}; still watching\n", utc(now));
            }
        };
        let shape = Shape::of(&report);
        let changes = match &self.last {
            Some(last) if *last == shape => None,
            Some(last) => Some(shape.changes_since(last)),
            None => None,
        };
        let whole = self.whole || (changes.is_some() && self.lines >= self.full_every);
        let text = match (whole, changes) {
            (true, Some(changes)) => format!("{} {changes}\n{}", utc(now), render(&report, now)),
            (true, None) => format!("{}\n{}", utc(now), render(&report, now)),
            (false, Some(changes)) => format!("{} {changes}\n", utc(now)),
            (false, None) => format!("{} unchanged: {}\n", utc(now), shape.summary()),
        };
        if whole {
            self.lines = 0;
        } else if self.last.as_ref() != Some(&shape) {
            self.lines += 1;
        }
        self.whole = false;
        self.last = Some(shape);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::{Demo, Simulation};

    #[test]
    fn every_is_a_positive_duration_of_at_most_an_hour() {
        assert_eq!(parse_every("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_every(" 2s "), Ok(Duration::from_secs(2)));
        assert_eq!(parse_every("1h"), Ok(MAX_EVERY));
        for (text, expected) in [
            ("0", "zero"),
            ("0s", "zero"),
            ("-1s", "negative"),
            ("61min", "longer than an hour"),
            ("5", "not a duration"),
            ("soon", "not a duration"),
            ("99999999999999999999h", "not a duration"),
        ] {
            let error = parse_every(text).unwrap_err();
            assert!(
                error.contains(expected) && error.contains("e.g. 500ms"),
                "{text}: {error}"
            );
        }
    }

    fn paused() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    /// The output of a watch of a demonstration lock (seeded, on the paused clock) whose
    /// holder crashed, with one waiter, inspected every second `count` times.
    fn crashed_holder_watched(count: u64, full_every: u64) -> String {
        let lock_id = LockId::new("account:42").unwrap();
        let mut out = Vec::new();
        let end = paused()
            .block_on(async {
                let simulation = Simulation::start(
                    &lock_id,
                    Demo {
                        waiters: 1,
                        crashed: true,
                    },
                )
                .await?;
                let plan = Plan {
                    every: Duration::from_secs(1),
                    count: Some(count),
                    full_every,
                };
                watch(
                    simulation.admin(),
                    &lock_id,
                    plan,
                    std::future::pending(),
                    || ControlFlow::Continue(()),
                    &mut out,
                )
                .await
            })
            .unwrap();
        assert_eq!(end, End::Counted);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_watch_prints_the_first_report_whole_and_then_one_line_per_inspection() {
        let out = crashed_holder_watched(15, FULL_EVERY);
        assert_eq!(out.matches("lock account:42").count(), 1, "{out}");
        assert!(out.starts_with("2025-01-01T00:00:00"), "{out}");
        let holder = out
            .lines()
            .find_map(|line| line.strip_prefix("  holder: "))
            .unwrap_or_else(|| panic!("no holder in:\n{out}"));
        let waiter = out
            .lines()
            .find_map(|line| line.strip_prefix("    #0   "))
            .and_then(|entry| entry.split_whitespace().next())
            .unwrap_or_else(|| panic!("no waiter in:\n{out}"));
        let lines: Vec<&str> = out
            .lines()
            .filter(|line| line.starts_with("2025-"))
            .collect();
        assert_eq!(lines.len(), 15, "one line per inspection:\n{out}");
        let changes: Vec<&str> = lines
            .iter()
            .skip(1)
            .filter(|line| !line.contains(" unchanged: "))
            .map(|line| line.split_once(' ').map_or("", |(_, change)| change))
            .collect();
        assert_eq!(
            changes,
            [
                format!("{holder}'s main cell STALE, queue 1 waiting"),
                format!("holder {holder} -> {waiter}, queue 0 waiting"),
            ],
            "{out}"
        );
        assert!(
            lines[1].ends_with(&format!(" unchanged: holder {holder}, queue 1 waiting")),
            "{out}"
        );
    }

    #[test]
    fn a_watch_prints_the_whole_report_again_after_full_every_change_lines() {
        // With a full report after every change line, the second change comes whole.
        let out = crashed_holder_watched(15, 1);
        let reports: Vec<&str> = out.split("lock account:42\n").collect();
        assert_eq!(
            reports.len(),
            3,
            "the first report and the second change:\n{out}"
        );
        assert!(
            reports[1].contains(" -> ") && reports[1].trim_end().ends_with("waiting"),
            "the holder changes, on the line above the report:\n{out}"
        );
    }

    #[test]
    fn a_watch_ends_when_stopped_or_when_its_output_is_closed() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let lock_id = LockId::new("account:42").unwrap();
        let plan = Plan {
            every: Duration::from_secs(1),
            count: None,
            full_every: FULL_EVERY,
        };
        let (closed, stopped) = runtime
            .block_on(async {
                let simulation = Simulation::start(
                    &lock_id,
                    Demo {
                        waiters: 0,
                        crashed: false,
                    },
                )
                .await?;
                let closed = watch(
                    simulation.admin(),
                    &lock_id,
                    plan,
                    std::future::pending(),
                    || ControlFlow::Continue(()),
                    &mut Closed,
                )
                .await?;
                let stopped = watch(
                    simulation.admin(),
                    &lock_id,
                    plan,
                    tokio::time::sleep(Duration::from_millis(2500)),
                    || ControlFlow::Continue(()),
                    &mut Vec::new(),
                )
                .await?;
                // The pause ends it too, after the inspection it follows.
                let mut pauses = 0;
                let paused_out = watch(
                    simulation.admin(),
                    &lock_id,
                    plan,
                    std::future::pending(),
                    || {
                        pauses += 1;
                        if pauses == 2 {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        }
                    },
                    &mut Vec::new(),
                )
                .await?;
                assert_eq!(paused_out, End::Stopped(2));
                Ok::<_, Error>((closed, stopped))
            })
            .unwrap();
        assert_eq!(closed, End::OutputClosed);
        assert_eq!(stopped, End::Stopped(3));
    }
}
