//! MinLatency and Binomial (Mathieu et al., seed 003 §III): static policies
//! whose action on flush `t` depends on `k` and `t` alone.
//!
//! On flush `t` each computes `i` (the runs to keep) and merges the `i`-th
//! oldest run with every newer run, leaving `i` runs. The flush counter is
//! `TreeView::flushes` (the engine counts flushes since it opened; after a
//! reopen the schedule starts again from `t = 1`).

use std::sync::atomic::{AtomicU64, Ordering};

use super::math::{binomial_runs, minlatency_runs};
use std::ops::Range;

use super::{parse_params, require_k, Common, StackPolicy, StackRun};
use crate::error::Result;
use crate::{PolicyDefaults, TreeView};

/// The last `(t, runs)` a static policy computed, packed as `t << 8 | runs`
/// (0 = none): the engine and the simulator ask again after every merge of
/// the same flush, and the combinatorics are the costly part of a pick.
#[derive(Debug, Default)]
struct Memo(AtomicU64);

impl Memo {
    fn get_or(&self, t: u64, compute: impl FnOnce(u64) -> u64) -> u64 {
        let packed = self.0.load(Ordering::Relaxed);
        if packed != 0 && packed >> 8 == t {
            return packed & 0xff;
        }
        let runs = compute(t);
        if t < 1 << 56 && runs < 1 << 8 {
            self.0.store(t << 8 | runs, Ordering::Relaxed);
        }
        runs
    }
}

impl Clone for Memo {
    fn clone(&self) -> Self {
        Memo(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }
}

/// Merges so that `keep` runs remain: the `keep`-th oldest run and all newer
/// ones become one run. Nothing if the stack is small enough.
fn leave(
    view: &TreeView,
    runs: &[StackRun<'_>],
    keep: u64,
    name: &str,
) -> Option<(Range<usize>, String)> {
    let keep = usize::try_from(keep).ok()?;
    if keep == 0 || runs.len() <= keep {
        return None;
    }
    let merged = runs.len() - keep + 1;
    Some((
        0..merged,
        format!(
            "{name}: flush {} leaves {keep} runs (merging the {merged} newest)",
            view.flushes
        ),
    ))
}

/// MinLatency: on flush `t`, keep `B(m', k, t)` runs with
/// `m' = min{m : C(m+k, m) > t}`. Lazy: adds runs until there are `k`.
#[derive(Debug, Clone)]
pub struct MinLatency {
    /// Run bound.
    pub k: usize,
    common: Common,
    memo: Memo,
}

impl MinLatency {
    /// Builds from spec parameters `k=` (required) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let common = parse_params("minlatency", params, defaults, |_, _| Ok(false))?;
        require_k("minlatency", common.k)?;
        Ok(MinLatency {
            k: common.k,
            common,
            memo: Memo::default(),
        })
    }

    /// Runs kept after flush `t`.
    pub fn runs_after(&self, t: u64) -> u64 {
        self.memo.get_or(t, |t| minlatency_runs(self.k as u64, t))
    }
}

impl StackPolicy for MinLatency {
    const NAME: &'static str = "minlatency";

    fn common(&self) -> &Common {
        &self.common
    }

    fn choose(&self, view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)> {
        leave(view, runs, self.runs_after(view.flushes), Self::NAME)
    }
}

/// Binomial: on flush `t`, keep `1 + B(m', min(m', k) − 1, t − T_k(m'−1) − 1)`
/// runs with `m' = min{m : T_k(m) >= t}`. Merges early in small-n runs,
/// behaves like MinLatency once `t` exceeds about `4^k`.
#[derive(Debug, Clone)]
pub struct Binomial {
    /// Run bound.
    pub k: usize,
    common: Common,
    memo: Memo,
}

impl Binomial {
    /// Builds from spec parameters `k=` (required) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let common = parse_params("binomial", params, defaults, |_, _| Ok(false))?;
        require_k("binomial", common.k)?;
        Ok(Binomial {
            k: common.k,
            common,
            memo: Memo::default(),
        })
    }

    /// Runs kept after flush `t`.
    pub fn runs_after(&self, t: u64) -> u64 {
        self.memo.get_or(t, |t| binomial_runs(self.k as u64, t))
    }
}

impl StackPolicy for Binomial {
    const NAME: &'static str = "binomial";

    fn common(&self) -> &Common {
        &self.common
    }

    fn choose(&self, view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)> {
        leave(view, runs, self.runs_after(view.flushes), Self::NAME)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::stack::testutil::{defaults, Model};
    use crate::CompactionPolicy;

    #[test]
    fn minlatency_k3_schedule_by_hand() {
        // k = 3: flushes 1..3 add runs; flush 4 (m' = 2, B(2,3,4) = 1)
        // merges all into 4; then the stack refills lazily.
        let p = MinLatency::from_params(&[("k", "3")], defaults()).unwrap();
        let mut m = Model::default();
        let sizes: Vec<Vec<u64>> = (0..8).map(|_| m.flush(&p, 1)).collect();
        assert_eq!(
            sizes,
            vec![
                vec![1],
                vec![1, 1],
                vec![1, 1, 1],
                vec![4],
                vec![1, 4],
                vec![1, 1, 4],
                vec![3, 4],
                vec![1, 3, 4],
            ]
        );
    }

    #[test]
    fn binomial_k4_schedule_by_hand() {
        // T_4: 1, 4, 14, 49. Flush 1 (m'=1) keeps 1; flushes 2..4 (m'=2,
        // B(2,1,·) over t' = 0,1,2 → 0,1,1) keep 1,2,2; flush 5 (m'=3,
        // t'=0) keeps 1.
        let p = Binomial::from_params(&[("k", "4")], defaults()).unwrap();
        let mut m = Model::default();
        let sizes: Vec<Vec<u64>> = (0..6).map(|_| m.flush(&p, 1)).collect();
        assert_eq!(
            sizes,
            vec![
                vec![1],
                vec![2],
                vec![1, 2],
                vec![2, 2],
                vec![5],
                vec![1, 5],
            ]
        );
    }

    #[test]
    fn static_policies_keep_k_runs_and_wait_for_busy_runs() {
        let p = Binomial::from_params(&[("k", "3")], defaults()).unwrap();
        let mut m = Model::default();
        for _ in 0..2000 {
            assert!(m.flush(&p, 7).len() <= 3);
        }
        let busy = m.view_with_busy_newest(4);
        assert!(p.pick(&busy).is_empty());
    }

    #[test]
    fn k_is_required_and_specs_round_trip() {
        assert!(MinLatency::from_params(&[], defaults()).is_err());
        assert!(Binomial::from_params(&[("k", "0")], defaults()).is_err());
        assert!(Binomial::from_params(&[("k", "4"), ("x", "1")], defaults()).is_err());
        let p = Binomial::from_params(&[("k", "4"), ("file", "100")], defaults()).unwrap();
        assert_eq!(p.spec(), "binomial:k=4,file=100");
        let p = MinLatency::from_params(&[("k", "5")], defaults()).unwrap();
        assert_eq!(p.spec(), "minlatency:k=5");
    }
}
