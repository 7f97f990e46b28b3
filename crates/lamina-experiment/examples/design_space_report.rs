//! Draws seed 001's Fig. 4 for the design-space experiment
//! (`experiments/design-space/run.sh`) from the `Db::stats` JSON it wrote
//! per strategy: (a)–(d) as bars (data movement per ingested byte,
//! compactions, mean compaction latency, the largest write latency) in
//! `fig4.svg`; when the runs measured queries, (e) CPU time per point
//! lookup, (f) blocks read per lookup and (h) P90 lookup latency against
//! the fraction of empty lookups, and (g) CPU time per range scan against
//! selectivity, one curve per strategy, in `fig4-queries.svg`; when they
//! deleted, Fig. 8(d)–(f) as bars in `fig8-deletes.svg`.
//! `summarize.py` writes the tables.
//!
//! Usage: `design_space_report DIR`.

use std::path::Path;

use anyhow::{Context, Result};
use lamina_experiment::plot::{plot_bars, plot_panels, Axis, BarPanel, Curve, Panel, Unit};
use serde_json::Value;

/// The strategies in the paper's order.
const ORDER: [&str; 9] = [
    "full", "lo1", "lo2", "rr", "cold", "old", "tsd", "tsa", "tier",
];

fn num(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .context("usage: design_space_report DIR")?;
    let dir = Path::new(&dir);
    // `NAME.json` or `NAME@PARAMS.json` (a variant, e.g. a TSA
    // threshold), in the paper's order of NAME.
    let mut labels = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let file = entry?.file_name().to_string_lossy().into_owned();
        if let Some(label) = file.strip_suffix(".json") {
            let base = label.split('@').next().unwrap_or(label);
            if let Some(rank) = ORDER.iter().position(|n| *n == base) {
                labels.push((rank, label.to_string()));
            }
        }
    }
    labels.sort();
    let mut stats = Vec::new();
    for (_, label) in labels {
        let path = dir.join(format!("{label}.json"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        stats.push((label, v));
    }
    let panel = |title: &str, y: Axis, f: &dyn Fn(&Value) -> f64| BarPanel {
        title: title.into(),
        x_title: "strategy".into(),
        y,
        bars: stats.iter().map(|(n, v)| (n.to_string(), f(v))).collect(),
    };
    let panels = [
        panel(
            "(a) data movement",
            Axis::new("bytes read + written / ingested (ratio)", Unit::Plain),
            &|v| {
                (num(v, &["compaction_bytes_read"]) + num(v, &["compaction_bytes_written"]))
                    / num(v, &["bytes_ingested"]).max(1.0)
            },
        ),
        panel(
            "(b) compactions",
            Axis::new("compactions", Unit::Count),
            &|v| num(v, &["compactions"]),
        ),
        panel(
            "(c) mean compaction latency",
            Axis::new("latency (ms)", Unit::Plain),
            &|v| num(v, &["compaction_latency", "mean_us"]) / 1e3,
        ),
        panel(
            "(d) largest write latency",
            Axis::new("latency (ms)", Unit::Plain),
            &|v| num(v, &["put_latency", "max_us"]) / 1e3,
        ),
    ];
    let path = dir.join("fig4.svg");
    plot_bars(
        &path,
        "Design space (seed 001 Fig. 4)",
        &panels,
        2,
        (1100, 760),
    )
    .with_context(|| format!("plotting {}", path.display()))?;
    println!("wrote {}", path.display());
    queries(dir, &stats)?;
    deletes(dir, &stats)
}

/// Fig. 8(d)–(f), if the runs deleted: tombstones left, the paper's space
/// amplification and data movement, one bar per strategy.
fn deletes(dir: &Path, stats: &[(String, Value)]) -> Result<()> {
    let runs: Vec<&(String, Value)> = stats
        .iter()
        .filter(|(_, v)| v.get("deletes").is_some())
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    let panel = |title: &str, y: Axis, f: &dyn Fn(&Value) -> f64| BarPanel {
        title: title.into(),
        x_title: "strategy".into(),
        y,
        bars: runs.iter().map(|(n, v)| (n.clone(), f(v))).collect(),
    };
    let panels = [
        panel(
            "(d) tombstones left",
            Axis::new("tombstones", Unit::Count),
            &|v| num(v, &["deletes", "remaining"]),
        ),
        panel(
            "(e) space amplification, (size - valid) / valid",
            Axis::new("space amplification (ratio)", Unit::Plain),
            &|v| {
                let valid = num(v, &["valid_bytes"]).max(1.0);
                (num(v, &["disk_bytes"]) - valid) / valid
            },
        ),
        panel(
            "(f) data movement",
            Axis::new("bytes read + written / ingested (ratio)", Unit::Plain),
            &|v| {
                (num(v, &["compaction_bytes_read"]) + num(v, &["compaction_bytes_written"]))
                    / num(v, &["bytes_ingested"]).max(1.0)
            },
        ),
        panel(
            "deletes persisted within the threshold",
            Axis::new("share of deletes issued (ratio)", Unit::Plain),
            &|v| num(v, &["deletes", "persisted_within"]) / num(v, &["deletes", "issued"]).max(1.0),
        ),
    ];
    let path = dir.join("fig8-deletes.svg");
    plot_bars(
        &path,
        "Deletes (seed 001 Fig. 8(d)–(f))",
        &panels,
        2,
        (1100, 760),
    )
    .with_context(|| format!("plotting {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Fig. 4(e)–(h), if the runs measured lookups and scans.
fn queries(dir: &Path, stats: &[(String, Value)]) -> Result<()> {
    let has = |k: &str| stats.iter().any(|(_, v)| v.get(k).is_some());
    if !has("lookups") || !has("scans") {
        return Ok(());
    }
    // One curve per strategy: (x, y) per row of its `list`.
    let curves = |list: &str, x: &[&str], y: &[&str], scale: f64| -> Vec<Curve> {
        stats
            .iter()
            .filter_map(|(name, v)| {
                let rows = v.get(list)?.as_array()?;
                Some(Curve {
                    label: name.to_string(),
                    points: rows
                        .iter()
                        .map(|r| (num(r, x), num(r, y) * scale))
                        .collect(),
                    band: Vec::new(),
                    scatter: false,
                })
            })
            .collect()
    };
    let alpha = Axis::new("fraction of empty lookups α (ratio)", Unit::Plain).log(false);
    let panels = [
        Panel {
            // CPU time: the wall-clock mean of a shared machine is
            // dominated by descheduled lookups (README).
            title: "(e) mean point-lookup cost".into(),
            x: alpha.clone(),
            y: Axis::new("CPU time per lookup (µs)", Unit::Plain).log(false),
            curves: curves("lookups", &["alpha"], &["cpu_us"], 1.0),
        },
        Panel {
            title: "(f) read amplification".into(),
            x: alpha.clone(),
            y: Axis::new("blocks read from disk per lookup", Unit::Plain).log(false),
            curves: curves("lookups", &["alpha"], &["io", "read_amplification"], 1.0),
        },
        Panel {
            title: "(g) range scan latency".into(),
            x: Axis::new("selectivity (% of the key space)", Unit::Plain).log(true),
            y: Axis::new("CPU time per scan (µs)", Unit::Plain).log(true),
            curves: curves("scans", &["selectivity"], &["cpu_us"], 1.0)
                .into_iter()
                .map(|mut c| {
                    c.points.iter_mut().for_each(|p| p.0 *= 100.0);
                    c
                })
                .collect(),
        },
        Panel {
            title: "(h) P90 point-lookup latency".into(),
            x: alpha,
            y: Axis::new("latency (µs)", Unit::Plain).log(false),
            curves: curves("lookups", &["alpha"], &["all", "p90_us"], 1.0),
        },
    ];
    let path = dir.join("fig4-queries.svg");
    plot_panels(
        &path,
        "Design space: queries (seed 001 Fig. 4(e)–(h))",
        &panels,
        2,
        (1200, 860),
    )
    .with_context(|| format!("plotting {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}
