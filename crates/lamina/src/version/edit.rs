//! The changes between two versions ([`VersionEdit`]) and their encoding
//! in manifest records.

use lamina_compaction::lsbm::{BufferChange, Marker, Slot};

use crate::coding::{get_bytes, get_varint, put_bytes, put_varint};
use crate::sst::{get_rect, put_rect};

use super::{FileMeta, Version};

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
pub(super) const TAG_ADD_FILE: u64 = 6;
const TAG_BUFFER_NEW: u64 = 7;
const TAG_BUFFER_KEEP: u64 = 8;
const TAG_BUFFER_MARK: u64 = 9;
const TAG_BUFFER_REMOVE: u64 = 10;
const TAG_BUFFER_BASE: u64 = 11;
const TAG_BUFFER_DROP: u64 = 12;
const TAG_BUFFER_ROUND: u64 = 14;
pub(super) const TAG_FILE_MBR: u64 = 13;

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
