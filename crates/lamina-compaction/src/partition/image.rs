//! Order-preserving images of keys as `u64`s, the key space the range
//! partitioners (seed 000 §5.4.2–5.4.4) split in halves.
//!
//! * [`lambda`], for byte strings of any length: the seed's
//!   `λ(s) = Σ_{i≥1} (s[i] + 1) / 257^i`, a number in `[0, 1)`, scaled to
//!   u64. The seed computes it in `long double` (64-bit mantissa); here it is
//!   exact fixed-point arithmetic on u128 (119 fraction bits, Horner's rule
//!   from the last byte), then truncated to 64 bits. Every step is monotone,
//!   so `a < b` (bytewise) implies `lambda(a) <= lambda(b)`; a property test
//!   checks it.
//! * [`big_endian`], for fixed-width big-endian integer keys (the DSL's
//!   4-byte keys, 8-byte `u64::to_be_bytes`): the first 8 bytes, zero-padded
//!   — exact (one-to-one and order-preserving) for keys of at most 8 bytes.

/// How a database maps its keys to `u64`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyImage {
    /// [`lambda`]: byte strings of any length.
    #[default]
    Lambda,
    /// [`big_endian`]: fixed-width big-endian integers of up to 8 bytes.
    BigEndian,
}

impl KeyImage {
    /// The image of `key`.
    pub fn of(self, key: &[u8]) -> u64 {
        match self {
            KeyImage::Lambda => lambda(key),
            KeyImage::BigEndian => big_endian(key),
        }
    }

    /// The spec name (`lambda`, `be`).
    pub fn name(self) -> &'static str {
        match self {
            KeyImage::Lambda => "lambda",
            KeyImage::BigEndian => "be",
        }
    }

    /// Parses a spec name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "lambda" => Some(KeyImage::Lambda),
            "be" => Some(KeyImage::BigEndian),
            _ => None,
        }
    }
}

/// Fraction bits of the fixed-point accumulator: `(s[i] + 1) << FRAC` must
/// fit next to an accumulator below `1 << FRAC` in a u128.
const FRAC: u32 = 119;

/// Bytes past this many cannot change the first 64 fraction bits
/// (257^-16 < 2^-128), so they are not read.
const SIGNIFICANT: usize = 16;

/// λ(s) · 2^64, truncated: order-preserving (weakly) for byte strings.
pub fn lambda(key: &[u8]) -> u64 {
    let used = &key[..key.len().min(SIGNIFICANT)];
    // x = λ of the suffix, as a fraction of 2^FRAC; x < 2^FRAC throughout.
    let mut x: u128 = 0;
    for &b in used.iter().rev() {
        x = (x + ((u128::from(b) + 1) << FRAC)) / 257;
    }
    (x >> (FRAC - 64)) as u64
}

/// The first 8 bytes of `key` as a big-endian u64, zero-padded.
pub fn big_endian(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lambda_of_short_strings_by_hand() {
        assert_eq!(lambda(b""), 0);
        // "\0" = 1/257 of the key space.
        let one = ((1u128 << 64) / 257) as u64;
        assert!(lambda(b"\0").abs_diff(one) <= 1);
        // 0xff = 256/257, just below the top.
        assert!(lambda(b"\xff") >= u64::MAX / 257 * 256);
        assert!(lambda(b"a") < lambda(b"a\0"));
        assert!(lambda(b"a\xff\xff") < lambda(b"b"));
    }

    #[test]
    fn big_endian_is_exact_for_integers() {
        for (a, b) in [(0u64, 1u64), (255, 256), (u64::MAX - 1, u64::MAX)] {
            assert_eq!(big_endian(&a.to_be_bytes()), a);
            assert!(big_endian(&a.to_be_bytes()) < big_endian(&b.to_be_bytes()));
        }
        assert_eq!(big_endian(&[0x80, 0, 0, 1]), 0x8000_0001_0000_0000);
    }

    proptest! {
        #[test]
        fn lambda_preserves_order(a in proptest::collection::vec(any::<u8>(), 0..40),
                                  b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(lambda(&lo) <= lambda(&hi));
        }

        #[test]
        fn lambda_preserves_order_with_shared_prefixes(
            prefix in proptest::collection::vec(any::<u8>(), 0..12),
            a in proptest::collection::vec(any::<u8>(), 0..6),
            b in proptest::collection::vec(any::<u8>(), 0..6)) {
            let (mut x, mut y) = (prefix.clone(), prefix);
            x.extend(a);
            y.extend(b);
            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
            prop_assert!(lambda(&lo) <= lambda(&hi));
        }

        #[test]
        fn big_endian_preserves_order(a in proptest::collection::vec(any::<u8>(), 0..12),
                                      b in proptest::collection::vec(any::<u8>(), 0..12)) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(big_endian(&lo) <= big_endian(&hi));
        }
    }
}
