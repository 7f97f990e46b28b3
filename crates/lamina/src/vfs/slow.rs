//! A file system that adds a seek latency to reads, to emulate a hard disk
//! on a fast device (seed 002's experiments ran on one, where a block-cache
//! miss costs a seek). A read pays the latency unless it starts where the
//! previous read of the same open file ended: a compaction or a scan
//! reading a file front to back seeks once, a point lookup's block read
//! seeks every time. Reads that hit the engine's block cache never reach
//! the file system. Writes, syncs and metadata operations pass through
//! unchanged.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{DirLock, RandomAccessFile, Vfs, WritableFile};
use crate::error::Result;

/// Wraps a [`Vfs`], sleeping `latency` before every read that does not
/// continue the previous one.
#[derive(Debug)]
pub struct SlowReads {
    inner: Arc<dyn Vfs>,
    latency: Duration,
    seeks: Arc<AtomicU64>,
    enabled: Arc<AtomicBool>,
}

impl SlowReads {
    /// `inner` with `latency` added to every seeking read (at least that
    /// long: the OS sleeps in its own granularity).
    pub fn new(inner: Arc<dyn Vfs>, latency: Duration) -> Self {
        SlowReads {
            inner,
            latency,
            seeks: Arc::new(AtomicU64::new(0)),
            enabled: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Turns the latency on or off for every file, open or opened later
    /// (a benchmark loads its data at the device's speed, then reads on
    /// the emulated disk).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Reads that paid the latency so far.
    pub fn seeks(&self) -> u64 {
        self.seeks.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct SlowFile {
    inner: Arc<dyn RandomAccessFile>,
    latency: Duration,
    seeks: Arc<AtomicU64>,
    enabled: Arc<AtomicBool>,
    /// Where the last read ended (`u64::MAX`: none yet).
    head: AtomicU64,
}

impl RandomAccessFile for SlowFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        if self.head.swap(end, Ordering::Relaxed) != offset && self.enabled.load(Ordering::Relaxed)
        {
            self.seeks.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(self.latency);
        }
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
            seeks: Arc::clone(&self.seeks),
            enabled: Arc::clone(&self.enabled),
            head: AtomicU64::new(u64::MAX),
        }))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }

    fn reuse(&self, from: &Path, to: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.reuse(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.hard_link(from, to)
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
    fn seeking_reads_wait_and_sequential_ones_do_not() {
        let mem = Arc::new(MemFs::new());
        let path = Path::new("/f");
        let mut f = mem.create(path).unwrap();
        f.append(b"hello world").unwrap();
        f.sync().unwrap();
        let slow = SlowReads::new(mem, Duration::from_millis(2));
        let file = slow.open_read(path).unwrap();
        let start = Instant::now();
        let mut buf = [0u8; 5];
        // Rereading the same block seeks back every time.
        for _ in 0..5 {
            file.read_exact_at(&mut buf, 6).unwrap();
        }
        assert_eq!(&buf, b"world");
        assert_eq!(slow.seeks(), 5);
        assert!(start.elapsed() >= Duration::from_millis(10));
        // Reading on from where the last read ended does not seek.
        let mut head = [0u8; 6];
        file.read_exact_at(&mut head, 0).unwrap();
        file.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!((&head, &buf), (b"hello ", b"world"));
        assert_eq!(slow.seeks(), 6);
        // Turned off, even seeking reads of files already open pass.
        slow.set_enabled(false);
        file.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(slow.seeks(), 6);
        slow.set_enabled(true);
        file.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(slow.seeks(), 7);
        // Everything else passes through.
        assert!(slow.exists(path));
        assert_eq!(slow.read_all(path).unwrap(), b"hello world");
    }
}
