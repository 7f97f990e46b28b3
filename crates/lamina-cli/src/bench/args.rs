//! The flags of `lamina bench`, spelled as db_bench spells them, and the
//! settings a peer engine gets from them.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use lamina::compaction::{CompactionSpec, Leveling, PolicyDefaults};
use lamina::{Compression, Options};

use super::peers::PeerSettings;

/// Flags of `lamina bench`, spelled as db_bench spells them.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks, run in order on one database: fillseq,
    /// fillrandom, fillsync, overwrite, readrandom, readmissing, readseq,
    /// readreverse, seekrandom, updaterandom, readrandomwriterandom,
    /// readwhilewriting, mixedhot, deleterandom, compact, stats,
    /// levelstats, ycsb-load, ycsb-a ... ycsb-f (bench/README.md says what
    /// each does).
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
    /// readrandomwriterandom: percent of its operations that are reads
    /// (the rest are writes).
    #[arg(long = "readwritepercent", value_name = "PERCENT", default_value_t = 90,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub readwritepercent: u8,
    /// After each benchmark's line, a histogram of the microseconds each
    /// operation took, per operation type (`Microseconds per read:` ...),
    /// as db_bench prints it.
    #[arg(long = "histogram", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub histogram: bool,
    /// At the end, `STATISTICS:` and the engine's counters and latency
    /// histograms in RocksDB's `Statistics::ToString` format, under
    /// RocksDB's ticker names where lamina counts the same thing
    /// (bench/README.md lists them).
    #[arg(long = "statistics", value_name = "BOOL", num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub statistics: bool,
    /// Every N seconds of each benchmark, write the operations done in
    /// the interval to --report_file (`secs_elapsed,interval_qps`, as
    /// db_bench); 0: no report.
    #[arg(
        long = "report_interval_seconds",
        value_name = "N",
        default_value_t = 0
    )]
    pub report_interval_seconds: u64,
    /// The file --report_interval_seconds writes (each benchmark rewrites
    /// it, as db_bench does).
    #[arg(
        long = "report_file",
        value_name = "FILE",
        default_value = "report.csv"
    )]
    pub report_file: PathBuf,
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
    /// Reads that pay for level 0's runs merge it once they have spent its
    /// allowance (`Options::seek_compaction`; LevelDB's seek-triggered
    /// compaction). lamina only.
    #[arg(long = "seek_compaction", value_name = "BOOL", num_args = 0..=1,
          default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    pub seek_compaction: bool,
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

impl BenchArgs {
    /// The settings a peer runs with under these flags. Peers run leveled
    /// compaction, so `--compaction` must be `leveling` (any `T=`, `l0=`).
    #[cfg_attr(
        not(any(
            feature = "peer-fjall",
            feature = "peer-rocksdb",
            feature = "peer-leveldb"
        )),
        allow(
            dead_code,
            reason = "only a peer build runs a peer; the tests check the settings"
        )
    )]
    pub fn peer_settings(&self) -> Result<PeerSettings> {
        let args = self;
        let defaults = Options::default();
        let leveling = match &args.compaction {
            CompactionSpec::Named { name, params } if name == "leveling" => {
                let params: Vec<(&str, &str)> = params
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                Leveling::from_params(
                    &params,
                    PolicyDefaults {
                        size_ratio: defaults.size_ratio,
                        target_file_size: args.target_file_size.unwrap_or(defaults.target_file_size),
                    },
                )
                .map_err(|e| anyhow!("--compaction: {e}"))?
            }
            other => bail!(
                "--compaction {other} has no equivalent in the peers: they run leveled compaction (--compaction leveling[:T=..,l0=..])"
            ),
        };
        let mut sized = Options::default();
        sized.write_buffer_size = args.write_buffer_size;
        sized.memtable_bloom_bits_per_key = args.memtable_bloom_bits;
        let memtable_filter_bytes = sized.memtable_filter_bytes();
        Ok(PeerSettings {
            write_buffer_size: args.write_buffer_size,
            max_immutable_memtables: defaults.max_immutable_memtables,
            bloom_bits: args.bloom_bits,
            memtable_bloom_bits: args.memtable_bloom_bits,
            memtable_filter_bytes,
            cache_size: args.cache_size,
            cache_index_and_filter_blocks: args.cache_index_and_filter_blocks,
            pin_l0_filter_and_index_blocks_in_cache: args.cache_index_and_filter_blocks
                && args.pin_l0_filter_and_index_blocks_in_cache,
            block_size: args.block_size,
            sync: args.sync,
            disable_wal: args.disable_wal,
            compaction_threads: args
                .compaction_threads
                .unwrap_or(defaults.compaction_threads)
                .max(1),
            l0_trigger: leveling.l0_trigger,
            size_ratio: leveling.size_ratio,
            target_file_size: leveling.target_file_size,
            level0_stop_runs: defaults.level0_stop_runs,
            compression: args.compression_type,
            mmap_read: args.mmap_read,
            verify_checksums: args.verify_checksums,
        })
    }
}

/// `lamina bench` flags parsed as the command line would be. For tests.
#[cfg(test)]
pub fn parse(flags: &[&str]) -> BenchArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }
    let mut argv = vec!["bench"];
    argv.extend_from_slice(flags);
    Cli::try_parse_from(argv).unwrap().bench
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocksDB's flag names parse as booleans into what the peers get; the
    /// pin means nothing without the caching, as in RocksDB.
    #[test]
    fn index_and_filter_flags_reach_the_peer_settings() {
        for (flags, cache, pin) in [
            (&[][..], false, false),
            (
                &["--pin_l0_filter_and_index_blocks_in_cache"][..],
                false,
                false,
            ),
            (&["--cache_index_and_filter_blocks=true"][..], true, false),
            (
                &[
                    "--cache_index_and_filter_blocks",
                    "--pin_l0_filter_and_index_blocks_in_cache=true",
                ][..],
                true,
                true,
            ),
        ] {
            let s = parse(flags).peer_settings().unwrap();
            assert_eq!(
                (
                    s.cache_index_and_filter_blocks,
                    s.pin_l0_filter_and_index_blocks_in_cache
                ),
                (cache, pin),
                "{flags:?}"
            );
        }
    }

    #[test]
    fn settings_follow_the_flags_and_lamina_defaults() {
        let s = parse(&[
            "--write_buffer_size=1048576",
            "--compaction=leveling:T=4,l0=2",
            "--compaction_threads=3",
        ])
        .peer_settings()
        .unwrap();
        assert_eq!((s.size_ratio, s.l0_trigger), (4, 2));
        assert_eq!(s.compaction_threads, 3);
        let d = Options::default();
        assert_eq!(s.target_file_size, d.target_file_size);
        assert_eq!(s.level0_stop_runs, d.level0_stop_runs);
        // 10 bits for each of the 1 MiB / 72 entries lamina sizes for, in
        // whole 64-byte blocks.
        assert_eq!(
            s.memtable_filter_bytes,
            (1_048_576 / 72 * 10usize).div_ceil(512) * 64
        );
        let s = parse(&[]).peer_settings().unwrap();
        assert_eq!((s.size_ratio, s.l0_trigger), (10, 4));
        assert!(parse(&["--compaction=tiered"]).peer_settings().is_err());
        assert_eq!((s.compression, s.mmap_read), (Compression::None, false));
        // Compression and mapped reads reach the peers as lamina gets them;
        // each peer maps them (or refuses) itself.
        for (flags, compression, mmap) in [
            (&["--compression_type=lz4"][..], Compression::Lz4, false),
            (&["--compression_type=zstd"], Compression::Zstd(3), false),
            (
                &["--compression_type=zstd:7", "--mmap_read"],
                Compression::Zstd(7),
                true,
            ),
            (&["--mmap_read=true"], Compression::None, true),
        ] {
            let s = parse(flags).peer_settings().unwrap();
            assert_eq!(
                (s.compression, s.mmap_read),
                (compression, mmap),
                "{flags:?}"
            );
        }
    }

    #[test]
    fn booleans_parse_like_db_bench() {
        assert_eq!(parse_bool("1"), Ok(true));
        assert_eq!(parse_bool("false"), Ok(false));
        assert!(parse_bool("maybe").is_err());
    }
}
