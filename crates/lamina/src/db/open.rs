//! Opening a database: recovery from the manifest and the logs, the
//! garbage it may delete (docs/reliability.md, "File ownership"), and the
//! read-only mode.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

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
use crate::vfs::WritableFile;
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
    #[expect(
        clippy::too_many_lines,
        reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
    )]
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let mut opts = opts;
        let dir = path.as_ref().to_path_buf();
        opts.validate()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let vfs = Arc::clone(&opts.vfs);
        // Checked before anything is created (not even LOCK), and again
        // under the lock below.
        manifest::refuse_orphaned_files(vfs.as_ref(), &dir)?;
        if opts.read_only {
            if !vfs.exists(&dir) {
                return Err(Error::InvalidArgument(format!(
                    "no database in {}",
                    dir.display()
                )));
            }
        } else {
            vfs.create_dir_all(&dir)?;
        }
        let lock = vfs.lock(&dir.join(filename::LOCK))?;
        let (stored, unreadable) = options_file::load_with_failures(vfs.as_ref(), &dir)?;
        let option_notes = options_file::reconcile(stored.as_ref(), &unreadable, &mut opts)?;
        let policy: Arc<dyn CompactionPolicy> =
            Arc::from(opts.compaction.build(opts.policy_defaults())?);
        let io = Arc::new(IoStats::default());
        let cache = (opts.block_cache_bytes > 0).then(|| BlockCache::new(opts.block_cache_bytes));
        let table_cache = Arc::new(
            TableCache::new(Arc::clone(&vfs), dir.clone(), cache, Arc::clone(&io))
                .with_mmap_reads(opts.mmap_reads)
                .with_scan_resistant_cache(opts.scan_resistant_cache)
                .with_verify_checksums(opts.verify_checksums)
                .with_max_scan_readahead(opts.max_scan_readahead_bytes)
                .with_cached_index_and_filter(
                    opts.cache_index_and_filter_blocks,
                    opts.pin_l0_filter_and_index_blocks_in_cache,
                ),
        );

        let recovered = manifest::recover(vfs.as_ref(), &dir)?;
        let mut leftovers = Vec::new();
        if recovered.is_none() {
            leftovers = manifest::refuse_orphaned_files(vfs.as_ref(), &dir)?;
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
                    table_cache: &table_cache,
                    table_options: TableOptions {
                        histogram: histogram_image(policy.as_ref()),
                        ..table_options(&opts)
                    },
                    alloc_id: &alloc,
                    smallest_snapshot: last_seq,
                    fill_cache: opts.compaction_fills_cache,
                    readahead: opts.compaction_readahead_bytes,
                    now_ms: now_ms(),
                };
                let files = flush_memtable(&ctx, &replay, policy.partitioning())?;
                if !files.is_empty() {
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
            let manifest =
                Manifest::create(vfs.as_ref(), &dir, manifest_number, &version, counters)?;
            options_file::write(vfs.as_ref(), &dir, options_number, &opts)?;
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
            for name in vfs.list(&dir)? {
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
                vfs.sync_dir(&dir)?;
            }
            let mem = Arc::new(new_memtable(&opts, wal_number));
            (version, wal_file, wal_number, manifest, mem)
        };
        let info_log = if opts.read_only {
            InfoLog::disabled()
        } else {
            InfoLog::open(vfs.as_ref(), &dir)
        };
        for note in &option_notes {
            info_log.log("options", format_args!("{note}"));
        }
        info_log.log(
            "open",
            format_args!(
                "{} manifest={} levels={} runs={} files={} bytes={} wals_replayed={:?} last_seq={last_seq} compaction={}",
                if old_manifest.is_some() { "recovered" } else { "created" },
                manifest.number(),
                version.levels.len(),
                version.run_count(),
                version.live_files().count(),
                version.levels.iter().map(|l| l.bytes()).sum::<u64>(),
                wals,
                opts.compaction
            ),
        );
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
        let mut threads = Vec::new();
        if inner.opts.read_only {
            return Ok(Db {
                inner,
                threads: Mutex::new(threads),
                closed: false,
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
        for _ in 0..inner.opts.compaction_threads {
            let i = Arc::clone(&inner);
            threads.push(spawn(
                "lamina-compact",
                Box::new(move || i.compaction_loop()),
            )?);
        }
        let i = Arc::clone(&inner);
        threads.push(spawn("lamina-trim", Box::new(move || i.trim_loop()))?);
        if let SyncMode::Interval(period) = inner.opts.sync {
            let i = Arc::clone(&inner);
            threads.push(spawn("lamina-sync", Box::new(move || i.sync_loop(period)))?);
        }
        inner.cv.notify_all();
        Ok(Db {
            inner,
            threads: Mutex::new(threads),
            closed: false,
        })
    }
}
