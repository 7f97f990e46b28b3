//! The combinatorics of MinLatency and Binomial (seed 003 §III).
//!
//! `B(m, k, t)` is the stack depth of node `t` in `τ*(m, k)`, the unique
//! binary search tree on `{1, …, C(m+k, k) − 1}` with maximum stack depth
//! `k − 1` and maximum merge depth `m − 1`. The paper's recurrence:
//!
//! ```text
//! B(m, k, 0) = 0
//! B(m, k, t) = B(m − 1, k, t)                       if t <  C(m+k−1, k)
//!            = 1 + B(m, k − 1, t − C(m+k−1, k))       if t >= C(m+k−1, k)
//! ```
//!
//! is evaluated iteratively here, carrying `C(m+k−1, k)` from step to step
//! (one multiply and one exact divide per step), so a policy decision costs
//! O(m' + k) word operations and never recurses.
//!
//! Binomial coefficients saturate at `u64::MAX`; every comparison against a
//! flush count below 2^57 is exact.

/// `a * b / d`, exact when the true result is an integer (as every use here).
fn mul_div(a: u64, b: u64, d: u64) -> u64 {
    if d == 0 {
        return u64::MAX;
    }
    match a.checked_mul(b) {
        Some(p) => p / d,
        None => u64::try_from(u128::from(a) * u128::from(b) / u128::from(d)).unwrap_or(u64::MAX),
    }
}

/// The binomial coefficient C(n, r), saturating at `u64::MAX`.
pub fn binomial_coefficient(n: u64, r: u64) -> u64 {
    if r > n {
        return 0;
    }
    let r = r.min(n - r);
    let mut acc: u64 = 1;
    for i in 1..=r {
        // acc = C(n − r + i − 1, i − 1) → C(n − r + i, i). Every partial
        // value is at most the result, so once one overflows so does it.
        acc = match acc.checked_mul(n - r + i) {
            Some(p) => p / i,
            None => match u64::try_from(u128::from(acc) * u128::from(n - r + i) / u128::from(i)) {
                Ok(v) => v,
                Err(_) => return u64::MAX,
            },
        };
    }
    acc
}

/// `B(m, k, t)`: the stack depth of node `t` in `τ*(m, k)`.
///
/// Defined for `t < C(m+k, k)`; outside that domain the result is the depth
/// reached when the recurrence runs out of `m` or `k`.
pub fn stack_depth(m: u64, k: u64, t: u64) -> u64 {
    if m == 0 || k == 0 || t == 0 {
        return 0;
    }
    depth_from(m, k, t, binomial_coefficient(m + k - 1, k))
}

/// `B(m, k, t)` given `c = C(m+k−1, k)`.
fn depth_from(mut m: u64, mut k: u64, mut t: u64, mut c: u64) -> u64 {
    let mut depth = 0;
    while t > 0 && k > 0 && m > 0 {
        let n = m + k - 1;
        if c == u64::MAX {
            // Saturated: recompute exactly once it is small enough.
            c = binomial_coefficient(n, k);
        }
        if t < c {
            // C(n − 1, k) = C(n, k) · (n − k) / n, with n − k = m − 1.
            c = mul_div(c, m - 1, n);
            m -= 1;
        } else {
            t -= c;
            depth += 1;
            // C(n − 1, k − 1) = C(n, k) · k / n.
            c = mul_div(c, k, n);
            k -= 1;
        }
    }
    depth
}

/// MinLatency: the number of runs left after flush `t` (1-based),
/// `B(m', k, t)` with `m' = min{m : C(m+k, m) > t}`. 0 for `t = 0`.
pub fn minlatency_runs(k: u64, t: u64) -> u64 {
    if k == 0 || t == 0 {
        return 0;
    }
    if k == 1 {
        // B(m, 1, t) = 1 for every t >= 1.
        return 1;
    }
    // prev = C(m−1+k, m−1) = C(m+k−1, k); cur = C(m+k, m).
    let mut m: u64 = 1;
    let mut prev: u64 = 1;
    let mut cur: u64 = k + 1;
    while cur <= t {
        prev = cur;
        // C(m+1+k, m+1) = C(m+k, m) · (m+1+k) / (m+1).
        cur = mul_div(cur, m + 1 + k, m + 1);
        m += 1;
    }
    depth_from(m, k, t, prev)
}

/// `T_k(m) = Σ_{i=1..m} C(i + min(i, k) − 1, i)`, saturating.
pub fn t_k(k: u64, m: u64) -> u64 {
    let mut total: u64 = 0;
    let mut term: u64 = 1;
    for i in 1..=m {
        total = total.saturating_add(term);
        term = next_term(k, i, term);
    }
    total
}

/// `C(i+1 + min(i+1, k) − 1, i+1)` from the term of `i`.
fn next_term(k: u64, i: u64, term: u64) -> u64 {
    if i < k {
        // C(2i+1, i+1) = C(2i−1, i) · 2(2i+1) / (i+1)
        mul_div(term, 2 * (2 * i + 1), i + 1)
    } else {
        // C(i+k, k−1) = C(i+k−1, k−1) · (i+k) / (i+1)
        mul_div(term, i + k, i + 1)
    }
}

/// Binomial: the number of runs left after flush `t` (1-based),
/// `1 + B(m', min(m', k) − 1, t − T_k(m'−1) − 1)` with
/// `m' = min{m : T_k(m) >= t}`. 0 for `t = 0`.
pub fn binomial_runs(k: u64, t: u64) -> u64 {
    if k == 0 || t == 0 {
        return 0;
    }
    if k == 1 {
        // B(m', 0, ·) = 0.
        return 1;
    }
    // Find m' with T_k(m'−1) < t <= T_k(m').
    let mut m: u64 = 1;
    let mut before: u64 = 0; // T_k(m − 1)
    let mut term: u64 = 1; // C(m + min(m, k) − 1, m)
    while before.saturating_add(term) < t {
        before = before.saturating_add(term);
        term = next_term(k, m, term);
        m += 1;
    }
    let kk = m.min(k) - 1;
    let tt = t - before - 1;
    1 + stack_depth(m, kk, tt)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's recurrence, literally.
    fn b_ref(m: u64, k: u64, t: u64) -> u64 {
        if t == 0 || m == 0 || k == 0 {
            return 0;
        }
        let c = binomial_coefficient(m + k - 1, k);
        if t < c {
            b_ref(m - 1, k, t)
        } else {
            1 + b_ref(m, k - 1, t - c)
        }
    }

    fn minlatency_ref(k: u64, t: u64) -> u64 {
        let m = (1..).find(|&m| binomial_coefficient(m + k, m) > t).unwrap();
        b_ref(m, k, t)
    }

    fn binomial_ref(k: u64, t: u64) -> u64 {
        let tk = |m: u64| -> u64 {
            (1..=m)
                .map(|i| binomial_coefficient(i + i.min(k) - 1, i))
                .sum()
        };
        let m = (1..).find(|&m| tk(m) >= t).unwrap();
        1 + b_ref(m, m.min(k) - 1, t - tk(m - 1) - 1)
    }

    #[test]
    fn binomial_coefficients() {
        assert_eq!(binomial_coefficient(0, 0), 1);
        assert_eq!(binomial_coefficient(5, 2), 10);
        assert_eq!(binomial_coefficient(5, 6), 0);
        assert_eq!(binomial_coefficient(20, 10), 184_756);
        assert_eq!(binomial_coefficient(66, 33), 7_219_428_434_016_265_740);
        assert_eq!(binomial_coefficient(200, 100), u64::MAX);
    }

    #[test]
    fn iterative_b_matches_the_recurrence() {
        for k in 1..=8 {
            for m in 1..=8 {
                let n = binomial_coefficient(m + k, k) - 1;
                for t in 0..=n.min(3000) {
                    assert_eq!(stack_depth(m, k, t), b_ref(m, k, t), "B({m},{k},{t})");
                }
            }
        }
    }

    #[test]
    fn b_is_a_stack_depth_below_k() {
        // τ*(m, k) has maximum stack depth k − 1 counted from 0 at the root
        // path; the paper's B counts the node itself, so 1 <= B <= k.
        for k in 1..=6 {
            for m in 1..=6 {
                let n = binomial_coefficient(m + k, k) - 1;
                for t in 1..=n {
                    let b = stack_depth(m, k, t);
                    assert!((1..=k).contains(&b), "B({m},{k},{t}) = {b}");
                }
            }
        }
    }

    #[test]
    fn policies_match_their_literal_definitions() {
        for k in 1..=10 {
            for t in 1..=1500 {
                assert_eq!(
                    minlatency_runs(k, t),
                    minlatency_ref(k, t),
                    "minlatency k={k} t={t}"
                );
                assert_eq!(
                    binomial_runs(k, t),
                    binomial_ref(k, t),
                    "binomial k={k} t={t}"
                );
            }
        }
    }

    #[test]
    fn runs_left_never_exceed_k() {
        for k in 1..=10 {
            for t in 1..=20_000 {
                assert!((1..=k).contains(&minlatency_runs(k, t)));
                assert!((1..=k).contains(&binomial_runs(k, t)));
            }
        }
        // Far out, the scan still terminates quickly and stays in range.
        for k in 2..=12 {
            let t = 1u64 << 40;
            assert!((1..=k).contains(&minlatency_runs(k, t)));
            assert!((1..=k).contains(&binomial_runs(k, t)));
        }
    }

    #[test]
    fn t_k_closed_form_for_m_above_k() {
        // For m >= k: T_k(m) = T_k(k) + C(m+k, k) − C(2k, k) (hockey stick).
        for k in 1..=6 {
            for m in k..=30 {
                assert_eq!(
                    t_k(k, m),
                    t_k(k, k) + binomial_coefficient(m + k, k) - binomial_coefficient(2 * k, k)
                );
            }
        }
        assert_eq!(t_k(4, 0), 0);
        assert_eq!(t_k(4, 3), 1 + 3 + 10);
    }

    #[test]
    fn first_flushes_are_lazy_for_minlatency() {
        // MinLatency is lazy: flushes 1..=k just add runs, flush k+1 merges all.
        for k in 1..=8 {
            for t in 1..=k {
                assert_eq!(minlatency_runs(k, t), t);
            }
            assert_eq!(minlatency_runs(k, k + 1), 1);
        }
    }
}
