//! `lamina cluster`: one member of a replicated lamina (openraft), serving
//! the CS265 DSL through Raft (`lamina-cluster`, `docs/cluster.md`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use lamina_cluster::faults::{self, FaultTestOptions};
use lamina_cluster::{ClusterConfig, NodeOptions};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::engine_opts::EngineOpts;

/// Run one member of a Raft group of lamina databases.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The cluster file (TOML: `[[node]]` id, raft, client addresses;
    /// optional `[[shard]]` id, lo, hi, members).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// This member's id in the cluster file.
    #[arg(long, value_name = "N")]
    pub node_id: u64,
    /// Make the members of each shard this member is in the voters of that
    /// shard's group (without `[[shard]]`: every member of the file; once,
    /// when the cluster is created, on a member of each shard; ignored if
    /// already initialized).
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

/// Run the fault test: a local 3-member cluster of `lamina cluster`
/// processes (this binary), clients, a nemesis, a linearizability checker.
#[derive(Debug, Args)]
pub struct ClusterTestArgs {
    /// Fault injections (kills and partitions, one after the other).
    #[arg(long, value_name = "N")]
    pub faults: usize,
    /// Concurrent clients.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub clients: usize,
    /// Keys 0..N that the clients read and write.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub keys: i32,
    /// Seed of the clients' and the nemesis's choices.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// A directory to create for the members' data and logs (kept when the
    /// run finds a problem, removed otherwise).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Print each fault on stderr.
    #[arg(long)]
    pub verbose: bool,
    /// Clients read without a read index (may be stale): the checker must
    /// then report violations (a check of the test itself).
    #[arg(long)]
    pub follower_reads: bool,
    /// Members forward writes to the leader instead of redirecting.
    #[arg(long)]
    pub forward_writes: bool,
    /// Shards: 1 is one group of 3 members; N > 1 runs N + 2 members with
    /// shard i (keys cut evenly) on members i, i+1, i+2.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub shards: usize,
}

pub fn run_test(args: ClusterTestArgs) -> Result<ExitCode> {
    if args.clients == 0 || args.keys <= 0 || args.shards == 0 {
        anyhow::bail!("--clients, --keys and --shards must be positive");
    }
    if args.shards > usize::try_from(args.keys).unwrap_or(usize::MAX) {
        anyhow::bail!("--shards must not exceed --keys (every shard needs a key)");
    }
    let lamina = std::env::current_exe().context("cannot find the lamina binary")?;
    let mut opts = FaultTestOptions::new(args.faults, lamina, args.dir.clone());
    opts.clients = args.clients;
    opts.keys = args.keys;
    opts.seed = args.seed;
    opts.verbose = args.verbose;
    opts.follower_reads = args.follower_reads;
    opts.forward_writes = args.forward_writes;
    opts.shards = args.shards;
    let report = faults::run(&opts)?;
    for p in &report.problems {
        eprintln!("lamina: {p}");
    }
    eprintln!(
        "lamina: {:.1} s; {} answered, {} writes of unknown outcome, {} failed reads{}",
        report.seconds,
        report.ok,
        report.unknown,
        report.failed_reads,
        if report.problems.is_empty() {
            String::new()
        } else {
            format!("; data and logs kept in {}", args.dir.display())
        }
    );
    println!("{report}");
    Ok(if report.lost == 0 && report.violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
