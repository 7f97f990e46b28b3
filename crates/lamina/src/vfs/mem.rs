//! An in-memory filesystem that can simulate a power loss.
//!
//! [`MemFs`] exists so that tests can ask "what would the disk contain if the
//! power went out *right now*?" without touching a real disk. It therefore
//! tracks, separately, what a process sees and what has been made durable.
//!
//! # Model
//!
//! * **Inodes.** A file's bytes live in an inode. The namespace maps a path to
//!   an inode; open handles keep their inode alive, so a removed or replaced
//!   file stays readable through handles opened before (as on POSIX).
//! * **File data.** Every inode has its current bytes and a durable length.
//!   [`WritableFile::append`] extends the current bytes; there is no OS layer
//!   here, so [`WritableFile::flush`] does nothing and flushed and unflushed
//!   bytes are equally *not durable*. [`WritableFile::sync`] makes the whole
//!   current content durable. [`Vfs::truncate`] changes the content and makes
//!   all of it durable (it mirrors `OsFs`, which calls `fsync`). Because only
//!   these operations exist, the durable bytes are always a prefix of the
//!   current bytes, and the not-yet-durable part is always a tail.
//! * **Namespace.** Creation, rename and removal change the visible namespace
//!   at once and are queued as pending namespace operations.
//!   [`Vfs::sync_dir`]`(d)` applies, in order, every pending operation that
//!   touches `d` (a rename touches the parents of both its paths) to the
//!   *durable namespace* and drops it from the queue.
//! * **`create` of an existing path** links a fresh empty inode under the name
//!   (like writing a new file and renaming it over the old one) rather than
//!   truncating the old inode in place: until the directory is synced a crash
//!   brings the old file back with its old durable content.
//! * **Directories** made by [`Vfs::create_dir_all`] are durable at once and
//!   cannot be removed (the `Vfs` has no `rmdir`). Creating a file in a
//!   missing directory fails with `NotFound`, as on a real filesystem.
//! * **Locks** live only in the `MemFs` (and its clones that share state);
//!   like `OsFs`, taking a lock creates the lock file if it is missing.
//!
//! # Crash clones
//!
//! [`MemFs::crash_clone`] builds an independent filesystem holding what the
//! disk could contain after a power loss at this instant:
//!
//! 1. Start from the durable namespace. Replay the pending namespace
//!    operations in their original order, keeping each one independently with
//!    probability `keep_unsynced`. A kept create links its name to its inode; a
//!    kept remove drops the name (whatever it maps to at that point of the
//!    replay); a kept rename drops the source name and links the destination
//!    name to the renamed inode. Dropping some operations and keeping later
//!    ones can yield states a strictly ordered journal would not produce; that
//!    is deliberate, it is the harsher test.
//! 2. Every inode reachable from the resulting namespace keeps its durable
//!    bytes, plus, with probability `keep_unsynced`, a uniformly random prefix
//!    (possibly empty, possibly whole) of its unsynced tail: a torn write.
//!    Names sharing an inode still share it in the clone.
//!
//! Randomness is drawn in a deterministic order (pending operations in order,
//! then files in path order), so a seeded RNG reproduces a crash.
//!
//! Pending namespace operations are kept until their directory is synced, so a
//! workload that never syncs a directory keeps removed files' bytes alive.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rand::Rng;

use super::{DirLock, RandomAccessFile, Vfs, WritableFile};
use crate::error::{Error, Result};

/// The bytes of one file.
#[derive(Default)]
struct Inode {
    /// What readers see now.
    data: Vec<u8>,
    /// How much of `data` would survive a power loss (always `<= data.len()`).
    durable_len: usize,
}

impl fmt::Debug for Inode {
    // The content can be megabytes: print only the sizes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inode")
            .field("len", &self.data.len())
            .field("durable_len", &self.durable_len)
            .finish()
    }
}

type InodeRef = Arc<RwLock<Inode>>;

/// A namespace change not yet made durable by `sync_dir`.
#[derive(Debug, Clone)]
enum NsOp {
    /// A file was created (linked) under `path`.
    Link { path: PathBuf, inode: InodeRef },
    /// `path` was removed.
    Unlink { path: PathBuf },
    /// `from` was renamed to `to`, replacing it.
    Rename {
        from: PathBuf,
        to: PathBuf,
        inode: InodeRef,
    },
}

impl NsOp {
    /// True if syncing `dir` makes this operation durable.
    fn touches(&self, dir: &Path) -> bool {
        match self {
            NsOp::Link { path, .. } | NsOp::Unlink { path } => parent(path) == dir,
            NsOp::Rename { from, to, .. } => parent(from) == dir || parent(to) == dir,
        }
    }

    /// Applies the operation to a namespace.
    fn apply(&self, ns: &mut BTreeMap<PathBuf, InodeRef>) {
        match self {
            NsOp::Link { path, inode } => {
                ns.insert(path.clone(), Arc::clone(inode));
            }
            NsOp::Unlink { path } => {
                ns.remove(path);
            }
            NsOp::Rename { from, to, inode } => {
                ns.remove(from);
                ns.insert(to.clone(), Arc::clone(inode));
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Directories (always durable).
    dirs: BTreeSet<PathBuf>,
    /// The namespace processes see.
    files: BTreeMap<PathBuf, InodeRef>,
    /// The namespace as of the last `sync_dir` of each directory.
    durable_files: BTreeMap<PathBuf, InodeRef>,
    /// Namespace changes not yet durable, oldest first.
    pending: Vec<NsOp>,
    /// Paths locked by a live [`DirLock`].
    locks: HashSet<PathBuf>,
}

impl State {
    fn dir_exists(&self, dir: &Path) -> bool {
        is_root(dir) || self.dirs.contains(dir)
    }

    /// Fails with `NotFound` unless the parent directory of `path` exists.
    fn check_parent(&self, op: &'static str, path: &Path) -> Result<()> {
        if self.dir_exists(parent(path)) {
            Ok(())
        } else {
            Err(os_error(op, path, rustix::io::Errno::NOENT.raw_os_error()))
        }
    }

    fn inode(&self, op: &'static str, path: &Path) -> Result<InodeRef> {
        match self.files.get(path) {
            Some(inode) => Ok(Arc::clone(inode)),
            None if self.dir_exists(path) => {
                Err(os_error(op, path, rustix::io::Errno::ISDIR.raw_os_error()))
            }
            None => Err(os_error(op, path, rustix::io::Errno::NOENT.raw_os_error())),
        }
    }

    /// Links a fresh empty inode under `path` (see the module docs on
    /// `create` of an existing path).
    fn link_new(&mut self, op: &'static str, path: &Path) -> Result<InodeRef> {
        self.check_parent(op, path)?;
        if self.dirs.contains(path) || is_root(path) {
            return Err(os_error(op, path, rustix::io::Errno::ISDIR.raw_os_error()));
        }
        let inode = InodeRef::default();
        self.files.insert(path.to_path_buf(), Arc::clone(&inode));
        self.pending.push(NsOp::Link {
            path: path.to_path_buf(),
            inode: Arc::clone(&inode),
        });
        Ok(inode)
    }
}

/// The parent directory of a path (`""` for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// The filesystem root or the current directory, which always exist.
fn is_root(dir: &Path) -> bool {
    dir.as_os_str().is_empty() || dir.parent().is_none()
}

fn os_error(op: &'static str, path: &Path, code: i32) -> Error {
    Error::io(op, path, io::Error::from_raw_os_error(code))
}

fn eof(path: &Path) -> Error {
    Error::io(
        "read",
        path,
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "read past the end of the file",
        ),
    )
}

/// Draws `true` with probability `p` without drawing when the answer is
/// certain, so `p == 0.0` never consumes randomness.
fn chance(rng: &mut impl Rng, p: f64) -> bool {
    if p <= 0.0 {
        false
    } else if p >= 1.0 {
        true
    } else {
        rng.gen_bool(p)
    }
}

/// An in-memory filesystem with explicit durability; clones share state.
#[derive(Debug, Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

impl MemFs {
    /// An empty filesystem (only the root exists).
    pub fn new() -> Self {
        Self::default()
    }

    /// The disk after a power loss at this instant: a new, independent
    /// filesystem (see the module docs for exactly what survives).
    /// `keep_unsynced` is clamped to `[0, 1]`; NaN counts as 0. Locks are not
    /// carried over.
    pub fn crash_clone(&self, rng: &mut impl Rng, keep_unsynced: f64) -> MemFs {
        let p = if keep_unsynced.is_nan() {
            0.0
        } else {
            keep_unsynced.clamp(0.0, 1.0)
        };
        let st = self.state.lock();
        let mut ns = st.durable_files.clone();
        for op in &st.pending {
            if chance(rng, p) {
                op.apply(&mut ns);
            }
        }
        let mut copies: HashMap<*const RwLock<Inode>, InodeRef> = HashMap::new();
        let mut files = BTreeMap::new();
        for (path, inode) in ns {
            let copy = copies
                .entry(Arc::as_ptr(&inode))
                .or_insert_with(|| {
                    let old = inode.read();
                    let mut len = old.durable_len.min(old.data.len());
                    let tail = old.data.len() - len;
                    if tail > 0 && chance(rng, p) {
                        len += rng.gen_range(0..=tail);
                    }
                    let data = old.data.get(..len).unwrap_or_default().to_vec();
                    Arc::new(RwLock::new(Inode {
                        data,
                        durable_len: len,
                    }))
                })
                .clone();
            files.insert(path, copy);
        }
        MemFs {
            state: Arc::new(Mutex::new(State {
                dirs: st.dirs.clone(),
                durable_files: files.clone(),
                files,
                pending: Vec::new(),
                locks: HashSet::new(),
            })),
        }
    }

    /// Names of the files (not subdirectories) visible in `dir`, sorted;
    /// empty if the directory does not exist.
    pub fn file_names(&self, dir: &Path) -> Vec<String> {
        let st = self.state.lock();
        st.files
            .keys()
            .filter(|p| parent(p) == dir)
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect()
    }

    /// Total current size of the visible files (an inode linked under two
    /// names counts once).
    pub fn total_bytes(&self) -> u64 {
        let st = self.state.lock();
        let mut seen = HashSet::new();
        st.files
            .values()
            .filter(|inode| seen.insert(Arc::as_ptr(inode)))
            .map(|inode| inode.read().data.len() as u64)
            .sum()
    }

    /// XORs the byte at `offset` of `path` with `xor`, in both the current and
    /// the durable content, to simulate media corruption.
    pub fn corrupt_byte(&self, path: &Path, offset: u64, xor: u8) -> Result<()> {
        let inode = self.state.lock().inode("corrupt", path)?;
        let mut inode = inode.write();
        let byte = usize::try_from(offset)
            .ok()
            .and_then(|o| inode.data.get_mut(o))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "offset {offset} is past the end of {}",
                    path.display()
                ))
            })?;
        *byte ^= xor;
        Ok(())
    }
}

#[derive(Debug)]
struct MemWritable {
    inode: InodeRef,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inode.write().data.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // No OS layer: flushed bytes are exactly as volatile as unflushed ones.
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut inode = self.inode.write();
        inode.durable_len = inode.data.len();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.inode.read().data.len() as u64
    }
}

#[derive(Debug)]
struct MemReadable {
    inode: InodeRef,
    path: PathBuf,
    /// Length at open: reads beyond it fail even if the file has grown.
    len: u64,
}

impl RandomAccessFile for MemReadable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.len)
            .ok_or_else(|| eof(&self.path))?;
        let (start, end) = match (usize::try_from(offset), usize::try_from(end)) {
            (Ok(s), Ok(e)) => (s, e),
            _ => return Err(eof(&self.path)),
        };
        let inode = self.inode.read();
        // The file may have been truncated since it was opened.
        let src = inode.data.get(start..end).ok_or_else(|| eof(&self.path))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// Releases the lock on drop.
struct MemLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl fmt::Debug for MemLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemLock").field("path", &self.path).finish()
    }
}

impl DirLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl Vfs for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inode = self.state.lock().link_new("create", path)?;
        Ok(Box::new(MemWritable { inode }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inode = self.state.lock().inode("open", path)?;
        Ok(Box::new(MemWritable { inode }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let inode = self.state.lock().inode("open", path)?;
        let len = inode.read().data.len() as u64;
        Ok(Arc::new(MemReadable {
            inode,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.inode("remove", path)?;
        st.files.remove(path);
        st.pending.push(NsOp::Unlink {
            path: path.to_path_buf(),
        });
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        let inode = st.inode("rename", from)?;
        st.check_parent("rename", to)?;
        if st.dirs.contains(to) || is_root(to) {
            return Err(os_error(
                "rename",
                to,
                rustix::io::Errno::ISDIR.raw_os_error(),
            ));
        }
        if from == to {
            // POSIX: renaming a file onto itself does nothing.
            return Ok(());
        }
        st.files.remove(from);
        st.files.insert(to.to_path_buf(), Arc::clone(&inode));
        st.pending.push(NsOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            inode,
        });
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        let inode = st.inode("link", from)?;
        st.check_parent("link", to)?;
        if st.files.contains_key(to) || st.dirs.contains(to) || is_root(to) {
            return Err(os_error(
                "link",
                to,
                rustix::io::Errno::EXIST.raw_os_error(),
            ));
        }
        st.files.insert(to.to_path_buf(), Arc::clone(&inode));
        st.pending.push(NsOp::Link {
            path: to.to_path_buf(),
            inode,
        });
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let inode = self.state.lock().inode("truncate", path)?;
        let len = usize::try_from(len)
            .map_err(|_| Error::InvalidArgument(format!("truncate length {len} is too large")))?;
        let mut inode = inode.write();
        inode.data.resize(len, 0);
        inode.durable_len = len;
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let st = self.state.lock();
        if !st.dir_exists(dir) {
            let code = if st.files.contains_key(dir) {
                rustix::io::Errno::NOTDIR.raw_os_error()
            } else {
                rustix::io::Errno::NOENT.raw_os_error()
            };
            return Err(os_error("readdir", dir, code));
        }
        let subdirs = st.dirs.iter().filter(|d| d.as_path() != dir);
        let names = st
            .files
            .keys()
            .chain(subdirs)
            .filter(|p| parent(p) == dir)
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut st = self.state.lock();
        let mut missing = Vec::new();
        for d in dir.ancestors().filter(|d| !is_root(d)) {
            if st.files.contains_key(d) {
                return Err(os_error(
                    "mkdir",
                    d,
                    rustix::io::Errno::NOTDIR.raw_os_error(),
                ));
            }
            if !st.dirs.contains(d) {
                missing.push(d.to_path_buf());
            }
        }
        st.dirs.extend(missing);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut st = self.state.lock();
        if !st.dir_exists(dir) {
            return Err(os_error(
                "fsync",
                dir,
                rustix::io::Errno::NOENT.raw_os_error(),
            ));
        }
        let st = &mut *st;
        let pending = std::mem::take(&mut st.pending);
        for op in pending {
            if op.touches(dir) {
                op.apply(&mut st.durable_files);
            } else {
                st.pending.push(op);
            }
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.files.contains_key(path) || st.dir_exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        let mut st = self.state.lock();
        if !st.files.contains_key(path) {
            st.link_new("open", path)?;
        }
        if !st.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked(parent(path).to_path_buf()));
        }
        Ok(Box::new(MemLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn db() -> &'static Path {
        Path::new("/db")
    }

    fn setup() -> MemFs {
        let fs = MemFs::new();
        fs.create_dir_all(db()).unwrap();
        fs
    }

    fn write(fs: &MemFs, path: &Path, data: &[u8], sync: bool) {
        let mut f = fs.create(path).unwrap();
        f.append(data).unwrap();
        if sync {
            f.sync().unwrap();
        }
    }

    fn rng() -> StdRng {
        StdRng::seed_from_u64(7)
    }

    #[test]
    fn synced_data_survives_unsynced_does_not() {
        let fs = setup();
        let path = db().join("a");
        let mut f = fs.create(&path).unwrap();
        f.append(b"hello").unwrap();
        f.sync().unwrap();
        fs.sync_dir(db()).unwrap();
        f.append(b" world").unwrap();
        f.flush().unwrap();
        assert_eq!(f.len(), 11);

        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"hello");
        // The original is untouched and the clone is independent.
        assert_eq!(fs.read_all(&path).unwrap(), b"hello world");
        crashed.remove(&path).unwrap();
        assert!(fs.exists(&path));

        f.sync().unwrap();
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"hello world");
    }

    #[test]
    fn file_without_dir_sync_disappears() {
        let fs = setup();
        let path = db().join("b");
        write(&fs, &path, b"data", true);
        assert!(fs.exists(&path));
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert!(!crashed.exists(&path));
        assert!(crashed.exists(db()), "directories are durable");
        assert!(crashed.list(db()).unwrap().is_empty());

        // Keeping every unsynced namespace operation keeps the file, and its
        // synced content is whole.
        let crashed = fs.crash_clone(&mut rng(), 1.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"data");

        fs.sync_dir(db()).unwrap();
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"data");
    }

    #[test]
    fn hard_link_shares_bytes_and_is_durable_after_a_dir_sync() {
        let fs = setup();
        let a = db().join("a");
        let b = db().join("b");
        write(&fs, &a, b"bytes", true);
        fs.sync_dir(db()).unwrap();
        fs.hard_link(&a, &b).unwrap();
        assert_eq!(fs.read_all(&b).unwrap(), b"bytes");
        assert!(fs.hard_link(&a, &b).is_err(), "an existing name is refused");
        assert!(fs
            .hard_link(&db().join("missing"), &db().join("c"))
            .is_err());
        // Removing one name leaves the other.
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert!(!crashed.exists(&b), "the link was not durable yet");
        fs.sync_dir(db()).unwrap();
        fs.remove(&a).unwrap();
        assert_eq!(fs.read_all(&b).unwrap(), b"bytes");
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&b).unwrap(), b"bytes");
    }

    #[test]
    fn rename_durability() {
        let fs = setup();
        let cur = db().join("CURRENT");
        let tmp = db().join("CURRENT.tmp");
        write(&fs, &cur, b"old", true);
        fs.sync_dir(db()).unwrap();
        write(&fs, &tmp, b"new", true);
        fs.sync_dir(db()).unwrap();
        fs.rename(&tmp, &cur).unwrap();
        assert_eq!(fs.read_all(&cur).unwrap(), b"new");
        assert!(!fs.exists(&tmp));

        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&cur).unwrap(), b"old");
        assert_eq!(crashed.read_all(&tmp).unwrap(), b"new");

        let crashed = fs.crash_clone(&mut rng(), 1.0);
        assert_eq!(crashed.read_all(&cur).unwrap(), b"new");
        assert!(!crashed.exists(&tmp));

        fs.sync_dir(db()).unwrap();
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&cur).unwrap(), b"new");
        assert!(!crashed.exists(&tmp));
        assert_eq!(crashed.file_names(db()), vec!["CURRENT".to_string()]);
    }

    #[test]
    fn cross_directory_rename_is_made_durable_by_either_dir() {
        let fs = setup();
        let other = Path::new("/other");
        fs.create_dir_all(other).unwrap();
        let from = db().join("f");
        let to = other.join("g");
        write(&fs, &from, b"x", true);
        fs.sync_dir(db()).unwrap();
        fs.rename(&from, &to).unwrap();
        fs.sync_dir(other).unwrap();
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert!(!crashed.exists(&from));
        assert_eq!(crashed.read_all(&to).unwrap(), b"x");
    }

    #[test]
    fn remove_durability_and_open_handles() {
        let fs = setup();
        let path = db().join("c");
        write(&fs, &path, b"abc", true);
        fs.sync_dir(db()).unwrap();
        let reader = fs.open_read(&path).unwrap();
        fs.remove(&path).unwrap();
        assert!(!fs.exists(&path));
        // An open handle still reads the removed file.
        let mut buf = [0u8; 3];
        reader.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"abc");

        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"abc");
        fs.sync_dir(db()).unwrap();
        assert!(!fs.crash_clone(&mut rng(), 0.0).exists(&path));
    }

    #[test]
    fn create_over_existing_keeps_old_file_until_dir_sync() {
        let fs = setup();
        let path = db().join("d");
        write(&fs, &path, b"first", true);
        fs.sync_dir(db()).unwrap();
        write(&fs, &path, b"second", true);
        assert_eq!(fs.read_all(&path).unwrap(), b"second");
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"first");
        fs.sync_dir(db()).unwrap();
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"second");
    }

    #[test]
    fn torn_tails_are_prefixes() {
        let fs = setup();
        let path = db().join("log");
        let mut f = fs.create(&path).unwrap();
        f.append(b"synced-").unwrap();
        f.sync().unwrap();
        fs.sync_dir(db()).unwrap();
        let tail: Vec<u8> = (0..200u8).collect();
        f.append(&tail).unwrap();
        let full = fs.read_all(&path).unwrap();

        let mut rng = rng();
        let mut lengths = HashSet::new();
        for _ in 0..200 {
            let crashed = fs.crash_clone(&mut rng, 0.5);
            let got = crashed.read_all(&path).unwrap();
            assert!(got.len() >= 7, "durable bytes always survive");
            assert_eq!(&full[..got.len()], &got[..], "a prefix of what was written");
            lengths.insert(got.len());
        }
        assert!(lengths.contains(&7), "sometimes nothing unsynced survives");
        assert!(
            lengths.iter().any(|&l| l > 7 && l < full.len()),
            "some tails are torn mid-write"
        );
    }

    #[test]
    fn crash_clone_is_reproducible_with_a_seed() {
        let fs = setup();
        for i in 0..20 {
            write(&fs, &db().join(format!("f{i}")), &[i; 50], i % 2 == 0);
        }
        let a = fs.crash_clone(&mut StdRng::seed_from_u64(3), 0.5);
        let b = fs.crash_clone(&mut StdRng::seed_from_u64(3), 0.5);
        assert_eq!(a.file_names(db()), b.file_names(db()));
        for name in a.file_names(db()) {
            let p = db().join(name);
            assert_eq!(a.read_all(&p).unwrap(), b.read_all(&p).unwrap());
        }
    }

    #[test]
    fn truncate_is_durable() {
        let fs = setup();
        let path = db().join("t");
        write(&fs, &path, b"0123456789", false);
        fs.sync_dir(db()).unwrap();
        fs.truncate(&path, 4).unwrap();
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        assert_eq!(crashed.read_all(&path).unwrap(), b"0123");
        fs.truncate(&path, 6).unwrap();
        assert_eq!(fs.read_all(&path).unwrap(), b"0123\0\0");
    }

    #[test]
    fn locks() {
        let fs = setup();
        let path = db().join("LOCK");
        let lock = fs.lock(&path).unwrap();
        assert!(fs.exists(&path), "like OsFs, locking creates the file");
        assert!(matches!(fs.lock(&path), Err(Error::Locked(_))));
        // A clone shares the lock table.
        assert!(matches!(fs.clone().lock(&path), Err(Error::Locked(_))));
        // A crash clone does not inherit locks.
        fs.sync_dir(db()).unwrap();
        let crashed = fs.crash_clone(&mut rng(), 0.0);
        let other = crashed.lock(&path).unwrap();
        drop(other);
        drop(lock);
        let again = fs.lock(&path).unwrap();
        drop(again);
    }

    #[test]
    fn missing_files_and_reads_past_end() {
        let fs = setup();
        let missing = db().join("nope");
        for err in [
            fs.open_read(&missing).map(|_| ()).unwrap_err(),
            fs.open_append(&missing).map(|_| ()).unwrap_err(),
            fs.remove(&missing).unwrap_err(),
            fs.rename(&missing, &db().join("x")).unwrap_err(),
            fs.create(Path::new("/nodir/f")).map(|_| ()).unwrap_err(),
            fs.list(Path::new("/nodir")).unwrap_err(),
        ] {
            match err {
                Error::Io { source, .. } => assert_eq!(source.kind(), io::ErrorKind::NotFound),
                other => panic!("unexpected error {other:?}"),
            }
        }

        let path = db().join("r");
        let mut w = fs.create(&path).unwrap();
        w.append(b"12345").unwrap();
        let r = fs.open_read(&path).unwrap();
        w.append(b"678").unwrap();
        assert_eq!(r.len(), 5, "length is fixed at open");
        let mut buf = [0u8; 2];
        r.read_exact_at(&mut buf, 3).unwrap();
        assert_eq!(&buf, b"45");
        match r.read_exact_at(&mut buf, 4).unwrap_err() {
            Error::Io { source, .. } => assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof),
            other => panic!("unexpected error {other:?}"),
        }
        assert!(r.read_exact_at(&mut buf, u64::MAX).is_err());
        let w2 = fs.open_append(&path).unwrap();
        assert_eq!(w2.len(), 8);
    }

    #[test]
    fn helpers_and_listing() {
        let fs = setup();
        fs.create_dir_all(&db().join("sub/deeper")).unwrap();
        write(&fs, &db().join("a"), b"aaaa", false);
        write(&fs, &db().join("b"), b"bb", false);
        write(&fs, &db().join("sub/c"), b"c", false);
        assert_eq!(fs.file_names(db()), vec!["a".to_string(), "b".to_string()]);
        let mut listed = fs.list(db()).unwrap();
        listed.sort();
        assert_eq!(listed, vec!["a", "b", "sub"]);
        assert_eq!(fs.list(&db().join("sub")).unwrap(), vec!["c", "deeper"]);
        assert_eq!(fs.total_bytes(), 7);
        assert!(fs.list(&db().join("a")).is_err());
        assert!(fs.create_dir_all(&db().join("a/x")).is_err());
        assert!(fs.create(&db().join("sub")).is_err());

        fs.corrupt_byte(&db().join("a"), 1, 0xff).unwrap();
        assert_eq!(fs.read_all(&db().join("a")).unwrap(), b"a\x9eaa");
        assert!(fs.corrupt_byte(&db().join("a"), 4, 1).is_err());
        assert!(fs.corrupt_byte(&db().join("zz"), 0, 1).is_err());
    }
}
