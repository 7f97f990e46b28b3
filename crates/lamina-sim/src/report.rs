//! What a simulation reports: a record per flush and the totals.

use crate::WaDefinition;

#[cfg(doc)]
use crate::ModelOptions;

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
