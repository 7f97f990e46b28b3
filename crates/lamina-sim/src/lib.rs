//! A model simulator for lamina's compaction policies.
//!
//! The simulator runs the engine's own [`CompactionPolicy`] objects (built
//! by [`lamina_compaction::policy_from_spec`]) over a model tree: the
//! model *is* a [`TreeView`], mutated in place, so a policy sees exactly
//! the kind of picture the engine hands it and nothing is rebuilt between
//! decisions. Data is not stored, only sizes and key ranges:
//!
//! * a flush of `ℓ` bytes adds a new run to level 0 holding one file that
//!   spans the whole key space (keys are u64, 8 bytes big-endian; hashed
//!   insert order, as in the papers' workloads);
//! * after each flush the simulator applies the policy's first task, asks
//!   again, and repeats until the policy returns nothing: every merge
//!   completes before the next flush (the engine with one compaction thread
//!   and no flush during a merge);
//! * or, with [`AsyncMerges`], merges take time: time runs in flush
//!   intervals, a merge reading `b` bytes takes `cost · b / buffer_bytes`
//!   of them while flushes keep arriving, up to `threads` merges run at
//!   once with their runs busy (the policy sees them as the engine's do),
//!   each is applied through the same planner when it ends, and a flush
//!   may wait (stall) while `stall_runs` runs exist;
//! * a merge writes the sum of its inputs, or less with a duplicate ratio
//!   `d`: the largest input run keeps its bytes and every other input run
//!   loses the fraction `d` of its bytes to keys it shares with the others;
//!   with a per-file overhead `o` (index, filter, footer of an SST; 0 by
//!   default) only the data adds up and each output file carries one `o`;
//! * a merge into a new run writes one file spanning the union of the input
//!   ranges (a stack-based run is one SSTable, as in the papers); a merge
//!   into an existing run (leveling) is cut into files of the task's
//!   `target_file_size`, spread over the key range by the inputs' data
//!   density (each file's bytes uniform over its range);
//! * a task is checked, resolved and applied by [`lamina_compaction::plan`],
//!   the planner the engine's executor uses: a task whose inputs all come
//!   from one run other than the destination is a trivial move (no bytes
//!   written), as in the engine.
//!
//! Write amplification has two definitions ([`WaDefinition`]):
//!
//! * `engine` (the default): `(flush bytes + merge bytes written) / flush
//!   bytes`, as `DbStats::write_amplification` counts it: a flush writes its
//!   SST, and a merge that takes it rewrites those bytes;
//! * `paper`: seed 003's Problem 1, `W(σ) = Σ_t δ(σ_t, σ_{t−1}) / Σ_t ℓ_t`,
//!   where `δ` is the size of the SSTables present after step `t` that were
//!   not present before it. The memtable flushed at `t` goes directly into
//!   the one new SSTable of step `t`: when that step's merges take it, its
//!   bytes are counted once, in the merge output, and a run written and
//!   merged again within one step is not counted at all. Use it when
//!   comparing with the papers' tables.
//!
//! The sorted-run count is
//! reported after each flush's merges (`sorted_runs`, the papers' SSTable
//! count) and right after the flush before any merge (`runs_at_flush`, what
//! the engine's `avg_sorted_runs` samples). Transient space amplification
//! of a flush is the largest total size during its merges (inputs and
//! output coexist until a merge ends) divided by the bytes flushed so far.

use rustc_hash::FxHashMap;

use lamina_compaction::partition::{binary_split, dyadic_root, Partition, Partitioning};
use lamina_compaction::plan::{self, Action, Destination};
use lamina_compaction::{
    policy_from_spec, CompactionPolicy, CompactionTask, FileView, InlineKey, LevelView,
    PolicyDefaults, RunView, TreeView,
};

pub mod plot;

/// Errors of a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The policy spec does not parse.
    #[error("policy {spec:?}")]
    Spec {
        /// The spec.
        spec: String,
        /// Why.
        #[source]
        source: lamina_compaction::Error,
    },
    /// A task names runs or files the model does not hold, or would break
    /// the tree's invariants.
    #[error("policy {policy}: invalid task at flush {flush} ({reason}): {why}")]
    InvalidTask {
        /// The policy's spec.
        policy: String,
        /// The flush after which it was picked.
        flush: u64,
        /// The task's reason.
        reason: String,
        /// What is wrong.
        why: String,
    },
    /// The policy kept returning tasks.
    #[error("policy {policy}: still merging after {merges} merges at flush {flush}")]
    NotSettling {
        /// The policy's spec.
        policy: String,
        /// The flush.
        flush: u64,
        /// Merges applied in that flush.
        merges: u64,
    },
    /// Bad simulation settings.
    #[error("{0}")]
    Config(String),
    /// The policy cut a merge into spatial tiles (`partition=str` or
    /// `rstar-grove`), which are cut by the points of the keys: the model
    /// has keys but no points, so it refuses rather than guess (as the
    /// engine refuses them without `Options::spatial`).
    #[error(
        "policy {policy}: spatial tiles (partition=str or rstar-grove) are cut by the keys' \
         points, which the model does not have; simulate partition=size, or run the engine \
         on a spatial dataset (`lamina spatial`)"
    )]
    SpatialTiles {
        /// The policy's spec.
        policy: String,
    },
}

/// Result of a simulation step.
pub type Result<T> = std::result::Result<T, SimError>;

/// Settings of the model.
#[derive(Debug, Clone, Copy)]
pub struct ModelOptions {
    /// `TreeView::memtable_bytes` (the memtable size policies see) and the
    /// default output file size of policies that cut files (`leveled`).
    pub buffer_bytes: u64,
    /// Size ratio default for specs that omit it (`tiered`, `leveled`,
    /// `leveling`), as `Options::size_ratio`.
    pub size_ratio: usize,
    /// Duplicate ratio in `[0, 1)`: the share of a non-largest input run's
    /// bytes that a merge drops.
    pub dup_ratio: f64,
    /// Bytes every file carries besides its data (an SST's index, filter,
    /// properties and footer). A merge of `n` files into `m` writes the
    /// inputs' data plus `m` overheads, `(n − m) ×` this less than their
    /// sizes. 0 (the papers' model): sizes add up.
    pub file_overhead: u64,
    /// Merges allowed after one flush before giving up.
    pub max_merges_per_flush: u64,
    /// Which write amplification the records and the summary report.
    pub wa: WaDefinition,
    /// Where each flush's keys lie (for partitioned merges, seed 000 ch. 5).
    pub keys: KeyModel,
    /// Merges that take time while flushes go on; `None` (the papers'
    /// model): every merge completes before the next flush.
    pub merges: Option<AsyncMerges>,
}

/// Asynchronous merges: time runs in flush intervals (one flush arrives
/// per interval unless it stalls); a merge started at time `t` reading `b`
/// bytes ends at `t + cost · b / buffer_bytes` and is applied then, its
/// inputs marked busy meanwhile, as the engine's background merges are.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AsyncMerges {
    /// Flush intervals a merge takes per buffer of bytes it reads (0:
    /// merges end when they start, the sequential model with a thread
    /// limit). Trivial moves take no time.
    pub cost: f64,
    /// Merges that may run at once (at least 1).
    pub threads: usize,
    /// A flush waits while at least this many runs exist and a merge is
    /// running (0: flushes never wait). It also waits while the policy
    /// holds writes ([`CompactionPolicy::stalls_writes`]) and a merge is
    /// running.
    pub stall_runs: usize,
}

/// Where a flush's keys lie in the model's `u64` key space. Keys are spread
/// evenly within a flush's range; partitioned merges and flushes cut files
/// with exact sizes from that density (no StreamHist).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyModel {
    /// Every flush spans nearly the whole key space (unique random keys).
    #[default]
    Uniform,
    /// Flush `t` holds `[t·2^32, (t+1)·2^32)`: disjoint, in order
    /// (sequential keys; every partitioned merge is trivial moves).
    Sequential,
}

/// How write amplification counts a flush that a merge of the same step
/// rewrites (see the crate docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaDefinition {
    /// Flush bytes plus every merge's output, as the engine's statistics.
    #[default]
    Engine,
    /// Seed 003's `W(σ)`: only the SSTables that exist at the end of a step.
    Paper,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            buffer_bytes: 1 << 20,
            size_ratio: 10,
            dup_ratio: 0.0,
            file_overhead: 0,
            max_merges_per_flush: 1_000_000,
            wa: WaDefinition::Engine,
            keys: KeyModel::Uniform,
            merges: None,
        }
    }
}

/// What one flush did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct FlushRecord {
    /// Flush number, from 1.
    pub flush: u64,
    /// Bytes of this flush.
    pub flush_bytes: u64,
    /// Write amplification so far, by [`ModelOptions::wa`].
    pub write_amplification: f64,
    /// Sorted runs after this flush's merges.
    pub sorted_runs: usize,
    /// Mean of `sorted_runs` over flushes so far.
    pub avg_sorted_runs: f64,
    /// Sorted runs right after the flush, before merging.
    pub runs_at_flush: usize,
    /// Mean of `runs_at_flush` so far (the engine's `avg_sorted_runs`).
    pub avg_runs_at_flush: f64,
    /// Largest total size during this flush's merges / bytes flushed so far.
    pub transient_space_amplification: f64,
    /// Merges (trivial moves included) applied after this flush (with
    /// asynchronous merges: those that ended since the previous flush).
    pub merges: u64,
    /// Flush intervals this flush waited for merges (asynchronous merges).
    pub stalled: f64,
}

/// Totals of a simulation.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// The policy's spec (as it prints itself).
    pub policy: String,
    /// Flushes simulated.
    pub flushes: u64,
    /// Bytes flushed.
    pub flush_bytes: u64,
    /// Bytes written by merges.
    pub merge_bytes_written: u64,
    /// Bytes of the SSTables each step added (seed 003's `Σ δ`).
    pub new_sstable_bytes: u64,
    /// The definition `write_amplification` uses.
    pub wa_definition: WaDefinition,
    /// `(flush bytes + merge bytes written) / flush bytes` (`engine`) or
    /// `new_sstable_bytes / flush bytes` (`paper`).
    pub write_amplification: f64,
    /// Sorted runs at the end.
    pub sorted_runs: usize,
    /// Mean sorted runs after each flush's merges.
    pub avg_sorted_runs: f64,
    /// Most sorted runs after a flush's merges.
    pub max_sorted_runs: usize,
    /// Mean sorted runs right after each flush (the engine's definition).
    pub avg_runs_at_flush: f64,
    /// Most sorted runs right after a flush.
    pub max_runs_at_flush: usize,
    /// Largest transient space amplification over all flushes.
    pub max_transient_space_amplification: f64,
    /// The first flush at which it was reached.
    pub max_transient_flush: u64,
    /// Total size at the end / the oldest sorted run's size (its tiles
    /// for a tiled last level): the engine's `DbStats::space_amplification`.
    pub space_amplification: f64,
    /// Merges that wrote data.
    pub merges: u64,
    /// Trivial moves.
    pub trivial_moves: u64,
    /// Files moved unchanged within partitioned merges.
    pub moved_files: u64,
    /// Sub-merges of merges (a plain merge is one, as in the engine).
    pub sub_merges: u64,
    /// Files at the end.
    pub files: u64,
    /// Run sizes at the end: per level, newest run first.
    pub runs: Vec<Vec<u64>>,
    /// Flush intervals from the first flush to the last (flushes − 1 plus
    /// the stalls; asynchronous merges).
    pub elapsed: f64,
    /// Flush intervals flushes waited for merges.
    pub stalled: f64,
    /// Merges still running at the end.
    pub merges_running: usize,
    /// Sorted runs averaged over time rather than sampled at flushes (with
    /// asynchronous merges, runs come and go between flushes; without,
    /// `avg_sorted_runs`).
    pub time_avg_runs: f64,
}

/// A merge in progress (asynchronous merges).
#[derive(Debug)]
struct Running {
    finish: f64,
    plan: plan::Plan,
}

/// A fixed pseudo-random permutation of `u64` (splitmix64's finalizer).
fn scramble(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Encodes a model key.
pub fn key(k: u64) -> Vec<u8> {
    k.to_be_bytes().to_vec()
}

/// Decodes a model key (a prefix of up to 8 bytes, zero-padded).
pub fn key_value(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(b)
}

/// One input file of a task, resolved.
#[derive(Debug, Clone, Copy)]
struct Piece {
    lo: u64,
    hi: u64,
    size: u64,
    /// The flush its oldest data came with.
    seq: u64,
}

thread_local! {
    static CUT_WORK: std::cell::Cell<CutWork> = const {
        std::cell::Cell::new(CutWork { pieces_read: 0, files_cut: 0 })
    };
}

/// What cutting merges' outputs at BINARYSPLIT's bounds (`partition=local`
/// or `global`) has cost on this thread so far, for tests that bound it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CutWork {
    /// Input pieces read to estimate the bytes in a key range.
    pub pieces_read: u64,
    /// Output files cut.
    pub files_cut: u64,
}

/// [`CutWork`] so far on this thread.
pub fn cut_work() -> CutWork {
    CUT_WORK.with(std::cell::Cell::get)
}

fn count_cut_work(pieces_read: u64, files_cut: u64) {
    CUT_WORK.with(|w| {
        let mut work = w.get();
        work.pieces_read = work.pieces_read.wrapping_add(pieces_read);
        work.files_cut = work.files_cut.wrapping_add(files_cut);
        w.set(work);
    });
}

/// The pieces a key range meets, in their order, found without reading
/// the others: a max-tree over their `hi` (the sweep hands them over sorted
/// by `lo`, so those starting by the range's end are a prefix, and the
/// tree finds the ones in it reaching the range's start). The sum over
/// them adds the same terms in the same order as a loop over every piece,
/// so it is the same float.
struct Meets<'a> {
    pieces: &'a [Piece],
    sorted: bool,
    /// Node `n` holds the highest `hi` under it; leaves from `width` on.
    reach: Vec<u64>,
    width: usize,
}

impl<'a> Meets<'a> {
    fn new(pieces: &'a [Piece]) -> Meets<'a> {
        let width = pieces.len().next_power_of_two();
        let mut reach = vec![0; 2 * width];
        for (i, p) in pieces.iter().enumerate() {
            reach[width + i] = p.hi;
        }
        for n in (1..width).rev() {
            reach[n] = reach[2 * n].max(reach[2 * n + 1]);
        }
        Meets {
            pieces,
            sorted: pieces.windows(2).all(|w| w[0].lo <= w[1].lo),
            reach,
            width,
        }
    }

    /// Hands `f` the pieces meeting `[l, u]`, in order (every piece, in
    /// order, if they came unsorted).
    fn each_meeting(&self, l: u64, u: u64, mut f: impl FnMut(&Piece)) {
        let mut read = 0;
        let mut count = |piece: &Piece| {
            read += 1;
            f(piece);
        };
        if self.sorted {
            let to = self.pieces.partition_point(|p| p.lo <= u);
            self.visit(1, 0, self.width, to, l, &mut count);
        } else {
            self.pieces.iter().for_each(count);
        }
        count_cut_work(read, 0);
    }

    /// Depth first, left to right, from node `n` (pieces `[from, end)`):
    /// a node wholly past `to` or reaching short of `l` holds none. The
    /// depth is the log of the pieces.
    fn visit(
        &self,
        n: usize,
        from: usize,
        end: usize,
        to: usize,
        l: u64,
        f: &mut impl FnMut(&Piece),
    ) {
        if from >= to || self.reach.get(n).is_none_or(|&r| r < l) {
            return;
        }
        if end - from == 1 {
            if let Some(piece) = self.pieces.get(from) {
                f(piece);
            }
            return;
        }
        let mid = from + (end - from) / 2;
        self.visit(2 * n, from, mid, to, l, f);
        self.visit(2 * n + 1, mid, end, to, l, f);
    }
}

/// The oldest data among `pieces`: every output of a merge holds some of
/// each input (the model's keys are spread evenly), so its oldest too.
fn oldest(pieces: &[Piece]) -> u64 {
    pieces.iter().map(|p| p.seq).min().unwrap_or(0)
}

/// The simulator: a model tree driven by one policy.
#[derive(Debug)]
pub struct Simulator {
    policy: Box<dyn CompactionPolicy>,
    spec: String,
    opts: ModelOptions,
    view: TreeView,
    next_id: u64,
    flush_bytes: u64,
    merge_bytes: u64,
    /// Seed 003's `Σ δ`: bytes of the files each step left that it created.
    new_sstable_bytes: u64,
    /// Files created during the current step (id → bytes) and still present.
    step_files: FxHashMap<u64, u64>,
    total_bytes: u64,
    run_sum: u128,
    run_sum_at_flush: u128,
    max_runs: usize,
    max_runs_at_flush: usize,
    max_transient: f64,
    max_transient_flush: u64,
    merges: u64,
    trivial_moves: u64,
    moved_files: u64,
    sub_merges: u64,
    /// Time in flush intervals (asynchronous merges).
    clock: f64,
    stalled: f64,
    running: Vec<Running>,
    /// ∫ sorted runs dt up to `counted_to` (asynchronous merges).
    runs_time: f64,
    counted_to: f64,
}

impl Simulator {
    /// A simulator running `spec` (any spec `policy_from_spec` accepts).
    pub fn from_spec(spec: &str, opts: ModelOptions) -> Result<Self> {
        let defaults = PolicyDefaults {
            size_ratio: opts.size_ratio,
            target_file_size: opts.buffer_bytes.max(1),
        };
        let policy = policy_from_spec(spec, defaults).map_err(|source| SimError::Spec {
            spec: spec.to_string(),
            source,
        })?;
        Self::new(policy, opts)
    }

    /// A simulator running `policy`.
    pub fn new(policy: Box<dyn CompactionPolicy>, opts: ModelOptions) -> Result<Self> {
        if let Some(a) = opts.merges {
            if !(a.cost.is_finite() && a.cost >= 0.0) || a.threads == 0 {
                return Err(SimError::Config(
                    "asynchronous merges need a finite cost >= 0 and at least 1 thread".into(),
                ));
            }
            if opts.wa == WaDefinition::Paper {
                return Err(SimError::Config(
                    "the paper's write amplification counts the SSTables a flush step leaves, \
                     which asynchronous merges do not settle: use the engine's"
                        .into(),
                ));
            }
        }
        if !(0.0..1.0).contains(&opts.dup_ratio) {
            return Err(SimError::Config(format!(
                "duplicate ratio must be in [0, 1), not {}",
                opts.dup_ratio
            )));
        }
        let spec = policy.spec();
        Ok(Simulator {
            policy,
            spec,
            opts,
            view: TreeView {
                levels: vec![LevelView::default()],
                flushes: 0,
                memtable_bytes: opts.buffer_bytes,
                ..TreeView::default()
            },
            next_id: 0,
            flush_bytes: 0,
            merge_bytes: 0,
            new_sstable_bytes: 0,
            step_files: FxHashMap::default(),
            total_bytes: 0,
            run_sum: 0,
            run_sum_at_flush: 0,
            max_runs: 0,
            max_runs_at_flush: 0,
            max_transient: 0.0,
            max_transient_flush: 0,
            merges: 0,
            trivial_moves: 0,
            moved_files: 0,
            sub_merges: 0,
            clock: 0.0,
            stalled: 0.0,
            running: Vec::new(),
            runs_time: 0.0,
            counted_to: 0.0,
        })
    }

    /// The policy's spec.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// The model tree, as the policy sees it.
    pub fn view(&self) -> &TreeView {
        &self.view
    }

    /// Run sizes: per level, newest run first.
    pub fn run_sizes(&self) -> Vec<Vec<u64>> {
        self.view
            .levels
            .iter()
            .map(|l| l.runs.iter().map(RunView::bytes).collect())
            .collect()
    }

    /// Bytes of the oldest sorted run: the last run of the deepest
    /// non-empty level, with the runs of its rank (a tiled level's tiles).
    fn oldest_run_bytes(&self) -> u64 {
        let Some(level) = self.view.levels.iter().rev().find(|l| !l.runs.is_empty()) else {
            return 0;
        };
        lamina_compaction::placement::oldest_rank(&level.runs)
            .map(RunView::bytes)
            .sum()
    }

    /// Sorted runs now.
    pub fn sorted_runs(&self) -> usize {
        self.view.levels.iter().map(|l| l.runs.len()).sum()
    }

    fn alloc_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A file made now, whose oldest data came with flush `seq` (the
    /// model's sequence numbers count flushes: the `old` movement policy
    /// ranks files by them).
    fn new_file(&self, id: u64, size: u64, lo: u64, hi: u64, seq: u64) -> FileView {
        FileView {
            id,
            size,
            entries: size,
            tombstones: 0,
            // `key(lo)` and `key(hi)`, held inline: no allocation.
            smallest: InlineKey::new(&lo.to_be_bytes()),
            largest: InlineKey::new(&hi.to_be_bytes()),
            created_ms: self.view.now_ms,
            arrived_ms: self.view.now_ms,
            smallest_seq: seq,
            oldest_tombstone_ms: None,
            busy: false,
            ..Default::default()
        }
    }

    /// Flushes `bytes`, then applies the policy's tasks until it is done
    /// (with asynchronous merges: finishes the merges that end before this
    /// flush, waits if it must stall, and starts what the policy picks).
    pub fn flush(&mut self, bytes: u64) -> Result<FlushRecord> {
        if let Some(a) = self.opts.merges {
            return self.flush_async(bytes, a);
        }
        self.add_flush(bytes);
        let flush = self.view.flushes;
        self.clock = flush.saturating_sub(1) as f64;
        let runs_at_flush = self.sorted_runs();
        let mut peak = self.total_bytes;
        let mut merges = 0;
        while let Some(task) = self.policy.pick_first(&self.view) {
            if merges >= self.opts.max_merges_per_flush {
                return Err(SimError::NotSettling {
                    policy: self.spec.clone(),
                    flush,
                    merges,
                });
            }
            let during = self.apply(&task)?;
            peak = peak.max(during);
            merges += 1;
        }
        self.new_sstable_bytes += self.step_files.values().sum::<u64>();
        Ok(self.record(bytes, runs_at_flush, peak, merges, 0.0))
    }

    fn flush_async(&mut self, bytes: u64, a: AsyncMerges) -> Result<FlushRecord> {
        let flush = self.view.flushes + 1;
        let arrival = if flush == 1 { 0.0 } else { self.clock + 1.0 };
        let mut peak = self.total_bytes;
        let mut merges = 0;
        while let Some(i) = self.next_to_finish(Some(arrival)) {
            peak = peak.max(self.finish(i, a, flush)?);
            merges += 1;
        }
        self.clock = arrival;
        let mut stalled = 0.0;
        // The flush waits, as the engine's writer does at a memtable
        // switch, while too many runs exist or the policy holds writes
        // (its compactions have priority over ingestion).
        while (a.stall_runs > 0 && self.sorted_runs() >= a.stall_runs)
            || self.policy.stalls_writes(&self.view)
        {
            let Some(i) = self.next_to_finish(None) else {
                break;
            };
            stalled += self.running[i].finish - self.clock;
            peak = peak.max(self.finish(i, a, flush)?);
            merges += 1;
        }
        self.stalled += stalled;
        self.count_runs_to(self.clock);
        self.add_flush(bytes);
        let runs_at_flush = self.sorted_runs();
        peak = peak.max(self.total_bytes);
        peak = peak.max(self.start_merges(a, flush)?);
        Ok(self.record(bytes, runs_at_flush, peak, merges, stalled))
    }

    /// Adds the runs present since the last change to the time integral.
    fn count_runs_to(&mut self, t: f64) {
        self.runs_time += self.sorted_runs() as f64 * (t - self.counted_to).max(0.0);
        self.counted_to = t;
    }

    /// The running merge that ends first (the first started on ties), if it
    /// ends by `by`.
    fn next_to_finish(&self, by: Option<f64>) -> Option<usize> {
        let (i, r) = self
            .running
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.finish.total_cmp(&b.1.finish))?;
        by.is_none_or(|t| r.finish <= t).then_some(i)
    }

    /// Applies running merge `i` at its end time, then starts what the
    /// policy picks next; returns the largest total size meanwhile.
    fn finish(&mut self, i: usize, a: AsyncMerges, flush: u64) -> Result<u64> {
        let done = self.running.remove(i);
        self.clock = self.clock.max(done.finish);
        self.count_runs_to(self.clock);
        let during = self.execute(&done.plan)?;
        Ok(during.max(self.start_merges(a, flush)?))
    }

    /// Starts the policy's tasks while a thread is free; zero-time tasks
    /// (trivial moves, or every merge at cost 0) are applied at once.
    /// Returns the largest total size while applying them.
    fn start_merges(&mut self, a: AsyncMerges, flush: u64) -> Result<u64> {
        let mut peak = self.total_bytes;
        let mut started = 0;
        while self.running.len() < a.threads {
            let Some(task) = self.policy.pick_first(&self.view) else {
                break;
            };
            if started >= self.opts.max_merges_per_flush {
                return Err(SimError::NotSettling {
                    policy: self.spec.clone(),
                    flush,
                    merges: started,
                });
            }
            started += 1;
            let plan =
                plan::plan(&self.view, &task).map_err(|e| self.invalid(&task, e.to_string()))?;
            let duration = match plan.action {
                Action::Move => 0.0,
                Action::Merge => {
                    a.cost * plan.input_bytes() as f64 / self.opts.buffer_bytes.max(1) as f64
                }
            };
            if duration == 0.0 {
                peak = peak.max(self.execute(&plan)?);
                continue;
            }
            for input in &plan.inputs {
                let Some(run) = self
                    .view
                    .levels
                    .get_mut(input.level)
                    .and_then(|l| l.runs.iter_mut().find(|r| r.id == input.run_id))
                else {
                    continue;
                };
                for f in &input.files {
                    let mut held = false;
                    run.files.update(f.id, |f| {
                        held = f.busy;
                        f.busy = true;
                    });
                    if held {
                        return Err(self.invalid(&task, "it takes a file a running merge holds"));
                    }
                }
            }
            self.running.push(Running {
                finish: self.clock + duration,
                plan,
            });
        }
        Ok(peak)
    }

    /// Adds a flush of `bytes` as the newest run of level 0.
    fn add_flush(&mut self, bytes: u64) {
        self.view.flushes += 1;
        self.view.now_ms = self.view.flushes;
        let flush = self.view.flushes;
        let partitioning = self
            .policy
            .partitioning()
            .filter(|p| p.partition != Partition::None);
        let (lo, hi) = match self.opts.keys {
            // Random keys do not reach the ends of the key space: under a
            // partitioned policy the ends sit a pseudo-random gap inside
            // (below 2^54, about the gap a few thousand random keys leave),
            // different per flush, so Local-Range's midpoints differ between
            // runs as they do with real keys. Other policies keep the papers'
            // model, where every flush spans the whole space.
            KeyModel::Uniform if partitioning.is_some() => (
                scramble(2 * flush) >> 10,
                u64::MAX - (scramble(2 * flush + 1) >> 10),
            ),
            KeyModel::Uniform => (0, u64::MAX),
            KeyModel::Sequential => (flush << 32, (flush << 32) | 0xffff_ffff),
        };
        // The engine cuts a partitioned policy's flushes too.
        let cut = match partitioning {
            Some(p) => self.partition_cut(
                &[Piece {
                    lo,
                    hi,
                    size: bytes,
                    seq: flush,
                }],
                bytes,
                lo,
                hi,
                p,
            ),
            None => Vec::new(),
        };
        // A one-file flush shares its id with its run, as it always has.
        let id = self.alloc_id();
        let files = if cut.is_empty() {
            vec![self.new_file(id, bytes, lo, hi, flush)]
        } else {
            cut
        };
        if self.view.levels.is_empty() {
            self.view.levels.push(LevelView::default());
        }
        self.view.levels[0].runs.insert(
            0,
            RunView {
                id,
                order: id,
                files: files.into(),
            },
        );
        // The only edit of the model tree outside `plan::apply`.
        self.view.changed(0, &key(lo), &key(hi));
        self.flush_bytes += bytes;
        self.total_bytes += bytes;
        self.step_files.clear();
        for f in &self.view.levels[0].runs[0].files {
            self.step_files.insert(f.id, f.size);
        }
    }

    /// Books a flush's figures and returns its record.
    fn record(
        &mut self,
        bytes: u64,
        runs_at_flush: usize,
        peak: u64,
        merges: u64,
        stalled: f64,
    ) -> FlushRecord {
        let flush = self.view.flushes;
        let sorted_runs = self.sorted_runs();
        self.run_sum += sorted_runs as u128;
        self.run_sum_at_flush += runs_at_flush as u128;
        self.max_runs = self.max_runs.max(sorted_runs);
        self.max_runs_at_flush = self.max_runs_at_flush.max(runs_at_flush);
        let transient = ratio(peak, self.flush_bytes);
        if transient > self.max_transient {
            self.max_transient = transient;
            self.max_transient_flush = flush;
        }
        FlushRecord {
            flush,
            flush_bytes: bytes,
            write_amplification: self.write_amplification(),
            sorted_runs,
            avg_sorted_runs: self.run_sum as f64 / flush as f64,
            runs_at_flush,
            avg_runs_at_flush: self.run_sum_at_flush as f64 / flush as f64,
            transient_space_amplification: transient,
            merges,
            stalled,
        }
    }

    /// Write amplification so far by [`ModelOptions::wa`] (1 before any
    /// flush).
    pub fn write_amplification(&self) -> f64 {
        if self.flush_bytes == 0 {
            return 1.0;
        }
        let written = match self.opts.wa {
            WaDefinition::Engine => self.flush_bytes + self.merge_bytes,
            WaDefinition::Paper => self.new_sstable_bytes,
        };
        written as f64 / self.flush_bytes as f64
    }

    /// Totals so far.
    pub fn summary(&self) -> Summary {
        let flushes = self.view.flushes.max(1) as f64;
        Summary {
            policy: self.spec.clone(),
            flushes: self.view.flushes,
            flush_bytes: self.flush_bytes,
            merge_bytes_written: self.merge_bytes,
            new_sstable_bytes: self.new_sstable_bytes,
            wa_definition: self.opts.wa,
            write_amplification: self.write_amplification(),
            sorted_runs: self.sorted_runs(),
            avg_sorted_runs: self.run_sum as f64 / flushes,
            max_sorted_runs: self.max_runs,
            avg_runs_at_flush: self.run_sum_at_flush as f64 / flushes,
            max_runs_at_flush: self.max_runs_at_flush,
            max_transient_space_amplification: self.max_transient,
            max_transient_flush: self.max_transient_flush,
            space_amplification: ratio(self.total_bytes, self.oldest_run_bytes()),
            merges: self.merges,
            trivial_moves: self.trivial_moves,
            moved_files: self.moved_files,
            sub_merges: self.sub_merges,
            files: self
                .view
                .levels
                .iter()
                .flat_map(|l| &l.runs)
                .map(|r| r.files.len() as u64)
                .sum(),
            runs: self.run_sizes(),
            elapsed: self.clock,
            stalled: self.stalled,
            merges_running: self.running.len(),
            time_avg_runs: if self.opts.merges.is_some() && self.clock > 0.0 {
                self.runs_time / self.clock
            } else {
                self.run_sum as f64 / flushes
            },
        }
    }

    fn invalid(&self, task: &CompactionTask, why: impl Into<String>) -> SimError {
        SimError::InvalidTask {
            policy: self.spec.clone(),
            flush: self.view.flushes,
            reason: task.reason.clone(),
            why: why.into(),
        }
    }

    /// Applies `task` through the planner shared with the engine; returns
    /// the total size while it ran (inputs and output both present).
    fn apply(&mut self, task: &CompactionTask) -> Result<u64> {
        let plan = plan::plan(&self.view, task).map_err(|e| self.invalid(task, e.to_string()))?;
        self.execute(&plan)
    }

    /// Applies a plan to the model tree.
    fn execute(&mut self, plan: &plan::Plan) -> Result<u64> {
        if plan.destination == Destination::Tiles {
            return Err(SimError::SpatialTiles {
                policy: self.spec.clone(),
            });
        }
        let input_bytes = plan.input_bytes();
        let (outputs, during) = match plan.action {
            Action::Move => {
                self.trivial_moves += 1;
                (plan.inputs[0].files.clone(), self.total_bytes)
            }
            Action::Merge
                if matches!(plan.destination, Destination::New { .. })
                    && plan
                        .partitioning
                        .is_some_and(|p| p.partition != Partition::None) =>
            {
                self.partitioned_merge(plan)
            }
            Action::Merge => {
                let overhead = self.opts.file_overhead;
                let run_data: Vec<u64> = plan
                    .inputs
                    .iter()
                    .map(|i| {
                        i.bytes()
                            .saturating_sub(overhead.saturating_mul(i.files.len() as u64))
                    })
                    .collect();
                let data = self.output_bytes(&run_data);
                let pieces: Vec<Piece> = plan
                    .inputs
                    .iter()
                    .flat_map(|i| &i.files)
                    .map(|f| Piece {
                        lo: key_value(&f.smallest),
                        hi: key_value(&f.largest),
                        size: f.size,
                        seq: f.smallest_seq,
                    })
                    .collect();
                let lo = pieces.iter().map(|p| p.lo).min().unwrap_or(0);
                let hi = pieces.iter().map(|p| p.hi).max().unwrap_or(u64::MAX);
                let files = match plan.destination {
                    Destination::New { .. } => {
                        let id = self.alloc_id();
                        let seq = oldest(&pieces);
                        vec![self.new_file(id, data.saturating_add(overhead), lo, hi, seq)]
                    }
                    Destination::Existing { .. } | Destination::Tiles => {
                        self.cut(&pieces, data, lo, hi, plan.target_file_size)
                    }
                };
                let out: u64 = files.iter().map(|f| f.size).sum();
                let during = self.total_bytes + out;
                self.total_bytes = self.total_bytes + out - input_bytes;
                self.merge_bytes += out;
                self.merges += 1;
                self.sub_merges += 1;
                for id in plan.input_file_ids() {
                    self.step_files.remove(&id);
                }
                self.step_files.extend(files.iter().map(|f| (f.id, f.size)));
                (files, during)
            }
        };
        let run_id = match plan.destination {
            Destination::New { .. } => self.alloc_id(),
            Destination::Existing { id, .. } => id,
            // Tiles are named after their files.
            Destination::Tiles => 0,
        };
        plan::apply(&mut self.view, plan, outputs, run_id);
        Ok(during)
    }

    /// A partitioned merge (seed 000 Alg. 5.3) on the model: the planner's
    /// groups; a one-file group moves, every other one is a sub-merge whose
    /// output the partitioner cuts, sized from the inputs' even density.
    /// Returns the outputs (in key order) and the total size meanwhile.
    fn partitioned_merge(&mut self, plan: &plan::Plan) -> (Vec<FileView>, u64) {
        let Some(p) = plan.partitioning else {
            return (Vec::new(), self.total_bytes);
        };
        let overhead = self.opts.file_overhead;
        let mut outputs: Vec<FileView> = Vec::new();
        let mut merged_in = 0;
        let mut written = 0;
        let mut sub_merges = 0;
        for group in plan.groups() {
            if let [(i, f)] = group.as_slice() {
                outputs.push(plan.inputs[*i].files[*f].clone());
                self.moved_files += 1;
                continue;
            }
            sub_merges += 1;
            let mut run_data = vec![0u64; plan.inputs.len()];
            let mut pieces = Vec::with_capacity(group.len());
            for &(i, f) in &group {
                let file = &plan.inputs[i].files[f];
                run_data[i] += file.size.saturating_sub(overhead);
                merged_in += file.size;
                pieces.push(Piece {
                    lo: key_value(&file.smallest),
                    hi: key_value(&file.largest),
                    size: file.size,
                    seq: file.smallest_seq,
                });
            }
            let data = self.output_bytes(&run_data);
            let lo = pieces.iter().map(|p| p.lo).min().unwrap_or(0);
            let hi = pieces.iter().map(|p| p.hi).max().unwrap_or(u64::MAX);
            let files = self.partition_cut(&pieces, data, lo, hi, p);
            written += files.iter().map(|f| f.size).sum::<u64>();
            outputs.extend(files);
        }
        outputs.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        let during = self.total_bytes + written;
        self.total_bytes = self.total_bytes + written - merged_in;
        if sub_merges == 0 {
            self.trivial_moves += 1;
        } else {
            self.merge_bytes += written;
            self.merges += 1;
            self.sub_merges += sub_merges;
        }
        let moved: std::collections::HashSet<u64> = outputs.iter().map(|f| f.id).collect();
        for id in plan.input_file_ids().filter(|id| !moved.contains(id)) {
            self.step_files.remove(&id);
        }
        for f in &outputs {
            self.step_files.entry(f.id).or_insert(f.size);
        }
        (outputs, during)
    }

    /// Cuts `out` data bytes over `[lo, hi]` (spread like `pieces`) into
    /// files as partitioning `p` does: every θ bytes (`size`), or at the
    /// bounds of BINARYSPLIT over the range (`local`) or its dyadic root
    /// (`global`), each file spanning its bound within `[lo, hi]`.
    fn partition_cut(
        &mut self,
        pieces: &[Piece],
        out: u64,
        lo: u64,
        hi: u64,
        p: Partitioning,
    ) -> Vec<FileView> {
        if !p.partition.uses_ranges() {
            return self.cut(pieces, out, lo, hi, p.theta);
        }
        let input: u64 = pieces.iter().map(|p| p.size).sum();
        let scale = if input == 0 {
            0.0
        } else {
            out as f64 / input as f64
        };
        // BINARYSPLIT asks for the bytes in about two ranges per file it
        // cuts: summing every piece each time made a merge quadratic in its
        // files (a flush spans the whole key space, so no cursor skips).
        let meets = Meets::new(pieces);
        let size_in = |l: u64, u: u64| -> u64 {
            let mut total = 0.0;
            meets.each_meeting(l, u, |piece| {
                let (a, b) = (l.max(piece.lo), u.min(piece.hi));
                if a <= b {
                    let width = (piece.hi - piece.lo) as f64 + 1.0;
                    total += piece.size as f64 * scale * ((b - a) as f64 + 1.0) / width;
                }
            });
            total.round() as u64
        };
        let (l, u) = if p.partition == Partition::Global {
            dyadic_root(lo, hi)
        } else {
            (lo, hi)
        };
        let bounds = binary_split(l, u, p.theta, &size_in);
        let overhead = self.opts.file_overhead;
        let mut files = Vec::with_capacity(bounds.len());
        let mut written = 0;
        let seq = oldest(pieces);
        for (n, &(a, b)) in bounds.iter().enumerate() {
            let size = if n + 1 == bounds.len() {
                out.saturating_sub(written)
            } else {
                size_in(a, b).min(out - written)
            };
            written += size;
            let id = self.alloc_id();
            files.push(self.new_file(id, size.saturating_add(overhead), a.max(lo), b.min(hi), seq));
        }
        count_cut_work(0, files.len() as u64);
        files
    }

    /// Data bytes a merge writes, from its input runs' data bytes.
    fn output_bytes(&self, run_bytes: &[u64]) -> u64 {
        let input_bytes: u64 = run_bytes.iter().sum();
        let d = self.opts.dup_ratio;
        if d == 0.0 {
            return input_bytes;
        }
        let largest = run_bytes.iter().copied().max().unwrap_or(0);
        let rest = (input_bytes - largest) as f64 * (1.0 - d);
        largest + rest.round() as u64
    }

    /// Cuts `out` data bytes over `[lo, hi]` into files of `target` data
    /// bytes (plus the file overhead each), placing the boundaries by the
    /// inputs' data density.
    fn cut(&mut self, pieces: &[Piece], out: u64, lo: u64, hi: u64, target: u64) -> Vec<FileView> {
        let target = target.max(1);
        let overhead = self.opts.file_overhead;
        let count = out.div_ceil(target).max(1);
        let mut files = Vec::with_capacity(count as usize);
        // Once per merge: a whole level's merge has thousands of pieces.
        let seq = oldest(pieces);
        if count == 1 {
            let id = self.alloc_id();
            files.push(self.new_file(id, out.saturating_add(overhead), lo, hi, seq));
            return files;
        }
        let cuts = density_cuts(pieces, out, target, count, lo, hi);
        let mut start = lo;
        let mut written = 0;
        for (i, &end) in cuts.iter().enumerate() {
            let last = i + 1 == cuts.len();
            let size = if last { out - written } else { target };
            let id = self.alloc_id();
            files.push(self.new_file(id, size.saturating_add(overhead), start, end, seq));
            written += size;
            start = end.saturating_add(1);
        }
        files
    }
}

/// The last key of each output file: `count − 1` cuts where the cumulative
/// bytes reach multiples of `target`, then `hi`. Cuts that cannot advance
/// (ranges too narrow) are dropped and their bytes go to the next file.
fn density_cuts(pieces: &[Piece], out: u64, target: u64, count: u64, lo: u64, hi: u64) -> Vec<u64> {
    // Density events: (key, delta density in bytes per key), scaled so the
    // total is `out`.
    let input: u64 = pieces.iter().map(|p| p.size).sum();
    let scale = if input == 0 {
        0.0
    } else {
        out as f64 / input as f64
    };
    let mut events: Vec<(f64, f64)> = Vec::with_capacity(pieces.len() * 2);
    for p in pieces {
        let width = (p.hi - p.lo) as f64 + 1.0;
        let d = p.size as f64 * scale / width;
        events.push((p.lo as f64, d));
        events.push((p.hi as f64 + 1.0, -d));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cuts = Vec::with_capacity(count as usize);
    let mut density = 0.0;
    let mut mass = 0.0;
    let mut next = target as f64;
    let mut prev_cut: Option<u64> = None;
    let mut i = 0;
    while i < events.len() && (cuts.len() as u64) + 1 < count {
        let x = events[i].0;
        while i < events.len() && events[i].0 == x {
            density += events[i].1;
            i += 1;
        }
        let Some(&(end, _)) = events.get(i) else {
            break;
        };
        let seg = (end - x) * density.max(0.0);
        while density > 0.0 && mass + seg >= next && (cuts.len() as u64) + 1 < count {
            let at = x + (next - mass) / density;
            let cut = (at.ceil() as u64)
                .saturating_sub(1)
                .clamp(lo, hi.saturating_sub(1));
            if prev_cut.is_none_or(|p| cut > p) {
                cuts.push(cut);
                prev_cut = Some(cut);
            }
            next += target as f64;
        }
        mass += seg;
    }
    cuts.push(hi);
    cuts
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The flush size of `lamina sim` and `lamina.sim` when none is given.
pub const DEFAULT_FLUSH_BYTES: u64 = 1 << 20;

/// Flush sizes of a simulation.
#[derive(Debug, Clone, PartialEq)]
pub enum FlushSizes {
    /// Every flush the same size.
    Constant(u64),
    /// Uniform in `[min, max]`, from a seeded generator.
    Uniform {
        /// Smallest flush.
        min: u64,
        /// Largest flush.
        max: u64,
        /// Seed: the same seed gives the same sizes.
        seed: u64,
    },
    /// Given sizes, in order.
    List(Vec<u64>),
}

impl FlushSizes {
    /// Mean flush size (what `TreeView::memtable_bytes` should be).
    pub fn mean(&self) -> u64 {
        match self {
            FlushSizes::Constant(s) => *s,
            FlushSizes::Uniform { min, max, .. } => min / 2 + max / 2 + (min % 2 + max % 2) / 2,
            FlushSizes::List(v) if v.is_empty() => 0,
            FlushSizes::List(v) => {
                (v.iter().map(|&s| u128::from(s)).sum::<u128>() / v.len() as u128) as u64
            }
        }
    }

    /// The `ModelOptions::buffer_bytes` of these flushes when none is given:
    /// the mean flush, at least 1.
    pub fn default_buffer(&self) -> u64 {
        self.mean().max(1)
    }

    /// Flushes available (`None` = unbounded).
    pub fn len(&self) -> Option<u64> {
        match self {
            FlushSizes::List(v) => Some(v.len() as u64),
            _ => None,
        }
    }

    /// True for an empty list.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The sizes, in order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            FlushSizes::Constant(s) => Box::new(std::iter::repeat(*s)),
            FlushSizes::Uniform { min, max, seed } => {
                let (min, max) = (*min.min(max), *max.max(min));
                let span = max - min;
                let mut rng = SplitMix64(*seed);
                Box::new(std::iter::from_fn(move || {
                    let r = rng.next();
                    Some(if span == u64::MAX {
                        r
                    } else {
                        min + ((u128::from(r) * u128::from(span + 1)) >> 64) as u64
                    })
                }))
            }
            FlushSizes::List(v) => Box::new(v.iter().copied()),
        }
    }

    /// Refuses sizes no simulation can run on: a constant size of 0, a
    /// uniform range with min > max or max = 0, an empty list.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: &str| Err(SimError::Config(why.to_string()));
        match self {
            FlushSizes::Constant(0) => bad("the flush size must be at least 1 byte"),
            FlushSizes::Uniform { min, max, .. } if min > max || *max == 0 => {
                bad("uniform flush sizes want 0 <= min <= max, max > 0")
            }
            FlushSizes::List(v) if v.is_empty() => bad("the list holds no flush size"),
            _ => Ok(()),
        }
    }

    /// Parses a flush-size file: one size in bytes per line; blank lines and
    /// `#` comments are skipped.
    pub fn parse_list(text: &str) -> Result<FlushSizes> {
        let mut sizes = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let size = line.parse::<u64>().map_err(|_| {
                SimError::Config(format!("line {}: {line:?} is not a size in bytes", n + 1))
            })?;
            sizes.push(size);
        }
        Ok(FlushSizes::List(sizes))
    }
}

/// SplitMix64: small, fast, deterministic.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Runs `spec` for `flushes` flushes of `sizes` (fewer if a size list ends
/// first), calling `each` after every flush; returns the summary.
pub fn simulate(
    spec: &str,
    sizes: &FlushSizes,
    flushes: u64,
    opts: ModelOptions,
    mut each: impl FnMut(&FlushRecord),
) -> Result<Summary> {
    sizes.validate()?;
    let mut sim = Simulator::from_spec(spec, opts)?;
    for size in sizes
        .iter()
        .take(usize::try_from(flushes).unwrap_or(usize::MAX))
    {
        let record = sim.flush(size)?;
        each(&record);
    }
    Ok(sim.summary())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Tiles are cut by points, which the model lacks: the first tiled
    /// merge is refused, and nothing before it was (the key-ordered cut
    /// of the same policy runs on).
    #[test]
    fn spatial_tiles_are_refused_not_guessed() {
        for rule in ["str", "rstar-grove"] {
            let spec = format!("leveled:b0=2,b=4,partition={rule}");
            let mut sim = Simulator::from_spec(&spec, ModelOptions::default()).unwrap();
            let refused = (0..10).find_map(|_| sim.flush(1 << 20).err());
            assert!(
                matches!(refused, Some(SimError::SpatialTiles { ref policy }) if *policy == spec),
                "{refused:?}"
            );
        }
        let mut sim =
            Simulator::from_spec("leveled:b0=2,b=4,partition=size", ModelOptions::default())
                .unwrap();
        for _ in 0..100 {
            sim.flush(1 << 20).unwrap();
        }
    }

    /// The pieces a range meets, as every piece filtered in order finds
    /// them: sorted pieces of several overlapping runs, one of them a
    /// flush over the whole key space, and an unsorted list.
    #[test]
    fn meets_finds_what_a_scan_finds() {
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        for len in [0usize, 1, 2, 7, 64, 300] {
            let mut pieces: Vec<Piece> = (0..len)
                .map(|_| {
                    let lo = next(10_000);
                    Piece {
                        lo,
                        hi: lo + next(400),
                        size: 1 + next(50),
                        seq: 0,
                    }
                })
                .collect();
            if len > 2 {
                pieces[1] = Piece {
                    lo: 0,
                    hi: u64::MAX,
                    size: 9,
                    seq: 0,
                };
            }
            for sort in [false, true] {
                if sort {
                    pieces.sort_by_key(|p| p.lo);
                }
                let meets = Meets::new(&pieces);
                for _ in 0..200 {
                    let l = next(11_000);
                    let u = l + next(3_000);
                    let mut found = Vec::new();
                    meets.each_meeting(l, u, |p| found.push(p as *const Piece));
                    let expected: Vec<*const Piece> = pieces
                        .iter()
                        .filter(|p| p.lo <= u && l <= p.hi)
                        .map(|p| p as *const Piece)
                        .collect();
                    if meets.sorted {
                        assert_eq!(found, expected, "{len} pieces, [{l}, {u}]");
                    } else {
                        // Unsorted: every piece, for the caller to test.
                        assert_eq!(found.len(), pieces.len());
                    }
                }
            }
        }
    }

    #[test]
    fn keys_round_trip() {
        for k in [0, 1, 255, 1 << 40, u64::MAX] {
            assert_eq!(key_value(&key(k)), k);
        }
        assert_eq!(key_value(b"\x01"), 1 << 56);
    }

    #[test]
    fn cuts_follow_density() {
        // One piece over [0, 999] of 100 bytes, 4 files of 25 bytes.
        let p = [Piece {
            lo: 0,
            hi: 999,
            size: 100,
            seq: 1,
        }];
        assert_eq!(
            density_cuts(&p, 100, 25, 4, 0, 999),
            vec![249, 499, 749, 999]
        );
        // Twice the density in the first half: 40 of 60 bytes there.
        let p = [
            Piece {
                lo: 0,
                hi: 999,
                size: 40,
                seq: 1,
            },
            Piece {
                lo: 0,
                hi: 499,
                size: 20,
                seq: 2,
            },
        ];
        let cuts = density_cuts(&p, 60, 20, 3, 0, 999);
        assert_eq!(cuts.len(), 3);
        assert!((cuts[0] as i64 - 249).abs() <= 1, "{cuts:?}");
        assert!((cuts[1] as i64 - 499).abs() <= 1, "{cuts:?}");
    }

    #[test]
    fn uniform_sizes_stay_in_range_and_repeat_by_seed() {
        let s = FlushSizes::Uniform {
            min: 10,
            max: 20,
            seed: 7,
        };
        let a: Vec<u64> = s.iter().take(1000).collect();
        assert!(a.iter().all(|&x| (10..=20).contains(&x)));
        assert!(a.contains(&10) && a.contains(&20));
        assert_eq!(a, s.iter().take(1000).collect::<Vec<_>>());
        assert_eq!(s.mean(), 15);
    }

    #[test]
    fn size_files_parse() {
        let s = FlushSizes::parse_list("100\n# c\n\n200 # x\n").unwrap();
        assert_eq!(s, FlushSizes::List(vec![100, 200]));
        assert!(FlushSizes::parse_list("1\nx\n").is_err());
    }

    #[test]
    fn dup_ratio_shrinks_all_but_the_largest_run() {
        let opts = ModelOptions {
            buffer_bytes: 100,
            dup_ratio: 0.5,
            ..Default::default()
        };
        let mut sim = Simulator::from_spec("constant:k=1", opts).unwrap();
        sim.flush(100).unwrap();
        sim.flush(100).unwrap();
        assert_eq!(sim.run_sizes(), vec![vec![150]]);
        assert!(Simulator::from_spec(
            "constant:k=1",
            ModelOptions {
                dup_ratio: 1.0,
                ..opts
            }
        )
        .is_err());
    }
}
