//! The one rule that turns a policy's task into a plan, and applies a plan to
//! a tree: mini-lsm's pair of pure functions (a task from a snapshot; the
//! snapshot after the task), shared by the engine's executor, the model
//! simulator and the policies' test model, so that they cannot drift apart.
//!
//! [`plan`] resolves a [`CompactionTask`] against a [`TreeView`]: it finds
//! every input file, checks the task keeps the tree's invariants, chooses
//! the destination, and decides between a [`Action::Move`] (the files move by
//! a metadata edit alone, as LevelDB's `IsTrivialMove`) and a
//! [`Action::Merge`]. The engine then does the I/O the plan asks for and
//! records it in a version edit; the simulator makes up the merge's output
//! from sizes; both end in the same tree, which [`apply`] computes for a
//! `TreeView`.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::lsbm::{apply_changes, BufferChange, BufferTask, Marker};
use crate::partition::{sweep_groups, Partition, Partitioning, SweepFile};
use crate::view::files::Spare;
use crate::{
    placement, CompactionTask, Error, FileView, Files, InlineKey, OutputRun, Result, RunView,
    TreeView,
};

/// The files of one input run taking part in a plan.
#[derive(Debug, Clone)]
pub struct PlannedInput {
    /// Level of the run.
    pub level: usize,
    /// Run id.
    pub run_id: u64,
    /// Position of the run in the tree's recency order (0 = newest).
    pub position: usize,
    /// The run's recency rank.
    pub order: u64,
    /// The participating files, sorted by key.
    pub files: Vec<FileView>,
}

impl PlannedInput {
    /// Bytes of the participating files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// The run receiving a plan's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// An existing run of the output level: its id and recency rank.
    Existing {
        /// The run's id.
        id: u64,
        /// The run's recency rank, with which [`apply`] creates it again
        /// if a concurrent merge emptied it meanwhile (as the engine does).
        order: u64,
    },
    /// A new run of the output level, ranked `order` (its newest input's).
    New {
        /// Recency rank of the new run.
        order: u64,
    },
    /// A new tile run per output file (see [`placement::TILE_RANK`]).
    Tiles,
}

impl Destination {
    /// True for new runs (a new run or new tiles).
    pub fn is_new(self) -> bool {
        !matches!(self, Destination::Existing { .. })
    }
}

/// What a plan does with its input files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The files of a single run move to the destination unchanged.
    Move,
    /// The files are merged and the output written as new files.
    Merge,
}

/// A task resolved against a tree.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Input runs with files, newest first.
    pub inputs: Vec<PlannedInput>,
    /// Level receiving the output.
    pub output_level: usize,
    /// Run receiving the output.
    pub destination: Destination,
    /// Move or merge.
    pub action: Action,
    /// Runs older than the output, `(level, run id)` newest first: a
    /// tombstone may be dropped only if none of their files that is not an
    /// input can hold its key.
    pub older_runs: Vec<(usize, u64)>,
    /// Output files of about this many bytes.
    pub target_file_size: u64,
    /// How a merge is partitioned (seed 000 ch. 5); `None` for a plain
    /// merge, and always for a move.
    pub partitioning: Option<Partitioning>,
    /// What the task does to the compaction buffers (seed 002).
    pub buffer: Option<BufferTask>,
    /// Why the policy picked the task.
    pub reason: String,
}

impl Plan {
    /// Ids of every input file.
    pub fn input_file_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.inputs
            .iter()
            .flat_map(|i| i.files.iter().map(|f| f.id))
    }

    /// Bytes of every input file.
    pub fn input_bytes(&self) -> u64 {
        self.inputs.iter().map(PlannedInput::bytes).sum()
    }

    /// The task's changes to the compaction buffers once its output is in
    /// run `host` (`host_is_new` if the task created it): the source run's
    /// input files join the host's buffer as the table of this round (as
    /// markers if it is frozen), and the source's own buffer retires
    /// files at the pace rule. Without a buffer task, a merge into an
    /// existing run drops that run's buffer (if it has one): versions
    /// entered the run that no buffer table holds.
    pub fn buffer_changes(&self, host: u64, host_is_new: bool) -> Vec<BufferChange<FileView>> {
        let Some(b) = &self.buffer else {
            return match host_is_new {
                true => Vec::new(),
                false => vec![BufferChange::Drop { host }],
            };
        };
        let mut changes = vec![BufferChange::New {
            host,
            complete: host_is_new,
        }];
        if let Some(bytes) = b.round_base {
            changes.push(BufferChange::Round { host, bytes });
        }
        for f in self
            .inputs
            .iter()
            .filter(|i| i.run_id == b.source)
            .flat_map(|i| &i.files)
        {
            changes.push(if b.frozen {
                BufferChange::Mark {
                    host,
                    source: b.source,
                    removed: Marker::of(f),
                }
            } else {
                BufferChange::Keep {
                    host,
                    source: b.source,
                    file: f.clone(),
                }
            });
        }
        if let Some(bytes) = b.base {
            changes.push(BufferChange::Base {
                host: b.source,
                bytes,
            });
        }
        changes.extend(b.retire.iter().map(|&file| BufferChange::Remove {
            host: b.source,
            file,
        }));
        changes
    }

    /// The work units of a merge, as `(input, file)` indices into
    /// [`Plan::inputs`]: with a partitioning other than `none`, the input
    /// files grouped by overlap (Alg. 5.2–5.3) — a one-file group is a
    /// trivial move into the output run, a larger one a sub-merge; else one
    /// group of every file.
    pub fn groups(&self) -> Vec<Vec<(usize, usize)>> {
        let all = || {
            self.inputs
                .iter()
                .enumerate()
                .flat_map(|(i, input)| (0..input.files.len()).map(move |f| (i, f)))
        };
        // Tiles are cut by space, not by key: every input meets every tile.
        let sweep = self
            .partitioning
            .is_some_and(|p| p.partition != Partition::None && p.partition.tile_rule().is_none());
        if !sweep {
            return vec![all().collect()];
        }
        let index: Vec<(usize, usize)> = all().collect();
        let files = index
            .iter()
            .enumerate()
            .map(|(n, &(i, f))| SweepFile {
                smallest: &self.inputs[i].files[f].smallest,
                largest: &self.inputs[i].files[f].largest,
                index: n,
            })
            .collect();
        sweep_groups(files)
            .into_iter()
            .map(|g| g.into_iter().map(|n| index[n]).collect())
            .collect()
    }
}

/// Runs of the tree in recency order: level by level, each newest first.
fn runs_newest_first(view: &TreeView) -> Vec<(usize, &RunView)> {
    view.levels
        .iter()
        .enumerate()
        .flat_map(|(l, level)| level.runs.iter().map(move |r| (l, r)))
        .collect()
}

fn invalid(task: &CompactionTask, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "compaction task ({}) is invalid: {why}",
        task.reason
    ))
}

/// Resolves `task` against `view`: the inputs, the destination, and whether
/// the files can move without a rewrite. A task is refused if it names a
/// run or file the tree does not hold (or one twice), a file a running
/// compaction owns, an output newer than its inputs, an existing output run
/// with files in the merged range that are not inputs, or if it would change
/// which of two overlapping files is newer.
pub fn plan(view: &TreeView, task: &CompactionTask) -> Result<Plan> {
    let positions = runs_newest_first(view);
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
    let newest = inputs[0].position;
    let new_order = inputs.iter().map(|i| i.order).max().unwrap_or(0);
    if task.output_level > view.levels.len() + 1 {
        return Err(invalid(task, "the output level skips a level"));
    }

    // Where the output lands in recency order, and which run receives it.
    let (dest_position, destination) = match task.output_run {
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
    if dest_position < newest {
        return Err(invalid(task, "the output would be newer than its inputs"));
    }
    let into_existing = matches!(destination, Destination::Existing { .. });
    if task.buffer.is_some() && destination == Destination::Tiles {
        return Err(invalid(task, "tiles keep no compaction buffer"));
    }
    let mut input_ids: Vec<u64> = inputs
        .iter()
        .flat_map(|i| i.files.iter().map(|f| f.id))
        .collect();
    input_ids.sort_unstable();
    let is_input = |id: u64| input_ids.binary_search(&id).is_ok();
    // The merged range: each input's files are sorted by key.
    let (mut lo, mut hi): (&[u8], &[u8]) = (&[], &[]);
    for (i, input) in inputs.iter().enumerate() {
        if let (Some(first), Some(last)) = (input.files.first(), input.files.last()) {
            if i == 0 || first.smallest.as_slice() < lo {
                lo = &first.smallest;
            }
            if i == 0 || last.largest.as_slice() > hi {
                hi = &last.largest;
            }
        }
    }
    if into_existing {
        let run = positions[dest_position].1;
        if let Some(f) = run.overlapping(lo, hi).find(|f| !is_input(f.id)) {
            return Err(invalid(
                task,
                format!(
                    "output run {} has file {} in the merged range that is not an input",
                    run.id, f.id
                ),
            ));
        }
    }

    // Recency safety: for a non-input file at position q and an input file
    // it overlaps at position p, the input is newer before the task iff
    // p < q, and the output is newer afterwards iff it lands above q: in the
    // destination run itself (existing, d < q) or in a new run placed just
    // above the run now at d (d <= q). Only positions between the newest
    // input and the later of the oldest input and the destination can
    // disagree.
    let last = inputs
        .iter()
        .map(|i| i.position)
        .max()
        .unwrap_or(newest)
        .max(dest_position);
    for (q, (_, run)) in positions
        .iter()
        .enumerate()
        .take(last.saturating_add(1))
        .skip(newest)
    {
        if into_existing && q == dest_position {
            continue;
        }
        // A run the task takes whole holds no file that is not an input.
        let whole = inputs
            .binary_search_by_key(&q, |i| i.position)
            .is_ok_and(|i| inputs[i].files.len() == run.files.len());
        if whole {
            continue;
        }
        let output_above = if into_existing {
            dest_position < q
        } else {
            dest_position <= q
        };
        // Two tiles of one level hold disjoint keys (what this check
        // proves of every tile it admits): nothing to order between them.
        let peer = |i: &PlannedInput| {
            i.level == positions[q].0
                && i.order == placement::TILE_RANK
                && run.order == placement::TILE_RANK
        };
        for input in inputs
            .iter()
            .filter(|i| i.position != q && (i.position < q) != output_above && !peer(i))
        {
            for f in &input.files {
                if let Some(other) = run
                    .overlapping(&f.smallest, &f.largest)
                    .find(|o| !is_input(o.id) && o.may_share_keys(f))
                {
                    return Err(invalid(
                        task,
                        format!(
                            "it would reorder versions of keys shared by file {} and file {}",
                            f.id, other.id
                        ),
                    ));
                }
            }
        }
    }

    let older_from = if into_existing {
        dest_position + 1
    } else {
        dest_position
    };
    // Input runs among them count too: their other files stay behind.
    let older_runs: Vec<(usize, u64)> = positions
        .iter()
        .skip(older_from)
        .map(|(l, r)| (*l, r.id))
        .collect();
    // A single run's files move as they are unless the destination is that
    // run (a rewrite in place) — the overlap check above already refused
    // anything they could collide with — or the move would carry
    // tombstones where no older file can hold their keys: a merge drops
    // them there (a full compaction leaves none behind).
    let single_source = inputs.len() == 1
        && !matches!(destination, Destination::Existing { id, .. } if id == inputs[0].run_id);
    let droppable_tombstones = || {
        inputs[0].files.iter().any(|f| {
            f.tombstones > 0
                && positions.iter().skip(older_from).all(|(_, run)| {
                    run.overlapping(&f.smallest, &f.largest)
                        .all(|o| is_input(o.id) || !o.may_share_keys(f))
                })
        })
    };
    let action = if single_source && !droppable_tombstones() {
        Action::Move
    } else {
        Action::Merge
    };
    Ok(Plan {
        inputs,
        output_level: task.output_level,
        destination,
        action,
        older_runs,
        target_file_size: task.target_file_size,
        // A single run's merge only drops tombstones: a partitioned one
        // would move its one-file groups, tombstones and all.
        partitioning: task.partitioning.filter(|_| !single_source),
        buffer: task.buffer.clone(),
        reason: task.reason.clone(),
    })
}

/// The tree after `plan`: its input files leave their runs, `outputs`
/// (sorted by key; for a [`Action::Move`], the moved files) enter the
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
    apply_changes(&mut view.buffers, changes, |h| {
        levels.iter().any(|l| l.runs.iter().any(|r| r.id == h))
    });
    while view.levels.len() > 1 && view.levels.last().is_some_and(|l| l.runs.is_empty()) {
        view.levels.pop();
    }
    for (level, lo, hi) in &changed {
        view.changed(*level, lo, hi);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::{LevelView, TaskInput};

    fn file(id: u64, lo: &[u8], hi: &[u8]) -> FileView {
        FileView {
            id,
            size: 10,
            smallest: lo.into(),
            largest: hi.into(),
            ..FileView::default()
        }
    }

    /// Runs `(level, run id, files)` newest first; orders count down.
    fn tree(runs: Vec<(usize, u64, Vec<FileView>)>) -> TreeView {
        let mut view = TreeView::default();
        let n = runs.len() as u64;
        for (i, (level, id, files)) in runs.into_iter().enumerate() {
            while view.levels.len() <= level {
                view.levels.push(LevelView::default());
            }
            view.levels[level].runs.push(RunView {
                id,
                order: n - i as u64,
                files: files.into(),
            });
        }
        view
    }

    fn task(inputs: &[(usize, u64, &[u64])], level: usize, output: OutputRun) -> CompactionTask {
        CompactionTask {
            inputs: inputs
                .iter()
                .map(|(l, r, f)| TaskInput {
                    level: *l,
                    run_id: *r,
                    file_ids: f.to_vec(),
                })
                .collect(),
            output_level: level,
            output_run: output,
            target_file_size: 100,
            partitioning: None,
            buffer: None,
            reason: "test".into(),
        }
    }

    fn refused(view: &TreeView, t: &CompactionTask, why: &str) {
        let e = plan(view, t).expect_err("refused").to_string();
        assert!(e.contains(why), "{e}");
    }

    /// A task naming many runs (a piled-up level 0 merged whole) finds
    /// them by lookup: the same plan, and the same refusals, as by scan.
    #[test]
    fn many_runs_are_found_and_checked_as_few_are() {
        // Twelve overlapping one-file runs of level 0, newest first.
        let runs: Vec<(usize, u64, Vec<FileView>)> = (0..12u64)
            .map(|i| (0, 100 + i, vec![file(1 + i, b"a", b"z")]))
            .collect();
        let view = tree(runs);
        let all: Vec<(usize, u64, Vec<u64>)> =
            (0..12u64).map(|i| (0, 100 + i, vec![1 + i])).collect();
        let named = |inputs: &[(usize, u64, Vec<u64>)]| {
            let inputs: Vec<(usize, u64, &[u64])> =
                inputs.iter().map(|(l, r, f)| (*l, *r, &f[..])).collect();
            task(&inputs, 1, OutputRun::New)
        };
        let p = plan(&view, &named(&all)).unwrap();
        let order: Vec<u64> = p.inputs.iter().map(|i| i.run_id).collect();
        assert_eq!(order, (100..112).collect::<Vec<u64>>(), "newest first");
        assert_eq!(
            (p.action, p.destination),
            (Action::Merge, Destination::New { order: 12 })
        );
        // Named in another order: the same plan.
        let mut shuffled = all.clone();
        shuffled.reverse();
        assert_eq!(plan(&view, &named(&shuffled)).unwrap().inputs.len(), 12);
        let mut twice = all.clone();
        twice.push((0, 105, vec![6]));
        refused(&view, &named(&twice), "run 105 named twice");
        let mut missing = all.clone();
        missing[7] = (0, 999, vec![8]);
        refused(&view, &named(&missing), "no run 999");
        // Leaving out a middle run that overlaps them would reorder keys.
        let mut gap = all;
        gap.remove(5);
        refused(&view, &named(&gap), "reorder versions");
    }

    /// Leveled's one-file push: file 1 (a..c) of run 10 merges into run 11,
    /// whose file 11 (b..m) reaches under run 10's neighbour file 2 (k..p).
    /// The output lands below file 2, which stays newer: allowed.
    #[test]
    fn a_push_past_an_overlapping_neighbour_is_allowed() {
        let view = tree(vec![
            (1, 10, vec![file(1, b"a", b"c"), file(2, b"k", b"p")]),
            (2, 11, vec![file(11, b"b", b"m")]),
        ]);
        let p = plan(
            &view,
            &task(&[(1, 10, &[1]), (2, 11, &[11])], 2, OutputRun::Existing(11)),
        )
        .unwrap();
        assert_eq!(p.action, Action::Merge);
        assert_eq!(p.destination, Destination::Existing { id: 11, order: 1 });
        assert_eq!(p.input_file_ids().collect::<Vec<_>>(), [1, 11]);
    }

    /// Skipping a run: file 1 pushed into run 12 past run 11's file 21,
    /// which shares keys with it, would make the older version newer.
    #[test]
    fn a_push_past_an_overlapping_newer_file_is_refused() {
        let view = tree(vec![
            (1, 10, vec![file(1, b"a", b"c")]),
            (2, 11, vec![file(21, b"b", b"d")]),
            (3, 12, vec![file(31, b"x", b"z")]),
        ]);
        let reorder = "reorder versions";
        refused(
            &view,
            &task(&[(1, 10, &[1])], 3, OutputRun::Existing(12)),
            reorder,
        );
        // A new run in level 3 is just as wrong, one in level 2 is fine.
        refused(&view, &task(&[(1, 10, &[1])], 3, OutputRun::New), reorder);
        let p = plan(&view, &task(&[(1, 10, &[1])], 2, OutputRun::New)).unwrap();
        assert_eq!(p.action, Action::Move);
        // Without shared keys the push is safe, and a move.
        let view = tree(vec![
            (1, 10, vec![file(1, b"a", b"c")]),
            (2, 11, vec![file(21, b"d", b"f")]),
            (3, 12, vec![file(31, b"x", b"z")]),
        ]);
        let p = plan(&view, &task(&[(1, 10, &[1])], 3, OutputRun::Existing(12))).unwrap();
        assert_eq!(p.action, Action::Move);
    }

    /// Merging runs 10 and 12 but not run 11 between them: run 12's data
    /// would rise above run 11's overlapping file.
    #[test]
    fn lifting_an_older_input_above_a_newer_file_is_refused() {
        let view = tree(vec![
            (1, 10, vec![file(1, b"a", b"c")]),
            (1, 11, vec![file(21, b"m", b"n")]),
            (1, 12, vec![file(31, b"l", b"o")]),
        ]);
        let inputs: &[(usize, u64, &[u64])] = &[(1, 10, &[1]), (1, 12, &[31])];
        refused(&view, &task(inputs, 1, OutputRun::New), "reorder versions");
        // Into run 12's place instead, below run 11: allowed.
        let p = plan(&view, &task(inputs, 1, OutputRun::Existing(12))).unwrap();
        assert_eq!(p.action, Action::Merge);
        // Runs 11 and 12 were older than the output; 12 is also an input,
        // but files of it that are not inputs would stay behind.
        assert_eq!(p.older_runs, []);
        let p = plan(&view, &task(&[(1, 10, &[1])], 1, OutputRun::Existing(11)));
        assert!(p.is_ok());
    }

    #[test]
    fn bad_tasks_are_refused() {
        let mut view = tree(vec![
            (0, 10, vec![file(1, b"a", b"c")]),
            (1, 11, vec![file(2, b"a", b"b"), file(3, b"x", b"z")]),
        ]);
        refused(&view, &task(&[(0, 9, &[1])], 1, OutputRun::New), "no run 9");
        refused(
            &view,
            &task(&[(0, 10, &[7])], 1, OutputRun::New),
            "no file 7",
        );
        refused(
            &view,
            &task(&[(0, 10, &[1, 1])], 1, OutputRun::New),
            "named twice",
        );
        refused(&view, &task(&[], 1, OutputRun::New), "no input files");
        refused(
            &view,
            &task(&[(0, 10, &[1])], 4, OutputRun::New),
            "skips a level",
        );
        refused(
            &view,
            &task(&[(0, 10, &[1])], 1, OutputRun::Existing(5)),
            "no output run 5",
        );
        // File 2 of the output run lies in the merged range but is no input.
        refused(
            &view,
            &task(&[(0, 10, &[1])], 1, OutputRun::Existing(11)),
            "not an input",
        );
        // The output may not rise above its inputs.
        refused(
            &view,
            &task(&[(1, 11, &[3])], 0, OutputRun::Existing(10)),
            "newer than its inputs",
        );
        let first = view.levels[0].runs[0].files.first().unwrap().id;
        view.levels[0].runs[0]
            .files
            .update(first, |f| f.busy = true);
        refused(
            &view,
            &task(&[(0, 10, &[1])], 1, OutputRun::New),
            "being compacted",
        );
    }

    /// A merge of a whole level names thousands of files: finding an id
    /// named twice costs a comparison per id, not per pair of ids. Repeats
    /// are still refused, wherever they are.
    #[test]
    fn the_repeat_check_is_linear_in_the_ids() {
        let n = 2000u64;
        let files = (1..=n)
            .map(|id| file(id, &id.to_be_bytes(), &id.to_be_bytes()))
            .collect();
        let view = tree(vec![(0, 10, files)]);
        let ids: Vec<u64> = (1..=n).rev().collect();
        let before = crate::work::id_checks();
        let p = plan(&view, &task(&[(0, 10, &ids)], 1, OutputRun::New)).unwrap();
        assert_eq!(p.input_file_ids().count() as u64, n);
        let checks = crate::work::id_checks() - before;
        assert!(checks <= n, "{checks} comparisons for {n} ids");
        for repeat in [1, n / 2, n] {
            let mut twice = ids.clone();
            twice.push(repeat);
            refused(
                &view,
                &task(&[(0, 10, &twice)], 1, OutputRun::New),
                &format!("file {repeat} named twice"),
            );
            // Named in the run's order, the check needs no set until the
            // order breaks, and still finds the repeat, next to its first
            // naming or after the last id.
            let ascending: Vec<u64> = (1..=n).collect();
            for at in [repeat as usize, n as usize] {
                let mut twice = ascending.clone();
                twice.insert(at, repeat);
                refused(
                    &view,
                    &task(&[(0, 10, &twice)], 1, OutputRun::New),
                    &format!("file {repeat} named twice"),
                );
            }
        }
        let before = crate::work::id_checks();
        let ascending: Vec<u64> = (1..=n).collect();
        plan(&view, &task(&[(0, 10, &ascending)], 1, OutputRun::New)).unwrap();
        assert_eq!(crate::work::id_checks() - before, n);
    }

    /// A push into a large run names a few hundred of its files: the planner
    /// finds them and `apply` takes them out and files the outputs with a
    /// few searches of the run in all, not one (or three) per file. The
    /// tree after it is the one a rebuild from scratch gives.
    #[test]
    fn a_merge_costs_searches_per_run_not_per_file() {
        let key = |k: u64| k.to_be_bytes();
        let span = |id: u64, lo: u64, hi: u64| file(id, &key(lo), &key(hi));
        // Level 2: files [10k, 10k + 9] for k < 5000; level 1: one file
        // over 300 of them.
        let lower: Vec<FileView> = (0..5000).map(|k| span(k + 1, 10 * k, 10 * k + 9)).collect();
        let mut view = tree(vec![
            (1, 10, vec![span(9000, 20_000, 22_995)]),
            (2, 11, lower.clone()),
        ]);
        let under: Vec<u64> = (2000..2300).map(|k| k + 1).collect();
        let t = task(
            &[(1, 10, &[9000]), (2, 11, &under)],
            2,
            OutputRun::Existing(11),
        );
        let before = crate::work::searches();
        let p = plan(&view, &t).unwrap();
        let planned = crate::work::searches() - before;
        assert_eq!(p.input_file_ids().count(), 301);
        assert!(planned <= 8, "{planned} searches to plan a 301-file merge");

        // 150 outputs of 20 keys each in the merged range.
        let outputs: Vec<FileView> = (0..150)
            .map(|k| span(10_000 + k, 20_000 + 20 * k, 20_000 + 20 * k + 19))
            .collect();
        let before = crate::work::searches();
        apply(&mut view, &p, outputs.clone(), 0);
        let applied = crate::work::searches() - before;
        assert!(applied <= 8, "{applied} searches to apply a 301-file merge");

        // The oracle: level 2 rebuilt from a sorted vector.
        let mut expected: Vec<FileView> = lower
            .into_iter()
            .filter(|f| !under.contains(&f.id))
            .chain(outputs)
            .collect();
        expected.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        let got: Vec<(u64, Vec<u8>)> = view.levels[2].runs[0]
            .files
            .iter()
            .map(|f| (f.id, f.smallest.to_vec()))
            .collect();
        let want: Vec<(u64, Vec<u8>)> = expected
            .iter()
            .map(|f| (f.id, f.smallest.to_vec()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(view.levels[2].runs[0].bytes(), 10 * want.len() as u64);
        assert!(view.levels[1].runs.is_empty());
        for f in &expected {
            assert_eq!(
                view.levels[2].runs[0].files.get(f.id).map(|g| g.id),
                Some(f.id)
            );
        }
    }

    fn spatial(id: u64, lo: &[u8], hi: &[u8], mbr: (f64, f64, f64, f64)) -> FileView {
        FileView {
            mbr: Some(crate::geometry::Rect::new(mbr.0, mbr.1, mbr.2, mbr.3)),
            ..file(id, lo, hi)
        }
    }

    /// Level 1 holds tiles 20 and 21 (key ranges overlapping, MBRs apart);
    /// level 2 tiles 30 (under 20) and 31 (touching 21's MBR). Pushing tile
    /// 20 down with tile 30 passes over tile 21 (a peer) and tile 31 (MBR
    /// apart), and makes one tile run per output file, named after it.
    #[test]
    fn tiles_need_no_order_among_peers_and_mbrs_prove_disjoint_keys() {
        let tile = |level, f: FileView| (level, f.id, vec![f]);
        let mut view = tree(vec![
            tile(1, spatial(20, b"a", b"m", (0.0, 0.0, 1.0, 1.0))),
            tile(1, spatial(21, b"b", b"n", (5.0, 5.0, 6.0, 6.0))),
            tile(2, spatial(30, b"a", b"z", (0.5, 0.5, 2.0, 2.0))),
            tile(2, spatial(31, b"c", b"y", (6.0, 6.0, 7.0, 7.0))),
        ]);
        for level in &mut view.levels {
            for run in &mut level.runs {
                run.order = placement::TILE_RANK;
            }
        }
        let push = task(&[(1, 20, &[20]), (2, 30, &[30])], 2, OutputRun::Tiles);
        let p = plan(&view, &push).unwrap();
        assert_eq!(
            (p.action, p.destination),
            (Action::Merge, Destination::Tiles)
        );
        // Without tile 30 the output would rise above a version it shares.
        refused(
            &view,
            &task(&[(1, 20, &[20])], 2, OutputRun::Tiles),
            "reorder versions",
        );
        // Tile 21 shares keys and MBR with tile 31: pushed alone, refused.
        refused(
            &view,
            &task(&[(1, 21, &[21])], 2, OutputRun::Tiles),
            "reorder versions",
        );
        apply(
            &mut view,
            &p,
            vec![
                spatial(40, b"a", b"k", (0.0, 0.0, 1.0, 2.0)),
                spatial(41, b"b", b"m", (1.5, 0.0, 2.0, 2.0)),
            ],
            0,
        );
        let level2: Vec<(u64, u64, Vec<u64>)> = view.levels[2]
            .runs
            .iter()
            .map(|r| (r.id, r.order, r.files.iter().map(|f| f.id).collect()))
            .collect();
        assert_eq!(
            level2,
            [(40, 0, vec![40]), (41, 0, vec![41]), (31, 0, vec![31])]
        );
        assert_eq!(view.levels[1].runs.len(), 1);
    }

    #[test]
    fn apply_places_outputs_and_drops_what_emptied() {
        let mut view = tree(vec![
            (0, 10, vec![file(1, b"a", b"c")]),
            (0, 11, vec![file(2, b"b", b"d")]),
            (1, 12, vec![file(3, b"a", b"b"), file(4, b"x", b"z")]),
        ]);
        // Merge level 0 with file 3 into level 1's run.
        let p = plan(
            &view,
            &task(
                &[(0, 10, &[1]), (0, 11, &[2]), (1, 12, &[3])],
                1,
                OutputRun::Existing(12),
            ),
        )
        .unwrap();
        assert_eq!(p.input_bytes(), 30);
        apply(&mut view, &p, vec![file(5, b"a", b"d")], 0);
        assert_eq!(view.levels[0].runs.len(), 0);
        let ids: Vec<u64> = view.levels[1].runs[0].files.iter().map(|f| f.id).collect();
        assert_eq!(ids, [5, 4]);
        // Move run 12 down to a new run of level 2: level 1 empties.
        let p = plan(&view, &task(&[(1, 12, &[5, 4])], 2, OutputRun::New)).unwrap();
        assert_eq!(p.action, Action::Move);
        let moved = p.inputs[0].files.clone();
        apply(&mut view, &p, moved, 13);
        assert_eq!(view.levels.len(), 3);
        assert!(view.levels[1].runs.is_empty());
        assert_eq!(view.levels[2].runs[0].id, 13);
        assert_eq!(view.levels[2].runs[0].order, 1);
    }

    /// Two merges planned against the same tree, as the simulator's
    /// asynchronous merges are: one moves file 1 into a gap of level 2's
    /// run 12, the other takes run 12's only file down to level 3 and is
    /// applied first. The first one's outputs are not lost: run 12 is
    /// created again with its rank, as the engine's edit does.
    #[test]
    fn apply_recreates_an_output_run_a_concurrent_merge_emptied() {
        let mut view = tree(vec![
            (1, 11, vec![file(1, b"a", b"c")]),
            (2, 12, vec![file(2, b"m", b"p")]),
        ]);
        let into = plan(&view, &task(&[(1, 11, &[1])], 2, OutputRun::Existing(12))).unwrap();
        let down = plan(&view, &task(&[(2, 12, &[2])], 3, OutputRun::New)).unwrap();
        assert_eq!(into.destination, Destination::Existing { id: 12, order: 1 });
        let moved = down.inputs[0].files.clone();
        apply(&mut view, &down, moved, 13);
        assert!(view.levels[2].runs.is_empty());
        let moved = into.inputs[0].files.clone();
        apply(&mut view, &into, moved, 0);
        let run = &view.levels[2].runs[0];
        assert_eq!((run.id, run.order), (12, 1));
        assert_eq!(run.files.iter().map(|f| f.id).collect::<Vec<_>>(), [1]);
        assert_eq!(view.levels[3].runs[0].files.first().map(|f| f.id), Some(2));
        assert!(view.levels[1].runs.is_empty());
    }
}
