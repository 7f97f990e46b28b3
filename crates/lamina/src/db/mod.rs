//! The database: its state and public API here; `open` (recovery, file
//! ownership, read-only mode), `write` (group commit, log, memtable switches,
//! stalls), `background` (flushes, compactions, obsolete files, statistics),
//! `iter` (lookups and iterators) and `property` (`Db::property`) in the
//! submodules.
//!
//! Locking: `wal` (held by the group-commit leader for a whole commit, and
//! for memtable switches) is taken before `state`. Readers take neither: they
//! clone the current [`SuperVersion`] under a short read lock.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::WriteBatch;
use crate::clock::now_ms;
use crate::compaction::lsbm::{self, Buffer, Slot};
use crate::compaction::partition::KeyImage;
use crate::compaction::{policy_from_spec, CompactionContext, CompactionPolicy};
use crate::error::{Error, Result};
use crate::filename::FileNumbers;
use crate::info_log::InfoLog;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{make_internal_key, parse_internal_key, seek_key, ValueKind, MAX_SEQ};
use crate::manifest::{Counters, Manifest};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::row_cache::RowCache;
use crate::scan_pool::ScanPool;
use crate::spatial::Rect;
use crate::sst::{thread_blocks_read, thread_data_cache, TableOptions};
use crate::stats::{DbStats, EngineStats, IoStats, Op};
use crate::tables::{RunIterator, TableCache};
use crate::version::{FileMeta, Version};
use crate::vfs::{DirLock, Vfs, WritableFile};

mod background;
mod checkpoint;
mod cursor;
mod iter;
mod open;
mod property;
mod write;

pub use checkpoint::CheckpointReport;
pub use iter::{Cursor, DbIterator, DbRevIterator, LevelIter, WindowIter};

/// What a reader pins: memtables and the tree at one instant.
#[derive(Debug)]
struct SuperVersion {
    mem: Arc<MemTable>,
    /// Immutable memtables, newest first.
    imms: Vec<Arc<MemTable>>,
    version: Arc<Version>,
}

/// Where an obsolete file was last held, to count the cached blocks its
/// deletion drops as the buffer's or the tree's (seed 002).
#[derive(Debug, Clone, Copy)]
struct Holder {
    /// The level of its run, or of its buffer's host run.
    level: usize,
    /// A compaction buffer held it (not a run).
    buffer: bool,
}

struct State {
    manifest: Manifest,
    counters: Counters,
    mem: Arc<MemTable>,
    /// Immutable memtables waiting for flush, oldest first.
    imms: VecDeque<Arc<MemTable>>,
    version: Arc<Version>,
    /// Files owned by running compactions.
    busy: HashSet<u64>,
    /// Files removed from the tree, deleted once no reader pins them, each
    /// with where it was last held (none for outputs no version held).
    obsolete: Vec<(Arc<FileMeta>, Option<Holder>)>,
    /// A manual compaction is waiting or running; background picking pauses.
    manual: bool,
    compactions_running: usize,
    /// Last background failure; writes fail while it is set.
    bg_error: Option<Arc<Error>>,
    /// The last compaction failure, for `wait_for_compactions`.
    compaction_error: Option<Arc<Error>>,
}

struct WalState {
    file: Box<dyn WritableFile>,
    number: u64,
    /// Bytes appended since the last sync (interval mode).
    dirty: bool,
    /// A failed append may have left a partial record: switch files first.
    broken: bool,
}

enum Msg {
    Done(Result<()>),
    Lead,
}

struct Pending {
    batch: WriteBatch,
    tx: Sender<Msg>,
}

#[derive(Default)]
struct WriteQueue {
    pending: Vec<Pending>,
    leader_active: bool,
}

struct Inner {
    dir: PathBuf,
    opts: Options,
    vfs: Arc<dyn Vfs>,
    /// The directory lock; `None` for a read-only open, which takes none.
    _lock: Option<Box<dyn DirLock>>,
    table_cache: Arc<TableCache>,
    io: Arc<IoStats>,
    stats: EngineStats,
    sv: RwLock<Arc<SuperVersion>>,
    state: Mutex<State>,
    cv: Condvar,
    queue: Mutex<WriteQueue>,
    wal: Mutex<WalState>,
    /// Sequence number of the last write visible to readers.
    visible_seq: AtomicU64,
    /// Sequence number of the last write assigned (leader only).
    last_seq: AtomicU64,
    numbers: FileNumbers,
    snapshots: Mutex<BTreeMap<u64, usize>>,
    /// `Options::row_cache_bytes`: serves `Db::get`, not snapshots or scans.
    row_cache: Option<RowCache>,
    policy: RwLock<Arc<dyn CompactionPolicy>>,
    /// `Options::scan_threads` above 1: the workers that read scans' runs.
    scan_pool: Option<Arc<ScanPool>>,
    shutdown: AtomicBool,
    /// `DIR/LOG`: events for operators.
    info_log: InfoLog,
}

/// An open database. Share it between threads with `Arc<Db>`.
///
/// Close it with [`Db::close`], which reports failures. Dropping it without
/// closing syncs the write-ahead log and stops background work, but has no
/// caller to return an error to: a failure is written to the info log
/// (`DIR/LOG`) and to `tracing` at error level, never silently dropped.
///
/// ```
/// use std::ops::Bound;
/// use lamina::{Db, Options, WriteBatch};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// db.put(b"apple", b"red")?;
/// db.put(b"banana", b"yellow")?;
/// assert_eq!(db.get(b"apple")?, Some(b"red".to_vec()));
///
/// let mut batch = WriteBatch::new();
/// batch.delete(b"apple");
/// batch.put(b"cherry", b"dark red");
/// db.write(batch)?; // atomically
/// assert_eq!(db.get(b"apple")?, None);
///
/// let snapshot = db.snapshot();
/// db.put(b"banana", b"green")?;
/// assert_eq!(snapshot.get(b"banana")?, Some(b"yellow".to_vec()));
///
/// let keys: Vec<Vec<u8>> = db
///     .scan(Bound::Included(b"b".as_slice()), Bound::Unbounded)?
///     .map(|entry| entry.map(|(k, _)| k))
///     .collect::<lamina::Result<_>>()?;
/// assert_eq!(keys, [b"banana".to_vec(), b"cherry".to_vec()]);
/// drop(snapshot);
/// db.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Db {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// `close` ran: `Drop` has nothing left to do.
    closed: bool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

/// A key and its value at one level (`None` = tombstone).
pub type LevelEntry = (Vec<u8>, Option<Vec<u8>>);

/// A consistent read view; writes after it was taken are invisible to it.
pub struct Snapshot {
    inner: Arc<Inner>,
    seq: u64,
}

impl Snapshot {
    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get_at(key, self.seq)
    }

    /// The values of `keys` as of the snapshot, in the order of `keys`
    /// (see [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter()
            .map(|k| self.inner.get_at(k.as_ref(), self.seq))
            .collect()
    }

    /// The records of a spatial index inside `window` as of the snapshot
    /// (see [`Db::window`]).
    pub fn window(&self, window: Rect) -> Result<WindowIter> {
        self.inner.window_at(window, self.seq)
    }

    /// The live keys of `[lo, hi)`-style bounds as of the snapshot.
    pub fn scan(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<DbIterator> {
        self.inner.scan_at(lo, hi, self.seq)
    }

    /// A cursor over the keys within the bounds as of the snapshot (see
    /// [`Db::iter`]).
    pub fn iter(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Cursor> {
        self.inner.cursor_at(lo, hi, self.seq)
    }

    /// A cursor over the keys starting with `prefix` as of the snapshot,
    /// at the first of them (see [`Db::prefix_iter`]).
    pub fn prefix_iter(&self, prefix: &[u8]) -> Result<Cursor> {
        self.inner.prefix_cursor(prefix, self.seq)
    }

    /// Like [`Snapshot::scan`], in descending key order.
    pub fn scan_rev(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<DbRevIterator> {
        self.inner.scan_rev_at(lo, hi, self.seq)
    }

    /// The snapshot's sequence number.
    pub fn sequence(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut snaps = self.inner.snapshots.lock();
        if let Some(n) = snaps.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                snaps.remove(&self.seq);
            }
        }
    }
}

impl Db {
    /// Stores `key` → `value`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = lamina::Db::open(dir.path(), lamina::Options::default())?;
    /// db.put(b"k", b"v1")?;
    /// db.put(b"k", b"v2")?; // replaces
    /// assert_eq!(db.get(b"k")?, Some(b"v2".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b)
    }

    /// Deletes `key` (writes a tombstone).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = lamina::Db::open(dir.path(), lamina::Options::default())?;
    /// db.put(b"k", b"v")?;
    /// db.delete(b"k")?;
    /// assert_eq!(db.get(b"k")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b)
    }

    /// Deletes every key in `[start, end)` written before the call (a range
    /// tombstone: one log entry, whatever the number of keys). Snapshots
    /// taken before it still see the keys; compaction drops the covered
    /// versions and, once nothing older can hold a key of the range, the
    /// tombstone. An empty range (`start >= end`) does nothing. Refused with
    /// `InvalidArgument` on a spatial index ([`Options::spatial`]), whose
    /// window queries prune files by the points they hold.
    pub fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(start, end);
        self.write(b)
    }

    /// Applies `batch` atomically. Its durability on return is given by
    /// [`Options::sync`] (see [`SyncMode`](crate::SyncMode)).
    ///
    /// ```
    /// use lamina::WriteBatch;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = lamina::Db::open(dir.path(), lamina::Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// batch.put(b"from", b"0");
    /// batch.put(b"to", b"100");
    /// db.write(batch)?; // both or neither, even after a crash
    /// assert_eq!(db.get(b"to")?, Some(b"100".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        if self.inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        if batch.is_empty() {
            return Ok(());
        }
        if self.inner.opts.spatial.is_some() && batch.has_range_deletes() {
            return Err(Error::InvalidArgument(
                "delete_range is not supported on a spatial index (Options::spatial)".into(),
            ));
        }
        let start = Instant::now();
        let result = self.inner.write(batch);
        self.inner.stats.record(Op::Put, start.elapsed());
        result
    }

    /// The newest value of `key`, or `None` if absent or deleted.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = lamina::Db::open(dir.path(), lamina::Options::default())?;
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// assert_eq!(db.get(b"absent")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let start = Instant::now();
        let blocks = thread_blocks_read();
        let r = self.inner.get_latest(key);
        let elapsed = start.elapsed();
        self.inner
            .stats
            .get_blocks_read
            .add(thread_blocks_read().saturating_sub(blocks));
        self.inner.stats.record(Op::Get, elapsed);
        if let Ok(found) = &r {
            self.inner.stats.count_get(found.is_some(), elapsed);
        }
        r
    }

    /// The newest values of `keys`, in the order of `keys` (`None` for an
    /// absent or deleted key), all read at one sequence number: a write
    /// that lands meanwhile is seen by all of them or by none (RocksDB's
    /// `MultiGet`). It reads through a snapshot, so a compaction cannot
    /// drop a version the later keys need; the row cache, which holds only
    /// the newest values, is not consulted.
    ///
    /// ```
    /// use lamina::{Db, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put(b"a", b"1")?;
    /// db.put(b"c", b"3")?;
    /// db.delete(b"c")?;
    /// let values = db.multi_get(&[b"a", b"b", b"c"])?;
    /// assert_eq!(values, vec![Some(b"1".to_vec()), None, None]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let start = Instant::now();
        let values = self.snapshot().multi_get(keys);
        let elapsed = start.elapsed();
        if let Ok(found) = &values {
            // Each key counts as a get, at the mean latency.
            let each = elapsed / u32::try_from(found.len().max(1)).unwrap_or(u32::MAX);
            for v in found {
                self.inner.stats.record(Op::Get, each);
                self.inner.stats.count_get(v.is_some(), each);
            }
        }
        values
    }

    /// Live entries with keys within the bounds, in key order.
    ///
    /// ```
    /// use std::ops::Bound;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = lamina::Db::open(dir.path(), lamina::Options::default())?;
    /// for k in [b"a", b"b", b"c", b"d"] {
    ///     db.put(k, b"v")?;
    /// }
    /// let keys = db
    ///     .scan(Bound::Included(b"b".as_slice()), Bound::Excluded(b"d".as_slice()))?
    ///     .map(|e| e.map(|(k, _)| k))
    ///     .collect::<lamina::Result<Vec<_>>>()?;
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<DbIterator> {
        self.inner
            .scan_at(lo, hi, self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// A double-ended [`Cursor`] over the live keys within the bounds, as of
    /// now; not positioned until one of its seeks. The bounds hold for
    /// every move (`seek_to_first` goes to the first key within them).
    /// `scan` and `scan_rev` are this cursor walked one way.
    pub fn iter(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Cursor> {
        self.inner
            .cursor_at(lo, hi, self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// A [`Cursor`] over the live keys that start with `prefix`, positioned
    /// at the first of them: the bounds `[prefix, next)` where `next` is
    /// the prefix with its last byte below 0xff incremented and the bytes
    /// after it dropped (unbounded above if the prefix is all 0xff bytes),
    /// so the cursor never leaves the prefix in either direction.
    pub fn prefix_iter(&self, prefix: &[u8]) -> Result<Cursor> {
        self.inner
            .prefix_cursor(prefix, self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// Live entries with keys within the bounds, in descending key order.
    pub fn scan_rev(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<DbRevIterator> {
        self.inner
            .scan_rev_at(lo, hi, self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// The live records of a spatial index ([`Options::spatial`]) whose
    /// point lies in the closed rectangle `window`, in key order (the
    /// comparator's order); `InvalidArgument` on an ordinary database.
    /// Files and blocks whose MBR misses the window are not read; the
    /// statistics' `window` section counts what was scanned.
    pub fn window(&self, window: Rect) -> Result<WindowIter> {
        self.inner
            .window_at(window, self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// Bytes the active memtable holds (as its switch rule counts them): a
    /// client that flushes several databases at one shared budget (the
    /// `lamina-dataset` crate) sums them.
    pub fn active_memtable_bytes(&self) -> usize {
        self.inner.sv.read().mem.approximate_bytes()
    }

    /// A consistent read view of the database as of now.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = lamina::Db::open(dir.path(), lamina::Options::default())?;
    /// db.put(b"k", b"old")?;
    /// let snapshot = db.snapshot();
    /// db.put(b"k", b"new")?;
    /// assert_eq!(snapshot.get(b"k")?, Some(b"old".to_vec()));
    /// assert_eq!(db.get(b"k")?, Some(b"new".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        let mut snaps = self.inner.snapshots.lock();
        let seq = self.inner.visible_seq.load(Ordering::Acquire);
        *snaps.entry(seq).or_insert(0) += 1;
        Snapshot {
            inner: Arc::clone(&self.inner),
            seq,
        }
    }

    /// Writes the memtable to an SST and waits until every write accepted
    /// before the call is in SSTs under a durable manifest.
    pub fn flush(&self) -> Result<()> {
        if self.inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        self.inner.flush_and_wait()
    }

    /// `fdatasync`s the write-ahead log: every write that returned before
    /// the call is on stable storage when it returns, whatever the
    /// [`SyncMode`](crate::SyncMode) (RocksDB's `SyncWAL`; a put followed
    /// by this is a put with `WriteOptions::sync`). Without a log
    /// (`Options::write_ahead_log = false`) there is nothing to sync.
    pub fn sync_wal(&self) -> Result<()> {
        if self.inner.opts.read_only || !self.inner.opts.write_ahead_log {
            return Ok(());
        }
        self.inner.wal.lock().file.sync()
    }

    /// Merges every file overlapping `[lo, hi]` (None = unbounded) into the
    /// deepest level, after a flush, together with every file overlapping
    /// those (the range widens until it covers all the files it touches).
    /// Waits for running compactions first.
    pub fn compact_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        self.inner.compact_range(lo, hi)
    }

    /// Replaces the compaction strategy of the open database.
    pub fn set_compaction(&self, spec: &str) -> Result<()> {
        let policy = policy_from_spec(spec, self.inner.opts.policy_defaults())?;
        *self.inner.policy.write() = Arc::from(policy);
        self.inner.cv.notify_all();
        Ok(())
    }

    /// Waits until every pending flush is done, no compaction runs and the
    /// strategy in force picks nothing more: the tree has settled into the
    /// strategy's shape (RocksDB's `WaitForCompact`). Returns
    /// `Error::Background` if a flush or compaction fails meanwhile (a failed
    /// compaction leaves the tree as it was).
    pub fn wait_for_compactions(&self) -> Result<()> {
        if self.inner.opts.read_only {
            // No compaction ever runs on a read-only database.
            return Ok(());
        }
        self.inner.wait_for_compactions()
    }

    /// The spec of the compaction strategy in force.
    pub fn compaction_spec(&self) -> String {
        self.inner.policy.read().spec()
    }

    /// Statistics of the engine. Counters and the tree's shape are read one
    /// after the other, not atomically: a snapshot taken while a merge
    /// installs its result may count the merge and still show the runs it
    /// replaced. [`DbStats`] lists which fields always agree and which may
    /// not; `wait_for_compactions` first gives a settled snapshot.
    pub fn stats(&self) -> DbStats {
        self.inner.stats(true)
    }

    /// [`stats`](Self::stats) without opening a table: the filter figures
    /// of each level cover only its open tables
    /// ([`LevelStats::filter_files`](crate::stats::LevelStats) says how
    /// many); every other field is the same. For a sampler that must not
    /// change what it measures: opening the tables a merge just wrote reads
    /// their index and filter, the reads the queries would otherwise pay
    /// (on an emulated disk, 10 ms each; see `vfs::SlowReads`).
    pub fn sample_stats(&self) -> DbStats {
        self.inner.stats(false)
    }

    /// Deletes made persistent within `threshold` of being written (seed
    /// 001's delete performance, after Lethe): tombstones that merges
    /// dropped, counting each at the age of its merge's oldest input
    /// tombstone (file metadata, so a lower bound of the true count; at
    /// most 0.8% of `threshold` is lost to the histogram's buckets).
    /// `DbStats::tombstone_purge_age.count` is the total dropped.
    pub fn deletes_persisted_within(&self, threshold: Duration) -> u64 {
        self.inner.deletes_persisted_within(threshold)
    }

    /// Disk levels of the tree (numbered from 0 in every API).
    pub fn num_levels(&self) -> usize {
        self.inner.sv.read().version.levels.len()
    }

    /// Directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Flushes the memtable, syncs the write-ahead log, stops background
    /// work and releases the directory lock. An error (a failed flush or
    /// sync) means writes acknowledged before the call may not be durable
    /// (see [`SyncMode`](crate::SyncMode)); the directory lock is released either way, once
    /// no [`Snapshot`] of the database is alive (a snapshot holds the
    /// database's state).
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        if self.inner.opts.read_only {
            self.stop();
            return Ok(());
        }
        let flushed = self.inner.flush_and_wait();
        let synced = self.inner.wal.lock().file.sync();
        self.stop();
        let result = flushed.and(synced);
        match &result {
            Ok(()) => self.inner.info_log.log("close", format_args!("clean")),
            Err(e) => self
                .inner
                .info_log
                .log("close", format_args!("failed: {e}")),
        }
        result
    }

    fn stop(&self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        {
            let _st = self.inner.state.lock();
            self.inner.cv.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // Scans still alive read their runs themselves from now on.
        if let Some(pool) = &self.inner.scan_pool {
            pool.shutdown();
        }
        self.inner.delete_obsolete_files();
    }
}

impl Drop for Db {
    /// Without `close`: syncs the log (so the writes it holds are as
    /// durable as `close` makes them, short of the flush) and stops
    /// background work. A failure it cannot return, or a background error
    /// still pending, goes to the info log and `tracing`.
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let synced = if self.inner.opts.read_only {
            Ok(())
        } else {
            self.inner.wal.lock().file.sync()
        };
        self.stop();
        let pending = self.inner.state.lock().bg_error.clone();
        let failure = match (synced, pending) {
            (Err(e), _) => Some(e.to_string()),
            (Ok(()), Some(e)) => Some(format!("pending background error: {e}")),
            (Ok(()), None) => None,
        };
        match failure {
            Some(e) => {
                tracing::error!(target: "lamina", "dropped without close: {e}");
                self.inner.info_log.log(
                    "close",
                    format_args!("dropped without close; failed: {e} (Db::close reports this)"),
                );
            }
            None => self
                .inner
                .info_log
                .log("close", format_args!("dropped without close; log synced")),
        }
    }
}

/// The memtable that logs its writes in WAL `wal_number`.
fn new_memtable(opts: &Options, wal_number: u64) -> MemTable {
    MemTable::with_filter(
        wal_number,
        opts.write_buffer_size,
        opts.memtable_bloom_bits_per_key,
    )
}

/// The key image new tables keep a histogram of: while the policy
/// partitions merges by key range (seed 000 §5.4.4), else none.
fn histogram_image(policy: &dyn CompactionPolicy) -> Option<KeyImage> {
    policy
        .partitioning()
        .filter(|p| p.partition.uses_ranges())
        .map(|p| p.image)
}

/// The options of new tables; written into level 0 (flushes), which is
/// where every caller but a compaction writes (`Inner::run_task` sets the
/// output level's bits and compression).
fn table_options(opts: &Options) -> TableOptions {
    TableOptions {
        block_size: opts.block_size,
        bloom_bits_per_key: opts.bloom_bits_per_key,
        spatial: opts.spatial,
        compression: opts.compression_for(0),
        ..TableOptions::default()
    }
}

fn memtable_iters(sv: &SuperVersion) -> impl Iterator<Item = Box<dyn InternalIterator>> + '_ {
    std::iter::once(&sv.mem)
        .chain(sv.imms.iter())
        .map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>)
}

impl Inner {
    /// The options of new tables; they keep key histograms while the
    /// policy partitions its merges by key range.
    fn table_options(&self) -> TableOptions {
        TableOptions {
            histogram: histogram_image(self.policy.read().as_ref()),
            ..table_options(&self.opts)
        }
    }

    fn alloc_id(&self) -> u64 {
        self.numbers.alloc()
    }

    fn smallest_snapshot(&self) -> u64 {
        let snaps = self.snapshots.lock();
        let latest = self.visible_seq.load(Ordering::Acquire);
        snaps.keys().next().copied().unwrap_or(latest).min(latest)
    }

    fn context<'a>(&'a self, alloc: &'a (dyn Fn() -> u64 + Sync)) -> CompactionContext<'a> {
        CompactionContext {
            table_cache: &self.table_cache,
            table_options: self.table_options(),
            alloc_id: alloc,
            smallest_snapshot: self.smallest_snapshot(),
            fill_cache: self.opts.compaction_fills_cache,
            readahead: self.opts.compaction_readahead_bytes,
            now_ms: now_ms(),
        }
    }
}

impl Inner {
    /// Reports a failed background job to `tracing` and the info log.
    fn report_error(&self, what: &str, e: &Error) {
        tracing::error!(target: "lamina", "background {what} failed: {e}");
        self.info_log
            .log("error", format_args!("background {what} failed: {e}"));
    }
}

#[cfg(test)]
mod tests;
