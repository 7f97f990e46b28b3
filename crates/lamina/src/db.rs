//! The database: write path (group commit, WAL, memtables), read path, and
//! the background flush and compaction threads.
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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{bounded, Sender};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::{decode_entries, decode_record, encode_header, WriteBatch};
use crate::cache::BlockCache;
use crate::compaction::{
    execute, flush_memtable, policy_from_spec, CompactionContext, CompactionOutcome,
    CompactionPolicy, CompactionTask, OutputRun, PolicyDefaults, TaskInput, TreeView,
};
use crate::error::{Error, Result};
use crate::filename::{self, wal_name, FileKind, FileNumbers};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{make_internal_key, parse_internal_key, seek_key, ValueKind, MAX_SEQ};
use crate::manifest::{self, Counters, Manifest};
use crate::memtable::MemTable;
use crate::options::{Options, SyncMode};
use crate::record::{append_record, read_records};
use crate::sst::{monkey, thread_blocks_read, TableOptions};
use crate::stats::{thread_cpu_time, DbStats, EngineStats, IoStats, LevelStats, Op};
use crate::tables::{RunIterator, TableLoader};
use crate::version::{FileMeta, Version, VersionEdit};
use crate::vfs::{DirLock, Vfs, WritableFile};

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The log "file" of a database opened read-only: writes are refused
/// before they reach it.
#[derive(Debug)]
struct ReadOnlyFile;

impl WritableFile for ReadOnlyFile {
    fn append(&mut self, _: &[u8]) -> Result<()> {
        Err(Error::ReadOnly)
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        0
    }
}

/// What a reader pins: memtables and the tree at one instant.
#[derive(Debug)]
struct SuperVersion {
    mem: Arc<MemTable>,
    /// Immutable memtables, newest first.
    imms: Vec<Arc<MemTable>>,
    version: Arc<Version>,
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
    /// Files removed from the tree, deleted once no reader pins them.
    obsolete: Vec<Arc<FileMeta>>,
    /// A manual compaction is waiting or running; background picking pauses.
    manual: bool,
    compactions_running: usize,
    /// Last background failure; writes fail while it is set.
    bg_error: Option<String>,
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
    _lock: Box<dyn DirLock>,
    loader: Arc<TableLoader>,
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
    policy: RwLock<Arc<dyn CompactionPolicy>>,
    shutdown: AtomicBool,
}

/// An open database. Share it between threads with `Arc<Db>`.
pub struct Db {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

/// A key and its value at one level (`None` = tombstone).
pub type LevelEntry = (Vec<u8>, Option<Vec<u8>>);

/// The entries of one level, newest version per key (see
/// [`Db::level_iter`]); it pins the tree it started on.
pub struct LevelIter {
    iter: MergingIterator,
    last_key: Option<Vec<u8>>,
    _sv: Arc<SuperVersion>,
}

impl LevelIter {
    fn advance(&mut self) -> Result<Option<LevelEntry>> {
        while self.iter.valid() {
            let p = parse_internal_key(self.iter.key())
                .ok_or_else(|| Error::corruption("level", 0, "bad internal key"))?;
            let newest = self.last_key.as_deref() != Some(p.user_key);
            let entry = newest.then(|| {
                let v = (p.kind == ValueKind::Put).then(|| self.iter.value().to_vec());
                (p.user_key.to_vec(), v)
            });
            self.iter.next()?;
            if let Some(entry) = entry {
                self.last_key = Some(entry.0.clone());
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }
}

impl Iterator for LevelIter {
    type Item = Result<LevelEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance().transpose()
    }
}

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

    /// The live keys of `[lo, hi)`-style bounds as of the snapshot.
    pub fn scan(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<DbIterator> {
        self.inner.scan_at(lo, hi, self.seq)
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
    /// Opens (or creates) the database in `path`, recovering from the
    /// manifest and replaying write-ahead logs.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let dir = path.as_ref().to_path_buf();
        validate(&opts)?;
        let vfs = Arc::clone(&opts.vfs);
        // Checked before anything is created (not even LOCK), and again
        // under the lock below.
        refuse_orphaned_files(vfs.as_ref(), &dir)?;
        if !opts.read_only {
            vfs.create_dir_all(&dir)?;
        }
        let lock = vfs.lock(&dir.join(filename::LOCK))?;
        let policy: Arc<dyn CompactionPolicy> =
            Arc::from(policy_from_spec(&opts.compaction, policy_defaults(&opts))?);
        let io = Arc::new(IoStats::default());
        let cache = (opts.block_cache_bytes > 0).then(|| BlockCache::new(opts.block_cache_bytes));
        let loader = Arc::new(TableLoader {
            vfs: Arc::clone(&vfs),
            dir: dir.clone(),
            cache,
            stats: Arc::clone(&io),
        });

        let recovered = manifest::recover(vfs.as_ref(), &dir)?;
        let mut leftovers = Vec::new();
        if recovered.is_none() {
            leftovers = refuse_orphaned_files(vfs.as_ref(), &dir)?;
            if !opts.create_if_missing || opts.read_only {
                return Err(Error::InvalidArgument(format!(
                    "no database in {}",
                    dir.display()
                )));
            }
        }
        let (version, mut counters, old_manifest) = recovered.map_or(
            (Version::default(), Counters::default(), None),
            |(v, c, n)| (v, c, Some(n)),
        );
        // What the manifest proves: every number below `issued` was handed
        // out by this database, and logs below `log_number` are obsolete.
        let (issued, old_log_number) = (counters.next_file_number, counters.log_number);
        let names = vfs.list(&dir)?;
        // Replay the WALs that are not yet in SSTs into one memtable, then
        // flush it so the new manifest makes every old log obsolete.
        let mut wals: Vec<u64> = names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                Some((FileKind::Wal, n)) if n >= old_log_number => Some(n),
                _ => None,
            })
            .collect();
        wals.sort_unstable();
        // Numbers continue past everything this database owns; lamina-named
        // files numbered beyond that are not provably its own, so they are
        // kept and their numbers skipped.
        let live: HashSet<u64> = version.files().map(|(_, _, f)| f.id).collect();
        let owned_max = wals
            .iter()
            .chain(&live)
            .chain(&old_manifest)
            .copied()
            .max()
            .unwrap_or(0);
        let start = issued.max(owned_max + 1).max(1);
        let mut reserved: Vec<u64> = names
            .iter()
            .filter_map(|n| filename::parse(n).map(|(_, n)| n))
            .filter(|&n| n >= start)
            .collect();
        reserved.sort_unstable();
        let numbers = FileNumbers {
            next: AtomicU64::new(start),
            reserved,
        };
        let alloc = || numbers.alloc();
        let mut last_seq = counters.last_seq;
        let replay = Arc::new(MemTable::new(0));
        for &n in &wals {
            last_seq = last_seq.max(replay_wal(vfs.as_ref(), &dir, n, &replay, !opts.read_only)?);
        }
        let (version, wal_file, wal_number, manifest, mem) = if opts.read_only {
            // Nothing is written: the logs stay as they are, replayed into
            // a memtable that never flushes.
            counters.last_seq = last_seq;
            let number = old_manifest.unwrap_or_default();
            let file: Box<dyn WritableFile> = Box::new(ReadOnlyFile);
            (version, file, 0, Manifest::read_only(&dir, number), replay)
        } else {
            let mut version = version;
            let mut flush_edit = VersionEdit::default();
            if !replay.is_empty() {
                let ctx = CompactionContext {
                    loader: &loader,
                    table_options: table_options(&opts),
                    alloc_id: &alloc,
                    smallest_snapshot: last_seq,
                    now_ms: now_ms(),
                };
                if let Some(meta) = flush_memtable(&ctx, &replay)? {
                    flush_edit.add_flushed_run(alloc(), meta);
                    version = version.apply(&flush_edit)?;
                }
            }
            let wal_number = alloc();
            let wal_file = vfs.create(&dir.join(wal_name(wal_number)))?;
            let manifest_number = alloc();
            counters.log_number = wal_number;
            counters.last_seq = last_seq;
            counters.next_file_number = numbers.peek();
            let manifest =
                Manifest::create(vfs.as_ref(), &dir, manifest_number, &version, counters)?;

            // Garbage is only what the manifest proves obsolete: tables and
            // manifests it numbered and no longer references, logs below its
            // log number, and the logs just replayed into the new tree. A file
            // numbered beyond what it issued (an output whose edit never made
            // it, or a file lamina did not write) is left alone, as is every
            // name lamina does not write.
            let live: HashSet<u64> = version.files().map(|(_, _, f)| f.id).collect();
            for name in vfs.list(&dir)? {
                let obsolete = match filename::parse(&name) {
                    Some((FileKind::Table, n)) => n < issued && !live.contains(&n),
                    Some((FileKind::Wal, n)) => {
                        n != wal_number && (n < old_log_number || wals.contains(&n))
                    }
                    Some((FileKind::Manifest, n)) => n < issued && n != manifest.number(),
                    None => name == filename::CURRENT_TMP,
                } || leftovers.contains(&name);
                if obsolete {
                    vfs.remove(&dir.join(&name))?;
                }
            }
            if old_manifest.is_some() || !wals.is_empty() {
                vfs.sync_dir(&dir)?;
            }
            let mem = Arc::new(new_memtable(&opts, wal_number));
            (version, wal_file, wal_number, manifest, mem)
        };
        let version = Arc::new(version);
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&mem),
            imms: Vec::new(),
            version: Arc::clone(&version),
        });
        let inner = Arc::new(Inner {
            dir,
            vfs,
            _lock: lock,
            loader,
            io,
            stats: EngineStats::default(),
            sv: RwLock::new(sv),
            state: Mutex::new(State {
                manifest,
                counters,
                mem,
                imms: VecDeque::new(),
                version,
                busy: HashSet::new(),
                obsolete: Vec::new(),
                manual: false,
                compactions_running: 0,
                bg_error: None,
            }),
            cv: Condvar::new(),
            queue: Mutex::new(WriteQueue::default()),
            wal: Mutex::new(WalState {
                file: wal_file,
                number: wal_number,
                dirty: false,
                broken: false,
            }),
            visible_seq: AtomicU64::new(last_seq),
            last_seq: AtomicU64::new(last_seq),
            numbers,
            snapshots: Mutex::new(BTreeMap::new()),
            policy: RwLock::new(policy),
            shutdown: AtomicBool::new(false),
            opts,
        });
        let mut threads = Vec::new();
        if inner.opts.read_only {
            return Ok(Db {
                inner,
                threads: Mutex::new(threads),
            });
        }
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(f)
                .map_err(|e| Error::io("spawn thread", PathBuf::from(name), e))
        };
        let i = Arc::clone(&inner);
        threads.push(spawn("lamina-flush", Box::new(move || i.flush_loop()))?);
        for _ in 0..inner.opts.compaction_threads.max(1) {
            let i = Arc::clone(&inner);
            threads.push(spawn(
                "lamina-compact",
                Box::new(move || i.compaction_loop()),
            )?);
        }
        if let SyncMode::Interval(period) = inner.opts.sync {
            let i = Arc::clone(&inner);
            threads.push(spawn("lamina-sync", Box::new(move || i.sync_loop(period)))?);
        }
        inner.cv.notify_all();
        Ok(Db {
            inner,
            threads: Mutex::new(threads),
        })
    }

    /// Stores `key` → `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b)
    }

    /// Deletes `key` (writes a tombstone).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b)
    }

    /// Applies `batch` atomically. Its durability on return is given by
    /// [`Options::sync`] (see [`SyncMode`]).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        if self.inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        if batch.is_empty() {
            return Ok(());
        }
        let start = Instant::now();
        let result = self.inner.write(batch);
        self.inner.stats.record(Op::Put, start.elapsed());
        result
    }

    /// The newest value of `key`, or `None` if absent or deleted.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let start = Instant::now();
        let blocks = thread_blocks_read();
        let r = self
            .inner
            .get_at(key, self.inner.visible_seq.load(Ordering::Acquire));
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

    /// Live entries with keys within the bounds, in key order.
    pub fn scan(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<DbIterator> {
        self.inner
            .scan_at(lo, hi, self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// Live entries with keys within the bounds, in descending key order.
    pub fn scan_rev(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<DbRevIterator> {
        self.inner
            .scan_rev_at(lo, hi, self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// A consistent read view of the database as of now.
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
        let policy = policy_from_spec(spec, policy_defaults(&self.inner.opts))?;
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
    /// replaced. `wait_for_compactions` first gives a settled snapshot.
    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// Levels including the buffer: 1 + disk levels.
    pub fn num_levels(&self) -> usize {
        1 + self.inner.sv.read().version.levels.len()
    }

    /// Entries stored at `level` (0 = memtables, 1.. = disk levels), newest
    /// version per key within that level, tombstones as `None`; at most
    /// `limit` of them.
    pub fn level_entries(&self, level: usize, limit: usize) -> Result<Vec<LevelEntry>> {
        self.level_iter(level)?.take(limit).collect()
    }

    /// The entries of [`Db::level_entries`] one at a time, in key order, in
    /// constant memory (beyond the blocks being read).
    pub fn level_iter(&self, level: usize) -> Result<LevelIter> {
        let sv = Arc::clone(&self.inner.sv.read());
        let children: Vec<Box<dyn InternalIterator>> = if level == 0 {
            memtable_iters(&sv)
        } else {
            match sv.version.levels.get(level - 1) {
                Some(l) => l
                    .runs
                    .iter()
                    .map(|r| {
                        Box::new(RunIterator::new(
                            r.files.clone(),
                            Arc::clone(&self.inner.loader),
                        )) as Box<dyn InternalIterator>
                    })
                    .collect(),
                None => Vec::new(),
            }
        };
        let mut iter = MergingIterator::new(children);
        iter.seek_to_first()?;
        Ok(LevelIter {
            iter,
            last_key: None,
            _sv: sv,
        })
    }

    /// Directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Flushes the memtable, stops background work and releases the
    /// directory lock.
    pub fn close(self) -> Result<()> {
        if self.inner.opts.read_only {
            self.stop();
            return Ok(());
        }
        let flushed = self.inner.flush_and_wait();
        let synced = self.inner.wal.lock().file.sync();
        self.stop();
        flushed.and(synced)
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
        self.inner.delete_obsolete_files();
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop();
    }
}

fn validate(opts: &Options) -> Result<()> {
    let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
    if opts.write_buffer_size < 1024 {
        return bad("write_buffer_size must be at least 1 KiB");
    }
    if opts.block_size < 64 || opts.block_size > (64 << 20) {
        return bad("block_size must be within 64 B ..= 64 MiB");
    }
    if !(0.0..=64.0).contains(&opts.bloom_bits_per_key) {
        return bad("bloom_bits_per_key must be within 0 ..= 64");
    }
    if !opts
        .bloom_bits_per_level
        .iter()
        .all(|b| (0.0..=64.0).contains(b))
    {
        return bad("bloom_bits_per_level values must be within 0 ..= 64");
    }
    if !(0.0..=64.0).contains(&opts.memtable_bloom_bits_per_key) {
        return bad("memtable_bloom_bits_per_key must be within 0 ..= 64");
    }
    if opts.max_immutable_memtables == 0 {
        return bad("max_immutable_memtables must be at least 1");
    }
    Ok(())
}

/// Refuses a directory that holds lamina's files with data but no
/// `CURRENT`: opening it as a new database would lose them (LevelDB's
/// `RepairDB` case). Files a creation that failed before its `CURRENT` was
/// written leaves behind hold no data (empty logs, manifests of an empty
/// tree, `CURRENT.tmp`); their names are returned, to be removed once the
/// new database is durable.
fn refuse_orphaned_files(vfs: &dyn Vfs, dir: &Path) -> Result<Vec<String>> {
    if !vfs.exists(dir) || vfs.exists(&dir.join(filename::CURRENT)) {
        return Ok(Vec::new());
    }
    let mut leftovers = Vec::new();
    let mut with_data = Vec::new();
    for name in vfs.list(dir)? {
        let Some((kind, _)) = filename::parse(&name) else {
            if name == filename::CURRENT_TMP {
                leftovers.push(name);
            }
            continue;
        };
        let path = dir.join(&name);
        let empty = match kind {
            FileKind::Table => false,
            FileKind::Wal => vfs.open_read(&path)?.is_empty(),
            FileKind::Manifest => {
                let data = vfs.read_all(&path)?;
                let mut files = 0;
                read_records(&data, &name, |_, payload| {
                    files += VersionEdit::decode(payload).map_or(1, |e| e.added_files.len());
                    Ok(())
                })
                .is_ok_and(|_| files == 0)
            }
        };
        if empty {
            leftovers.push(name);
        } else {
            with_data.push(name);
        }
    }
    if with_data.is_empty() {
        return Ok(leftovers);
    }
    with_data.sort();
    let shown = with_data.len().min(3);
    Err(Error::NeedsRepair {
        dir: dir.to_path_buf(),
        reason: format!(
            "it has no CURRENT file but holds {} of lamina's files with data ({}{})",
            with_data.len(),
            with_data[..shown].join(", "),
            if with_data.len() > shown { ", ..." } else { "" }
        ),
    })
}

/// The memtable that logs its writes in WAL `wal_number`.
fn new_memtable(opts: &Options, wal_number: u64) -> MemTable {
    MemTable::with_filter(
        wal_number,
        opts.write_buffer_size,
        opts.memtable_bloom_bits_per_key,
    )
}

fn policy_defaults(opts: &Options) -> PolicyDefaults {
    PolicyDefaults {
        size_ratio: opts.size_ratio,
        target_file_size: opts.target_file_size,
    }
}

fn table_options(opts: &Options) -> TableOptions {
    TableOptions {
        block_size: opts.block_size,
        bloom_bits_per_key: opts.bloom_bits_per_key,
        ..TableOptions::default()
    }
}

/// Replays WAL `n` into `mem`; returns the largest sequence number seen.
/// A torn tail is cut off (and, with `truncate_torn`, the file truncated);
/// corruption is an error.
pub(crate) fn replay_wal(
    vfs: &dyn Vfs,
    dir: &Path,
    n: u64,
    mem: &MemTable,
    truncate_torn: bool,
) -> Result<u64> {
    let name = wal_name(n);
    let path = dir.join(&name);
    let data = vfs.read_all(&path)?;
    let mut max_seq = 0;
    let now = now_ms();
    let end = read_records(&data, &name, |offset, payload| {
        decode_record(payload, |seq, e| {
            mem.add(seq, e.kind, e.key, e.value, now);
            max_seq = max_seq.max(seq);
        })
        .map(|_| ())
        .ok_or_else(|| Error::corruption(name.as_str(), offset, "malformed write batch"))
    })?;
    if end.torn && truncate_torn {
        vfs.truncate(&path, end.valid_len)?;
    }
    Ok(max_seq)
}

fn memtable_iters(sv: &SuperVersion) -> Vec<Box<dyn InternalIterator>> {
    std::iter::once(&sv.mem)
        .chain(sv.imms.iter())
        .map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>)
        .collect()
}

impl Inner {
    fn table_options(&self) -> TableOptions {
        table_options(&self.opts)
    }

    fn alloc_id(&self) -> u64 {
        self.numbers.alloc()
    }

    fn smallest_snapshot(&self) -> u64 {
        let snaps = self.snapshots.lock();
        let latest = self.visible_seq.load(Ordering::Acquire);
        snaps.keys().next().copied().unwrap_or(latest).min(latest)
    }

    fn get_at(&self, key: &[u8], seq: u64) -> Result<Option<Vec<u8>>> {
        let sv = Arc::clone(&self.sv.read());
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            if let Some((kind, v)) = mem.get(key, seq) {
                return Ok((kind == ValueKind::Put).then_some(v));
            }
        }
        let now = now_ms();
        for (level, run) in sv.version.runs_newest_first() {
            if let Some(f) = run.file_for(key) {
                f.touch(now);
                let table = self.loader.table(f)?;
                let (found, filter) = table.get_with_filter_outcome(key, seq)?;
                self.stats.count_filter(level, filter);
                if let Some((kind, _, v)) = found {
                    return Ok((kind == ValueKind::Put).then_some(v));
                }
            }
        }
        Ok(None)
    }

    /// The merged view of every memtable and sorted run of `sv`.
    fn merged(&self, sv: &SuperVersion) -> MergingIterator {
        let mut children = memtable_iters(sv);
        for (_, run) in sv.version.runs_newest_first() {
            children.push(Box::new(RunIterator::new(
                run.files.clone(),
                Arc::clone(&self.loader),
            )));
        }
        MergingIterator::new(children)
    }

    /// The merged view of the current tree, positioned by `position`, with
    /// the super version it pins; the positioning counts as the scan's
    /// latency.
    fn positioned(
        &self,
        position: impl FnOnce(&mut MergingIterator) -> Result<()>,
    ) -> Result<(Arc<SuperVersion>, MergingIterator)> {
        let start = Instant::now();
        let sv = Arc::clone(&self.sv.read());
        let mut merged = self.merged(&sv);
        position(&mut merged)?;
        self.stats.record(Op::Scan, start.elapsed());
        Ok((sv, merged))
    }

    fn scan_at(
        self: &Arc<Self>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
    ) -> Result<DbIterator> {
        let (sv, merged) = self.positioned(|m| match lo {
            Bound::Included(k) | Bound::Excluded(k) => m.seek(&seek_key(k, seq)),
            Bound::Unbounded => m.seek_to_first(),
        })?;
        Ok(DbIterator {
            merged,
            seq,
            hi: hi.map(<[u8]>::to_vec),
            // An excluded lower bound is skipped as if already returned.
            last_key: match lo {
                Bound::Excluded(k) => Some(k.to_vec()),
                _ => None,
            },
            done: false,
            _sv: sv,
        })
    }

    fn scan_rev_at(
        self: &Arc<Self>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
    ) -> Result<DbRevIterator> {
        // The last version of the greatest user key in bounds, or (for an
        // excluded bound) the first version of `hi` itself, skipped below.
        let (sv, merged) = self.positioned(|m| match hi {
            Bound::Included(k) => m.seek_for_prev(&make_internal_key(k, 0, ValueKind::Delete)),
            Bound::Excluded(k) => m.seek_for_prev(&seek_key(k, MAX_SEQ)),
            Bound::Unbounded => m.seek_to_last(),
        })?;
        Ok(DbRevIterator {
            merged,
            seq,
            lo: lo.map(<[u8]>::to_vec),
            hi: hi.map(<[u8]>::to_vec),
            pending: PendingKey::default(),
            done: false,
            _sv: sv,
        })
    }

    // ---------------------------------------------------------------- writes

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let (tx, rx) = bounded(1);
        {
            let mut q = self.queue.lock();
            q.pending.push(Pending { batch, tx });
            if q.leader_active {
                drop(q);
                match rx.recv() {
                    Ok(Msg::Done(r)) => return r,
                    Ok(Msg::Lead) => {}
                    Err(_) => return Err(Error::Closed),
                }
            } else {
                q.leader_active = true;
            }
        }
        self.lead();
        match rx.try_recv() {
            Ok(Msg::Done(r)) => r,
            _ => Err(Error::Closed),
        }
    }

    /// Commits one group as leader, then hands leadership to the next
    /// waiting writer (so no writer leads forever).
    fn lead(&self) {
        let group = std::mem::take(&mut self.queue.lock().pending);
        let result = self.commit_group(&group);
        for p in &group {
            let r = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(e.duplicate()),
            };
            let _ = p.tx.send(Msg::Done(r));
        }
        let mut q = self.queue.lock();
        match q.pending.first() {
            Some(next) => {
                let _ = next.tx.send(Msg::Lead);
            }
            None => q.leader_active = false,
        }
    }

    fn commit_group(&self, group: &[Pending]) -> Result<()> {
        let mut wal = self.wal.lock();
        if self.shutdown.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let mem = self.make_room(&mut wal, false)?;
        let count: u32 = group.iter().map(|p| p.batch.count()).sum();
        let first_seq = self.last_seq.load(Ordering::Relaxed) + 1;
        let mut rep =
            Vec::with_capacity(12 + group.iter().map(|p| p.batch.entries().len()).sum::<usize>());
        encode_header(&mut rep, first_seq, count);
        for p in group {
            rep.extend_from_slice(p.batch.entries());
        }
        let logged = append_record(wal.file.as_mut(), &rep).and_then(|()| match self.opts.sync {
            SyncMode::Always => wal.file.sync(),
            _ => wal.file.flush(),
        });
        if let Err(e) = logged {
            wal.broken = true;
            return Err(e);
        }
        wal.dirty = true;
        let entries = group
            .iter()
            .flat_map(|p| decode_entries(p.batch.entries()).flatten())
            .zip(first_seq..)
            .map(|(e, seq)| (seq, e.kind, e.key, e.value));
        mem.add_all(entries, now_ms());
        let bytes: u64 = group.iter().map(|p| p.batch.user_bytes()).sum();
        let last = first_seq + u64::from(count) - 1;
        self.last_seq.store(last, Ordering::Relaxed);
        self.visible_seq.store(last, Ordering::Release);
        self.stats.bytes_ingested.add(bytes);
        self.stats.writes.add(u64::from(count));
        Ok(())
    }

    /// Returns the memtable to write into, switching to a new memtable and
    /// WAL when the current one is full (or `force`), and stalling while
    /// flushes or compactions are too far behind.
    fn make_room(&self, wal: &mut WalState, mut force: bool) -> Result<Arc<MemTable>> {
        let mut st = self.state.lock();
        let mut stall_start: Option<Instant> = None;
        let mut stall_errors = None;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            if self.shutdown.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let full = st.mem.approximate_bytes() >= self.opts.write_buffer_size;
            if !force && !full && !wal.broken {
                break;
            }
            if force && st.mem.is_empty() && !wal.broken {
                break;
            }
            let l0_runs = st.version.levels.first().map_or(0, |l| l.runs.len());
            let behind = st.imms.len() >= self.opts.max_immutable_memtables
                || (self.opts.level0_stop_runs > 0
                    && l0_runs >= self.opts.level0_stop_runs
                    && self.level0_can_shrink(&st))
                || self.policy_stalls_writes(&st, &mut stall_errors);
            if behind && !wal.broken {
                stall_start.get_or_insert_with(Instant::now);
                self.cv.notify_all();
                self.cv.wait_for(&mut st, Duration::from_millis(50));
                continue;
            }
            // Switch: the old WAL is synced first so that, after a power
            // loss, what survives across WAL files is a prefix.
            let number = self.alloc_id();
            let file = self.vfs.create(&self.dir.join(wal_name(number)))?;
            if !wal.broken {
                wal.file.sync()?;
            }
            self.vfs.sync_dir(&self.dir)?;
            let old_number = wal.number;
            *wal = WalState {
                file,
                number,
                dirty: false,
                broken: false,
            };
            let old = std::mem::replace(&mut st.mem, Arc::new(new_memtable(&self.opts, number)));
            if old.is_empty() {
                // Nothing to flush: the old log holds no write.
                let _ = self.vfs.remove(&self.dir.join(wal_name(old_number)));
            } else {
                st.imms.push_back(old);
            }
            self.install(&mut st);
            self.cv.notify_all();
            force = false;
        }
        if let Some(t) = stall_start {
            self.stats.stall_micros.add(t.elapsed().as_micros() as u64);
            self.stats.stalls.inc();
        }
        Ok(Arc::clone(&st.mem))
    }

    /// Publishes the current memtables and version to readers.
    fn install(&self, st: &mut State) {
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&st.mem),
            imms: st.imms.iter().rev().cloned().collect(),
            version: Arc::clone(&st.version),
        });
        *self.sv.write() = sv;
    }

    fn flush_and_wait(&self) -> Result<()> {
        let target = {
            let mut wal = self.wal.lock();
            self.make_room(&mut wal, true)?;
            self.wal_numbers_pending()
        };
        let mut st = self.state.lock();
        loop {
            if st.imms.iter().all(|m| !target.contains(&m.wal_number())) {
                return Ok(());
            }
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            if self.shutdown.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    fn wal_numbers_pending(&self) -> Vec<u64> {
        self.state
            .lock()
            .imms
            .iter()
            .map(|m| m.wal_number())
            .collect()
    }

    fn sync_loop(&self, period: Duration) {
        while !self.shutdown.load(Ordering::Acquire) {
            std::thread::sleep(period);
            let mut wal = self.wal.lock();
            if wal.dirty && !wal.broken && wal.file.sync().is_ok() {
                wal.dirty = false;
            }
        }
    }

    // ----------------------------------------------------------- background

    fn context<'a>(&'a self, alloc: &'a (dyn Fn() -> u64 + Sync)) -> CompactionContext<'a> {
        CompactionContext {
            loader: &self.loader,
            table_options: self.table_options(),
            alloc_id: alloc,
            smallest_snapshot: self.smallest_snapshot(),
            now_ms: now_ms(),
        }
    }

    fn flush_loop(&self) {
        loop {
            let mem = {
                let mut st = self.state.lock();
                loop {
                    if let Some(m) = st.imms.front() {
                        break Arc::clone(m);
                    }
                    if self.shutdown.load(Ordering::Acquire) {
                        return;
                    }
                    self.cv.wait_for(&mut st, Duration::from_millis(200));
                }
            };
            if let Err(e) = self.flush_one(&mem) {
                tracing_error("flush", &e);
                let mut st = self.state.lock();
                st.bg_error = Some(e.to_string());
                self.cv.notify_all();
                // Retry after a pause: a transient failure (a full disk) clears.
                self.cv.wait_for(&mut st, Duration::from_millis(500));
                if self.shutdown.load(Ordering::Acquire) {
                    return;
                }
            }
        }
    }

    /// Bloom bits per key for files written into `level` of a tree of
    /// `levels` levels: by hand, by Monkey, or the same everywhere.
    fn bloom_bits_for(&self, level: usize, levels: usize) -> f64 {
        let opts = &self.opts;
        if let Some(last) = opts.bloom_bits_per_level.last() {
            return *opts.bloom_bits_per_level.get(level).unwrap_or(last);
        }
        if opts.bloom_monkey {
            // The policy's own level ratio when it has one (`leveling:T=4`),
            // else the engine's default.
            let t = self
                .policy
                .read()
                .size_ratio()
                .unwrap_or(opts.size_ratio as f64);
            let entries = monkey::geometric_entries(levels.max(level + 1), t);
            let bits = monkey::allocate(opts.bloom_bits_per_key, &entries);
            return bits.get(level).copied().unwrap_or(opts.bloom_bits_per_key);
        }
        opts.bloom_bits_per_key
    }

    fn flush_one(&self, mem: &Arc<MemTable>) -> Result<()> {
        let alloc = || self.alloc_id();
        let mut ctx = self.context(&alloc);
        let levels = self.state.lock().version.levels.len();
        ctx.table_options.bloom_bits_per_key = self.bloom_bits_for(0, levels);
        let meta = flush_memtable(&ctx, mem)?;
        let written = meta.as_ref().map_or(0, |m| m.size);
        let mut edit = VersionEdit::default();
        if let Some(meta) = meta {
            edit.add_flushed_run(self.alloc_id(), meta);
        }
        let run_bound = self.policy.read().run_bound();
        let mut st = self.state.lock();
        let runs_before = st.version.run_count();
        // Logs older than the next unflushed memtable's are obsolete now.
        let next_log = st
            .imms
            .get(1)
            .map_or(st.mem.wal_number(), |m| m.wal_number());
        edit.log_number = Some(next_log);
        let max_seq = self.last_seq.load(Ordering::Relaxed);
        // The memtable leaves in the same installed view as its file
        // arrives: a reader never sees both, which would give the merged
        // iterator the same internal key twice. On failure the memtable
        // stays and the output too: the manifest may hold the edit even
        // though its sync failed. Unreferenced files are collected at open.
        let flushed = st.imms.pop_front();
        if let Err(e) = self.log_and_apply(&mut st, edit, Some(max_seq)) {
            if let Some(m) = flushed {
                st.imms.push_front(m);
            }
            return Err(e);
        }
        st.bg_error = None;
        let _ = self.vfs.remove(&self.dir.join(wal_name(mem.wal_number())));
        self.stats.flushes.inc();
        self.stats.flush_bytes_written.add(written);
        let runs = st.version.run_count() as u64;
        self.stats.run_count_sum.add(runs);
        self.stats.max_runs_at_flush.observe(runs);
        if let Some(excess) = run_bound.and_then(|k| runs_before.checked_sub(k)) {
            if excess > 0 {
                self.stats.overshoot_flushes.inc();
                self.stats.max_overshoot.observe(excess as u64);
            }
        }
        self.cv.notify_all();
        Ok(())
    }

    /// Logs `edit` in the manifest and makes its result the current version.
    fn log_and_apply(
        &self,
        st: &mut State,
        mut edit: VersionEdit,
        last_seq: Option<u64>,
    ) -> Result<()> {
        let next = st.version.apply(&edit)?;
        let mut counters = st.counters;
        if let Some(n) = edit.log_number {
            counters.log_number = n;
        }
        if let Some(s) = last_seq {
            counters.last_seq = counters.last_seq.max(s);
        }
        // Reserve a number for a possible fresh manifest before stamping.
        let spare = self.alloc_id();
        counters.next_file_number = self.numbers.peek();
        edit.next_file_number = Some(counters.next_file_number);
        edit.last_seq = Some(counters.last_seq);
        edit.log_number = Some(counters.log_number);
        st.manifest
            .log(self.vfs.as_ref(), &edit, &next, counters, || spare)?;
        st.counters = counters;
        let old = std::mem::replace(&mut st.version, Arc::new(next));
        let added: HashSet<u64> = edit.added_files.iter().map(|a| a.meta.id).collect();
        for (_, _, f) in old.files() {
            if !added.contains(&f.id) && edit.removed_files.iter().any(|r| r.file_id == f.id) {
                st.obsolete.push(Arc::clone(f));
            }
        }
        drop(old);
        self.install(st);
        self.collect_obsolete(st);
        Ok(())
    }

    /// Deletes removed files that no reader pins any more.
    fn collect_obsolete(&self, st: &mut State) {
        let mut keep = Vec::new();
        for f in st.obsolete.drain(..) {
            if Arc::strong_count(&f) == 1 {
                let _ = self.vfs.remove(&self.loader.path(f.id));
                if let Some(cache) = &self.loader.cache {
                    self.io.cache_invalidated_blocks.add(cache.evict_file(f.id));
                }
            } else {
                keep.push(f);
            }
        }
        st.obsolete = keep;
    }

    fn delete_obsolete_files(&self) {
        let mut st = self.state.lock();
        self.collect_obsolete(&mut st);
    }

    fn compaction_loop(&self) {
        loop {
            let (task, version) = {
                let mut st = self.state.lock();
                loop {
                    if self.shutdown.load(Ordering::Acquire) {
                        return;
                    }
                    self.collect_obsolete(&mut st);
                    if !st.manual {
                        if let Some(task) = self.pick(&st) {
                            for id in task.input_file_ids() {
                                st.busy.insert(id);
                            }
                            st.compactions_running += 1;
                            break (task, Arc::clone(&st.version));
                        }
                    }
                    self.cv.wait_for(&mut st, Duration::from_millis(500));
                }
            };
            let result = self.run_task(&task, &version);
            let mut st = self.state.lock();
            for id in task.input_file_ids() {
                st.busy.remove(&id);
            }
            st.compactions_running -= 1;
            if let Err(e) = result {
                tracing_error("compaction", &e);
                self.stats.compaction_errors.inc();
                self.cv.notify_all();
                self.cv.wait_for(&mut st, Duration::from_millis(500));
            }
            self.cv.notify_all();
        }
    }

    /// True while a compaction that takes level-0 runs is running or can be
    /// picked: only then may the level-0 stop trigger hold writes. A policy
    /// that merges nothing there (`nomerge`, or tiers whose runs never match
    /// in size) lets level 0 grow instead of freezing writes forever.
    fn level0_can_shrink(&self, st: &State) -> bool {
        let Some(l0) = st.version.levels.first() else {
            return false;
        };
        if st.manual
            || l0
                .runs
                .iter()
                .flat_map(|r| &r.files)
                .any(|f| st.busy.contains(&f.id))
        {
            return true;
        }
        let policy = Arc::clone(&self.policy.read());
        policy.pick(&self.view(st)).iter().any(|t| {
            t.inputs
                .iter()
                .any(|i| i.level == 0 && !i.file_ids.is_empty())
        })
    }

    /// True while the policy wants writes to wait for its compactions
    /// (checked at memtable switches). A compaction failing during the
    /// wait ends it: the work it waits for may never be done.
    fn policy_stalls_writes(&self, st: &State, errors_at_start: &mut Option<u64>) -> bool {
        let errors = self.stats.compaction_errors.get();
        if *errors_at_start.get_or_insert(errors) != errors || st.manual {
            return false;
        }
        let policy = Arc::clone(&self.policy.read());
        policy.stalls_writes(&self.view(st))
    }

    fn view(&self, st: &State) -> TreeView {
        crate::compaction::view_of_version(
            &st.version,
            &st.busy,
            self.stats.flushes.get(),
            self.opts.write_buffer_size as u64,
            now_ms(),
        )
    }

    /// Waits until the policy picks nothing and no compaction runs.
    fn wait_for_compactions(&self) -> Result<()> {
        let errors = self.stats.compaction_errors.get();
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            if self.shutdown.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            if self.stats.compaction_errors.get() != errors {
                return Err(Error::Background("a compaction failed".into()));
            }
            // Picking happens under the state lock and counts the task as
            // running at once, so this check cannot miss one being started.
            if st.imms.is_empty()
                && st.compactions_running == 0
                && !st.manual
                && self.pick(&st).is_none()
            {
                return Ok(());
            }
            self.cv.notify_all();
            self.cv.wait_for(&mut st, Duration::from_millis(20));
        }
    }

    fn pick(&self, st: &State) -> Option<CompactionTask> {
        let view = self.view(st);
        let policy = Arc::clone(&self.policy.read());
        policy
            .pick(&view)
            .into_iter()
            .find(|t| t.input_file_ids().all(|id| !st.busy.contains(&id)))
    }

    /// Executes a task and installs its result.
    fn run_task(&self, task: &CompactionTask, version: &Version) -> Result<()> {
        let alloc = || self.alloc_id();
        let mut ctx = self.context(&alloc);
        ctx.table_options.bloom_bits_per_key =
            self.bloom_bits_for(task.output_level, version.levels.len());
        let started = Instant::now();
        let cpu_started = thread_cpu_time();
        let outcome: CompactionOutcome = execute(&ctx, version, task)?;
        let cpu = thread_cpu_time().saturating_sub(cpu_started);
        let tombstones_out: u64 = outcome
            .edit
            .added_files
            .iter()
            .map(|a| a.meta.tombstones)
            .sum();
        let mut st = self.state.lock();
        // As for flushes, outputs of a failed edit stay until the next open.
        self.log_and_apply(&mut st, outcome.edit, None)?;
        if outcome.trivial_move {
            self.stats.trivial_moves.inc();
        } else {
            self.stats.compactions.inc();
            self.stats.compaction_bytes_read.add(outcome.bytes_read);
            self.stats
                .compaction_bytes_written
                .add(outcome.bytes_written);
            let wall = started.elapsed();
            self.stats.record(Op::Compaction, wall);
            self.stats.compaction_cpu_latency.record(cpu);
            self.stats
                .compaction_io_latency
                .record(wall.saturating_sub(cpu));
            let levels = st.version.levels.len();
            self.record_delete_persistence(task, version, tombstones_out, levels, ctx.now_ms);
        }
        Ok(())
    }

    /// A merge into the deepest level that removed tombstones made deletes
    /// persistent: records the age of its inputs' oldest tombstone.
    fn record_delete_persistence(
        &self,
        task: &CompactionTask,
        before: &Version,
        tombstones_out: u64,
        levels: usize,
        now: u64,
    ) {
        if task.output_level + 1 < levels {
            return;
        }
        let ids: HashSet<u64> = task.input_file_ids().collect();
        let inputs = || before.files().filter(|(_, _, f)| ids.contains(&f.id));
        let tombstones_in: u64 = inputs().map(|(_, _, f)| f.tombstones).sum();
        let oldest = inputs().filter_map(|(_, _, f)| f.oldest_tombstone_ms).min();
        if let Some(oldest) = oldest.filter(|_| tombstones_out < tombstones_in) {
            self.stats
                .delete_persistence_latency
                .record(Duration::from_millis(now.saturating_sub(oldest)));
        }
    }

    fn compact_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<()> {
        let (task, version) = {
            let mut st = self.state.lock();
            st.manual = true;
            while st.compactions_running > 0 {
                self.cv.wait_for(&mut st, Duration::from_millis(50));
            }
            let v = Arc::clone(&st.version);
            let task = manual_task(&v, lo, hi, self.opts.target_file_size);
            if let Some(t) = &task {
                for id in t.input_file_ids() {
                    st.busy.insert(id);
                }
            }
            (task, v)
        };
        let result = match &task {
            Some(t) => self.run_task(t, &version),
            None => Ok(()),
        };
        let mut st = self.state.lock();
        if let Some(t) = &task {
            for id in t.input_file_ids() {
                st.busy.remove(&id);
            }
        }
        st.manual = false;
        self.cv.notify_all();
        result
    }

    fn stats(&self) -> DbStats {
        let sv = Arc::clone(&self.sv.read());
        let levels = sv
            .version
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut s = LevelStats::of_level(i + 1, l, &self.loader);
                self.stats.fill_filter_stats(i, &mut s);
                s
            })
            .collect();
        let mem_bytes = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .map(|m| m.approximate_bytes() as u64)
            .sum();
        let mem_entries = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .map(|m| m.len() as u64)
            .sum();
        self.stats.snapshot(
            &self.io,
            levels,
            mem_bytes,
            mem_entries,
            sv.version.run_count(),
        )
    }
}

/// The manual task of `compact_range`: every file meeting the range, merged
/// into the deepest level.
fn manual_task(
    v: &Version,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    target: u64,
) -> Option<CompactionTask> {
    // The output spans all its inputs' keys, which can reach past
    // `[lo, hi]`: widen the range to the overlapping files' until it holds
    // them all, so that no file left out shares keys with the output.
    let (mut lo, mut hi) = (lo.unwrap_or(&[]), hi);
    let in_range = |f: &FileMeta, lo: &[u8], hi: Option<&[u8]>| {
        hi.is_none_or(|h| f.smallest.as_slice() <= h) && f.largest.as_slice() >= lo
    };
    loop {
        let (old_lo, old_hi) = (lo, hi);
        for (_, _, f) in v.files().filter(|(_, _, f)| in_range(f, old_lo, old_hi)) {
            lo = lo.min(f.smallest.as_slice());
            hi = hi.map(|h| h.max(f.largest.as_slice()));
        }
        if (lo, hi) == (old_lo, old_hi) {
            break;
        }
    }
    let in_range = |f: &FileMeta| in_range(f, lo, hi);
    let inputs: Vec<TaskInput> = v
        .runs_newest_first()
        .map(|(level, run)| TaskInput {
            level,
            run_id: run.id,
            file_ids: run
                .files
                .iter()
                .filter(|f| in_range(f))
                .map(|f| f.id)
                .collect(),
        })
        .filter(|i| !i.file_ids.is_empty())
        .collect();
    if inputs.is_empty() {
        return None;
    }
    let output_level = v.levels.len().saturating_sub(1).max(1);
    let output_run = match v.levels.get(output_level).map(|l| l.runs.as_slice()) {
        Some([only]) => OutputRun::Existing(only.id),
        _ => OutputRun::New,
    };
    Some(CompactionTask {
        inputs,
        output_level,
        output_run,
        target_file_size: target,
        reason: "manual compact_range".into(),
    })
}

fn tracing_error(what: &str, e: &Error) {
    eprintln!("lamina: background {what} failed: {e}");
}

/// True if `key` lies above the upper bound `hi`.
fn past_hi(hi: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match hi {
        Bound::Included(h) => key > h.as_slice(),
        Bound::Excluded(h) => key >= h.as_slice(),
        Bound::Unbounded => false,
    }
}

/// True if `key` lies below the lower bound `lo`.
fn below_lo(lo: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match lo {
        Bound::Included(l) => key < l.as_slice(),
        Bound::Excluded(l) => key <= l.as_slice(),
        Bound::Unbounded => false,
    }
}

/// Iterates live entries in key order (see [`Db::scan`]).
pub struct DbIterator {
    merged: MergingIterator,
    seq: u64,
    hi: Bound<Vec<u8>>,
    /// The user key last decided (its buffer reused from key to key).
    last_key: Option<Vec<u8>>,
    done: bool,
    _sv: Arc<SuperVersion>,
}

impl DbIterator {
    fn advance(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        while !self.done && self.merged.valid() {
            let p = parse_internal_key(self.merged.key())
                .ok_or_else(|| Error::corruption("scan", 0, "malformed internal key"))?;
            if past_hi(&self.hi, p.user_key) {
                self.done = true;
                break;
            }
            if p.seq > self.seq || self.last_key.as_deref() == Some(p.user_key) {
                self.merged.next()?;
                continue;
            }
            // The newest visible version of a new key decides it.
            let last = self.last_key.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(p.user_key);
            let item = (p.kind == ValueKind::Put)
                .then(|| (p.user_key.to_vec(), self.merged.value().to_vec()));
            self.merged.next()?;
            if item.is_some() {
                return Ok(item);
            }
        }
        self.done = true;
        Ok(None)
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.advance() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Iterates live entries in descending key order (see [`Db::scan_rev`]).
///
/// Going backward, the versions of a user key come oldest first, so the
/// newest version visible at the snapshot is the last one met before the
/// user key changes: a key is decided only once the cursor has moved past
/// all of its versions.
pub struct DbRevIterator {
    merged: MergingIterator,
    seq: u64,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    pending: PendingKey,
    done: bool,
    _sv: Arc<SuperVersion>,
}

/// The user key a [`DbRevIterator`] is deciding: its newest visible version
/// met so far.
#[derive(Default)]
struct PendingKey {
    /// `Some(kind)` of that version while a key is being decided.
    kind: Option<ValueKind>,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl PendingKey {
    /// Ends the decision: the entry, if its newest version is a put.
    fn take(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        (self.kind.take() == Some(ValueKind::Put)).then(|| {
            (
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.value),
            )
        })
    }

    /// True while deciding a user key other than `user_key`.
    fn is_other(&self, user_key: &[u8]) -> bool {
        self.kind.is_some() && self.key != user_key
    }

    fn set(&mut self, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.kind = Some(kind);
        self.key.clear();
        self.key.extend_from_slice(user_key);
        self.value.clear();
        self.value.extend_from_slice(value);
    }
}

impl DbRevIterator {
    fn advance(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        while !self.done && self.merged.valid() {
            let p = parse_internal_key(self.merged.key())
                .ok_or_else(|| Error::corruption("scan", 0, "malformed internal key"))?;
            if below_lo(&self.lo, p.user_key) {
                break;
            }
            if past_hi(&self.hi, p.user_key) || p.seq > self.seq {
                self.merged.prev()?;
                continue;
            }
            // A smaller user key: the pending one has seen all its versions.
            let decided = if self.pending.is_other(p.user_key) {
                self.pending.take()
            } else {
                None
            };
            self.pending.set(p.kind, p.user_key, self.merged.value());
            self.merged.prev()?;
            if decided.is_some() {
                return Ok(decided);
            }
        }
        self.done = true;
        Ok(self.pending.take())
    }
}

impl Iterator for DbRevIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.advance() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                self.pending = PendingKey::default();
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests;
