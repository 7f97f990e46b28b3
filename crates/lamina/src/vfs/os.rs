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
    /// The length of the old content of a file opened by [`Vfs::reuse`]
    /// while it exceeds what has been written (0 otherwise): cut off at
    /// the next flush or sync.
    stale: u64,
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

    /// Writes the buffer out and cuts off a reused file's old bytes beyond
    /// what has been written.
    fn settle(&mut self) -> Result<()> {
        self.write_out()?;
        if self.stale > self.len {
            self.file
                .set_len(self.len)
                .map_err(|e| Error::io("truncate", &self.path, e))?;
        }
        self.stale = 0;
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
        self.settle()
    }

    fn sync(&mut self) -> Result<()> {
        self.settle()?;
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
            stale: 0,
        }))
    }

    /// Renames and overwrites in place: no `O_TRUNC`, which on ext4 frees
    /// the blocks (and, for a file cut to nothing, forces its new blocks
    /// out at close), and no new inode. 512 KiB files written and then
    /// synced 32 at a time on the development machine's ext4: 3.7–5.0 ms a
    /// file created (after an unlink), 0.8–0.9 ms reused
    /// (`experiments/partitioned-merges`). A file with another name (a
    /// checkpoint's hard link) shares its blocks with that name: it is
    /// deleted and `to` created anew instead.
    fn reuse(&self, from: &Path, to: &Path) -> Result<Box<dyn WritableFile>> {
        let links = fs::metadata(from)
            .map_err(|e| Error::io("stat", from, e))?
            .nlink();
        if links > 1 {
            self.remove(from)?;
            return self.create(to);
        }
        self.rename(from, to)?;
        let (file, stale) = open_sized(OpenOptions::new().write(true), to, "open")?;
        Ok(Box::new(OsWritable {
            file,
            path: to.to_path_buf(),
            buf: Vec::with_capacity(WRITE_BUFFER),
            len: 0,
            stale,
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
            stale: 0,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(file: &mut Box<dyn WritableFile>, bytes: &[u8]) {
        file.append(bytes).unwrap();
        file.sync().unwrap();
    }

    /// A reused file holds exactly what was written to it, shorter or
    /// longer than its old content, under its new name only, and keeps
    /// its inode (it was overwritten, not created).
    #[test]
    fn a_reused_file_holds_exactly_its_new_bytes_in_the_same_inode() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs;
        let path = |n: u32| dir.path().join(format!("{n}.sst"));
        let mut f = fs.create(&path(1)).unwrap();
        write(&mut f, &[b'a'; 10_000]);
        drop(f);
        let inode = fs::metadata(path(1)).unwrap().ino();
        // Shorter: the old tail is cut at the sync.
        let mut f = fs.reuse(&path(1), &path(2)).unwrap();
        write(&mut f, b"short");
        drop(f);
        assert!(!fs.exists(&path(1)));
        assert_eq!(fs.read_all(&path(2)).unwrap(), b"short");
        assert_eq!(fs::metadata(path(2)).unwrap().ino(), inode);
        // Longer, in pieces larger than the write buffer: the file grows.
        let long: Vec<u8> = (0..3 * WRITE_BUFFER + 7).map(|i| (i % 251) as u8).collect();
        let mut f = fs.reuse(&path(2), &path(3)).unwrap();
        f.append(&long[..WRITE_BUFFER + 1]).unwrap();
        f.append(&long[WRITE_BUFFER + 1..]).unwrap();
        assert_eq!(f.len(), long.len() as u64);
        f.flush().unwrap();
        drop(f);
        assert_eq!(fs.read_all(&path(3)).unwrap(), long);
        // Flushed without a sync, a shorter content is cut all the same.
        let mut f = fs.reuse(&path(3), &path(4)).unwrap();
        f.append(b"0123").unwrap();
        f.flush().unwrap();
        drop(f);
        assert_eq!(fs.read_all(&path(4)).unwrap(), b"0123");
        assert_eq!(fs::metadata(path(4)).unwrap().ino(), inode);
    }

    /// A file with a second name (a checkpoint's hard link) is never
    /// overwritten: the other name keeps its bytes.
    #[test]
    fn a_hard_linked_file_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs;
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        let mut f = fs.create(&a).unwrap();
        write(&mut f, b"checkpointed bytes");
        drop(f);
        fs.hard_link(&a, &b).unwrap();
        let mut f = fs.reuse(&a, &c).unwrap();
        write(&mut f, b"new");
        drop(f);
        assert!(!fs.exists(&a));
        assert_eq!(fs.read_all(&b).unwrap(), b"checkpointed bytes");
        assert_eq!(fs.read_all(&c).unwrap(), b"new");
        assert_ne!(
            fs::metadata(&b).unwrap().ino(),
            fs::metadata(&c).unwrap().ino()
        );
    }
}
