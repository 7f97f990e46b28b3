//! The per-table Bloom filter over user keys.
//!
//! ```text
//! bits (m/8 bytes) | n: u64 LE (distinct keys added) | k: u8 (probes, 1..=30)
//! ```
//!
//! Probing uses double hashing of one xxh3-64 hash: `h1` = low 32 bits,
//! `h2` = high 32 bits, probe `i` tests bit `(h1 + i*h2) mod m`. One hash per
//! key keeps lookups cheap; double hashing is known to give (nearly) the
//! false-positive rate of `k` independent hashes. An empty filter block means
//! "no filter" (bits per key 0).

use crate::coding::DecodeResult;
use crate::key_filter::{key_hash, num_probes};

/// Smallest bit array written, so tiny tables do not get a useless filter.
const MIN_BITS: u64 = 64;

fn probe_positions(hash: u64, k: u32, m: u64) -> impl Iterator<Item = u64> {
    let h1 = hash & 0xffff_ffff;
    let h2 = hash >> 32;
    (0..u64::from(k)).map(move |i| (h1 + i * h2) % m)
}

/// Builds the filter block from the hashes of the distinct user keys.
pub fn build_filter(hashes: &[u64], bits_per_key: f64) -> Vec<u8> {
    let n = hashes.len() as u64;
    let wanted = (n as f64 * bits_per_key).ceil();
    let bits = if wanted.is_finite() && wanted > MIN_BITS as f64 {
        wanted as u64
    } else {
        MIN_BITS
    };
    let bytes = bits.div_ceil(8);
    let m = bytes * 8;
    let k = num_probes(bits_per_key);
    let mut out = vec![0u8; bytes as usize];
    for &h in hashes {
        for pos in probe_positions(h, k, m) {
            if let Some(b) = out.get_mut((pos / 8) as usize) {
                *b |= 1 << (pos % 8);
            }
        }
    }
    out.extend_from_slice(&n.to_le_bytes());
    out.push(k as u8);
    out
}

/// A decoded filter.
#[derive(Debug)]
pub struct BloomFilter {
    bits: Vec<u8>,
    num_keys: u64,
    k: u32,
}

impl BloomFilter {
    /// Decodes a non-empty filter block.
    pub fn decode(contents: &[u8]) -> DecodeResult<BloomFilter> {
        let split = contents
            .len()
            .checked_sub(9)
            .ok_or("filter block too short")?;
        let (bits, tail) = contents.split_at(split);
        let mut n = [0u8; 8];
        n.copy_from_slice(tail.get(..8).ok_or("filter block too short")?);
        let k = u32::from(*tail.get(8).ok_or("filter block too short")?);
        if bits.is_empty() || !(1..=30).contains(&k) {
            return Err("malformed filter block");
        }
        Ok(BloomFilter {
            bits: bits.to_vec(),
            num_keys: u64::from_le_bytes(n),
            k,
        })
    }

    /// Bytes of memory the decoded filter holds (its block cache charge).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<BloomFilter>() + self.bits.capacity()
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let m = self.bits.len() as u64 * 8;
        probe_positions(key_hash(user_key), self.k, m).all(|pos| {
            self.bits
                .get((pos / 8) as usize)
                .is_some_and(|b| b & (1 << (pos % 8)) != 0)
        })
    }

    /// `(1 - e^{-k n / m})^k` for this filter's k, n and m.
    pub fn fpr_theoretical(&self) -> f64 {
        let m = self.bits.len() as f64 * 8.0;
        let k = f64::from(self.k);
        let n = self.num_keys as f64;
        (1.0 - (-k * n / m).exp()).powf(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_fpr_near_theory() {
        let keys: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| format!("user{i}").into_bytes())
            .collect();
        let hashes: Vec<u64> = keys.iter().map(|k| key_hash(k)).collect();
        let f = BloomFilter::decode(&build_filter(&hashes, 10.0)).unwrap();
        assert!(keys.iter().all(|k| f.may_contain(k)));
        let trials = 200_000u32;
        let fp = (0..trials)
            .filter(|i| f.may_contain(format!("absent{i}").as_bytes()))
            .count();
        let measured = fp as f64 / f64::from(trials);
        let theory = f.fpr_theoretical();
        assert!((theory - 0.0082).abs() < 0.001, "theory {theory}");
        assert!(
            measured < theory * 1.5 && measured > theory * 0.5,
            "measured {measured} theory {theory}"
        );
    }

    #[test]
    fn decode_rejects_garbage() {
        assert!(BloomFilter::decode(&[]).is_err());
        assert!(BloomFilter::decode(&[0; 9]).is_err());
        let mut bad = vec![0u8; 17];
        bad[16] = 31;
        assert!(BloomFilter::decode(&bad).is_err());
    }
}
