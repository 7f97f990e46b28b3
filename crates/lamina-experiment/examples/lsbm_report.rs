//! Summarizes and plots the LSbM experiment (`experiments/lsbm/run.sh`):
//! reads the per-second series `DIR/SYSTEM-DIST.csv` that
//! `lamina bench --benchmarks=fillrandom,mixedhot --timeseries` wrote, and
//! writes `DIR/summary.json`, `DIR/results.md` and one chart per figure
//! (`DIR/fig-DIST-{hit_ratio,read_qps,db_mb}.svg`, one curve per system).
//!
//! Usage: `lsbm_report DIR SKIP_SECONDS SYSTEM,... DIST,...`. Means skip
//! the first `SKIP_SECONDS` of each series (while a cold cache fills, or
//! while the readers settle after `--warm_up_seconds` ends).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use lamina_experiment::plot::{plot_lines, Axis, Curve, LinesOptions, Unit};

/// One second of a series.
struct Sample {
    second: f64,
    read_qps: f64,
    write_qps: f64,
    hit_ratio: Option<f64>,
    /// Data-block lookups behind `hit_ratio` (absent from older series).
    cache_lookups: Option<f64>,
    row_cache_hit_ratio: Option<f64>,
    db_bytes: f64,
    buffer_bytes: f64,
    compaction_bytes_written: f64,
    cache_invalidated_blocks: f64,
    /// Per level with a buffer: the `buffer_levels` column's fields after
    /// the level (absent from older series).
    levels: BTreeMap<usize, [f64; LEVEL_FIELDS]>,
}

/// The fields of a level in the `buffer_levels` column, after the level:
/// state now, then counters since the database opened.
const LEVEL_FIELDS: usize = 9;
const FILES: usize = 0;
const BYTES: usize = 1;
/// The counters, by their summary names.
const COUNTERS: [(usize, &str); 7] = [
    (2, "appended_live"),
    (3, "appended_frozen"),
    (4, "frozen_ms"),
    (5, "probes"),
    (6, "gets"),
    (7, "invalidated_blocks"),
    (8, "tree_invalidated_blocks"),
];

/// Parses a `buffer_levels` cell: `level:f1:…:f9` entries, `;`-separated.
fn parse_levels(cell: &str) -> Option<BTreeMap<usize, [f64; LEVEL_FIELDS]>> {
    let mut out = BTreeMap::new();
    for entry in cell.split(';').filter(|e| !e.is_empty()) {
        let mut parts = entry.split(':');
        let level: usize = parts.next()?.parse().ok()?;
        let mut fields = [0.0; LEVEL_FIELDS];
        for f in &mut fields {
            *f = parts.next()?.parse().ok()?;
        }
        out.insert(level, fields);
    }
    Some(out)
}

fn read_series(path: &Path) -> Result<Vec<Sample>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .with_context(|| format!("{}: no column {name}", path.display()))
    };
    let cols = [
        col("second")?,
        col("read_qps")?,
        col("write_qps")?,
        col("hit_ratio")?,
        col("db_bytes")?,
        col("buffer_bytes")?,
        col("compaction_bytes_written")?,
        col("cache_invalidated_blocks")?,
    ];
    // Absent from series written before the row cache existed, and before
    // the lookups were counted.
    let row_col = header.iter().position(|h| *h == "row_cache_hit_ratio");
    let lookups_col = header.iter().position(|h| *h == "cache_lookups");
    let levels_col = header.iter().position(|h| *h == "buffer_levels");
    let mut out = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| -> Result<f64> {
            f.get(cols[i])
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("{}: bad line {line:?}", path.display()))
        };
        out.push(Sample {
            second: num(0)?,
            read_qps: num(1)?,
            write_qps: num(2)?,
            hit_ratio: num(3).ok(),
            db_bytes: num(4)?,
            buffer_bytes: num(5)?,
            compaction_bytes_written: num(6)?,
            cache_invalidated_blocks: num(7)?,
            row_cache_hit_ratio: row_col.and_then(|c| f.get(c)).and_then(|v| v.parse().ok()),
            cache_lookups: lookups_col
                .and_then(|c| f.get(c))
                .and_then(|v| v.parse().ok()),
            levels: levels_col
                .and_then(|c| f.get(c))
                .and_then(|v| parse_levels(v))
                .unwrap_or_default(),
        });
    }
    if out.is_empty() {
        bail!("{}: no samples", path.display());
    }
    Ok(out)
}

/// How flat a hit-ratio series is: its lowest second, its standard
/// deviation (population) and how many seconds fell below 0.9 (seconds
/// without a cache lookup are left out).
fn flatness(ratios: &[f64]) -> (f64, f64, f64) {
    let m = mean(ratios.iter().copied());
    let sd = mean(ratios.iter().map(|r| (r - m) * (r - m))).sqrt();
    let lowest = ratios.iter().copied().fold(f64::NAN, f64::min);
    let below = ratios.iter().filter(|r| **r < 0.9).count() as f64;
    (lowest, sd, below)
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0u64), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// The hit ratio over every lookup of `samples` (each second weighed by
/// its lookups, so it is what sets the read throughput), if the series
/// counted them.
fn overall_hit_ratio(samples: &[&Sample]) -> Option<f64> {
    let (mut hits, mut lookups) = (0.0, 0.0);
    for s in samples {
        if let (Some(r), Some(n)) = (s.hit_ratio, s.cache_lookups) {
            hits += r * n;
            lookups += n;
        } else if s.cache_lookups.is_none() {
            return None;
        }
    }
    (lookups > 0.0).then(|| hits / lookups)
}

/// The lowest hit ratio over `window` consecutive seconds (each window's
/// lookups weighed as in [`overall_hit_ratio`]), if the series counted
/// them and is that long.
fn lowest_window(samples: &[&Sample], window: usize) -> Option<f64> {
    samples
        .windows(window)
        .filter_map(overall_hit_ratio)
        .fold(None, |low: Option<f64>, r| {
            Some(low.map_or(r, |l| l.min(r)))
        })
}

/// Per level with a buffer, over the seconds `steady`: files and bytes
/// (mean and at the end) and the counters' growth, as summary entries
/// `b{level}_{name}`.
fn level_entries(steady: &[&Sample]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let (Some(first), Some(last)) = (steady.first(), steady.last()) else {
        return out;
    };
    for (&level, end) in &last.levels {
        let at = |s: &Sample, i: usize| s.levels.get(&level).map_or(0.0, |f| f[i]);
        let mut put = |name: &str, v: f64| out.insert(format!("b{level}_{name}"), v);
        put("files_mean", mean(steady.iter().map(|s| at(s, FILES))));
        put("bytes_mean", mean(steady.iter().map(|s| at(s, BYTES))));
        put("files_end", end[FILES]);
        put("bytes_end", end[BYTES]);
        for (i, name) in COUNTERS {
            put(name, end[i] - at(first, i));
        }
    }
    out
}

#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, skip, systems, dists] = args.as_slice() else {
        bail!("usage: lsbm_report DIR SKIP_SECONDS SYSTEM,... DIST,...");
    };
    let dir = Path::new(dir);
    let skip: f64 = skip.parse().context("SKIP_SECONDS")?;
    let systems: Vec<&str> = systems.split(',').collect();
    let dists: Vec<&str> = dists.split(',').collect();
    let mut summary: BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>> = BTreeMap::new();
    let mut levels_md = String::from(
        "| dist | system | level | files mean / end | MB mean / end | units' files appended live | appended frozen | frozen s | lookups consulting | answered | invalidated blocks (buffer) | invalidated blocks (tree) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut md = String::from(
        "| dist | system | hit ratio (mean of seconds) | hit ratio (all lookups) | lowest 10 s | lowest second | sd | seconds < 0.9 | row cache hit ratio | read QPS | write QPS | compaction MB written | DB MB mean | buffer MB mean | invalidated cached blocks |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for dist in &dists {
        let mut charts: [Vec<Curve>; 3] = Default::default();
        for system in &systems {
            let series = read_series(&dir.join(format!("{system}-{dist}.csv")))?;
            let steady: Vec<&Sample> = series.iter().filter(|s| s.second > skip).collect();
            let (first, last) = match (steady.first(), steady.last()) {
                (Some(f), Some(l)) => (*f, *l),
                _ => bail!("{system}-{dist}: no sample after {skip} s"),
            };
            let ratios: Vec<f64> = steady.iter().filter_map(|s| s.hit_ratio).collect();
            let (lowest, sd, below) = flatness(&ratios);
            let overall = overall_hit_ratio(&steady);
            let lowest_10s = lowest_window(&steady, 10);
            let mut row: BTreeMap<String, f64> = BTreeMap::from([
                ("hit_ratio", mean(ratios.iter().copied())),
                ("hit_ratio_lowest", lowest),
                ("hit_ratio_sd", sd),
                ("seconds_below_0_9", below),
                (
                    "row_cache_hit_ratio",
                    mean(steady.iter().filter_map(|s| s.row_cache_hit_ratio)),
                ),
                ("read_qps", mean(steady.iter().map(|s| s.read_qps))),
                ("write_qps", mean(steady.iter().map(|s| s.write_qps))),
                (
                    "compaction_bytes_written",
                    last.compaction_bytes_written - first.compaction_bytes_written,
                ),
                ("db_bytes_mean", mean(steady.iter().map(|s| s.db_bytes))),
                (
                    "buffer_bytes_mean",
                    mean(steady.iter().map(|s| s.buffer_bytes)),
                ),
                (
                    "cache_invalidations",
                    last.cache_invalidated_blocks - first.cache_invalidated_blocks,
                ),
                ("seconds", last.second - first.second + 1.0),
            ])
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if let Some(o) = overall {
                row.insert("hit_ratio_overall".into(), o);
            }
            if let Some(o) = lowest_10s {
                row.insert("hit_ratio_lowest_10s".into(), o);
            }
            let levels = level_entries(&steady);
            for &level in last.levels.keys() {
                let get = |name: &str| {
                    levels
                        .get(&format!("b{level}_{name}"))
                        .copied()
                        .unwrap_or(0.0)
                };
                levels_md.push_str(&format!(
                    "| {dist} | {system} | {level} | {:.1} / {:.0} | {:.1} / {:.1} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
                    get("files_mean"),
                    get("files_end"),
                    get("bytes_mean") / 1e6,
                    get("bytes_end") / 1e6,
                    get("appended_live"),
                    get("appended_frozen"),
                    get("frozen_ms") / 1e3,
                    get("probes"),
                    get("gets"),
                    get("invalidated_blocks"),
                    get("tree_invalidated_blocks"),
                ));
            }
            row.extend(levels);
            md.push_str(&format!(
                "| {dist} | {system} | {:.3} | {} | {} | {:.3} | {:.3} | {:.0} of {} | {:.3} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
                row["hit_ratio"],
                overall.map_or("–".to_string(), |o| format!("{o:.3}")),
                lowest_10s.map_or("–".to_string(), |o| format!("{o:.3}")),
                lowest,
                sd,
                below,
                ratios.len(),
                row["row_cache_hit_ratio"],
                row["read_qps"],
                row["write_qps"],
                row["compaction_bytes_written"] / 1e6,
                row["db_bytes_mean"] / 1e6,
                row["buffer_bytes_mean"] / 1e6,
                row["cache_invalidations"],
            ));
            summary
                .entry(system.to_string())
                .or_default()
                .insert(dist.to_string(), row);
            let curve = |y: &dyn Fn(&Sample) -> Option<f64>| Curve {
                label: system.to_string(),
                points: series
                    .iter()
                    .filter_map(|s| y(s).map(|v| (s.second, v)))
                    .collect(),
                band: Vec::new(),
                scatter: false,
            };
            charts[0].push(curve(&|s| s.hit_ratio));
            charts[1].push(curve(&|s| Some(s.read_qps)));
            charts[2].push(curve(&|s| Some(s.db_bytes)));
        }
        for ((name, y), curves) in [
            (
                "hit_ratio",
                Axis::new("block-cache hit ratio (data blocks)", Unit::Plain),
            ),
            (
                "read_qps",
                Axis::new("reads per second (ops/s)", Unit::Count),
            ),
            (
                "db_mb",
                Axis::new("database size on disk (bytes)", Unit::Bytes),
            ),
        ]
        .into_iter()
        .zip(&charts)
        {
            let title = format!("{dist}: {}", y.title);
            let opts = LinesOptions {
                x: Axis::new("time (s)", Unit::Count).log(false),
                y: y.log(false),
                width: 1000,
                height: 500,
            };
            let path = dir.join(format!("fig-{dist}-{name}.svg"));
            plot_lines(&path, &title, curves, &opts)
                .with_context(|| format!("plotting {}", path.display()))?;
        }
    }
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )?;
    md.push_str("\nCompaction buffers per level, over the same seconds (state: mean and at the end; counts: their growth):\n\n");
    md.push_str(&levels_md);
    std::fs::write(dir.join("results.md"), &md)?;
    print!("{md}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand: mean 0.9, deviations 0.1, -0.1, 0, 0.
    #[test]
    fn flatness_of_a_small_series() {
        let (lowest, sd, below) = flatness(&[1.0, 0.8, 0.9, 0.9]);
        assert_eq!(lowest, 0.8);
        assert!((sd - (0.02f64 / 4.0).sqrt()).abs() < 1e-12, "{sd}");
        assert_eq!(below, 1.0);
    }

    fn sample(hit_ratio: Option<f64>, cache_lookups: Option<f64>) -> Sample {
        Sample {
            second: 1.0,
            read_qps: 0.0,
            write_qps: 0.0,
            hit_ratio,
            cache_lookups,
            row_cache_hit_ratio: None,
            db_bytes: 0.0,
            buffer_bytes: 0.0,
            compaction_bytes_written: 0.0,
            cache_invalidated_blocks: 0.0,
            levels: BTreeMap::new(),
        }
    }

    /// By hand: a second of 1,000 lookups at 0.99 and one of 10 at 0.0 is
    /// 990 hits of 1,010 lookups (0.980), where the mean of the two seconds
    /// is 0.495. A series without the lookups has no overall ratio.
    #[test]
    fn overall_ratio_weighs_seconds_by_their_lookups() {
        let (a, b) = (
            sample(Some(0.99), Some(1000.0)),
            sample(Some(0.0), Some(10.0)),
        );
        let o = overall_hit_ratio(&[&a, &b]).unwrap();
        assert!((o - 990.0 / 1010.0).abs() < 1e-12, "{o}");
        let idle = sample(None, Some(0.0));
        assert_eq!(overall_hit_ratio(&[&a, &idle]), Some(0.99));
        assert_eq!(overall_hit_ratio(&[&sample(Some(0.9), None)]), None);
    }

    /// By hand: seconds of 100 lookups at 1.0, 0.5, 0.9 and 1.0; windows
    /// of two: 0.75, 0.7, 0.95, so the lowest is 0.7. Too short a series
    /// has none.
    #[test]
    fn lowest_window_weighs_each_window_by_its_lookups() {
        let s: Vec<Sample> = [1.0, 0.5, 0.9, 1.0]
            .iter()
            .map(|&r| sample(Some(r), Some(100.0)))
            .collect();
        let refs: Vec<&Sample> = s.iter().collect();
        let low = lowest_window(&refs, 2).unwrap();
        assert!((low - 0.7).abs() < 1e-12, "{low}");
        assert_eq!(lowest_window(&refs, 5), None);
    }

    /// A `buffer_levels` cell by hand, and the window's entries: state
    /// means and ends, counters as growth since the first second.
    #[test]
    fn buffer_levels_parse_and_summarize() {
        let mut a = sample(None, None);
        let mut b = sample(None, None);
        a.levels = parse_levels("1:2:2000:5:0:0:10:4:1:7;2:4:4000:3:1:0:0:0:0:0").unwrap();
        b.levels = parse_levels("1:4:6000:9:2:500:30:14:3:9").unwrap();
        assert_eq!(parse_levels(""), Some(BTreeMap::new()));
        assert_eq!(parse_levels("1:2"), None);
        let e = level_entries(&[&a, &b]);
        assert_eq!(e["b1_files_mean"], 3.0);
        assert_eq!(e["b1_bytes_mean"], 4000.0);
        assert_eq!(e["b1_bytes_end"], 6000.0);
        assert_eq!(e["b1_appended_live"], 4.0);
        assert_eq!(e["b1_appended_frozen"], 2.0);
        assert_eq!(e["b1_frozen_ms"], 500.0);
        assert_eq!(e["b1_gets"], 10.0);
        assert_eq!(e["b1_tree_invalidated_blocks"], 2.0);
        // Level 2 is gone by the last second: only levels there count.
        assert!(!e.contains_key("b2_files_mean"));
    }
}
