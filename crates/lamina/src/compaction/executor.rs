//! Executes compaction tasks and memtable flushes.
//!
//! A task either moves files by a manifest edit alone (a *trivial move*,
//! when nothing needs rewriting) or runs a k-way merge that keeps, per user
//! key, only the versions some live snapshot can see, and drops a tombstone
//! once no snapshot needs it and no older run can hold its key.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::plan::{self, Action, Destination};
use super::{view_of_version, CompactionTask};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{parse_internal_key, ValueKind};
use crate::memtable::MemTable;
use crate::sst::{TableBuilder, TableOptions};
use crate::tables::{sst_name, RunIterator, TableCache};
use crate::version::{AddedFile, FileMeta, NewRun, RemovedFile, Run, Version, VersionEdit};

/// What the executor needs from the engine.
pub(crate) struct CompactionContext<'a> {
    pub loader: &'a Arc<TableCache>,
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

/// Runs one task against `version`, writing output files; the caller logs
/// and installs the returned edit. The task is resolved and checked by the
/// planner the simulator shares ([`plan::plan`]); this function does the
/// plan's I/O and records it as a version edit.
pub(crate) fn execute(
    ctx: &CompactionContext<'_>,
    version: &Version,
    task: &CompactionTask,
) -> Result<CompactionOutcome> {
    // The task's own files are marked busy in the engine while it runs, so
    // the view lists none as busy.
    let view = view_of_version(version, &HashSet::new(), 0, 0, ctx.now_ms);
    let plan = plan::plan(&view, task)?;
    let run_of = |level: usize, id: u64| -> Result<&Run> {
        version
            .levels
            .get(level)
            .and_then(|l| l.runs.iter().find(|r| r.id == id))
            .ok_or_else(|| Error::corruption("version", 0, format!("planned run {id} is gone")))
    };
    let mut inputs: Vec<Vec<Arc<FileMeta>>> = Vec::with_capacity(plan.inputs.len());
    for input in &plan.inputs {
        let run = run_of(input.level, input.run_id)?;
        let files = input
            .files
            .iter()
            .map(|f| {
                run.files
                    .iter()
                    .find(|m| m.id == f.id)
                    .cloned()
                    .ok_or_else(|| {
                        Error::corruption("version", 0, format!("planned file {} is gone", f.id))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        inputs.push(files);
    }

    let mut edit = VersionEdit::default();
    let out_run_id = match plan.destination {
        Destination::Existing(id) => id,
        Destination::New { order } => {
            let id = (ctx.alloc_id)();
            edit.new_runs.push(NewRun {
                level: plan.output_level,
                run_id: id,
                order,
            });
            id
        }
    };
    for (input, files) in plan.inputs.iter().zip(&inputs) {
        for f in files {
            edit.removed_files.push(RemovedFile {
                level: input.level,
                run_id: input.run_id,
                file_id: f.id,
            });
        }
    }

    if plan.action == Action::Move {
        for f in inputs.iter().flatten() {
            let meta = f.clone_meta();
            meta.arrived_ms.store(ctx.now_ms, Ordering::Relaxed);
            edit.added_files.push(AddedFile {
                level: plan.output_level,
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
    let older = plan
        .older_runs
        .iter()
        .map(|&(level, id)| run_of(level, id))
        .collect::<Result<Vec<&Run>>>()?;
    let older_may_hold = |uk: &[u8]| older.iter().any(|r| r.file_for(uk).is_some());

    let all_inputs: Vec<&Arc<FileMeta>> = inputs.iter().flatten().collect();
    let children: Vec<Box<dyn InternalIterator>> = inputs
        .iter()
        .map(|files| {
            Box::new(RunIterator::new(files.clone(), Arc::clone(ctx.loader)))
                as Box<dyn InternalIterator>
        })
        .collect();
    let mut merged = MergingIterator::new(children);
    let oldest_tombstone = all_inputs
        .iter()
        .filter_map(|f| f.oldest_tombstone_ms)
        .min();
    let bytes_read = all_inputs.iter().map(|f| f.size).sum();
    let mut writer = OutputWriter::new(ctx, plan.target_file_size, oldest_tombstone);
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
            level: plan.output_level,
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
                .push(FileMeta::from_properties(id, &props, self.ctx.now_ms));
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
