//! `lamina experiment SPEC.toml`: a sweep of compaction strategies ×
//! engine parameters × workloads, one fresh database per run.
//!
//! Each finished run appends one row to `results.csv` and one JSON object
//! (the row plus the full `Db::stats()`) to `results.jsonl` in the output
//! directory (`--out`, by default `lamina-experiments/NAME` in the working
//! directory, so an example never writes into the repository's committed
//! results); a run already in `results.csv` (same `run_id`, which ends in
//! a fingerprint of everything its result depends on: engine options,
//! workload settings, seed, lamina's version) is skipped, so an interrupted
//! sweep resumes where it stopped. Rows the spec no longer produces (it or
//! lamina changed) make the command stop: `--fresh` starts over. The plots of the spec's
//! `[[plot]]` tables are drawn from `results.csv` at the end (or alone with
//! `--plot-only`). See `bench/README.md` for the spec format.

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::progress;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use lamina_experiment::plot::{plot_lines, Axis, Curve, LinesOptions, Unit};
use lamina_experiment::{Cell, Experiment, PlotSpec, Run, Spec};

/// Flags of `lamina experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The experiment spec (TOML).
    #[arg(value_name = "SPEC.toml")]
    pub spec: PathBuf,
    /// Where results.csv, results.jsonl and the plots go [default:
    /// `lamina-experiments/NAME` in the working directory, NAME the spec's
    /// file name without `.toml`, or its directory's name for a
    /// `spec.toml`; never the spec's own directory, whose committed results
    /// only `--out` replaces].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Parent of the per-run database directories [default: the system
    /// temporary directory].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Delete earlier results and run every combination again.
    #[arg(long)]
    pub fresh: bool,
    /// Only redraw the plots from results.csv.
    #[arg(long)]
    pub plot_only: bool,
}

/// Runs the experiment.
pub fn run(args: ExperimentArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("reading {}", args.spec.display()))?;
    let exp =
        Experiment::parse(&text).with_context(|| format!("parsing {}", args.spec.display()))?;
    let header = exp.header();
    let (spec, runs) = (&exp.spec, &exp.runs);
    let out = args.out.clone().unwrap_or_else(|| default_out(&args.spec));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let csv_path = out.join("results.csv");
    let json_path = out.join("results.jsonl");

    if !args.plot_only {
        if args.fresh {
            for p in [&csv_path, &json_path] {
                match std::fs::remove_file(p) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(e).with_context(|| format!("deleting {}", p.display()))
                    }
                    _ => {}
                }
            }
        }
        let done = finished_runs(&csv_path, &header)?;
        let current: HashSet<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        let stale = done
            .iter()
            .filter(|id| !current.contains(id.as_str()))
            .count();
        if stale > 0 {
            bail!(
                "{} holds {stale} runs this spec no longer produces (its workloads, engine \
                 options or lamina's version changed since they ran); pass --fresh to start \
                 over, or --out another directory",
                csv_path.display()
            );
        }
        let todo: Vec<&Run> = runs.iter().filter(|r| !done.contains(&r.id)).collect();
        eprintln!(
            "{} runs: {} done already, {} to run",
            runs.len(),
            runs.len() - todo.len(),
            todo.len()
        );
        sweep(&todo, &args, &header, &csv_path, &json_path)?;
    }
    for p in &spec.plots {
        let path = out.join(&p.file);
        draw_plot(spec, p, &csv_path, &path)?;
        eprintln!("plot: {}", path.display());
    }
    eprintln!("results: {}", csv_path.display());
    Ok(())
}

/// Where a spec's results go without `--out`: `lamina-experiments/NAME`,
/// NAME the spec's file stem, or for a `spec.toml` its directory's name
/// (`experiments/buffer-vs-strategy/spec.toml` ->
/// `lamina-experiments/buffer-vs-strategy`).
fn default_out(spec: &Path) -> PathBuf {
    let stem = spec.file_stem().map(|s| s.to_string_lossy().into_owned());
    let dir_name = spec.canonicalize().ok().and_then(|p| {
        p.parent()?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    });
    let name = match (stem, dir_name) {
        (Some(stem), Some(dir)) if stem == "spec" => dir,
        (Some(stem), _) => stem,
        (None, _) => "experiment".to_string(),
    };
    Path::new("lamina-experiments").join(name)
}

/// The run ids in results.csv; fails if its header is not `header` (the
/// spec changed its grid: start over with --fresh or another --out).
fn finished_runs(csv_path: &Path, header: &[String]) -> Result<HashSet<String>> {
    let mut done = HashSet::new();
    if !csv_path.exists() {
        return Ok(done);
    }
    let mut rd = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(csv_path)
        .with_context(|| format!("reading {}", csv_path.display()))?;
    let found: Vec<String> = rd.headers()?.iter().map(str::to_string).collect();
    if found != header {
        bail!(
            "{} has other columns than this spec produces; pass --fresh to start over",
            csv_path.display()
        );
    }
    for rec in rd.records() {
        // A row cut short by an interrupted write is not a finished run.
        match rec {
            Ok(r) if r.len() == header.len() => {
                done.insert(r.get(0).unwrap_or_default().to_string());
            }
            _ => {}
        }
    }
    Ok(done)
}

fn sweep(
    todo: &[&Run],
    args: &ExperimentArgs,
    header: &[String],
    csv_path: &Path,
    json_path: &Path,
) -> Result<()> {
    if todo.is_empty() {
        return Ok(());
    }
    let old = std::fs::read(csv_path).unwrap_or_default();
    let mut file = open_append(csv_path)?;
    if old.last().is_some_and(|&b| b != b'\n') {
        // An interrupted write left half a row: end it, so that the next
        // row starts on a line of its own (the half row is not a finished
        // run and is ignored).
        file.write_all(b"\n")?;
    }
    let mut csv_out = csv::Writer::from_writer(file);
    if old.is_empty() {
        csv_out.write_record(header)?;
        csv_out.flush()?;
    }
    let mut json_out = open_append(json_path)?;
    let total_ops: u64 = todo.iter().map(|r| r.ops()).sum();
    let bar = progress::bar(total_ops, "");
    let work = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    for (i, run) in todo.iter().enumerate() {
        bar.set_prefix(format!("run {}/{}", i + 1, todo.len()));
        bar.set_message(run.id.clone());
        let measured = run.execute_scratch(&work, &mut |n| bar.inc(n))?;
        let row: Vec<String> = run.row(&measured).iter().map(Cell::csv).collect();
        let mut obj = serde_json::Map::new();
        for (k, v) in header.iter().zip(&row) {
            obj.insert(k.clone(), serde_json::Value::String(v.clone()));
        }
        obj.insert("stats".into(), serde_json::to_value(&measured.stats)?);
        writeln!(json_out, "{}", serde_json::Value::Object(obj))?;
        json_out.flush()?;
        // The CSV row goes last: it is what marks the run finished.
        csv_out.write_record(&row)?;
        csv_out.flush()?;
        let line = format!(
            "{}: {:.0} ops/s, write amp {:.2}",
            run.id,
            measured.ops as f64 / measured.seconds.max(1e-9),
            measured.stats.write_amplification
        );
        progress::println(&bar, line);
    }
    bar.finish_and_clear();
    Ok(())
}

fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// Draws plot `p` from results.csv: mean `y` per (curve, x) over the
/// repetitions.
fn draw_plot(spec: &Spec, p: &PlotSpec, csv_path: &Path, path: &Path) -> Result<()> {
    let mut rd = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(csv_path)
        .with_context(|| format!("reading {}", csv_path.display()))?;
    let headers = rd.headers()?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| anyhow!("{} has no column {name:?}", csv_path.display()))
    };
    let (x_col, y_col) = (col(&p.x)?, col(&p.y)?);
    let (strategy_col, workload_col) = (col("strategy")?, col("workload")?);
    // Curves are told apart by strategy, workload (unless filtered) and the
    // swept parameters other than x.
    let other: Vec<(String, usize)> = spec
        .grid
        .iter()
        .filter(|(k, v)| **k != p.x && v.len() > 1)
        .map(|(k, _)| Ok((k.clone(), col(k)?)))
        .collect::<Result<_>>()?;
    let many_workloads = p.workload.is_none() && spec.workloads.len() > 1;
    let mut sums: BTreeMap<String, BTreeMap<u64, Repeats>> = BTreeMap::new();
    for rec in rd.records() {
        let rec = rec?;
        let get = |i: usize| rec.get(i).unwrap_or_default();
        if p.workload
            .as_deref()
            .is_some_and(|w| w != get(workload_col))
        {
            continue;
        }
        let (Ok(x), Ok(y)) = (get(x_col).parse::<f64>(), get(y_col).parse::<f64>()) else {
            continue;
        };
        let mut label = get(strategy_col).to_string();
        if many_workloads {
            label.push_str(&format!(" {}", get(workload_col)));
        }
        for (k, i) in &other {
            label.push_str(&format!(" {k}={}", get(*i)));
        }
        let e = sums
            .entry(label)
            .or_default()
            .entry(x.to_bits())
            .or_insert(Repeats {
                x,
                sum: 0.0,
                n: 0,
                min: f64::INFINITY,
                max: f64::NEG_INFINITY,
            });
        e.sum += y;
        e.n += 1;
        e.min = e.min.min(y);
        e.max = e.max.max(y);
    }
    let curves: Vec<Curve> = sums
        .into_iter()
        .map(|(label, pts)| {
            let mut pts: Vec<Repeats> = pts.into_values().collect();
            pts.sort_by(|a, b| a.x.total_cmp(&b.x));
            // Repeated runs (rounds, repeats) show their spread.
            let band = match pts.iter().any(|r| r.n > 1) {
                true => pts.iter().map(|r| (r.x, r.min, r.max)).collect(),
                false => Vec::new(),
            };
            Curve {
                label,
                points: pts.iter().map(|r| (r.x, r.sum / f64::from(r.n))).collect(),
                band,
                scatter: false,
            }
        })
        .collect();
    let title = match (&spec.title, &p.workload) {
        (t, Some(w)) if !t.is_empty() => format!("{t} ({w})"),
        (t, _) if !t.is_empty() => t.clone(),
        _ => format!("{} over {}", p.y, p.x),
    };
    plot_lines(
        path,
        &title,
        &curves,
        &LinesOptions {
            x: axis(&p.x).log(p.log_x),
            y: axis(&p.y),
            width: 1100,
            height: 700,
        },
    )?;
    Ok(())
}

/// The y values of one point of a curve over its repeated runs.
struct Repeats {
    x: f64,
    sum: f64,
    n: u32,
    min: f64,
    max: f64,
}

/// An axis for a grid parameter or results column, titled with its unit.
fn axis(name: &str) -> Axis {
    if name.ends_with("_size") || name.ends_with("_bytes") {
        Axis::new(format!("{name} (bytes)"), Unit::Bytes)
    } else if name.ends_with("_per_sec") {
        Axis::new(format!("{name} (ops/s)"), Unit::Count)
    } else if name.contains("amplification") || name.ends_with("_ratio") {
        Axis::new(format!("{name} (ratio)"), Unit::Plain)
    } else if name.ends_with("_us") {
        Axis::new(format!("{name} (µs)"), Unit::Count)
    } else if name.ends_with("_seconds") || name.ends_with("_secs") {
        Axis::new(format!("{name} (s)"), Unit::Plain)
    } else {
        Axis::new(name, Unit::Count)
    }
}
