//! Named strategies as compositions of the four primitives: the nine of
//! seed 001's Table 2 (`full`, `lo1`, `lo2`, `rr`, `cold`, `old`, `tsd`,
//! `tsa`, `tier`), the layouts `1-leveling` and `lazy-leveling`, and seed
//! 004's CS265 policies (`cs265-tiered`, `cs265-leveled`, `lazy-leveled`, `partial`).
//! `docs/compaction.md` tabulates each.

use super::{Composed, Granularity, Layout, LevelPlan, Movement, Trigger};
use crate::error::{Error, Result};
use crate::partition::PartitionParams;
use crate::{param, PolicyDefaults};

/// Default tombstone density of `tsd`.
pub const DEFAULT_TSD_THRESHOLD: f64 = 0.2;
/// Default delete-persistence threshold of `tsa`, ms.
pub const DEFAULT_TSA_THRESHOLD_MS: u64 = 60_000;
/// Default level-0 run trigger of `1-leveling` (RocksDB's).
pub const DEFAULT_L0_RUNS: usize = 4;
/// Default segment fraction of `partial` (seed 004).
pub const DEFAULT_PARTIAL_C: f64 = 0.2;

/// Parameters a preset may take.
struct Params {
    size_ratio: u64,
    file_size: u64,
    block_writes: Option<bool>,
    tsd: f64,
    tsa_ms: u64,
    l0: usize,
    c: f64,
    space_amp: Option<f64>,
    /// `full`'s granularity: `level` (one merge) or `files`.
    full_files: bool,
}

fn leveled(triggers: Vec<Trigger>, granularity: Granularity, movement: Vec<Movement>) -> LevelPlan {
    LevelPlan {
        layout: Layout::Leveling,
        triggers,
        granularity,
        movement,
    }
}

fn tiered(triggers: Vec<Trigger>, granularity: Granularity) -> LevelPlan {
    LevelPlan {
        layout: Layout::Tiering,
        triggers,
        granularity,
        movement: Vec::new(),
    }
}

/// A pure-leveling, one-file preset picking with `movement`.
fn partial_leveling(movement: Vec<Movement>) -> Vec<LevelPlan> {
    vec![leveled(
        vec![Trigger::Saturation],
        Granularity::Files(1),
        movement,
    )]
}

/// Builds preset `name` with its spec parameters.
#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
pub fn preset(
    name: &str,
    params: &[(&str, &str)],
    spec: &str,
    defaults: PolicyDefaults,
) -> Result<Composed> {
    let mut p = Params {
        size_ratio: defaults.size_ratio as u64,
        file_size: defaults.target_file_size,
        block_writes: None,
        tsd: DEFAULT_TSD_THRESHOLD,
        tsa_ms: DEFAULT_TSA_THRESHOLD_MS,
        l0: DEFAULT_L0_RUNS,
        c: DEFAULT_PARTIAL_C,
        space_amp: None,
        full_files: false,
    };
    // Presets with a tiered level take partitioned merges for its merges.
    let has_tiered_level = matches!(
        name,
        "tier"
            | "smtree"
            | "1-leveling"
            | "lazy-leveling"
            | "cs265-tiered"
            | "lazy-leveled"
            | "partial"
    );
    let mut partitioning = PartitionParams::default();
    for &(k, v) in params {
        if has_tiered_level && partitioning.parse(name, k, v)? {
            continue;
        }
        let allowed = matches!(
            (k, name),
            ("T" | "file" | "block", _)
                | ("threshold", "tsd" | "tsa")
                | ("l0", "1-leveling")
                | ("c", "partial")
                | ("sa", "tier")
                | ("mode", "full")
        );
        if !allowed {
            return Err(Error::unknown_parameter(name, k));
        }
        match k {
            "T" => p.size_ratio = param(k, v)?,
            "file" => p.file_size = param(k, v)?,
            "block" => p.block_writes = Some(param(k, v)?),
            "threshold" if name == "tsd" => p.tsd = param(k, v)?,
            "threshold" => p.tsa_ms = param(k, v)?,
            "l0" => p.l0 = param(k, v)?,
            "c" => p.c = param(k, v)?,
            "mode" => {
                p.full_files = match v.trim() {
                    "level" => false,
                    "files" => true,
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "full: mode must be level or files, not {other:?}"
                        )))
                    }
                }
            }
            _ => p.space_amp = Some(param(k, v)?),
        }
    }
    if p.size_ratio < 2
        || p.file_size == 0
        || p.l0 == 0
        || !(p.c > 0.0 && p.c <= 1.0)
        || !(p.tsd >= 0.0 && p.tsd.is_finite())
        || p.space_amp.is_some_and(|s| !(s > 0.0 && s.is_finite()))
    {
        return Err(Error::InvalidArgument(format!(
            "{spec}: needs T >= 2, file >= 1, l0 >= 1, 0 < c <= 1, threshold >= 0, sa > 0"
        )));
    }
    let t = p.size_ratio as usize;
    let lo1 = Movement::LeastOverlapParent;
    let (levels, last) = match name {
        // Seed 001's Full as built in RocksDB (§4): every file of a
        // saturated level marked, compacted one by one, ingestion held
        // until all are done (`mode=files`); or one whole-level merge.
        "full" if p.full_files => (
            vec![leveled(
                vec![Trigger::Saturation],
                Granularity::LevelByFiles,
                vec![],
            )],
            None,
        ),
        "full" | "cs265-leveled" => (
            vec![leveled(
                vec![Trigger::Saturation],
                Granularity::Level,
                vec![],
            )],
            None,
        ),
        "lo1" => (partial_leveling(vec![lo1]), None),
        "lo2" => (
            partial_leveling(vec![Movement::LeastOverlapGrandparent, lo1]),
            None,
        ),
        "rr" => (partial_leveling(vec![Movement::RoundRobin]), None),
        "cold" => (partial_leveling(vec![Movement::Coldest, lo1]), None),
        "old" => (partial_leveling(vec![Movement::Oldest, lo1]), None),
        "tsd" => (
            vec![leveled(
                vec![Trigger::TombstoneDensity(p.tsd), Trigger::Saturation],
                Granularity::Files(1),
                vec![Movement::TombstoneDensity(p.tsd), lo1],
            )],
            None,
        ),
        "tsa" => (
            vec![leveled(
                vec![Trigger::TombstoneAge(p.tsa_ms), Trigger::Saturation],
                Granularity::Files(1),
                vec![Movement::ExpiredTombstones(p.tsa_ms), lo1],
            )],
            None,
        ),
        // SM-tree (the stepped-merge tree, seed 002's baseline) is tiering:
        // a level collects T runs, then merges them whole into one run of
        // the next level.
        "tier" | "smtree" => {
            let mut triggers = vec![Trigger::Runs(t)];
            triggers.extend(p.space_amp.map(Trigger::SpaceAmp));
            (vec![tiered(triggers, Granularity::Level)], None)
        }
        "1-leveling" => (
            vec![
                tiered(vec![Trigger::Runs(p.l0)], Granularity::Level),
                leveled(vec![Trigger::Saturation], Granularity::Files(1), vec![lo1]),
            ],
            None,
        ),
        "lazy-leveling" => (
            vec![tiered(vec![Trigger::Runs(t)], Granularity::Level)],
            Some(leveled(
                vec![Trigger::Saturation],
                Granularity::Level,
                vec![],
            )),
        ),
        // Seed 004 merges a level once it reaches its byte limit; the run
        // count bounds it too, as flushed runs can be smaller than the
        // memtable that sets the limit.
        "cs265-tiered" => (
            vec![tiered(
                vec![Trigger::Saturation, Trigger::Runs(t)],
                Granularity::Level,
            )],
            None,
        ),
        "lazy-leveled" => (
            vec![tiered(
                vec![Trigger::Saturation, Trigger::Runs(t)],
                Granularity::Level,
            )],
            Some(leveled(
                vec![Trigger::Saturation],
                Granularity::Level,
                vec![],
            )),
        ),
        "partial" => (
            vec![tiered(
                vec![Trigger::Saturation, Trigger::Runs(t)],
                Granularity::Segment(p.c),
            )],
            None,
        ),
        other => return Err(Error::InvalidArgument(format!("unknown preset {other:?}"))),
    };
    Ok(Composed {
        spec: spec.trim().to_string(),
        size_ratio: p.size_ratio,
        file_size: p.file_size,
        block_writes: p.block_writes.unwrap_or(name == "full"),
        levels,
        last,
        partitioning: partitioning.finish(name, p.file_size)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::design::testutil::{file, level_of, view_of};
    use crate::{parse_spec, CompactionPolicy, FileView, TreeView};

    fn build(spec: &str) -> Result<Composed> {
        let (name, params) = parse_spec(spec)?;
        preset(
            name,
            &params,
            spec,
            PolicyDefaults {
                size_ratio: 10,
                target_file_size: 1 << 20,
            },
        )
    }

    #[test]
    fn every_preset_builds_and_takes_overrides() {
        for name in crate::spec::preset_names() {
            let p = build(name).unwrap();
            assert_eq!(p.size_ratio, 10);
            let p = build(&format!("{name}:T=4,file=4096")).unwrap();
            assert_eq!((p.size_ratio, p.file_size), (4, 4096));
        }
        assert!(build("full").unwrap().block_writes);
        assert!(!build("full:block=false").unwrap().block_writes);
        assert!(!build("lo1").unwrap().block_writes);
        let tsa = build("tsa:threshold=500").unwrap();
        assert_eq!(tsa.levels[0].triggers[0], Trigger::TombstoneAge(500));
        let partial = build("partial:c=0.5").unwrap();
        assert_eq!(partial.levels[0].granularity, Granularity::Segment(0.5));
        let tier = build("tier:T=3,sa=0.5").unwrap();
        assert_eq!(
            tier.levels[0].triggers,
            [Trigger::Runs(3), Trigger::SpaceAmp(0.5)]
        );
    }

    #[test]
    fn full_merges_whole_levels() {
        let view = view_of(
            vec![
                level_of(vec![vec![
                    file("1[0-9]=400"),
                    file("2[10-19]=400"),
                    file("3[20-29]=400"),
                ]]),
                level_of(vec![vec![file("4[5-12]=100"), file("5[50-60]=100")]]),
                level_of(vec![vec![file("6[0-99]=50000")]]),
            ],
            100,
        );
        let tasks = build("full").unwrap().pick(&view);
        assert_eq!(tasks.len(), 1);
        let mut ids: Vec<u64> = tasks[0].input_file_ids().collect();
        ids.sort();
        assert_eq!(ids, [1, 2, 3, 4]);
        // lo1 takes one file instead: the one overlapping nothing.
        let tasks = build("lo1").unwrap().pick(&view);
        assert_eq!(tasks[0].input_file_ids().collect::<Vec<_>>(), [3]);
    }

    /// `full:mode=files` on a worked example (buffer 100, T = 10: level 0
    /// holds 1000 bytes). Level 0 holds A [0, 9], B [10, 19], C [20, 29]
    /// of 400 bytes each, arrived at t = 1; level 1 holds D [5, 12] and E
    /// [50, 60], arrived at t = 0. Every file of level 0 is marked and goes
    /// down alone, in key order, with the files below it overlaps: A with
    /// D (output X [0, 12] at t = 2), then B with X although level 0 is
    /// back within capacity (800 bytes), then C with nothing (a trivial
    /// move); writes wait until level 0 is empty. `full` instead merges
    /// A, B, C, D in one go.
    #[test]
    fn full_by_files_drains_every_marked_file_one_by_one() {
        let p = build("full:mode=files").unwrap();
        assert!(p.block_writes);
        let at = |mut f: FileView, t: u64| {
            f.arrived_ms = t;
            f
        };
        let mut view = view_of(
            vec![
                level_of(vec![vec![
                    at(file("1[0-9]=400"), 1),
                    at(file("2[10-19]=400"), 1),
                    at(file("3[20-29]=400"), 1),
                ]]),
                level_of(vec![vec![
                    at(file("4[5-12]=100"), 0),
                    at(file("5[50-60]=100"), 0),
                ]]),
            ],
            100,
        );
        let ids = |view: &TreeView| -> Vec<u64> {
            let task = p.pick(view).into_iter().next().unwrap();
            assert_eq!(task.output_level, 1);
            task.input_file_ids().collect()
        };
        assert_eq!(ids(&view), [1, 4]);
        assert!(p.stalls_writes(&view));
        // Apply it: A and D leave, X [0, 12] arrives in level 1 at t = 2.
        view.levels[0].runs[0].files.remove(1).unwrap();
        view.levels[1].runs[0].files.remove(4).unwrap();
        view.levels[1].runs[0]
            .files
            .insert(at(file("6[0-12]=500"), 2));
        assert!(!p.out_of_shape(&view), "800 bytes against 1000");
        assert_eq!(ids(&view), [2, 6], "B is marked too");
        assert!(
            p.stalls_writes(&view),
            "ingestion waits for every marked file"
        );
        view.levels[0].runs[0].files.remove(2).unwrap();
        view.levels[1].runs[0].files.remove(6).unwrap();
        view.levels[1].runs[0]
            .files
            .insert(at(file("7[0-19]=900"), 3));
        assert_eq!(ids(&view), [3], "C overlaps nothing below");
        view.levels[0].runs[0].files.remove(3).unwrap();
        view.levels[1].runs[0]
            .files
            .insert(at(file("3[20-29]=400"), 4));
        // Level 0 is empty; level 1 (1400 bytes of 10,000) rests.
        assert!(p.pick(&view).is_empty());
        assert!(!p.stalls_writes(&view));
        // A flush arriving later is not part of the drain.
        view.levels[0].runs[0]
            .files
            .insert(at(file("8[0-99]=100"), 5));
        assert!(p.pick(&view).is_empty());
        // The flush that saturates a level is folded into its run first.
        let mut flushed = view.clone();
        flushed.levels[0].runs[0].files.update(8, |f| f.size = 950);
        let run = level_of(vec![vec![at(file("9[0-99]=100"), 6)]])
            .runs
            .remove(0)
            .unwrap();
        flushed.levels[0].runs.insert(0, run);
        flushed.levels[0].runs[0].order = 20_000;
        let fold = p.pick(&flushed).into_iter().next().unwrap();
        assert_eq!(fold.output_level, 0);
        assert_eq!(fold.input_file_ids().collect::<Vec<_>>(), [9, 8]);
    }

    /// A tombstone written at t = 0 with threshold D = 1110 ms, T = 10 and
    /// three levels has per-level TTLs 10, 100 and 1000 ms: it leaves level
    /// 0 after 10 ms and level 1 after 110 ms, reaching the last level well
    /// within D without any saturation.
    #[test]
    fn tsa_persists_a_delete_within_its_threshold() {
        let p = build("tsa:threshold=1110").unwrap();
        let mut tomb = file("1[0-9]=10");
        tomb.tombstones = 1;
        tomb.oldest_tombstone_ms = Some(0);
        let mut view = view_of(
            vec![
                level_of(vec![vec![tomb]]),
                level_of(vec![vec![file("2[20-29]=10")]]),
                level_of(vec![vec![file("3[30-39]=10")]]),
            ],
            1 << 20,
        );
        let mut level_at = Vec::new();
        for now in (0..=1110).step_by(5) {
            view.now_ms = now;
            let Some(task) = p.pick(&view).into_iter().next() else {
                continue;
            };
            // Apply the (trivial) move the task describes.
            let from = task.inputs[0].level;
            let files = &mut view.levels[from].runs[0].files;
            let first = files.first().unwrap().id;
            let f = files.remove(first).unwrap();
            view.levels[task.output_level].runs[0].files.insert(f);
            level_at.push((now, task.output_level));
        }
        assert_eq!(level_at, [(15, 1), (115, 2)]);
    }

    #[test]
    fn bad_parameters_are_errors() {
        for spec in [
            "lo1:threshold=1",
            "full:T=1",
            "partial:c=0",
            "partial:c=2",
            "tsd:threshold=x",
            "1-leveling:l0=0",
            "tier:sa=-1",
            "rr:cursor=3",
            "full:mode=runs",
            "lo1:mode=files",
        ] {
            assert!(build(spec).is_err(), "{spec}");
        }
    }
}
