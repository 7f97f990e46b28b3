//! lamina's compaction laboratory: pure policies that pick work.
//!
//! A [`CompactionPolicy`] reads a [`TreeView`] (an owned, read-only picture
//! of the tree: per level its runs, per run its files with sizes, key ranges,
//! ages and tombstone counts) and returns [`CompactionTask`]s. This crate
//! depends on no storage code, so the compiler enforces that policies perform
//! no I/O on the database and know no engine type beyond the view: the same
//! policy objects drive the engine (`lamina`, whose executor runs the tasks)
//! and the model simulator (`lamina-sim`).

use std::fmt::Debug;

pub mod error;
pub mod geometry;
pub mod lsbm;
pub mod monkey;
pub mod partition;
pub mod plan;
pub mod policy;
pub mod spec;
pub mod view;
pub mod work;

pub use error::{Error, Result};
pub use policy::Leveling;
pub use spec::{
    parse_spec, policy_from_spec, Alias, CompactionSpec, Family, Strategy, ALIASES, STRATEGIES,
};
pub use view::{placement, FileView, Files, InlineKey, LevelView, RunView, Runs, TreeView};

/// Files of one run taking part in a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInput {
    /// Level of the run.
    pub level: usize,
    /// Run id.
    pub run_id: u64,
    /// Ids of the participating files of that run.
    pub file_ids: Vec<u64>,
}

impl TaskInput {
    /// Every file of `run`, which lives in `level`.
    pub fn whole_run(level: usize, run: &RunView) -> TaskInput {
        TaskInput {
            level,
            run_id: run.id,
            file_ids: run.files.iter().map(|f| f.id).collect(),
        }
    }
}

/// Where a task's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputRun {
    /// Into an existing run of the output level (leveling). The task must
    /// list as inputs every file of that run overlapping the merged range.
    Existing(u64),
    /// Into a new run of the output level, ranked as the newest input run.
    New,
    /// Each output file into a new run of its own, a tile of the output
    /// level ranked [`placement::TILE_RANK`] whose id is the file's.
    Tiles,
}

/// One unit of compaction work picked by a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionTask {
    /// Input files grouped by run.
    pub inputs: Vec<TaskInput>,
    /// Level receiving the output.
    pub output_level: usize,
    /// Run receiving the output.
    pub output_run: OutputRun,
    /// Split output into files of about this many bytes.
    pub target_file_size: u64,
    /// Partitioned merge (seed 000 ch. 5): the input files are grouped by
    /// overlap, one-file groups move, the others are sub-merged in parallel
    /// and cut by the rule's partitioner. `None`: one merge of every input,
    /// cut every `target_file_size` bytes.
    pub partitioning: Option<partition::Partitioning>,
    /// What the task does to the compaction buffers (`lsbm`); `None`: the
    /// merged-down files are deleted.
    pub buffer: Option<lsbm::BufferTask>,
    /// Why the policy picked this (for logs and stats).
    pub reason: String,
}

impl CompactionTask {
    /// Ids of every input file.
    pub fn input_file_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.inputs.iter().flat_map(|i| i.file_ids.iter().copied())
    }
}

/// A compaction strategy: decides, from a picture of the tree, what to merge.
pub trait CompactionPolicy: Send + Sync + Debug {
    /// The spec string that recreates this policy.
    fn spec(&self) -> String;
    /// Tasks to run now, most urgent first; empty if the tree is in shape.
    /// Tasks must not include busy files.
    fn pick(&self, view: &TreeView) -> Vec<CompactionTask>;
    /// The first task [`CompactionPolicy::pick`] returns, for callers that
    /// run one task and ask again (the simulator): a policy that builds
    /// its tasks one by one overrides it to build only that one. Default:
    /// the first of `pick`.
    fn pick_first(&self, view: &TreeView) -> Option<CompactionTask> {
        self.pick(view).into_iter().next()
    }
    /// A merge that cuts the sorted runs a read consults, for the engine to
    /// run once reads have paid for it (its seek-triggered compaction:
    /// LevelDB's `allowed_seeks`, charged to level 0 as a whole) while
    /// [`CompactionPolicy::pick`] has nothing to do. Default: none, reads
    /// trigger nothing.
    fn pick_for_reads(&self, _view: &TreeView) -> Option<CompactionTask> {
        None
    }
    /// The bound `k` on sorted runs that a bounded-depth policy restores once
    /// a flush's merges are done; `None` for unbounded policies. The engine
    /// uses it only to count overshoots (flushes that arrive while runs are
    /// still above the bound).
    fn run_bound(&self) -> Option<usize> {
        None
    }
    /// True while writes must wait for compactions: strategies whose
    /// compactions have priority over ingestion (`full`). The engine asks
    /// when a full memtable is switched. Default: never.
    fn stalls_writes(&self, _view: &TreeView) -> bool {
        false
    }
    /// The ratio between the capacities of adjacent levels, for policies
    /// that grow their levels geometrically. The engine sizes Monkey's
    /// per-level Bloom filters from it, so the filters follow the policy
    /// (including after `Db::set_compaction`). Default: none (a stack keeps
    /// one level).
    fn size_ratio(&self) -> Option<f64> {
        None
    }
    /// How the policy's merges (and the flushes that make its runs) are
    /// partitioned into files (seed 000 ch. 5); range rules also make new
    /// tables keep key histograms. Default: none.
    fn partitioning(&self) -> Option<partition::Partitioning> {
        None
    }
    /// The trim pass the engine runs over the compaction buffers (seed 002
    /// Alg. 2), for policies that keep them. Default: none — the engine
    /// then removes every buffer left from an earlier policy.
    fn trim_rule(&self) -> Option<lsbm::TrimRule> {
        None
    }
}

/// Engine settings a policy spec may default from.
#[derive(Debug, Clone, Copy)]
pub struct PolicyDefaults {
    /// Size ratio T.
    pub size_ratio: usize,
    /// Output file size.
    pub target_file_size: u64,
}

impl Default for PolicyDefaults {
    /// The engine's defaults (`Options::default()`): T = 10, 16 MiB files.
    fn default() -> Self {
        PolicyDefaults {
            size_ratio: 10,
            target_file_size: 16 << 20,
        }
    }
}

/// Parses a numeric spec parameter.
pub(crate) fn param<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| Error::InvalidArgument(format!("bad value {value:?} for parameter {key}")))
}
