//! Bloom filtering of user keys: the one key hash and the probe count of
//! both the tables' filters (`sst/bloom.rs`) and the memtable's key filter,
//! and that filter itself ([`KeyFilter`], RocksDB's "memtable whole-key
//! filtering") with its sizing, which [`crate::Options::memtable_filter_bytes`]
//! reports.

use std::sync::atomic::{AtomicU64, Ordering};

use xxhash_rust::xxh3::xxh3_64;

/// Number of probes for a bits-per-key budget: `round(bpk * ln 2)` in [1, 30].
pub fn num_probes(bits_per_key: f64) -> u32 {
    let k = (bits_per_key * std::f64::consts::LN_2).round();
    if k.is_nan() || k < 1.0 {
        1
    } else if k > 30.0 {
        30
    } else {
        k as u32
    }
}

/// The hash the filter stores for a user key.
pub fn key_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// Per-entry bookkeeping charged on top of key and value bytes (skiplist node,
/// tower pointers, allocation headers), so the size estimate tracks memory.
pub(crate) const ENTRY_OVERHEAD: usize = 64;

/// Keys a memtable's filter is sized for: the most entries a buffer of
/// `buffer_bytes` holds (8-byte keys, empty values).
pub(crate) fn filter_keys(buffer_bytes: usize) -> usize {
    buffer_bytes / (ENTRY_OVERHEAD + 8)
}

/// Bytes of the key filter of a memtable of `buffer_bytes` at
/// `bits_per_key` (0 without a filter).
pub(crate) fn key_filter_bytes(buffer_bytes: usize, bits_per_key: f64) -> usize {
    KeyFilter::blocks(filter_keys(buffer_bytes), bits_per_key).map_or(0, |b| b * BLOCK_WORDS * 8)
}

/// 64-bit words per filter block: one 512-bit cache line.
const BLOCK_WORDS: usize = 8;

/// A blocked Bloom filter over user keys, filled as entries are inserted.
///
/// Every probe of a key falls in one 512-bit block chosen by the key's hash,
/// so an insert or a lookup touches one cache line (a B-tree search touches
/// one per level). Bits are set under the memtable's write lock (one writer,
/// hence plain load and store) and before the write's sequence number is
/// published, so a reader that may see an entry also sees its bits.
#[derive(Debug)]
pub(crate) struct KeyFilter {
    words: Box<[AtomicU64]>,
    probes: u32,
}

impl KeyFilter {
    /// A filter of `bits_per_key` bits for `keys` keys; `None` if either is 0.
    pub(crate) fn new(keys: usize, bits_per_key: f64) -> Option<KeyFilter> {
        let blocks = Self::blocks(keys, bits_per_key)?;
        Some(KeyFilter {
            words: (0..blocks * BLOCK_WORDS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            // Nine hash bits per probe: at most seven probes from one hash.
            probes: num_probes(bits_per_key).min(7),
        })
    }

    /// Blocks of a filter of `bits_per_key` bits for `keys` keys; `None` if
    /// it has no bit.
    fn blocks(keys: usize, bits_per_key: f64) -> Option<usize> {
        let bits = (keys as f64 * bits_per_key).ceil();
        // Also false for NaN.
        if bits.partial_cmp(&1.0).is_none_or(|o| o.is_lt()) {
            return None;
        }
        // An `as` cast saturates; a filter this large would fail to allocate
        // long before, and the memtable it serves would too.
        Some((bits as usize).div_ceil(BLOCK_WORDS * 64))
    }

    /// The words of `user_key`'s block and its probes' bits in the block.
    fn probe(&self, user_key: &[u8]) -> (&[AtomicU64], impl Iterator<Item = usize>) {
        let hash = key_hash(user_key);
        let blocks = (self.words.len() / BLOCK_WORDS) as u128;
        // The high bits pick the block (multiply-shift), a remix of the
        // whole hash gives the probes.
        let block = ((u128::from(hash) * blocks) >> 64) as usize;
        let start = block * BLOCK_WORDS;
        let words = self.words.get(start..start + BLOCK_WORDS).unwrap_or(&[]);
        let mut bits = hash.rotate_left(32).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let probes = (0..self.probes).map(move |_| {
            let bit = (bits & 511) as usize;
            bits >>= 9;
            bit
        });
        (words, probes)
    }

    /// Adds `user_key`. Callers hold the memtable's write lock.
    pub(crate) fn insert(&self, user_key: &[u8]) {
        let (words, probes) = self.probe(user_key);
        for bit in probes {
            if let Some(w) = words.get(bit / 64) {
                w.store(
                    w.load(Ordering::Relaxed) | 1 << (bit % 64),
                    Ordering::Relaxed,
                );
            }
        }
    }

    /// False only if `user_key` was certainly never inserted (a word out of
    /// reach, which the sizing rules out, answers "maybe").
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        let (words, mut probes) = self.probe(user_key);
        probes.all(|bit| {
            words
                .get(bit / 64)
                .is_none_or(|w| w.load(Ordering::Relaxed) & 1 << (bit % 64) != 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_follow_formula() {
        assert_eq!(num_probes(10.0), 7);
        assert_eq!(num_probes(0.5), 1);
        assert_eq!(num_probes(1000.0), 30);
        assert_eq!(num_probes(f64::NAN), 1);
    }

    #[test]
    fn key_filter_has_no_false_negatives_and_about_its_rate_of_false_positives() {
        let n = 100_000u32;
        let f = KeyFilter::new(n as usize, 10.0).unwrap();
        for i in 0..n {
            f.insert(&i.to_be_bytes());
        }
        assert!((0..n).all(|i| f.may_contain(&i.to_be_bytes())));
        let fp = (n..2 * n)
            .filter(|i| f.may_contain(&i.to_be_bytes()))
            .count();
        let rate = fp as f64 / f64::from(n);
        // A standard filter of 10 bits per key: 0.8%; blocking costs a
        // little (more keys share some blocks).
        assert!(rate < 0.02, "false-positive rate {rate}");
        assert!(KeyFilter::new(n as usize, 0.0).is_none());
        assert!(KeyFilter::new(0, 10.0).is_none());
    }
}
