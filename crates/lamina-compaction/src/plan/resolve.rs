//! The first two steps of [`plan`](super::plan): find every input file of
//! a task, and choose the run that receives the output.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{invalid, Destination, PlannedInput, Positions};
use crate::{placement, CompactionTask, FileView, OutputRun, Result};

/// The task's input files, run by run, newest run first. Refuses a run or
/// file the tree does not hold (or one named twice), a file a running
/// compaction owns, a task with no input file, and a buffer task whose
/// source run is not an input.
pub(super) fn inputs(
    positions: &Positions<'_>,
    task: &CompactionTask,
) -> Result<Vec<PlannedInput>> {
    // A task may name thousands of runs (a level 0 that piled up under
    // asynchronous merges): then each is found by a lookup, not a scan.
    // Most name one or two, near the front, and a scan is cheaper.
    let by_run: Option<FxHashMap<(usize, u64), usize>> = (task.inputs.len() > 8).then(|| {
        positions
            .iter()
            .enumerate()
            .map(|(p, (l, r))| ((*l, r.id), p))
            .collect()
    });
    let position_of = |level: usize, id: u64| match &by_run {
        Some(map) => map.get(&(level, id)).copied(),
        None => positions
            .iter()
            .position(|(l, r)| *l == level && r.id == id),
    };
    let mut named_runs: FxHashSet<usize> = FxHashSet::default();
    let mut inputs: Vec<PlannedInput> = Vec::with_capacity(task.inputs.len());
    for input in task.inputs.iter().filter(|i| !i.file_ids.is_empty()) {
        let position = position_of(input.level, input.run_id).ok_or_else(|| {
            invalid(
                task,
                format!("no run {} in level {}", input.run_id, input.level),
            )
        })?;
        let twice = match by_run {
            Some(_) => !named_runs.insert(position),
            None => inputs.iter().any(|i| i.position == position),
        };
        if twice {
            return Err(invalid(task, format!("run {} named twice", input.run_id)));
        }
        let run = positions[position].1;
        let mut files: Vec<FileView> = Vec::with_capacity(input.file_ids.len());
        // Files named in the run's order (what policies name) are distinct
        // if each comes after the one before, which needs no set; named in
        // another order, they go into a set (not a search of `files`: a
        // merge into a whole level names thousands of files).
        let mut named: Option<FxHashSet<u64>> = None;
        // One search for ids of consecutive files (what policies name).
        let found = run.files.get_all(&input.file_ids);
        for (id, f) in input.file_ids.iter().zip(found) {
            let f = f.ok_or_else(|| invalid(task, format!("no file {id} in run {}", run.id)))?;
            if f.busy {
                return Err(invalid(task, format!("file {id} is being compacted")));
            }
            crate::work::add_id_checks(1);
            let after_last = files.last().is_none_or(|last| {
                (last.smallest.as_slice(), last.id) < (f.smallest.as_slice(), f.id)
            });
            if !after_last && named.is_none() {
                named = Some(files.iter().map(|f| f.id).collect());
            }
            if named.as_mut().is_some_and(|set| !set.insert(*id)) {
                return Err(invalid(task, format!("file {id} named twice")));
            }
            files.push(f.clone());
        }
        files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        inputs.push(PlannedInput {
            level: input.level,
            run_id: run.id,
            position,
            order: run.order,
            files,
        });
    }
    if inputs.is_empty() {
        return Err(invalid(task, "no input files"));
    }
    if let Some(b) = &task.buffer {
        if !inputs.iter().any(|i| i.run_id == b.source) {
            return Err(invalid(
                task,
                format!("buffer source run {} is not an input", b.source),
            ));
        }
    }
    inputs.sort_by_key(|i| i.position);
    Ok(inputs)
}

/// Where the output lands in recency order, and which run receives it: an
/// existing run of the output level, or a new run (or new tiles) placed by
/// its rank, the newest input's. Refuses an output run the level does not
/// hold, an output newer than its newest input (at `newest`), and a buffer
/// task into tiles.
pub(super) fn destination(
    positions: &Positions<'_>,
    task: &CompactionTask,
    inputs: &[PlannedInput],
) -> Result<(usize, Destination)> {
    let newest = inputs.first().map_or(0, |i| i.position);
    let new_order = inputs.iter().map(|i| i.order).max().unwrap_or(0);
    let (position, destination) = match task.output_run {
        OutputRun::Existing(id) => {
            let p = positions
                .iter()
                .position(|(l, r)| *l == task.output_level && r.id == id)
                .ok_or_else(|| invalid(task, format!("no output run {id}")))?;
            let order = positions[p].1.order;
            (p, Destination::Existing { id, order })
        }
        OutputRun::New | OutputRun::Tiles => {
            let (order, destination) = match task.output_run {
                OutputRun::Tiles => (placement::TILE_RANK, Destination::Tiles),
                _ => (new_order, Destination::New { order: new_order }),
            };
            let p = positions
                .iter()
                .position(|(l, r)| {
                    *l > task.output_level || (*l == task.output_level && r.order < order)
                })
                .unwrap_or(positions.len());
            (p, destination)
        }
    };
    if position < newest {
        return Err(invalid(task, "the output would be newer than its inputs"));
    }
    if task.buffer.is_some() && destination == Destination::Tiles {
        return Err(invalid(task, "tiles keep no compaction buffer"));
    }
    Ok((position, destination))
}
