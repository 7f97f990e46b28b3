//! `lamina cluster`: one member of a replicated lamina (openraft), serving
//! the CS265 DSL through Raft (`lamina-cluster`, `docs/cluster.md`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use lamina_cluster::faults::{self, FaultTestOptions};
use lamina_cluster::network::clamp_to_descriptors;
use lamina_cluster::{ClusterConfig, NodeOptions, PortLimits};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::engine_opts::{parse_count, parse_size, EngineOpts};

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
    /// Run a cluster of several members without a `secret_file`: any
    /// host that reaches a Raft port can then send Raft RPCs (only on a
    /// network where every host is trusted).
    #[arg(long)]
    pub insecure: bool,
    /// Most client connections open at once (one more is answered
    /// `ERROR too many connections` and closed); lowered to fit the
    /// descriptor limit, with a warning.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = parse_count)]
    pub max_connections: usize,
    /// Most Raft-port connections open at once (other members and their
    /// handshakes); lowered to fit the descriptor limit, with a warning.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = parse_count)]
    pub max_raft_connections: usize,
    /// Close a client connection that sends nothing for this long (0:
    /// never).
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = parse_count)]
    pub idle_timeout: usize,
    /// Bytes of Raft frames being received that all Raft-port connections
    /// may hold together (K, M, G suffixes; a frame counts at its announced
    /// length); a frame that would pass it closes its connection
    /// [default: a quarter of physical memory, 1G if unknown].
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub max_request_bytes_total: Option<usize>,
    #[command(flatten)]
    pub engine: EngineOpts,
}

pub fn run(args: ClusterArgs) -> Result<()> {
    let cluster = ClusterConfig::load(&args.config)?;
    let me = cluster
        .member(args.node_id)
        .with_context(|| format!("no node {} in {}", args.node_id, args.config.display()))?;
    if cluster.node.len() > 1 && cluster.secret_file.is_none() && !args.insecure {
        bail!(
            "{} has {} members and no secret_file: any host that reaches a Raft port could send it Raft RPCs. Make a secret (`head -c 32 /dev/urandom > cluster.secret; chmod 600 cluster.secret`), give every member a copy, and add `secret_file = \"cluster.secret\"` at the top of the cluster file (docs/cluster.md, \"Authentication\"), or pass --insecure on a network where every host is trusted",
            args.config.display(),
            cluster.node.len()
        );
    }
    if args.max_connections == 0 || args.max_raft_connections == 0 {
        bail!("--max-connections and --max-raft-connections must be positive");
    }
    if args.max_request_bytes_total == Some(0) {
        bail!("--max-request-bytes-total must be positive");
    }
    let mut limits = PortLimits {
        max_client_connections: args.max_connections,
        max_raft_connections: args.max_raft_connections,
        idle_timeout: (args.idle_timeout > 0)
            .then(|| Duration::from_secs(u64::try_from(args.idle_timeout).unwrap_or(u64::MAX))),
        ..PortLimits::default()
    };
    if let Some(bytes) = args.max_request_bytes_total {
        limits.max_frame_bytes_total = bytes;
    }
    let descriptors = lamina_server::fd_limit::raise_nofile_limit()
        .context("cannot read the descriptor limit")?;
    let groups = cluster
        .shards()
        .iter()
        .filter(|s| s.members.contains(&args.node_id))
        .count();
    if let Some(warning) = clamp_to_descriptors(&mut limits, descriptors, groups) {
        eprintln!("lamina: warning: {warning}");
    }
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
        limits,
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
