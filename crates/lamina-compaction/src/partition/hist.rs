//! StreamHist: the streaming histogram of Ben-Haim and Tom-Tov ("A
//! Streaming Parallel Decision Tree Algorithm", JMLR 2010), which seed 000
//! §5.4.4 keeps per SSTable to estimate how many keys fall in a key range
//! (Alg. 5.8). At most `max_bins` bins `(centroid, count)`; a new point
//! becomes a bin, and the two closest bins merge while there are too many.
//!
//! A merge estimates sizes as Alg. 5.8 does: the input files' histograms
//! are merged into one, `h_m` ([`StreamHist::merge`]), and
//! `SIZEINRANGE(l, u)` is `h_m.SUM(u) − h_m.SUM(l − 1)`, each `SUM` result
//! cached by its argument ([`CachedSum`]): BINARYSPLIT's halves share their
//! split point, and each half one bound with its parent, so three of the
//! four `SUM`s a split asks for are hits.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Bins an SSTable's histogram keeps (the seed's setting).
pub const DEFAULT_BINS: usize = 128;

/// One bin: `count` points around `centroid`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// Mean of the bin's points.
    pub centroid: f64,
    /// Points in the bin.
    pub count: u64,
}

/// A streaming histogram of `u64` points (key images).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamHist {
    max_bins: usize,
    bins: Vec<Bin>,
    total: u64,
}

impl Default for StreamHist {
    fn default() -> Self {
        StreamHist::new(DEFAULT_BINS)
    }
}

impl StreamHist {
    /// An empty histogram of at most `max_bins` bins (at least 2).
    pub fn new(max_bins: usize) -> Self {
        StreamHist {
            max_bins: max_bins.max(2),
            bins: Vec::with_capacity(max_bins.max(2) + 1),
            total: 0,
        }
    }

    /// A histogram of `bins` as stored (sorted by centroid, counts > 0),
    /// or `None` if they are not.
    pub fn from_bins(bins: Vec<Bin>, max_bins: usize) -> Option<Self> {
        let sorted = bins.windows(2).all(|w| w[0].centroid < w[1].centroid);
        let valid = bins.iter().all(|b| b.count > 0 && b.centroid.is_finite());
        if !sorted || !valid || bins.len() > max_bins.max(2) {
            return None;
        }
        let total = bins.iter().try_fold(0u64, |t, b| t.checked_add(b.count))?;
        Some(StreamHist {
            max_bins: max_bins.max(2),
            bins,
            total,
        })
    }

    /// The bins, by centroid.
    pub fn bins(&self) -> &[Bin] {
        &self.bins
    }

    /// Points inserted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Adds one point.
    pub fn insert(&mut self, x: u64) {
        self.add(Bin {
            centroid: x as f64,
            count: 1,
        });
        self.shrink();
    }

    /// Adds every point of `other`.
    pub fn merge(&mut self, other: &StreamHist) {
        for &b in &other.bins {
            self.add(b);
        }
        self.shrink();
    }

    fn add(&mut self, bin: Bin) {
        self.total = self.total.saturating_add(bin.count);
        // Keys arrive sorted while a table is written: the common case
        // appends.
        let at = match self.bins.last() {
            Some(last) if last.centroid < bin.centroid => self.bins.len(),
            _ => self.bins.partition_point(|b| b.centroid < bin.centroid),
        };
        match self.bins.get_mut(at) {
            Some(b) if b.centroid == bin.centroid => b.count = b.count.saturating_add(bin.count),
            _ => self.bins.insert(at, bin),
        }
    }

    /// Merges the closest pairs of bins until at most `max_bins` remain.
    fn shrink(&mut self) {
        while self.bins.len() > self.max_bins {
            let mut best = 0;
            let mut gap = f64::INFINITY;
            for (i, w) in self.bins.windows(2).enumerate() {
                let g = w[1].centroid - w[0].centroid;
                if g < gap {
                    gap = g;
                    best = i;
                }
            }
            let (a, b) = (self.bins[best], self.bins[best + 1]);
            let count = a.count + b.count;
            let centroid =
                (a.centroid * a.count as f64 + b.centroid * b.count as f64) / count as f64;
            self.bins[best] = Bin { centroid, count };
            self.bins.remove(best + 1);
        }
    }

    /// Estimated number of points `<= x` (the paper's `sum`, with the
    /// trapezoid between neighbouring bins; half of a bin's points are taken
    /// to lie on each side of its centroid).
    pub fn sum(&self, x: f64) -> f64 {
        let Some(first) = self.bins.first() else {
            return 0.0;
        };
        if x < first.centroid {
            return 0.0;
        }
        let i = self.bins.partition_point(|b| b.centroid <= x) - 1;
        let Some(&next) = self.bins.get(i + 1) else {
            return self.total as f64;
        };
        let here = self.bins[i];
        let before: u64 = self.bins[..i].iter().map(|b| b.count).sum();
        let (mi, mj) = (here.count as f64, next.count as f64);
        let span = next.centroid - here.centroid;
        let frac = (x - here.centroid) / span;
        let mb = mi + (mj - mi) * frac;
        before as f64 + mi / 2.0 + (mi + mb) / 2.0 * frac
    }

    /// Estimated number of points in `[lo, hi]`.
    pub fn count_in(&self, lo: u64, hi: u64) -> f64 {
        if hi < lo {
            return 0.0;
        }
        let below = if lo == 0 {
            0.0
        } else {
            self.sum((lo - 1) as f64)
        };
        (self.sum(hi as f64) - below).max(0.0)
    }
}

/// `SIZEINRANGE` over a cumulative size `sum(x)` (the estimated bytes of
/// the keys with images `<= x`; for a histogram, [`StreamHist::sum`] scaled
/// to bytes), with every `sum` result cached by its argument (seed 000
/// §5.4.4: "we use a hash table to cache the SUM results as they may be
/// reused many times in the recursions of BINARYSPLIT").
pub struct CachedSum<F: Fn(u64) -> f64> {
    sum: F,
    cache: RefCell<HashMap<u64, f64>>,
    hits: Cell<u64>,
}

impl<F: Fn(u64) -> f64> CachedSum<F> {
    /// Caches the results of `sum`.
    pub fn new(sum: F) -> Self {
        CachedSum {
            sum,
            cache: RefCell::new(HashMap::new()),
            hits: Cell::new(0),
        }
    }

    /// `sum(x)`, computed once per `x`.
    pub fn sum(&self, x: u64) -> f64 {
        if let Some(&s) = self.cache.borrow().get(&x) {
            self.hits.set(self.hits.get() + 1);
            return s;
        }
        let s = (self.sum)(x);
        self.cache.borrow_mut().insert(x, s);
        s
    }

    /// Estimated bytes of the keys with images in `[l, u]`:
    /// `sum(u) − sum(l − 1)`, rounded (0 for an empty range).
    pub fn size_in(&self, l: u64, u: u64) -> u64 {
        if u < l {
            return 0;
        }
        let below = l.checked_sub(1).map_or(0.0, |x| self.sum(x));
        (self.sum(u) - below).max(0.0).round() as u64
    }

    /// `sum` calls answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.get()
    }

    /// Distinct arguments `sum` was computed for.
    pub fn misses(&self) -> u64 {
        self.cache.borrow().len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn few_points_are_exact() {
        let mut h = StreamHist::new(8);
        for x in [10, 20, 30] {
            h.insert(x);
        }
        assert_eq!(h.bins().len(), 3);
        assert_eq!(h.count_in(0, 100), 3.0);
        assert_eq!(h.sum(5.0), 0.0);
        assert_eq!(h.sum(30.0), 3.0);
    }

    #[test]
    fn bins_stay_bounded_and_counts_add_up() {
        let mut h = StreamHist::new(16);
        for x in 0..10_000u64 {
            h.insert(x * 7);
        }
        assert!(h.bins().len() <= 16);
        assert_eq!(h.total(), 10_000);
        assert_eq!(h.bins().iter().map(|b| b.count).sum::<u64>(), 10_000);
        let mut g = StreamHist::new(16);
        g.merge(&h);
        g.merge(&h);
        assert_eq!(g.total(), 20_000);
        assert!(g.bins().len() <= 16);
    }

    /// Range counts against exact counts: uniform, skewed and clustered
    /// keys, 128 bins, ranges of a tenth of the span. The error is reported
    /// as a fraction of all points.
    #[test]
    fn range_estimates_are_close_to_exact_counts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let sets: Vec<(&str, Vec<u64>)> = vec![
            ("uniform", (0..50_000).map(|_| rng.gen::<u64>()).collect()),
            (
                "skewed",
                (0..50_000)
                    .map(|_| (rng.gen::<f64>().powi(4) * u64::MAX as f64) as u64)
                    .collect(),
            ),
            (
                "clustered",
                (0..50_000)
                    .map(|i| (i % 5) * (u64::MAX / 5) + rng.gen_range(0..1u64 << 40))
                    .collect(),
            ),
        ];
        for (name, mut keys) in sets {
            keys.sort_unstable();
            let mut h = StreamHist::default();
            for &k in &keys {
                h.insert(k);
            }
            let mut worst: f64 = 0.0;
            for i in 0..10u64 {
                let lo = i * (u64::MAX / 10);
                let hi = lo + u64::MAX / 10 - 1;
                let exact = keys.iter().filter(|&&k| k >= lo && k <= hi).count() as f64;
                let est = h.count_in(lo, hi);
                worst = worst.max((est - exact).abs() / keys.len() as f64);
            }
            assert!(worst < 0.02, "{name}: worst error {worst}");
        }
    }

    /// Keys of `files` files of `per_file` keys each: uniform, skewed
    /// (a power of a uniform) or clustered in five narrow ranges, the
    /// files' key ranges overlapping as a merge's inputs' do.
    fn merge_inputs(
        rng: &mut impl Rng,
        shape: &str,
        files: usize,
        per_file: usize,
    ) -> Vec<Vec<u64>> {
        (0..files)
            .map(|f| {
                let mut keys: Vec<u64> = (0..per_file)
                    .map(|i| match shape {
                        "uniform" => rng.gen::<u64>(),
                        "skewed" => (rng.gen::<f64>().powi(4) * u64::MAX as f64) as u64,
                        _ => ((i + f) as u64 % 5) * (u64::MAX / 5) + rng.gen_range(0..1u64 << 40),
                    })
                    .collect();
                keys.sort_unstable();
                keys
            })
            .collect()
    }

    /// Alg. 5.8's h_m, the inputs' histograms merged into one, against
    /// exact counts of the keys in ranges. The bound is the StreamHist's
    /// own: `SUM(x)` places the points of the bins on either side of `x`
    /// by the trapezoid, so an estimate of `[l, u]` can be off by at most
    /// the points of the two bins around `l` and the two around `u`, and
    /// h_m's bins hold about `total / 128` points each.
    #[test]
    fn merged_histogram_estimates_ranges_within_its_bins() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for shape in ["uniform", "skewed", "clustered"] {
            let inputs = merge_inputs(&mut rng, shape, 6, 5_000);
            let mut h_m = StreamHist::default();
            for keys in &inputs {
                let mut h_t = StreamHist::default();
                keys.iter().for_each(|&k| h_t.insert(k));
                h_m.merge(&h_t);
            }
            let mut all: Vec<u64> = inputs.concat();
            all.sort_unstable();
            assert_eq!(h_m.total(), all.len() as u64);
            assert!(h_m.bins().len() <= DEFAULT_BINS);
            let exact = |l: u64, u: u64| {
                (all.partition_point(|&k| k <= u) - all.partition_point(|&k| k < l)) as f64
            };
            // Bins around x: the last at or below it and the first above.
            let around = |x: f64| -> f64 {
                let i = h_m.bins().partition_point(|b| b.centroid <= x);
                let below = i.checked_sub(1).and_then(|j| h_m.bins().get(j));
                [below, h_m.bins().get(i)]
                    .into_iter()
                    .flatten()
                    .map(|b| b.count as f64)
                    .sum()
            };
            for _ in 0..500 {
                let (a, b) = (rng.gen::<u64>(), rng.gen::<u64>());
                let (l, u) = (a.min(b), a.max(b));
                let err = (h_m.count_in(l, u) - exact(l, u)).abs();
                let bound = around(l as f64) + around(u as f64);
                assert!(
                    err <= bound,
                    "{shape} [{l}, {u}]: off by {err}, bound {bound}"
                );
            }
            // The bound is tight where the keys are spread: no bin holds
            // 4% of them (an even spread puts 0.8% in each). Bins merge by
            // the distance of their centroids, not their counts, so skewed
            // keys pile into a few wide bins at the dense end (28% in one
            // here), and there the bound is as loose as the histogram.
            let largest = h_m.bins().iter().map(|b| b.count).max().unwrap_or(0);
            assert!(
                shape == "skewed" || largest * 25 <= h_m.total(),
                "{shape}: a bin of {largest} of {} keys",
                h_m.total()
            );
        }
    }

    /// BINARYSPLIT's SUMs repeat and the cache answers them: a split of
    /// `[l, u]` (l > 0) into halves asks SUM(l − 1), SUM(m), SUM(m) and
    /// SUM(u), of which SUM(l − 1) and SUM(u) its parent asked already. So
    /// over a split tree of `i` splits, SUM is computed for `i + 2`
    /// arguments and answered `3i` times from the cache; no range is
    /// visited twice (a cache keyed by range would never hit).
    #[test]
    fn the_sum_cache_answers_three_of_the_four_sums_of_every_split() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let inputs = merge_inputs(&mut rng, "uniform", 4, 4_000);
        let mut h_m = StreamHist::default();
        for keys in &inputs {
            let mut h_t = StreamHist::default();
            keys.iter().for_each(|&k| h_t.insert(k));
            h_m.merge(&h_t);
        }
        let computed = Cell::new(0u64);
        let sums = CachedSum::new(|x| {
            computed.set(computed.get() + 1);
            h_m.sum(x as f64) * 100.0
        });
        let visited = RefCell::new(Vec::new());
        let size_in = |l: u64, u: u64| {
            visited.borrow_mut().push((l, u));
            sums.size_in(l, u)
        };
        let (l, u) = (1u64 << 60, u64::MAX - 7);
        let bounds = crate::partition::binary_split(l, u, 40 * 1024, &size_in);
        let visited = visited.into_inner();
        let splits = (visited.len() as u64 - 1) / 2;
        assert!(bounds.len() > 20 && splits >= bounds.len() as u64 - 1);
        assert_eq!(sums.misses(), splits + 2);
        assert_eq!(computed.get(), splits + 2);
        assert_eq!(sums.hits(), 3 * splits);
        let distinct: std::collections::HashSet<_> = visited.iter().collect();
        assert_eq!(distinct.len(), visited.len());
    }
}
