//! `lamina tune`: the compaction advisor. A workload and a memory budget
//! in; a ranked table of designs (strategy, write buffer, Bloom bits, block
//! cache) out, predicted by `lamina-tune`'s model over the simulator and,
//! with `--validate`, measured on the engine through `lamina bench`.

mod calibrate;
mod validate;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use lamina_tune::search::{rank_one, sort};
use lamina_tune::{search, BloomAlloc, CostModel, Prediction, Ranked, Space, Workload};
use serde::Serialize;

use crate::engine_opts::parse_size;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A ranked table and the recommendation's flags.
    Table,
    /// `{"recommendation": {...}, "candidates": [...], ...}`.
    Json,
}

/// Flags of `lamina tune`.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The workload: a YCSB letter (a ... f), `load`, or a TOML file
    /// (docs/tuning.md). Not needed with --calibrate.
    #[arg(long, value_name = "W", required_unless_present = "calibrate")]
    pub workload: Option<String>,
    /// Records loaded [default: 1000000, or the TOML file's].
    #[arg(long, value_name = "N")]
    pub records: Option<u64>,
    /// Value bytes [default: 1024, or the TOML file's].
    #[arg(long, value_name = "B")]
    pub value_size: Option<u64>,
    /// Memory for the write buffer, the Bloom filters and the block cache;
    /// K, M, G suffixes [default: 64M, or the TOML file's].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub memory: Option<usize>,
    /// Rank by the worst cost over operation mixes within this KL
    /// divergence of the workload's (Endure's robust tuning); 0: the mix
    /// as given.
    #[arg(long, value_name = "R", default_value_t = 0.0)]
    pub uncertainty: f64,
    /// Run the top candidates and the engine's default through `lamina
    /// bench --benchmarks=ycsb-load,ycsb-X` for about SECONDS each (the
    /// transaction phase; the load runs first) and re-rank by measured
    /// throughput.
    #[arg(long, value_name = "SECONDS")]
    pub validate: Option<u64>,
    /// Candidates --validate runs (distinct strategies, best first).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub validate_top: usize,
    /// Also validate every one of these specs (repeat; e.g. every preset).
    #[arg(long = "validate-spec", value_name = "SPEC")]
    pub validate_specs: Vec<String>,
    /// Where --validate builds its databases [default: a new directory
    /// under the temporary directory, removed at the end].
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Rows of the table.
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Measure the cost model on this machine with the engine and store it
    /// (at --calibration's path).
    #[arg(long)]
    pub calibrate: bool,
    /// The cost model file [default: $XDG_CONFIG_HOME/lamina/calibration.toml,
    /// else ~/.config/lamina/calibration.toml; built-in defaults if absent].
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Simulation threads [default: the machine's cores].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

/// The calibration file's path: the flag, else the XDG config directory.
fn calibration_path(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".config"),
            None => bail!("neither XDG_CONFIG_HOME nor HOME is set: pass --calibration FILE"),
        },
    };
    Ok(base.join("lamina").join("calibration.toml"))
}

/// The cost model: the calibration file, or the built-in defaults (and
/// where it came from).
fn cost_model(flag: Option<&Path>) -> Result<(CostModel, String)> {
    let path = calibration_path(flag)?;
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let c = CostModel::from_toml(&text).with_context(|| format!("{}", path.display()))?;
            Ok((c, path.display().to_string()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && flag.is_none() => Ok((
            CostModel::default(),
            "built-in defaults (run `lamina tune --calibrate`)".into(),
        )),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The workload the flags describe.
fn workload(args: &TuneArgs, name: &str) -> Result<Workload> {
    let memory = args.memory.map(|m| m as u64);
    let path = Path::new(name);
    let is_file = name.ends_with(".toml") || path.is_file();
    let mut w = if is_file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut w = Workload::from_toml(&text).with_context(|| format!("{}", path.display()))?;
        if w.name.is_empty() {
            w.name = path
                .file_stem()
                .map_or_else(|| name.to_string(), |s| s.to_string_lossy().into_owned());
        }
        w
    } else {
        Workload::ycsb(
            name,
            args.records.unwrap_or(1_000_000),
            args.value_size.unwrap_or(1024),
            memory.unwrap_or(64 << 20),
        )?
    };
    if is_file {
        if let Some(r) = args.records {
            w.records = r;
        }
        if let Some(v) = args.value_size {
            w.value_bytes = v;
        }
        if let Some(m) = memory {
            w.memory_bytes = m;
        }
    }
    w.validate()?;
    Ok(w)
}

/// The JSON recommendation.
#[derive(Debug, Serialize)]
struct Recommendation {
    compaction: String,
    buffer_bytes: u64,
    bloom_bits_per_key: f64,
    bloom: BloomAlloc,
    bloom_bits_per_level: Vec<f64>,
    block_cache_bytes: u64,
    /// `lamina serve` / `exec` / `kv` flags.
    engine_flags: String,
    /// `lamina bench` flags.
    bench_flags: String,
}

fn recommendation(p: &Prediction) -> Recommendation {
    let c = &p.candidate;
    let levels = p
        .bloom_bits_per_level
        .iter()
        .map(|b| format!("{b:.2}"))
        .collect::<Vec<_>>()
        .join(",");
    let bloom = if levels.is_empty() {
        String::new()
    } else {
        format!(" --bloom-bits-per-level {levels}")
    };
    Recommendation {
        compaction: c.spec.clone(),
        buffer_bytes: c.buffer_bytes,
        bloom_bits_per_key: c.bloom_bits,
        bloom: c.bloom,
        bloom_bits_per_level: p.bloom_bits_per_level.clone(),
        block_cache_bytes: p.cache_bytes,
        engine_flags: format!(
            "--compaction {} --buffer-bytes {}{bloom} --block-cache-bytes {}",
            c.spec, c.buffer_bytes, p.cache_bytes
        ),
        bench_flags: validate::bench_flags(p).join(" "),
    }
}

/// Runs `lamina tune`.
pub fn run(args: TuneArgs) -> Result<()> {
    if args.calibrate {
        let path = calibration_path(args.calibration.as_deref())?;
        let c = calibrate::measure()?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&path, c.to_toml())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("lamina tune: cost model written to {}", path.display());
        print!("{}", c.to_toml());
        if args.workload.is_none() {
            return Ok(());
        }
    }
    if !(args.uncertainty.is_finite() && args.uncertainty >= 0.0) {
        bail!("--uncertainty must be >= 0, got {}", args.uncertainty);
    }
    let Some(name) = args.workload.as_deref() else {
        bail!("--workload is required");
    };
    let w = workload(&args, name)?;
    let (cost, source) = cost_model(args.calibration.as_deref())?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let space = Space::full(w.memory_bytes);
    let outcome = search(&w, &space, &cost, args.uncertainty, threads);
    if outcome.ranked.is_empty() {
        bail!(
            "no candidate fits a memory budget of {} bytes",
            w.memory_bytes
        );
    }
    for (spec, why) in &outcome.skipped {
        eprintln!("lamina tune: skipped {spec}: {why}");
    }
    let default = validate::engine_default(&w, &cost)?.map(|p| rank_one(p, &w, args.uncertainty));
    let measured = match args.validate {
        Some(seconds) => Some(validate::run(
            &args,
            &w,
            &outcome.ranked,
            default.as_ref(),
            seconds,
        )?),
        None => None,
    };
    let report = Report::new(&w, &args, &source, outcome.ranked, default, measured);
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Table => report.print(args.top, outcome.simulations),
    }
    Ok(())
}

/// Everything `lamina tune` prints.
#[derive(Debug, Serialize)]
struct Report {
    workload: Workload,
    cost_model: String,
    uncertainty: f64,
    recommendation: Recommendation,
    /// How much the nominal best loses at worst when the mix drifts, and
    /// the robust best at the nominal mix (with --uncertainty).
    #[serde(skip_serializing_if = "Option::is_none")]
    drift: Option<Drift>,
    candidates: Vec<Ranked>,
    /// The engine's default configuration (`leveling`, bench's defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    engine_default: Option<Ranked>,
    #[serde(skip_serializing_if = "Option::is_none")]
    validation: Option<validate::Validation>,
}

/// What robustness costs and buys.
#[derive(Debug, Serialize)]
struct Drift {
    /// The nominal best's worst cost over the robust best's worst cost, − 1.
    nominal_best_loses_at_worst: f64,
    /// The robust best's nominal cost over the nominal best's, − 1.
    robust_best_loses_at_nominal: f64,
    nominal_best: String,
}

impl Report {
    fn new(
        w: &Workload,
        args: &TuneArgs,
        source: &str,
        mut ranked: Vec<Ranked>,
        default: Option<Ranked>,
        validation: Option<validate::Validation>,
    ) -> Report {
        sort(&mut ranked);
        let drift = (args.uncertainty > 0.0).then(|| {
            let robust = &ranked[0];
            let nominal = ranked
                .iter()
                .min_by(|a, b| a.prediction.cost_ns.total_cmp(&b.prediction.cost_ns))
                .unwrap_or(robust);
            Drift {
                nominal_best_loses_at_worst: nominal.worst_cost_ns / robust.worst_cost_ns - 1.0,
                robust_best_loses_at_nominal: robust.prediction.cost_ns
                    / nominal.prediction.cost_ns
                    - 1.0,
                nominal_best: describe(&nominal.prediction),
            }
        });
        let best = validation
            .as_ref()
            .and_then(|v| v.best())
            .unwrap_or(&ranked[0].prediction);
        Report {
            workload: w.clone(),
            cost_model: source.to_string(),
            uncertainty: args.uncertainty,
            recommendation: recommendation(best),
            drift,
            candidates: ranked,
            engine_default: default,
            validation,
        }
    }

    fn print(&self, top: usize, simulations: usize) {
        let w = &self.workload;
        println!(
            "workload {}: {} records x {} B values, {} operations, memory {} MiB; cost model: {}",
            w.name,
            w.records,
            w.value_bytes,
            w.operations,
            w.memory_bytes >> 20,
            self.cost_model
        );
        println!(
            "{} candidates from {simulations} simulations (strategy x buffer){}",
            self.candidates.len(),
            if self.uncertainty > 0.0 {
                format!(", ranked by the worst case within KL {}", self.uncertainty)
            } else {
                String::new()
            }
        );
        println!(
            "{:>4}  {:<24} {:>7} {:>12} {:>7} {:>9} {:>9} {:>6} {:>9} {:>6} {:>6}",
            "rank",
            "compaction",
            "buffer",
            "bloom",
            "cache",
            "us/op",
            "worst",
            "WA",
            "reads/get",
            "runs",
            "space"
        );
        let rows = self.candidates.iter().take(top).enumerate();
        for (i, r) in rows {
            print_row(&(i + 1).to_string(), r);
        }
        if let Some(d) = &self.engine_default {
            print_row("dflt", d);
        }
        if let Some(d) = &self.drift {
            println!(
                "drift: the nominal best ({}) costs {:.1}% more at worst; the robust best costs {:.1}% more at the given mix",
                d.nominal_best,
                100.0 * d.nominal_best_loses_at_worst,
                100.0 * d.robust_best_loses_at_nominal
            );
        }
        if let Some(v) = &self.validation {
            v.print();
        }
        let r = &self.recommendation;
        println!("recommendation: --compaction {}", r.compaction);
        println!("  lamina serve/exec: {}", r.engine_flags);
        println!("  lamina bench:      {}", r.bench_flags);
    }
}

/// `spec buffer bloom`, for one-line mentions.
fn describe(p: &Prediction) -> String {
    let c = &p.candidate;
    format!(
        "{} buffer {} MiB {}",
        c.spec,
        c.buffer_bytes >> 20,
        bloom_text(c.bloom_bits, c.bloom)
    )
}

fn bloom_text(bits: f64, alloc: BloomAlloc) -> String {
    match alloc {
        _ if bits == 0.0 => "none".into(),
        BloomAlloc::Uniform => format!("{bits} uniform"),
        BloomAlloc::Monkey => format!("{bits} monkey"),
    }
}

fn print_row(rank: &str, r: &Ranked) {
    let p = &r.prediction;
    let c = &p.candidate;
    println!(
        "{:>4}  {:<24} {:>6}M {:>12} {:>6}M {:>9.2} {:>9.2} {:>6.2} {:>9.3} {:>6.1} {:>6.2}",
        rank,
        c.spec,
        c.buffer_bytes >> 20,
        bloom_text(c.bloom_bits, c.bloom),
        p.cache_bytes >> 20,
        p.cost_ns / 1e3,
        r.worst_cost_ns / 1e3,
        p.wa,
        p.reads_per_get,
        p.runs,
        p.space_amp
    );
}
