//! Least-overlap picking without visiting every file.
//!
//! Leveling and the `lo1`/`lo2` movement policies push the file of a run
//! whose key range overlaps the fewest bytes of a deeper level per byte of
//! its own. Scoring every file at every pick made a simulation quadratic in
//! its flushes (a level holds a growing number of files, and about one file
//! is pushed out of it per flush). An [`OverlapIndex`] keeps each queried
//! run's files with that score, in key order in sorted blocks of at most
//! 128 (`blocks.rs`) each of which knows its least score, and is told by
//! [`crate::plan::apply`] (and whoever else edits a [`TreeView`]) which key
//! ranges of which level changed: a change is one splice of the files it
//! touched (and a rescan of their block's least), a pick a scan of the
//! blocks' least (a few hundred for a level of 10^5 files).
//!
//! The index lives in the view it ranks: a fresh view (the engine builds
//! one per pick) starts empty and ranks a run on first use, at the cost of
//! the old scan; a view edited in place by `apply` (the simulator's model
//! tree) keeps it up to date. A ranking whose run or target level changed
//! shape without a notice is rebuilt, so a forgotten notice costs time, not
//! correctness; busy flags are read live at each pick.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Mutex, MutexGuard};

use crate::view::blocks::{Block, Blocks, Entry, Pos};
use crate::view::files::{Overlap, PackedKey, Span};
use crate::{FileView, LevelView, RunView, TreeView};

/// Which runs of the target level a file's overlap counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Below {
    /// Only the newest run (leveling keeps one run per level).
    Newest,
    /// Every run of the level.
    All,
}

/// What a ranking orders a run's files by, least first; ties go to the
/// file with the smaller keys. Each measure keeps its own rankings, with a
/// score no wider than it needs: a ranking's blocks are spliced and
/// scanned at every merge, and a wider entry costs `leveling` about 5%.
trait Measure: Sized {
    /// A file's score; less is offered first.
    type Score: Copy + Ord + std::fmt::Debug;
    /// Ranks after every file's score.
    const LAST: Self::Score;
    /// The score of a file of `size` bytes that `overlap` of the target
    /// level overlaps.
    fn score(overlap: Overlap, size: u64) -> Self::Score;
    /// The view's rankings by this measure.
    fn rankings(index: &OverlapIndex) -> &Mutex<Vec<Ranking<Self>>>;
}

/// Bytes of the target level overlapping the file, per byte of it
/// (leveling, `lo1`, `lo2`).
#[derive(Debug)]
struct BytesPerByte;

/// Overlapping bytes per byte, ordered as `f64::total_cmp` orders them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PerByte(f64);

impl Eq for PerByte {}

impl PartialOrd for PerByte {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PerByte {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Measure for BytesPerByte {
    type Score = PerByte;
    const LAST: PerByte = PerByte(f64::INFINITY);
    fn score(overlap: Overlap, size: u64) -> PerByte {
        PerByte(overlap.bytes as f64 / size.max(1) as f64)
    }
    fn rankings(index: &OverlapIndex) -> &Mutex<Vec<Ranking<Self>>> {
        &index.per_byte
    }
}

/// The number of files of the target level overlapping the file, then
/// their bytes (seed 000's leveled stack policy).
#[derive(Debug)]
struct FilesThenBytes;

impl Measure for FilesThenBytes {
    type Score = (u64, u64);
    const LAST: (u64, u64) = (u64::MAX, u64::MAX);
    fn score(overlap: Overlap, _: u64) -> (u64, u64) {
        (overlap.files, overlap.bytes)
    }
    fn rankings(index: &OverlapIndex) -> &Mutex<Vec<Ranking<Self>>> {
        &index.fewest
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    level: usize,
    run: u64,
    target: usize,
    below: Below,
}

fn target_runs(levels: &[LevelView], target: usize, below: Below) -> &[RunView] {
    let runs = levels.get(target).map_or(&[][..], |l| l.runs.as_slice());
    match below {
        Below::Newest => &runs[..runs.len().min(1)],
        Below::All => runs,
    }
}

/// Bytes and files of `target`'s runs (by `below`) overlapping each of
/// `spans`, files of one run in key order: one walk over each target run's
/// files under the spans, not a search per file. A merge hands the index
/// its outputs at once, and a search of a large run costs a descent each
/// (the bulk of ranking a merge's outputs when they were scored one by
/// one).
fn overlaps(levels: &[LevelView], target: usize, below: Below, spans: &[Span<'_>]) -> Vec<Overlap> {
    let mut sums = vec![Overlap::default(); spans.len()];
    for run in target_runs(levels, target, below) {
        run.files.add_overlaps(spans, &mut sums);
    }
    sums
}

/// The least-overlap score of `f`: overlapping bytes per byte of `f`.
pub(crate) fn overlap_score(
    levels: &[LevelView],
    target: usize,
    below: Below,
    f: &FileView,
) -> f64 {
    let (lo, hi) = (PackedKey::new(&f.smallest), PackedKey::new(&f.largest));
    let bytes: u64 = overlaps(levels, target, below, &[(&lo, &hi, f.size)])
        .iter()
        .map(|o| o.bytes)
        .sum();
    bytes as f64 / f.size.max(1) as f64
}

/// What a ranking was built from: its run's file count and the target
/// runs' ids and file counts (a cheap check for unnoticed edits).
fn shape(levels: &[LevelView], key: Key, run: &RunView) -> (usize, u64) {
    let target = target_runs(levels, key.target, key.below)
        .iter()
        .fold(0u64, |h, r| {
            h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(r.id ^ ((r.files.len() as u64) << 40))
        });
    (run.files.len(), target)
}

/// One ranked file: its key range, size and score.
#[derive(Debug)]
struct Ranked<M: Measure> {
    smallest: PackedKey,
    largest: PackedKey,
    size: u64,
    score: M::Score,
}

impl<M: Measure> Ranked<M> {
    /// The order files are offered in: by score, ties in key order.
    fn rank(&self) -> (M::Score, &PackedKey) {
        (self.score, &self.smallest)
    }
}

impl<M: Measure> Entry for Ranked<M> {
    type Key = PackedKey;
    fn key(&self) -> &PackedKey {
        &self.smallest
    }
    /// The block's least rank.
    type Summary = (M::Score, PackedKey);

    fn summarize(entries: &[Ranked<M>]) -> (M::Score, PackedKey) {
        entries
            .iter()
            .map(Ranked::rank)
            .min()
            .map(|(score, key)| (score, key.clone()))
            .unwrap_or((M::LAST, PackedKey::default()))
    }

    fn add(least: &mut (M::Score, PackedKey), added: &[Ranked<M>]) {
        if let Some((score, key)) = added.iter().map(Ranked::rank).min() {
            if (score, key) < (least.0, &least.1) {
                *least = (score, key.clone());
            }
        }
    }

    /// Keys are unique in a run: the least's key names its entry.
    fn keeps(least: &(M::Score, PackedKey), removed: &[Ranked<M>]) -> bool {
        removed.iter().all(|r| r.smallest != least.1)
    }
}

/// One run's files in key order with their scores; each block knows its
/// least (see [`crate::view::blocks`]), so the least of the run is a scan of the
/// blocks, and a change is one splice.
#[derive(Debug)]
struct Ranking<M: Measure> {
    key: Key,
    shape: (usize, u64),
    by_key: Blocks<Ranked<M>>,
}

impl<M: Measure> Ranking<M> {
    fn build(levels: &[LevelView], key: Key, run: &RunView, work: &AtomicU64) -> Ranking<M> {
        let mut r = Ranking {
            key,
            shape: shape(levels, key, run),
            by_key: Blocks::default(),
        };
        let spans: Vec<Span<'_>> = run.files.spans().collect();
        r.rank(levels, &spans);
        work.fetch_add(run.files.len() as u64, AtomicOrdering::Relaxed);
        r
    }

    /// Ranks `spans`, files of the run in key order, none of them ranked
    /// yet: they go in at the place of the first, in one splice.
    fn rank(&mut self, levels: &[LevelView], spans: &[Span<'_>]) {
        let Some(&(first, _, _)) = spans.first() else {
            return;
        };
        let overlaps = overlaps(levels, self.key.target, self.key.below, spans);
        let ranked = spans
            .iter()
            .zip(overlaps)
            .map(|(&(lo, hi, size), overlap)| Ranked {
                smallest: lo.clone(),
                largest: hi.clone(),
                size,
                score: M::score(overlap, size),
            })
            .collect();
        let at = self.by_key.partition_point(|k| k < first);
        self.by_key.insert(at, ranked);
    }

    /// Where the ranked files intersecting `[lo, hi]` are, as a range of
    /// positions (the files are disjoint: walking down from `hi`, the first
    /// one ending below `lo` ends the walk).
    fn intersecting(&self, lo: &PackedKey, hi: &PackedKey) -> (Pos, Pos) {
        let to = self.by_key.partition_point(|k| k <= hi);
        let n = self
            .by_key
            .range(self.by_key.start(), to)
            .rev()
            .take_while(|r| r.largest >= *lo)
            .count();
        (self.by_key.back(to, n), to)
    }

    /// The run's files in `[lo, hi]` changed: drop what was ranked there and
    /// rank what is there now.
    fn refresh(
        &mut self,
        levels: &[LevelView],
        run: &RunView,
        lo: &PackedKey,
        hi: &PackedKey,
    ) -> u64 {
        let (from, to) = self.intersecting(lo, hi);
        let stale = self.by_key.remove(from, to);
        let fresh: Vec<Span<'_>> = run.files.spans_overlapping(lo, hi).collect();
        self.rank(levels, &fresh);
        (stale + fresh.len()) as u64
    }

    /// The target level changed in `[lo, hi]`: rescore the files over it.
    fn rescore(&mut self, levels: &[LevelView], lo: &PackedKey, hi: &PackedKey) -> u64 {
        let (from, to) = self.intersecting(lo, hi);
        let spans: Vec<Span<'_>> = self
            .by_key
            .range(from, to)
            .map(|r| (&r.smallest, &r.largest, r.size))
            .collect();
        let touched = spans.len();
        let mut overlaps = overlaps(levels, self.key.target, self.key.below, &spans).into_iter();
        self.by_key.edit(from, to, |r| {
            r.score = M::score(overlaps.next().unwrap_or_default(), r.size);
        });
        touched as u64
    }

    /// The ranked files in order of score, ties in key order, given the
    /// block holding the least ([`Blocks::least_block`]). After the first,
    /// each block's least goes into a heap, and a block's next is found by
    /// a scan of the block when its last one is taken.
    fn in_order(&self, first: Option<usize>) -> impl Iterator<Item = &Ranked<M>> {
        let blocks = self.by_key.blocks();
        // A block's entries are in key order: a search for the key (and a
        // step over any equal keys, in a run that holds overlapping files).
        let entry = |b: usize, rank: (M::Score, &PackedKey)| {
            let entries = blocks.get(b)?.entries();
            let at = entries.partition_point(|r| r.smallest < *rank.1);
            entries
                .get(at..)?
                .iter()
                .take_while(|r| r.smallest == *rank.1)
                .find(|r| r.rank() == rank)
        };
        let mut heap: Option<Heap<'_, M>> = None;
        let mut first = first;
        std::iter::from_fn(move || {
            if let Some(b) = first.take() {
                return entry(b, least(blocks.get(b)?)?);
            }
            let heap = heap.get_or_insert_with(|| {
                let mut heap: BinaryHeap<_> = blocks
                    .iter()
                    .enumerate()
                    .filter_map(|(b, block)| Some(Reverse((least(block)?, b))))
                    .collect();
                // The first is taken already.
                next_in_block(&mut heap, blocks);
                heap
            });
            let (taken, b) = next_in_block(heap, blocks)?;
            entry(b, taken)
        })
    }
}

/// The least rank of a block's entries: its summary, or (if a change
/// dropped it since the last [`Blocks::least_block`]) a scan of the block.
fn least<M: Measure>(block: &Block<Ranked<M>>) -> Option<(M::Score, &PackedKey)> {
    match block.summary() {
        Some((score, key)) => Some((*score, key)),
        None => block.entries().iter().map(Ranked::rank).min(),
    }
}

/// Ranks (each block's least not yet taken) and their blocks, least first.
type Heap<'a, M> = BinaryHeap<Reverse<((<M as Measure>::Score, &'a PackedKey), usize)>>;

/// Pops the least rank off `heap` (each block's least not yet taken) and
/// pushes the next of its block.
fn next_in_block<'a, M: Measure>(
    heap: &mut Heap<'a, M>,
    blocks: &'a [Block<Ranked<M>>],
) -> Option<((M::Score, &'a PackedKey), usize)> {
    let Reverse((taken, b)) = heap.pop()?;
    if let Some(next) = blocks
        .get(b)?
        .entries()
        .iter()
        .map(Ranked::rank)
        .filter(|r| *r > taken)
        .min()
    {
        heap.push(Reverse((next, b)));
    }
    Some((taken, b))
}

/// Per-run least-overlap rankings of a [`TreeView`]; see the module docs.
#[derive(Debug, Default)]
pub struct OverlapIndex {
    per_byte: Mutex<Vec<Ranking<BytesPerByte>>>,
    fewest: Mutex<Vec<Ranking<FilesThenBytes>>>,
    /// Files ranked, rescored or visited so far (for tests that bound it).
    work: AtomicU64,
}

impl Clone for OverlapIndex {
    /// A copy starts empty: the copy may be edited without notices.
    fn clone(&self) -> Self {
        OverlapIndex::default()
    }
}

impl OverlapIndex {
    fn lock<M: Measure>(&self) -> MutexGuard<'_, Vec<Ranking<M>>> {
        // A panic while ranking leaves at worst a stale ranking, which the
        // shape check or the caller's own checks catch.
        M::rankings(self).lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TreeView {
    /// Bytes of level `level` (each run keeps its total).
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.level(level).bytes()
    }

    /// Offers the idle files of `run` (a run of `level`) to `accept` in
    /// order of least overlap with `target`'s runs (`below`) per byte, ties
    /// in key order, and returns the first thing it accepts. `accept` must
    /// not call this again (the ranking is locked meanwhile).
    pub fn by_least_overlap<'v, T>(
        &'v self,
        level: usize,
        run: &'v RunView,
        target: usize,
        below: Below,
        accept: impl FnMut(&'v FileView) -> Option<T>,
    ) -> Option<T> {
        self.offer::<BytesPerByte, T>(level, run, target, below, accept)
    }

    /// As [`TreeView::by_least_overlap`], in order of the fewest files of
    /// `target`'s runs (`below`) overlapping, then the fewest bytes, then
    /// key order.
    pub fn by_fewest_overlapping<'v, T>(
        &'v self,
        level: usize,
        run: &'v RunView,
        target: usize,
        below: Below,
        accept: impl FnMut(&'v FileView) -> Option<T>,
    ) -> Option<T> {
        self.offer::<FilesThenBytes, T>(level, run, target, below, accept)
    }

    /// Offers the idle files of `run` to `accept` in the order `M` ranks
    /// them against `target`'s runs (`below`).
    fn offer<'v, M: Measure, T>(
        &'v self,
        level: usize,
        run: &'v RunView,
        target: usize,
        below: Below,
        mut accept: impl FnMut(&'v FileView) -> Option<T>,
    ) -> Option<T> {
        // A run a running merge holds whole (level 1 under a merge from
        // level 0, whose flushes span every key) has nothing to offer: no
        // walk through its ranking.
        if run.files.busy() == run.files.len() {
            return None;
        }
        let key = Key {
            level,
            run: run.id,
            target,
            below,
        };
        let index = &self.index;
        let mut rankings = index.lock::<M>();
        let at = match rankings.iter().position(|r| r.key == key) {
            Some(i) if rankings[i].shape == shape(&self.levels, key, run) => i,
            Some(i) => {
                rankings[i] = Ranking::build(&self.levels, key, run, &index.work);
                i
            }
            None => {
                rankings.push(Ranking::build(&self.levels, key, run, &index.work));
                rankings.len() - 1
            }
        };
        let mut visited = 0;
        let mut found = None;
        let first = rankings[at].by_key.least_block();
        for ranked in rankings[at].in_order(first) {
            visited += 1;
            let Some(f) = run.files.at_packed(&ranked.smallest).filter(|f| !f.busy) else {
                continue;
            };
            if let Some(t) = accept(f) {
                found = Some(t);
                break;
            }
        }
        index.work.fetch_add(visited, AtomicOrdering::Relaxed);
        found
    }

    /// Tells the view's index that files of `level` within `[lo, hi]` were
    /// added or removed. [`crate::plan::apply`] calls it; so must anything
    /// else that edits `levels` in place between picks.
    pub fn changed(&self, level: usize, lo: &[u8], hi: &[u8]) {
        let (lo, hi) = (&PackedKey::new(lo), &PackedKey::new(hi));
        self.changed_in::<BytesPerByte>(level, lo, hi);
        self.changed_in::<FilesThenBytes>(level, lo, hi);
    }

    /// [`TreeView::changed`] for the rankings by `M`.
    fn changed_in<M: Measure>(&self, level: usize, lo: &PackedKey, hi: &PackedKey) {
        let index = &self.index;
        let mut rankings = index.lock::<M>();
        let levels = &self.levels;
        rankings.retain_mut(|r| {
            let Some(run) = levels
                .get(r.key.level)
                .and_then(|l| l.runs.iter().find(|run| run.id == r.key.run))
            else {
                return false;
            };
            let work = if r.key.level == level {
                r.refresh(levels, run, lo, hi)
            } else if r.key.target == level {
                r.rescore(levels, lo, hi)
            } else {
                0
            };
            index.work.fetch_add(work, AtomicOrdering::Relaxed);
            r.shape = shape(levels, r.key, run);
            true
        });
    }

    /// Files the overlap index has ranked, rescored or visited in
    /// this view so far: a measure of picking work that tests bound.
    pub fn overlap_work(&self) -> u64 {
        self.index.work.load(AtomicOrdering::Relaxed)
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::view::notation::file;
    use crate::work::searches;

    fn run(id: u64, files: Vec<FileView>) -> LevelView {
        LevelView {
            runs: vec![RunView {
                id,
                order: id,
                files: files.into(),
            }]
            .into(),
        }
    }

    /// Level 1: `n` files of 100 keys (ids 1 to `n`), the `k`th of
    /// `upper(k)` bytes; level 2: ten files of ten keys under each, the
    /// `j`th of `lower(j)` bytes (sizes varied so that scores differ).
    fn two_levels(n: u64, upper: impl Fn(u64) -> u64, lower: impl Fn(u64) -> u64) -> TreeView {
        let upper = (0..n)
            .map(|k| {
                file(&format!(
                    "{}[{}-{}]={}",
                    k + 1,
                    100 * k,
                    100 * k + 99,
                    upper(k)
                ))
            })
            .collect();
        let lower = (0..10 * n)
            .map(|j| {
                file(&format!(
                    "{}[{}-{}]={}",
                    100_000 + j,
                    10 * j,
                    10 * j + 9,
                    lower(j)
                ))
            })
            .collect();
        TreeView {
            levels: vec![LevelView::default(), run(1, upper), run(2, lower)],
            ..TreeView::default()
        }
    }

    /// The least-overlap file by brute force: every file scored against
    /// every file of the level below, ties in key order.
    fn scan(view: &TreeView) -> Option<u64> {
        let below = &view.levels[2].runs[0].files;
        let mut best: Option<(f64, u64)> = None;
        for f in &view.levels[1].runs[0].files {
            let bytes: u64 = below
                .iter()
                .filter(|o| o.overlaps(&f.smallest, &f.largest))
                .map(|o| o.size)
                .sum();
            let score = bytes as f64 / f.size as f64;
            if best.is_none_or(|(b, _)| score < b) {
                best = Some((score, f.id));
            }
        }
        best.map(|(_, id)| id)
    }

    /// Ranking a run scores all its files in one walk over the level below
    /// (a search per file made ranking a merge's outputs cost a B-tree
    /// descent each), and so does re-ranking after a change; the pick is
    /// the brute-force one throughout.
    #[test]
    fn ranking_walks_the_level_below_once() {
        for n in [10u64, 200] {
            let mut view = two_levels(n, |k| 1 + k % 3, |j| 1 + j * 7 % 5);
            let pick = |view: &TreeView| {
                let run = &view.levels[1].runs[0];
                view.by_least_overlap(1, run, 2, Below::Newest, |f| Some(f.id))
            };
            let before = searches();
            assert_eq!(pick(&view), scan(&view));
            let spent = searches() - before;
            assert!(spent <= 8, "{n} files ranked with {spent} searches");
            assert_eq!(view.overlap_work(), n + 1, "n ranked, one offered");

            // Every level-1 file is replaced by one of another size: the
            // whole run is re-ranked at once.
            let run = &mut view.levels[1].runs[0];
            for k in 0..n {
                run.files.update(k + 1, |f| f.size = 1 + (k * 5) % 7);
            }
            let before = searches();
            view.changed(1, &0u64.to_be_bytes(), &(100 * n).to_be_bytes());
            assert_eq!(pick(&view), scan(&view));
            let spent = searches() - before;
            assert!(spent <= 8, "{n} files re-ranked with {spent} searches");
        }
    }

    /// A policy that refuses files (busy ones) is offered the rest in
    /// order of score, ties in key order, across blocks: the order a sort
    /// of every file by (score, key) gives.
    #[test]
    fn refused_files_give_way_in_score_order() {
        // 1,000 files over several blocks; scores repeat, so ties count.
        let view = two_levels(1000, |k| 1 + k * 7 % 4, |j| 1 + j * 13 % 3);
        let below = &view.levels[2].runs[0].files;
        let mut expected: Vec<(f64, crate::InlineKey, u64)> = view.levels[1].runs[0]
            .files
            .iter()
            .map(|f| {
                let bytes: u64 = below
                    .iter()
                    .filter(|o| o.overlaps(&f.smallest, &f.largest))
                    .map(|o| o.size)
                    .sum();
                (bytes as f64 / f.size as f64, f.smallest.clone(), f.id)
            })
            .collect();
        expected.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let expected: Vec<u64> = expected.into_iter().map(|(_, _, id)| id).collect();
        let run = &view.levels[1].runs[0];
        let mut offered = Vec::new();
        let taken = view.by_least_overlap(1, run, 2, Below::Newest, |f| {
            offered.push(f.id);
            (offered.len() == 300).then_some(f.id)
        });
        assert_eq!(taken, Some(expected[299]));
        assert_eq!(offered, expected[..300]);
        // Refusing everything offers every file once.
        let mut all = Vec::new();
        let none = view.by_least_overlap(1, run, 2, Below::Newest, |f| {
            all.push(f.id);
            None::<u64>
        });
        assert!(none.is_none());
        assert_eq!(all, expected);
    }

    /// Busy files are never offered, and a run a merge holds whole is
    /// passed over without a walk through its ranking (asynchronous
    /// merges: level 1 under a merge from level 0 walked all of its files
    /// at every pick).
    #[test]
    fn busy_files_are_not_offered() {
        let n = 600u64;
        let mut view = two_levels(n, |k| 1 + k * 7 % 4, |j| 1 + j * 13 % 3);
        let offered = |view: &TreeView| {
            let run = &view.levels[1].runs[0];
            let mut all = Vec::new();
            view.by_least_overlap(1, run, 2, Below::Newest, |f| {
                all.push(f.id);
                None::<u64>
            });
            all
        };
        let before = offered(&view);
        assert_eq!(before.len() as u64, n);
        // Every third file is busy: the rest come in the same order.
        for id in (1..=n).filter(|id| id % 3 == 0) {
            view.levels[1].runs[0].files.update(id, |f| f.busy = true);
        }
        let idle: Vec<u64> = before.iter().copied().filter(|id| id % 3 != 0).collect();
        assert_eq!(offered(&view), idle);
        // All busy: nothing offered, nothing walked.
        for id in 1..=n {
            view.levels[1].runs[0].files.update(id, |f| f.busy = true);
        }
        let work = view.overlap_work();
        assert!(offered(&view).is_empty());
        assert_eq!(view.overlap_work(), work);
    }
}
