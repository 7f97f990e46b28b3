//! The real filesystem.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{DirLock, Mapping, RandomAccessFile, Vfs, WritableFile};
use crate::error::{Error, Result};

/// User-space buffer size of a [`WritableFile`] on the real filesystem.
const WRITE_BUFFER: usize = 256 * 1024;

/// The operating system's filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

#[derive(Debug)]
struct OsWritable {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    len: u64,
}

impl OsWritable {
    fn write_out(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| Error::io("write", &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl WritableFile for OsWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.write_out()?;
        }
        if data.len() > WRITE_BUFFER {
            self.file
                .write_all(data)
                .map_err(|e| Error::io("write", &self.path, e))?;
        } else {
            self.buf.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_out()
    }

    fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug)]
struct OsReadable {
    file: File,
    path: PathBuf,
    len: u64,
}

impl RandomAccessFile for OsReadable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("read", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn map(&self) -> Result<Option<Arc<Mapping>>> {
        Ok(Mapping::new(&self.file, self.len)
            .map_err(|e| Error::io("mmap", &self.path, e))?
            .map(Arc::new))
    }
}

/// Opens `path` with `options` and reads its length (`op` names the open
/// in errors).
pub(super) fn open_sized(
    options: &OpenOptions,
    path: &Path,
    op: &'static str,
) -> Result<(File, u64)> {
    let file = options.open(path).map_err(|e| Error::io(op, path, e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    Ok((file, len))
}

/// The `LOCK` files (device and inode) this process holds, so that a
/// refused lock can say whether this process or another one holds it: an
/// `flock` held through another descriptor of this process refuses a
/// second one just as another process's does.
static HELD: parking_lot::Mutex<Vec<(u64, u64)>> = parking_lot::Mutex::new(Vec::new());

#[derive(Debug)]
struct OsLock {
    /// Holds the `flock`.
    file: File,
    /// The file's entry in [`HELD`].
    id: (u64, u64),
}

impl DirLock for OsLock {}

impl Drop for OsLock {
    fn drop(&mut self) {
        // Released under `HELD`'s mutex (closing the file would release
        // it too, but after this body, outside the mutex).
        let mut held = HELD.lock();
        if let Err(e) = self.file.unlock() {
            tracing::warn!(target: "lamina", "unlocking a LOCK file failed: {e}; closing it releases the lock");
        }
        if let Some(i) = held.iter().position(|id| *id == self.id) {
            held.swap_remove(i);
        }
    }
}

impl Vfs for OsFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(OsWritable {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(WRITE_BUFFER),
            len: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        Ok(Box::new(OsWritable {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(WRITE_BUFFER),
            len,
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let (file, len) = open_sized(OpenOptions::new().read(true), path, "open")?;
        Ok(Arc::new(OsReadable {
            file,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(|e| Error::io("remove", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        fs::hard_link(from, to).map_err(|e| Error::io("link", to, e))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        file.set_len(len)
            .map_err(|e| Error::io("truncate", path, e))?;
        file.sync_all().map_err(|e| Error::io("fsync", path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| Error::io("readdir", dir, e))? {
            let entry = entry.map_err(|e| Error::io("readdir", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let d = File::open(dir).map_err(|e| Error::io("open", dir, e))?;
        d.sync_all().map_err(|e| Error::io("fsync", dir, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
        let id = (meta.dev(), meta.ino());
        // Under `HELD`'s mutex, so that a lock being taken or released by
        // another thread of this process is never mistaken for another
        // process's.
        let mut held = HELD.lock();
        match file.try_lock() {
            Ok(()) => {
                held.push(id);
                Ok(Box::new(OsLock { file, id }))
            }
            Err(fs::TryLockError::WouldBlock) => {
                let dir = path.parent().unwrap_or(path).to_path_buf();
                Err(if held.contains(&id) {
                    Error::LockedInProcess(dir)
                } else {
                    Error::Locked(dir)
                })
            }
            Err(fs::TryLockError::Error(e)) => Err(Error::io("lock", path, e)),
        }
    }
}
