//! Robust tuning (Endure, Huynh et al., VLDB 2022): the worst cost per
//! operation over every operation mix within KL divergence `ρ` of the
//! expected one, `max { Σ w_i c_i : KL(w ‖ w₀) ≤ ρ }`.
//!
//! Endure solves it through its Lagrangian dual, a one-dimensional convex
//! problem: `min_{λ > 0} λρ + λ ln Σ_i w₀_i e^(c_i / λ)`. The expected mix
//! is first smoothed with [`SMOOTHING`] of a uniform mix, so that the
//! neighbourhood includes operations the given mix never runs (under KL
//! alone, a read-only workload could never drift towards writes).

/// Share of a uniform mix blended into the expected one.
pub const SMOOTHING: f64 = 0.01;

/// The worst cost of `costs` over mixes within KL divergence `rho` of
/// `mix` (both in the same order; `mix` sums to 1).
pub fn worst_case(mix: &[f64], costs: &[f64], rho: f64) -> f64 {
    let n = mix.len().min(costs.len());
    if n == 0 {
        return 0.0;
    }
    let w0: Vec<f64> = mix[..n]
        .iter()
        .map(|w| (1.0 - SMOOTHING) * w + SMOOTHING / n as f64)
        .collect();
    let costs = &costs[..n];
    let nominal: f64 = w0.iter().zip(costs).map(|(w, c)| w * c).sum();
    let cmax = costs.iter().copied().fold(f64::MIN, f64::max);
    if rho <= 0.0 || !cmax.is_finite() || cmax <= 0.0 {
        return nominal;
    }
    // λρ + λ ln Σ w₀ e^(c/λ), computed as λρ + cmax + λ ln Σ w₀ e^((c − cmax)/λ).
    let dual = |lambda: f64| {
        let s: f64 = w0
            .iter()
            .zip(costs)
            .map(|(w, c)| w * ((c - cmax) / lambda).exp())
            .sum();
        lambda * rho + cmax + lambda * s.ln()
    };
    // Convex in λ, so unimodal in ln λ: golden-section search.
    let (mut lo, mut hi) = ((cmax * 1e-9).ln(), (cmax * 1e9).ln());
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..200 {
        let a = hi - g * (hi - lo);
        let b = lo + g * (hi - lo);
        if dual(a.exp()) < dual(b.exp()) {
            hi = b;
        } else {
            lo = a;
        }
    }
    // Never below the nominal cost nor above the dearest operation.
    dual((0.5 * (lo + hi)).exp()).clamp(nominal, cmax)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KL(w ‖ w0).
    fn kl(w: &[f64], w0: &[f64]) -> f64 {
        w.iter()
            .zip(w0)
            .filter(|(w, _)| **w > 0.0)
            .map(|(w, v)| w * (w / v).ln())
            .sum()
    }

    #[test]
    fn the_dual_matches_a_brute_force_search_over_mixes() {
        // Three operations: search the simplex on a fine grid for the
        // costliest mix within the KL ball.
        let mix = [0.6, 0.3, 0.1];
        let costs = [1.0, 5.0, 20.0];
        for rho in [0.05, 0.2, 1.0] {
            let w0: Vec<f64> = mix.iter().map(|w| 0.99 * w + 0.01 / 3.0).collect();
            let mut best = f64::MIN;
            let steps = 600;
            for i in 0..=steps {
                for j in 0..=steps - i {
                    let w = [
                        i as f64 / steps as f64,
                        j as f64 / steps as f64,
                        (steps - i - j) as f64 / steps as f64,
                    ];
                    if kl(&w, &w0) <= rho {
                        best = best.max(w.iter().zip(costs).map(|(w, c)| w * c).sum());
                    }
                }
            }
            let got = worst_case(&mix, &costs, rho);
            assert!(
                (got - best).abs() < 0.02 * best,
                "rho {rho}: {got} vs {best}"
            );
        }
    }

    #[test]
    fn no_uncertainty_is_the_nominal_cost() {
        let got = worst_case(&[1.0, 0.0], &[2.0, 100.0], 0.0);
        assert!((got - (0.995 * 2.0 + 0.005 * 100.0)).abs() < 1e-9);
        // The ball grows towards the dear operation.
        assert!(worst_case(&[1.0, 0.0], &[2.0, 100.0], 0.5) > 10.0);
    }
}
