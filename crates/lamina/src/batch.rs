//! Write batches: an atomic group of puts, deletes and range deletes.
//!
//! A batch is kept in the same encoding the write-ahead log stores, so a
//! group commit concatenates batches without re-encoding:
//!
//! ```text
//! +-------------+---------------+----------------------------------------+
//! | seq: u64 LE | count: u32 LE | entries...                             |
//! +-------------+---------------+----------------------------------------+
//! entry = kind: u8 (0 delete, 1 put, 2 range delete) | varint klen | key
//!         | [varint vlen | value]   (puts: the value; range deletes: the end key)
//! ```
//! `seq` is the sequence number of the first entry; entry *i* gets `seq + i`.

use crate::coding::{get_bytes, put_bytes};
use crate::key::ValueKind;

/// Bytes of the batch header.
pub(crate) const BATCH_HEADER: usize = 12;

/// The kind byte of a range delete (`key` is the start, `value` the end).
const RANGE_DELETE: u8 = 2;

/// What a batch entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchOp {
    /// A put (`ValueKind::Put`) or a point delete (`ValueKind::Delete`).
    Point(ValueKind),
    /// Deletes `[key, value)`.
    DeleteRange,
}

/// An atomic group of writes. All of it is applied, or none of it.
#[derive(Debug, Clone)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    user_bytes: u64,
    has_range_deletes: bool,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; BATCH_HEADER],
            count: 0,
            user_bytes: 0,
            has_range_deletes: false,
        }
    }

    /// Adds a put of `key` → `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.rep.push(ValueKind::Put as u8);
        put_bytes(&mut self.rep, key);
        put_bytes(&mut self.rep, value);
        self.count += 1;
        self.user_bytes += (key.len() + value.len()) as u64;
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.rep.push(ValueKind::Delete as u8);
        put_bytes(&mut self.rep, key);
        self.count += 1;
        self.user_bytes += key.len() as u64;
    }

    /// Adds a delete of every key in `[start, end)` (a range tombstone);
    /// keys written later in the same batch or after it are not affected.
    /// An empty range (`start >= end`) adds nothing.
    pub fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        if start >= end {
            return;
        }
        self.has_range_deletes = true;
        self.rep.push(RANGE_DELETE);
        put_bytes(&mut self.rep, start);
        put_bytes(&mut self.rep, end);
        self.count += 1;
        self.user_bytes += (start.len() + end.len()) as u64;
    }

    /// True if the batch holds a range delete.
    pub(crate) fn has_range_deletes(&self) -> bool {
        self.has_range_deletes
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True if the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.rep.truncate(BATCH_HEADER);
        self.count = 0;
        self.user_bytes = 0;
        self.has_range_deletes = false;
    }

    /// User key + value bytes in the batch.
    pub(crate) fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// The encoded entries, without the header.
    pub(crate) fn entries(&self) -> &[u8] {
        &self.rep[BATCH_HEADER..]
    }

    pub(crate) fn count(&self) -> u32 {
        self.count
    }
}

/// Encodes the header of a group of `count` entries starting at `seq`.
pub(crate) fn encode_header(dst: &mut Vec<u8>, seq: u64, count: u32) {
    dst.extend_from_slice(&seq.to_le_bytes());
    dst.extend_from_slice(&count.to_le_bytes());
}

/// One decoded batch entry.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BatchEntry<'a> {
    pub op: BatchOp,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Decodes the header of an encoded batch: (first seq, count, entries).
pub(crate) fn decode_header(rep: &[u8]) -> Option<(u64, u32, &[u8])> {
    let seq = u64::from_le_bytes(rep.get(..8)?.try_into().ok()?);
    let count = u32::from_le_bytes(rep.get(8..12)?.try_into().ok()?);
    Some((seq, count, rep.get(BATCH_HEADER..)?))
}

/// Iterates the entries of an encoded entry list; yields `None` on malformed
/// input (the caller reports it as corruption).
pub(crate) fn decode_entries(mut data: &[u8]) -> impl Iterator<Item = Option<BatchEntry<'_>>> {
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || data.is_empty() {
            return None;
        }
        let entry = (|| {
            let (&kind, rest) = data.split_first()?;
            data = rest;
            let op = match kind {
                RANGE_DELETE => BatchOp::DeleteRange,
                k => BatchOp::Point(ValueKind::from_byte(k)?),
            };
            let key = get_bytes(&mut data)?;
            let value = match op {
                BatchOp::Point(ValueKind::Delete) => &[][..],
                _ => get_bytes(&mut data)?,
            };
            Some(BatchEntry { op, key, value })
        })();
        failed = entry.is_none();
        Some(entry)
    })
}

/// Decodes one WAL record payload (a group of batches: header, then entries),
/// calling `f(seq, entry)` for each entry in order; returns the number of
/// entries, or `None` if the payload is malformed or holds a different
/// number of entries than its header says. Entries before the malformation
/// have been passed to `f` by then: the caller treats the record as corrupt.
pub(crate) fn decode_record<'a>(
    payload: &'a [u8],
    mut f: impl FnMut(u64, BatchEntry<'a>),
) -> Option<u32> {
    let (seq, count, entries) = decode_header(payload)?;
    let mut applied = 0u32;
    for entry in decode_entries(entries) {
        f(seq.checked_add(u64::from(applied))?, entry?);
        applied = applied.checked_add(1)?;
    }
    (applied == count).then_some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_roundtrip() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"", b"");
        assert_eq!(b.len(), 3);
        let got: Vec<_> = decode_entries(b.entries()).map(|e| e.unwrap()).collect();
        assert_eq!(
            got[0],
            BatchEntry {
                op: BatchOp::Point(ValueKind::Put),
                key: b"k1",
                value: b"v1"
            }
        );
        assert_eq!(
            got[1],
            BatchEntry {
                op: BatchOp::Point(ValueKind::Delete),
                key: b"k2",
                value: b""
            }
        );
        assert_eq!(got[2].key, b"");
        assert_eq!(b.user_bytes(), 6);
        b.delete_range(b"a", b"c");
        b.delete_range(b"c", b"a");
        assert_eq!(b.len(), 4);
        let last = decode_entries(b.entries()).last().unwrap().unwrap();
        assert_eq!(
            last,
            BatchEntry {
                op: BatchOp::DeleteRange,
                key: b"a",
                value: b"c"
            }
        );
        b.clear();
        assert!(b.is_empty());
        assert_eq!(decode_entries(b.entries()).count(), 0);
    }

    #[test]
    fn malformed_entries_yield_none_once() {
        let bad = [1u8, 5, b'a'];
        let got: Vec<_> = decode_entries(&bad).collect();
        assert_eq!(got, vec![None]);
        let bad_kind = [9u8, 0];
        // A range delete without its end key.
        assert_eq!(decode_entries(&[2u8, 1, b'a']).next(), Some(None));
        assert_eq!(decode_entries(&bad_kind).next(), Some(None));
    }
}
