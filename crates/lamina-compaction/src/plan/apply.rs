//! [`apply`]: the tree after a plan.

use super::{Destination, Plan};
use crate::lsbm::apply_changes;
use crate::view::files::Spare;
use crate::{placement, FileView, Files, InlineKey, RunView, TreeView};

/// The tree after `plan`: its input files leave their runs, `outputs`
/// (sorted by key; for a [`Action::Move`](crate::plan::Action::Move), the moved files) enter the
/// destination — a new run named `new_run_id` placed by its rank, the
/// existing run in key order, or one tile run per file named after it —
/// and runs left empty disappear, as do empty levels at the bottom. The
/// outputs arrive in their level at the view's `now_ms`, moved files too,
/// as the engine's executor stamps them (the round-robin cursor and the
/// staleness trigger read it).
pub fn apply(view: &mut TreeView, plan: &Plan, mut outputs: Vec<FileView>, new_run_id: u64) {
    for f in &mut outputs {
        f.arrived_ms = view.now_ms;
    }
    // Key ranges that changed, per level, for the view's index.
    let mut changed: Vec<(usize, &[u8], &[u8])> = Vec::new();
    let spans = plan
        .inputs
        .iter()
        .map(|i| (i.level, i.files.as_slice()))
        .chain(std::iter::once((plan.output_level, outputs.as_slice())));
    for (level, files) in spans {
        let lo = files.iter().map(|f| f.smallest.as_slice()).min();
        let hi = files.iter().map(|f| f.largest.as_slice()).max();
        let (Some(lo), Some(hi)) = (lo, hi) else {
            continue;
        };
        match changed.iter_mut().find(|c| c.0 == level) {
            Some(c) => *c = (level, c.1.min(lo), c.2.max(hi)),
            None => changed.push((level, lo, hi)),
        }
    }
    let changed: Vec<(usize, InlineKey, InlineKey)> = changed
        .into_iter()
        .map(|(l, lo, hi)| (l, lo.into(), hi.into()))
        .collect();
    // The inputs' boxes, for the outputs.
    let mut spare = Spare::default();
    for input in &plan.inputs {
        if let Some(run) = view
            .levels
            .get_mut(input.level)
            .and_then(|l| l.runs.iter_mut().find(|r| r.id == input.run_id))
        {
            run.files.take_all(&input.files, &mut spare);
        }
    }
    while view.levels.len() <= plan.output_level {
        view.levels.push(Default::default());
    }
    let host = match plan.destination {
        Destination::New { .. } | Destination::Tiles => new_run_id,
        Destination::Existing { id, .. } => id,
    };
    let changes = plan.buffer_changes(host, plan.destination.is_new());
    if !outputs.is_empty() {
        let level = &mut view.levels[plan.output_level];
        match plan.destination {
            Destination::New { order } => {
                let at = placement::run_slot(&level.runs, order);
                level.runs.insert(
                    at,
                    RunView {
                        id: new_run_id,
                        order,
                        files: Files::from_spare(outputs, &mut spare),
                    },
                );
            }
            Destination::Existing { id, order } => {
                match level.runs.iter_mut().find(|r| r.id == id) {
                    Some(run) => run.files.extend_from(outputs, &mut spare),
                    // A concurrent merge (the simulator's asynchronous
                    // ones) took the run's last files meanwhile: it is
                    // created again, as the engine's edit does.
                    None => {
                        let at = placement::run_slot(&level.runs, order);
                        level.runs.insert(
                            at,
                            RunView {
                                id,
                                order,
                                files: Files::from_spare(outputs, &mut spare),
                            },
                        );
                    }
                }
            }
            Destination::Tiles => {
                let at = placement::run_slot(&level.runs, placement::TILE_RANK);
                let tiles = outputs.into_iter().map(|f| RunView {
                    id: f.id,
                    order: placement::TILE_RANK,
                    files: vec![f].into(),
                });
                level.runs.insert_all(at, tiles);
            }
        }
    }
    for level in &mut view.levels {
        level.runs.retain(|r| !r.files.is_empty());
    }
    let levels = &view.levels;
    apply_changes(&mut view.compaction_buffers, changes, |h| {
        levels.iter().any(|l| l.runs.iter().any(|r| r.id == h))
    });
    while view.levels.len() > 1 && view.levels.last().is_some_and(|l| l.runs.is_empty()) {
        view.levels.pop();
    }
    for (level, lo, hi) in &changed {
        view.changed(*level, lo, hi);
    }
}
