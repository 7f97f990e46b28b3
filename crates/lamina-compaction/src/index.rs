//! Least-overlap picking without visiting every file.
//!
//! Leveling and the `lo1`/`lo2` movement policies push the file of a run
//! whose key range overlaps the fewest bytes of a deeper level per byte of
//! its own. Scoring every file at every pick made a simulation quadratic in
//! its flushes (a level holds a growing number of files, and about one file
//! is pushed out of it per flush). An [`OverlapIndex`] keeps each queried
//! run's files ordered by that score and is told by [`crate::plan::apply`]
//! (and whoever else edits a [`TreeView`]) which key ranges of which level
//! changed, so a pick costs a lookup plus the files a change touched.
//!
//! The index lives in the view it ranks: a fresh view (the engine builds
//! one per pick) starts empty and ranks a run on first use, at the cost of
//! the old scan; a view edited in place by `apply` (the simulator's model
//! tree) keeps it up to date. A ranking whose run or target level changed
//! shape without a notice is rebuilt, so a forgotten notice costs time, not
//! correctness; busy flags are read live at each pick.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Mutex, MutexGuard};

use crate::files::{PackedKey, Span};
use crate::{FileView, LevelView, RunView, TreeView};

/// Which runs of the target level a file's overlap counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Below {
    /// Only the newest run (leveling keeps one run per level).
    Newest,
    /// Every run of the level.
    All,
}

/// A file's overlapping bytes in the target level per byte of its own; ties
/// go to the file with the smaller keys.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Score(f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
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

/// Bytes of `target`'s runs (by `below`) overlapping each of `spans`, files
/// of one run in key order: one walk over each target run's files under
/// the spans, not a search per file. A merge hands the index its outputs
/// at once, and a search of a large run costs a B-tree descent each (the
/// bulk of ranking a merge's outputs when they were scored one by one).
fn overlaps(levels: &[LevelView], target: usize, below: Below, spans: &[Span<'_>]) -> Vec<u64> {
    let mut sums = vec![0u64; spans.len()];
    let Some(lo) = spans.first().map(|s| s.0) else {
        return sums;
    };
    let Some(hi) = spans.iter().map(|s| s.1).max() else {
        return sums;
    };
    for run in target_runs(levels, target, below) {
        let under: Vec<Span<'_>> = run
            .files
            .spans_overlapping(lo.clone(), hi.clone())
            .collect();
        // The spans start in key order, so the target files ending before
        // one span's start end before every later span's.
        let mut start = 0;
        for (sum, &(lo, hi, _)) in sums.iter_mut().zip(spans) {
            while under.get(start).is_some_and(|u| u.1 < lo) {
                start += 1;
            }
            *sum += under[start..]
                .iter()
                .take_while(|u| u.0 <= hi)
                .filter(|u| u.1 >= lo)
                .map(|u| u.2)
                .sum::<u64>();
        }
    }
    sums
}

/// The least-overlap score of a file with `size` bytes overlapping
/// `overlap` bytes of the target level: overlapping bytes per byte.
fn score(overlap: u64, size: u64) -> Score {
    Score(overlap as f64 / size.max(1) as f64)
}

/// The least-overlap score of `f`: overlapping bytes per byte of `f`.
pub(crate) fn overlap_score(
    levels: &[LevelView],
    target: usize,
    below: Below,
    f: &FileView,
) -> f64 {
    let (lo, hi) = (PackedKey::new(&f.smallest), PackedKey::new(&f.largest));
    let overlap = overlaps(levels, target, below, &[(&lo, &hi, f.size)]);
    score(overlap.iter().sum(), f.size).0
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

/// One run's files ordered by score.
#[derive(Debug)]
struct Ranking {
    key: Key,
    shape: (usize, u64),
    /// Smallest key → (largest key, size, score).
    by_key: BTreeMap<PackedKey, (PackedKey, u64, Score)>,
    by_score: BTreeSet<(Score, PackedKey)>,
}

impl Ranking {
    fn build(levels: &[LevelView], key: Key, run: &RunView, work: &AtomicU64) -> Ranking {
        let mut r = Ranking {
            key,
            shape: shape(levels, key, run),
            by_key: BTreeMap::new(),
            by_score: BTreeSet::new(),
        };
        let spans: Vec<Span<'_>> = run.files.spans().collect();
        r.rank(levels, &spans);
        work.fetch_add(run.files.len() as u64, AtomicOrdering::Relaxed);
        r
    }

    /// Ranks `spans`, files of the run in key order.
    fn rank(&mut self, levels: &[LevelView], spans: &[Span<'_>]) {
        let overlaps = overlaps(levels, self.key.target, self.key.below, spans);
        for (&(lo, hi, size), overlap) in spans.iter().zip(overlaps) {
            let score = score(overlap, size);
            self.by_score.insert((score, lo.clone()));
            self.by_key.insert(lo.clone(), (hi.clone(), size, score));
        }
    }

    /// The ranked files intersecting `[lo, hi]` as (smallest, largest,
    /// size), in key order (the files are disjoint: walking down from `hi`,
    /// the first one ending below `lo` ends the walk).
    fn intersecting(&self, lo: &PackedKey, hi: &PackedKey) -> Vec<(PackedKey, PackedKey, u64)> {
        let mut found: Vec<(PackedKey, PackedKey, u64)> = self
            .by_key
            .range((Bound::Unbounded, Bound::Included(hi)))
            .rev()
            .take_while(|(_, (largest, _, _))| largest >= lo)
            .map(|(smallest, (largest, size, _))| (smallest.clone(), largest.clone(), *size))
            .collect();
        found.reverse();
        found
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
        let stale = self.intersecting(lo, hi);
        for (smallest, _, _) in &stale {
            if let Some((_, _, score)) = self.by_key.remove(smallest) {
                self.by_score.remove(&(score, smallest.clone()));
            }
        }
        let fresh: Vec<Span<'_>> = run
            .files
            .spans_overlapping(lo.clone(), hi.clone())
            .collect();
        self.rank(levels, &fresh);
        (stale.len() + fresh.len()) as u64
    }

    /// The target level changed in `[lo, hi]`: rescore the files over it.
    fn rescore(&mut self, levels: &[LevelView], lo: &PackedKey, hi: &PackedKey) -> u64 {
        let touched = self.intersecting(lo, hi);
        let spans: Vec<Span<'_>> = touched.iter().map(|(l, h, size)| (l, h, *size)).collect();
        let overlaps = overlaps(levels, self.key.target, self.key.below, &spans);
        for (&(smallest, _, size), overlap) in spans.iter().zip(overlaps) {
            let Some(entry) = self.by_key.get_mut(smallest) else {
                continue;
            };
            let score = score(overlap, size);
            self.by_score.remove(&(entry.2, smallest.clone()));
            self.by_score.insert((score, smallest.clone()));
            entry.2 = score;
        }
        touched.len() as u64
    }
}

/// Per-run least-overlap rankings of a [`TreeView`]; see the module docs.
#[derive(Debug, Default)]
pub struct OverlapIndex {
    rankings: Mutex<Vec<Ranking>>,
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
    fn lock(&self) -> MutexGuard<'_, Vec<Ranking>> {
        // A panic while ranking leaves at worst a stale ranking, which the
        // shape check or the caller's own checks catch.
        self.rankings.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TreeView {
    /// Bytes of level `level` (each run keeps its total).
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.level(level).bytes()
    }

    /// Offers the files of `run` (a run of `level`) to `accept` in order of
    /// least overlap with `target`'s runs (`below`) per byte, ties in key
    /// order, and returns the first thing it accepts. `accept` must not
    /// call this again (the ranking is locked meanwhile).
    pub fn by_least_overlap<'v, T>(
        &'v self,
        level: usize,
        run: &'v RunView,
        target: usize,
        below: Below,
        mut accept: impl FnMut(&'v FileView) -> Option<T>,
    ) -> Option<T> {
        let key = Key {
            level,
            run: run.id,
            target,
            below,
        };
        let index = &self.index;
        let mut rankings = index.lock();
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
        for (_, smallest) in &rankings[at].by_score {
            visited += 1;
            let Some(f) = run.files.at_packed(smallest) else {
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
        let index = &self.index;
        let mut rankings = index.lock();
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

    /// Files the least-overlap index has ranked, rescored or visited in
    /// this view so far: a measure of picking work that tests bound.
    pub fn overlap_work(&self) -> u64 {
        self.index.work.load(AtomicOrdering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::files::searches;

    fn file(id: u64, lo: u64, hi: u64, size: u64) -> FileView {
        FileView {
            id,
            size,
            smallest: lo.to_be_bytes().to_vec(),
            largest: hi.to_be_bytes().to_vec(),
            ..FileView::default()
        }
    }

    fn run(id: u64, files: Vec<FileView>) -> LevelView {
        LevelView {
            runs: vec![RunView {
                id,
                order: id,
                files: files.into(),
            }],
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
            // Level 1: n files of 100 keys; level 2: ten files under each,
            // sizes varied so that scores differ.
            let upper = (0..n)
                .map(|k| file(k + 1, 100 * k, 100 * k + 99, 1 + k % 3))
                .collect();
            let lower = (0..10 * n)
                .map(|j| file(10_000 + j, 10 * j, 10 * j + 9, 1 + j * 7 % 5))
                .collect();
            let mut view = TreeView {
                levels: vec![LevelView::default(), run(1, upper), run(2, lower)],
                ..TreeView::default()
            };
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
}
