//! The picture of `work-queue`: items per second (virtual time) against the number of
//! workers, one line without worker crashes and one with them (log y axis: a crash costs a
//! lease, so the two lines are far apart).

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::BoxError;
use crate::work_queue::WorkQueueReport;

/// The font family every text is drawn in (the embedded DejaVu Sans).
const FONT: &str = "sans-serif";

fn boxed<E: std::fmt::Display>(error: E) -> BoxError {
    format!("drawing failed: {error}").into()
}

fn register_fonts() {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        // The bytes are a valid TrueType font compiled in; registration cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// Draws items/s against W into `path`, a line per crash percentage.
pub fn draw(path: &Path, report: &WorkQueueReport) -> Result<(), BoxError> {
    register_fonts();
    let mut series: Vec<u32> = report.rows.iter().map(|row| row.crash_percent).collect();
    series.sort_unstable();
    series.dedup();
    let rate = |row: &crate::work_queue::WorkQueueRow| row.items_per_second;
    let values = || {
        report
            .rows
            .iter()
            .map(rate)
            .filter(|value| value.is_finite() && *value > 0.0)
    };
    let y_max = values().fold(f64::MIN_POSITIVE, f64::max);
    let y_min = values().fold(f64::MAX, f64::min).min(y_max);
    let w_max = report.rows.iter().map(|row| row.workers).max().unwrap_or(1) as f64;
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(boxed)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Work queue: items/s against workers ({} items, {:.1} ms work each, simulator)",
                report.items, report.work_ms
            ),
            (FONT, 20).into_font().style(FontStyle::Bold),
        )
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            0.0..w_max * 1.08 + 0.5,
            (y_min * 0.7..y_max * 1.4).log_scale(),
        )
        .map_err(boxed)?;
    chart
        .configure_mesh()
        .x_desc("workers W")
        .y_desc("items per second (virtual time, log scale)")
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(WHITE)
        .draw()
        .map_err(boxed)?;
    for (index, crash_percent) in series.iter().enumerate() {
        let colour = if index == 0 {
            RGBColor(31, 119, 180)
        } else {
            RGBColor(214, 39, 40)
        };
        let style = colour.stroke_width(3);
        let mut points: Vec<(f64, f64)> = report
            .rows
            .iter()
            .filter(|row| row.crash_percent == *crash_percent)
            .map(|row| (row.workers as f64, rate(row)))
            .filter(|(_, value)| value.is_finite() && *value > 0.0)
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let label = if *crash_percent == 0 {
            "no crashes".to_owned()
        } else {
            format!("{crash_percent}% of claims: the worker dies holding it")
        };
        chart
            .draw_series(
                points
                    .iter()
                    .map(|point| Circle::new(*point, 5, style.filled())),
            )
            .map_err(boxed)?;
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(boxed)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(boxed)?;
    root.present().map_err(boxed)?;
    Ok(())
}
