//! A run's progress on stderr: a progress bar when stderr is a terminal, and plain lines,
//! one per tenth of the run, when it is not (a pipe, a log file, a test, CI), so that logs
//! stay readable and stable.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::timeline::Timeline;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Nothing (`--quiet`).
    Quiet,
    /// A line at every tenth of the run.
    Lines,
    /// A progress bar, redrawn in place.
    Bar,
}

impl Mode {
    /// [`Mode::Bar`] if stderr is a terminal, else [`Mode::Lines`]; [`Mode::Quiet`] if
    /// progress is off.
    pub fn for_stderr(enabled: bool) -> Mode {
        if !enabled {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bar
        } else {
            Mode::Lines
        }
    }
}

/// The bar: the run's label, a bar as wide as the terminal leaves room for, the
/// acquisitions done, the run time (virtual or wall-clock) and the wall-clock ETA.
fn bar_style() -> Result<ProgressStyle, indicatif::style::TemplateError> {
    Ok(
        ProgressStyle::with_template("  {prefix} [{wide_bar}] {pos}/{len}, {msg}, ETA {eta}")?
            .progress_chars("=> "),
    )
}

/// The progress of one run of `total` acquisitions, counted as they complete.
pub struct RunProgress {
    label: String,
    total: u64,
    done: AtomicU64,
    origin: Timeline,
    wall_origin: Instant,
    mode: Mode,
    bar: Option<ProgressBar>,
}

impl RunProgress {
    /// Starts showing the progress of the run `label` of `total` acquisitions; run time is
    /// measured on `origin` (virtual or wall-clock, as the run's), wall time from now.
    pub fn new(label: &str, total: u64, origin: Timeline, mode: Mode) -> Self {
        let bar = (mode == Mode::Bar).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            // The template is a constant that a unit test parses, so the default style is
            // never used in practice.
            if let Ok(style) = bar_style() {
                bar.set_style(style);
            }
            bar.set_prefix(label.to_owned());
            bar.set_message("run time 0.0 s");
            bar
        });
        RunProgress {
            label: label.to_owned(),
            total,
            done: AtomicU64::new(0),
            origin,
            wall_origin: Instant::now(),
            mode,
            bar,
        }
    }

    /// The acquisitions the run makes in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts one more completed acquisition and returns the count so far, for
    /// [`RunProgress::show`].
    pub fn count(&self) -> u64 {
        self.done.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Shows that `done` acquisitions are complete: moves the bar, or prints a line if
    /// `done` ends a tenth of the run.
    pub fn show(&self, done: u64) {
        let run_seconds = || self.origin.elapsed().as_secs_f64();
        match &self.bar {
            Some(bar) => {
                if done.is_multiple_of((self.total / 100).max(1)) {
                    bar.set_message(format!("run time {:.1} s", run_seconds()));
                }
                bar.set_position(done);
            }
            None if self.mode == Mode::Lines
                && (done.is_multiple_of((self.total / 10).max(1)) || done == self.total) =>
            {
                crate::note(&format!(
                    "  {}: {:>3}% ({done}/{} acquisitions; {:.1} s of run time, {:.1} s wall)",
                    self.label,
                    done * 100 / self.total.max(1),
                    self.total,
                    run_seconds(),
                    self.wall_origin.elapsed().as_secs_f64(),
                ));
            }
            None => {}
        }
    }

    /// Prints `line` on stderr, above the bar if there is one (unless quiet).
    pub fn line(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| crate::note(line)),
            None if self.mode == Mode::Lines => crate::note(line),
            None => {}
        }
    }

    /// Removes the bar, once the run is over.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_shows_nothing_and_every_mode_counts() {
        assert_eq!(Mode::for_stderr(false), Mode::Quiet);
        for mode in [Mode::Quiet, Mode::Lines] {
            let progress = RunProgress::new("test", 3, Timeline::start(), mode);
            assert_eq!((progress.count(), progress.count()), (1, 2));
            progress.show(2);
            progress.line("a line");
            progress.finish();
        }
    }

    #[test]
    fn the_bar_template_parses() {
        assert!(bar_style().is_ok());
        let bar = RunProgress::new("test", 200, Timeline::start(), Mode::Bar);
        assert!(bar.bar.is_some());
        assert_eq!(bar.count(), 1);
        bar.show(1);
        bar.finish();
    }
}
