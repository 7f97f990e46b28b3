//! `lamina spatial exec`: point records in a dataset with a primary index
//! and an LSM R-tree (seed 000 ch. 4), driven by the spatial command
//! language of `lamina_server::spatial`.

use std::io::{self, BufWriter};
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use lamina::compaction::CompactionSpec;
use lamina::spatial::Comparator;
use lamina_dataset::{Dataset, DatasetOptions, Maintenance};
use lamina_server::spatial::run_spatial;

use crate::engine_opts::EngineOpts;

/// `lamina spatial ...`
#[derive(Debug, Args)]
pub struct SpatialArgs {
    #[command(subcommand)]
    pub command: SpatialCommand,
}

/// The spatial subcommands.
#[derive(Debug, Subcommand)]
pub enum SpatialCommand {
    /// Run spatial commands from stdin against a dataset (`i ID X Y`,
    /// `x ID`, `w X1 Y1 X2 Y2`, `c X1 Y1 X2 Y2`, `stats-json`).
    Exec(SpatialExecArgs),
    /// Seed 000 §4.4's workload: load, then rounds of inserts and window
    /// COUNT queries at selectivities 10^-σ; prints a JSON report.
    Bench(crate::spatial_bench::SpatialBenchArgs),
}

/// Flags of `lamina spatial exec`.
#[derive(Debug, Args)]
pub struct SpatialExecArgs {
    /// The engine flags: `--dir` is the dataset's directory, `--compaction`
    /// the spatial index's merge policy, `--buffer-bytes` the memory budget
    /// both indexes share.
    #[command(flatten)]
    pub engine: EngineOpts,
    /// The spatial index's key order: hilbert, zorder or simple (fixed at
    /// creation).
    #[arg(long, value_name = "C", default_value = "hilbert")]
    pub comparator: String,
    /// Secondary-index maintenance: eager (anti-matter on writes) or lazy
    /// (queries validate); fixed at creation.
    #[arg(long, value_name = "M", default_value = "eager")]
    pub maintenance: String,
    /// The primary index's merge policy.
    #[arg(long, value_name = "SPEC", default_value = "binomial:k=8")]
    pub primary_compaction: CompactionSpec,
    /// How a leveled spatial index cuts its merges: size (by bytes, in key
    /// order), str or rstar-grove (spatially disjoint tiles); added to
    /// `--compaction` as `partition=P`, which must then be `leveled:...`.
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
}

/// Runs a spatial subcommand.
pub fn run(args: SpatialArgs) -> Result<()> {
    match args.command {
        SpatialCommand::Exec(a) => exec(a),
        SpatialCommand::Bench(a) => crate::spatial_bench::run(a),
    }
}

/// The spatial index's policy: `spec` with `partition=P` added.
pub fn index_compaction(spec: &CompactionSpec, partition: Option<&str>) -> Result<CompactionSpec> {
    let Some(p) = partition else {
        return Ok(spec.clone());
    };
    let text = spec.to_string();
    let joined = format!(
        "{text}{}partition={p}",
        if text.contains(':') { ',' } else { ':' }
    );
    joined
        .parse()
        .with_context(|| format!("--partition {p} with --compaction {text}"))
}

/// The dataset options of `spatial exec` and `serve --spatial-dir`: the
/// engine options `base` (their write buffer is the shared memory budget,
/// their compaction the spatial index's policy, cut by `partition`), with
/// the comparator and maintenance named on the command line.
pub fn dataset_options(
    base: lamina::Options,
    comparator: &str,
    maintenance: &str,
    primary_compaction: CompactionSpec,
    partition: Option<&str>,
) -> Result<DatasetOptions> {
    let comparator = Comparator::parse(comparator)
        .ok_or_else(|| anyhow!("comparator {comparator:?}: use hilbert, zorder or simple"))?;
    let maintenance = Maintenance::parse(maintenance)
        .ok_or_else(|| anyhow!("maintenance {maintenance:?}: use eager or lazy"))?;
    Ok(DatasetOptions {
        memory_budget: base.write_buffer_size,
        index_compaction: index_compaction(&base.compaction, partition)?,
        primary_compaction,
        comparator,
        maintenance,
        base,
        fields: Vec::new(),
    })
}

fn exec(args: SpatialExecArgs) -> Result<()> {
    let opts = dataset_options(
        args.engine.to_options()?,
        &args.comparator,
        &args.maintenance,
        args.primary_compaction,
        args.partition.as_deref(),
    )?;
    let dir: PathBuf = args.engine.dir.clone();
    let ds = Dataset::open(&dir, opts)
        .with_context(|| format!("cannot open the dataset in {}", dir.display()))?;
    let out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let result = run_spatial(&ds, io::stdin().lock(), out).context("spatial exec failed");
    ds.close().context("closing the dataset failed")?;
    result
}
