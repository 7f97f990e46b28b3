//! RocksDB as a `lamina bench` peer: `lamina bench --engine rocksdb`, built
//! with the `peer-rocksdb` feature (the `rocksdb` crate's bundled RocksDB,
//! compiled optimised with `NDEBUG`, with LZ4 and zstd).
//!
//! [`configure`] sets every RocksDB option the comparison depends on to the
//! value lamina runs with and records each choice in an [`OptionMap`] that
//! the bench prints before it starts; bench/README.md lists what still
//! differs.

use std::path::Path;

use anyhow::{Context, Result};
use rocksdb::statistics::Ticker;
use rocksdb::{
    BlockBasedOptions, Cache, DBCompactionStyle, DBCompressionType, ReadOptions, WriteOptions, DB,
};

use super::{OptionMap, PeerSettings};
use lamina::Compression;
use lamina_experiment::kvops::Store;

/// RocksDB's default `compression_opts.window_bits` (zlib's; zstd ignores
/// it), passed again when the zstd level is set.
const DEFAULT_WINDOW_BITS: i32 = -14;

/// RocksDB's largest memtable Bloom filter, as a fraction of the write
/// buffer (it clamps `memtable_prefix_bloom_size_ratio` to this).
const MAX_MEMTABLE_BLOOM_RATIO: f64 = 0.25;

/// A RocksDB database in `--db`.
pub struct RocksStore {
    db: DB,
    /// The options the database runs with; their statistics object counts
    /// RocksDB's own compaction and flush bytes.
    opts: rocksdb::Options,
    write: WriteOptions,
    read: ReadOptions,
    /// `ReadOptions::verify_checksums` of every read.
    verify_checksums: bool,
}

/// RocksDB's database and write options for `s`, and the mapping that
/// explains them.
pub fn configure(s: &PeerSettings) -> (rocksdb::Options, WriteOptions, OptionMap) {
    let mut m = OptionMap::default();
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    // Tickers for the compaction bytes `lamina bench` reports
    // (`RocksStore::counters`).
    o.enable_statistics();

    o.set_write_buffer_size(s.write_buffer_size);
    m.row(
        format!("--write_buffer_size={}", s.write_buffer_size),
        format!("write_buffer_size={}", s.write_buffer_size),
        "",
    );
    // lamina stalls writes when this many full memtables wait for a flush;
    // RocksDB counts the mutable one too.
    let buffers = s.max_immutable_memtables + 1;
    o.set_max_write_buffer_number(as_c_int(buffers));
    o.set_min_write_buffer_number_to_merge(1);
    m.row(
        format!(
            "max_immutable_memtables={} (lamina default)",
            s.max_immutable_memtables
        ),
        format!("max_write_buffer_number={buffers}, min_write_buffer_number_to_merge=1"),
        "",
    );

    let mut t = BlockBasedOptions::default();
    if s.bloom_bits > 0.0 {
        // Full (whole-file) filters, as lamina's one filter per table.
        t.set_bloom_filter(s.bloom_bits, false);
        t.set_whole_key_filtering(true);
        m.row(
            format!("--bloom_bits={}", s.bloom_bits),
            format!(
                "filter_policy=bloom({}) full filters, whole_key_filtering=true",
                s.bloom_bits
            ),
            "",
        );
    } else {
        m.row("--bloom_bits=0", "no filter_policy", "");
    }
    let ratio = if s.write_buffer_size == 0 {
        0.0
    } else {
        (s.memtable_filter_bytes as f64 / s.write_buffer_size as f64).min(MAX_MEMTABLE_BLOOM_RATIO)
    };
    o.set_memtable_whole_key_filtering(ratio > 0.0);
    o.set_memtable_prefix_bloom_ratio(ratio);
    m.row(
        format!("--memtable_bloom_bits={}", s.memtable_bloom_bits),
        format!(
            "memtable_whole_key_filtering={}, memtable_prefix_bloom_size_ratio={ratio:.5}",
            ratio > 0.0
        ),
        &format!(
            "{} filter bytes per memtable, as lamina allocates",
            s.memtable_filter_bytes
        ),
    );
    let cache = Cache::new_lru_cache(s.cache_size);
    t.set_block_cache(&cache);
    m.row(
        format!("--cache_size={}", s.cache_size),
        format!("block_cache=NewLRUCache({})", s.cache_size),
        "",
    );
    // Either both engines hold every open table's index and filter in
    // memory, outside the block cache (the default), or both read them
    // through it.
    t.set_cache_index_and_filter_blocks(s.cache_index_and_filter_blocks);
    t.set_pin_l0_filter_and_index_blocks_in_cache(s.pin_l0_filter_and_index_blocks_in_cache);
    o.set_max_open_files(-1);
    m.row(
        format!(
            "--cache_index_and_filter_blocks={} --pin_l0_filter_and_index_blocks_in_cache={}",
            s.cache_index_and_filter_blocks, s.pin_l0_filter_and_index_blocks_in_cache
        ),
        format!(
            "cache_index_and_filter_blocks={}, pin_l0_filter_and_index_blocks_in_cache={}, max_open_files=-1",
            s.cache_index_and_filter_blocks, s.pin_l0_filter_and_index_blocks_in_cache
        ),
        "",
    );
    t.set_block_size(s.block_size);
    m.row(
        format!("--block_size={}", s.block_size),
        format!("block_size={}", s.block_size),
        "",
    );
    o.set_block_based_table_factory(&t);

    // lamina compresses every level alike; RocksDB's bottommost level has
    // a setting of its own, given the same type. A block stays raw in both
    // unless compressing it saves 1/8 (RocksDB's default
    // `max_compressed_bytes_per_kb=896`).
    let (kind, name) = match s.compression {
        Compression::None => (DBCompressionType::None, "kNoCompression"),
        Compression::Lz4 => (DBCompressionType::Lz4, "kLZ4Compression"),
        Compression::Zstd(_) => (DBCompressionType::Zstd, "kZSTD"),
    };
    o.set_compression_type(kind);
    o.set_bottommost_compression_type(kind);
    // Only zstd takes lamina's level: a level >= 1 would turn RocksDB's LZ4
    // into LZ4HC, so LZ4 keeps the default (plain LZ4, acceleration 1, as
    // lz4_flex). The other values are RocksDB's defaults; the bottommost
    // level uses these options while its own are not enabled.
    let level = match s.compression {
        Compression::Zstd(level) => {
            o.set_compression_options(DEFAULT_WINDOW_BITS, level, 0, 0);
            format!(", compression_opts.level={level}")
        }
        Compression::None | Compression::Lz4 => String::new(),
    };
    m.row(
        format!("--compression_type={}", s.compression),
        format!("compression={name}, bottommost_compression={name}{level}"),
        if s.compression == Compression::None {
            ""
        } else {
            "every level; raw unless it saves 1/8, as lamina"
        },
    );
    o.set_allow_mmap_reads(s.mmap_read);
    m.row(
        format!("--mmap_read={}", s.mmap_read),
        format!("allow_mmap_reads={}", s.mmap_read),
        "",
    );

    let mut write = WriteOptions::default();
    write.set_sync(s.sync);
    o.set_use_fsync(false);
    m.row(
        format!("--sync={}", s.sync),
        format!("WriteOptions::sync={}, use_fsync=false (fdatasync)", s.sync),
        "",
    );
    write.disable_wal(s.disable_wal);
    m.row(
        format!("--disable_wal={}", s.disable_wal),
        format!("WriteOptions::disableWAL={}", s.disable_wal),
        "",
    );

    // lamina runs one flush thread and `compaction_threads` compaction
    // threads; RocksDB gives one of its background jobs to flushes below
    // eight jobs.
    let jobs = s.compaction_threads + 1;
    o.set_max_background_jobs(as_c_int(jobs));
    o.set_max_subcompactions(1);
    m.row(
        format!(
            "--compaction_threads={} (+1 flush thread)",
            s.compaction_threads
        ),
        format!(
            "max_background_jobs={jobs} (1 flush + {}), max_subcompactions=1",
            jobs - 1
        ),
        "",
    );

    o.set_compaction_style(DBCompactionStyle::Level);
    o.set_level_zero_file_num_compaction_trigger(as_c_int(s.l0_trigger));
    m.row(
        format!("--compaction=leveling l0={}", s.l0_trigger),
        format!(
            "compaction_style=kCompactionStyleLevel, level0_file_num_compaction_trigger={}",
            s.l0_trigger
        ),
        "",
    );
    // lamina's level i (>= 1) holds write_buffer_size * T^i bytes: static
    // level sizes, so RocksDB's dynamic level sizing is off.
    let base = (s.write_buffer_size as u64).saturating_mul(s.size_ratio);
    o.set_level_compaction_dynamic_level_bytes(false);
    o.set_max_bytes_for_level_base(base);
    o.set_max_bytes_for_level_multiplier(s.size_ratio as f64);
    m.row(
        format!("leveling T={} (L1 = write_buffer_size x T)", s.size_ratio),
        format!(
            "max_bytes_for_level_base={base}, max_bytes_for_level_multiplier={}, level_compaction_dynamic_level_bytes=false",
            s.size_ratio
        ),
        "",
    );
    o.set_target_file_size_base(s.target_file_size);
    o.set_target_file_size_multiplier(1);
    m.row(
        format!("target_file_size={} (lamina default)", s.target_file_size),
        format!(
            "target_file_size_base={}, target_file_size_multiplier=1",
            s.target_file_size
        ),
        "",
    );
    // lamina stops writes at `level0_stop_runs` level-0 runs and never slows
    // them down before; RocksDB's slowdown may not exceed its stop.
    o.set_level_zero_stop_writes_trigger(as_c_int(s.level0_stop_runs));
    o.set_level_zero_slowdown_writes_trigger(as_c_int(s.level0_stop_runs));
    m.row(
        format!("level0_stop_runs={} (lamina default)", s.level0_stop_runs),
        format!(
            "level0_stop_writes_trigger={0}, level0_slowdown_writes_trigger={0}",
            s.level0_stop_runs
        ),
        "no slowdown before the stop, as lamina",
    );
    m.row(
        format!("--verify_checksums={}", s.verify_checksums),
        format!("ReadOptions::verify_checksums={}", s.verify_checksums),
        "",
    );
    m.row(
        "scans do not fill the block cache",
        "ReadOptions::fill_cache=true (default)",
        "differs: RocksDB iterators cache the blocks they read",
    );
    (o, write, m)
}

/// RocksDB's read options with `ReadOptions::verify_checksums` as
/// `--verify_checksums` says (the rest default).
fn read_options(verify_checksums: bool) -> ReadOptions {
    let mut read = ReadOptions::default();
    read.set_verify_checksums(verify_checksums);
    read
}

/// A count as the C `int` RocksDB takes, saturating (never above what a
/// `usize` flag can hold, and RocksDB refuses nonsense itself).
fn as_c_int(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A peer's own write counts under the keys of lamina's stats JSON
/// (`DbStats`), and write amplification as lamina defines it: bytes
/// written by flushes and compactions over bytes flushed.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PeerCounters {
    /// User bytes written (keys and values).
    pub bytes_ingested: u64,
    /// Bytes of the tables flushes wrote.
    pub flush_bytes_written: u64,
    /// Bytes compactions read.
    pub compaction_bytes_read: u64,
    /// Bytes compactions wrote.
    pub compaction_bytes_written: u64,
    /// `(flush + compaction bytes written) / flush bytes written`.
    pub write_amplification: f64,
}

impl PeerCounters {
    /// The counters, with their write amplification.
    pub fn new(ingested: u64, flushed: u64, read: u64, written: u64) -> Self {
        PeerCounters {
            bytes_ingested: ingested,
            flush_bytes_written: flushed,
            compaction_bytes_read: read,
            compaction_bytes_written: written,
            write_amplification: if flushed == 0 {
                0.0
            } else {
                (flushed + written) as f64 / flushed as f64
            },
        }
    }

    /// One line for the `stats` benchmark, in the terms of lamina's.
    pub fn line(&self) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        format!(
            "ingested {:.1} MB  flushed {:.1} MB  compactions read {:.1} MB written {:.1} MB  write amp {:.2}",
            mb(self.bytes_ingested),
            mb(self.flush_bytes_written),
            mb(self.compaction_bytes_read),
            mb(self.compaction_bytes_written),
            self.write_amplification
        )
    }
}

impl RocksStore {
    /// Opens (or creates) the database in `dir` with `s`'s settings and
    /// returns it with the option mapping.
    pub fn open(dir: &Path, s: &PeerSettings) -> Result<(RocksStore, OptionMap)> {
        let (opts, write, map) = configure(s);
        let db = DB::open(&opts, dir)
            .with_context(|| format!("opening RocksDB in {}", dir.display()))?;
        let store = RocksStore {
            db,
            opts,
            write,
            read: read_options(s.verify_checksums),
            verify_checksums: s.verify_checksums,
        };
        Ok((store, map))
    }

    /// RocksDB's own byte counts (its statistics' tickers
    /// `rocksdb.bytes.written`, `rocksdb.flush.write.bytes`,
    /// `rocksdb.compact.read.bytes`, `rocksdb.compact.write.bytes`) under
    /// the keys of lamina's stats JSON.
    pub fn counters(&self) -> PeerCounters {
        let tick = |t| self.opts.get_ticker_count(t);
        PeerCounters::new(
            tick(Ticker::BytesWritten),
            tick(Ticker::FlushWriteBytes),
            tick(Ticker::CompactReadBytes),
            tick(Ticker::CompactWriteBytes),
        )
    }

    /// [`RocksStore::counters`] as the JSON `--stats-json` writes: RocksDB's
    /// own compaction and flush bytes under lamina's keys.
    pub fn stats_json(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(self.counters())?)
    }

    /// RocksDB's statistics (the `rocksdb.stats` property), after the line
    /// of its compaction bytes in lamina's terms.
    pub fn stats_text(&self) -> String {
        let stats = match self.db.property_value("rocksdb.stats") {
            Ok(Some(s)) => s,
            Ok(None) => "(no rocksdb.stats)".into(),
            Err(e) => format!("(rocksdb.stats: {e})"),
        };
        format!("{}\n{stats}", self.counters().line())
    }

    /// Flushes the WAL to disk and closes the database.
    pub fn close(self) -> Result<()> {
        self.db.flush_wal(true).context("syncing RocksDB's WAL")?;
        Ok(())
    }
}

impl Store for RocksStore {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.write)?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.db.get_pinned_opt(key, &self.read)?.map(|v| v.len()))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_opt(key, &self.write)?)
    }

    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        if limit == 0 {
            return Ok(0);
        }
        let mut read = read_options(self.verify_checksums);
        if let Some(e) = end {
            read.set_iterate_upper_bound(e);
        }
        let mut it = self.db.raw_iterator_opt(read);
        match start {
            Some(s) => it.seek(s),
            None => it.seek_to_first(),
        }
        let mut n = 0;
        while n < limit {
            let Some((k, v)) = it.item() else { break };
            visit(k, v);
            n += 1;
            it.next();
        }
        it.status()?;
        Ok(n)
    }

    fn scan_rev(
        &self,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        if limit == 0 {
            return Ok(0);
        }
        let mut it = self
            .db
            .raw_iterator_opt(read_options(self.verify_checksums));
        match end {
            Some(e) => it.seek_for_prev(e),
            None => it.seek_to_last(),
        }
        let mut n = 0;
        while n < limit {
            let Some((k, v)) = it.item() else { break };
            visit(k, v);
            n += 1;
            it.prev();
        }
        it.status()?;
        Ok(n)
    }
}

#[cfg(test)]
#[expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test may panic on a failed setup"
)]
mod tests {
    use super::super::check_store_against_a_model;
    use super::*;

    #[test]
    fn rocksdb_meets_the_model() {
        let dir = tempfile::tempdir().unwrap();
        // Small buffers, so that the scans cross flushed tables too.
        let args = crate::bench::args::parse(&["--write_buffer_size=4096"])
            .peer_settings()
            .unwrap();
        let (store, _) = RocksStore::open(dir.path(), &args).unwrap();
        check_store_against_a_model(&store);
        // RocksDB's own tickers: what the model wrote came in, was flushed
        // and (with 4 KiB buffers) compacted.
        let c = store.counters();
        assert!(c.bytes_ingested > 0 && c.flush_bytes_written > 0, "{c:?}");
        assert!(
            c.compaction_bytes_read > 0 && c.compaction_bytes_written > 0,
            "{c:?}"
        );
        assert!(c.write_amplification > 1.0, "{c:?}");
        store.close().unwrap();
    }

    /// The options RocksDB records in the newest `OPTIONS-*` file of `dir`
    /// (its own serialisation of what it runs with), as `name -> value`.
    fn recorded_options(dir: &Path) -> std::collections::HashMap<String, String> {
        let newest = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("OPTIONS-"))
            .max_by_key(|n| n["OPTIONS-".len()..].parse::<u64>().unwrap())
            .unwrap();
        std::fs::read_to_string(dir.join(newest))
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn compression_and_mapped_reads_reach_rocksdb() {
        for (flags, kind, level, mmap) in [
            (&[][..], "kNoCompression", None, "false"),
            (
                &["--compression_type=lz4"],
                "kLZ4Compression",
                None,
                "false",
            ),
            (
                &["--compression_type=zstd:5", "--mmap_read"],
                "kZSTD",
                Some(5),
                "true",
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let s = crate::bench::args::parse(flags).peer_settings().unwrap();
            let (store, map) = RocksStore::open(dir.path(), &s).unwrap();
            store.close().unwrap();
            let o = recorded_options(dir.path());
            assert_eq!(o["compression"], kind, "{flags:?}");
            assert_eq!(o["bottommost_compression"], kind, "{flags:?}");
            assert_eq!(o["allow_mmap_reads"], mmap, "{flags:?}");
            let opts: std::collections::HashMap<&str, &str> = o["compression_opts"]
                .trim_matches(|c| c == '{' || c == '}')
                .split(';')
                .filter_map(|kv| kv.split_once('='))
                .collect();
            // zstd gets lamina's level; LZ4 keeps RocksDB's default level
            // (any level >= 1 would make it LZ4HC).
            // (32767: RocksDB's kDefaultCompressionLevel.)
            let want = level.map_or("32767".to_string(), |l: i32| l.to_string());
            assert_eq!(opts["level"], want, "{flags:?}");
            // A block is kept raw unless it saves 1/8, as lamina's.
            assert_eq!(opts["max_compressed_bytes_per_kb"], "896", "{flags:?}");
            let text = map.render("rocksdb");
            assert!(
                text.contains(&format!(
                    "compression={kind}, bottommost_compression={kind}"
                )),
                "{text}"
            );
            assert!(text.contains(&format!("allow_mmap_reads={mmap}")), "{text}");
        }
    }

    /// `--cache_index_and_filter_blocks` and
    /// `--pin_l0_filter_and_index_blocks_in_cache` reach RocksDB's table
    /// options (as its OPTIONS file records them); off by default, as
    /// lamina's.
    #[test]
    fn index_and_filter_caching_reaches_rocksdb() {
        for (flags, cache, pin) in [
            (&[][..], "false", "false"),
            (&["--cache_index_and_filter_blocks"][..], "true", "false"),
            (
                &[
                    "--cache_index_and_filter_blocks",
                    "--pin_l0_filter_and_index_blocks_in_cache",
                ][..],
                "true",
                "true",
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let s = crate::bench::args::parse(flags).peer_settings().unwrap();
            let (store, _) = RocksStore::open(dir.path(), &s).unwrap();
            store.close().unwrap();
            let o = recorded_options(dir.path());
            assert_eq!(o["cache_index_and_filter_blocks"], cache, "{flags:?}");
            assert_eq!(
                o["pin_l0_filter_and_index_blocks_in_cache"], pin,
                "{flags:?}"
            );
        }
    }
}
