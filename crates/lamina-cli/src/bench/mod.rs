//! `lamina bench`: db_bench-compatible micro-benchmarks.
//!
//! Flags, key layout and output follow RocksDB's `db_bench` so that the two
//! can be run with the same command line and their reports compared line by
//! line:
//!
//! * a key is the integer `k` in `[0, num)` as big-endian bytes (at most 8)
//!   padded with `'0'` to `key_size` bytes, exactly as db_bench's
//!   `GenerateKeyFromInt`; random keys are `rng % num`, with repetition;
//! * values are slices of one pre-generated random buffer;
//! * each line reads `name : X micros/op Y ops/sec; Z MB/s (msg)`, where
//!   micros/op is the sum of the threads' busy time over all operations and
//!   ops/sec and MB/s use the wall time from the first thread's start to the
//!   last thread's finish.
//!
//! `--histogram` prints each benchmark's per-operation latencies as
//! db_bench does, `--statistics` the engine's counters in RocksDB's
//! `STATISTICS:` format, `levelstats` the files and megabytes per level,
//! and `--report_interval_seconds` writes db_bench's per-interval
//! throughput file.
//!
//! Beyond db_bench's names, `ycsb-load` and `ycsb-a` ... `ycsb-f` run the
//! YCSB generators of `lamina-workload`. Every benchmark drives a
//! [`Store`], so `--engine fjall|rocksdb|leveldb` (features `peer-fjall`,
//! `peer-rocksdb`, `peer-leveldb`) runs the same code on a peer engine,
//! configured from the same flags ([`peers`]), after printing how each
//! flag maps onto the peer's options.

mod args;
mod benchmarks;
mod histogram;
mod measure;
mod peers;
mod statistics;

use anyhow::{anyhow, bail, Context, Result};
use lamina::{Db, DbStats, Options, SyncMode};
use lamina_experiment::kvops::Store;

use crate::dbdir::{self, Existing};

pub use args::BenchArgs;
use benchmarks::{ycsb_workload, Bench, KNOWN};

/// Runs the benchmarks named in `args`.
pub fn run(args: BenchArgs) -> Result<()> {
    let benchmarks: Vec<&str> = args
        .benchmarks
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(bad) = benchmarks
        .iter()
        .find(|b| !KNOWN.contains(b) && ycsb_workload(b).is_none())
    {
        bail!(
            "unknown benchmark {bad:?} (known: {}, ycsb-load, ycsb-a ... ycsb-f)",
            KNOWN.join(",")
        );
    }
    if args.num == 0 {
        bail!("--num must be at least 1");
    }
    if args.key_size == 0 {
        bail!("--key_size must be at least 1");
    }
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if args.compression_ratio.is_nan() || args.compression_ratio <= 0.0 {
        bail!("--compression_ratio must be positive");
    }

    match args.engine.as_str() {
        "lamina" => run_lamina(&args, &benchmarks),
        "fjall" => run_fjall(&args, &benchmarks),
        "rocksdb" => run_rocksdb(&args, &benchmarks),
        "leveldb" => run_leveldb(&args, &benchmarks),
        other => bail!("unknown --engine {other:?} (lamina, fjall, rocksdb, leveldb)"),
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
fn run_lamina(args: &BenchArgs, benchmarks: &[&str]) -> Result<()> {
    let existing = match (args.use_existing_db, args.destroy_db) {
        (true, true) => bail!("--use_existing_db and --destroy_db contradict each other"),
        (true, false) => Existing::Reuse,
        (false, true) => Existing::Destroy,
        (false, false) => Existing::Refuse,
    };
    dbdir::prepare(
        &args.db,
        existing,
        "pass --destroy_db to delete its lamina files first, or --use_existing_db to reuse it",
    )?;
    let mut opts = Options::default();
    opts.write_buffer_size = args.write_buffer_size;
    opts.bloom_bits_per_key = args.bloom_bits;
    opts.memtable_bloom_bits_per_key = args.memtable_bloom_bits;
    opts.block_size = args.block_size;
    if let Some(bytes) = args.target_file_size {
        opts.target_file_size = bytes;
    }
    opts.block_cache_bytes = args.cache_size;
    opts.cache_index_and_filter_blocks = args.cache_index_and_filter_blocks;
    opts.pin_l0_filter_and_index_blocks_in_cache = args.pin_l0_filter_and_index_blocks_in_cache;
    opts.row_cache_bytes = args.row_cache_size;
    opts.compaction_warm_up = args.compaction_warm_up;
    opts.compaction = args.compaction.clone();
    opts.write_ahead_log = !args.disable_wal;
    opts.mmap_reads = args.mmap_read;
    opts.scan_resistant_cache = args.scan_resistant_cache;
    opts.verify_checksums = args.verify_checksums;
    opts.seek_compaction = args.seek_compaction;
    opts.max_scan_readahead_bytes = args.max_scan_readahead_bytes;
    opts.compression = args.compression_type;
    opts.sync = if args.sync {
        SyncMode::Always
    } else {
        SyncMode::None
    };
    if let Some(n) = args.compaction_threads {
        opts.compaction_threads = n;
    }
    let device: std::sync::Arc<dyn lamina::vfs::Vfs> = if args.direct_io {
        std::sync::Arc::new(lamina::vfs::DirectReads)
    } else {
        std::sync::Arc::new(lamina::vfs::OsFs)
    };
    opts.vfs = device.clone();
    let slow = (args.read_miss_latency_us > 0).then(|| {
        std::sync::Arc::new(lamina::vfs::SlowReads::new(
            device,
            std::time::Duration::from_micros(args.read_miss_latency_us),
        ))
    });
    if let Some(slow) = &slow {
        opts.vfs = slow.clone();
    }
    opts.validate().map_err(|e| {
        let flag = match e.field {
            "bloom_bits_per_key" => "bloom_bits",
            "memtable_bloom_bits_per_key" => "memtable_bloom_bits",
            other => other,
        };
        anyhow!("--{flag} {}", e.reason)
    })?;
    print_header(args);
    println!(
        "lamina:     compaction={} write_buffer_size={} bloom_bits={} memtable_bloom_bits={} \
         block_size={} target_file_size={} cache_size={} cache_index_and_filter_blocks={} \
         pin_l0_filter_and_index_blocks_in_cache={} row_cache_size={} compaction_warm_up={} \
         sync={} wal={} compaction_threads={} threads={} read_miss_latency_us={} direct_io={} \
         mmap_read={} scan_resistant_cache={} verify_checksums={} max_scan_readahead_bytes={} \
         compression={}",
        opts.compaction,
        opts.write_buffer_size,
        opts.bloom_bits_per_key,
        opts.memtable_bloom_bits_per_key,
        opts.block_size,
        opts.target_file_size,
        opts.block_cache_bytes,
        opts.cache_index_and_filter_blocks,
        opts.pin_l0_filter_and_index_blocks_in_cache,
        opts.row_cache_bytes,
        opts.compaction_warm_up,
        opts.sync,
        opts.write_ahead_log,
        opts.compaction_threads,
        args.threads,
        args.read_miss_latency_us,
        args.direct_io,
        opts.mmap_reads,
        opts.scan_resistant_cache,
        opts.verify_checksums,
        opts.max_scan_readahead_bytes,
        opts.compression
    );
    println!("DB path: [{}]", args.db.display());
    println!("------------------------------------------------");
    let db = Db::open(&args.db, opts).with_context(|| format!("opening {}", args.db.display()))?;
    let emulate = |on: bool| {
        if let Some(slow) = &slow {
            slow.set_enabled(on);
        }
    };
    run_benchmarks(
        args,
        benchmarks,
        &db,
        &|| print_stats(&db.stats()),
        &emulate,
    )?;
    if let Some(slow) = &slow {
        println!(
            "emulated disk: {} reads paid {} us each",
            slow.seeks(),
            args.read_miss_latency_us
        );
    }
    if args.statistics {
        println!("STATISTICS:\n{}", statistics::render(&db.stats()));
    }
    if let Some(path) = &args.stats_json {
        let json = serde_json::to_string_pretty(&db.stats())?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    db.close().context("closing the database")?;
    Ok(())
}

/// Runs `benchmarks` on a peer engine: prepares `--db` (deleting only a
/// directory the bench created), opens the peer with the settings derived
/// from the flags, prints the option mapping, runs, closes. `stats` is the
/// peer's own statistics text for the `stats` benchmark.
#[cfg(any(
    feature = "peer-fjall",
    feature = "peer-rocksdb",
    feature = "peer-leveldb"
))]
fn run_peer<S: Store>(
    args: &BenchArgs,
    benchmarks: &[&str],
    engine: &str,
    open: impl FnOnce(&std::path::Path, &peers::PeerSettings) -> Result<(S, peers::OptionMap)>,
    stats: impl Fn(&S) -> String,
    stats_json: Option<fn(&S) -> Result<serde_json::Value>>,
    close: impl FnOnce(S) -> Result<()>,
) -> Result<()> {
    use peers::prepare_dir;
    for (set, flag) in [
        (
            args.stats_json.is_some() && stats_json.is_none(),
            "--stats-json",
        ),
        (args.row_cache_size > 0, "--row_cache_size"),
        (args.statistics, "--statistics"),
        (args.compaction_warm_up, "--compaction_warm_up"),
        (args.read_miss_latency_us > 0, "--read_miss_latency_us"),
        (args.direct_io, "--direct_io"),
        (
            args.max_scan_readahead_bytes != lamina::Options::default().max_scan_readahead_bytes,
            "--max_scan_readahead_bytes",
        ),
    ] {
        if set {
            bail!("{flag} is lamina's; {engine} has no equivalent in this bench");
        }
    }
    let settings = args.peer_settings()?;
    prepare_dir(&args.db, args.use_existing_db, args.destroy_db)?;
    let (store, map) = open(&args.db, &settings)?;
    print_header(args);
    print!("{}", map.render(engine));
    println!("threads (benchmark clients): {}", args.threads);
    println!("DB path: [{}]", args.db.display());
    println!("------------------------------------------------");
    run_benchmarks(
        args,
        benchmarks,
        &store,
        &|| println!("** {engine} stats **\n{}", stats(&store)),
        &|_| {},
    )?;
    if let (Some(path), Some(json)) = (&args.stats_json, stats_json) {
        let text = serde_json::to_string_pretty(&json(&store)?)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    close(store)
}

#[cfg(feature = "peer-fjall")]
fn run_fjall(args: &BenchArgs, benchmarks: &[&str]) -> Result<()> {
    use peers::fjall::FjallStore;
    run_peer(
        args,
        benchmarks,
        "fjall",
        FjallStore::open,
        |_| "(fjall keeps no statistics)".into(),
        None,
        FjallStore::close,
    )
}

#[cfg(not(feature = "peer-fjall"))]
fn run_fjall(_: &BenchArgs, _: &[&str]) -> Result<()> {
    bail!("--engine fjall needs a lamina built with `--features peer-fjall`")
}

#[cfg(feature = "peer-rocksdb")]
fn run_rocksdb(args: &BenchArgs, benchmarks: &[&str]) -> Result<()> {
    use peers::rocksdb::RocksStore;
    run_peer(
        args,
        benchmarks,
        "rocksdb",
        RocksStore::open,
        RocksStore::stats_text,
        Some(RocksStore::stats_json),
        RocksStore::close,
    )
}

#[cfg(not(feature = "peer-rocksdb"))]
fn run_rocksdb(_: &BenchArgs, _: &[&str]) -> Result<()> {
    bail!("--engine rocksdb needs a lamina built with `--features peer-rocksdb`")
}

#[cfg(feature = "peer-leveldb")]
fn run_leveldb(args: &BenchArgs, benchmarks: &[&str]) -> Result<()> {
    use peers::leveldb::LevelStore;
    run_peer(
        args,
        benchmarks,
        "leveldb",
        LevelStore::open,
        LevelStore::stats_text,
        None,
        |store| {
            drop(store);
            Ok(())
        },
    )
}

#[cfg(not(feature = "peer-leveldb"))]
fn run_leveldb(_: &BenchArgs, _: &[&str]) -> Result<()> {
    bail!("--engine leveldb needs a lamina built with `--features peer-leveldb`")
}

/// Runs `benchmarks` in order on `store`; `stats` calls `print_stats`,
/// `emulate_disk` turns the emulated disk's latency on or off (a no-op
/// where there is none).
fn run_benchmarks(
    args: &BenchArgs,
    benchmarks: &[&str],
    store: &dyn Store,
    print_stats: &dyn Fn(),
    emulate_disk: &(dyn Fn(bool) + Sync),
) -> Result<()> {
    let bench = Bench::new(args, store, emulate_disk);
    for &name in benchmarks {
        if name == "stats" {
            print_stats();
            continue;
        }
        if name == "levelstats" {
            // db_bench prints the property between blank lines.
            let table = store.level_stats();
            println!("\n{}", table.as_deref().unwrap_or("(failed)"));
            continue;
        }
        // The emulated disk's latency is off while a fill loads the data.
        emulate_disk(!name.starts_with("fill"));
        let report = bench.run(name)?;
        report.print(name);
    }
    Ok(())
}

fn print_header(args: &BenchArgs) {
    let raw_mb = (args.key_size + args.value_size) as f64 * args.num as f64 / 1_048_576.0;
    println!("Keys:       {} bytes each", args.key_size);
    println!("Values:     {} bytes each", args.value_size);
    println!("Entries:    {}", args.num);
    println!("RawSize:    {raw_mb:.1} MB (estimated)");
    println!("Compression: {}", args.compression_type);
    println!(
        "Values compress to: {} (--compression_ratio)",
        args.compression_ratio.min(1.0)
    );
}

/// A short human-readable summary of the engine statistics.
fn print_stats(s: &DbStats) {
    println!("** lamina stats **");
    println!(
        "writes {}  ingested {:.1} MB  flushes {}  compactions {} (+{} trivial moves, {} errors)",
        s.writes,
        s.bytes_ingested as f64 / 1_048_576.0,
        s.flushes,
        s.compactions,
        s.trivial_moves,
        s.compaction_errors
    );
    println!(
        "write amp {:.2}  space amp {:.2}  disk {:.1} MB  sorted runs {} (avg {:.2})  stalls {} ({:.3} s)",
        s.write_amplification,
        s.space_amplification,
        s.disk_bytes as f64 / 1_048_576.0,
        s.sorted_runs,
        s.avg_sorted_runs,
        s.stalls,
        s.stall_micros as f64 / 1e6
    );
    if s.sub_merges > 0 {
        println!(
            "merges: {:.1} MB/s  sub-merges {} (max {} in one; per merge 1/2/3-4/5-8/9-16/17-32/33-64/65+: {})  files written {}  moved within merges {} ({:.1} MB)",
            s.merge_bytes_per_sec / 1e6,
            s.sub_merges,
            s.max_sub_merges,
            s.sub_merges_per_merge
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("/"),
            s.compaction_files_written,
            s.merge_moved_files,
            s.merge_moved_bytes as f64 / 1_048_576.0
        );
    }
    println!(
        "gets {} (hits {}, misses {})  bloom probes {} negatives {} false positives {}",
        s.gets,
        s.get_hits,
        s.get_misses,
        s.bloom_probes,
        s.bloom_negatives,
        s.bloom_false_positives
    );
    println!(
        "cache hits data/index/filter {}/{}/{}  misses {}/{}/{}  blocks read {} ({:.1} MB)",
        s.cache_hits.data,
        s.cache_hits.index,
        s.cache_hits.filter,
        s.cache_misses.data,
        s.cache_misses.index,
        s.cache_misses.filter,
        s.blocks_read,
        s.bytes_read as f64 / 1_048_576.0
    );
    for (name, l) in [
        ("put", &s.put_latency),
        ("get", &s.get_latency),
        ("scan", &s.scan_latency),
        ("compaction", &s.compaction_latency),
    ] {
        if l.count > 0 {
            println!(
                "{name:<10} latency us: count {} p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
                l.count, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
            );
        }
    }
    print!("{}", lamina::compaction_stats_table(&s.levels));
}
