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
//! Beyond db_bench's names, `ycsb-load` and `ycsb-a` ... `ycsb-f` run the
//! YCSB generators of `lamina-workload`. Every benchmark drives a
//! [`Store`], so `--engine fjall|rocksdb|leveldb` (features `peer-fjall`,
//! `peer-rocksdb`, `peer-leveldb`) runs the same code on a peer engine,
//! configured from the same flags (`crate::peer`), after printing how each
//! flag maps onto the peer's options.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use crate::pace::Pacer;
use crate::progress;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use lamina::compaction::CompactionSpec;
use lamina::{Compression, Db, DbStats, Options, SyncMode};
use lamina_workload::{YcsbGenerator, YcsbSpec, YcsbWorkload};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::dbdir::{self, Existing};
use lamina_experiment::kvops::{
    apply, compressible_value_pool, encode_key, key_buffer, Store, ValueGen,
};

/// The benchmarks `--benchmarks` accepts (besides `ycsb-load`, `ycsb-a` ...
/// `ycsb-f`).
const KNOWN: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readseq",
    "readreverse",
    "seekrandom",
    "readwhilewriting",
    "mixedhot",
    "deleterandom",
    "stats",
];

/// Prefix of the YCSB benchmark names.
const YCSB_PREFIX: &str = "ycsb-";

/// The YCSB workload a benchmark name such as `ycsb-a` runs.
fn ycsb_workload(name: &str) -> Option<YcsbWorkload> {
    name.strip_prefix(YCSB_PREFIX)
        .and_then(YcsbWorkload::from_name)
}

/// Flags of `lamina bench`, spelled as db_bench spells them.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks, run in order on one database: fillseq,
    /// fillrandom, overwrite, readrandom, readseq, readreverse, seekrandom,
    /// readwhilewriting, deleterandom, stats, ycsb-load, ycsb-a ... ycsb-f.
    #[arg(
        long = "benchmarks",
        value_name = "LIST",
        default_value = "fillrandom,readrandom"
    )]
    pub benchmarks: String,
    /// Number of keys (key space [0, num)) and of writes per thread.
    #[arg(long = "num", value_name = "N", default_value_t = 1_000_000)]
    pub num: u64,
    /// Reads per thread [default: num].
    #[arg(long = "reads", value_name = "N")]
    pub reads: Option<u64>,
    /// Key size in bytes.
    #[arg(long = "key_size", value_name = "N", default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long = "value_size", value_name = "N", default_value_t = 100)]
    pub value_size: usize,
    /// Memtable size in bytes.
    #[arg(long = "write_buffer_size", value_name = "N", default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// Bloom filter bits per key (0 disables filters).
    #[arg(long = "bloom_bits", value_name = "N", default_value_t = 10.0)]
    pub bloom_bits: f64,
    /// Bits per key of the memtable's key filter, 0 to disable (RocksDB's
    /// memtable whole-key filtering, off in its db_bench by default).
    #[arg(long = "memtable_bloom_bits", value_name = "N", default_value_t = 10.0)]
    pub memtable_bloom_bits: f64,
    /// Block cache capacity in bytes.
    #[arg(long = "cache_size", value_name = "N", default_value_t = 8 << 20)]
    pub cache_size: usize,
    /// Row cache capacity in bytes, beside the block cache (0: none): the
    /// newest value of keys gets read (Cassandra's row cache, seed 002's
    /// "KV cache" baseline). RocksDB's `row_cache_size`.
    #[arg(long = "row_cache_size", value_name = "N", default_value_t = 0)]
    pub row_cache_size: usize,
    /// After each compaction, read into the block cache the merged blocks
    /// that overlap the cached blocks of its inputs (seed 002's incremental
    /// warm-up baseline).
    #[arg(long = "compaction_warm_up", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub compaction_warm_up: bool,
    /// Target SST data block size in bytes.
    #[arg(long = "block_size", value_name = "N", default_value_t = 4096)]
    pub block_size: usize,
    /// Output file size of policies without their own `file=` (lamina's
    /// `target_file_size`; default 16 MiB).
    #[arg(long = "target_file_size", value_name = "BYTES")]
    pub target_file_size: Option<u64>,
    /// Concurrent benchmark threads (readwhilewriting adds one writer).
    #[arg(long = "threads", value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// fdatasync the WAL on every write (lamina's `always` sync mode).
    #[arg(long = "sync", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub sync: bool,
    /// Write no WAL: writes reach only the memtable until it is flushed
    /// (lamina's `write_ahead_log = false`, RocksDB's `disableWAL`).
    #[arg(long = "disable_wal", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub disable_wal: bool,
    /// Database directory.
    #[arg(long = "db", value_name = "DIR", default_value = "/tmp/lamina-bench")]
    pub db: PathBuf,
    /// Reuse the database in --db (never while another process has it open).
    #[arg(long = "use_existing_db", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub use_existing_db: bool,
    /// Delete the database in --db first: its lamina files only (CURRENT,
    /// MANIFEST-*, *.sst, *.log), never the directory or other files, and
    /// never while another process has it open. Without this or
    /// --use_existing_db, a --db holding a database is refused.
    #[arg(long = "destroy_db", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub destroy_db: bool,
    /// Seed of the random key streams (the n-th thread started uses seed + n).
    #[arg(long = "seed", value_name = "N", default_value_t = 301)]
    pub seed: u64,
    /// Entries read after each seek in seekrandom (db_bench's seek_nexts).
    #[arg(long = "seek_nexts", value_name = "N", default_value_t = 0)]
    pub seek_nexts: u64,
    /// Compaction strategy spec, e.g. leveling or binomial:k=4; --help
    /// lists them all.
    #[arg(long = "compaction", value_name = "SPEC", default_value = "leveling",
          long_help = lamina::compaction::spec::help_text())]
    pub compaction: CompactionSpec,
    /// Background compaction threads [default: the engine's].
    #[arg(long = "compaction_threads", value_name = "N")]
    pub compaction_threads: Option<usize>,
    /// Block compression: none, lz4, zstd or zstd:LEVEL (1..=22; zstd is
    /// level 3).
    #[arg(long = "compression_type", value_name = "TYPE", default_value = "none")]
    pub compression_type: Compression,
    /// How far values compress (db_bench's `--compression_ratio`): each
    /// 100 bytes of the value buffer are `100 * ratio` random printable
    /// characters repeated. 1 or more: random bytes, which do not compress.
    #[arg(long = "compression_ratio", value_name = "R", default_value_t = 0.5)]
    pub compression_ratio: f64,
    /// Write the engine statistics (`Db::stats()`) as JSON to FILE at the end;
    /// with `--engine rocksdb`, RocksDB's own flush and compaction bytes
    /// (its statistics' tickers) under the same keys.
    #[arg(long = "stats-json", alias = "stats_json", value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// Microseconds of seek added to every read lamina makes from its files
    /// that does not continue the previous read of that file (point lookups'
    /// cache misses; a compaction reading a file front to back seeks once):
    /// an emulated hard disk, as in seed 002, on a fast device; 0 adds
    /// nothing. Off while `fill*` benchmarks load the data. lamina only.
    #[arg(long = "read_miss_latency_us", value_name = "US", default_value_t = 0)]
    pub read_miss_latency_us: u64,
    /// Read SST files with O_DIRECT, past the OS page cache (RocksDB's
    /// `use_direct_reads`), so block-cache misses reach the device. The
    /// database directory's filesystem must support it (tmpfs does not).
    /// lamina only.
    #[arg(long = "direct_io", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub direct_io: bool,
    /// Read SST files through read-only memory maps (db_bench's `mmap_read`,
    /// RocksDB's `allow_mmap_reads`): block-cache misses take slices of the
    /// page cache instead of `pread` copies. Ignored with --direct_io and
    /// --read_miss_latency_us (those file systems do not map). lamina only.
    #[arg(long = "mmap_read", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub mmap_read: bool,
    /// Blocks a scan steps into enter the block cache at its cold end, so
    /// that scans do not evict what point reads use
    /// (`Options::scan_resistant_cache`); false inserts them as most
    /// recently used, as LevelDB and RocksDB do. lamina only.
    #[arg(long = "scan_resistant_cache", value_name = "BOOL", num_args = 0..=1,
          default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    pub scan_resistant_cache: bool,
    /// Reads check the CRC32C of every block they read from a file
    /// (`Options::verify_checksums`; the peers' `ReadOptions::verify_checksums`,
    /// whose defaults differ: RocksDB true, LevelDB false). Compactions
    /// verify either way.
    #[arg(long = "verify_checksums", value_name = "BOOL", num_args = 0..=1,
          default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    pub verify_checksums: bool,
    /// Tables' index and filter blocks are read through the block cache,
    /// charged to `--cache_size` and evicted like data blocks
    /// (`Options::cache_index_and_filter_blocks`; RocksDB's
    /// `BlockBasedTableOptions` field of the same name, which the RocksDB
    /// peer gets). Off: tables hold them in memory, as LevelDB and fjall
    /// do (those peers refuse it on).
    #[arg(long = "cache_index_and_filter_blocks", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub cache_index_and_filter_blocks: bool,
    /// With --cache_index_and_filter_blocks, level-0 tables pin theirs in
    /// the cache (`Options::pin_l0_filter_and_index_blocks_in_cache`;
    /// RocksDB's option of the same name).
    #[arg(long = "pin_l0_filter_and_index_blocks_in_cache", value_name = "BOOL",
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = parse_bool)]
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// The largest chunk a scan reads ahead, in bytes
    /// (`Options::max_scan_readahead_bytes`; RocksDB's
    /// `max_auto_readahead_size`, also 256 KiB by default; 0: block by
    /// block, as LevelDB). lamina only.
    #[arg(
        long = "max_scan_readahead_bytes",
        value_name = "BYTES",
        default_value_t = lamina::Options::default().max_scan_readahead_bytes
    )]
    pub max_scan_readahead_bytes: usize,
    /// mixedhot: seconds it runs.
    #[arg(long = "duration", value_name = "SECONDS", default_value_t = 60)]
    pub duration: u64,
    /// mixedhot: seconds the same workload runs first, unrecorded and with
    /// the emulated disk's latency (--read_miss_latency_us) off, so that the
    /// recorded part starts with a warm cache and a tree already changing
    /// at the write rate (seed 002 reports a steady state).
    #[arg(long = "warm_up_seconds", value_name = "SECONDS", default_value_t = 0)]
    pub warm_up_seconds: u64,
    /// mixedhot: writes per second of its writer (uniform updates of
    /// [0, num)); 0 runs no writer.
    #[arg(long = "write_rate", value_name = "N", default_value_t = 1000)]
    pub write_rate: u64,
    /// readwhilewriting: bytes per second (keys and values) the writer may
    /// write, db_bench's flag of the same name; 0: as fast as it can. The
    /// unlimited writer of a faster engine takes more of the machine from
    /// the readers, so readers compare like for like only at one rate.
    #[arg(
        long = "benchmark_write_rate_limit",
        value_name = "BYTES",
        default_value_t = 0
    )]
    pub benchmark_write_rate_limit: u64,
    /// mixedhot: how readers choose keys: rangehot[:FRACTION:SHARE] (a
    /// contiguous FRACTION of the keys gets SHARE of the reads; default
    /// 0.15:0.98, seed 002's RangeHot), zipfian:S or uniform.
    #[arg(long = "read_dist", value_name = "DIST", default_value = "rangehot")]
    pub read_dist: crate::mixedhot::ReadDist,
    /// mixedhot: entries each read scans (0: point gets).
    #[arg(long = "scan_entries", value_name = "N", default_value_t = 0)]
    pub scan_entries: u64,
    /// mixedhot: write a per-second CSV (read and write throughput, block
    /// cache hit ratio and bytes, database bytes, compactions, invalidated
    /// cached blocks) to FILE.
    #[arg(long = "timeseries", value_name = "FILE")]
    pub timeseries: Option<PathBuf>,
    /// Engine under test: lamina, or a peer, each needing the binary built
    /// with its feature: fjall (`peer-fjall`), rocksdb (`peer-rocksdb`),
    /// leveldb (`peer-leveldb`).
    #[arg(long = "engine", value_name = "NAME", default_value = "lamina")]
    pub engine: String,
}

/// Parses db_bench-style booleans: 1/0, true/false, yes/no.
fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!("not a boolean: {s:?}")),
    }
}

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
    open: impl FnOnce(
        &std::path::Path,
        &crate::peer::PeerSettings,
    ) -> Result<(S, crate::peer::OptionMap)>,
    stats: impl Fn(&S) -> String,
    stats_json: Option<fn(&S) -> Result<serde_json::Value>>,
    close: impl FnOnce(S) -> Result<()>,
) -> Result<()> {
    use crate::peer::{prepare_dir, PeerSettings};
    for (set, flag) in [
        (
            args.stats_json.is_some() && stats_json.is_none(),
            "--stats-json",
        ),
        (args.row_cache_size > 0, "--row_cache_size"),
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
    let settings = PeerSettings::from_args(args)?;
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
    use crate::fjall_peer::FjallStore;
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
    use crate::rocksdb_peer::RocksStore;
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
    use crate::leveldb_peer::LevelStore;
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

/// What one thread measured.
#[derive(Debug, Clone, Copy)]
struct ThreadStats {
    ops: u64,
    bytes: u64,
    found: u64,
    start: Instant,
    finish: Instant,
}

impl ThreadStats {
    fn new() -> ThreadStats {
        let now = Instant::now();
        ThreadStats {
            ops: 0,
            bytes: 0,
            found: 0,
            start: now,
            finish: now,
        }
    }
}

/// Merged measurements of one benchmark.
#[derive(Debug)]
struct Report {
    ops: u64,
    bytes: u64,
    found: u64,
    /// Sum of the threads' busy seconds.
    thread_seconds: f64,
    /// First start to last finish.
    wall_seconds: f64,
    /// Print "(found of ops found)".
    show_found: bool,
}

impl Report {
    fn merge(threads: &[ThreadStats], show_found: bool) -> Report {
        let mut r = Report {
            ops: 0,
            bytes: 0,
            found: 0,
            thread_seconds: 0.0,
            wall_seconds: 0.0,
            show_found,
        };
        let (Some(first), Some(last)) = (
            threads.iter().map(|t| t.start).min(),
            threads.iter().map(|t| t.finish).max(),
        ) else {
            return r;
        };
        for t in threads {
            r.ops += t.ops;
            r.bytes += t.bytes;
            r.found += t.found;
            r.thread_seconds += t.finish.duration_since(t.start).as_secs_f64();
        }
        r.wall_seconds = last.duration_since(first).as_secs_f64();
        r
    }

    /// One db_bench-style line.
    fn line(&self, name: &str) -> String {
        let done = self.ops.max(1);
        let elapsed = self.wall_seconds.max(1e-9);
        let mut extra = String::new();
        if self.bytes > 0 {
            extra = format!("{:6.1} MB/s", self.bytes as f64 / 1_048_576.0 / elapsed);
        }
        if self.show_found {
            if !extra.is_empty() {
                extra.push(' ');
            }
            extra.push_str(&format!("({} of {} found)", self.found, self.ops));
        }
        format!(
            "{:<12} : {:11.3} micros/op {} ops/sec;{}{}",
            name,
            self.thread_seconds * 1e6 / done as f64,
            (done as f64 / elapsed) as u64,
            if extra.is_empty() { "" } else { " " },
            extra
        )
    }

    fn print(&self, name: &str) {
        println!("{}", self.line(name));
    }
}

/// State shared by every benchmark of a run.
struct Bench<'a> {
    args: &'a BenchArgs,
    db: &'a dyn Store,
    emulate_disk: &'a (dyn Fn(bool) + Sync),
    reads: u64,
    pool: Vec<u8>,
    /// Threads started so far; like db_bench, every thread of every
    /// benchmark seeds its generator with `seed + this count`, so that a
    /// readrandom after a fillrandom does not replay the fill's keys.
    threads_started: AtomicU64,
}

/// What a worker thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    FillSeq,
    FillRandom,
    ReadRandom,
    ReadSeq,
    ReadReverse,
    SeekRandom,
    DeleteRandom,
    Ycsb(YcsbWorkload),
}

impl<'a> Bench<'a> {
    fn new(
        args: &'a BenchArgs,
        db: &'a dyn Store,
        emulate_disk: &'a (dyn Fn(bool) + Sync),
    ) -> Bench<'a> {
        Bench {
            args,
            db,
            emulate_disk,
            reads: args.reads.unwrap_or(args.num),
            pool: compressible_value_pool(args.seed, args.value_size, args.compression_ratio),
            threads_started: AtomicU64::new(0),
        }
    }

    fn run(&self, name: &str) -> Result<Report> {
        let work = match name {
            "fillseq" => Work::FillSeq,
            "fillrandom" | "overwrite" => Work::FillRandom,
            "readrandom" => Work::ReadRandom,
            "readseq" => Work::ReadSeq,
            "readreverse" => Work::ReadReverse,
            "seekrandom" => Work::SeekRandom,
            "deleterandom" => Work::DeleteRandom,
            "readwhilewriting" => return self.read_while_writing(),
            "mixedhot" => return self.mixed_hot(),
            other => match ycsb_workload(other) {
                Some(w) => Work::Ycsb(w),
                None => bail!("unknown benchmark {other:?}"),
            },
        };
        let threads = self.args.threads;
        // Operations all threads will do (a scan's entries for readseq).
        let total = match work {
            Work::FillSeq | Work::FillRandom | Work::DeleteRandom => self.args.num * threads as u64,
            Work::Ycsb(YcsbWorkload::Load) => self.args.num,
            _ => self.reads * threads as u64,
        };
        let bar = progress::bar(total, name);
        let barrier = Barrier::new(threads);
        let results: Vec<Result<ThreadStats>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|tid| {
                    let (barrier, bar) = (&barrier, &bar);
                    s.spawn(move || {
                        barrier.wait();
                        self.worker(work, tid, &mut progress::Ticker::new(bar))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("benchmark thread panicked")))
                })
                .collect()
        });
        bar.finish_and_clear();
        let stats = results
            .into_iter()
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("benchmark {name}"))?;
        let show_found = match work {
            Work::ReadRandom | Work::SeekRandom => true,
            Work::Ycsb(w) => w != YcsbWorkload::Load,
            _ => false,
        };
        Ok(Report::merge(&stats, show_found))
    }

    /// The key generator of a newly started thread.
    fn rng(&self) -> SmallRng {
        let n = self.threads_started.fetch_add(1, Ordering::Relaxed);
        SmallRng::seed_from_u64(self.args.seed.wrapping_add(n))
    }

    /// Runs thread `tid`'s share of `work`, counting operations on `t`.
    fn worker(&self, work: Work, tid: usize, t: &mut progress::Ticker) -> Result<ThreadStats> {
        match work {
            Work::FillSeq | Work::FillRandom => self.fill(work == Work::FillRandom, tid, t),
            Work::ReadRandom => self.read_random(t),
            Work::ReadSeq => self.read_seq(false, t),
            Work::ReadReverse => self.read_seq(true, t),
            Work::SeekRandom => self.seek_random(t),
            Work::DeleteRandom => self.delete_random(t),
            Work::Ycsb(w) => self.ycsb(w, tid, t),
        }
    }

    /// A YCSB workload over records `0..num`: `ycsb-load` splits the records
    /// among the threads; `ycsb-a`...`ycsb-f` run `reads` transactions per
    /// thread, each thread inserting its own record numbers. "found" counts
    /// reads, scans and read-modify-writes that found data.
    fn ycsb(&self, w: YcsbWorkload, tid: usize, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let (num, threads) = (self.args.num, self.args.threads as u64);
        let seed = self.rng().next_u64();
        let spec = if w == YcsbWorkload::Load {
            let t = tid as u64;
            YcsbSpec {
                load_start: num * t / threads,
                ..YcsbSpec::new(w, num * (t + 1) / threads, 0, seed)
            }
        } else {
            YcsbSpec {
                insert_start: Some(num + tid as u64 * self.reads),
                ..YcsbSpec::new(w, num, self.reads, seed)
            }
        };
        let ops = YcsbGenerator::new(&spec)?;
        let mut key = key_buffer(self.args.key_size);
        let mut values = ValueGen::new(&self.pool, self.args.value_size, tid * 4099);
        let mut st = ThreadStats::new();
        let (mut n, mut found, mut bytes) = (0u64, 0u64, 0u64);
        for op in ops {
            let out = apply(self.db, op, &mut key, &mut values)?;
            n += 1;
            t.tick();
            found += u64::from(out.found);
            bytes += out.bytes;
        }
        st.finish = Instant::now();
        st.ops = n;
        st.found = found;
        st.bytes = bytes;
        Ok(st)
    }

    fn fill(&self, random: bool, tid: usize, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut values = ValueGen::new(&self.pool, self.args.value_size, tid * 4099);
        let per_op = (self.args.key_size + self.args.value_size) as u64;
        let mut st = ThreadStats::new();
        for i in 0..num {
            let k = if random { rng.next_u64() % num } else { i };
            encode_key(&mut key, k);
            self.db.put(&key, values.next_value())?;
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = num;
        st.bytes = num * per_op;
        Ok(st)
    }

    /// `reads` gets of random keys.
    fn read_random(&self, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut st = ThreadStats::new();
        let mut found = 0u64;
        let mut bytes = 0u64;
        let mut ops = 0u64;
        for _ in 0..self.reads {
            encode_key(&mut key, rng.next_u64() % num);
            if let Some(v) = self.db.get(&key)? {
                found += 1;
                bytes += (key.len() + v) as u64;
            }
            ops += 1;
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = ops;
        st.found = found;
        st.bytes = bytes;
        Ok(st)
    }

    /// One full scan of at most `reads` entries, in key order or (readreverse)
    /// in descending key order.
    fn read_seq(&self, reverse: bool, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let mut st = ThreadStats::new();
        let mut bytes = 0u64;
        let mut visit = |k: &[u8], v: &[u8]| {
            bytes += (k.len() + v.len()) as u64;
            t.tick();
        };
        let ops = if reverse {
            self.db.scan_rev(None, self.reads, &mut visit)?
        } else {
            self.db.scan(None, None, self.reads, &mut visit)?
        };
        st.finish = Instant::now();
        st.ops = ops;
        st.bytes = bytes;
        Ok(st)
    }

    fn seek_random(&self, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut st = ThreadStats::new();
        let mut found = 0u64;
        let mut bytes = 0u64;
        for _ in 0..self.reads {
            encode_key(&mut key, rng.next_u64() % num);
            // The sought entry, then seek_nexts entries' bytes counted
            // (from the sought one on, as before).
            let mut i = 0u64;
            self.db.scan(
                Some(&key),
                None,
                self.args.seek_nexts.max(1),
                &mut |k, v| {
                    if i == 0 && k == key.as_slice() {
                        found += 1;
                    }
                    if i < self.args.seek_nexts {
                        bytes += (k.len() + v.len()) as u64;
                    }
                    i += 1;
                },
            )?;
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = self.reads;
        st.found = found;
        st.bytes = bytes;
        Ok(st)
    }

    fn delete_random(&self, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut st = ThreadStats::new();
        for _ in 0..num {
            encode_key(&mut key, rng.next_u64() % num);
            self.db.delete(&key)?;
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = num;
        Ok(st)
    }

    /// seed 002's mixed workload (`mixedhot.rs`); the report covers the
    /// readers.
    fn mixed_hot(&self) -> Result<Report> {
        let len = self.args.value_size;
        let pool = &self.pool;
        let next_value = move |i: u64| -> Vec<u8> {
            let span = pool.len().saturating_sub(len).max(1);
            let at = (i as usize).wrapping_mul(7919) % span;
            pool.get(at..at + len)
                .map_or_else(|| vec![b'v'; len], <[u8]>::to_vec)
        };
        let work = crate::mixedhot::MixedHot {
            num: self.args.num,
            key_size: self.args.key_size,
            readers: self.args.threads,
            dist: self.args.read_dist,
            write_rate: self.args.write_rate,
            scan_entries: self.args.scan_entries,
            duration: std::time::Duration::from_secs(self.args.duration),
            seed: self.args.seed,
            next_value: &next_value,
            timeseries: self.args.timeseries.as_deref(),
        };
        if self.args.warm_up_seconds > 0 {
            (self.emulate_disk)(false);
            let warm = crate::mixedhot::MixedHot {
                duration: std::time::Duration::from_secs(self.args.warm_up_seconds),
                // Other keys than the recorded part's, which then does not
                // replay the warm-up's reads and writes.
                seed: self.args.seed.wrapping_add(1 << 32),
                timeseries: None,
                ..work
            };
            let t = warm.run(self.db, &|| self.db.stats())?;
            eprintln!(
                "mixedhot warm-up (not recorded, no emulated latency): {} reads and {} writes in {:.1} s",
                t.reads, t.writes, t.seconds
            );
            (self.emulate_disk)(true);
        }
        let totals = work.run(self.db, &|| self.db.stats())?;
        eprintln!(
            "mixedhot: {} reads and {} writes in {:.1} s",
            totals.reads, totals.writes, totals.seconds
        );
        let mut st = ThreadStats::new();
        st.start = st.finish - std::time::Duration::from_secs_f64(totals.seconds);
        st.ops = totals.reads;
        Ok(Report::merge(&[st], false))
    }

    /// `threads` readers do readrandom while one more thread writes random
    /// keys until they finish; the report covers the readers only.
    fn read_while_writing(&self) -> Result<Report> {
        let threads = self.args.threads;
        let bar = progress::bar(self.reads * threads as u64, "readwhilewriting");
        let barrier = Barrier::new(threads + 1);
        let done = AtomicBool::new(false);
        let (writer, readers) = std::thread::scope(|s| {
            let writer = {
                let (barrier, done) = (&barrier, &done);
                s.spawn(move || -> Result<(u64, f64)> {
                    let num = self.args.num;
                    let mut rng = self.rng();
                    let mut key = key_buffer(self.args.key_size);
                    let mut values = ValueGen::new(&self.pool, self.args.value_size, 7919);
                    let mut writes = 0u64;
                    let bytes_per_write = (self.args.key_size + self.args.value_size) as f64;
                    let limit = self.args.benchmark_write_rate_limit as f64;
                    barrier.wait();
                    let began = Instant::now();
                    // Paced (db_bench's limit is in bytes a second): the
                    // readers' finish stops it within a millisecond.
                    let pacer = (limit > 0.0).then(|| Pacer::start(limit / bytes_per_write));
                    while !done.load(Ordering::Relaxed) {
                        if pacer.is_some_and(|p| !p.ready(writes)) {
                            continue;
                        }
                        encode_key(&mut key, rng.next_u64() % num);
                        self.db.put(&key, values.next_value())?;
                        writes += 1;
                    }
                    Ok((writes, began.elapsed().as_secs_f64()))
                })
            };
            let readers: Vec<_> = (0..threads)
                .map(|_| {
                    let (barrier, bar) = (&barrier, &bar);
                    s.spawn(move || {
                        barrier.wait();
                        self.read_random(&mut progress::Ticker::new(bar))
                    })
                })
                .collect();
            let readers: Vec<Result<ThreadStats>> = readers
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("reader thread panicked")))
                })
                .collect();
            done.store(true, Ordering::Relaxed);
            let writer = writer
                .join()
                .unwrap_or_else(|_| Err(anyhow!("writer thread panicked")));
            (writer, readers)
        });
        bar.finish_and_clear();
        let (writes, seconds) = writer.context("readwhilewriting writer")?;
        let stats = readers
            .into_iter()
            .collect::<Result<Vec<_>>>()
            .context("readwhilewriting readers")?;
        let report = Report::merge(&stats, true);
        eprintln!("readwhilewriting: the writer did {writes} writes meanwhile, in {seconds:.3} s");
        Ok(report)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_line_has_db_bench_format() {
        let r = Report {
            ops: 1_000_000,
            bytes: 1_000_000 * 116,
            found: 0,
            thread_seconds: 4.274,
            wall_seconds: 4.274,
            show_found: false,
        };
        assert_eq!(
            r.line("fillrandom"),
            "fillrandom   :       4.274 micros/op 233972 ops/sec;   25.9 MB/s"
        );
        let r = Report {
            found: 5,
            bytes: 0,
            show_found: true,
            ..r
        };
        assert!(r
            .line("seekrandom")
            .ends_with("ops/sec; (5 of 1000000 found)"));
    }

    #[test]
    fn booleans_parse_like_db_bench() {
        assert_eq!(parse_bool("1"), Ok(true));
        assert_eq!(parse_bool("false"), Ok(false));
        assert!(parse_bool("maybe").is_err());
    }
}
