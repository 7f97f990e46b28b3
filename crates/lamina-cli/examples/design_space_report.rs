//! Draws seed 001's Fig. 4 (a)–(d) for the design-space experiment
//! (`experiments/design-space/run.sh`) from the `Db::stats` JSON it wrote
//! per strategy: data movement per ingested byte, compactions, mean
//! compaction latency and the largest write latency, one bar per strategy.
//! `summarize.py` writes the table.
//!
//! Usage: `design_space_report DIR` (writes `DIR/fig4.svg`).

use std::path::Path;

use anyhow::{Context, Result};
use lamina_sim::plot::{plot_bars, Axis, BarPanel, Unit};
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
    let mut stats = Vec::new();
    for name in ORDER {
        let path = dir.join(format!("{name}.json"));
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        stats.push((name, v));
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
    Ok(())
}
