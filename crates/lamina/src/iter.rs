//! The one iterator abstraction of the engine and its combinators.
//!
//! Memtables, SST blocks, whole SSTs, sorted runs and the merged view of the
//! tree all implement [`InternalIterator`]: a bidirectional cursor over
//! internal keys (see [`crate::key`]) in internal-key order. Forward steps
//! are the fast path; `prev` is LevelDB's shape: a block steps back by
//! rescanning from the restart point before the current entry, and the
//! merging iterator repositions its other children when the direction
//! changes.

use std::cmp::Ordering;

use crate::error::Result;
use crate::key::{compare_internal, user_key_prefix};

/// A cursor over `(internal key, value)` entries in internal-key order that
/// moves both ways. `next` and `prev` on an invalid cursor do nothing; after
/// running off either end, reposition it with a seek.
pub trait InternalIterator: Send {
    /// True while the cursor points at an entry.
    fn valid(&self) -> bool;
    /// The current internal key. Only meaningful while `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Only meaningful while `valid()`.
    fn value(&self) -> &[u8];
    /// Advances to the next entry.
    fn next(&mut self) -> Result<()>;
    /// Steps back to the previous entry (invalid before the first).
    fn prev(&mut self) -> Result<()>;
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the last entry whose internal key is `<= target`.
    ///
    /// The default is a seek and at most one step back.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            self.seek_to_last()
        } else if compare_internal(self.key(), target).is_gt() {
            self.prev()
        } else {
            Ok(())
        }
    }
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek_for_prev(target)
    }
}

/// The entries of `inner` whose key satisfies `keep`, in both directions:
/// a window query drops the records outside its window at each source, so
/// the merge above sees only candidates (seed 000 Alg. 4.5 checks each
/// record against the query rectangle the same way).
pub struct FilterIterator<I, F> {
    inner: I,
    keep: F,
}

impl<I: InternalIterator, F: Fn(&[u8]) -> bool> FilterIterator<I, F> {
    /// Filters `inner` by `keep(internal_key)`.
    pub fn new(inner: I, keep: F) -> Self {
        FilterIterator { inner, keep }
    }

    fn skip<const FORWARD: bool>(&mut self) -> Result<()> {
        while self.inner.valid() && !(self.keep)(self.inner.key()) {
            if FORWARD {
                self.inner.next()?;
            } else {
                self.inner.prev()?;
            }
        }
        Ok(())
    }
}

impl<I: InternalIterator, F: Fn(&[u8]) -> bool + Send> InternalIterator for FilterIterator<I, F> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.skip::<true>()
    }

    fn prev(&mut self) -> Result<()> {
        self.inner.prev()?;
        self.skip::<false>()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)?;
        self.skip::<true>()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.skip::<true>()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.skip::<false>()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target)?;
        self.skip::<false>()
    }
}

/// Merges several iterators into one ordered stream.
///
/// Children are given newest source first; on equal internal keys (which the
/// engine never produces, as sequence numbers are unique) the earlier child
/// wins going forward and the later one going backward. Finding the minimum
/// (maximum) is a linear scan: the engine merges at most a few dozen sorted
/// runs, where a scan beats a heap's bookkeeping. The scan compares each
/// child's cached key prefix (see `heads`) and asks children for their
/// keys only when two prefixes tie.
///
/// Moving forward, every valid child sits at its first entry after the
/// current key; moving backward, at its last entry before it. `next` after
/// `prev` (and the reverse) first re-seeks the other children to restore
/// that invariant, as LevelDB's merging iterator does.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Per child, the first 8 bytes of its current user key as a
    /// big-endian integer ([`user_key_prefix`]), `None` while it is
    /// invalid; refreshed after every move of the child. Prefixes that
    /// differ order the keys the same way, so picking the next entry
    /// compares integers instead of calling every child for its key
    /// (LevelDB's `IteratorWrapper` caches each child's key for the same
    /// reason).
    heads: Vec<Option<u64>>,
    current: Option<usize>,
    backward: bool,
}

/// What [`MergingIterator::heads`] holds for `child`.
#[inline]
fn head(child: &dyn InternalIterator) -> Option<u64> {
    child.valid().then(|| user_key_prefix(child.key()))
}

impl MergingIterator {
    /// Merges `children` (newest first).
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            // Children start unpositioned: nothing is current until a seek.
            heads: vec![None; children.len()],
            children,
            current: None,
            backward: false,
        }
    }

    /// Applies `step` to every child, refreshing their heads.
    fn move_all(
        &mut self,
        mut step: impl FnMut(&mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        for (child, h) in self.children.iter_mut().zip(self.heads.iter_mut()) {
            let res = step(child.as_mut());
            *h = head(child.as_ref());
            res?;
        }
        Ok(())
    }

    /// Makes the smallest (`FORWARD`) or largest valid child current.
    fn find<const FORWARD: bool>(&mut self) {
        let mut best: Option<(usize, u64)> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some(p) = *h else {
                continue;
            };
            best = match best {
                Some((b, bp)) => {
                    let ord = match p.cmp(&bp) {
                        Ordering::Equal => {
                            compare_internal(self.children[i].key(), self.children[b].key())
                        }
                        unequal => unequal,
                    };
                    let better = if FORWARD {
                        ord == Ordering::Less
                    } else {
                        ord != Ordering::Less
                    };
                    Some(if better { (i, p) } else { (b, bp) })
                }
                None => Some((i, p)),
            };
        }
        self.current = best.map(|(i, _)| i);
        self.backward = !FORWARD;
    }

    /// Moves the current child with `step` and refreshes its head.
    #[inline]
    fn move_current(
        &mut self,
        step: impl FnOnce(&mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        if let Some(i) = self.current {
            if let (Some(child), Some(h)) = (self.children.get_mut(i), self.heads.get_mut(i)) {
                let res = step(child.as_mut());
                *h = head(child.as_ref());
                res?;
            }
        }
        Ok(())
    }

    /// Repositions every child but the current one for moving forward (or,
    /// with `!forward`, backward) from the current key.
    fn switch_direction(&mut self, forward: bool) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        let key = self.key().to_vec();
        let children = self.children.iter_mut().zip(self.heads.iter_mut());
        for (i, (child, h)) in children.enumerate() {
            if i == cur {
                continue;
            }
            let res = reposition(child.as_mut(), &key, forward);
            *h = head(child.as_ref());
            res?;
        }
        Ok(())
    }
}

/// Positions `child` just after `key` (`forward`) or just before it.
fn reposition(child: &mut dyn InternalIterator, key: &[u8], forward: bool) -> Result<()> {
    child.seek(key)?;
    if forward {
        // Skip an equal key: it was already yielded.
        if child.valid() && compare_internal(child.key(), key).is_eq() {
            child.next()?;
        }
        Ok(())
    } else if child.valid() {
        child.prev()
    } else {
        child.seek_to_last()
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        match self.current.and_then(|i| self.children.get(i)) {
            Some(c) => c.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current.and_then(|i| self.children.get(i)) {
            Some(c) => c.value(),
            None => &[],
        }
    }

    fn next(&mut self) -> Result<()> {
        if self.backward {
            self.switch_direction(true)?;
        }
        self.move_current(|c| c.next())?;
        self.find::<true>();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if !self.backward {
            self.switch_direction(false)?;
        }
        self.move_current(|c| c.prev())?;
        self.find::<false>();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.move_all(|c| c.seek(target))?;
        self.find::<true>();
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.move_all(|c| c.seek_to_first())?;
        self.find::<true>();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.move_all(|c| c.seek_to_last())?;
        self.find::<false>();
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.move_all(|c| c.seek_for_prev(target))?;
        self.find::<false>();
        Ok(())
    }
}

/// An in-memory iterator over sorted internal keys: the children of the
/// merging iterator in tests and in its micro-benchmark
/// ([`crate::microbench::Merge`]), where it costs next to nothing per step.
pub struct VecIter {
    items: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

impl VecIter {
    /// An unpositioned cursor over `items`, sorted here.
    pub fn new(mut items: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        items.sort_by(|a, b| compare_internal(&a.0, &b.0));
        VecIter {
            items,
            pos: usize::MAX,
        }
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.items.len()
    }
    fn key(&self) -> &[u8] {
        self.items.get(self.pos).map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.items.get(self.pos).map_or(&[], |(_, v)| v)
    }
    fn next(&mut self) -> Result<()> {
        if self.valid() {
            self.pos += 1;
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        if self.valid() {
            self.pos = self.pos.checked_sub(1).unwrap_or(usize::MAX);
        }
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .items
            .partition_point(|(k, _)| compare_internal(k, target).is_lt());
        Ok(())
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.items.len().checked_sub(1).unwrap_or(usize::MAX);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One move of a cursor.
    #[derive(Debug, Clone)]
    pub(crate) enum Move {
        Next,
        Prev,
        First,
        Last,
        Seek(Vec<u8>),
        SeekForPrev(Vec<u8>),
    }

    /// Applies `moves` to `it` and to a position in `entries` (the oracle:
    /// distinct internal keys in order), checking that they agree after
    /// every move.
    pub(crate) fn check_moves(
        it: &mut dyn InternalIterator,
        entries: &[(Vec<u8>, Vec<u8>)],
        moves: &[Move],
    ) {
        let len = entries.len();
        let mut pos: Option<usize> = None;
        for (step, m) in moves.iter().enumerate() {
            pos = match m {
                Move::Next => {
                    it.next().unwrap();
                    pos.map(|p| p + 1).filter(|&p| p < len)
                }
                Move::Prev => {
                    it.prev().unwrap();
                    pos.and_then(|p| p.checked_sub(1))
                }
                Move::First => {
                    it.seek_to_first().unwrap();
                    (len > 0).then_some(0)
                }
                Move::Last => {
                    it.seek_to_last().unwrap();
                    len.checked_sub(1)
                }
                Move::Seek(t) => {
                    it.seek(t).unwrap();
                    let i = entries.partition_point(|(k, _)| compare_internal(k, t).is_lt());
                    (i < len).then_some(i)
                }
                Move::SeekForPrev(t) => {
                    it.seek_for_prev(t).unwrap();
                    entries
                        .partition_point(|(k, _)| !compare_internal(k, t).is_gt())
                        .checked_sub(1)
                }
            };
            match pos {
                Some(p) => {
                    assert!(it.valid(), "step {step} {m:?}: invalid, want entry {p}");
                    assert_eq!(it.key(), &entries[p].0[..], "step {step} {m:?}");
                    assert_eq!(it.value(), &entries[p].1[..], "step {step} {m:?}");
                }
                None => assert!(!it.valid(), "step {step} {m:?}: valid, want none"),
            }
        }
    }

    /// A walk from the last entry back past the first.
    pub(crate) fn backward_walk(len: usize) -> Vec<Move> {
        std::iter::once(Move::Last)
            .chain(std::iter::repeat_n(Move::Prev, len))
            .collect()
    }

    /// `n` random moves, mostly steps, whose seek targets lie at, between and
    /// around the user keys of `entries`.
    pub(crate) fn random_moves(
        rng: &mut impl rand::Rng,
        entries: &[(Vec<u8>, Vec<u8>)],
        n: usize,
    ) -> Vec<Move> {
        use crate::key::{make_internal_key, user_key, ValueKind};
        let target = |rng: &mut dyn rand::RngCore| -> Vec<u8> {
            let seq = rand::Rng::gen_range(rng, 0..1000u64);
            let Some((k, _)) = entries.get(rand::Rng::gen_range(rng, 0..entries.len().max(1)))
            else {
                return make_internal_key(b"", seq, ValueKind::Put);
            };
            let mut uk = user_key(k).to_vec();
            match rand::Rng::gen_range(rng, 0..5) {
                0 => return k.clone(),
                1 => uk.push(0),
                2 => uk.truncate(uk.len().saturating_sub(1)),
                3 => uk = vec![0xff; 4],
                _ => {}
            }
            make_internal_key(&uk, seq, ValueKind::Put)
        };
        let mut moves = vec![if rng.gen_bool(0.5) {
            Move::First
        } else {
            Move::Last
        }];
        for _ in 1..n {
            moves.push(match rng.gen_range(0..20) {
                0..=6 => Move::Next,
                7..=13 => Move::Prev,
                14 => Move::First,
                15 => Move::Last,
                16 | 17 => Move::Seek(target(rng)),
                _ => Move::SeekForPrev(target(rng)),
            });
        }
        moves
    }

    /// Entries `(key{i}, seq, i)` for `i` in `keys`, sorted.
    fn entries(keys: impl Iterator<Item = (u32, u64)>) -> Vec<(Vec<u8>, Vec<u8>)> {
        use crate::key::{make_internal_key, ValueKind};
        let mut v: Vec<_> = keys
            .map(|(k, seq)| {
                let uk = format!("key{k:04}");
                (
                    make_internal_key(uk.as_bytes(), seq, ValueKind::Put),
                    format!("{k}/{seq}").into_bytes(),
                )
            })
            .collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        v
    }

    proptest::proptest! {
        /// Entries spread over several children, walked with interleaved
        /// next/prev/seeks: the merge matches the sorted union.
        #[test]
        fn merge_moves_match_the_oracle(
            items in proptest::collection::vec((0u32..40, 1u64..6, 0usize..4), 0..80),
            seed in proptest::prelude::any::<u64>(),
        ) {
            use rand::SeedableRng;
            // Each distinct entry goes to the first child it was drawn for.
            let mut owner = std::collections::BTreeMap::new();
            for &(k, seq, c) in &items {
                owner.entry((k, seq)).or_insert(c);
            }
            let all = entries(owner.keys().copied());
            let children: Vec<Box<dyn InternalIterator>> = (0..4)
                .map(|c| {
                    let mine = owner.iter().filter(|(_, &o)| o == c).map(|(&e, _)| e);
                    Box::new(VecIter::new(entries(mine))) as Box<dyn InternalIterator>
                })
                .collect();
            let mut m = MergingIterator::new(children);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let moves = random_moves(&mut rng, &all, 200);
            check_moves(&mut m, &all, &moves);
        }
    }

    proptest::proptest! {
        /// A filter over a stream walks exactly the kept entries, in any
        /// mix of moves (the oracle: the sorted entries, filtered first).
        #[test]
        fn filter_moves_match_the_oracle(
            keys in proptest::collection::btree_set(0u32..60, 0..50),
            modulus in 1u32..5,
            seed in proptest::prelude::any::<u64>(),
        ) {
            use rand::SeedableRng;
            let all = entries(keys.iter().map(|&k| (k, 1)));
            let keep = |k: &[u8]| crate::key::user_key(k).last().is_some_and(|b| u32::from(*b) % modulus == 0);
            let kept: Vec<_> = all.iter().filter(|(k, _)| keep(k)).cloned().collect();
            let mut f = FilterIterator::new(VecIter::new(all.clone()), keep);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            // Seek targets drawn from every entry, kept or not.
            let moves = random_moves(&mut rng, &all, 200);
            check_moves(&mut f, &kept, &moves);
        }
    }

    proptest::proptest! {
        /// Keys whose first 8 bytes tie (a shared long prefix, and keys
        /// shorter than 8 bytes that are prefixes of each other), spread
        /// over children: the merge's cached prefixes must fall back to
        /// whole keys and still match the sorted union.
        #[test]
        fn merge_of_keys_with_tied_prefixes_matches_the_oracle(
            items in proptest::collection::vec((0usize..12, 1u64..4, 0usize..3), 0..60),
            seed in proptest::prelude::any::<u64>(),
        ) {
            use crate::key::{make_internal_key, ValueKind};
            use rand::SeedableRng;
            const KEYS: [&[u8]; 12] = [
                b"", b"a", b"a\0", b"a\0\0", b"ab", b"abcdefgh", b"abcdefgh\0",
                b"abcdefgh1", b"abcdefgh12", b"abcdefgh2", b"abcdefgi", b"\xff",
            ];
            let mut owner = std::collections::BTreeMap::new();
            for &(k, seq, c) in &items {
                owner.entry((k, seq)).or_insert(c);
            }
            let entries = |pick: &dyn Fn(usize) -> bool| {
                let mut v: Vec<_> = owner
                    .iter()
                    .filter(|(_, &c)| pick(c))
                    .map(|(&(k, seq), _)| {
                        (make_internal_key(KEYS[k], seq, ValueKind::Put), vec![k as u8, seq as u8])
                    })
                    .collect();
                v.sort_by(|a, b| compare_internal(&a.0, &b.0));
                v
            };
            let all = entries(&|_| true);
            let children: Vec<Box<dyn InternalIterator>> = (0..3)
                .map(|c| Box::new(VecIter::new(entries(&|o| o == c))) as Box<dyn InternalIterator>)
                .collect();
            let mut m = MergingIterator::new(children);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let moves = random_moves(&mut rng, &all, 200);
            check_moves(&mut m, &all, &moves);
        }
    }

    #[test]
    fn merge_switches_direction_mid_stream() {
        // Interleaved children: every step back or forth changes child.
        let a = entries((0..50).filter(|k| k % 3 == 0).map(|k| (k, 1)));
        let b = entries((0..50).filter(|k| k % 3 == 1).map(|k| (k, 1)));
        let c = entries((0..50).filter(|k| k % 3 == 2).map(|k| (k, 1)));
        let all = entries((0..50).map(|k| (k, 1)));
        let mut m = MergingIterator::new(vec![
            Box::new(VecIter::new(a)),
            Box::new(VecIter::new(b)),
            Box::new(VecIter::new(c)),
        ]);
        let mut moves = vec![Move::Seek(all[10].0.clone())];
        for _ in 0..5 {
            moves.extend([Move::Next, Move::Prev, Move::Prev, Move::Next, Move::Next]);
        }
        moves.extend([Move::Last, Move::Prev, Move::Next, Move::Next, Move::Prev]);
        moves.extend([
            Move::First,
            Move::Prev,
            Move::Next,
            Move::SeekForPrev(all[7].0.clone()),
        ]);
        moves.extend([Move::Next, Move::Next, Move::Prev]);
        check_moves(&mut m, &all, &moves);
    }

    #[test]
    fn merge_yields_global_internal_order() {
        use crate::key::{make_internal_key, ValueKind};
        let mk = |k: &[u8], s| (make_internal_key(k, s, ValueKind::Put), vec![s as u8]);
        let a = VecIter::new(vec![mk(b"a", 5), mk(b"c", 1)]);
        let b = VecIter::new(vec![mk(b"a", 7), mk(b"b", 2), mk(b"d", 3)]);
        let mut m = MergingIterator::new(vec![Box::new(a), Box::new(b)]);
        m.seek_to_first().unwrap();
        let mut got = Vec::new();
        while m.valid() {
            got.push(m.value()[0]);
            m.next().unwrap();
        }
        assert_eq!(got, vec![7, 5, 2, 1, 3]);
        m.seek(&make_internal_key(b"b", 100, ValueKind::Put))
            .unwrap();
        assert_eq!(m.value(), &[2]);
    }
}
