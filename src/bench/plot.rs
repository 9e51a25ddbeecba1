//! `acpdb bench --plot FILE.svg`: per-group latency percentiles (p50, p90, p99) as bars on a
//! logarithmic scale, one bar group per tool group and, with `--compare`, one colour per server,
//! each bar labelled with its value; the title names the machine, the date, the data size and
//! the acpdb commit. Drawn with plotters' SVG backend.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::report::GroupStats;

/// One server's measurements.
pub struct Series<'a> {
    /// The legend's name for the server.
    pub name: String,
    /// Its groups' statistics.
    pub groups: &'a [GroupStats],
}

/// Reads one statistic of a group.
pub type Statistic = fn(&GroupStats) -> Option<f64>;

/// The percentiles drawn, with the statistic each reads.
pub const PERCENTILES: [(&str, Statistic); 3] = [
    ("p50", |g| g.p50_ms),
    ("p90", |g| g.p90_ms),
    ("p99", |g| g.p99_ms),
];

/// Colours of the servers (light to dark by percentile).
pub const PALETTES: [[RGBColor; 3]; 2] = [
    [
        RGBColor(158, 202, 225),
        RGBColor(66, 146, 198),
        RGBColor(8, 69, 148),
    ],
    [
        RGBColor(253, 174, 107),
        RGBColor(241, 105, 19),
        RGBColor(166, 54, 3),
    ],
];

/// A bar's label: three significant digits, in ms.
pub fn value_label(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

/// Width of one bar, in pixels.
const BAR: u32 = 16;

/// Draws the chart of `series` (at most two servers) to `path`.
pub fn draw(path: &Path, title: &str, series: &[Series]) -> Result<()> {
    if series.is_empty() || series.len() > PALETTES.len() {
        return Err(anyhow!("a chart draws one or two servers"));
    }
    // Groups in the first server's order; groups without a measured value are left out.
    let labels: Vec<&str> = series[0]
        .groups
        .iter()
        .filter(|g| PERCENTILES.iter().any(|(_, at)| at(g).is_some()))
        .map(|g| g.label.as_str())
        .collect();
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.groups.iter())
        .flat_map(|g| PERCENTILES.iter().filter_map(move |(_, at)| at(g)))
        .filter(|v| *v > 0.0)
        .collect();
    if labels.is_empty() || values.is_empty() {
        return Err(anyhow!("nothing was measured: no chart to draw"));
    }
    let smallest = values.iter().copied().fold(f64::INFINITY, f64::min);
    let largest = values.iter().copied().fold(0.0, f64::max);
    let low = 10f64.powf((smallest / 1.5).log10().floor());
    let high = 10f64.powf((largest * 3.0).log10().ceil());
    let bars = (series.len() * PERCENTILES.len()) as u32;
    let group_width = bars * BAR + 24;
    let width = (labels.len() as u32 * group_width + 140).max(900);
    let height = 700;
    let backend = SVGBackend::new(path, (width, height));
    let root = backend.into_drawing_area();
    let fail = |e: DrawingAreaErrorKind<_>| anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(fail)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(16)
        .x_label_area_size(190)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..labels.len() as f64, (low..high).log_scale())
        .map_err(fail)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("latency, ms (log scale)")
        .y_label_formatter(&|v| value_label(*v))
        .draw()
        .map_err(fail)?;
    let slot = 1.0 / f64::from(bars + 1);
    for (s, server) in series.iter().enumerate() {
        for (p, (name, at)) in PERCENTILES.iter().enumerate() {
            let colour = PALETTES[s][p];
            let offset = slot / 2.0 + (s * PERCENTILES.len() + p) as f64 * slot;
            let bars: Vec<(f64, f64)> = labels
                .iter()
                .enumerate()
                .filter_map(|(g, label)| {
                    let stats = server.groups.iter().find(|x| x.label == *label)?;
                    Some((g as f64 + offset, at(stats)?.max(low)))
                })
                .collect();
            chart
                .draw_series(bars.iter().map(|&(x, value)| {
                    Rectangle::new([(x, low), (x + slot * 0.9, value)], colour.filled())
                }))
                .map_err(fail)?
                .label(format!("{} {name}", server.name))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
            let font = ("sans-serif", 10)
                .into_font()
                .transform(FontTransform::Rotate270)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center));
            chart
                .draw_series(bars.iter().map(|&(x, value)| {
                    Text::new(
                        value_label(value),
                        (x + slot * 0.45, value * 1.15),
                        font.clone(),
                    )
                }))
                .map_err(fail)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(fail)?;
    // The groups' names under their bars, written downwards.
    let font = ("sans-serif", 12)
        .into_font()
        .transform(FontTransform::Rotate90)
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (g, label) in labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(g as f64 + 0.5, low));
        root.draw(&Text::new(label.to_string(), (x, y + 8), font.clone()))
            .map_err(fail)?;
    }
    root.present().map_err(fail)?;
    Ok(())
}
