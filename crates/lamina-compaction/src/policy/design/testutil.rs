//! Hand-built tree views for the design-space unit tests.

use super::LevelCtx;
use crate::{FileView, LevelView, RunView, TreeView};

pub(crate) use crate::view::notation::file;

/// A level of runs given newest first; run ids and orders count down so
/// that the first run is the newest.
pub fn level_of(runs: Vec<Vec<FileView>>) -> LevelView {
    let n = runs.len() as u64;
    LevelView {
        runs: runs
            .into_iter()
            .enumerate()
            .map(|(i, files)| {
                let first = files.first().map_or(1000 + i as u64, |f| 1000 + f.id);
                RunView {
                    id: first,
                    order: n - i as u64,
                    files: files.into(),
                }
            })
            .collect(),
    }
}

/// A tree of `levels` with memtable size `buffer`; fixes run orders so that
/// every run of level i is newer than every run of level i+1.
pub fn view_of(mut levels: Vec<LevelView>, buffer: u64) -> TreeView {
    let mut order = 10_000;
    for level in &mut levels {
        for run in &mut level.runs {
            run.order = order;
            order -= 1;
        }
    }
    TreeView {
        levels,
        memtable_bytes: buffer,
        ..TreeView::default()
    }
}

/// The context of `level` with size ratio `t` and output file size `file`.
pub fn ctx_of(view: &TreeView, level: usize, t: u64, file: u64) -> LevelCtx<'_> {
    LevelCtx::new(view, level, t, file)
}
