//! The pictures: the thesis's Figures 1 and 2 (acquisition number against the time it
//! completed, one line per process) and the distribution of wait times, drawn with plotters
//! on a bitmap with the DejaVu Sans font compiled into the binary (no system font library).

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::BoxError;
use crate::experiment::{RunResult, Variant};
use crate::units::ms;

/// The font family every text is drawn in.
const FONT: &str = "sans-serif";

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

fn colour(index: usize) -> RGBColor {
    COLOURS[index % COLOURS.len()]
}

fn boxed<E: std::fmt::Display>(error: E) -> BoxError {
    format!("drawing failed: {error}").into()
}

/// Registers the embedded DejaVu Sans (regular and bold) as plotters' `sans-serif`.
fn register_fonts() {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        // The bytes are a valid TrueType font compiled in; registration cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// The thesis's figure number of a variant: 1 for the new algorithm, 2 for the old.
fn figure_number(variant: Variant) -> u8 {
    if variant == Variant::BASELINE { 2 } else { 1 }
}

fn algorithm_title(variant: Variant) -> String {
    match variant {
        Variant::BASELINE => "old (baseline) algorithm".to_owned(),
        Variant::QUEUE => "new (queue) algorithm".to_owned(),
        other => format!("{} algorithm", other.label()),
    }
}

/// Draws one run's timeline on `area`: x the acquisition number, y the ms since the run
/// started when it completed, one line per process.
fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    run: &RunResult,
    title: &str,
) -> Result<(), BoxError> {
    let processes = run.spec.processes;
    let mut lines = vec![Vec::new(); processes];
    for acquisition in &run.acquisitions {
        lines[acquisition.process].push((acquisition.number, ms(acquisition.acquired_at)));
    }
    let x_max = run
        .acquisitions
        .iter()
        .map(|a| a.number)
        .max()
        .unwrap_or(1)
        .max(1);
    let y_max = ms(run.duration).max(1.0) * 1.02;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 24).into_font().style(FontStyle::Bold))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(96)
        .build_cartesian_2d(0u32..x_max, 0f64..y_max)
        .map_err(boxed)?;
    chart
        .configure_mesh()
        .x_desc("acquisition number")
        .y_desc("ms since the experiment started")
        .axis_desc_style((FONT, 20))
        .label_style((FONT, 16))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(boxed)?;
    for (process, points) in lines.into_iter().enumerate() {
        let style = colour(process).stroke_width(2);
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(boxed)?
            .label(format!("process {}", process + 1))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(boxed)?;
    Ok(())
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

/// Draws the wait-time distribution of `runs` as complementary CDFs on log-log axes: for
/// each run, the fraction of acquisitions that waited longer than x ms.
fn draw_ccdf<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[&RunResult],
) -> Result<(), BoxError> {
    let floor = 0.01;
    let mut curves = Vec::new();
    let mut x_max: f64 = 1.0;
    let mut y_min: f64 = 1.0;
    for run in runs {
        let mut waits: Vec<f64> = run
            .acquisitions
            .iter()
            .map(|a| ms(a.wait).max(floor))
            .collect();
        waits.sort_by(f64::total_cmp);
        let count = waits.len();
        if count == 0 {
            continue;
        }
        let step = (count / 2000).max(1);
        let points: Vec<(f64, f64)> = waits
            .iter()
            .enumerate()
            .filter(|(index, _)| index % step == 0 || count - index <= 500)
            .map(|(index, wait)| (*wait, (count - index) as f64 / count as f64))
            .collect();
        x_max = x_max.max(waits[count - 1]);
        y_min = y_min.min(1.0 / count as f64);
        curves.push((*run, points));
    }
    let x_min = curves
        .iter()
        .flat_map(|(_, points)| points.first().map(|(x, _)| *x))
        .fold(f64::INFINITY, f64::min)
        .min(1.0)
        .max(floor);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Wait-time distribution: share of acquisitions that waited longer than x",
            (FONT, 24).into_font().style(FontStyle::Bold),
        )
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(96)
        .build_cartesian_2d(
            (x_min * 0.8..x_max * 1.5).log_scale(),
            (y_min * 0.8..1.2f64).log_scale(),
        )
        .map_err(boxed)?;
    chart
        .configure_mesh()
        .x_desc("wait (ms), log scale")
        .y_desc("share of acquisitions waiting longer, log scale")
        .axis_desc_style((FONT, 20))
        .label_style((FONT, 16))
        .x_label_formatter(&|x| format_number(*x))
        .y_label_formatter(&|y| format_number(*y))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(boxed)?;
    for (run, points) in curves {
        let base = if run.spec.variant == Variant::BASELINE {
            RGBColor(214, 39, 40)
        } else if run.spec.variant.fencing {
            RGBColor(44, 160, 44)
        } else {
            RGBColor(31, 119, 180)
        };
        let width = match run.spec.processes {
            1 => 1,
            2..=3 => 2,
            _ => 4,
        };
        let style = base.stroke_width(width);
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(boxed)?
            .label(format!(
                "{}, P = {}",
                algorithm_title(run.spec.variant),
                run.spec.processes
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(boxed)?;
    Ok(())
}

fn format_number(value: f64) -> String {
    if value >= 1.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.4}");
        text.trim_end_matches('0').to_owned()
    }
}

/// Draws every picture into `dir` and returns the paths written:
///
/// * `figure1-queue-p<P>.png` and `figure2-baseline-p<P>.png` for every P that ran;
/// * `figures-p<P>.png`: both side by side;
/// * `wait-distribution.png`: the wait-time distributions of every run.
pub fn draw_all(dir: &Path, runs: &[RunResult]) -> Result<Vec<PathBuf>, BoxError> {
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
        let pair = [find(Variant::QUEUE, p), find(Variant::BASELINE, p)];
        for run in pair.iter().flatten() {
            let name = format!(
                "figure{}-{}-p{p}.png",
                figure_number(run.spec.variant),
                run.spec.variant.label()
            );
            let path = dir.join(name);
            {
                let root = BitMapBackend::new(&path, (1400, 900)).into_drawing_area();
                root.fill(&WHITE).map_err(boxed)?;
                draw_timeline(&root, run, &timeline_title(run))?;
                root.present().map_err(boxed)?;
            }
            written.push(path);
        }
        if let [Some(queue), Some(baseline)] = pair {
            let path = dir.join(format!("figures-p{p}.png"));
            {
                let root = BitMapBackend::new(&path, (2400, 900)).into_drawing_area();
                root.fill(&WHITE).map_err(boxed)?;
                let halves = root.split_evenly((1, 2));
                draw_timeline(&halves[0], queue, &timeline_title(queue))?;
                draw_timeline(&halves[1], baseline, &timeline_title(baseline))?;
                root.present().map_err(boxed)?;
            }
            written.push(path);
        }
    }
    let path = dir.join("wait-distribution.png");
    {
        let root = BitMapBackend::new(&path, (1400, 900)).into_drawing_area();
        root.fill(&WHITE).map_err(boxed)?;
        let all: Vec<&RunResult> = runs.iter().collect();
        draw_ccdf(&root, &all)?;
        root.present().map_err(boxed)?;
    }
    written.push(path);
    Ok(written)
}
