//! `lamina experiment SPEC.toml`: a sweep of compaction strategies ×
//! engine parameters × workloads, one fresh database per run.
//!
//! Each finished run appends one row to `results.csv` and one JSON object
//! (the row plus the full `Db::stats()`) to `results.jsonl` in the output
//! directory; a run already in `results.csv` (same `run_id`) is skipped, so
//! an interrupted sweep resumes where it stopped. The plots of the spec's
//! `[[plot]]` tables are drawn from `results.csv` at the end (or alone with
//! `--plot-only`). See `bench/README.md` for the spec format.

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lamina::{Db, DbStats, Options, SyncMode};
use lamina_sim::plot::{plot_lines, Curve, LinesOptions};
use lamina_workload::{KvGenerator, KvOp, KvSpec, YcsbGenerator, YcsbSpec, YcsbWorkload};
use serde::Deserialize;

use crate::dbdir;
use crate::kvops::{apply, key_buffer, value_pool, ValueGen};

/// Flags of `lamina experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The experiment spec (TOML).
    #[arg(value_name = "SPEC.toml")]
    pub spec: PathBuf,
    /// Where results.csv, results.jsonl and the plots go [default: the
    /// spec's directory].
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

/// The TOML spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    /// Title of the plots.
    #[serde(default)]
    title: String,
    /// Compaction specs (`CompactionSpec`).
    strategies: Vec<String>,
    /// Fixed engine options (name -> value).
    #[serde(default)]
    engine: BTreeMap<String, toml::Value>,
    /// Swept engine options (name -> list of values).
    #[serde(default)]
    grid: BTreeMap<String, Vec<toml::Value>>,
    /// Workloads.
    #[serde(rename = "workload")]
    workloads: Vec<WorkloadSpec>,
    /// Repetitions of every combination.
    #[serde(default = "one")]
    repeat: u32,
    /// Seed of the first repetition (repetition r uses seed + r).
    #[serde(default = "one_u64")]
    seed: u64,
    /// Plots.
    #[serde(default, rename = "plot")]
    plots: Vec<PlotSpec>,
}

fn one() -> u32 {
    1
}

fn one_u64() -> u64 {
    1
}

/// One workload: a YCSB workload (after its load) or seed 001's generator.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadSpec {
    name: String,
    /// YCSB workload: load, a ... f.
    ycsb: Option<YcsbWorkload>,
    /// YCSB records.
    #[serde(default)]
    records: u64,
    /// YCSB transactions.
    #[serde(default)]
    operations: u64,
    /// Key size for YCSB (db_bench layout).
    #[serde(default = "default_key_size")]
    key_size: usize,
    /// Value size for YCSB.
    #[serde(default = "default_value_size")]
    value_size: usize,
    /// Seed 001's generator (its `seed` is replaced by the run's).
    kv: Option<KvSpec>,
}

fn default_key_size() -> usize {
    16
}

fn default_value_size() -> usize {
    100
}

/// One plot: `y` over the grid parameter `x`, one curve per strategy,
/// workload and other swept parameter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlotSpec {
    /// Output file, relative to the output directory (.png or .svg).
    file: String,
    /// A grid parameter.
    x: String,
    /// A results.csv column.
    y: String,
    /// Only this workload's rows.
    workload: Option<String>,
    /// Logarithmic x axis.
    #[serde(default)]
    log_x: bool,
}

/// Engine options a spec may set or sweep.
const ENGINE_PARAMS: &[&str] = &[
    "write_buffer_size",
    "size_ratio",
    "bloom_bits",
    "block_cache_bytes",
    "block_size",
    "target_file_size",
    "compaction_threads",
    "max_immutable_memtables",
    "level0_stop_runs",
];

fn set_param(opts: &mut Options, name: &str, v: &toml::Value) -> Result<()> {
    let num = match v {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        other => bail!("{name} must be a number, not {other}"),
    };
    if !(num >= 0.0 && num.is_finite()) {
        bail!("{name} must be a non-negative number, not {num}");
    }
    let int = num as usize;
    match name {
        "write_buffer_size" => opts.write_buffer_size = int,
        "size_ratio" => opts.size_ratio = int,
        "bloom_bits" => opts.bloom_bits_per_key = num,
        "block_cache_bytes" => opts.block_cache_bytes = int,
        "block_size" => opts.block_size = int,
        "target_file_size" => opts.target_file_size = int as u64,
        "compaction_threads" => opts.compaction_threads = int,
        "max_immutable_memtables" => opts.max_immutable_memtables = int,
        "level0_stop_runs" => opts.level0_stop_runs = int,
        other => bail!(
            "unknown engine parameter {other:?} (known: {})",
            ENGINE_PARAMS.join(", ")
        ),
    }
    Ok(())
}

/// One combination to run.
#[derive(Debug, Clone)]
struct Run {
    id: String,
    strategy: String,
    params: Vec<(String, toml::Value)>,
    workload: WorkloadSpec,
    rep: u32,
    seed: u64,
    opts: Options,
}

impl Run {
    /// Operations the run executes (its load included), for the progress bar.
    fn ops(&self) -> u64 {
        match (&self.workload.ycsb, &self.workload.kv) {
            (Some(YcsbWorkload::Load), _) => self.workload.records,
            (Some(_), _) => self.workload.records + self.workload.operations,
            (None, Some(kv)) => kv.total_ops(),
            (None, None) => 0,
        }
    }
}

/// Every combination of the spec, in a stable order.
fn expand(spec: &Spec) -> Result<Vec<Run>> {
    if spec.strategies.is_empty() || spec.workloads.is_empty() {
        bail!("a spec needs at least one strategy and one [[workload]]");
    }
    let mut base = Options {
        sync: SyncMode::None,
        ..Options::default()
    };
    for (k, v) in &spec.engine {
        set_param(&mut base, k, v).with_context(|| format!("[engine] {k}"))?;
    }
    let mut names = HashSet::new();
    for w in &spec.workloads {
        if !names.insert(w.name.as_str()) {
            bail!("two workloads are named {:?}", w.name);
        }
        match (&w.ycsb, &w.kv) {
            (Some(_), None) => {
                if w.records == 0 {
                    bail!("workload {:?}: records must be at least 1", w.name);
                }
            }
            (None, Some(kv)) => kv
                .validate()
                .with_context(|| format!("workload {:?}", w.name))?,
            _ => bail!("workload {:?}: give exactly one of ycsb or kv", w.name),
        }
    }
    // The grid's cartesian product, parameters in name order.
    let mut points: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
    for (name, values) in &spec.grid {
        if values.is_empty() {
            bail!("[grid] {name} has no values");
        }
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push((name.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    let mut runs = Vec::new();
    for strategy in &spec.strategies {
        for point in &points {
            let mut opts = base.clone();
            opts.compaction = strategy
                .parse()
                .with_context(|| format!("strategy {strategy:?}"))?;
            for (k, v) in point {
                set_param(&mut opts, k, v).with_context(|| format!("[grid] {k}"))?;
            }
            opts.validate()
                .with_context(|| format!("strategy {strategy:?}"))?;
            for w in &spec.workloads {
                for rep in 0..spec.repeat {
                    let params: Vec<String> =
                        point.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    let id = format!("{strategy}|{}|{}|{rep}", params.join(","), w.name);
                    runs.push(Run {
                        id,
                        strategy: strategy.clone(),
                        params: point.clone(),
                        workload: w.clone(),
                        rep,
                        seed: spec.seed + u64::from(rep),
                        opts: opts.clone(),
                    });
                }
            }
        }
    }
    Ok(runs)
}

/// The metric columns of results.csv, after run_id, strategy, workload, rep
/// and the grid parameters.
const METRICS: &[&str] = &[
    "ops",
    "seconds",
    "ops_per_sec",
    "load_ops_per_sec",
    "reads",
    "found",
    "write_amplification",
    "bytes_ingested",
    "flush_bytes_written",
    "compaction_bytes_read",
    "compaction_bytes_written",
    "compactions",
    "trivial_moves",
    "space_amplification",
    "disk_bytes",
    "sorted_runs",
    "avg_sorted_runs",
    "stalls",
    "stall_micros",
    "put_p50_us",
    "put_p99_us",
    "get_p50_us",
    "get_p99_us",
    "scan_p50_us",
    "scan_p99_us",
    "blocks_read",
];

/// What a run measured.
struct Measured {
    ops: u64,
    seconds: f64,
    load_ops_per_sec: f64,
    reads: u64,
    found: u64,
    stats: DbStats,
}

fn metric_values(m: &Measured) -> Vec<String> {
    let s = &m.stats;
    let f = |x: f64| format!("{x:.4}");
    vec![
        m.ops.to_string(),
        f(m.seconds),
        f(m.ops as f64 / m.seconds.max(1e-9)),
        f(m.load_ops_per_sec),
        m.reads.to_string(),
        m.found.to_string(),
        f(s.write_amplification),
        s.bytes_ingested.to_string(),
        s.flush_bytes_written.to_string(),
        s.compaction_bytes_read.to_string(),
        s.compaction_bytes_written.to_string(),
        s.compactions.to_string(),
        s.trivial_moves.to_string(),
        f(s.space_amplification),
        s.disk_bytes.to_string(),
        s.sorted_runs.to_string(),
        f(s.avg_sorted_runs),
        s.stalls.to_string(),
        s.stall_micros.to_string(),
        f(s.put_latency.p50_us),
        f(s.put_latency.p99_us),
        f(s.get_latency.p50_us),
        f(s.get_latency.p99_us),
        f(s.scan_latency.p50_us),
        f(s.scan_latency.p99_us),
        s.blocks_read.to_string(),
    ]
}

fn header(spec: &Spec) -> Vec<String> {
    let mut h: Vec<String> = ["run_id", "strategy", "workload", "rep"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    h.extend(spec.grid.keys().cloned());
    h.extend(METRICS.iter().map(|s| s.to_string()));
    h
}

/// Runs the experiment.
pub fn run(args: ExperimentArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("reading {}", args.spec.display()))?;
    let spec: Spec =
        toml::from_str(&text).with_context(|| format!("parsing {}", args.spec.display()))?;
    let runs = expand(&spec)?;
    for p in &spec.plots {
        lamina_sim::plot::check_path(Path::new(&p.file))?;
        if !spec.grid.contains_key(&p.x) {
            bail!("plot {}: x = {:?} is not a [grid] parameter", p.file, p.x);
        }
        if !METRICS.contains(&p.y.as_str()) {
            bail!(
                "plot {}: y = {:?} is not a metric ({})",
                p.file,
                p.y,
                METRICS.join(", ")
            );
        }
    }
    let out = match &args.out {
        Some(d) => d.clone(),
        None => args
            .spec
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let csv_path = out.join("results.csv");
    let json_path = out.join("results.jsonl");
    let header = header(&spec);

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
        draw_plot(&spec, p, &csv_path, &path)?;
        eprintln!("plot: {}", path.display());
    }
    Ok(())
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
    let bar = ProgressBar::new(total_ops);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% ETA {eta_precise} {msg}",
        )
        .map_err(|e| anyhow!("progress bar template: {e}"))?,
    );
    let work = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    for (i, run) in todo.iter().enumerate() {
        bar.set_prefix(format!("run {}/{}", i + 1, todo.len()));
        bar.set_message(run.id.clone());
        // A directory this run creates, and so may delete afterwards.
        let dir = dbdir::create_scratch(&work, "lamina-experiment")?;
        let measured = execute(run, &dir, &bar);
        let removed = std::fs::remove_dir_all(&dir);
        let measured = measured.with_context(|| format!("run {}", run.id))?;
        removed.with_context(|| format!("deleting {}", dir.display()))?;
        let mut row = vec![
            run.id.clone(),
            run.strategy.clone(),
            run.workload.name.clone(),
            run.rep.to_string(),
        ];
        row.extend(run.params.iter().map(|(_, v)| v.to_string()));
        row.extend(metric_values(&measured));
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
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
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

/// Runs one combination on a fresh database in `dir`, a new empty
/// directory. A YCSB transaction workload first loads its records, timed
/// apart; the stats are taken after a final flush so that every ingested
/// byte is on disk.
fn execute(run: &Run, dir: &Path, bar: &ProgressBar) -> Result<Measured> {
    let db =
        Db::open(dir, run.opts.clone()).with_context(|| format!("opening {}", dir.display()))?;
    let w = &run.workload;
    let (key_size, value_size) = match &w.kv {
        Some(kv) => (kv.key_size, kv.value_size()),
        None => (w.key_size, w.value_size),
    };
    let pool = value_pool(run.seed, value_size);
    let mut values = ValueGen::new(&pool, value_size, 0);
    let mut key = key_buffer(key_size);
    let mut drive = |ops: &mut dyn Iterator<Item = KvOp>| -> Result<(u64, u64, u64, f64)> {
        let start = Instant::now();
        let (mut n, mut reads, mut found) = (0u64, 0u64, 0u64);
        for op in ops {
            let o = apply(&db, op, &mut key, &mut values)?;
            n += 1;
            reads += u64::from(o.is_read);
            found += u64::from(o.found);
            if n % 1024 == 0 {
                bar.inc(1024);
            }
        }
        bar.inc(n % 1024);
        Ok((n, reads, found, start.elapsed().as_secs_f64()))
    };
    let mut load_ops_per_sec = 0.0;
    let (ops, reads, found, seconds) = match (w.ycsb, &w.kv) {
        (Some(workload), _) => {
            let load = YcsbSpec::new(YcsbWorkload::Load, w.records, 0, run.seed);
            let (n, _, _, secs) = drive(&mut YcsbGenerator::new(&load)?)?;
            load_ops_per_sec = n as f64 / secs.max(1e-9);
            if workload == YcsbWorkload::Load {
                (n, 0, 0, secs)
            } else {
                let spec = YcsbSpec::new(workload, w.records, w.operations, run.seed);
                drive(&mut YcsbGenerator::new(&spec)?)?
            }
        }
        (None, Some(kv)) => {
            let spec = KvSpec {
                seed: run.seed,
                ..kv.clone()
            };
            drive(&mut KvGenerator::new(spec)?)?
        }
        (None, None) => bail!("workload {:?} has neither ycsb nor kv", w.name),
    };
    db.flush()?;
    let stats = db.stats();
    db.close()?;
    Ok(Measured {
        ops,
        seconds,
        load_ops_per_sec,
        reads,
        found,
        stats,
    })
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
    let mut sums: BTreeMap<String, BTreeMap<u64, (f64, f64, u32)>> = BTreeMap::new();
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
            .or_insert((x, 0.0, 0));
        e.1 += y;
        e.2 += 1;
    }
    let curves: Vec<Curve> = sums
        .into_iter()
        .map(|(label, pts)| {
            let mut points: Vec<(f64, f64)> = pts
                .into_values()
                .map(|(x, y, n)| (x, y / f64::from(n)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Curve { label, points }
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
            x_desc: p.x.clone(),
            y_desc: p.y.clone(),
            log_x: p.log_x,
            width: 1000,
            height: 700,
        },
    )?;
    Ok(())
}
