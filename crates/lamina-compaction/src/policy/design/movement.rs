//! Data movement policies: *which* files a partial compaction moves (seed
//! 001 §3.1, "data movement policy", also called file picking). A policy
//! ranks candidate files of one level best first, or declines (`None`) so
//! that the next policy of a prioritized list decides (TSD and TSA fall back
//! to least overlap).

use std::collections::HashSet;
use std::str::FromStr;

use super::trigger::{tombstone_density, tombstone_expired};
use super::LevelCtx;
use crate::error::{Error, Result};
use crate::view::index::Below;
use crate::{FileView, InlineKey};

/// One file-picking policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Movement {
    /// A per-level cursor over the key space: the first file after the
    /// largest key the level's previous compaction wrote into the level
    /// below, wrapping around.
    RoundRobin,
    /// Least overlapping bytes with the parent level (`i + 1`) per byte.
    LeastOverlapParent,
    /// Least overlapping bytes with the grandparent level (`i + 2`) per
    /// byte; declines when there is no grandparent level.
    LeastOverlapGrandparent,
    /// Least recently read by a point lookup; no opinion if every
    /// candidate was last read at the same time (never, say).
    Coldest,
    /// Oldest data (smallest sequence number); no opinion if every
    /// candidate's oldest data is equally old.
    Oldest,
    /// Highest tombstone density, among files above this density.
    TombstoneDensity(f64),
    /// Oldest overdue tombstone, among files whose tombstone TTL (from this
    /// persistence threshold, ms) has expired in their level.
    ExpiredTombstones(u64),
}

/// `f`'s least-overlap score against level `level` (every run of it).
fn overlap_score(ctx: &LevelCtx<'_>, level: usize, f: &FileView) -> f64 {
    crate::view::index::overlap_score(&ctx.view.levels, level, Below::All, f)
}

/// The largest key the last compaction out of `ctx.level` wrote into the
/// level below: the largest key among that level's most recently arrived
/// files. `None` before any such compaction. Each run keeps its newest
/// arrival ([`crate::view::files::Files::newest_arrival`]): no file is read.
fn round_robin_cursor<'v>(ctx: &LevelCtx<'v>) -> Option<&'v InlineKey> {
    ctx.view
        .level(ctx.level + 1)
        .runs
        .iter()
        .filter_map(|r| r.files.newest_arrival())
        .max()
        .map(|(_, key)| key)
}

fn ranked_by<'a, K: PartialOrd>(
    candidates: &[&'a FileView],
    key: impl Fn(&FileView) -> K,
) -> Vec<&'a FileView> {
    let mut v = candidates.to_vec();
    // Stable: ties keep key order.
    v.sort_by(|a, b| {
        key(a)
            .partial_cmp(&key(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    v
}

/// [`ranked_by`] `key`, or no opinion if every candidate has the same key:
/// a level never read (every last read 0), or one whose every file holds
/// the oldest data (in the simulator's uniform model, every file of a
/// level holds some of the first flushes) gives nothing to choose by, and
/// ranking it in key order would push a level's first file every time
/// (in the simulator, write amplification 5,004 after 10^4 flushes).
fn told_apart<'a, K: PartialOrd>(
    candidates: &[&'a FileView],
    key: impl Fn(&FileView) -> K,
) -> Option<Vec<&'a FileView>> {
    let first = key(candidates.first()?);
    candidates
        .iter()
        .any(|f| key(f) != first)
        .then(|| ranked_by(candidates, key))
}

impl Movement {
    /// Ranks `candidates` (files of one run of `ctx.level`, in key order)
    /// best first; `None` if this policy has no opinion.
    pub fn rank<'a>(
        &self,
        ctx: &LevelCtx<'_>,
        candidates: &[&'a FileView],
    ) -> Option<Vec<&'a FileView>> {
        if candidates.is_empty() {
            return None;
        }
        let ranked = match *self {
            Movement::RoundRobin => {
                let start = round_robin_cursor(ctx).map_or(0, |cursor| {
                    candidates
                        .iter()
                        .position(|f| f.smallest > *cursor)
                        .unwrap_or(0)
                });
                candidates[start..]
                    .iter()
                    .chain(&candidates[..start])
                    .copied()
                    .collect()
            }
            Movement::LeastOverlapParent | Movement::LeastOverlapGrandparent => {
                let target = self.overlap_target(ctx)?;
                ranked_by(candidates, |f| overlap_score(ctx, target, f))
            }
            Movement::Coldest => told_apart(candidates, |f| f.last_read_ms)?,
            Movement::Oldest => told_apart(candidates, |f| f.smallest_seq)?,
            Movement::TombstoneDensity(threshold) => {
                let dense: Vec<&FileView> = candidates
                    .iter()
                    .copied()
                    .filter(|f| f.tombstones > 0 && tombstone_density(f) > threshold)
                    .collect();
                ranked_by(&dense, |f| -tombstone_density(f))
            }
            Movement::ExpiredTombstones(threshold_ms) => {
                let expired: Vec<&FileView> = candidates
                    .iter()
                    .copied()
                    .filter(|f| tombstone_expired(f, threshold_ms, ctx))
                    .collect();
                ranked_by(&expired, |f| f.oldest_tombstone_ms.unwrap_or(u64::MAX))
            }
        };
        (!ranked.is_empty()).then_some(ranked)
    }
}

impl Movement {
    /// True for the least-overlap policies.
    fn is_least_overlap(&self) -> bool {
        matches!(
            self,
            Movement::LeastOverlapParent | Movement::LeastOverlapGrandparent
        )
    }

    /// True for the policies that rank only files holding tombstones.
    fn reads_tombstones(&self) -> bool {
        matches!(
            self,
            Movement::TombstoneDensity(_) | Movement::ExpiredTombstones(_)
        )
    }

    /// The level whose overlap a least-overlap policy counts; `None` for
    /// other policies, and for `lo2` without a grandparent level.
    fn overlap_target(&self, ctx: &LevelCtx<'_>) -> Option<usize> {
        match self {
            Movement::LeastOverlapParent => Some(ctx.level + 1),
            Movement::LeastOverlapGrandparent => {
                (!ctx.view.level(ctx.level + 2).runs.is_empty()).then_some(ctx.level + 2)
            }
            _ => None,
        }
    }
}

/// Offers `candidates` (files of `run`, in key order; `None`: every idle
/// file of `run`) to `accept` in the order [`rank_with`] ranks them, and
/// returns the first thing it accepts. Least-overlap policies take their
/// order from the view's index (see [`crate::view::index`]) instead of scoring
/// every candidate, so with `None` they visit no more of the run than they
/// offer; the other policies rank every candidate.
pub fn find_ranked<'a, T>(
    policies: &[Movement],
    ctx: &LevelCtx<'a>,
    run: &'a crate::RunView,
    candidates: Option<&[&'a FileView]>,
    mut accept: impl FnMut(&'a FileView) -> Option<T>,
) -> Option<T> {
    if candidates.map_or(run.files.is_empty(), <[_]>::is_empty) {
        return None;
    }
    let idle = std::cell::OnceCell::new();
    let listed = || {
        candidates.unwrap_or_else(|| {
            idle.get_or_init(|| run.files.iter().filter(|f| !f.busy).collect::<Vec<_>>())
        })
    };
    for m in policies {
        // The tombstone policies pass over a run without tombstones
        // without listing its files.
        if m.reads_tombstones() && run.files.tombstones() == 0 {
            continue;
        }
        if let Some(target) = m.overlap_target(ctx) {
            let ids: Option<HashSet<u64>> = candidates.map(|c| c.iter().map(|f| f.id).collect());
            return ctx
                .view
                .by_least_overlap(ctx.level, run, target, Below::All, |f| {
                    let offered = ids.as_ref().map_or(!f.busy, |ids| ids.contains(&f.id));
                    offered.then(|| accept(f)).flatten()
                });
        }
        // A least-overlap policy without its target level (`lo2` above
        // the last level) has no opinion: no need to list the files.
        if m.is_least_overlap() {
            continue;
        }
        // Round robin over every idle file: from the cursor on, without
        // listing the files.
        if *m == Movement::RoundRobin && candidates.is_none() {
            let cursor = round_robin_cursor(ctx).map(|k| k.as_slice());
            return run
                .files
                .wrapping_after(cursor)
                .filter(|f| !f.busy)
                .find_map(accept);
        }
        // Coldest and oldest have no opinion on a run whose files all tie
        // (the run keeps its extremes); with no file busy, every idle file
        // ties too.
        let ties = || match m {
            Movement::Coldest => run.files.reads_tie(),
            Movement::Oldest => run.files.seqs_tie(),
            _ => false,
        };
        // (Unless the run keeps its files by age already: then a file
        // leaving takes no rescan of the run to learn its oldest.)
        let by_age = *m == Movement::Oldest && candidates.is_none();
        if candidates.is_none()
            && run.files.busy() == 0
            && !(by_age && run.files.keeps_ages())
            && ties()
        {
            continue;
        }
        // Oldest over every idle file: in the order the run keeps, without
        // ranking the files (with sequential keys no two files tie, and a
        // sort of the level at each pick made a simulation quadratic).
        if by_age {
            let oldest = run.files.by_age().filter(|f| !f.busy);
            let newest = oldest.clone().next_back().map(|f| f.smallest_seq);
            let mut oldest = oldest.peekable();
            // No opinion if every idle file ties (or none is idle).
            if oldest.peek().map(|f| f.smallest_seq) == newest {
                continue;
            }
            return oldest.find_map(accept);
        }
        if let Some(ranked) = m.rank(ctx, listed()) {
            return ranked.into_iter().find_map(accept);
        }
    }
    // Key order, offered file by file: a policy usually takes the first.
    match candidates {
        Some(c) => c.iter().copied().find_map(accept),
        None => run.files.iter().filter(|f| !f.busy).find_map(accept),
    }
}

/// Ranks with the first policy of `policies` that has an opinion; key
/// order if none does (or the list is empty).
pub fn rank_with<'a>(
    policies: &[Movement],
    ctx: &LevelCtx<'_>,
    candidates: &[&'a FileView],
) -> Vec<&'a FileView> {
    policies
        .iter()
        .find_map(|m| m.rank(ctx, candidates))
        .unwrap_or_else(|| candidates.to_vec())
}

impl FromStr for Movement {
    type Err = Error;

    /// `rr`, `lo1`, `lo2`, `cold`, `old`, `tsd:X`, `tsa:MS`.
    fn from_str(s: &str) -> Result<Self> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        let num = || super::spec_number("movement", name, arg, "a number", false);
        Ok(match name.trim() {
            "rr" => Movement::RoundRobin,
            "lo1" => Movement::LeastOverlapParent,
            "lo2" => Movement::LeastOverlapGrandparent,
            "cold" => Movement::Coldest,
            "old" => Movement::Oldest,
            "tsd" => Movement::TombstoneDensity(num()?),
            "tsa" => Movement::ExpiredTombstones(num()? as u64),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown data movement policy {other:?} (known: rr, lo1, lo2, cold, old, \
                     tsd:X, tsa:MS)"
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::design::testutil::{ctx_of, file, level_of, view_of};
    use crate::TreeView;

    fn ids(v: &[&FileView]) -> Vec<u64> {
        v.iter().map(|f| f.id).collect()
    }

    fn three_levels() -> TreeView {
        view_of(
            vec![
                level_of(vec![vec![
                    file("1[0-9]=100"),
                    file("2[10-19]=100"),
                    file("3[20-29]=100"),
                ]]),
                // Parent: heavy under file 1, light under 2, nothing under 3.
                level_of(vec![vec![file("10[0-9]=900"), file("11[10-12]=50")]]),
                // Grandparent: heavy under 3, nothing under 2.
                level_of(vec![vec![file("20[0-5]=10"), file("21[20-29]=5000")]]),
            ],
            100,
        )
    }

    fn candidates(view: &TreeView) -> Vec<&FileView> {
        view.levels[0].runs[0].files.iter().collect()
    }

    #[test]
    fn least_overlap_with_parent_and_grandparent() {
        let view = three_levels();
        let ctx = ctx_of(&view, 0, 10, 100);
        let c = candidates(&view);
        let lo1 = Movement::LeastOverlapParent.rank(&ctx, &c).unwrap();
        assert_eq!(ids(&lo1), vec![3, 2, 1]);
        let lo2 = Movement::LeastOverlapGrandparent.rank(&ctx, &c).unwrap();
        assert_eq!(ids(&lo2), vec![2, 1, 3]);
        // From level 1 there is no grandparent: lo2 declines, lo1 decides.
        let ctx1 = ctx_of(&view, 1, 10, 100);
        let c1: Vec<&FileView> = view.levels[1].runs[0].files.iter().collect();
        assert!(Movement::LeastOverlapGrandparent.rank(&ctx1, &c1).is_none());
        let fallback = rank_with(
            &[
                Movement::LeastOverlapGrandparent,
                Movement::LeastOverlapParent,
            ],
            &ctx1,
            &c1,
        );
        assert_eq!(fallback.len(), 2);
    }

    #[test]
    fn coldest_and_oldest() {
        let mut view = three_levels();
        let run = &mut view.levels[0].runs[0];
        let files: Vec<u64> = run.files.iter().map(|f| f.id).collect();
        for (id, (read, seq)) in files.into_iter().zip([(50, 7), (10, 9), (30, 3)]) {
            run.files.update(id, |f| {
                f.last_read_ms = read;
                f.smallest_seq = seq;
            });
        }
        let ctx = ctx_of(&view, 0, 10, 100);
        let c = candidates(&view);
        assert_eq!(ids(&Movement::Coldest.rank(&ctx, &c).unwrap()), [2, 3, 1]);
        assert_eq!(ids(&Movement::Oldest.rank(&ctx, &c).unwrap()), [3, 1, 2]);
        // Nothing to tell apart: no opinion, and the next policy decides.
        let run = &mut view.levels[0].runs[0];
        for id in [1, 2, 3] {
            run.files.update(id, |f| {
                f.last_read_ms = 0;
                f.smallest_seq = 4;
            });
        }
        let ctx = ctx_of(&view, 0, 10, 100);
        let c = candidates(&view);
        assert!(Movement::Coldest.rank(&ctx, &c).is_none());
        assert!(Movement::Oldest.rank(&ctx, &c).is_none());
        let lo1 = ids(&rank_with(&[Movement::LeastOverlapParent], &ctx, &c));
        let old = [Movement::Oldest, Movement::LeastOverlapParent];
        assert_eq!(ids(&rank_with(&old, &ctx, &c)), lo1);
    }

    #[test]
    fn tombstone_policies_decline_without_qualifying_files() {
        let mut view = three_levels();
        view.now_ms = 100_000;
        let ctx = ctx_of(&view, 0, 10, 100);
        let c = candidates(&view);
        assert!(Movement::TombstoneDensity(0.1).rank(&ctx, &c).is_none());
        assert!(Movement::ExpiredTombstones(1000).rank(&ctx, &c).is_none());
        view.levels[0].runs[0].files.update(2, |f| {
            f.entries = 10;
            f.tombstones = 4;
            f.oldest_tombstone_ms = Some(1);
        });
        let ctx = ctx_of(&view, 0, 10, 100);
        let c = candidates(&view);
        assert_eq!(
            ids(&Movement::TombstoneDensity(0.1).rank(&ctx, &c).unwrap()),
            [2]
        );
        assert_eq!(
            ids(&Movement::ExpiredTombstones(1000).rank(&ctx, &c).unwrap()),
            [2]
        );
        assert_eq!(
            ids(&rank_with(
                &[
                    Movement::TombstoneDensity(0.5),
                    Movement::LeastOverlapParent
                ],
                &ctx,
                &c
            )),
            [3, 2, 1]
        );
    }

    /// The cursor follows the last compaction into the level below and
    /// cycles through the key space.
    #[test]
    fn round_robin_cycles_the_key_space() {
        let mut view = view_of(
            vec![
                level_of(vec![vec![
                    file("1[0-9]=100"),
                    file("2[10-19]=100"),
                    file("3[20-29]=100"),
                ]]),
                level_of(vec![]),
            ],
            100,
        );
        let mut picked = Vec::new();
        for step in 0..6u64 {
            let ctx = ctx_of(&view, 0, 10, 100);
            let c = candidates(&view);
            let first = Movement::RoundRobin.rank(&ctx, &c).unwrap()[0].clone();
            picked.push(first.id);
            // Model the compaction: the file arrives in level 1 now, and a
            // fresh file with the same range replaces it in level 0.
            let mut moved = first.clone();
            moved.id = 100 + step;
            moved.arrived_ms = step + 1;
            let below = &mut view.levels[1];
            if below.runs.is_empty() {
                below.runs = level_of(vec![vec![]]).runs;
            }
            let files = &mut below.runs[0].files;
            if let Some(old) = files.at(&moved.smallest).map(|f| f.id) {
                files.remove(old);
            }
            files.insert(moved);
        }
        assert_eq!(picked, [1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn movements_parse() {
        assert_eq!(
            "tsd:0.25".parse::<Movement>().unwrap(),
            Movement::TombstoneDensity(0.25)
        );
        assert_eq!("rr".parse::<Movement>().unwrap(), Movement::RoundRobin);
        assert!("tsd".parse::<Movement>().is_err());
        assert!("random".parse::<Movement>().is_err());
    }
}
