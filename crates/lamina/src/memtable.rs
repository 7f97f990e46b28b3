//! The memtable: an ordered map of internal keys → values.
//!
//! One writer (the group-commit leader) inserts a whole group under one
//! write lock while any number of readers look up and iterate under read
//! locks. A B-tree keeps keys (with their inline 8-byte prefix) packed in
//! nodes; measured through the server it beat a lock-free skiplist, whose
//! insert and search chased one pointer per level (48% of server CPU).
//! Iterators hold an `Arc` of the memtable and copy small batches of
//! entries, so they never hold a lock across calls.
//!
//! A Bloom filter over the inserted user keys ([`KeyFilter`], RocksDB's
//! "memtable whole-key filtering") answers most gets of keys the memtable
//! does not hold (once data outgrows the buffer, nearly all of them)
//! without a B-tree search.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use std::collections::BTreeSet;

use parking_lot::RwLock;

use crate::batch::BatchOp;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{
    append_internal_key, compare_internal, parse_internal_key, seek_key, user_key_prefix, ValueKind,
};
use crate::key_filter::{filter_keys, KeyFilter, ENTRY_OVERHEAD};
use crate::range_del::{self, RangeTombstone};

/// One entry: the internal key and the value in a single allocation, with
/// the first 8 bytes of the user key inline (big-endian, zero padded) so most
/// comparisons are decided without touching the heap.
#[derive(Debug)]
struct Entry {
    prefix: u64,
    key_len: usize,
    data: Box<[u8]>,
}

impl Entry {
    fn new(ikey_and_value: Vec<u8>, key_len: usize) -> Self {
        Entry {
            prefix: user_key_prefix(ikey_and_value.get(..key_len).unwrap_or(&[])),
            key_len,
            data: ikey_and_value.into_boxed_slice(),
        }
    }

    /// A search key holding only an internal key.
    fn probe(ikey: &[u8]) -> Self {
        Entry::new(ikey.to_vec(), ikey.len())
    }

    fn key(&self) -> &[u8] {
        self.data.get(..self.key_len).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.data.get(self.key_len..).unwrap_or(&[])
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Entry {}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Prefixes that differ order the user keys the same way.
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| compare_internal(self.key(), other.key()))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// An in-memory sorted buffer of recent writes.
#[derive(Debug)]
pub struct MemTable {
    map: RwLock<BTreeSet<Entry>>,
    /// Range tombstones, sorted by start (then newest first); few, so a
    /// sorted vector (written under the same group-commit discipline).
    ranges: RwLock<Vec<RangeTombstone>>,
    filter: Option<KeyFilter>,
    entries: AtomicUsize,
    approx_bytes: AtomicUsize,
    /// Number of the write-ahead log holding this memtable's writes.
    wal_number: u64,
    /// Wall-clock time (unix ms) of the first tombstone inserted; 0 if none.
    first_tombstone_ms: AtomicU64,
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `wal_number`,
    /// without a key filter (for replay, where nothing is looked up).
    pub fn new(wal_number: u64) -> Self {
        Self::with_filter(wal_number, 0, 0.0)
    }

    /// An empty memtable with a key filter of `bits_per_key` bits for each
    /// entry a buffer of `buffer_bytes` can hold (0 bits: no filter). The
    /// filter is sized for the smallest entries, so it holds its
    /// false-positive rate until the buffer is full.
    pub fn with_filter(wal_number: u64, buffer_bytes: usize, bits_per_key: f64) -> Self {
        MemTable {
            map: RwLock::new(BTreeSet::new()),
            ranges: RwLock::new(Vec::new()),
            filter: KeyFilter::new(filter_keys(buffer_bytes), bits_per_key),
            entries: AtomicUsize::new(0),
            approx_bytes: AtomicUsize::new(0),
            wal_number,
            first_tombstone_ms: AtomicU64::new(0),
        }
    }

    /// Inserts one entry.
    #[cfg(test)]
    pub fn add(&self, seq: u64, kind: ValueKind, key: &[u8], value: &[u8], now_ms: u64) {
        self.add_all(
            std::iter::once((seq, BatchOp::Point(kind), key, value)),
            now_ms,
        );
    }

    /// Inserts one decoded batch entry (log replay).
    pub(crate) fn add_entry(&self, seq: u64, e: &crate::batch::BatchEntry<'_>, now_ms: u64) {
        self.add_all(std::iter::once((seq, e.op, e.key, e.value)), now_ms);
    }

    /// Inserts entries `(seq, op, key, value)` under one lock (a range
    /// delete's `key` and `value` are its start and end).
    pub fn add_all<'a>(
        &self,
        entries: impl Iterator<Item = (u64, BatchOp, &'a [u8], &'a [u8])>,
        now_ms: u64,
    ) {
        let mut map = self.map.write();
        let (mut bytes, mut count) = (0, 0);
        for (seq, op, key, value) in entries {
            let kind = match op {
                BatchOp::Point(kind) => kind,
                BatchOp::DeleteRange => {
                    let _ = self.first_tombstone_ms.compare_exchange(
                        0,
                        now_ms.max(1),
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    bytes += key.len() + value.len() + 8 + ENTRY_OVERHEAD;
                    count += 1;
                    let t = RangeTombstone {
                        start: key.to_vec(),
                        end: value.to_vec(),
                        seq,
                    };
                    let mut ranges = self.ranges.write();
                    let at = ranges.partition_point(|r| {
                        r.start.as_slice() < key || (r.start == key && r.seq > seq)
                    });
                    ranges.insert(at, t);
                    continue;
                }
            };
            if kind == ValueKind::Delete {
                let _ = self.first_tombstone_ms.compare_exchange(
                    0,
                    now_ms.max(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            bytes += key.len() + value.len() + 8 + ENTRY_OVERHEAD;
            count += 1;
            if let Some(f) = &self.filter {
                f.insert(key);
            }
            let mut data = Vec::with_capacity(key.len() + 8 + value.len());
            append_internal_key(&mut data, key, seq, kind);
            let key_len = data.len();
            data.extend_from_slice(value);
            map.insert(Entry::new(data, key_len));
        }
        drop(map);
        self.approx_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.entries.fetch_add(count, Ordering::Relaxed);
    }

    /// The newest version of `user_key` visible at `snapshot_seq`:
    /// `(kind, seq, value)`. Range tombstones are not consulted (see
    /// [`MemTable::range_del_seq`]).
    pub fn get(&self, user_key: &[u8], snapshot_seq: u64) -> Option<(ValueKind, u64, Vec<u8>)> {
        if self
            .filter
            .as_ref()
            .is_some_and(|f| !f.may_contain(user_key))
        {
            return None;
        }
        let ikey = seek_key(user_key, snapshot_seq);
        let len = ikey.len();
        let target = Entry::new(ikey, len);
        let map = self.map.read();
        let e = map.range(target..).next()?;
        let parsed = parse_internal_key(e.key())?;
        (parsed.user_key == user_key).then(|| (parsed.kind, parsed.seq, e.value().to_vec()))
    }

    /// The newest range tombstone covering `user_key` visible at
    /// `snapshot_seq` (its sequence number; 0 if none).
    pub fn range_del_seq(&self, user_key: &[u8], snapshot_seq: u64) -> u64 {
        range_del::covering_seq(&self.ranges.read(), user_key, snapshot_seq)
    }

    /// The range tombstones, sorted by start (then newest first).
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        self.ranges.read().clone()
    }

    /// Approximate memory used by entries.
    pub fn approximate_bytes(&self) -> usize {
        self.approx_bytes.load(Ordering::Relaxed)
    }

    /// Number of entries (versions and range tombstones).
    pub fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The WAL that holds this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Time of the first tombstone, if any.
    pub fn first_tombstone_ms(&self) -> Option<u64> {
        match self.first_tombstone_ms.load(Ordering::Relaxed) {
            0 => None,
            t => Some(t),
        }
    }

    /// Calls `f(internal key, value)` for every entry in order, under a read
    /// lock (writers wait: meant for immutable memtables).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        for e in self.map.read().iter() {
            f(e.key(), e.value())?;
        }
        Ok(())
    }

    /// A cursor over the memtable's entries.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator {
            mem: Arc::clone(self),
            buf: Batch::default(),
            batch: 1,
            exhausted: true,
            backward: false,
        }
    }
}

/// Entries copied by the largest refill of a [`MemTableIterator`].
const MAX_BATCH: usize = 64;

/// Entries copied out of a memtable, back to back in one buffer that every
/// refill reuses: a scan allocates nothing per entry.
#[derive(Debug, Default)]
struct Batch {
    /// Each entry's internal key, then its value.
    bytes: Vec<u8>,
    /// Per entry, where its key ends and where its value ends in `bytes`
    /// (the next entry starts at the latter).
    ends: Vec<(usize, usize)>,
    /// The current entry.
    pos: usize,
}

impl Batch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.pos = 0;
    }

    fn push(&mut self, e: &Entry) {
        self.bytes.extend_from_slice(e.key());
        let key_end = self.bytes.len();
        self.bytes.extend_from_slice(e.value());
        self.ends.push((key_end, self.bytes.len()));
    }

    /// Entries from the current one on.
    fn remaining(&self) -> usize {
        self.ends.len().saturating_sub(self.pos)
    }

    /// The current entry's key and value (empty past the end).
    #[inline]
    fn current(&self) -> (&[u8], &[u8]) {
        let start = match self.pos.checked_sub(1) {
            Some(prev) => self.ends.get(prev).map_or(0, |e| e.1),
            None => 0,
        };
        match self.ends.get(self.pos) {
            Some(&(key_end, value_end)) => (
                self.bytes.get(start..key_end).unwrap_or_default(),
                self.bytes.get(key_end..value_end).unwrap_or_default(),
            ),
            None => (&[], &[]),
        }
    }
}

/// A cursor over a memtable; see the module docs for why it copies batches.
///
/// A seek copies one entry and each refill doubles the batch up to
/// [`MAX_BATCH`]: a point seek reading one entry pays for one copy, a long
/// scan amortizes the tree search over many entries. Moving backward, the
/// batches hold the entries before the current one, in descending order.
#[derive(Debug)]
pub struct MemTableIterator {
    mem: Arc<MemTable>,
    /// The current entry, then the ones that follow in the direction of
    /// travel.
    buf: Batch,
    /// Size of the next refill.
    batch: usize,
    /// True when no entry follows the last one in `buf`.
    exhausted: bool,
    /// The direction `buf` was filled in.
    backward: bool,
}

impl MemTableIterator {
    /// Copies the next batch of entries beyond `bound` in the direction of
    /// travel (after it forward, before it backward) into `buf`, replacing
    /// what it held.
    fn fill(&mut self, bound: Bound<&Entry>) {
        self.buf.clear();
        let map = self.mem.map.read();
        if self.backward {
            let entries = map.range((Bound::Unbounded, bound)).rev();
            entries.take(self.batch).for_each(|e| self.buf.push(e));
        } else {
            let entries = map.range((bound, Bound::Unbounded));
            entries.take(self.batch).for_each(|e| self.buf.push(e));
        }
        self.exhausted = self.buf.remaining() < self.batch;
        self.batch = (self.batch * 2).min(MAX_BATCH);
    }

    fn restart(&mut self, backward: bool, bound: Bound<&Entry>) {
        self.batch = 1;
        self.backward = backward;
        self.fill(bound);
    }

    /// Drops the current entry, refilling past it when `buf` runs dry.
    fn step(&mut self) {
        if self.buf.remaining() == 0 {
            return;
        }
        if self.buf.remaining() == 1 && !self.exhausted {
            let last = Entry::probe(self.buf.current().0);
            self.fill(Bound::Excluded(&last));
        } else {
            self.buf.pos += 1;
        }
    }

    /// Restarts from the current entry in the other direction.
    fn turn(&mut self) {
        if self.buf.remaining() > 0 {
            let cur = Entry::probe(self.buf.current().0);
            self.restart(!self.backward, Bound::Excluded(&cur));
        }
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.buf.remaining() > 0
    }

    fn key(&self) -> &[u8] {
        self.buf.current().0
    }

    fn value(&self) -> &[u8] {
        self.buf.current().1
    }

    fn next(&mut self) -> Result<()> {
        if self.backward {
            self.turn();
        } else {
            self.step();
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if self.backward {
            self.step();
        } else {
            self.turn();
        }
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let target = Entry::probe(target);
        self.restart(false, Bound::Included(&target));
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.restart(false, Bound::Unbounded);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.restart(true, Bound::Unbounded);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let target = Entry::probe(target);
        self.restart(true, Bound::Included(&target));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::user_key;

    #[test]
    fn get_respects_snapshots_and_tombstones() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Put, b"a", b"1", 0);
        m.add(2, ValueKind::Put, b"a", b"2", 0);
        m.add(3, ValueKind::Delete, b"a", b"", 5);
        assert_eq!(m.get(b"a", 1), Some((ValueKind::Put, 1, b"1".to_vec())));
        assert_eq!(m.get(b"a", 2), Some((ValueKind::Put, 2, b"2".to_vec())));
        assert_eq!(m.get(b"a", 9).map(|x| x.0), Some(ValueKind::Delete));
        assert_eq!(m.get(b"a", 0), None);
        assert_eq!(m.get(b"b", 9), None);
        assert_eq!(m.first_tombstone_ms(), Some(5));
        m.add_all(
            [(4, BatchOp::DeleteRange, &b"a"[..], &b"c"[..])].into_iter(),
            0,
        );
        assert_eq!(m.range_del_seq(b"a", 9), 4);
        assert_eq!(m.range_del_seq(b"b", 3), 0);
        assert_eq!(m.range_del_seq(b"c", 9), 0);
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn filtered_memtable_answers_as_an_unfiltered_one() {
        // A buffer far too small for the entries overfills the filter:
        // answers must stay right, only more searches happen.
        for buffer in [1 << 20, 1024] {
            let m = MemTable::with_filter(1, buffer, 10.0);
            let plain = MemTable::new(1);
            for i in 0..5_000u32 {
                let kind = if i % 7 == 0 {
                    ValueKind::Delete
                } else {
                    ValueKind::Put
                };
                for t in [&m, &plain] {
                    t.add(u64::from(i) + 1, kind, &(i * 2).to_be_bytes(), b"v", 0);
                }
            }
            for i in 0..10_000u32 {
                let k = i.to_be_bytes();
                assert_eq!(m.get(&k, u64::MAX), plain.get(&k, u64::MAX), "key {i}");
            }
        }
    }

    #[test]
    fn iterator_walks_everything_across_refills() {
        let m = Arc::new(MemTable::new(1));
        for i in 0..500u32 {
            m.add(u64::from(i) + 1, ValueKind::Put, &i.to_be_bytes(), b"v", 0);
        }
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut n = 0u32;
        while it.valid() {
            assert_eq!(user_key(it.key()), n.to_be_bytes());
            n += 1;
            it.next().unwrap();
        }
        assert_eq!(n, 500);
        it.seek(&seek_key(&250u32.to_be_bytes(), u64::MAX)).unwrap();
        assert_eq!(user_key(it.key()), 250u32.to_be_bytes());
    }

    #[test]
    fn iterator_moves_both_ways_across_refills() {
        use crate::iter::tests::{backward_walk, check_moves, random_moves};
        use rand::SeedableRng;
        let m = Arc::new(MemTable::new(1));
        let mut entries = Vec::new();
        for i in 0..300u32 {
            let seq = u64::from(i % 3) + 1;
            m.add(
                seq,
                ValueKind::Put,
                &(i / 3).to_be_bytes(),
                &i.to_le_bytes(),
                0,
            );
            let ikey = crate::key::make_internal_key(&(i / 3).to_be_bytes(), seq, ValueKind::Put);
            entries.push((ikey, i.to_le_bytes().to_vec()));
        }
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let mut it = m.iter();
        check_moves(&mut it, &entries, &backward_walk(entries.len()));
        for seed in 0..4 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            // Long runs of one direction grow the batches before they turn.
            let mut moves = random_moves(&mut rng, &entries, 300);
            moves.extend(std::iter::repeat_n(crate::iter::tests::Move::Prev, 150));
            moves.extend(std::iter::repeat_n(crate::iter::tests::Move::Next, 150));
            moves.extend(random_moves(&mut rng, &entries, 300));
            check_moves(&mut it, &entries, &moves);
        }
    }
}
