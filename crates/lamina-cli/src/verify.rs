//! `lamina verify DIR`: the offline integrity check (`lamina::verify`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
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
    let report = lamina::verify(Arc::new(OsFs), &args.dir).map_err(|e| {
        let dir = args.dir.display();
        let hint = if e.is_corruption() {
            format!(" (`lamina repair {dir}` rebuilds it from its intact files)")
        } else {
            String::new()
        };
        anyhow::Error::new(e).context(format!("{dir} failed verification{hint}"))
    })?;
    println!("{report}");
    Ok(())
}
