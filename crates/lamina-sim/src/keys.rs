//! The model's keys: `u64`s, 8 bytes big-endian.

/// A fixed pseudo-random permutation of `u64` (splitmix64's finalizer).
pub(crate) fn scramble(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Encodes a model key.
pub fn key(k: u64) -> Vec<u8> {
    k.to_be_bytes().to_vec()
}

/// Decodes a model key (a prefix of up to 8 bytes, zero-padded).
pub fn key_value(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        for k in [0, 1, 255, 1 << 40, u64::MAX] {
            assert_eq!(key_value(&key(k)), k);
        }
        assert_eq!(key_value(b"\x01"), 1 << 56);
    }
}
