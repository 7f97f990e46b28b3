//! The shared block cache: decoded SST data blocks keyed by
//! `(file_id, block_offset)`.
//!
//! Keys name a file by id, not by level or path, so a file moved between
//! levels without rewriting keeps its cached blocks; when a file is deleted
//! the engine calls [`BlockCache::evict_file`]. The cache is split into
//! shards, each an LRU under its own mutex, so concurrent readers rarely
//! contend; each shard is charged by the bytes of the blocks it holds and
//! evicts least-recently-used blocks past its share of the capacity.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::sst::Block;

/// Most shards used; fewer for small caches so that one shard can still hold
/// several blocks.
const MAX_SHARDS: usize = 16;
/// Capacity per shard below which fewer shards are used.
const MIN_SHARD_BYTES: usize = 256 * 1024;

type Key = (u64, u64);

struct Entry {
    block: Arc<Block>,
    charge: usize,
    /// Position in the shard's recency order.
    tick: u64,
}

/// One LRU: a map for lookups and a tick-ordered map for recency, which keeps
/// the bookkeeping simple (O(log n) per access within a small shard).
#[derive(Default)]
struct Shard {
    map: HashMap<Key, Entry>,
    lru: BTreeMap<u64, Key>,
    next_tick: u64,
    usage: usize,
}

impl Shard {
    fn touch(&mut self, key: Key) -> Option<Arc<Block>> {
        let tick = self.next_tick;
        let entry = self.map.get_mut(&key)?;
        self.lru.remove(&entry.tick);
        entry.tick = tick;
        self.lru.insert(tick, key);
        self.next_tick += 1;
        Some(entry.block.clone())
    }

    fn remove(&mut self, key: &Key) -> Option<usize> {
        let entry = self.map.remove(key)?;
        self.lru.remove(&entry.tick);
        self.usage -= entry.charge;
        Some(entry.charge)
    }
}

/// A sharded LRU cache of data blocks, charged by block bytes.
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    capacity: usize,
    shard_capacity: usize,
    usage: AtomicUsize,
}

impl fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage())
            .field("shards", &self.shards.len())
            .finish()
    }
}

fn mix(file_id: u64, offset: u64) -> u64 {
    // A cheap avalanche (splitmix64 finaliser) so neighbouring offsets of one
    // file spread over the shards.
    let mut z = file_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ offset;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` of block data; 0 disables it
    /// (every `get` misses and `insert` does nothing).
    pub fn new(capacity_bytes: usize) -> Arc<BlockCache> {
        let shards = (capacity_bytes / MIN_SHARD_BYTES).clamp(1, MAX_SHARDS);
        Arc::new(BlockCache {
            shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
            capacity: capacity_bytes,
            shard_capacity: capacity_bytes.div_ceil(shards),
            usage: AtomicUsize::new(0),
        })
    }

    fn shard(&self, file_id: u64, offset: u64) -> Option<&Mutex<Shard>> {
        let n = self.shards.len() as u64;
        self.shards.get((mix(file_id, offset) % n.max(1)) as usize)
    }

    /// The cached block at `offset` of file `file_id`, marking it most
    /// recently used.
    pub fn get(&self, file_id: u64, offset: u64) -> Option<Arc<Block>> {
        if self.capacity == 0 {
            return None;
        }
        self.shard(file_id, offset)?.lock().touch((file_id, offset))
    }

    /// Caches a block (replacing any block at the same key), evicting least
    /// recently used blocks of the shard to make room. A block larger than a
    /// shard's share of the capacity is not cached.
    pub fn insert(&self, file_id: u64, offset: u64, block: Arc<Block>) {
        let charge = block.size();
        if self.capacity == 0 || charge > self.shard_capacity {
            return;
        }
        let Some(shard) = self.shard(file_id, offset) else {
            return;
        };
        let mut s = shard.lock();
        let key = (file_id, offset);
        let mut freed = s.remove(&key).unwrap_or(0);
        while s.usage + charge > self.shard_capacity {
            let Some((_, victim)) = s.lru.pop_first() else {
                break;
            };
            if let Some(e) = s.map.remove(&victim) {
                s.usage -= e.charge;
                freed += e.charge;
            }
        }
        let tick = s.next_tick;
        s.next_tick += 1;
        s.lru.insert(tick, key);
        s.map.insert(
            key,
            Entry {
                block,
                charge,
                tick,
            },
        );
        s.usage += charge;
        self.usage.fetch_sub(freed, Ordering::Relaxed);
        self.usage.fetch_add(charge, Ordering::Relaxed);
    }

    /// Drops every cached block of `file_id` (its file was deleted) and
    /// returns how many were dropped.
    pub fn evict_file(&self, file_id: u64) -> u64 {
        let mut count = 0u64;
        for shard in &self.shards {
            let mut s = shard.lock();
            let keys: Vec<Key> = s.map.keys().filter(|k| k.0 == file_id).copied().collect();
            for key in keys {
                if let Some(charge) = s.remove(&key) {
                    self.usage.fetch_sub(charge, Ordering::Relaxed);
                    count += 1;
                }
            }
        }
        count
    }

    /// Bytes of blocks currently cached.
    pub fn usage(&self) -> usize {
        self.usage.load(Ordering::Relaxed)
    }

    /// The configured capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    /// A real block of roughly `value_len` bytes.
    fn block(value_len: usize) -> Arc<Block> {
        let mut contents = Vec::new();
        let key = make_internal_key(b"k", 1, ValueKind::Put);
        contents.extend_from_slice(&[0, key.len() as u8]);
        crate::coding::put_varint(&mut contents, value_len as u64);
        contents.extend_from_slice(&key);
        contents.extend_from_slice(&vec![7u8; value_len]);
        contents.extend_from_slice(&0u32.to_le_bytes());
        contents.extend_from_slice(&1u32.to_le_bytes());
        Arc::new(Block::new(contents).unwrap())
    }

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let b = block(1000);
        let size = b.size();
        let cache = BlockCache::new(size * 3);
        assert_eq!(cache.shards.len(), 1);
        for off in 0..3u64 {
            cache.insert(1, off, block(1000));
        }
        assert_eq!(cache.usage(), size * 3);
        assert!(cache.get(1, 0).is_some()); // 0 is now most recent
        cache.insert(1, 3, block(1000)); // evicts 1
        assert!(cache.get(1, 1).is_none());
        assert!(cache.get(1, 0).is_some());
        assert!(cache.get(1, 2).is_some());
        assert!(cache.get(1, 3).is_some());
        assert_eq!(cache.usage(), size * 3);
        // Replacing a key does not double-charge.
        cache.insert(1, 3, block(1000));
        assert_eq!(cache.usage(), size * 3);
    }

    #[test]
    fn evict_file_counts_and_frees() {
        let cache = BlockCache::new(64 << 20);
        assert_eq!(cache.shards.len(), MAX_SHARDS);
        for off in 0..50u64 {
            cache.insert(7, off * 4096, block(100));
            cache.insert(8, off * 4096, block(100));
        }
        let before = cache.usage();
        assert_eq!(cache.evict_file(7), 50);
        assert_eq!(cache.evict_file(7), 0);
        assert_eq!(cache.usage(), before / 2);
        assert!(cache.get(7, 0).is_none());
        assert!(cache.get(8, 0).is_some());
        assert_eq!(cache.evict_file(8), 50);
        assert_eq!(cache.usage(), 0);
    }

    #[test]
    fn zero_capacity_disables() {
        let cache = BlockCache::new(0);
        cache.insert(1, 0, block(10));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage(), 0);
        assert_eq!(cache.evict_file(1), 0);
    }

    #[test]
    fn oversized_block_is_not_cached() {
        let cache = BlockCache::new(100);
        cache.insert(1, 0, block(1000));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage(), 0);
    }
}
