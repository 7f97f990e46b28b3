//! A file system that adds a fixed latency to every read, to emulate a
//! slower device on a fast one (seed 002's experiments ran on a hard disk,
//! where a block-cache miss costs a seek). Reads that hit the engine's block
//! cache never reach the file system, so the latency is paid exactly by the
//! misses (and by compaction reads, as on the real device). Writes, syncs
//! and metadata operations pass through unchanged.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{DirLock, RandomAccessFile, Vfs, WritableFile};
use crate::error::Result;

/// Wraps a [`Vfs`], sleeping `latency` before every read.
#[derive(Debug)]
pub struct SlowReads {
    inner: Arc<dyn Vfs>,
    latency: Duration,
}

impl SlowReads {
    /// `inner` with `latency` added to every read (at least that long: the
    /// OS sleeps in its own granularity).
    pub fn new(inner: Arc<dyn Vfs>, latency: Duration) -> Self {
        SlowReads { inner, latency }
    }
}

#[derive(Debug)]
struct SlowFile {
    inner: Arc<dyn RandomAccessFile>,
    latency: Duration,
}

impl RandomAccessFile for SlowFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        std::thread::sleep(self.latency);
        self.inner.read_exact_at(buf, offset)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Vfs for SlowReads {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.open_append(path)
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(SlowFile {
            inner: self.inner.open_read(path)?,
            latency: self.latency,
        }))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.inner.truncate(path, len)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::mem::MemFs;
    use std::time::Instant;

    #[test]
    fn reads_wait_and_return_the_same_bytes() {
        let mem = Arc::new(MemFs::new());
        let path = Path::new("/f");
        let mut f = mem.create(path).unwrap();
        f.append(b"hello world").unwrap();
        f.sync().unwrap();
        let slow = SlowReads::new(mem, Duration::from_millis(2));
        let file = slow.open_read(path).unwrap();
        let start = Instant::now();
        let mut buf = [0u8; 5];
        for _ in 0..5 {
            file.read_exact_at(&mut buf, 6).unwrap();
        }
        assert_eq!(&buf, b"world");
        assert!(start.elapsed() >= Duration::from_millis(10));
        // Everything else passes through.
        assert!(slow.exists(path));
        assert_eq!(slow.read_all(path).unwrap(), b"hello world");
    }
}
