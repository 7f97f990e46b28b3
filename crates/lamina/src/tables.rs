//! Opening SST files for the tree, and iterating a sorted run.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::spatial::Rect;
use crate::sst::cache::BlockCache;
use crate::sst::{Table, TableIterOptions, TableIterator};
use crate::stats::{IoStats, LevelStats};
use crate::version::{FileMeta, Level, Version};
use crate::vfs::{Vfs, WritableFile};

pub use crate::filename::sst_name;

/// Shards of the open-table map: lookups on different files rarely share a
/// lock.
const SHARDS: usize = 16;

/// LevelDB's seek accounting (`version_set.cc`, `allowed_seeks`): one
/// seek costs about as much as compacting 40 KB, so a file may cost one
/// wasted seek per 16 KiB before it is merged. Here charged to level 0 as
/// a whole (its runs are what a seek positions in beside each deeper
/// level's one run), from the moment its set of files last changed.
#[derive(Debug)]
struct SeekCharges {
    /// Seeks charged since the allowance was set.
    charged: AtomicU64,
    /// Seeks allowed; `u64::MAX`: merging level 0 would save nothing.
    allowed: AtomicU64,
}

impl Default for SeekCharges {
    fn default() -> Self {
        SeekCharges {
            charged: AtomicU64::new(0),
            allowed: AtomicU64::new(u64::MAX),
        }
    }
}

impl SeekCharges {
    /// Bytes of level 0 that buy one seek.
    const BYTES_PER_SEEK: u64 = 16 << 10;
    /// The fewest seeks allowed (LevelDB's floor).
    const MIN_SEEKS: u64 = 100;

    /// The seeks `bytes` of level 0 may cost before they are merged.
    fn allowance(bytes: u64) -> u64 {
        (bytes / Self::BYTES_PER_SEEK).max(Self::MIN_SEEKS)
    }

    /// Starts over with `allowed` seeks (`None`: none are counted).
    fn reset(&self, allowed: Option<u64>) {
        self.charged.store(0, Ordering::Relaxed);
        self.allowed
            .store(allowed.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// One seek; once the allowance is spent, only a load (no shared
    /// write for readers to contend on).
    #[inline]
    fn charge(&self) {
        let allowed = self.allowed.load(Ordering::Relaxed);
        if allowed != u64::MAX && self.charged.load(Ordering::Relaxed) < allowed {
            self.charged.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn due(&self) -> bool {
        let allowed = self.allowed.load(Ordering::Relaxed);
        allowed != u64::MAX && self.charged.load(Ordering::Relaxed) >= allowed
    }
}

/// The open tables of a database, keyed by file number. A table opens on
/// first use and stays open until [`TableCache::evict`] (called when its file
/// is deleted), so the tree's metadata ([`FileMeta`]) holds no handles.
#[derive(Debug)]
pub struct TableCache {
    pub(crate) vfs: Arc<dyn Vfs>,
    pub(crate) dir: PathBuf,
    pub(crate) cache: Option<Arc<BlockCache>>,
    pub(crate) stats: Arc<IoStats>,
    /// Map tables read-only ([`crate::Options::mmap_reads`]).
    mmap_reads: bool,
    /// Queries' scans insert the blocks they step into at the block cache's
    /// cold end ([`crate::Options::scan_resistant_cache`]).
    scan_resistant: bool,
    /// Queries verify the checksums of the data blocks they read from the
    /// files ([`crate::Options::verify_checksums`]).
    verify_checksums: bool,
    /// The largest chunk a query's scan reads ahead
    /// ([`crate::Options::max_scan_readahead_bytes`]).
    max_scan_readahead: usize,
    /// Tables read their index and filter through the block cache
    /// ([`crate::Options::cache_index_and_filter_blocks`]).
    cache_meta: bool,
    /// Level-0 tables pin them
    /// ([`crate::Options::pin_l0_filter_and_index_blocks_in_cache`]).
    pin_l0: bool,
    /// The files of level 0, as [`TableCache::set_level0`] last saw them.
    level0: RwLock<Vec<u64>>,
    /// What reads have paid for merging level 0 ([`SeekCharges`]).
    seeks: SeekCharges,
    /// Keyed by file number with FxHash: every get and seek looks its
    /// tables up here: SipHash made a lookup 238 instructions, about 5% of
    /// a point read (callgrind); FxHash, 95.
    open: [RwLock<FxHashMap<u64, Arc<Table>>>; SHARDS],
    /// Obsolete tables whose files are kept for new tables to take over
    /// ([`crate::Options::recycle_table_files`]), and how many may be.
    recycled: Mutex<Vec<u64>>,
    recycle_limit: usize,
}

impl TableCache {
    /// Opens tables of `dir` through `vfs`, their blocks cached in `cache`.
    pub fn new(
        vfs: Arc<dyn Vfs>,
        dir: PathBuf,
        cache: Option<Arc<BlockCache>>,
        stats: Arc<IoStats>,
    ) -> Self {
        TableCache {
            vfs,
            dir,
            cache,
            stats,
            mmap_reads: false,
            scan_resistant: false,
            verify_checksums: true,
            max_scan_readahead: 0,
            cache_meta: false,
            pin_l0: false,
            level0: RwLock::new(Vec::new()),
            seeks: SeekCharges::default(),
            open: std::array::from_fn(|_| RwLock::new(FxHashMap::default())),
            recycled: Mutex::new(Vec::new()),
            recycle_limit: 0,
        }
    }

    /// How many obsolete tables' files are kept for reuse
    /// ([`crate::Options::recycle_table_files`]; 0, the default here).
    pub fn with_recycled_files(mut self, limit: usize) -> Self {
        self.recycle_limit = limit;
        self
    }

    /// Creates the file of new table `id`: an obsolete table's file taken
    /// over if one is kept ([`crate::vfs::Vfs::reuse`]), a new file
    /// otherwise (and if the takeover fails, after deleting the file it
    /// failed on).
    pub fn create_file(&self, id: u64) -> Result<Box<dyn WritableFile>> {
        let path = self.path(id);
        let kept = self.recycled.lock().pop();
        if let Some(old) = kept {
            match self.vfs.reuse(&self.path(old), &path) {
                Ok(file) => return Ok(file),
                Err(_) => {
                    // Under either name, it is no table's any more.
                    let _ = self.vfs.remove(&self.path(old));
                    let _ = self.vfs.remove(&path);
                }
            }
        }
        self.vfs.create(&path)
    }

    /// Disposes of the file of obsolete table `id`, no longer referenced
    /// by any version or reader: kept for a new table to take over while
    /// fewer than the limit are kept, deleted otherwise.
    pub fn retire_file(&self, id: u64) {
        {
            let mut kept = self.recycled.lock();
            if kept.len() < self.recycle_limit {
                kept.push(id);
                return;
            }
        }
        let _ = self.vfs.remove(&self.path(id));
    }

    /// Whether tables are read through a read-only mapping of their file,
    /// where the file system maps files ([`crate::vfs::RandomAccessFile::map`]).
    pub fn with_mmap_reads(mut self, on: bool) -> Self {
        self.mmap_reads = on;
        self
    }

    /// Whether queries' scans insert blocks they step into at the block
    /// cache's cold end ([`crate::Options::scan_resistant_cache`]).
    pub fn with_scan_resistant_cache(mut self, on: bool) -> Self {
        self.scan_resistant = on;
        self
    }

    /// Whether queries verify the checksums of the data blocks they read
    /// from the files ([`crate::Options::verify_checksums`]; on by
    /// default). Compaction inputs always do.
    pub fn with_verify_checksums(mut self, on: bool) -> Self {
        self.verify_checksums = on;
        self
    }

    /// The largest chunk a query's scan reads ahead
    /// ([`crate::Options::max_scan_readahead_bytes`]; 0, the default here:
    /// block by block).
    pub fn with_max_scan_readahead(mut self, bytes: usize) -> Self {
        self.max_scan_readahead = bytes;
        self
    }

    /// Whether tables read their index and filter blocks through the block
    /// cache ([`crate::Options::cache_index_and_filter_blocks`]), and
    /// whether level-0 tables pin them
    /// ([`crate::Options::pin_l0_filter_and_index_blocks_in_cache`], with
    /// [`TableCache::set_level0`]).
    pub fn with_cached_index_and_filter(mut self, cache: bool, pin_l0: bool) -> Self {
        self.cache_meta = cache;
        self.pin_l0 = cache && pin_l0;
        self
    }

    /// Tells which files are in level 0 of `version`, the one being
    /// installed: a new set of level-0 files starts a new seek allowance
    /// ([`TableCache::charge_seek`]); with
    /// `pin_l0_filter_and_index_blocks_in_cache`, their tables pin their
    /// index and filter blocks (on their next lookup), and the tables of
    /// files that left level 0 unpin them.
    pub fn set_level0(&self, version: &Version) {
        let level0 = version.levels.first();
        let files = || {
            level0
                .into_iter()
                .flat_map(|l| l.runs.iter().flat_map(|r| r.files.iter()))
        };
        let ids: Vec<u64> = files().map(|f| f.id).collect();
        let mut current = self.level0.write();
        if *current == ids {
            return;
        }
        let runs = level0.map_or(0, |l| l.runs.len());
        let below = version
            .levels
            .iter()
            .skip(1)
            .any(|l| l.runs.iter().any(|r| !r.files.is_empty()));
        // Merging level 0 saves a seek something only when it leaves fewer
        // runs to position in: two or more, or one beside deeper data.
        let worth = runs >= 2 || (runs == 1 && below);
        self.seeks
            .reset(worth.then(|| SeekCharges::allowance(files().map(|f| f.size).sum())));
        let old = std::mem::replace(&mut *current, ids.clone());
        drop(current);
        if !self.pin_l0 {
            return;
        }
        for id in old.iter().filter(|id| !ids.contains(id)) {
            if let Some(t) = self.shard(*id).read().get(id) {
                t.set_pinned(false);
            }
        }
        for id in ids.iter().filter(|id| !old.contains(id)) {
            if let Some(t) = self.shard(*id).read().get(id) {
                t.set_pinned(true);
            }
        }
    }

    /// Charges level 0 one seek: a read positioned in its runs beside a
    /// deeper level's (a cursor), or read a level-0 block that did not
    /// hold its key (a get). Free once the allowance is spent.
    #[inline]
    pub fn charge_seek(&self) {
        self.seeks.charge();
    }

    /// True once reads have spent level 0's seek allowance: time for the
    /// policy's [`pick_for_reads`](lamina_compaction::CompactionPolicy::pick_for_reads).
    pub fn seeks_due(&self) -> bool {
        self.seeks.due()
    }

    /// Path of SST `id`.
    pub fn path(&self, id: u64) -> PathBuf {
        self.dir.join(sst_name(id))
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn shard(&self, id: u64) -> &RwLock<FxHashMap<u64, Arc<Table>>> {
        &self.open[id as usize % SHARDS]
    }

    /// The opened table of `meta` (which learns whether the file holds
    /// range tombstones).
    pub fn table(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        let shard = self.shard(meta.id);
        if let Some(t) = shard.read().get(&meta.id) {
            learn_range_tombstones(meta, t);
            return Ok(Arc::clone(t));
        }
        // Opened outside the lock: a racing opener may win, and either table
        // is equivalent.
        let file = self.vfs.open_read(&self.path(meta.id))?;
        // Only SSTs are mapped: immutable once installed (see `Mapping`).
        // A failed mapping (say, past the kernel's limit of mappings per
        // process) leaves the table on `pread`, which reads the same bytes.
        let map = if self.mmap_reads {
            file.map().unwrap_or_else(|e| {
                let name = sst_name(meta.id);
                tracing::warn!(target: "lamina", "mmap of {name} failed: {e}; reading it with pread");
                None
            })
        } else {
            None
        };
        let table = Table::open_mapped(
            file,
            map,
            meta.id,
            sst_name(meta.id),
            self.cache.clone(),
            Arc::clone(&self.stats),
            self.verify_checksums,
            self.max_scan_readahead,
            self.cache_meta,
        )?;
        learn_range_tombstones(meta, &table);
        let mut open = shard.write();
        let table = open.entry(meta.id).or_insert(table);
        if self.pin_l0 && self.level0.read().contains(&meta.id) {
            table.set_pinned(true);
        }
        Ok(Arc::clone(table))
    }

    /// Closes table `id` (its file is gone or going) and drops its cached
    /// blocks; returns how many blocks were dropped. Readers still holding
    /// the table keep it until they finish.
    pub fn evict(&self, id: u64) -> u64 {
        self.shard(id).write().remove(&id);
        self.cache.as_ref().map_or(0, |c| c.evict_file(id))
    }

    /// The static figures of `level` (numbered `number` in the statistics):
    /// sizes and counts from the metadata, filter figures from the tables,
    /// opening those not open yet if `open` (else they are left out).
    pub fn level_stats(&self, number: usize, level: &Level, open: bool) -> LevelStats {
        let mut s = LevelStats {
            level: number,
            runs: level.runs.len(),
            files: level.file_count(),
            bytes: level.bytes(),
            ..Default::default()
        };
        let (mut bits, mut fpr) = (0.0, 0.0);
        for f in level.runs.iter().flat_map(|r| r.files.iter()) {
            s.entries += f.entries;
            s.tombstones += f.tombstones;
            if let Some(cache) = &self.cache {
                s.cached_blocks += cache.cached_blocks(f.id);
            }
            let table = if open {
                self.table(f).ok()
            } else {
                self.shard(f.id).read().get(&f.id).cloned()
            };
            if let Some(t) = table {
                s.filter_files += 1;
                let p = t.properties();
                s.filter_bytes += p.filter_bytes;
                bits += p.bloom_bits_per_key * f.entries as f64;
                fpr += t.bloom_fpr_theoretical() * f.entries as f64;
            }
        }
        if s.entries > 0 {
            s.bloom_bits_per_key = bits / s.entries as f64;
            s.bloom_fpr_theoretical = fpr / s.entries as f64;
        }
        s
    }
}

/// Notes in `meta` whether its table holds range tombstones (a copy of
/// the metadata made before the table opened does not know yet).
fn learn_range_tombstones(meta: &FileMeta, table: &Table) {
    if meta.range_tombstones.get().is_none() {
        let _ = meta
            .range_tombstones
            .set(!table.range_tombstones().is_empty());
    }
}

/// Iterates the files of one sorted run in key order (either way), opening
/// each lazily.
pub struct RunIterator {
    files: Arc<Vec<Arc<FileMeta>>>,
    table_cache: Arc<TableCache>,
    /// How each file is read.
    options: TableIterOptions,
    /// A query's cursor, not a compaction's input
    /// ([`TableIterator::for_compaction`]).
    query: bool,
    index: usize,
    current: Option<TableIterator>,
}

impl RunIterator {
    /// A cursor over `files` (sorted by key, disjoint); blocks read from
    /// the files enter the block cache if `fill_cache` (queries), not
    /// otherwise (compactions: their reads would evict what queries use).
    pub fn new(
        files: Arc<Vec<Arc<FileMeta>>>,
        table_cache: Arc<TableCache>,
        fill_cache: bool,
    ) -> Self {
        RunIterator {
            options: TableIterOptions {
                fill_cache,
                cold_steps: fill_cache && table_cache.scan_resistant,
                ..TableIterOptions::default()
            },
            files,
            table_cache,
            query: true,
            index: 0,
            current: None,
        }
    }

    /// A cursor for a compaction's input run: blocks not in the cache are
    /// read `readahead` bytes at a time and stay out of it
    /// ([`TableIterOptions::compaction_readahead`]); with `readahead` 0, or `fill_cache`,
    /// block by block as [`RunIterator::new`]. Either way it is not a
    /// query (`TableIterator::for_compaction`): every block's checksum is
    /// verified and its cache lookups are not counted.
    pub fn compaction_input(
        files: Arc<Vec<Arc<FileMeta>>>,
        table_cache: Arc<TableCache>,
        fill_cache: bool,
        readahead: usize,
    ) -> Self {
        RunIterator {
            options: TableIterOptions {
                fill_cache,
                // A compaction filling the cache (`compaction_fills_cache`)
                // means it: its blocks enter as most recently used.
                cold_steps: false,
                window: None,
                compaction_readahead: (!fill_cache && readahead > 0).then_some(readahead),
            },
            query: false,
            ..RunIterator::new(files, table_cache, fill_cache)
        }
    }

    /// A cursor over `files` for a window query: blocks whose MBR misses
    /// `window` are skipped unread.
    pub fn window(
        files: Arc<Vec<Arc<FileMeta>>>,
        table_cache: Arc<TableCache>,
        window: Rect,
    ) -> Self {
        RunIterator {
            options: TableIterOptions {
                window: Some(window),
                ..TableIterOptions::default()
            },
            ..RunIterator::new(files, table_cache, true)
        }
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        self.current = match self.files.get(index) {
            Some(meta) => {
                let table = self.table_cache.table(meta)?;
                let it = table.iter_with(self.options);
                Some(if self.query { it } else { it.for_compaction() })
            }
            None => None,
        };
        Ok(())
    }

    /// Moves past exhausted files, to the first entry of the next non-empty
    /// one (`FORWARD`) or the last entry of the previous one.
    fn skip_empty<const FORWARD: bool>(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            let index = if FORWARD {
                self.index + 1
            } else {
                match self.index.checked_sub(1) {
                    Some(i) => i,
                    None => {
                        self.current = None;
                        return Ok(());
                    }
                }
            };
            self.start::<FORWARD>(index, true)?;
        }
        Ok(())
    }

    /// Opens file `index` at its first (`FORWARD`) or last entry; `stepping`
    /// when a scan moves into it from its neighbour rather than a seek.
    fn start<const FORWARD: bool>(&mut self, index: usize, stepping: bool) -> Result<()> {
        self.open(index)?;
        if let Some(c) = &mut self.current {
            match (stepping, FORWARD) {
                (true, _) => c.step_in::<FORWARD>()?,
                (false, true) => c.seek_to_first()?,
                (false, false) => c.seek_to_last()?,
            }
        }
        Ok(())
    }
}

impl InternalIterator for RunIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.next()?;
        }
        self.skip_empty::<true>()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.prev()?;
        }
        self.skip_empty::<false>()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let uk = user_key(target);
        let i = self.files.partition_point(|f| f.largest.as_slice() < uk);
        self.open(i)?;
        if let Some(c) = &mut self.current {
            c.seek(target)?;
        }
        self.skip_empty::<true>()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.start::<true>(0, false)?;
        self.skip_empty::<true>()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.start::<false>(self.files.len().saturating_sub(1), false)?;
        self.skip_empty::<false>()
    }
}

/// The files kept for reuse are deleted with the cache (the database's
/// close); a crash leaves them to the next open, which deletes every
/// unreferenced table.
impl Drop for TableCache {
    fn drop(&mut self) {
        for id in std::mem::take(self.recycled.get_mut()) {
            let _ = self.vfs.remove(&self.path(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::tests::{backward_walk, check_moves, random_moves};
    use crate::key::{make_internal_key, ValueKind};
    use crate::sst::{TableBuilder, TableOptions};
    use crate::vfs::mem::MemFs;
    use rand::SeedableRng;

    #[test]
    fn run_moves_both_ways_across_files() {
        let vfs = Arc::new(MemFs::new());
        let table_cache = Arc::new(TableCache::new(
            vfs.clone(),
            PathBuf::from("/run"),
            None,
            Arc::new(IoStats::default()),
        ));
        vfs.create_dir_all(table_cache.dir()).unwrap();
        // Five files of 40 keys (two versions each), with gaps between files.
        let mut entries = Vec::new();
        let mut files = Vec::new();
        for f in 0..5u64 {
            let id = f + 1;
            let opts = TableOptions {
                block_size: 128,
                restart_interval: 3,
                ..TableOptions::default()
            };
            let w = vfs.create(&table_cache.path(id)).unwrap();
            let mut b = TableBuilder::new(w, opts, sst_name(id));
            for k in 0..40 {
                let uk = format!("key{:05}", f * 100 + k);
                for seq in [9, 4] {
                    let ikey = make_internal_key(uk.as_bytes(), seq, ValueKind::Put);
                    let v = format!("{uk}@{seq}").into_bytes();
                    b.add(&ikey, &v).unwrap();
                    entries.push((ikey, v));
                }
            }
            b.finish(0, None).unwrap();
            let first = format!("key{:05}", f * 100);
            let last = format!("key{:05}", f * 100 + 39);
            files.push(Arc::new(crate::version::tests::meta(
                id,
                first.as_bytes(),
                last.as_bytes(),
            )));
        }
        let mut it = RunIterator::new(Arc::new(files), table_cache, true);
        check_moves(&mut it, &entries, &backward_walk(entries.len()));
        for seed in 0..4 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            check_moves(&mut it, &entries, &random_moves(&mut rng, &entries, 1000));
        }
    }
}
