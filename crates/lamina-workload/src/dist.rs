//! Key distributions of the key-value workload generators ([`crate::ycsb`],
//! [`crate::kv`]).
//!
//! * [`YcsbZipfian`]: YCSB's `ZipfianGenerator` (Gray et al., "Quickly
//!   generating billion-record synthetic databases"), including its
//!   incremental ζ update when the item count grows; θ < 1 only.
//! * [`ScrambledZipfian`]: YCSB's `ScrambledZipfianGenerator`: a θ = 0.99
//!   Zipfian over 10^10 items whose rank is FNV-hashed into the key range, so
//!   the popular keys are spread over the key space.
//! * [`SkewedLatest`]: YCSB's `SkewedLatestGenerator`: Zipfian distance back
//!   from the most recently inserted key.
//! * [`Zipf`]: rejection-inversion sampling (Hörmann and Derflinger) for any
//!   exponent `s > 0`, including the `s = 1` that Gray's method cannot do.
//! * [`KeyDist`]: uniform, Zipf s = 1 or normal with σ = 34 % of the range,
//!   the three distributions of seed 001's generator.
//!
//! Every sampler draws its randomness through [`unit_f64`] and
//! [`uniform_below`], whose arithmetic is this crate's own, so a stream
//! depends only on the seed.

use rand::RngCore;

/// θ of YCSB's request distribution `zipfian`.
pub const YCSB_ZIPFIAN_THETA: f64 = 0.99;
/// Items of the Zipfian behind YCSB's scrambled Zipfian.
pub const YCSB_SCRAMBLED_ITEMS: u64 = 10_000_000_000;
/// ζ(10^10, 0.99), the constant YCSB uses rather than summing 10^10 terms.
pub const YCSB_SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// A uniform double in `[0, 1)` from the top 53 bits of one draw.
pub fn unit_f64(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform integer in `[0, n)` (0 when `n` is 0), by a 128-bit multiply:
/// the bias is below `n / 2^64`.
pub fn uniform_below(rng: &mut impl RngCore, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// YCSB's 64-bit FNV-1a over the eight little-endian bytes of `v`, made
/// non-negative as Java's `Math.abs` does.
pub fn fnv_hash64(mut v: u64) -> u64 {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    (h as i64).wrapping_abs() as u64
}

/// `Σ_{i=from}^{to-1} 1 / (i + 1)^θ`: the terms of ζ for items `from..to`.
fn zeta_terms(from: u64, to: u64, theta: f64) -> f64 {
    (from..to).map(|i| 1.0 / ((i + 1) as f64).powf(theta)).sum()
}

/// YCSB's Zipfian over `[0, items)`: rank 0 is the most popular,
/// `P(i) ∝ 1 / (i + 1)^θ`.
#[derive(Debug, Clone)]
pub struct YcsbZipfian {
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
    /// The item count `zetan` was computed for.
    count_for_zeta: u64,
}

impl YcsbZipfian {
    /// A Zipfian over `items` items; sums ζ in O(items). `theta` must be in
    /// `(0, 1)`.
    pub fn new(items: u64, theta: f64) -> YcsbZipfian {
        YcsbZipfian::with_zetan(items, theta, zeta_terms(0, items, theta))
    }

    /// A Zipfian whose ζ(items, θ) is already known.
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> YcsbZipfian {
        let zeta2 = zeta_terms(0, 2, theta);
        let mut z = YcsbZipfian {
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2,
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// A rank in `[0, count_for_zeta)`.
    pub fn next(&mut self, rng: &mut impl RngCore) -> u64 {
        self.next_below(rng, self.count_for_zeta)
    }

    /// A rank in `[0, items)`; when `items` differs from the last call, ζ is
    /// updated incrementally (growing) or recomputed (shrinking), as YCSB
    /// does for the latest distribution.
    pub fn next_below(&mut self, rng: &mut impl RngCore, items: u64) -> u64 {
        if items != self.count_for_zeta {
            self.zetan = if items > self.count_for_zeta {
                self.zetan + zeta_terms(self.count_for_zeta, items, self.theta)
            } else {
                zeta_terms(0, items, self.theta)
            };
            self.count_for_zeta = items;
            self.eta = self.eta_for(items);
        }
        let u = unit_f64(rng);
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(items.saturating_sub(1));
        }
        let r = (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(items.saturating_sub(1))
    }
}

/// YCSB's scrambled Zipfian over `[0, items)`: a θ = 0.99 Zipfian rank over
/// 10^10 items, FNV-hashed modulo `items`.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    zipf: YcsbZipfian,
    items: u64,
}

impl ScrambledZipfian {
    /// A scrambled Zipfian over `[0, items)` (`items` at least 1).
    pub fn new(items: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            zipf: YcsbZipfian::with_zetan(
                YCSB_SCRAMBLED_ITEMS,
                YCSB_ZIPFIAN_THETA,
                YCSB_SCRAMBLED_ZETAN,
            ),
            items: items.max(1),
        }
    }

    /// A key number in `[0, items)`.
    pub fn next(&mut self, rng: &mut impl RngCore) -> u64 {
        fnv_hash64(self.zipf.next(rng)) % self.items
    }
}

/// YCSB's skewed-latest: the most recent of `count` keys is the most
/// popular, the one before it the second most, and so on (Zipfian θ = 0.99
/// distance from the newest).
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipf: YcsbZipfian,
}

impl SkewedLatest {
    /// A generator for a key count that starts at `count` and grows.
    pub fn new(count: u64) -> SkewedLatest {
        SkewedLatest {
            zipf: YcsbZipfian::new(count.max(1), YCSB_ZIPFIAN_THETA),
        }
    }

    /// A key number in `[0, count)`; `count` is the number of keys inserted
    /// so far (at least 1).
    pub fn next(&mut self, rng: &mut impl RngCore, count: u64) -> u64 {
        let count = count.max(1);
        count - 1 - self.zipf.next_below(rng, count)
    }
}

/// Zipf over `[0, n)` with `P(i) ∝ 1 / (i + 1)^s`, any `s > 0`, O(1) per
/// draw (rejection-inversion, W. Hörmann and G. Derflinger, "Rejection-
/// inversion to generate variates from monotone discrete distributions",
/// 1996, in the formulation of Apache Commons RNG).
#[derive(Debug, Clone, Copy)]
pub struct Zipf {
    n: u64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    squeeze: f64,
}

impl Zipf {
    /// A Zipf over `n >= 1` items with exponent `s > 0`.
    pub fn new(n: u64, s: f64) -> Zipf {
        let mut z = Zipf {
            n: n.max(1),
            s,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            squeeze: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n as f64 + 0.5);
        z.squeeze = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// The number of items.
    pub fn items(&self) -> u64 {
        self.n
    }

    /// A rank in `[0, n)`.
    pub fn next(&self, rng: &mut impl RngCore) -> u64 {
        loop {
            let u = self.h_integral_n + unit_f64(rng) * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inv(u);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.squeeze || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k - 1;
            }
        }
    }

    /// `∫ h`: `(x^(1-s) - 1) / (1 - s)`, `ln x` at `s = 1`.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        expm1_over_x((1.0 - self.s) * log_x) * log_x
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (log1p_over_x(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, continuous at 0.
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x / 3.0)
    }
}

/// `(e^x - 1) / x`, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0)
    }
}

/// A standard normal variate (Box–Muller, one of the pair).
pub fn standard_normal(rng: &mut impl RngCore) -> f64 {
    let u1 = 1.0 - unit_f64(rng); // (0, 1]: ln stays finite
    let u2 = unit_f64(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The distributions of seed 001's generator, over positions `[0, n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyDist {
    /// Every position equally likely.
    #[default]
    Uniform,
    /// Zipf with s = 1: position 0 the most likely, `P(i) ∝ 1 / (i + 1)`.
    Zipf,
    /// Normal around the middle with σ = 34 % of `n`, redrawn outside
    /// `[0, n)`.
    Normal,
}

/// Standard deviation of [`KeyDist::Normal`] as a fraction of the range.
pub const NORMAL_SIGMA_FRACTION: f64 = 0.34;
/// Exponent of [`KeyDist::Zipf`].
pub const ZIPF_EXPONENT: f64 = 1.0;

/// Draws positions in `[0, n)` from a [`KeyDist`], keeping the Zipf set-up
/// for the last `n`.
#[derive(Debug, Clone)]
pub struct KeySampler {
    dist: KeyDist,
    zipf: Option<Zipf>,
}

impl KeySampler {
    /// A sampler of `dist`.
    pub fn new(dist: KeyDist) -> KeySampler {
        KeySampler { dist, zipf: None }
    }

    /// A position in `[0, n)`; `n` must be at least 1.
    pub fn sample(&mut self, rng: &mut impl RngCore, n: u64) -> u64 {
        let n = n.max(1);
        match self.dist {
            KeyDist::Uniform => uniform_below(rng, n),
            KeyDist::Zipf => {
                let zipf = match self.zipf {
                    Some(z) if z.items() == n => z,
                    _ => {
                        let z = Zipf::new(n, ZIPF_EXPONENT);
                        self.zipf = Some(z);
                        z
                    }
                };
                zipf.next(rng)
            }
            KeyDist::Normal => {
                let mean = n as f64 / 2.0;
                let sd = n as f64 * NORMAL_SIGMA_FRACTION;
                // Inside [mean - 1.47 sd, mean + 1.47 sd]: ~86 % of draws.
                loop {
                    let x = mean + sd * standard_normal(rng);
                    if x >= 0.0 && x < n as f64 {
                        return x as u64;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    const DRAWS: usize = 400_000;

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(0x5eed)
    }

    /// Analytic P(rank = i) of a Zipf over n items with exponent s.
    fn zipf_pmf(n: u64, s: f64) -> Vec<f64> {
        let w: Vec<f64> = (1..=n).map(|i| (i as f64).powf(-s)).collect();
        let total: f64 = w.iter().sum();
        w.into_iter().map(|x| x / total).collect()
    }

    /// Observed frequency within 5 binomial standard deviations of `p`
    /// (plus a small absolute slack for rare ranks).
    fn assert_close(observed: usize, p: f64, draws: usize, what: &str) {
        let expected = p * draws as f64;
        let sd = (draws as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (observed as f64 - expected).abs() <= 5.0 * sd + 3.0,
            "{what}: observed {observed}, expected {expected:.1} ± {sd:.1}"
        );
    }

    fn histogram(n: u64, mut draw: impl FnMut() -> u64) -> Vec<usize> {
        let mut h = vec![0usize; n as usize];
        for _ in 0..DRAWS {
            let x = draw();
            assert!(x < n, "draw {x} outside [0, {n})");
            h[x as usize] += 1;
        }
        h
    }

    #[test]
    fn ycsb_zipfian_matches_the_analytic_rank_frequencies() {
        let n = 1000;
        let mut r = rng();
        let mut z = YcsbZipfian::new(n, 0.99);
        let h = histogram(n, || z.next(&mut r));
        let pmf = zipf_pmf(n, 0.99);
        // Gray's method is exact for ranks 0 and 1 and approximates the rest
        // with a continuous curve: check those two exactly and the CDF
        // elsewhere within 2.5 points (the largest error, measured at rank 2,
        // is 0.8 points of mass: 5.2 % drawn for 4.4 % analytic).
        for i in 0..2 {
            assert_close(h[i], pmf[i], DRAWS, &format!("rank {i}"));
        }
        let (mut seen, mut cdf) = (0usize, 0.0f64);
        for i in 0..n as usize {
            seen += h[i];
            cdf += pmf[i];
            let observed = seen as f64 / DRAWS as f64;
            assert!(
                (observed - cdf).abs() < 0.025,
                "CDF at rank {i}: {observed} vs {cdf}"
            );
        }
    }

    #[test]
    fn rejection_inversion_zipf_matches_s1_and_s099() {
        for s in [1.0, 0.99, 1.5] {
            let n = 500;
            let mut r = rng();
            let z = Zipf::new(n, s);
            let h = histogram(n, || z.next(&mut r));
            let pmf = zipf_pmf(n, s);
            for i in [0usize, 1, 2, 3, 5, 10, 50, 200, 499] {
                assert_close(h[i], pmf[i], DRAWS, &format!("s={s} rank {i}"));
            }
        }
    }

    #[test]
    fn scrambled_zipfian_hottest_key_has_the_rank0_mass() {
        // ζ(10^10, 0.99) by Euler–Maclaurin, independent of YCSB's constant:
        // Σ_{i<m} i^-θ exactly plus ∫_m^N x^-θ dx + (m^-θ + N^-θ)/2 + …
        let theta = 0.99;
        let (m, big_n) = (1000.0f64, 1e10f64);
        let head: f64 = (1..1000).map(|i| (i as f64).powf(-theta)).sum();
        let integral = (big_n.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta);
        let ends = (m.powf(-theta) + big_n.powf(-theta)) / 2.0;
        let deriv = theta / 12.0 * m.powf(-theta - 1.0);
        let zeta = head + integral + ends + deriv;
        assert!((zeta - YCSB_SCRAMBLED_ZETAN).abs() < 1e-6, "{zeta}");

        let items = 100_000;
        let mut r = rng();
        let mut z = ScrambledZipfian::new(items);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..DRAWS {
            let k = z.next(&mut r);
            assert!(k < items);
            *counts.entry(k).or_insert(0usize) += 1;
        }
        let hottest = counts.get(&(fnv_hash64(0) % items)).copied().unwrap_or(0);
        assert_close(hottest, 1.0 / zeta, DRAWS, "hottest key");
        // Scrambling spreads the popular keys: the top ten are not adjacent.
        let mut top: Vec<(u64, usize)> = counts.into_iter().collect();
        top.sort_by_key(|t| std::cmp::Reverse(t.1));
        let mut keys: Vec<u64> = top[..10].iter().map(|t| t.0).collect();
        keys.sort_unstable();
        assert!(keys.windows(2).any(|w| w[1] - w[0] > 100));
    }

    #[test]
    fn skewed_latest_favours_the_newest_keys() {
        let mut r = rng();
        let count = 1000;
        let mut z = SkewedLatest::new(count);
        let h = histogram(count, || z.next(&mut r, count));
        let pmf = zipf_pmf(count, YCSB_ZIPFIAN_THETA);
        for d in 0..2 {
            let key = (count - 1 - d) as usize;
            assert_close(h[key], pmf[d as usize], DRAWS, &format!("distance {d}"));
        }
        // Growing the count moves the hot spot to the new newest key.
        let hits = (0..20_000).filter(|_| z.next(&mut r, 2000) == 1999).count();
        let p0 = 1.0 / zeta_terms(0, 2000, YCSB_ZIPFIAN_THETA);
        assert_close(hits, p0, 20_000, "newest after growth");
    }

    #[test]
    fn normal_positions_have_the_configured_spread() {
        let n = 10_000u64;
        let mut r = rng();
        let mut s = KeySampler::new(KeyDist::Normal);
        let draws: Vec<f64> = (0..DRAWS).map(|_| s.sample(&mut r, n) as f64).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        // Truncation to [0, n) keeps the mean at n/2 (symmetric) and shrinks
        // the spread: the truncated normal's P(|x - mean| < sd) is
        // P(|Z| < 1) / P(|Z| < 1/(2·0.34)) = 0.6827 / 0.8586.
        assert!((mean - n as f64 / 2.0).abs() < 0.01 * n as f64, "{mean}");
        let sd = NORMAL_SIGMA_FRACTION * n as f64;
        let within = draws
            .iter()
            .filter(|&&x| (x - n as f64 / 2.0).abs() < sd)
            .count();
        assert_close(within, 0.682_689 / 0.858_6, DRAWS, "within one sigma");
    }

    #[test]
    fn uniform_below_covers_the_range_evenly() {
        let mut r = rng();
        let mut s = KeySampler::new(KeyDist::Uniform);
        let h = histogram(20, || s.sample(&mut r, 20));
        for (i, c) in h.iter().enumerate() {
            assert_close(*c, 0.05, DRAWS, &format!("bucket {i}"));
        }
    }

    #[test]
    fn fnv_matches_ycsb() {
        // FNV-1a of eight zero bytes, computed byte by byte from the
        // published offset basis and prime.
        let mut h: u64 = 0xcbf29ce484222325;
        for _ in 0..8 {
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(fnv_hash64(0), (h as i64).wrapping_abs() as u64);
        assert_ne!(fnv_hash64(1), fnv_hash64(2));
    }
}
