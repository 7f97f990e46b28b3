//! Engine statistics: lock-free counters updated on the hot paths and a
//! serializable snapshot returned by `Db::stats()`.
//!
//! This module holds the counters and the engine's collection of them
//! ([`EngineStats`]); `histogram.rs` the latency histogram, `report.rs` the
//! snapshot types a caller reads ([`DbStats`] and its parts).

use std::sync::atomic::{AtomicU64, Ordering};

mod histogram;
mod report;
#[cfg(test)]
mod tests;

pub use histogram::{
    Histogram, LatencyHistogram, LatencyHistograms, LatencySummary, LATENCY_BUCKETS_NS,
};
pub use report::{
    compaction_stats_table, BlockCounts, BufferLevelStats, BufferStats, DbStats, FilterOutcome,
    LevelStats, WindowStats,
};

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

    #[expect(
        clippy::too_many_lines,
        reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
    )]
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
            latency_histograms: LatencyHistograms {
                put: self.put_latency.buckets(),
                get: self.get_latency.buckets(),
                scan: self.scan_latency.buckets(),
                compaction: self.compaction_latency.buckets(),
            },
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
