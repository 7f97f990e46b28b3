//! `lamina spatial exec`: point records in a dataset with a primary index
//! and an LSM R-tree (seed 000 ch. 4), driven by the spatial command
//! language of `lamina_server::spatial`, and `lamina spatial bench`, seed
//! 000 §4.4's workload on such a dataset.

mod bench;
mod exec;
mod options;

use anyhow::Result;
use clap::{Args, Subcommand};

pub use options::dataset_options;

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
    Exec(exec::SpatialExecArgs),
    /// Seed 000 §4.4's workload: load, then rounds of inserts and window
    /// COUNT queries at selectivities 10^-σ; prints a JSON report.
    Bench(bench::SpatialBenchArgs),
}

/// Runs a spatial subcommand.
pub fn run(args: SpatialArgs) -> Result<()> {
    match args.command {
        SpatialCommand::Exec(a) => exec::run(a),
        SpatialCommand::Bench(a) => bench::run(a),
    }
}
