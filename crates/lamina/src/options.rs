//! Options of a database.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::compression::Compression;
use crate::spatial::Comparator;
use crate::vfs::{OsFs, Vfs};
use lamina_compaction::{CompactionSpec, PolicyDefaults};

/// When the write-ahead log is made durable.
///
/// Every write is appended to the WAL before it is acknowledged. The modes
/// differ in what a successful `put`/`write` guarantees:
///
/// * `None`: the record was handed to the OS with `write()` before the call
///   returned. It survives a crash of the process; a power loss or kernel
///   crash may lose it (and any later write).
/// * `Always`: the record was written and `fdatasync`ed before the call
///   returned. It survives a power loss.
/// * `Interval(d)`: as `None`, and a background thread `fdatasync`s the WAL
///   every `d`, so after a power loss at most the writes of the last `d`
///   (plus one sync) are lost; what survives is always a prefix of the
///   acknowledged writes.
///
/// In every mode, `Db::flush` returning `Ok` means all writes acknowledged
/// before it are durable in SST files referenced by an fsynced manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// `write()` per group commit, no fsync.
    #[default]
    None,
    /// `fdatasync` per group commit.
    Always,
    /// `write()` per group commit, `fdatasync` on a timer.
    Interval(Duration),
}

impl FromStr for SyncMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(SyncMode::None),
            "always" => Ok(SyncMode::Always),
            _ => {
                let ms = s
                    .strip_prefix("interval:")
                    .and_then(|n| n.trim_end_matches("ms").parse::<u64>().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        format!("sync mode must be none, always or interval:MS, not {s:?}")
                    })?;
                Ok(SyncMode::Interval(Duration::from_millis(ms)))
            }
        }
    }
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncMode::None => write!(f, "none"),
            SyncMode::Always => write!(f, "always"),
            SyncMode::Interval(d) => write!(f, "interval:{}", d.as_millis()),
        }
    }
}

/// Options of a database.
///
/// Build them with [`Options::builder`], which validates the combination,
/// or start from [`Options::default`] and assign fields. The struct is
/// `#[non_exhaustive]`: new options can be added without breaking callers,
/// so it cannot be written as a struct literal outside this crate.
///
/// ```
/// use lamina::{Compaction, Options, SyncMode};
///
/// let opts = Options::builder()
///     .write_buffer_size(4 << 20)
///     .compaction(Compaction::tiered(4))
///     .sync(SyncMode::Always)
///     .build()?;
/// assert_eq!(opts.write_buffer_size, 4 << 20);
///
/// // Or mutate a default value (checked by `Db::open`).
/// let mut opts = Options::default();
/// opts.block_cache_bytes = 0;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Filesystem used for every file operation.
    pub vfs: Arc<dyn Vfs>,
    /// Create the database (and its directory) if the directory holds none
    /// (on by default). Off, an open of a directory without a database fails
    /// with `Error::InvalidArgument` having created nothing: no directory,
    /// no `LOCK`.
    pub create_if_missing: bool,
    /// Memtable size that triggers a flush, in bytes.
    pub write_buffer_size: usize,
    /// Immutable memtables allowed to wait for a flush before writes stall.
    pub max_immutable_memtables: usize,
    /// Target size of SST data blocks.
    pub block_size: usize,
    /// Bloom filter bits per key (0 disables filters); with
    /// `bloom_monkey`, the average over all levels.
    pub bloom_bits_per_key: f64,
    /// Bloom bits per key by level, level 0 first, set by hand; the last
    /// value also covers deeper levels. Empty: `bloom_bits_per_key` (or
    /// Monkey) everywhere. Applies to files written from now on.
    pub bloom_bits_per_level: Vec<f64>,
    /// Allocate bits per level with Monkey: the memory of
    /// `bloom_bits_per_key` bits per key, spread over the levels (sized
    /// `T^i`, with T the compaction policy's own level ratio, or
    /// `size_ratio` for a policy without one) so as to minimize the sum of
    /// their false-positive rates.
    pub bloom_monkey: bool,
    /// Bits per key of the memtable's key filter (0 disables it), sized for
    /// the most entries a full buffer holds: gets of keys the memtable does
    /// not hold skip its search. Each memtable allocates it up front: at 10
    /// bits, `write_buffer_size / 57` bytes (1.1 MiB for 64 MiB).
    pub memtable_bloom_bits_per_key: f64,
    /// How SST blocks are compressed (`none`, the default; `lz4`;
    /// `zstd:LEVEL`): data, range-deletion and index blocks, each stored
    /// compressed only if that saves at least 1/8 of it. The block cache
    /// holds blocks decompressed. Applies to files written from now on:
    /// every block says how it is stored, so a database may hold files of
    /// any mix of compressions and this may change on any open.
    pub compression: Compression,
    /// Compression by level, level 0 first, the last value also covering
    /// deeper levels (RocksDB's `compression_per_level`): e.g. `[none,
    /// none, lz4]` keeps the two levels that are rewritten most often raw
    /// and compresses the rest. Empty (the default): `compression`
    /// everywhere.
    pub compression_per_level: Vec<Compression>,
    /// Block cache capacity in bytes (0 disables the cache).
    pub block_cache_bytes: usize,
    /// Whether tables' index and filter blocks are read through the block
    /// cache, charged to its capacity and evicted like data blocks
    /// (RocksDB's `cache_index_and_filter_blocks`; seed 001's setup). Off
    /// (the default): a table reads them when it opens and holds them
    /// until it closes, outside the cache. On: a get or seek that finds
    /// them evicted reads them back from the file, a miss counted in
    /// `DbStats::cache_misses` (`index`, `filter`). Needs a block cache
    /// (`block_cache_bytes` > 0); without one, tables hold them.
    pub cache_index_and_filter_blocks: bool,
    /// With `cache_index_and_filter_blocks`, level-0 tables' index and
    /// filter blocks are pinned while the table is in level 0: charged to
    /// the block cache but never evicted (RocksDB's
    /// `pin_l0_filter_and_index_blocks_in_cache`). Every lookup probes
    /// each level-0 table, so these are the hottest metadata blocks.
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// Size ratio T between adjacent levels for compaction specs that leave
    /// it out, and Monkey's T under a policy that has none.
    pub size_ratio: usize,
    /// Target size of SST files written by compactions.
    pub target_file_size: u64,
    /// Whether blocks that compactions read from disk enter the block cache.
    /// Off by default, as in LevelDB and seed 002: only queries fill the
    /// cache, so a merge does not evict the blocks reads are using.
    pub compaction_fills_cache: bool,
    /// Bytes a merge reads from each input file at a time (RocksDB's
    /// `compaction_readahead_size`, 2 MiB by default as there): on a disk,
    /// one seek per chunk of consecutive blocks instead of one per block,
    /// even while queries read the same file. 0 reads block by block. Each
    /// input run of a running merge holds one such buffer.
    pub compaction_readahead_bytes: usize,
    /// Incremental warm-up (seed 002 §6's baseline, after Ahmad and Kemme):
    /// before a compaction's inputs leave the block cache, the output blocks
    /// whose key ranges overlap their cached blocks are read into it.
    pub compaction_warm_up: bool,
    /// Row cache capacity in bytes (0, the default, disables it): the newest
    /// value of keys read by `Db::get`, which compactions leave valid and
    /// writes invalidate (Cassandra's row cache; seed 002's "KV cache").
    pub row_cache_bytes: usize,
    /// Compaction strategy, e.g. `"leveling:T=4".parse()?`; its `T` and
    /// `file` default to `size_ratio` and `target_file_size`.
    pub compaction: CompactionSpec,
    /// Background compaction threads.
    pub compaction_threads: usize,
    /// Threads that read a range scan's sorted runs (seed 004's RANGE
    /// thread pool). 1, the default, reads them on the scanning thread, one
    /// block at a time as the merge asks. More starts a pool of that many
    /// workers, owned by the database and stopped on close: a forward
    /// scan (`Db::scan`, `Snapshot::scan`) has each run read ahead on the
    /// pool in bounded batches while its own thread merges them, so the
    /// runs' block reads overlap. Memory per scan stays bounded (see
    /// `docs/architecture.md`, "Parallel range scans"); cursors and reverse
    /// scans read on the caller's thread.
    pub scan_threads: usize,
    /// Runs in level 0 at which writes stall until compactions catch up
    /// (0 = never stall on runs).
    pub level0_stop_runs: usize,
    /// Compactions have priority over writes, for every strategy (seed
    /// 001's setup, which the `full` preset's `block` applies to `full`
    /// alone): a write that fills the memtable waits, before the memtable
    /// becomes a flush, until the previous flushes are done and no
    /// compaction runs or can be picked, so the tree takes each flush in
    /// the shape its strategy defines. Writes into the active memtable are
    /// not held. The wait ends early on shutdown, on a compaction error and
    /// during a manual compaction, as the policy's own stall does.
    pub writes_wait_for_compactions: bool,
    /// WAL durability mode.
    pub sync: SyncMode,
    /// Log writes before applying them (the default). Off, writes reach only
    /// the memtable and are lost in a crash until flushed: for a caller that
    /// keeps its own log, as the `lamina-dataset` crate's `Dataset` does for
    /// all its indexes at once.
    pub write_ahead_log: bool,
    /// Compaction policies size levels in flushes (`TreeView::memtable_bytes`):
    /// off (the default), a flush is `write_buffer_size`; on, it is the mean
    /// size of this database's flushes so far, as the simulator counts. For
    /// a database flushed from outside before its buffer fills: a
    /// dataset's indexes flush together at a shared budget, so each index's
    /// flush is its share of the budget, not the budget.
    pub plan_with_mean_flush: bool,
    /// Keys are points laid out by this comparator (a spatial index, the
    /// LSM R-tree of seed 000 ch. 4): tables keep the MBR of each block and
    /// file, and [`crate::Db::window`] answers window queries. `None` (the
    /// default) for ordinary keys. Use the same comparator on every open:
    /// the OPTIONS file records it, and `Db::open` refuses another with
    /// [`crate::Error::IncompatibleOption`].
    pub spatial: Option<Comparator>,
    /// Open for reads only: recovery replays the logs into memory but
    /// writes nothing (no new log, no manifest, no garbage collection, no
    /// flush or compaction), so a database on a full disk can still be read.
    /// Writes, `flush` and `compact_range` fail with `Error::ReadOnly`.
    ///
    /// A read-only open takes no lock (RocksDB's read-only instance): any
    /// number of them may run beside each other and beside the writer (a
    /// server, a writing `Db`, in this process or another). Each reads the
    /// database as of its open, holding that version's tables open, so the
    /// writer's compactions (which delete the tables they replace) do not
    /// disturb it; later writes are invisible to it until it is opened
    /// again (docs/durability.md, "Read-only opens").
    pub read_only: bool,
    /// Read SSTs through a read-only memory map of each file (RocksDB's
    /// `allow_mmap_reads`, LevelDB's default on 64-bit systems) where the
    /// file system maps files ([`crate::vfs::OsFs`] does; the test,
    /// fault-injecting and direct-I/O ones do not): a block-cache miss takes
    /// a slice of the page cache instead of copying the block out with
    /// `pread` (a file that cannot be mapped is read with `pread`, with a
    /// warning in the log). Off by default: an I/O error on a mapped page,
    /// or another process truncating an SST, kills the process with
    /// `SIGBUS` instead of returning an error (see [`crate::vfs::Mapping`]).
    pub mmap_reads: bool,
    /// Scan-resistant block cache (on by default): a block a query's
    /// iterator steps into from the previous one enters the cache as its
    /// least recently used block, which the next insertion evicts unless a
    /// read touches it first; a block an iterator seeks to, or a point read
    /// reads, enters as the most recently used. A long scan then cycles through one
    /// block per cache shard instead of evicting the blocks point reads
    /// use. Off, every block a query reads enters as most recently used
    /// (LevelDB's and RocksDB's `fill_cache = true`).
    pub scan_resistant_cache: bool,
    /// Verify the CRC32C of every data block a query reads from a file
    /// (RocksDB's and LevelDB's `ReadOptions::verify_checksums`; on by
    /// default, as RocksDB's). A block is checked when it comes from the
    /// file, never on a block-cache hit. Off, queries (gets, scans,
    /// cursors) skip the check: a corrupt block then yields wrong data or a
    /// decoding error, never a crash. Compactions, `Db::verify` and the
    /// metadata blocks read when a table opens always verify, and a block a
    /// query cached unverified is re-read and checked before a compaction
    /// (or a verifying reader) uses it, so corruption is never merged into a
    /// new file. A per-open setting, as lamina has no per-read options:
    /// not persisted in the OPTIONS file.
    pub verify_checksums: bool,
    /// Seek-triggered compaction (on by default): reads charge level 0
    /// for the seeks it costs them (a cursor positioning in its runs
    /// beside the deeper levels', a get reading a level-0 block that does
    /// not hold its key), and once they have spent its allowance (one
    /// seek per 16 KiB of level 0, at least 100, LevelDB's
    /// `allowed_seeks`) the policy's
    /// [`pick_for_reads`](lamina_compaction::CompactionPolicy::pick_for_reads)
    /// merges it below its trigger (leveling: into level 1). A database
    /// read at rest then positions a seek in one run per level instead of
    /// one per flush (`bench/read-path.md`, "Seeks at rest"), for one more
    /// merge of level 0 than writes alone would make. A new set of
    /// level-0 files starts a new allowance. Off: only writes trigger
    /// compactions. A per-open setting, not persisted.
    pub seek_compaction: bool,
    /// The largest chunk a scan reads ahead, in bytes (256 KiB by default,
    /// RocksDB's `max_auto_readahead_size`; 0: scans read block by block).
    /// A query's iterator that steps forward into two blocks of a table in
    /// a row reads the blocks after it in chunks of 16 KiB, doubling per
    /// read up to this: one system call (one seek on a disk) per chunk
    /// instead of one per block. Point reads and seeks are unchanged;
    /// mapped tables (`mmap_reads`) rely on the kernel's readahead. A
    /// per-open setting, not persisted.
    pub max_scan_readahead_bytes: usize,
    /// Table files kept for reuse once their tables are obsolete (0, the
    /// default: each is deleted). A new table then takes one of them over
    /// ([`crate::vfs::Vfs::reuse`]: renamed and overwritten in place)
    /// instead of creating a file, as RocksDB's `recycle_log_file_num`
    /// does for logs. On ext4 this spares the inode allocation (its scan
    /// for recently deleted inodes) and block allocation of every new
    /// file: a policy that writes many small files (seed 000's
    /// Global-Range partitioning at a small θ) spends most of a file's
    /// cost there. Up to this many obsolete files stay on disk (their
    /// space is not returned) until reused, or deleted when the database
    /// closes; after a crash, the next open deletes them with the other
    /// unreferenced tables. A per-open setting, not persisted.
    pub recycle_table_files: usize,
    /// Set by [`OptionsBuilder::from_stored_options`]: the fields the
    /// builder set; `Db::open` takes every other stored field from the
    /// database's newest OPTIONS file. `None`: these options are used as
    /// they are.
    pub(crate) explicit: Option<Vec<&'static str>>,
}

/// The most scan threads [`Options::validate`] accepts: a pool far above
/// any core count only adds switches.
pub const MAX_SCAN_THREADS: usize = 256;

/// A setting [`Options::validate`] refuses: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct InvalidOption {
    /// The `Options` field.
    pub field: &'static str,
    /// What it must be, and what it was.
    pub reason: String,
}

impl Options {
    /// Bytes each memtable allocates for its key filter
    /// (`memtable_bloom_bits_per_key` bits for the most entries a
    /// `write_buffer_size` buffer holds): what a peer engine's memtable
    /// filter is given in a comparison.
    pub fn memtable_filter_bytes(&self) -> usize {
        crate::key_filter::key_filter_bytes(
            self.write_buffer_size,
            self.memtable_bloom_bits_per_key,
        )
    }

    /// The compression of files written into `level`:
    /// [`Options::compression_per_level`] if set, else
    /// [`Options::compression`].
    pub fn compression_for(&self, level: usize) -> Compression {
        match self.compression_per_level.last() {
            Some(last) => *self.compression_per_level.get(level).unwrap_or(last),
            None => self.compression,
        }
    }

    /// Checks every setting, in one place: `Db::open` refuses what this
    /// refuses, and front ends (the CLI) call it to name their own flag.
    pub fn validate(&self) -> Result<(), InvalidOption> {
        let bad = |field, reason: String| Err(InvalidOption { field, reason });
        let bits_ok = |b: f64| (0.0..=64.0).contains(&b);
        if self.write_buffer_size < 1024 {
            return bad(
                "write_buffer_size",
                format!(
                    "must be at least 1 KiB, got {} bytes",
                    self.write_buffer_size
                ),
            );
        }
        if !(64..=(64 << 20)).contains(&self.block_size) {
            return bad(
                "block_size",
                format!("must be within 64 B ..= 64 MiB, got {}", self.block_size),
            );
        }
        if !bits_ok(self.bloom_bits_per_key) {
            return bad(
                "bloom_bits_per_key",
                format!("must be within 0 ..= 64, got {}", self.bloom_bits_per_key),
            );
        }
        if let Some(b) = self.bloom_bits_per_level.iter().find(|b| !bits_ok(**b)) {
            return bad(
                "bloom_bits_per_level",
                format!("values must be within 0 ..= 64, got {b}"),
            );
        }
        if !bits_ok(self.memtable_bloom_bits_per_key) {
            return bad(
                "memtable_bloom_bits_per_key",
                format!(
                    "must be within 0 ..= 64, got {}",
                    self.memtable_bloom_bits_per_key
                ),
            );
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables", "must be at least 1".into());
        }
        if self.size_ratio < 2 {
            return bad(
                "size_ratio",
                format!("must be at least 2, got {}", self.size_ratio),
            );
        }
        if self.compaction_threads == 0 {
            return bad("compaction_threads", "must be at least 1".into());
        }
        if !(1..=MAX_SCAN_THREADS).contains(&self.scan_threads) {
            return bad(
                "scan_threads",
                format!(
                    "must be within 1 ..= {MAX_SCAN_THREADS}, got {}",
                    self.scan_threads
                ),
            );
        }
        // A spec parsed alone was checked with the default sizes; its `T`
        // and `file` may come from these options.
        if let Err(e) = self.compaction.build(self.policy_defaults()) {
            return bad("compaction", e.to_string());
        }
        Ok(())
    }

    /// The sizes a compaction spec takes when it leaves them out.
    pub fn policy_defaults(&self) -> PolicyDefaults {
        PolicyDefaults {
            size_ratio: self.size_ratio,
            target_file_size: self.target_file_size,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            vfs: Arc::new(OsFs),
            create_if_missing: true,
            write_buffer_size: 64 << 20,
            max_immutable_memtables: 2,
            block_size: 4096,
            bloom_bits_per_key: 10.0,
            bloom_bits_per_level: Vec::new(),
            bloom_monkey: false,
            memtable_bloom_bits_per_key: 10.0,
            compression: Compression::None,
            compression_per_level: Vec::new(),
            block_cache_bytes: 64 << 20,
            cache_index_and_filter_blocks: false,
            pin_l0_filter_and_index_blocks_in_cache: false,
            size_ratio: 10,
            target_file_size: 16 << 20,
            compaction_fills_cache: false,
            compaction_readahead_bytes: 2 << 20,
            compaction_warm_up: false,
            row_cache_bytes: 0,
            compaction: CompactionSpec::default(),
            compaction_threads: 1,
            scan_threads: 1,
            level0_stop_runs: 12,
            writes_wait_for_compactions: false,
            sync: SyncMode::None,
            write_ahead_log: true,
            plan_with_mean_flush: false,
            spatial: None,
            read_only: false,
            mmap_reads: false,
            scan_resistant_cache: true,
            verify_checksums: true,
            seek_compaction: true,
            max_scan_readahead_bytes: 256 << 10,
            recycle_table_files: 0,
            explicit: None,
        }
    }
}

/// The typed compaction strategy the builder takes: a registry name with
/// parameters, e.g. `Compaction::tiered(4)`, `Compaction::leveling(10)` or
/// `Compaction::parse("lo1")?` (an alias of
/// [`crate::compaction::CompactionSpec`]).
///
/// ```
/// use lamina::Compaction;
///
/// assert_eq!(Compaction::tiered(4).to_string(), "tiered:T=4");
/// assert_eq!(Compaction::leveling(10).to_string(), "leveling:T=10");
/// let lo1 = Compaction::parse("lo1")?; // any strategy of the registry
/// assert_eq!(lo1.name(), "lo1");
/// assert!(Compaction::parse("no-such-strategy").is_err());
/// # Ok::<(), lamina::compaction::Error>(())
/// ```
pub type Compaction = CompactionSpec;

/// Builds [`Options`]: one chainable setter per option, then
/// [`OptionsBuilder::build`] checks the combination.
///
/// ```
/// use lamina::{Compaction, Options};
///
/// let opts = Options::builder()
///     .write_buffer_size(1 << 20)
///     .size_ratio(4)
///     .compaction(Compaction::leveling(4))
///     .build()?;
/// assert_eq!(opts.compaction.to_string(), "leveling:T=4");
///
/// // Combinations are checked: a 1-run size ratio is refused by name.
/// let err = Options::builder().size_ratio(1).build().unwrap_err();
/// assert_eq!(err.field, "size_ratio");
/// # Ok::<(), lamina::InvalidOption>(())
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct OptionsBuilder {
    opts: Options,
    /// Fields set, in order, each once.
    set: Vec<&'static str>,
    from_stored: bool,
}

impl Options {
    /// A builder starting from [`Options::default`].
    pub fn builder() -> OptionsBuilder {
        OptionsBuilder::default()
    }
}

macro_rules! setters {
    ($($field:ident: $ty:ty),* $(,)?) => {
        impl OptionsBuilder {
            $(
                #[doc = concat!("Sets [`Options::", stringify!($field), "`].")]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.opts.$field = value;
                    self.mark(stringify!($field))
                }
            )*
        }
    };
}

/// Calls `$m!` with every option that describes the database (all but the
/// per-open `vfs`, `create_if_missing`, `read_only`, `mmap_reads`,
/// `scan_resistant_cache`, `verify_checksums`, `seek_compaction`,
/// `max_scan_readahead_bytes` and `recycle_table_files`): the builder's
/// setters and the OPTIONS file (`options_file.rs`) are generated from
/// this one list, so a new option cannot be left out of either.
macro_rules! with_database_options {
    ($m:ident) => {
        $m! {
            write_buffer_size: usize,
            max_immutable_memtables: usize,
            block_size: usize,
            bloom_bits_per_key: f64,
            bloom_bits_per_level: Vec<f64>,
            bloom_monkey: bool,
            memtable_bloom_bits_per_key: f64,
            compression: crate::compression::Compression,
            compression_per_level: Vec<crate::compression::Compression>,
            block_cache_bytes: usize,
            cache_index_and_filter_blocks: bool,
            pin_l0_filter_and_index_blocks_in_cache: bool,
            size_ratio: usize,
            target_file_size: u64,
            compaction_fills_cache: bool,
            compaction_readahead_bytes: usize,
            compaction_warm_up: bool,
            row_cache_bytes: usize,
            compaction: lamina_compaction::CompactionSpec,
            compaction_threads: usize,
            scan_threads: usize,
            level0_stop_runs: usize,
            writes_wait_for_compactions: bool,
            sync: SyncMode,
            write_ahead_log: bool,
            plan_with_mean_flush: bool,
            spatial: Option<Comparator>,
        }
    };
}
pub(crate) use with_database_options;

with_database_options!(setters);
setters! {
    create_if_missing: bool,
    read_only: bool,
    mmap_reads: bool,
    scan_resistant_cache: bool,
    verify_checksums: bool,
    seek_compaction: bool,
    max_scan_readahead_bytes: usize,
    recycle_table_files: usize,
}

impl OptionsBuilder {
    fn mark(mut self, field: &'static str) -> Self {
        if !self.set.contains(&field) {
            self.set.push(field);
        }
        self
    }

    /// Sets [`Options::vfs`].
    pub fn vfs(mut self, vfs: Arc<dyn Vfs>) -> Self {
        self.opts.vfs = vfs;
        self.mark("vfs")
    }

    /// Takes every stored option this builder does not set from the
    /// database's newest `OPTIONS-NNNNNN` file when [`crate::Db::open`]
    /// opens it, as if the caller had set it to the stored value (RocksDB's
    /// `LoadLatestOptions` followed by changes). A new database, or one
    /// whose OPTIONS files are all unreadable, gets the builder's values.
    /// Without this call, the built options are used as they are, and only
    /// changes that would misread the data (the spatial comparator) are
    /// refused ([`crate::Error::IncompatibleOption`]).
    pub fn from_stored_options(mut self) -> Self {
        self.from_stored = true;
        self
    }

    /// The options, once [`Options::validate`] accepts them.
    pub fn build(self) -> Result<Options, InvalidOption> {
        let mut opts = self.opts;
        opts.validate()?;
        if self.from_stored {
            opts.explicit = Some(self.set);
        }
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_mode_parses_and_prints() {
        for s in ["none", "always", "interval:250"] {
            assert_eq!(s.parse::<SyncMode>().unwrap().to_string(), s);
        }
        assert!("interval:0".parse::<SyncMode>().is_err());
        assert!("sometimes".parse::<SyncMode>().is_err());
    }

    #[test]
    fn the_builder_sets_each_field_and_validates_the_whole() {
        let o = Options::builder()
            .write_buffer_size(4096)
            .size_ratio(4)
            .compaction(Compaction::tiered(4))
            .sync(SyncMode::Always)
            .spatial(Some(Comparator::Hilbert))
            .build()
            .unwrap();
        assert_eq!(o.write_buffer_size, 4096);
        assert_eq!(o.size_ratio, 4);
        assert_eq!(o.compaction.to_string(), "tiered:T=4");
        assert_eq!(o.sync, SyncMode::Always);
        assert_eq!(o.spatial, Some(Comparator::Hilbert));
        // Untouched fields keep their defaults; nothing is marked for
        // reloading unless asked.
        assert_eq!(o.block_size, Options::default().block_size);
        assert_eq!(o.explicit, None);
        let err = Options::builder()
            .write_buffer_size(10)
            .build()
            .unwrap_err();
        assert_eq!(err.field, "write_buffer_size");
        // A spec valid alone may be invalid with these sizes.
        let err = Options::builder()
            .compaction(Compaction::leveling(1))
            .build()
            .unwrap_err();
        assert_eq!(err.field, "compaction");
        let o = Options::builder()
            .block_size(128)
            .block_size(256)
            .from_stored_options()
            .build()
            .unwrap();
        assert_eq!(o.explicit, Some(vec!["block_size"]));
    }

    #[test]
    fn compression_by_level() {
        let mut o = Options::default();
        assert!((0..9).all(|l| o.compression_for(l) == Compression::None));
        o.compression = Compression::Lz4;
        assert!((0..9).all(|l| o.compression_for(l) == Compression::Lz4));
        o.compression_per_level = vec![Compression::None, Compression::None, Compression::Zstd(3)];
        let by_level: Vec<Compression> = (0..5).map(|l| o.compression_for(l)).collect();
        use Compression::{None as N, Zstd};
        assert_eq!(by_level, [N, N, Zstd(3), Zstd(3), Zstd(3)]);
    }

    #[test]
    fn memtable_filter_is_about_a_57th_of_the_buffer_at_ten_bits() {
        let o = Options::default();
        let ratio = o.write_buffer_size as f64 / o.memtable_filter_bytes() as f64;
        assert!((57.0..58.0).contains(&ratio), "{ratio}");
        let off = Options::builder()
            .memtable_bloom_bits_per_key(0.0)
            .build()
            .unwrap();
        assert_eq!(off.memtable_filter_bytes(), 0);
    }

    #[test]
    fn every_bad_setting_is_named() {
        assert_eq!(Options::default().validate(), Ok(()));
        let field = |o: Options| o.validate().err().map(|e| e.field);
        let d = Options::default;
        assert_eq!(
            field(Options {
                write_buffer_size: 1023,
                ..d()
            }),
            Some("write_buffer_size")
        );
        assert_eq!(
            field(Options {
                block_size: 63,
                ..d()
            }),
            Some("block_size")
        );
        assert_eq!(
            field(Options {
                bloom_bits_per_key: f64::NAN,
                ..d()
            }),
            Some("bloom_bits_per_key")
        );
        assert_eq!(
            field(Options {
                bloom_bits_per_level: vec![8.0, 65.0],
                ..d()
            }),
            Some("bloom_bits_per_level")
        );
        assert_eq!(
            field(Options {
                memtable_bloom_bits_per_key: -1.0,
                ..d()
            }),
            Some("memtable_bloom_bits_per_key")
        );
        assert_eq!(
            field(Options {
                max_immutable_memtables: 0,
                ..d()
            }),
            Some("max_immutable_memtables")
        );
        assert_eq!(
            field(Options {
                size_ratio: 1,
                ..d()
            }),
            Some("size_ratio")
        );
        assert_eq!(
            field(Options {
                compaction_threads: 0,
                ..d()
            }),
            Some("compaction_threads")
        );
        for scan_threads in [0, MAX_SCAN_THREADS + 1] {
            assert_eq!(
                field(Options {
                    scan_threads,
                    ..d()
                }),
                Some("scan_threads")
            );
        }
    }
}
