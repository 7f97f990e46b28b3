//! The Bloom allocation the tuner recommends against seed 004's worked
//! formula: a filter of `n` keys at false-positive rate `p` takes
//! `m = −n ln p / (ln 2)²` bits (seed 004 §2.2.3), and Monkey (seed 004
//! §5.6) sets every level's `p_i` proportional to its keys `n_i`. With all
//! levels filtered, the budget `M = Σ m_i` gives in closed form
//! `ln c = −(M (ln 2)² + Σ n_i ln n_i) / N` and `p_i = c · n_i`.

use std::f64::consts::LN_2;

use lamina_tune::model::{bloom_per_level, BloomAlloc};

/// Seed 004's bits for `n` keys at rate `p`.
fn seed004_bits(n: f64, p: f64) -> f64 {
    -n * p.ln() / (LN_2 * LN_2)
}

#[test]
fn monkey_bits_per_level_follow_seed_004s_formula() {
    // A leveled tree: a level-0 run of 1 unit, then levels of 4, 16, 64.
    let runs = vec![vec![1u64], vec![4], vec![16], vec![64]];
    let avg = 10.0;
    let bits = bloom_per_level(&runs, avg, BloomAlloc::Monkey);
    let n: Vec<f64> = runs.iter().map(|l| l[0] as f64).collect();
    let total: f64 = n.iter().sum();
    let budget = avg * total;
    let ln_c = -(budget * LN_2 * LN_2 + n.iter().map(|x| x * x.ln()).sum::<f64>()) / total;
    let mut spent = 0.0;
    for (i, &ni) in n.iter().enumerate() {
        let p = ln_c.exp() * ni;
        assert!(p < 1.0, "level {i} unfiltered");
        let want = seed004_bits(ni, p) / ni;
        assert!(
            (bits[i] - want).abs() < 1e-6,
            "level {i}: {} vs {want}",
            bits[i]
        );
        spent += seed004_bits(ni, p);
    }
    // The whole budget, no more.
    assert!((spent - budget).abs() < 1e-6 * budget);
    // Uniform bits are the same everywhere and spend the same memory.
    let uniform = bloom_per_level(&runs, avg, BloomAlloc::Uniform);
    assert_eq!(uniform, vec![avg; 4]);
    // Monkey's sum of false-positive rates (an empty lookup's wasted reads)
    // is lower.
    let sum = |b: &[f64]| b.iter().map(|b| (-b * LN_2 * LN_2).exp()).sum::<f64>();
    assert!(sum(&bits) < sum(&uniform));
}
