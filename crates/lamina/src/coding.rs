//! Little helpers for the binary encodings shared by the SST, WAL and manifest
//! formats: LEB128 varints and fixed-width little-endian integers.
//!
//! Decoders take a cursor (`&mut &[u8]`) and return `None` when the input is
//! too short or malformed; callers turn that into a `Corruption` error that
//! names their file and offset.

/// Local result of a decoder: the reason is attached to a file and offset by
/// the caller.
pub type DecodeResult<T> = std::result::Result<T, &'static str>;

/// Appends `v` as an unsigned LEB128 varint (1..=10 bytes).
pub fn put_varint(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Reads an unsigned LEB128 varint, advancing the cursor.
pub fn get_varint(src: &mut &[u8]) -> Option<u64> {
    let mut result: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = src.split_first()?;
        *src = rest;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        result |= bits << shift;
        if byte & 0x80 == 0 {
            return Some(result);
        }
    }
    None
}

/// Appends a varint length followed by the bytes.
pub fn put_bytes(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Reads a varint-length-prefixed byte string, advancing the cursor.
pub fn get_bytes<'a>(src: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(get_varint(src)?).ok()?;
    if src.len() < len {
        return None;
    }
    let (head, tail) = src.split_at(len);
    *src = tail;
    Some(head)
}

/// Reads exactly `N` bytes, advancing the cursor.
pub fn get_array<const N: usize>(src: &mut &[u8]) -> Option<[u8; N]> {
    if src.len() < N {
        return None;
    }
    let (head, tail) = src.split_at(N);
    *src = tail;
    head.try_into().ok()
}

/// Reads a little-endian u32, advancing the cursor.
pub fn get_u32(src: &mut &[u8]) -> Option<u32> {
    get_array::<4>(src).map(u32::from_le_bytes)
}

/// Reads a little-endian u64, advancing the cursor.
pub fn get_u64(src: &mut &[u8]) -> Option<u64> {
    get_array::<8>(src).map(u64::from_le_bytes)
}

/// CRC32C (Castagnoli) of `data`, masked as LevelDB does so that a CRC stored
/// inside checksummed data does not checksum to a fixed point.
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// CRC32C over two slices, masked like [`masked_crc`].
pub fn masked_crc2(a: &[u8], b: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(a), b);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_edges() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut cur = buf.as_slice();
            assert_eq!(get_varint(&mut cur), Some(v));
            assert!(cur.is_empty());
        }
    }

    #[test]
    fn varint_rejects_truncated_and_overlong() {
        let mut cur: &[u8] = &[0x80, 0x80];
        assert_eq!(get_varint(&mut cur), None);
        let mut cur: &[u8] = &[0xff; 11];
        assert_eq!(get_varint(&mut cur), None);
    }

    #[test]
    fn bytes_rejects_short_input() {
        let mut cur: &[u8] = &[5, 1, 2];
        assert_eq!(get_bytes(&mut cur), None);
    }

    #[test]
    fn crc_masks_differ_from_raw() {
        let data = b"lamina";
        assert_ne!(masked_crc(data), crc32c::crc32c(data));
        assert_eq!(masked_crc2(b"lam", b"ina"), masked_crc(data));
    }
}
