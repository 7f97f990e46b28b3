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
    /// Block cache hits per kind: data, index, filter.
    pub cache_hits: [Counter; 3],
    /// Block cache misses per kind: data, index, filter.
    pub cache_misses: [Counter; 3],
    /// Cached blocks dropped because their file was deleted.
    pub cache_invalidated_blocks: Counter,
    /// Blocks read from files (cache misses that went to the file).
    pub blocks_read: Counter,
    /// Bytes read from SST files.
    pub bytes_read: Counter,
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
