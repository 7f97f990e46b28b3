//! Triggers: *when* a level needs compaction (seed 001 §3.1, "compaction
//! trigger"). Each trigger looks at one level of a [`TreeView`](crate::TreeView) and either
//! stays silent or fires with a score (how urgent) and, for file-level
//! triggers, the files it marks.

use std::str::FromStr;

use super::LevelCtx;
use crate::error::{Error, Result};
use crate::FileView;

/// One compaction trigger.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// Level bytes above the level's capacity (`buffer × T^(i+1)`).
    Saturation,
    /// Level files above its capacity in files (capacity / output file size).
    SaturationFiles,
    /// The level holds at least this many sorted runs.
    Runs(usize),
    /// A file has stayed in its level longer than this (ms).
    Stale(u64),
    /// Whole-tree space amplification (bytes above the deepest level's,
    /// relative to it) above this; fires on every level above the deepest.
    SpaceAmp(f64),
    /// A file's tombstones / entries above this.
    TombstoneDensity(f64),
    /// A file's oldest tombstone is older than its level's share of this
    /// delete-persistence threshold (ms), as in Lethe.
    TombstoneAge(u64),
}

/// What a trigger reports when it fires.
#[derive(Debug, Clone, PartialEq)]
pub struct Fired {
    /// Urgency: larger is more urgent (>= 1 once the condition holds).
    pub score: f64,
    /// Files the trigger marks (file-level triggers); `None` = the level.
    pub marked: Option<Vec<u64>>,
}

/// Cumulative tombstone TTL of level `level` in a tree of `levels` levels:
/// Lethe splits the persistence threshold `threshold_ms` over the levels
/// geometrically (`d_i = d_0 · T^i`, `Σ d_i = threshold`), so a tombstone
/// older than `d_0 + … + d_level` is overdue in `level`. The deepest level's
/// cumulative TTL is the whole threshold.
pub fn tombstone_ttl_ms(threshold_ms: u64, size_ratio: u64, levels: usize, level: usize) -> u64 {
    let t = size_ratio.max(2) as f64;
    let levels = levels.max(1) as i32;
    let d0 = threshold_ms as f64 * (t - 1.0) / (t.powi(levels) - 1.0);
    let cumulative = d0 * (t.powi(level as i32 + 1) - 1.0) / (t - 1.0);
    cumulative.round().min(threshold_ms as f64) as u64
}

/// True if `f`'s oldest tombstone is overdue in its level.
pub fn tombstone_expired(f: &FileView, threshold_ms: u64, ctx: &LevelCtx<'_>) -> bool {
    let ttl = tombstone_ttl_ms(threshold_ms, ctx.size_ratio, ctx.deepest + 1, ctx.level);
    f.oldest_tombstone_ms
        .is_some_and(|t| ctx.view.now_ms.saturating_sub(t) > ttl)
}

/// Tombstones per entry of a file.
pub fn tombstone_density(f: &FileView) -> f64 {
    f.tombstones as f64 / f.entries.max(1) as f64
}

/// True if some file of the level holds a tombstone (read off the runs'
/// totals, not the files).
fn has_tombstones(ctx: &LevelCtx<'_>) -> bool {
    ctx.view
        .level(ctx.level)
        .runs
        .iter()
        .any(|r| r.files.tombstones() > 0)
}

fn marking(ctx: &LevelCtx<'_>, keep: impl Fn(&FileView) -> Option<f64>) -> Option<Fired> {
    let mut score = 0.0_f64;
    let marked: Vec<u64> = ctx
        .files()
        .filter(|f| !f.busy)
        .filter_map(|f| {
            let s = keep(f)?;
            score = score.max(s);
            Some(f.id)
        })
        .collect();
    (!marked.is_empty()).then_some(Fired {
        score,
        marked: Some(marked),
    })
}

impl Trigger {
    /// True for the triggers that bound a level's shape (its bytes, files
    /// or runs) rather than the age or content of its files.
    pub fn is_shape(&self) -> bool {
        matches!(
            self,
            Trigger::Saturation | Trigger::SaturationFiles | Trigger::Runs(_)
        )
    }

    /// Checks the trigger on the level of `ctx`.
    pub fn fire(&self, ctx: &LevelCtx<'_>) -> Option<Fired> {
        let level = ctx.view.level(ctx.level);
        let whole = |score: f64| {
            (score >= 1.0).then_some(Fired {
                score,
                marked: None,
            })
        };
        // File-marking triggers push files down; the deepest level has
        // nowhere to push them to.
        let above_deepest = ctx.level < ctx.deepest;
        match *self {
            Trigger::Saturation => {
                let bytes = ctx.view.level_bytes(ctx.level);
                // An empty level never saturates (a zero capacity would).
                whole(bytes as f64 / ctx.capacity.max(1) as f64).filter(|_| bytes > 0)
            }
            Trigger::SaturationFiles => {
                let files: usize = level.runs.iter().map(|r| r.files.len()).sum();
                let cap = (ctx.capacity / ctx.file_size.max(1)).max(1);
                whole(files as f64 / cap as f64).filter(|_| files > 0)
            }
            Trigger::Runs(n) => whole(level.runs.len() as f64 / n.max(1) as f64),
            Trigger::Stale(ttl) if above_deepest => marking(ctx, |f| {
                let age = ctx.view.now_ms.saturating_sub(f.arrived_ms);
                (age > ttl).then(|| age as f64 / ttl.max(1) as f64)
            }),
            Trigger::SpaceAmp(threshold) if above_deepest && !level.runs.is_empty() => {
                let total: u64 = (0..ctx.view.levels.len())
                    .map(|l| ctx.view.level_bytes(l))
                    .sum();
                let last = ctx.view.level_bytes(ctx.deepest).max(1);
                let amp = total.saturating_sub(last) as f64 / last as f64;
                (amp > threshold).then(|| Fired {
                    score: amp / threshold.max(f64::MIN_POSITIVE),
                    marked: None,
                })
            }
            Trigger::TombstoneDensity(threshold) if above_deepest && has_tombstones(ctx) => {
                marking(ctx, |f| {
                    let d = tombstone_density(f);
                    (f.tombstones > 0 && d > threshold)
                        .then(|| d / threshold.max(f64::MIN_POSITIVE))
                })
            }
            Trigger::TombstoneAge(threshold_ms) if above_deepest && has_tombstones(ctx) => {
                marking(ctx, |f| {
                    tombstone_expired(f, threshold_ms, ctx).then(|| {
                        let age = f
                            .oldest_tombstone_ms
                            .map_or(0, |t| ctx.view.now_ms.saturating_sub(t));
                        1.0 + age as f64 / threshold_ms.max(1) as f64
                    })
                })
            }
            _ => None,
        }
    }
}

impl FromStr for Trigger {
    type Err = Error;

    /// `saturation`, `saturation-files`, `runs:N`, `stale:MS`,
    /// `space-amp:X`, `tombstone-density:X`, `tombstone-age:MS`.
    fn from_str(s: &str) -> Result<Self> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        let num = |what: &str| super::spec_number("trigger", name, arg, what, false);
        Ok(match name.trim() {
            "saturation" => Trigger::Saturation,
            "saturation-files" => Trigger::SaturationFiles,
            "runs" => Trigger::Runs((num("a run count >= 1")? as usize).max(1)),
            "stale" => Trigger::Stale(num("a TTL in ms")? as u64),
            "space-amp" => Trigger::SpaceAmp(num("a ratio")?),
            "tombstone-density" => Trigger::TombstoneDensity(num("a ratio")?),
            "tombstone-age" => Trigger::TombstoneAge(num("a threshold in ms")? as u64),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown trigger {other:?} (known: saturation, saturation-files, runs:N, \
                     stale:MS, space-amp:X, tombstone-density:X, tombstone-age:MS)"
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::design::testutil::{ctx_of, file, level_of, view_of};

    #[test]
    fn saturation_fires_above_capacity_by_bytes_and_by_files() {
        // buffer 100, T = 10: level 0 holds up to 1000 bytes.
        let view = view_of(
            vec![
                level_of(vec![vec![file("1[0-9]=600"), file("2[10-19]=500")]]),
                level_of(vec![vec![file("3[0-9]=100")]]),
            ],
            100,
        );
        let ctx = ctx_of(&view, 0, 10, 500);
        let fired = Trigger::Saturation.fire(&ctx).unwrap();
        assert!((fired.score - 1.1).abs() < 1e-9);
        assert_eq!(fired.marked, None);
        // 2 files against 1000 / 500 = 2 files: saturated exactly.
        assert!(Trigger::SaturationFiles.fire(&ctx).is_some());
        let ctx = ctx_of(&view, 1, 10, 500);
        assert!(Trigger::Saturation.fire(&ctx).is_none());
        assert!(Trigger::SaturationFiles.fire(&ctx).is_none());
    }

    #[test]
    fn run_count_trigger_counts_runs() {
        let l = level_of(vec![
            vec![file("1[0-9]=1")],
            vec![file("2[0-9]=1")],
            vec![file("3[0-9]=1")],
        ]);
        let view = view_of(vec![l], 100);
        let ctx = ctx_of(&view, 0, 10, 10);
        assert!(Trigger::Runs(3).fire(&ctx).is_some());
        assert!(Trigger::Runs(4).fire(&ctx).is_none());
    }

    #[test]
    fn file_triggers_mark_only_qualifying_files_above_the_deepest_level() {
        let mut dense = file("1[0-9]=10");
        dense.entries = 10;
        dense.tombstones = 5;
        dense.oldest_tombstone_ms = Some(0);
        let mut sparse = file("2[10-19]=10");
        sparse.entries = 10;
        sparse.tombstones = 1;
        sparse.oldest_tombstone_ms = Some(9_000);
        sparse.arrived_ms = 9_500;
        let mut view = view_of(
            vec![
                level_of(vec![vec![dense, sparse]]),
                level_of(vec![vec![file("3[0-99]=10")]]),
            ],
            100,
        );
        view.now_ms = 10_000;
        let ctx = ctx_of(&view, 0, 10, 10);
        let f = Trigger::TombstoneDensity(0.3).fire(&ctx).unwrap();
        assert_eq!(f.marked, Some(vec![1]));
        // Two levels, T = 10, threshold 11 s: d0 = 1 s, d1 = 10 s.
        let f = Trigger::TombstoneAge(11_000).fire(&ctx).unwrap();
        assert_eq!(f.marked, Some(vec![1]));
        // File 1 arrived at 0, file 2 at 9.5 s.
        let f = Trigger::Stale(5_000).fire(&ctx).unwrap();
        assert_eq!(f.marked, Some(vec![1]));
        // The deepest level has nowhere to push marked files.
        let deepest = ctx_of(&view, 1, 10, 10);
        assert!(Trigger::TombstoneAge(1).fire(&deepest).is_none());
        assert!(Trigger::Stale(1).fire(&deepest).is_none());
    }

    #[test]
    fn lethe_ttls_grow_geometrically_and_sum_to_the_threshold() {
        // Independent closed form: d_i = D (T-1) T^i / (T^L - 1).
        let (d, t, l) = (1_110_000u64, 10u64, 3usize);
        let d_i = |i: u32| d as f64 * 9.0 * 10f64.powi(i as i32) / 999.0;
        assert_eq!(tombstone_ttl_ms(d, t, l, 0), d_i(0).round() as u64);
        assert_eq!(
            tombstone_ttl_ms(d, t, l, 1),
            (d_i(0) + d_i(1)).round() as u64
        );
        assert_eq!(tombstone_ttl_ms(d, t, l, 2), d);
        assert_eq!(tombstone_ttl_ms(d, t, 1, 0), d);
    }

    #[test]
    fn space_amp_trigger_compares_upper_levels_with_the_deepest() {
        let view = view_of(
            vec![
                level_of(vec![vec![file("1[0-9]=30")]]),
                level_of(vec![vec![file("2[0-9]=100")]]),
            ],
            100,
        );
        assert!(Trigger::SpaceAmp(0.2)
            .fire(&ctx_of(&view, 0, 10, 10))
            .is_some());
        assert!(Trigger::SpaceAmp(0.5)
            .fire(&ctx_of(&view, 0, 10, 10))
            .is_none());
    }

    #[test]
    fn triggers_parse() {
        assert_eq!("runs:4".parse::<Trigger>().unwrap(), Trigger::Runs(4));
        assert_eq!(
            "tombstone-age:500".parse::<Trigger>().unwrap(),
            Trigger::TombstoneAge(500)
        );
        assert!("runs:x".parse::<Trigger>().is_err());
        assert!("sometimes".parse::<Trigger>().is_err());
        assert!("space-amp:-1".parse::<Trigger>().is_err());
    }
}
