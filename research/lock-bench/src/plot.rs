//! The pictures: the thesis's Figures 1 and 2 (acquisition number against the time it
//! completed, one line per process) and the distribution of wait times, drawn with plotters
//! on a bitmap with the DejaVu Sans font compiled into the binary (no system font library).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::types::{RangedCoordf64, RangedCoordu32};
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::BoxError;
use crate::experiment::{RunResult, Variant};
use crate::units::ms;

/// The font family every text is drawn in.
pub(crate) const FONT: &str = "sans-serif";

/// Line colours (the "tab10" palette), one per process or series.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub(crate) fn colour(index: usize) -> RGBColor {
    COLOURS[index % COLOURS.len()]
}

pub(crate) fn boxed<E: std::fmt::Display>(error: E) -> BoxError {
    format!("drawing failed: {error}").into()
}

/// Registers the embedded DejaVu Sans (regular and bold) as plotters' `sans-serif`.
/// Draws the legend box every figure uses: the series' labels at `position`, on white.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<(), BoxError> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, font_size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(boxed)
}

pub(crate) fn register_fonts() {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        // The bytes are a valid TrueType font compiled in; registration cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// The figure number of a variant: the thesis's 1 for the new algorithm and 2 for the old,
/// and our 3 for the bakery.
fn figure_number(variant: Variant) -> u8 {
    match variant {
        Variant::BASELINE => 2,
        Variant::BAKERY => 3,
        _ => 1,
    }
}

fn algorithm_title(variant: Variant) -> String {
    match variant {
        Variant::BASELINE => "old (baseline) algorithm".to_owned(),
        Variant::QUEUE => "new (queue) algorithm".to_owned(),
        Variant::QUEUE_FENCED => "new (queue) algorithm with fencing tokens".to_owned(),
        Variant::BAKERY => "bakery algorithm (Cassandra wiki, with lease)".to_owned(),
        other => format!("{} algorithm", other.label()),
    }
}

/// A unit for an axis: seconds for long spans, milliseconds for short ones.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Unit {
    /// Milliseconds per unit.
    ms: f64,
    name: &'static str,
}

impl Unit {
    /// Seconds if `span_ms` is 10 s or more, else milliseconds.
    fn for_span(span_ms: f64) -> Unit {
        if span_ms >= 10_000.0 {
            Unit {
                ms: 1000.0,
                name: "s",
            }
        } else {
            Unit {
                ms: 1.0,
                name: "ms",
            }
        }
    }
}

/// Each process's completion times (ms) by acquisition number, index 0 for number 1.
fn completion_times(run: &RunResult) -> Vec<Vec<f64>> {
    let mut times = vec![Vec::new(); run.spec.processes];
    for acquisition in &run.acquisitions {
        let line = &mut times[acquisition.process];
        let index = acquisition.number as usize - 1;
        if line.len() <= index {
            line.resize(index + 1, f64::NAN);
        }
        line[index] = ms(acquisition.acquired_at);
    }
    times
}

/// Draws one run's timeline on `area`: x the acquisition number, y the time since the run
/// started when it completed, one line per process (the thesis's figures). With more than
/// one process, a lower panel shows each process's lead or lag: the time of its k-th
/// acquisition minus the mean over processes of their k-th, which separates lines that
/// coincide in the upper panel.
fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    run: &RunResult,
    title: &str,
) -> Result<(), BoxError> {
    let area = area
        .margin(10, 0, 0, 0)
        .titled(title, (FONT, 24).into_font().style(FontStyle::Bold))
        .map_err(boxed)?;
    let times = completion_times(run);
    let (upper, lower) = if run.spec.processes > 1 {
        let height = area.dim_in_pixel().1;
        let (upper, lower) = area.split_vertically(height * 62 / 100);
        (upper, Some(lower))
    } else {
        (area, None)
    };
    let x_max = times.iter().map(Vec::len).max().unwrap_or(1).max(1) as u32;
    let duration = ms(run.duration).max(1.0);
    let unit = Unit::for_span(duration);
    let mut chart = per_acquisition_chart(
        &mut ChartBuilder::on(&upper),
        x_max,
        0.0..duration * 1.02 / unit.ms,
        &format!("completed at ({}, since the start)", unit.name),
    )?;
    for (process, line) in times.iter().enumerate() {
        let style = colour(process).stroke_width(2);
        let points = line
            .iter()
            .enumerate()
            .filter(|(_, time)| time.is_finite())
            .map(|(index, time)| (index as u32 + 1, time / unit.ms));
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(boxed)?
            .label(format!("process {}", process + 1))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 18)?;
    if let Some(lower) = lower {
        draw_lag(&lower, &times, x_max)?;
    }
    Ok(())
}

/// The lower panel of a timeline: each process's completion time of its k-th acquisition
/// minus the mean over all processes of theirs.
fn draw_lag<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    times: &[Vec<f64>],
    x_max: u32,
) -> Result<(), BoxError> {
    let common = times.iter().map(Vec::len).min().unwrap_or(0);
    let means: Vec<f64> = (0..common)
        .map(|k| times.iter().map(|line| line[k]).sum::<f64>() / times.len() as f64)
        .collect();
    let lags: Vec<Vec<(u32, f64)>> = times
        .iter()
        .map(|line| {
            (0..common)
                .filter(|&k| line[k].is_finite() && means[k].is_finite())
                .map(|k| (k as u32 + 1, line[k] - means[k]))
                .collect()
        })
        .collect();
    let extent = lags
        .iter()
        .flatten()
        .map(|(_, lag)| lag.abs())
        .fold(0.0, f64::max)
        .max(1.0);
    let unit = Unit::for_span(extent * 5.0);
    let bound = extent * 1.1 / unit.ms;
    let mut builder = ChartBuilder::on(area);
    builder.caption(
        "Lag: each process's k-th acquisition, completion time minus the mean over \
         processes (above 0: behind the others)",
        (FONT, 17),
    );
    let mut chart = per_acquisition_chart(
        &mut builder,
        x_max,
        -bound..bound,
        &format!("lag behind mean ({})", unit.name),
    )?;
    for (process, line) in lags.into_iter().enumerate() {
        let style = colour(process).stroke_width(1);
        chart
            .draw_series(LineSeries::new(
                line.into_iter().map(|(x, lag)| (x, lag / unit.ms)),
                style,
            ))
            .map_err(boxed)?;
    }
    Ok(())
}

/// A chart whose x axis is the acquisition number (1 to `x_max`) and whose y axis spans
/// `y_range`, with its mesh and labels drawn.
fn per_acquisition_chart<'a, 'b, DB: DrawingBackend>(
    builder: &mut ChartBuilder<'a, 'b, DB>,
    x_max: u32,
    y_range: Range<f64>,
    y_desc: &str,
) -> Result<ChartContext<'a, DB, Cartesian2d<RangedCoordu32, RangedCoordf64>>, BoxError> {
    let mut chart = builder
        .margin(12)
        .margin_right(32)
        .x_label_area_size(44)
        .y_label_area_size(90)
        .build_cartesian_2d(0u32..x_max, y_range)
        .map_err(boxed)?;
    chart
        .configure_mesh()
        .x_desc("acquisition number")
        .y_desc(y_desc)
        .axis_desc_style((FONT, 20))
        .label_style((FONT, 16))
        .y_label_formatter(&|y| format_number(*y))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(boxed)?;
    Ok(chart)
}

/// Log-scale axes on both sides, as the wait distributions are drawn.
type LogLog = Cartesian2d<LogCoord<f64>, LogCoord<f64>>;

/// One panel of a wait distribution: for `processes` processes, waits from `waits` (ms) on
/// a log x axis against the share of acquisitions that waited longer (from `share_min` to
/// 1) on a log y axis, with its mesh and labels drawn.
fn ccdf_chart<'a, DB: DrawingBackend>(
    panel: &'a DrawingArea<DB, Shift>,
    processes: usize,
    waits: Range<f64>,
    share_min: f64,
) -> Result<ChartContext<'a, DB, LogLog>, BoxError> {
    let plural = if processes == 1 { "" } else { "es" };
    let mut chart = ChartBuilder::on(panel)
        .caption(format!("P = {processes} process{plural}"), (FONT, 20))
        .margin(12)
        .margin_right(32)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (waits.start * 0.8..waits.end * 1.5).log_scale(),
            (share_min * 0.8..1.2f64).log_scale(),
        )
        .map_err(boxed)?;
    chart
        .configure_mesh()
        .x_desc("wait (ms, log scale)")
        .y_desc("share waiting longer (log scale)")
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .x_label_formatter(&|x| format_number(*x))
        .y_label_formatter(&|y| format_number(*y))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(boxed)?;
    Ok(chart)
}

fn timeline_title(run: &RunResult) -> String {
    format!(
        "Figure {}: {}, {} process{}, {} acquisitions each",
        figure_number(run.spec.variant),
        algorithm_title(run.spec.variant),
        run.spec.processes,
        if run.spec.processes == 1 { "" } else { "es" },
        run.acquisitions.len() / run.spec.processes.max(1)
    )
}

/// The colour of an algorithm in the distribution plot.
fn algorithm_colour(variant: Variant) -> RGBColor {
    if variant == Variant::BASELINE {
        RGBColor(214, 39, 40)
    } else if variant == Variant::BAKERY {
        RGBColor(148, 103, 189)
    } else if variant.fencing {
        RGBColor(44, 160, 44)
    } else {
        RGBColor(31, 119, 180)
    }
}

/// One curve of the distribution plot: the share of acquisitions that waited longer than x
/// ms, thinned to about 2000 points plus the 500 slowest.
fn ccdf(run: &RunResult, floor: f64) -> Vec<(f64, f64)> {
    let mut waits: Vec<f64> = run
        .acquisitions
        .iter()
        .map(|a| ms(a.wait).max(floor))
        .collect();
    waits.sort_by(f64::total_cmp);
    let count = waits.len();
    let step = (count / 2000).max(1);
    waits
        .iter()
        .enumerate()
        .filter(|(index, _)| index % step == 0 || count - index <= 500)
        .map(|(index, wait)| (*wait, (count - index) as f64 / count as f64))
        .collect()
}

/// Draws the wait-time distributions as complementary CDFs on log-log axes, one panel per
/// process count with every algorithm that ran, on shared axes.
fn draw_ccdf<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunResult],
    processes: &[usize],
) -> Result<(), BoxError> {
    let floor = 0.01;
    let area = area
        .margin(10, 0, 0, 0)
        .titled(
            "Wait-time distribution: share of acquisitions that waited longer than x",
            (FONT, 24).into_font().style(FontStyle::Bold),
        )
        .map_err(boxed)?;
    let with_waits = || runs.iter().filter(|run| !run.acquisitions.is_empty());
    let x_max = with_waits()
        .flat_map(|run| run.acquisitions.iter().map(|a| ms(a.wait)))
        .fold(1.0, f64::max);
    let x_min = with_waits()
        .flat_map(|run| run.acquisitions.iter().map(|a| ms(a.wait).max(floor)))
        .fold(1.0, f64::min);
    let y_min = with_waits()
        .map(|run| 1.0 / run.acquisitions.len() as f64)
        .fold(1.0, f64::min);
    let columns = processes.len().clamp(1, 3);
    let rows = processes.len().div_ceil(columns).max(1);
    let panels = area.split_evenly((rows, columns));
    for (panel, &p) in panels.iter().zip(processes) {
        let mut chart = ccdf_chart(panel, p, x_min..x_max, y_min)?;
        for run in with_waits().filter(|run| run.spec.processes == p) {
            let style = algorithm_colour(run.spec.variant).stroke_width(3);
            chart
                .draw_series(LineSeries::new(ccdf(run, floor), style))
                .map_err(boxed)?
                .label(algorithm_title(run.spec.variant))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 16)?;
    }
    Ok(())
}

/// An axis label: as few decimals as the value needs (up to four), so that ticks such as
/// 1.5 and 2.5 are not rounded into their neighbours.
pub(crate) fn format_number(value: f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// Draws every picture into `dir` and returns the paths written. `new` is the variant that
/// stands for the new algorithm (the queue, with or without fencing tokens):
///
/// * `figure1-<new>-p<P>.png`, `figure2-baseline-p<P>.png` and `figure3-bakery-p<P>.png`
///   for every P that ran;
/// * `figures-p<P>.png`: those side by side;
/// * `wait-distribution.png`: the wait-time distributions of every run, one panel per P.
pub fn draw_all(dir: &Path, runs: &[RunResult], new: Variant) -> Result<Vec<PathBuf>, BoxError> {
    register_fonts();
    let mut written = Vec::new();
    let mut processes: Vec<usize> = runs.iter().map(|run| run.spec.processes).collect();
    processes.sort_unstable();
    processes.dedup();
    let find = |variant: Variant, p: usize| {
        runs.iter()
            .find(|run| run.spec.variant == variant && run.spec.processes == p)
    };
    for &p in &processes {
        let trio = [
            find(new, p),
            find(Variant::BASELINE, p),
            find(Variant::BAKERY, p),
        ];
        for run in trio.iter().flatten() {
            let name = format!(
                "figure{}-{}-p{p}.png",
                figure_number(run.spec.variant),
                run.spec.variant.label()
            );
            let path = dir.join(name);
            {
                let root = BitMapBackend::new(&path, (1400, 1000)).into_drawing_area();
                root.fill(&WHITE).map_err(boxed)?;
                draw_timeline(&root, run, &timeline_title(run))?;
                root.present().map_err(boxed)?;
            }
            written.push(path);
        }
        let side_by_side: Vec<&RunResult> = trio.iter().flatten().copied().collect();
        if side_by_side.len() >= 2 {
            let path = dir.join(format!("figures-p{p}.png"));
            {
                let width = 1200 * side_by_side.len() as u32;
                let root = BitMapBackend::new(&path, (width, 1000)).into_drawing_area();
                root.fill(&WHITE).map_err(boxed)?;
                let parts = root.split_evenly((1, side_by_side.len()));
                for (part, run) in parts.iter().zip(&side_by_side) {
                    draw_timeline(part, run, &timeline_title(run))?;
                }
                root.present().map_err(boxed)?;
            }
            written.push(path);
        }
    }
    let path = dir.join("wait-distribution.png");
    {
        let columns = processes.len().clamp(1, 3) as u32;
        let rows = processes.len().div_ceil(3).max(1) as u32;
        let root = BitMapBackend::new(&path, (760 * columns, 640 * rows + 50)).into_drawing_area();
        root.fill(&WHITE).map_err(boxed)?;
        draw_ccdf(&root, runs, &processes)?;
        root.present().map_err(boxed)?;
    }
    written.push(path);
    Ok(written)
}

/// One curve of [`draw_wait_distributions`]: the waits of one lock at one process count.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitCurve {
    /// The legend's label; curves with the same label share a colour.
    pub label: String,
    /// P: the panel the curve goes in.
    pub processes: usize,
    /// Every wait, in ms.
    pub waits_ms: Vec<f64>,
}

/// Draws the wait-time distributions of `curves` into `path`, as the experiment's
/// `wait-distribution.png` draws its runs: complementary CDFs on log-log axes, one panel
/// per process count, on shared axes.
pub fn draw_wait_distributions(
    path: &Path,
    title: &str,
    curves: &[WaitCurve],
) -> Result<(), BoxError> {
    register_fonts();
    let floor = 0.01;
    let mut processes: Vec<usize> = curves.iter().map(|curve| curve.processes).collect();
    processes.sort_unstable();
    processes.dedup();
    let mut labels: Vec<&str> = Vec::new();
    for curve in curves {
        if !labels.contains(&curve.label.as_str()) {
            labels.push(&curve.label);
        }
    }
    let with_waits = || curves.iter().filter(|curve| !curve.waits_ms.is_empty());
    let x_max = with_waits()
        .flat_map(|curve| curve.waits_ms.iter().copied())
        .fold(1.0, f64::max);
    let x_min = with_waits()
        .flat_map(|curve| curve.waits_ms.iter().map(|wait| wait.max(floor)))
        .fold(1.0, f64::min);
    let y_min = with_waits()
        .map(|curve| 1.0 / curve.waits_ms.len() as f64)
        .fold(1.0, f64::min);
    let columns = processes.len().clamp(1, 2);
    let rows = processes.len().div_ceil(columns).max(1);
    let root = BitMapBackend::new(path, (760 * columns as u32, 640 * rows as u32 + 50))
        .into_drawing_area();
    root.fill(&WHITE).map_err(boxed)?;
    let area = root
        .margin(10, 0, 0, 0)
        .titled(title, (FONT, 22).into_font().style(FontStyle::Bold))
        .map_err(boxed)?;
    let panels = area.split_evenly((rows, columns));
    for (panel, &p) in panels.iter().zip(&processes) {
        let mut chart = ccdf_chart(panel, p, x_min..x_max, y_min)?;
        for curve in with_waits().filter(|curve| curve.processes == p) {
            let index = labels
                .iter()
                .position(|label| *label == curve.label)
                .unwrap_or(0);
            let style = colour(index).stroke_width(3);
            let mut waits: Vec<f64> = curve.waits_ms.iter().map(|w| w.max(floor)).collect();
            waits.sort_by(f64::total_cmp);
            let count = waits.len();
            let points = waits
                .iter()
                .enumerate()
                .map(|(rank, wait)| (*wait, (count - rank) as f64 / count as f64));
            chart
                .draw_series(LineSeries::new(points, style))
                .map_err(boxed)?
                .label(curve.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 16)?;
    }
    root.present().map_err(boxed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::format_number;

    #[test]
    fn axis_labels_keep_the_decimals_they_need() {
        let labels: Vec<String> = [2.5, 2.0, 1.5, 0.0, -0.0, -1.5, 4000.0, 0.0001, 0.25]
            .into_iter()
            .map(format_number)
            .collect();
        assert_eq!(
            labels,
            [
                "2.5", "2", "1.5", "0", "0", "-1.5", "4000", "0.0001", "0.25"
            ]
        );
    }
}
