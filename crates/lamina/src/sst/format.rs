//! Fixed pieces of the SST file format: block handles, the block trailer, the
//! footer, and the encodings of the index and properties blocks.
//!
//! Everything here is pure encoding/decoding. Decoders return
//! `Err(&'static str)` with a reason; the reader turns that into
//! [`crate::Error::Corruption`] naming the file and the offset of the block,
//! which only it knows.

use std::borrow::Cow;

use crate::coding::{
    get_bytes, get_u32, get_u64, get_varint, masked_crc, masked_crc2, put_bytes, put_varint,
    DecodeResult,
};
use crate::compression::{decompress_into, Compression, COMPRESSION_LZ4, COMPRESSION_ZSTD};
use crate::key::{compare_internal, parse_internal_key, user_key};

use lamina_compaction::geometry::{Point, Rect};
use lamina_compaction::partition::{hist, StreamHist};

use super::TableProperties;

/// Magic number at the very end of every table ("lamSST01" in spirit).
pub const MAGIC: u64 = 0x4c41_4d53_5354_3031;
/// Version of the layout written, described in `docs/format.md`. Version 2
/// added the range-deletion block (found through the properties' tag 3);
/// version 1 tables, which cannot have one, are still read.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version still read.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
/// Bytes after each block: compression type (1) + masked CRC32C (4).
pub const BLOCK_TRAILER_LEN: usize = 5;
/// Size of the footer at the end of the file.
pub const FOOTER_LEN: usize = 64;

/// Where a block lives: `size` counts the block's bytes without the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Length of the block's contents (trailer excluded).
    pub size: u64,
}

impl BlockHandle {
    /// Offset just past the block's trailer; `None` on overflow (only for
    /// corrupt handles).
    pub fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }

    fn encode_fixed(&self, dst: &mut Vec<u8>) {
        dst.extend_from_slice(&self.offset.to_le_bytes());
        dst.extend_from_slice(&self.size.to_le_bytes());
    }

    fn decode_fixed(src: &mut &[u8]) -> Option<BlockHandle> {
        Some(BlockHandle {
            offset: get_u64(src)?,
            size: get_u64(src)?,
        })
    }
}

/// The trailer written after a block's stored bytes: the type byte
/// (`kind`, how the block is stored: [`crate::compression`]) then the
/// masked CRC32C of stored ++ type byte (so a flipped type byte is caught
/// too). The checksum covers what is on disk, so it is checked before any
/// decompression.
pub fn block_trailer(stored: &[u8], kind: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = masked_crc2(stored, &[kind]);
    let c = crc.to_le_bytes();
    [kind, c[0], c[1], c[2], c[3]]
}

/// Checks the checksum of a block as read (stored bytes ++ trailer) and
/// returns the stored bytes and the type byte, for
/// `compression::decompress_into`.
pub fn check_block(raw: &[u8]) -> DecodeResult<(&[u8], u8)> {
    split_block(raw, true)
}

/// Splits a block as read (stored bytes ++ trailer) into the stored bytes
/// and the type byte, checking the checksum only if `verify` (a query's
/// read with [`crate::Options::verify_checksums`] off; the bytes are then
/// decoded unchecked, bounds-checked as always).
pub fn split_block(raw: &[u8], verify: bool) -> DecodeResult<(&[u8], u8)> {
    let split = raw
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or("block shorter than its trailer")?;
    let (stored, trailer) = raw.split_at(split);
    let mut t = trailer;
    let (&kind, rest) = t.split_first().ok_or("missing block type")?;
    t = rest;
    let crc = get_u32(&mut t).ok_or("missing block checksum")?;
    if verify && masked_crc2(stored, &[kind]) != crc {
        return Err("block checksum mismatch");
    }
    Ok((stored, kind))
}

/// The contents of a block as read (stored bytes ++ trailer): checked, and
/// decompressed if it is stored compressed.
pub fn block_contents(raw: &[u8]) -> DecodeResult<Cow<'_, [u8]>> {
    let (stored, kind) = check_block(raw)?;
    let mut buf = Vec::new();
    Ok(if decompress_into(kind, stored, &mut buf)? {
        Cow::Owned(buf)
    } else {
        Cow::Borrowed(stored)
    })
}

/// The fixed-size footer: where the metadata blocks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The Bloom filter block (size 0 = no filter).
    pub filter: BlockHandle,
    /// The index (fence pointer) block.
    pub index: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// The table's format version.
    pub version: u32,
}

impl Footer {
    /// Encodes exactly [`FOOTER_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.filter.encode_fixed(&mut out);
        self.index.encode_fixed(&mut out);
        self.properties.encode_fixed(&mut out);
        out.extend_from_slice(&self.version.to_le_bytes());
        let crc = masked_crc(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out
    }

    /// Decodes and checks magic, checksum and version.
    pub fn decode(raw: &[u8]) -> DecodeResult<Footer> {
        if raw.len() != FOOTER_LEN {
            return Err("footer has the wrong length");
        }
        let (covered, rest) = raw.split_at(52);
        let mut rest = rest;
        let crc = get_u32(&mut rest).ok_or("short footer")?;
        let magic = get_u64(&mut rest).ok_or("short footer")?;
        if magic != MAGIC {
            return Err("bad magic number (not an SST, or truncated)");
        }
        if masked_crc(covered) != crc {
            return Err("footer checksum mismatch");
        }
        let mut cur = covered;
        let filter = BlockHandle::decode_fixed(&mut cur).ok_or("short footer")?;
        let index = BlockHandle::decode_fixed(&mut cur).ok_or("short footer")?;
        let properties = BlockHandle::decode_fixed(&mut cur).ok_or("short footer")?;
        let version = get_u32(&mut cur).ok_or("short footer")?;
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err("unsupported format version");
        }
        Ok(Footer {
            filter,
            index,
            properties,
            version,
        })
    }
}

/// A fence pointer: the key range and location of one data block.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    /// First internal key in the block.
    pub first_key: Vec<u8>,
    /// Last internal key in the block.
    pub last_key: Vec<u8>,
    /// Where the block is.
    pub handle: BlockHandle,
    /// The MBR of the block's points (tables of a spatial index only).
    pub mbr: Option<Rect>,
}

/// Tag of the index block's optional section of per-block MBRs.
const BLOCK_MBRS_TAG: u8 = 1;

/// Appends a rectangle as four little-endian f64: min x, min y, max x, max y.
pub(crate) fn put_rect(dst: &mut Vec<u8>, r: &Rect) {
    for v in [r.min.x, r.min.y, r.max.x, r.max.y] {
        dst.extend_from_slice(&v.to_bits().to_le_bytes());
    }
}

/// Inverse of [`put_rect`]; `None` if short or any coordinate is NaN (an
/// MBR is the empty rectangle, the whole plane, or has finite corners).
pub(crate) fn get_rect(src: &mut &[u8]) -> Option<Rect> {
    let mut v = [0f64; 4];
    for slot in &mut v {
        *slot = f64::from_bits(get_u64(src)?);
        if slot.is_nan() {
            return None;
        }
    }
    Some(Rect {
        min: Point::new(v[0], v[1]),
        max: Point::new(v[2], v[3]),
    })
}

/// Encodes the index block: varint count, then per entry first key, last key
/// (both varint-length-prefixed), varint offset, varint size; then, if the
/// entries carry MBRs, the tag byte 1 and one rectangle per entry.
pub fn encode_index(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, entries.len() as u64);
    for e in entries {
        put_bytes(&mut out, &e.first_key);
        put_bytes(&mut out, &e.last_key);
        put_varint(&mut out, e.handle.offset);
        put_varint(&mut out, e.handle.size);
    }
    if entries.iter().any(|e| e.mbr.is_some()) {
        out.push(BLOCK_MBRS_TAG);
        for e in entries {
            put_rect(&mut out, &e.mbr.unwrap_or(Rect::ALL));
        }
    }
    out
}

/// The big-endian value of the first 8 bytes of `user_key`, zero padded.
/// If `key_prefix(a) < key_prefix(b)` then `a < b` bytewise (a shorter key
/// padded with zeros is either smaller at the first differing byte or a
/// proper prefix of the other), so equal prefixes are the only case needing
/// a full comparison.
pub fn key_prefix(user_key: &[u8]) -> u64 {
    let mut p = [0u8; 8];
    let n = user_key.len().min(8);
    if let (Some(dst), Some(src)) = (p.get_mut(..n), user_key.get(..n)) {
        dst.copy_from_slice(src);
    }
    u64::from_be_bytes(p)
}

/// Where one block's fence keys lie in [`FenceIndex::keys`]: the first key
/// is `keys[first..last]`, the last key `keys[last..end]`.
#[derive(Debug, Clone, Copy)]
struct Fence {
    first: usize,
    last: usize,
    end: usize,
    handle: BlockHandle,
}

/// Blocks per group of the fence index's two-level search: 16 prefixes are
/// 128 bytes, two cache lines.
const FENCE_GROUP: usize = 16;

/// The decoded index block, laid out for lookups: every fence key in one
/// contiguous buffer, and the 8-byte user-key prefixes of the last keys in a
/// dense array that the binary search scans before touching any key bytes.
/// The search is two-level: first over `group_last`, the prefix of every
/// [`FENCE_GROUP`]-th block (1/16 of the array, which stays in the CPU
/// cache across seeks), then within one group's two cache lines, instead
/// of a binary search whose every step over a large file is a cache miss.
#[derive(Debug, Default)]
pub struct FenceIndex {
    keys: Vec<u8>,
    last_prefix: Vec<u64>,
    /// `last_prefix` of the last block of each group of [`FENCE_GROUP`].
    group_last: Vec<u64>,
    fences: Vec<Fence>,
    /// One MBR per block, or empty if the table has none.
    mbrs: Vec<Rect>,
}

impl FenceIndex {
    /// Bytes of memory the decoded index holds (its block cache charge).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<FenceIndex>()
            + self.keys.capacity()
            + (self.last_prefix.capacity() + self.group_last.capacity()) * 8
            + self.fences.capacity() * std::mem::size_of::<Fence>()
            + self.mbrs.capacity() * std::mem::size_of::<Rect>()
    }

    /// Number of data blocks.
    pub fn len(&self) -> usize {
        self.fences.len()
    }

    /// Where data block `i` is.
    pub fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.fences.get(i).map(|f| f.handle)
    }

    /// First internal key of block `i` (empty if out of range).
    pub fn first_key(&self, i: usize) -> &[u8] {
        self.fences
            .get(i)
            .and_then(|f| self.keys.get(f.first..f.last))
            .unwrap_or_default()
    }

    /// Last internal key of block `i` (empty if out of range).
    pub fn last_key(&self, i: usize) -> &[u8] {
        self.fences
            .get(i)
            .and_then(|f| self.keys.get(f.last..f.end))
            .unwrap_or_default()
    }

    /// The MBR of block `i`'s points, if the table keeps them.
    pub fn mbr(&self, i: usize) -> Option<Rect> {
        self.mbrs.get(i).copied()
    }

    /// Index of the first block whose last key is `>= target` (`len()` if
    /// none): the only block that can hold the first entry `>= target`.
    pub fn find(&self, target: &[u8]) -> usize {
        let tp = key_prefix(user_key(target));
        // Every block of the groups before `g` ends below `tp` (at or below
        // its group's last prefix), and group `g` ends at or above it, so
        // the first block ending at or above `tp` is in group `g`.
        let g = self.group_last.partition_point(|&p| p < tp);
        let start = g.saturating_mul(FENCE_GROUP).min(self.last_prefix.len());
        let group = self
            .last_prefix
            .get(
                start
                    ..start
                        .saturating_add(FENCE_GROUP)
                        .min(self.last_prefix.len()),
            )
            .unwrap_or_default();
        // Blocks before `lo` end with a smaller user key, blocks from `hi` on
        // with a larger one; only equal prefixes need the key bytes.
        let mut lo = start + group.partition_point(|&p| p < tp);
        let mut hi = lo
            + self
                .last_prefix
                .get(lo..)
                .unwrap_or_default()
                .partition_point(|&p| p == tp);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if compare_internal(self.last_key(mid), target).is_lt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Decodes the index block and checks that it describes a well-formed data
/// region `[0, data_end)`: contiguous blocks in strictly increasing key order.
pub fn decode_index(contents: &[u8], data_end: u64) -> DecodeResult<FenceIndex> {
    let mut cur = contents;
    let count = get_varint(&mut cur).ok_or("bad index entry count")?;
    // Each entry takes at least 4 bytes, so a count larger than that is a lie;
    // checking first keeps a corrupt count from driving a huge allocation.
    if count > (cur.len() / 4) as u64 {
        return Err("index entry count exceeds block size");
    }
    let count = count as usize;
    let mut index = FenceIndex {
        keys: Vec::with_capacity(cur.len()),
        last_prefix: Vec::with_capacity(count),
        group_last: Vec::new(),
        fences: Vec::with_capacity(count),
        mbrs: Vec::new(),
    };
    let mut expected_offset = 0u64;
    let mut prev_last: &[u8] = &[];
    for i in 0..count {
        let first_key = get_bytes(&mut cur).ok_or("bad index first key")?;
        let last_key = get_bytes(&mut cur).ok_or("bad index last key")?;
        let offset = get_varint(&mut cur).ok_or("bad index block offset")?;
        let size = get_varint(&mut cur).ok_or("bad index block size")?;
        if parse_internal_key(first_key).is_none() || parse_internal_key(last_key).is_none() {
            return Err("index key is not a valid internal key");
        }
        if compare_internal(first_key, last_key).is_gt() {
            return Err("index entry first key after last key");
        }
        if i > 0 && !compare_internal(prev_last, first_key).is_lt() {
            return Err("index entries out of order");
        }
        prev_last = last_key;
        let handle = BlockHandle { offset, size };
        if offset != expected_offset || size < 8 {
            return Err("index block handle does not follow the previous block");
        }
        expected_offset = handle.end().ok_or("index block handle overflows")?;
        let first = index.keys.len();
        index.keys.extend_from_slice(first_key);
        let last = index.keys.len();
        index.keys.extend_from_slice(last_key);
        index.fences.push(Fence {
            first,
            last,
            end: index.keys.len(),
            handle,
        });
        index.last_prefix.push(key_prefix(user_key(last_key)));
    }
    if let Some((&tag, rest)) = cur.split_first() {
        if tag != BLOCK_MBRS_TAG {
            return Err("unknown section in the index block");
        }
        cur = rest;
        if cur.len() != count.saturating_mul(32) {
            return Err("index block MBR section has the wrong length");
        }
        for _ in 0..count {
            index
                .mbrs
                .push(get_rect(&mut cur).ok_or("malformed block MBR")?);
        }
    }
    if !cur.is_empty() {
        return Err("trailing bytes after index entries");
    }
    if expected_offset != data_end {
        return Err("index does not cover the data region");
    }
    index.group_last = index
        .last_prefix
        .chunks(FENCE_GROUP)
        .filter_map(|g| g.last().copied())
        .collect();
    Ok(index)
}

/// Encodes the properties that are stored (everything but `file_size`, which
/// the reader takes from the file itself).
pub fn encode_properties(p: &TableProperties) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, &p.smallest_key);
    put_bytes(&mut out, &p.largest_key);
    put_varint(&mut out, p.entries);
    put_varint(&mut out, p.tombstones);
    match p.oldest_tombstone_time {
        Some(t) => {
            out.push(1);
            put_varint(&mut out, t);
        }
        None => out.push(0),
    }
    put_varint(&mut out, p.creation_time);
    put_varint(&mut out, p.smallest_seq);
    put_varint(&mut out, p.largest_seq);
    put_varint(&mut out, p.data_bytes);
    put_varint(&mut out, p.index_bytes);
    put_varint(&mut out, p.filter_bytes);
    out.extend_from_slice(&p.bloom_bits_per_key.to_bits().to_le_bytes());
    put_varint(&mut out, p.raw_key_bytes);
    put_varint(&mut out, p.raw_value_bytes);
    // Optional sections follow, each behind a tag byte; a reader that
    // finds none (a table written before they existed) has none.
    if let Some(h) = &p.histogram {
        out.push(HISTOGRAM_TAG);
        put_varint(&mut out, h.bins().len() as u64);
        for b in h.bins() {
            out.extend_from_slice(&b.centroid.to_bits().to_le_bytes());
            put_varint(&mut out, b.count);
        }
    }
    if let Some(r) = &p.mbr {
        out.push(MBR_TAG);
        put_rect(&mut out, r);
    }
    if let Some(h) = &p.range_del {
        out.push(RANGE_DEL_TAG);
        put_varint(&mut out, h.offset);
        put_varint(&mut out, h.size);
        put_varint(&mut out, p.range_tombstones);
    }
    // Written only for a compressed table, so a table without compression
    // is byte for byte what it was before compression existed.
    if p.compression != Compression::None {
        out.push(COMPRESSION_TAG);
        out.push(p.compression.type_byte());
        put_varint(&mut out, zstd_level(p.compression));
        put_varint(&mut out, p.uncompressed_data_bytes);
        put_varint(&mut out, p.compressed_blocks);
    }
    out
}

/// The level stored with the compression type: zstd's, 0 for the others.
fn zstd_level(c: Compression) -> u64 {
    match c {
        Compression::Zstd(level) => u64::try_from(level).unwrap_or(0),
        Compression::None | Compression::Lz4 => 0,
    }
}

/// Inverse of the type byte and level of the compression section.
fn decode_compression(kind: u8, level: u64) -> Option<Compression> {
    match (kind, level) {
        (COMPRESSION_LZ4, 0) => Some(Compression::Lz4),
        (COMPRESSION_ZSTD, 1..=22) => Some(Compression::Zstd(level as i32)),
        _ => None,
    }
}

/// Tag of the properties' optional key-image histogram section.
const HISTOGRAM_TAG: u8 = 1;
/// Tag of the properties' optional MBR of the whole table.
const MBR_TAG: u8 = 2;
/// Tag of the properties' optional range-deletion block: its handle and
/// how many tombstones it holds (format version 2).
const RANGE_DEL_TAG: u8 = 3;
/// Tag of the properties' compression section: the table's compression
/// (type byte, zstd level), the data blocks' uncompressed bytes and how
/// many data blocks are stored compressed.
const COMPRESSION_TAG: u8 = 4;

fn decode_histogram(c: &mut &[u8]) -> Option<StreamHist> {
    let n = usize::try_from(get_varint(c)?).ok()?;
    if n > hist::DEFAULT_BINS {
        return None;
    }
    let mut bins = Vec::with_capacity(n);
    for _ in 0..n {
        let centroid = f64::from_bits(get_u64(c)?);
        let count = get_varint(c)?;
        bins.push(hist::Bin { centroid, count });
    }
    StreamHist::from_bins(bins, hist::DEFAULT_BINS)
}

/// Inverse of [`encode_properties`]; `file_size` is filled in by the caller.
pub fn decode_properties(contents: &[u8]) -> DecodeResult<TableProperties> {
    let mut cur = contents;
    let c = &mut cur;
    let bad = "malformed properties block";
    let smallest_key = get_bytes(c).ok_or(bad)?.to_vec();
    let largest_key = get_bytes(c).ok_or(bad)?.to_vec();
    let entries = get_varint(c).ok_or(bad)?;
    let tombstones = get_varint(c).ok_or(bad)?;
    let (&flag, rest) = c.split_first().ok_or(bad)?;
    *c = rest;
    let oldest_tombstone_time = match flag {
        0 => None,
        1 => Some(get_varint(c).ok_or(bad)?),
        _ => return Err(bad),
    };
    let creation_time = get_varint(c).ok_or(bad)?;
    let smallest_seq = get_varint(c).ok_or(bad)?;
    let largest_seq = get_varint(c).ok_or(bad)?;
    let data_bytes = get_varint(c).ok_or(bad)?;
    let index_bytes = get_varint(c).ok_or(bad)?;
    let filter_bytes = get_varint(c).ok_or(bad)?;
    let bloom_bits_per_key = f64::from_bits(get_u64(c).ok_or(bad)?);
    let raw_key_bytes = get_varint(c).ok_or(bad)?;
    let raw_value_bytes = get_varint(c).ok_or(bad)?;
    let (mut histogram, mut mbr, mut range_del, mut range_tombstones) = (None, None, None, 0);
    let (mut compression, mut uncompressed_data_bytes, mut compressed_blocks) =
        (Compression::None, data_bytes, 0);
    // Sections come in increasing tag order, each at most once.
    let mut last_tag = 0;
    while let Some((&tag, rest)) = c.split_first() {
        if tag <= last_tag {
            return Err("properties sections out of order");
        }
        last_tag = tag;
        *c = rest;
        match tag {
            HISTOGRAM_TAG => {
                histogram = Some(decode_histogram(c).ok_or("malformed key histogram")?)
            }
            MBR_TAG => mbr = Some(get_rect(c).ok_or("malformed table MBR")?),
            RANGE_DEL_TAG => {
                let bad = "malformed range-deletion handle";
                let offset = get_varint(c).ok_or(bad)?;
                let size = get_varint(c).ok_or(bad)?;
                range_tombstones = get_varint(c).ok_or(bad)?;
                if range_tombstones == 0 {
                    return Err(bad);
                }
                range_del = Some(BlockHandle { offset, size });
            }
            COMPRESSION_TAG => {
                let bad = "malformed compression section";
                let (&kind, rest) = c.split_first().ok_or(bad)?;
                *c = rest;
                let level = get_varint(c).ok_or(bad)?;
                compression = decode_compression(kind, level).ok_or(bad)?;
                uncompressed_data_bytes = get_varint(c).ok_or(bad)?;
                compressed_blocks = get_varint(c).ok_or(bad)?;
            }
            _ => return Err("unknown section in properties"),
        }
    }
    if !c.is_empty() {
        return Err("trailing bytes after properties");
    }
    if tombstones > entries || smallest_seq > largest_seq || smallest_key > largest_key {
        return Err("inconsistent properties");
    }
    Ok(TableProperties {
        smallest_key,
        largest_key,
        entries,
        tombstones,
        oldest_tombstone_time,
        creation_time,
        smallest_seq,
        largest_seq,
        file_size: 0,
        data_bytes,
        index_bytes,
        filter_bytes,
        bloom_bits_per_key,
        compression,
        uncompressed_data_bytes,
        compressed_blocks,
        raw_key_bytes,
        raw_value_bytes,
        histogram,
        mbr,
        range_del,
        range_tombstones,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_roundtrip_and_checks() {
        let f = Footer {
            filter: BlockHandle {
                offset: 10,
                size: 20,
            },
            index: BlockHandle {
                offset: 35,
                size: 7,
            },
            properties: BlockHandle {
                offset: 47,
                size: 9,
            },
            version: FORMAT_VERSION,
        };
        let raw = f.encode();
        assert_eq!(raw.len(), FOOTER_LEN);
        assert_eq!(Footer::decode(&raw), Ok(f));
        // Version 1 tables still open; unknown versions do not.
        let v1 = Footer { version: 1, ..f };
        assert_eq!(Footer::decode(&v1.encode()), Ok(v1));
        let v3 = Footer { version: 3, ..f };
        assert!(Footer::decode(&v3.encode()).is_err());
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0x10;
            assert!(Footer::decode(&bad).is_err(), "flip at {i} undetected");
        }
    }

    fn internal(k: &[u8]) -> Vec<u8> {
        crate::key::make_internal_key(k, 1, crate::key::ValueKind::Put)
    }

    /// `find` against a linear scan, over indexes of 0 to 70 blocks (group
    /// boundaries and partial last groups) whose last keys share 8-byte
    /// prefixes in runs, so both levels and the full-key comparison run.
    #[test]
    fn fence_search_matches_a_linear_scan() {
        use crate::key::{make_internal_key, seek_key, ValueKind};
        let user = |i: u64| {
            // Runs of three blocks share the 8-byte prefix.
            let mut k = (i / 3).to_be_bytes().to_vec();
            k.extend_from_slice(&(i % 3).to_be_bytes());
            k
        };
        for n in 0..70u64 {
            let entries: Vec<IndexEntry> = (0..n)
                .map(|i| IndexEntry {
                    first_key: make_internal_key(&user(2 * i), 9, ValueKind::Put),
                    last_key: make_internal_key(&user(2 * i + 1), 5, ValueKind::Put),
                    handle: BlockHandle {
                        offset: i * 30,
                        size: 25,
                    },
                    mbr: None,
                })
                .collect();
            let index = decode_index(&encode_index(&entries), n * 30).unwrap();
            for t in 0..2 * n + 3 {
                for seq in [0, 5, 9, crate::key::MAX_SEQ] {
                    let target = seek_key(&user(t), seq);
                    let want = entries
                        .iter()
                        .position(|e| !compare_internal(&e.last_key, &target).is_lt())
                        .unwrap_or(entries.len());
                    assert_eq!(index.find(&target), want, "n {n} target {t} seq {seq}");
                }
            }
        }
    }

    #[test]
    fn index_mbrs_roundtrip_and_are_checked() {
        let mbr = Rect::new(1.0, -2.0, 3.5, 4.0);
        let entries = vec![
            IndexEntry {
                first_key: internal(b"a"),
                last_key: internal(b"c"),
                handle: BlockHandle {
                    offset: 0,
                    size: 20,
                },
                mbr: Some(mbr),
            },
            IndexEntry {
                first_key: internal(b"d"),
                last_key: internal(b"f"),
                handle: BlockHandle {
                    offset: 25,
                    size: 30,
                },
                mbr: Some(Rect::ALL),
            },
        ];
        let raw = encode_index(&entries);
        let index = decode_index(&raw, 60).unwrap();
        assert_eq!(index.mbr(0), Some(mbr));
        assert_eq!(index.mbr(1), Some(Rect::ALL));
        assert_eq!(index.mbr(2), None);
        // The section is the tag byte and 32 bytes per block, at the end:
        // min x of block 0 is the first f64 after the tag.
        let at = raw.len() - 64;
        assert_eq!(raw[at - 1], BLOCK_MBRS_TAG);
        assert_eq!(raw[at..at + 8], 1.0f64.to_le_bytes());
        let mut nan = raw.clone();
        nan[at..at + 8].copy_from_slice(&f64::NAN.to_le_bytes());
        assert!(decode_index(&nan, 60).is_err());
        assert!(decode_index(&raw[..raw.len() - 1], 60).is_err());
        let mut tag = raw.clone();
        tag[at - 1] = 9;
        assert!(decode_index(&tag, 60).is_err());
        // Without MBRs the block is as before and has none.
        let plain: Vec<IndexEntry> = entries
            .into_iter()
            .map(|e| IndexEntry { mbr: None, ..e })
            .collect();
        let raw = encode_index(&plain);
        assert_eq!(raw.len(), at - 1);
        assert_eq!(decode_index(&raw, 60).unwrap().mbr(0), None);
    }

    #[test]
    fn trailer_detects_flips() {
        use crate::compression::{COMPRESSION_LZ4, COMPRESSION_NONE};
        let contents = b"hello block".to_vec();
        let mut raw = contents.clone();
        raw.extend_from_slice(&block_trailer(&contents, COMPRESSION_NONE));
        assert_eq!(check_block(&raw), Ok((&contents[..], COMPRESSION_NONE)));
        assert_eq!(block_contents(&raw).as_deref(), Ok(&contents[..]));
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 1;
            assert!(check_block(&bad).is_err());
        }
        assert!(check_block(&raw[..3]).is_err());
        // A compressed block: lz4_flex's size-prepended form, type 4.
        let text = b"compressible compressible compressible compressible".to_vec();
        let stored = lz4_flex::block::compress_prepend_size(&text);
        let mut raw = stored.clone();
        raw.extend_from_slice(&block_trailer(&stored, COMPRESSION_LZ4));
        assert_eq!(check_block(&raw), Ok((&stored[..], COMPRESSION_LZ4)));
        assert_eq!(block_contents(&raw).as_deref(), Ok(&text[..]));
        // The same bytes under an unknown type byte (checksum valid) are
        // refused, not read as raw.
        let mut unknown = stored.clone();
        unknown.extend_from_slice(&block_trailer(&stored, 2));
        assert!(block_contents(&unknown).is_err());
    }

    #[test]
    fn properties_roundtrip() {
        let p = TableProperties {
            smallest_key: b"a".to_vec(),
            largest_key: b"z".to_vec(),
            entries: 10,
            tombstones: 2,
            oldest_tombstone_time: Some(123),
            creation_time: 456,
            smallest_seq: 1,
            largest_seq: 99,
            file_size: 0,
            data_bytes: 1000,
            index_bytes: 50,
            filter_bytes: 20,
            bloom_bits_per_key: 7.5,
            compression: Compression::None,
            uncompressed_data_bytes: 1000,
            compressed_blocks: 0,
            raw_key_bytes: 300,
            raw_value_bytes: 700,
            histogram: None,
            mbr: None,
            range_del: None,
            range_tombstones: 0,
        };
        assert_eq!(decode_properties(&encode_properties(&p)), Ok(p.clone()));
        let ranged = TableProperties {
            range_del: Some(BlockHandle {
                offset: 900,
                size: 40,
            }),
            range_tombstones: 3,
            ..p.clone()
        };
        assert_eq!(decode_properties(&encode_properties(&ranged)), Ok(ranged));
        // With the optional histogram section; a table without it (as every
        // table written before it existed) decodes to `None` above.
        let mut h = StreamHist::default();
        for x in [5u64, 9, 1 << 40] {
            h.insert(x);
        }
        let with = TableProperties {
            histogram: Some(h),
            ..p.clone()
        };
        let raw = encode_properties(&with);
        assert_eq!(decode_properties(&raw), Ok(with));
        // A damaged section is an error, not a wrong histogram.
        let mut bad = raw.clone();
        let n = bad.len();
        bad[n - 1] = 0;
        assert!(decode_properties(&bad).is_err());
        let mut unknown = raw;
        let tag_at = n - (3 * 9 + 1) - 1;
        unknown[tag_at] = 7;
        assert!(decode_properties(&unknown).is_err());
        // The MBR section follows the histogram; sections out of order are
        // refused.
        let spatial = TableProperties {
            mbr: Some(Rect::new(0.0, 1.0, 2.0, 3.0)),
            ..p.clone()
        };
        let raw = encode_properties(&spatial);
        assert_eq!(decode_properties(&raw), Ok(spatial.clone()));
        let mut twice = raw.clone();
        twice.extend_from_slice(&raw[raw.len() - 33..]);
        assert!(decode_properties(&twice).is_err());
        // The compression section, last; a table without it is uncompressed
        // with `uncompressed_data_bytes == data_bytes` (above).
        for compression in [
            Compression::Lz4,
            Compression::Zstd(3),
            Compression::Zstd(22),
        ] {
            let compressed = TableProperties {
                compression,
                uncompressed_data_bytes: 2500,
                compressed_blocks: 4,
                ..spatial.clone()
            };
            let raw = encode_properties(&compressed);
            assert_eq!(decode_properties(&raw), Ok(compressed));
            // An unknown type or a level zstd does not have is refused.
            let tag_at = raw.len() - 1 - 1 - 2 - 1 - 1;
            assert_eq!(raw[tag_at], COMPRESSION_TAG);
            for (at, byte) in [(tag_at + 1, 2u8), (tag_at + 2, 23)] {
                let mut bad = raw.clone();
                bad[at] = byte;
                assert!(decode_properties(&bad).is_err(), "byte {at} = {byte}");
            }
        }
    }
}
