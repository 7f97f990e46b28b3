//! Monkey (Dayan et al.): Bloom filter bits per key allocated across levels.
//!
//! With the usual approximation `FPR(b) = e^(−b · ln²2)` for `b` bits per
//! key, minimizing the sum of the levels' false-positive rates (the
//! expected wasted I/Os of an empty point lookup) under a fixed memory
//! budget `Σ n_i · b_i = M` gives, by Lagrange, `FPR_i = c · n_i`: a level's
//! false-positive rate grows with its entry count, and a level whose
//! optimum would reach 1 gets no filter. The constant `c` is found by
//! bisection so that the budget is spent exactly.

use std::f64::consts::LN_2;

const LN2_SQ: f64 = LN_2 * LN_2;

/// False-positive rate of a filter with `bits` bits per key (optimal probe
/// count, continuous approximation).
pub fn fpr(bits: f64) -> f64 {
    (-bits.max(0.0) * LN2_SQ).exp()
}

/// Bits per key for levels holding `entries[i]` entries, spending
/// `avg_bits` bits per key on average over all entries, minimizing the sum
/// of the levels' false-positive rates.
pub fn allocate(avg_bits: f64, entries: &[f64]) -> Vec<f64> {
    let total: f64 = entries.iter().filter(|n| **n > 0.0).sum();
    let positive = || entries.iter().copied().filter(|n| *n > 0.0);
    let (Some(min_n), Some(max_n)) = (
        positive().min_by(f64::total_cmp),
        positive().max_by(f64::total_cmp),
    ) else {
        return vec![0.0; entries.len()];
    };
    if !(avg_bits > 0.0 && avg_bits.is_finite()) || total <= 0.0 {
        return vec![avg_bits.max(0.0); entries.len()];
    }
    let budget = avg_bits * total;
    // Bits of level i for FPR_i = c · n_i, with ln c = ln_c.
    let bits = |ln_c: f64, n: f64| {
        if n > 0.0 {
            (-(ln_c + n.ln())).max(0.0) / LN2_SQ
        } else {
            0.0
        }
    };
    let spent = |ln_c: f64| {
        entries
            .iter()
            .map(|&n| n.max(0.0) * bits(ln_c, n))
            .sum::<f64>()
    };
    // At `lo` every level gets at least `avg_bits` (too much), at `hi` none
    // gets any (too little); `spent` decreases in between.
    let (mut lo, mut hi) = (-(avg_bits * LN2_SQ + max_n.ln()), -min_n.ln());
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if spent(mid) > budget {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    entries.iter().map(|&n| bits(lo, n)).collect()
}

/// Entries per level of a tree of `levels` levels with size ratio `t`
/// (level i holds `t^i` units), the shape Monkey assumes.
pub fn geometric_entries(levels: usize, t: f64) -> Vec<f64> {
    (0..levels).map(|i| t.powi(i as i32)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum_fpr(bits: &[f64]) -> f64 {
        bits.iter().map(|b| fpr(*b)).sum()
    }

    fn spent(bits: &[f64], n: &[f64]) -> f64 {
        bits.iter().zip(n).map(|(b, n)| b * n).sum()
    }

    #[test]
    fn the_budget_is_spent_and_fprs_are_proportional_to_level_sizes() {
        let n = geometric_entries(4, 10.0);
        let bits = allocate(10.0, &n);
        let total: f64 = n.iter().sum();
        assert!((spent(&bits, &n) - 10.0 * total).abs() < 1e-6 * total);
        // Closed form where no level is capped: FPR_i / FPR_j = n_i / n_j,
        // i.e. b_i − b_{i+1} = ln(T) / ln²2.
        for w in bits.windows(2) {
            assert!((w[0] - w[1] - 10f64.ln() / LN2_SQ).abs() < 1e-6, "{bits:?}");
        }
        // Smaller levels get more bits; the sum of FPRs beats uniform bits.
        assert!(bits[0] > bits[3]);
        assert!(sum_fpr(&bits) < sum_fpr(&[10.0; 4]));
    }

    #[test]
    fn matches_a_brute_force_search() {
        // Three levels, ratio 5, 4 bits per key: search every allocation on
        // a 0.02-bit grid of the first two levels, the third taking the
        // remaining budget.
        let n = [1.0, 5.0, 25.0];
        let budget = 4.0 * 31.0;
        let mut best = f64::INFINITY;
        for i in 0..=1500 {
            for j in 0..=800 {
                let (b0, b1) = (i as f64 * 0.02, j as f64 * 0.02);
                let rest = budget - b0 * n[0] - b1 * n[1];
                if rest < 0.0 {
                    continue;
                }
                best = best.min(sum_fpr(&[b0, b1, rest / n[2]]));
            }
        }
        let got = sum_fpr(&allocate(4.0, &n));
        assert!(got <= best + 1e-9, "monkey {got} vs brute force {best}");
        assert!(got >= best - 1e-3, "monkey {got} vs brute force {best}");
    }

    #[test]
    fn tiny_budgets_leave_the_largest_levels_without_filters() {
        let n = geometric_entries(3, 10.0);
        let bits = allocate(0.5, &n);
        assert_eq!(bits[2], 0.0, "{bits:?}");
        assert!(bits[0] > 0.0);
        let total: f64 = n.iter().sum();
        assert!((spent(&bits, &n) - 0.5 * total).abs() < 1e-6 * total);
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(allocate(10.0, &[]), Vec::<f64>::new());
        assert_eq!(allocate(0.0, &[1.0, 10.0]), [0.0, 0.0]);
        assert_eq!(allocate(5.0, &[0.0, 0.0]), [0.0, 0.0]);
        let one = allocate(7.0, &[42.0]);
        assert!((one[0] - 7.0).abs() < 1e-9);
    }
}
