//! `lamina`: the command-line tool of the lamina storage engine.
//!
//! Each subcommand lives in its own module; add new ones by adding a module
//! with an `Args` struct and a `run` function and a variant to [`Command`].

mod bench;
mod bytefmt;
mod client;
mod cluster;
mod config_file;
mod dbdir;
mod engine_opts;
mod exec;
mod experiment;
mod gen;
mod inspect;
mod kv;
mod manual;
mod mixedhot;
mod pace;
mod progress;
mod repair;
mod serve;
mod sim;
mod spatial;
mod tune;
mod verify;

use std::io::IsTerminal;

use clap::{Command as ClapCommand, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The engine allocates per memtable entry and per block; mimalloc's
/// thread-local free lists cut the allocator's share of server CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// lamina: an LSM-tree key-value store speaking the CS265 DSL.
#[derive(Debug, Parser)]
#[command(name = "lamina", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a database over TCP (one thread per connection).
    Serve(serve::ServeArgs),
    /// Send DSL from stdin to a server and print the replies (on a
    /// terminal: line editing, history and `help`).
    #[command(after_help = client::COMMANDS)]
    Client(client::ClientArgs),
    /// Run DSL from stdin against an embedded database.
    Exec(exec::ExecArgs),
    /// Generate a CS265-style workload as DSL on stdout.
    Gen(gen::GenArgs),
    /// Run db_bench-compatible benchmarks.
    Bench(bench::BenchArgs),
    /// Simulate compaction policies over a model tree (WA, sorted runs).
    Sim(sim::SimArgs),
    /// Recommend a compaction design for a workload and memory budget.
    Tune(tune::TuneArgs),
    /// Check every block of every file and the manifest of a database.
    Verify(verify::VerifyArgs),
    /// Show an SST, the manifest, a WAL or the tree (sst_dump, manifest_dump, dump_wal).
    Inspect(inspect::InspectArgs),
    /// Rebuild a database whose CURRENT or manifest is missing or damaged.
    Repair(repair::RepairArgs),
    /// Get, put, delete, scan or count the byte keys of a database (like ldb).
    Kv(kv::KvArgs),
    /// Run a sweep of strategies x parameters x workloads (resumable).
    Experiment(experiment::ExperimentArgs),
    /// Spatial datasets: a primary index and an LSM R-tree (seed 000 ch. 4).
    Spatial(spatial::SpatialArgs),
    /// Run one member of a replicated (Raft) group of lamina databases.
    Cluster(cluster::ClusterArgs),
    /// Jepsen-style fault test of a local 3-member cluster (kills, partitions, a linearizability checker).
    ClusterTest(cluster::ClusterTestArgs),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions(manual::CompletionsArgs),
    /// Print the man page on stdout, or write every command's to --dir.
    Man(manual::ManArgs),
}

/// Errors print as `lamina: <error>: <cause>...` (no backtrace) and exit 1
/// (`kv get` of an absent key exits 3).
fn main() -> std::process::ExitCode {
    // The engine reports through `tracing` (a background flush or
    // compaction that failed, ...): to stderr, `RUST_LOG` choosing the
    // level, warnings and errors by default; colours only on a terminal
    // (a journal, a file or a pipe gets plain text) and never with
    // NO_COLOR set.
    let stderr = std::io::stderr();
    let colour = stderr.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .init();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("lamina: {}", error_chain(&e));
            return std::process::ExitCode::FAILURE;
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lamina: {}", error_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The log filter without `RUST_LOG`: warnings and errors, but not
/// openraft's own warnings, which it logs for the ordinary course of an
/// election (a vote request to a member that is still starting, a vote
/// refused for a newer term); lamina's cluster code logs what an operator
/// must see about its members at WARN itself.
const DEFAULT_LOG_FILTER: &str = "warn,openraft=error";

/// The command line, parsed; `lamina serve --config FILE` with the file's
/// settings under the command line's (`config_file`). A usage error exits
/// as clap does.
fn parse() -> anyhow::Result<Cli> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cmd = command();
    let matches = cmd.clone().get_matches_from(argv.clone());
    let argv = config_file::with_config_file(&cmd, &matches, argv)?;
    let matches = cmd.get_matches_from(argv);
    Cli::from_arg_matches(&matches).map_err(|e| e.exit())
}

/// The command line, with every value-taking flag accepting a leading `-`
/// as a value: `--buffer-bytes -5` is then refused by the flag's own parser
/// ("-5 is not a byte count") instead of as an unknown argument.
fn command() -> ClapCommand {
    fn negatives(cmd: ClapCommand) -> ClapCommand {
        cmd.mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(negatives)
    }
    negatives(Cli::command())
}

/// The error and its causes on one line, leaving out a cause whose text the
/// message already holds (lamina's I/O errors show their OS error, which is
/// also their source).
fn error_chain(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !line.contains(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
    }
    line
}

fn run(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Cluster(args) => cluster::run(args),
        // A run that found lost writes or violations exits 1 after its
        // summary line.
        Command::ClusterTest(args) => return cluster::run_test(args),
        Command::Client(args) => client::run(args),
        Command::Exec(args) => exec::run(args),
        Command::Gen(args) => gen::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Repair(args) => repair::run(args),
        Command::Experiment(args) => experiment::run(args),
        Command::Spatial(args) => spatial::run(args),
        // `kv get` of an absent key has an exit status of its own.
        Command::Kv(args) => return kv::run(args),
        Command::Completions(args) => manual::completions(&args, command()),
        Command::Man(args) => manual::man(&args, command()),
    }?;
    Ok(std::process::ExitCode::SUCCESS)
}
