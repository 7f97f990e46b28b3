//! Every chart of the project: write amplification and sorted runs over
//! flushes (`lamina sim --plot`, as seed 003 Fig. 2), labelled curves over
//! any x (`lamina experiment`, the experiment reports), and bar panels
//! (`design_space_report`). One look for all: titled axes, ticks in human
//! units (KiB/MiB, K/M), log axes where asked or where data spans decades,
//! min–max bands for repeated runs, and the legend in a column of its own
//! beside the plot area, so it never covers data.
//!
//! Output is SVG only: the viewer renders the text, so no font is bundled
//! (plotters' naive font metrics size the label areas).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use lamina_sim::FlushRecord;

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

/// A chart that could not be drawn: a path that is not SVG, or the
/// drawing backend's error.
#[derive(Debug, thiserror::Error)]
#[error("plot: {0}")]
pub struct PlotError(String);

fn plot_error(e: impl std::fmt::Display) -> PlotError {
    PlotError(e.to_string())
}

/// Checks that `path` names a format the plots draw (SVG).
pub fn check_path(path: &Path) -> Result<(), PlotError> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Ok(()),
        _ => Err(plot_error(format!("{} must end in .svg", path.display()))),
    }
}

/// How an axis writes its tick labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unit {
    /// Numbers, thousands as K and millions as M (12K, 1.5M).
    #[default]
    Count,
    /// Bytes in binary units (512 KiB, 16 MiB, 2 GiB).
    Bytes,
    /// Plain decimals (ratios, amplifications).
    Plain,
}

/// `v` with at most three significant digits, trailing zeros dropped.
fn short(v: f64) -> String {
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.digits$}");
    match s.contains('.') {
        true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => s,
    }
}

impl Unit {
    /// A tick label for `v`.
    pub fn format(self, v: f64) -> String {
        let a = v.abs();
        match self {
            Unit::Count if a >= 1e9 => format!("{}G", short(v / 1e9)),
            Unit::Count if a >= 1e6 => format!("{}M", short(v / 1e6)),
            Unit::Count if a >= 1e3 => format!("{}K", short(v / 1e3)),
            Unit::Bytes => {
                let (scale, name) = [
                    (1u64 << 40, "TiB"),
                    (1 << 30, "GiB"),
                    (1 << 20, "MiB"),
                    (1 << 10, "KiB"),
                ]
                .into_iter()
                .find(|(s, _)| a >= *s as f64)
                .unwrap_or((1, "B"));
                format!("{} {name}", short(v / scale as f64))
            }
            _ => short(v),
        }
    }
}

/// One axis of a chart.
#[derive(Debug, Clone, Default)]
pub struct Axis {
    /// The axis title, with its unit ("throughput (ops/s)").
    pub title: String,
    /// Tick labels.
    pub unit: Unit,
    /// Logarithmic: `Some(true)`/`Some(false)` as told, `None` when the
    /// data (all positive) spans two decades or more.
    pub log: Option<bool>,
}

impl Axis {
    /// A linear-or-auto axis titled `title`, ticks in `unit`.
    pub fn new(title: impl Into<String>, unit: Unit) -> Self {
        Axis {
            title: title.into(),
            unit,
            log: None,
        }
    }

    /// The same axis, logarithmic if `log`.
    pub fn log(mut self, log: bool) -> Self {
        self.log = Some(log);
        self
    }
}

/// One labelled curve.
#[derive(Debug, Clone, Default)]
pub struct Curve {
    /// Legend label.
    pub label: String,
    /// Points, drawn in order (a line, and a marker per point if there are
    /// few).
    pub points: Vec<(f64, f64)>,
    /// Repeated runs: `(x, min, max)` per point, drawn as a shaded band
    /// around the line (empty: none).
    pub band: Vec<(f64, f64, f64)>,
    /// A scatter plot: a small marker per point and no line (measurements
    /// that are not a function of x, such as one point per merge).
    pub scatter: bool,
}

/// One chart of a figure: curves over two axes.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    /// Subtitle (may be empty).
    pub title: String,
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The curves; a label keeps its colour across the figure's panels.
    pub curves: Vec<Curve>,
}

/// Axis descriptions and size of a [`plot_lines`] chart.
#[derive(Debug, Clone)]
pub struct LinesOptions {
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// How to draw [`plot`]'s figure.
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

const FONT: &str = "sans-serif";

/// Font size of axis titles, and only of them (so [`axis_titles`] can
/// find them in a chart).
const AXIS_TITLE_SIZE: u32 = 15;

/// The axis titles of an SVG chart drawn by this module, in drawing order
/// (for tests: every panel must title both axes).
pub fn axis_titles(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let (attrs, rest) = t.split_once('>')?;
            let text = rest.split_once("</text>")?.0.trim();
            // plotters writes sizes scaled by 1/1.24 (points to pixels).
            let size: f64 = attrs
                .split("font-size=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()?;
            ((size * 1.24 - f64::from(AXIS_TITLE_SIZE)).abs() < 0.01).then(|| {
                text.replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&apos;", "'")
                    .replace("&#39;", "'")
                    .replace("&amp;", "&")
            })
        })
        .collect()
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Draws `$draw(&root)` on an SVG drawing area for `$path` and presents it.
macro_rules! render {
    ($path:expr, $size:expr, $draw:expr) => {{
        let path: &Path = $path;
        check_path(path)?;
        let root = SVGBackend::new(path, $size).into_drawing_area();
        $draw(&root).map_err(plot_error)?;
        root.present().map_err(plot_error)
    }};
}

/// Draws `series` (a simulation's write amplification and sorted runs over
/// flushes, one curve per policy) to `path`.
pub fn plot(
    path: &Path,
    title: &str,
    series: &[Series],
    opts: PlotOptions,
) -> Result<(), PlotError> {
    let curves = |y: fn(&(u64, f64, f64)) -> f64| -> Vec<Curve> {
        series
            .iter()
            .map(|s| Curve {
                label: s.label.clone(),
                points: s.points.iter().map(|p| (p.0 as f64, y(p))).collect(),
                band: Vec::new(),
                scatter: false,
            })
            .collect()
    };
    let flushes = Axis::new("flushes", Unit::Count).log(false);
    let panels = [
        Panel {
            title: String::new(),
            x: flushes.clone(),
            y: Axis::new("write amplification", Unit::Plain).log(opts.log_wa),
            curves: curves(|p| p.1),
        },
        Panel {
            title: String::new(),
            x: flushes,
            y: Axis::new("sorted runs (mean per point)", Unit::Count).log(false),
            curves: curves(|p| p.2),
        },
    ];
    plot_panels(path, title, &panels, 1, (opts.width, opts.height))
}

/// Draws `curves` on one chart to `path`.
pub fn plot_lines(
    path: &Path,
    title: &str,
    curves: &[Curve],
    opts: &LinesOptions,
) -> Result<(), PlotError> {
    let panel = Panel {
        title: String::new(),
        x: opts.x.clone(),
        y: opts.y.clone(),
        curves: curves.to_vec(),
    };
    plot_panels(path, title, &[panel], 1, (opts.width, opts.height))
}

/// Draws `panels` in a grid of `columns` to `path`, with one legend for
/// all of them beside the grid.
pub fn plot_panels(
    path: &Path,
    title: &str,
    panels: &[Panel],
    columns: usize,
    size: (u32, u32),
) -> Result<(), PlotError> {
    let mut labels: Vec<&str> = Vec::new();
    for c in panels.iter().flat_map(|p| &p.curves) {
        if !labels.contains(&c.label.as_str()) {
            labels.push(&c.label);
        }
    }
    render!(path, size, |root: &DrawingArea<SVGBackend, Shift>| {
        root.fill(&WHITE)?;
        let root = root.titled(title, (FONT, 22))?;
        let (grid, legend_area) = split_legend(&root, &labels);
        let cells = grid.split_evenly((panels.len().div_ceil(columns.max(1)), columns.max(1)));
        for (panel, cell) in panels.iter().zip(&cells) {
            draw_panel(cell, panel, &labels)?;
        }
        draw_legend(&legend_area, &labels)
    })
}

/// One bar chart of [`plot_bars`]: a value per category.
#[derive(Debug, Clone, Default)]
pub struct BarPanel {
    /// Subtitle.
    pub title: String,
    /// The x axis title (what the categories are).
    pub x_title: String,
    /// The y axis.
    pub y: Axis,
    /// (category, value), drawn left to right.
    pub bars: Vec<(String, f64)>,
}

/// Draws bar `panels` in a grid of `columns` to `path`; each bar carries
/// its value.
pub fn plot_bars(
    path: &Path,
    title: &str,
    panels: &[BarPanel],
    columns: usize,
    size: (u32, u32),
) -> Result<(), PlotError> {
    render!(path, size, |root: &DrawingArea<SVGBackend, Shift>| {
        root.fill(&WHITE)?;
        let root = root.titled(title, (FONT, 22))?;
        let cells = root.split_evenly((panels.len().div_ceil(columns.max(1)), columns.max(1)));
        panels
            .iter()
            .zip(&cells)
            .try_for_each(|(panel, cell)| draw_bars(cell, panel))
    })
}

fn draw_bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &BarPanel) -> DrawResult<DB> {
    let n = p.bars.len().max(1);
    let top = p.bars.iter().map(|b| b.1).fold(0.0_f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let mut builder = ChartBuilder::on(area);
    if !p.title.is_empty() {
        builder.caption(&p.title, (FONT, 16));
    }
    let mut chart = builder
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n).into_segmented(), 0f64..top)?;
    let names: Vec<&str> = p.bars.iter().map(|b| b.0.as_str()).collect();
    let unit = p.y.unit;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(p.x_title.as_str())
        .y_desc(p.y.title.as_str())
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).map_or(String::new(), |s| s.to_string()),
            _ => String::new(),
        })
        .y_label_formatter(&|v| unit.format(*v))
        .label_style((FONT, 12))
        .axis_desc_style((FONT, AXIS_TITLE_SIZE))
        .draw()?;
    let color = COLORS[0];
    chart.draw_series(p.bars.iter().enumerate().map(|(i, b)| {
        let mut r = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), b.1),
            ],
            color.mix(0.8).filled(),
        );
        r.set_margin(0, 0, 6, 6);
        r
    }))?;
    chart.draw_series(p.bars.iter().enumerate().map(|(i, b)| {
        Text::new(
            unit.format(b.1),
            (SegmentValue::CenterOf(i), b.1 + top * 0.02),
            (FONT, 11).into_font().color(&BLACK),
        )
    }))?;
    Ok(())
}

/// Splits off a legend column at the right, as wide as the longest label
/// needs (naive metrics: about 0.55 em per character).
fn split_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: &[&str],
) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let chars = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32;
    let width = area.dim_in_pixel().0;
    let legend = if labels.is_empty() {
        0
    } else {
        (chars * 8 + 50).min(width / 3)
    };
    area.split_horizontally(width - legend)
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: &[&str],
) -> DrawResult<DB> {
    for (i, label) in labels.iter().enumerate() {
        let y = 40 + 22 * i as i32;
        let c = COLORS[i % COLORS.len()];
        area.draw(&PathElement::new(vec![(6, y), (30, y)], c.stroke_width(3)))?;
        area.draw(&Text::new(
            label.to_string(),
            (36, y - 7),
            (FONT, 14).into_font().color(&BLACK),
        ))?;
    }
    Ok(())
}

/// The range an axis spans for `values`: padded, and logarithmic when
/// asked or when positive data spans two decades (zero and negative values
/// are then left out).
fn range(axis: &Axis, values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64, bool) {
    let v: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0, false);
    }
    let min_pos = v
        .iter()
        .copied()
        .filter(|x| *x > 0.0)
        .fold(f64::INFINITY, f64::min);
    let log = axis
        .log
        .unwrap_or(min_pos.is_finite() && lo > 0.0 && hi / min_pos >= 100.0);
    if log && min_pos.is_finite() {
        return (min_pos / 1.3, hi.max(min_pos) * 1.3, true);
    }
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let pad = if hi > lo {
        (hi - lo) * 0.05
    } else {
        hi.abs().max(1.0) * 0.5
    };
    let lo = if from_zero && lo == 0.0 {
        0.0
    } else {
        lo - pad
    };
    (lo, hi + pad, false)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    labels: &[&str],
) -> DrawResult<DB> {
    let xs = p.curves.iter().flat_map(|c| c.points.iter().map(|q| q.0));
    let ys = p.curves.iter().flat_map(|c| {
        c.points
            .iter()
            .map(|q| q.1)
            .chain(c.band.iter().flat_map(|b| [b.1, b.2]))
    });
    let (x0, x1, log_x) = range(&p.x, xs, false);
    let (y0, y1, log_y) = range(&p.y, ys, true);
    let mut builder = ChartBuilder::on(area);
    if !p.title.is_empty() {
        builder.caption(&p.title, (FONT, 16));
    }
    builder
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(76);
    // Byte axes tick at powers of two on a log scale (1 KiB, 2 KiB, ...).
    let base = |u: Unit| if u == Unit::Bytes { 2.0 } else { 10.0 };
    let (bx, by) = (base(p.x.unit), base(p.y.unit));
    // Each scale combination is its own coordinate type.
    match (log_x, log_y) {
        (false, false) => {
            let mut c = builder.build_cartesian_2d(x0..x1, y0..y1)?;
            curves_on(&mut c, p, labels, log_x, log_y)
        }
        (true, false) => {
            let mut c = builder.build_cartesian_2d((x0..x1).log_scale().base(bx), y0..y1)?;
            curves_on(&mut c, p, labels, log_x, log_y)
        }
        (false, true) => {
            let mut c = builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale().base(by))?;
            curves_on(&mut c, p, labels, log_x, log_y)
        }
        (true, true) => {
            let mut c = builder
                .build_cartesian_2d((x0..x1).log_scale().base(bx), (y0..y1).log_scale().base(by))?;
            curves_on(&mut c, p, labels, log_x, log_y)
        }
    }
}

fn curves_on<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    p: &Panel,
    labels: &[&str],
    log_x: bool,
    log_y: bool,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let (xu, yu) = (p.x.unit, p.y.unit);
    let x_title = if log_x {
        format!("{} (log)", p.x.title)
    } else {
        p.x.title.clone()
    };
    let y_title = if log_y {
        format!("{} (log)", p.y.title)
    } else {
        p.y.title.clone()
    };
    chart
        .configure_mesh()
        .x_desc(x_title)
        .y_desc(y_title)
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|v| xu.format(*v))
        .y_label_formatter(&|v| yu.format(*v))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, AXIS_TITLE_SIZE))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    // Points a log axis cannot show are left out, so no line leaves the
    // plot area.
    let shown = |x: f64, y: f64| {
        x.is_finite() && y.is_finite() && (!log_x || x > 0.0) && (!log_y || y > 0.0)
    };
    for c in &p.curves {
        let i = labels.iter().position(|l| *l == c.label).unwrap_or(0);
        let col = COLORS[i % COLORS.len()];
        let band: Vec<(f64, f64)> = c
            .band
            .iter()
            .filter(|b| shown(b.0, b.1) && shown(b.0, b.2))
            .map(|b| (b.0, b.1))
            .chain(
                c.band
                    .iter()
                    .rev()
                    .filter(|b| shown(b.0, b.1) && shown(b.0, b.2))
                    .map(|b| (b.0, b.2)),
            )
            .collect();
        if band.len() >= 4 {
            chart.draw_series(std::iter::once(Polygon::new(band, col.mix(0.2).filled())))?;
        }
        let pts: Vec<(f64, f64)> = c
            .points
            .iter()
            .copied()
            .filter(|q| shown(q.0, q.1))
            .collect();
        if c.scatter {
            chart.draw_series(
                pts.iter()
                    .map(|&q| Circle::new(q, 2, col.mix(0.6).filled())),
            )?;
            continue;
        }
        chart.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))?;
        if pts.len() <= 60 {
            chart.draw_series(pts.iter().map(|&q| Circle::new(q, 3, col.filled())))?;
        }
        // Repeats at a single x: a min–max bar.
        if c.band.len() == 1 {
            if let Some(&(x, lo, hi)) = c
                .band
                .first()
                .filter(|b| shown(b.0, b.1) && shown(b.0, b.2))
            {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(x, lo), (x, hi)],
                    col.stroke_width(2),
                )))?;
            }
        }
    }
    Ok(())
}
