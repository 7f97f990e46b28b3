//! The shared block cache: decoded SST blocks keyed by
//! `(file_id, block_offset)`: data blocks, and, with
//! [`crate::Options::cache_index_and_filter_blocks`], tables' index and
//! filter blocks ([`Cached`]), all charged to one capacity.
//!
//! Keys name a file by id, not by level or path, so a file moved between
//! levels without rewriting keeps its cached blocks; when a file is deleted
//! the engine calls [`BlockCache::evict_file`]. The cache is split into
//! shards, each an LRU under its own mutex, so concurrent readers rarely
//! contend; each shard is charged by the bytes of the blocks it holds and
//! evicts least-recently-used blocks past its share of the capacity.
//!
//! A shard is an [`Lru`] (O(1) lookups, touches, inserts and evictions).
//! Keys are hashed with a cheap multiplicative mix rather than SipHash: they
//! are file ids and offsets chosen by the engine, not by an adversary.
//!
//! Each shard also keeps a few buffers of blocks it evicted (when no reader
//! still holds them) and hands them out on a miss, so that reading the
//! replacement block neither allocates nor zero-fills a fresh buffer. They
//! are bounded ([`MAX_SPARE`] per shard, each at most [`MAX_SPARE_BYTES`])
//! and not charged against the capacity.
//!
//! Index and filter blocks a table pins
//! ([`crate::Options::pin_l0_filter_and_index_blocks_in_cache`]) leave the
//! LRU lists but stay charged ([`BlockCache::pin`]): they shrink every
//! shard's room for the blocks that can be evicted.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::bloom::BloomFilter;
use super::format::FenceIndex;
use super::Block;
use crate::lru::Lru;

/// Most shards used; fewer for small caches so that one shard can still hold
/// several blocks.
const MAX_SHARDS: usize = 16;
/// Capacity per shard below which fewer shards are used.
const MIN_SHARD_BYTES: usize = 256 * 1024;
/// Evicted block buffers kept per shard for reuse.
const MAX_SPARE: usize = 2;
/// Largest buffer capacity kept for reuse.
const MAX_SPARE_BYTES: usize = 64 * 1024;

type Key = (u64, u64);

/// Hasher for [`Key`]: `(u64, u64)` hashes as two `write_u64` calls.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not used by `Key`; kept total for any other input.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn finish(&self) -> u64 {
        let z = (self.0 ^ (self.0 >> 32)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z ^ (z >> 29)
    }
}

/// A cached block, decoded.
#[derive(Debug, Clone)]
pub enum Cached {
    /// A data block.
    Data(Arc<Block>),
    /// A table's index block.
    Index(Arc<FenceIndex>),
    /// A table's filter block.
    Filter(Arc<BloomFilter>),
}

impl Cached {
    /// Bytes charged to the cache: the decoded block's memory.
    pub fn charge(&self) -> usize {
        match self {
            Cached::Data(b) => b.size(),
            Cached::Index(i) => i.memory_bytes(),
            Cached::Filter(f) => f.memory_bytes(),
        }
    }
}

/// One LRU of blocks, with the buffers it can recycle and its per-file
/// counts.
#[derive(Default)]
struct Shard {
    lru: Lru<Key, Cached, BuildHasherDefault<KeyHasher>>,
    /// Buffers of evicted blocks, for [`BlockCache::lookup`] misses.
    spare: Vec<Vec<u8>>,
    /// Data blocks of each file this shard holds, kept as blocks are
    /// loaded and evicted (LSbM's per-file `cached` counter, seed 002
    /// §4.2).
    per_file: HashMap<u64, u64, BuildHasherDefault<KeyHasher>>,
}

impl Shard {
    fn touch(&mut self, key: Key) -> Option<&Cached> {
        self.lru.touch(&key)
    }

    fn touch_data(&mut self, key: Key) -> Option<Arc<Block>> {
        match self.touch(key)? {
            Cached::Data(b) => Some(Arc::clone(b)),
            _ => None,
        }
    }

    /// Counts one block of `file` out, if it was a data block.
    fn forget(&mut self, file: u64, value: &Cached) {
        if !matches!(value, Cached::Data(_)) {
            return;
        }
        if let Some(n) = self.per_file.get_mut(&file) {
            *n -= 1;
            if *n == 0 {
                self.per_file.remove(&file);
            }
        }
    }

    fn remove(&mut self, key: &Key) -> Option<usize> {
        let (value, charge) = self.lru.remove(key)?;
        self.forget(key.0, &value);
        Some(charge)
    }

    /// Keeps an evicted data block's buffer for reuse if nobody else holds
    /// the block and there is room; otherwise just drops it.
    fn recycle(&mut self, value: Cached) {
        let Cached::Data(block) = value else {
            return;
        };
        if self.spare.len() < MAX_SPARE {
            if let Some(buf) = Arc::into_inner(block).and_then(Block::into_data) {
                if buf.capacity() <= MAX_SPARE_BYTES {
                    self.spare.push(buf);
                }
            }
        }
    }

    /// A spare buffer with at least `capacity` bytes of capacity.
    fn take_spare(&mut self, capacity: usize) -> Option<Vec<u8>> {
        let i = self.spare.iter().position(|b| b.capacity() >= capacity)?;
        Some(self.spare.swap_remove(i))
    }

    /// Links a new entry, most recently used if `hot`, else least; the key
    /// must not be present.
    fn add(&mut self, key: Key, value: Cached, charge: usize, hot: bool) {
        let data = matches!(value, Cached::Data(_));
        if hot {
            self.lru.insert(key, value, charge);
        } else {
            self.lru.insert_cold(key, value, charge);
        }
        if data {
            *self.per_file.entry(key.0).or_insert(0) += 1;
        }
    }
}

/// Outcome of [`BlockCache::lookup`].
#[derive(Debug)]
pub enum Lookup {
    /// The cached block, now the most recently used.
    Hit(Arc<Block>),
    /// Not cached: a buffer to read the block into (see `lookup`).
    Miss(Vec<u8>),
}

/// A sharded LRU cache of blocks, charged by block bytes.
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    capacity: usize,
    shard_capacity: usize,
    /// Bytes in the LRU lists.
    usage: AtomicUsize,
    /// Bytes pinned outside them ([`BlockCache::pin`]).
    pinned: AtomicUsize,
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
            pinned: AtomicUsize::new(0),
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
        self.shard(file_id, offset)?
            .lock()
            .touch_data((file_id, offset))
    }

    /// The cached index or filter block at `offset` of file `file_id`
    /// (whatever is cached there), marking it most recently used.
    pub fn get_meta(&self, file_id: u64, offset: u64) -> Option<Cached> {
        if self.capacity == 0 {
            return None;
        }
        self.shard(file_id, offset)?
            .lock()
            .touch((file_id, offset))
            .cloned()
    }

    /// Caches an index or filter block as the most recently used, like
    /// [`BlockCache::insert`].
    pub fn insert_meta(&self, file_id: u64, offset: u64, value: Cached) {
        self.insert_at(file_id, offset, value, true);
    }

    /// Takes the block at `offset` of file `file_id` out of the LRU lists
    /// (if there) and charges `charge` bytes as pinned until
    /// [`BlockCache::unpin`]: the table holding the block keeps it, and
    /// every shard has that much less room for the blocks it can evict.
    pub fn pin(&self, file_id: u64, offset: u64, charge: usize) {
        if let Some(shard) = self.shard(file_id, offset) {
            if let Some(freed) = shard.lock().remove(&(file_id, offset)) {
                self.usage.fetch_sub(freed, Ordering::Relaxed);
            }
        }
        self.pinned.fetch_add(charge, Ordering::Relaxed);
    }

    /// Ends a [`BlockCache::pin`] of `charge` bytes whose block is gone
    /// (its table closed).
    pub fn release_pin(&self, charge: usize) {
        self.pinned.fetch_sub(charge, Ordering::Relaxed);
    }

    /// Ends a [`BlockCache::pin`]: the block goes back into the LRU lists
    /// as the most recently used.
    pub fn unpin(&self, file_id: u64, offset: u64, value: Cached) {
        self.pinned.fetch_sub(value.charge(), Ordering::Relaxed);
        self.insert_meta(file_id, offset, value);
    }

    /// Whether the block at `offset` of file `file_id` is cached; unlike
    /// [`BlockCache::get`], its recency is unchanged.
    pub fn contains(&self, file_id: u64, offset: u64) -> bool {
        self.capacity > 0
            && self
                .shard(file_id, offset)
                .is_some_and(|s| s.lock().lru.contains(&(file_id, offset)))
    }

    /// Like [`BlockCache::get`], but a miss returns a buffer to read the block
    /// into: a recycled one of capacity `>= buffer_capacity` if the shard has
    /// one, else an empty `Vec` (no allocation). Its contents are stale
    /// bytes of an old block: the caller must overwrite all it uses.
    pub fn lookup(&self, file_id: u64, offset: u64, buffer_capacity: usize) -> Lookup {
        if self.capacity == 0 {
            return Lookup::Miss(Vec::new());
        }
        let Some(shard) = self.shard(file_id, offset) else {
            return Lookup::Miss(Vec::new());
        };
        let mut s = shard.lock();
        match s.touch_data((file_id, offset)) {
            Some(b) => Lookup::Hit(b),
            None => Lookup::Miss(s.take_spare(buffer_capacity).unwrap_or_default()),
        }
    }

    /// Caches a block (replacing any block at the same key) as the most
    /// recently used, evicting least recently used blocks of the shard to
    /// make room. A block larger than a shard's share of the capacity is not
    /// cached.
    pub fn insert(&self, file_id: u64, offset: u64, block: Arc<Block>) {
        self.insert_at(file_id, offset, Cached::Data(block), true);
    }

    /// Like [`BlockCache::insert`], but the block becomes the shard's least
    /// recently used: the next insertion evicts it unless a read touches it
    /// first. For blocks a scan steps through, so that a long scan replaces
    /// its own blocks rather than the ones point reads keep using (after
    /// evicting at most one block per shard that was there before it).
    pub fn insert_cold(&self, file_id: u64, offset: u64, block: Arc<Block>) {
        self.insert_at(file_id, offset, Cached::Data(block), false);
    }

    /// Each shard's room for blocks in its LRU list: its share of the
    /// capacity less its share of the pinned bytes.
    fn shard_room(&self) -> usize {
        let pinned = self.pinned.load(Ordering::Relaxed);
        self.shard_capacity
            .saturating_sub(pinned.div_ceil(self.shards.len().max(1)))
    }

    fn insert_at(&self, file_id: u64, offset: u64, value: Cached, hot: bool) {
        let charge = value.charge();
        let room = self.shard_room();
        if self.capacity == 0 || charge > room {
            return;
        }
        let Some(shard) = self.shard(file_id, offset) else {
            return;
        };
        let mut s = shard.lock();
        let key = (file_id, offset);
        let mut freed = s.remove(&key).unwrap_or(0);
        while s.lru.usage() + charge > room {
            let Some((victim_key, victim, c)) = s.lru.pop_lru() else {
                break;
            };
            s.forget(victim_key.0, &victim);
            freed += c;
            s.recycle(victim);
        }
        s.add(key, value, charge, hot);
        drop(s);
        self.usage.fetch_sub(freed, Ordering::Relaxed);
        self.usage.fetch_add(charge, Ordering::Relaxed);
    }

    /// Drops every cached block of `file_id` (its file was deleted) and
    /// returns how many were dropped.
    pub fn evict_file(&self, file_id: u64) -> u64 {
        let mut count = 0u64;
        for shard in &self.shards {
            let mut s = shard.lock();
            for (_, charge) in s.lru.remove_where(|k| k.0 == file_id) {
                self.usage.fetch_sub(charge, Ordering::Relaxed);
                count += 1;
            }
            s.per_file.remove(&file_id);
        }
        count
    }

    /// Data blocks of file `file_id` currently cached (loads minus
    /// evictions).
    pub fn cached_blocks(&self, file_id: u64) -> u64 {
        self.shards
            .iter()
            .map(|s| s.lock().per_file.get(&file_id).copied().unwrap_or(0))
            .sum()
    }

    /// Bytes of blocks currently cached, pinned ones included.
    pub fn usage(&self) -> usize {
        self.usage.load(Ordering::Relaxed) + self.pinned.load(Ordering::Relaxed)
    }

    /// Bytes of blocks pinned ([`BlockCache::pin`]).
    pub fn pinned_usage(&self) -> usize {
        self.pinned.load(Ordering::Relaxed)
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
        assert_eq!((cache.cached_blocks(7), cache.cached_blocks(8)), (50, 50));
        assert!(cache.contains(7, 49 * 4096) && !cache.contains(7, 50 * 4096));
        assert_eq!(cache.evict_file(7), 50);
        assert_eq!(cache.cached_blocks(7), 0);
        assert_eq!(cache.evict_file(7), 0);
        assert_eq!(cache.usage(), before / 2);
        assert!(cache.get(7, 0).is_none());
        assert!(cache.get(8, 0).is_some());
        assert_eq!(cache.evict_file(8), 50);
        assert_eq!(cache.usage(), 0);
    }

    #[test]
    fn matches_a_reference_lru() {
        // One shard; blocks of three sizes; random gets, inserts and file
        // evictions, checked against a list kept in recency order.
        let sizes: Vec<Arc<Block>> = [100, 700, 2000].iter().map(|&n| block(n)).collect();
        let cap = 10 * sizes[1].size();
        let cache = BlockCache::new(cap);
        assert_eq!(cache.shards.len(), 1);
        let mut model: Vec<(Key, usize)> = Vec::new(); // most recent last
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..20_000 {
            let key = (rnd(3), rnd(40));
            match rnd(10) {
                0..=4 => {
                    let hit = cache.get(key.0, key.1);
                    let pos = model.iter().position(|(k, _)| *k == key);
                    assert_eq!(hit.is_some(), pos.is_some());
                    if let Some(p) = pos {
                        let e = model.remove(p);
                        assert_eq!(hit.map(|b| b.size()), Some(e.1));
                        model.push(e);
                    }
                }
                5..=8 => {
                    let b = sizes[rnd(3) as usize].clone();
                    let charge = b.size();
                    cache.insert(key.0, key.1, b);
                    model.retain(|(k, _)| *k != key);
                    while model.iter().map(|e| e.1).sum::<usize>() + charge > cap {
                        model.remove(0);
                    }
                    model.push((key, charge));
                }
                _ => {
                    let before = model.len();
                    model.retain(|(k, _)| k.0 != key.0);
                    assert_eq!(cache.evict_file(key.0), (before - model.len()) as u64);
                }
            }
            assert_eq!(cache.usage(), model.iter().map(|e| e.1).sum::<usize>());
            // Per-file counts follow every load and eviction.
            for file in 0..3 {
                let expected = model.iter().filter(|(k, _)| k.0 == file).count() as u64;
                assert_eq!(cache.cached_blocks(file), expected);
            }
        }
    }

    #[test]
    fn lookup_recycles_evicted_buffers() {
        let size = block(1000).size();
        let cache = BlockCache::new(size * 2);
        cache.insert(1, 0, block(1000));
        let held = cache.get(1, 0);
        cache.insert(1, 1, block(1000));
        match cache.lookup(1, 2, size) {
            Lookup::Miss(buf) => assert_eq!(buf.capacity(), 0, "nothing evicted yet"),
            Lookup::Hit(_) => panic!("unexpected hit"),
        }
        // Evicts 0 (still held by a reader: dropped, not recycled), then 1.
        cache.insert(1, 2, block(1000));
        cache.insert(1, 3, block(1000));
        drop(held);
        assert!(matches!(cache.lookup(1, 3, size), Lookup::Hit(_)));
        match cache.lookup(1, 4, MAX_SPARE_BYTES + 1) {
            Lookup::Miss(buf) => assert_eq!(buf.capacity(), 0, "too small to reuse"),
            Lookup::Hit(_) => panic!("unexpected hit"),
        }
        match cache.lookup(1, 4, size) {
            Lookup::Miss(buf) => assert!(buf.capacity() >= size),
            Lookup::Hit(_) => panic!("unexpected hit"),
        }
        match cache.lookup(1, 4, 1) {
            Lookup::Miss(buf) => assert_eq!(buf.capacity(), 0, "only one was recycled"),
            Lookup::Hit(_) => panic!("unexpected hit"),
        }
        assert_eq!(cache.usage(), size * 2);
    }

    #[test]
    fn cold_insertions_replace_each_other_not_the_hot_blocks() {
        let size = block(1000).size();
        let cache = BlockCache::new(size * 4);
        assert_eq!(cache.shards.len(), 1);
        for off in 0..3u64 {
            cache.insert(1, off, block(1000));
        }
        // A scan of 100 blocks through the one free slot.
        for off in 100..200u64 {
            cache.insert_cold(2, off, block(1000));
            assert!(cache.contains(2, off));
        }
        for off in 0..3u64 {
            assert!(cache.contains(1, off), "hot block {off} evicted");
        }
        assert_eq!(cache.cached_blocks(2), 1);
        assert_eq!(cache.usage(), size * 4);
        // A cold block that is read again is promoted: the next cold
        // insertion evicts the hot set's least recent block instead.
        assert!(cache.get(2, 199).is_some());
        cache.insert_cold(2, 200, block(1000));
        assert!(cache.contains(2, 199) && cache.contains(2, 200));
        assert!(!cache.contains(1, 0));
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
