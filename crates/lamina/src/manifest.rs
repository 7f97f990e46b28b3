//! The manifest: a checksummed log of [`VersionEdit`]s, and `CURRENT`.
//!
//! `CURRENT` holds the name of the live manifest file followed by a newline.
//! It is replaced atomically (write `CURRENT.tmp`, fsync, rename, fsync the
//! directory). A manifest starts with an edit that recreates the whole tree
//! and its counters, then one record per change. Each append is fsynced
//! before the change takes effect. If an append fails, the file may end in a
//! partial record, so the next change starts a fresh manifest instead of
//! appending after it: a failed metadata write never leaves a manifest that
//! cannot be opened.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::record::{append_record, read_records};
use crate::version::{Version, VersionEdit};
use crate::vfs::{Vfs, WritableFile};

use crate::filename::CURRENT_TMP;
pub use crate::filename::{manifest_name, CURRENT};

/// Counters persisted with the tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// WALs numbered below this are obsolete.
    pub log_number: u64,
    /// Next file number.
    pub next_file_number: u64,
    /// Largest sequence number in SSTs.
    pub last_seq: u64,
}

impl Counters {
    fn absorb(&mut self, edit: &VersionEdit) {
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        if let Some(n) = edit.next_file_number {
            self.next_file_number = self.next_file_number.max(n);
        }
        if let Some(n) = edit.last_seq {
            self.last_seq = self.last_seq.max(n);
        }
    }

    fn stamp(&self, edit: &mut VersionEdit) {
        edit.log_number.get_or_insert(self.log_number);
        edit.next_file_number.get_or_insert(self.next_file_number);
        edit.last_seq.get_or_insert(self.last_seq);
    }
}

/// The open manifest log.
#[derive(Debug)]
pub struct Manifest {
    dir: PathBuf,
    number: u64,
    file: Option<Box<dyn WritableFile>>,
}

impl Manifest {
    /// Starts manifest `number` holding `version` and `counters`, and points
    /// `CURRENT` at it.
    pub fn create(
        vfs: &dyn Vfs,
        dir: &Path,
        number: u64,
        version: &Version,
        counters: Counters,
    ) -> Result<Manifest> {
        let name = manifest_name(number);
        let mut file = vfs.create(&dir.join(&name))?;
        let mut snapshot = VersionEdit::snapshot_of(version);
        counters.stamp(&mut snapshot);
        append_record(file.as_mut(), &snapshot.encode())?;
        file.sync()?;
        // The manifest's name must be durable before CURRENT can name it:
        // a power loss may otherwise keep the rename below and lose the
        // creation (tests/options_file.rs found it, crashing mid-open).
        vfs.sync_dir(dir)?;
        let tmp = dir.join(CURRENT_TMP);
        let mut current = vfs.create(&tmp)?;
        current.append(format!("{name}\n").as_bytes())?;
        current.sync()?;
        drop(current);
        vfs.rename(&tmp, &dir.join(CURRENT))?;
        vfs.sync_dir(dir)?;
        Ok(Manifest {
            dir: dir.to_path_buf(),
            number,
            file: Some(file),
        })
    }

    /// Manifest `number` as recovered, for a database opened read-only: it
    /// is never appended to.
    pub(crate) fn read_only(dir: &Path, number: u64) -> Manifest {
        Manifest {
            dir: dir.to_path_buf(),
            number,
            file: None,
        }
    }

    /// The manifest's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Durably logs `edit`. `version` and `counters` describe the tree after
    /// the edit; they seed a fresh manifest if the current one is unusable.
    /// `new_number` allocates a file number for that case.
    pub fn log(
        &mut self,
        vfs: &dyn Vfs,
        edit: &VersionEdit,
        version_after: &Version,
        counters_after: Counters,
        new_number: impl FnOnce() -> u64,
    ) -> Result<()> {
        if let Some(file) = &mut self.file {
            let result = append_record(file.as_mut(), &edit.encode()).and_then(|()| file.sync());
            if result.is_err() {
                self.file = None;
            }
            return result;
        }
        let old = self.number;
        *self = Manifest::create(vfs, &self.dir, new_number(), version_after, counters_after)?;
        let _ = vfs.remove(&self.dir.join(manifest_name(old)));
        Ok(())
    }
}

/// Reads the tree and counters named by `CURRENT`; `None` if there is no
/// `CURRENT` (an empty directory).
pub fn recover(vfs: &dyn Vfs, dir: &Path) -> Result<Option<(Version, Counters, u64)>> {
    let current_path = dir.join(CURRENT);
    if !vfs.exists(&current_path) {
        return Ok(None);
    }
    let current = vfs.read_all(&current_path)?;
    let name = std::str::from_utf8(&current)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .filter(|s| s.starts_with("MANIFEST-") && !s.contains('/'))
        .ok_or_else(|| Error::corruption(CURRENT, 0, "CURRENT does not name a manifest"))?;
    let number = name["MANIFEST-".len()..]
        .parse::<u64>()
        .map_err(|_| Error::corruption(CURRENT, 0, "bad manifest number"))?;
    let manifest_path = dir.join(name);
    if !vfs.exists(&manifest_path) {
        return Err(Error::NeedsRepair {
            dir: dir.to_path_buf(),
            reason: format!("CURRENT names {name}, which does not exist"),
        });
    }
    let data = vfs.read_all(&manifest_path)?;
    let mut version = Version::default();
    let mut counters = Counters::default();
    let mut records = 0;
    // A torn last record is an edit whose fsync never completed: it never
    // took effect, so dropping it is correct.
    read_records(&data, name, |offset, payload| {
        let edit = VersionEdit::decode(payload)
            .ok_or_else(|| Error::corruption(name, offset, "undecodable version edit"))?;
        version = version
            .apply(&edit)
            .map_err(|e| Error::corruption(name, offset, e.to_string()))?;
        counters.absorb(&edit);
        records += 1;
        Ok(())
    })?;
    if records == 0 {
        return Err(Error::corruption(
            name,
            0,
            "manifest holds no snapshot record",
        ));
    }
    Ok(Some((version, counters, number)))
}

/// Refuses a directory that holds lamina's files with data but no
/// `CURRENT`: opening it as a new database would lose them (LevelDB's
/// `RepairDB` case). Files a creation that failed before its `CURRENT` was
/// written leaves behind hold no data (empty logs, manifests of an empty
/// tree, `CURRENT.tmp`); their names are returned, to be removed once the
/// new database is durable.
pub(crate) fn refuse_orphaned_files(vfs: &dyn Vfs, dir: &Path) -> Result<Vec<String>> {
    if !vfs.exists(dir) || vfs.exists(&dir.join(filename::CURRENT)) {
        return Ok(Vec::new());
    }
    let mut leftovers = Vec::new();
    let mut with_data = Vec::new();
    for name in vfs.list(dir)? {
        let Some((kind, _)) = filename::parse(&name) else {
            if name == filename::CURRENT_TMP {
                leftovers.push(name);
            }
            continue;
        };
        let path = dir.join(&name);
        let empty = match kind {
            FileKind::Table => false,
            // Settings, not data.
            FileKind::Options | FileKind::OptionsTemp => true,
            FileKind::Wal => vfs.open_read(&path)?.is_empty(),
            FileKind::Manifest => {
                let data = vfs.read_all(&path)?;
                let mut files = 0;
                read_records(&data, &name, |_, payload| {
                    files += VersionEdit::decode(payload).map_or(1, |e| e.added_files.len());
                    Ok(())
                })
                .is_ok_and(|_| files == 0)
            }
        };
        if empty {
            leftovers.push(name);
        } else {
            with_data.push(name);
        }
    }
    if with_data.is_empty() {
        return Ok(leftovers);
    }
    with_data.sort();
    let shown = with_data.len().min(3);
    Err(Error::NeedsRepair {
        dir: dir.to_path_buf(),
        reason: format!(
            "it has no CURRENT file but holds {} of lamina's files with data ({}{})",
            with_data.len(),
            with_data[..shown].join(", "),
            if with_data.len() > shown { ", ..." } else { "" }
        ),
    })
}
