//! `lamina spatial exec`: the spatial command language from stdin against
//! a dataset.

use std::io::{self, BufWriter};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use lamina::compaction::CompactionSpec;
use lamina_dataset::Dataset;
use lamina_server::spatial::run_spatial;

use super::options::dataset_options;
use crate::engine_opts::EngineOpts;

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

/// Runs `lamina spatial exec`.
pub fn run(args: SpatialExecArgs) -> Result<()> {
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
