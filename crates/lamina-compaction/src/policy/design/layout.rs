//! Data layout (eagerness): *how* data is laid out per level (seed 001
//! §3.1). A level is either **leveled** (one sorted run: a run arriving in
//! it is merged into the resident run at once) or **tiered** (runs pile up
//! until a trigger merges them into the next level as a new run). The
//! whole-tree layouts are per-level choices: leveling, tiering, 1-leveling
//! (tiered first level), L-leveling / lazy leveling (tiered but the last
//! level) and any hybrid; `presets.rs` spells them out.

use std::str::FromStr;

use crate::error::{Error, Result};
use crate::{CompactionTask, OutputRun, TaskInput, TreeView};

/// The layout of one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One sorted run.
    Leveling,
    /// Several sorted runs; the triggers decide how many.
    Tiering,
}

/// Where data merged out of level `level - 1` lands in `level`: the
/// level's newest run if it is leveled (its files overlapping `[lo, hi]`
/// join `inputs`), a new run if it is tiered or empty. `None` if an
/// overlapping file is busy.
pub fn destination(
    view: &TreeView,
    level: usize,
    layout: Layout,
    lo: &[u8],
    hi: &[u8],
    inputs: &mut Vec<TaskInput>,
) -> Option<OutputRun> {
    let run = match (layout, view.level(level).runs.first()) {
        (Layout::Leveling, Some(run)) => run,
        _ => return Some(OutputRun::New),
    };
    let overlapping: Vec<_> = run.overlapping(lo, hi).collect();
    if overlapping.iter().any(|f| f.busy) {
        return None;
    }
    if !overlapping.is_empty() {
        inputs.push(TaskInput {
            level,
            run_id: run.id,
            file_ids: overlapping.iter().map(|f| f.id).collect(),
        });
    }
    Some(OutputRun::Existing(run.id))
}

/// Leveling's invariant: a leveled level holding several runs (a flush just
/// landed, or another strategy left them) merges its newer runs into its
/// oldest, taking only the oldest run's files they overlap.
pub fn fold(view: &TreeView, level: usize, file_size: u64) -> Option<CompactionTask> {
    let runs = &view.level(level).runs;
    let (oldest, newer) = runs.split_last()?;
    if newer.is_empty() || newer.iter().flat_map(|r| &r.files).any(|f| f.busy) {
        return None;
    }
    let files = || newer.iter().flat_map(|r| &r.files);
    let lo = files().map(|f| &f.smallest).min()?;
    let hi = files().map(|f| &f.largest).max()?;
    let mut inputs: Vec<TaskInput> = newer
        .iter()
        .map(|r| TaskInput::whole_run(level, r))
        .collect();
    let overlapping: Vec<_> = oldest.overlapping(lo, hi).collect();
    if overlapping.iter().any(|f| f.busy) {
        return None;
    }
    if !overlapping.is_empty() {
        inputs.push(TaskInput {
            level,
            run_id: oldest.id,
            file_ids: overlapping.iter().map(|f| f.id).collect(),
        });
    }
    Some(CompactionTask {
        inputs,
        output_level: level,
        output_run: OutputRun::Existing(oldest.id),
        target_file_size: file_size,
        partitioning: None,
        buffer: None,
        reason: format!("level {level} is leveled and holds {} runs", runs.len()),
    })
}

impl FromStr for Layout {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "leveling" | "leveled" => Ok(Layout::Leveling),
            "tiering" | "tiered" => Ok(Layout::Tiering),
            other => Err(Error::InvalidArgument(format!(
                "unknown layout {other:?} (known: leveling, tiering)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::design::testutil::{file, level_of, view_of};

    #[test]
    fn fold_merges_newer_runs_into_the_oldest_overlap_only() {
        let view = view_of(
            vec![level_of(vec![
                vec![file("1[10-20]=5")],
                vec![file("2[15-30]=5")],
                vec![file("3[0-9]=50"), file("4[12-25]=50"), file("5[40-50]=50")],
            ])],
            100,
        );
        let t = fold(&view, 0, 1 << 20).unwrap();
        let oldest = view.levels[0].runs[2].id;
        assert_eq!(t.output_level, 0);
        assert_eq!(t.output_run, OutputRun::Existing(oldest));
        let mut ids: Vec<u64> = t.input_file_ids().collect();
        ids.sort();
        assert_eq!(ids, [1, 2, 4]);
        // One run: nothing to fold.
        let calm = view_of(vec![level_of(vec![vec![file("3[0-9]=50")]])], 100);
        assert!(fold(&calm, 0, 1).is_none());
    }

    #[test]
    fn destination_depends_on_the_layout_below() {
        let view = view_of(
            vec![
                level_of(vec![vec![file("1[10-20]=5")]]),
                level_of(vec![vec![file("2[0-12]=5"), file("3[30-40]=5")]]),
            ],
            100,
        );
        let first = view.levels[0].runs[0].files.first().unwrap();
        let (lo, hi) = (&first.smallest, &first.largest);
        let mut inputs = Vec::new();
        let out = destination(&view, 1, Layout::Leveling, lo, hi, &mut inputs);
        assert_eq!(out, Some(OutputRun::Existing(view.levels[1].runs[0].id)));
        assert_eq!(inputs.len(), 1);
        assert_eq!(inputs[0].file_ids, [2]);
        let mut inputs = Vec::new();
        let out = destination(&view, 1, Layout::Tiering, lo, hi, &mut inputs);
        assert_eq!(out, Some(OutputRun::New));
        assert!(inputs.is_empty());
        let mut busy = view.clone();
        let first = busy.levels[1].runs[0].files.first().unwrap().id;
        busy.levels[1].runs[0]
            .files
            .update(first, |f| f.busy = true);
        assert_eq!(
            destination(&busy, 1, Layout::Leveling, lo, hi, &mut Vec::new()),
            None
        );
    }
}
