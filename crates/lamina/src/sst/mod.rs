//! The SST (sorted string table) format: immutable files of internal keys →
//! values, written once by [`TableBuilder`] and read by [`Table`].
//!
//! ```text
//! [data block | trailer]*  [range deletions | trailer]?  [filter | trailer]
//! [index | trailer]  [properties | trailer]  [footer, 64 bytes]
//! ```
//!
//! The layout, byte by byte, is in `docs/format.md` (section "SSTable").
//! Every block carries a masked CRC32C, the footer checksums itself, and the
//! reader checks that the footer's handles tile the file exactly, so any
//! damaged or truncated file is reported as [`crate::Error::Corruption`]
//! naming the file and the offset of the bad block rather than yielding a
//! wrong answer.

mod block;
mod bloom;
mod builder;
pub(crate) mod cache;
mod check;
mod format;
mod reader;
mod table_iter;
#[cfg(test)]
mod tests;

use crate::compression::Compression;
use crate::spatial::{Comparator, Rect};
pub use block::Block;
pub(crate) use block::{BlockBuilder, BlockIter};
pub(crate) use bloom::{build_filter, BloomFilter};
pub use builder::TableBuilder;
pub(crate) use format::{
    block_trailer, check_block, decode_index, decode_properties, encode_index, get_rect, put_rect,
    BlockHandle, FenceIndex, Footer, IndexEntry, BLOCK_TRAILER_LEN, FOOTER_LEN,
};
/// Monkey's Bloom allocation, a tree-level computation kept with the
/// policies (the tuner uses it too).
pub use lamina_compaction::monkey;
use lamina_compaction::partition::{KeyImage, StreamHist};
pub use reader::{thread_blocks_read, thread_data_cache, Table};
pub use table_iter::{TableIterOptions, TableIterator};

/// How tables are written.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Target size of a data block's contents; a block is closed as soon as it
    /// reaches this size, so blocks are slightly larger (by one entry at most).
    pub block_size: usize,
    /// Bloom filter budget in bits per distinct user key; 0 writes no filter.
    pub bloom_bits_per_key: f64,
    /// Entries between restart points in a data block (full keys stored).
    pub restart_interval: usize,
    /// Keep a StreamHist of the user keys' images in the properties, for
    /// range-partitioned merges (seed 000 §5.4.4); `None` writes none.
    pub histogram: Option<KeyImage>,
    /// Keys are points of this comparator's layout: keep the MBR of each
    /// block and of the table (the LSM R-tree, seed 000 §4.3.3).
    pub spatial: Option<Comparator>,
    /// How data, range-deletion and index blocks are compressed (each only
    /// if that saves an eighth of it); filter and properties blocks are
    /// always stored raw.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            bloom_bits_per_key: 10.0,
            restart_interval: 16,
            histogram: None,
            spatial: None,
            compression: Compression::None,
        }
    }
}

/// Facts about a table, stored in its properties block and used by compaction
/// policies (key range, tombstone density and age, sequence range) without
/// reading the data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TableProperties {
    /// Smallest user key (empty for an empty table), or range tombstone
    /// start if smaller.
    pub smallest_key: Vec<u8>,
    /// Largest user key (empty for an empty table), or range tombstone end
    /// if larger.
    pub largest_key: Vec<u8>,
    /// Number of entries (all versions, tombstones included).
    pub entries: u64,
    /// Number of tombstone entries.
    pub tombstones: u64,
    /// Unix ms of the oldest tombstone, as given by the writer at finish.
    pub oldest_tombstone_time: Option<u64>,
    /// Unix ms when the table was written, as given by the writer.
    pub creation_time: u64,
    /// Smallest sequence number of any entry (0 for an empty table).
    pub smallest_seq: u64,
    /// Largest sequence number of any entry (0 for an empty table).
    pub largest_seq: u64,
    /// Length of the whole file in bytes (not stored: taken from the file).
    pub file_size: u64,
    /// Bytes of all data blocks, trailers included.
    pub data_bytes: u64,
    /// Bytes of the index block, trailer included.
    pub index_bytes: u64,
    /// Bytes of the filter block, trailer included (5 when there is no filter).
    pub filter_bytes: u64,
    /// The filter budget the table was written with.
    pub bloom_bits_per_key: f64,
    /// The compression the table was written with (each block's trailer
    /// says how that block is stored: one that did not shrink by an eighth
    /// is raw).
    #[serde(default)]
    pub compression: Compression,
    /// Bytes the data blocks would take stored raw, trailers included:
    /// `data_bytes` before compression (equal to it without compression).
    #[serde(default)]
    pub uncompressed_data_bytes: u64,
    /// Data blocks stored compressed.
    #[serde(default)]
    pub compressed_blocks: u64,
    /// Sum of the internal key lengths (user key + 8-byte trailer) added.
    pub raw_key_bytes: u64,
    /// Sum of the value lengths added.
    pub raw_value_bytes: u64,
    /// Histogram of the user keys' images, if the writer kept one.
    #[serde(skip)]
    pub histogram: Option<StreamHist>,
    /// The MBR of the table's points, if the writer kept MBRs.
    #[serde(skip)]
    pub mbr: Option<Rect>,
    /// Where the range-deletion block is, if the table has range
    /// tombstones (format version 2).
    #[serde(skip)]
    pub range_del: Option<BlockHandle>,
    /// Range tombstones stored (not counted in `entries`); they widen
    /// `smallest_key`/`largest_key` (a tombstone `[s, e)` claims `s` and
    /// `e`) and the sequence range.
    #[serde(default)]
    pub range_tombstones: u64,
}
