//! Compaction in the engine: the policies of `lamina-compaction` (re-exported
//! here) pick work from a [`TreeView`] of the current version, and the
//! executor (`executor.rs`) runs it: a k-way merge, or a trivial move when
//! nothing needs rewriting.

use std::collections::HashSet;

pub use lamina_compaction::*;

use crate::version::{FileMeta, Version};

mod executor;
mod filter;
mod manual;
mod output;

pub(crate) use executor::{execute, flush_memtable, CompactionContext, CompactionOutcome};
pub(crate) use manual::manual_task;

/// The engine's picture of `version` for the policies; `busy` holds ids of
/// files that a running compaction owns.
pub(crate) fn view_of_version(
    version: &Version,
    busy: &HashSet<u64>,
    flushes: u64,
    buffer_bytes: u64,
    now_ms: u64,
) -> TreeView {
    let levels = version
        .levels
        .iter()
        .map(|level| LevelView {
            runs: level
                .runs
                .iter()
                .map(|run| RunView {
                    id: run.id,
                    order: run.order,
                    files: run.files.iter().map(|f| file_view(f, busy)).collect(),
                })
                .collect(),
        })
        .collect();
    TreeView {
        levels,
        flushes,
        memtable_bytes: buffer_bytes,
        now_ms,
        compaction_buffers: version
            .buffers
            .iter()
            .map(|(&host, b)| (host, b.map(|f| file_view(f, busy))))
            .collect(),
        index: Default::default(),
    }
}

fn file_view(f: &FileMeta, busy: &HashSet<u64>) -> FileView {
    FileView {
        id: f.id,
        size: f.size,
        entries: f.entries,
        tombstones: f.tombstones,
        smallest: f.smallest.as_slice().into(),
        largest: f.largest.as_slice().into(),
        created_ms: f.created_ms,
        oldest_tombstone_ms: f.oldest_tombstone_ms,
        smallest_seq: f.smallest_seq,
        arrived_ms: f.arrived_ms(),
        last_read_ms: f.last_read_ms(),
        busy: busy.contains(&f.id),
        mbr: f.mbr,
    }
}
