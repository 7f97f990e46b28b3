//! Writing a table: entries stream into data blocks, which are written as
//! soon as they fill up; filter, index, properties and footer follow at
//! [`TableBuilder::finish`].

use std::fmt;

use crate::compression::{BlockCompressor, COMPRESSION_NONE};
use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, ValueKind};
use crate::vfs::WritableFile;

use lamina_compaction::partition::{KeyImage, StreamHist};

use super::block::BlockBuilder;
use super::bloom::build_filter;
use super::format::{
    block_trailer, encode_index, encode_properties, BlockHandle, Footer, IndexEntry,
    BLOCK_TRAILER_LEN, FORMAT_VERSION,
};
use super::{TableOptions, TableProperties};
use crate::key_filter::key_hash;
use crate::range_del::{self, RangeTombstone};
use crate::spatial::Rect;

/// Streams sorted entries into a new table file.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableOptions,
    file_name: String,
    /// Bytes written to the file so far.
    offset: u64,
    block: BlockBuilder,
    block_first_key: Vec<u8>,
    last_key: Vec<u8>,
    index: Vec<IndexEntry>,
    /// xxh3 of each distinct user key, for the filter built at finish.
    bloom_hashes: Vec<u64>,
    props: TableProperties,
    /// The key images' histogram, if the options ask for one.
    histogram: Option<(KeyImage, StreamHist)>,
    /// The MBRs of the open block and of the table so far (spatial tables).
    block_mbr: Rect,
    table_mbr: Rect,
    /// Range tombstones, written in their own block at finish.
    range_tombstones: Vec<RangeTombstone>,
    /// Compresses data, range-deletion and index blocks as the options say.
    compressor: BlockCompressor,
    /// Set after a write failed: the file is in an unknown state, so further
    /// use is refused rather than producing a table with a hole in it.
    failed: bool,
}

impl fmt::Debug for TableBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableBuilder")
            .field("file_name", &self.file_name)
            .field("entries", &self.props.entries)
            .field("offset", &self.offset)
            .finish()
    }
}

/// Clamps a bits-per-key setting to something a filter can be built from:
/// NaN and negatives mean "no filter", and absurd budgets are capped.
fn sanitize_bits(bits: f64) -> f64 {
    if bits.is_nan() || bits <= 0.0 {
        0.0
    } else {
        bits.min(100.0)
    }
}

impl TableBuilder {
    /// Starts a table written to `file`; `file_name` is used in errors.
    pub fn new(file: Box<dyn WritableFile>, mut opts: TableOptions, file_name: String) -> Self {
        opts.bloom_bits_per_key = sanitize_bits(opts.bloom_bits_per_key);
        let block = BlockBuilder::new(opts.restart_interval);
        let props = TableProperties {
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
            entries: 0,
            tombstones: 0,
            oldest_tombstone_time: None,
            creation_time: 0,
            smallest_seq: 0,
            largest_seq: 0,
            file_size: 0,
            data_bytes: 0,
            index_bytes: 0,
            filter_bytes: 0,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            compression: opts.compression,
            uncompressed_data_bytes: 0,
            compressed_blocks: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            histogram: None,
            mbr: None,
            range_del: None,
            range_tombstones: 0,
        };
        let histogram = opts.histogram.map(|image| (image, StreamHist::default()));
        let compressor = BlockCompressor::new(opts.compression);
        TableBuilder {
            file,
            opts,
            file_name,
            offset: 0,
            block,
            block_first_key: Vec::new(),
            last_key: Vec::new(),
            index: Vec::new(),
            bloom_hashes: Vec::new(),
            props,
            histogram,
            block_mbr: Rect::EMPTY,
            table_mbr: Rect::EMPTY,
            range_tombstones: Vec::new(),
            compressor,
            failed: false,
        }
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidArgument(format!(
                "table builder for {} failed earlier",
                self.file_name
            )));
        }
        Ok(())
    }

    /// Adds an entry. Keys must be valid internal keys in strictly increasing
    /// internal order; anything else is `InvalidArgument` (and nothing is
    /// written).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable()?;
        let parsed = parse_internal_key(ikey).ok_or_else(|| {
            Error::InvalidArgument(format!("{}: not an internal key", self.file_name))
        })?;
        let first = self.props.entries == 0;
        if !first && !compare_internal(&self.last_key, ikey).is_lt() {
            return Err(Error::InvalidArgument(format!(
                "{}: keys added out of order",
                self.file_name
            )));
        }
        if self.block.is_empty() {
            self.block_first_key.clear();
            self.block_first_key.extend_from_slice(ikey);
        }
        self.block.add(ikey, value)?;
        if let Some(c) = self.opts.spatial {
            // A key that is not a point (none should be) makes the block
            // and table claim the whole plane, so no query prunes it.
            match c.point_of(parsed.user_key) {
                Some(p) => self.block_mbr.extend(p),
                None => self.block_mbr = Rect::ALL,
            }
        }

        let new_user_key = first || crate::key::user_key(&self.last_key) != parsed.user_key;
        if new_user_key {
            if let Some((image, hist)) = &mut self.histogram {
                hist.insert(image.of(parsed.user_key));
            }
            if self.opts.bloom_bits_per_key > 0.0 {
                self.bloom_hashes.push(key_hash(parsed.user_key));
            }
            if first {
                self.props.smallest_key = parsed.user_key.to_vec();
            }
            self.props.largest_key.clear();
            self.props.largest_key.extend_from_slice(parsed.user_key);
        }
        let p = &mut self.props;
        if first {
            p.smallest_seq = parsed.seq;
            p.largest_seq = parsed.seq;
        } else {
            p.smallest_seq = p.smallest_seq.min(parsed.seq);
            p.largest_seq = p.largest_seq.max(parsed.seq);
        }
        p.entries += 1;
        if parsed.kind == ValueKind::Delete {
            p.tombstones += 1;
        }
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);

        if self.block.estimated_size() >= self.opts.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Adds a range tombstone (any order; an empty range is refused).
    pub fn add_range_tombstone(&mut self, t: RangeTombstone) -> Result<()> {
        self.check_usable()?;
        if t.start >= t.end || t.seq > crate::key::MAX_SEQ {
            return Err(Error::InvalidArgument(format!(
                "{}: empty range tombstone or sequence number out of range",
                self.file_name
            )));
        }
        self.range_tombstones.push(t);
        Ok(())
    }

    /// Appends `contents`, compressed if `compress` and the options ask
    /// for it (and it pays: [`BlockCompressor::compress`]), and its
    /// trailer; returns the block's handle and whether it was compressed.
    fn write_block(&mut self, contents: &[u8], compress: bool) -> Result<(BlockHandle, bool)> {
        let (stored, kind) = if compress {
            self.compressor.compress(contents)
        } else {
            (contents, COMPRESSION_NONE)
        };
        let handle = BlockHandle {
            offset: self.offset,
            size: stored.len() as u64,
        };
        let trailer = block_trailer(stored, kind);
        let res = self
            .file
            .append(stored)
            .and_then(|()| self.file.append(&trailer));
        if let Err(e) = res {
            self.failed = true;
            return Err(e);
        }
        self.offset += (stored.len() + BLOCK_TRAILER_LEN) as u64;
        Ok((handle, kind != COMPRESSION_NONE))
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let contents = self.block.finish();
        let (handle, compressed) = self.write_block(&contents, true)?;
        self.props.uncompressed_data_bytes += (contents.len() + BLOCK_TRAILER_LEN) as u64;
        self.props.compressed_blocks += u64::from(compressed);
        let mbr = self.opts.spatial.map(|_| {
            let m = std::mem::replace(&mut self.block_mbr, Rect::EMPTY);
            self.table_mbr = self.table_mbr.union(&m);
            m
        });
        self.index.push(IndexEntry {
            first_key: std::mem::take(&mut self.block_first_key),
            last_key: self.last_key.clone(),
            handle,
            mbr,
        });
        Ok(())
    }

    /// Bytes written so far plus the pending block.
    pub fn estimated_size(&self) -> u64 {
        let pending = if self.block.is_empty() {
            0
        } else {
            (self.block.estimated_size() + BLOCK_TRAILER_LEN) as u64
        };
        self.offset + pending
    }

    #[cfg(test)]
    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.entries
    }

    /// Writes the range-deletion block after the data blocks (if there are
    /// tombstones) and widens the key and sequence ranges to them.
    fn finish_range_tombstones(&mut self) -> Result<()> {
        if self.range_tombstones.is_empty() {
            return Ok(());
        }
        let mut list = std::mem::take(&mut self.range_tombstones);
        range_del::sort(&mut list);
        list.dedup();
        let contents = range_del::encode_block(&list);
        let (handle, _) = self.write_block(&contents, true)?;
        let p = &mut self.props;
        let points = p.entries > 0;
        // Sorted by start: the first starts first.
        let start = list.first().map(|t| t.start.clone()).unwrap_or_default();
        let end = list
            .iter()
            .map(|t| &t.end)
            .max()
            .cloned()
            .unwrap_or_default();
        if !points || start < p.smallest_key {
            p.smallest_key = start;
        }
        if !points || end > p.largest_key {
            p.largest_key = end;
        }
        let (lo, hi) = list
            .iter()
            .fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t.seq), hi.max(t.seq)));
        if points {
            p.smallest_seq = p.smallest_seq.min(lo);
            p.largest_seq = p.largest_seq.max(hi);
        } else {
            (p.smallest_seq, p.largest_seq) = (lo, hi);
        }
        p.range_del = Some(handle);
        p.range_tombstones = list.len() as u64;
        Ok(())
    }

    /// Writes the last data block, filter, index, properties and footer and
    /// hands them to the OS, returning the file unsynced: the caller makes it
    /// durable ([`WritableFile::sync`], or [`crate::vfs::sync_all`] with the
    /// other files of the same flush or merge) before anything references
    /// it. Times are unix milliseconds chosen by the caller (so tests and
    /// simulations control the clock).
    pub fn finish(
        mut self,
        creation_time: u64,
        oldest_tombstone_time: Option<u64>,
    ) -> Result<(TableProperties, Box<dyn WritableFile>)> {
        self.check_usable()?;
        self.flush_block()?;
        self.props.data_bytes = self.offset;
        self.finish_range_tombstones()?;

        let filter = if self.opts.bloom_bits_per_key > 0.0 {
            build_filter(&self.bloom_hashes, self.opts.bloom_bits_per_key)
        } else {
            Vec::new()
        };
        // Filter bits are random by design: compressing them saves nothing.
        let (filter_handle, _) = self.write_block(&filter, false)?;
        self.props.filter_bytes = filter_handle.size + BLOCK_TRAILER_LEN as u64;

        // The index is read once, at open, and its fence keys compress as
        // well as the data's (RocksDB compresses it too).
        let index = encode_index(&self.index);
        let (index_handle, _) = self.write_block(&index, true)?;
        self.props.index_bytes = index_handle.size + BLOCK_TRAILER_LEN as u64;

        self.props.creation_time = creation_time;
        self.props.oldest_tombstone_time = oldest_tombstone_time;
        self.props.histogram = self.histogram.take().map(|(_, h)| h);
        self.props.mbr = self.opts.spatial.map(|_| self.table_mbr);
        // Raw, so the table's compression is readable without it.
        let props_block = encode_properties(&self.props);
        let (props_handle, _) = self.write_block(&props_block, false)?;

        let footer = Footer {
            filter: filter_handle,
            index: index_handle,
            properties: props_handle,
            version: FORMAT_VERSION,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.flush()?;
        self.props.file_size = self.offset;
        Ok((self.props, self.file))
    }
}
