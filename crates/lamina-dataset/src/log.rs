//! The dataset log: one record per write, holding its operations on every
//! index (framed by the engine's [`lamina::log`]), and how a logged write
//! is applied.

use lamina::log::{get_bytes, get_varint, put_bytes, put_varint};
use lamina::vfs::WritableFile;
use lamina::{Db, Result, WriteBatch};

/// The name of dataset log `n`.
pub(crate) fn log_name(n: u64) -> String {
    format!("dlog-{n:06}.log")
}

/// The number of a dataset log's name, `None` for any other name.
pub(crate) fn parse_log_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("dlog-")?.strip_suffix(".log")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Which index an operation of a log record goes to: the primary, the
/// spatial index, or field index `i` as `FIRST_FIELD + i`.
pub(crate) const PRIMARY: u8 = 0;
pub(crate) const SECONDARY: u8 = 1;
pub(crate) const FIRST_FIELD: u8 = 2;
pub(crate) const PUT: u8 = 0;
pub(crate) const DELETE: u8 = 1;

/// One write's operations on every index, as logged and as applied.
pub(crate) struct Ops {
    log: Vec<u8>,
    count: u64,
    /// The primary's batch, the spatial index's, then one per field index.
    batches: Vec<WriteBatch>,
}

impl Ops {
    pub(crate) fn new(fields: usize) -> Ops {
        Ops {
            log: Vec::new(),
            count: 0,
            batches: (0..usize::from(FIRST_FIELD) + fields)
                .map(|_| WriteBatch::default())
                .collect(),
        }
    }

    /// Adds an operation; `index` is below `FIRST_FIELD` plus the number
    /// of field indexes (callers and [`Ops::decode`] check).
    pub(crate) fn add(&mut self, index: u8, kind: u8, key: &[u8], value: &[u8]) {
        self.log.push(index);
        self.log.push(kind);
        put_bytes(&mut self.log, key);
        put_bytes(&mut self.log, value);
        self.count += 1;
        let Some(batch) = self.batches.get_mut(usize::from(index)) else {
            return;
        };
        if kind == PUT {
            batch.put(key, value);
        } else {
            batch.delete(key);
        }
    }

    /// The log record: a varint count, then per operation the index byte,
    /// the kind byte, the key and the value (varint-length-prefixed).
    pub(crate) fn record(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.log.len() + 10);
        put_varint(&mut out, self.count);
        out.extend_from_slice(&self.log);
        out
    }

    pub(crate) fn decode(mut rec: &[u8], fields: usize) -> Option<Ops> {
        let count = get_varint(&mut rec)?;
        let mut ops = Ops::new(fields);
        for _ in 0..count {
            let (&index, rest) = rec.split_first()?;
            let (&kind, rest) = rest.split_first()?;
            rec = rest;
            if usize::from(index) >= ops.batches.len() || kind > DELETE {
                return None;
            }
            let key = get_bytes(&mut rec)?;
            let value = get_bytes(&mut rec)?;
            ops.add(index, kind, key, value);
        }
        rec.is_empty().then_some(ops)
    }
}

/// The dataset log being written.
pub(crate) struct Writer {
    pub(crate) log: Box<dyn WritableFile>,
    pub(crate) number: u64,
    /// A write reached the log but not both indexes: refuse further writes
    /// (a reopen replays the log and repairs the indexes).
    pub(crate) broken: bool,
}

/// Applies one logged write to every index, the secondary ones first.
pub(crate) fn apply(primary: &Db, index: &Db, fields: &[Db], ops: Ops) -> Result<()> {
    let mut batches = ops.batches.into_iter();
    let primary_batch = batches.next().unwrap_or_default();
    for (db, batch) in std::iter::once(index).chain(fields).zip(batches) {
        if !batch.is_empty() {
            db.write(batch)?;
        }
    }
    if !primary_batch.is_empty() {
        primary.write(primary_batch)?;
    }
    Ok(())
}

/// The log's index byte of field index `i` (`open` bounds the count).
pub(crate) fn field_index(i: usize) -> u8 {
    FIRST_FIELD.saturating_add(u8::try_from(i).unwrap_or(u8::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_roundtrip() {
        assert_eq!(parse_log_name(&log_name(7)), Some(7));
        assert_eq!(log_name(7), "dlog-000007.log");
        for bad in [
            "dlog-7.log",
            "dlog-00000x.log",
            "000007.log",
            "dlog-000007.log.tmp",
        ] {
            assert_eq!(parse_log_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn ops_roundtrip_and_reject_garbage() {
        let mut ops = Ops::new(0);
        ops.add(SECONDARY, DELETE, b"old", b"");
        ops.add(PRIMARY, PUT, b"pk", b"value");
        let rec = ops.record();
        // count 2, then (1, 1, "old", ""), (0, 0, "pk", "value").
        assert_eq!(
            rec,
            [
                &[2u8, 1, 1, 3][..],
                b"old",
                &[0, 0, 0, 2],
                b"pk",
                &[5],
                b"value"
            ]
            .concat()
        );
        let back = Ops::decode(&rec, 0).unwrap();
        assert_eq!(back.record(), rec);
        let sizes: Vec<usize> = back.batches.iter().map(WriteBatch::len).collect();
        assert_eq!(sizes, [1, 1]);
        assert!(Ops::decode(&rec[..rec.len() - 1], 0).is_none());
        let mut bad = rec.clone();
        bad[1] = 2;
        // Index 2 is a field index: unknown to a dataset without one.
        assert!(Ops::decode(&bad, 0).is_none());
        let sizes: Vec<usize> = Ops::decode(&bad, 1)
            .unwrap()
            .batches
            .iter()
            .map(WriteBatch::len)
            .collect();
        assert_eq!(sizes, [1, 0, 1]);
        assert!(Ops::decode(&[rec.as_slice(), &[0]].concat(), 0).is_none());
    }
}
