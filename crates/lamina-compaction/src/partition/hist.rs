//! StreamHist: the streaming histogram of Ben-Haim and Tom-Tov ("A
//! Streaming Parallel Decision Tree Algorithm", JMLR 2010), which seed 000
//! §5.4.4 keeps per SSTable to estimate how many keys fall in a key range
//! (Alg. 5.8). At most `max_bins` bins `(centroid, count)`; a new point
//! becomes a bin, and the two closest bins merge while there are too many.

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
}
