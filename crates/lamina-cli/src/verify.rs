//! `lamina verify DIR`: the offline integrity check (`lamina::verify`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use lamina::vfs::OsFs;

/// Flags of `lamina verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Database directory to check (read only; it may not be open in a
    /// server at the same time, or files may vanish under the check).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Prints a summary and succeeds if every file checks out; otherwise fails
/// with the first problem (file, byte offset, what is wrong).
pub fn run(args: VerifyArgs) -> Result<()> {
    let report = lamina::verify(Arc::new(OsFs), &args.dir)
        .with_context(|| format!("{} failed verification", args.dir.display()))?;
    println!("{report}");
    Ok(())
}
