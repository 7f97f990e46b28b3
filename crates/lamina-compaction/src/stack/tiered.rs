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
#[derive(Debug, Clone)]
pub struct Tiered {
    /// Runs per tier (size ratio B).
    pub b: usize,
    /// Lower bound of a tier, relative to its average run.
    pub low: f64,
    /// Upper bound of a tier, relative to its average run.
    pub high: f64,
    common: Common,
}

impl Tiered {
    /// Builds from spec parameters `b=` (default `Options::size_ratio`),
    /// `low=` (0.5), `high=` (1.5) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut b = defaults.size_ratio;
        let (mut low, mut high): (f64, f64) = (0.5, 1.5);
        let common = parse_params("tiered", params, defaults, |k, v| {
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
                "tiered needs b >= 2 and 0 < low <= 1 <= high".into(),
            ));
        }
        Ok(Tiered {
            b,
            low,
            high,
            common,
        })
    }
}

impl StackPolicy for Tiered {
    const NAME: &'static str = "tiered";

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
                return Some((
                    end - self.b..end,
                    format!(
                        "tiered: tier of {} runs at {start}, merging its {} oldest",
                        end - start,
                        self.b
                    ),
                ));
            }
            start = end;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::testutil::{defaults, view_of, Model};
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
    fn params_are_checked() {
        assert!(Tiered::from_params(&[("b", "1")], defaults()).is_err());
        assert!(Tiered::from_params(&[("low", "2")], defaults()).is_err());
        let p = Tiered::from_params(&[], defaults()).unwrap();
        assert_eq!(p.spec(), "tiered:b=4");
    }
}
