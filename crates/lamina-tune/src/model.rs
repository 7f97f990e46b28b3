//! The cost of each operation on a simulated tree, and the candidate's
//! cost per operation for the workload's mix.
//!
//! | term | formula | from |
//! |---|---|---|
//! | write amplification, runs per level, space amplification | the simulator running the policy | seed 003 (simulation predicts the engine), seed 001 (the design primitives) |
//! | false-positive rate of a run's filter | `e^(−b·ln²2)` for `b` bits per key | seed 004 §2.2.3 (`m = −n ln p / ln²2`), Monkey |
//! | Bloom bits per level | Monkey: `FPR_i ∝ n_i` within the budget | seed 004 §5.6 (Monkey, Dayan et al. 2017) |
//! | point read of a missing key | `R · probe + Σ_i FPR_i · block` | Monkey's zero-result lookup cost |
//! | point read of an existing key in run `j` | `(j+1) · probe + Σ_{i<j} FPR_i · block + block` | Monkey's non-zero-result lookup |
//! | range scan of `L` entries | `R · (probe + block) + L · entry + L·E/B · block` | Dostoevsky (Dayan & Idreos 2018): short scans cost one seek per run, long ones `s·N/B` |
//! | write | `write + WA · E · byte` | Dostoevsky's update cost, WA from the simulator |
//! | block cost | `h · cached + (1 − h) · miss`, `h` the block cache hit ratio | Zipfian: `H(m, s) / H(n, s)` for `m` cached of `n` keys |
//!
//! `R` is the number of sorted runs, `E` the entry size, `B` the block size.

use lamina_compaction::monkey::{self, fpr};
use serde::Serialize;

use crate::cost::CostModel;
use crate::shape::Shape;
use crate::workload::{KeyDist, Workload};

/// How the Bloom filter memory is spread over the levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BloomAlloc {
    /// The same bits per key everywhere.
    Uniform,
    /// Monkey: fewer bits for bigger levels, minimizing the sum of FPRs.
    Monkey,
}

/// One design: a strategy, a write buffer and the Bloom filters; the
/// block cache gets the rest of the memory budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The `--compaction` spec.
    pub spec: String,
    /// Write buffer (memtable) bytes.
    pub buffer_bytes: u64,
    /// Bloom bits per key, averaged over all keys.
    pub bloom_bits: f64,
    /// How they are spread.
    pub bloom: BloomAlloc,
}

/// The costs of each kind of operation, in nanoseconds, in
/// [`crate::workload::Mix::shares`]'s order.
pub type OpCosts = [f64; 6];

/// What the model predicts for a candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// The candidate.
    pub candidate: Candidate,
    /// Block cache bytes (the memory left).
    pub cache_bytes: u64,
    /// Bloom bits per key per level, level 0 first (the engine's
    /// `bloom_bits_per_level`).
    pub bloom_bits_per_level: Vec<f64>,
    /// Nanoseconds per operation of the workload's mix.
    pub cost_ns: f64,
    /// Nanoseconds per operation of each kind.
    pub op_costs: OpCosts,
    /// Write amplification of the measured phase.
    pub wa: f64,
    /// Blocks read (cached or not) per point read of an existing key.
    pub reads_per_get: f64,
    /// Blocks read per point read of a missing key (false positives).
    pub reads_per_missing_get: f64,
    /// Sorted runs, averaged over the phase.
    pub runs: f64,
    /// Runs per level at the end.
    pub runs_per_level: Vec<usize>,
    /// Space amplification at the end.
    pub space_amp: f64,
    /// Predicted block cache hit ratio.
    pub cache_hit: f64,
}

/// `Σ_{i=1..n} i^(−s)`, by the Euler–Maclaurin approximation (exact to a
/// few parts in 10^4 for `n ≥ 10`; summed directly below that).
fn harmonic(n: f64, s: f64) -> f64 {
    if n < 1.0 {
        return 0.0;
    }
    if n <= 10.0 {
        return (1..=n as u64).map(|i| (i as f64).powf(-s)).sum();
    }
    let head: f64 = (1..=10u64).map(|i| (i as f64).powf(-s)).sum();
    let integral = if (s - 1.0).abs() < 1e-9 {
        (n / 10.0).ln()
    } else {
        (n.powf(1.0 - s) - 10f64.powf(1.0 - s)) / (1.0 - s)
    };
    head + integral + 0.5 * (n.powf(-s) - 10f64.powf(-s))
}

/// The block cache's hit ratio: `cache_bytes` of a tree of `tree_bytes`,
/// reads spread by `keys` over `keys_n` keys.
pub fn cache_hit_ratio(cache_bytes: f64, tree_bytes: f64, keys: KeyDist, keys_n: f64) -> f64 {
    if tree_bytes <= 0.0 {
        return 1.0;
    }
    let share = (cache_bytes / tree_bytes).clamp(0.0, 1.0);
    match keys {
        KeyDist::Uniform | KeyDist::Sequential => share,
        // The hottest keys' blocks stay cached: each cached block holds one
        // hot key (keys are hashed over the key space).
        KeyDist::Zipfian { s } => {
            let entries_per_block = 1.0f64.max(keys_n * 4096.0 / tree_bytes);
            let m = (share * keys_n / entries_per_block).min(keys_n);
            (harmonic(m, s) / harmonic(keys_n, s)).clamp(0.0, 1.0)
        }
        // The newest keys, in the newest (cached) blocks.
        KeyDist::Latest => {
            let m = share * keys_n;
            (harmonic(m, 0.99) / harmonic(keys_n, 0.99)).clamp(0.0, 1.0)
        }
    }
}

/// Bloom bits per key per level for the tree `runs` (per level, run
/// sizes), spending `bits` per key on average.
pub fn bloom_per_level(runs: &[Vec<u64>], bits: f64, alloc: BloomAlloc) -> Vec<f64> {
    match alloc {
        BloomAlloc::Uniform => vec![bits; runs.len()],
        BloomAlloc::Monkey => {
            let entries: Vec<f64> = runs.iter().map(|l| l.iter().sum::<u64>() as f64).collect();
            monkey::allocate(bits, &entries)
        }
    }
}

/// The costs on one tree snapshot.
struct Snapshot {
    get: f64,
    get_missing: f64,
    scan: f64,
    reads_per_get: f64,
    reads_per_missing_get: f64,
}

fn snapshot(
    runs: &[Vec<u64>],
    per_level: &[f64],
    w: &Workload,
    c: &CostModel,
    block: f64,
) -> Snapshot {
    // Newest run first: level 0's, then level 1's, ...
    let flat: Vec<(u64, f64)> = runs
        .iter()
        .enumerate()
        .flat_map(|(level, l)| {
            let bits = per_level
                .get(level)
                .or(per_level.last())
                .copied()
                .unwrap_or(0.0);
            l.iter().map(move |&bytes| (bytes, fpr(bits)))
        })
        .collect();
    let total: u64 = flat.iter().map(|r| r.0).sum();
    let n = flat.len() as f64;
    let wasted: f64 = flat.iter().map(|r| r.1).sum();
    // An existing key lies in run j with the run's share of the bytes
    // (`latest`: in the newest run).
    let (mut reads_hit, mut probes_hit, mut before) = (0.0, 0.0, 0.0);
    for (j, &(bytes, fp)) in flat.iter().enumerate() {
        let p = match (w.keys, total) {
            (_, 0) => 0.0,
            (KeyDist::Latest, _) => f64::from(u8::from(j == 0)),
            _ => bytes as f64 / total as f64,
        };
        reads_hit += p * (before + 1.0);
        probes_hit += p * (j as f64 + 1.0);
        before += fp;
    }
    let blocks_per_scan = w.scan_length * w.entry_bytes() as f64 / c.block_bytes;
    Snapshot {
        get: probes_hit * c.probe_ns + reads_hit * block,
        get_missing: n * c.probe_ns + wasted * block,
        scan: n * (c.probe_ns + block) + w.scan_length * c.entry_ns + blocks_per_scan * block,
        reads_per_get: reads_hit,
        reads_per_missing_get: wasted,
    }
}

/// Bytes of `cand`'s Bloom filters on the tree `shape` ends with.
pub fn bloom_bytes(cand: &Candidate, shape: &Shape, w: &Workload) -> u64 {
    (cand.bloom_bits * keys_in(shape, w) / 8.0).ceil() as u64
}

/// Entries in the tree at the end (at least 1).
fn keys_in(shape: &Shape, w: &Workload) -> f64 {
    let tree_bytes: u64 = shape.last().iter().flatten().sum();
    (tree_bytes as f64 / w.entry_bytes() as f64).max(1.0)
}

/// The prediction for `cand` on the simulated `shape` under `w`, the block
/// cache taking the memory its buffer and filters leave; `None` when they
/// do not fit the budget.
pub fn predict(cand: &Candidate, shape: &Shape, w: &Workload, c: &CostModel) -> Option<Prediction> {
    let cache_bytes = w
        .memory_bytes
        .checked_sub(cand.buffer_bytes)?
        .checked_sub(bloom_bytes(cand, shape, w))?;
    Some(predict_with_cache(cand, shape, w, c, cache_bytes))
}

/// The prediction for `cand` with a block cache of `cache_bytes`, whatever
/// the budget (the engine default's row).
pub fn predict_with_cache(
    cand: &Candidate,
    shape: &Shape,
    w: &Workload,
    c: &CostModel,
    cache_bytes: u64,
) -> Prediction {
    let last = shape.last();
    let tree_bytes: u64 = last.iter().flatten().sum();
    let keys_n = keys_in(shape, w);
    let per_level = bloom_per_level(last, cand.bloom_bits, cand.bloom);
    let hit = cache_hit_ratio(cache_bytes as f64, tree_bytes as f64, w.keys, keys_n);
    let block = hit * c.cached_block_ns + (1.0 - hit) * c.block_ns;
    let samples = shape.samples.len().max(1) as f64;
    let mut sum = [0.0; 5];
    for s in &shape.samples {
        let one = snapshot(s, &per_level, w, c, block);
        for (acc, v) in sum.iter_mut().zip([
            one.get,
            one.get_missing,
            one.scan,
            one.reads_per_get,
            one.reads_per_missing_get,
        ]) {
            *acc += v / samples;
        }
    }
    let write = c.write_ns + shape.wa * w.entry_bytes() as f64 * c.byte_ns;
    let op_costs = [sum[0], sum[1], sum[2], write, write, write].map(|x| x + c.op_ns);
    let cost_ns = w
        .mix
        .shares()
        .iter()
        .zip(op_costs)
        .map(|(share, cost)| share * cost)
        .sum();
    Prediction {
        candidate: cand.clone(),
        cache_bytes,
        bloom_bits_per_level: per_level,
        cost_ns,
        op_costs,
        wa: shape.wa,
        reads_per_get: sum[3],
        reads_per_missing_get: sum[4],
        runs: shape.avg_runs(),
        runs_per_level: last.iter().map(Vec::len).collect(),
        space_amp: shape.space_amp,
        cache_hit: hit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harmonic_numbers_match_the_direct_sum() {
        for (n, s) in [(1000.0, 0.99), (5000.0, 1.0), (200.0, 0.5), (7.0, 0.99)] {
            let direct: f64 = (1..=n as u64).map(|i| (i as f64).powf(-s)).sum();
            let got = harmonic(n, s);
            assert!(
                (got - direct).abs() < 1e-3 * direct,
                "{n} {s}: {got} vs {direct}"
            );
        }
    }

    #[test]
    fn lookup_costs_follow_the_runs_and_their_filters() {
        // Three equal runs, no filters (FPR 1), every block a miss: a
        // missing key reads all 3 runs; an existing one reads 1, 2 or 3
        // blocks with probability 1/3 each, 2 on average.
        let w = Workload::ycsb("c", 1000, 100, 64 << 20).unwrap();
        let w = Workload {
            keys: KeyDist::Uniform,
            ..w
        };
        let c = CostModel::default();
        let runs = vec![vec![10, 10, 10]];
        let s = snapshot(&runs, &[0.0], &w, &c, c.block_ns);
        assert!((s.reads_per_missing_get - 3.0).abs() < 1e-12);
        assert!((s.reads_per_get - 2.0).abs() < 1e-12);
        // With 10 bits per key, FPR = e^(-10 ln²2) ≈ 0.0082 per run.
        let s = snapshot(&runs, &[10.0], &w, &c, c.block_ns);
        let p = (-10.0 * std::f64::consts::LN_2.powi(2)).exp();
        assert!((s.reads_per_missing_get - 3.0 * p).abs() < 1e-12);
        assert!((s.reads_per_get - (1.0 + p)).abs() < 1e-12);
    }

    #[test]
    fn zipfian_reads_hit_a_small_cache_more_than_uniform_ones() {
        // 1% of a 1 GB tree of a million keys.
        let u = cache_hit_ratio(1e7, 1e9, KeyDist::Uniform, 1e6);
        let z = cache_hit_ratio(1e7, 1e9, KeyDist::Zipfian { s: 0.99 }, 1e6);
        assert!((u - 0.01).abs() < 1e-12);
        // H(2441, 0.99) / H(10^6, 0.99), 2441 hot keys in 1% of the blocks.
        let h = |n: u64| (1..=n).map(|i| (i as f64).powf(-0.99)).sum::<f64>();
        let m = (0.01 * 1e6 / 4.096) as u64;
        assert!((z - h(m) / h(1_000_000)).abs() < 0.01, "{z}");
        assert_eq!(cache_hit_ratio(200.0, 100.0, KeyDist::Uniform, 1e6), 1.0);
    }
}
