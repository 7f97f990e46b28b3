//! The one iterator abstraction of the engine and its combinators.
//!
//! Memtables, SST blocks, whole SSTs, sorted runs and the merged view of the
//! tree all implement [`InternalIterator`]: a forward cursor over internal
//! keys (see [`crate::key`]) in internal-key order.

use crate::error::Result;

/// A forward cursor over `(internal key, value)` entries in internal-key order.
pub trait InternalIterator: Send {
    /// True while the cursor points at an entry.
    fn valid(&self) -> bool;
    /// The current internal key. Only meaningful while `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Only meaningful while `valid()`.
    fn value(&self) -> &[u8];
    /// Advances to the next entry.
    fn next(&mut self) -> Result<()>;
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
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
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
}

/// Merges several iterators into one ordered stream.
///
/// Children are given newest source first; on equal internal keys (which the
/// engine never produces, as sequence numbers are unique) the earlier child
/// wins. Finding the minimum is a linear scan: the engine merges at most a few
/// dozen sorted runs, where a scan beats a heap's bookkeeping.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
}

impl MergingIterator {
    /// Merges `children` (newest first).
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
        }
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            best = match best {
                Some(b)
                    if crate::key::compare_internal(child.key(), self.children[b].key())
                        != std::cmp::Ordering::Less =>
                {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
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
        if let Some(child) = self.current.and_then(|i| self.children.get_mut(i)) {
            child.next()?;
        }
        self.find_smallest();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for child in &mut self.children {
            child.seek(target)?;
        }
        self.find_smallest();
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        for child in &mut self.children {
            child.seek_to_first()?;
        }
        self.find_smallest();
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An in-memory iterator over sorted internal keys, for tests.
    pub(crate) struct VecIter {
        items: Vec<(Vec<u8>, Vec<u8>)>,
        pos: usize,
    }

    impl VecIter {
        pub(crate) fn new(mut items: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
            items.sort_by(|a, b| crate::key::compare_internal(&a.0, &b.0));
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
            &self.items[self.pos].0
        }
        fn value(&self) -> &[u8] {
            &self.items[self.pos].1
        }
        fn next(&mut self) -> Result<()> {
            self.pos += 1;
            Ok(())
        }
        fn seek(&mut self, target: &[u8]) -> Result<()> {
            self.pos = self
                .items
                .partition_point(|(k, _)| crate::key::compare_internal(k, target).is_lt());
            Ok(())
        }
        fn seek_to_first(&mut self) -> Result<()> {
            self.pos = 0;
            Ok(())
        }
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
