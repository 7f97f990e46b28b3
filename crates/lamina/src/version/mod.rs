//! The tree model: levels → sorted runs → files, and the edits that change it.
//!
//! A [`Version`] is an immutable snapshot of the tree. Readers pin one with an
//! `Arc`; flushes and compactions build a new one by applying a
//! [`VersionEdit`] and publish it atomically, so they never block readers.
//!
//! * A **file** is one SST, described by [`FileMeta`].
//! * A **run** is a set of key-disjoint files sorted by key: one sorted run.
//! * A **level** holds runs ordered newest first. Leveling keeps one run per
//!   level, tiering up to T, stack-based layouts use one level with k runs.
//!
//! Recency is global: every run in level *i* is newer than every run in level
//! *i+1*, and within a level runs are ordered by `order` (larger = newer).
//! A lookup therefore stops at the first run that holds the key.
//!
//! `file.rs` holds the file metadata ([`FileMeta`]), `edit.rs` the edits
//! ([`VersionEdit`]) and their encoding in manifest records; this module the
//! version itself and how an edit applies to it.

use std::collections::HashMap;
use std::sync::Arc;

use lamina_compaction::lsbm::{self, BufferChange, Buffers};
use lamina_compaction::placement;

use crate::error::{Error, Result};

mod edit;
mod file;
#[cfg(test)]
pub(crate) mod tests;

pub use edit::{AddedFile, NewRun, RemovedFile, VersionEdit};
pub use file::FileMeta;

/// One sorted run: key-disjoint files sorted by key.
#[derive(Debug, Clone)]
pub struct Run {
    /// Identifier, unique in the database.
    pub id: u64,
    /// Recency rank: larger is newer.
    pub order: u64,
    /// Files sorted by smallest key, pairwise disjoint. Shared by reference
    /// count: the next version and every iterator over the run take it
    /// without copying the list (a seek used to copy it once per run).
    pub files: Arc<Vec<Arc<FileMeta>>>,
}

impl Run {
    /// Total bytes of the run's files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The file that may hold `user_key`.
    pub fn file_for(&self, user_key: &[u8]) -> Option<&Arc<FileMeta>> {
        let i = self
            .files
            .partition_point(|f| f.largest.as_slice() < user_key);
        self.files
            .get(i)
            .filter(|f| f.smallest.as_slice() <= user_key)
    }
}

/// One level: runs ordered newest first.
#[derive(Debug, Clone, Default)]
pub struct Level {
    /// Runs, newest first.
    pub runs: Vec<Run>,
}

impl Level {
    /// Total bytes in the level.
    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(Run::bytes).sum()
    }

    /// Number of files in the level.
    pub fn file_count(&self) -> usize {
        self.runs.iter().map(|r| r.files.len()).sum()
    }
}

/// An immutable snapshot of the tree.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// Levels, shallowest first.
    pub levels: Vec<Level>,
    /// Compaction buffers (LSbM, seed 002) by host run id.
    pub buffers: Buffers<Arc<FileMeta>>,
}

impl Version {
    /// Every file the version needs on disk: the runs' files and the live
    /// files of the compaction buffers (a file may be in both).
    pub fn live_files(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.files()
            .map(|(_, _, f)| f)
            .chain(self.buffers.values().flat_map(|b| b.live_files()))
    }

    /// Bytes of the buffers' live files that no run holds.
    pub fn buffer_bytes(&self) -> u64 {
        let in_runs: std::collections::HashSet<u64> = self.files().map(|(_, _, f)| f.id).collect();
        let mut seen = std::collections::HashSet::new();
        self.buffers
            .values()
            .flat_map(|b| b.live_files())
            .filter(|f| !in_runs.contains(&f.id) && seen.insert(f.id))
            .map(|f| f.size)
            .sum()
    }

    /// Every file with its level and run id.
    pub fn files(&self) -> impl Iterator<Item = (usize, u64, &Arc<FileMeta>)> {
        self.levels.iter().enumerate().flat_map(|(l, level)| {
            level
                .runs
                .iter()
                .flat_map(move |r| r.files.iter().map(move |f| (l, r.id, f)))
        })
    }

    /// Total number of sorted runs.
    pub fn run_count(&self) -> usize {
        self.levels.iter().map(|l| l.runs.len()).sum()
    }

    /// Bytes of the oldest sorted run: the last run of the deepest
    /// non-empty level, with the runs of the same rank beside it (the tiles
    /// of a spatially tiled level are one-file runs of one rank).
    pub fn oldest_run_bytes(&self) -> u64 {
        let Some(level) = self.levels.iter().rev().find(|l| !l.runs.is_empty()) else {
            return 0;
        };
        placement::oldest_rank(&level.runs).map(Run::bytes).sum()
    }

    /// Runs in recency order (newest first) with their level.
    pub fn runs_newest_first(&self) -> impl Iterator<Item = (usize, &Run)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, level)| level.runs.iter().map(move |r| (l, r)))
    }

    /// Applies an edit, producing the next version. Files removed from one
    /// place and added elsewhere with the same id keep their `Arc` (and their
    /// opened table), so a trivial move keeps cached blocks valid.
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let bad = Error::EditRefused;
        let mut next = self.clone();
        let mut moved: Vec<Arc<FileMeta>> = Vec::new();
        for r in &edit.removed_files {
            let run = next
                .levels
                .get_mut(r.level)
                .and_then(|l| l.runs.iter_mut().find(|run| run.id == r.run_id))
                .ok_or_else(|| bad(format!("removal from unknown run {}", r.run_id)))?;
            let pos = run
                .files
                .iter()
                .position(|f| f.id == r.file_id)
                .ok_or_else(|| bad(format!("removal of unknown file {}", r.file_id)))?;
            moved.push(Arc::make_mut(&mut run.files).remove(pos));
        }
        for nr in &edit.new_runs {
            if next.levels.len() <= nr.level {
                next.levels.resize_with(nr.level + 1, Level::default);
            }
            let level = &mut next.levels[nr.level];
            if level.runs.iter().any(|r| r.id == nr.run_id) {
                return Err(bad(format!("duplicate run {}", nr.run_id)));
            }
            let pos = placement::run_slot(&level.runs, nr.order);
            level.runs.insert(
                pos,
                Run {
                    id: nr.run_id,
                    order: nr.order,
                    files: Arc::default(),
                },
            );
        }
        for a in &edit.added_files {
            let meta = match moved.iter().position(|m| m.id == a.meta.id) {
                Some(i) => moved.swap_remove(i),
                None => Arc::new(a.meta.clone_meta()),
            };
            let run = next
                .levels
                .get_mut(a.level)
                .and_then(|l| l.runs.iter_mut().find(|run| run.id == a.run_id))
                .ok_or_else(|| bad(format!("addition to unknown run {}", a.run_id)))?;
            let pos = placement::file_slot(&run.files, &meta.smallest);
            let clashes = |f: Option<&Arc<FileMeta>>| {
                f.is_some_and(|f| f.overlaps(&meta.smallest, &meta.largest))
            };
            if clashes(run.files.get(pos))
                || clashes(pos.checked_sub(1).and_then(|p| run.files.get(p)))
            {
                return Err(bad(format!(
                    "file {} overlaps a file of run {}",
                    meta.id, a.run_id
                )));
            }
            Arc::make_mut(&mut run.files).insert(pos, meta);
        }
        for level in &mut next.levels {
            level.runs.retain(|r| !r.files.is_empty());
        }
        while next.levels.last().is_some_and(|l| l.runs.is_empty()) {
            next.levels.pop();
        }
        if !edit.buffer.is_empty() || !next.buffers.is_empty() {
            // A kept file shares the `Arc` (and opened table) it has anywhere
            // in the tree before or after the edit.
            let mut known: HashMap<u64, Arc<FileMeta>> = HashMap::new();
            for f in self.live_files().chain(next.live_files()).chain(&moved) {
                known.entry(f.id).or_insert_with(|| Arc::clone(f));
            }
            let changes: Vec<BufferChange<Arc<FileMeta>>> = edit
                .buffer
                .iter()
                .map(|c| {
                    c.as_ref().try_map(|file| {
                        Ok::<_, std::convert::Infallible>(
                            known
                                .get(&file.id)
                                .cloned()
                                .unwrap_or_else(|| Arc::new(file.clone_meta())),
                        )
                    })
                })
                .filter_map(std::result::Result::ok)
                .collect();
            let levels = &next.levels;
            let mut buffers = std::mem::take(&mut next.buffers);
            lsbm::apply_changes(&mut buffers, changes, |h| {
                levels.iter().any(|l| l.runs.iter().any(|r| r.id == h))
            });
            next.buffers = buffers;
        }
        Ok(next)
    }
}

impl placement::Ranked for Run {
    fn order(&self) -> u64 {
        self.order
    }
}
