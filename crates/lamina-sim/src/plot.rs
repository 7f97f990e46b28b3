//! Plots of simulations: write amplification and sorted runs over flushes,
//! one curve per policy (as seed 003 Fig. 2). SVG, or PNG drawn with an
//! embedded DejaVu Sans font (no system font library needed).
//!
//! [`plot_lines`] draws any set of labelled (x, y) curves the same way; the
//! experiment runner of `lamina experiment` uses it.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{FlushRecord, SimError};

/// Points kept per curve at most (a bucket of flushes becomes one point).
pub const MAX_POINTS: u64 = 2000;

/// One curve: a policy's write amplification and sorted runs over flushes.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Legend label (the policy spec).
    pub label: String,
    /// (flush, write amplification at the bucket's end, mean sorted runs
    /// over the bucket).
    pub points: Vec<(u64, f64, f64)>,
    width: u64,
    runs: u64,
    count: u64,
}

impl Series {
    /// A curve for a run of about `flushes` flushes.
    pub fn new(label: impl Into<String>, flushes: u64) -> Self {
        Series {
            label: label.into(),
            points: Vec::new(),
            width: flushes.div_ceil(MAX_POINTS).max(1),
            runs: 0,
            count: 0,
        }
    }

    /// Adds one flush.
    pub fn push(&mut self, r: &FlushRecord) {
        self.runs += r.sorted_runs as u64;
        self.count += 1;
        if self.count >= self.width {
            self.close(r);
        }
    }

    /// Closes the last partial bucket with the final record.
    pub fn finish(&mut self, last: Option<&FlushRecord>) {
        if let Some(r) = last {
            if self.count > 0 {
                self.close(r);
            }
        }
    }

    fn close(&mut self, r: &FlushRecord) {
        self.points.push((
            r.flush,
            r.write_amplification,
            self.runs as f64 / self.count as f64,
        ));
        self.runs = 0;
        self.count = 0;
    }
}

fn plot_error(e: impl std::fmt::Display) -> SimError {
    SimError::Config(format!("plot: {e}"))
}

fn register_font() -> Result<(), SimError> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let ok = *FONT.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(plot_error("the embedded font does not load"))
    }
}

/// How to draw.
#[derive(Debug, Clone, Copy)]
pub struct PlotOptions {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Logarithmic write-amplification axis (policies far apart).
    pub log_wa: bool,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions {
            width: 1200,
            height: 900,
            log_wa: false,
        }
    }
}

/// Curve colours (Tableau 10: distinct on white).
const COLORS: [RGBColor; 10] = [
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

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Checks that `path` names a format [`plot`] draws.
pub fn check_path(path: &Path) -> Result<(), SimError> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg" | "png") => Ok(()),
        _ => Err(plot_error(format!(
            "{} must end in .svg or .png",
            path.display()
        ))),
    }
}

/// Runs `$draw(&root)` on an SVG or PNG drawing area for `$path` (by its
/// extension) and presents it.
macro_rules! render {
    ($path:expr, $size:expr, $draw:expr) => {{
        register_font()?;
        let path: &Path = $path;
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("svg") => {
                let root = SVGBackend::new(path, $size).into_drawing_area();
                $draw(&root).map_err(plot_error)?;
                root.present().map_err(plot_error)
            }
            Some("png") => {
                let root = BitMapBackend::new(path, $size).into_drawing_area();
                $draw(&root).map_err(plot_error)?;
                root.present().map_err(plot_error)
            }
            _ => Err(plot_error(format!(
                "{} must end in .svg or .png",
                path.display()
            ))),
        }
    }};
}

/// Draws `series` to `path` (`.svg` or `.png`).
pub fn plot(
    path: &Path,
    title: &str,
    series: &[Series],
    opts: PlotOptions,
) -> Result<(), SimError> {
    render!(path, (opts.width, opts.height), |root| draw(
        root, title, series, opts
    ))
}

/// One labelled curve of [`plot_lines`].
#[derive(Debug, Clone, Default)]
pub struct Curve {
    /// Legend label.
    pub label: String,
    /// Points, drawn in order.
    pub points: Vec<(f64, f64)>,
}

/// Axis descriptions and size of a [`plot_lines`] chart.
#[derive(Debug, Clone)]
pub struct LinesOptions {
    /// X axis description.
    pub x_desc: String,
    /// Y axis description.
    pub y_desc: String,
    /// Logarithmic x axis (e.g. buffer sizes in powers of two).
    pub log_x: bool,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// Draws `curves` (lines with a marker per point) to `path` (`.svg` or
/// `.png`).
pub fn plot_lines(
    path: &Path,
    title: &str,
    curves: &[Curve],
    opts: &LinesOptions,
) -> Result<(), SimError> {
    render!(path, (opts.width, opts.height), |root| draw_lines(
        root, title, curves, opts
    ))
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    curves: &[Curve],
    opts: &LinesOptions,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let points = || curves.iter().flat_map(|c| c.points.iter().copied());
    let x_min = points().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_max = points().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let y_max = points().map(|p| p.1).fold(0.0_f64, f64::max);
    let (x_min, x_max) = if x_min.is_finite() && x_max > x_min {
        (x_min, x_max)
    } else if x_min.is_finite() {
        (x_min - 1.0, x_min + 1.0)
    } else {
        (0.0, 1.0)
    };
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(80);
    if opts.log_x && x_min > 0.0 {
        let mut chart =
            builder.build_cartesian_2d((x_min / 1.2..x_max * 1.2).log_scale(), 0f64..y_max)?;
        mesh_and_curves(&mut chart, curves, opts)
    } else {
        let pad = (x_max - x_min) * 0.05;
        let mut chart = builder.build_cartesian_2d(x_min - pad..x_max + pad, 0f64..y_max)?;
        mesh_and_curves(&mut chart, curves, opts)
    }
}

fn mesh_and_curves<'a, DB, X>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    curves: &[Curve],
    opts: &LinesOptions,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(opts.x_desc.as_str())
        .y_desc(opts.y_desc.as_str())
        .x_label_formatter(&|x| format!("{x}"))
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, c) in curves.iter().enumerate() {
        let col = color(i);
        chart
            .draw_series(LineSeries::new(
                c.points.iter().copied(),
                col.stroke_width(2),
            ))?
            .label(c.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        chart.draw_series(c.points.iter().map(|&p| Circle::new(p, 4, col.filled())))?;
    }
    legend(chart)
}

/// The series' legend, boxed in the upper left corner.
fn legend<'a, DB, X, Y>(chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    series: &[Series],
    opts: PlotOptions,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let (top, bottom) = root.split_vertically(root.dim_in_pixel().1 / 2);
    let max_flush = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(1);
    let max_wa = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max);
    let max_runs = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.2))
        .fold(1.0_f64, f64::max);
    if opts.log_wa {
        let mut chart = ChartBuilder::on(&top)
            .margin(12)
            .margin_right(40)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d(0u64..max_flush, (1f64..max_wa * 1.2).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("flushes")
            .y_desc("write amplification (log)")
            .label_style(("sans-serif", 14))
            .draw()?;
        lines(&mut chart, series, |p| p.1)?;
    } else {
        let mut chart = ChartBuilder::on(&top)
            .margin(12)
            .margin_right(40)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d(0u64..max_flush, 0f64..max_wa * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("flushes")
            .y_desc("write amplification")
            .label_style(("sans-serif", 14))
            .draw()?;
        lines(&mut chart, series, |p| p.1)?;
    }
    let mut chart = ChartBuilder::on(&bottom)
        .margin(12)
        .margin_right(40)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(0u64..max_flush, 0f64..max_runs * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("flushes")
        .y_desc("sorted runs (mean per point)")
        .label_style(("sans-serif", 14))
        .draw()?;
    lines(&mut chart, series, |p| p.2)?;
    Ok(())
}

fn lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
    y: impl Fn(&(u64, f64, f64)) -> f64,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = u64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|p| (p.0, y(p))),
                c.stroke_width(2),
            ))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(chart)
}
