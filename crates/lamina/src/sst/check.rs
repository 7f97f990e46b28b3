//! Whole-table checks and reports: [`Table::verify`] (the offline verifier's
//! and `Db::verify_checksums`' re-read of a file) and the block reports and
//! entry walks `lamina inspect` prints.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, ValueKind};
use crate::range_del::{self};
use crate::spatial::Rect;

use super::block::{Block, BlockIter};
use super::format::{
    block_contents, BlockHandle, FenceIndex, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN,
};
use super::reader::{raw_len, read_checked, Table};

/// One data block of a table, for inspection ([`Table::block_reports`]).
#[derive(Debug, Clone)]
pub struct BlockReport {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Bytes stored (the 5-byte trailer excluded; compressed bytes for a
    /// compressed block).
    pub size: u64,
    /// The masked CRC32C stored in the trailer.
    pub stored_checksum: Option<u32>,
    /// The trailer's type byte: how the block is stored (0 raw, 4 LZ4,
    /// 7 zstd; docs/format.md).
    pub stored_type: Option<u8>,
    /// Why the block does not check out, if it does not.
    pub problem: Option<&'static str>,
    /// The index's first user key of the block and its sequence number.
    pub first_key: Vec<u8>,
    /// Sequence number of the first entry.
    pub first_seq: u64,
    /// The index's last user key of the block.
    pub last_key: Vec<u8>,
    /// Sequence number of the last entry.
    pub last_seq: u64,
    /// The MBR of the block's points (spatial tables).
    pub mbr: Option<Rect>,
}

impl Table {
    /// Re-reads the whole file, bypassing the cache, and checks every block's
    /// checksum and structure, key order across the whole table, the index's
    /// fence keys, that the filter holds every key, and the entry/tombstone/
    /// sequence counts of the properties. Returns the first problem found.
    pub fn verify(&self) -> Result<()> {
        let len = self.file.len();
        let footer_offset = len
            .checked_sub(FOOTER_LEN as u64)
            .ok_or_else(|| Error::corruption(self.file_name.as_str(), 0, "file shrank"))?;
        let mut raw_footer = vec![0u8; FOOTER_LEN];
        self.file.read_exact_at(&mut raw_footer, footer_offset)?;
        let footer = Footer::decode(&raw_footer)
            .map_err(|r| Error::corruption(self.file_name.as_str(), footer_offset, r))?;
        if footer != self.footer || len != self.props.file_size {
            return Err(Error::corruption(
                self.file_name.as_str(),
                footer_offset,
                "footer changed since open",
            ));
        }
        for handle in [footer.filter, footer.index, footer.properties] {
            read_checked(self.file.as_ref(), &self.file_name, &self.stats, handle)?;
        }
        let (mut min_seq, mut max_seq) = (u64::MAX, 0u64);
        if let Some(h) = self.props.range_del {
            let raw = read_checked(self.file.as_ref(), &self.file_name, &self.stats, h)?;
            let list = range_del::decode_block(&raw)
                .map_err(|r| Error::corruption(self.file_name.as_str(), h.offset, r))?;
            if list != self.range_tombstones {
                return Err(Error::corruption(
                    self.file_name.as_str(),
                    h.offset,
                    "range-deletion block changed since open",
                ));
            }
            for t in &list {
                min_seq = min_seq.min(t.seq);
                max_seq = max_seq.max(t.seq);
            }
        }

        let mut prev: Option<Vec<u8>> = None;
        let (mut entries, mut tombstones) = (0u64, 0u64);
        let index = self.index(false)?;
        let filter = self.filter(false)?;
        for i in 0..index.len() {
            let (mut it, handle) = self.read_block_at_first(&index, i)?;
            let bad = |r: &str| Error::corruption(self.file_name.as_str(), handle.offset, r);
            if it.key() != index.first_key(i) {
                return Err(bad("first key differs from the index"));
            }
            while it.valid() {
                let parsed = parse_internal_key(it.key()).ok_or_else(|| bad("bad internal key"))?;
                if let Some(p) = &prev {
                    if !compare_internal(p, it.key()).is_lt() {
                        return Err(bad("keys out of order"));
                    }
                }
                if filter
                    .as_ref()
                    .is_some_and(|f| !f.may_contain(parsed.user_key))
                {
                    return Err(Error::corruption(
                        self.file_name.as_str(),
                        self.footer.filter.offset,
                        "filter is missing a key of the table",
                    ));
                }
                entries += 1;
                if parsed.kind == ValueKind::Delete {
                    tombstones += 1;
                }
                min_seq = min_seq.min(parsed.seq);
                max_seq = max_seq.max(parsed.seq);
                prev = Some(it.key().to_vec());
                it.next().map_err(bad)?;
            }
            if prev.as_deref() != Some(index.last_key(i)) {
                return Err(bad("last key differs from the index"));
            }
        }
        let p = &self.props;
        let seqs_ok = (entries == 0 && self.range_tombstones.is_empty())
            || (p.smallest_seq == min_seq && p.largest_seq == max_seq);
        if entries != p.entries || tombstones != p.tombstones || !seqs_ok {
            return Err(Error::corruption(
                self.file_name.as_str(),
                self.footer.properties.offset,
                "properties disagree with the data",
            ));
        }
        Ok(())
    }

    /// Data block `i` read from the file (checked, not cached), with an
    /// iterator at its first entry.
    fn read_block_at_first(
        &self,
        index: &FenceIndex,
        i: usize,
    ) -> Result<(BlockIter, BlockHandle)> {
        let handle = index
            .handle(i)
            .ok_or_else(|| self.corrupt_block(index, i, "block index out of range"))?;
        let bad = |r: &str| Error::corruption(self.file_name.as_str(), handle.offset, r);
        let contents = read_checked(self.file.as_ref(), &self.file_name, &self.stats, handle)?;
        let mut it = BlockIter::new(Arc::new(Block::new(contents).map_err(bad)?));
        it.seek_to_first().map_err(bad)?;
        Ok((it, handle))
    }

    /// Where the filter, index and properties blocks are.
    pub fn footer(&self) -> Footer {
        self.footer
    }

    /// Every data block as the index describes it, each re-read from the
    /// file (not the cache) to report its stored checksum and whether it
    /// checks out; a bad block is reported, not an error.
    pub fn block_reports(&self) -> Result<Vec<BlockReport>> {
        let index = self.index(false)?;
        (0..index.len())
            .map(|i| {
                let handle = index
                    .handle(i)
                    .ok_or_else(|| self.corrupt_block(&index, i, "block index out of range"))?;
                let mut raw = vec![0u8; raw_len(&self.file_name, handle)?];
                self.file.read_exact_at(&mut raw, handle.offset)?;
                let stored_checksum = raw
                    .len()
                    .checked_sub(4)
                    .and_then(|at| raw.get(at..))
                    .and_then(|b| b.try_into().ok())
                    .map(u32::from_le_bytes);
                let stored_type = raw
                    .len()
                    .checked_sub(BLOCK_TRAILER_LEN)
                    .and_then(|at| raw.get(at))
                    .copied();
                let fence = |k: &[u8]| {
                    parse_internal_key(k).map_or((k.to_vec(), 0), |p| (p.user_key.to_vec(), p.seq))
                };
                let (first_key, first_seq) = fence(index.first_key(i));
                let (last_key, last_seq) = fence(index.last_key(i));
                Ok(BlockReport {
                    offset: handle.offset,
                    size: handle.size,
                    stored_checksum,
                    stored_type,
                    problem: block_contents(&raw).err(),
                    first_key,
                    first_seq,
                    last_key,
                    last_seq,
                    mbr: index.mbr(i),
                })
            })
            .collect()
    }

    /// Calls `f` with every entry in key order (user key, sequence number,
    /// kind, value), reading blocks without filling the cache; stops at the
    /// first error, a bad block being a [`Error::Corruption`] at its offset.
    pub fn for_each_entry(
        &self,
        mut f: impl FnMut(&[u8], u64, ValueKind, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let index = self.index(false)?;
        for i in 0..index.len() {
            let (mut it, handle) = self.read_block_at_first(&index, i)?;
            let bad = |r: &str| Error::corruption(self.file_name.as_str(), handle.offset, r);
            while it.valid() {
                let p = parse_internal_key(it.key()).ok_or_else(|| bad("bad internal key"))?;
                f(p.user_key, p.seq, p.kind, it.value())?;
                it.next().map_err(bad)?;
            }
        }
        Ok(())
    }

    /// `(1 - e^{-k n / m})^k` for this table's filter; 1.0 without a filter.
    pub fn bloom_fpr_theoretical(&self) -> f64 {
        self.fpr_theoretical
    }
}
