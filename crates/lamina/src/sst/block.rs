//! Data blocks: prefix-compressed sorted entries with restart points.
//!
//! ```text
//! entry*  restart[0..n] (u32 LE each)  n (u32 LE)
//! entry = varint shared | varint unshared | varint value_len | key[shared..] | value
//! ```
//!
//! Every `restart_interval`-th entry stores its whole key (`shared == 0`) and
//! its offset is listed in the restart array, so a seek binary-searches the
//! restarts and then scans at most one interval. Entries decode only
//! forward: a step back rescans from the restart point before the current
//! entry (at most one interval too) and keeps what it decoded on the way,
//! so the steps back after it cost no decoding. Decoding never trusts a
//! length: every field is checked against the bytes actually present.

use std::sync::Arc;

use crate::coding::{get_varint, put_varint};
use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key};
use crate::vfs::{BlockBytes, Mapping};

use crate::coding::DecodeResult;

/// Accumulates entries of one data block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    interval: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// A builder placing a restart point every `interval` entries (min 1).
    pub fn new(interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            counter: 0,
            interval: interval.max(1),
            last_key: Vec::new(),
        }
    }

    /// True when no entry has been added since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.restarts.is_empty()
    }

    /// Size the block would have if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    /// Appends an entry; the caller guarantees key order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let shared = if self.restarts.is_empty() || self.counter >= self.interval {
            let off = u32::try_from(self.buf.len())
                .map_err(|_| Error::InvalidArgument("data block exceeds 4 GiB".into()))?;
            self.restarts.push(off);
            self.counter = 0;
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let unshared = key.get(shared..).unwrap_or_default();
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, unshared.len() as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        if u32::try_from(self.buf.len()).is_err() {
            return Err(Error::InvalidArgument("data block exceeds 4 GiB".into()));
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.counter += 1;
        Ok(())
    }

    /// Appends the restart array and returns the block contents, resetting
    /// the builder for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.counter = 0;
        self.last_key.clear();
        out
    }
}

/// A decoded data block, shared through the block cache; its checksum was
/// verified unless [`Block::checksum_verified`] says otherwise.
#[derive(Debug)]
pub struct Block {
    data: BlockBytes,
    restarts_offset: usize,
    /// A `u32` as stored, so that with the flag below the block is no
    /// larger than without it (a larger `Arc<Block>` moved to a costlier
    /// allocator size class: +230 instructions per point read).
    num_restarts: u32,
    /// False for a block read with [`crate::Options::verify_checksums`]
    /// off: a reader that must verify does not take it from the cache.
    checksum_verified: bool,
}

fn read_u32_at(data: &[u8], pos: usize) -> Option<u32> {
    let bytes = data.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

impl Block {
    /// Validates the restart array of `data` (block contents without trailer).
    /// Restarts must start at 0, strictly increase and point inside the entry
    /// area; a data block always holds at least one entry.
    pub fn new(data: Vec<u8>) -> DecodeResult<Block> {
        Block::decode(BlockBytes::from_vec(data))
    }

    /// [`Block::new`] for the contents at `range` of a mapped file, which
    /// the block shares instead of copying.
    pub fn mapped(map: Arc<Mapping>, range: std::ops::Range<usize>) -> DecodeResult<Block> {
        Block::decode(BlockBytes::from_mapping(map, range).ok_or("block outside the mapped file")?)
    }

    fn decode(bytes: BlockBytes) -> DecodeResult<Block> {
        let data = bytes.bytes();
        let len = data.len();
        let count_pos = len.checked_sub(4).ok_or("block too short")?;
        let restart_count = read_u32_at(data, count_pos).ok_or("block too short")?;
        let num_restarts = restart_count as usize;
        let array_len = num_restarts.checked_mul(4).ok_or("bad restart count")?;
        let restarts_offset = count_pos
            .checked_sub(array_len)
            .ok_or("restart count exceeds block size")?;
        if num_restarts == 0 || restarts_offset == 0 {
            return Err("block has no entries");
        }
        let mut prev: Option<usize> = None;
        for i in 0..num_restarts {
            let r = read_u32_at(data, restarts_offset + 4 * i).ok_or("bad restart array")? as usize;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restarts_offset,
            };
            if !ok {
                return Err("restart points out of order or out of range");
            }
            prev = Some(r);
        }
        Ok(Block {
            data: bytes,
            restarts_offset,
            num_restarts: restart_count,
            checksum_verified: true,
        })
    }

    /// The block, marked as decoded from bytes whose checksum was not
    /// checked.
    pub fn unverified(self) -> Block {
        Block {
            checksum_verified: false,
            ..self
        }
    }

    /// Whether the bytes the block was decoded from passed their checksum
    /// (always, unless read with [`crate::Options::verify_checksums`] off).
    pub fn checksum_verified(&self) -> bool {
        self.checksum_verified
    }

    /// Bytes held (what the block cache charges).
    pub fn size(&self) -> usize {
        self.data().len()
    }

    /// The block's contents.
    #[inline]
    fn data(&self) -> &[u8] {
        self.data.bytes()
    }

    /// The block's buffer, for reuse by the next block read; `None` for a
    /// block of a mapped file.
    pub fn into_data(self) -> Option<Vec<u8>> {
        self.data.into_vec()
    }

    fn num_restarts(&self) -> usize {
        self.num_restarts as usize
    }

    fn restart(&self, i: usize) -> usize {
        // Validated in `new`; the fallback is unreachable but keeps this total.
        read_u32_at(self.data(), self.restarts_offset + 4 * i)
            .map_or(self.restarts_offset, |r| r as usize)
    }
}

/// One decoded entry header: where its key delta and value are.
struct EntryHeader {
    shared: usize,
    key_start: usize,
    key_end: usize,
    value_end: usize,
}

#[inline]
fn decode_header(block: &Block, pos: usize) -> DecodeResult<EntryHeader> {
    let area = block
        .data()
        .get(..block.restarts_offset)
        .ok_or("bad entry offset")?;
    // Fast path: all three varints fit in one byte (short keys and values).
    if let Some(&[shared, unshared, value_len]) = area.get(pos..pos.saturating_add(3)) {
        if (shared | unshared | value_len) < 0x80 {
            let key_start = pos + 3;
            let key_end = key_start + usize::from(unshared);
            let value_end = key_end + usize::from(value_len);
            if value_end > area.len() {
                return Err("block entry overruns the block");
            }
            return Ok(EntryHeader {
                shared: usize::from(shared),
                key_start,
                key_end,
                value_end,
            });
        }
    }
    decode_header_slow(area, pos)
}

/// [`decode_header`] for multi-byte varints, kept out of line so the fast
/// path inlines into the scan loop.
#[inline(never)]
fn decode_header_slow(area: &[u8], pos: usize) -> DecodeResult<EntryHeader> {
    let mut cur = area.get(pos..).ok_or("bad entry offset")?;
    let bad = "malformed block entry";
    let shared = usize::try_from(get_varint(&mut cur).ok_or(bad)?).map_err(|_| bad)?;
    let unshared = usize::try_from(get_varint(&mut cur).ok_or(bad)?).map_err(|_| bad)?;
    let value_len = usize::try_from(get_varint(&mut cur).ok_or(bad)?).map_err(|_| bad)?;
    let key_start = area.len() - cur.len();
    let key_end = key_start.checked_add(unshared).ok_or(bad)?;
    let value_end = key_end.checked_add(value_len).ok_or(bad)?;
    if value_end > area.len() {
        return Err("block entry overruns the block");
    }
    Ok(EntryHeader {
        shared,
        key_start,
        key_end,
        value_end,
    })
}

/// Keys up to this long are assembled in place, without a heap allocation.
const INLINE_KEY: usize = 48;

/// The current key of a [`BlockIter`]: in `inline` while it fits, else all of
/// it in `heap`.
#[derive(Debug)]
struct KeyBuf {
    len: usize,
    inline: [u8; INLINE_KEY],
    heap: Vec<u8>,
}

impl KeyBuf {
    fn new() -> Self {
        KeyBuf {
            len: 0,
            inline: [0; INLINE_KEY],
            heap: Vec::new(),
        }
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        if self.len <= INLINE_KEY {
            self.inline.get(..self.len).unwrap_or_default()
        } else {
            &self.heap
        }
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `shared` bytes and appends `delta`; `None` if
    /// `shared` exceeds the current length.
    #[inline]
    fn set(&mut self, shared: usize, delta: &[u8]) -> Option<()> {
        if shared > self.len {
            return None;
        }
        let new_len = shared.checked_add(delta.len())?;
        if new_len <= INLINE_KEY {
            if self.len > INLINE_KEY {
                self.inline
                    .get_mut(..shared)?
                    .copy_from_slice(self.heap.get(..shared)?);
            }
            self.inline.get_mut(shared..new_len)?.copy_from_slice(delta);
        } else {
            if self.len <= INLINE_KEY {
                self.heap.clear();
                self.heap.extend_from_slice(self.inline.get(..shared)?);
            } else {
                self.heap.truncate(shared);
            }
            self.heap.extend_from_slice(delta);
        }
        self.len = new_len;
        Some(())
    }
}

/// A cursor over one block. Errors carry a reason only; the table iterator
/// attaches the file name and block offset.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    key: KeyBuf,
    value_start: usize,
    value_end: usize,
    /// Offset of the current entry (where `prev` looks back from).
    pos: usize,
    /// Offset of the entry after the current one.
    next_pos: usize,
    valid: bool,
    /// The entries a backward rescan decoded before the one it wanted,
    /// oldest first, their keys back to back in `behind_keys`: the next
    /// `prev`s take them from here instead of rescanning the restart
    /// interval once per step (RocksDB's block iterator keeps them the
    /// same way). Used only while the last one ends where the current
    /// entry starts; the block never changes, so they stay right.
    behind: Vec<Behind>,
    behind_keys: Vec<u8>,
}

/// An entry kept by a backward rescan (see [`BlockIter::behind`]).
#[derive(Debug, Clone, Copy)]
struct Behind {
    pos: usize,
    next_pos: usize,
    value_start: usize,
    value_end: usize,
    /// Where its key ends in `behind_keys` (it starts where the previous
    /// one's ends).
    key_end: usize,
}

impl BlockIter {
    /// An unpositioned iterator.
    pub fn new(block: Arc<Block>) -> Self {
        BlockIter {
            block,
            key: KeyBuf::new(),
            value_start: 0,
            value_end: 0,
            pos: 0,
            next_pos: 0,
            valid: false,
            behind: Vec::new(),
            behind_keys: Vec::new(),
        }
    }

    /// True while positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Current internal key (empty when invalid).
    pub fn key(&self) -> &[u8] {
        if self.valid {
            self.key.as_slice()
        } else {
            &[]
        }
    }

    /// Current value (empty when invalid).
    pub fn value(&self) -> &[u8] {
        if self.valid {
            self.block
                .data()
                .get(self.value_start..self.value_end)
                .unwrap_or_default()
        } else {
            &[]
        }
    }

    /// Decodes the entry at `next_pos`, or becomes invalid at the end.
    fn parse_next(&mut self) -> DecodeResult<()> {
        if self.next_pos >= self.block.restarts_offset {
            self.valid = false;
            return Ok(());
        }
        self.valid = false;
        let h = decode_header(&self.block, self.next_pos)?;
        let delta = self
            .block
            .data()
            .get(h.key_start..h.key_end)
            .ok_or("block entry overruns the block")?;
        self.key
            .set(h.shared, delta)
            .ok_or("shared prefix longer than previous key")?;
        if parse_internal_key(self.key.as_slice()).is_none() {
            return Err("entry key is not a valid internal key");
        }
        self.value_start = h.key_end;
        self.value_end = h.value_end;
        self.pos = self.next_pos;
        self.next_pos = h.value_end;
        self.valid = true;
        Ok(())
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.next_pos = self.block.restart(i);
        self.valid = false;
    }

    /// The full key stored at restart point `i` (whose `shared` must be 0).
    fn restart_key(&self, i: usize) -> DecodeResult<&[u8]> {
        let h = decode_header(&self.block, self.block.restart(i))?;
        if h.shared != 0 {
            return Err("restart entry shares a prefix");
        }
        self.block
            .data()
            .get(h.key_start..h.key_end)
            .ok_or("block entry overruns the block")
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) -> DecodeResult<()> {
        self.seek_to_restart(0);
        self.parse_next()
    }

    /// Advances; a no-op when invalid.
    pub fn next(&mut self) -> DecodeResult<()> {
        if !self.valid {
            return Ok(());
        }
        self.parse_next()
    }

    /// Decodes entries from restart point `i` on up to the one ending at
    /// `end` (the start of the entry after it, or the end of the entry
    /// area): the step back of `prev` and `seek_to_last`.
    /// The entries decoded before it are kept for the next `prev`s.
    fn scan_to(&mut self, i: usize, end: usize) -> DecodeResult<()> {
        self.seek_to_restart(i);
        self.behind.clear();
        self.behind_keys.clear();
        loop {
            self.parse_next()?;
            if !self.valid {
                return Err("block entries end before the entry sought");
            }
            if self.next_pos >= end {
                break;
            }
            self.behind_keys.extend_from_slice(self.key.as_slice());
            self.behind.push(Behind {
                pos: self.pos,
                next_pos: self.next_pos,
                value_start: self.value_start,
                value_end: self.value_end,
                key_end: self.behind_keys.len(),
            });
        }
        if self.next_pos != end {
            self.valid = false;
            return Err("entries overlap the entry that follows");
        }
        Ok(())
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) -> DecodeResult<()> {
        let last = self.block.num_restarts().saturating_sub(1);
        self.scan_to(last, self.block.restarts_offset)
    }

    /// Steps back to the previous entry (invalid before the first); a no-op
    /// when invalid. Rescans from the restart point before the current
    /// entry, as entries are only decodable forward.
    pub fn prev(&mut self) -> DecodeResult<()> {
        if !self.valid {
            return Ok(());
        }
        if self.prev_from_behind()? {
            return Ok(());
        }
        let original = self.pos;
        // Restart points before the current entry (restart 0 is offset 0).
        let (mut before, mut hi) = (0, self.block.num_restarts());
        while before < hi {
            let mid = before + (hi - before) / 2;
            if self.block.restart(mid) < original {
                before = mid + 1;
            } else {
                hi = mid;
            }
        }
        match before.checked_sub(1) {
            Some(i) => self.scan_to(i, original),
            None => {
                self.valid = false;
                Ok(())
            }
        }
    }

    /// Steps back to the entry kept by the last rescan if it is the one
    /// just before the current entry; false if there is none.
    fn prev_from_behind(&mut self) -> DecodeResult<bool> {
        let Some(&e) = self.behind.last().filter(|e| e.next_pos == self.pos) else {
            return Ok(false);
        };
        self.behind.pop();
        let start = self.behind.last().map_or(0, |b| b.key_end);
        let key = self
            .behind_keys
            .get(start..e.key_end)
            .ok_or("kept entry out of range")?;
        self.key.set(0, key).ok_or("kept entry out of range")?;
        self.behind_keys.truncate(start);
        self.pos = e.pos;
        self.next_pos = e.next_pos;
        self.value_start = e.value_start;
        self.value_end = e.value_end;
        Ok(true)
    }

    /// Positions at the first entry `>= target` (invalid if none).
    pub fn seek(&mut self, target: &[u8]) -> DecodeResult<()> {
        // Largest restart whose key is < target: the answer lies after it.
        let mut left = 0usize;
        let mut right = self.block.num_restarts().saturating_sub(1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            if compare_internal(self.restart_key(mid)?, target).is_lt() {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        loop {
            self.parse_next()?;
            if !self.valid || !compare_internal(self.key.as_slice(), target).is_lt() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    fn build(n: usize, interval: usize) -> (Arc<Block>, Entries) {
        let mut b = BlockBuilder::new(interval);
        let mut entries = Vec::new();
        for i in 0..n {
            let k = make_internal_key(format!("key{:05}", i * 2).as_bytes(), 7, ValueKind::Put);
            let v = format!("value{i}").into_bytes();
            b.add(&k, &v).unwrap();
            entries.push((k, v));
        }
        (Arc::new(Block::new(b.finish()).unwrap()), entries)
    }

    #[test]
    fn iterate_and_seek() {
        for interval in [1, 3, 16] {
            let (block, entries) = build(100, interval);
            let mut it = BlockIter::new(block.clone());
            it.seek_to_first().unwrap();
            for (k, v) in &entries {
                assert!(it.valid());
                assert_eq!(it.key(), &k[..]);
                assert_eq!(it.value(), &v[..]);
                it.next().unwrap();
            }
            assert!(!it.valid());
            for i in 0..201 {
                let target =
                    make_internal_key(format!("key{:05}", i).as_bytes(), 7, ValueKind::Put);
                it.seek(&target).unwrap();
                let expect = entries
                    .iter()
                    .find(|(k, _)| !compare_internal(k, &target).is_lt());
                match expect {
                    Some((k, _)) => assert_eq!(it.key(), &k[..]),
                    None => assert!(!it.valid()),
                }
            }
        }
    }

    /// A block cursor as an [`InternalIterator`], for the shared oracle walk.
    struct AsInternal(BlockIter);

    impl crate::iter::InternalIterator for AsInternal {
        fn valid(&self) -> bool {
            self.0.valid()
        }
        fn key(&self) -> &[u8] {
            self.0.key()
        }
        fn value(&self) -> &[u8] {
            self.0.value()
        }
        fn next(&mut self) -> crate::Result<()> {
            self.0.next().map_err(|r| Error::corruption("block", 0, r))
        }
        fn prev(&mut self) -> crate::Result<()> {
            self.0.prev().map_err(|r| Error::corruption("block", 0, r))
        }
        fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
            self.0
                .seek(target)
                .map_err(|r| Error::corruption("block", 0, r))
        }
        fn seek_to_first(&mut self) -> crate::Result<()> {
            self.0
                .seek_to_first()
                .map_err(|r| Error::corruption("block", 0, r))
        }
        fn seek_to_last(&mut self) -> crate::Result<()> {
            self.0
                .seek_to_last()
                .map_err(|r| Error::corruption("block", 0, r))
        }
    }

    #[test]
    fn iterate_backward_across_restart_intervals() {
        use crate::iter::tests::{backward_walk, check_moves, random_moves};
        use rand::SeedableRng;
        for interval in [1, 2, 3, 7, 16, 200] {
            for n in [1, 2, 15, 100] {
                let (block, entries) = build(n, interval);
                let mut it = AsInternal(BlockIter::new(block));
                check_moves(&mut it, &entries, &backward_walk(entries.len()));
                let mut rng = rand::rngs::StdRng::seed_from_u64(interval as u64 * 1000 + n as u64);
                let moves = random_moves(&mut rng, &entries, 400);
                check_moves(&mut it, &entries, &moves);
            }
        }
    }

    #[test]
    fn cmp_internal_agrees_with_compare_internal() {
        let users: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"abcdefg".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefghi".to_vec(),
            b"abcdefgi".to_vec(),
            b"abcdefghabcdefgh".to_vec(),
            b"abcdefghabcdefgi".to_vec(),
            vec![0xff; 17],
        ];
        let mut keys = Vec::new();
        for u in &users {
            for seq in [1, 2] {
                keys.push(make_internal_key(u, seq, ValueKind::Put));
                keys.push(make_internal_key(u, seq, ValueKind::Delete));
            }
        }
        keys.push(vec![1, 2, 3]);
        for a in &keys {
            for b in &keys {
                assert_eq!(
                    compare_internal(a, b),
                    compare_internal(a, b),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn key_buf_moves_between_inline_and_heap() {
        let mut k = KeyBuf::new();
        let long: Vec<u8> = (0..100u8).collect();
        let mut model: Vec<u8> = Vec::new();
        for (shared, delta) in [
            (0, &long[..10]),
            (5, &long[..60]),
            (30, &long[..3]),
            (33, &long[..80]),
            (100, &long[..1]),
            (2, &long[..40]),
            (42, &long[..20]),
            (0, &long[..0]),
        ] {
            assert_eq!(k.set(shared, delta), Some(()));
            model.truncate(shared);
            model.extend_from_slice(delta);
            assert_eq!(k.as_slice(), &model[..]);
        }
        assert_eq!(k.set(1, b"x"), None);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_err());
        assert!(Block::new(vec![0xff; 12]).is_err());
        let (block, _) = build(20, 4);
        let raw = block.data().to_vec();
        for i in 0..raw.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = raw.clone();
                bad[i] ^= bit;
                if let Ok(b) = Block::new(bad) {
                    let mut it = BlockIter::new(Arc::new(b));
                    let _ = it.seek(b"key00010\x01\0\0\0\0\0\0\0");
                    if it.seek_to_first().is_ok() {
                        for _ in 0..100 {
                            if it.next().is_err() || !it.valid() {
                                break;
                            }
                        }
                    }
                    if it.seek_to_last().is_ok() {
                        for _ in 0..100 {
                            if it.prev().is_err() || !it.valid() {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}
