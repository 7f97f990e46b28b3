//! Range tombstones: `delete_range(start, end)` deletes every key in
//! `[start, end)` written before it.
//!
//! A range tombstone is kept beside the point entries, never among them:
//! memtables hold a list of them, a table holds them in its range-deletion
//! block (docs/format.md), and readers gather the ones that matter before
//! reading points. A tombstone with sequence number `t` hides a point
//! version with sequence number `s` of a key it covers iff `s < t` and the
//! reader's snapshot sees it (`t <= snapshot`).

use crate::coding::{get_bytes, get_varint, put_bytes, put_varint, DecodeResult};
use crate::key::MAX_SEQ;

/// Deletes the keys of `[start, end)` older than `seq`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// First key deleted.
    pub start: Vec<u8>,
    /// First key after the range (exclusive).
    pub end: Vec<u8>,
    /// Sequence number of the deletion.
    pub seq: u64,
}

/// The largest sequence number `<= snapshot` of the tombstones of `list`
/// (sorted by start) that cover `key`; 0 if none does. Sequence numbers
/// start at 1, so 0 hides nothing.
pub fn covering_seq(list: &[RangeTombstone], key: &[u8], snapshot: u64) -> u64 {
    let upto = list.partition_point(|t| t.start.as_slice() <= key);
    list.get(..upto)
        .unwrap_or_default()
        .iter()
        .filter(|t| t.seq <= snapshot && key < t.end.as_slice())
        .map(|t| t.seq)
        .max()
        .unwrap_or(0)
}

/// Sorts a list by start (then newest first), the order tables store.
pub fn sort(list: &mut [RangeTombstone]) {
    list.sort_by(|a, b| a.start.cmp(&b.start).then(b.seq.cmp(&a.seq)));
}

/// Encodes a table's range-deletion block: `varint count`, then per
/// tombstone (sorted by start, then sequence number descending)
/// `bytes start | bytes end | varint seq`.
pub fn encode_block(list: &[RangeTombstone]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, list.len() as u64);
    for t in list {
        put_bytes(&mut out, &t.start);
        put_bytes(&mut out, &t.end);
        put_varint(&mut out, t.seq);
    }
    out
}

/// Inverse of [`encode_block`]; checks that every tombstone has
/// `start < end` and a valid sequence number, that they are in order and
/// that nothing trails them.
pub fn decode_block(contents: &[u8]) -> DecodeResult<Vec<RangeTombstone>> {
    let mut cur = contents;
    let count = get_varint(&mut cur).ok_or("bad range tombstone count")?;
    // Each takes at least 3 bytes: a lying count cannot drive a huge
    // allocation.
    if count == 0 || count > (cur.len() / 3) as u64 {
        return Err("range tombstone count does not fit the block");
    }
    let mut list: Vec<RangeTombstone> = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let start = get_bytes(&mut cur).ok_or("bad range tombstone start")?;
        let end = get_bytes(&mut cur).ok_or("bad range tombstone end")?;
        let seq = get_varint(&mut cur).ok_or("bad range tombstone sequence number")?;
        if start >= end {
            return Err("range tombstone is empty (start >= end)");
        }
        if seq > MAX_SEQ {
            return Err("range tombstone sequence number out of range");
        }
        if let Some(prev) = list.last() {
            let ordered = prev.start.as_slice() < start || (prev.start == start && prev.seq > seq);
            if !ordered {
                return Err("range tombstones out of order");
            }
        }
        list.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
    }
    if !cur.is_empty() {
        return Err("trailing bytes after range tombstones");
    }
    Ok(list)
}

/// One piece of a [`Fragments`] list.
#[derive(Debug, Clone)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    seq: u64,
}

/// The tombstones a reader at one snapshot sees, cut into disjoint
/// fragments each carrying the largest sequence number covering it, so a
/// key's question "is my version hidden?" is one binary search (and, for a
/// cursor moving through keys in order, usually none: see [`Self::covers`]).
#[derive(Debug, Clone, Default)]
pub struct Fragments {
    frags: Vec<Fragment>,
}

impl Fragments {
    /// The fragments of the tombstones of `list` visible at `snapshot`.
    pub fn new<'a>(list: impl IntoIterator<Item = &'a RangeTombstone>, snapshot: u64) -> Self {
        let mut ts: Vec<&RangeTombstone> = list
            .into_iter()
            .filter(|t| t.seq <= snapshot && t.start < t.end)
            .collect();
        if ts.is_empty() {
            return Fragments::default();
        }
        ts.sort_by(|a, b| a.start.cmp(&b.start));
        let mut bounds: Vec<&[u8]> = ts
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        // A sweep over the boundaries with the tombstones open at each.
        let mut frags: Vec<Fragment> = Vec::new();
        let mut active: Vec<&RangeTombstone> = Vec::new();
        let mut next = 0;
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while let Some(t) = ts.get(next).filter(|t| t.start.as_slice() <= lo) {
                active.push(t);
                next += 1;
            }
            active.retain(|t| t.end.as_slice() > lo);
            let Some(seq) = active.iter().map(|t| t.seq).max() else {
                continue;
            };
            match frags.last_mut() {
                Some(f) if f.end.as_slice() == lo && f.seq == seq => f.end = hi.to_vec(),
                _ => frags.push(Fragment {
                    start: lo.to_vec(),
                    end: hi.to_vec(),
                    seq,
                }),
            }
        }
        Fragments { frags }
    }

    /// True if a visible tombstone hides version `seq` of `key`.
    pub fn covers(&self, key: &[u8], seq: u64) -> bool {
        if self.frags.is_empty() {
            return false;
        }
        let i = self.frags.partition_point(|f| f.start.as_slice() <= key);
        i.checked_sub(1)
            .and_then(|i| self.frags.get(i))
            .is_some_and(|f| key < f.end.as_slice() && seq < f.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            seq,
        }
    }

    #[test]
    fn block_roundtrip_and_checks() {
        let mut list = vec![t("c", "f", 3), t("a", "d", 5), t("a", "b", 7)];
        sort(&mut list);
        let raw = encode_block(&list);
        assert_eq!(decode_block(&raw), Ok(list.clone()));
        for cut in 0..raw.len() {
            assert!(decode_block(&raw[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = raw.clone();
        trailing.push(0);
        assert!(decode_block(&trailing).is_err());
        let unsorted = encode_block(&[t("b", "c", 1), t("a", "c", 1)]);
        assert!(decode_block(&unsorted).is_err());
        assert!(decode_block(&encode_block(&[t("b", "b", 1)])).is_err());
        assert!(decode_block(&encode_block(&[])).is_err());
    }

    proptest::proptest! {
        /// Fragments answer as the plain list does (the oracle: any
        /// visible tombstone covering the key newer than the version).
        #[test]
        fn fragments_agree_with_the_list(
            raw in proptest::collection::vec((0u8..20, 1u8..8, 1u64..30), 0..12),
            snapshot in 0u64..32,
        ) {
            let list: Vec<RangeTombstone> = raw
                .iter()
                .map(|&(s, len, seq)| RangeTombstone { start: vec![s], end: vec![s + len], seq })
                .collect();
            let f = Fragments::new(&list, snapshot);
            let mut sorted = list.clone();
            sort(&mut sorted);
            for k in 0u8..30 {
                for seq in 0u64..32 {
                    let want = list.iter().any(|t| t.seq <= snapshot && t.start[..] <= [k][..] && [k][..] < t.end[..] && seq < t.seq);
                    proptest::prop_assert_eq!(f.covers(&[k], seq), want, "key {} seq {}", k, seq);
                    proptest::prop_assert_eq!(covering_seq(&sorted, &[k], snapshot) > seq, want);
                }
            }
        }
    }
}
