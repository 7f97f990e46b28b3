//! db_bench's `--histogram`: per operation type, the latency of each
//! operation in whole microseconds, in RocksDB's buckets (1, 2, then ×1.5
//! cut to two significant digits) and printed as RocksDB's
//! `HistogramImpl::ToString` prints them (count, average, standard
//! deviation, min, median, max, P50/P75/P99/P99.9/P99.99 interpolated
//! within a bucket, then one line per non-empty bucket).

use std::fmt::Write as _;
use std::sync::OnceLock;

/// RocksDB's `HistogramBucketMapper`: the upper limits of the buckets.
fn limits() -> &'static [u64] {
    static LIMITS: OnceLock<Vec<u64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut limits = vec![1u64, 2];
        let mut v = 2.0f64;
        loop {
            v *= 1.5;
            if v > u64::MAX as f64 {
                break;
            }
            // Two significant digits: 172 becomes 170.
            let mut b = v as u64;
            let mut pow = 1u64;
            while b / 10 > 10 {
                b /= 10;
                pow *= 10;
            }
            limits.push(b.saturating_mul(pow));
        }
        limits
    })
}

/// One operation type's latencies, in microseconds.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    min: u64,
    max: u64,
    count: u64,
    sum: u64,
    sum_squares: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: vec![0; limits().len()],
            min: u64::MAX,
            max: 0,
            count: 0,
            sum: 0,
            sum_squares: 0.0,
        }
    }
}

impl Histogram {
    /// Records one operation of `micros`.
    pub fn add(&mut self, micros: u64) {
        let l = limits();
        let i = if micros >= l[l.len() - 1] {
            l.len() - 1
        } else {
            l.partition_point(|&b| b < micros)
        };
        self.buckets[i] += 1;
        self.min = self.min.min(micros);
        self.max = self.max.max(micros);
        self.count += 1;
        self.sum = self.sum.saturating_add(micros);
        self.sum_squares += (micros as f64) * (micros as f64);
    }

    /// Adds `other`'s operations (another thread's).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
        self.sum_squares += other.sum_squares;
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `p`th percentile (0..=100), interpolated linearly within its
    /// bucket and clamped to [min, max], as RocksDB computes it.
    pub fn percentile(&self, p: f64) -> f64 {
        let threshold = self.count as f64 * (p / 100.0);
        let l = limits();
        let mut cumulative = 0u64;
        for (b, &n) in self.buckets.iter().enumerate() {
            cumulative += n;
            if cumulative as f64 >= threshold {
                let left = if b == 0 { 0 } else { l[b - 1] };
                let right = l[b];
                let left_sum = cumulative - n;
                let pos = if n == 0 {
                    0.0
                } else {
                    (threshold - left_sum as f64) / n as f64
                };
                let r = left as f64 + (right - left) as f64 * pos;
                return r.max(self.min as f64).min(self.max as f64);
            }
        }
        self.max as f64
    }

    fn average(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    fn standard_deviation(&self) -> f64 {
        let n = self.count as f64;
        if n == 0.0 {
            return 0.0;
        }
        let sum = self.sum as f64;
        let variance = (self.sum_squares * n - sum * sum) / (n * n);
        variance.max(0.0).sqrt()
    }

    /// RocksDB's text: three summary lines, a rule, then a line per
    /// non-empty bucket: `[ left, right ] count percent% cumulative% ###`.
    pub fn render(&self) -> String {
        let mut r = String::new();
        let (min, max) = if self.count == 0 {
            (0, 0)
        } else {
            (self.min, self.max)
        };
        let _ = writeln!(
            r,
            "Count: {} Average: {:.4}  StdDev: {:.2}",
            self.count,
            self.average(),
            self.standard_deviation()
        );
        let _ = writeln!(
            r,
            "Min: {min}  Median: {:.4}  Max: {max}",
            self.percentile(50.0)
        );
        let _ = writeln!(
            r,
            "Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}",
            self.percentile(50.0),
            self.percentile(75.0),
            self.percentile(99.0),
            self.percentile(99.9),
            self.percentile(99.99)
        );
        r.push_str("------------------------------------------------------\n");
        if self.count == 0 {
            return r;
        }
        let mult = 100.0 / self.count as f64;
        let l = limits();
        let mut cumulative = 0u64;
        for (b, &n) in self.buckets.iter().enumerate() {
            if n == 0 {
                continue;
            }
            cumulative += n;
            let _ = write!(
                r,
                "{} {:>7}, {:>7} ] {:>8} {:>7.3}% {:>7.3}% ",
                if b == 0 { '[' } else { '(' },
                if b == 0 { 0 } else { l[b - 1] },
                l[b],
                n,
                mult * n as f64,
                mult * cumulative as f64
            );
            // 20 marks for 100%.
            let marks = (mult * n as f64 / 5.0 + 0.5) as usize;
            r.push_str(&"#".repeat(marks));
            r.push('\n');
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first limits as RocksDB's mapper makes them (the ×1.5 runs on
    /// unrounded values: 115.3 gives 110, 172.9 gives 170; db_bench's
    /// `( 76, 110 ]` buckets).
    #[test]
    fn bucket_limits_are_rocksdbs() {
        assert_eq!(
            &limits()[..20],
            &[
                1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110, 170, 250, 380, 580, 870, 1300, 1900,
                2900
            ]
        );
        assert!(limits().windows(2).all(|w| w[0] < w[1]));
    }

    /// Percentiles against the exact order statistics of values that each
    /// fill a bucket's upper limit (so interpolation lands on them), and
    /// the text's summary lines.
    #[test]
    fn percentiles_and_text() {
        let mut a = Histogram::default();
        let mut b = Histogram::default();
        for i in 0..100u64 {
            // 50 at 1 µs, 25 at 3, 24 at 9, 1 at 42.
            let v = match i {
                0..50 => 1,
                50..75 => 3,
                75..99 => 9,
                _ => 42,
            };
            if i % 2 == 0 { &mut a } else { &mut b }.add(v);
        }
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert_eq!(a.percentile(50.0), 1.0);
        assert_eq!(a.percentile(75.0), 3.0);
        assert_eq!(a.percentile(100.0), 42.0);
        let text = a.render();
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "Count: 100 Average: 3.8300  StdDev: 5.02"
        );
        assert_eq!(lines.next().unwrap(), "Min: 1  Median: 1.0000  Max: 42");
        assert!(lines
            .next()
            .unwrap()
            .starts_with("Percentiles: P50: 1.00 P75: 3.00 P99: "));
        lines.next();
        assert_eq!(
            lines.next().unwrap(),
            "[       0,       1 ]       50  50.000%  50.000% ##########"
        );
        assert_eq!(
            lines.next().unwrap(),
            "(       2,       3 ]       25  25.000%  75.000% #####"
        );
    }
}
