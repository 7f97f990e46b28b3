//! `lamina exec`: the DSL against an embedded database.

use std::io::{self, BufWriter};

use anyhow::{Context, Result};
use clap::Args;
use lamina_server::run_local;

use crate::engine_opts::EngineOpts;

/// Flags of `lamina exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub engine: EngineOpts,
}

/// Runs stdin's DSL until end of input or `quit`, then closes the database.
pub fn run(args: ExecArgs) -> Result<()> {
    let db = args.engine.open()?;
    let out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let result = run_local(&db, io::stdin().lock(), out).context("exec failed");
    db.close().context("closing the database failed")?;
    result.map(|_| ())
}
