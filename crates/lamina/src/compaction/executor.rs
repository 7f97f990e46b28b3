//! Executes compaction tasks and memtable flushes.
//!
//! A task either moves files by a manifest edit alone (a *trivial move*,
//! when nothing needs rewriting) or runs a k-way merge that keeps, per user
//! key, only the versions some live snapshot can see, and drops a tombstone
//! once no snapshot needs it and no older run can hold its key.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::partition::spatial::{TileRule, Tiles};
use super::partition::{FileCutter, Partition, Partitioning};
use super::placement::TILE_RANK;
use super::plan::{self, Action, Destination};
use super::{view_of_version, CompactionTask};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::parse_internal_key;
use crate::memtable::MemTable;
use crate::sst::TableOptions;
use crate::tables::{RunIterator, TableCache};
use crate::version::{AddedFile, FileMeta, NewRun, RemovedFile, Run, Version, VersionEdit};

use super::filter::{merge_tombstones, Older, VersionFilter};
use super::output::{cutter_for, flush_cutter, OutputWriter, Written};

/// What the executor needs from the engine.
pub(crate) struct CompactionContext<'a> {
    pub table_cache: &'a Arc<TableCache>,
    pub table_options: TableOptions,
    /// Allocates file numbers (also used for run ids).
    pub alloc_id: &'a (dyn Fn() -> u64 + Sync),
    /// Oldest sequence number a live snapshot (or the present) reads at.
    pub smallest_snapshot: u64,
    /// Whether merge inputs read from disk enter the block cache
    /// (`Options::compaction_fills_cache`).
    pub fill_cache: bool,
    /// Bytes each merge input reads at a time
    /// (`Options::compaction_readahead_bytes`).
    pub readahead: usize,
    pub now_ms: u64,
}

/// The result of a flush or compaction, ready to be logged.
#[derive(Debug, Default)]
pub(crate) struct CompactionOutcome {
    pub edit: VersionEdit,
    /// Bytes merged (moved files excluded).
    pub bytes_read: u64,
    /// Of those, bytes from the output level's own files (RocksDB's
    /// `Rnp1`); the rest came from the levels above it.
    pub bytes_read_output_level: u64,
    pub bytes_written: u64,
    pub trivial_move: bool,
    /// Files a partitioned merge moved instead of rewriting, and their bytes.
    pub moved_files: u64,
    pub moved_bytes: u64,
    /// Sub-merges run, and files they wrote.
    pub sub_merges: u64,
    pub files_written: u64,
}

/// Runs one task against `version`, writing output files; the caller logs
/// and installs the returned edit. The task is resolved and checked by the
/// planner the simulator shares ([`plan::plan`]); this function does the
/// plan's I/O and records it as a version edit, in steps: the input files'
/// metadata (`resolve_inputs`), the edit's new run, buffer changes and
/// removals (`start_edit`), a trivial move or the older runs that decide
/// which tombstones go (the filter, `filter.rs`), the groups moved or merged
/// (`split_groups`), the sub-merges (`run_sub_merges`, each cutting its
/// output with `output.rs`), and their outputs, durable together or all
/// removed (`collect_outputs`).
pub(crate) fn execute(
    ctx: &CompactionContext<'_>,
    version: &Version,
    task: &CompactionTask,
) -> Result<CompactionOutcome> {
    // The task's own files are marked busy in the engine while it runs, so
    // the view lists none as busy.
    let view = view_of_version(version, &HashSet::new(), 0, 0, ctx.now_ms);
    let plan = plan::plan(&view, task)?;
    let inputs = resolve_inputs(version, &plan)?;

    let (mut edit, out_run_id) = start_edit(ctx, &plan, &inputs)?;

    // Where an output or moved file goes: the output run, or a tile run
    // of its own.
    let add_output = |edit: &mut VersionEdit, meta: FileMeta| {
        let run_id = match plan.destination {
            Destination::Tiles => {
                edit.new_runs.push(NewRun {
                    level: plan.output_level,
                    run_id: meta.id,
                    order: TILE_RANK,
                });
                meta.id
            }
            _ => out_run_id,
        };
        edit.added_files.push(AddedFile {
            level: plan.output_level,
            run_id,
            meta,
        });
    };
    if plan.action == Action::Move {
        for f in inputs.iter().flatten() {
            let meta = f.clone_meta();
            meta.arrived_ms.store(ctx.now_ms, Ordering::Relaxed);
            add_output(&mut edit, meta);
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
        .map(|&(level, id)| run_of(version, level, id))
        .collect::<Result<Vec<&Run>>>()?;
    // An input file of an older run (a full compaction takes every run)
    // leaves with the task: its versions are in the merge, not below it.
    let input_ids: HashSet<u64> = plan.input_file_ids().collect();
    let older_may_hold = |uk: &[u8]| {
        older
            .iter()
            .any(|r| r.file_for(uk).is_some_and(|f| !input_ids.contains(&f.id)))
    };
    // The same for any key of `[lo, hi]`, for range tombstones.
    let older_may_overlap = |lo: &[u8], hi: &[u8]| {
        older.iter().any(|r| {
            let from = r.files.partition_point(|f| f.largest.as_slice() < lo);
            r.files
                .get(from..)
                .unwrap_or_default()
                .iter()
                .take_while(|f| f.smallest.as_slice() <= hi)
                .any(|f| !input_ids.contains(&f.id))
        })
    };
    let older = Older {
        may_hold: &older_may_hold,
        may_overlap: &older_may_overlap,
    };

    let (mut outcome, jobs) = split_groups(ctx, &plan, &inputs, &add_output);
    let threads = plan
        .partitioning
        .map_or(1, |p| p.subcompactions)
        .clamp(1, jobs.len().max(1));
    let sub_merge = |files: &[Arc<FileMeta>]| -> Result<Written> {
        if let Some(rule) = plan.partitioning.and_then(|p| p.partition.tile_rule()) {
            return merge_tiles(ctx, &plan, files, older.may_hold, rule);
        }
        let cutter = match plan.partitioning {
            Some(p) => Some(cutter_for(ctx, p, files)?),
            None => None,
        };
        merge_files(ctx, &plan, files, &older, cutter)
    };
    let results = run_sub_merges(&jobs, threads, &sub_merge);
    let written = collect_outputs(ctx, results)?;
    for meta in written.metas {
        outcome.bytes_written += meta.size;
        outcome.files_written += 1;
        add_output(&mut outcome.edit, meta);
    }
    outcome.edit.new_runs.extend(edit.new_runs);
    outcome.edit.removed_files = edit.removed_files;
    outcome.edit.buffer = edit.buffer;
    Ok(outcome)
}

/// The outcome's read counts, with the groups of a partitioned merge that
/// are one file moved to the output instead of merged (seed 000 Alg. 5.3),
/// and the groups left to merge, one sub-merge each (a plain merge is one).
fn split_groups(
    ctx: &CompactionContext<'_>,
    plan: &plan::Plan,
    inputs: &[Vec<Arc<FileMeta>>],
    add_output: &dyn Fn(&mut VersionEdit, FileMeta),
) -> (CompactionOutcome, Vec<Vec<Arc<FileMeta>>>) {
    let in_output_level = |i: usize| {
        plan.inputs
            .get(i)
            .is_some_and(|p| p.level == plan.output_level)
    };
    let mut outcome = CompactionOutcome {
        bytes_read: inputs.iter().flatten().map(|f| f.size).sum(),
        bytes_read_output_level: inputs
            .iter()
            .enumerate()
            .filter(|&(i, _)| in_output_level(i))
            .flat_map(|(_, files)| files)
            .map(|f| f.size)
            .sum(),
        ..Default::default()
    };
    // A partitioned merge moves its one-file groups and sub-merges the
    // others (seed 000 Alg. 5.3); a plain merge is one sub-merge.
    let partitioned = plan.partitioning.filter(|p| p.partition != Partition::None);
    let mut jobs: Vec<Vec<Arc<FileMeta>>> = Vec::new();
    for group in plan.groups() {
        let files: Vec<Arc<FileMeta>> = group
            .iter()
            .map(|&(i, f)| Arc::clone(&inputs[i][f]))
            .collect();
        match files.as_slice() {
            [only] if partitioned.is_some() => {
                let meta = only.clone_meta();
                meta.arrived_ms.store(ctx.now_ms, Ordering::Relaxed);
                outcome.moved_files += 1;
                outcome.moved_bytes += meta.size;
                outcome.bytes_read -= meta.size;
                if group.first().is_some_and(|&(i, _)| in_output_level(i)) {
                    outcome.bytes_read_output_level =
                        outcome.bytes_read_output_level.saturating_sub(meta.size);
                }
                add_output(&mut outcome.edit, meta);
            }
            _ => jobs.push(files),
        }
    }
    outcome.sub_merges = jobs.len() as u64;
    // Every group moved: a trivial move after all, made of several files.
    outcome.trivial_move = jobs.is_empty();
    (outcome, jobs)
}

/// The run `id` of `level` in `version`, which the plan names.
fn run_of(version: &Version, level: usize, id: u64) -> Result<&Run> {
    version
        .levels
        .get(level)
        .and_then(|l| l.runs.iter().find(|r| r.id == id))
        .ok_or_else(|| Error::corruption("version", 0, format!("planned run {id} is gone")))
}

/// The version's metadata of every input file of `plan`, run by run.
fn resolve_inputs(version: &Version, plan: &plan::Plan) -> Result<Vec<Vec<Arc<FileMeta>>>> {
    let mut inputs: Vec<Vec<Arc<FileMeta>>> = Vec::with_capacity(plan.inputs.len());
    for input in &plan.inputs {
        let run = run_of(version, input.level, input.run_id)?;
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
    Ok(inputs)
}

/// The edit every outcome of `plan` starts from: the new output run (if
/// any), the files kept in the output run's compaction buffer, and the
/// removal of every input; with the id of the output run.
fn start_edit(
    ctx: &CompactionContext<'_>,
    plan: &plan::Plan,
    inputs: &[Vec<Arc<FileMeta>>],
) -> Result<(VersionEdit, u64)> {
    let mut edit = VersionEdit::default();
    let out_run_id = match plan.destination {
        Destination::Existing { id, .. } => id,
        Destination::New { order } => {
            let id = (ctx.alloc_id)();
            edit.new_runs.push(NewRun {
                level: plan.output_level,
                run_id: id,
                order,
            });
            id
        }
        // Each output file is a run of its own, named after it.
        Destination::Tiles => 0,
    };
    // The merged-down files the plan keeps in the output run's buffer.
    for change in plan.buffer_changes(out_run_id, plan.destination.is_new()) {
        edit.buffer.push(change.try_map(|file| {
            inputs
                .iter()
                .flatten()
                .find(|m| m.id == file.id)
                .map(|m| m.clone_meta())
                .ok_or_else(|| {
                    Error::corruption("version", 0, format!("buffered file {} is gone", file.id))
                })
        })?);
    }
    for (input, files) in plan.inputs.iter().zip(inputs) {
        for f in files {
            edit.removed_files.push(RemovedFile {
                level: input.level,
                run_id: input.run_id,
                file_id: f.id,
            });
        }
    }
    Ok((edit, out_run_id))
}

/// Runs `sub_merge` over `jobs` on up to `threads` threads; one result per
/// job, in order.
fn run_sub_merges(
    jobs: &[Vec<Arc<FileMeta>>],
    threads: usize,
    sub_merge: &(dyn Fn(&[Arc<FileMeta>]) -> Result<Written> + Sync),
) -> Vec<Result<Written>> {
    if threads <= 1 {
        return jobs.iter().map(|files| sub_merge(files)).collect();
    }
    // A bounded pool: `threads` workers take sub-merges in turn.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<parking_lot::Mutex<Option<Result<Written>>>> =
        jobs.iter().map(|_| parking_lot::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(files) = jobs.get(i) else { break };
                *slots[i].lock() = Some(sub_merge(files));
            });
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|| Err(Error::InvalidArgument("a sub-merge did not run".into())))
        })
        .collect()
}

/// All or nothing: the sub-merges' outputs, made durable together before
/// the edit that installs them is logged; or, if any sub-merge failed or
/// the sync fails, the first error, with every new file removed (each
/// failed sub-merge removed its own already).
fn collect_outputs(ctx: &CompactionContext<'_>, results: Vec<Result<Written>>) -> Result<Written> {
    let mut written = Written::default();
    let mut failure = None;
    for result in results {
        match result {
            Ok(files) => written.extend(files),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    let failure = match failure {
        Some(e) => Some(e),
        None => written.make_durable(ctx).err(),
    };
    if let Some(e) = failure {
        for meta in &written.metas {
            let _ = ctx.table_cache.vfs.remove(&ctx.table_cache.path(meta.id));
        }
        return Err(e);
    }
    Ok(written)
}

/// Merges `files` (of several runs; any two overlapping files of the plan
/// are both here) into new files cut by `cutter`, or every
/// `plan.target_file_size` bytes without one.
fn merge_files(
    ctx: &CompactionContext<'_>,
    plan: &plan::Plan,
    files: &[Arc<FileMeta>],
    older: &Older<'_>,
    cutter: Option<Box<dyn FileCutter>>,
) -> Result<Written> {
    let mut merged = merged_input(ctx, plan, files);
    let mut tombstones = Vec::new();
    for f in files {
        tombstones.extend_from_slice(ctx.table_cache.table(f)?.range_tombstones());
    }
    let (kept, hiding) = merge_tombstones(tombstones, ctx.smallest_snapshot, older.may_overlap);
    let oldest_tombstone = files.iter().filter_map(|f| f.oldest_tombstone_ms).min();
    let mut writer = OutputWriter::new(ctx, plan.target_file_size, oldest_tombstone, cutter);
    writer.tombstones = kept.into();
    let result = (|| -> Result<()> {
        merged.seek_to_first()?;
        let mut filter = VersionFilter::new(ctx.smallest_snapshot);
        while merged.valid() {
            let parsed = parse_internal_key(merged.key()).ok_or_else(|| {
                Error::corruption("compaction input", 0, "malformed internal key")
            })?;
            if filter.keep(parsed.user_key, parsed.seq, parsed.kind, older.may_hold)
                && !hiding.covers(parsed.user_key, parsed.seq)
            {
                writer.add(merged.key(), parsed.user_key, merged.value())?;
            }
            merged.next()?;
        }
        writer.finish_last()
    })();
    match result {
        Ok(()) => Ok(std::mem::take(&mut writer.done)),
        Err(e) => {
            writer.abandon();
            Err(e)
        }
    }
}

/// Points sampled in a tiled merge's first pass: 16 KiB of them bound its
/// memory and place the cuts of a few hundred tiles well.
const TILE_SAMPLE: usize = 1 << 14;

/// A spatially partitioned merge (seed 000 §4.3, the two-pass low-memory
/// variant): pass 1 draws a reservoir sample of the inputs' points and
/// computes ⌈input bytes / θ⌉ tiles from it by `rule`; pass 2 merges and
/// writes each surviving entry into the file of the tile holding its
/// point (one open file per tile). A key that is no point (impossible in a
/// spatial index) goes to tile 0.
fn merge_tiles(
    ctx: &CompactionContext<'_>,
    plan: &plan::Plan,
    files: &[Arc<FileMeta>],
    older_may_hold: &(dyn Fn(&[u8]) -> bool + Sync),
    rule: TileRule,
) -> Result<Written> {
    let comparator = ctx.table_options.spatial.ok_or_else(|| {
        Error::InvalidArgument(
            "partition=str and rstar-grove cut spatial keys: the database needs Options::spatial"
                .into(),
        )
    })?;
    for f in files {
        if !ctx.table_cache.table(f)?.range_tombstones().is_empty() {
            return Err(Error::InvalidArgument(
                "a spatially tiled merge cannot place range tombstones".into(),
            ));
        }
    }
    let bytes: u64 = files.iter().map(|f| f.size).sum();
    let parts = usize::try_from(bytes.div_ceil(plan.target_file_size.max(1)))
        .unwrap_or(usize::MAX)
        .max(1);
    let mut merged = merged_input(ctx, plan, files);
    let mut sample = Vec::new();
    let mut seen = 0u64;
    // xorshift64*, seeded by the inputs: the same merge cuts the same tiles.
    let mut rng = files.iter().fold(0x9E37_79B9_7F4A_7C15u64, |h, f| {
        (h ^ f.id).wrapping_mul(0x2545_F491_4F6C_DD1D)
    }) | 1;
    merged.seek_to_first()?;
    while merged.valid() {
        let parsed = parse_internal_key(merged.key())
            .ok_or_else(|| Error::corruption("compaction input", 0, "malformed internal key"))?;
        if let Some(p) = comparator.point_of(parsed.user_key) {
            seen += 1;
            if sample.len() < TILE_SAMPLE {
                sample.push(p);
            } else {
                rng ^= rng >> 12;
                rng ^= rng << 25;
                rng ^= rng >> 27;
                let slot = rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % seen;
                if let Some(s) = usize::try_from(slot).ok().and_then(|i| sample.get_mut(i)) {
                    *s = p;
                }
            }
        }
        merged.next()?;
    }
    let tiles = Tiles::new(rule, &mut sample, parts);
    drop(sample);

    let oldest_tombstone = files.iter().filter_map(|f| f.oldest_tombstone_ms).min();
    let mut writers: Vec<OutputWriter> = (0..tiles.len())
        .map(|_| OutputWriter::new(ctx, u64::MAX, oldest_tombstone, None))
        .collect();
    let result = (|| -> Result<()> {
        merged.seek_to_first()?;
        let mut filter = VersionFilter::new(ctx.smallest_snapshot);
        while merged.valid() {
            let parsed = parse_internal_key(merged.key()).ok_or_else(|| {
                Error::corruption("compaction input", 0, "malformed internal key")
            })?;
            if filter.keep(parsed.user_key, parsed.seq, parsed.kind, older_may_hold) {
                let tile = comparator
                    .point_of(parsed.user_key)
                    .map_or(0, |p| tiles.route(p));
                if let Some(w) = writers.get_mut(tile) {
                    w.add(merged.key(), parsed.user_key, merged.value())?;
                }
            }
            merged.next()?;
        }
        writers.iter_mut().try_for_each(|w| w.finish_last())
    })();
    match result {
        Ok(()) => {
            let mut out = Written::default();
            for w in &mut writers {
                out.extend(std::mem::take(&mut w.done));
            }
            out.metas.sort_by(|a, b| a.smallest.cmp(&b.smallest));
            Ok(out)
        }
        Err(e) => {
            writers.iter_mut().for_each(OutputWriter::abandon);
            Err(e)
        }
    }
}

/// One cursor per input run over its files among `files`, merged.
fn merged_input(
    ctx: &CompactionContext<'_>,
    plan: &plan::Plan,
    files: &[Arc<FileMeta>],
) -> MergingIterator {
    let children: Vec<Box<dyn InternalIterator>> = plan
        .inputs
        .iter()
        .filter_map(|input| {
            let mine: Vec<Arc<FileMeta>> = files
                .iter()
                .filter(|f| input.files.iter().any(|i| i.id == f.id))
                .cloned()
                .collect();
            (!mine.is_empty()).then(|| {
                Box::new(RunIterator::compaction_input(
                    Arc::new(mine),
                    Arc::clone(ctx.table_cache),
                    ctx.fill_cache,
                    ctx.readahead,
                )) as Box<dyn InternalIterator>
            })
        })
        .collect();
    MergingIterator::new(children)
}

/// Writes a memtable as a new run: one SST, or, under a partitioned policy,
/// files cut by its partitioner (seed 000 §5.5: "a sorted run in level 0
/// may span several SSTables"), the range rules sizing key ranges exactly
/// from the memtable itself. Empty if it keeps no entry.
pub(crate) fn flush_memtable(
    ctx: &CompactionContext<'_>,
    mem: &Arc<MemTable>,
    partitioning: Option<Partitioning>,
) -> Result<Vec<FileMeta>> {
    let cutter = match partitioning.filter(|p| p.partition != Partition::None) {
        Some(p) => Some(flush_cutter(mem, p)?),
        None => None,
    };
    // Flushes keep tombstones, range tombstones too: older runs may hold
    // the keys.
    let keep_tombstones = |_: &[u8]| true;
    let (kept, hiding) =
        merge_tombstones(mem.range_tombstones(), ctx.smallest_snapshot, &|_, _| true);
    let mut filter = VersionFilter::new(ctx.smallest_snapshot);
    let mut writer = OutputWriter::new(ctx, u64::MAX, mem.first_tombstone_ms(), cutter);
    writer.tombstones = kept.into();
    // The memtable is immutable now: walk it in place rather than copying.
    let result = mem.for_each(|ikey, value| {
        let parsed = parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption("memtable", 0, "malformed internal key"))?;
        if filter.keep(parsed.user_key, parsed.seq, parsed.kind, &keep_tombstones)
            && !hiding.covers(parsed.user_key, parsed.seq)
        {
            writer.add(ikey, parsed.user_key, value)?;
        }
        Ok(())
    });
    match result.and_then(|()| writer.finish()) {
        Ok(files) => Ok(files),
        Err(e) => {
            writer.abandon();
            Err(e)
        }
    }
}
