//! A least-recently-used map charged by bytes, the core of the block cache's
//! shards and of the row cache's.
//!
//! A slot array holds an intrusive doubly linked recency list (slot indices,
//! most recent at the head) plus a hash map from key to slot, so lookups,
//! touches, inserts and evictions are all O(1) and allocate only when the
//! slot array grows. It is not thread-safe: each cache shard wraps one in a
//! mutex, and the capacity is the caller's to enforce (with
//! [`Lru::pop_lru`]), since the caches differ in what they do with a victim.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// "No slot" in the recency list.
const NIL: usize = usize::MAX;

/// One entry and its place in the recency list; a free slot has no entry.
struct Node<K, V> {
    entry: Option<(K, V)>,
    charge: usize,
    /// Towards the head (more recently used).
    prev: usize,
    /// Towards the tail (less recently used).
    next: usize,
}

/// An LRU map whose entries carry a byte charge; `usage` is their sum.
pub(crate) struct Lru<K, V, S> {
    map: HashMap<K, usize, S>,
    nodes: Vec<Node<K, V>>,
    /// Unused slots of `nodes`.
    free: Vec<usize>,
    /// Most recently used slot.
    head: usize,
    /// Least recently used slot.
    tail: usize,
    usage: usize,
}

impl<K, V, S: Default> Default for Lru<K, V, S> {
    fn default() -> Self {
        Lru {
            map: HashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            usage: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, V, S: BuildHasher> Lru<K, V, S> {
    fn unlink(&mut self, i: usize) {
        let (prev, next) = match self.nodes.get(i) {
            Some(n) => (n.prev, n.next),
            None => return,
        };
        match self.nodes.get_mut(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.nodes.get_mut(next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    fn push_front(&mut self, i: usize) {
        let old = self.head;
        if let Some(n) = self.nodes.get_mut(i) {
            n.prev = NIL;
            n.next = old;
        }
        match self.nodes.get_mut(old) {
            Some(h) => h.prev = i,
            None => self.tail = i,
        }
        self.head = i;
    }

    /// The value of `key`, now the most recently used.
    pub fn touch<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let i = *self.map.get(key)?;
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        self.nodes.get(i)?.entry.as_ref().map(|(_, v)| v)
    }

    /// Whether `key` is present (its recency unchanged).
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.contains_key(key)
    }

    /// Unlinks and frees slot `i`; returns its entry and charge.
    fn remove_slot(&mut self, i: usize) -> Option<(K, V, usize)> {
        self.unlink(i);
        let node = self.nodes.get_mut(i)?;
        let (key, value) = node.entry.take()?;
        let charge = std::mem::take(&mut node.charge);
        self.map.remove(&key);
        self.free.push(i);
        self.usage -= charge;
        Some((key, value, charge))
    }

    /// Removes `key`; returns its value and charge.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<(V, usize)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let i = *self.map.get(key)?;
        self.remove_slot(i).map(|(_, v, c)| (v, c))
    }

    /// Removes the least recently used entry.
    pub fn pop_lru(&mut self) -> Option<(K, V, usize)> {
        match self.tail {
            NIL => None,
            t => self.remove_slot(t),
        }
    }

    /// Removes every entry whose key satisfies `pred`; returns their charges.
    pub fn remove_where(&mut self, mut pred: impl FnMut(&K) -> bool) -> Vec<(K, usize)> {
        let slots: Vec<usize> = self
            .map
            .iter()
            .filter(|(k, _)| pred(k))
            .map(|(_, &i)| i)
            .collect();
        slots
            .into_iter()
            .filter_map(|i| self.remove_slot(i).map(|(k, _, c)| (k, c)))
            .collect()
    }

    fn push_back(&mut self, i: usize) {
        let old = self.tail;
        if let Some(n) = self.nodes.get_mut(i) {
            n.prev = old;
            n.next = NIL;
        }
        match self.nodes.get_mut(old) {
            Some(t) => t.next = i,
            None => self.head = i,
        }
        self.tail = i;
    }

    /// Adds `key` as the most recently used entry, replacing (and returning)
    /// any value it had.
    pub fn insert(&mut self, key: K, value: V, charge: usize) -> Option<(V, usize)> {
        self.insert_at(key, value, charge, true)
    }

    /// Adds `key` as the least recently used entry (the next to be popped
    /// unless touched first), replacing (and returning) any value it had:
    /// scan-resistant insertion.
    pub fn insert_cold(&mut self, key: K, value: V, charge: usize) -> Option<(V, usize)> {
        self.insert_at(key, value, charge, false)
    }

    fn insert_at(&mut self, key: K, value: V, charge: usize, hot: bool) -> Option<(V, usize)> {
        let old = self.remove(&key);
        let node = Node {
            entry: Some((key.clone(), value)),
            charge,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                if let Some(slot) = self.nodes.get_mut(i) {
                    *slot = node;
                }
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        if hot {
            self.push_front(i);
        } else {
            self.push_back(i);
        }
        self.map.insert(key, i);
        self.usage += charge;
        old
    }

    /// The sum of the entries' charges.
    pub fn usage(&self) -> usize {
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::RandomState;

    #[test]
    fn matches_a_reference_list() {
        // Random touches, inserts, removes and pops against a Vec kept in
        // recency order (most recent last).
        let mut lru: Lru<u32, u64, RandomState> = Lru::default();
        let mut model: Vec<(u32, u64, usize)> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..20_000u64 {
            let key = rnd(50) as u32;
            match rnd(10) {
                0..=3 => {
                    let pos = model.iter().position(|e| e.0 == key);
                    assert_eq!(lru.contains(&key), pos.is_some());
                    let got = lru.touch(&key).copied();
                    assert_eq!(got, pos.map(|p| model[p].1));
                    if let Some(p) = pos {
                        let e = model.remove(p);
                        model.push(e);
                    }
                }
                4..=6 => {
                    let charge = rnd(100) as usize;
                    let hot = rnd(3) > 0;
                    let old = if hot {
                        lru.insert(key, step, charge)
                    } else {
                        lru.insert_cold(key, step, charge)
                    };
                    let pos = model.iter().position(|e| e.0 == key);
                    assert_eq!(old, pos.map(|p| (model[p].1, model[p].2)));
                    model.retain(|e| e.0 != key);
                    if hot {
                        model.push((key, step, charge));
                    } else {
                        model.insert(0, (key, step, charge));
                    }
                }
                7 => {
                    let got = lru.remove(&key);
                    let pos = model.iter().position(|e| e.0 == key);
                    assert_eq!(got, pos.map(|p| (model[p].1, model[p].2)));
                    model.retain(|e| e.0 != key);
                }
                8 => {
                    let got = lru.pop_lru();
                    let want = (!model.is_empty()).then(|| model.remove(0));
                    assert_eq!(got, want);
                }
                _ => {
                    let m = rnd(7) as u32;
                    let mut got = lru.remove_where(|k| k % 7 == m);
                    got.sort_unstable();
                    let mut want: Vec<(u32, usize)> = model
                        .iter()
                        .filter(|e| e.0 % 7 == m)
                        .map(|e| (e.0, e.2))
                        .collect();
                    want.sort_unstable();
                    assert_eq!(got, want);
                    model.retain(|e| e.0 % 7 != m);
                }
            }
            assert_eq!(lru.usage(), model.iter().map(|e| e.2).sum::<usize>());
        }
    }
}
