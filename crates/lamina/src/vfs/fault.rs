//! A fault-injecting filesystem wrapper.
//!
//! [`FaultFs`] wraps any [`Vfs`] and lets a test make a chosen operation fail
//! with an I/O error (`EIO`), or make appends fail with a full disk
//! (`ENOSPC`), so that the engine's error paths are exercised deterministically.
//! Clones share the same counters and settings: a test keeps one handle while
//! the engine owns another.
//!
//! # Counting
//!
//! Every operation routed through the wrapper (including those on the files it
//! returns) gets counted under an [`OpKind`]. Counters run from the creation of
//! the `FaultFs` and are never reset; [`FaultFs::ops`] reads the total, so "fail
//! the third operation from now" is `fs.fail_once_at(fs.ops() + 2)`.
//! [`Vfs::exists`] and the length getters are not counted (they cannot fail).
//!
//! An operation's *index* is the number of earlier operations that match the
//! kind filter ([`FaultFs::fail_kinds`]; no filter matches every kind). With a
//! filter of `[OpKind::Sync]`, index 2 is the third sync since creation, so
//! "fail the next sync" is `fs.fail_once_at(fs.ops_matching())`. Operations of
//! other kinds never fail while a filter is set.
//!
//! # What a failure does
//!
//! An injected failure is reported *instead of* performing the operation: the
//! wrapped filesystem never sees it (a failed append appends nothing, a failed
//! rename renames nothing, a failed sync makes nothing durable). A failing
//! operation is still counted.
//!
//! # Disk space
//!
//! [`FaultFs::set_space_budget`] limits the total bytes appended through this
//! wrapper since its creation. An append that would take the total past the
//! budget fails whole with `ENOSPC` and is not counted against the budget; it
//! keeps failing until the budget is raised or cleared. Removing or truncating
//! files does not give space back.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{DirLock, RandomAccessFile, Vfs, WritableFile};
use crate::error::{Error, Result};

/// The kinds of operation [`FaultFs`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// [`Vfs::create`].
    Create,
    /// [`Vfs::open_append`].
    OpenAppend,
    /// [`Vfs::open_read`].
    OpenRead,
    /// [`RandomAccessFile::read_exact_at`].
    Read,
    /// [`WritableFile::append`] and [`WritableFile::flush`].
    Write,
    /// [`WritableFile::sync`].
    Sync,
    /// [`Vfs::sync_dir`].
    SyncDir,
    /// [`Vfs::rename`].
    Rename,
    /// [`Vfs::hard_link`].
    Link,
    /// [`Vfs::remove`].
    Remove,
    /// [`Vfs::truncate`].
    Truncate,
    /// [`Vfs::list`].
    List,
    /// [`Vfs::create_dir_all`].
    Mkdir,
    /// [`Vfs::lock`].
    Lock,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 14] = [
        OpKind::Create,
        OpKind::OpenAppend,
        OpKind::OpenRead,
        OpKind::Read,
        OpKind::Write,
        OpKind::Sync,
        OpKind::SyncDir,
        OpKind::Rename,
        OpKind::Link,
        OpKind::Remove,
        OpKind::Truncate,
        OpKind::List,
        OpKind::Mkdir,
        OpKind::Lock,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

const KINDS: usize = OpKind::ALL.len();

/// Which operation indices fail.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    /// Only this index.
    Once(u64),
    /// This index and every later one.
    From(u64),
}

#[derive(Debug, Default)]
struct Control {
    total: u64,
    per_kind: [u64; KINDS],
    /// `None`: every kind matches.
    filter: Option<[bool; KINDS]>,
    trigger: Option<Trigger>,
    budget: Option<u64>,
    appended: u64,
    injected: u64,
}

impl Control {
    fn matches(&self, kind: OpKind) -> bool {
        match &self.filter {
            None => true,
            Some(f) => f.get(kind.index()).copied().unwrap_or(false),
        }
    }

    /// Number of operations so far that match the filter.
    fn matching(&self) -> u64 {
        match &self.filter {
            None => self.total,
            Some(f) => self
                .per_kind
                .iter()
                .zip(f)
                .filter(|(_, on)| **on)
                .map(|(n, _)| *n)
                .sum(),
        }
    }

    /// Counts one operation and decides whether it fails.
    fn count(&mut self, kind: OpKind) -> bool {
        let index = self.matching();
        let matches = self.matches(kind);
        self.total += 1;
        if let Some(n) = self.per_kind.get_mut(kind.index()) {
            *n += 1;
        }
        let fail = matches
            && match self.trigger {
                None => false,
                Some(Trigger::Once(n)) => index == n,
                Some(Trigger::From(n)) => index >= n,
            };
        if fail {
            self.injected += 1;
        }
        fail
    }
}

type Shared = Arc<Mutex<Control>>;

fn injected(op: &'static str, path: &Path) -> Error {
    Error::io(
        op,
        path,
        io::Error::from_raw_os_error(rustix::io::Errno::IO.raw_os_error()),
    )
}

/// Counts an operation, failing it with `EIO` if the trigger says so.
fn check(shared: &Shared, kind: OpKind, op: &'static str, path: &Path) -> Result<()> {
    if shared.lock().count(kind) {
        Err(injected(op, path))
    } else {
        Ok(())
    }
}

/// A [`Vfs`] wrapper that injects I/O errors and out-of-space conditions.
#[derive(Debug, Clone)]
pub struct FaultFs {
    inner: Arc<dyn Vfs>,
    shared: Shared,
}

impl FaultFs {
    /// Wraps `inner`, initially passing every operation through.
    pub fn new(inner: Arc<dyn Vfs>) -> Self {
        FaultFs {
            inner,
            shared: Shared::default(),
        }
    }

    /// The wrapped filesystem (operations on it bypass the fault injection).
    pub fn inner(&self) -> &Arc<dyn Vfs> {
        &self.inner
    }

    /// Operations of every kind counted since creation.
    pub fn ops(&self) -> u64 {
        self.shared.lock().total
    }

    /// Operations of one kind counted since creation.
    pub fn ops_of(&self, kind: OpKind) -> u64 {
        self.shared
            .lock()
            .per_kind
            .get(kind.index())
            .copied()
            .unwrap_or(0)
    }

    /// Operations since creation matching the current kind filter: the index
    /// the next matching operation will get.
    pub fn ops_matching(&self) -> u64 {
        self.shared.lock().matching()
    }

    /// Same as [`FaultFs::fail_once_at`].
    pub fn fail_at(&self, n: u64) {
        self.fail_once_at(n);
    }

    /// Makes the matching operation with index `n` (0-based, counted since
    /// creation) fail with `EIO`; later ones succeed. Replaces any earlier
    /// trigger.
    pub fn fail_once_at(&self, n: u64) {
        self.shared.lock().trigger = Some(Trigger::Once(n));
    }

    /// Makes every matching operation with index `n` or more fail with `EIO`.
    /// Replaces any earlier trigger.
    pub fn fail_from(&self, n: u64) {
        self.shared.lock().trigger = Some(Trigger::From(n));
    }

    /// Restricts indexing and failures to these kinds (an empty slice
    /// removes the restriction).
    pub fn fail_kinds(&self, kinds: &[OpKind]) {
        let filter = if kinds.is_empty() {
            None
        } else {
            let mut mask = [false; KINDS];
            for kind in kinds {
                if let Some(on) = mask.get_mut(kind.index()) {
                    *on = true;
                }
            }
            Some(mask)
        };
        self.shared.lock().filter = filter;
    }

    /// Back to plain pass-through: removes the trigger, the kind filter and
    /// the space budget. Counters keep running.
    pub fn clear(&self) {
        let mut c = self.shared.lock();
        c.trigger = None;
        c.filter = None;
        c.budget = None;
    }

    /// How many failures have been injected (EIO only, not ENOSPC).
    pub fn injected(&self) -> u64 {
        self.shared.lock().injected
    }

    /// Limits the total bytes appended through this wrapper (see the module
    /// docs); `None` removes the limit.
    pub fn set_space_budget(&self, bytes: Option<u64>) {
        self.shared.lock().budget = bytes;
    }

    /// Bytes successfully accepted by appends since creation.
    pub fn bytes_appended(&self) -> u64 {
        self.shared.lock().appended
    }

    fn check(&self, kind: OpKind, op: &'static str, path: &Path) -> Result<()> {
        check(&self.shared, kind, op, path)
    }
}

#[derive(Debug)]
struct FaultWritable {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    shared: Shared,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        {
            let mut c = self.shared.lock();
            if c.count(OpKind::Write) {
                return Err(injected("append", &self.path));
            }
            let len = data.len() as u64;
            let total = c.appended.saturating_add(len);
            if c.budget.is_some_and(|b| total > b) {
                return Err(Error::io(
                    "append",
                    &self.path,
                    io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error()),
                ));
            }
            c.appended = total;
        }
        self.inner.append(data)
    }

    fn flush(&mut self) -> Result<()> {
        check(&self.shared, OpKind::Write, "flush", &self.path)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        check(&self.shared, OpKind::Sync, "sync", &self.path)?;
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

#[derive(Debug)]
struct FaultReadable {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    shared: Shared,
}

impl RandomAccessFile for FaultReadable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check(&self.shared, OpKind::Read, "read", &self.path)?;
        self.inner.read_exact_at(buf, offset)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Vfs for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OpKind::Create, "create", path)?;
        let inner = self.inner.create(path)?;
        Ok(Box::new(FaultWritable {
            inner,
            path: path.to_path_buf(),
            shared: Arc::clone(&self.shared),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OpKind::OpenAppend, "open", path)?;
        let inner = self.inner.open_append(path)?;
        Ok(Box::new(FaultWritable {
            inner,
            path: path.to_path_buf(),
            shared: Arc::clone(&self.shared),
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.check(OpKind::OpenRead, "open", path)?;
        let inner = self.inner.open_read(path)?;
        Ok(Arc::new(FaultReadable {
            inner,
            path: path.to_path_buf(),
            shared: Arc::clone(&self.shared),
        }))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.check(OpKind::Remove, "remove", path)?;
        self.inner.remove(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(OpKind::Rename, "rename", from)?;
        self.inner.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(OpKind::Link, "link", to)?;
        self.inner.hard_link(from, to)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.check(OpKind::Truncate, "truncate", path)?;
        self.inner.truncate(path, len)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.check(OpKind::List, "readdir", dir)?;
        self.inner.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.check(OpKind::Mkdir, "mkdir", dir)?;
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.check(OpKind::SyncDir, "fsync", dir)?;
        self.inner.sync_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        self.check(OpKind::Lock, "lock", path)?;
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::mem::MemFs;

    fn setup() -> (FaultFs, MemFs) {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.create_dir_all(Path::new("/db")).unwrap();
        (fs, mem)
    }

    fn is_eio(err: &Error) -> bool {
        matches!(err, Error::Io { source, .. } if source.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()))
    }

    #[test]
    fn fail_at_hits_exactly_the_nth_op() {
        let (fs, mem) = setup();
        assert_eq!(fs.ops(), 1);
        let path = Path::new("/db/f");
        // ops: create(1) append(2) append(3) sync(4) sync_dir(5)
        fs.fail_at(3);
        let mut f = fs.create(path).unwrap();
        f.append(b"a").unwrap();
        let err = f.append(b"b").unwrap_err();
        assert!(is_eio(&err), "{err:?}");
        assert_eq!(
            mem.read_all(path).unwrap(),
            b"a",
            "failed append appended nothing"
        );
        f.sync().unwrap();
        fs.sync_dir(Path::new("/db")).unwrap();
        assert_eq!(fs.ops(), 6);
        assert_eq!(fs.injected(), 1);
        assert_eq!(fs.ops_of(OpKind::Write), 2);

        // Reads go through the wrapper too.
        let r = fs.open_read(path).unwrap();
        fs.fail_once_at(fs.ops());
        let mut buf = [0u8; 1];
        assert!(is_eio(&r.read_exact_at(&mut buf, 0).unwrap_err()));
        r.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"a");
    }

    #[test]
    fn fail_from_is_sticky_and_clear_restores() {
        let (fs, mem) = setup();
        fs.fail_from(fs.ops() + 1);
        fs.create(Path::new("/db/a")).unwrap();
        for _ in 0..3 {
            assert!(is_eio(
                &fs.rename(Path::new("/db/a"), Path::new("/db/b"))
                    .unwrap_err()
            ));
        }
        assert!(mem.exists(Path::new("/db/a")), "failed rename did nothing");
        assert!(fs.list(Path::new("/db")).is_err());
        fs.clear();
        fs.rename(Path::new("/db/a"), Path::new("/db/b")).unwrap();
        assert_eq!(fs.list(Path::new("/db")).unwrap(), vec!["b"]);
        assert_eq!(fs.injected(), 4);
    }

    #[test]
    fn kind_filter_fails_the_third_sync() {
        let (fs, _mem) = setup();
        fs.fail_kinds(&[OpKind::Sync]);
        assert_eq!(fs.ops_matching(), 0);
        fs.fail_at(2);
        let mut f = fs.create(Path::new("/db/f")).unwrap();
        f.append(b"x").unwrap();
        f.sync().unwrap();
        f.append(b"y").unwrap();
        f.sync().unwrap();
        fs.sync_dir(Path::new("/db")).unwrap();
        assert!(is_eio(&f.sync().unwrap_err()));
        f.sync().unwrap();
        assert_eq!(fs.ops_of(OpKind::Sync), 4);
        assert_eq!(fs.ops_matching(), 4);

        // Other kinds never fail while a filter is set.
        fs.fail_from(0);
        f.append(b"z").unwrap();
        fs.sync_dir(Path::new("/db")).unwrap();
        assert!(f.sync().is_err());
    }

    #[test]
    fn space_budget_gives_enospc() {
        let (fs, mem) = setup();
        let path = Path::new("/db/f");
        let mut f = fs.create(path).unwrap();
        fs.set_space_budget(Some(10));
        f.append(b"123456").unwrap();
        let err = f.append(b"78901").unwrap_err();
        assert!(err.is_no_space(), "{err:?}");
        assert!(f.append(b"78901").unwrap_err().is_no_space());
        assert_eq!(mem.read_all(path).unwrap(), b"123456", "rejected whole");
        f.append(b"7890").unwrap();
        assert!(f.append(b"x").unwrap_err().is_no_space());
        assert_eq!(fs.bytes_appended(), 10);
        // Removing files gives nothing back.
        fs.remove(path).unwrap();
        let mut g = fs.create(Path::new("/db/g")).unwrap();
        assert!(g.append(b"x").unwrap_err().is_no_space());
        fs.set_space_budget(Some(11));
        g.append(b"x").unwrap();
        fs.set_space_budget(Some(11));
        assert!(g.append(b"y").unwrap_err().is_no_space());
        fs.clear();
        g.append(b"y").unwrap();
        assert_eq!(mem.read_all(Path::new("/db/g")).unwrap(), b"xy");
        assert_eq!(fs.injected(), 0);
    }

    #[test]
    fn clones_share_state() {
        let (fs, _mem) = setup();
        let engine_side: Arc<dyn Vfs> = Arc::new(fs.clone());
        fs.fail_at(fs.ops());
        assert!(is_eio(&engine_side.sync_dir(Path::new("/db")).unwrap_err()));
        assert_eq!(fs.injected(), 1);
        engine_side.sync_dir(Path::new("/db")).unwrap();
    }
}
