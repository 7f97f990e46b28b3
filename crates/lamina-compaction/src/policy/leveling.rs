//! Classic leveling: flushes land as runs in level 0; once level 0 holds
//! `l0` runs they merge with the overlapping part of level 1; every deeper
//! level holds one run and, when it exceeds its capacity, pushes one file
//! (the one overlapping the least data in the next level) down.
//!
//! Capacity of level *i* ≥ 1 is `buffer × T^i`.

use super::design::layout::{destination, Layout};
use crate::error::{Error, Result};
use crate::view::index::Below;
use crate::{param, CompactionPolicy, CompactionTask, PolicyDefaults, TaskInput, TreeView};

/// The leveling policy; see the module docs.
#[derive(Debug, Clone)]
pub struct Leveling {
    /// Size ratio between adjacent levels.
    pub size_ratio: u64,
    /// Level-0 runs that trigger a merge into level 1.
    pub l0_trigger: usize,
    /// Output file size.
    pub target_file_size: u64,
}

impl Leveling {
    /// Builds from spec parameters `T=` and `l0=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut p = Leveling {
            size_ratio: defaults.size_ratio as u64,
            l0_trigger: 4,
            target_file_size: defaults.target_file_size,
        };
        for &(k, v) in params {
            match k {
                "T" => p.size_ratio = param(k, v)?,
                "l0" => p.l0_trigger = param(k, v)?,
                _ => return Err(Error::unknown_parameter("leveling", k)),
            }
        }
        if p.size_ratio < 2 || p.l0_trigger < 1 {
            return Err(Error::InvalidArgument(
                "leveling needs T >= 2 and l0 >= 1".into(),
            ));
        }
        Ok(p)
    }

    /// Capacity in bytes of level `i` ≥ 1.
    pub fn capacity(&self, memtable_bytes: u64, i: usize) -> u64 {
        let mut cap = memtable_bytes.max(1);
        for _ in 0..i {
            cap = cap.saturating_mul(self.size_ratio);
        }
        cap
    }

    /// Merges every run of `level` with the overlapping files of the single
    /// run below (or into a new run there).
    fn merge_level_down(
        &self,
        view: &TreeView,
        level: usize,
        reason: String,
    ) -> Option<CompactionTask> {
        let runs = &view.level(level).runs;
        if runs.iter().flat_map(|r| &r.files).any(|f| f.busy) {
            return None;
        }
        let lo = runs
            .iter()
            .flat_map(|r| &r.files)
            .map(|f| &f.smallest)
            .min()?;
        let hi = runs
            .iter()
            .flat_map(|r| &r.files)
            .map(|f| &f.largest)
            .max()?;
        let mut inputs: Vec<TaskInput> = runs
            .iter()
            .map(|r| TaskInput::whole_run(level, r))
            .collect();
        let output_run = destination(view, level + 1, Layout::Leveling, lo, hi, &mut inputs)?;
        Some(CompactionTask {
            inputs,
            output_level: level + 1,
            output_run,
            target_file_size: self.target_file_size,
            partitioning: None,
            buffer: None,
            reason,
        })
    }

    /// Pushes the file of `level` with the least overlap into the next level.
    fn push_one_file(&self, view: &TreeView, level: usize, score: f64) -> Option<CompactionTask> {
        let run = view.level(level).runs.first()?;
        let below = view.level(level + 1).runs.first();
        // The index offers files by least overlap; the first one free to
        // move, with nothing busy under it, goes.
        let file = view.by_least_overlap(level, run, level + 1, Below::Newest, |f| {
            let blocked = f.busy
                || below.is_some_and(|b| b.overlapping(&f.smallest, &f.largest).any(|o| o.busy));
            (!blocked).then_some(f)
        })?;
        let mut inputs = vec![TaskInput {
            level,
            run_id: run.id,
            file_ids: vec![file.id],
        }];
        let output_run = destination(
            view,
            level + 1,
            Layout::Leveling,
            &file.smallest,
            &file.largest,
            &mut inputs,
        )?;
        Some(CompactionTask {
            inputs,
            output_level: level + 1,
            output_run,
            target_file_size: self.target_file_size,
            partitioning: None,
            buffer: None,
            reason: format!("level {level} over capacity (score {score:.2}), least overlap"),
        })
    }
    /// The tasks of [`CompactionPolicy::pick`], most urgent first, each
    /// built only when asked for.
    fn tasks<'a>(&'a self, view: &'a TreeView) -> impl Iterator<Item = CompactionTask> + 'a {
        // Score every level; merge the most urgent first.
        let mut scored: Vec<(f64, usize)> = Vec::new();
        for (i, level) in view.levels.iter().enumerate() {
            let score = if i == 0 {
                level.runs.len() as f64 / self.l0_trigger as f64
            } else if level.runs.len() > 1 {
                // A level with several runs (left by another strategy) is
                // merged down whole: leveling keeps one run per level.
                f64::INFINITY
            } else {
                view.level_bytes(i) as f64 / self.capacity(view.memtable_bytes, i) as f64
            };
            if score >= 1.0 {
                scored.push((score, i));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().filter_map(move |(score, i)| {
            if i == 0 || view.level(i).runs.len() > 1 {
                self.merge_level_down(
                    view,
                    i,
                    format!("level {i} has {} runs", view.level(i).runs.len()),
                )
            } else {
                self.push_one_file(view, i, score)
            }
        })
    }
}

impl CompactionPolicy for Leveling {
    fn spec(&self) -> String {
        format!("leveling:T={},l0={}", self.size_ratio, self.l0_trigger)
    }

    fn size_ratio(&self) -> Option<f64> {
        Some(self.size_ratio as f64)
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        self.tasks(view).collect()
    }

    fn pick_first(&self, view: &TreeView) -> Option<CompactionTask> {
        self.tasks(view).next()
    }

    /// Level 0, however few runs it holds, merged into level 1: at rest a
    /// seek then positions in one run per level instead of one per flush.
    fn pick_for_reads(&self, view: &TreeView) -> Option<CompactionTask> {
        let runs = view.levels.first()?.runs.len();
        self.merge_level_down(
            view,
            0,
            format!("reads paid for merging level 0 ({runs} runs)"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::notation::file;
    use crate::{FileView, LevelView, OutputRun, RunView};

    fn run(id: u64, files: Vec<FileView>) -> RunView {
        RunView {
            id,
            order: id,
            files: files.into(),
        }
    }

    fn policy() -> Leveling {
        Leveling::from_params(
            &[("T", "10"), ("l0", "2")],
            PolicyDefaults {
                size_ratio: 10,
                target_file_size: 1 << 20,
            },
        )
        .unwrap()
    }

    #[test]
    fn l0_merges_all_runs_with_overlapping_l1_files() {
        let view = TreeView {
            levels: vec![
                LevelView {
                    runs: vec![
                        run(5, vec![file("1[10-20]=10")]),
                        run(4, vec![file("2[15-40]=10")]),
                    ]
                    .into(),
                },
                LevelView {
                    runs: vec![run(
                        1,
                        vec![file("3[0-5]=10"), file("4[12-30]=10"), file("5[50-60]=10")],
                    )]
                    .into(),
                },
            ],
            memtable_bytes: 100,
            ..Default::default()
        };
        let tasks = policy().pick(&view);
        assert_eq!(tasks.len(), 1);
        let t = &tasks[0];
        assert_eq!(t.output_level, 1);
        assert_eq!(t.output_run, OutputRun::Existing(1));
        let mut ids: Vec<u64> = t.input_file_ids().collect();
        ids.sort();
        assert_eq!(ids, vec![1, 2, 4]);
    }

    #[test]
    fn over_capacity_level_pushes_least_overlapping_file() {
        // Level 1 capacity = 100 * 10 = 1000 bytes; it holds 1200.
        let view = TreeView {
            levels: vec![
                LevelView::default(),
                LevelView {
                    runs: vec![run(1, vec![file("1[0-9]=600"), file("2[20-29]=600")])].into(),
                },
                LevelView {
                    runs: vec![run(2, vec![file("3[0-9]=5000"), file("4[25-26]=10")])].into(),
                },
            ],
            memtable_bytes: 100,
            ..Default::default()
        };
        let tasks = policy().pick(&view);
        assert_eq!(tasks.len(), 1);
        let ids: Vec<u64> = tasks[0].input_file_ids().collect();
        assert_eq!(ids, vec![2, 4]);
        assert_eq!(tasks[0].output_run, OutputRun::Existing(2));
    }

    #[test]
    fn busy_files_are_never_picked_and_small_trees_need_nothing() {
        let mut f = file("1[0-9]=10");
        f.busy = true;
        let view = TreeView {
            levels: vec![LevelView {
                runs: vec![run(2, vec![f]), run(1, vec![file("2[0-9]=10")])].into(),
            }],
            memtable_bytes: 100,
            ..Default::default()
        };
        assert!(policy().pick(&view).is_empty());
        let calm = TreeView {
            levels: vec![LevelView {
                runs: vec![run(1, vec![file("2[0-9]=10")])].into(),
            }],
            memtable_bytes: 100,
            ..Default::default()
        };
        assert!(policy().pick(&calm).is_empty());
    }

    #[test]
    fn reads_merge_level_0_below_its_trigger() {
        // One run in level 0 (trigger 2): nothing to pick, but the reads'
        // merge takes it with the level-1 file it overlaps.
        let view = TreeView {
            levels: vec![
                LevelView {
                    runs: vec![run(5, vec![file("1[10-20]=10")])].into(),
                },
                LevelView {
                    runs: vec![run(1, vec![file("3[0-5]=10"), file("4[12-30]=10")])].into(),
                },
            ],
            memtable_bytes: 100,
            ..Default::default()
        };
        assert!(policy().pick(&view).is_empty());
        let t = policy().pick_for_reads(&view).unwrap();
        assert_eq!(t.output_level, 1);
        assert_eq!(t.output_run, OutputRun::Existing(1));
        let mut ids: Vec<u64> = t.input_file_ids().collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![1, 4]);
        let empty = TreeView {
            levels: vec![LevelView::default(), view.levels[1].clone()],
            memtable_bytes: 100,
            ..Default::default()
        };
        assert!(policy().pick_for_reads(&empty).is_none());
    }

    #[test]
    fn bad_params_are_errors() {
        let d = PolicyDefaults {
            size_ratio: 10,
            target_file_size: 1,
        };
        assert!(Leveling::from_params(&[("T", "1")], d).is_err());
        assert!(Leveling::from_params(&[("x", "1")], d).is_err());
        assert!(Leveling::from_params(&[("T", "ten")], d).is_err());
    }
}
