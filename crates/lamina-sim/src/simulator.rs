//! The simulator: a model tree driven by one policy, flush by flush.

mod async_merges;
mod partitioned;

use rustc_hash::FxHashMap;

use lamina_compaction::partition::Partition;
use lamina_compaction::plan::{self, Action, Destination};
use lamina_compaction::{
    policy_from_spec, CompactionPolicy, CompactionTask, FileView, InlineKey, LevelView,
    PolicyDefaults, RunView, TreeView,
};

use crate::cut::{density_cuts, oldest, Piece};
use crate::keys::{key, key_value, scramble};
use crate::{FlushRecord, KeyModel, ModelOptions, Result, SimError, Summary, WaDefinition};
use async_merges::Running;

/// The simulator: a model tree driven by one policy.
#[derive(Debug)]
pub struct Simulator {
    policy: Box<dyn CompactionPolicy>,
    spec: String,
    opts: ModelOptions,
    view: TreeView,
    next_id: u64,
    flush_bytes: u64,
    merge_bytes: u64,
    /// Seed 003's `Σ δ`: bytes of the files each step left that it created.
    new_sstable_bytes: u64,
    /// Files created during the current step (id → bytes) and still present.
    step_files: FxHashMap<u64, u64>,
    total_bytes: u64,
    run_sum: u128,
    run_sum_at_flush: u128,
    max_runs: usize,
    max_runs_at_flush: usize,
    max_transient: f64,
    max_transient_flush: u64,
    merges: u64,
    trivial_moves: u64,
    moved_files: u64,
    sub_merges: u64,
    /// Time in flush intervals (asynchronous merges).
    clock: f64,
    stalled: f64,
    running: Vec<Running>,
    /// ∫ sorted runs dt up to `counted_to` (asynchronous merges).
    runs_time: f64,
    counted_to: f64,
}

impl Simulator {
    /// A simulator running `spec` (any spec `policy_from_spec` accepts).
    pub fn from_spec(spec: &str, opts: ModelOptions) -> Result<Self> {
        let defaults = PolicyDefaults {
            size_ratio: opts.size_ratio,
            target_file_size: opts.buffer_bytes.max(1),
        };
        let policy = policy_from_spec(spec, defaults).map_err(|source| SimError::Spec {
            spec: spec.to_string(),
            source,
        })?;
        Self::new(policy, opts)
    }

    /// A simulator running `policy`.
    pub fn new(policy: Box<dyn CompactionPolicy>, opts: ModelOptions) -> Result<Self> {
        if let Some(a) = opts.merges {
            if !(a.cost.is_finite() && a.cost >= 0.0) || a.threads == 0 {
                return Err(SimError::Config(
                    "asynchronous merges need a finite cost >= 0 and at least 1 thread".into(),
                ));
            }
            if opts.wa == WaDefinition::Paper {
                return Err(SimError::Config(
                    "the paper's write amplification counts the SSTables a flush step leaves, \
                     which asynchronous merges do not settle: use the engine's"
                        .into(),
                ));
            }
        }
        if !(0.0..1.0).contains(&opts.dup_ratio) {
            return Err(SimError::Config(format!(
                "duplicate ratio must be in [0, 1), not {}",
                opts.dup_ratio
            )));
        }
        let spec = policy.spec();
        Ok(Simulator {
            policy,
            spec,
            opts,
            view: TreeView {
                levels: vec![LevelView::default()],
                flushes: 0,
                memtable_bytes: opts.buffer_bytes,
                ..TreeView::default()
            },
            next_id: 0,
            flush_bytes: 0,
            merge_bytes: 0,
            new_sstable_bytes: 0,
            step_files: FxHashMap::default(),
            total_bytes: 0,
            run_sum: 0,
            run_sum_at_flush: 0,
            max_runs: 0,
            max_runs_at_flush: 0,
            max_transient: 0.0,
            max_transient_flush: 0,
            merges: 0,
            trivial_moves: 0,
            moved_files: 0,
            sub_merges: 0,
            clock: 0.0,
            stalled: 0.0,
            running: Vec::new(),
            runs_time: 0.0,
            counted_to: 0.0,
        })
    }

    /// The policy's spec.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// The model tree, as the policy sees it.
    pub fn view(&self) -> &TreeView {
        &self.view
    }

    /// Run sizes: per level, newest run first.
    pub fn run_sizes(&self) -> Vec<Vec<u64>> {
        self.view
            .levels
            .iter()
            .map(|l| l.runs.iter().map(RunView::bytes).collect())
            .collect()
    }

    /// Bytes of the oldest sorted run: the last run of the deepest
    /// non-empty level, with the runs of its rank (a tiled level's tiles).
    fn oldest_run_bytes(&self) -> u64 {
        let Some(level) = self.view.levels.iter().rev().find(|l| !l.runs.is_empty()) else {
            return 0;
        };
        lamina_compaction::placement::oldest_rank(&level.runs)
            .map(RunView::bytes)
            .sum()
    }

    /// Sorted runs now.
    pub fn sorted_runs(&self) -> usize {
        self.view.levels.iter().map(|l| l.runs.len()).sum()
    }

    fn alloc_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A file made now, whose oldest data came with flush `seq` (the
    /// model's sequence numbers count flushes: the `old` movement policy
    /// ranks files by them).
    fn new_file(&self, id: u64, size: u64, lo: u64, hi: u64, seq: u64) -> FileView {
        FileView {
            id,
            size,
            entries: size,
            tombstones: 0,
            // `key(lo)` and `key(hi)`, held inline: no allocation.
            smallest: InlineKey::new(&lo.to_be_bytes()),
            largest: InlineKey::new(&hi.to_be_bytes()),
            created_ms: self.view.now_ms,
            arrived_ms: self.view.now_ms,
            smallest_seq: seq,
            oldest_tombstone_ms: None,
            busy: false,
            ..Default::default()
        }
    }

    /// Flushes `bytes`, then applies the policy's tasks until it is done
    /// (with asynchronous merges: finishes the merges that end before this
    /// flush, waits if it must stall, and starts what the policy picks).
    pub fn flush(&mut self, bytes: u64) -> Result<FlushRecord> {
        if let Some(a) = self.opts.merges {
            return self.flush_async(bytes, a);
        }
        self.add_flush(bytes);
        let flush = self.view.flushes;
        self.clock = flush.saturating_sub(1) as f64;
        let runs_at_flush = self.sorted_runs();
        let mut peak = self.total_bytes;
        let mut merges = 0;
        while let Some(task) = self.policy.pick_first(&self.view) {
            if merges >= self.opts.max_merges_per_flush {
                return Err(SimError::NotSettling {
                    policy: self.spec.clone(),
                    flush,
                    merges,
                });
            }
            let during = self.apply(&task)?;
            peak = peak.max(during);
            merges += 1;
        }
        self.new_sstable_bytes += self.step_files.values().sum::<u64>();
        Ok(self.record(bytes, runs_at_flush, peak, merges, 0.0))
    }

    /// Adds a flush of `bytes` as the newest run of level 0.
    fn add_flush(&mut self, bytes: u64) {
        self.view.flushes += 1;
        self.view.now_ms = self.view.flushes;
        let flush = self.view.flushes;
        let partitioning = self
            .policy
            .partitioning()
            .filter(|p| p.partition != Partition::None);
        let (lo, hi) = match self.opts.keys {
            // Random keys do not reach the ends of the key space: under a
            // partitioned policy the ends sit a pseudo-random gap inside
            // (below 2^54, about the gap a few thousand random keys leave),
            // different per flush, so Local-Range's midpoints differ between
            // runs as they do with real keys. Other policies keep the papers'
            // model, where every flush spans the whole space.
            KeyModel::Uniform if partitioning.is_some() => (
                scramble(2 * flush) >> 10,
                u64::MAX - (scramble(2 * flush + 1) >> 10),
            ),
            KeyModel::Uniform => (0, u64::MAX),
            KeyModel::Sequential => (flush << 32, (flush << 32) | 0xffff_ffff),
        };
        // The engine cuts a partitioned policy's flushes too.
        let cut = match partitioning {
            Some(p) => self.partition_cut(
                &[Piece {
                    lo,
                    hi,
                    size: bytes,
                    seq: flush,
                }],
                bytes,
                lo,
                hi,
                p,
            ),
            None => Vec::new(),
        };
        // A one-file flush shares its id with its run, as it always has.
        let id = self.alloc_id();
        let files = if cut.is_empty() {
            vec![self.new_file(id, bytes, lo, hi, flush)]
        } else {
            cut
        };
        if self.view.levels.is_empty() {
            self.view.levels.push(LevelView::default());
        }
        self.view.levels[0].runs.insert(
            0,
            RunView {
                id,
                order: id,
                files: files.into(),
            },
        );
        // The only edit of the model tree outside `plan::apply`.
        self.view.changed(0, &key(lo), &key(hi));
        self.flush_bytes += bytes;
        self.total_bytes += bytes;
        self.step_files.clear();
        for f in &self.view.levels[0].runs[0].files {
            self.step_files.insert(f.id, f.size);
        }
    }

    /// Books a flush's figures and returns its record.
    fn record(
        &mut self,
        bytes: u64,
        runs_at_flush: usize,
        peak: u64,
        merges: u64,
        stalled: f64,
    ) -> FlushRecord {
        let flush = self.view.flushes;
        let sorted_runs = self.sorted_runs();
        self.run_sum += sorted_runs as u128;
        self.run_sum_at_flush += runs_at_flush as u128;
        self.max_runs = self.max_runs.max(sorted_runs);
        self.max_runs_at_flush = self.max_runs_at_flush.max(runs_at_flush);
        let transient = ratio(peak, self.flush_bytes);
        if transient > self.max_transient {
            self.max_transient = transient;
            self.max_transient_flush = flush;
        }
        FlushRecord {
            flush,
            flush_bytes: bytes,
            write_amplification: self.write_amplification(),
            sorted_runs,
            avg_sorted_runs: self.run_sum as f64 / flush as f64,
            runs_at_flush,
            avg_runs_at_flush: self.run_sum_at_flush as f64 / flush as f64,
            transient_space_amplification: transient,
            merges,
            stalled,
        }
    }

    /// Write amplification so far by [`ModelOptions::wa`] (1 before any
    /// flush).
    pub fn write_amplification(&self) -> f64 {
        if self.flush_bytes == 0 {
            return 1.0;
        }
        let written = match self.opts.wa {
            WaDefinition::Engine => self.flush_bytes + self.merge_bytes,
            WaDefinition::Paper => self.new_sstable_bytes,
        };
        written as f64 / self.flush_bytes as f64
    }

    /// Totals so far.
    pub fn summary(&self) -> Summary {
        let flushes = self.view.flushes.max(1) as f64;
        Summary {
            policy: self.spec.clone(),
            flushes: self.view.flushes,
            flush_bytes: self.flush_bytes,
            merge_bytes_written: self.merge_bytes,
            new_sstable_bytes: self.new_sstable_bytes,
            wa_definition: self.opts.wa,
            write_amplification: self.write_amplification(),
            sorted_runs: self.sorted_runs(),
            avg_sorted_runs: self.run_sum as f64 / flushes,
            max_sorted_runs: self.max_runs,
            avg_runs_at_flush: self.run_sum_at_flush as f64 / flushes,
            max_runs_at_flush: self.max_runs_at_flush,
            max_transient_space_amplification: self.max_transient,
            max_transient_flush: self.max_transient_flush,
            space_amplification: ratio(self.total_bytes, self.oldest_run_bytes()),
            merges: self.merges,
            trivial_moves: self.trivial_moves,
            moved_files: self.moved_files,
            sub_merges: self.sub_merges,
            files: self
                .view
                .levels
                .iter()
                .flat_map(|l| &l.runs)
                .map(|r| r.files.len() as u64)
                .sum(),
            runs: self.run_sizes(),
            elapsed: self.clock,
            stalled: self.stalled,
            merges_running: self.running.len(),
            time_avg_runs: if self.opts.merges.is_some() && self.clock > 0.0 {
                self.runs_time / self.clock
            } else {
                self.run_sum as f64 / flushes
            },
        }
    }

    fn invalid(&self, task: &CompactionTask, why: impl Into<String>) -> SimError {
        SimError::InvalidTask {
            policy: self.spec.clone(),
            flush: self.view.flushes,
            reason: task.reason.clone(),
            why: why.into(),
        }
    }

    /// Applies `task` through the planner shared with the engine; returns
    /// the total size while it ran (inputs and output both present).
    fn apply(&mut self, task: &CompactionTask) -> Result<u64> {
        let plan = plan::plan(&self.view, task).map_err(|e| self.invalid(task, e.to_string()))?;
        self.execute(&plan)
    }

    /// Applies a plan to the model tree.
    fn execute(&mut self, plan: &plan::Plan) -> Result<u64> {
        if plan.destination == Destination::Tiles {
            return Err(SimError::SpatialTiles {
                policy: self.spec.clone(),
            });
        }
        let input_bytes = plan.input_bytes();
        let (outputs, during) = match plan.action {
            Action::Move => {
                self.trivial_moves += 1;
                (plan.inputs[0].files.clone(), self.total_bytes)
            }
            Action::Merge
                if matches!(plan.destination, Destination::New { .. })
                    && plan
                        .partitioning
                        .is_some_and(|p| p.partition != Partition::None) =>
            {
                self.partitioned_merge(plan)
            }
            Action::Merge => {
                let overhead = self.opts.file_overhead;
                let run_data: Vec<u64> = plan
                    .inputs
                    .iter()
                    .map(|i| {
                        i.bytes()
                            .saturating_sub(overhead.saturating_mul(i.files.len() as u64))
                    })
                    .collect();
                let data = self.output_bytes(&run_data);
                let pieces: Vec<Piece> = plan
                    .inputs
                    .iter()
                    .flat_map(|i| &i.files)
                    .map(|f| Piece {
                        lo: key_value(&f.smallest),
                        hi: key_value(&f.largest),
                        size: f.size,
                        seq: f.smallest_seq,
                    })
                    .collect();
                let lo = pieces.iter().map(|p| p.lo).min().unwrap_or(0);
                let hi = pieces.iter().map(|p| p.hi).max().unwrap_or(u64::MAX);
                let files = match plan.destination {
                    Destination::New { .. } => {
                        let id = self.alloc_id();
                        let seq = oldest(&pieces);
                        vec![self.new_file(id, data.saturating_add(overhead), lo, hi, seq)]
                    }
                    Destination::Existing { .. } | Destination::Tiles => {
                        self.cut(&pieces, data, lo, hi, plan.target_file_size)
                    }
                };
                let out: u64 = files.iter().map(|f| f.size).sum();
                let during = self.total_bytes + out;
                self.total_bytes = self.total_bytes + out - input_bytes;
                self.merge_bytes += out;
                self.merges += 1;
                self.sub_merges += 1;
                for id in plan.input_file_ids() {
                    self.step_files.remove(&id);
                }
                self.step_files.extend(files.iter().map(|f| (f.id, f.size)));
                (files, during)
            }
        };
        let run_id = match plan.destination {
            Destination::New { .. } => self.alloc_id(),
            Destination::Existing { id, .. } => id,
            // Tiles are named after their files.
            Destination::Tiles => 0,
        };
        plan::apply(&mut self.view, plan, outputs, run_id);
        Ok(during)
    }

    /// Data bytes a merge writes, from its input runs' data bytes.
    fn output_bytes(&self, run_bytes: &[u64]) -> u64 {
        let input_bytes: u64 = run_bytes.iter().sum();
        let d = self.opts.dup_ratio;
        if d == 0.0 {
            return input_bytes;
        }
        let largest = run_bytes.iter().copied().max().unwrap_or(0);
        let rest = (input_bytes - largest) as f64 * (1.0 - d);
        largest + rest.round() as u64
    }

    /// Cuts `out` data bytes over `[lo, hi]` into files of `target` data
    /// bytes (plus the file overhead each), placing the boundaries by the
    /// inputs' data density.
    fn cut(&mut self, pieces: &[Piece], out: u64, lo: u64, hi: u64, target: u64) -> Vec<FileView> {
        let target = target.max(1);
        let overhead = self.opts.file_overhead;
        let count = out.div_ceil(target).max(1);
        let mut files = Vec::with_capacity(count as usize);
        // Once per merge: a whole level's merge has thousands of pieces.
        let seq = oldest(pieces);
        if count == 1 {
            let id = self.alloc_id();
            files.push(self.new_file(id, out.saturating_add(overhead), lo, hi, seq));
            return files;
        }
        let cuts = density_cuts(pieces, out, target, count, lo, hi);
        let mut start = lo;
        let mut written = 0;
        for (i, &end) in cuts.iter().enumerate() {
            let last = i + 1 == cuts.len();
            let size = if last { out - written } else { target };
            let id = self.alloc_id();
            files.push(self.new_file(id, size.saturating_add(overhead), start, end, seq));
            written += size;
            start = end.saturating_add(1);
        }
        files
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tiles are cut by points, which the model lacks: the first tiled
    /// merge is refused, and nothing before it was (the key-ordered cut
    /// of the same policy runs on).
    #[test]
    fn spatial_tiles_are_refused_not_guessed() {
        for rule in ["str", "rstar-grove"] {
            let spec = format!("leveled:b0=2,b=4,partition={rule}");
            let mut sim = Simulator::from_spec(&spec, ModelOptions::default()).unwrap();
            let refused = (0..10).find_map(|_| sim.flush(1 << 20).err());
            assert!(
                matches!(refused, Some(SimError::SpatialTiles { ref policy }) if *policy == spec),
                "{refused:?}"
            );
        }
        let mut sim =
            Simulator::from_spec("leveled:b0=2,b=4,partition=size", ModelOptions::default())
                .unwrap();
        for _ in 0..100 {
            sim.flush(1 << 20).unwrap();
        }
    }

    #[test]
    fn dup_ratio_shrinks_all_but_the_largest_run() {
        let opts = ModelOptions {
            buffer_bytes: 100,
            dup_ratio: 0.5,
            ..Default::default()
        };
        let mut sim = Simulator::from_spec("constant:k=1", opts).unwrap();
        sim.flush(100).unwrap();
        sim.flush(100).unwrap();
        assert_eq!(sim.run_sizes(), vec![vec![150]]);
        assert!(Simulator::from_spec(
            "constant:k=1",
            ModelOptions {
                dup_ratio: 1.0,
                ..opts
            }
        )
        .is_err());
    }
}
