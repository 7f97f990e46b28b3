//! Seed 000 §5.5 at this machine's scale: partitioned stack-based merges
//! (No-partition, Size, Local-Range, Global-Range) on a tiered stack with
//! both stop styles, and leveling, over four key sets; records of exactly
//! `RECORD` bytes are loaded, then point gets and range scans of 1,000
//! entries are timed.
//!
//! `cargo run --release -p lamina-experiment --example partitioned_merges -- OUT_DIR [--quick]`
//! writes `OUT_DIR/summary.json` and `OUT_DIR/results.md`; it makes its
//! databases in a scratch directory it creates under the system's temporary
//! directory and removes only that.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use lamina::{Db, Options, SyncMode};
use lamina_workload::dist::Zipf;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Bytes of every record, key + value (the seed: 1,024).
const RECORD: usize = 1024;

/// One measured configuration.
#[derive(Debug, Serialize)]
struct Row {
    partitioner: String,
    style: String,
    keys: String,
    spec: String,
    write_seconds: f64,
    merges: u64,
    merge_bytes_per_sec: f64,
    files: u64,
    files_written: u64,
    trivial_moves: u64,
    sub_merges: u64,
    get_us: f64,
    scan_us: f64,
    write_amplification: f64,
}

struct Scale {
    records: u64,
    gets: u64,
    scans: u64,
    buffer: usize,
    theta: u64,
    /// `Options::recycle_table_files` of every configuration.
    recycle: usize,
}

/// Obsolete tables' files every configuration keeps for new tables to
/// take over (`Options::recycle_table_files`) unless `--recycle=N` says
/// otherwise: file creation was the largest cost of Global-Range's many
/// small files (`perf`), and 128 covers most of a merge's outputs here.
pub const DEFAULT_RECYCLE: usize = 128;

fn keys_of(set: &str, n: u64, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let zipf = Zipf::new(1 << 40, 0.5);
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n as usize);
    while (out.len() as u64) < n {
        let i = out.len() as u64;
        let key: Vec<u8> = match set {
            "random" => rng.gen::<u64>().to_be_bytes().to_vec(),
            // A counter with a little local disorder: adjacent flushes
            // overlap slightly; the low bits keep keys unique.
            "semiseq" => ((i + rng.gen_range(0..64)) << 20 | i)
                .to_be_bytes()
                .to_vec(),
            // Zipf (q = 0.5) ranks over 2^40: dense near 0, unique.
            "zipf" => zipf.next(&mut rng).to_be_bytes().to_vec(),
            _ => {
                let len = rng.gen_range(4..=32);
                (0..len).map(|_| rng.gen::<u8>()).collect()
            }
        };
        if seen.insert(key.clone()) {
            out.push(key);
        }
    }
    out
}

fn measure(
    dir: &Path,
    spec: &str,
    keys: &[Vec<u8>],
    scale: &Scale,
    threads: usize,
) -> Result<(f64, lamina::DbStats, f64, f64)> {
    let mut opts = Options::default();
    opts.compaction = spec.parse()?;
    opts.write_buffer_size = scale.buffer;
    opts.target_file_size = scale.theta;
    opts.compaction_threads = threads;
    opts.sync = SyncMode::None;
    opts.block_cache_bytes = 8 << 20;
    opts.recycle_table_files = scale.recycle;
    let db = Db::open(dir, opts)?;
    let mut rng = StdRng::seed_from_u64(42);
    let mut value = vec![0u8; RECORD];
    let start = Instant::now();
    for k in keys {
        rng.fill(&mut value[..RECORD - k.len()]);
        db.put(k, &value[..RECORD - k.len()])?;
    }
    db.flush()?;
    db.wait_for_compactions()?;
    let write_seconds = start.elapsed().as_secs_f64();
    let stats = db.stats();
    let t = Instant::now();
    for _ in 0..scale.gets {
        let k = &keys[rng.gen_range(0..keys.len())];
        if db.get(k)?.is_none() {
            bail!("{spec}: a loaded key is missing");
        }
    }
    let get_us = t.elapsed().as_secs_f64() * 1e6 / scale.gets.max(1) as f64;
    let t = Instant::now();
    for _ in 0..scale.scans {
        let k = &keys[rng.gen_range(0..keys.len())];
        let n = db
            .scan(Bound::Included(k.as_slice()), Bound::Unbounded)?
            .take(1000)
            .count();
        if n == 0 {
            bail!("{spec}: an empty scan");
        }
    }
    let scan_us = t.elapsed().as_secs_f64() * 1e6 / scale.scans.max(1) as f64;
    db.close()?;
    Ok((write_seconds, stats, get_us, scan_us))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let Some(out) = args.iter().find(|a| !a.starts_with("--")) else {
        bail!("usage: partitioned_merges OUT_DIR [--quick] [--theta=BYTES] [--recycle=FILES] [--keys=random,semiseq,zipf,str]");
    };
    let theta = match args.iter().find_map(|a| a.strip_prefix("--theta=")) {
        Some(t) => Some(t.parse().with_context(|| format!("--theta={t}"))?),
        None => None,
    };
    let sets: Vec<&str> = match args.iter().find_map(|a| a.strip_prefix("--keys=")) {
        Some(list) => list.split(',').collect(),
        None => KEY_SETS.to_vec(),
    };
    if let Some(bad) = sets.iter().find(|s| !KEY_SETS.contains(s)) {
        bail!("unknown key set {bad:?} (known: {})", KEY_SETS.join(", "));
    }
    let recycle = match args.iter().find_map(|a| a.strip_prefix("--recycle=")) {
        Some(r) => r.parse().with_context(|| format!("--recycle={r}"))?,
        None => DEFAULT_RECYCLE,
    };
    run_experiment(Path::new(out), quick, theta, recycle, &sets)
}

/// The key sets of seed 000 §5.5.
pub const KEY_SETS: [&str; 4] = ["random", "semiseq", "zipf", "str"];

/// Runs every configuration and writes `out/summary.json` and
/// `out/results.md` (the quick scale runs in seconds, for CI).
/// `theta` overrides θ (the output file size) of the chosen scale;
/// `recycle` is every configuration's `Options::recycle_table_files`.
pub fn run_experiment(
    out: &Path,
    quick: bool,
    theta: Option<u64>,
    recycle: usize,
    sets: &[&str],
) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut scale = if quick {
        Scale {
            records: 6_000,
            gets: 1_000,
            scans: 50,
            buffer: 256 << 10,
            theta: 64 << 10,
            recycle,
        }
    } else {
        Scale {
            records: 200_000,
            gets: 20_000,
            scans: 500,
            buffer: 2 << 20,
            theta: 512 << 10,
            recycle,
        }
    };
    if let Some(t) = theta {
        scale.theta = t.max(1);
    }
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run_number = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch: PathBuf = std::env::temp_dir().join(format!(
        "lamina-partitioned-{}-{run_number}",
        std::process::id()
    ));
    if scratch.exists() {
        bail!("{} exists; not touching it", scratch.display());
    }
    std::fs::create_dir(&scratch)?;
    let result = run(&scratch, out, &scale, quick, sets);
    // The scratch directory is this run's own.
    std::fs::remove_dir_all(&scratch)?;
    result
}

fn run(scratch: &Path, out: &Path, scale: &Scale, quick: bool, sets: &[&str]) -> Result<()> {
    let theta = scale.theta;
    let mut rows = Vec::new();
    let mut n = 0;
    for &set in sets {
        let keys = keys_of(set, scale.records, 7);
        let image = if set == "str" { "lambda" } else { "be" };
        let mut configs: Vec<(String, String, String)> = Vec::new();
        for (style, base) in [("similar", "tiered:b=4"), ("total", "bigtable:k=8")] {
            for p in ["none", "size", "local", "global"] {
                configs.push((
                    p.into(),
                    style.into(),
                    format!(
                        "{base},file={theta},partition={p},theta={theta},subcompactions=2,image={image}"
                    ),
                ));
            }
        }
        configs.push(("leveling".into(), "-".into(), "leveling:T=10,l0=4".into()));
        for (partitioner, style, spec) in configs {
            n += 1;
            let dir = scratch.join(format!("db{n}"));
            let threads = if partitioner == "leveling" { 2 } else { 1 };
            let (write_seconds, st, get_us, scan_us) =
                measure(&dir, &spec, &keys, scale, threads).with_context(|| spec.clone())?;
            let files = st.levels.iter().map(|l| l.files as u64).sum();
            rows.push(Row {
                partitioner,
                style,
                keys: set.into(),
                spec,
                write_seconds,
                merges: st.compactions,
                merge_bytes_per_sec: st.merge_bytes_per_sec,
                files,
                files_written: st.compaction_files_written,
                trivial_moves: st.merge_moved_files + st.trivial_moves,
                sub_merges: st.sub_merges,
                get_us,
                scan_us,
                write_amplification: st.write_amplification,
            });
            eprintln!("{set} {} done", rows.len());
        }
    }
    let summary = serde_json::json!({
        "quick": quick,
        "records": scale.records,
        "record_bytes": RECORD,
        "write_buffer_bytes": scale.buffer,
        "theta_bytes": scale.theta,
        "recycle_table_files": scale.recycle,
        "subcompactions": 2,
        "gets": scale.gets,
        "scans_of_1000": scale.scans,
        "rows": rows,
    });
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    let mut md = String::from(
        "| keys | style | partitioner | write s | merges | merge MB/s | files | files written | moves | sub-merges | get µs | scan µs | WA |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &rows {
        writeln!(
            md,
            "| {} | {} | {} | {:.2} | {} | {:.1} | {} | {} | {} | {} | {:.1} | {:.0} | {:.2} |",
            r.keys,
            r.style,
            r.partitioner,
            r.write_seconds,
            r.merges,
            r.merge_bytes_per_sec / 1e6,
            r.files,
            r.files_written,
            r.trivial_moves,
            r.sub_merges,
            r.get_us,
            r.scan_us,
            r.write_amplification
        )?;
    }
    std::fs::write(out.join("results.md"), md)?;
    Ok(())
}
