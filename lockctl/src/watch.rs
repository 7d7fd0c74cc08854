//! `watch`: a live view of a lock, inspected again and again.
//!
//! Each inspection is one block of output on standard output, starting with the time (the
//! lock's clock: the wall clock on Cassandra, the simulation's in the demonstration):
//!
//! * the whole report when the lock changed since the last inspection (another holder,
//!   someone joined or left the queue, a cell turned stale, the fence moved), and for the
//!   first inspection;
//! * one line, `<time> unchanged: holder ..., N in the queue`, when it did not: the ages in
//!   the report change every time, so they do not count;
//! * one line, `<time> inspection failed: <error>; still watching`, when the inspection
//!   failed (a timeout, a node down): the watch goes on, and the next report is whole.
//!
//! It runs until Ctrl-C, until `--count` inspections are done, or until standard output
//! is closed (`lockctl watch ... | head`).

use std::future::Future;
use std::io::Write;
use std::time::Duration;

use lock_core::{LockId, LockStorage, Locker};
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
}

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
/// until `stop` completes, the count is done or `out` is closed. Inspections that fail are
/// written and the watch goes on; only a failure to write to `out` (other than its being
/// closed) ends it with an error.
pub async fn watch<S: LockStorage>(
    locker: &Locker<S>,
    lock_id: &LockId,
    plan: Plan,
    stop: impl Future<Output = ()>,
    out: &mut impl Write,
) -> Result<End, Error> {
    let mut ticks = tokio::time::interval(plan.every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(stop);
    let mut last: Option<Shape> = None;
    let mut done = 0;
    loop {
        let inspected = tokio::select! {
            () = &mut stop => return Ok(End::Stopped(done)),
            inspected = async {
                ticks.tick().await;
                locker.inspect(lock_id, INSPECT_LIMIT).await
            } => inspected,
        };
        done += 1;
        let now = locker.clock().now().timestamp;
        let text = match inspected {
            Ok(report) => {
                let shape = Shape::of(&report);
                if last.as_ref() == Some(&shape) {
                    format!("{} unchanged: {}\n", utc(now), shape.summary())
                } else {
                    last = Some(shape);
                    format!("{}\n{}", utc(now), render(&report, now))
                }
            }
            Err(error) => {
                last = None;
                format!("{} inspection failed: {error}; still watching\n", utc(now))
            }
        };
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

    #[test]
    fn a_watch_reports_changes_in_full_and_the_rest_in_one_line() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let lock_id = LockId::new("account:42").unwrap();
        let mut out = Vec::new();
        let end = runtime
            .block_on(async {
                let simulation = Simulation::start(
                    &lock_id,
                    Demo {
                        waiters: 1,
                        crashed: true,
                    },
                )
                .await?;
                // The crashed holder's cells turn stale, then expire and the waiter takes
                // over: two changes in 15 s.
                let plan = Plan {
                    every: Duration::from_secs(1),
                    count: Some(15),
                };
                watch(
                    simulation.admin(),
                    &lock_id,
                    plan,
                    std::future::pending(),
                    &mut out,
                )
                .await
            })
            .unwrap();
        assert_eq!(end, End::Counted);
        let out = String::from_utf8(out).unwrap();
        let reports = out.matches("lock account:42").count();
        let unchanged = out.matches(" unchanged: holder ").count();
        assert_eq!(reports + unchanged, 15, "{out}");
        assert!(reports >= 3, "first, stale, taken over:\n{out}");
        assert!(unchanged >= 1, "{out}");
        assert!(out.starts_with("2025-01-01T00:00:00"), "{out}");
        assert!(out.contains("STALE"), "{out}");
        let holders: Vec<&str> = out
            .lines()
            .filter_map(|line| line.strip_prefix("  holder: "))
            .collect();
        assert_ne!(
            holders.first(),
            holders.last(),
            "the waiter took over:\n{out}"
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
                    &mut Closed,
                )
                .await?;
                let stopped = watch(
                    simulation.admin(),
                    &lock_id,
                    plan,
                    tokio::time::sleep(Duration::from_millis(2500)),
                    &mut Vec::new(),
                )
                .await?;
                Ok::<_, Error>((closed, stopped))
            })
            .unwrap();
        assert_eq!(closed, End::OutputClosed);
        assert_eq!(stopped, End::Stopped(3));
    }
}
