//! The engine's latency histogram ([`Histogram`]) and its summary
//! ([`LatencySummary`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two: a recorded value's bucket is at most
/// 1/128 (0.8%) wider than the value (HdrHistogram's layout with two
/// significant decimal digits).
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this get a bucket each.
const LINEAR: u64 = 2 * SUB;
/// Longest time kept apart: 2^42 ns (73 minutes); longer ones share the
/// last bucket (the maximum is still exact).
const MAX_LOG: u32 = 42;
const BUCKETS: usize = (LINEAR + (MAX_LOG - SUB_BITS) as u64 * SUB) as usize;

/// A lock-free log-linear latency histogram in nanoseconds, with
/// HdrHistogram's bucket layout at two significant digits: percentiles
/// within 0.8% of the recorded values, never above the maximum. (The
/// `hdrhistogram` crate's histograms record through `&mut`; the engine
/// records from every thread at once, so its counters are atomics.)
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    fn bucket(ns: u64) -> usize {
        if ns < LINEAR {
            return ns as usize;
        }
        let log = (63 - ns.leading_zeros()).min(MAX_LOG);
        let shift = log - SUB_BITS;
        let sub = (ns >> shift).min(2 * SUB - 1) - SUB;
        ((LINEAR + u64::from(log - SUB_BITS - 1) * SUB + sub) as usize).min(BUCKETS - 1)
    }

    /// The largest value of `bucket`.
    fn upper(bucket: usize) -> u64 {
        let b = bucket as u64;
        if b < LINEAR {
            return b;
        }
        let log = (b - LINEAR) / SUB + u64::from(SUB_BITS) + 1;
        let sub = (b - LINEAR) % SUB;
        let shift = log - u64::from(SUB_BITS);
        ((SUB + sub + 1) << shift) - 1
    }

    /// Records one duration.
    pub fn record(&self, d: std::time::Duration) {
        self.record_n(d, 1);
    }

    /// Records `n` events that each took `d`.
    pub fn record_n(&self, d: std::time::Duration, n: u64) {
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        if let Some(b) = self.buckets.get(Self::bucket(ns)) {
            b.fetch_add(n, Ordering::Relaxed);
        }
        self.max.fetch_max(ns, Ordering::Relaxed);
        self.count.fetch_add(n, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(ns.saturating_mul(n), Ordering::Relaxed);
    }

    /// Events recorded at or below `d`, counting only buckets that lie
    /// wholly at or below it (so at most 0.8% of `d` is lost, never
    /// anything above `d` gained).
    pub fn count_at_most(&self, d: std::time::Duration) -> u64 {
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.buckets
            .iter()
            .enumerate()
            .take_while(|&(i, _)| Self::upper(i) <= ns)
            .map(|(_, b)| b.load(Ordering::Relaxed))
            .sum()
    }

    /// Cumulative counts at [`LATENCY_BUCKETS_NS`] (Prometheus' `le`
    /// buckets), from one reading of the buckets so that the last bound's
    /// count never exceeds `count`. An event counts at a bound when its
    /// bucket lies wholly at or below it, as in
    /// [`count_at_most`](Self::count_at_most): at most 0.8% of a bound is
    /// lost, nothing above it is gained.
    pub fn buckets(&self) -> LatencyHistogram {
        let mut cumulative = Vec::with_capacity(LATENCY_BUCKETS_NS.len());
        let mut seen = 0u64;
        let mut bound = LATENCY_BUCKETS_NS.iter().copied().peekable();
        for (i, b) in self.buckets.iter().enumerate() {
            while let Some(&ns) = bound.peek() {
                if Self::upper(i) <= ns {
                    break;
                }
                cumulative.push(seen);
                bound.next();
            }
            seen += b.load(Ordering::Relaxed);
        }
        cumulative.resize(LATENCY_BUCKETS_NS.len(), seen);
        LatencyHistogram {
            cumulative,
            count: seen,
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }

    /// p50/p90/p95/p99/p99.9/max in microseconds.
    pub fn summary(&self) -> LatencySummary {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let max = self.max.load(Ordering::Relaxed);
        let quantile = |q: f64| -> f64 {
            if total == 0 {
                return 0.0;
            }
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return Self::upper(i).min(max) as f64 / 1000.0;
                }
            }
            max as f64 / 1000.0
        };
        LatencySummary {
            count: total,
            mean_us: if total == 0 {
                0.0
            } else {
                self.sum_ns.load(Ordering::Relaxed) as f64 / total as f64 / 1000.0
            },
            p50_us: quantile(0.50),
            p90_us: quantile(0.90),
            p95_us: quantile(0.95),
            p99_us: quantile(0.99),
            p999_us: quantile(0.999),
            max_us: max as f64 / 1000.0,
        }
    }
}

/// Upper bounds of [`LatencyHistogram::cumulative`], in nanoseconds: 1,
/// 2.5 and 5 of each decade from 1 µs to 10 s (Prometheus' default
/// buckets, 5 ms to 10 s, extended down to the microseconds a cached get
/// takes).
pub const LATENCY_BUCKETS_NS: [u64; 22] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// One operation's latencies as cumulative buckets (a Prometheus
/// histogram).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LatencyHistogram {
    /// Events at or below each bound of [`LATENCY_BUCKETS_NS`] (within
    /// 0.8% of the bound), non-decreasing.
    pub cumulative: Vec<u64>,
    /// Events recorded (the `+Inf` bucket).
    pub count: u64,
    /// Sum of the recorded durations, ns.
    pub sum_ns: u64,
}

/// The latency histograms of [`DbStats`](crate::DbStats) (`lamina serve
/// --metrics` exports them).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LatencyHistograms {
    /// Each write call: one batch (a put, a delete or a `WriteBatch`).
    pub put: LatencyHistogram,
    /// Point lookups.
    pub get: LatencyHistogram,
    /// Scan set-ups.
    pub scan: LatencyHistogram,
    /// Merges (trivial moves excluded).
    pub compaction: LatencyHistogram,
}

/// Latency percentiles of one operation.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct LatencySummary {
    /// Operations recorded.
    pub count: u64,
    /// Mean, µs.
    #[serde(default)]
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 95th percentile, µs (RocksDB's statistics print it).
    #[serde(default)]
    pub p95_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    #[serde(default)]
    pub p999_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Cumulative buckets against a brute-force count of the recorded
    /// values, which sit away from every bound (so the 0.8% never bites).
    #[test]
    fn buckets_count_the_values_at_or_below_each_bound() {
        let h = Histogram::default();
        let far = |ns: u64| {
            LATENCY_BUCKETS_NS
                .iter()
                .all(|&x| ns < x - x / 64 || ns > x)
        };
        let values: Vec<u64> = (0..2_000u64)
            .map(|i| 900 + i * i * 3_001)
            .filter(|&v| far(v))
            .collect();
        for &ns in &values {
            h.record(Duration::from_nanos(ns));
        }
        let b = h.buckets();
        for (bound, got) in LATENCY_BUCKETS_NS.iter().zip(&b.cumulative) {
            let want = values.iter().filter(|&&v| v <= *bound).count() as u64;
            assert_eq!(*got, want, "le {bound} ns");
        }
        assert_eq!(b.count, values.len() as u64);
        assert_eq!(b.sum_ns, values.iter().sum::<u64>());
        assert_eq!(Histogram::default().buckets().cumulative, vec![0; 22]);
    }

    #[test]
    fn histogram_quantiles_are_within_one_percent_and_never_above_the_max() {
        let h = Histogram::default();
        // 1 µs .. 100 ms, then one outlier: the exact order statistics are
        // known.
        let mut values: Vec<u64> = (1..=100_000u64).map(|i| i * 1000).collect();
        values.push(7_777_777_777);
        for &ns in &values {
            h.record(Duration::from_nanos(ns));
        }
        let s = h.summary();
        assert_eq!(s.count, values.len() as u64);
        for (got, q) in [
            (s.p50_us, 0.5),
            (s.p90_us, 0.9),
            (s.p99_us, 0.99),
            (s.p999_us, 0.999),
        ] {
            let rank = ((values.len() as f64) * q).ceil() as usize;
            let exact = values[rank - 1] as f64 / 1000.0;
            assert!(
                got >= exact && got <= exact * 1.008,
                "q {q}: {got} vs {exact}"
            );
        }
        assert_eq!(s.max_us, 7_777_777.777);
        // A histogram of one value reports it exactly, not its bucket's end.
        let one = Histogram::default();
        one.record(Duration::from_nanos(123_456));
        let s = one.summary();
        assert_eq!((s.p50_us, s.p99_us, s.max_us), (123.456, 123.456, 123.456));
    }

    #[test]
    fn histogram_buckets_tile_the_values_in_order() {
        let mut prev_upper = None;
        for b in 0..BUCKETS {
            let upper = Histogram::upper(b);
            if let Some(p) = prev_upper {
                assert!(upper > p, "bucket {b}");
                // Its first value maps back to it.
                assert_eq!(Histogram::bucket(p + 1), b, "bucket {b}");
            }
            assert_eq!(Histogram::bucket(upper), b, "bucket {b} upper {upper}");
            prev_upper = Some(upper);
        }
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
    }
}
