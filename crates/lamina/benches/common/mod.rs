//! What the micro-benchmarks share: db_bench's key layout, a seeded
//! generator and the cycling through precomputed inputs that keeps one key
//! from staying hot in the branch predictor and the caches.

#![allow(
    dead_code,
    reason = "Each bench target compiles this module and uses part of it"
)]

use rand::rngs::StdRng;
use rand::SeedableRng;

/// Key length of `lamina bench` and db_bench's default.
pub const KEY_SIZE: usize = 16;
/// Value length of `lamina bench` and db_bench's default.
pub const VALUE_SIZE: usize = 100;

/// db_bench's `GenerateKeyFromInt` at 16 bytes: `i` big-endian, then `'0'`
/// padding (the layout `lamina bench` uses).
pub fn db_bench_key(i: u64) -> Vec<u8> {
    let mut key = i.to_be_bytes().to_vec();
    key.resize(KEY_SIZE, b'0');
    key
}

/// A value of `VALUE_SIZE` bytes that names its key, so a wrong hit shows.
pub fn value_for(key: &[u8]) -> Vec<u8> {
    let mut value = key.to_vec();
    value.resize(VALUE_SIZE, b'v');
    value
}

/// The generator every bench draws from (seed fixed, so runs compare).
pub fn rng() -> StdRng {
    StdRng::seed_from_u64(301)
}

/// Cycles through `keys` (a power-of-two count) one per call.
pub struct Cycle<'a> {
    keys: &'a [Vec<u8>],
    next: usize,
}

impl<'a> Cycle<'a> {
    pub fn new(keys: &'a [Vec<u8>]) -> Self {
        assert!(
            keys.len().is_power_of_two(),
            "cycle length must be a power of two"
        );
        Cycle { keys, next: 0 }
    }

    #[inline]
    pub fn pick(&mut self) -> &'a [u8] {
        let key = &self.keys[self.next];
        self.next = (self.next + 1) & (self.keys.len() - 1);
        key
    }
}
