//! `lamina exec`: the DSL against an embedded database.

use std::io::{self, BufWriter};

use anyhow::{Context, Result};
use clap::Args;
use lamina_server::{run_session, Mode, Session};

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
    // One bar per `l` load: made when it starts, cleared when it ends.
    let mut bar: Option<indicatif::ProgressBar> = None;
    let session =
        Session::new(&db, Mode::Local).with_load_progress(Box::new(move |done, total| {
            if done == 0 {
                bar = Some(crate::progress::bar(total, "load"));
            }
            if let Some(b) = &bar {
                b.set_position(done);
                if done >= total {
                    b.finish_and_clear();
                }
            }
        }));
    let result = run_session(session, io::stdin().lock(), out).context("exec failed");
    db.close().context("closing the database failed")?;
    result.map(|_| ())
}
