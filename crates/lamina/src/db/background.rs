//! The background threads' work: flushes, compactions and their
//! installation, obsolete files, manual compactions and statistics.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::now_ms;
use crate::compaction::lsbm::{BufferChange, TrimRule};
use crate::compaction::{
    execute, flush_memtable, manual_task, CompactionOutcome, CompactionTask, TreeView,
};
use crate::error::{Error, Result};
use crate::filename::wal_name;
use crate::memtable::MemTable;
use crate::sst::monkey;
use crate::stats::{
    thread_cpu_time, BufferLevelStats, BufferStats, DbStats, Op, TreeState, SUB_MERGE_BUCKETS,
};
use crate::version::{FileMeta, Version, VersionEdit};

use super::{Holder, Inner, State};

impl Inner {
    pub(super) fn flush_loop(&self) {
        loop {
            let mem = {
                let mut st = self.state.lock();
                loop {
                    if let Some(m) = st.imms.front() {
                        break Arc::clone(m);
                    }
                    if self.shutdown.load(Ordering::Acquire) {
                        return;
                    }
                    self.cv.wait_for(&mut st, Duration::from_millis(200));
                }
            };
            if let Err(e) = self.flush_one(&mem) {
                self.report_error("flush", &e);
                let mut st = self.state.lock();
                st.bg_error = Some(Arc::new(e));
                self.cv.notify_all();
                // Retry after a pause: a transient failure (a full disk) clears.
                self.cv.wait_for(&mut st, Duration::from_millis(500));
                if self.shutdown.load(Ordering::Acquire) {
                    return;
                }
            }
        }
    }

    /// Bloom bits per key for files written into `level` of a tree of
    /// `levels` levels: by hand, by Monkey, or the same everywhere.
    pub(super) fn bloom_bits_for(&self, level: usize, levels: usize) -> f64 {
        let opts = &self.opts;
        if let Some(last) = opts.bloom_bits_per_level.last() {
            return *opts.bloom_bits_per_level.get(level).unwrap_or(last);
        }
        if opts.bloom_monkey {
            // The policy's own level ratio when it has one (`leveling:T=4`),
            // else the engine's default.
            let t = self
                .policy
                .read()
                .size_ratio()
                .unwrap_or(opts.size_ratio as f64);
            let entries = monkey::geometric_entries(levels.max(level + 1), t);
            let bits = monkey::allocate(opts.bloom_bits_per_key, &entries);
            return bits.get(level).copied().unwrap_or(opts.bloom_bits_per_key);
        }
        opts.bloom_bits_per_key
    }

    pub(super) fn flush_one(&self, mem: &Arc<MemTable>) -> Result<()> {
        let started = Instant::now();
        let alloc = || self.alloc_id();
        let mut ctx = self.context(&alloc);
        let levels = self.state.lock().version.levels.len();
        ctx.table_options.bloom_bits_per_key = self.bloom_bits_for(0, levels);
        let partitioning = self.policy.read().partitioning();
        let files = flush_memtable(&ctx, mem, partitioning)?;
        let written = files.iter().map(|m| m.size).sum();
        let described = describe_files(files.iter());
        let mut edit = VersionEdit::default();
        edit.add_flushed_run(self.alloc_id(), files);
        let run_bound = self.policy.read().run_bound();
        let mut st = self.state.lock();
        let runs_before = st.version.run_count();
        // Logs older than the next unflushed memtable's are obsolete now.
        let next_log = st
            .imms
            .get(1)
            .map_or(st.mem.wal_number(), |m| m.wal_number());
        edit.log_number = Some(next_log);
        let max_seq = self.last_seq.load(Ordering::Relaxed);
        // The memtable leaves in the same installed view as its file
        // arrives: a reader never sees both, which would give the merged
        // iterator the same internal key twice. On failure the memtable
        // stays and the output too: the manifest may hold the edit even
        // though its sync failed. Unreferenced files are collected at open.
        let flushed = st.imms.pop_front();
        if let Err(e) = self.log_and_apply(&mut st, edit, Some(max_seq)) {
            if let Some(m) = flushed {
                st.imms.push_front(m);
            }
            return Err(e);
        }
        st.bg_error = None;
        let _ = self.vfs.remove(&self.dir.join(wal_name(mem.wal_number())));
        self.stats.flushes.inc();
        self.stats.flush_bytes_written.add(written);
        // `runs=` (sorted runs with this flush) and `us=` let the LOG serve
        // as a per-flush record (seed 000 Figs. 3.10-3.11 from the engine).
        let elapsed = started.elapsed();
        self.info_log.log(
            "flush",
            format_args!(
                "entries={} bytes={written} files=[{described}] runs={} ms={} us={}",
                mem.len(),
                st.version.run_count(),
                elapsed.as_millis(),
                elapsed.as_micros()
            ),
        );
        self.stats.at(&self.stats.level_read_above, 0).add(written);
        self.stats.at(&self.stats.level_written, 0).add(written);
        let runs = st.version.run_count() as u64;
        self.stats.run_count_sum.add(runs);
        self.stats.max_runs_at_flush.observe(runs);
        if let Some(excess) = run_bound.and_then(|k| runs_before.checked_sub(k)) {
            if excess > 0 {
                self.stats.overshoot_flushes.inc();
                self.stats.max_overshoot.observe(excess as u64);
            }
        }
        self.cv.notify_all();
        Ok(())
    }

    /// Logs `edit` in the manifest and makes its result the current version.
    pub(super) fn log_and_apply(
        &self,
        st: &mut State,
        mut edit: VersionEdit,
        last_seq: Option<u64>,
    ) -> Result<()> {
        let next = st.version.apply(&edit)?;
        let mut counters = st.counters;
        if let Some(n) = edit.log_number {
            counters.log_number = n;
        }
        if let Some(s) = last_seq {
            counters.last_seq = counters.last_seq.max(s);
        }
        // Reserve a number for a possible fresh manifest before stamping.
        let spare = self.alloc_id();
        counters.next_file_number = self.numbers.peek();
        edit.next_file_number = Some(counters.next_file_number);
        edit.last_seq = Some(counters.last_seq);
        edit.log_number = Some(counters.log_number);
        st.manifest
            .log(self.vfs.as_ref(), &edit, &next, counters, || spare)?;
        st.counters = counters;
        let old = std::mem::replace(&mut st.version, Arc::new(next));
        // A file is obsolete once neither a run nor a buffer holds it.
        let live: HashSet<u64> = st.version.live_files().map(|f| f.id).collect();
        // Where each file the old version held was: a run's level, or the
        // level of the host whose buffer held it.
        let mut held: HashMap<u64, Holder> = old
            .files()
            .map(|(level, _, f)| {
                (
                    f.id,
                    Holder {
                        level,
                        buffer: false,
                    },
                )
            })
            .collect();
        for (level, run) in old.runs_newest_first() {
            for f in old
                .buffers
                .get(&run.id)
                .into_iter()
                .flat_map(|b| b.live_files())
            {
                held.entry(f.id).or_insert(Holder {
                    level,
                    buffer: true,
                });
            }
        }
        let mut gone = HashSet::new();
        for f in old.live_files() {
            if !live.contains(&f.id) && gone.insert(f.id) {
                st.obsolete.push((Arc::clone(f), held.get(&f.id).copied()));
            }
        }
        drop(old);
        self.install(st);
        self.collect_obsolete(st);
        Ok(())
    }

    /// Deletes removed files that no reader pins any more.
    pub(super) fn collect_obsolete(&self, st: &mut State) {
        let mut keep = Vec::new();
        for (f, holder) in st.obsolete.drain(..) {
            if Arc::strong_count(&f) == 1 {
                let blocks = self.table_cache.evict(f.id);
                self.table_cache.retire_file(f.id);
                self.io.cache_invalidated_blocks.add(blocks);
                match holder {
                    Some(Holder {
                        level,
                        buffer: true,
                    }) => {
                        self.stats.buffer_invalidated_blocks.add(blocks);
                        self.stats
                            .at(&self.stats.buffer_level_invalidated, level)
                            .add(blocks);
                    }
                    Some(Holder {
                        level,
                        buffer: false,
                    }) => self
                        .stats
                        .at(&self.stats.tree_level_invalidated, level)
                        .add(blocks),
                    None => {}
                }
            } else {
                keep.push((f, holder));
            }
        }
        st.obsolete = keep;
    }

    /// A compaction that lost a race: a concurrent one emptied the run
    /// `run` it writes into, and a newer run of that level now overlaps its
    /// outputs (see [`VersionEdit::recreate_emptied_runs`]), so its edit
    /// cannot be installed. A conflict, not a failure: its inputs are
    /// still where they were (they were busy, so no other compaction took
    /// them), and the policy picks again. Its outputs, which no version
    /// holds (a moved file is live and stays), go the way of obsolete files.
    fn drop_conflicting(
        &self,
        st: &mut State,
        edit: &VersionEdit,
        task: &CompactionTask,
        run: u64,
    ) {
        let live: HashSet<u64> = st.version.live_files().map(|f| f.id).collect();
        let mut unused = Vec::new();
        for a in edit
            .added_files
            .iter()
            .filter(|a| !live.contains(&a.meta.id))
        {
            unused.push(a.meta.id);
            st.obsolete.push((Arc::new(a.meta.clone_meta()), None));
        }
        self.info_log.log(
            "conflict",
            format_args!(
                "reason=\"{}\" run {run} was emptied and is shadowed by a newer run; dropped outputs {unused:?}, the inputs are picked again",
                task.reason
            ),
        );
    }

    pub(super) fn delete_obsolete_files(&self) {
        let mut st = self.state.lock();
        self.collect_obsolete(&mut st);
    }

    pub(super) fn compaction_loop(&self) {
        loop {
            let (task, version) = {
                let mut st = self.state.lock();
                loop {
                    if self.shutdown.load(Ordering::Acquire) {
                        return;
                    }
                    self.collect_obsolete(&mut st);
                    if !st.manual {
                        if let Some(task) = self.pick(&st) {
                            for id in task.input_file_ids() {
                                st.busy.insert(id);
                            }
                            st.compactions_running += 1;
                            break (task, Arc::clone(&st.version));
                        }
                    }
                    self.cv.wait_for(&mut st, Duration::from_millis(500));
                }
            };
            let result = self.run_task(&task, &version);
            // Let go of the old tree before the task counts as done, so a
            // waiter that sees no compaction running can delete what it
            // replaced.
            drop(version);
            let mut st = self.state.lock();
            for id in task.input_file_ids() {
                st.busy.remove(&id);
            }
            st.compactions_running -= 1;
            if let Err(e) = result {
                self.report_error("compaction", &e);
                st.compaction_error = Some(Arc::new(e));
                self.stats.compaction_errors.inc();
                self.cv.notify_all();
                self.cv.wait_for(&mut st, Duration::from_millis(500));
            }
            self.cv.notify_all();
        }
    }

    /// Seed 002's trim thread (Algorithm 2): every interval of the policy's
    /// trim rule, removes the buffer files too little cached to be worth
    /// keeping. Under a policy without buffers, every buffer left by an
    /// earlier policy goes (checked every second).
    pub(super) fn trim_loop(&self) {
        loop {
            let rule = self.policy.read().trim_rule();
            let interval = rule.map_or(1_000, |r| r.interval_ms);
            let deadline = Instant::now() + Duration::from_millis(interval);
            {
                let mut st = self.state.lock();
                while Instant::now() < deadline {
                    if self.shutdown.load(Ordering::Acquire) {
                        return;
                    }
                    self.cv.wait_until(&mut st, deadline);
                }
                if self.shutdown.load(Ordering::Acquire) {
                    return;
                }
            }
            if let Err(e) = self.trim_buffers(rule) {
                // A failed trim changes nothing; the next pass retries.
                self.report_error("buffer trim", &e);
            }
        }
    }

    /// One trim pass; returns the number of files removed.
    pub(super) fn trim_buffers(&self, rule: Option<TrimRule>) -> Result<u64> {
        let version = Arc::clone(&self.state.lock().version);
        let mut edit = VersionEdit::default();
        for (&host, b) in &version.buffers {
            // A host's newest table is still warming up: never trimmed.
            let skip = usize::from(rule.is_some());
            for f in b.tables().iter().skip(skip).flat_map(|t| t.slots()) {
                let Some(f) = f.live() else { continue };
                let keep = match (rule, &self.table_cache.cache) {
                    (Some(rule), Some(cache)) => {
                        let blocks = self.table_cache.table(f)?.num_data_blocks().max(1) as f64;
                        cache.cached_blocks(f.id) as f64 / blocks >= rule.threshold
                    }
                    _ => false,
                };
                if !keep {
                    edit.buffer.push(BufferChange::Remove { host, file: f.id });
                }
            }
        }
        let removed = edit.buffer.len() as u64;
        if removed > 0 {
            let mut st = self.state.lock();
            self.log_and_apply(&mut st, edit, None)?;
            self.stats.buffer_trimmed_files.add(removed);
        }
        Ok(removed)
    }

    pub(super) fn view(&self, st: &State) -> TreeView {
        let flushes = self.stats.flushes.get();
        let buffer_bytes = if self.opts.plan_with_mean_flush && flushes > 0 {
            (self.stats.flush_bytes_written.get() / flushes).max(1)
        } else {
            self.opts.write_buffer_size as u64
        };
        crate::compaction::view_of_version(&st.version, &st.busy, flushes, buffer_bytes, now_ms())
    }

    /// Waits until the policy picks nothing and no compaction runs, then
    /// deletes the files no longer needed that no reader holds.
    pub(super) fn wait_for_compactions(&self) -> Result<()> {
        let errors = self.stats.compaction_errors.get();
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(Arc::clone(e)));
            }
            if self.shutdown.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            if self.stats.compaction_errors.get() != errors {
                if let Some(e) = &st.compaction_error {
                    return Err(Error::Background(Arc::clone(e)));
                }
            }
            if self.settled(&st) {
                // The settled tree's replaced files go now (those no
                // reader holds), not at the next compaction.
                self.collect_obsolete(&mut st);
                return Ok(());
            }
            self.cv.notify_all();
            self.cv.wait_for(&mut st, Duration::from_millis(20));
        }
    }

    /// No flush pending, no compaction running (manual ones included) and
    /// none to pick. Picking happens under the state lock and counts the
    /// task as running at once, so this check cannot miss one being
    /// started.
    pub(super) fn settled(&self, st: &State) -> bool {
        st.imms.is_empty() && st.compactions_running == 0 && !st.manual && self.pick(st).is_none()
    }

    /// The policy's most urgent task free to run; with nothing to do and
    /// reads having spent level 0's seek allowance
    /// ([`crate::Options::seek_compaction`]), its merge for reads.
    pub(super) fn pick(&self, st: &State) -> Option<CompactionTask> {
        let view = self.view(st);
        let policy = Arc::clone(&self.policy.read());
        let free = |t: &CompactionTask| t.input_file_ids().all(|id| !st.busy.contains(&id));
        policy.pick(&view).into_iter().find(free).or_else(|| {
            let due = self.opts.seek_compaction && self.table_cache.seeks_due();
            due.then(|| policy.pick_for_reads(&view))
                .flatten()
                .filter(free)
        })
    }

    /// Executes a task and installs its result.
    #[expect(
        clippy::too_many_lines,
        reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
    )]
    pub(super) fn run_task(&self, task: &CompactionTask, version: &Version) -> Result<()> {
        let alloc = || self.alloc_id();
        let mut ctx = self.context(&alloc);
        ctx.table_options.bloom_bits_per_key =
            self.bloom_bits_for(task.output_level, version.levels.len());
        ctx.table_options.compression = self.opts.compression_for(task.output_level);
        let started = Instant::now();
        let cpu_started = thread_cpu_time();
        let outcome: CompactionOutcome = execute(&ctx, version, task)?;
        let cpu = thread_cpu_time().saturating_sub(cpu_started);
        let tombstones_out: u64 = outcome
            .edit
            .added_files
            .iter()
            .map(|a| a.meta.tombstones)
            .sum();
        let (kept, marked, retired) =
            outcome
                .edit
                .buffer
                .iter()
                .fold((0, 0, 0), |(k, m, r), c| match c {
                    BufferChange::Keep { .. } => (k + 1, m, r),
                    BufferChange::Mark { .. } => (k, m + 1, r),
                    BufferChange::Remove { .. } => (k, m, r + 1),
                    _ => (k, m, r),
                });
        if self.opts.compaction_warm_up {
            self.warm_up(version, &outcome.edit)?;
        }
        let added_bytes: u64 = outcome.edit.added_files.iter().map(|a| a.meta.size).sum();
        let outputs = describe_files(outcome.edit.added_files.iter().map(|a| &a.meta));
        let mut st = self.state.lock();
        let mut edit = outcome.edit;
        edit.recreate_emptied_runs(version, &st.version);
        if let Some(run) = edit.shadowed_run(version, &st.version) {
            self.drop_conflicting(&mut st, &edit, task, run);
            return Ok(());
        }
        // As for flushes, outputs of a failed edit stay until the next open.
        self.log_and_apply(&mut st, edit, None)?;
        self.stats.buffer_appended_files.add(kept);
        self.stats.buffer_retired_files.add(retired);
        if task.buffer.is_some() {
            self.stats
                .count_buffer_unit(task.output_level, kept, marked, now_ms());
        }
        self.stats.merge_moved_files.add(outcome.moved_files);
        self.stats.merge_moved_bytes.add(outcome.moved_bytes);
        let level = task.output_level;
        let inputs = task
            .inputs
            .iter()
            .map(|i| format!("L{}:{:?}", i.level, i.file_ids))
            .collect::<Vec<_>>()
            .join(" ");
        // Microseconds of wall and merge-thread CPU time: small merges take
        // well under a millisecond, and seed 000 Fig. 3.9 plots each merge's
        // time against its bytes.
        let elapsed = started.elapsed();
        self.info_log.log(
            if outcome.trivial_move { "move" } else { "compaction" },
            format_args!(
                "reason=\"{}\" inputs=[{inputs}] output_level={level} outputs=[{outputs}] read={} written={} moved={} ms={} us={} cpu_us={}",
                task.reason,
                outcome.bytes_read,
                outcome.bytes_written,
                outcome.moved_bytes,
                elapsed.as_millis(),
                elapsed.as_micros(),
                cpu.as_micros()
            ),
        );
        let at = |a| self.stats.at(a, level);
        if outcome.trivial_move {
            self.stats.trivial_moves.inc();
            at(&self.stats.level_moved).add(added_bytes);
        } else {
            at(&self.stats.level_compactions).inc();
            at(&self.stats.level_read_above).add(
                outcome
                    .bytes_read
                    .saturating_sub(outcome.bytes_read_output_level),
            );
            at(&self.stats.level_read_level).add(outcome.bytes_read_output_level);
            at(&self.stats.level_written).add(outcome.bytes_written);
            at(&self.stats.level_moved).add(outcome.moved_bytes);
            self.stats.compactions.inc();
            self.stats.compaction_bytes_read.add(outcome.bytes_read);
            self.stats.sub_merges.add(outcome.sub_merges);
            self.stats.max_sub_merges.observe(outcome.sub_merges);
            let bucket = SUB_MERGE_BUCKETS
                .iter()
                .position(|&upper| outcome.sub_merges <= upper)
                .unwrap_or(SUB_MERGE_BUCKETS.len() - 1);
            if let Some(c) = self.stats.sub_merges_per_merge.get(bucket) {
                c.inc();
            }
            self.stats
                .compaction_files_written
                .add(outcome.files_written);
            self.stats
                .compaction_bytes_written
                .add(outcome.bytes_written);
            let wall = started.elapsed();
            self.stats.merge_micros.add(wall.as_micros() as u64);
            at(&self.stats.level_compaction_micros).add(wall.as_micros() as u64);
            self.stats.record(Op::Compaction, wall);
            self.stats.compaction_cpu_latency.record(cpu);
            self.stats
                .compaction_io_latency
                .record(wall.saturating_sub(cpu));
            let levels = st.version.levels.len();
            self.record_delete_persistence(task, version, tombstones_out, levels, ctx.now_ms);
        }
        Ok(())
    }

    /// A merge that removed tombstones made deletes persistent: records,
    /// per tombstone dropped, the age of its inputs' oldest tombstone, and
    /// for a merge into the deepest level that age once.
    pub(super) fn record_delete_persistence(
        &self,
        task: &CompactionTask,
        before: &Version,
        tombstones_out: u64,
        levels: usize,
        now: u64,
    ) {
        let ids: HashSet<u64> = task.input_file_ids().collect();
        let inputs = || before.files().filter(|(_, _, f)| ids.contains(&f.id));
        let tombstones_in: u64 = inputs().map(|(_, _, f)| f.tombstones).sum();
        let oldest = inputs().filter_map(|(_, _, f)| f.oldest_tombstone_ms).min();
        let Some(oldest) = oldest.filter(|_| tombstones_out < tombstones_in) else {
            return;
        };
        let age = Duration::from_millis(now.saturating_sub(oldest));
        self.stats
            .tombstone_purge_age
            .record_n(age, tombstones_in - tombstones_out);
        if task.output_level + 1 >= levels {
            self.stats.delete_persistence_latency.record(age);
        }
    }

    /// Tombstones dropped by merges whose oldest input tombstone was at
    /// most `threshold` old: deletes persisted within `threshold`.
    pub(super) fn deletes_persisted_within(&self, threshold: Duration) -> u64 {
        self.stats.tombstone_purge_age.count_at_most(threshold)
    }

    pub(super) fn compact_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<()> {
        let (task, version) = {
            let mut st = self.state.lock();
            st.manual = true;
            while st.compactions_running > 0 {
                self.cv.wait_for(&mut st, Duration::from_millis(50));
            }
            let v = Arc::clone(&st.version);
            let task = manual_task(&v, lo, hi, self.opts.target_file_size);
            if let Some(t) = &task {
                for id in t.input_file_ids() {
                    st.busy.insert(id);
                }
            }
            (task, v)
        };
        let result = match &task {
            Some(t) => self.run_task(t, &version),
            None => Ok(()),
        };
        let mut st = self.state.lock();
        if let Some(t) = &task {
            for id in t.input_file_ids() {
                st.busy.remove(&id);
            }
        }
        st.manual = false;
        self.cv.notify_all();
        result
    }

    /// `open_tables`: whether filter figures may open the tables not open
    /// yet (see [`LevelStats::filter_files`](crate::stats::LevelStats)).
    pub(super) fn stats(&self, open_tables: bool) -> DbStats {
        let sv = Arc::clone(&self.sv.read());
        let levels = sv
            .version
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut s = self.table_cache.level_stats(i, l, open_tables);
                self.stats.fill_measured_level_stats(i, &mut s);
                s
            })
            .collect();
        let mem_bytes = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .map(|m| m.approximate_bytes() as u64)
            .sum();
        let mem_entries = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .map(|m| m.len() as u64)
            .sum();
        self.stats.snapshot(
            &self.io,
            TreeState {
                levels,
                memtable_bytes: mem_bytes,
                memtable_entries: mem_entries,
                sorted_runs: sv.version.run_count(),
                oldest_run_bytes: sv.version.oldest_run_bytes(),
                block_cache_usage: self
                    .table_cache
                    .cache
                    .as_ref()
                    .map_or(0, |c| c.usage() as u64),
                block_cache_pinned_usage: self
                    .table_cache
                    .cache
                    .as_ref()
                    .map_or(0, |c| c.pinned_usage() as u64),
                row_cache_usage: self.row_cache.as_ref().map_or(0, |c| c.usage() as u64),
                buffer: self.buffer_stats(&sv.version),
            },
        )
    }

    /// Incremental warm-up (`Options::compaction_warm_up`): while the files
    /// `edit` removes still hold their cached blocks, reads into the cache
    /// the blocks of the files it adds whose key ranges overlap them. A
    /// file the edit only moves keeps its blocks and warms nothing.
    fn warm_up(&self, version: &Version, edit: &VersionEdit) -> Result<()> {
        let added: HashSet<u64> = edit.added_files.iter().map(|a| a.meta.id).collect();
        let removed: HashSet<u64> = edit.removed_files.iter().map(|r| r.file_id).collect();
        let gone: HashSet<u64> = removed.difference(&added).copied().collect();
        let mut hot = Vec::new();
        for f in version.live_files().filter(|f| gone.contains(&f.id)) {
            hot.extend(self.table_cache.table(f)?.cached_block_ranges()?);
        }
        if hot.is_empty() {
            return Ok(());
        }
        // Sorted and coalesced, as `Table::warm` searches them.
        hot.sort_unstable();
        let mut ranges: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(hot.len());
        for (start, end) in hot {
            match ranges.last_mut() {
                Some(last) if start <= last.1 => {
                    if end > last.1 {
                        last.1 = end;
                    }
                }
                _ => ranges.push((start, end)),
            }
        }
        for a in edit
            .added_files
            .iter()
            .filter(|a| !removed.contains(&a.meta.id))
        {
            let table = self.table_cache.table(&a.meta)?;
            self.stats.warm_up_blocks.add(table.warm(&ranges)?);
        }
        Ok(())
    }

    /// The state of the compaction buffers of `version`, in total and per
    /// level of the tree (counted figures are filled by the snapshot).
    fn buffer_stats(&self, version: &Version) -> BufferStats {
        let mut s = BufferStats {
            bytes: version.buffer_bytes(),
            levels: (0..version.levels.len())
                .map(|level| BufferLevelStats {
                    level,
                    ..BufferLevelStats::default()
                })
                .collect(),
            ..BufferStats::default()
        };
        for (level, run) in version.runs_newest_first() {
            let Some(b) = version.buffers.get(&run.id) else {
                continue;
            };
            let tables = b.tables().len() as u64;
            let markers = b.removed_count() as u64;
            s.tables += tables;
            s.markers += markers;
            let mut at = BufferLevelStats::default();
            for f in b.live_files() {
                at.files += 1;
                at.bytes += f.size;
                if let Some(cache) = &self.table_cache.cache {
                    s.cached_blocks += cache.cached_blocks(f.id);
                }
            }
            s.files += at.files;
            if let Some(l) = s.levels.get_mut(level) {
                l.files += at.files;
                l.bytes += at.bytes;
                l.tables += tables;
                l.markers += markers;
            }
        }
        s
    }
}

/// `id:bytes` of each file, for the info log.
fn describe_files<'a>(files: impl Iterator<Item = &'a FileMeta>) -> String {
    files
        .map(|f| format!("{}:{}", f.id, f.size))
        .collect::<Vec<_>>()
        .join(" ")
}
