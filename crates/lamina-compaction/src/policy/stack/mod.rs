//! Stack-based merge policies (seed 003 §III, seed 000 ch. 3–4) and the
//! thesis' leveled policy.
//!
//! A stack-based tree is one stack of sorted runs, newest first. A flush
//! pushes a run; a merge replaces *consecutive* runs by one run ranked as the
//! newest of them, so every policy here is *stable* (a read can stop at the
//! first run holding its key). Bounded-depth policies keep at most `k` runs
//! once a flush's merges are done.
//!
//! The stack is every run of the view in recency order: level 0 first, then
//! deeper levels (left there by another strategy before `set_compaction`).
//! Merge outputs go to level 0 as a new run. While any run of the stack is
//! being merged these policies wait (except `concurrent`, which, like
//! AsterixDB, may merge the newest idle runs next to a running merge).
//!
//! Every policy is a pure function of the view: the flush counter of the
//! static policies is `TreeView::flushes`, so the engine and the simulator
//! take the same decisions from the same tree.

use std::fmt::Debug;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::partition::{PartitionParams, Partitioning};
use crate::{
    param, CompactionPolicy, CompactionTask, OutputRun, PolicyDefaults, RunView, TaskInput,
    TreeView,
};

mod dynamic;
mod leveled;
mod math;
mod statics;
mod tiered;

pub use dynamic::{Bigtable, Concurrent, Constant, Exploring, NoMerge};
pub use leveled::Leveled;
pub use math::{binomial_coefficient, binomial_runs, minlatency_runs, stack_depth, t_k};
pub use statics::{Binomial, MinLatency};
pub use tiered::Tiered;

/// One run of the stack.
#[derive(Debug, Clone, Copy)]
pub struct StackRun<'a> {
    /// The level holding it.
    pub level: usize,
    /// The run.
    pub run: &'a RunView,
    /// Its bytes.
    pub bytes: u64,
    /// True if a running compaction owns one of its files.
    pub busy: bool,
}

/// A policy over one stack of runs, newest first, that merges consecutive
/// runs into a new run (seed 003's model). A policy says *which* runs
/// ([`StackPolicy::choose`]); the blanket [`CompactionPolicy`] impl does the
/// rest once for all of them: the stack, waiting while a merge runs, the
/// task, the spec string.
pub trait StackPolicy: Send + Sync + Debug {
    /// The name its specs start with.
    const NAME: &'static str;
    /// True if it may merge idle runs while others are being merged
    /// (AsterixDB's Concurrent); otherwise it waits for an idle stack.
    const MERGES_BESIDE_BUSY: bool = false;
    /// The parameters every stack policy takes (`k=`, `file=`).
    fn common(&self) -> &Common;
    /// The name its [`CompactionPolicy::spec`] starts with: the spelling
    /// the policy was built from. Default: [`StackPolicy::NAME`].
    fn name(&self) -> &'static str {
        Self::NAME
    }
    /// Its parameters as a spec writes them, `file=` left out. Default:
    /// `k=K`.
    fn params(&self) -> String {
        format!("k={}", self.common().k)
    }
    /// The run bound `k` of a bounded-depth policy. Default: `k=`'s value
    /// (none if not given).
    fn bound(&self) -> Option<usize> {
        Some(self.common().k).filter(|&k| k > 0)
    }
    /// The runs to merge now, as a range of `runs` (newest first), with the
    /// reason; `None` if the stack is in shape.
    fn choose(&self, view: &TreeView, runs: &[StackRun<'_>]) -> Option<(Range<usize>, String)>;
}

impl<P: StackPolicy> CompactionPolicy for P {
    fn spec(&self) -> String {
        let mut params = self.params();
        params.push_str(&self.common().file_suffix());
        let params = params.trim_start_matches(',');
        let sep = if params.is_empty() { "" } else { ":" };
        format!("{}{sep}{params}", self.name())
    }

    fn run_bound(&self) -> Option<usize> {
        self.bound()
    }

    fn partitioning(&self) -> Option<Partitioning> {
        self.common().partitioning
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        let runs = stack(view);
        if !P::MERGES_BESIDE_BUSY && runs.iter().any(|r| r.busy) {
            return Vec::new();
        }
        match self.choose(view, &runs) {
            Some((range, reason)) => match runs.get(range) {
                Some(chosen) if !chosen.is_empty() => {
                    vec![merge_runs(chosen, self.common(), reason)]
                }
                _ => Vec::new(),
            },
            None => Vec::new(),
        }
    }
}

/// Every run of the view, newest first (level by level).
pub(crate) fn stack(view: &TreeView) -> Vec<StackRun<'_>> {
    view.levels
        .iter()
        .enumerate()
        .flat_map(|(level, l)| {
            l.runs.iter().map(move |run| StackRun {
                level,
                run,
                bytes: run.bytes(),
                busy: run.files.busy() > 0,
            })
        })
        .collect()
}

/// A task merging `runs` (consecutive, newest first) into a new level-0 run.
pub(crate) fn merge_runs(runs: &[StackRun<'_>], common: &Common, reason: String) -> CompactionTask {
    CompactionTask {
        inputs: runs
            .iter()
            .map(|r| TaskInput::whole_run(r.level, r.run))
            .collect(),
        output_level: 0,
        output_run: OutputRun::New,
        target_file_size: common.file,
        partitioning: common.partitioning,
        buffer: None,
        reason,
    }
}

/// Spec parameters shared by the stack policies.
#[derive(Debug, Clone, Copy)]
pub struct Common {
    /// Run bound k (0 = not given).
    pub k: usize,
    /// Output file size.
    pub file: u64,
    /// True if `file=` was given (so `spec()` repeats it).
    pub file_given: bool,
    /// `partition=`, `theta=` (default: `file`), `subcompactions=`
    /// (default 1) and `image=`: partitioned merges (seed 000 ch. 5).
    pub partitioning: Option<Partitioning>,
}

/// Parses `params` with `extra` handling the policy's own keys (returns
/// false for an unknown key). `k=` and `file=` are handled here.
pub(crate) fn parse_params(
    name: &str,
    params: &[(&str, &str)],
    defaults: PolicyDefaults,
    mut extra: impl FnMut(&str, &str) -> Result<bool>,
) -> Result<Common> {
    let mut common = Common {
        k: 0,
        file: defaults.target_file_size,
        file_given: false,
        partitioning: None,
    };
    let mut partitioning = PartitionParams::default();
    for &(key, value) in params {
        match key {
            "k" => common.k = param(key, value)?,
            "file" => {
                common.file = param(key, value)?;
                common.file_given = true;
            }
            _ => {
                // The policy's own parameters first: `leveled` reads
                // `partition=` itself.
                if !extra(key, value)? && !partitioning.parse(name, key, value)? {
                    return Err(Error::unknown_parameter(name, key));
                }
            }
        }
    }
    if common.file == 0 {
        return Err(Error::InvalidArgument(format!("{name} needs file >= 1")));
    }
    common.partitioning = partitioning.finish(name, common.file)?;
    Ok(common)
}

/// Checks that the bounded-depth policy `name` got `k >= 1`.
pub(crate) fn require_k(name: &str, k: usize) -> Result<()> {
    if k == 0 {
        return Err(Error::InvalidArgument(format!(
            "{name} needs k=K (the run bound, K >= 1), e.g. {name}:k=4"
        )));
    }
    Ok(())
}

impl Common {
    /// `,file=N` if `file=` was given and the partitioning parameters, for
    /// `spec()`.
    pub fn file_suffix(&self) -> String {
        let mut s = String::new();
        if self.file_given {
            s.push_str(&format!(",file={}", self.file));
        }
        if let Some(p) = self.partitioning {
            s.push_str(&format!(",{p}"));
        }
        s
    }
}

#[cfg(test)]
pub(crate) mod testutil;
