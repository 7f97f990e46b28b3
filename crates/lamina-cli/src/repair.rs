//! `lamina repair DIR`: rebuilds a database whose `CURRENT` or manifest is
//! missing or damaged from its intact files (`lamina::repair`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use lamina::vfs::OsFs;
use lamina::Options;

/// Flags of `lamina repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// Database directory to rebuild (it must not be open: repair takes its
    /// lock).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Rebuilds the database and prints what was kept and what was dropped;
/// every replaced or unusable file is moved to `DIR/lost/`, none deleted.
pub fn run(args: RepairArgs) -> Result<()> {
    let mut opts = Options::default();
    opts.vfs = Arc::new(OsFs);
    // The engine's repair reports nothing while it works: a spinner shows
    // it is alive.
    let spinner = crate::progress::spinner("repair");
    spinner.set_message(args.dir.display().to_string());
    let report = lamina::repair(&args.dir, &opts);
    spinner.finish_and_clear();
    let report = report.with_context(|| format!("repairing {}", args.dir.display()))?;
    println!("{report}");
    Ok(())
}
