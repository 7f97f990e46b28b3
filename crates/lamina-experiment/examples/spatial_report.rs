//! Summarizes the spatial-index experiment (`experiments/spatial/run.sh`):
//! reads every `DIR/*.json` report that `lamina spatial bench` wrote and
//! writes `DIR/summary.json` (all reports), `DIR/results.md` (one table of
//! writes, one of reads per σ) and, per dataset, the charts
//! `DIR/fig-DATA-{read_amplification,latency}.svg` (one curve per
//! configuration, x = σ).
//!
//! Usage: `spatial_report DIR`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use lamina_experiment::plot::{plot_lines, Axis, Curve, LinesOptions, Unit};
use serde_json::Value;

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Reports written before `--update-fraction` existed have no `writes` or
/// `update_fraction`: every write inserted a new record.
fn writes(r: &Value) -> f64 {
    r.get("writes")
        .and_then(Value::as_f64)
        .unwrap_or_else(|| num(r, "records"))
}

fn update_fraction(r: &Value) -> f64 {
    r.get("update_fraction")
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("?")
}

/// (σ, read amplification, mean latency µs) of one configuration; curves
/// are grouped by data set, then configuration.
type SigmaPoint = (f64, f64, f64);

/// `policy comparator maintenance` of a report, with the update fraction
/// when some writes moved records.
fn config(r: &Value) -> String {
    let updates = update_fraction(r);
    let mut c = format!(
        "{} {} {}",
        text(r, "compaction"),
        text(r, "comparator"),
        text(r, "maintenance")
    );
    if updates > 0.0 {
        c.push_str(&format!(" updates={updates}"));
    }
    c
}

#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        bail!("usage: spatial_report DIR");
    };
    let dir = Path::new(dir);
    let mut reports: Vec<Value> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "summary.json"))
        .collect();
    names.sort();
    for path in &names {
        let text = std::fs::read_to_string(path)?;
        reports.push(
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?,
        );
    }
    if reports.is_empty() {
        bail!("no reports in {}", dir.display());
    }
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&reports)?,
    )?;

    let mut md = String::from(
        "## Writes\n\n| data | policy | comparator | maintenance | updates | writes | records | writes/s | WA spatial index | WA primary | index files | index runs | write lookups | anti-matter | validations | stale candidates |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &reports {
        let ds = r.get("dataset").unwrap_or(&Value::Null);
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} |\n",
            text(r, "data"),
            text(r, "compaction"),
            text(r, "comparator"),
            text(r, "maintenance"),
            update_fraction(r),
            writes(r),
            num(r, "records"),
            num(r, "writes_per_sec"),
            num(r, "index_write_amplification"),
            num(r, "primary_write_amplification"),
            num(r, "index_files"),
            num(r, "index_sorted_runs"),
            num(ds, "write_lookups"),
            num(ds, "antimatter"),
            num(ds, "validations"),
            num(ds, "stale_candidates"),
        ));
    }
    md.push_str("\n## Window queries (COUNT)\n\n| data | policy | comparator | maintenance | updates | σ | mean results | read amplification (components) | blocks read | blocks pruned | mean latency µs | p99 µs |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut curves: BTreeMap<String, BTreeMap<String, Vec<SigmaPoint>>> = BTreeMap::new();
    for r in &reports {
        let sigmas = r
            .get("sigmas")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for s in &sigmas {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {:.1} | {:.2} | {:.1} | {:.0} | {:.0} | {:.0} |\n",
                text(r, "data"),
                text(r, "compaction"),
                text(r, "comparator"),
                text(r, "maintenance"),
                update_fraction(r),
                num(s, "sigma"),
                num(s, "mean_results"),
                num(s, "read_amplification"),
                num(s, "blocks_per_query"),
                num(s, "blocks_pruned_per_query"),
                num(s, "mean_latency_us"),
                num(s, "p99_latency_us"),
            ));
            curves
                .entry(text(r, "data").to_string())
                .or_default()
                .entry(config(r))
                .or_default()
                .push((
                    num(s, "sigma"),
                    num(s, "read_amplification"),
                    num(s, "mean_latency_us"),
                ));
        }
    }
    std::fs::write(dir.join("results.md"), md)?;
    for (data, configs) in &curves {
        let safe: String = data
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        for (metric, y_desc, pick) in [
            (
                "read_amplification",
                "components scanned per query",
                (|p: &SigmaPoint| p.1) as fn(&SigmaPoint) -> f64,
            ),
            ("latency", "mean query latency (µs)", |p| p.2),
        ] {
            let lines: Vec<Curve> = configs
                .iter()
                .map(|(label, pts)| Curve {
                    label: label.clone(),
                    points: pts.iter().map(|p| (p.0, pick(p))).collect(),
                    band: Vec::new(),
                    scatter: false,
                })
                .collect();
            plot_lines(
                &dir.join(format!("fig-{safe}-{metric}.svg")),
                &format!("{data}: {metric} by selectivity 10^-σ"),
                &lines,
                &LinesOptions {
                    x: Axis::new("σ (window = 360·10^-σ × 180·10^-σ degrees)", Unit::Plain)
                        .log(false),
                    y: Axis::new(y_desc, Unit::Plain),
                    width: 1000,
                    height: 560,
                },
            )?;
        }
    }
    Ok(())
}
