//! Plots of seed 004's experiments (`experiments/seed004/run.sh`; the
//! tables are `summarize.py`'s):
//!
//! * `fig1-series.svg`, `fig2-series.svg`: the sliding-window throughput of
//!   every run (`fig1-*.series.csv`, `fig2-*.series.csv`: `puts,seconds,
//!   window_puts_per_sec`), one curve per policy or buffer, as the seed's
//!   Figs. 1 and 2 draw them;
//! * `fig4-throughput.svg`: range queries per second against scan threads,
//!   one panel per range size and fanout (`fig4-T*.csv`, `fig4-short-T*.csv`),
//!   one curve per emulated seek latency;
//! * `fig4-cpu.svg`: CPU milliseconds per range query, of the querying
//!   thread and of the scan pool, against scan threads.
//!
//! Usage: `seed004_report DIR` (figures whose CSVs are absent are skipped).

use std::path::Path;

use anyhow::{Context, Result};
use lamina_experiment::plot::{plot_panels, Axis, Curve, Panel, Unit};

/// The rows of a CSV with a header, as maps from column to value.
fn rows(path: &Path) -> Result<Vec<std::collections::HashMap<String, String>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(str::to_string)
        .collect();
    Ok(lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect())
}

fn num(row: &std::collections::HashMap<String, String>, col: &str) -> Result<f64> {
    row.get(col)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no number in column {col}"))
}

/// One curve per `PREFIX-*.series.csv` of `dir` (label: the file's middle),
/// in the order `key` sorts the labels, then by name.
fn series_curves(dir: &Path, prefix: &str, key: fn(&str) -> f64) -> Result<Vec<Curve>> {
    let mut curves = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(label) = name
            .strip_prefix(prefix)
            .and_then(|n| n.strip_suffix(".series.csv"))
        else {
            continue;
        };
        let mut points = Vec::new();
        for row in rows(&dir.join(&name))? {
            points.push((num(&row, "puts")?, num(&row, "window_puts_per_sec")?));
        }
        curves.push(Curve {
            label: label.to_string(),
            points,
            band: Vec::new(),
            scatter: false,
        });
    }
    curves.sort_by(|a, b| {
        key(&a.label)
            .total_cmp(&key(&b.label))
            .then_with(|| a.label.cmp(&b.label))
    });
    Ok(curves)
}

fn plot_series(dir: &Path, fig: &str, title: &str, curves: Vec<Curve>) -> Result<()> {
    if curves.is_empty() {
        return Ok(());
    }
    let panel = Panel {
        title: String::new(),
        x: Axis::new("puts so far", Unit::Count).log(false),
        y: Axis::new("window throughput (puts/s)", Unit::Count).log(false),
        curves,
    };
    let path = dir.join(format!("{fig}-series.svg"));
    plot_panels(&path, title, &[panel], 1, (1100, 550))
        .with_context(|| format!("plotting {}", path.display()))
}

/// Fig. 4: per fanout, ranges/s and CPU per range against threads.
fn plot_fig4(dir: &Path) -> Result<()> {
    let mut throughput = Vec::new();
    let mut cpu = Vec::new();
    let kinds = [("", "18% of the keys"), ("short-", "0.1% of the keys")];
    for ((kind, share), t) in kinds.iter().flat_map(|k| [(k, 10), (k, 2)]) {
        let path = dir.join(format!("fig4-{kind}T{t}.csv"));
        if !path.exists() {
            continue;
        }
        let rows = rows(&path)?;
        let levels = rows
            .first()
            .map_or(0.0, |r| num(r, "levels").unwrap_or(0.0));
        let runs = rows.first().map_or(0.0, |r| num(r, "runs").unwrap_or(0.0));
        let mut seeks: Vec<f64> = Vec::new();
        for r in &rows {
            let s = num(r, "seek_us")?;
            if !seeks.contains(&s) {
                seeks.push(s);
            }
        }
        let mut qps = Vec::new();
        let mut per_range = Vec::new();
        for &s in &seeks {
            let mine: Vec<_> = rows
                .iter()
                .filter(|r| num(r, "seek_us").is_ok_and(|v| v == s))
                .collect();
            let what = if s == 0.0 {
                "no added latency".to_string()
            } else {
                format!("{} ms per seek", s / 1000.0)
            };
            let mut points = Vec::new();
            let (mut query, mut pool) = (Vec::new(), Vec::new());
            for r in mine {
                let n = num(r, "threads")?;
                let ranges = num(r, "ranges")?.max(1.0);
                let thread_cpu = num(r, "query_thread_cpu_s")?;
                let process_cpu = num(r, "process_cpu_s")?;
                points.push((n, num(r, "ranges_per_sec")?));
                query.push((n, 1e3 * thread_cpu / ranges));
                pool.push((n, 1e3 * (process_cpu - thread_cpu).max(0.0) / ranges));
            }
            qps.push(Curve {
                label: what.clone(),
                points,
                band: Vec::new(),
                scatter: false,
            });
            per_range.push(Curve {
                label: format!("querying thread, {what}"),
                points: query,
                band: Vec::new(),
                scatter: false,
            });
            per_range.push(Curve {
                label: format!("scan pool, {what}"),
                points: pool,
                band: Vec::new(),
                scatter: false,
            });
        }
        let title = format!("ranges of {share}, fanout {t}: {levels} levels, {runs} runs");
        let x = Axis::new("scan threads", Unit::Plain).log(false);
        throughput.push(Panel {
            title: title.clone(),
            x: x.clone(),
            y: Axis::new("range queries per second", Unit::Plain).log(false),
            curves: qps,
        });
        cpu.push(Panel {
            title,
            x,
            y: Axis::new("CPU per range query (ms)", Unit::Plain).log(false),
            curves: per_range,
        });
    }
    if throughput.is_empty() {
        return Ok(());
    }
    let cols = throughput.len().min(2);
    let size = (
        600 * cols as u32 + 300,
        450 * throughput.len().div_ceil(2) as u32,
    );
    plot_panels(
        &dir.join("fig4-throughput.svg"),
        "Seed 004 Fig. 4: range queries on a thread pool (Options::scan_threads)",
        &throughput,
        cols,
        size,
    )?;
    plot_panels(
        &dir.join("fig4-cpu.svg"),
        "Seed 004 Fig. 4: where a range query's CPU goes",
        &cpu,
        cols,
        size,
    )?;
    Ok(())
}

/// The number in a series label (`buffer-1048576` → 1048576), 0 if none.
fn label_number(label: &str) -> f64 {
    label
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0)
}

fn no_order(_: &str) -> f64 {
    0.0
}

fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .context("usage: seed004_report RESULTS_DIR")?;
    let dir = Path::new(&dir);
    plot_series(
        dir,
        "fig1",
        "Seed 004 Fig. 1: sliding-window throughput by compaction policy (buffer 1/40 of the data)",
        series_curves(dir, "fig1-", no_order)?,
    )?;
    let mut fig2 = series_curves(dir, "fig2-", label_number)?;
    for c in &mut fig2 {
        let bytes = label_number(&c.label);
        c.label = format!("{} MiB buffer", bytes / f64::from(1u32 << 20));
    }
    plot_series(
        dir,
        "fig2",
        "Seed 004 Fig. 2: sliding-window throughput by buffer size (tiered, T = 10)",
        fig2,
    )?;
    plot_fig4(dir)
}
