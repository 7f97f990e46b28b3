//! Opening a database: recovery from the manifest and the logs, the
//! garbage it may delete (docs/reliability.md, "File ownership"), and the
//! read-only mode.
//!
//! [`Db::open`] goes in LevelDB's phases: lock the directory and reconcile
//! the options with the stored ones (`lock_and_reconcile`); recover the
//! tree from the manifest and replay the logs it does not cover, writing
//! nothing (`recover`, with `recover_logs` as LevelDB's `RecoverLogFile`);
//! then either start writing — flush the replay, new log, manifest and
//! OPTIONS file, delete what the manifest proves obsolete
//! (`Recovered::start_writing`) — or stay read-only
//! (`Recovered::read_only`); last, build the database and start its
//! threads (`start_background`).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::clock::now_ms;
use crate::compaction::{flush_memtable, CompactionContext, CompactionPolicy};
use crate::error::{Error, Result};
use crate::filename::{wal_name, FileKind, FileNumbers};
use crate::info_log::InfoLog;
use crate::manifest::{Counters, Manifest};
use crate::memtable::MemTable;
use crate::options::{Options, SyncMode};
use crate::row_cache::RowCache;
use crate::scan_pool::ScanPool;
use crate::sst::cache::BlockCache;
use crate::sst::TableOptions;
use crate::stats::{EngineStats, IoStats};
use crate::tables::TableCache;
use crate::version::{Version, VersionEdit};
use crate::vfs::{DirLock, Vfs, WritableFile};
use crate::wal::replay_wal;
use crate::{filename, manifest, options_file};

use super::{
    histogram_image, new_memtable, table_options, Db, Inner, State, SuperVersion, WalState,
    WriteQueue,
};

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

impl Db {
    /// Opens (or creates) the database in `path`, recovering from the
    /// manifest and replaying write-ahead logs.
    ///
    /// An open that writes stores the options in a new `OPTIONS-NNNNNN`
    /// file. Options built with
    /// [`OptionsBuilder::from_stored_options`](crate::OptionsBuilder::from_stored_options)
    /// take every field the caller did not set from the newest one; in every
    /// case a spatial comparator other than the stored one is refused with
    /// [`Error::IncompatibleOption`].
    ///
    /// ```
    /// use lamina::{Db, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::builder().write_buffer_size(1 << 20).build()?)?;
    /// db.put(b"k", b"v")?;
    /// db.close()?;
    /// // Reopened, the data is there; `from_stored_options` keeps the
    /// // 1 MiB buffer the first open stored in its OPTIONS file.
    /// let opts = Options::builder().from_stored_options().build()?;
    /// let db = Db::open(dir.path(), opts)?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let mut opts = opts;
        let dir = path.as_ref().to_path_buf();
        opts.validate()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let vfs = Arc::clone(&opts.vfs);
        let (lock, option_notes) = lock_and_reconcile(vfs.as_ref(), &dir, &mut opts)?;
        let policy: Arc<dyn CompactionPolicy> =
            Arc::from(opts.compaction.build(opts.policy_defaults())?);
        let io = Arc::new(IoStats::default());
        let cache = (opts.block_cache_bytes > 0).then(|| BlockCache::new(opts.block_cache_bytes));
        let table_cache = Arc::new(table_cache(&opts, &dir, cache, Arc::clone(&io)));

        let started = start(vfs.as_ref(), &dir, &opts, policy.as_ref(), &table_cache)?;
        let info_log = if opts.read_only {
            InfoLog::disabled()
        } else {
            InfoLog::open(vfs.as_ref(), &dir)
        };
        for note in &option_notes {
            info_log.log("options", format_args!("{note}"));
        }
        started.log_to(&info_log, &opts);
        let Started {
            version,
            counters,
            numbers,
            manifest,
            wal_file,
            wal_number,
            mem,
            ..
        } = started;
        let last_seq = counters.last_seq;
        let version = Arc::new(version);
        table_cache.set_level0(&version);
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&mem),
            imms: Vec::new(),
            version: Arc::clone(&version),
        });
        let scan_pool = match opts.scan_threads {
            0 | 1 => None,
            n => Some(Arc::new(ScanPool::new(n)?)),
        };
        let inner = Arc::new(Inner {
            dir,
            vfs,
            _lock: lock,
            table_cache,
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
                compaction_error: None,
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
            row_cache: (opts.row_cache_bytes > 0).then(|| RowCache::new(opts.row_cache_bytes)),
            policy: RwLock::new(policy),
            scan_pool,
            shutdown: AtomicBool::new(false),
            info_log,
            opts,
        });
        let threads = if inner.opts.read_only {
            Vec::new()
        } else {
            start_background(&inner)?
        };
        inner.cv.notify_all();
        Ok(Db {
            inner,
            threads: Mutex::new(threads),
            closed: false,
        })
    }
}

/// Recovers the database and starts it: writing (a new log, manifest and
/// OPTIONS file, the garbage deleted) or read-only, where nothing is
/// written and the logs are replayed into a memtable that never flushes.
fn start(
    vfs: &dyn Vfs,
    dir: &Path,
    opts: &Options,
    policy: &dyn CompactionPolicy,
    table_cache: &Arc<TableCache>,
) -> Result<Started> {
    if opts.read_only {
        recover_read_only(vfs, dir, opts, table_cache)
    } else {
        recover(vfs, dir, opts)?.start_writing(vfs, dir, opts, policy, table_cache)
    }
}

/// The directory lock (none for a read-only open) and the notes for the
/// `LOG` about the stored options.
type LockAndNotes = (Option<Box<dyn DirLock>>, Vec<String>);

/// Locks the database directory (creating it if `create_if_missing` and it
/// holds no database) and takes the options the caller left open from the
/// stored OPTIONS file; returns the lock and the notes for the `LOG` about
/// what was taken or skipped. A read-only open takes no lock (RocksDB's
/// read-only instances): it writes nothing, so it may run beside the
/// writer and other readers (see `recover_read_only`).
fn lock_and_reconcile(vfs: &dyn Vfs, dir: &Path, opts: &mut Options) -> Result<LockAndNotes> {
    // Checked before anything is created (not even LOCK), and again
    // under the lock below.
    manifest::refuse_orphaned_files(vfs, dir)?;
    if !vfs.exists(&dir.join(filename::CURRENT)) && (opts.read_only || !opts.create_if_missing) {
        // Nothing is created: not the directory, not LOCK.
        return Err(no_database(dir));
    }
    let lock = if opts.read_only {
        None
    } else {
        vfs.create_dir_all(dir)?;
        Some(vfs.lock(&dir.join(filename::LOCK))?)
    };
    let (stored, unreadable) = options_file::load_with_failures(vfs, dir)?;
    let option_notes = options_file::reconcile(stored.as_ref(), &unreadable, opts)?;
    Ok((lock, option_notes))
}

/// The error of an open that may not create the database it did not find.
fn no_database(dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "no database in {} (create_if_missing is off or the open is read-only); nothing was created",
        dir.display()
    ))
}

/// Attempts of a read-only open before it gives up on a writer that keeps
/// changing the files under it.
const READ_ONLY_ATTEMPTS: usize = 8;

/// Recovers a read-only open beside a writer that may be running (another
/// process, a server, a writing `Db` of this process): the database as of
/// one moment, its files held open.
///
/// * The tables of the recovered version are opened at once, and a read-only
///   open never evicts a table: the writer deletes a table once a compaction
///   has replaced it, and an open descriptor (or mapping) keeps an unlinked
///   file readable (POSIX), so the reader keeps its version whatever the
///   writer does.
/// * The logs the manifest does not cover are read after it; a torn tail
///   (a record the writer is appending) ends a log. Should the manifest's
///   log number have moved by the time every table is open, a log may have
///   been flushed and deleted before it was listed, and the open starts over;
///   so it does when a file vanished under it (a table compacted away, a
///   manifest rotated, a log deleted).
///
/// The result is a prefix of the writer's history: the tables as of the
/// manifest read, plus the logged writes after them up to the moment each
/// log was read.
fn recover_read_only(
    vfs: &dyn Vfs,
    dir: &Path,
    opts: &Options,
    table_cache: &TableCache,
) -> Result<Started> {
    let mut attempt = 1;
    loop {
        let failure = match read_only_attempt(vfs, dir, opts, table_cache) {
            Ok(Some(started)) => return Ok(started),
            Ok(None) => Error::InvalidArgument(format!(
                "{} changed under {READ_ONLY_ATTEMPTS} read-only opens in a row (a writer busy \
                 flushing); try again",
                dir.display()
            )),
            Err(e) if moved_under(&e) => e,
            Err(e) => return Err(e),
        };
        if attempt == READ_ONLY_ATTEMPTS {
            return Err(failure);
        }
        attempt += 1;
    }
}

/// One attempt of [`recover_read_only`]: `None` if the writer moved the
/// manifest's log number meanwhile.
fn read_only_attempt(
    vfs: &dyn Vfs,
    dir: &Path,
    opts: &Options,
    table_cache: &TableCache,
) -> Result<Option<Started>> {
    let recovered = recover(vfs, dir, opts)?;
    let held = recovered
        .version
        .live_files()
        .try_for_each(|f| table_cache.table(f).map(drop))
        .and_then(|()| {
            let now = manifest::recover(vfs, dir)?.map(|(_, counters, _)| counters.log_number);
            Ok(now == Some(recovered.old_log_number))
        });
    if let Ok(true) = held {
        return Ok(Some(recovered.read_only(dir)));
    }
    // Closes what this attempt opened.
    for f in recovered.version.live_files() {
        table_cache.evict(f.id);
    }
    held.map(|_| None)
}

/// True for the errors of a file a writer deleted or replaced while a
/// read-only open was reading: the open tries again.
fn moved_under(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        // CURRENT named a manifest the writer has since replaced.
        Error::NeedsRepair { .. } => true,
        _ => false,
    }
}

/// The table cache `opts` ask for, over the database in `dir`.
fn table_cache(
    opts: &Options,
    dir: &Path,
    cache: Option<Arc<BlockCache>>,
    io: Arc<IoStats>,
) -> TableCache {
    TableCache::new(Arc::clone(&opts.vfs), dir.to_path_buf(), cache, io)
        .with_mmap_reads(opts.mmap_reads)
        .with_scan_resistant_cache(opts.scan_resistant_cache)
        .with_verify_checksums(opts.verify_checksums)
        .with_max_scan_readahead(opts.max_scan_readahead_bytes)
        .with_recycled_files(opts.recycle_table_files)
        .with_cached_index_and_filter(
            opts.cache_index_and_filter_blocks,
            opts.pin_l0_filter_and_index_blocks_in_cache,
        )
}

/// Starts a writing database's background threads: the flush thread,
/// `compaction_threads` compaction threads, the buffer trimmer and, with
/// `SyncMode::Interval`, the log syncer.
fn start_background(inner: &Arc<Inner>) -> Result<Vec<JoinHandle<()>>> {
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(f)
            .map_err(|e| Error::io("spawn thread", PathBuf::from(name), e))
    };
    let mut threads = Vec::new();
    let i = Arc::clone(inner);
    threads.push(spawn("lamina-flush", Box::new(move || i.flush_loop()))?);
    for _ in 0..inner.opts.compaction_threads {
        let i = Arc::clone(inner);
        threads.push(spawn(
            "lamina-compact",
            Box::new(move || i.compaction_loop()),
        )?);
    }
    let i = Arc::clone(inner);
    threads.push(spawn("lamina-trim", Box::new(move || i.trim_loop()))?);
    if let SyncMode::Interval(period) = inner.opts.sync {
        let i = Arc::clone(inner);
        threads.push(spawn("lamina-sync", Box::new(move || i.sync_loop(period)))?);
    }
    Ok(threads)
}

/// What the manifest and the logs say, before anything is written
/// (LevelDB's `VersionSet::Recover` followed by `RecoverLogFile` for each
/// log).
struct Recovered {
    version: Version,
    counters: Counters,
    numbers: FileNumbers,
    /// Every file name in the directory when recovery began.
    names: Vec<String>,
    /// Every number below it was handed out by this database.
    issued: u64,
    /// Logs below it are obsolete.
    old_log_number: u64,
    /// The logs replayed, oldest first.
    wals: Vec<u64>,
    /// Files a database that never committed a manifest left behind.
    leftovers: Vec<String>,
    old_manifest: Option<u64>,
    /// The logs' writes, in one memtable.
    replay: Arc<MemTable>,
    last_seq: u64,
}

/// What an open database starts from.
struct Started {
    version: Version,
    counters: Counters,
    numbers: FileNumbers,
    manifest: Manifest,
    wal_file: Box<dyn WritableFile>,
    wal_number: u64,
    mem: Arc<MemTable>,
    /// The logs replayed, for the `LOG`.
    wals: Vec<u64>,
    /// Whether a manifest was found (a new database has none).
    recovered_manifest: bool,
}

impl Started {
    /// Writes the `open` line of the `LOG`: what was recovered or created.
    fn log_to(&self, info_log: &InfoLog, opts: &Options) {
        let version = &self.version;
        info_log.log(
            "open",
            format_args!(
                "{} manifest={} levels={} runs={} files={} bytes={} wals_replayed={:?} last_seq={} compaction={}",
                if self.recovered_manifest { "recovered" } else { "created" },
                self.manifest.number(),
                version.levels.len(),
                version.run_count(),
                version.live_files().count(),
                version.levels.iter().map(|l| l.bytes()).sum::<u64>(),
                self.wals,
                self.counters.last_seq,
                opts.compaction
            ),
        );
    }
}

/// Recovers the tree from the manifest and replays the logs it does not
/// cover into one memtable; writes nothing (a read-only open replays with
/// `repair` off).
fn recover(vfs: &dyn Vfs, dir: &Path, opts: &Options) -> Result<Recovered> {
    let recovered = manifest::recover(vfs, dir)?;
    let mut leftovers = Vec::new();
    if recovered.is_none() {
        leftovers = manifest::refuse_orphaned_files(vfs, dir)?;
        if !opts.create_if_missing || opts.read_only {
            return Err(no_database(dir));
        }
    }
    let (version, counters, old_manifest) = recovered.map_or(
        (Version::default(), Counters::default(), None),
        |(v, c, n)| (v, c, Some(n)),
    );
    // What the manifest proves: every number below `issued` was handed
    // out by this database, and logs below `log_number` are obsolete.
    let (issued, old_log_number) = (counters.next_file_number, counters.log_number);
    let names = vfs.list(dir)?;
    // The WALs that are not yet in SSTs.
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some((FileKind::Wal, n)) if n >= old_log_number => Some(n),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    let numbers = file_numbers(&names, &version, &wals, old_manifest, issued);
    let (replay, last_seq) = recover_logs(vfs, dir, &wals, counters.last_seq, !opts.read_only)?;
    Ok(Recovered {
        version,
        counters,
        numbers,
        names,
        issued,
        old_log_number,
        wals,
        leftovers,
        old_manifest,
        replay,
        last_seq,
    })
}

/// The file numbers of this open: they continue past everything this
/// database owns; lamina-named files numbered beyond that are not provably
/// its own, so they are kept and their numbers skipped.
fn file_numbers(
    names: &[String],
    version: &Version,
    wals: &[u64],
    old_manifest: Option<u64>,
    issued: u64,
) -> FileNumbers {
    let live: HashSet<u64> = version.live_files().map(|f| f.id).collect();
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
    FileNumbers {
        next: AtomicU64::new(start),
        reserved,
    }
}

/// Replays the logs `wals`, oldest first, into one memtable (LevelDB's
/// `RecoverLogFile`, once per log); returns it with the newest sequence
/// number seen (at least `last_seq`).
fn recover_logs(
    vfs: &dyn Vfs,
    dir: &Path,
    wals: &[u64],
    last_seq: u64,
    repair: bool,
) -> Result<(Arc<MemTable>, u64)> {
    let replay = Arc::new(MemTable::new(0));
    let mut last_seq = last_seq;
    for &n in wals {
        last_seq = last_seq.max(replay_wal(vfs, dir, n, &replay, repair)?);
    }
    Ok((replay, last_seq))
}

impl Recovered {
    /// A read-only open: the replayed memtable is the active one and never
    /// flushes; no log, manifest or OPTIONS file is written.
    fn read_only(self, dir: &Path) -> Started {
        let mut counters = self.counters;
        counters.last_seq = self.last_seq;
        Started {
            version: self.version,
            counters,
            numbers: self.numbers,
            manifest: Manifest::read_only(dir, self.old_manifest.unwrap_or_default()),
            wal_file: Box::new(ReadOnlyFile),
            wal_number: 0,
            mem: self.replay,
            wals: self.wals,
            recovered_manifest: self.old_manifest.is_some(),
        }
    }

    /// A writing open: flushes the replayed logs into a table, starts a new
    /// log, a new manifest and an OPTIONS file, then deletes what the
    /// manifest proves obsolete.
    fn start_writing(
        self,
        vfs: &dyn Vfs,
        dir: &Path,
        opts: &Options,
        policy: &dyn CompactionPolicy,
        table_cache: &Arc<TableCache>,
    ) -> Result<Started> {
        let Recovered {
            mut version,
            mut counters,
            numbers,
            names,
            issued,
            old_log_number,
            wals,
            leftovers,
            old_manifest,
            replay,
            last_seq,
        } = self;
        let alloc = || numbers.alloc();
        // The replayed logs go into one table, so the new manifest makes
        // every old log obsolete.
        if !replay.is_empty() {
            let ctx = CompactionContext {
                table_cache,
                table_options: TableOptions {
                    histogram: histogram_image(policy),
                    ..table_options(opts)
                },
                alloc_id: &alloc,
                smallest_snapshot: last_seq,
                fill_cache: opts.compaction_fills_cache,
                readahead: opts.compaction_readahead_bytes,
                now_ms: now_ms(),
            };
            let files = flush_memtable(&ctx, &replay, policy.partitioning())?;
            if !files.is_empty() {
                let mut flush_edit = VersionEdit::default();
                flush_edit.add_flushed_run(alloc(), files);
                version = version.apply(&flush_edit)?;
            }
        }
        let wal_number = alloc();
        let wal_file = vfs.create(&dir.join(wal_name(wal_number)))?;
        let manifest_number = alloc();
        // Numbered below what the manifest records as issued, so the
        // next open can prove it is this database's own file.
        let options_number = alloc();
        counters.log_number = wal_number;
        counters.last_seq = last_seq;
        counters.next_file_number = numbers.peek();
        let manifest = Manifest::create(vfs, dir, manifest_number, &version, counters)?;
        options_file::write(vfs, dir, options_number, opts)?;
        // The newest two OPTIONS files stay: this one and the one
        // before, the fallback should this one be damaged.
        let previous_options = names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                Some((FileKind::Options, n)) if n < issued => Some(n),
                _ => None,
            })
            .max();

        // Garbage is only what the manifest proves obsolete: tables and
        // manifests it numbered and no longer references, logs below its
        // log number, and the logs just replayed into the new tree. A file
        // numbered beyond what it issued (an output whose edit never made
        // it, or a file lamina did not write) is left alone, as is every
        // name lamina does not write.
        let live: HashSet<u64> = version.live_files().map(|f| f.id).collect();
        for name in vfs.list(dir)? {
            let obsolete = match filename::parse(&name) {
                Some((FileKind::Table, n)) => n < issued && !live.contains(&n),
                Some((FileKind::Wal, n)) => {
                    n != wal_number && (n < old_log_number || wals.contains(&n))
                }
                Some((FileKind::Manifest, n)) => n < issued && n != manifest.number(),
                Some((FileKind::Options, n)) => n < issued && Some(n) != previous_options,
                // Left by an open that crashed before its rename.
                Some((FileKind::OptionsTemp, n)) => n < issued,
                None => name == filename::CURRENT_TMP,
            } || leftovers.contains(&name);
            if obsolete {
                vfs.remove(&dir.join(&name))?;
            }
        }
        if old_manifest.is_some() || !wals.is_empty() {
            vfs.sync_dir(dir)?;
        }
        let mem = Arc::new(new_memtable(opts, wal_number));
        Ok(Started {
            version,
            counters,
            numbers,
            manifest,
            wal_file,
            wal_number,
            mem,
            wals,
            recovered_manifest: old_manifest.is_some(),
        })
    }
}
