//! The read path: point lookups at a sequence number, the user iterators
//! (`Db::scan`, `Db::scan_rev`) and the per-level iterator.

use super::*;
use crate::iter::FilterIterator;
use crate::key::user_key;
use crate::range_del::{Fragments, RangeTombstone};
use crate::spatial::Rect;

impl Db {
    /// The entries of the memtables (the newest version of each key they
    /// hold, tombstones as `None`), in key order, in constant memory.
    pub fn memtable_iter(&self) -> Result<LevelIter> {
        let sv = Arc::clone(&self.inner.sv.read());
        LevelIter::new(memtable_iters(&sv), sv)
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
                        r.files.clone(),
                        Arc::clone(&self.inner.loader),
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
            if let Some(f) = run.file_for(key) {
                f.touch(now);
                let table = self.loader.table(f)?;
                tomb = tomb.max(table.range_del_seq(key, seq));
                // The host's index and filter gate its buffer (Alg. 3).
                if let Some(buffer) = sv.version.buffers.get(&run.id) {
                    if table.may_contain(key) {
                        if let Some(found) = self.buffer_get(buffer, key, seq, &mut tomb)? {
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
            }
        }
        Ok(None)
    }

    /// Seed 002's Algorithm 3 in one host's buffer: the newest table with
    /// a live file holding `key` answers; the first removed file covering
    /// it sends the lookup back to the host (`None`), as does a buffer that
    /// does not hold the key. Range tombstones of the files asked raise
    /// `tomb`.
    fn buffer_get(
        &self,
        buffer: &Buffer<Arc<FileMeta>>,
        key: &[u8],
        seq: u64,
        tomb: &mut u64,
    ) -> Result<Option<(ValueKind, u64, Vec<u8>)>> {
        for table in &buffer.tables {
            match table.slot_for(key) {
                None => continue,
                Some(Slot::Removed(_)) => {
                    self.stats.buffer_fallbacks.inc();
                    return Ok(None);
                }
                Some(Slot::Live(f)) => {
                    let t = self.loader.table(f)?;
                    *tomb = (*tomb).max(t.range_del_seq(key, seq));
                    let (hits, misses) = thread_data_cache();
                    let found = t.get(key, seq)?;
                    let (hits_after, misses_after) = thread_data_cache();
                    self.stats.buffer_cache_hits.add(hits_after - hits);
                    self.stats.buffer_cache_misses.add(misses_after - misses);
                    if let Some(found) = found {
                        self.stats.buffer_gets.inc();
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
    /// that overlap the range, as a reader at `seq` sees them.
    pub(super) fn merged(
        &self,
        sv: &SuperVersion,
        lo: &[u8],
        hi: Option<&[u8]>,
        seq: u64,
    ) -> Result<(MergingIterator, Fragments)> {
        let mut children = memtable_iters(sv);
        let mut tombstones: Vec<RangeTombstone> = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .flat_map(|m| m.range_tombstones())
            .collect();
        let mut gather = |files: &[Arc<FileMeta>]| -> Result<()> {
            for f in files {
                let overlaps =
                    hi.is_none_or(|h| f.smallest.as_slice() <= h) && lo <= f.largest.as_slice();
                if overlaps {
                    tombstones.extend_from_slice(self.loader.table(f)?.range_tombstones());
                }
            }
            Ok(())
        };
        let run_iter = |files: Vec<Arc<FileMeta>>| -> Box<dyn InternalIterator> {
            Box::new(RunIterator::new(files, Arc::clone(&self.loader), true))
        };
        for (_, run) in sv.version.runs_newest_first() {
            match sv.version.buffers.get(&run.id) {
                Some(b) if b.serves_range(lo, hi) => {
                    self.stats.buffer_scans.inc();
                    for t in &b.tables {
                        let files: Vec<_> =
                            t.slots.iter().filter_map(|s| s.live().cloned()).collect();
                        gather(&files)?;
                        children.push(run_iter(files));
                    }
                }
                _ => {
                    gather(&run.files)?;
                    children.push(run_iter(run.files.clone()));
                }
            }
        }
        Ok((
            MergingIterator::new(children),
            Fragments::new(&tombstones, seq),
        ))
    }

    /// The merged view of the current tree as of `seq`, positioned by
    /// `position`, with the super version it pins and the range tombstones
    /// that apply; the positioning counts as the scan's latency.
    pub(super) fn positioned(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
        position: impl FnOnce(&mut MergingIterator) -> Result<()>,
    ) -> Result<(Arc<SuperVersion>, MergingIterator, Fragments)> {
        let start = Instant::now();
        let sv = Arc::clone(&self.sv.read());
        let lo = match lo {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let hi = match hi {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        let (mut merged, ranges) = self.merged(&sv, lo, hi, seq)?;
        position(&mut merged)?;
        self.stats.record(Op::Scan, start.elapsed());
        Ok((sv, merged, ranges))
    }

    pub(super) fn scan_at(
        self: &Arc<Self>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
    ) -> Result<DbIterator> {
        let (sv, merged, ranges) = self.positioned(lo, hi, seq, |m| match lo {
            Bound::Included(k) | Bound::Excluded(k) => m.seek(&seek_key(k, seq)),
            Bound::Unbounded => m.seek_to_first(),
        })?;
        Ok(DbIterator {
            merged,
            seq,
            ranges,
            hi: hi.map(<[u8]>::to_vec),
            // An excluded lower bound is skipped as if already returned.
            last_key: match lo {
                Bound::Excluded(k) => Some(k.to_vec()),
                _ => None,
            },
            done: false,
            _sv: sv,
        })
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
        let mut children: Vec<_> = memtable_iters(&sv).into_iter().map(filtered).collect();
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
                    hit,
                    Arc::clone(&self.loader),
                    window,
                ))));
            }
        }
        self.stats.window_queries.inc();
        self.stats.window_components.add(components);
        self.stats.window_files_pruned.add(pruned);
        let mut merged = MergingIterator::new(children);
        merged.seek_to_first()?;
        Ok(WindowIter {
            live: DbIterator {
                merged,
                seq,
                // A spatial index refuses range deletes.
                ranges: Fragments::default(),
                hi: Bound::Unbounded,
                last_key: None,
                done: false,
                _sv: sv,
            },
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
        // The last version of the greatest user key in bounds, or (for an
        // excluded bound) the first version of `hi` itself, skipped below.
        let (sv, merged, ranges) = self.positioned(lo, hi, seq, |m| match hi {
            Bound::Included(k) => m.seek_for_prev(&make_internal_key(k, 0, ValueKind::Delete)),
            Bound::Excluded(k) => m.seek_for_prev(&seek_key(k, MAX_SEQ)),
            Bound::Unbounded => m.seek_to_last(),
        })?;
        Ok(DbRevIterator {
            merged,
            seq,
            ranges,
            lo: lo.map(<[u8]>::to_vec),
            hi: hi.map(<[u8]>::to_vec),
            pending: PendingKey::default(),
            done: false,
            _sv: sv,
        })
    }
}

/// The entries of one level or of the memtables, newest version per key
/// (see [`Db::level_iter`]); it pins the tree it started on.
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

/// True if `key` lies above the upper bound `hi`.
fn past_hi(hi: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match hi {
        Bound::Included(h) => key > h.as_slice(),
        Bound::Excluded(h) => key >= h.as_slice(),
        Bound::Unbounded => false,
    }
}

/// True if `key` lies below the lower bound `lo`.
fn below_lo(lo: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match lo {
        Bound::Included(l) => key < l.as_slice(),
        Bound::Excluded(l) => key <= l.as_slice(),
        Bound::Unbounded => false,
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

/// Iterates live entries in key order (see [`Db::scan`]).
pub struct DbIterator {
    merged: MergingIterator,
    seq: u64,
    /// Range tombstones visible at `seq`.
    ranges: Fragments,
    hi: Bound<Vec<u8>>,
    /// The user key last decided (its buffer reused from key to key).
    last_key: Option<Vec<u8>>,
    done: bool,
    _sv: Arc<SuperVersion>,
}

impl DbIterator {
    fn advance(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        while !self.done && self.merged.valid() {
            let p = parse_internal_key(self.merged.key())
                .ok_or_else(|| Error::corruption("scan", 0, "malformed internal key"))?;
            if past_hi(&self.hi, p.user_key) {
                self.done = true;
                break;
            }
            if p.seq > self.seq || self.last_key.as_deref() == Some(p.user_key) {
                self.merged.next()?;
                continue;
            }
            // The newest visible version of a new key decides it.
            let last = self.last_key.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(p.user_key);
            let live = p.kind == ValueKind::Put && !self.ranges.covers(p.user_key, p.seq);
            let item = live.then(|| (p.user_key.to_vec(), self.merged.value().to_vec()));
            self.merged.next()?;
            if item.is_some() {
                return Ok(item);
            }
        }
        self.done = true;
        Ok(None)
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.advance() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Iterates live entries in descending key order (see [`Db::scan_rev`]).
///
/// Going backward, the versions of a user key come oldest first, so the
/// newest version visible at the snapshot is the last one met before the
/// user key changes: a key is decided only once the cursor has moved past
/// all of its versions.
pub struct DbRevIterator {
    merged: MergingIterator,
    seq: u64,
    /// Range tombstones visible at `seq`.
    ranges: Fragments,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    pending: PendingKey,
    done: bool,
    _sv: Arc<SuperVersion>,
}

/// The user key a [`DbRevIterator`] is deciding: its newest visible version
/// met so far.
#[derive(Default)]
struct PendingKey {
    /// `Some(kind)` of that version while a key is being decided.
    kind: Option<ValueKind>,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl PendingKey {
    /// Ends the decision: the entry, if its newest version is a put.
    fn take(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        (self.kind.take() == Some(ValueKind::Put)).then(|| {
            (
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.value),
            )
        })
    }

    /// True while deciding a user key other than `user_key`.
    fn is_other(&self, user_key: &[u8]) -> bool {
        self.kind.is_some() && self.key != user_key
    }

    fn set(&mut self, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.kind = Some(kind);
        self.key.clear();
        self.key.extend_from_slice(user_key);
        self.value.clear();
        self.value.extend_from_slice(value);
    }
}

impl DbRevIterator {
    fn advance(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        while !self.done && self.merged.valid() {
            let p = parse_internal_key(self.merged.key())
                .ok_or_else(|| Error::corruption("scan", 0, "malformed internal key"))?;
            if below_lo(&self.lo, p.user_key) {
                break;
            }
            if past_hi(&self.hi, p.user_key) || p.seq > self.seq {
                self.merged.prev()?;
                continue;
            }
            // A smaller user key: the pending one has seen all its versions.
            let decided = if self.pending.is_other(p.user_key) {
                self.pending.take()
            } else {
                None
            };
            let kind = if self.ranges.covers(p.user_key, p.seq) {
                ValueKind::Delete
            } else {
                p.kind
            };
            self.pending.set(kind, p.user_key, self.merged.value());
            self.merged.prev()?;
            if decided.is_some() {
                return Ok(decided);
            }
        }
        self.done = true;
        Ok(self.pending.take())
    }
}

impl Iterator for DbRevIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.advance() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                self.pending = PendingKey::default();
                Some(Err(e))
            }
        }
    }
}
