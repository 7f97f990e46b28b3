//! The DSL's keys and values: `i32`s stored as 4 bytes whose bytewise order
//! is their numeric order (big-endian with the sign bit flipped), so the
//! engine's byte-ordered ranges are the DSL's numeric ranges. The engine
//! itself knows only bytes.

/// Encodes `v` so that bytewise order equals numeric order.
pub fn encode_i32(v: i32) -> [u8; 4] {
    ((v as u32) ^ 0x8000_0000).to_be_bytes()
}

/// Inverse of [`encode_i32`]; `None` unless `b` is exactly 4 bytes.
pub fn decode_i32(b: &[u8]) -> Option<i32> {
    let arr: [u8; 4] = b.try_into().ok()?;
    Some((u32::from_be_bytes(arr) ^ 0x8000_0000) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i32_encoding_preserves_order() {
        let vals = [i32::MIN, -100, -1, 0, 1, 99, i32::MAX];
        for w in vals.windows(2) {
            assert!(encode_i32(w[0]) < encode_i32(w[1]));
        }
        for v in vals {
            assert_eq!(decode_i32(&encode_i32(v)), Some(v));
        }
        assert_eq!(decode_i32(b"abc"), None);
    }
}
