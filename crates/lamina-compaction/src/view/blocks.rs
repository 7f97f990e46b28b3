//! A sorted sequence kept as a list of sorted blocks of a few hundred
//! entries: the shape of a run's files and of a least-overlap ranking.
//!
//! A merge replaces a contiguous key range of a run: a few files out, a
//! few in. In a B-tree every one of them costs a descent from the root (a
//! string of cache misses once the run holds millions of files); here the
//! range is found once and replaced by one splice of one block (or two, at
//! a block boundary). A block that outgrows [`MAX`] entries splits in
//! halves, one that shrinks below [`MIN`] joins its neighbour, so a
//! sequence of n entries has O(n / MIN) blocks and a search costs a binary
//! search over the blocks and one inside a block.
//!
//! Each block keeps a summary of its entries ([`Entry::summarize`]): a
//! ranking keeps its block's least score there, so that the least of a
//! sequence is a scan of block summaries. A splice keeps a block's summary
//! up to date where it can ([`Entry::add`], [`Entry::keeps`]: entries in
//! that do not beat the least, entries out that are not the least), and
//! otherwise drops it until [`Blocks::least_block`] computes it again, at
//! the next pick: summarized at every change, a block of a ranking was read
//! whole three times per merge that touched it (a splice out, a splice in,
//! a rescore) for one read at the next pick.

use std::fmt::Debug;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

/// Entries per block at most; a larger block splits in halves. The halves
/// are allocated with room for this many, so that a splice moves at most
/// a block's entries and never reallocates them (a sequence's first block
/// is allocated as made, and grows as a `Vec` does).
pub(crate) const MAX: usize = 128;
/// Entries per block below which a block joins its next neighbour.
const MIN: usize = MAX / 8;
/// Blocks per chunk of [`Blocks::least_block`]'s cache.
const CHUNK: usize = 32;

/// An entry of a [`Blocks`] sequence.
pub(crate) trait Entry: Sized {
    /// What the sequence is sorted by.
    type Key: Clone + Debug;
    /// The entry's key.
    fn key(&self) -> &Self::Key;
    /// What a block remembers of its entries; [`Blocks::least_block`]
    /// finds the block with the least.
    type Summary: Clone + Debug + Ord;
    /// The summary of a non-empty block's `entries`.
    fn summarize(entries: &[Self]) -> Self::Summary;
    /// Brings `summary` up to date with `added` joining its block.
    fn add(summary: &mut Self::Summary, added: &[Self]);
    /// True if `summary` still holds once `removed` leave its block (which
    /// keeps at least one entry).
    fn keeps(summary: &Self::Summary, removed: &[Self]) -> bool;
}

/// A place in a sequence: entry `at` of block `block`; the end is
/// `(blocks, 0)`. Positions are normalized: `at` is inside its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    block: usize,
    at: usize,
}

impl Pos {
    /// The position as one integer (block above, entry below), for a hint
    /// kept in an atomic; [`Pos::unpack`] reverses it.
    pub(crate) fn pack(self) -> u64 {
        ((self.block as u64) << 32) | (self.at as u64 & 0xffff_ffff)
    }

    /// The position [`Pos::pack`] packed. A stale one may lie past the end
    /// or off an entry: [`Blocks::get`] then finds nothing there.
    pub(crate) fn unpack(packed: u64) -> Pos {
        Pos {
            block: (packed >> 32) as usize,
            at: (packed & 0xffff_ffff) as usize,
        }
    }
}

/// The entries of block `block` (holding `len`) that `[from, to)` covers.
fn covered(block: usize, len: usize, from: Pos, to: Pos) -> std::ops::Range<usize> {
    let start = if block == from.block { from.at } else { 0 };
    let end = if block == to.block { to.at } else { len };
    start..end
}

/// One block: its entries (never empty), and beside them, so that a
/// search or a scan of the blocks reads no entry, the last one's key and
/// their summary (if known).
#[derive(Debug, Clone)]
pub(crate) struct Block<E: Entry> {
    last: Option<E::Key>,
    summary: Option<E::Summary>,
    entries: Vec<E>,
}

impl<E: Entry> Block<E> {
    fn new(entries: Vec<E>) -> Block<E> {
        let mut block = Block {
            last: None,
            summary: None,
            entries,
        };
        block.refresh_last();
        block
    }

    /// Refreshes the last key after a splice.
    fn refresh_last(&mut self) {
        self.last = self.entries.last().map(|e| e.key().clone());
    }

    /// The block's entries.
    pub(crate) fn entries(&self) -> &[E] {
        &self.entries
    }

    /// The block's summary, unless a change dropped it since
    /// [`Blocks::least_block`] last ran.
    pub(crate) fn summary(&self) -> Option<&E::Summary> {
        self.summary.as_ref()
    }

    /// Drops the summary unless it survives `range` leaving the block.
    fn removing(&mut self, range: std::ops::Range<usize>) {
        let keeps = match (&self.summary, self.entries.get(range)) {
            (Some(s), Some(removed)) => removed.len() < self.entries.len() && E::keeps(s, removed),
            _ => false,
        };
        if !keeps {
            self.summary = None;
        }
    }
}

/// A sorted sequence in blocks; see the module docs. The order is the
/// callers': they search with a predicate that holds for a prefix.
#[derive(Debug, Clone)]
pub(crate) struct Blocks<E: Entry> {
    blocks: Vec<Block<E>>,
    len: usize,
    finger: Finger,
    /// Per chunk of [`CHUNK`] blocks, its block with the least summary;
    /// `None` (or missing) where a change may have changed it.
    least: Vec<Option<usize>>,
}

impl<E: Entry> Default for Blocks<E> {
    fn default() -> Self {
        Blocks {
            blocks: Vec::new(),
            len: 0,
            finger: Finger::default(),
            least: Vec::new(),
        }
    }
}

/// The block the last search ended in. The searches of one merge land in
/// the same block of a run (the policy's, the planner's, the edit's, the
/// rankings'), and checking that block's bounds reads two block headers
/// where a binary search of a run of 10^6 files reads 13, most of them
/// cache misses. Atomic so that a view stays `Sync`; relaxed, as it is a
/// hint checked before use.
#[derive(Debug, Default)]
struct Finger(AtomicUsize);

impl Clone for Finger {
    fn clone(&self) -> Self {
        Finger(AtomicUsize::new(self.0.load(Relaxed)))
    }
}

impl<E: Entry> Blocks<E> {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The blocks, in order.
    pub(crate) fn blocks(&self) -> &[Block<E>] {
        &self.blocks
    }

    /// The first position.
    pub(crate) fn start(&self) -> Pos {
        Pos { block: 0, at: 0 }
    }

    /// The position after the last entry.
    pub(crate) fn end(&self) -> Pos {
        Pos {
            block: self.blocks.len(),
            at: 0,
        }
    }

    /// The first position whose key `before` is false for (`before` holds
    /// for a prefix of the sequence): a binary search over the blocks' last
    /// keys, then one inside a block.
    pub(crate) fn partition_point(&self, before: impl Fn(&E::Key) -> bool) -> Pos {
        let ends_before = |b: &Block<E>| b.last.as_ref().is_some_and(&before);
        // The finger's block, if the point lies in it; else a search.
        let hint = self.finger.0.load(Relaxed);
        let at_hint = self.blocks.get(hint).is_some_and(|b| !ends_before(b))
            && hint
                .checked_sub(1)
                .is_none_or(|p| self.blocks.get(p).is_some_and(ends_before));
        let block = if at_hint {
            hint
        } else {
            let block = self.blocks.partition_point(ends_before);
            self.finger.0.store(block, Relaxed);
            block
        };
        match self.blocks.get(block) {
            Some(b) => Pos {
                block,
                at: b.entries.partition_point(|e| before(e.key())),
            },
            None => self.end(),
        }
    }

    /// [`Blocks::partition_point`] for a point known to lie at `from` or
    /// after it, usually close by: a walk of up to `walk` entries, then (if
    /// the walk did not get there) a search; true if it took the search.
    pub(crate) fn partition_point_from(
        &self,
        mut from: Pos,
        walk: usize,
        before: impl Fn(&E::Key) -> bool,
    ) -> (Pos, bool) {
        for _ in 0..walk {
            match self.get(from) {
                Some(e) if before(e.key()) => from = self.next(from),
                _ => return (from, false),
            }
        }
        (self.partition_point(before), true)
    }

    /// The entry at `pos` (none at the end).
    pub(crate) fn get(&self, pos: Pos) -> Option<&E> {
        self.blocks.get(pos.block)?.entries.get(pos.at)
    }

    /// The position after `pos` (the end stays the end).
    pub(crate) fn next(&self, pos: Pos) -> Pos {
        match self.blocks.get(pos.block) {
            Some(b) if pos.at + 1 < b.entries.len() => Pos {
                block: pos.block,
                at: pos.at + 1,
            },
            Some(_) => Pos {
                block: pos.block + 1,
                at: 0,
            },
            None => pos,
        }
    }

    /// The position before `pos`; none at the start.
    pub(crate) fn prev(&self, pos: Pos) -> Option<Pos> {
        if pos.at > 0 {
            return Some(Pos {
                block: pos.block,
                at: pos.at - 1,
            });
        }
        let block = pos.block.checked_sub(1)?;
        let at = self.blocks.get(block)?.entries.len().checked_sub(1)?;
        Some(Pos { block, at })
    }

    /// The position `n` entries before `pos` (the start if there are fewer).
    pub(crate) fn back(&self, mut pos: Pos, n: usize) -> Pos {
        for _ in 0..n {
            match self.prev(pos) {
                Some(p) => pos = p,
                None => break,
            }
        }
        pos
    }

    /// The entries in `[from, to)`, in order.
    pub(crate) fn range(&self, from: Pos, to: Pos) -> Range<'_, E> {
        Range {
            blocks: &self.blocks,
            front: from.min(to),
            back: to,
        }
    }

    /// The entries from `pos` on, a block's slice at a time: for walks
    /// that read many entries in a row without a position per entry.
    pub(crate) fn slices(&self, pos: Pos) -> impl Iterator<Item = &[E]> {
        let first = self
            .blocks
            .get(pos.block)
            .and_then(|b| b.entries.get(pos.at..));
        let rest = self.blocks.get(pos.block + 1..).unwrap_or_default();
        first.into_iter().chain(rest.iter().map(|b| &b.entries[..]))
    }

    /// Every entry, in order.
    pub(crate) fn iter(&self) -> Range<'_, E> {
        self.range(self.start(), self.end())
    }

    /// The block with the least summary (the first of equals); none if
    /// the sequence is empty. Each chunk of [`CHUNK`] blocks remembers its
    /// least, so that a call after a merge reads the chunks' least and the
    /// blocks of the chunks the merge changed (or shifted, by a split or a
    /// join), not every block: a ranking of 10^5 files has about 1,000.
    pub(crate) fn least_block(&mut self) -> Option<usize> {
        let n = self.blocks.len();
        self.least.resize(n.div_ceil(CHUNK), None);
        let mut best: Option<usize> = None;
        for c in 0..self.least.len() {
            let b = match self.least[c] {
                Some(b) => b,
                None => {
                    let mut least = c * CHUNK;
                    for i in c * CHUNK..((c + 1) * CHUNK).min(n) {
                        let block = &mut self.blocks[i];
                        if block.summary.is_none() {
                            block.summary = Some(E::summarize(&block.entries));
                        }
                        if self.blocks[i].summary < self.blocks[least].summary {
                            least = i;
                        }
                    }
                    self.least[c] = Some(least);
                    least
                }
            };
            if best.is_none_or(|best| self.blocks[b].summary < self.blocks[best].summary) {
                best = Some(b);
            }
        }
        best
    }

    /// Block `block` changed in place: its chunk's least is unknown.
    fn touch(&mut self, block: usize) {
        if let Some(c) = self.least.get_mut(block / CHUNK) {
            *c = None;
        }
    }

    /// Blocks from `block` on were added, dropped or shifted: every
    /// chunk's least from there on is unknown.
    fn reshape(&mut self, block: usize) {
        self.least.truncate(block / CHUNK);
    }

    /// Inserts `entries` (in order) at `pos`: one splice of one block.
    pub(crate) fn insert(&mut self, pos: Pos, entries: Vec<E>) {
        if entries.is_empty() {
            return;
        }
        self.len += entries.len();
        if self.blocks.is_empty() {
            // As made: most runs of a stack or of level 0 hold one file
            // and never grow, and room for `MAX` files cost each 11 KB
            // (5 GB for 10^6 flushes of `nomerge`).
            self.blocks.push(Block::new(entries));
            self.reshape(0);
            self.fix(0);
            return;
        }
        // At the end, the entries join the last block.
        let (block, at) = match self.blocks.get(pos.block) {
            Some(_) => (pos.block, pos.at),
            None => {
                let last = self.blocks.len() - 1;
                (last, self.blocks[last].entries.len())
            }
        };
        let b = &mut self.blocks[block];
        if let Some(summary) = &mut b.summary {
            E::add(summary, &entries);
        }
        b.entries.splice(at..at, entries);
        self.fix(block);
    }

    /// Removes the entry at `pos` and returns it.
    pub(crate) fn take(&mut self, pos: Pos) -> Option<E> {
        let b = self.blocks.get_mut(pos.block)?;
        if pos.at >= b.entries.len() {
            return None;
        }
        b.removing(pos.at..pos.at + 1);
        let e = b.entries.remove(pos.at);
        self.len -= 1;
        self.fix(pos.block);
        Some(e)
    }

    /// Removes the entries in `[from, to)` and returns how many.
    pub(crate) fn remove(&mut self, from: Pos, to: Pos) -> usize {
        self.remove_into(from, to, drop)
    }

    /// [`Blocks::remove`], handing each removed entry to `taken` (in
    /// reverse order of blocks).
    pub(crate) fn remove_into(&mut self, from: Pos, to: Pos, mut taken: impl FnMut(E)) -> usize {
        let mut removed = 0;
        let last = to.block.min(self.blocks.len().saturating_sub(1));
        // From the last block touched down, so that fixing one (which may
        // drop it or join it to the next) leaves the others' indices.
        for block in (from.block..=last).rev() {
            let Some(b) = self.blocks.get_mut(block) else {
                continue;
            };
            let range = covered(block, b.entries.len(), from, to);
            if range.is_empty() {
                continue;
            }
            removed += range.len();
            b.removing(range.clone());
            b.entries.drain(range).for_each(&mut taken);
            self.fix(block);
        }
        self.len -= removed;
        removed
    }

    /// Edits the entries in `[from, to)` in place; `edit` must not change
    /// their order.
    pub(crate) fn edit(&mut self, from: Pos, to: Pos, mut edit: impl FnMut(&mut E)) {
        let last = to.block.min(self.blocks.len().saturating_sub(1));
        for block in from.block..=last {
            let Some(b) = self.blocks.get_mut(block) else {
                continue;
            };
            let range = covered(block, b.entries.len(), from, to);
            if range.is_empty() {
                continue;
            }
            b.entries[range].iter_mut().for_each(&mut edit);
            b.refresh_last();
            b.summary = None;
            self.touch(block);
        }
    }

    /// Restores the block rules for block `block` after an edit: drops it
    /// if empty, splits it if too large, joins it to its next neighbour if
    /// small, and refreshes the summaries it changed.
    fn fix(&mut self, block: usize) {
        self.touch(block);
        let len = self.blocks[block].entries.len();
        if len == 0 {
            self.blocks.remove(block);
            self.reshape(block);
            return;
        }
        if len > MAX {
            let entries = std::mem::take(&mut self.blocks[block].entries);
            let mut halves = Vec::with_capacity(len.div_ceil(MAX / 2));
            let mut rest = entries.into_iter();
            loop {
                let mut chunk = Vec::with_capacity(MAX);
                chunk.extend(rest.by_ref().take(MAX / 2));
                if chunk.is_empty() {
                    break;
                }
                halves.push(Block::new(chunk));
            }
            self.blocks.splice(block..=block, halves);
            self.reshape(block);
            return;
        }
        if len < MIN && block + 1 < self.blocks.len() {
            let next = self.blocks.remove(block + 1);
            self.reshape(block);
            let b = &mut self.blocks[block];
            b.summary = None;
            b.entries.extend(next.entries);
            // Joined, the block may now be too large.
            return self.fix(block);
        }
        self.blocks[block].refresh_last();
    }
}

/// Entries of a [`Blocks`] between two positions, in order.
#[derive(Debug)]
pub(crate) struct Range<'a, E: Entry> {
    blocks: &'a [Block<E>],
    front: Pos,
    back: Pos,
}

impl<E: Entry> Clone for Range<'_, E> {
    fn clone(&self) -> Self {
        Range { ..*self }
    }
}

impl<'a, E: Entry> Iterator for Range<'a, E> {
    type Item = &'a E;

    fn next(&mut self) -> Option<&'a E> {
        if self.front >= self.back {
            return None;
        }
        let b = self.blocks.get(self.front.block)?;
        let e = b.entries.get(self.front.at)?;
        self.front = if self.front.at + 1 < b.entries.len() {
            Pos {
                block: self.front.block,
                at: self.front.at + 1,
            }
        } else {
            Pos {
                block: self.front.block + 1,
                at: 0,
            }
        };
        Some(e)
    }
}

impl<E: Entry> DoubleEndedIterator for Range<'_, E> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.back = if self.back.at > 0 {
            Pos {
                block: self.back.block,
                at: self.back.at - 1,
            }
        } else {
            let block = self.back.block.checked_sub(1)?;
            Pos {
                block,
                at: self.blocks.get(block)?.entries.len().checked_sub(1)?,
            }
        };
        self.blocks.get(self.back.block)?.entries.get(self.back.at)
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// Entries are numbers; a block remembers its least.
    impl Entry for u32 {
        type Key = u32;
        fn key(&self) -> &u32 {
            self
        }
        type Summary = u32;
        fn summarize(entries: &[u32]) -> u32 {
            entries.iter().copied().min().unwrap_or(u32::MAX)
        }
        fn add(summary: &mut u32, added: &[u32]) {
            *summary = added.iter().fold(*summary, |m, &e| m.min(e));
        }
        fn keeps(summary: &u32, removed: &[u32]) -> bool {
            !removed.contains(summary)
        }
    }

    /// Checks `seq` against `model`, and every summary kept through the
    /// changes against the block's least (then computes the dropped ones).
    fn check(seq: &mut Blocks<u32>, model: &[u32]) {
        assert_eq!(seq.len(), model.len());
        assert_eq!(seq.iter().copied().collect::<Vec<_>>(), model);
        assert_eq!(
            seq.iter().rev().copied().collect::<Vec<_>>().len(),
            model.len()
        );
        for b in seq.blocks() {
            assert!(!b.entries().is_empty() && b.entries().len() <= MAX);
            if let Some(&kept) = b.summary() {
                assert_eq!(kept, *b.entries().iter().min().unwrap());
            }
        }
        // The least block by brute force, against the chunks' cache.
        let least = seq
            .blocks()
            .iter()
            .enumerate()
            .min_by_key(|(_, b)| b.entries().iter().min())
            .map(|(i, _)| i);
        assert_eq!(seq.least_block(), least);
        // It computed every summary a change dropped.
        for b in seq.blocks() {
            assert_eq!(b.summary(), b.entries().iter().min());
        }
    }

    proptest::proptest! {
        /// Random splices and range removals against a sorted `Vec`, with
        /// searches, walks and ranges read back from both.
        #[test]
        fn blocks_match_a_sorted_vec(
            ops in proptest::collection::vec((0u32..4000, 0usize..700, proptest::bool::ANY), 1..60),
        ) {
            let mut seq = Blocks::<u32>::default();
            let mut model: Vec<u32> = Vec::new();
            for (key, n, insert) in ops {
                let at = seq.partition_point(|&e| e < key);
                let i = model.partition_point(|&e| e < key);
                proptest::prop_assert_eq!(seq.get(at).copied(), model.get(i).copied());
                if insert {
                    // Up to n new keys between the neighbours of `key`'s place.
                    let lo = i.checked_sub(1).map_or(0, |p| model[p] + 1);
                    let hi = model.get(i).copied().unwrap_or(u32::MAX);
                    let fresh: Vec<u32> = (lo..hi).take(n).collect();
                    model.splice(i..i, fresh.iter().copied());
                    seq.insert(at, fresh);
                } else {
                    let j = (i + n).min(model.len());
                    let to = seq.partition_point(|&e| model.get(j).is_none_or(|&m| e < m));
                    proptest::prop_assert_eq!(seq.remove(at, to), j - i);
                    model.drain(i..j);
                }
                check(&mut seq, &model);
                // Walks: back from the end, forward from the start.
                let end = seq.end();
                let k = model.len().min(n);
                let from = seq.back(end, k);
                proptest::prop_assert_eq!(
                    seq.range(from, end).copied().collect::<Vec<_>>(),
                    &model[model.len() - k..]
                );
                if let Some(p) = seq.prev(end) {
                    proptest::prop_assert_eq!(seq.get(p), model.last());
                    proptest::prop_assert_eq!(seq.next(p), end);
                }
            }
        }
    }

    /// A splice keeps the summary of its block when it can tell the new
    /// one from the old: entries in above the least, entries out other
    /// than the least. Taking the least drops it, and so does an edit.
    #[test]
    fn splices_keep_summaries_they_cannot_have_changed() {
        let mut seq = Blocks::<u32>::default();
        seq.insert(seq.end(), (0..50).map(|k| 10 * k).collect());
        seq.least_block();
        let least = |seq: &Blocks<u32>| seq.blocks()[0].summary().copied();
        seq.insert(seq.partition_point(|&e| e < 15), vec![15]);
        assert_eq!(least(&seq), Some(0));
        let (from, to) = (
            seq.partition_point(|&e| e < 10),
            seq.partition_point(|&e| e < 40),
        );
        assert_eq!(seq.remove(from, to), 4);
        assert_eq!(least(&seq), Some(0));
        seq.take(seq.start());
        assert_eq!(least(&seq), None);
        seq.least_block();
        assert_eq!(least(&seq), Some(40));
        seq.edit(seq.start(), seq.end(), |e| *e += 1);
        assert_eq!(least(&seq), None);
        check(&mut seq, &(4..50).map(|k| 10 * k + 1).collect::<Vec<_>>());
    }

    #[test]
    fn edits_refresh_summaries() {
        let mut seq = Blocks::<u32>::default();
        seq.insert(seq.end(), (0..1000).map(|k| 2 * k).collect());
        check(&mut seq, &(0..1000).map(|k| 2 * k).collect::<Vec<_>>());
        let (from, to) = (
            seq.partition_point(|&e| e < 100),
            seq.partition_point(|&e| e < 1500),
        );
        seq.edit(from, to, |e| *e += 1);
        let model: Vec<u32> = (0..1000)
            .map(|k| 2 * k)
            .map(|e| if (100..1500).contains(&e) { e + 1 } else { e })
            .collect();
        check(&mut seq, &model);
    }
}
