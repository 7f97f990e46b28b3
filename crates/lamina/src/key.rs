//! Internal keys and the order-preserving key encodings.
//!
//! Every entry stored by the engine is addressed by an *internal key*: the
//! user key followed by an 8-byte little-endian trailer `seq << 8 | kind`.
//! Internal keys order by user key ascending (bytewise), then by trailer
//! descending, so the newest version of a key comes first.
//!
//! ```text
//! +-------------------+-----------------------------------+
//! | user key (n B)    | trailer: u64 LE = seq << 8 | kind |
//! +-------------------+-----------------------------------+
//! ```

use std::cmp::Ordering;

/// Largest sequence number representable in a trailer (56 bits).
pub const MAX_SEQ: u64 = (1 << 56) - 1;

/// Length of the trailer appended to a user key.
pub const TRAILER_LEN: usize = 8;

/// What an entry records about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted at this sequence number.
    Delete = 0,
    /// A value was written at this sequence number.
    Put = 1,
}

impl ValueKind {
    /// Decodes a kind byte.
    pub fn from_byte(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            _ => None,
        }
    }
}

/// The kind used in seek targets: the largest kind, so a target sorts before
/// every entry of the same user key and sequence number.
const SEEK_KIND: u8 = ValueKind::Put as u8;

/// Builds an internal key.
pub fn make_internal_key(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// Appends an internal key to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: u64, kind: ValueKind) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&((seq << 8) | kind as u64).to_le_bytes());
}

/// The internal key that sorts first among the versions of `user_key`
/// visible at `snapshot_seq`.
pub fn seek_key(user_key: &[u8], snapshot_seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&((snapshot_seq.min(MAX_SEQ) << 8) | SEEK_KIND as u64).to_le_bytes());
    k
}

/// A decoded view of an internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub seq: u64,
    /// Put or tombstone.
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is too short or has an unknown kind.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let t = u64::from_le_bytes(trailer.try_into().ok()?);
    Some(ParsedKey {
        user_key,
        seq: t >> 8,
        kind: ValueKind::from_byte((t & 0xff) as u8)?,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short,
/// which only happens for corrupt input that decoding rejects elsewhere).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

fn trailer(ikey: &[u8]) -> u64 {
    let start = ikey.len().saturating_sub(TRAILER_LEN);
    let mut t = [0u8; 8];
    let tail = &ikey[start..];
    t[..tail.len()].copy_from_slice(tail);
    u64::from_le_bytes(t)
}

/// Total order on internal keys: user key ascending, then newest first.
///
/// A shortcut first: when both user keys have at least 8 bytes and those
/// differ, one integer comparison decides, without the `memcmp` call that
/// dominated seeks and merges of short keys.
#[inline]
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() >= 8 + TRAILER_LEN && b.len() >= 8 + TRAILER_LEN {
        if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
            let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
            if x != y {
                return x.cmp(&y);
            }
        }
    }
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

/// The first 8 bytes of an internal key's user key as a big-endian integer,
/// zero padded. If two prefixes differ, the user keys differ in the same
/// direction, so ordered containers compare prefixes first.
pub fn user_key_prefix(ikey: &[u8]) -> u64 {
    let mut p = [0u8; 8];
    let uk = user_key(ikey);
    let n = uk.len().min(8);
    p[..n].copy_from_slice(&uk[..n]);
    u64::from_be_bytes(p)
}

/// An owned internal key with the internal ordering, for ordered containers.
///
/// It carries the first 8 bytes of the user key as a big-endian integer (zero
/// padded), which decides most comparisons without touching the heap: if two
/// prefixes differ, the user keys differ in the same direction.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalKey {
    prefix: u64,
    bytes: Vec<u8>,
}

#[cfg(test)]
impl InternalKey {
    /// Wraps an encoded internal key.
    pub fn new(bytes: Vec<u8>) -> Self {
        InternalKey {
            prefix: user_key_prefix(&bytes),
            bytes,
        }
    }

    /// The encoded internal key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| compare_internal(&self.bytes, &other.bytes))
    }
}

#[cfg(test)]
impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_order_is_user_key_then_newest_first() {
        let a1 = make_internal_key(b"a", 1, ValueKind::Put);
        let a2 = make_internal_key(b"a", 2, ValueKind::Delete);
        let ab = make_internal_key(b"ab", 0, ValueKind::Put);
        assert_eq!(compare_internal(&a2, &a1), Ordering::Less);
        assert_eq!(compare_internal(&a1, &ab), Ordering::Less);
        assert_eq!(compare_internal(&seek_key(b"a", 2), &a2), Ordering::Less);
        assert_eq!(compare_internal(&seek_key(b"a", 1), &a2), Ordering::Greater);
    }

    #[test]
    fn parse_roundtrip_and_rejects_garbage() {
        let k = make_internal_key(b"key", 42, ValueKind::Delete);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"key"[..], 42, ValueKind::Delete)
        );
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 7;
        assert!(parse_internal_key(&bad).is_none());
    }

    #[test]
    fn internal_key_prefix_order_agrees_with_compare_internal() {
        let keys: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"ab",
            b"ab\x01",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"b",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for a in &keys {
            for b in &keys {
                for (sa, sb) in [(1, 1), (1, 2), (2, 1)] {
                    let ka = make_internal_key(a, sa, ValueKind::Put);
                    let kb = make_internal_key(b, sb, ValueKind::Put);
                    assert_eq!(
                        InternalKey::new(ka.clone()).cmp(&InternalKey::new(kb.clone())),
                        compare_internal(&ka, &kb),
                        "{a:?}@{sa} vs {b:?}@{sb}"
                    );
                }
            }
        }
    }
}
