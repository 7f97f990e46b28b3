//! Replaying a write-ahead log (the format is `record.rs` framing around
//! `batch.rs` records; docs/format.md).

use std::path::Path;

use crate::batch::decode_record;
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::filename::wal_name;
use crate::memtable::MemTable;
use crate::record::read_records;
use crate::vfs::Vfs;

/// Replays WAL `n` into `mem`; returns the largest sequence number seen.
/// A torn tail is cut off (and, with `truncate_torn`, the file truncated);
/// corruption is an error.
pub(crate) fn replay_wal(
    vfs: &dyn Vfs,
    dir: &Path,
    n: u64,
    mem: &MemTable,
    truncate_torn: bool,
) -> Result<u64> {
    let name = wal_name(n);
    let path = dir.join(&name);
    let data = vfs.read_all(&path)?;
    let mut max_seq = 0;
    let now = now_ms();
    let end = read_records(&data, &name, |offset, payload| {
        decode_record(payload, |seq, e| {
            mem.add_entry(seq, &e, now);
            max_seq = max_seq.max(seq);
        })
        .map(|_| ())
        .ok_or_else(|| Error::corruption(name.as_str(), offset, "malformed write batch"))
    })?;
    if end.torn && truncate_torn {
        vfs.truncate(&path, end.valid_len)?;
    }
    Ok(max_seq)
}
