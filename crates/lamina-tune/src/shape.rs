//! The tree a design keeps under a workload, from the simulator: the same
//! policy objects the engine runs (`lamina-sim`), driven by the workload's
//! flushes.

use lamina_sim::{KeyModel, ModelOptions, Simulator};

use crate::workload::{KeyDist, Workload};
use crate::{Result, TuneError};

/// Tree snapshots kept per simulation (evenly spaced over the measured
/// phase): enough to average the lookup cost over a merge cycle.
const SAMPLES: usize = 48;

/// What the simulator says about one strategy and buffer size.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// The policy's spec, as it prints itself.
    pub spec: String,
    /// Write amplification of the measured phase (flushes and merges over
    /// flushed bytes; the engine's definition).
    pub wa: f64,
    /// Total bytes / the oldest run's bytes at the end.
    pub space_amp: f64,
    /// Run sizes (per level, newest run first) after flushes of the
    /// measured phase, evenly spaced; the end of the load when the phase
    /// writes nothing.
    pub samples: Vec<Vec<Vec<u64>>>,
}

impl Shape {
    /// Sorted runs averaged over the samples.
    pub fn avg_runs(&self) -> f64 {
        let runs: usize = self
            .samples
            .iter()
            .map(|s| s.iter().map(Vec::len).sum::<usize>())
            .sum();
        runs as f64 / self.samples.len().max(1) as f64
    }

    /// The last sample (the tree at the end).
    pub fn last(&self) -> &[Vec<u64>] {
        self.samples.last().map_or(&[], Vec::as_slice)
    }
}

/// The share of flushed bytes that overwrite keys already in the tree
/// (updates and deletes): the simulator's duplicate ratio, which merges
/// drop from all but their largest input.
pub fn dup_ratio(w: &Workload) -> f64 {
    if w.is_load() {
        return 0.0;
    }
    let overwrites = w.operations as f64 * (w.mix.update + w.mix.delete);
    let flushed = w.records as f64 + w.phase_writes() as f64;
    (overwrites / flushed).clamp(0.0, 0.95)
}

/// Flushes `bytes` in buffers of `buffer_bytes` (the last one partial),
/// calling `each(i, last, sim)` after flush `i` (from 0).
fn feed(
    sim: &mut Simulator,
    bytes: u64,
    buffer_bytes: u64,
    mut each: impl FnMut(u64, bool, &Simulator),
) -> Result<()> {
    let n = bytes.div_ceil(buffer_bytes);
    for i in 0..n {
        let last = i + 1 == n;
        let size = if last {
            bytes - (n - 1) * buffer_bytes
        } else {
            buffer_bytes
        };
        sim.flush(size).map_err(TuneError::Sim)?;
        each(i, last, sim);
    }
    Ok(())
}

/// Simulates `spec` with a write buffer of `buffer_bytes` under `w`: the
/// load's flushes, then the measured phase's.
pub fn simulate(spec: &str, buffer_bytes: u64, w: &Workload) -> Result<Shape> {
    if buffer_bytes == 0 {
        return Err(TuneError::Search("a write buffer of 0 bytes".into()));
    }
    let opts = ModelOptions {
        buffer_bytes,
        dup_ratio: dup_ratio(w),
        keys: match w.keys {
            KeyDist::Sequential => KeyModel::Sequential,
            _ => KeyModel::Uniform,
        },
        ..ModelOptions::default()
    };
    let mut sim = Simulator::from_spec(spec, opts).map_err(TuneError::Sim)?;
    let entry = w.entry_bytes();
    let load_bytes = w.records.saturating_mul(entry);
    let phase_bytes = if w.is_load() {
        0
    } else {
        w.phase_writes().saturating_mul(entry)
    };
    let flushes = |bytes: u64| bytes.div_ceil(buffer_bytes);
    let (n_load, n_phase) = (flushes(load_bytes), flushes(phase_bytes));
    // Which flushes' trees to keep: those of the measured phase (the load
    // itself for `load`), evenly spaced.
    let (first, measured) = if w.is_load() {
        (1, n_load)
    } else {
        (n_load + 1, n_phase)
    };
    let step = measured.div_ceil(SAMPLES as u64).max(1);
    let keep = |k: u64, last: bool| k >= first && ((k - first + 1).is_multiple_of(step) || last);
    let mut samples = Vec::new();
    feed(&mut sim, load_bytes, buffer_bytes, |i, last, sim| {
        if keep(1 + i, last) {
            samples.push(sim.run_sizes());
        }
    })?;
    let mut before = (0, 0);
    if !w.is_load() {
        let s = sim.summary();
        before = (s.flush_bytes, s.merge_bytes_written);
        if n_phase == 0 {
            samples.push(sim.run_sizes());
        }
    }
    feed(&mut sim, phase_bytes, buffer_bytes, |i, last, sim| {
        if keep(n_load + 1 + i, last) {
            samples.push(sim.run_sizes());
        }
    })?;
    let s = sim.summary();
    let flushed = s.flush_bytes - before.0;
    let merged = s.merge_bytes_written - before.1;
    let wa = if flushed == 0 {
        0.0
    } else {
        (flushed + merged) as f64 / flushed as f64
    };
    Ok(Shape {
        spec: s.policy,
        wa,
        space_amp: s.space_amplification,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(letter: &str, records: u64) -> Workload {
        Workload::ycsb(letter, records, 1000, 64 << 20).unwrap()
    }

    #[test]
    fn leveling_under_a_load_matches_a_count_by_hand() {
        // 100 flushes of 1 MiB into leveling T=10, l0=4: the tree keeps at
        // most 4 level-0 runs and one run per deeper level.
        let w = workload("load", 100 * (1 << 20) / 1028);
        let shape = simulate("leveling:T=10,l0=4", 1 << 20, &w).unwrap();
        assert!(shape.wa > 1.0, "{shape:?}");
        for s in &shape.samples {
            assert!(s[0].len() <= 4, "{s:?}");
            assert!(s.iter().skip(1).all(|l| l.len() <= 1), "{s:?}");
        }
        // nomerge writes every byte once and keeps every flush.
        let none = simulate("nomerge", 1 << 20, &w).unwrap();
        assert_eq!(none.wa, 1.0);
        assert_eq!(none.last().iter().map(Vec::len).sum::<usize>(), 100);
    }

    #[test]
    fn a_read_only_phase_keeps_the_loaded_tree() {
        let w = workload("c", 50_000);
        let shape = simulate("tier:T=4", 1 << 20, &w).unwrap();
        assert_eq!(shape.samples.len(), 1);
        assert_eq!(shape.wa, 0.0);
        let bytes: u64 = shape.last().iter().flatten().sum();
        assert_eq!(bytes, 50_000 * w.entry_bytes());
    }
}
