//! `Db::checkpoint`: a consistent, openable copy of a live database.
//!
//! SSTs never change once written, so the copy shares them with the source
//! by hard links (copied only when the target is on another file system);
//! only a fresh manifest describing the tree is written. The memtable is
//! flushed first, so the copy holds every write acknowledged before the
//! call and no WAL is needed.
//!
//! Order of durability: the links (or copies) and the directory entries
//! first, then the manifest, then `CURRENT` (`Manifest::create`). A crash
//! before `CURRENT` leaves a directory that `Db::open` refuses as holding
//! data without `CURRENT` (nothing is started empty); the caller deletes it
//! and takes the checkpoint again.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use super::Db;
use crate::error::{Error, Result};
use crate::filename::{self, manifest_name, sst_name, FileKind};
use crate::manifest::{Counters, Manifest};
use crate::vfs::Vfs;

/// What [`Db::checkpoint`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// The copy holds exactly the writes with sequence numbers up to this
    /// one: every write acknowledged before the call, and possibly some
    /// that raced with it (always a prefix of the write order).
    pub sequence: u64,
    /// SSTs in the copy.
    pub files: usize,
    /// Of those, the ones copied because a hard link was impossible.
    pub copied: usize,
    /// Bytes of the SSTs (shared with the source when linked).
    pub bytes: u64,
    /// The copy's manifest file name.
    pub manifest: String,
}

impl Db {
    /// Writes an openable copy of the database, as of now, to the new
    /// directory `dir` (which must not exist or must be empty): SSTs are
    /// hard-linked (copied across file systems), the newest `OPTIONS` file
    /// copied, and a fresh manifest describes them. Writes may continue meanwhile; the copy holds every
    /// write acknowledged before the call. Open it with the options of the
    /// source database (a spatial comparator in particular).
    ///
    /// ```
    /// # fn main() -> lamina::Result<()> {
    /// # let tmp = tempfile::tempdir().map_err(|e| lamina::Error::io("tempdir", "", e))?;
    /// let db = lamina::Db::open(tmp.path().join("db"), lamina::Options::default())?;
    /// db.put(b"k", b"v")?;
    /// db.checkpoint(tmp.path().join("copy"))?;
    /// drop(db);
    /// let copy = lamina::Db::open(tmp.path().join("copy"), lamina::Options::default())?;
    /// assert_eq!(copy.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointReport> {
        let target = dir.as_ref();
        let inner = &self.inner;
        if inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        let vfs = inner.vfs.as_ref();
        if vfs.exists(target) && !vfs.list(target)?.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} is not empty; give a new path",
                target.display()
            )));
        }
        inner.flush_and_wait()?;
        // The tree and its counters at one instant; holding the version pins
        // its files against deletion while they are linked.
        let (version, counters) = {
            let st = inner.state.lock();
            (Arc::clone(&st.version), st.counters)
        };
        vfs.create_dir_all(target)?;
        let mut report = CheckpointReport {
            sequence: counters.last_seq,
            files: 0,
            copied: 0,
            bytes: 0,
            manifest: String::new(),
        };
        for file in version.live_files() {
            let from = inner.table_cache.path(file.id);
            let to = target.join(sst_name(file.id));
            if link_or_copy(vfs, &from, &to)? {
                report.copied += 1;
            }
            report.files += 1;
            report.bytes += file.size;
        }
        // The options the source was opened with: the copy's first open
        // can reload them (`OptionsBuilder::from_stored_options`), and its
        // spatial comparator check applies to the copy too. This open's
        // file was numbered before the tree's counters, so the copy can
        // tell it is its own.
        let newest_options = vfs
            .list(&inner.dir)?
            .into_iter()
            .filter_map(|name| match filename::parse(&name) {
                Some((FileKind::Options, n)) => Some((n, name)),
                _ => None,
            })
            .max();
        if let Some((_, name)) = newest_options {
            copy(vfs, &inner.dir.join(&name), &target.join(&name))?;
        }
        vfs.sync_dir(target)?;
        // Numbers above every file of the tree: the copy's manifest, and the
        // copy's own new files from there on. No WAL belongs to the copy.
        let number = counters.next_file_number;
        let copy_counters = Counters {
            log_number: number + 1,
            next_file_number: number + 1,
            last_seq: counters.last_seq,
        };
        Manifest::create(vfs, target, number, &version, copy_counters)?;
        report.manifest = manifest_name(number);
        inner.info_log.log(
            "checkpoint",
            format_args!(
                "{}: {} files ({} copied), {} bytes, sequence {}",
                target.display(),
                report.files,
                report.copied,
                report.bytes,
                report.sequence
            ),
        );
        Ok(report)
    }
}

/// Links `to` to `from`; copies it when the two are on different file
/// systems. True if it copied.
fn link_or_copy(vfs: &dyn Vfs, from: &Path, to: &Path) -> Result<bool> {
    match vfs.hard_link(from, to) {
        Ok(()) => Ok(false),
        Err(Error::Io { source, .. }) if source.kind() == ErrorKind::CrossesDevices => {
            copy(vfs, from, to)?;
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// Copies an immutable file in bounded chunks and syncs the copy.
fn copy(vfs: &dyn Vfs, from: &Path, to: &Path) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let src = vfs.open_read(from)?;
    let mut dst = vfs.create(to)?;
    let mut buf = Vec::new();
    let mut offset = 0;
    while offset < src.len() {
        let n = CHUNK.min(src.len() - offset);
        buf.resize(n as usize, 0);
        src.read_exact_at(&mut buf, offset)?;
        dst.append(&buf)?;
        offset += n;
    }
    dst.sync()
}
