//! Seed 000 ch. 3 (and seed 003) figures that need the real engine beside
//! the simulator: `experiments/bounded-depth/run.sh observed` runs
//! `engine` once per policy and workload, then `report` draws the figures.
//!
//! * `bounded_depth engine --policy SPEC --workload W --ops N --out PREFIX`:
//!   loads the engine (`lamina::Db` on the in-memory filesystem; a flush
//!   whenever the written keys fill the buffer, its merges done before the
//!   next one, as the papers' model assumes) and
//!   turns its info log (`LOG`, one line per flush and per merge) into
//!   `PREFIX.flushes.csv` (write amplification, sorted runs and transient
//!   space after every flush), `PREFIX.merges.csv` (bytes and microseconds
//!   of every merge) and `PREFIX.json` (the run's totals). The in-memory
//!   filesystem keeps the shared machine's disk (fsyncs of other jobs) out
//!   of the merge times.
//! * `bounded_depth report RESULTS PAPER_CSV TABLE1_SIM_CSV`: simulates
//!   every engine run with `lamina_sim` (the same policy objects, the same
//!   number of flushes of the engine's mean size) and draws Figs. 3.5–3.11
//!   as SVG into RESULTS, with `RESULTS/figures.md` (the tables, R² values
//!   and the paper's numbers).
//!
//! Workloads (seed 000 §3.4): `hashed` inserts unique keys in YCSB's hashed
//! order; `updates` replaces 70% of the writes by updates of existing keys
//! drawn from YCSB's skewed-latest distribution (Zipf 0.99 on recency);
//! `ordered` inserts keys in increasing order; `ordered-updates` is
//! `updates` with ordered inserts.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};

mod engine;
mod report;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One engine run.
    Engine(EngineArgs),
    /// The figures from the engine runs in RESULTS.
    Report {
        /// Directory of the engine runs (`observed/`) and the figures.
        results: PathBuf,
        /// Seed 003 Table I and seed 000 Appendix A (`paper-table1.csv`).
        paper: PathBuf,
        /// The simulated Table I (`results/table1-sim.csv`).
        table1_sim: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
    Hashed,
    Updates,
    Ordered,
    OrderedUpdates,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Hashed => "hashed",
            Workload::Updates => "updates",
            Workload::Ordered => "ordered",
            Workload::OrderedUpdates => "ordered-updates",
        }
    }
    fn from_name(s: &str) -> Option<Workload> {
        [
            Workload::Hashed,
            Workload::Updates,
            Workload::Ordered,
            Workload::OrderedUpdates,
        ]
        .into_iter()
        .find(|w| w.name() == s)
    }
    fn updates(self) -> bool {
        matches!(self, Workload::Updates | Workload::OrderedUpdates)
    }
}

#[derive(clap::Args)]
struct EngineArgs {
    /// Compaction policy spec.
    #[arg(long)]
    policy: String,
    #[arg(long, value_enum)]
    workload: Workload,
    /// Writes (inserts and updates).
    #[arg(long)]
    ops: u64,
    /// Memtable size in bytes (also the leveled file size).
    #[arg(long, default_value_t = 32 << 10)]
    buffer: usize,
    /// Value size in bytes (keys are 8 bytes).
    #[arg(long, default_value_t = 1000)]
    value: usize,
    /// Share of writes that update an existing key (update workloads).
    #[arg(long, default_value_t = 0.7)]
    update_share: f64,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Output files' prefix.
    #[arg(long)]
    out: PathBuf,
}

/// Totals of one engine run (`PREFIX.json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct RunSummary {
    policy: String,
    workload: String,
    ops: u64,
    flushes: u64,
    flush_bytes: u64,
    merge_bytes_written: u64,
    merges: u64,
    moves: u64,
    /// (flush bytes + merge bytes written) / flush bytes.
    write_amplification: f64,
    /// Mean sorted runs right after each flush.
    avg_runs_at_flush: f64,
    seconds: f64,
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Engine(a) => engine::engine(&a),
        Command::Report {
            results,
            paper,
            table1_sim,
        } => report::report(&results, &paper, &table1_sim),
    }
}

fn with_ext(prefix: &Path, ext: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}
