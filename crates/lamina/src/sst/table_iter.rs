//! Iterating a table: [`TableIterator`] walks the index and one data block
//! at a time, both ways, reading ahead for long scans and compactions.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::spatial::Rect;

use super::block::BlockIter;
use super::format::FenceIndex;
use super::reader::{Fill, MetaRef, Readahead, Table};

/// How a table iterator reads ([`Table::iter_with`]); the default is a
/// query's iterator whose blocks enter the cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableIterOptions {
    /// Blocks read from the file enter the block cache (compaction inputs
    /// pass false, so they do not evict the queries' hot set). Cached blocks
    /// are used either way.
    pub fill_cache: bool,
    /// Blocks the iterator steps into (rather than seeks to) enter the cache
    /// at its cold end ([`crate::Options::scan_resistant_cache`]).
    pub cold_steps: bool,
    /// A window query's rectangle: blocks whose MBR does not intersect it
    /// are skipped without being read (tables without MBRs are read whole).
    /// The caller still filters the entries.
    pub window: Option<Rect>,
    /// A compaction's input: blocks the cache does not hold are read this
    /// many bytes at a time (one I/O, one seek on a disk, per chunk of
    /// consecutive blocks instead of one per block) and do not enter the
    /// cache whatever `fill_cache` says.
    pub compaction_readahead: Option<usize>,
}

impl Default for TableIterOptions {
    fn default() -> Self {
        TableIterOptions {
            fill_cache: true,
            cold_steps: false,
            window: None,
            compaction_readahead: None,
        }
    }
}

impl Table {
    /// An iterator over every entry; data blocks are read lazily and cached.
    pub fn iter(self: &Arc<Self>) -> TableIterator {
        self.iter_with(TableIterOptions::default())
    }

    /// An iterator that reads as `options` say.
    pub fn iter_with(self: &Arc<Self>, options: TableIterOptions) -> TableIterator {
        let mut it = TableIterator::new(self.clone(), options.fill_cache, options.window);
        it.cold_steps = options.cold_steps;
        if let Some(readahead) = options.compaction_readahead {
            it.fill_cache = false;
            it.query = false;
            it.readahead = Some(Readahead::new(readahead, readahead));
        }
        it
    }
}

/// A query's iterator that steps forward into [`SCAN_AHEAD_AFTER`] blocks
/// in a row is a long scan: from then on it reads its blocks ahead in
/// chunks of 16 KiB, doubling per read up to the table's
/// `max_scan_readahead` (256 KiB by default; RocksDB's automatic readahead
/// for iterators), one system call (one seek on a disk) per chunk instead
/// of one per block. A seek and a few steps read single blocks as before.
/// The buffer lives as long as the iterator: at most one chunk per table a
/// scan has open.
#[derive(Default)]
struct ScanAhead {
    /// Blocks entered in a row by stepping forward from the previous one.
    streak: u32,
    ahead: Option<Readahead>,
}

/// Blocks a query's iterator steps forward into before it reads ahead.
const SCAN_AHEAD_AFTER: u32 = 2;
/// A scan's first readahead, in bytes.
const SCAN_AHEAD_FIRST: usize = 16 << 10;

impl ScanAhead {
    /// Called for every block the iterator loads (`follows`: stepped forward
    /// into the block after the previous one); the readahead to read it
    /// through, if the scan is long enough and `max` (the largest chunk)
    /// is not 0.
    fn on_load(&mut self, follows: bool, max: usize) -> Option<&mut Readahead> {
        if !follows || max == 0 {
            self.streak = 0;
            return None;
        }
        self.streak = self.streak.saturating_add(1);
        if self.streak < SCAN_AHEAD_AFTER {
            return None;
        }
        Some(
            self.ahead
                .get_or_insert_with(|| Readahead::new(SCAN_AHEAD_FIRST.min(max), max)),
        )
    }
}

/// A bidirectional iterator over a table; owns an `Arc<Table>` so it is `'static`.
/// After an error it is invalid; the error names the file and block offset.
pub struct TableIterator {
    table: Arc<Table>,
    /// The table's index, looked up at each seek (a hit or a miss of the
    /// block cache with [`crate::Options::cache_index_and_filter_blocks`])
    /// and held while the iterator steps.
    index: Option<Arc<FenceIndex>>,
    fill_cache: bool,
    /// Blocks entered by stepping past the end (or start) of the previous
    /// one go in at the cache's cold end ([`TableIterOptions::cold_steps`]).
    cold_steps: bool,
    /// Set for a compaction's input ([`TableIterOptions::compaction_readahead`]).
    readahead: Option<Readahead>,
    /// A query's own readahead once it scans (not on a mapped table).
    scan_ahead: ScanAhead,
    /// A query's iterator: its cache lookups count in the hit and miss
    /// statistics (a compaction input's do not).
    query: bool,
    block_idx: usize,
    iter: Option<BlockIter>,
    /// A window query's rectangle: blocks whose MBR misses it are skipped
    /// unread, in both directions, as if they were empty.
    window: Option<Rect>,
    /// Positioned on a skipped block (acts as an exhausted one).
    pruned: bool,
}

impl fmt::Debug for TableIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableIterator")
            .field("file_id", &self.table.file_id)
            .field("block_idx", &self.block_idx)
            .field("valid", &self.valid())
            .finish()
    }
}

impl TableIterator {
    /// Marks the iterator as a compaction's input: its cache lookups stay
    /// out of the queries' hit and miss statistics, and it verifies every
    /// block's checksum whatever [`crate::Options::verify_checksums`] says.
    pub(crate) fn for_compaction(mut self) -> Self {
        self.query = false;
        self
    }

    fn new(table: Arc<Table>, fill_cache: bool, window: Option<Rect>) -> Self {
        TableIterator {
            table,
            index: None,
            fill_cache,
            cold_steps: false,
            readahead: None,
            scan_ahead: ScanAhead::default(),
            query: true,
            block_idx: 0,
            iter: None,
            window,
            pruned: false,
        }
    }

    /// Loads block `idx` (or becomes exhausted past the last block); a block
    /// outside the window is not read and leaves the iterator `pruned`.
    /// `stepping`: the iterator moves into it from a neighbouring block
    /// (a scan), rather than positioning on it by a seek.
    fn load_block(&mut self, idx: usize, stepping: bool) -> Result<bool> {
        let follows = stepping && Some(idx) == self.block_idx.checked_add(1);
        self.iter = None;
        self.block_idx = idx;
        self.pruned = false;
        let Some(index) = self.index.clone() else {
            return Ok(false);
        };
        if idx >= index.len() {
            return Ok(false);
        }
        if let (Some(w), Some(m)) = (&self.window, index.mbr(idx)) {
            if !m.intersects(w) {
                self.table.stats.mbr_blocks_pruned.inc();
                self.pruned = true;
                return Ok(true);
            }
        }
        let block = match &mut self.readahead {
            Some(ahead) => {
                self.table
                    .data_block_ahead(&index, idx, ahead, Fill::Skip, self.query)?
            }
            None => {
                let fill = match (self.fill_cache, stepping && self.cold_steps) {
                    (false, _) => Fill::Skip,
                    (true, false) => Fill::Hot,
                    (true, true) => Fill::Cold,
                };
                let scanning = self.query && self.table.map.is_none();
                let max = self.table.max_scan_readahead;
                match self.scan_ahead.on_load(follows && scanning, max) {
                    Some(ahead) => self
                        .table
                        .data_block_ahead(&index, idx, ahead, fill, true)?,
                    None => self.table.data_block(&index, idx, fill, self.query)?,
                }
            }
        };
        self.iter = Some(BlockIter::new(block));
        Ok(true)
    }

    fn block_err(&mut self, reason: &str) -> Error {
        self.iter = None;
        self.pruned = false;
        let offset = self
            .index
            .as_ref()
            .and_then(|i| i.handle(self.block_idx))
            .map_or(0, |h| h.offset);
        Error::corruption(self.table.file_name.as_str(), offset, reason)
    }

    /// Looks the table's index up for a new position (see `index`) and
    /// returns it.
    fn lookup_index(&mut self) -> Result<Arc<FenceIndex>> {
        let res = self.table.index(self.query).map(MetaRef::into_arc);
        match res {
            Ok(index) => {
                self.index = Some(Arc::clone(&index));
                Ok(index)
            }
            Err(e) => {
                self.index = None;
                self.iter = None;
                self.pruned = false;
                Err(e)
            }
        }
    }

    /// One entry forward (`FORWARD`) or back, into the neighbouring block
    /// when this one is exhausted; a no-op when invalid.
    fn step<const FORWARD: bool>(&mut self) -> Result<()> {
        let Some(it) = self.iter.as_mut() else {
            return Ok(());
        };
        if !it.valid() {
            return Ok(());
        }
        let moved = if FORWARD { it.next() } else { it.prev() };
        if let Err(r) = moved {
            return Err(self.block_err(r));
        }
        let res = self.skip_exhausted::<FORWARD>();
        self.guard(res)
    }

    /// Moves past exhausted blocks to the first entry of the next non-empty
    /// one (`FORWARD`), or to the last entry of the previous one.
    fn skip_exhausted<const FORWARD: bool>(&mut self) -> Result<()> {
        while self.pruned || self.iter.as_ref().is_some_and(|it| !it.valid()) {
            let idx = if FORWARD {
                self.block_idx + 1
            } else {
                match self.block_idx.checked_sub(1) {
                    Some(i) => i,
                    None => {
                        self.iter = None;
                        self.pruned = false;
                        return Ok(());
                    }
                }
            };
            if !self.load_block(idx, true)? {
                return Ok(());
            }
            let res = self.iter.as_mut().map_or(Ok(()), |it| {
                if FORWARD {
                    it.seek_to_first()
                } else {
                    it.seek_to_last()
                }
            });
            if let Err(r) = res {
                return Err(self.block_err(r));
            }
        }
        Ok(())
    }

    /// Positions at the first (`FORWARD`) or last entry of block `idx`, then
    /// past exhausted blocks; `stepping` as in `load_block`.
    fn start_block<const FORWARD: bool>(&mut self, idx: usize, stepping: bool) -> Result<()> {
        let res = self.load_block(idx, stepping);
        self.guard(res.map(|_| ()))?;
        let res = self.iter.as_mut().map_or(Ok(()), |it| {
            if FORWARD {
                it.seek_to_first()
            } else {
                it.seek_to_last()
            }
        });
        if let Err(r) = res {
            return Err(self.block_err(r));
        }
        let res = self.skip_exhausted::<FORWARD>();
        self.guard(res)
    }

    /// Like `seek_to_first` (`FORWARD`) or `seek_to_last`, for a scan that
    /// steps into this table from the previous (or next) one of its run:
    /// the block enters the cache as a scan's would
    /// ([`TableIterOptions::cold_steps`]).
    pub(crate) fn step_in<const FORWARD: bool>(&mut self) -> Result<()> {
        let index = self.lookup_index()?;
        let idx = if FORWARD {
            0
        } else {
            index.len().saturating_sub(1)
        };
        self.start_block::<FORWARD>(idx, true)
    }

    fn guard(&mut self, res: Result<()>) -> Result<()> {
        if res.is_err() {
            self.iter = None;
            self.pruned = false;
        }
        res
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.iter.as_ref().is_some_and(BlockIter::valid)
    }

    fn key(&self) -> &[u8] {
        self.iter.as_ref().map_or(&[], BlockIter::key)
    }

    fn value(&self) -> &[u8] {
        self.iter.as_ref().map_or(&[], BlockIter::value)
    }

    fn next(&mut self) -> Result<()> {
        self.step::<true>()
    }

    fn prev(&mut self) -> Result<()> {
        self.step::<false>()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let idx = self.lookup_index()?.find(target);
        let res = self.load_block(idx, false);
        self.guard(res.map(|_| ()))?;
        let res = self.iter.as_mut().map_or(Ok(()), |it| it.seek(target));
        if let Err(r) = res {
            return Err(self.block_err(r));
        }
        let res = self.skip_exhausted::<true>();
        self.guard(res)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.lookup_index()?;
        self.start_block::<true>(0, false)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let last = self.lookup_index()?.len().saturating_sub(1);
        self.start_block::<false>(last, false)
    }
}
