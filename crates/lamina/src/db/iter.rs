//! The read path: point lookups at a sequence number, the user iterators
//! (`Db::scan`, `Db::scan_rev`) and the per-level iterator.

use super::*;
use crate::iter::FilterIterator;
use crate::key::user_key;
use crate::range_del::{Fragments, RangeTombstone};
use crate::scan_pool::{PrefetchIter, ScanPool, Start, BATCH_BYTES};

pub use super::cursor::Cursor;
use crate::spatial::Rect;

impl Db {
    /// The entries of the memtables (the newest version of each key they
    /// hold, tombstones as `None`), in key order, in constant memory.
    pub fn memtable_iter(&self) -> Result<LevelIter> {
        let sv = Arc::clone(&self.inner.sv.read());
        LevelIter::new(memtable_iters(&sv).collect(), sv)
    }

    /// The entries of disk level `level` (numbered from 0, as the engine,
    /// the statistics and the compaction policies number them): the newest
    /// version of each key within the level, tombstones as `None`, in key
    /// order, in constant memory (beyond the blocks being read). A level
    /// the tree does not have is empty.
    pub fn level_iter(&self, level: usize) -> Result<LevelIter> {
        let sv = Arc::clone(&self.inner.sv.read());
        let children: Vec<Box<dyn InternalIterator>> = match sv.version.levels.get(level) {
            Some(l) => l
                .runs
                .iter()
                .map(|r| {
                    Box::new(RunIterator::new(
                        Arc::clone(&r.files),
                        Arc::clone(&self.inner.table_cache),
                        true,
                    )) as Box<dyn InternalIterator>
                })
                .collect(),
            None => Vec::new(),
        };
        LevelIter::new(children, sv)
    }
}

impl Inner {
    /// The newest value of `key`, through the row cache if there is one.
    /// The ticket is taken before the visible sequence number is read (see
    /// `row_cache`'s docs for why that order rules out stale rows).
    pub(super) fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(rows) = &self.row_cache else {
            return self.get_at(key, self.visible_seq.load(Ordering::Acquire));
        };
        let ticket = match rows.lookup(key) {
            Ok(v) => {
                self.stats.row_cache_hits.inc();
                return Ok(Some(v));
            }
            Err(t) => t,
        };
        self.stats.row_cache_misses.inc();
        let found = self.get_at(key, self.visible_seq.load(Ordering::Acquire))?;
        if let (Some(t), Some(v)) = (ticket, &found) {
            rows.fill(t, key, v);
        }
        Ok(found)
    }

    /// The value of `key` as of `seq`. Sources are asked newest first; the
    /// first holding a version decides, unless a range tombstone met on
    /// the way (in that source or a newer one) is newer than the version.
    pub(super) fn get_at(&self, key: &[u8], seq: u64) -> Result<Option<Vec<u8>>> {
        let sv = Arc::clone(&self.sv.read());
        // The newest visible range tombstone covering `key` met so far.
        let mut tomb = 0;
        let decide = |tomb: u64, (kind, s, v): (ValueKind, u64, Vec<u8>)| {
            (kind == ValueKind::Put && s >= tomb).then_some(v)
        };
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            tomb = tomb.max(mem.range_del_seq(key, seq));
            if let Some(found) = mem.get(key, seq) {
                return Ok(decide(tomb, found));
            }
        }
        let now = now_ms();
        for (level, run) in sv.version.runs_newest_first() {
            let buffer = sv.version.buffers.get(&run.id);
            let Some(f) = run.file_for(key) else {
                // Seed 002 §5: `C'_i ∪ B_{i+1}^0` is one unit, so where the
                // draining run no longer covers the key, the file drained
                // into the level below (its filter; a marker by its range)
                // gates the run's buffer `B'_i`.
                let Some(buffer) = buffer else { continue };
                let below = sv.version.levels.get(level + 1).into_iter();
                let hosts = below.flat_map(|l| &l.runs);
                let buffers = hosts.filter_map(|r| sv.version.buffers.get(&r.id));
                let gate = match lsbm::drained_slot(buffers, run.id, key) {
                    None => false,
                    Some(Slot::Removed(_)) => true,
                    Some(Slot::Live(d)) => {
                        let table = self.table_cache.table(d)?;
                        tomb = tomb.max(table.range_del_seq(key, seq));
                        table.may_contain(key)?
                    }
                };
                if gate {
                    if let Some(found) = self.buffer_get(level, buffer, key, seq, &mut tomb)? {
                        return Ok(decide(tomb, found));
                    }
                }
                continue;
            };
            f.touch(now);
            let table = self.table_cache.table(f)?;
            tomb = tomb.max(table.range_del_seq(key, seq));
            // The host's index and filter gate its buffer (Alg. 3).
            if let Some(buffer) = buffer {
                if table.may_contain(key)? {
                    if let Some(found) = self.buffer_get(level, buffer, key, seq, &mut tomb)? {
                        return Ok(decide(tomb, found));
                    }
                }
            }
            let (hits, misses) = thread_data_cache();
            let (found, filter) = table.get_with_filter_outcome(key, seq)?;
            let (hits_after, misses_after) = thread_data_cache();
            self.stats.count_filter(level, filter);
            self.stats
                .count_level_cache(level, hits_after - hits, misses_after - misses);
            if let Some(found) = found {
                return Ok(decide(tomb, found));
            }
            if level == 0 && filter != crate::stats::FilterOutcome::Negative {
                // A level-0 block read in vain: LevelDB's wasted seek.
                self.table_cache.charge_seek();
            }
        }
        Ok(None)
    }

    /// Seed 002's Algorithm 3 in one host's buffer: the newest table with
    /// a live file holding `key` answers; the first removed file covering
    /// it sends the lookup back to the host (`None`), as does a buffer that
    /// does not hold the key. Range tombstones of the files asked raise
    /// `tomb`. `level` is the host's (counted per level).
    fn buffer_get(
        &self,
        level: usize,
        buffer: &Buffer<Arc<FileMeta>>,
        key: &[u8],
        seq: u64,
        tomb: &mut u64,
    ) -> Result<Option<(ValueKind, u64, Vec<u8>)>> {
        self.stats.at(&self.stats.buffer_level_probes, level).inc();
        for table in buffer.tables() {
            match table.slot_for(key) {
                None => continue,
                Some(Slot::Removed(_)) => {
                    self.stats.buffer_fallbacks.inc();
                    return Ok(None);
                }
                Some(Slot::Live(f)) => {
                    let t = self.table_cache.table(f)?;
                    *tomb = (*tomb).max(t.range_del_seq(key, seq));
                    let (hits, misses) = thread_data_cache();
                    let found = t.get(key, seq)?;
                    let (hits_after, misses_after) = thread_data_cache();
                    self.stats.buffer_cache_hits.add(hits_after - hits);
                    self.stats.buffer_cache_misses.add(misses_after - misses);
                    if let Some(found) = found {
                        self.stats.buffer_gets.inc();
                        self.stats.at(&self.stats.buffer_level_gets, level).inc();
                        return Ok(Some(found));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The merged view of every memtable and sorted run of `sv`, for reads
    /// within `[lo, hi]` (`hi` `None`: unbounded): a run whose compaction
    /// buffer serves the range is read from the buffer's tables instead
    /// (seed 002 Alg. 4). With it, the range tombstones of those sources
    /// that overlap the range, as a reader at `seq` sees them. With
    /// `read_ahead`, each run is read ahead on the scan pool.
    pub(super) fn merged(
        &self,
        sv: &SuperVersion,
        lo: &[u8],
        hi: Option<&[u8]>,
        seq: u64,
        read_ahead: Option<&ReadAhead>,
    ) -> Result<(MergingIterator, Fragments)> {
        // One allocation for every child: growing the vector run by run
        // reallocated it two or three times per seek.
        let runs: usize = sv.version.levels.iter().map(|l| l.runs.len()).sum();
        // The cursor positions in every run of level 0 beside the deeper
        // levels' (free once level 0's allowance is spent).
        self.table_cache.charge_seek();
        let mut children = Vec::with_capacity(1 + sv.imms.len() + runs);
        children.extend(memtable_iters(sv));
        let mut tombstones: Vec<RangeTombstone> = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .flat_map(|m| m.range_tombstones())
            .collect();
        // The files of a run (sorted, disjoint) overlapping `[lo, hi]`
        // follow the first one ending at or after `lo`: a binary search,
        // not a pass over every file, per seek.
        let mut gather = |files: &[Arc<FileMeta>]| -> Result<()> {
            let first = files.partition_point(|f| f.largest.as_slice() < lo);
            let overlapping = files.get(first..).unwrap_or_default();
            for f in overlapping
                .iter()
                .take_while(|f| hi.is_none_or(|h| f.smallest.as_slice() <= h))
            {
                if f.may_hold_range_tombstones() {
                    tombstones.extend_from_slice(self.table_cache.table(f)?.range_tombstones());
                }
            }
            Ok(())
        };
        let run_iter = |files: Arc<Vec<Arc<FileMeta>>>| -> Box<dyn InternalIterator> {
            let run = Box::new(RunIterator::new(files, Arc::clone(&self.table_cache), true));
            match read_ahead {
                Some(r) => Box::new(PrefetchIter::new(
                    run,
                    Arc::clone(&r.pool),
                    r.start.clone(),
                    r.upper.clone(),
                    BATCH_BYTES,
                )),
                None => run,
            }
        };
        for (_, run) in sv.version.runs_newest_first() {
            match sv.version.buffers.get(&run.id) {
                Some(b) if b.serves_range(lo, hi) => {
                    self.stats.buffer_scans.inc();
                    for t in b.tables() {
                        let files: Vec<_> =
                            t.slots().iter().filter_map(|s| s.live().cloned()).collect();
                        gather(&files)?;
                        children.push(run_iter(Arc::new(files)));
                    }
                }
                _ => {
                    gather(&run.files)?;
                    children.push(run_iter(Arc::clone(&run.files)));
                }
            }
        }
        Ok((
            MergingIterator::new(children),
            Fragments::new(&tombstones, seq),
        ))
    }

    /// A cursor over the current tree as of `seq`, within the bounds
    /// (not positioned yet).
    pub(super) fn cursor_at(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, seq: u64) -> Result<Cursor> {
        self.cursor_with(lo, hi, seq, false)
    }

    /// [`Inner::cursor_at`]; with `parallel` and a scan pool, the runs are
    /// read ahead on the pool (a forward scan's walk).
    fn cursor_with(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
        parallel: bool,
    ) -> Result<Cursor> {
        let sv = Arc::clone(&self.sv.read());
        let lower = match lo {
            Bound::Included(k) => Some(k.to_vec()),
            Bound::Excluded(k) => Some(successor(k)),
            Bound::Unbounded => None,
        };
        let upper = match hi {
            Bound::Included(k) => Some(successor(k)),
            Bound::Excluded(k) => Some(k.to_vec()),
            Bound::Unbounded => None,
        };
        let hi = match hi {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        let read_ahead = match &self.scan_pool {
            Some(pool) if parallel => Some(ReadAhead {
                pool: Arc::clone(pool),
                // Before every version of the lower bound: the cursor's
                // first seek lands at or after it.
                start: lower
                    .as_deref()
                    .map_or(Start::First, |l| Start::At(seek_key(l, MAX_SEQ))),
                upper: upper.clone(),
            }),
            _ => None,
        };
        let (merged, ranges) = self.merged(
            &sv,
            lower.as_deref().unwrap_or_default(),
            hi,
            seq,
            read_ahead.as_ref(),
        )?;
        Ok(Cursor::new(merged, seq, ranges, lower, upper, sv))
    }

    /// A cursor over the keys starting with `prefix` as of `seq`,
    /// positioned at the first.
    pub(super) fn prefix_cursor(&self, prefix: &[u8], seq: u64) -> Result<Cursor> {
        let end = prefix_end(prefix);
        let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut cursor = self.cursor_at(Bound::Included(prefix), hi, seq)?;
        cursor.seek_to_first()?;
        Ok(cursor)
    }

    /// A scan (forward, or backward with `!forward`) as of `seq`: a cursor
    /// positioned at its first key, the positioning counted as the scan's
    /// latency.
    fn walk(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, seq: u64, forward: bool) -> Result<Walk> {
        let start = Instant::now();
        let mut cursor = self.cursor_with(lo, hi, seq, forward)?;
        if forward {
            cursor.seek_to_first()?;
        } else {
            cursor.seek_to_last()?;
        }
        self.stats.record(Op::Scan, start.elapsed());
        Ok(Walk::new(cursor, forward))
    }

    pub(super) fn scan_at(
        self: &Arc<Self>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
    ) -> Result<DbIterator> {
        Ok(DbIterator(self.walk(lo, hi, seq, true)?))
    }

    /// The live records of a spatial index whose point lies in `window`,
    /// as of `seq`: seed 000 Alg. 4.5 over the operational components
    /// (the memtables and the files whose MBR meets the window, condition
    /// 4.1), whose blocks are skipped by their MBRs. Every version of a key
    /// has the key's point, so a file pruned by its MBR holds no version
    /// that could hide or decide a key in the window.
    pub(super) fn window_at(self: &Arc<Self>, window: Rect, seq: u64) -> Result<WindowIter> {
        let start = Instant::now();
        let comparator = self.opts.spatial.ok_or_else(|| {
            Error::InvalidArgument("window queries need Options::spatial".to_string())
        })?;
        let sv = Arc::clone(&self.sv.read());
        let inside = move |ikey: &[u8]| {
            comparator
                .point_of(user_key(ikey))
                .is_some_and(|p| window.contains(p))
        };
        let filtered = |child: Box<dyn InternalIterator>| -> Box<dyn InternalIterator> {
            Box::new(FilterIterator::new(child, inside))
        };
        let mut children: Vec<_> = memtable_iters(&sv).map(filtered).collect();
        let mut components = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .filter(|m| !m.is_empty())
            .count() as u64;
        let mut pruned = 0u64;
        for (_, run) in sv.version.runs_newest_first() {
            let (hit, missed): (Vec<_>, Vec<_>) = run
                .files
                .iter()
                .cloned()
                .partition(|f| f.mbr.is_none_or(|m| m.intersects(&window)));
            pruned += missed.len() as u64;
            if !hit.is_empty() {
                components += hit.len() as u64;
                children.push(filtered(Box::new(RunIterator::window(
                    Arc::new(hit),
                    Arc::clone(&self.table_cache),
                    window,
                ))));
            }
        }
        self.stats.window_queries.inc();
        self.stats.window_components.add(components);
        self.stats.window_files_pruned.add(pruned);
        let merged = MergingIterator::new(children);
        // A spatial index refuses range deletes.
        let mut cursor = Cursor::new(merged, seq, Fragments::default(), None, None, sv);
        cursor.seek_to_first()?;
        Ok(WindowIter {
            live: DbIterator(Walk::new(cursor, true)),
            components,
            inner: Arc::clone(self),
            start,
            start_blocks: data_blocks_here(),
        })
    }

    pub(super) fn scan_rev_at(
        self: &Arc<Self>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
    ) -> Result<DbRevIterator> {
        Ok(DbRevIterator(self.walk(lo, hi, seq, false)?))
    }
}

/// How a scan's runs are read on the scan pool.
pub(super) struct ReadAhead {
    pool: Arc<ScanPool>,
    /// Where each run's reader starts.
    start: Start,
    /// Exclusive upper bound on the user keys read.
    upper: Option<Vec<u8>>,
}

/// The smallest key after `k` in bytewise order: an included bound as an
/// excluded one and back.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.extend_from_slice(k);
    s.push(0);
    s
}

/// The exclusive upper bound of the keys starting with `prefix`: the
/// prefix with its last byte below 0xff incremented (and the rest cut);
/// `None` if every key from `prefix` on starts with it (all 0xff bytes).
pub(super) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix.get(..=last)?.to_vec();
    if let Some(b) = end.last_mut() {
        *b += 1;
    }
    Some(end)
}

/// The entries of one level or of the memtables, newest version per key
/// (see [`Db::level_iter`]); it pins the tree it started on. A view of the
/// stored point entries: range tombstones are not applied to it.
pub struct LevelIter {
    iter: MergingIterator,
    last_key: Option<Vec<u8>>,
    _sv: Arc<SuperVersion>,
}

impl LevelIter {
    fn new(children: Vec<Box<dyn InternalIterator>>, sv: Arc<SuperVersion>) -> Result<Self> {
        let mut iter = MergingIterator::new(children);
        iter.seek_to_first()?;
        Ok(LevelIter {
            iter,
            last_key: None,
            _sv: sv,
        })
    }

    fn advance(&mut self) -> Result<Option<LevelEntry>> {
        while self.iter.valid() {
            let p = parse_internal_key(self.iter.key())
                .ok_or_else(|| Error::corruption("level", 0, "bad internal key"))?;
            let newest = self.last_key.as_deref() != Some(p.user_key);
            let entry = newest.then(|| {
                let v = (p.kind == ValueKind::Put).then(|| self.iter.value().to_vec());
                (p.user_key.to_vec(), v)
            });
            self.iter.next()?;
            if let Some(entry) = entry {
                self.last_key = Some(entry.0.clone());
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }
}

impl Iterator for LevelIter {
    type Item = Result<LevelEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance().transpose()
    }
}

/// The records of a window query in key order (see [`Db::window`]).
pub struct WindowIter {
    live: DbIterator,
    components: u64,
    inner: Arc<Inner>,
    start: Instant,
    /// This thread's data-block reads when the query began.
    start_blocks: u64,
}

/// Data blocks the calling thread has read (cache hits and misses).
fn data_blocks_here() -> u64 {
    let (hits, misses) = thread_data_cache();
    hits + misses
}

impl WindowIter {
    /// The operational components the query scans (memtables holding
    /// data, plus files whose MBR meets the window): its read
    /// amplification in the seed's sense.
    pub fn components(&self) -> u64 {
        self.components
    }
}

impl Iterator for WindowIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.live.next()?;
        if item.is_ok() {
            self.inner.stats.window_results.inc();
        }
        Some(item)
    }
}

impl Drop for WindowIter {
    fn drop(&mut self) {
        self.inner.stats.window_latency.record(self.start.elapsed());
        self.inner
            .stats
            .window_blocks
            .add(data_blocks_here().saturating_sub(self.start_blocks));
    }
}

/// A [`Cursor`] walked one way, pair by pair: borrowed
/// ([`DbIterator::next_ref`]) or copied (the `Iterator`s). An error is
/// yielded once, then the walk ends.
struct Walk {
    cursor: Cursor,
    forward: bool,
    /// The cursor is on the pair returned last: the next call steps first.
    /// Stepping lazily, a walk that stops after `n` pairs makes `n - 1`
    /// steps, and a borrowed pair stays valid until the next call.
    returned: bool,
    done: bool,
}

impl Walk {
    fn new(cursor: Cursor, forward: bool) -> Self {
        Walk {
            cursor,
            forward,
            returned: false,
            done: false,
        }
    }

    #[inline]
    fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        if self.done {
            return None;
        }
        if self.returned {
            let moved = if self.forward {
                self.cursor.next()
            } else {
                self.cursor.prev()
            };
            if let Err(e) = moved {
                self.done = true;
                return Some(Err(e));
            }
        }
        if !self.cursor.valid() {
            self.done = true;
            return None;
        }
        self.returned = true;
        Some(Ok((self.cursor.key(), self.cursor.value())))
    }

    fn next_owned(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        self.next_ref()
            .map(|pair| pair.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }
}

/// Iterates live entries in key order (see [`Db::scan`]): a [`Cursor`]
/// walked forward. As an `Iterator` it yields owned copies;
/// [`DbIterator::next_ref`] lends each pair instead.
pub struct DbIterator(Walk);

impl DbIterator {
    /// The next pair, borrowed from the iterator until the next call: no
    /// copy and no allocation per entry (a lending iterator, which
    /// `Iterator` cannot express). `None` at the end; an error is
    /// returned once, then `None`.
    ///
    /// ```
    /// use std::ops::Bound;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = lamina::Db::open(dir.path(), lamina::Options::default())?;
    /// db.put(b"a", b"1")?;
    /// db.put(b"b", b"22")?;
    /// let mut scan = db.scan(Bound::Unbounded, Bound::Unbounded)?;
    /// let mut bytes = 0;
    /// while let Some(pair) = scan.next_ref() {
    ///     let (key, value) = pair?;
    ///     bytes += key.len() + value.len();
    /// }
    /// assert_eq!(bytes, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        self.0.next_ref()
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_owned()
    }
}

/// Iterates live entries in descending key order (see [`Db::scan_rev`]):
/// a [`Cursor`] walked backward. As an `Iterator` it yields owned copies;
/// [`DbRevIterator::next_ref`] lends each pair instead.
pub struct DbRevIterator(Walk);

impl DbRevIterator {
    /// The next pair in descending key order, borrowed until the next call
    /// (see [`DbIterator::next_ref`]).
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        self.0.next_ref()
    }
}

impl Iterator for DbRevIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_owned()
    }
}
