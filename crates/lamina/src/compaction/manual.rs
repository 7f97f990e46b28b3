//! The task of a manual compaction (`Db::compact_range`).

use super::{CompactionTask, OutputRun, TaskInput};
use crate::version::{FileMeta, Version};

/// The manual task of `compact_range`: every file meeting the range, merged
/// into the deepest level.
pub(crate) fn manual_task(
    v: &Version,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    target: u64,
) -> Option<CompactionTask> {
    // The output spans all its inputs' keys, which can reach past
    // `[lo, hi]`: widen the range to the overlapping files' until it holds
    // them all, so that no file left out shares keys with the output.
    let (mut lo, mut hi) = (lo.unwrap_or(&[]), hi);
    let in_range = |f: &FileMeta, lo: &[u8], hi: Option<&[u8]>| {
        hi.is_none_or(|h| f.smallest.as_slice() <= h) && f.largest.as_slice() >= lo
    };
    loop {
        let (old_lo, old_hi) = (lo, hi);
        for (_, _, f) in v.files().filter(|(_, _, f)| in_range(f, old_lo, old_hi)) {
            lo = lo.min(f.smallest.as_slice());
            hi = hi.map(|h| h.max(f.largest.as_slice()));
        }
        if (lo, hi) == (old_lo, old_hi) {
            break;
        }
    }
    let in_range = |f: &FileMeta| in_range(f, lo, hi);
    let inputs: Vec<TaskInput> = v
        .runs_newest_first()
        .map(|(level, run)| TaskInput {
            level,
            run_id: run.id,
            file_ids: run
                .files
                .iter()
                .filter(|f| in_range(f))
                .map(|f| f.id)
                .collect(),
        })
        .filter(|i| !i.file_ids.is_empty())
        .collect();
    if inputs.is_empty() {
        return None;
    }
    let output_level = v.levels.len().saturating_sub(1).max(1);
    let output_run = match v.levels.get(output_level).map(|l| l.runs.as_slice()) {
        Some([only]) => OutputRun::Existing(only.id),
        _ => OutputRun::New,
    };
    Some(CompactionTask {
        inputs,
        output_level,
        output_run,
        target_file_size: target,
        partitioning: None,
        buffer: None,
        reason: "manual compact_range".into(),
    })
}
