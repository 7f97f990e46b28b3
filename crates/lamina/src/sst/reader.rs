//! Reading a table: the footer, index, filter and properties are loaded and
//! validated at open; data blocks are read on demand through the block cache.
//! The index and filter are held by the table, or, with
//! [`crate::Options::cache_index_and_filter_blocks`], read through the
//! block cache like data blocks (RocksDB's option of the same name): a
//! lookup that finds them evicted reads them back from the file.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::coding::DecodeResult;
use crate::compression::decompress_into;
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, seek_key, user_key, ValueKind, MAX_SEQ};
use crate::range_del::{self, RangeTombstone};
use crate::sst::cache::{BlockCache, Cached, Lookup};
use crate::stats::{BlockKind, FilterOutcome, IoStats};
use crate::vfs::{Mapping, RandomAccessFile};

use super::block::{Block, BlockIter};
use super::bloom::BloomFilter;
use super::format::{
    decode_index, decode_properties, split_block, BlockHandle, FenceIndex, Footer, FOOTER_LEN,
};
use super::TableProperties;

/// An open, immutable table. Cheap to share (`Arc<Table>`); all methods take
/// `&self` and are safe to call from many threads.
pub struct Table {
    pub(super) file: Arc<dyn RandomAccessFile>,
    /// The file mapped read-only ([`crate::Options::mmap_reads`]): data
    /// blocks are slices of it instead of copies read with `pread`.
    pub(super) map: Option<Arc<Mapping>>,
    pub(super) file_id: u64,
    pub(super) file_name: String,
    cache: Option<Arc<BlockCache>>,
    pub(super) stats: Arc<IoStats>,
    pub(super) footer: Footer,
    /// The index and filter, held for the table's lifetime; `None` if they
    /// are read through the block cache
    /// ([`crate::Options::cache_index_and_filter_blocks`]).
    held: Option<MetaBlocks>,
    /// Whether the table should pin its index and filter
    /// ([`crate::Options::pin_l0_filter_and_index_blocks_in_cache`]: it is
    /// in level 0); they are pinned on the next lookup that reads them.
    pin_wanted: AtomicBool,
    /// The pinned index and filter, charged to the cache as pinned.
    pinned: RwLock<Option<MetaBlocks>>,
    /// Number of data blocks (the index's length).
    num_blocks: usize,
    /// Whether the table has a filter block.
    has_filter: bool,
    /// [`BloomFilter::fpr_theoretical`] of its filter (1.0 without one).
    pub(super) fpr_theoretical: f64,
    /// Where the data blocks end (the range-deletion block or the filter
    /// begins).
    data_end: u64,
    pub(super) props: TableProperties,
    /// The range-deletion block, decoded at open (sorted by start).
    pub(super) range_tombstones: Vec<RangeTombstone>,
    /// Queries check the checksum of each data block they read from the
    /// file ([`crate::Options::verify_checksums`]); compaction inputs and
    /// the metadata blocks always do.
    verify_checksums: bool,
    /// The largest chunk a query's scan reads ahead (0: none).
    pub(super) max_scan_readahead: usize,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("file_id", &self.file_id)
            .field("file_name", &self.file_name)
            .field("blocks", &self.num_blocks)
            .field("entries", &self.props.entries)
            .finish()
    }
}

fn kind_idx(kind: BlockKind) -> usize {
    IoStats::kind_index(kind)
}

/// A table's decoded index and filter.
#[derive(Debug, Clone)]
struct MetaBlocks {
    pub(super) index: Arc<FenceIndex>,
    pub(super) filter: Option<Arc<BloomFilter>>,
}

/// An index or filter for one lookup: borrowed from the table that holds
/// it, or shared with the block cache.
pub(super) enum MetaRef<'a, T> {
    Held(&'a Arc<T>),
    Shared(Arc<T>),
}

impl<T> MetaRef<'_, T> {
    pub(super) fn into_arc(self) -> Arc<T> {
        match self {
            MetaRef::Held(a) => Arc::clone(a),
            MetaRef::Shared(a) => a,
        }
    }
}

impl<T> Deref for MetaRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            MetaRef::Held(a) => a,
            MetaRef::Shared(a) => a,
        }
    }
}

/// Decodes an index block and cross-checks it against the properties and
/// range tombstones (at open, and when it is read back into the cache).
fn decode_checked_index(
    raw: &[u8],
    data_end: u64,
    ranges: &[RangeTombstone],
    props: &TableProperties,
) -> DecodeResult<FenceIndex> {
    let index = decode_index(raw, data_end)?;
    check_index_against_props(&index, ranges, props)?;
    Ok(index)
}

/// Bytes of a block plus its trailer.
pub(super) fn raw_len(file_name: &str, handle: BlockHandle) -> Result<usize> {
    handle
        .end()
        .and_then(|end| end.checked_sub(handle.offset))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Error::corruption(file_name, handle.offset, "block length overflows"))
}

/// Reads `handle`'s block plus trailer from `file`, checks it and returns the
/// contents; the caller has checked the handle lies inside the file.
pub(super) fn read_checked(
    file: &dyn RandomAccessFile,
    file_name: &str,
    stats: &IoStats,
    handle: BlockHandle,
) -> Result<Vec<u8>> {
    read_checked_into(file, file_name, stats, handle, Vec::new(), true)
}

/// [`read_checked`] reusing `buf` (a recycled block buffer, possibly holding
/// stale bytes) if it is large enough. Only the part beyond `buf`'s current
/// length is zero-filled before the read; `read_exact_at` overwrites all of
/// it or fails, and then the checksum covers every byte. A compressed block
/// is decompressed here, once, into a buffer of its own: what the caller
/// gets (and the block cache holds and charges) is always the contents.
/// The checksum is skipped if not `verify` (see [`split_block`]).
fn read_checked_into(
    file: &dyn RandomAccessFile,
    file_name: &str,
    stats: &IoStats,
    handle: BlockHandle,
    buf: Vec<u8>,
    verify: bool,
) -> Result<Vec<u8>> {
    let total = raw_len(file_name, handle)?;
    let mut raw = if buf.capacity() >= total {
        buf
    } else {
        // Headroom so the buffer can be recycled for a slightly larger block.
        Vec::with_capacity(total.saturating_add(total / 32))
    };
    raw.resize(total, 0);
    file.read_exact_at(&mut raw, handle.offset)?;
    count_block_read(stats, total);
    let corrupt = |r| Error::corruption(file_name, handle.offset, r);
    let (stored, kind) = split_block(&raw, verify).map_err(corrupt)?;
    let len = stored.len();
    let mut contents = Vec::new();
    if decompress_into(kind, stored, &mut contents).map_err(corrupt)? {
        return Ok(contents);
    }
    raw.truncate(len);
    Ok(raw)
}

/// Counts one block of `total` bytes (trailer included) read from a file.
fn count_block_read(stats: &IoStats, total: usize) {
    stats.blocks_read.inc();
    THREAD_BLOCKS_READ.with(|n| n.set(n.get() + 1));
    stats.bytes_read.add(total as u64);
}

impl Table {
    /// Opens a table: reads the footer, checks that the metadata blocks tile
    /// the file exactly (data | filter | index | properties | footer), then
    /// loads and validates index, filter and properties. A file that is
    /// truncated, extended or damaged anywhere in those parts fails here with
    /// `Corruption`; data blocks are checked when read.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        file_id: u64,
        file_name: String,
        cache: Option<Arc<BlockCache>>,
        stats: Arc<IoStats>,
    ) -> Result<Arc<Table>> {
        Table::open_mapped(file, None, file_id, file_name, cache, stats, true, 0, false)
    }

    /// [`Table::open`] with `map`, the file mapped read-only (see
    /// [`crate::vfs::Mapping`]), if given: data blocks are then slices of
    /// the mapping rather than copies read with `pread`. The metadata
    /// blocks are read with `pread` either way (once, at open), and always
    /// verified; queries verify the data blocks they read from the file
    /// only if `verify_checksums` ([`crate::Options::verify_checksums`]).
    /// A query's scan reads ahead in chunks of up to `max_scan_readahead`
    /// bytes ([`crate::Options::max_scan_readahead_bytes`]; 0: block by
    /// block).
    ///
    /// With `cache_meta` ([`crate::Options::cache_index_and_filter_blocks`])
    /// and a cache, the index and filter read here go into the block cache
    /// instead of staying with the table.
    #[expect(
        clippy::too_many_arguments,
        reason = "the per-open settings of a table, passed through from TableCache"
    )]
    pub fn open_mapped(
        file: Arc<dyn RandomAccessFile>,
        map: Option<Arc<Mapping>>,
        file_id: u64,
        file_name: String,
        cache: Option<Arc<BlockCache>>,
        stats: Arc<IoStats>,
        verify_checksums: bool,
        max_scan_readahead: usize,
        cache_meta: bool,
    ) -> Result<Arc<Table>> {
        let len = file.len();
        if map.as_ref().is_some_and(|m| m.bytes().len() as u64 != len) {
            return Err(Error::corruption(
                file_name.as_str(),
                0,
                "mapping and file lengths differ",
            ));
        }
        let corrupt =
            |offset: u64, reason: &str| Error::corruption(file_name.as_str(), offset, reason);
        let footer_offset = len
            .checked_sub(FOOTER_LEN as u64)
            .ok_or_else(|| corrupt(0, "file shorter than an SST footer"))?;
        let mut raw_footer = vec![0u8; FOOTER_LEN];
        file.read_exact_at(&mut raw_footer, footer_offset)?;
        stats.bytes_read.add(FOOTER_LEN as u64);
        let footer = Footer::decode(&raw_footer).map_err(|r| corrupt(footer_offset, r))?;

        // The layout is fixed, so every handle must start where the previous
        // part ends; this bounds every length by the file size before any
        // allocation.
        let layout_ok = footer.index.offset == footer.filter.end().unwrap_or(u64::MAX)
            && footer.properties.offset == footer.index.end().unwrap_or(u64::MAX)
            && footer.properties.end() == Some(footer_offset);
        if !layout_ok {
            return Err(corrupt(
                footer_offset,
                "footer handles do not tile the file",
            ));
        }

        let props_raw = read_checked(file.as_ref(), &file_name, &stats, footer.properties)?;
        let mut props =
            decode_properties(&props_raw).map_err(|r| corrupt(footer.properties.offset, r))?;
        props.file_size = len;

        // The range-deletion block, if any, sits between the data blocks
        // and the filter; version 1 tables have none.
        let (data_end, range_tombstones) = match props.range_del {
            None => (footer.filter.offset, Vec::new()),
            Some(h) => {
                if footer.version < 2 || h.end() != Some(footer.filter.offset) {
                    return Err(corrupt(
                        footer.properties.offset,
                        "range-deletion block misplaced (or in a version 1 table)",
                    ));
                }
                let raw = read_checked(file.as_ref(), &file_name, &stats, h)?;
                let list = range_del::decode_block(&raw).map_err(|r| corrupt(h.offset, r))?;
                if list.len() as u64 != props.range_tombstones {
                    return Err(corrupt(h.offset, "range tombstone count disagrees"));
                }
                (h.offset, list)
            }
        };

        let index_raw = read_checked(file.as_ref(), &file_name, &stats, footer.index)?;
        stats.cache_misses[kind_idx(BlockKind::Index)].inc();
        stats.meta_bytes_read[0].add(index_raw.len() as u64);
        let index = decode_checked_index(&index_raw, data_end, &range_tombstones, &props)
            .map_err(|r| corrupt(footer.index.offset, r))?;

        let filter_raw = read_checked(file.as_ref(), &file_name, &stats, footer.filter)?;
        let filter = if filter_raw.is_empty() {
            None
        } else {
            stats.cache_misses[kind_idx(BlockKind::Filter)].inc();
            stats.meta_bytes_read[1].add(filter_raw.len() as u64);
            Some(BloomFilter::decode(&filter_raw).map_err(|r| corrupt(footer.filter.offset, r))?)
        };

        let num_blocks = index.len();
        let fpr_theoretical = filter.as_ref().map_or(1.0, BloomFilter::fpr_theoretical);
        let meta = MetaBlocks {
            index: Arc::new(index),
            filter: filter.map(Arc::new),
        };
        let held = match cache.as_ref().filter(|_| cache_meta) {
            Some(cache) => {
                cache.insert_meta(file_id, footer.index.offset, Cached::Index(meta.index));
                if let Some(f) = meta.filter {
                    cache.insert_meta(file_id, footer.filter.offset, Cached::Filter(f));
                }
                None
            }
            None => Some(meta),
        };
        Ok(Arc::new(Table {
            file,
            map,
            file_id,
            file_name,
            cache,
            stats,
            footer,
            held,
            pin_wanted: AtomicBool::new(false),
            pinned: RwLock::new(None),
            num_blocks,
            has_filter: !filter_raw.is_empty(),
            fpr_theoretical,
            data_end,
            props,
            range_tombstones,
            verify_checksums,
            max_scan_readahead,
        }))
    }

    /// The table's range tombstones, sorted by start (then newest first).
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.range_tombstones
    }

    /// The newest range tombstone of the table covering `user_key` visible
    /// at `snapshot_seq` (its sequence number; 0 if none).
    pub fn range_del_seq(&self, user_key: &[u8], snapshot_seq: u64) -> u64 {
        range_del::covering_seq(&self.range_tombstones, user_key, snapshot_seq)
    }

    /// The table's properties (with `file_size` = the file's length).
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// Number of data blocks (fence pointers in the index).
    pub fn num_data_blocks(&self) -> usize {
        self.num_blocks
    }

    pub(super) fn corrupt_block(
        &self,
        index: &FenceIndex,
        block_idx: usize,
        reason: &str,
    ) -> Error {
        let offset = index.handle(block_idx).map_or(0, |h| h.offset);
        Error::corruption(self.file_name.as_str(), offset, reason)
    }

    /// Counts an index or filter lookup in the hit/miss statistics, if a
    /// query made it.
    fn count_meta(&self, kind: BlockKind, hit: bool, query: bool) {
        if !query {
            return;
        }
        if hit {
            self.stats.cache_hits[kind_idx(kind)].inc();
        } else {
            self.stats.cache_misses[kind_idx(kind)].inc();
        }
    }

    /// The index; `query`: a query's lookup, counted as a hit (held,
    /// pinned or cached) or a miss (read back from the file into the
    /// cache). Any other lookup (a compaction's input, verification) is
    /// not counted, and a block it reads does not enter the cache.
    pub(super) fn index(&self, query: bool) -> Result<MetaRef<'_, FenceIndex>> {
        if let Some(m) = &self.held {
            self.count_meta(BlockKind::Index, true, query);
            return Ok(MetaRef::Held(&m.index));
        }
        if let Some(m) = self.pinned_now() {
            self.count_meta(BlockKind::Index, true, query);
            return Ok(MetaRef::Shared(m.index));
        }
        let index = self.load_index(query)?;
        self.pin_if_wanted()?;
        Ok(MetaRef::Shared(index))
    }

    /// The filter (`None`: the table has none); `query` as for
    /// [`Table::index`].
    pub(super) fn filter(&self, query: bool) -> Result<Option<MetaRef<'_, BloomFilter>>> {
        if !self.has_filter {
            return Ok(None);
        }
        if let Some(m) = &self.held {
            self.count_meta(BlockKind::Filter, true, query);
            return Ok(m.filter.as_ref().map(MetaRef::Held));
        }
        if let Some(m) = self.pinned_now() {
            self.count_meta(BlockKind::Filter, true, query);
            return Ok(m.filter.map(MetaRef::Shared));
        }
        let filter = self.load_filter(query)?;
        self.pin_if_wanted()?;
        Ok(Some(MetaRef::Shared(filter)))
    }

    /// The pinned index and filter, if the table holds them pinned.
    fn pinned_now(&self) -> Option<MetaBlocks> {
        if !self.pin_wanted.load(Ordering::Acquire) {
            return None;
        }
        self.pinned.read().clone()
    }

    fn load_index(&self, query: bool) -> Result<Arc<FenceIndex>> {
        match self.load_meta(BlockKind::Index, self.footer.index, query)? {
            Cached::Index(i) => Ok(i),
            _ => Err(self.wrong_kind(self.footer.index)),
        }
    }

    fn load_filter(&self, query: bool) -> Result<Arc<BloomFilter>> {
        match self.load_meta(BlockKind::Filter, self.footer.filter, query)? {
            Cached::Filter(f) => Ok(f),
            _ => Err(self.wrong_kind(self.footer.filter)),
        }
    }

    fn wrong_kind(&self, handle: BlockHandle) -> Error {
        Error::corruption(
            self.file_name.as_str(),
            handle.offset,
            "block cache holds another kind of block here",
        )
    }

    /// The index or filter block at `handle` from the block cache, or read
    /// back from the file, checked and decoded (and cached, if `query`).
    fn load_meta(&self, kind: BlockKind, handle: BlockHandle, query: bool) -> Result<Cached> {
        if let Some(c) = self
            .cache
            .as_ref()
            .and_then(|c| c.get_meta(self.file_id, handle.offset))
        {
            self.count_meta(kind, true, query);
            return Ok(c);
        }
        self.count_meta(kind, false, query);
        let raw = read_checked(self.file.as_ref(), &self.file_name, &self.stats, handle)?;
        let corrupt = |r| Error::corruption(self.file_name.as_str(), handle.offset, r);
        let value = if kind == BlockKind::Index {
            self.stats.meta_bytes_read[0].add(raw.len() as u64);
            let index =
                decode_checked_index(&raw, self.data_end, &self.range_tombstones, &self.props);
            Cached::Index(Arc::new(index.map_err(corrupt)?))
        } else {
            self.stats.meta_bytes_read[1].add(raw.len() as u64);
            Cached::Filter(Arc::new(BloomFilter::decode(&raw).map_err(corrupt)?))
        };
        if let (Some(cache), true) = (&self.cache, query) {
            cache.insert_meta(self.file_id, handle.offset, value.clone());
        }
        Ok(value)
    }

    /// Pins the index and filter if the table should and does not yet
    /// (they were just read into the cache, so this finds them there).
    fn pin_if_wanted(&self) -> Result<()> {
        if !self.pin_wanted.load(Ordering::Acquire) || self.pinned.read().is_some() {
            return Ok(());
        }
        let Some(cache) = &self.cache else {
            return Ok(());
        };
        let index = self.load_index(false)?;
        let filter = if self.has_filter {
            Some(self.load_filter(false)?)
        } else {
            None
        };
        let mut pinned = self.pinned.write();
        if pinned.is_none() && self.pin_wanted.load(Ordering::Acquire) {
            cache.pin(self.file_id, self.footer.index.offset, index.memory_bytes());
            if let Some(f) = &filter {
                cache.pin(self.file_id, self.footer.filter.offset, f.memory_bytes());
            }
            *pinned = Some(MetaBlocks { index, filter });
        }
        Ok(())
    }

    /// Whether the table pins its index and filter in the block cache
    /// ([`crate::Options::pin_l0_filter_and_index_blocks_in_cache`]: it is
    /// in level 0). Pinning happens on the next lookup that reads them;
    /// unpinning now, putting them back in the cache's LRU lists. No effect
    /// on a table that holds its index and filter itself.
    pub fn set_pinned(&self, pin: bool) {
        if self.held.is_some() {
            return;
        }
        self.pin_wanted.store(pin, Ordering::Release);
        if pin {
            return;
        }
        let Some(m) = self.pinned.write().take() else {
            return;
        };
        if let Some(cache) = &self.cache {
            cache.unpin(
                self.file_id,
                self.footer.index.offset,
                Cached::Index(m.index),
            );
            if let Some(f) = m.filter {
                cache.unpin(self.file_id, self.footer.filter.offset, Cached::Filter(f));
            }
        }
    }

    /// Counts a data-block cache lookup in the hit/miss statistics, if a
    /// query made it.
    fn count_data_lookup(&self, hit: bool, query: bool) {
        if !query {
            return;
        }
        let data = kind_idx(BlockKind::Data);
        if hit {
            self.stats.cache_hits[data].inc();
        } else {
            self.stats.cache_misses[data].inc();
        }
        count_data_cache(hit);
    }

    /// Data block `idx`, from the cache or the file; a block read from the
    /// file enters the cache as `fill` says. A cached block whose checksum
    /// was not verified counts as a miss if this read verifies: it is read
    /// again, checked, and replaces the cached one.
    ///
    /// `query`: a query's read, whose cache lookup counts in the hit and
    /// miss statistics, and which verifies the checksum only if the table's
    /// queries do; any other read (a compaction's input) always verifies
    /// and is not counted, so that the hit ratio is the queries' (seed
    /// 002's), not diluted by merges reading inputs.
    pub(super) fn data_block(
        &self,
        index: &FenceIndex,
        idx: usize,
        fill: Fill,
        query: bool,
    ) -> Result<Arc<Block>> {
        let handle = index
            .handle(idx)
            .ok_or_else(|| self.corrupt_block(index, idx, "block index out of range"))?;
        let verify = self.verify_checksums || !query;
        let usable = |b: &Arc<Block>| !verify || b.checksum_verified();
        let mut buf = Vec::new();
        if let Some(cache) = &self.cache {
            if fill != Fill::Skip && self.map.is_none() {
                // The block read on a miss goes into the cache, evicting
                // another whose buffer the next miss can reuse.
                let total = raw_len(&self.file_name, handle)?;
                match cache.lookup(self.file_id, handle.offset, total) {
                    Lookup::Hit(b) if usable(&b) => {
                        self.count_data_lookup(true, query);
                        return Ok(b);
                    }
                    Lookup::Hit(_) => {}
                    Lookup::Miss(spare) => buf = spare,
                }
            } else if let Some(b) = cache.get(self.file_id, handle.offset).filter(usable) {
                self.count_data_lookup(true, query);
                return Ok(b);
            }
        }
        self.count_data_lookup(false, query);
        let block = self.read_block(handle, buf, verify)?;
        self.fill_cache(handle.offset, &block, fill);
        Ok(block)
    }

    /// Puts a block read from the file at `offset` into the cache as `fill`
    /// says.
    pub(super) fn fill_cache(&self, offset: u64, block: &Arc<Block>, fill: Fill) {
        if let Some(cache) = &self.cache {
            match fill {
                Fill::Hot => cache.insert(self.file_id, offset, Arc::clone(block)),
                Fill::Cold => cache.insert_cold(self.file_id, offset, Arc::clone(block)),
                Fill::Skip => {}
            }
        }
    }

    /// Reads, checks and decodes the data block at `handle`: a slice of the
    /// mapping if the file is mapped, else read from the file into `buf`'s
    /// allocation. Either way its checksum is verified here, once, if
    /// `verify` (a cached block is not checked again); otherwise the block
    /// is marked unverified ([`Block::checksum_verified`]).
    fn read_block(&self, handle: BlockHandle, buf: Vec<u8>, verify: bool) -> Result<Arc<Block>> {
        let bad = |r: &str| Error::corruption(self.file_name.as_str(), handle.offset, r);
        let block = match &self.map {
            Some(map) => {
                let total = raw_len(&self.file_name, handle)?;
                let start = usize::try_from(handle.offset).map_err(|_| bad("offset overflows"))?;
                let raw = start
                    .checked_add(total)
                    .and_then(|end| map.bytes().get(start..end))
                    .ok_or_else(|| bad("block outside the file"))?;
                count_block_read(&self.stats, total);
                let (stored, kind) = split_block(raw, verify).map_err(bad)?;
                let mut contents = Vec::new();
                if decompress_into(kind, stored, &mut contents).map_err(bad)? {
                    Block::new(contents)
                } else {
                    Block::mapped(Arc::clone(map), start..start + stored.len())
                }
            }
            None => Block::new(read_checked_into(
                self.file.as_ref(),
                &self.file_name,
                &self.stats,
                handle,
                buf,
                verify,
            )?),
        };
        let block = block.map_err(bad)?;
        Ok(Arc::new(if verify { block } else { block.unverified() }))
    }

    /// Data block `idx` for a sequential reader: from the cache if it holds
    /// the block, else from `ahead`'s buffer, refilled with one read of up
    /// to `ahead.size` bytes of consecutive data blocks when the block is
    /// not in it (then `ahead.size` doubles, up to `ahead.max`). `fill` and
    /// `query` as for [`Table::data_block`]: a compaction's input passes
    /// `Fill::Skip` and is no query, so its blocks stay out of the cache and
    /// of the queries' statistics, and every block is verified whatever
    /// queries do (a cached block a query read unverified is read again: a
    /// merge never writes corrupt data out as if it were good); a long
    /// scan's blocks enter the cache and count as a query's would.
    pub(super) fn data_block_ahead(
        &self,
        index: &FenceIndex,
        idx: usize,
        ahead: &mut Readahead,
        fill: Fill,
        query: bool,
    ) -> Result<Arc<Block>> {
        let handle = index
            .handle(idx)
            .ok_or_else(|| self.corrupt_block(index, idx, "block index out of range"))?;
        let verify = self.verify_checksums || !query;
        if let Some(b) = self
            .cache
            .as_ref()
            .and_then(|c| c.get(self.file_id, handle.offset))
            .filter(|b| !verify || b.checksum_verified())
        {
            self.count_data_lookup(true, query);
            return Ok(b);
        }
        self.count_data_lookup(false, query);
        let block = if self.map.is_some() {
            // A mapped file needs no buffer: the kernel reads ahead itself.
            self.read_block(handle, Vec::new(), verify)?
        } else {
            self.read_ahead(handle, ahead, verify)?
        };
        self.fill_cache(handle.offset, &block, fill);
        Ok(block)
    }

    /// The block at `handle` from `ahead`'s buffer, which is refilled
    /// first if it does not hold the whole block; checked if `verify`, else
    /// marked unverified.
    fn read_ahead(
        &self,
        handle: BlockHandle,
        ahead: &mut Readahead,
        verify: bool,
    ) -> Result<Arc<Block>> {
        let total = raw_len(&self.file_name, handle)?;
        let end = handle.offset.saturating_add(total as u64);
        let held = ahead.start..ahead.start.saturating_add(ahead.buf.len() as u64);
        if !(held.contains(&handle.offset) && end <= held.end) {
            // The data blocks end where the metadata blocks begin (open
            // checked that they tile the file).
            let data_end = self.data_end.max(end);
            let want = (ahead.size as u64).clamp(total as u64, data_end - handle.offset);
            let want = usize::try_from(want).map_err(|_| {
                Error::corruption(
                    self.file_name.as_str(),
                    handle.offset,
                    "readahead too large",
                )
            })?;
            ahead.buf.resize(want, 0);
            self.file.read_exact_at(&mut ahead.buf, handle.offset)?;
            ahead.start = handle.offset;
            ahead.size = ahead.size.saturating_mul(2).min(ahead.max);
            self.stats.bytes_read.add(want as u64);
        }
        let at = usize::try_from(handle.offset - ahead.start).unwrap_or(usize::MAX);
        let raw = ahead.buf.get(at..at.saturating_add(total)).ok_or_else(|| {
            Error::corruption(
                self.file_name.as_str(),
                handle.offset,
                "block outside its readahead",
            )
        })?;
        self.stats.blocks_read.inc();
        THREAD_BLOCKS_READ.with(|n| n.set(n.get() + 1));
        let bad = |r| Error::corruption(self.file_name.as_str(), handle.offset, r);
        let (stored, kind) = split_block(raw, verify).map_err(bad)?;
        let mut contents = Vec::new();
        if !decompress_into(kind, stored, &mut contents).map_err(bad)? {
            contents.extend_from_slice(stored);
        }
        let block = Block::new(contents).map_err(bad)?;
        Ok(Arc::new(if verify { block } else { block.unverified() }))
    }

    /// The first entry `>= target` if it belongs to `user_key`; `index`
    /// finds the only block that can hold it (the first whose last key is
    /// `>= target`).
    fn find_entry(
        &self,
        index: &FenceIndex,
        target: &[u8],
        user_key: &[u8],
    ) -> Result<Option<(ValueKind, u64, Vec<u8>)>> {
        let idx = index.find(target);
        if idx >= index.len() {
            return Ok(None);
        }
        let bad = |r| self.corrupt_block(index, idx, r);
        let mut it = BlockIter::new(self.data_block(index, idx, Fill::Hot, true)?);
        it.seek(target).map_err(bad)?;
        if !it.valid() {
            return Err(bad("block ends before its indexed last key"));
        }
        let parsed = parse_internal_key(it.key())
            .ok_or_else(|| bad("entry key is not a valid internal key"))?;
        if parsed.user_key != user_key {
            return Ok(None);
        }
        Ok(Some((parsed.kind, parsed.seq, it.value().to_vec())))
    }

    /// Newest entry for `user_key` with `seq <= snapshot_seq`: `(kind, seq,
    /// value)`. The Bloom filter is consulted first; when it says "maybe" but
    /// the file holds no version of the key at all, that is counted as a false
    /// positive (a key present only in versions newer than the snapshot is not).
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot_seq: u64,
    ) -> Result<Option<(ValueKind, u64, Vec<u8>)>> {
        Ok(self.get_with_filter_outcome(user_key, snapshot_seq)?.0)
    }

    /// [`Table::get`], also telling what the Bloom filter answered (for
    /// per-level filter statistics).
    pub fn get_with_filter_outcome(
        &self,
        user_key: &[u8],
        snapshot_seq: u64,
    ) -> Result<(Option<Entry>, FilterOutcome)> {
        if let Some(filter) = self.filter(true)? {
            self.stats.bloom_probes.inc();
            if !filter.may_contain(user_key) {
                self.stats.bloom_negatives.inc();
                return Ok((None, FilterOutcome::Negative));
            }
        }
        let index = self.index(true)?;
        let found = self.find_entry(&index, &seek_key(user_key, snapshot_seq), user_key)?;
        let mut outcome = if self.has_filter {
            FilterOutcome::Positive
        } else {
            FilterOutcome::NoFilter
        };
        if found.is_none() && self.has_filter {
            let present = snapshot_seq < MAX_SEQ
                && self
                    .find_entry(&index, &seek_key(user_key, MAX_SEQ), user_key)?
                    .is_some();
            if !present {
                self.stats.bloom_false_positives.inc();
                outcome = FilterOutcome::FalsePositive;
            }
        }
        Ok((found, outcome))
    }

    /// The user-key ranges `[first, last]` of this table's data blocks that
    /// are in the block cache now, in key order.
    pub fn cached_block_ranges(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(cache) = &self.cache else {
            return Ok(Vec::new());
        };
        let index = self.index(false)?;
        Ok((0..index.len())
            .filter(|&i| {
                index
                    .handle(i)
                    .is_some_and(|h| cache.contains(self.file_id, h.offset))
            })
            .map(|i| {
                (
                    user_key(index.first_key(i)).to_vec(),
                    user_key(index.last_key(i)).to_vec(),
                )
            })
            .collect())
    }

    /// Reads into the block cache every data block whose user-key range
    /// overlaps one of `ranges` (sorted by start, disjoint) and is not cached
    /// yet; returns how many it read.
    pub fn warm(&self, ranges: &[(Vec<u8>, Vec<u8>)]) -> Result<u64> {
        let Some(cache) = &self.cache else {
            return Ok(0);
        };
        let mut read = 0;
        let index = self.index(false)?;
        for i in 0..index.len() {
            let (first, last) = (user_key(index.first_key(i)), user_key(index.last_key(i)));
            // The first range ending at or after the block's start is the
            // only one that can overlap it without starting after its end.
            let r = ranges.partition_point(|(_, end)| end.as_slice() < first);
            let overlaps = ranges
                .get(r)
                .is_some_and(|(start, _)| start.as_slice() <= last);
            let Some(handle) = index.handle(i) else {
                continue;
            };
            // Not through `data_block`: a prefetch is no query's hit or miss.
            if overlaps && !cache.contains(self.file_id, handle.offset) {
                cache.insert(
                    self.file_id,
                    handle.offset,
                    self.read_block(handle, Vec::new(), true)?,
                );
                read += 1;
            }
        }
        Ok(read)
    }

    /// A query's filter check: false only if the key is certainly absent;
    /// always true for a table without a filter. The filter lookup counts
    /// as a hit or miss ([`Table::index`]), the probe in no statistics.
    pub fn may_contain(&self, user_key: &[u8]) -> Result<bool> {
        Ok(self.filter(true)?.is_none_or(|f| f.may_contain(user_key)))
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        if let (Some(m), Some(cache)) = (self.pinned.get_mut().take(), &self.cache) {
            cache.release_pin(
                m.index.memory_bytes() + m.filter.as_ref().map_or(0, |f| f.memory_bytes()),
            );
        }
    }
}

thread_local! {
    static THREAD_BLOCKS_READ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static THREAD_DATA_CACHE: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Data-block cache hits and misses of the calling thread so far: a point
/// lookup attributes its own to the level it probed.
pub fn thread_data_cache() -> (u64, u64) {
    THREAD_DATA_CACHE.with(std::cell::Cell::get)
}

fn count_data_cache(hit: bool) {
    THREAD_DATA_CACHE.with(|c| {
        let (h, m) = c.get();
        c.set(if hit { (h + 1, m) } else { (h, m + 1) });
    });
}

/// Blocks the calling thread has read from SST files so far: a point
/// lookup counts its own disk reads (read amplification) with it while
/// other threads compact.
pub fn thread_blocks_read() -> u64 {
    THREAD_BLOCKS_READ.with(std::cell::Cell::get)
}

/// A stored version of a key: `(kind, seq, value)`.
pub type Entry = (ValueKind, u64, Vec<u8>);

/// Cross-checks the index and range tombstones against the properties
/// block (each checksummed on its own, so a disagreement means a bad writer
/// or a crafted file): the key range is exactly the points' and the
/// tombstones' extent.
fn check_index_against_props(
    index: &FenceIndex,
    ranges: &[RangeTombstone],
    props: &TableProperties,
) -> DecodeResult<()> {
    let n = index.len();
    let points = n.checked_sub(1).map(|last| {
        (
            crate::key::user_key(index.first_key(0)),
            crate::key::user_key(index.last_key(last)),
        )
    });
    let tombs = ranges.first().map(|first| {
        let end = ranges.iter().map(|t| t.end.as_slice()).max();
        (first.start.as_slice(), end.unwrap_or_default())
    });
    let extent = match (points, tombs) {
        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
        (p, t) => p.or(t),
    };
    let ok = (props.entries >= n as u64)
        && (n > 0 || props.entries == 0)
        && extent.is_none_or(|(lo, hi)| {
            lo == props.smallest_key.as_slice() && hi == props.largest_key.as_slice()
        });
    if ok {
        Ok(())
    } else {
        Err("index disagrees with the properties block")
    }
}

/// The bytes a sequential reader read ahead of the block it needs.
pub(super) struct Readahead {
    /// Bytes of the next read.
    pub(super) size: usize,
    /// Bytes per read at most: each read doubles `size` up to this.
    pub(super) max: usize,
    /// File offset of `buf`'s first byte.
    start: u64,
    buf: Vec<u8>,
}

impl Readahead {
    pub(super) fn new(size: usize, max: usize) -> Readahead {
        Readahead {
            size,
            max,
            start: 0,
            buf: Vec::new(),
        }
    }
}

/// How a block read from the file enters the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fill {
    /// Not at all.
    Skip,
    /// As the most recently used block.
    Hot,
    /// As the least recently used ([`BlockCache::insert_cold`]).
    Cold,
}
