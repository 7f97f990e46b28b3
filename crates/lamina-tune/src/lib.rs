//! `lamina tune`'s model and search: given a workload and a memory budget,
//! which compaction design should the database run?
//!
//! 1. [`Space`]: every registered strategy (`lamina_compaction::spec`)
//!    with a grid of its parameters, write buffer sizes, and Bloom bits per
//!    key spread uniformly or by Monkey, within the memory budget (the
//!    block cache gets what the buffer and the filters leave).
//! 2. [`shape::simulate`]: each (strategy, buffer) pair runs in the
//!    simulator (`lamina-sim`, the engine's own policy code) over the
//!    workload's flushes, giving write amplification, runs per level and
//!    space amplification.
//! 3. [`model::predict`]: lookup, scan and write costs from the runs, the
//!    filters' false-positive rates and the block cache, weighted by the
//!    mix; the terms and their papers are tabled in [`model`].
//! 4. [`search::search`]: ranks candidates by cost per operation, or by
//!    the worst case within an uncertainty radius ([`robust`], Endure).
//!
//! The crate is pure: no storage, no files. `lamina tune` (the CLI) reads
//! workload and calibration files, measures the cost model and validates
//! the advice on the engine.

pub mod cost;
pub mod model;
pub mod robust;
pub mod search;
pub mod shape;
pub mod space;
pub mod workload;

pub use cost::CostModel;
pub use model::{BloomAlloc, Candidate, Prediction};
pub use search::{search, Outcome, Ranked};
pub use space::Space;
pub use workload::{KeyDist, Mix, Workload};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// The workload description is invalid.
    #[error("workload: {0}")]
    Workload(String),
    /// The calibration file is invalid.
    #[error("calibration: {0}")]
    Calibration(String),
    /// The search was asked something impossible.
    #[error("search: {0}")]
    Search(String),
    /// The simulator refused a spec or failed.
    #[error("simulator: {0}")]
    Sim(#[from] lamina_sim::SimError),
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, TuneError>;

/// Spearman's rank correlation of two equally long series (average ranks
/// for ties); `None` below two points or when a series is constant.
pub fn rank_correlation(x: &[f64], y: &[f64]) -> Option<f64> {
    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*a].total_cmp(&v[*b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            let avg = (i + j) as f64 / 2.0 + 1.0;
            for k in &idx[i..=j] {
                r[*k] = avg;
            }
            i = j + 1;
        }
        r
    }
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let mean = (n + 1.0) / 2.0;
    let cov: f64 = rx
        .iter()
        .zip(&ry)
        .map(|(a, b)| (a - mean) * (b - mean))
        .sum();
    let var = |r: &[f64]| r.iter().map(|a| (a - mean).powi(2)).sum::<f64>();
    let (vx, vy) = (var(&rx), var(&ry));
    if vx == 0.0 || vy == 0.0 {
        return None;
    }
    Some(cov / (vx * vy).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_correlation_of_known_series() {
        let r = rank_correlation(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]);
        assert!((r.unwrap() - 1.0).abs() < 1e-12);
        let r = rank_correlation(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]);
        assert!((r.unwrap() + 1.0).abs() < 1e-12);
        // By hand: ranks (1,2,3,4) and (2,1,4,3): d² = 4, ρ = 1 − 6·4/60 = 0.6.
        let r = rank_correlation(&[1.0, 2.0, 3.0, 4.0], &[2.0, 1.0, 4.0, 3.0]);
        assert!((r.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(rank_correlation(&[1.0], &[1.0]), None);
        assert_eq!(rank_correlation(&[1.0, 1.0], &[1.0, 2.0]), None);
    }
}
