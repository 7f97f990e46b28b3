//! The row cache: the newest value of recently read keys, kept apart from the
//! block cache (Cassandra's row cache; the "bLSM + KV cache" baseline of seed
//! 002 §6). Entries name no file, so compactions never invalidate them;
//! writes do.
//!
//! Staleness is ruled out without a lock across the tree lookup. A write
//! brackets the moment it becomes visible with [`RowCache::begin_writes`]
//! (drops its keys, marks their shards busy) and the guard's drop (clears
//! the mark, bumps the shards' generation). A reader takes a [`Ticket`]
//! before it reads the visible sequence number and may fill only if its
//! shard was idle then and its generation is unchanged: any write that
//! could make the filled value stale either was visible before the ticket
//! or changes the generation before the fill. No entry for a key exists
//! while a write of it is in flight, so a hit never returns a value older
//! than one another reader already saw.
//!
//! Keys come from users, so shards are chosen with a randomly seeded hash.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::lru::Lru;

/// Shards; writes lock one per distinct key shard twice.
const SHARDS: usize = 16;
/// Bytes charged per entry beyond its key and value: the slot, the map
/// entry and the two allocations' headers, roughly.
const ENTRY_OVERHEAD: usize = 96;

struct Shard {
    lru: Lru<Vec<u8>, Vec<u8>, RandomState>,
    /// Writes of this shard's keys in flight.
    writing: u32,
    /// Bumped as each write finishes.
    generation: u64,
}

/// Permission to fill one key after a miss (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    shard: usize,
    generation: u64,
}

/// A sharded LRU of key → newest value, charged by key and value bytes.
pub struct RowCache {
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    shard_capacity: usize,
    usage: AtomicUsize,
}

impl RowCache {
    /// A cache holding up to `capacity_bytes` of rows.
    pub fn new(capacity_bytes: usize) -> RowCache {
        RowCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        lru: Lru::default(),
                        writing: 0,
                        generation: 0,
                    })
                })
                .collect(),
            hasher: RandomState::new(),
            shard_capacity: capacity_bytes / SHARDS,
            usage: AtomicUsize::new(0),
        }
    }

    fn shard_of(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) % SHARDS as u64) as usize
    }

    /// The cached value of `key`, or a ticket to fill it after reading the
    /// tree (`None` if a write of the shard is in flight).
    pub fn lookup(&self, key: &[u8]) -> Result<Vec<u8>, Option<Ticket>> {
        let shard = self.shard_of(key);
        let Some(m) = self.shards.get(shard) else {
            return Err(None);
        };
        let mut s = m.lock();
        if let Some(v) = s.lru.touch(key) {
            return Ok(v.clone());
        }
        Err((s.writing == 0).then_some(Ticket {
            shard,
            generation: s.generation,
        }))
    }

    /// Caches `key` → `value` read from the tree under `ticket`, unless a
    /// write of the shard began since; evicts least recently used rows past
    /// the shard's share of the capacity.
    pub fn fill(&self, ticket: Ticket, key: &[u8], value: &[u8]) {
        let charge = key.len() + value.len() + ENTRY_OVERHEAD;
        if charge > self.shard_capacity {
            return;
        }
        let Some(m) = self.shards.get(ticket.shard) else {
            return;
        };
        let mut s = m.lock();
        if s.writing > 0 || s.generation != ticket.generation {
            return;
        }
        let mut freed = s
            .lru
            .insert(key.to_vec(), value.to_vec(), charge)
            .map_or(0, |(_, c)| c);
        while s.lru.usage() > self.shard_capacity {
            match s.lru.pop_lru() {
                Some((_, _, c)) => freed += c,
                None => break,
            }
        }
        // Under the lock, so no eviction of this row is counted first.
        self.usage.fetch_add(charge, Ordering::Relaxed);
        self.usage.fetch_sub(freed, Ordering::Relaxed);
    }

    /// Drops `keys` and the keys of the `[start, end)` `ranges` (range
    /// deletes, which reach every shard) and holds their shards busy until
    /// the guard is dropped, which the writer does once the writes are
    /// visible.
    pub fn begin_writes<'a>(
        &'a self,
        keys: impl Iterator<Item = &'a [u8]>,
        ranges: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) -> WriteGuard<'a> {
        let mut busy = [false; SHARDS];
        let mut mark = |s: &mut Shard, shard: usize| {
            if let Some(b) = busy.get_mut(shard) {
                if !*b {
                    *b = true;
                    s.writing += 1;
                }
            }
        };
        for key in keys {
            let shard = self.shard_of(key);
            let Some(m) = self.shards.get(shard) else {
                continue;
            };
            let mut s = m.lock();
            if let Some((_, c)) = s.lru.remove(key) {
                self.usage.fetch_sub(c, Ordering::Relaxed);
            }
            mark(&mut s, shard);
        }
        let ranges: Vec<(&[u8], &[u8])> = ranges.collect();
        if !ranges.is_empty() {
            for (shard, m) in self.shards.iter().enumerate() {
                let mut s = m.lock();
                let gone = s.lru.remove_where(|k| {
                    ranges
                        .iter()
                        .any(|(lo, hi)| *lo <= k.as_slice() && k.as_slice() < *hi)
                });
                let freed: usize = gone.iter().map(|(_, c)| c).sum();
                self.usage.fetch_sub(freed, Ordering::Relaxed);
                mark(&mut s, shard);
            }
        }
        WriteGuard { cache: self, busy }
    }

    /// Bytes of rows cached.
    pub fn usage(&self) -> usize {
        self.usage.load(Ordering::Relaxed)
    }
}

/// Writes in flight (see [`RowCache::begin_writes`]).
pub struct WriteGuard<'a> {
    cache: &'a RowCache,
    busy: [bool; SHARDS],
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        for (m, _) in self.cache.shards.iter().zip(self.busy).filter(|(_, b)| *b) {
            let mut s = m.lock();
            s.writing = s.writing.saturating_sub(1);
            s.generation += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_hit_and_writes_invalidate() {
        let c = RowCache::new(1 << 20);
        let t = c.lookup(b"k").unwrap_err().unwrap();
        c.fill(t, b"k", b"v1");
        assert_eq!(c.lookup(b"k"), Ok(b"v1".to_vec()));
        assert_eq!(c.usage(), b"k".len() + b"v1".len() + ENTRY_OVERHEAD);
        drop(c.begin_writes([&b"k"[..]].into_iter(), std::iter::empty()));
        assert!(c.lookup(b"k").is_err());
        assert_eq!(c.usage(), 0);
    }

    #[test]
    fn a_fill_racing_a_write_is_refused() {
        let c = RowCache::new(1 << 20);
        // Ticket before the write began, fill after it ended.
        let t = c.lookup(b"k").unwrap_err().unwrap();
        drop(c.begin_writes([&b"k"[..]].into_iter(), std::iter::empty()));
        c.fill(t, b"k", b"old");
        assert!(c.lookup(b"k").is_err());
        // Ticket before, fill while the write is in flight.
        let t = c.lookup(b"k").unwrap_err().unwrap();
        let w = c.begin_writes([&b"k"[..]].into_iter(), std::iter::empty());
        c.fill(t, b"k", b"old");
        // No ticket while in flight.
        assert!(matches!(c.lookup(b"k"), Err(None)));
        drop(w);
        assert!(c.lookup(b"k").is_err());
        // Idle again: fills stick.
        let t = c.lookup(b"k").unwrap_err().unwrap();
        c.fill(t, b"k", b"new");
        assert_eq!(c.lookup(b"k"), Ok(b"new".to_vec()));
    }

    #[test]
    fn stays_within_capacity() {
        let c = RowCache::new(SHARDS * 1000);
        for i in 0..10_000u32 {
            let key = i.to_be_bytes();
            if let Err(Some(t)) = c.lookup(&key) {
                c.fill(t, &key, &[0u8; 100]);
            }
            assert!(c.usage() <= SHARDS * 1000);
        }
        assert!(c.usage() > SHARDS * 500, "the cache fills up");
    }
}
