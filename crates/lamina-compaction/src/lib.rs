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

mod blocks;
pub mod blsm;
pub mod buffer;
pub mod design;
pub mod error;
pub mod files;
pub mod geometry;
pub mod index;
pub mod key;
mod leveling;
pub mod partition;
pub mod plan;
pub mod runs;
pub mod spec;
pub mod stack;

pub use error::{Error, Result};
pub use files::Files;
pub use key::InlineKey;
pub use leveling::Leveling;
pub use runs::Runs;
pub use spec::{parse_spec, policy_from_spec, CompactionSpec, Family, Strategy, STRATEGIES};

/// The tree model's two placement rules, shared by every tree type (the
/// engine's `Version` and the [`TreeView`] that policies, the planner and
/// the simulator use), so a run or a file lands in the same place in both.
pub mod placement {
    /// The rank of a *tile*: a one-file run of a spatially partitioned
    /// level (leveled with `partition=str|rstar-grove`, seed 000 §4.3).
    /// The tiles of a level hold disjoint sets of keys — a key shared with
    /// another run lies in both files' MBRs, and the planner admits a tile
    /// only if no other tile of its level can hold one of its keys — so no
    /// two tiles of a level ever need ordering; they rank below every other
    /// run of the level (flushes rank from 1 up).
    pub const TILE_RANK: u64 = 0;

    /// A sorted run with a recency rank (larger = newer).
    pub trait Ranked {
        /// The run's rank.
        fn order(&self) -> u64;
    }

    /// A file with a key range.
    pub trait KeyRanged {
        /// Its smallest user key.
        fn smallest(&self) -> &[u8];
    }

    impl<F: KeyRanged> KeyRanged for std::sync::Arc<F> {
        fn smallest(&self) -> &[u8] {
            F::smallest(self)
        }
    }

    /// Where a run ranked `order` goes among `runs` (newest first): after
    /// every newer run.
    pub fn run_slot<R: Ranked>(runs: &[R], order: u64) -> usize {
        runs.partition_point(|r| r.order() > order)
    }

    /// The runs of the oldest rank among a level's `runs`: its oldest
    /// sorted run, or every tile of a tiled level. Space amplification
    /// takes the deepest level's as the estimate of the live data.
    pub fn oldest_rank<R: Ranked>(runs: &[R]) -> impl Iterator<Item = &R> {
        let oldest = runs.iter().map(R::order).min().unwrap_or(0);
        runs.iter().filter(move |r| r.order() == oldest)
    }

    /// Where a file starting at `smallest` goes among `files` (key order,
    /// disjoint): after every file starting below it.
    pub fn file_slot<F: KeyRanged>(files: &[F], smallest: &[u8]) -> usize {
        files.partition_point(|f| f.smallest() < smallest)
    }
}

impl placement::Ranked for RunView {
    fn order(&self) -> u64 {
        self.order
    }
}

impl placement::KeyRanged for FileView {
    fn smallest(&self) -> &[u8] {
        &self.smallest
    }
}

/// A read-only picture of one file.
#[derive(Debug, Clone, Default)]
pub struct FileView {
    /// File id.
    pub id: u64,
    /// Bytes on disk.
    pub size: u64,
    /// Entries stored.
    pub entries: u64,
    /// Tombstones stored.
    pub tombstones: u64,
    /// Smallest user key (inline if short: copying a file allocates
    /// nothing).
    pub smallest: InlineKey,
    /// Largest user key.
    pub largest: InlineKey,
    /// Creation time (unix ms).
    pub created_ms: u64,
    /// Time of the oldest tombstone (unix ms).
    pub oldest_tombstone_ms: Option<u64>,
    /// Smallest sequence number stored: the age of the file's oldest data.
    pub smallest_seq: u64,
    /// When the file arrived in its level (unix ms): its creation, or the
    /// trivial move that brought it there (since the last open).
    pub arrived_ms: u64,
    /// When a point lookup last read the file (unix ms; its arrival if never).
    pub last_read_ms: u64,
    /// True while a running compaction owns the file; policies must not pick it.
    pub busy: bool,
    /// The MBR of the file's points, for a spatial index's files (seed 000
    /// ch. 4); `None` otherwise.
    pub mbr: Option<geometry::Rect>,
}

impl FileView {
    /// True if this file's key range intersects `[lo, hi]`.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.smallest.as_slice() <= hi && lo <= self.largest.as_slice()
    }

    /// False only if the two files cannot hold a common key: their key
    /// ranges are disjoint, or both are spatial and their MBRs are (a key
    /// is a point, which lies in the MBR of every file holding it).
    pub fn may_share_keys(&self, other: &FileView) -> bool {
        self.overlaps(&other.smallest, &other.largest)
            && match (&self.mbr, &other.mbr) {
                (Some(a), Some(b)) => a.intersects(b),
                _ => true,
            }
    }
}

/// A read-only picture of one sorted run.
#[derive(Debug, Clone)]
pub struct RunView {
    /// Run id.
    pub id: u64,
    /// Recency rank (larger = newer).
    pub order: u64,
    /// Files sorted by key.
    pub files: Files,
}

impl RunView {
    /// Bytes of the run.
    pub fn bytes(&self) -> u64 {
        self.files.bytes()
    }

    /// Files intersecting `[lo, hi]`, in key order (policies ask this for
    /// every file of a level; a scan made the simulator superlinear).
    pub fn overlapping<'a>(
        &'a self,
        lo: &[u8],
        hi: &[u8],
    ) -> impl DoubleEndedIterator<Item = &'a FileView> + Clone + 'a {
        self.files.overlapping(lo, hi)
    }
}

/// A read-only picture of one level.
#[derive(Debug, Clone, Default)]
pub struct LevelView {
    /// Runs, newest first.
    pub runs: Runs,
}

impl LevelView {
    /// Bytes of the level.
    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(RunView::bytes).sum()
    }
}

/// A read-only picture of the tree handed to policies.
#[derive(Debug, Clone, Default)]
pub struct TreeView {
    /// Levels, shallowest first. Flushes add a new run to level 0.
    pub levels: Vec<LevelView>,
    /// Flushes so far.
    pub flushes: u64,
    /// Memtable size in bytes (the size of a full flush).
    pub buffer_bytes: u64,
    /// Current time (unix ms).
    pub now_ms: u64,
    /// Compaction buffers (seed 002) by host run id.
    pub buffers: buffer::Buffers<FileView>,
    /// Least-overlap rankings of runs, kept up to date by
    /// [`plan::apply`] (see [`index`]); a new view starts with none.
    pub index: index::OverlapIndex,
}

impl TreeView {
    /// The level at `i`, or an empty one beyond the deepest level.
    pub fn level(&self, i: usize) -> &LevelView {
        static EMPTY: LevelView = LevelView { runs: Runs::new() };
        self.levels.get(i).unwrap_or(&EMPTY)
    }
}

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
    pub buffer: Option<buffer::BufferTask>,
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
    fn trim_rule(&self) -> Option<buffer::TrimRule> {
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
