//! The statistics a caller reads: the [`DbStats`] snapshot of `Db::stats()`
//! and its parts, and the compaction table printed from them.

use super::LatencySummary;

/// Per-kind block counts.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct BlockCounts {
    /// Data blocks.
    pub data: u64,
    /// Index blocks.
    pub index: u64,
    /// Filter blocks.
    pub filter: u64,
}

/// Shape and filter figures of one disk level.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LevelStats {
    /// Disk level, numbered from 0 as the engine and the policies number it.
    pub level: usize,
    /// Sorted runs.
    pub runs: usize,
    /// Files.
    pub files: usize,
    /// Bytes on disk.
    pub bytes: u64,
    /// Entries (versions, tombstones included).
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Bloom filter bytes.
    pub filter_bytes: u64,
    /// Files whose filter figures (`filter_bytes`, `bloom_bits_per_key`,
    /// `bloom_fpr_theoretical`) are counted: every file from
    /// [`Db::stats`](crate::Db::stats), only the open ones from
    /// [`Db::sample_stats`](crate::Db::sample_stats).
    #[serde(default)]
    pub filter_files: usize,
    /// Bloom bits per key of the level's files (entry-weighted mean).
    pub bloom_bits_per_key: f64,
    /// Theoretical false-positive rate of the level's filters (entry-weighted).
    pub bloom_fpr_theoretical: f64,
    /// Point-lookup filter probes of the level's files so far.
    pub bloom_probes: u64,
    /// Probes answered "maybe" for a key the file does not hold.
    pub bloom_false_positives: u64,
    /// False positives / probes for keys the file does not hold.
    pub bloom_fpr_measured: f64,
    /// Bytes that came into the level from above so far: what merges into
    /// it read from the levels above it (RocksDB's `Rn`), or for level 0
    /// the bytes flushed into it.
    pub bytes_read: u64,
    /// Bytes merges into the level read from its own files (`Rnp1`).
    #[serde(default)]
    pub bytes_read_level: u64,
    /// Bytes written into the level by flushes and merges so far.
    pub bytes_written: u64,
    /// Bytes moved into the level unchanged (trivial moves, and files a
    /// partitioned merge moved).
    #[serde(default)]
    pub bytes_moved: u64,
    /// Merges whose output went to the level (trivial moves excluded).
    #[serde(default)]
    pub compactions: u64,
    /// Their wall time, seconds.
    #[serde(default)]
    pub compaction_seconds: f64,
    /// `bytes_written / bytes_read`: bytes the level's merges wrote per byte
    /// that came in from above (1 for level 0).
    #[serde(default)]
    pub write_amplification: f64,
    /// Data-block cache hits of point lookups in the level so far.
    #[serde(default)]
    pub cache_hits: u64,
    /// Data-block cache misses of point lookups in the level so far.
    #[serde(default)]
    pub cache_misses: u64,
    /// Data blocks of the level's files now in the block cache.
    #[serde(default)]
    pub cached_blocks: u64,
}

/// What a table's Bloom filter answered for one point lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterOutcome {
    /// The table has no filter.
    NoFilter,
    /// "Definitely absent".
    Negative,
    /// "Maybe", and the table holds the key.
    Positive,
    /// "Maybe", and the table does not hold the key.
    FalsePositive,
}

/// A snapshot of the engine's statistics (`Db::stats()`), serializable to JSON.
///
/// # Consistency
///
/// A snapshot is not atomic: the counters are separate atomics read one
/// after the other while other threads keep counting (a lock around every
/// count would cost each get and write). What every snapshot guarantees:
///
/// * `gets == get_hits + get_misses` (`gets` is their sum);
/// * each counter never decreases from one snapshot to a later one;
/// * the tree fields (`levels`, `sorted_runs`, `disk_bytes`, `tombstones`,
///   `memtable_bytes`, `memtable_entries`, `space_amplification`, `buffer`'s
///   sizes) describe one version and one set of memtables, so they agree
///   with each other: `disk_bytes` is the levels' bytes plus `buffer.bytes`,
///   `sorted_runs` and `tombstones` the levels' sums.
///
/// What may disagree while the engine works: two counters (`flushes` and
/// `flush_bytes_written`, `compactions` and `compaction_bytes_written`, a
/// latency histogram's `count` and its counter, the filter and cache counts
/// and `gets`, …), and a counter with the tree (a merge counted while its
/// inputs are still shown). With no operation running, e.g. after
/// `Db::wait_for_compactions`, every field agrees.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct DbStats {
    /// User key + value bytes written by callers.
    pub bytes_ingested: u64,
    /// Entries written by callers (puts and deletes).
    pub writes: u64,
    /// Memtable flushes.
    pub flushes: u64,
    /// Bytes written by flushes.
    pub flush_bytes_written: u64,
    /// Merging compactions.
    pub compactions: u64,
    /// Compactions done as manifest-only moves.
    pub trivial_moves: u64,
    /// Files that partitioned merges moved into their output run instead of
    /// rewriting (one-file groups, seed 000 Alg. 5.3; a merge whose every
    /// group moved counts as a trivial move too).
    pub merge_moved_files: u64,
    /// Bytes of `merge_moved_files`.
    pub merge_moved_bytes: u64,
    /// Sub-merges run by merging compactions (a plain merge is one).
    pub sub_merges: u64,
    /// The most sub-merges one compaction ran.
    pub max_sub_merges: u64,
    /// Merges by sub-merge count: merges with 1, 2, 3–4, 5–8, 9–16, 17–32,
    /// 33–64 and more sub-merges (a partitioned merge that only moved files
    /// counts as a trivial move).
    #[serde(default)]
    pub sub_merges_per_merge: Vec<u64>,
    /// Bytes merging compactions read and wrote per second of their wall
    /// time (moved files excluded).
    #[serde(default)]
    pub merge_bytes_per_sec: f64,
    /// Files written by merging compactions.
    pub compaction_files_written: u64,
    /// Compactions that failed (the tree was left unchanged).
    pub compaction_errors: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// (flush bytes + compaction bytes written) / flush bytes.
    pub write_amplification: f64,
    /// Sorted runs now.
    pub sorted_runs: usize,
    /// Sorted runs averaged over flushes (sampled after each flush).
    pub avg_sorted_runs: f64,
    /// Most sorted runs right after a flush (before that flush's merges).
    pub max_runs_at_flush: u64,
    /// Flushes that found more runs than a bounded-depth policy's bound `k`:
    /// the merges of an earlier flush were still running (seed 003's
    /// "SSTable count may briefly exceed k"). Always 0 for unbounded policies.
    pub overshoot_flushes: u64,
    /// Largest excess over `k` that a flush found.
    pub max_overshoot: u64,
    /// Bytes on disk (compaction buffers included) / estimated live bytes,
    /// for every layout: the live data is estimated as the oldest sorted
    /// run (all tiles of a spatially tiled last level), which holds every
    /// key once if newer runs only update it — RocksDB's estimate for
    /// universal compaction, and the last level under leveling. Exact live
    /// bytes would need a scan of the whole tree.
    pub space_amplification: f64,
    /// Bytes of all SST files.
    pub disk_bytes: u64,
    /// Memtable bytes (active and immutable).
    pub memtable_bytes: u64,
    /// Memtable entries.
    pub memtable_entries: u64,
    /// Point lookups.
    pub gets: u64,
    /// Point lookups that found a value.
    pub get_hits: u64,
    /// Point lookups that found nothing.
    pub get_misses: u64,
    /// Bloom filter probes.
    pub bloom_probes: u64,
    /// Probes answered "absent".
    pub bloom_negatives: u64,
    /// Probes answered "maybe" for an absent key.
    pub bloom_false_positives: u64,
    /// Block cache hits by kind (data blocks: queries' lookups only, not
    /// a compaction's reads of its inputs).
    pub cache_hits: BlockCounts,
    /// Block cache misses by kind (data blocks: queries' lookups only).
    pub cache_misses: BlockCounts,
    /// Cached blocks dropped because their file was deleted.
    pub cache_invalidated_blocks: u64,
    /// Bytes of index blocks read from files: when tables open, and on
    /// misses (`Options::cache_index_and_filter_blocks`).
    #[serde(default)]
    pub index_bytes_read: u64,
    /// Bytes of filter blocks read from files, as `index_bytes_read`.
    #[serde(default)]
    pub filter_bytes_read: u64,
    /// Bytes the block cache holds now (pinned blocks included).
    #[serde(default)]
    pub block_cache_usage: u64,
    /// Bytes of index and filter blocks level-0 tables pin in the block
    /// cache now (`Options::pin_l0_filter_and_index_blocks_in_cache`).
    #[serde(default)]
    pub block_cache_pinned_usage: u64,
    /// `Db::get`s the row cache answered (`Options::row_cache_bytes`).
    #[serde(default)]
    pub row_cache_hits: u64,
    /// `Db::get`s that looked in the row cache and read the tree.
    #[serde(default)]
    pub row_cache_misses: u64,
    /// Bytes the row cache holds now.
    #[serde(default)]
    pub row_cache_usage: u64,
    /// Blocks incremental warm-up read into the block cache
    /// (`Options::compaction_warm_up`).
    #[serde(default)]
    pub warm_up_blocks: u64,
    /// Blocks read from SST files.
    pub blocks_read: u64,
    /// Bytes read from SST files.
    pub bytes_read: u64,
    /// Write stalls.
    pub stalls: u64,
    /// Time writers spent stalled, µs.
    pub stall_micros: u64,
    /// Put/write latency.
    pub put_latency: LatencySummary,
    /// Get latency.
    pub get_latency: LatencySummary,
    /// Latency of gets that found a value.
    pub get_found_latency: LatencySummary,
    /// Latency of gets that found nothing (empty lookups).
    pub get_empty_latency: LatencySummary,
    /// Scan set-up latency.
    pub scan_latency: LatencySummary,
    /// Compaction latency (merges; trivial moves excluded).
    pub compaction_latency: LatencySummary,
    /// The put, get, scan and compaction latencies as cumulative buckets
    /// (`lamina serve --metrics`' histograms).
    #[serde(default)]
    pub latency_histograms: super::LatencyHistograms,
    /// CPU time of the compaction thread per merge.
    #[serde(default)]
    pub compaction_cpu_latency: LatencySummary,
    /// Wall time minus CPU time per merge: waiting for I/O (or the CPU).
    #[serde(default)]
    pub compaction_io_latency: LatencySummary,
    /// Per merge into the deepest level that dropped tombstones: time since
    /// its inputs' oldest tombstone was written (an upper bound of the
    /// persistence latency of the deletes it made persistent).
    #[serde(default)]
    pub delete_persistence_latency: LatencySummary,
    /// Per point tombstone a merge dropped (the delete became persistent):
    /// the time since its merge's oldest input tombstone was written, an
    /// upper bound of its own persistence latency; `count` is the number
    /// of tombstones dropped. `Db::deletes_persisted_within` counts those
    /// within a threshold (seed 001's delete performance).
    #[serde(default)]
    pub tombstone_purge_age: LatencySummary,
    /// (compaction bytes read + written) / bytes ingested (seed 001's data
    /// movement).
    #[serde(default)]
    pub data_movement: f64,
    /// SST blocks read from disk by point lookups.
    #[serde(default)]
    pub get_blocks_read: u64,
    /// Blocks read from disk per point lookup.
    #[serde(default)]
    pub read_amplification: f64,
    /// Tombstones stored in SST files.
    #[serde(default)]
    pub tombstones: u64,
    /// The compaction buffers (seed 002; all zero without `lsbm`).
    #[serde(default)]
    pub buffer: BufferStats,
    /// Window queries of a spatial index (all zero elsewhere).
    #[serde(default)]
    pub window: WindowStats,
    /// Disk levels.
    pub levels: Vec<LevelStats>,
}

/// The compaction buffers' state and activity (seed 002).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct BufferStats {
    /// Bytes of buffer files no run holds (included in `disk_bytes`).
    pub bytes: u64,
    /// Live buffer files.
    pub files: u64,
    /// Buffer tables (one per round kept).
    pub tables: u64,
    /// Removed files still marked (their key ranges send lookups to the host).
    pub markers: u64,
    /// Blocks of buffer files in the block cache.
    pub cached_blocks: u64,
    /// Files merged down that joined a buffer.
    pub appended_files: u64,
    /// Files removed by the pace rule.
    pub retired_files: u64,
    /// Files removed by the trim pass.
    pub trimmed_files: u64,
    /// Cached blocks dropped when a retired or trimmed buffer file was
    /// deleted (included in `DbStats::cache_invalidated_blocks`; the rest
    /// are blocks of files the tree's merges replaced).
    pub invalidated_blocks: u64,
    /// Point lookups a buffer answered.
    pub gets: u64,
    /// Point lookups a marker sent back to the host run.
    pub fallbacks: u64,
    /// Run reads of scans served by a buffer.
    pub scans: u64,
    /// Data-block cache hits of point lookups in buffer files.
    pub cache_hits: u64,
    /// Data-block cache misses of point lookups in buffer files.
    pub cache_misses: u64,
    /// Per level of the tree (`B_i` of host runs of level `i`; level 0's
    /// runs have no buffer).
    #[serde(default)]
    pub levels: Vec<BufferLevelStats>,
}

/// One level's compaction buffers (`B_i` and `B'_i`, seed 002).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BufferLevelStats {
    /// The level (0-based, as everywhere).
    pub level: usize,
    /// Live buffer files of the level's hosts, now.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Markers (removed files) of the level's hosts, now.
    pub markers: u64,
    /// Buffer tables of the level's hosts, now.
    pub tables: u64,
    /// Files of units moved into the level that joined a buffer live.
    pub appended_live: u64,
    /// Files of units moved into the level that joined as markers (frozen).
    pub appended_frozen: u64,
    /// Whether the last unit moved into the level went in frozen.
    pub frozen: bool,
    /// Milliseconds frozen: from a unit that went in frozen to the next
    /// that went in live (or to now).
    pub frozen_ms: u64,
    /// Point lookups that consulted a buffer of the level.
    pub probes: u64,
    /// Point lookups a buffer of the level answered.
    pub gets: u64,
    /// Cached blocks dropped with the level's deleted buffer files
    /// (retired or trimmed): invalidations the buffer caused.
    pub invalidated_blocks: u64,
    /// Cached blocks dropped with the level's deleted run files (merge
    /// inputs): invalidations the tree's compactions caused.
    pub tree_invalidated_blocks: u64,
}

/// Window queries of a spatial index (seed 000 ch. 4).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct WindowStats {
    /// Queries run.
    pub queries: u64,
    /// Operational components scanned: memtables plus files whose MBR
    /// intersects the window, summed over queries.
    pub components: u64,
    /// Files skipped by their MBR.
    pub files_pruned: u64,
    /// Data blocks skipped by their MBR.
    pub blocks_pruned: u64,
    /// Data blocks the queries read (block cache hits and misses), counted
    /// on the thread that made and dropped each query's iterator.
    #[serde(default)]
    pub blocks: u64,
    /// Records returned.
    pub results: u64,
    /// Components scanned per query: the seed's read amplification.
    pub read_amplification: f64,
    /// Time per query, until its last record was returned.
    pub latency: LatencySummary,
}

/// RocksDB's "Compaction Stats" table (`lamina bench`'s report and the
/// `lamina.stats` property, [`crate::Db::property`]): per level (numbered from 0, as
/// everywhere in lamina), its shape and what flushes and merges into it
/// read, wrote and moved; then the sum.
pub fn compaction_stats_table(levels: &[LevelStats]) -> String {
    let mb = |b: u64| b as f64 / 1_048_576.0;
    let mut out = String::from(
        "** Compaction Stats **\nLevel   Runs  Files  Size(MB)  Read(MB)  Rlevel(MB)  Write(MB)  Moved(MB)  W-Amp  Comp(cnt)  Comp(sec)   Entries  Tombstones\n",
    );
    let mut sum = LevelStats::default();
    for l in levels {
        out.push_str(&format!(
            "L{:<5} {:>5} {:>6} {:>9.1} {:>9.1} {:>11.1} {:>10.1} {:>10.1} {:>6.2} {:>10} {:>10.2} {:>9} {:>11}\n",
            l.level,
            l.runs,
            l.files,
            mb(l.bytes),
            mb(l.bytes_read),
            mb(l.bytes_read_level),
            mb(l.bytes_written),
            mb(l.bytes_moved),
            l.write_amplification,
            l.compactions,
            l.compaction_seconds,
            l.entries,
            l.tombstones
        ));
        sum.runs += l.runs;
        sum.files += l.files;
        sum.bytes += l.bytes;
        sum.bytes_read_level += l.bytes_read_level;
        sum.bytes_written += l.bytes_written;
        sum.bytes_moved += l.bytes_moved;
        sum.compactions += l.compactions;
        sum.compaction_seconds += l.compaction_seconds;
        sum.entries += l.entries;
        sum.tombstones += l.tombstones;
    }
    // What came in from outside the tree is what level 0 took in.
    let ingested = levels.first().map_or(0, |l| l.bytes_read);
    let wa = if ingested == 0 {
        0.0
    } else {
        sum.bytes_written as f64 / ingested as f64
    };
    out.push_str(&format!(
        "Sum    {:>5} {:>6} {:>9.1} {:>9.1} {:>11.1} {:>10.1} {:>10.1} {:>6.2} {:>10} {:>10.2} {:>9} {:>11}\n",
        sum.runs,
        sum.files,
        mb(sum.bytes),
        mb(ingested),
        mb(sum.bytes_read_level),
        mb(sum.bytes_written),
        mb(sum.bytes_moved),
        wa,
        sum.compactions,
        sum.compaction_seconds,
        sum.entries,
        sum.tombstones
    ));
    out
}
