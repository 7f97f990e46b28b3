//! Size-driven stack policies: Bigtable, Exploring (HBase), Constant and
//! Concurrent (AsterixDB), plus NoMerge.

use std::ops::Range;

use super::{parse_params, require_k, Common, StackPolicy, StackRun};
use crate::error::{Error, Result};
use crate::{param, CompactionPolicy, CompactionTask, PolicyDefaults, TreeView};

/// Bigtable (seed 003 §III): when a flush finds `k` runs, merge it with the
/// fewest newest runs such that afterwards every run is larger than all
/// newer runs together. Lazy.
#[derive(Debug, Clone)]
pub struct Bigtable {
    /// Run bound.
    pub k: usize,
    common: Common,
}

impl Bigtable {
    /// Builds from spec parameters `k=` (required) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let common = parse_params("bigtable", params, defaults, |_, _| Ok(false))?;
        require_k("bigtable", common.k)?;
        Ok(Bigtable {
            k: common.k,
            common,
        })
    }
}

impl StackPolicy for Bigtable {
    const NAME: &'static str = "bigtable";

    fn common(&self) -> &Common {
        &self.common
    }

    fn choose(&self, _view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)> {
        if runs.len() <= self.k {
            return None;
        }
        // Merging the j newest runs leaves run p >= j with exactly the runs
        // 0..p newer than it, whatever j is: run p is fine iff it is larger
        // than their sum. So j must pass the last run that is not.
        let mut newer: u64 = 0;
        let mut last_bad = 0;
        for (p, r) in runs.iter().enumerate() {
            if p > 0 && r.bytes <= newer {
                last_bad = p;
            }
            newer = newer.saturating_add(r.bytes);
        }
        let j = (last_bad + 1).max(runs.len() - self.k + 1).max(2);
        Some((
            0..j,
            format!(
                "bigtable: {} runs > k={}, merging the {j} newest",
                runs.len(),
                self.k
            ),
        ))
    }
}

/// Constant (AsterixDB before 0.9.4): when a flush finds `k` runs, merge
/// everything into one.
#[derive(Debug, Clone)]
pub struct Constant {
    /// Run bound.
    pub k: usize,
    common: Common,
}

impl Constant {
    /// Builds from spec parameters `k=` (required) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let common = parse_params("constant", params, defaults, |_, _| Ok(false))?;
        require_k("constant", common.k)?;
        Ok(Constant {
            k: common.k,
            common,
        })
    }
}

impl StackPolicy for Constant {
    const NAME: &'static str = "constant";

    fn common(&self) -> &Common {
        &self.common
    }

    fn choose(&self, _view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)> {
        (runs.len() > self.k).then(|| {
            (
                0..runs.len(),
                format!("constant: {} runs > k={}, merging all", runs.len(), self.k),
            )
        })
    }
}

/// Window parameters shared by Exploring and Concurrent.
#[derive(Debug, Clone, Copy)]
struct Window {
    lambda: f64,
    c: usize,
    d: usize,
}

impl Window {
    fn parse(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "lambda" => self.lambda = param(key, value)?,
            "c" => self.c = param(key, value)?,
            "d" => self.d = param(key, value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn check(&self, name: &str) -> Result<()> {
        if !(self.lambda.is_finite() && self.lambda > 0.0) || self.c < 2 || self.d < self.c {
            return Err(Error::InvalidArgument(format!(
                "{name} needs lambda > 0 and 2 <= c <= d"
            )));
        }
        Ok(())
    }
}

/// True if a run was created by a merge after the newest flush: flush runs
/// have `id == order`, a merge output takes a fresh (larger) id and the
/// order of its newest input, and ids only grow.
fn merged_since_last_flush(runs: &[StackRun<'_>]) -> bool {
    let newest_flush = runs.iter().map(|r| r.run.order).max().unwrap_or(0);
    runs.iter().any(|r| r.run.id > newest_flush)
}

/// Exploring (HBase's default, seed 003 §III): among windows of `c..=d`
/// consecutive runs whose largest run is at most `lambda` × the rest, merge
/// the longest (if at most `k` runs) or the one with the smallest average
/// run (if more than `k`); with no such window and more than `k` runs, merge
/// the `c` consecutive runs of least total size. Not eager: a window need
/// not hold the newest run. As in the paper's model it merges at most once
/// per flush, unless the stack still exceeds `k`.
#[derive(Debug, Clone)]
pub struct Exploring {
    /// Run bound.
    pub k: usize,
    window: Window,
    common: Common,
}

impl Exploring {
    /// Builds from spec parameters `k=` (required), `lambda=` (1.2), `c=` (2,
    /// seed 003; the thesis and HBase use 3), `d=` (10) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut window = Window {
            lambda: 1.2,
            c: 2,
            d: 10,
        };
        let common = parse_params("exploring", params, defaults, |k, v| window.parse(k, v))?;
        require_k("exploring", common.k)?;
        window.check("exploring")?;
        Ok(Exploring {
            k: common.k,
            window,
            common,
        })
    }
}

impl StackPolicy for Exploring {
    const NAME: &'static str = "exploring";

    fn params(&self) -> String {
        format!(
            "k={},lambda={},c={},d={}",
            self.k, self.window.lambda, self.window.c, self.window.d
        )
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn choose(&self, _view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)> {
        let n = runs.len();
        if n < 2 {
            return None;
        }
        let over = n > self.k;
        if !over && merged_since_last_flush(runs) {
            return None;
        }
        let Window { lambda, c, d } = self.window;
        // (start, len, total) of the best window so far.
        let mut best: Option<(usize, usize, u64)> = None;
        for start in 0..n {
            let mut total: u64 = 0;
            let mut largest: u64 = 0;
            for len in 1..=d.min(n - start) {
                let b = runs[start + len - 1].bytes;
                total = total.saturating_add(b);
                largest = largest.max(b);
                if len < c || largest as f64 > lambda * (total - largest) as f64 {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some((_, blen, btotal)) if !over => {
                        len > blen || (len == blen && total < btotal)
                    }
                    // Smallest average: total/len < btotal/blen.
                    Some((_, blen, btotal)) => {
                        (total as u128) * (blen as u128) < (btotal as u128) * (len as u128)
                    }
                };
                if better {
                    best = Some((start, len, total));
                }
            }
        }
        if let Some((start, len, _)) = best {
            return Some((
                start..start + len,
                format!(
                    "exploring: {} window of {len} runs at {start} ({n} runs, k={})",
                    if over { "smallest-average" } else { "longest" },
                    self.k
                ),
            ));
        }
        if !over {
            return None;
        }
        let width = c.min(n);
        let start = (0..=n - width)
            .min_by_key(|&s| runs[s..s + width].iter().map(|r| r.bytes).sum::<u64>())
            .unwrap_or(0);
        Some((
            start..start + width,
            format!(
                "exploring: no window qualifies, {n} runs > k={}: smallest {width} runs at {start}",
                self.k
            ),
        ))
    }
}

/// Concurrent (AsterixDB's default since replacing Prefix), with two
/// window rules over the newest runs not being merged:
///
/// * `rule=code` (the default: AsterixDB's `ConcurrentMergePolicy`): scan
///   window ends from the oldest; merge runs `start..=end` (at most `d`, at
///   least `c`, ending at `end`) as soon as run `end` is at most `lambda` ×
///   the newer runs of the window;
/// * `rule=text` (seed 000 §4.2.1's wording): windows always start at the
///   newest run; take the longest `{D_i..D_1}` with `c + 1 ≤ i ≤ d` whose
///   oldest run is at most `lambda` × the newer ones.
///
/// With more than `k` runs and no such window, merge everything.
#[derive(Debug, Clone)]
pub struct Concurrent {
    /// Run bound (AsterixDB's max-component-count).
    pub k: usize,
    window: Window,
    rule: ConcurrentRule,
    common: Common,
}

/// Which reading of Concurrent's window rule (see [`Concurrent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrentRule {
    /// AsterixDB's code: any window end, at least `c` runs.
    Code,
    /// The thesis' text: windows from the newest run, at least `c + 1`.
    Text,
}

impl Concurrent {
    /// Builds from spec parameters `k=` (30), `c=` (3), `d=` (10),
    /// `lambda=` (1.2), `rule=` (code) and `file=`.
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut window = Window {
            lambda: 1.2,
            c: 3,
            d: 10,
        };
        let mut rule = ConcurrentRule::Code;
        let mut common = parse_params("concurrent", params, defaults, |k, v| {
            if k == "rule" {
                rule = match v {
                    "code" => ConcurrentRule::Code,
                    "text" => ConcurrentRule::Text,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "concurrent: rule must be code or text, not {v:?}"
                        )))
                    }
                };
                return Ok(true);
            }
            window.parse(k, v)
        })?;
        if !params.iter().any(|(key, _)| *key == "k") {
            common.k = 30;
        }
        require_k("concurrent", common.k)?;
        window.check("concurrent")?;
        Ok(Concurrent {
            k: common.k,
            window,
            rule,
            common,
        })
    }
}

impl StackPolicy for Concurrent {
    const NAME: &'static str = "concurrent";
    const MERGES_BESIDE_BUSY: bool = true;

    fn params(&self) -> String {
        let rule = match self.rule {
            ConcurrentRule::Code => "",
            ConcurrentRule::Text => ",rule=text",
        };
        format!(
            "k={},lambda={},c={},d={}{rule}",
            self.k, self.window.lambda, self.window.c, self.window.d
        )
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn choose(&self, _view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)> {
        let idle = runs.iter().take_while(|r| !r.busy).count();
        let Window { lambda, c, d } = self.window;
        if idle >= c {
            // prefix[i] = bytes of runs 0..i.
            let mut prefix = Vec::with_capacity(idle + 1);
            prefix.push(0u64);
            for r in &runs[..idle] {
                prefix.push(prefix[prefix.len() - 1].saturating_add(r.bytes));
            }
            let fits = |start: usize, end: usize| {
                runs[end].bytes as f64 <= lambda * (prefix[end] - prefix[start]) as f64
            };
            let window = match self.rule {
                ConcurrentRule::Code => (c - 1..idle)
                    .rev()
                    .map(|end| ((end + 1).saturating_sub(d), end))
                    .find(|&(start, end)| fits(start, end)),
                // i = end + 1 runs from the newest, c + 1 <= i <= d.
                ConcurrentRule::Text => (c..idle.min(d))
                    .rev()
                    .map(|end| (0, end))
                    .find(|&(start, end)| fits(start, end)),
            };
            if let Some((start, end)) = window {
                return Some((
                    start..end + 1,
                    format!("concurrent: runs {start}..={end} (run {end} <= lambda x newer)"),
                ));
            }
        }
        if runs.len() > self.k && idle == runs.len() {
            return Some((
                0..runs.len(),
                format!("concurrent: {} runs > k={}, full merge", runs.len(), self.k),
            ));
        }
        None
    }
}

/// Never merges.
#[derive(Debug, Clone, Default)]
pub struct NoMerge;

impl NoMerge {
    /// Builds from spec parameters (none).
    pub fn from_params(params: &[(&str, &str)]) -> Result<Self> {
        match params.first() {
            Some((key, _)) => Err(Error::unknown_parameter("nomerge", key)),
            None => Ok(NoMerge),
        }
    }
}

impl CompactionPolicy for NoMerge {
    fn spec(&self) -> String {
        "nomerge".into()
    }

    fn pick(&self, _view: &TreeView) -> Vec<CompactionTask> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::stack::testutil::{defaults, view_of, Model};
    use crate::CompactionPolicy;

    fn run(p: &dyn CompactionPolicy, flushes: usize) -> Vec<Vec<u64>> {
        let mut m = Model::default();
        (0..flushes).map(|_| m.flush(p, 1)).collect()
    }

    #[test]
    fn bigtable_k4_merges_all_five_into_twelve_at_flush_12() {
        // Seed 000 Fig. 3.1a: after the 12th flush all 5 runs merge into 12.
        let p = Bigtable::from_params(&[("k", "4")], defaults()).unwrap();
        let s = run(&p, 12);
        assert_eq!(s[3], vec![1, 1, 1, 1]);
        assert_eq!(s[4], vec![5]); // 1,1,1,1,1: no run exceeds its newer ones
        assert_eq!(s[8], vec![4, 5]); // 1,1,1,1,5: merging 4 leaves 5 > 4
        assert_eq!(s[10], vec![1, 1, 4, 5]);
        assert_eq!(s[11], vec![12]);
    }

    #[test]
    fn bigtable_merges_the_fewest_newest_runs() {
        let p = Bigtable::from_params(&[("k", "3")], defaults()).unwrap();
        // Newest first 1 | 1, 3, 10: merging 2 gives 2,3,10: 3 > 2, 10 > 5.
        let t = p.pick(&view_of(&[1, 1, 3, 10], 4));
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].inputs.len(), 2);
        // 1 | 2, 2, 10: 2 <= 1+... run 2 (2) <= 1+2 → must merge 3.
        let t = p.pick(&view_of(&[1, 2, 2, 10], 4));
        assert_eq!(t[0].inputs.len(), 3);
        assert!(p.pick(&view_of(&[1, 2, 8], 3)).is_empty());
    }

    #[test]
    fn constant_merges_everything_at_k_plus_one() {
        let p = Constant::from_params(&[("k", "3")], defaults()).unwrap();
        let s = run(&p, 9);
        assert_eq!(s[2], vec![1, 1, 1]);
        assert_eq!(s[3], vec![4]);
        assert_eq!(s[5], vec![1, 1, 4]);
        assert_eq!(s[6], vec![7]);
        assert_eq!(s[8], vec![1, 1, 7]);
    }

    #[test]
    fn exploring_schedule_by_hand() {
        // k = 4, c = 2, d = 10, lambda = 1.2.
        let p = Exploring::from_params(&[("k", "4")], defaults()).unwrap();
        let s = run(&p, 6);
        // Flush 2: [1,1] qualifies (1 <= 1.2) → 2.
        assert_eq!(s[1], vec![2]);
        // Flush 3: [1,2]: 2 > 1.2 → no window; 2 runs <= k → keep.
        assert_eq!(s[2], vec![1, 2]);
        // Flush 4: [1,1,2]: longest window 1,1,2 (2 <= 2.4) → 4.
        assert_eq!(s[3], vec![4]);
        assert_eq!(s[4], vec![1, 4]);
        // Flush 6: [1,1,4] → [1,1] only → 2, one merge per flush.
        assert_eq!(s[5], vec![2, 4]);
    }

    #[test]
    fn exploring_over_k_prefers_small_average_then_c_smallest() {
        let p = Exploring::from_params(&[("k", "3"), ("c", "3")], defaults()).unwrap();
        // 4 runs > k: windows of >= 3 qualifying: [1,1,1] (avg 1) and
        // [1,1,1,100]? 100 > 3.6 no. Picks the 3 newest.
        let t = p.pick(&view_of(&[1, 1, 1, 100], 4));
        assert_eq!(t[0].inputs.len(), 3);
        // Nothing qualifies: 1, 10, 100, 1000 → smallest 3 consecutive.
        let t = p.pick(&view_of(&[1, 10, 100, 1000], 4));
        assert_eq!(
            t[0].inputs.iter().map(|i| i.run_id).collect::<Vec<_>>(),
            vec![4, 3, 2]
        );
        // Within k and nothing qualifies: nothing.
        assert!(p.pick(&view_of(&[1, 10, 100], 3)).is_empty());
    }

    #[test]
    fn concurrent_follows_asterixdb_scan() {
        let p = Concurrent::from_params(&[], defaults()).unwrap();
        assert_eq!(p.spec(), "concurrent:k=30,lambda=1.2,c=3,d=10");
        // Newest first 1,1,1: end 2 (1 <= 1.2*2) → merge all 3.
        let t = p.pick(&view_of(&[1, 1, 1], 3));
        assert_eq!(t[0].inputs.len(), 3);
        // 1,1,3: end 2: 3 > 2.4 → nothing.
        assert!(p.pick(&view_of(&[1, 1, 3], 3)).is_empty());
        // 1,1,1,6: end 3 fails (6 > 3.6), end 2 passes → 3 newest.
        let t = p.pick(&view_of(&[1, 1, 1, 6], 4));
        assert_eq!(t[0].inputs.len(), 3);
        // Windows hold at most d runs: 12 ones, end 11 → start 2.
        let t = p.pick(&view_of(&[1; 12], 12));
        assert_eq!(t[0].inputs.len(), 10);
        assert_eq!(t[0].inputs[0].run_id, 10);
        // Over k with nothing qualifying: full merge.
        let p = Concurrent::from_params(&[("k", "3")], defaults()).unwrap();
        let t = p.pick(&view_of(&[1, 10, 100, 1000], 4));
        assert_eq!(t[0].inputs.len(), 4);
    }

    #[test]
    fn concurrent_text_rule_takes_the_longest_window_from_the_newest() {
        let p = Concurrent::from_params(&[("rule", "text")], defaults()).unwrap();
        assert_eq!(p.spec(), "concurrent:k=30,lambda=1.2,c=3,d=10,rule=text");
        // Three runs are below c + 1 = 4: nothing (the code rule merges them).
        assert!(p.pick(&view_of(&[1, 1, 1], 3)).is_empty());
        // 1,1,1,1: i = 4, 1 <= 1.2 x 3 → all four.
        assert_eq!(p.pick(&view_of(&[1, 1, 1, 1], 4))[0].inputs.len(), 4);
        // 1,1,1,1,8: i = 5 fails (8 > 4.8), i = 4 passes → the newest four
        // (the code rule scans from the oldest end and takes the same).
        let t = p.pick(&view_of(&[1, 1, 1, 1, 8], 5));
        assert_eq!(
            t[0].inputs.iter().map(|i| i.run_id).collect::<Vec<_>>(),
            vec![5, 4, 3, 2]
        );
        // Twelve ones: the window starts at the newest and holds d = 10;
        // the code rule's window ends at the oldest run instead.
        let t = p.pick(&view_of(&[1; 12], 12));
        assert_eq!(t[0].inputs.len(), 10);
        assert_eq!(t[0].inputs[0].run_id, 12);
        assert!(Concurrent::from_params(&[("rule", "x")], defaults()).is_err());
    }

    #[test]
    fn concurrent_merges_newest_idle_runs_next_to_a_busy_one() {
        let p = Concurrent::from_params(&[], defaults()).unwrap();
        let mut v = view_of(&[1, 1, 1, 5], 4);
        let first = v.levels[0].runs[3].files.first().unwrap().id;
        v.levels[0].runs[3].files.update(first, |f| f.busy = true);
        let t = p.pick(&v);
        assert_eq!(t[0].inputs.len(), 3);
        let first = v.levels[0].runs[1].files.first().unwrap().id;
        v.levels[0].runs[1].files.update(first, |f| f.busy = true);
        assert!(p.pick(&v).is_empty());
    }

    #[test]
    fn nomerge_never_merges_and_params_are_checked() {
        let p = NoMerge::from_params(&[]).unwrap();
        assert!(p.pick(&view_of(&[1; 50], 50)).is_empty());
        assert!(NoMerge::from_params(&[("k", "1")]).is_err());
        assert!(Exploring::from_params(&[("k", "3"), ("c", "1")], defaults()).is_err());
        assert!(Exploring::from_params(&[("k", "3"), ("lambda", "-1")], defaults()).is_err());
        assert!(Concurrent::from_params(&[("d", "2")], defaults()).is_err());
        assert!(Bigtable::from_params(&[], defaults()).is_err());
        assert!(Constant::from_params(&[("k", "x")], defaults()).is_err());
    }

    #[test]
    fn bounded_policies_hold_k_for_uneven_flushes() {
        let policies: Vec<Box<dyn CompactionPolicy>> = vec![
            Box::new(Bigtable::from_params(&[("k", "3")], defaults()).unwrap()),
            Box::new(Constant::from_params(&[("k", "3")], defaults()).unwrap()),
            Box::new(Exploring::from_params(&[("k", "3")], defaults()).unwrap()),
            Box::new(Concurrent::from_params(&[("k", "3")], defaults()).unwrap()),
        ];
        for p in &policies {
            let mut m = Model::default();
            for i in 0..3000u64 {
                let size = 1 + (i * 7919) % 13;
                assert!(m.flush(p.as_ref(), size).len() <= 3, "{}", p.spec());
            }
        }
    }
}
