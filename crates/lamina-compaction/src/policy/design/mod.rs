//! The compaction design space of seed 001: a strategy is a composition of
//! four primitives, chosen per level.
//!
//! * [`trigger`]: *when* a level compacts (saturation, run count,
//!   staleness, space amplification, tombstone density, tombstone age),
//!   a prioritized list;
//! * [`layout`]: *how* a level keeps its data (leveled: one run; tiered:
//!   several runs);
//! * [`granularity`]: *how much* one compaction moves (level, files, a
//!   fraction, a segment of runs);
//! * [`movement`]: *which* files move (round-robin, least overlap with the
//!   parent or grandparent, coldest, oldest, tombstone density, expired
//!   tombstones), a prioritized list with fallbacks.
//!
//! [`Composed`] combines them into a [`CompactionPolicy`]; [`presets`]
//! names the strategies of seeds 001 and 004 as compositions and
//! [`config`] reads free compositions from TOML. Everything here is pure:
//! it reads a [`TreeView`] and returns tasks.

pub mod config;
pub mod granularity;
pub mod layout;
pub mod movement;
pub mod presets;
pub mod trigger;

#[cfg(test)]
pub(crate) mod testutil;

pub use granularity::Granularity;
pub use layout::Layout;
pub use movement::Movement;
pub use trigger::{Fired, Trigger};

use crate::{CompactionPolicy, CompactionTask, FileView, OutputRun, TaskInput, TreeView};

/// The number after the colon of a primitive's spec (`files:4`,
/// `tsd:0.5`): finite and at least 0, or above 0 if `positive`. `what` names
/// it in the error (`"trigger runs needs a run count >= 1, got .."`).
pub(crate) fn spec_number(
    primitive: &str,
    name: &str,
    arg: &str,
    what: &str,
    positive: bool,
) -> crate::error::Result<f64> {
    arg.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (*v > 0.0 || (!positive && *v == 0.0)))
        .ok_or_else(|| {
            crate::error::Error::InvalidArgument(format!(
                "{primitive} {name} needs {what}, got {arg:?}"
            ))
        })
}

/// Index of the deepest level holding data (0 for an empty tree).
pub fn deepest_level(view: &TreeView) -> usize {
    view.levels
        .iter()
        .rposition(|l| !l.runs.is_empty())
        .unwrap_or(0)
}

/// True while `level` drains the files a trigger marked
/// ([`Granularity::LevelByFiles`]): the view keeps no marks, but a drain
/// leaves its trace — a file of the level below arrived there after a file
/// still in the level (the drain's outputs arrive below while older marked
/// files wait). Between drains every file of the level arrived after every
/// file below: the last drain emptied the level, and what came since
/// (flushes, outputs and moves from above) arrived later. Arrival is
/// ordered by time, then by file id (files made later have larger ids):
/// in the engine arrival times are in ms, and a flush made just after a
/// drain ended often arrives within the same millisecond.
pub fn draining(view: &TreeView, level: usize) -> bool {
    let arrivals = |l: usize| {
        view.level(l)
            .runs
            .iter()
            .flat_map(|r| r.files.iter())
            .map(|f| (f.arrived_ms, f.id))
    };
    let (Some(first_here), Some(last_below)) = (arrivals(level).min(), arrivals(level + 1).max())
    else {
        return false;
    };
    last_below > first_here
}

/// What a primitive knows about the level it judges.
#[derive(Debug, Clone, Copy)]
pub struct LevelCtx<'a> {
    /// The tree.
    pub view: &'a TreeView,
    /// The level judged (0 = first disk level).
    pub level: usize,
    /// The deepest level holding data.
    pub deepest: usize,
    /// Capacity of the level in bytes: `buffer × T^(level+1)` (the paper's
    /// level `i + 1`, its level 0 being the memtable).
    pub capacity: u64,
    /// Size ratio T.
    pub size_ratio: u64,
    /// Output file size.
    pub file_size: u64,
}

impl<'a> LevelCtx<'a> {
    /// The context of `level` in `view`.
    pub fn new(view: &'a TreeView, level: usize, size_ratio: u64, file_size: u64) -> Self {
        let mut capacity = view.memtable_bytes.max(1);
        for _ in 0..=level {
            capacity = capacity.saturating_mul(size_ratio);
        }
        LevelCtx {
            view,
            level,
            deepest: deepest_level(view),
            capacity,
            size_ratio,
            file_size,
        }
    }

    /// Every file of the level.
    pub fn files(&self) -> impl Iterator<Item = &'a FileView> {
        self.view
            .level(self.level)
            .runs
            .iter()
            .flat_map(|r| r.files.iter())
    }
}

/// The four primitives chosen for one level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelPlan {
    /// Leveled or tiered.
    pub layout: Layout,
    /// Triggers, most important first.
    pub triggers: Vec<Trigger>,
    /// How much one compaction takes.
    pub granularity: Granularity,
    /// File picking, most important first (file granularities only).
    pub movement: Vec<Movement>,
}

/// A strategy composed of per-level primitives.
#[derive(Debug, Clone)]
pub struct Composed {
    /// The spec that recreates the policy.
    pub spec: String,
    /// Size ratio T.
    pub size_ratio: u64,
    /// Output file size.
    pub file_size: u64,
    /// Writes wait at each memtable switch until no compaction is pending
    /// or running (compactions have priority over ingestion; `full`).
    pub block_writes: bool,
    /// Plans of levels 0, 1, …; the last one also covers deeper levels.
    pub levels: Vec<LevelPlan>,
    /// Plan of the deepest level holding data, if it differs (lazy
    /// leveling's leveled last level).
    pub last: Option<LevelPlan>,
    /// Partitioned merges (seed 000 ch. 5) for the merges that make a new
    /// run (the tiered levels' merges); merges into an existing run are
    /// unaffected.
    pub partitioning: Option<crate::partition::Partitioning>,
}

/// A level that needs work, before the task is built.
struct Need {
    /// 1 + the trigger's position (a fold ranks with the level's first
    /// shape trigger, or first if it has none).
    priority: usize,
    score: f64,
    level: usize,
    trigger: Option<(Trigger, Fired)>,
}

impl Composed {
    /// The plan of `level` when the deepest level with data is `deepest`.
    pub fn plan(&self, level: usize, deepest: usize) -> &LevelPlan {
        if level == deepest {
            if let Some(last) = &self.last {
                return last;
            }
        }
        let i = level.min(self.levels.len().saturating_sub(1));
        // `levels` is never empty (the constructors check it); fall back
        // to the last plan all the same rather than index blindly.
        self.levels
            .get(i)
            .or(self.last.as_ref())
            .unwrap_or(&DEFAULT_PLAN)
    }

    fn task(
        &self,
        inputs: Vec<TaskInput>,
        output_level: usize,
        output_run: OutputRun,
        reason: String,
    ) -> CompactionTask {
        CompactionTask {
            inputs,
            output_level,
            output_run,
            target_file_size: self.file_size,
            partitioning: self.partitioning.filter(|_| output_run == OutputRun::New),
            buffer: None,
            reason,
        }
    }

    /// Moves level `level`'s runs `[from, to)` (newest first) down, or into
    /// a new run of the same level when they are not its oldest runs.
    fn move_runs(
        &self,
        view: &TreeView,
        level: usize,
        deepest: usize,
        range: std::ops::Range<usize>,
        reason: String,
    ) -> Option<CompactionTask> {
        let runs = view.level(level).runs.get(range.clone())?;
        let files = || runs.iter().flat_map(|r| &r.files);
        if files().any(|f| f.busy) {
            return None;
        }
        let lo = files().map(|f| &f.smallest).min()?;
        let hi = files().map(|f| &f.largest).max()?;
        let mut inputs: Vec<TaskInput> = runs
            .iter()
            .map(|r| TaskInput::whole_run(level, r))
            .collect();
        if range.end < view.level(level).runs.len() {
            // Older runs of the level stay below the merged segment.
            return Some(self.task(inputs, level, OutputRun::New, reason));
        }
        let dest_layout = self.plan(level + 1, deepest).layout;
        let out = layout::destination(view, level + 1, dest_layout, lo, hi, &mut inputs)?;
        Some(self.task(inputs, level + 1, out, reason))
    }

    /// Pushes files of the level's oldest run down, picked by the plan's
    /// movement policies among the trigger's marked files (or all).
    fn push_files(
        &self,
        view: &TreeView,
        ctx: &LevelCtx<'_>,
        plan: &LevelPlan,
        fired: &Fired,
        reason: String,
    ) -> Option<CompactionTask> {
        let level = ctx.level;
        let run = view.level(level).runs.last()?;
        // The marked files of this run (the trigger marks the level's),
        // in key order; `None`: every idle file, which the least-overlap
        // index offers without a scan of the run.
        let candidates: Option<Vec<&FileView>> = fired.marked.as_ref().map(|marked| {
            let mut files: Vec<&FileView> = marked
                .iter()
                .filter_map(|&id| run.files.get(id))
                .filter(|f| !f.busy)
                .collect();
            files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
            files
        });
        let n = plan.granularity.file_count(run.files.len());
        let dest_layout = self.plan(level + 1, ctx.deepest).layout;
        movement::find_ranked(&plan.movement, ctx, run, candidates.as_deref(), |anchor| {
            let window = run.files.window(anchor, n);
            if window.is_empty() || window.iter().any(|f| f.busy) {
                return None;
            }
            let (first, last) = (window.first()?, window.last()?);
            let mut inputs = vec![TaskInput {
                level,
                run_id: run.id,
                file_ids: window.iter().map(|f| f.id).collect(),
            }];
            let out = layout::destination(
                view,
                level + 1,
                dest_layout,
                &first.smallest,
                &last.largest,
                &mut inputs,
            )?;
            Some(self.task(inputs, level + 1, out, reason.clone()))
        })
    }

    /// The next file of a draining level (its oldest run's first idle
    /// file by key) with the overlapping files below. A leveled level that
    /// saturates with runs not yet folded (the flush that filled it) folds
    /// them first, so the files marked are its one run's; a run arriving
    /// once the drain is under way (a memtable flushed while writes wait)
    /// goes down after the oldest.
    fn drain_one(
        &self,
        view: &TreeView,
        level: usize,
        deepest: usize,
        reason: String,
    ) -> Option<CompactionTask> {
        let runs = &view.level(level).runs;
        if runs.len() > 1
            && self.plan(level, deepest).layout == Layout::Leveling
            && !draining(view, level)
        {
            return layout::fold(view, level, self.file_size);
        }
        let run = runs.last()?;
        let dest_layout = self.plan(level + 1, deepest).layout;
        run.files.iter().filter(|f| !f.busy).find_map(|f| {
            let mut inputs = vec![TaskInput {
                level,
                run_id: run.id,
                file_ids: vec![f.id],
            }];
            let out = layout::destination(
                view,
                level + 1,
                dest_layout,
                &f.smallest,
                &f.largest,
                &mut inputs,
            )?;
            Some(self.task(inputs, level + 1, out, reason.clone()))
        })
    }

    fn build(&self, view: &TreeView, deepest: usize, need: &Need) -> Option<CompactionTask> {
        let level = need.level;
        let plan = self.plan(level, deepest);
        let Some((trigger, fired)) = &need.trigger else {
            return match plan.granularity {
                Granularity::LevelByFiles => {
                    let reason = format!("level {level}: draining its marked files");
                    self.drain_one(view, level, deepest, reason)
                }
                _ => layout::fold(view, level, self.file_size),
            };
        };
        let ctx = LevelCtx::new(view, level, self.size_ratio, self.file_size);
        let reason = format!("level {level}: {trigger:?} (score {:.2})", fired.score);
        let runs = view.level(level).runs.len();
        match plan.granularity {
            Granularity::Level => self.move_runs(view, level, deepest, 0..runs, reason),
            Granularity::Segment(c) => {
                let saturated = matches!(trigger, Trigger::Saturation | Trigger::SaturationFiles);
                let range = if runs == 1 {
                    Some(0..1)
                } else {
                    granularity::segment(&view.level(level).runs, c, saturated)
                };
                self.move_runs(view, level, deepest, range?, reason)
            }
            Granularity::LevelByFiles => {
                self.drain_one(view, level, deepest, format!("{reason}, every file marked"))
            }
            Granularity::Files(_) | Granularity::Fraction(_) => {
                self.push_files(view, &ctx, plan, fired, reason)
            }
        }
    }

    /// True if a shape trigger (saturation by bytes or files, run count)
    /// fires on some level: the level holds more than the strategy lets it.
    pub fn out_of_shape(&self, view: &TreeView) -> bool {
        let deepest = deepest_level(view);
        (0..=deepest).any(|level| {
            let ctx = LevelCtx::new(view, level, self.size_ratio, self.file_size);
            self.plan(level, deepest)
                .triggers
                .iter()
                .filter(|t| t.is_shape())
                .any(|t| t.fire(&ctx).is_some())
        })
    }

    /// The levels needing work, most urgent first.
    fn needs(&self, view: &TreeView) -> (usize, Vec<Need>) {
        let deepest = deepest_level(view);
        let mut needs = Vec::new();
        for level in 0..=deepest {
            let plan = self.plan(level, deepest);
            let runs = view.level(level).runs.len();
            let ctx = LevelCtx::new(view, level, self.size_ratio, self.file_size);
            let fired: Vec<(usize, Trigger, Fired)> = plan
                .triggers
                .iter()
                .enumerate()
                .filter_map(|(p, t)| t.fire(&ctx).map(|f| (p, *t, f)))
                .collect();
            // A level moved whole when a trigger fires takes its unfolded
            // runs down in the same merge: folding them first would only
            // rewrite the level once more, and, as flushes keep arriving
            // while each fold rewrites a larger run, a fold that outscores
            // the push is followed by another (seed 004's leveled and
            // lazy-leveled levels grew to 4-5 times their capacity so).
            if plan.granularity == Granularity::LevelByFiles {
                // A draining level goes before everything else, the
                // shallowest first, and only its drain: its files were
                // marked together and ingestion waits for all of them.
                // Otherwise the level folds its runs as any leveled level.
                let drain = match fired.first() {
                    Some((_, trigger, fired)) => Some(Some((*trigger, fired.clone()))),
                    None => draining(view, level).then_some(None),
                };
                if let Some(trigger) = drain {
                    needs.push(Need {
                        priority: 0,
                        score: 0.0,
                        level,
                        trigger,
                    });
                    continue;
                }
            }
            let pushed_whole = plan.granularity == Granularity::Level && !fired.is_empty();
            if plan.layout == Layout::Leveling && runs > 1 && !pushed_whole {
                // The fold competes with the level's shape triggers
                // (saturation, run count) on score, as RocksDB scores its
                // level 0 by files against the others by bytes: ranked
                // always first, a stream of flushes would starve the
                // pushes out of the level and every fold would rewrite an
                // ever larger run.
                let shape = plan
                    .triggers
                    .iter()
                    .position(Trigger::is_shape)
                    .map_or(0, |p| p + 1);
                needs.push(Need {
                    priority: shape,
                    score: (runs - 1) as f64,
                    level,
                    trigger: None,
                });
            }
            for (p, trigger, fired) in fired {
                needs.push(Need {
                    priority: p + 1,
                    score: fired.score,
                    level,
                    trigger: Some((trigger, fired)),
                });
            }
        }
        needs.sort_by(|a, b| {
            let drains = a.priority == 0 && b.priority == 0;
            a.priority
                .cmp(&b.priority)
                .then_with(|| match drains {
                    true => a.level.cmp(&b.level),
                    false => b.score.total_cmp(&a.score),
                })
                .then(a.level.cmp(&b.level))
        });
        (deepest, needs)
    }
}

static DEFAULT_PLAN: LevelPlan = LevelPlan {
    layout: Layout::Leveling,
    triggers: Vec::new(),
    granularity: Granularity::Level,
    movement: Vec::new(),
};

impl CompactionPolicy for Composed {
    fn spec(&self) -> String {
        self.spec.clone()
    }

    fn size_ratio(&self) -> Option<f64> {
        Some(self.size_ratio as f64)
    }

    fn partitioning(&self) -> Option<crate::partition::Partitioning> {
        self.partitioning
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        let (deepest, needs) = self.needs(view);
        needs
            .iter()
            .filter_map(|n| self.build(view, deepest, n))
            .collect()
    }

    fn pick_first(&self, view: &TreeView) -> Option<CompactionTask> {
        let (deepest, needs) = self.needs(view);
        needs.iter().find_map(|n| self.build(view, deepest, n))
    }

    /// Compactions have priority over ingestion (seed 001 §4: RocksDB
    /// stalls writes until every triggered compaction is done): writes wait
    /// while a level is out of shape — a shape trigger (saturation, run
    /// count) fires on it — and a merge runs or can start. Without this a
    /// writer faster than the merges outgrows them: under `lo1` with 4 MiB
    /// memtables the engine's level 0 reached 151 MB in 8 runs against its
    /// 40 MB, as every fold of the level (rewriting it whole) took long
    /// enough for more flushes to arrive and outscore the pushes. With
    /// `block=true` (`full`'s default) writes wait for every pending or
    /// running compaction, folds and staleness merges included.
    fn stalls_writes(&self, view: &TreeView) -> bool {
        let running = || {
            view.levels
                .iter()
                .flat_map(|l| &l.runs)
                .flat_map(|r| &r.files)
                .any(|f| f.busy)
        };
        let due = self.block_writes || self.out_of_shape(view);
        due && (running() || self.pick_first(view).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{file, level_of, view_of};
    use super::*;

    fn composed(levels: Vec<LevelPlan>, last: Option<LevelPlan>) -> Composed {
        Composed {
            spec: "test".into(),
            size_ratio: 10,
            file_size: 100,
            block_writes: false,
            levels,
            last,
            partitioning: None,
        }
    }

    fn plan(layout: Layout, triggers: Vec<Trigger>, g: Granularity) -> LevelPlan {
        LevelPlan {
            layout,
            triggers,
            granularity: g,
            movement: vec![Movement::LeastOverlapParent],
        }
    }

    #[test]
    fn folds_compete_with_saturation_on_score() {
        // Level 0 is leveled, holds two runs and is saturated.
        let view = view_of(
            vec![level_of(vec![
                vec![file("1[0-9]=600")],
                vec![file("2[0-9]=600")],
            ])],
            100,
        );
        let p = composed(
            vec![plan(
                Layout::Leveling,
                vec![Trigger::Saturation],
                Granularity::Files(1),
            )],
            None,
        );
        // Two runs (fold score 1) against 1.2 × capacity: the push first.
        let tasks = p.pick(&view);
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].output_level, 1);
        assert_eq!(tasks[1].output_level, 0, "then the fold");
        // Three runs (fold score 2) against 1.8 × capacity: the fold first.
        let mut three = view.clone();
        three.levels[0].runs.insert(
            0,
            level_of(vec![vec![file("9[0-9]=600")]])
                .runs
                .remove(0)
                .unwrap(),
        );
        three.levels[0].runs[0].order = 20_000;
        let tasks = p.pick(&three);
        assert_eq!(tasks[0].output_level, 0, "the fold first");
    }

    #[test]
    fn a_level_moved_whole_is_pushed_rather_than_folded_once_full() {
        // Level 0 is leveled, moves whole, holds a saturated run and three
        // flushed runs (fold score 3 against 1.2 × capacity).
        let view = view_of(
            vec![level_of(vec![
                vec![file("7[0-9]=10")],
                vec![file("8[0-9]=10")],
                vec![file("9[0-9]=10")],
                vec![file("1[0-9]=1170")],
            ])],
            100,
        );
        let p = composed(
            vec![plan(
                Layout::Leveling,
                vec![Trigger::Saturation],
                Granularity::Level,
            )],
            None,
        );
        let tasks = p.pick(&view);
        assert_eq!(tasks.len(), 1, "no fold beside the push");
        assert_eq!(tasks[0].output_level, 1);
        let mut ids: Vec<u64> = tasks[0].input_file_ids().collect();
        ids.sort();
        assert_eq!(ids, [1, 7, 8, 9], "every run goes down");
        // Below capacity, the flushed runs are folded.
        let mut small = view.clone();
        let run = &mut small.levels[0].runs[3].files;
        let id = run.first().map(|f| f.id).unwrap();
        assert!(run.update(id, |f| f.size = 500));
        let tasks = p.pick(&small);
        assert_eq!(tasks[0].output_level, 0, "the fold");
    }

    #[test]
    fn file_granularity_pushes_marked_files_with_their_overlap() {
        let mut view = view_of(
            vec![
                level_of(vec![vec![file("1[0-9]=100"), file("2[10-19]=100")]]),
                level_of(vec![vec![file("3[0-5]=900"), file("4[12-15]=10")]]),
            ],
            10,
        );
        let p = composed(
            vec![LevelPlan {
                layout: Layout::Leveling,
                triggers: vec![Trigger::TombstoneDensity(0.2), Trigger::Saturation],
                granularity: Granularity::Files(1),
                movement: vec![
                    Movement::TombstoneDensity(0.2),
                    Movement::LeastOverlapParent,
                ],
            }],
            None,
        );
        let ids = |view: &TreeView| -> Vec<Vec<u64>> {
            p.pick(view)
                .iter()
                .map(|t| t.input_file_ids().collect())
                .collect()
        };
        // No tombstones: saturation, and TSD falls back to the least
        // overlapping file (2, with its overlap 4).
        assert_eq!(ids(&view), [vec![2, 4]]);
        // A dense file: the density trigger marks it and, ranked first by
        // TSD, it also answers the saturation trigger.
        let first = view.levels[0].runs[0].files.first().unwrap().id;
        view.levels[0].runs[0]
            .files
            .update(first, |f| f.tombstones = 50);
        assert_eq!(ids(&view), [vec![1, 3], vec![1, 3]]);
        assert_eq!(
            p.pick(&view)[0].output_run,
            OutputRun::Existing(view.levels[1].runs[0].id)
        );
    }

    #[test]
    fn tiered_levels_merge_all_runs_into_a_new_run_below() {
        let view = view_of(
            vec![
                level_of(vec![
                    vec![file("1[0-9]=10")],
                    vec![file("2[0-9]=10")],
                    vec![file("3[0-9]=10")],
                ]),
                level_of(vec![vec![file("4[0-9]=30")]]),
            ],
            10,
        );
        let p = composed(
            vec![plan(
                Layout::Tiering,
                vec![Trigger::Runs(3)],
                Granularity::Level,
            )],
            None,
        );
        let tasks = p.pick(&view);
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].output_run, OutputRun::New);
        assert_eq!(tasks[0].output_level, 1);
        let mut ids: Vec<u64> = tasks[0].input_file_ids().collect();
        ids.sort();
        assert_eq!(ids, [1, 2, 3]);
    }

    #[test]
    fn the_last_plan_applies_to_the_deepest_level_only() {
        let tiered = plan(Layout::Tiering, vec![Trigger::Runs(2)], Granularity::Level);
        let leveled = plan(
            Layout::Leveling,
            vec![Trigger::Saturation],
            Granularity::Level,
        );
        let p = composed(vec![tiered.clone()], Some(leveled.clone()));
        let view = view_of(
            vec![
                level_of(vec![vec![file("1[0-9]=10")], vec![file("2[0-9]=10")]]),
                level_of(vec![vec![file("3[0-9]=30")]]),
            ],
            10,
        );
        assert_eq!(p.plan(0, 1), &tiered);
        assert_eq!(p.plan(1, 1), &leveled);
        // Level 0 merges into the leveled last level's run.
        let tasks = p.pick(&view);
        assert_eq!(
            tasks[0].output_run,
            OutputRun::Existing(view.levels[1].runs[0].id)
        );
        let mut ids: Vec<u64> = tasks[0].input_file_ids().collect();
        ids.sort();
        assert_eq!(ids, [1, 2, 3]);
    }

    #[test]
    fn segments_merge_in_place_unless_they_end_at_the_oldest_run() {
        let view = view_of(
            vec![level_of(vec![
                vec![file("1[0-100]=10")],
                vec![file("2[50-60]=10")],
                vec![file("3[40-60]=10")],
                vec![file("4[0-100]=10")],
            ])],
            10,
        );
        let p = composed(
            vec![plan(
                Layout::Tiering,
                vec![Trigger::Runs(4)],
                Granularity::Segment(0.2),
            )],
            None,
        );
        let t = &p.pick(&view)[0];
        assert_eq!((t.output_level, t.output_run), (0, OutputRun::New));
        assert_eq!(t.input_file_ids().collect::<Vec<_>>(), [2, 3]);
        // Saturated (4 × 10 bytes against 10 × 10): the oldest two go down.
        let p = composed(
            vec![plan(
                Layout::Tiering,
                vec![Trigger::Saturation],
                Granularity::Segment(0.2),
            )],
            None,
        );
        let view = view_of(view.levels.clone(), 1);
        let t = &p.pick(&view)[0];
        assert_eq!((t.output_level, t.output_run), (1, OutputRun::New));
        assert_eq!(t.input_file_ids().collect::<Vec<_>>(), [3, 4]);
    }

    #[test]
    fn busy_files_are_never_picked_and_blocking_reports_pending_work() {
        let mut view = view_of(
            vec![level_of(vec![
                vec![file("1[0-9]=10")],
                vec![file("2[0-9]=10")],
            ])],
            100,
        );
        let mut p = composed(
            vec![plan(
                Layout::Leveling,
                vec![Trigger::Saturation],
                Granularity::Level,
            )],
            None,
        );
        assert!(!p.stalls_writes(&view));
        p.block_writes = true;
        assert!(p.stalls_writes(&view));
        let first = view.levels[0].runs[0].files.first().unwrap().id;
        view.levels[0].runs[0]
            .files
            .update(first, |f| f.busy = true);
        assert!(p.pick(&view).is_empty());
        assert!(p.stalls_writes(&view), "a running compaction blocks too");
    }

    #[test]
    fn writes_wait_while_a_level_is_out_of_shape_and_a_merge_can_run() {
        // buffer 100, T = 10: level 0 holds up to 1000 bytes.
        let within = view_of(
            vec![level_of(vec![
                vec![file("1[0-9]=300")],
                vec![file("2[0-9]=600")],
            ])],
            100,
        );
        let p = composed(
            vec![plan(
                Layout::Leveling,
                vec![Trigger::Saturation],
                Granularity::Files(1),
            )],
            None,
        );
        assert!(!p.block_writes);
        // Two runs within capacity: a fold is pending, writes go on.
        assert!(!p.stalls_writes(&within));
        let mut over = within.clone();
        let id = over.levels[0].runs[1].files.first().unwrap().id;
        over.levels[0].runs[1].files.update(id, |f| f.size = 900);
        assert!(p.out_of_shape(&over));
        assert!(p.stalls_writes(&over), "1200 bytes against 1000");
        // A plan without a shape trigger never holds writes.
        let idle = composed(
            vec![plan(Layout::Leveling, vec![], Granularity::Files(1))],
            None,
        );
        assert!(!idle.stalls_writes(&over));
    }
}
