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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use std::collections::HashMap;

use lamina_compaction::buffer::{self, BufferChange, BufferFile, Buffers, Marker, Slot};
use lamina_compaction::placement;

use crate::coding::{get_bytes, get_varint, put_bytes, put_varint};
use crate::error::{Error, Result};
use crate::spatial::Rect;
use crate::sst::{get_rect, put_rect, TableProperties};

/// Metadata of one SST file.
#[derive(Debug)]
pub struct FileMeta {
    /// File number; the file is named `{id:06}.sst`.
    pub id: u64,
    /// Size in bytes.
    pub size: u64,
    /// Entries (versions) stored.
    pub entries: u64,
    /// Tombstones stored.
    pub tombstones: u64,
    /// Smallest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// When the file was written (unix ms).
    pub created_ms: u64,
    /// When the oldest tombstone in the file was written (unix ms).
    pub oldest_tombstone_ms: Option<u64>,
    /// User key + value bytes stored, an estimate of the logical data size.
    pub raw_bytes: u64,
    /// When the file arrived in its level (unix ms; not persisted: after an
    /// open, its creation time). Trivial moves update it.
    pub(crate) arrived_ms: AtomicU64,
    /// When a point lookup last probed the file (unix ms; not persisted).
    pub(crate) last_read_ms: AtomicU64,
    /// The MBR of the file's points (files of a spatial index only): window
    /// queries skip files whose MBR misses the window.
    pub mbr: Option<Rect>,
    /// Whether the file holds range tombstones, once known (not persisted:
    /// learnt from the properties of a new file or when the table cache
    /// opens it). A cursor gathers the range tombstones of every file its
    /// bounds overlap; this lets it skip the table-cache lookup of files
    /// known to hold none.
    pub(crate) range_tombstones: OnceLock<bool>,
}

impl FileMeta {
    /// False only if the file is known to hold no range tombstone.
    pub(crate) fn may_hold_range_tombstones(&self) -> bool {
        self.range_tombstones.get().copied().unwrap_or(true)
    }

    /// True if the key ranges `[lo, hi]` and this file's intersect.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.smallest.as_slice() <= hi && lo <= self.largest.as_slice()
    }

    /// When the file arrived in its level (unix ms).
    pub fn arrived_ms(&self) -> u64 {
        self.arrived_ms.load(Ordering::Relaxed)
    }

    /// When a point lookup last probed the file (unix ms), or its arrival.
    pub fn last_read_ms(&self) -> u64 {
        self.last_read_ms
            .load(Ordering::Relaxed)
            .max(self.arrived_ms())
    }

    /// Records a point lookup probing the file at `now_ms`.
    pub(crate) fn touch(&self, now_ms: u64) {
        // Most lookups land in the millisecond already recorded: a plain
        // load spares them the read-modify-write on a shared cache line.
        if now_ms > self.last_read_ms.load(Ordering::Relaxed) {
            self.last_read_ms.fetch_max(now_ms, Ordering::Relaxed);
        }
    }

    fn encode(&self, dst: &mut Vec<u8>) {
        for v in [
            self.id,
            self.size,
            self.entries,
            self.tombstones,
            self.smallest_seq,
            self.largest_seq,
            self.created_ms,
            self.oldest_tombstone_ms.map_or(0, |t| t + 1),
            self.raw_bytes,
        ] {
            put_varint(dst, v);
        }
        put_bytes(dst, &self.smallest);
        put_bytes(dst, &self.largest);
    }

    fn decode(src: &mut &[u8]) -> Option<FileMeta> {
        let mut v = [0u64; 9];
        for slot in &mut v {
            *slot = get_varint(src)?;
        }
        let smallest = get_bytes(src)?.to_vec();
        let largest = get_bytes(src)?.to_vec();
        Some(FileMeta {
            id: v[0],
            size: v[1],
            entries: v[2],
            tombstones: v[3],
            smallest_seq: v[4],
            largest_seq: v[5],
            created_ms: v[6],
            oldest_tombstone_ms: v[7].checked_sub(1),
            raw_bytes: v[8],
            smallest,
            largest,
            arrived_ms: AtomicU64::new(v[6]),
            last_read_ms: AtomicU64::new(0),
            mbr: None,
            range_tombstones: OnceLock::new(),
        })
    }
}

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

impl BufferFile for FileMeta {
    fn file_id(&self) -> u64 {
        self.id
    }
    fn file_size(&self) -> u64 {
        self.size
    }
    fn first_key(&self) -> &[u8] {
        &self.smallest
    }
    fn last_key(&self) -> &[u8] {
        &self.largest
    }
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
            buffer::apply_changes(&mut buffers, changes, |h| {
                levels.iter().any(|l| l.runs.iter().any(|r| r.id == h))
            });
            next.buffers = buffers;
        }
        Ok(next)
    }
}

impl FileMeta {
    /// The metadata of table `id` as its properties block describes it,
    /// written at `now_ms`.
    pub(crate) fn from_properties(id: u64, p: &TableProperties, now_ms: u64) -> FileMeta {
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
            mbr: p.mbr,
            range_tombstones: OnceLock::from(p.range_tombstones > 0),
        }
    }

    /// A copy of the metadata without the opened table.
    pub fn clone_meta(&self) -> FileMeta {
        FileMeta {
            id: self.id,
            size: self.size,
            entries: self.entries,
            tombstones: self.tombstones,
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
            smallest_seq: self.smallest_seq,
            largest_seq: self.largest_seq,
            created_ms: self.created_ms,
            oldest_tombstone_ms: self.oldest_tombstone_ms,
            raw_bytes: self.raw_bytes,
            arrived_ms: AtomicU64::new(self.arrived_ms()),
            last_read_ms: AtomicU64::new(self.last_read_ms.load(Ordering::Relaxed)),
            mbr: self.mbr,
            range_tombstones: self.range_tombstones.clone(),
        }
    }
}

/// A new, empty run placed by its recency rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// Level of the run.
    pub level: usize,
    /// Run id.
    pub run_id: u64,
    /// Recency rank.
    pub order: u64,
}

/// A file added to a run.
#[derive(Debug)]
pub struct AddedFile {
    /// Level of the run.
    pub level: usize,
    /// Run receiving the file.
    pub run_id: u64,
    /// The file.
    pub meta: FileMeta,
}

/// A file removed from a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedFile {
    /// Level of the run.
    pub level: usize,
    /// Run losing the file.
    pub run_id: u64,
    /// The file's id.
    pub file_id: u64,
}

/// One atomic change to the tree and its counters, as logged in the manifest.
#[derive(Debug, Default)]
pub struct VersionEdit {
    /// WALs numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// Next file number to allocate.
    pub next_file_number: Option<u64>,
    /// Largest sequence number persisted in SSTs.
    pub last_seq: Option<u64>,
    /// Runs created.
    pub new_runs: Vec<NewRun>,
    /// Files removed (applied first).
    pub removed_files: Vec<RemovedFile>,
    /// Files added (applied after new runs).
    pub added_files: Vec<AddedFile>,
    /// Changes to the compaction buffers (applied last).
    pub buffer: Vec<BufferChange<FileMeta>>,
}

const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE: u64 = 2;
const TAG_LAST_SEQ: u64 = 3;
const TAG_NEW_RUN: u64 = 4;
const TAG_REMOVE_FILE: u64 = 5;
const TAG_ADD_FILE: u64 = 6;
const TAG_BUFFER_NEW: u64 = 7;
const TAG_BUFFER_KEEP: u64 = 8;
const TAG_BUFFER_MARK: u64 = 9;
const TAG_BUFFER_REMOVE: u64 = 10;
const TAG_BUFFER_BASE: u64 = 11;
const TAG_BUFFER_DROP: u64 = 12;
const TAG_BUFFER_ROUND: u64 = 14;
const TAG_FILE_MBR: u64 = 13;

/// The MBR of the file just encoded, as its own tagged record (so manifests
/// written before MBRs existed still parse): tag, file id, rectangle.
fn encode_mbr(out: &mut Vec<u8>, meta: &FileMeta) {
    if let Some(r) = &meta.mbr {
        put_varint(out, TAG_FILE_MBR);
        put_varint(out, meta.id);
        put_rect(out, r);
    }
}

impl VersionEdit {
    /// Rebases an edit made against `base` onto `now`, the version it is
    /// about to be applied to: a run the edit adds files to that `base`
    /// had and `now` lacks was emptied meanwhile by a concurrent
    /// compaction (one that took the run's last files while this one,
    /// taking none of them, wrote into it), and is created again, with its
    /// id and recency rank, instead of failing the edit. Not if a newer
    /// run of its level in `now` overlaps the files added to it: the
    /// emptied run's data may have gone there (a fold of the level's
    /// runs), and the added files, newer than that data, would read as
    /// older. Any other difference is left for [`Version::apply`] to
    /// refuse.
    pub fn recreate_emptied_runs(&mut self, base: &Version, now: &Version) {
        let run_of = |v: &Version, level: usize, id: u64| {
            v.levels
                .get(level)
                .and_then(|l| l.runs.iter().find(|r| r.id == id))
                .map(|r| r.order)
        };
        let mut recreated: Vec<NewRun> = Vec::new();
        for a in &self.added_files {
            let planned = self
                .new_runs
                .iter()
                .chain(&recreated)
                .any(|n| n.run_id == a.run_id);
            if planned || run_of(now, a.level, a.run_id).is_some() {
                continue;
            }
            let Some(order) = run_of(base, a.level, a.run_id) else {
                continue;
            };
            let added = self.added_files.iter().filter(|b| b.run_id == a.run_id);
            let newer = now.levels.get(a.level).map_or(&[][..], |l| &l.runs[..]);
            let shadowed = added.into_iter().any(|b| {
                newer
                    .iter()
                    .filter(|r| r.order > order)
                    .flat_map(|r| r.files.iter())
                    .any(|f| f.overlaps(&b.meta.smallest, &b.meta.largest))
            });
            if !shadowed {
                recreated.push(NewRun {
                    level: a.level,
                    run_id: a.run_id,
                    order,
                });
            }
        }
        self.new_runs.extend(recreated);
    }

    /// A run this edit adds files to that `base` had, `now` lacks and the
    /// edit does not create: after [`VersionEdit::recreate_emptied_runs`],
    /// a run a concurrent compaction emptied and a newer run of its level
    /// now shadows. [`Version::apply`] refuses such an edit (as it does one
    /// naming a run `base` never had, which this does not name: that is a
    /// bug, not a race).
    pub fn shadowed_run(&self, base: &Version, now: &Version) -> Option<u64> {
        let has = |v: &Version, level: usize, id: u64| {
            v.levels
                .get(level)
                .is_some_and(|l| l.runs.iter().any(|r| r.id == id))
        };
        self.added_files
            .iter()
            .find(|a| {
                !self.new_runs.iter().any(|n| n.run_id == a.run_id)
                    && !has(now, a.level, a.run_id)
                    && has(base, a.level, a.run_id)
            })
            .map(|a| a.run_id)
    }

    /// Serializes the edit (see docs/format.md, "Manifest").
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (tag, v) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file_number),
            (TAG_LAST_SEQ, self.last_seq),
        ] {
            if let Some(v) = v {
                put_varint(&mut out, tag);
                put_varint(&mut out, v);
            }
        }
        for r in &self.new_runs {
            put_varint(&mut out, TAG_NEW_RUN);
            put_varint(&mut out, r.level as u64);
            put_varint(&mut out, r.run_id);
            put_varint(&mut out, r.order);
        }
        for r in &self.removed_files {
            put_varint(&mut out, TAG_REMOVE_FILE);
            put_varint(&mut out, r.level as u64);
            put_varint(&mut out, r.run_id);
            put_varint(&mut out, r.file_id);
        }
        for a in &self.added_files {
            put_varint(&mut out, TAG_ADD_FILE);
            put_varint(&mut out, a.level as u64);
            put_varint(&mut out, a.run_id);
            a.meta.encode(&mut out);
            encode_mbr(&mut out, &a.meta);
        }
        for c in &self.buffer {
            match c {
                BufferChange::New { host, complete } => {
                    for v in [TAG_BUFFER_NEW, *host, u64::from(*complete)] {
                        put_varint(&mut out, v);
                    }
                }
                BufferChange::Keep { host, source, file } => {
                    for v in [TAG_BUFFER_KEEP, *host, *source] {
                        put_varint(&mut out, v);
                    }
                    file.encode(&mut out);
                    encode_mbr(&mut out, file);
                }
                BufferChange::Mark {
                    host,
                    source,
                    removed,
                } => {
                    for v in [TAG_BUFFER_MARK, *host, *source, removed.id, removed.size] {
                        put_varint(&mut out, v);
                    }
                    put_bytes(&mut out, &removed.smallest);
                    put_bytes(&mut out, &removed.largest);
                }
                BufferChange::Remove { host, file } => {
                    for v in [TAG_BUFFER_REMOVE, *host, *file] {
                        put_varint(&mut out, v);
                    }
                }
                BufferChange::Base { host, bytes } => {
                    for v in [TAG_BUFFER_BASE, *host, *bytes] {
                        put_varint(&mut out, v);
                    }
                }
                BufferChange::Drop { host } => {
                    for v in [TAG_BUFFER_DROP, *host] {
                        put_varint(&mut out, v);
                    }
                }
                BufferChange::Round { host, bytes } => {
                    for v in [TAG_BUFFER_ROUND, *host, *bytes] {
                        put_varint(&mut out, v);
                    }
                }
            }
        }
        out
    }

    /// Parses an edit; `None` if the bytes are malformed.
    pub fn decode(mut src: &[u8]) -> Option<VersionEdit> {
        let mut e = VersionEdit::default();
        let level = |src: &mut &[u8]| -> Option<usize> {
            usize::try_from(get_varint(src)?).ok().filter(|&l| l < 1024)
        };
        while !src.is_empty() {
            match get_varint(&mut src)? {
                TAG_LOG_NUMBER => e.log_number = Some(get_varint(&mut src)?),
                TAG_NEXT_FILE => e.next_file_number = Some(get_varint(&mut src)?),
                TAG_LAST_SEQ => e.last_seq = Some(get_varint(&mut src)?),
                TAG_NEW_RUN => e.new_runs.push(NewRun {
                    level: level(&mut src)?,
                    run_id: get_varint(&mut src)?,
                    order: get_varint(&mut src)?,
                }),
                TAG_REMOVE_FILE => e.removed_files.push(RemovedFile {
                    level: level(&mut src)?,
                    run_id: get_varint(&mut src)?,
                    file_id: get_varint(&mut src)?,
                }),
                TAG_ADD_FILE => e.added_files.push(AddedFile {
                    level: level(&mut src)?,
                    run_id: get_varint(&mut src)?,
                    meta: FileMeta::decode(&mut src)?,
                }),
                TAG_BUFFER_NEW => e.buffer.push(BufferChange::New {
                    host: get_varint(&mut src)?,
                    complete: match get_varint(&mut src)? {
                        0 => false,
                        1 => true,
                        _ => return None,
                    },
                }),
                TAG_BUFFER_KEEP => e.buffer.push(BufferChange::Keep {
                    host: get_varint(&mut src)?,
                    source: get_varint(&mut src)?,
                    file: FileMeta::decode(&mut src)?,
                }),
                TAG_BUFFER_MARK => {
                    let host = get_varint(&mut src)?;
                    let source = get_varint(&mut src)?;
                    let id = get_varint(&mut src)?;
                    let size = get_varint(&mut src)?;
                    let smallest = get_bytes(&mut src)?.to_vec();
                    let largest = get_bytes(&mut src)?.to_vec();
                    e.buffer.push(BufferChange::Mark {
                        host,
                        source,
                        removed: Marker {
                            id,
                            smallest,
                            largest,
                            size,
                        },
                    });
                }
                TAG_BUFFER_REMOVE => e.buffer.push(BufferChange::Remove {
                    host: get_varint(&mut src)?,
                    file: get_varint(&mut src)?,
                }),
                TAG_BUFFER_DROP => e.buffer.push(BufferChange::Drop {
                    host: get_varint(&mut src)?,
                }),
                TAG_FILE_MBR => {
                    // Belongs to the file the previous record added.
                    let id = get_varint(&mut src)?;
                    let rect = get_rect(&mut src)?;
                    let last = match (e.added_files.last_mut(), e.buffer.last_mut()) {
                        (_, Some(BufferChange::Keep { file, .. })) if file.id == id => file,
                        (Some(a), _) if a.meta.id == id => &mut a.meta,
                        _ => return None,
                    };
                    last.mbr = Some(rect);
                }
                TAG_BUFFER_BASE => e.buffer.push(BufferChange::Base {
                    host: get_varint(&mut src)?,
                    bytes: get_varint(&mut src)?,
                }),
                TAG_BUFFER_ROUND => e.buffer.push(BufferChange::Round {
                    host: get_varint(&mut src)?,
                    bytes: get_varint(&mut src)?,
                }),
                _ => return None,
            }
        }
        Some(e)
    }

    /// Adds flushed files (one run, in key order) as a new run `run_id`,
    /// the newest of level 0
    /// (run ids and file numbers share one increasing counter, so the id
    /// also ranks the run above every existing one).
    pub fn add_flushed_run(&mut self, run_id: u64, files: Vec<FileMeta>) {
        if files.is_empty() {
            return;
        }
        self.new_runs.push(NewRun {
            level: 0,
            run_id,
            order: run_id,
        });
        for meta in files {
            self.added_files.push(AddedFile {
                level: 0,
                run_id,
                meta,
            });
        }
    }

    /// An edit that recreates `version` from an empty tree.
    pub fn snapshot_of(version: &Version) -> VersionEdit {
        let mut e = VersionEdit::default();
        for (l, level) in version.levels.iter().enumerate() {
            for run in &level.runs {
                e.new_runs.push(NewRun {
                    level: l,
                    run_id: run.id,
                    order: run.order,
                });
                for f in run.files.iter() {
                    e.added_files.push(AddedFile {
                        level: l,
                        run_id: run.id,
                        meta: f.clone_meta(),
                    });
                }
            }
        }
        for (&host, b) in &version.buffers {
            e.buffer.push(BufferChange::New {
                host,
                complete: b.complete,
            });
            // Oldest table first: each round's table enters as the newest.
            for t in b.tables().iter().rev() {
                for slot in t.slots() {
                    e.buffer.push(match slot {
                        Slot::Live(f) => BufferChange::Keep {
                            host,
                            source: t.source,
                            file: f.clone_meta(),
                        },
                        Slot::Removed(r) => BufferChange::Mark {
                            host,
                            source: t.source,
                            removed: r.clone(),
                        },
                    });
                }
            }
            if let Some(bytes) = b.base {
                e.buffer.push(BufferChange::Base { host, bytes });
            }
            if let Some(bytes) = b.round_base() {
                e.buffer.push(BufferChange::Round { host, bytes });
            }
        }
        e
    }
}

impl placement::Ranked for Run {
    fn order(&self) -> u64 {
        self.order
    }
}

impl placement::KeyRanged for FileMeta {
    fn smallest(&self) -> &[u8] {
        &self.smallest
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn meta(id: u64, lo: &[u8], hi: &[u8]) -> FileMeta {
        FileMeta {
            id,
            size: 100,
            entries: 10,
            tombstones: 1,
            smallest: lo.to_vec(),
            largest: hi.to_vec(),
            smallest_seq: 1,
            largest_seq: 9,
            created_ms: 7,
            oldest_tombstone_ms: Some(3),
            raw_bytes: 90,
            arrived_ms: AtomicU64::new(7),
            last_read_ms: AtomicU64::new(0),
            mbr: None,
            range_tombstones: OnceLock::new(),
        }
    }

    /// (level, run id, file id, smallest, largest)
    type FileSpec<'a> = (usize, u64, u64, &'a [u8], &'a [u8]);

    fn edit_with(runs: &[(usize, u64, u64)], files: &[FileSpec<'_>]) -> VersionEdit {
        VersionEdit {
            new_runs: runs
                .iter()
                .map(|&(level, run_id, order)| NewRun {
                    level,
                    run_id,
                    order,
                })
                .collect(),
            added_files: files
                .iter()
                .map(|&(level, run_id, id, lo, hi)| AddedFile {
                    level,
                    run_id,
                    meta: meta(id, lo, hi),
                })
                .collect(),
            ..Default::default()
        }
    }

    /// `edit` with file `file_id` of run `run_id` (level `level`) removed.
    fn removing(mut edit: VersionEdit, level: usize, run_id: u64, file_id: u64) -> VersionEdit {
        edit.removed_files.push(RemovedFile {
            level,
            run_id,
            file_id,
        });
        edit
    }

    #[test]
    fn edit_roundtrip() {
        let mut e = edit_with(&[(1, 3, 4)], &[(1, 3, 9, b"a", b"z")]);
        e.log_number = Some(5);
        e.last_seq = Some(77);
        e.removed_files.push(RemovedFile {
            level: 0,
            run_id: 1,
            file_id: 2,
        });
        let d = VersionEdit::decode(&e.encode()).unwrap();
        assert_eq!(d.log_number, Some(5));
        assert_eq!(d.last_seq, Some(77));
        assert_eq!(d.new_runs, e.new_runs);
        assert_eq!(d.removed_files, e.removed_files);
        assert_eq!(d.added_files[0].meta.largest, b"z");
        assert_eq!(d.added_files[0].meta.oldest_tombstone_ms, Some(3));
        assert!(VersionEdit::decode(&[0xff]).is_none());
        assert!(VersionEdit::decode(&[TAG_ADD_FILE as u8, 1]).is_none());
    }

    /// A round's base (the freeze rule's) survives the manifest: logged
    /// with the edit and written again by the snapshot that begins a new
    /// manifest, with the round's bytes in rebuilt from its table.
    #[test]
    fn a_buffer_round_base_survives_edits_and_snapshots() {
        let mut e = edit_with(&[(2, 7, 1)], &[(2, 7, 1, b"a", b"z")]);
        let kept = meta(3, b"b", b"c");
        let round_in = kept.size;
        e.buffer = vec![
            BufferChange::New {
                host: 7,
                complete: true,
            },
            BufferChange::Round {
                host: 7,
                bytes: 1_000,
            },
            BufferChange::Keep {
                host: 7,
                source: 5,
                file: kept,
            },
        ];
        let logged = Version::default()
            .apply(&VersionEdit::decode(&e.encode()).unwrap())
            .unwrap();
        let snap = VersionEdit::decode(&VersionEdit::snapshot_of(&logged).encode()).unwrap();
        let reopened = Version::default().apply(&snap).unwrap();
        for v in [&logged, &reopened] {
            let b = &v.buffers[&7];
            assert_eq!(b.round_base(), Some(1_000));
            // The host holds the round's bytes on top of its base: nothing
            // repeated; at the base alone, all of it.
            assert_eq!(b.repeated_in_round(1_000 + round_in), Some(0.0));
            assert_eq!(b.repeated_in_round(1_000), Some(1.0));
        }
    }

    /// Two concurrent compactions: one moves a file from level 1 into
    /// level 2's run 7 (taking none of its files), the other takes run 7's
    /// only file down to level 3 and lands first, so run 7 is gone. The
    /// first edit, rebased, creates run 7 again with its rank; without the
    /// rebase it is refused; a run the base never had is still refused.
    #[test]
    fn an_edit_into_a_run_emptied_meanwhile_recreates_it() {
        let base = Version::default()
            .apply(&edit_with(
                &[(1, 5, 1), (2, 7, 9)],
                &[(1, 5, 1, b"a", b"c"), (2, 7, 2, b"m", b"p")],
            ))
            .unwrap();
        // The other compaction: run 7's file to a new run of level 3.
        let down = removing(edit_with(&[(3, 8, 1)], &[(3, 8, 2, b"m", b"p")]), 2, 7, 2);
        let now = base.apply(&down).unwrap();
        assert!(now.levels[2].runs.is_empty());
        // This one: file 1 from run 5 into run 7, planned against `base`.
        let mut into = removing(edit_with(&[], &[(2, 7, 1, b"a", b"c")]), 1, 5, 1);
        assert!(now.apply(&into).is_err(), "refused without the rebase");
        assert_eq!(into.shadowed_run(&base, &now), Some(7));
        into.recreate_emptied_runs(&base, &now);
        assert_eq!(into.shadowed_run(&base, &now), None);
        assert_eq!(
            into.new_runs,
            vec![NewRun {
                level: 2,
                run_id: 7,
                order: 9
            }]
        );
        let after = now.apply(&into).unwrap();
        let run = &after.levels[2].runs[0];
        assert_eq!((run.id, run.order), (7, 9));
        assert_eq!(run.files.iter().map(|f| f.id).collect::<Vec<_>>(), [1]);
        assert_eq!(after.levels[3].runs[0].files[0].id, 2);
        // A run the base never had is not made up.
        let mut stray = edit_with(&[], &[(2, 99, 3, b"x", b"y")]);
        stray.recreate_emptied_runs(&base, &now);
        assert!(stray.new_runs.is_empty());
        assert_eq!(stray.shadowed_run(&base, &now), None, "a bug, not a race");
        assert!(now.apply(&stray).is_err());

        // Had the other compaction folded run 7 into a newer run of level
        // 2 over the added file's keys, the added file (newer data) would
        // read as older than it: the edit is refused instead.
        let fold = removing(edit_with(&[(2, 8, 10)], &[(2, 8, 3, b"b", b"p")]), 2, 7, 2);
        let folded = base.apply(&fold).unwrap();
        let mut into = edit_with(&[], &[(2, 7, 1, b"a", b"c")]);
        into.recreate_emptied_runs(&base, &folded);
        assert!(into.new_runs.is_empty());
        assert_eq!(into.shadowed_run(&base, &folded), Some(7));
        assert!(folded.apply(&into).is_err());
        // A newer run elsewhere in the key space does not stand in the way.
        let apart = removing(edit_with(&[(2, 8, 10)], &[(2, 8, 3, b"m", b"p")]), 2, 7, 2);
        let apart = base.apply(&apart).unwrap();
        let mut into = edit_with(&[], &[(2, 7, 1, b"a", b"c")]);
        into.recreate_emptied_runs(&base, &apart);
        assert_eq!(into.new_runs.len(), 1);
        assert!(apart.apply(&into).is_ok());
    }

    #[test]
    fn mbrs_roundtrip_and_bind_to_their_file() {
        let mbr = Rect::new(-1.5, 2.0, 3.0, 4.25);
        let mut e = edit_with(
            &[(1, 3, 4)],
            &[(1, 3, 9, b"a", b"m"), (1, 3, 10, b"n", b"z")],
        );
        e.added_files[1].meta.mbr = Some(mbr);
        let mut kept = meta(11, b"a", b"b");
        kept.mbr = Some(Rect::ALL);
        e.buffer.push(BufferChange::Keep {
            host: 3,
            source: 2,
            file: kept,
        });
        let raw = e.encode();
        let d = VersionEdit::decode(&raw).unwrap();
        assert_eq!(d.added_files[0].meta.mbr, None);
        assert_eq!(d.added_files[1].meta.mbr, Some(mbr));
        match &d.buffer[0] {
            BufferChange::Keep { file, .. } => assert_eq!(file.mbr, Some(Rect::ALL)),
            other => panic!("{other:?}"),
        }
        // Independently laid out: an MBR record for a file the edit did not
        // just add, or with a NaN corner, is malformed.
        let mut stray = Vec::new();
        put_varint(&mut stray, TAG_FILE_MBR);
        put_varint(&mut stray, 99);
        for v in [0.0f64, 0.0, 1.0, 1.0] {
            stray.extend_from_slice(&v.to_le_bytes());
        }
        assert!(VersionEdit::decode(&stray).is_none());
        let mut nan = edit_with(&[(1, 3, 4)], &[(1, 3, 9, b"a", b"m")]).encode();
        put_varint(&mut nan, TAG_FILE_MBR);
        put_varint(&mut nan, 9);
        for v in [0.0f64, f64::NAN, 1.0, 1.0] {
            nan.extend_from_slice(&v.to_le_bytes());
        }
        assert!(VersionEdit::decode(&nan).is_none());
    }

    #[test]
    fn runs_order_newest_first_and_files_sorted() {
        let v = Version::default()
            .apply(&edit_with(
                &[(0, 1, 1), (0, 2, 2)],
                &[
                    (0, 1, 10, b"m", b"p"),
                    (0, 1, 11, b"a", b"c"),
                    (0, 2, 12, b"b", b"x"),
                ],
            ))
            .unwrap();
        let ids: Vec<u64> = v.levels[0].runs.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![2, 1]);
        let files: Vec<u64> = v.levels[0].runs[1].files.iter().map(|f| f.id).collect();
        assert_eq!(files, vec![11, 10]);
        assert_eq!(v.levels[0].runs[1].file_for(b"n").map(|f| f.id), Some(10));
        assert!(v.levels[0].runs[1].file_for(b"d").is_none());
    }

    #[test]
    fn overlapping_file_in_a_run_is_rejected_and_moves_keep_the_arc() {
        let v = Version::default()
            .apply(&edit_with(&[(0, 1, 1)], &[(0, 1, 10, b"a", b"f")]))
            .unwrap();
        assert!(v.apply(&edit_with(&[], &[(0, 1, 11, b"e", b"g")])).is_err());
        let before = Arc::clone(&v.levels[0].runs[0].files[0]);
        let mut mv = edit_with(&[(1, 5, 1)], &[(1, 5, 10, b"a", b"f")]);
        mv.removed_files.push(RemovedFile {
            level: 0,
            run_id: 1,
            file_id: 10,
        });
        let v2 = v.apply(&mv).unwrap();
        assert_eq!(v2.levels[0].runs.len(), 0);
        assert!(Arc::ptr_eq(&before, &v2.levels[1].runs[0].files[0]));
    }

    #[test]
    fn a_refused_edit_is_a_refusal_live_and_corruption_in_a_manifest() {
        use crate::manifest::{recover, Counters, Manifest};
        use crate::vfs::mem::MemFs;
        use crate::vfs::Vfs;
        use std::path::Path;

        let v = Version::default()
            .apply(&edit_with(&[(0, 1, 1)], &[(0, 1, 10, b"a", b"f")]))
            .unwrap();
        let stray = edit_with(&[], &[(1, 99, 11, b"x", b"y")]);
        // Made by the engine: a refusal naming the run, not damage on disk.
        match v.apply(&stray) {
            Err(Error::EditRefused(reason)) => assert_eq!(reason, "addition to unknown run 99"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Read from a manifest: corruption at the record that holds it.
        let fs = MemFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let mut manifest = Manifest::create(&fs, dir, 2, &v, Counters::default()).unwrap();
        let name = crate::manifest::manifest_name(2);
        let before = fs.read_all(&dir.join(&name)).unwrap().len() as u64;
        manifest
            .log(&fs, &stray, &v, Counters::default(), || 3)
            .unwrap();
        match recover(&fs, dir) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => {
                assert_eq!((file.as_str(), offset), (name.as_str(), before));
                assert_eq!(
                    reason,
                    "version edit does not apply to the current version: \
                     addition to unknown run 99"
                );
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}
