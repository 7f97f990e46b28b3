//! Experiments: a TOML spec of compaction strategies × engine parameters ×
//! workloads, expanded into runs, each executed on a fresh database.
//!
//! `lamina experiment` (resumable CSV/JSON files and plots) and the Python
//! package's `lamina.experiment` (a list of rows) both run specs through
//! this crate, so a spec means the same thing and gives the same columns in
//! both. See `bench/README.md` for the spec format.

pub mod kvops;
pub mod plot;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use lamina::{Db, DbStats, Options, SyncMode};
use lamina_workload::{KvGenerator, KvOp, KvSpec, YcsbGenerator, YcsbSpec, YcsbWorkload};
use serde::Deserialize;

use crate::kvops::{apply, key_buffer, value_pool, ValueGen};

/// The TOML spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Title of the plots.
    #[serde(default)]
    pub title: String,
    /// Compaction specs (`CompactionSpec`).
    pub strategies: Vec<String>,
    /// Fixed engine options (name -> value).
    #[serde(default)]
    pub engine: BTreeMap<String, toml::Value>,
    /// Swept engine options (name -> list of values).
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<toml::Value>>,
    /// Workloads.
    #[serde(rename = "workload")]
    pub workloads: Vec<WorkloadSpec>,
    /// Repetitions of every combination.
    #[serde(default = "one")]
    pub repeat: u32,
    /// Seed of the first repetition (repetition r uses seed + r).
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Plots.
    #[serde(default, rename = "plot")]
    pub plots: Vec<PlotSpec>,
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
pub struct WorkloadSpec {
    /// Its name in the rows.
    pub name: String,
    /// YCSB workload: load, a ... f.
    pub ycsb: Option<YcsbWorkload>,
    /// YCSB records.
    #[serde(default)]
    pub records: u64,
    /// YCSB transactions.
    #[serde(default)]
    pub operations: u64,
    /// Key size for YCSB (db_bench layout).
    #[serde(default = "default_key_size")]
    pub key_size: usize,
    /// Value size for YCSB.
    #[serde(default = "default_value_size")]
    pub value_size: usize,
    /// Seed 001's generator (its `seed` is replaced by the run's).
    pub kv: Option<KvSpec>,
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
pub struct PlotSpec {
    /// Output file, relative to the output directory (.svg).
    pub file: String,
    /// A grid parameter.
    pub x: String,
    /// A results.csv column.
    pub y: String,
    /// Only this workload's rows.
    pub workload: Option<String>,
    /// Logarithmic x axis.
    #[serde(default)]
    pub log_x: bool,
}

/// Engine options a spec may set or sweep.
pub const ENGINE_PARAMS: &[&str] = &[
    "write_buffer_size",
    "size_ratio",
    "bloom_bits",
    "block_cache_bytes",
    "block_size",
    "target_file_size",
    "compaction_threads",
    "scan_threads",
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
        "scan_threads" => opts.scan_threads = int,
        "max_immutable_memtables" => opts.max_immutable_memtables = int,
        "level0_stop_runs" => opts.level0_stop_runs = int,
        other => bail!(
            "unknown engine parameter {other:?} (known: {})",
            ENGINE_PARAMS.join(", ")
        ),
    }
    Ok(())
}

/// A parsed and checked spec with its runs.
#[derive(Debug)]
pub struct Experiment {
    /// The spec as written.
    pub spec: Spec,
    /// Every combination, in a stable order.
    pub runs: Vec<Run>,
}

impl Experiment {
    /// Parses TOML text and checks everything a sweep would otherwise find
    /// wrong only when it gets there: strategies, parameters, workloads and
    /// plots.
    pub fn parse(text: &str) -> Result<Experiment> {
        let spec: Spec = toml::from_str(text)?;
        let runs = expand(&spec)?;
        for p in &spec.plots {
            crate::plot::check_path(Path::new(&p.file))?;
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
        Ok(Experiment { spec, runs })
    }

    /// The columns of a row: run_id, strategy, workload, rep, the grid
    /// parameters (in name order), then [`METRICS`].
    pub fn header(&self) -> Vec<String> {
        let mut h: Vec<String> = ["run_id", "strategy", "workload", "rep"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        h.extend(self.spec.grid.keys().cloned());
        h.extend(METRICS.iter().map(|s| s.to_string()));
        h
    }
}

/// One combination to run.
#[derive(Debug, Clone)]
pub struct Run {
    /// `strategy|params|workload|rep|fingerprint`, the fingerprint a hash
    /// of the engine options, the workload's settings, the seed and
    /// lamina's version: what resuming a sweep matches on.
    pub id: String,
    /// The compaction spec.
    pub strategy: String,
    /// The grid point, parameters in name order.
    pub params: Vec<(String, toml::Value)>,
    /// The workload.
    pub workload: WorkloadSpec,
    /// Repetition, from 0.
    pub rep: u32,
    /// Seed of the workload and the values.
    pub seed: u64,
    /// Engine options.
    pub opts: Options,
}

/// Every combination of the spec, in a stable order.
fn expand(spec: &Spec) -> Result<Vec<Run>> {
    if spec.strategies.is_empty() || spec.workloads.is_empty() {
        bail!("a spec needs at least one strategy and one [[workload]]");
    }
    let mut base = Options::default();
    base.sync = SyncMode::None;
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
                    let seed = spec.seed + u64::from(rep);
                    // Everything the run's result depends on, so a resumed
                    // sweep never takes a row measured under another spec
                    // (same names, other settings) or another lamina.
                    let fingerprint = xxhash_rust::xxh3::xxh3_64(
                        format!("{opts:?}|{w:?}|{seed}|{rep}|{}", env!("CARGO_PKG_VERSION"))
                            .as_bytes(),
                    );
                    let id = format!(
                        "{strategy}|{}|{}|{rep}|{fingerprint:016x}",
                        params.join(","),
                        w.name
                    );
                    runs.push(Run {
                        id,
                        strategy: strategy.clone(),
                        params: point.clone(),
                        workload: w.clone(),
                        rep,
                        seed,
                        opts: opts.clone(),
                    });
                }
            }
        }
    }
    Ok(runs)
}

/// The metric columns of a row, after run_id, strategy, workload, rep and
/// the grid parameters.
pub const METRICS: &[&str] = &[
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
#[derive(Debug, Clone)]
pub struct Measured {
    /// Operations timed (a YCSB transaction workload's, not its load's).
    pub ops: u64,
    /// Seconds they took.
    pub seconds: f64,
    /// Throughput of the load before YCSB transactions (0 otherwise).
    pub load_ops_per_sec: f64,
    /// Reads among the operations.
    pub reads: u64,
    /// Reads that found their key.
    pub found: u64,
    /// The engine's statistics after a final flush.
    pub stats: DbStats,
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Run id, strategy, workload.
    Text(String),
    /// Counters.
    Count(u64),
    /// Rates, ratios, latencies.
    Real(f64),
    /// A grid parameter as the spec wrote it.
    Param(toml::Value),
}

impl Cell {
    /// The cell as results.csv writes it.
    pub fn csv(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Count(n) => n.to_string(),
            Cell::Real(x) => format!("{x:.4}"),
            Cell::Param(v) => v.to_string(),
        }
    }
}

impl Measured {
    /// The values of [`METRICS`], in that order.
    pub fn metrics(&self) -> Vec<Cell> {
        let s = &self.stats;
        let (n, r) = (Cell::Count, Cell::Real);
        vec![
            n(self.ops),
            r(self.seconds),
            r(self.ops as f64 / self.seconds.max(1e-9)),
            r(self.load_ops_per_sec),
            n(self.reads),
            n(self.found),
            r(s.write_amplification),
            n(s.bytes_ingested),
            n(s.flush_bytes_written),
            n(s.compaction_bytes_read),
            n(s.compaction_bytes_written),
            n(s.compactions),
            n(s.trivial_moves),
            r(s.space_amplification),
            n(s.disk_bytes),
            n(s.sorted_runs as u64),
            r(s.avg_sorted_runs),
            n(s.stalls),
            n(s.stall_micros),
            r(s.put_latency.p50_us),
            r(s.put_latency.p99_us),
            r(s.get_latency.p50_us),
            r(s.get_latency.p99_us),
            r(s.scan_latency.p50_us),
            r(s.scan_latency.p99_us),
            n(s.blocks_read),
        ]
    }
}

impl Run {
    /// Operations the run executes (its load included), for progress.
    pub fn ops(&self) -> u64 {
        match (&self.workload.ycsb, &self.workload.kv) {
            (Some(YcsbWorkload::Load), _) => self.workload.records,
            (Some(_), _) => self.workload.records + self.workload.operations,
            (None, Some(kv)) => kv.total_ops(),
            (None, None) => 0,
        }
    }

    /// The run's row, in [`Experiment::header`] order.
    pub fn row(&self, m: &Measured) -> Vec<Cell> {
        let mut row = vec![
            Cell::Text(self.id.clone()),
            Cell::Text(self.strategy.clone()),
            Cell::Text(self.workload.name.clone()),
            Cell::Count(u64::from(self.rep)),
        ];
        row.extend(self.params.iter().map(|(_, v)| Cell::Param(v.clone())));
        row.extend(m.metrics());
        row
    }

    /// Runs the combination on a fresh database in a scratch directory
    /// under `work`, deleted afterwards. `progress` gets operation counts
    /// as they are done.
    pub fn execute_scratch(&self, work: &Path, progress: &mut dyn FnMut(u64)) -> Result<Measured> {
        // A directory this run creates, and so may delete afterwards.
        let dir = create_scratch(work, "lamina-experiment")?;
        let measured = self.execute(&dir, progress);
        let removed = std::fs::remove_dir_all(&dir);
        let measured = measured.with_context(|| format!("run {}", self.id))?;
        removed.with_context(|| format!("deleting {}", dir.display()))?;
        Ok(measured)
    }

    /// Runs the combination on a fresh database in `dir`, a new empty
    /// directory. A YCSB transaction workload first loads its records, timed
    /// apart; the stats are taken after a final flush so that every ingested
    /// byte is on disk.
    pub fn execute(&self, dir: &Path, progress: &mut dyn FnMut(u64)) -> Result<Measured> {
        let db = Db::open(dir, self.opts.clone())
            .with_context(|| format!("opening {}", dir.display()))?;
        let w = &self.workload;
        let (key_size, value_size) = match &w.kv {
            Some(kv) => (kv.key_size, kv.value_size()),
            None => (w.key_size, w.value_size),
        };
        let pool = value_pool(self.seed, value_size);
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
                    progress(1024);
                }
            }
            progress(n % 1024);
            Ok((n, reads, found, start.elapsed().as_secs_f64()))
        };
        let mut load_ops_per_sec = 0.0;
        let (ops, reads, found, seconds) = match (w.ycsb, &w.kv) {
            (Some(workload), _) => {
                let load = YcsbSpec::new(YcsbWorkload::Load, w.records, 0, self.seed);
                let (n, _, _, secs) = drive(&mut YcsbGenerator::new(&load)?)?;
                load_ops_per_sec = n as f64 / secs.max(1e-9);
                if workload == YcsbWorkload::Load {
                    (n, 0, 0, secs)
                } else {
                    let spec = YcsbSpec::new(workload, w.records, w.operations, self.seed);
                    drive(&mut YcsbGenerator::new(&spec)?)?
                }
            }
            (None, Some(kv)) => {
                let spec = KvSpec {
                    seed: self.seed,
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
}

/// A scratch directory this process creates (and so may delete): `base/
/// prefix-PID`, or with a `.N` suffix if that name is taken.
pub fn create_scratch(base: &Path, prefix: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
    let stem = format!("{prefix}-{}", std::process::id());
    for i in 0u32.. {
        let dir = if i == 0 {
            base.join(&stem)
        } else {
            base.join(format!("{stem}.{i}"))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("no free scratch directory name under {}", base.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
strategies = ["leveling", "tiered:b=4"]
[grid]
write_buffer_size = [65536, 131072]
[[workload]]
name = "load"
ycsb = "load"
records = 2000
"#;

    #[test]
    fn runs_and_rows_follow_the_header() {
        let e = Experiment::parse(SPEC).unwrap();
        assert_eq!(e.runs.len(), 4);
        let work = tempfile::tempdir().unwrap();
        let mut done = 0;
        let m = e.runs[0]
            .execute_scratch(work.path(), &mut |n| done += n)
            .unwrap();
        assert_eq!((m.ops, done), (2000, 2000));
        let row = e.runs[0].row(&m);
        assert_eq!(row.len(), e.header().len());
        assert_eq!(row[4].csv(), "65536");
        // The scratch directory is gone.
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
    }

    #[test]
    fn bad_specs_are_refused_before_running() {
        for bad in [
            "strategies = []\n[[workload]]\nname=\"x\"\nycsb=\"load\"\nrecords=1",
            "strategies = [\"nope\"]\n[[workload]]\nname=\"x\"\nycsb=\"load\"\nrecords=1",
            "strategies = [\"leveling\"]\n[engine]\nfoo = 1\n[[workload]]\nname=\"x\"\nycsb=\"load\"\nrecords=1",
            "strategies = [\"leveling\"]\n[[workload]]\nname=\"x\"\nycsb=\"load\"\nrecords=1\n[[plot]]\nfile=\"p.png\"\nx=\"q\"\ny=\"ops\"",
        ] {
            assert!(Experiment::parse(bad).is_err(), "{bad}");
        }
    }
}
