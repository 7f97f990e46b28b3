//! The filesystem abstraction through which the engine does all file I/O.
//!
//! [`Vfs`] is implemented by [`OsFs`] (the real filesystem), by an in-memory
//! filesystem that can produce crash clones, and by a fault injector that
//! wraps another `Vfs` (see the submodules). Tests use the latter two to
//! simulate power loss, torn writes, I/O errors and a full disk; [`SlowReads`]
//! adds a latency to every read (an emulated slower device for benchmarks),
//! and [`DirectReads`] reads past the OS page cache (`O_DIRECT`). [`OsFs`]
//! can also map a file read-only ([`RandomAccessFile::map`], [`Mapping`]).
//!
//! Durability vocabulary used across the engine:
//! * [`WritableFile::flush`] hands buffered bytes to the OS (`write()`): they
//!   survive a process crash but not a power loss.
//! * [`WritableFile::sync`] additionally calls `fdatasync`: the bytes survive a
//!   power loss.
//! * [`Vfs::sync_dir`] makes creations, renames and removals in a directory
//!   durable.
//! * [`sync_all`] syncs several files at once, as a flush or merge does with
//!   its output files before the version edit that references them.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;

pub mod fault;
pub mod mem;
mod slow;
pub use slow::SlowReads;
mod os;
pub use os::OsFs;
mod direct;
pub use direct::DirectReads;
mod mmap;
pub(crate) use mmap::BlockBytes;
pub use mmap::Mapping;

/// A file opened for appending.
pub trait WritableFile: Send + Sync + Debug {
    /// Appends bytes (possibly buffered in user space).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands every appended byte to the OS (`write()`).
    fn flush(&mut self) -> Result<()>;
    /// Flushes, then makes every appended byte durable (`fdatasync`).
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// True if nothing has been appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file opened for positional reads.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Reads exactly `buf.len()` bytes at `offset`; reading past the end is an
    /// error (`UnexpectedEof`).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// The file's length in bytes.
    fn len(&self) -> u64;
    /// True if the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The whole file mapped read-only, for a reader that takes slices of
    /// it instead of copying with `read_exact_at`. `Ok(None)`, the default,
    /// means the file system does not map files: [`OsFs`] maps; the test,
    /// fault-injecting, slow and direct-I/O file systems do not, so every
    /// read of theirs goes through `read_exact_at` (where faults are
    /// injected). The engine maps only immutable files (SSTs, with
    /// [`crate::Options::mmap_reads`]); see [`Mapping`] for why.
    fn map(&self) -> Result<Option<Arc<Mapping>>> {
        Ok(None)
    }
}

/// An exclusive lock on a database directory, released on drop.
pub trait DirLock: Send + Sync + Debug {}

/// Every file-system operation the engine performs.
pub trait Vfs: Send + Sync + Debug + 'static {
    /// Creates (or truncates) a file for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for positional reads.
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Renames the file `from` (one no longer needed) to the absent `to`
    /// and opens it for appending from its start, as [`Vfs::create`]
    /// would: what is written replaces the old bytes, and whatever old
    /// bytes lie beyond the written length are cut off at the file's
    /// [`WritableFile::flush`] or [`WritableFile::sync`]. Before it is
    /// synced, the file's content after a crash is undefined. The default
    /// renames and then creates (truncates); the real file system
    /// overwrites the file's blocks in place instead, which spares the
    /// allocation and freeing of an inode and of its blocks
    /// ([`crate::Options::recycle_table_files`]).
    fn reuse(&self, from: &Path, to: &Path) -> Result<Box<dyn WritableFile>> {
        self.rename(from, to)?;
        self.create(to)
    }
    /// Makes `to` a second name of the file `from` (a hard link); fails if
    /// `to` exists or the two are on different file systems. Like a
    /// creation, the new name is durable once its directory is synced.
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()>;
    /// Truncates a file to `len` bytes and makes the new length durable.
    fn truncate(&self, path: &Path, len: u64) -> Result<()>;
    /// Names (not paths) of the entries of a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates a directory and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// True if the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive lock, failing at once with `Error::Locked` if held.
    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>>;

    /// Reads a whole file into memory.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let file = self.open_read(path)?;
        let len = usize::try_from(file.len()).map_err(|_| {
            crate::Error::InvalidArgument(format!("{} is too large", path.display()))
        })?;
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }
}

/// Threads [`sync_all`] syncs from. One `fdatasync` waits for the device
/// to acknowledge its writes; several in flight share those waits. Syncing
/// 300 freshly written 512 KiB files on the development machine's virtual
/// disk (ext4): 3.4 ms a file one after the other, 0.5–0.6 ms from 8
/// threads, no better from 16 or 32 (`experiments/partitioned-merges`).
pub const SYNC_THREADS: usize = 8;

/// Makes every file of `files` durable, each by its own
/// [`WritableFile::sync`], from up to [`SYNC_THREADS`] threads at once.
/// Every file is synced even if another's sync fails; the first error is
/// returned. A file is durable only once this returns `Ok`.
pub fn sync_all(files: &mut [Box<dyn WritableFile>]) -> Result<()> {
    if files.len() <= 1 {
        return files.iter_mut().try_for_each(|f| f.sync());
    }
    let per_thread = files.len().div_ceil(SYNC_THREADS);
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks_mut(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    // Every file is synced; the first error is kept.
                    let mut first = Ok(());
                    for f in chunk.iter_mut() {
                        let synced = f.sync();
                        if first.is_ok() {
                            first = synced;
                        }
                    }
                    first
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.into_iter().collect()
}

/// Joins a directory and a file name.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
