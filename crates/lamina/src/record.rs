//! Checksummed record framing shared by the write-ahead log and the manifest.
//!
//! A log file is a sequence of records:
//!
//! ```text
//! +--------------+--------------+------------------+-----------------+
//! | crc: u32 LE  | len: u32 LE  | len_crc: u32 LE  | payload (len B) |
//! +--------------+--------------+------------------+-----------------+
//! crc     = masked CRC32C over the 4 len bytes followed by the payload
//! len_crc = masked CRC32C over the 4 len bytes
//! ```
//!
//! The length has its own checksum so that a damaged length is recognised
//! as corruption rather than mistaken for a record cut short by a crash.
//! Reading distinguishes a *torn tail* (the file ends inside the last record,
//! or in zeros: what a crash during an append leaves behind) from
//! *corruption* (any record that is complete but fails a checksum), which is
//! reported as [`Error::Corruption`] naming the file and offset.

use crate::coding::{masked_crc, masked_crc2};
use crate::error::{Error, Result};
use crate::vfs::WritableFile;

/// Bytes of the record header.
pub const HEADER_LEN: usize = 12;

/// Largest payload a record may carry; a header claiming more is corrupt.
pub const MAX_RECORD_LEN: usize = 1 << 30;

/// Appends one framed record to `file` (buffered: the caller flushes/syncs).
pub fn append_record(file: &mut dyn WritableFile, payload: &[u8]) -> Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&l| (l as usize) <= MAX_RECORD_LEN)
        .ok_or_else(|| Error::InvalidArgument("record larger than 1 GiB".into()))?;
    let len_bytes = len.to_le_bytes();
    let mut header = [0u8; HEADER_LEN];
    header[..4].copy_from_slice(&masked_crc2(&len_bytes, payload).to_le_bytes());
    header[4..8].copy_from_slice(&len_bytes);
    header[8..].copy_from_slice(&masked_crc(&len_bytes).to_le_bytes());
    file.append(&header)?;
    file.append(payload)
}

/// How a log file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEnd {
    /// Length of the valid prefix: every record before it decoded.
    pub valid_len: u64,
    /// True if bytes after `valid_len` were dropped as a torn tail.
    pub torn: bool,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

/// Calls `f(offset, payload)` for every record of `data`, in order, and
/// returns where the valid prefix ends.
pub fn read_records(
    data: &[u8],
    file: &str,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<LogEnd> {
    let mut pos = 0usize;
    while pos < data.len() {
        let rest = &data[pos..];
        let torn = LogEnd {
            valid_len: pos as u64,
            torn: true,
        };
        if rest.len() < HEADER_LEN || rest.iter().all(|&b| b == 0) {
            return Ok(torn);
        }
        let len_bytes = u32_at(rest, 4).to_le_bytes();
        if masked_crc(&len_bytes) != u32_at(rest, 8) {
            return Err(Error::corruption(
                file,
                pos as u64,
                "record length checksum mismatch",
            ));
        }
        let len = u32::from_le_bytes(len_bytes) as usize;
        if len > MAX_RECORD_LEN {
            return Err(Error::corruption(
                file,
                pos as u64,
                "record length out of range",
            ));
        }
        let Some(payload) = rest.get(HEADER_LEN..HEADER_LEN + len) else {
            // The file ends inside this record: an append was cut short.
            return Ok(torn);
        };
        if masked_crc2(&len_bytes, payload) != u32_at(rest, 0) {
            return Err(Error::corruption(
                file,
                pos as u64,
                "record checksum mismatch",
            ));
        }
        f(pos as u64, payload)?;
        pos += HEADER_LEN + len;
    }
    Ok(LogEnd {
        valid_len: pos as u64,
        torn: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::mem::MemFs;
    use crate::vfs::Vfs;
    use std::path::Path;

    fn build(records: &[&[u8]]) -> Vec<u8> {
        let fs = MemFs::default();
        let p = Path::new("/log");
        let mut w = fs.create(p).unwrap();
        for r in records {
            append_record(w.as_mut(), r).unwrap();
        }
        w.flush().unwrap();
        fs.read_all(p).unwrap()
    }

    fn collect(data: &[u8]) -> Result<(Vec<Vec<u8>>, LogEnd)> {
        let mut out = Vec::new();
        let end = read_records(data, "log", |_, p| {
            out.push(p.to_vec());
            Ok(())
        })?;
        Ok((out, end))
    }

    #[test]
    fn roundtrip() {
        let data = build(&[b"a", b"", b"hello world"]);
        let (recs, end) = collect(&data).unwrap();
        assert_eq!(recs, vec![b"a".to_vec(), vec![], b"hello world".to_vec()]);
        assert_eq!(
            end,
            LogEnd {
                valid_len: data.len() as u64,
                torn: false
            }
        );
    }

    #[test]
    fn every_truncation_is_a_torn_tail_with_a_valid_prefix() {
        let records: [&[u8]; 3] = [b"first", b"second record", b"third"];
        let data = build(&records);
        for cut in 0..data.len() {
            let (recs, end) = collect(&data[..cut]).unwrap();
            assert!(recs.len() <= 3);
            for (got, want) in recs.iter().zip(records.iter()) {
                assert_eq!(got.as_slice(), *want);
            }
            assert!(end.valid_len <= cut as u64);
        }
    }

    #[test]
    fn every_flipped_byte_is_corruption() {
        let data = build(&[b"first", b"second", b"third"]);
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 0x40;
            assert!(collect(&bad).unwrap_err().is_corruption(), "flip at {i}");
        }
    }

    #[test]
    fn zero_tail_is_torn() {
        let mut data = build(&[b"first"]);
        let n = data.len();
        data.extend_from_slice(&[0; 100]);
        let (recs, end) = collect(&data).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(
            end,
            LogEnd {
                valid_len: n as u64,
                torn: true
            }
        );
    }
}
