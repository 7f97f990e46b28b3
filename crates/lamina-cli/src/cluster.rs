//! `lamina cluster`: one member of a replicated lamina (openraft), serving
//! the CS265 DSL through Raft (`lamina-cluster`, `docs/cluster.md`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use lamina_cluster::{ClusterConfig, NodeOptions};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::engine_opts::EngineOpts;

/// Run one member of a Raft group of lamina databases.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The cluster file (TOML: `[[node]]` id, raft, client addresses).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// This member's id in the cluster file.
    #[arg(long, value_name = "N")]
    pub node_id: u64,
    /// Make every member of the cluster file a voter (once, on one member,
    /// when the cluster is created; ignored if already initialized).
    #[arg(long)]
    pub init: bool,
    #[command(flatten)]
    pub engine: EngineOpts,
}

pub fn run(args: ClusterArgs) -> Result<()> {
    let cluster = ClusterConfig::load(&args.config)?;
    let me = cluster
        .member(args.node_id)
        .with_context(|| format!("no node {} in {}", args.node_id, args.config.display()))?;
    eprintln!(
        "lamina: cluster member {} (raft {}, clients {}), data in {}",
        me.id,
        me.raft,
        me.client,
        args.engine.dir.display()
    );
    let opts = NodeOptions {
        id: args.node_id,
        cluster,
        dir: args.engine.dir.clone(),
        engine: args.engine.to_options()?,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install signal handlers")?;
    }
    lamina_cluster::run_until(opts, args.init, Arc::clone(&stop))?;
    if stop.load(Ordering::Relaxed) {
        eprintln!("lamina: cluster member {} stopped", args.node_id);
    }
    Ok(())
}
