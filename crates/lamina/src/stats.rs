//! Engine statistics: lock-free counters updated on the hot paths and a
//! serializable snapshot returned by `Db::stats()`.

use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonically increasing counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }
    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The largest value seen so far.
#[derive(Debug, Default)]
pub struct Maximum(AtomicU64);

impl Maximum {
    /// Raises the maximum to `n` if `n` is larger.
    #[inline]
    pub fn observe(&self, n: u64) {
        self.0.fetch_max(n, Ordering::Relaxed);
    }
    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Which kind of SST block an access concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A data block.
    Data,
    /// The fence-pointer index block.
    Index,
    /// The Bloom filter block.
    Filter,
}

/// Counters touched by the SST reader and the block cache.
#[derive(Debug, Default)]
pub struct IoStats {
    /// Bloom filter probes (point lookups that consulted a filter).
    pub bloom_probes: Counter,
    /// Probes the filter answered "definitely absent".
    pub bloom_negatives: Counter,
    /// Probes the filter answered "maybe" for a key the file does not hold.
    pub bloom_false_positives: Counter,
    /// Block cache hits per kind: data, index, filter. Data blocks count
    /// queries' lookups only: a compaction reading its inputs does not
    /// count, so the hit ratio is the queries'.
    pub cache_hits: [Counter; 3],
    /// Block cache misses per kind: data, index, filter (data: queries'
    /// lookups only, as `cache_hits`).
    pub cache_misses: [Counter; 3],
    /// Bytes of index (0) and filter (1) blocks read from files: when
    /// tables open, and on misses with
    /// [`crate::Options::cache_index_and_filter_blocks`] (any reader's).
    pub meta_bytes_read: [Counter; 2],
    /// Cached blocks dropped because their file was deleted.
    pub cache_invalidated_blocks: Counter,
    /// Blocks read from files (cache misses that went to the file).
    pub blocks_read: Counter,
    /// Bytes read from SST files.
    pub bytes_read: Counter,
    /// Data blocks window queries skipped because their MBR missed the
    /// window (LSM R-tree, seed 000 §4.3.3).
    pub mbr_blocks_pruned: Counter,
}

impl IoStats {
    /// Index of a block kind in the per-kind arrays.
    pub fn kind_index(kind: BlockKind) -> usize {
        match kind {
            BlockKind::Data => 0,
            BlockKind::Index => 1,
            BlockKind::Filter => 2,
        }
    }
}

/// Operations with a latency histogram.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Put,
    Get,
    Scan,
    Compaction,
}

/// Levels with their own filter counters; deeper levels share the last.
pub(crate) const FILTER_STAT_LEVELS: usize = 32;

/// Sub-buckets per power of two: a recorded value's bucket is at most
/// 1/128 (0.8%) wider than the value (HdrHistogram's layout with two
/// significant decimal digits).
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this get a bucket each.
const LINEAR: u64 = 2 * SUB;
/// Longest time kept apart: 2^42 ns (73 minutes); longer ones share the
/// last bucket (the maximum is still exact).
const MAX_LOG: u32 = 42;
const BUCKETS: usize = (LINEAR + (MAX_LOG - SUB_BITS) as u64 * SUB) as usize;

/// A lock-free log-linear latency histogram in nanoseconds, with
/// HdrHistogram's bucket layout at two significant digits: percentiles
/// within 0.8% of the recorded values, never above the maximum. (The
/// `hdrhistogram` crate's histograms record through `&mut`; the engine
/// records from every thread at once, so its counters are atomics.)
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    fn bucket(ns: u64) -> usize {
        if ns < LINEAR {
            return ns as usize;
        }
        let log = (63 - ns.leading_zeros()).min(MAX_LOG);
        let shift = log - SUB_BITS;
        let sub = (ns >> shift).min(2 * SUB - 1) - SUB;
        ((LINEAR + u64::from(log - SUB_BITS - 1) * SUB + sub) as usize).min(BUCKETS - 1)
    }

    /// The largest value of `bucket`.
    fn upper(bucket: usize) -> u64 {
        let b = bucket as u64;
        if b < LINEAR {
            return b;
        }
        let log = (b - LINEAR) / SUB + u64::from(SUB_BITS) + 1;
        let sub = (b - LINEAR) % SUB;
        let shift = log - u64::from(SUB_BITS);
        ((SUB + sub + 1) << shift) - 1
    }

    /// Records one duration.
    pub fn record(&self, d: std::time::Duration) {
        self.record_n(d, 1);
    }

    /// Records `n` events that each took `d`.
    pub fn record_n(&self, d: std::time::Duration, n: u64) {
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        if let Some(b) = self.buckets.get(Self::bucket(ns)) {
            b.fetch_add(n, Ordering::Relaxed);
        }
        self.max.fetch_max(ns, Ordering::Relaxed);
        self.count.fetch_add(n, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(ns.saturating_mul(n), Ordering::Relaxed);
    }

    /// Events recorded at or below `d`, counting only buckets that lie
    /// wholly at or below it (so at most 0.8% of `d` is lost, never
    /// anything above `d` gained).
    pub fn count_at_most(&self, d: std::time::Duration) -> u64 {
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.buckets
            .iter()
            .enumerate()
            .take_while(|&(i, _)| Self::upper(i) <= ns)
            .map(|(_, b)| b.load(Ordering::Relaxed))
            .sum()
    }

    /// p50/p90/p99/p99.9/max in microseconds.
    pub fn summary(&self) -> LatencySummary {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let max = self.max.load(Ordering::Relaxed);
        let quantile = |q: f64| -> f64 {
            if total == 0 {
                return 0.0;
            }
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return Self::upper(i).min(max) as f64 / 1000.0;
                }
            }
            max as f64 / 1000.0
        };
        LatencySummary {
            count: total,
            mean_us: if total == 0 {
                0.0
            } else {
                self.sum_ns.load(Ordering::Relaxed) as f64 / total as f64 / 1000.0
            },
            p50_us: quantile(0.50),
            p90_us: quantile(0.90),
            p99_us: quantile(0.99),
            p999_us: quantile(0.999),
            max_us: max as f64 / 1000.0,
        }
    }
}

/// Latency percentiles of one operation.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct LatencySummary {
    /// Operations recorded.
    pub count: u64,
    /// Mean, µs.
    #[serde(default)]
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    #[serde(default)]
    pub p999_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

/// Upper bounds of the sub-merges-per-merge histogram's buckets (the last
/// one takes the rest).
pub const SUB_MERGE_BUCKETS: [u64; 8] = [1, 2, 4, 8, 16, 32, 64, u64::MAX];

/// Engine-wide counters.
#[derive(Debug, Default)]
pub(crate) struct EngineStats {
    pub bytes_ingested: Counter,
    pub writes: Counter,
    pub flushes: Counter,
    pub flush_bytes_written: Counter,
    pub compactions: Counter,
    pub trivial_moves: Counter,
    pub merge_moved_files: Counter,
    pub merge_moved_bytes: Counter,
    pub sub_merges: Counter,
    pub max_sub_merges: Maximum,
    /// Merges by sub-merge count, in [`SUB_MERGE_BUCKETS`].
    pub sub_merges_per_merge: [Counter; SUB_MERGE_BUCKETS.len()],
    /// Wall time of merging compactions, µs.
    pub merge_micros: Counter,
    pub compaction_files_written: Counter,
    pub compaction_errors: Counter,
    pub compaction_bytes_read: Counter,
    pub compaction_bytes_written: Counter,
    pub run_count_sum: Counter,
    pub max_runs_at_flush: Maximum,
    pub overshoot_flushes: Counter,
    pub max_overshoot: Maximum,
    pub stalls: Counter,
    pub stall_micros: Counter,
    /// Point lookups that found a value and that found none; `gets` is
    /// their sum, so a snapshot never shows one without the other.
    pub get_hits: Counter,
    pub get_misses: Counter,
    pub put_latency: Histogram,
    pub get_latency: Histogram,
    pub get_found_latency: Histogram,
    pub get_empty_latency: Histogram,
    /// Per level (deeper ones share the last slot): filter answers.
    pub level_filter_negatives: [Counter; FILTER_STAT_LEVELS],
    pub level_filter_positives: [Counter; FILTER_STAT_LEVELS],
    pub level_filter_false_positives: [Counter; FILTER_STAT_LEVELS],
    /// Data-block cache hits and misses of point lookups, per level.
    pub level_cache_hits: [Counter; FILTER_STAT_LEVELS],
    /// Per output level: merges, their wall time, the bytes they read
    /// from the levels above and from the level itself, the bytes written
    /// into it (flushes for level 0) and the bytes moved into it unchanged.
    pub level_compactions: [Counter; FILTER_STAT_LEVELS],
    pub level_compaction_micros: [Counter; FILTER_STAT_LEVELS],
    pub level_read_above: [Counter; FILTER_STAT_LEVELS],
    pub level_read_level: [Counter; FILTER_STAT_LEVELS],
    pub level_written: [Counter; FILTER_STAT_LEVELS],
    pub level_moved: [Counter; FILTER_STAT_LEVELS],
    pub level_cache_misses: [Counter; FILTER_STAT_LEVELS],
    pub scan_latency: Histogram,
    pub compaction_latency: Histogram,
    pub compaction_cpu_latency: Histogram,
    pub compaction_io_latency: Histogram,
    pub delete_persistence_latency: Histogram,
    /// One event per tombstone a merge dropped, at the age of the merge's
    /// oldest input tombstone (a bound on that tombstone's own age).
    pub tombstone_purge_age: Histogram,
    pub get_blocks_read: Counter,
    /// Point lookups a compaction buffer answered (seed 002).
    pub buffer_gets: Counter,
    /// Point lookups a removed buffer file sent back to the host run.
    pub buffer_fallbacks: Counter,
    /// Run reads of scans served by a compaction buffer.
    pub buffer_scans: Counter,
    /// Data-block cache hits and misses of point lookups in buffer files.
    pub buffer_cache_hits: Counter,
    pub buffer_cache_misses: Counter,
    /// Files merged down that joined a buffer.
    pub buffer_appended_files: Counter,
    /// Buffer files removed by the pace rule (retired) and by the trim pass.
    pub buffer_retired_files: Counter,
    pub buffer_trimmed_files: Counter,
    /// Cached blocks dropped with deleted buffer files (retired or
    /// trimmed): the part of `cache_invalidated_blocks` the buffer caused.
    pub buffer_invalidated_blocks: Counter,
    /// Per level of the host run (deeper ones share the last slot): point
    /// lookups that consulted a buffer, and those it answered.
    pub buffer_level_probes: [Counter; FILTER_STAT_LEVELS],
    pub buffer_level_gets: [Counter; FILTER_STAT_LEVELS],
    /// Per level: units' files that joined a buffer live, and as markers
    /// (the buffer was frozen).
    pub buffer_level_kept: [Counter; FILTER_STAT_LEVELS],
    pub buffer_level_marked: [Counter; FILTER_STAT_LEVELS],
    /// Per level: milliseconds the buffer was frozen (from a frozen unit to
    /// the next live one), and when the current frozen spell began (unix
    /// ms + 1; 0 if not frozen).
    pub buffer_level_frozen_ms: [Counter; FILTER_STAT_LEVELS],
    pub buffer_level_frozen_since: [AtomicU64; FILTER_STAT_LEVELS],
    /// Per level: cached blocks dropped with deleted files, of buffer files
    /// (retired or trimmed; by their host's level) and of run files (merge
    /// inputs; by their run's level).
    pub buffer_level_invalidated: [Counter; FILTER_STAT_LEVELS],
    pub tree_level_invalidated: [Counter; FILTER_STAT_LEVELS],
    /// `Db::get`s the row cache answered, and those it did not.
    pub row_cache_hits: Counter,
    pub row_cache_misses: Counter,
    /// Blocks incremental warm-up read into the block cache.
    pub warm_up_blocks: Counter,
    /// Window queries, the operational components they scanned (memtables
    /// and files whose MBR meets the window), the files their MBR pruned,
    /// the records they returned, and their latency.
    pub window_queries: Counter,
    pub window_components: Counter,
    pub window_files_pruned: Counter,
    pub window_blocks: Counter,
    pub window_results: Counter,
    pub window_latency: Histogram,
}

/// CPU time the calling thread has used (compaction CPU vs I/O split).
pub(crate) fn thread_cpu_time() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    std::time::Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// What the tree holds at the moment of a [`EngineStats::snapshot`]: read
/// from the current version and memtables, not from counters.
pub(crate) struct TreeState {
    pub levels: Vec<LevelStats>,
    pub memtable_bytes: u64,
    pub memtable_entries: u64,
    pub sorted_runs: usize,
    /// Bytes of the oldest sorted run (all tiles of a tiled last level).
    pub oldest_run_bytes: u64,
    pub block_cache_usage: u64,
    pub block_cache_pinned_usage: u64,
    pub row_cache_usage: u64,
    pub buffer: BufferStats,
}

impl EngineStats {
    pub(crate) fn record(&self, op: Op, d: std::time::Duration) {
        match op {
            Op::Put => self.put_latency.record(d),
            Op::Get => self.get_latency.record(d),
            Op::Scan => self.scan_latency.record(d),
            Op::Compaction => self.compaction_latency.record(d),
        }
    }

    pub(crate) fn count_get(&self, hit: bool, latency: std::time::Duration) {
        if hit {
            self.get_hits.inc();
            self.get_found_latency.record(latency);
        } else {
            self.get_misses.inc();
            self.get_empty_latency.record(latency);
        }
    }

    /// Counts a point lookup's filter answer for a file of `level`.
    pub(crate) fn count_filter(&self, level: usize, outcome: FilterOutcome) {
        let i = level.min(FILTER_STAT_LEVELS - 1);
        let counters = match outcome {
            FilterOutcome::NoFilter => return,
            FilterOutcome::Negative => &self.level_filter_negatives,
            FilterOutcome::Positive => &self.level_filter_positives,
            FilterOutcome::FalsePositive => &self.level_filter_false_positives,
        };
        if let Some(c) = counters.get(i) {
            c.inc();
        }
    }

    /// Fills the measured filter figures of level `level` (0-based).
    /// Counts a point lookup's data-block cache hits and misses in `level`.
    pub(crate) fn count_level_cache(&self, level: usize, hits: u64, misses: u64) {
        let i = level.min(FILTER_STAT_LEVELS - 1);
        if let (Some(h), Some(m)) = (self.level_cache_hits.get(i), self.level_cache_misses.get(i)) {
            h.add(hits);
            m.add(misses);
        }
    }

    /// Fills the measured figures of level `level` (0-based): its filter's
    /// answers and its point lookups' cache hits and misses.
    /// The counter of `level` in a per-level array (deeper levels share
    /// the last).
    pub(crate) fn at<'a>(
        &self,
        counters: &'a [Counter; FILTER_STAT_LEVELS],
        level: usize,
    ) -> &'a Counter {
        &counters[level.min(FILTER_STAT_LEVELS - 1)]
    }

    /// Records that a unit moved into a host of `level` joined its buffer
    /// as `kept` live files and `marked` markers, at `now_ms`: a unit with
    /// markers begins (or continues) a frozen spell, one without ends it.
    pub(crate) fn count_buffer_unit(&self, level: usize, kept: u64, marked: u64, now_ms: u64) {
        self.at(&self.buffer_level_kept, level).add(kept);
        self.at(&self.buffer_level_marked, level).add(marked);
        let since = &self.buffer_level_frozen_since[level.min(FILTER_STAT_LEVELS - 1)];
        let began = since.load(Ordering::Relaxed);
        if marked > 0 && began == 0 {
            since.store(now_ms + 1, Ordering::Relaxed);
        } else if marked == 0 && began > 0 {
            since.store(0, Ordering::Relaxed);
            self.at(&self.buffer_level_frozen_ms, level)
                .add((now_ms + 1).saturating_sub(began));
        }
    }

    /// Fills the counted figures of each level's buffer in `levels` (one
    /// entry per level of the tree, states already filled), a frozen spell
    /// still going counted up to `now_ms`.
    fn fill_buffer_levels(&self, levels: &mut [BufferLevelStats], now_ms: u64) {
        for s in levels {
            let get = |a: &[Counter; FILTER_STAT_LEVELS]| self.at(a, s.level).get();
            s.probes = get(&self.buffer_level_probes);
            s.gets = get(&self.buffer_level_gets);
            s.appended_live = get(&self.buffer_level_kept);
            s.appended_frozen = get(&self.buffer_level_marked);
            let began = self.buffer_level_frozen_since[s.level.min(FILTER_STAT_LEVELS - 1)]
                .load(Ordering::Relaxed);
            s.frozen = began > 0;
            s.frozen_ms = get(&self.buffer_level_frozen_ms)
                + match began {
                    0 => 0,
                    b => (now_ms + 1).saturating_sub(b),
                };
            s.invalidated_blocks = get(&self.buffer_level_invalidated);
            s.tree_invalidated_blocks = get(&self.tree_level_invalidated);
        }
    }

    pub(crate) fn fill_measured_level_stats(&self, level: usize, s: &mut LevelStats) {
        let i = level.min(FILTER_STAT_LEVELS - 1);
        let get = |a: &[Counter; FILTER_STAT_LEVELS]| a.get(i).map_or(0, Counter::get);
        s.cache_hits = get(&self.level_cache_hits);
        s.compactions = get(&self.level_compactions);
        s.compaction_seconds = get(&self.level_compaction_micros) as f64 / 1e6;
        s.bytes_read = get(&self.level_read_above);
        s.bytes_read_level = get(&self.level_read_level);
        s.bytes_written = get(&self.level_written);
        s.bytes_moved = get(&self.level_moved);
        s.write_amplification = if s.bytes_read == 0 {
            0.0
        } else {
            s.bytes_written as f64 / s.bytes_read as f64
        };
        s.cache_misses = get(&self.level_cache_misses);
        let (neg, pos, fp) = (
            get(&self.level_filter_negatives),
            get(&self.level_filter_positives),
            get(&self.level_filter_false_positives),
        );
        s.bloom_probes = neg + pos + fp;
        s.bloom_false_positives = fp;
        // Among probes for keys the file does not hold.
        s.bloom_fpr_measured = if neg + fp == 0 {
            0.0
        } else {
            fp as f64 / (neg + fp) as f64
        };
    }

    pub(crate) fn snapshot(&self, io: &IoStats, tree: TreeState) -> DbStats {
        let TreeState {
            levels,
            memtable_bytes,
            memtable_entries,
            sorted_runs,
            oldest_run_bytes: live,
            block_cache_usage,
            block_cache_pinned_usage,
            row_cache_usage,
            mut buffer,
        } = tree;
        let flush = self.flush_bytes_written.get();
        let written = self.compaction_bytes_written.get();
        let disk: u64 = levels.iter().map(|l| l.bytes).sum::<u64>() + buffer.bytes;
        buffer.appended_files = self.buffer_appended_files.get();
        buffer.retired_files = self.buffer_retired_files.get();
        buffer.trimmed_files = self.buffer_trimmed_files.get();
        buffer.invalidated_blocks = self.buffer_invalidated_blocks.get();
        self.fill_buffer_levels(&mut buffer.levels, crate::clock::now_ms());
        buffer.gets = self.buffer_gets.get();
        buffer.fallbacks = self.buffer_fallbacks.get();
        buffer.scans = self.buffer_scans.get();
        buffer.cache_hits = self.buffer_cache_hits.get();
        buffer.cache_misses = self.buffer_cache_misses.get();
        let flushes = self.flushes.get();
        let (get_hits, get_misses) = (self.get_hits.get(), self.get_misses.get());
        let gets = get_hits + get_misses;
        let kinds = |a: &[Counter; 3]| BlockCounts {
            data: a[0].get(),
            index: a[1].get(),
            filter: a[2].get(),
        };
        DbStats {
            bytes_ingested: self.bytes_ingested.get(),
            writes: self.writes.get(),
            flushes,
            flush_bytes_written: flush,
            compactions: self.compactions.get(),
            trivial_moves: self.trivial_moves.get(),
            merge_moved_files: self.merge_moved_files.get(),
            merge_moved_bytes: self.merge_moved_bytes.get(),
            sub_merges: self.sub_merges.get(),
            max_sub_merges: self.max_sub_merges.get(),
            sub_merges_per_merge: self.sub_merges_per_merge.iter().map(Counter::get).collect(),
            merge_bytes_per_sec: {
                let secs = self.merge_micros.get() as f64 / 1e6;
                let bytes = self.compaction_bytes_read.get() + written;
                if secs > 0.0 {
                    bytes as f64 / secs
                } else {
                    0.0
                }
            },
            compaction_files_written: self.compaction_files_written.get(),
            compaction_errors: self.compaction_errors.get(),
            compaction_bytes_read: self.compaction_bytes_read.get(),
            compaction_bytes_written: written,
            write_amplification: if flush == 0 {
                0.0
            } else {
                (flush + written) as f64 / flush as f64
            },
            sorted_runs,
            avg_sorted_runs: if flushes == 0 {
                0.0
            } else {
                self.run_count_sum.get() as f64 / flushes as f64
            },
            max_runs_at_flush: self.max_runs_at_flush.get(),
            overshoot_flushes: self.overshoot_flushes.get(),
            max_overshoot: self.max_overshoot.get(),
            space_amplification: if live == 0 {
                0.0
            } else {
                disk as f64 / live as f64
            },
            disk_bytes: disk,
            memtable_bytes,
            memtable_entries,
            gets,
            get_hits,
            get_misses,
            bloom_probes: io.bloom_probes.get(),
            bloom_negatives: io.bloom_negatives.get(),
            bloom_false_positives: io.bloom_false_positives.get(),
            cache_hits: kinds(&io.cache_hits),
            cache_misses: kinds(&io.cache_misses),
            cache_invalidated_blocks: io.cache_invalidated_blocks.get(),
            index_bytes_read: io.meta_bytes_read[0].get(),
            filter_bytes_read: io.meta_bytes_read[1].get(),
            block_cache_usage,
            block_cache_pinned_usage,
            row_cache_hits: self.row_cache_hits.get(),
            row_cache_misses: self.row_cache_misses.get(),
            row_cache_usage,
            warm_up_blocks: self.warm_up_blocks.get(),
            blocks_read: io.blocks_read.get(),
            bytes_read: io.bytes_read.get(),
            stalls: self.stalls.get(),
            stall_micros: self.stall_micros.get(),
            put_latency: self.put_latency.summary(),
            get_latency: self.get_latency.summary(),
            get_found_latency: self.get_found_latency.summary(),
            get_empty_latency: self.get_empty_latency.summary(),
            scan_latency: self.scan_latency.summary(),
            compaction_latency: self.compaction_latency.summary(),
            compaction_cpu_latency: self.compaction_cpu_latency.summary(),
            compaction_io_latency: self.compaction_io_latency.summary(),
            delete_persistence_latency: self.delete_persistence_latency.summary(),
            tombstone_purge_age: self.tombstone_purge_age.summary(),
            data_movement: if self.bytes_ingested.get() == 0 {
                0.0
            } else {
                (self.compaction_bytes_read.get() + written) as f64
                    / self.bytes_ingested.get() as f64
            },
            get_blocks_read: self.get_blocks_read.get(),
            read_amplification: if gets == 0 {
                0.0
            } else {
                self.get_blocks_read.get() as f64 / gets as f64
            },
            tombstones: levels.iter().map(|l| l.tombstones).sum(),
            buffer,
            window: WindowStats {
                queries: self.window_queries.get(),
                components: self.window_components.get(),
                files_pruned: self.window_files_pruned.get(),
                blocks_pruned: io.mbr_blocks_pruned.get(),
                blocks: self.window_blocks.get(),
                results: self.window_results.get(),
                read_amplification: if self.window_queries.get() == 0 {
                    0.0
                } else {
                    self.window_components.get() as f64 / self.window_queries.get() as f64
                },
                latency: self.window_latency.summary(),
            },
            levels,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn compaction_stats_sum_the_levels() {
        let mib = 1_048_576;
        let levels = [
            LevelStats {
                level: 0,
                runs: 2,
                files: 2,
                bytes: 2 * mib,
                bytes_read: 10 * mib,
                bytes_written: 10 * mib,
                write_amplification: 1.0,
                ..Default::default()
            },
            LevelStats {
                level: 1,
                runs: 1,
                files: 3,
                bytes: 8 * mib,
                bytes_read: 8 * mib,
                bytes_read_level: 4 * mib,
                bytes_written: 12 * mib,
                compactions: 4,
                compaction_seconds: 0.5,
                write_amplification: 1.5,
                ..Default::default()
            },
        ];
        let table = compaction_stats_table(&levels);
        let rows: Vec<Vec<&str>> = table
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 3, "{table}");
        assert_eq!(rows[1][..4], ["L1", "1", "3", "8.0"]);
        // Sum: 22 MB written for the 10 MB that came in: WA 2.20.
        assert_eq!(
            rows[2],
            [
                "Sum", "3", "5", "10.0", "10.0", "4.0", "22.0", "0.0", "2.20", "4", "0.50", "0",
                "0"
            ]
        );
    }

    #[test]
    fn histogram_quantiles_are_within_one_percent_and_never_above_the_max() {
        let h = Histogram::default();
        // 1 µs .. 100 ms, then one outlier: the exact order statistics are
        // known.
        let mut values: Vec<u64> = (1..=100_000u64).map(|i| i * 1000).collect();
        values.push(7_777_777_777);
        for &ns in &values {
            h.record(Duration::from_nanos(ns));
        }
        let s = h.summary();
        assert_eq!(s.count, values.len() as u64);
        for (got, q) in [
            (s.p50_us, 0.5),
            (s.p90_us, 0.9),
            (s.p99_us, 0.99),
            (s.p999_us, 0.999),
        ] {
            let rank = ((values.len() as f64) * q).ceil() as usize;
            let exact = values[rank - 1] as f64 / 1000.0;
            assert!(
                got >= exact && got <= exact * 1.008,
                "q {q}: {got} vs {exact}"
            );
        }
        assert_eq!(s.max_us, 7_777_777.777);
        // A histogram of one value reports it exactly, not its bucket's end.
        let one = Histogram::default();
        one.record(Duration::from_nanos(123_456));
        let s = one.summary();
        assert_eq!((s.p50_us, s.p99_us, s.max_us), (123.456, 123.456, 123.456));
    }

    #[test]
    fn histogram_buckets_tile_the_values_in_order() {
        let mut prev_upper = None;
        for b in 0..BUCKETS {
            let upper = Histogram::upper(b);
            if let Some(p) = prev_upper {
                assert!(upper > p, "bucket {b}");
                // Its first value maps back to it.
                assert_eq!(Histogram::bucket(p + 1), b, "bucket {b}");
            }
            assert_eq!(Histogram::bucket(upper), b, "bucket {b} upper {upper}");
            prev_upper = Some(upper);
        }
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn thread_cpu_time_advances_with_work_and_not_with_sleep() {
        let start = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(30));
        let slept = thread_cpu_time() - start;
        let mut x = 0u64;
        let busy = thread_cpu_time();
        while thread_cpu_time() - busy < Duration::from_millis(5) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        assert!(slept < Duration::from_millis(30), "{slept:?} {x}");
    }
}
