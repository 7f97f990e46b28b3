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
//!
//! [`plan`] takes its steps in this order, each in its own module:
//! `resolve::inputs` (find every input file), `resolve::destination`
//! (choose the run that receives the output), `check::output_run` and
//! `check::recency` (the task keeps the tree's invariants), then the
//! choice of [`Action`]; `apply.rs` holds [`apply`].

mod apply;
mod check;
mod resolve;
#[cfg(test)]
mod tests;

pub use apply::apply;

use crate::lsbm::{BufferChange, BufferTask, Marker};
use crate::partition::{sweep_groups, Partition, Partitioning, SweepFile};
use crate::{CompactionTask, Error, FileView, Result, RunView, TreeView};
use check::Merged;

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
    /// A new tile run per output file (see [`crate::placement::TILE_RANK`]).
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

/// The runs of a tree in recency order, with their levels.
type Positions<'a> = Vec<(usize, &'a RunView)>;

/// Runs of the tree in recency order: level by level, each newest first.
fn runs_newest_first(view: &TreeView) -> Positions<'_> {
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
    let inputs = resolve::inputs(&positions, task)?;
    if task.output_level > view.levels.len() + 1 {
        return Err(invalid(task, "the output level skips a level"));
    }
    let (dest, destination) = resolve::destination(&positions, task, &inputs)?;
    let into_existing = matches!(destination, Destination::Existing { .. });
    let merged = Merged::new(&inputs);
    if into_existing {
        check::output_run(&positions, task, &merged, dest)?;
    }
    check::recency(&positions, task, &inputs, &merged, dest, into_existing)?;

    let older_from = if into_existing { dest + 1 } else { dest };
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
        inputs[0]
            .files
            .iter()
            .any(|f| f.tombstones > 0 && !merged.older_may_hold(&positions, older_from, f))
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
