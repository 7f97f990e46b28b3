//! Executes compaction tasks and memtable flushes.
//!
//! A task either moves files by a manifest edit alone (a *trivial move*,
//! when nothing needs rewriting) or runs a k-way merge that keeps, per user
//! key, only the versions some live snapshot can see, and drops a tombstone
//! once no snapshot needs it and no older run can hold its key.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::{CompactionTask, OutputRun};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{parse_internal_key, ValueKind};
use crate::memtable::MemTable;
use crate::sst::{TableBuilder, TableOptions, TableProperties};
use crate::tables::{sst_name, RunIterator, TableLoader};
use crate::version::{AddedFile, FileMeta, NewRun, RemovedFile, Run, Version, VersionEdit};

/// What the executor needs from the engine.
pub(crate) struct CompactionContext<'a> {
    pub loader: &'a Arc<TableLoader>,
    pub table_options: TableOptions,
    /// Allocates file numbers (also used for run ids).
    pub alloc_id: &'a (dyn Fn() -> u64 + Sync),
    /// Oldest sequence number a live snapshot (or the present) reads at.
    pub smallest_snapshot: u64,
    pub now_ms: u64,
}

/// The result of a flush or compaction, ready to be logged.
#[derive(Debug, Default)]
pub(crate) struct CompactionOutcome {
    pub edit: VersionEdit,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub trivial_move: bool,
}

/// Position of a run in global recency order (0 = newest).
fn run_positions(version: &Version) -> Vec<(usize, &Run)> {
    version.runs_newest_first().collect()
}

struct ResolvedInput {
    position: usize,
    level: usize,
    run: Run,
    files: Vec<Arc<FileMeta>>,
}

fn invalid(task: &CompactionTask, why: &str) -> Error {
    Error::InvalidArgument(format!(
        "compaction task ({}) is invalid: {why}",
        task.reason
    ))
}

/// Recency safety: a task must not change which of two overlapping files
/// is newer. For a non-input file at position q and an input file it
/// overlaps at position p, the input is newer before the task iff p < q,
/// and its output is newer afterwards iff the output lands above q: in the
/// destination run itself (`into_existing`, d < q), or in a new run placed
/// just above the run now at d (d <= q). Files of one run never overlap,
/// and the destination run's own files are checked for overlap by the edit.
fn reorders_versions(
    positions: &[(usize, &Run)],
    inputs: &[ResolvedInput],
    input_ids: &HashSet<u64>,
    dest_position: usize,
    into_existing: bool,
) -> bool {
    positions.iter().enumerate().any(|(q, (_, run))| {
        if into_existing && q == dest_position {
            return false;
        }
        let output_above = if into_existing {
            dest_position < q
        } else {
            dest_position <= q
        };
        run.files
            .iter()
            .filter(|f| !input_ids.contains(&f.id))
            .any(|f| {
                inputs
                    .iter()
                    .filter(|i| i.position != q && (i.position < q) != output_above)
                    .any(|i| i.files.iter().any(|i| f.overlaps(&i.smallest, &i.largest)))
            })
    })
}

/// Runs one task against `version`, writing output files; the caller logs
/// and installs the returned edit.
pub(crate) fn execute(
    ctx: &CompactionContext<'_>,
    version: &Version,
    task: &CompactionTask,
) -> Result<CompactionOutcome> {
    let positions = run_positions(version);
    let mut inputs = Vec::new();
    for input in &task.inputs {
        let position = positions
            .iter()
            .position(|(l, r)| *l == input.level && r.id == input.run_id)
            .ok_or_else(|| invalid(task, "input run not in the tree"))?;
        let run = positions[position].1;
        let mut files = Vec::with_capacity(input.file_ids.len());
        for id in &input.file_ids {
            let f = run
                .files
                .iter()
                .find(|f| f.id == *id)
                .ok_or_else(|| invalid(task, "input file not in its run"))?;
            files.push(Arc::clone(f));
        }
        files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        if !files.is_empty() {
            inputs.push(ResolvedInput {
                position,
                level: input.level,
                run: run.clone(),
                files,
            });
        }
    }
    if inputs.is_empty() {
        return Err(invalid(task, "no input files"));
    }
    inputs.sort_by_key(|i| i.position);
    let newest = inputs[0].position;
    let new_order = inputs.iter().map(|i| i.run.order).max().unwrap_or(0);

    // Where the output lands in recency order, and which run receives it.
    let (dest_position, dest_run) = match task.output_run {
        OutputRun::Existing(id) => {
            let p = positions
                .iter()
                .position(|(l, r)| *l == task.output_level && r.id == id)
                .ok_or_else(|| invalid(task, "output run not in the output level"))?;
            (p, Some(positions[p].1))
        }
        OutputRun::New => {
            let p = positions
                .iter()
                .position(|(l, r)| {
                    *l > task.output_level || (*l == task.output_level && r.order < new_order)
                })
                .unwrap_or(positions.len());
            (p, None)
        }
    };
    if dest_position < newest {
        return Err(invalid(task, "output would be newer than its inputs"));
    }

    let input_ids: HashSet<u64> = inputs
        .iter()
        .flat_map(|i| i.files.iter().map(|f| f.id))
        .collect();
    if reorders_versions(
        &positions,
        &inputs,
        &input_ids,
        dest_position,
        dest_run.is_some(),
    ) {
        return Err(invalid(
            task,
            "it would reorder versions of keys shared with a non-input file",
        ));
    }
    let all_inputs: Vec<&Arc<FileMeta>> = inputs.iter().flat_map(|i| &i.files).collect();

    let mut edit = VersionEdit::default();
    let out_run_id = match (task.output_run, dest_run) {
        (OutputRun::Existing(id), _) => id,
        (OutputRun::New, _) => {
            let id = (ctx.alloc_id)();
            edit.new_runs.push(NewRun {
                level: task.output_level,
                run_id: id,
                order: new_order,
            });
            id
        }
    };
    for input in &inputs {
        for f in &input.files {
            edit.removed_files.push(RemovedFile {
                level: input.level,
                run_id: input.run.id,
                file_id: f.id,
            });
        }
    }

    // A single run's files that meet nothing in the destination run move as
    // they are.
    let dest_overlaps = |f: &FileMeta| {
        dest_run.is_some_and(|r| {
            r.files
                .iter()
                .any(|d| !input_ids.contains(&d.id) && d.overlaps(&f.smallest, &f.largest))
        })
    };
    let single_source = inputs.len() == 1 && dest_run.is_none_or(|r| r.id != inputs[0].run.id);
    if single_source && !inputs[0].files.iter().any(|f| dest_overlaps(f)) {
        for f in &inputs[0].files {
            let meta = f.clone_meta();
            meta.arrived_ms.store(ctx.now_ms, Ordering::Relaxed);
            edit.added_files.push(AddedFile {
                level: task.output_level,
                run_id: out_run_id,
                meta,
            });
        }
        return Ok(CompactionOutcome {
            edit,
            trivial_move: true,
            ..Default::default()
        });
    }

    // Older runs that may still hold a key decide whether tombstones can go.
    let older: Vec<&Run> = positions
        .iter()
        .skip(if dest_run.is_some() {
            dest_position + 1
        } else {
            dest_position
        })
        .map(|(_, r)| *r)
        .collect();
    let older_may_hold = |uk: &[u8]| older.iter().any(|r| r.file_for(uk).is_some());

    let children: Vec<Box<dyn InternalIterator>> = inputs
        .iter()
        .map(|i| {
            Box::new(RunIterator::new(i.files.clone(), Arc::clone(ctx.loader)))
                as Box<dyn InternalIterator>
        })
        .collect();
    let mut merged = MergingIterator::new(children);
    let oldest_tombstone = all_inputs
        .iter()
        .filter_map(|f| f.oldest_tombstone_ms)
        .min();
    let bytes_read = all_inputs.iter().map(|f| f.size).sum();
    let mut writer = OutputWriter::new(ctx, task.target_file_size, oldest_tombstone);
    let result = (|| -> Result<()> {
        merged.seek_to_first()?;
        let mut filter = VersionFilter::new(ctx.smallest_snapshot);
        while merged.valid() {
            let parsed = parse_internal_key(merged.key()).ok_or_else(|| {
                Error::corruption("compaction input", 0, "malformed internal key")
            })?;
            if filter.keep(parsed.user_key, parsed.seq, parsed.kind, &older_may_hold) {
                writer.add(merged.key(), parsed.user_key, merged.value())?;
            }
            merged.next()?;
        }
        Ok(())
    })();
    let files = match result.and_then(|()| writer.finish()) {
        Ok(files) => files,
        Err(e) => {
            writer.abandon();
            return Err(e);
        }
    };
    let mut outcome = CompactionOutcome {
        bytes_read,
        ..Default::default()
    };
    for meta in files {
        outcome.bytes_written += meta.size;
        outcome.edit.added_files.push(AddedFile {
            level: task.output_level,
            run_id: out_run_id,
            meta,
        });
    }
    outcome.edit.new_runs = edit.new_runs;
    outcome.edit.removed_files = edit.removed_files;
    Ok(outcome)
}

/// Decides which versions of each user key survive a merge.
struct VersionFilter {
    smallest_snapshot: u64,
    current: Vec<u8>,
    has_current: bool,
    last_seq_for_key: u64,
}

impl VersionFilter {
    fn new(smallest_snapshot: u64) -> Self {
        VersionFilter {
            smallest_snapshot,
            current: Vec::new(),
            has_current: false,
            last_seq_for_key: u64::MAX,
        }
    }

    /// Entries arrive in internal order (per key, newest first).
    fn keep(
        &mut self,
        user_key: &[u8],
        seq: u64,
        kind: ValueKind,
        older_may_hold: &dyn Fn(&[u8]) -> bool,
    ) -> bool {
        if !self.has_current || self.current != user_key {
            self.current.clear();
            self.current.extend_from_slice(user_key);
            self.has_current = true;
            self.last_seq_for_key = u64::MAX;
        }
        // A newer version of this key is already visible to every snapshot.
        let shadowed = self.last_seq_for_key <= self.smallest_snapshot;
        self.last_seq_for_key = seq;
        if shadowed {
            return false;
        }
        !(kind == ValueKind::Delete && seq <= self.smallest_snapshot && !older_may_hold(user_key))
    }
}

/// Writes a merge's output as a sequence of SSTs cut at user-key boundaries.
struct OutputWriter<'a> {
    ctx: &'a CompactionContext<'a>,
    target: u64,
    oldest_tombstone: Option<u64>,
    builder: Option<(u64, TableBuilder)>,
    last_user_key: Vec<u8>,
    done: Vec<FileMeta>,
}

impl<'a> OutputWriter<'a> {
    fn new(ctx: &'a CompactionContext<'a>, target: u64, oldest_tombstone: Option<u64>) -> Self {
        OutputWriter {
            ctx,
            target: target.max(1),
            oldest_tombstone,
            builder: None,
            last_user_key: Vec::new(),
            done: Vec::new(),
        }
    }

    fn add(&mut self, ikey: &[u8], user_key: &[u8], value: &[u8]) -> Result<()> {
        let cut = self.builder.as_ref().is_some_and(|(_, b)| {
            b.estimated_size() >= self.target && self.last_user_key != user_key
        });
        if cut {
            self.finish_current()?;
        }
        if self.builder.is_none() {
            let id = (self.ctx.alloc_id)();
            let file = self.ctx.loader.vfs.create(&self.ctx.loader.path(id))?;
            self.builder = Some((
                id,
                TableBuilder::new(file, self.ctx.table_options.clone(), sst_name(id)),
            ));
        }
        if let Some((_, b)) = &mut self.builder {
            b.add(ikey, value)?;
        }
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(user_key);
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some((id, b)) = self.builder.take() {
            let props = b.finish(self.ctx.now_ms, self.oldest_tombstone)?;
            self.done
                .push(meta_from_properties(id, &props, self.ctx.now_ms));
        }
        Ok(())
    }

    /// Finishes the last file and makes the new names durable.
    fn finish(&mut self) -> Result<Vec<FileMeta>> {
        self.finish_current()?;
        if !self.done.is_empty() {
            self.ctx.loader.vfs.sync_dir(self.ctx.loader.dir())?;
        }
        Ok(std::mem::take(&mut self.done))
    }

    /// Removes every file written so far (best effort: they are unreferenced
    /// and would be collected at the next open anyway).
    fn abandon(&mut self) {
        let ids: Vec<u64> = self
            .done
            .iter()
            .map(|m| m.id)
            .chain(self.builder.take().map(|(id, _)| id))
            .collect();
        for id in ids {
            let _ = self.ctx.loader.vfs.remove(&self.ctx.loader.path(id));
        }
        self.done.clear();
    }
}

fn meta_from_properties(id: u64, p: &TableProperties, now_ms: u64) -> FileMeta {
    FileMeta {
        id,
        size: p.file_size,
        entries: p.entries,
        tombstones: p.tombstones,
        smallest: p.smallest_key.clone(),
        largest: p.largest_key.clone(),
        smallest_seq: p.smallest_seq,
        largest_seq: p.largest_seq,
        created_ms: now_ms,
        oldest_tombstone_ms: if p.tombstones > 0 {
            p.oldest_tombstone_time
        } else {
            None
        },
        raw_bytes: p.raw_key_bytes + p.raw_value_bytes,
        arrived_ms: AtomicU64::new(now_ms),
        last_read_ms: AtomicU64::new(0),
        table: OnceLock::new(),
    }
}

/// Writes a memtable as one SST; `None` if it keeps no entry.
pub(crate) fn flush_memtable(
    ctx: &CompactionContext<'_>,
    mem: &Arc<MemTable>,
) -> Result<Option<FileMeta>> {
    // Flushes keep tombstones: older runs may hold the key.
    let keep_tombstones = |_: &[u8]| true;
    let mut filter = VersionFilter::new(ctx.smallest_snapshot);
    let mut writer = OutputWriter::new(ctx, u64::MAX, mem.first_tombstone_ms());
    // The memtable is immutable now: walk it in place rather than copying.
    let result = mem.for_each(|ikey, value| {
        let parsed = parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption("memtable", 0, "malformed internal key"))?;
        if filter.keep(parsed.user_key, parsed.seq, parsed.kind, &keep_tombstones) {
            writer.add(ikey, parsed.user_key, value)?;
        }
        Ok(())
    });
    match result.and_then(|()| writer.finish()) {
        Ok(mut files) => Ok(files.pop()),
        Err(e) => {
            writer.abandon();
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::tests::meta;

    fn run(id: u64, files: &[(u64, &[u8], &[u8])]) -> Run {
        Run {
            id,
            order: 100 - id,
            files: files
                .iter()
                .map(|(f, lo, hi)| Arc::new(meta(*f, lo, hi)))
                .collect(),
        }
    }

    fn reorders(
        positions: &[(usize, &Run)],
        inputs: &[ResolvedInput],
        dest_position: usize,
        into_existing: bool,
    ) -> bool {
        let ids = inputs
            .iter()
            .flat_map(|i| i.files.iter().map(|f| f.id))
            .collect();
        reorders_versions(positions, inputs, &ids, dest_position, into_existing)
    }

    fn input(position: usize, run: &Run, file_ids: &[u64]) -> ResolvedInput {
        ResolvedInput {
            position,
            level: position,
            run: run.clone(),
            files: run
                .files
                .iter()
                .filter(|f| file_ids.contains(&f.id))
                .cloned()
                .collect(),
        }
    }

    /// Leveled's one-file push: file 1 (a..c) of run 0 merges into run 1,
    /// whose file 11 (b..m) reaches under run 0's neighbour file 2 (k..p).
    /// The output lands below file 2, which stays newer: allowed.
    #[test]
    fn a_push_past_an_overlapping_neighbour_is_allowed() {
        let r0 = run(0, &[(1, b"a", b"c"), (2, b"k", b"p")]);
        let r1 = run(1, &[(11, b"b", b"m")]);
        let positions = [(1, &r0), (2, &r1)];
        let inputs = [input(0, &r0, &[1]), input(1, &r1, &[11])];
        assert!(!reorders(&positions, &inputs, 1, true));
    }

    /// Skipping a run: file 1 of run 0 pushed into run 2 past run 1's file
    /// 21, which shares keys with it, would make the older version newer.
    #[test]
    fn a_push_past_an_overlapping_newer_file_is_refused() {
        let r0 = run(0, &[(1, b"a", b"c")]);
        let r1 = run(1, &[(21, b"b", b"d")]);
        let r2 = run(2, &[(31, b"x", b"z")]);
        let positions = [(1, &r0), (2, &r1), (3, &r2)];
        assert!(reorders(&positions, &[input(0, &r0, &[1])], 2, true));
        // A new run at the same place is just as wrong, one above is fine.
        assert!(reorders(&positions, &[input(0, &r0, &[1])], 2, false));
        assert!(!reorders(&positions, &[input(0, &r0, &[1])], 1, false));
        // Without shared keys the push is safe.
        let r1 = run(1, &[(21, b"d", b"f")]);
        let positions = [(1, &r0), (2, &r1), (3, &r2)];
        assert!(!reorders(&positions, &[input(0, &r0, &[1])], 2, true));
    }

    /// Merging runs 0 and 2 but not run 1 between them: run 2's data would
    /// rise above run 1's overlapping file.
    #[test]
    fn lifting_an_older_input_above_a_newer_file_is_refused() {
        let r0 = run(0, &[(1, b"a", b"c")]);
        let r1 = run(1, &[(21, b"m", b"n")]);
        let r2 = run(2, &[(31, b"l", b"o")]);
        let positions = [(1, &r0), (1, &r1), (1, &r2)];
        let inputs = [input(0, &r0, &[1]), input(2, &r2, &[31])];
        assert!(reorders(&positions, &inputs, 0, false));
        // Into run 2's place instead, below run 1: allowed.
        assert!(!reorders(&positions, &inputs, 2, true));
    }

    #[test]
    fn filter_keeps_one_version_per_snapshot_stripe() {
        let never = |_: &[u8]| false;
        // No snapshots: smallest snapshot = latest seq 10.
        let mut f = VersionFilter::new(10);
        assert!(f.keep(b"a", 9, ValueKind::Put, &never));
        assert!(!f.keep(b"a", 5, ValueKind::Put, &never));
        // A tombstone with no older data anywhere goes.
        assert!(!f.keep(b"b", 8, ValueKind::Delete, &never));
        assert!(!f.keep(b"b", 3, ValueKind::Put, &never));
        // ...but stays if an older run may hold the key.
        let always = |_: &[u8]| true;
        assert!(f.keep(b"c", 8, ValueKind::Delete, &always));
        // A snapshot at 4 needs the version it sees.
        let mut f = VersionFilter::new(4);
        assert!(f.keep(b"a", 9, ValueKind::Put, &never));
        assert!(f.keep(b"a", 3, ValueKind::Put, &never));
        assert!(!f.keep(b"a", 2, ValueKind::Put, &never));
        // A tombstone newer than a snapshot must stay.
        assert!(f.keep(b"d", 6, ValueKind::Delete, &never));
        assert!(f.keep(b"d", 1, ValueKind::Put, &never));
    }
}
