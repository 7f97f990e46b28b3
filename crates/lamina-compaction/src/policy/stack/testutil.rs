//! A tiny stack model for the policies' unit tests: one level, runs of one
//! file each, merges applied until the policy is done.

use crate::{CompactionPolicy, FileView, LevelView, OutputRun, PolicyDefaults, RunView, TreeView};

pub fn defaults() -> PolicyDefaults {
    PolicyDefaults {
        size_ratio: 4,
        target_file_size: 1 << 20,
    }
}

/// A one-file run's file over keys `a`..`z`, in the tree notation.
pub fn file(id: u64, size: u64) -> FileView {
    crate::view::notation::file(&format!("{id}['a'-'z']={size}"))
}

/// A level-0 stack with the given run sizes, newest first.
pub fn view_of(sizes: &[u64], flushes: u64) -> TreeView {
    let n = sizes.len() as u64;
    TreeView {
        levels: vec![LevelView {
            runs: sizes
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    let id = n - i as u64;
                    RunView {
                        id,
                        order: id,
                        files: vec![file(id, s)].into(),
                    }
                })
                .collect(),
        }],
        flushes,
        memtable_bytes: 1,
        ..TreeView::default()
    }
}

#[derive(Default)]
pub struct Model {
    pub view: TreeView,
    next_id: u64,
    pub merges: u64,
}

impl Model {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Flushes `size` bytes, applies tasks until none, returns run sizes.
    pub fn flush(&mut self, policy: &dyn CompactionPolicy, size: u64) -> Vec<u64> {
        if self.view.levels.is_empty() {
            self.view.levels.push(LevelView::default());
        }
        let id = self.id();
        self.view.levels[0].runs.insert(
            0,
            RunView {
                id,
                order: id,
                files: vec![file(id, size)].into(),
            },
        );
        self.view.flushes += 1;
        self.view.memtable_bytes = size;
        for _ in 0..1000 {
            let tasks = policy.pick(&self.view);
            let Some(task) = tasks.into_iter().next() else {
                return self.sizes();
            };
            assert_eq!(task.output_level, 0);
            assert_eq!(task.output_run, OutputRun::New);
            let runs = &self.view.levels[0].runs;
            let positions: Vec<usize> = task
                .inputs
                .iter()
                .map(|i| runs.iter().position(|r| r.id == i.run_id).unwrap())
                .collect();
            for w in positions.windows(2) {
                assert_eq!(w[1], w[0] + 1, "inputs must be consecutive, newest first");
            }
            for (i, &p) in task.inputs.iter().zip(&positions) {
                let all: Vec<u64> = runs[p].files.iter().map(|f| f.id).collect();
                assert_eq!(i.file_ids, all, "whole runs merge");
                assert!(!runs[p].files.iter().any(|f| f.busy));
            }
            // Applied by the planner the engine and the simulator share.
            let plan = crate::plan::plan(&self.view, &task).unwrap();
            let id = self.id();
            let merged = file(id, plan.input_bytes());
            crate::plan::apply(&mut self.view, &plan, vec![merged], id);
            self.merges += 1;
        }
        panic!("policy did not settle");
    }

    pub fn sizes(&self) -> Vec<u64> {
        self.view.levels[0]
            .runs
            .iter()
            .map(RunView::bytes)
            .collect()
    }

    /// The current view plus `extra` new flush runs, the newest one busy.
    pub fn view_with_busy_newest(&self, extra: u64) -> TreeView {
        let mut v = self.view.clone();
        for i in 0..extra {
            let id = 1_000_000 + i;
            v.levels[0].runs.insert(
                0,
                RunView {
                    id,
                    order: id,
                    files: vec![file(id, 1)].into(),
                },
            );
        }
        let first = v.levels[0].runs[0].files.first().unwrap().id;
        v.levels[0].runs[0].files.update(first, |f| f.busy = true);
        v.flushes += extra;
        v
    }
}
