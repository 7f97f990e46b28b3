//! Every chart the plotting module draws titles both axes of every panel
//! (read back from the SVG; plotters draws the y title first), keeps the legend out of the plot area, and
//! formats ticks in human units.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::path::PathBuf;

use lamina_experiment::plot::{
    axis_titles, check_path, plot, plot_bars, plot_lines, plot_panels, Axis, BarPanel, Curve,
    LinesOptions, Panel, PlotOptions, Series, Unit,
};
use lamina_sim::{simulate, FlushSizes, ModelOptions};

fn out(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lamina-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn titles(path: &PathBuf) -> Vec<String> {
    axis_titles(&std::fs::read_to_string(path).unwrap())
}

fn curve(label: &str, scale: f64, band: bool) -> Curve {
    let points: Vec<(f64, f64)> = (0..12)
        .map(|i| ((1u64 << (10 + i)) as f64, scale * (1.0 + i as f64)))
        .collect();
    Curve {
        label: label.into(),
        band: match band {
            true => points.iter().map(|p| (p.0, p.1 * 0.9, p.1 * 1.1)).collect(),
            false => Vec::new(),
        },
        points,
        scatter: false,
    }
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
fn every_chart_titles_its_axes() {
    // `lamina sim --plot`: two panels over flushes.
    let mut series = Vec::new();
    for spec in ["binomial:k=3", "tiered"] {
        let mut s = Series::new(spec, 300);
        let mut last = None;
        simulate(
            spec,
            &FlushSizes::Constant(1 << 20),
            300,
            ModelOptions::default(),
            |r| {
                s.push(r);
                last = Some(*r);
            },
        )
        .unwrap();
        s.finish(last.as_ref());
        series.push(s);
    }
    for log_wa in [false, true] {
        let path = out(&format!("sim-{log_wa}.svg"));
        plot(
            &path,
            "sim",
            &series,
            PlotOptions {
                log_wa,
                ..Default::default()
            },
        )
        .unwrap();
        let t = titles(&path);
        let wa = match log_wa {
            true => "write amplification (log)",
            false => "write amplification",
        };
        assert_eq!(
            t,
            [wa, "flushes", "sorted runs (mean per point)", "flushes"],
            "{}",
            path.display()
        );
    }

    // `lamina experiment` and the reports: one panel, bands for repeats,
    // log x over buffer sizes.
    let path = out("lines.svg");
    plot_lines(
        &path,
        "lines",
        &[curve("leveling", 1e3, true), curve("tiering", 3e3, false)],
        &LinesOptions {
            x: Axis::new("write buffer (bytes)", Unit::Bytes).log(true),
            y: Axis::new("throughput (ops/s)", Unit::Count),
            width: 900,
            height: 500,
        },
    )
    .unwrap();
    assert_eq!(
        titles(&path),
        ["throughput (ops/s)", "write buffer (bytes) (log)"]
    );
    let svg = std::fs::read_to_string(&path).unwrap();
    // Ticks in binary units; the band is drawn.
    assert!(svg.contains("MiB") && svg.contains("KiB"), "byte ticks");
    assert!(svg.contains("<polygon"), "a min-max band");

    // A scatter: a marker per point and no line.
    let path = out("scatter.svg");
    let mut dots = curve("merges", 1.0, false);
    dots.scatter = true;
    plot_lines(
        &path,
        "scatter",
        &[dots],
        &LinesOptions {
            x: Axis::new("bytes written", Unit::Bytes).log(false),
            y: Axis::new("merge time (s)", Unit::Plain).log(false),
            width: 600,
            height: 400,
        },
    )
    .unwrap();
    assert_eq!(titles(&path), ["merge time (s)", "bytes written"]);
    let svg = std::fs::read_to_string(&path).unwrap();
    assert_eq!(svg.matches("<circle").count(), 12, "one marker per point");

    // A grid of panels.
    let path = out("panels.svg");
    let panel = |t: &str| Panel {
        title: t.into(),
        x: Axis::new(format!("{t} x"), Unit::Count).log(false),
        y: Axis::new(format!("{t} y"), Unit::Plain),
        curves: vec![curve("a", 1.0, false)],
    };
    plot_panels(
        &path,
        "grid",
        &[panel("p"), panel("q"), panel("r")],
        2,
        (900, 700),
    )
    .unwrap();
    assert_eq!(titles(&path), ["p y", "p x", "q y", "q x", "r y", "r x"]);

    // Bar panels (the design-space figure).
    let path = out("bars.svg");
    let bars = |t: &str| BarPanel {
        title: t.into(),
        x_title: "strategy".into(),
        y: Axis::new(format!("{t} (ms)"), Unit::Plain),
        bars: vec![("full".into(), 3.0), ("tier".into(), 1.5)],
    };
    plot_bars(&path, "bars", &[bars("a"), bars("b")], 2, (900, 400)).unwrap();
    assert_eq!(titles(&path), ["a (ms)", "strategy", "b (ms)", "strategy"]);
}

#[test]
fn the_legend_sits_beside_the_plot_area() {
    let path = out("legend.svg");
    let label = "a-rather-long-policy-label";
    plot_lines(
        &path,
        "legend",
        &[curve(label, 1.0, false)],
        &LinesOptions {
            x: Axis::new("x", Unit::Count),
            y: Axis::new("y", Unit::Count),
            width: 1000,
            height: 500,
        },
    )
    .unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    // The label's x position is right of every point's marker.
    let x_of = |s: &str| -> f64 {
        s.split("x=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let legend_x = svg
        .split("<text")
        .find(|t| t.contains(label))
        .map(x_of)
        .unwrap();
    let max_marker = svg
        .split("<circle")
        .skip(1)
        .map(|c| {
            c.split("cx=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap()
        })
        .fold(0.0, f64::max);
    assert!(max_marker > 0.0);
    assert!(
        legend_x > max_marker,
        "legend at {legend_x}, data up to {max_marker}"
    );
}

#[test]
fn ticks_are_human_and_only_svg_is_drawn() {
    assert_eq!(Unit::Bytes.format(262_144.0), "256 KiB");
    assert_eq!(Unit::Bytes.format(4.0 * 1048576.0), "4 MiB");
    assert_eq!(Unit::Bytes.format(1.5 * 1073741824.0), "1.5 GiB");
    assert_eq!(Unit::Count.format(12_500.0), "12.5K");
    assert_eq!(Unit::Count.format(2_000_000.0), "2M");
    assert_eq!(Unit::Count.format(7.0), "7");
    assert_eq!(Unit::Plain.format(2.25), "2.25");
    assert!(check_path(&PathBuf::from("a.svg")).is_ok());
    assert!(check_path(&PathBuf::from("a.png")).is_err());
}
