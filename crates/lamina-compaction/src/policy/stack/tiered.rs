//! Size-tiered (Cassandra's SizeTiered as implemented in seed 000 ch. 3–4,
//! RocksDB's Universal in spirit): merge `b` runs of about equal size into
//! one run `b` times larger.

use std::ops::Range;

use super::{parse_params, Common, StackPolicy, StackRun};
use crate::error::{Error, Result};
use crate::{param, PolicyDefaults, TreeView};

/// Tiered: runs are grouped, newest first, into tiers of consecutive runs
/// whose sizes lie within `[low, high]` × the tier's average size (as
/// Cassandra's buckets, but only consecutive runs, so the policy stays
/// stable). When a tier holds `b` runs its `b` oldest merge into one, which
/// then joins the next tier (cascading within the same flush).
///
/// The merge also takes the older runs right behind it that are smaller
/// than `low` × its bytes. Such a run (a small flush, or a tier left short
/// when a smaller run arrived behind it) is older than a run it can never
/// join, so no tier would ever hold it: with flush sizes ±30% of their mean
/// and `b = 4`, 383 such runs were left after 2·10^4 flushes, one more
/// every 50 or so. Runs of a stack in tier order (each older run at least
/// `low` × the merge) are never taken.
#[derive(Debug, Clone)]
pub struct Tiered {
    /// Runs per tier (size ratio B).
    pub b: usize,
    /// Lower bound of a tier, relative to its average run.
    pub low: f64,
    /// Upper bound of a tier, relative to its average run.
    pub high: f64,
    common: Common,
    /// The spelling its spec starts with (`stack-tiered`, or the alias
    /// `tiered` it was built from).
    name: &'static str,
}

impl Tiered {
    /// Builds from spec parameters `b=` (default `Options::size_ratio`),
    /// `low=` (0.5), `high=` (1.5) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut b = defaults.size_ratio;
        let (mut low, mut high): (f64, f64) = (0.5, 1.5);
        let common = parse_params(Self::NAME, params, defaults, |k, v| {
            match k {
                "b" => b = param(k, v)?,
                "low" => low = param(k, v)?,
                "high" => high = param(k, v)?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        if b < 2 || !(low > 0.0 && low <= 1.0 && high >= 1.0 && high.is_finite()) {
            return Err(Error::InvalidArgument(
                "stack-tiered needs b >= 2 and 0 < low <= 1 <= high".into(),
            ));
        }
        Ok(Tiered {
            b,
            low,
            high,
            common,
            name: Self::NAME,
        })
    }

    /// This policy with its spec spelled `name` (an alias it was built
    /// from, so that its spec prints as written).
    pub fn spelled(self, name: &'static str) -> Self {
        Tiered { name, ..self }
    }
}

impl StackPolicy for Tiered {
    const NAME: &'static str = "stack-tiered";

    fn params(&self) -> String {
        let mut s = format!("b={}", self.b);
        if self.low != 0.5 || self.high != 1.5 {
            s.push_str(&format!(",low={},high={}", self.low, self.high));
        }
        s
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn name(&self) -> &'static str {
        self.name
    }

    /// Unbounded: tiers merge by size, whatever the number of runs.
    fn bound(&self) -> Option<usize> {
        None
    }

    fn choose(&self, _view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)> {
        if runs.len() < self.b {
            return None;
        }
        let mut start = 0;
        while start < runs.len() {
            let mut sum = runs[start].bytes as f64;
            let mut end = start + 1;
            while end < runs.len() {
                let avg = sum / (end - start) as f64;
                let size = runs[end].bytes as f64;
                if size < self.low * avg || size > self.high * avg {
                    break;
                }
                sum += size;
                end += 1;
            }
            if end - start >= self.b {
                let mut bytes: u64 = runs[end - self.b..end].iter().map(|r| r.bytes).sum();
                let mut last = end;
                while let Some(older) = runs
                    .get(last)
                    .filter(|r| (r.bytes as f64) < self.low * bytes as f64)
                {
                    bytes += older.bytes;
                    last += 1;
                }
                let mut reason = format!(
                    "tiered: tier of {} runs at {start}, merging its {} oldest",
                    end - start,
                    self.b
                );
                if last > end {
                    reason.push_str(&format!(" and {} smaller older runs", last - end));
                }
                return Some((end - self.b..last, reason));
            }
            start = end;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::stack::testutil::{defaults, view_of, Model};
    use crate::CompactionPolicy;

    #[test]
    fn tiered_b2_cascades_like_a_binary_counter() {
        // Seed 000 Fig. 3.1f: B = 2 merges every 2 flushes, cascading at 4, 8.
        let p = Tiered::from_params(&[("b", "2")], defaults()).unwrap();
        let mut m = Model::default();
        let s: Vec<Vec<u64>> = (0..8).map(|_| m.flush(&p, 1)).collect();
        assert_eq!(s[0], vec![1]);
        assert_eq!(s[1], vec![2]);
        assert_eq!(s[2], vec![1, 2]);
        assert_eq!(s[3], vec![4]);
        assert_eq!(s[6], vec![1, 2, 4]);
        assert_eq!(s[7], vec![8]);
    }

    #[test]
    fn tiers_tolerate_uneven_sizes_and_merge_oldest_b() {
        let p = Tiered::from_params(&[("b", "3")], defaults()).unwrap();
        // 10,12,9 form a tier (within 0.5..1.5 of the running average), 40 not.
        let t = p.pick(&view_of(&[10, 12, 9, 40], 4));
        assert_eq!(t[0].inputs.len(), 3);
        assert_eq!(t[0].inputs[0].run_id, 4);
        // Four equal runs: the 3 oldest of the tier merge.
        let t = p.pick(&view_of(&[5, 5, 5, 5, 100], 5));
        assert_eq!(
            t[0].inputs.iter().map(|i| i.run_id).collect::<Vec<_>>(),
            vec![4, 3, 2]
        );
        assert!(p.pick(&view_of(&[1, 5, 5, 30], 4)).is_empty());
    }

    #[test]
    fn smaller_older_runs_behind_a_merge_join_it() {
        let p = Tiered::from_params(&[("b", "3")], defaults()).unwrap();
        // 4 broke the tier of 10s (below half their average) and could
        // never join a tier in front of it: the merge of the 10s takes it
        // (4 < 0.5 × 30), and 7 (< 0.5 × 34), but not 40.
        let t = p.pick(&view_of(&[10, 10, 10, 4, 7, 40], 6));
        assert_eq!(
            t[0].inputs.iter().map(|i| i.run_id).collect::<Vec<_>>(),
            vec![6, 5, 4, 3, 2]
        );
        // A stack in tier order gives nothing up: 16 >= 0.5 × 12.
        let t = p.pick(&view_of(&[4, 4, 4, 16], 4));
        assert_eq!(t[0].inputs.len(), 3);
    }

    #[test]
    fn uneven_flushes_leave_a_bounded_stack() {
        // Flush sizes uniform in [500, 1500] (a xorshift, seeded): before
        // older smaller runs joined merges, runs were left behind for good
        // (6,002 runs after these 20,000 flushes). Now each is taken by the
        // next merge of the tier in front of it; meanwhile a size class may
        // hold a few short tiers (a run beyond `high` × the average starts
        // a new one), so a class holds up to about twice its b runs: 41 at
        // most here, over log_4(total / 500) + 1 = 9 classes.
        let p = Tiered::from_params(&[("b", "4")], defaults()).unwrap();
        let mut m = Model::default();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let (mut total, mut most) = (0u64, 0usize);
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let size = 500 + x % 1001;
            total += size;
            most = most.max(m.flush(&p, size).len());
        }
        let tiers = (total as f64 / 500.0).log(4.0).ceil() as usize + 1;
        assert!(most <= 2 * 4 * tiers, "{most} runs at most, {tiers} tiers");
    }

    #[test]
    fn params_are_checked() {
        assert!(Tiered::from_params(&[("b", "1")], defaults()).is_err());
        assert!(Tiered::from_params(&[("low", "2")], defaults()).is_err());
        let p = Tiered::from_params(&[], defaults()).unwrap();
        assert_eq!(p.spec(), "stack-tiered:b=4");
    }
}
