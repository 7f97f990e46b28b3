//! `lamina sim`: runs compaction policies over the model tree of
//! `lamina-sim` and reports write amplification and sorted runs per flush.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use crate::progress;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use lamina::compaction::CompactionSpec;
use lamina_experiment::plot::{check_path, plot, PlotOptions, Series};
use lamina_sim::{
    AsyncMerges, FlushRecord, FlushSizes, KeyModel, ModelOptions, Simulator, Summary, WaDefinition,
    DEFAULT_FLUSH_BYTES,
};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A header, then one line per flush (or every --every flushes).
    Csv,
    /// One summary object per policy (an array for several policies).
    Json,
    /// Nothing on stdout (with --plot or --time).
    None,
}

/// Flags of `lamina sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Compaction policy spec (repeat to compare policies), e.g.
    /// binomial:k=4; --help lists them all.
    #[arg(long = "policy", value_name = "SPEC", required = true,
          long_help = lamina::compaction::spec::help_text())]
    pub policies: Vec<CompactionSpec>,
    /// Flushes to simulate [default: all sizes of --flush-file].
    #[arg(long, value_name = "N")]
    pub flushes: Option<u64>,
    /// Every flush writes BYTES.
    #[arg(long, value_name = "BYTES", conflicts_with_all = ["flush_uniform", "flush_file"])]
    pub flush_size: Option<u64>,
    /// Flush sizes uniform in [MIN, MAX] bytes (seeded by --seed).
    #[arg(long, value_name = "MIN,MAX", conflicts_with = "flush_file")]
    pub flush_uniform: Option<String>,
    /// Flush sizes from a file: one size in bytes per line (# comments).
    #[arg(long, value_name = "PATH")]
    pub flush_file: Option<PathBuf>,
    /// Seed of --flush-uniform.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Share in [0, 1) of each merge input's bytes (all but the largest
    /// input run) dropped as duplicates; 0 means merge output = sum of inputs.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub dup_ratio: f64,
    /// Bytes of each file that are not data (index, filter, footer): a merge
    /// of n files into one writes (n - 1) x this less than their sum.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub file_overhead: u64,
    /// Memtable size policies see (and leveled's file size) [default: the
    /// mean flush size].
    #[arg(long, value_name = "BYTES")]
    pub buffer_bytes: Option<u64>,
    /// Size ratio for specs that leave it out (tiered, leveled, leveling).
    #[arg(long, value_name = "T", default_value_t = 10)]
    pub size_ratio: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    pub format: Format,
    /// CSV: print every Nth flush (and the last).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub every: u64,
    /// Draw write amplification and sorted runs over flushes to FILE.svg.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Plot write amplification on a logarithmic axis.
    #[arg(long, requires = "plot")]
    pub plot_log: bool,
    /// Print the simulation time of each policy to stderr.
    #[arg(long)]
    pub time: bool,
    /// Write amplification: `engine` counts every flush and every merge
    /// output (as the engine's statistics); `paper` is seed 003's W(σ),
    /// which counts only the SSTables each flush step leaves (a flush merged
    /// in the same step is counted once, in the merge output). Use `paper`
    /// to compare with the papers' tables.
    #[arg(long, value_enum, default_value_t = Wa::Engine)]
    pub wa: Wa,
    /// CSV: add a `transient_space_amplification` column (the largest total
    /// size during the flush's merges / bytes flushed so far; seed 000
    /// Fig. 3.6).
    #[arg(long)]
    pub transient: bool,
    /// Where each flush's keys lie, for partitioned policies
    /// (`partition=`): `uniform` (random keys over the whole space) or
    /// `sequential` (flush t after flush t-1, disjoint).
    #[arg(long, value_enum, default_value_t = Keys::Uniform)]
    pub keys: Keys,
    /// Asynchronous merges: a merge reading b bytes takes C x b / buffer
    /// flush intervals while flushes go on, its runs busy meanwhile (the
    /// papers' model, without this flag: every merge ends before the next
    /// flush). CSV adds `runs_at_flush` and `stalled` columns.
    #[arg(long, value_name = "C")]
    pub merge_cost: Option<f64>,
    /// Asynchronous merges that may run at once.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "merge_cost")]
    pub merge_threads: usize,
    /// Asynchronous merges: a flush waits while at least R runs exist and a
    /// merge runs (0: never). It also waits, as the engine's writer does,
    /// while the policy holds writes (a design-space level out of shape,
    /// `full`'s pending merges).
    #[arg(long, value_name = "R", default_value_t = 0, requires = "merge_cost")]
    pub stall_runs: usize,
}

/// `--keys` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Keys {
    /// Every flush spans (nearly) the whole key space.
    Uniform,
    /// Flush t holds the t-th slice of the key space.
    Sequential,
}

impl From<Keys> for KeyModel {
    fn from(k: Keys) -> Self {
        match k {
            Keys::Uniform => KeyModel::Uniform,
            Keys::Sequential => KeyModel::Sequential,
        }
    }
}

/// `--wa` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Wa {
    /// (flush bytes + merge bytes written) / flush bytes.
    Engine,
    /// Seed 003's W(σ): Σ new SSTable bytes per step / flush bytes.
    Paper,
}

impl From<Wa> for WaDefinition {
    fn from(w: Wa) -> Self {
        match w {
            Wa::Engine => WaDefinition::Engine,
            Wa::Paper => WaDefinition::Paper,
        }
    }
}

fn flush_sizes(args: &SimArgs) -> Result<FlushSizes> {
    if let Some(path) = &args.flush_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading flush sizes from {}", path.display()))?;
        let sizes = FlushSizes::parse_list(&text)
            .with_context(|| format!("flush sizes in {}", path.display()))?;
        sizes
            .validate()
            .with_context(|| format!("{}", path.display()))?;
        return Ok(sizes);
    }
    if let Some(spec) = &args.flush_uniform {
        let (min, max) = spec
            .split_once(',')
            .and_then(|(a, b)| Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?)))
            .with_context(|| format!("--flush-uniform wants MIN,MAX in bytes, not {spec:?}"))?;
        let sizes = FlushSizes::Uniform {
            min,
            max,
            seed: args.seed,
        };
        sizes.validate().context("--flush-uniform")?;
        return Ok(sizes);
    }
    let sizes = FlushSizes::Constant(args.flush_size.unwrap_or(DEFAULT_FLUSH_BYTES));
    sizes.validate().context("--flush-size")?;
    Ok(sizes)
}

fn csv_line(
    out: &mut impl Write,
    policy: Option<&str>,
    r: &FlushRecord,
    transient: bool,
    async_merges: bool,
) -> io::Result<()> {
    if let Some(p) = policy {
        write!(out, "{p},")?;
    }
    write!(
        out,
        "{},{:.6},{},{:.6}",
        r.flush, r.write_amplification, r.sorted_runs, r.avg_sorted_runs
    )?;
    if transient {
        write!(out, ",{:.6}", r.transient_space_amplification)?;
    }
    if async_merges {
        write!(out, ",{},{:.3}", r.runs_at_flush, r.stalled)?;
    }
    writeln!(out)
}

/// Runs `lamina sim`.
#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
pub fn run(args: SimArgs) -> Result<()> {
    let sizes = flush_sizes(&args)?;
    let flushes = match (args.flushes, sizes.len()) {
        (Some(n), Some(len)) => n.min(len),
        (Some(n), None) => n,
        (None, Some(len)) => len,
        (None, None) => bail!("--flushes N is required unless --flush-file gives the sizes"),
    };
    if args.every == 0 {
        bail!("--every must be at least 1");
    }
    let opts = ModelOptions {
        buffer_bytes: args.buffer_bytes.unwrap_or_else(|| sizes.default_buffer()),
        size_ratio: args.size_ratio,
        dup_ratio: args.dup_ratio,
        file_overhead: args.file_overhead,
        wa: args.wa.into(),
        keys: args.keys.into(),
        merges: args.merge_cost.map(|cost| AsyncMerges {
            cost,
            threads: args.merge_threads,
            stall_runs: args.stall_runs,
        }),
        ..ModelOptions::default()
    };
    let async_merges = opts.merges.is_some();
    // Check every spec and the plot file before printing anything.
    let mut sims = args
        .policies
        .iter()
        .map(|spec| Simulator::from_spec(&spec.to_string(), opts))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(path) = &args.plot {
        check_path(path)?;
    }
    let several = sims.len() > 1;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if args.format == Format::Csv {
        if several {
            write!(out, "policy,")?;
        }
        write!(out, "flush,write_amplification,sorted_runs,avg_sorted_runs")?;
        if args.transient {
            write!(out, ",transient_space_amplification")?;
        }
        if async_merges {
            write!(out, ",runs_at_flush,stalled")?;
        }
        writeln!(out)?;
    }
    let mut summaries: Vec<Summary> = Vec::new();
    let mut curves: Vec<Series> = Vec::new();
    for sim in &mut sims {
        let label = sim.spec().to_string();
        // Quote specs with commas for CSV.
        let column = several.then(|| {
            if label.contains(',') {
                format!("\"{label}\"")
            } else {
                label.clone()
            }
        });
        let mut curve = args
            .plot
            .as_ref()
            .map(|_| Series::new(label.clone(), flushes));
        let started = Instant::now();
        let mut last: Option<FlushRecord> = None;
        let bar = progress::bar(flushes, label.clone());
        let mut ticker = progress::Ticker::new(&bar);
        for size in sizes
            .iter()
            .take(usize::try_from(flushes).unwrap_or(usize::MAX))
        {
            let r = sim.flush(size)?;
            if args.format == Format::Csv && (r.flush % args.every == 0 || r.flush == flushes) {
                csv_line(
                    &mut out,
                    column.as_deref(),
                    &r,
                    args.transient,
                    async_merges,
                )?;
            }
            if let Some(c) = &mut curve {
                c.push(&r);
            }
            last = Some(r);
            ticker.tick();
        }
        drop(ticker);
        bar.finish_and_clear();
        if args.time {
            eprintln!(
                "{label}: {flushes} flushes simulated in {:.3} s",
                started.elapsed().as_secs_f64()
            );
        }
        if let Some(mut c) = curve {
            c.finish(last.as_ref());
            curves.push(c);
        }
        summaries.push(sim.summary());
    }
    if args.format == Format::Json {
        if several {
            serde_json::to_writer_pretty(&mut out, &summaries)?;
        } else if let Some(s) = summaries.first() {
            serde_json::to_writer_pretty(&mut out, s)?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    if let Some(path) = &args.plot {
        let title = format!("{flushes} flushes");
        let opts = PlotOptions {
            log_wa: args.plot_log,
            ..PlotOptions::default()
        };
        plot(path, &title, &curves, opts).with_context(|| format!("drawing {}", path.display()))?;
    }
    Ok(())
}
