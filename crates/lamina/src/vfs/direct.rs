//! The real filesystem with reads that bypass the OS page cache
//! (`O_DIRECT`, RocksDB's `use_direct_reads`). On a machine whose memory
//! holds the whole database, the page cache would serve every block-cache
//! miss from memory, and a benchmark of the block cache (seed 002) would
//! measure the page cache instead. Writes, syncs and metadata operations are
//! [`OsFs`]'s.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::os::open_sized;
use super::{DirLock, OsFs, RandomAccessFile, Vfs, WritableFile};
use crate::error::{Error, Result};

/// `O_DIRECT` needs offsets, lengths and buffers aligned to the device's
/// logical block size; 4 KiB covers the common ones.
const ALIGN: usize = 4096;

/// [`OsFs`] with `O_DIRECT` reads. Opening a file fails (`EINVAL`) on a
/// filesystem without direct I/O, such as tmpfs.
#[derive(Debug, Default, Clone, Copy)]
pub struct DirectReads;

#[derive(Debug)]
struct DirectFile {
    file: File,
    path: PathBuf,
    len: u64,
}

impl DirectFile {
    fn eof(&self) -> Error {
        Error::io(
            "read",
            &self.path,
            io::Error::from(io::ErrorKind::UnexpectedEof),
        )
    }
}

impl RandomAccessFile for DirectFile {
    /// Reads the aligned span around `[offset, offset + buf.len())` into an
    /// aligned bounce buffer and copies the requested bytes out: one
    /// allocation per read, which a block read amortizes.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.len)
            .ok_or_else(|| self.eof())?;
        let align = ALIGN as u64;
        let start = offset - offset % align;
        let need = usize::try_from(end - start).map_err(|_| self.eof())?;
        let span = need.div_ceil(ALIGN) * ALIGN;
        let mut raw = vec![0u8; span + ALIGN];
        let shift = raw.as_ptr().align_offset(ALIGN);
        let aligned = raw.get_mut(shift..shift + span).ok_or_else(|| self.eof())?;
        let mut done = 0;
        while done < need {
            // Only the read that reaches the end of the file comes back
            // short, so `done` stays aligned until then.
            let rest = aligned.get_mut(done..).ok_or_else(|| self.eof())?;
            match self.file.read_at(rest, start + done as u64) {
                Ok(0) => return Err(self.eof()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", &self.path, e)),
            }
        }
        let from = (offset - start) as usize;
        let src = aligned
            .get(from..from + buf.len())
            .ok_or_else(|| self.eof())?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Vfs for DirectReads {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        OsFs.create(path)
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        OsFs.open_append(path)
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let (file, len) = open_sized(
            OpenOptions::new()
                .read(true)
                .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32),
            path,
            "open (O_DIRECT)",
        )?;
        Ok(Arc::new(DirectFile {
            file,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        OsFs.remove(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        OsFs.rename(from, to)
    }

    fn reuse(&self, from: &Path, to: &Path) -> Result<Box<dyn WritableFile>> {
        OsFs.reuse(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        OsFs.hard_link(from, to)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        OsFs.truncate(path, len)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        OsFs.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        OsFs.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        OsFs.sync_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        OsFs.exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        OsFs.lock(path)
    }
}
