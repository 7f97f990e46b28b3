//! Settings of the model: sizes, ratios, the key model, the write
//! amplification definition and asynchronous merges.

#[cfg(doc)]
use lamina_compaction::CompactionPolicy;

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
