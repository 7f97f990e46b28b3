//! Checksummed record framing shared by the write-ahead log and the manifest.
//!
//! A log file is a sequence of records:
//!
//! ```text
//! +------------------+------------------+-----------------+
//! | crc: u32 LE      | len: u32 LE      | payload (len B) |
//! +------------------+------------------+-----------------+
//! crc = masked CRC32C over the 4 len bytes followed by the payload
//! ```
//!
//! Reading distinguishes a *torn tail* (the last record is incomplete, or
//! fails its checksum with nothing but zeros after it: what a crash during an
//! append leaves behind) from *corruption* (a bad record followed by more
//! data), which is reported as [`Error::Corruption`].

use crate::coding::masked_crc2;
use crate::error::{Error, Result};
use crate::vfs::WritableFile;

/// Bytes of the record header.
pub const HEADER_LEN: usize = 8;

/// Largest payload a record may carry; a header claiming more is corrupt.
pub const MAX_RECORD_LEN: usize = 1 << 30;

/// Appends one framed record to `file` (buffered: the caller flushes/syncs).
pub fn append_record(file: &mut dyn WritableFile, payload: &[u8]) -> Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&l| (l as usize) <= MAX_RECORD_LEN)
        .ok_or_else(|| Error::InvalidArgument("record larger than 1 GiB".into()))?;
    let len_bytes = len.to_le_bytes();
    let crc = masked_crc2(&len_bytes, payload);
    let mut header = [0u8; HEADER_LEN];
    header[..4].copy_from_slice(&crc.to_le_bytes());
    header[4..].copy_from_slice(&len_bytes);
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

/// Calls `f(offset, payload)` for every record of `data`, in order.
///
/// Returns where the valid prefix ends. A bad record followed by further
/// non-zero data is corruption and is returned as an error naming `file`.
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
        if rest.len() < HEADER_LEN {
            return Ok(torn);
        }
        let crc = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let len_bytes = [rest[4], rest[5], rest[6], rest[7]];
        let len = u32::from_le_bytes(len_bytes) as usize;
        let body = rest.get(HEADER_LEN..HEADER_LEN + len);
        match body {
            Some(payload) if len <= MAX_RECORD_LEN && masked_crc2(&len_bytes, payload) == crc => {
                f(pos as u64, payload)?;
                pos += HEADER_LEN + len;
            }
            // The record runs past the end of the file: an append was cut short.
            None => return Ok(torn),
            Some(_) => {
                let after = &rest[(HEADER_LEN + len).min(rest.len())..];
                if after.iter().all(|&b| b == 0) {
                    return Ok(torn);
                }
                return Err(Error::corruption(
                    file,
                    pos as u64,
                    "record checksum mismatch followed by more records",
                ));
            }
        }
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
    fn flipped_byte_in_middle_is_corruption_and_in_last_record_is_torn() {
        let data = build(&[b"first", b"second", b"third"]);
        let mut mid = data.clone();
        mid[HEADER_LEN + 1] ^= 0x40;
        assert!(collect(&mid).unwrap_err().is_corruption());
        let mut last = data.clone();
        let n = last.len();
        last[n - 1] ^= 0x40;
        let (recs, end) = collect(&last).unwrap();
        assert_eq!(recs.len(), 2);
        assert!(end.torn);
    }
}
