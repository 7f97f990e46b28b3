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

#[cfg(doc)]
use lamina_compaction::{CompactionPolicy, TreeView};

mod cut;
mod error;
mod flush_sizes;
mod keys;
mod options;
mod report;
mod simulator;

pub use cut::{cut_work, CutWork};
pub use error::{Result, SimError};
pub use flush_sizes::{FlushSizes, DEFAULT_FLUSH_BYTES};
pub use keys::{key, key_value};
pub use options::{AsyncMerges, KeyModel, ModelOptions, WaDefinition};
pub use report::{FlushRecord, Summary};
pub use simulator::Simulator;

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
