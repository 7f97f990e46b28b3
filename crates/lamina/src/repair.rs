//! `lamina repair DIR`: rebuilds a database whose `CURRENT` or manifest is
//! missing or damaged from the files that are intact (LevelDB's `RepairDB`,
//! RocksDB's `ldb repair`).
//!
//! 1. Takes the directory lock.
//! 2. Checks every SST (`Table::verify`: every block's checksum, structure
//!    and key order, the filter, the properties). A table that fails is not
//!    used.
//! 3. Salvages every WAL, oldest first: the records before the first one
//!    that fails its checksum (or does not decode) are kept; a torn tail (a
//!    crash during an append) ends a log normally. After a damaged record
//!    nothing more is applied, from that log or any later one, so the result
//!    is still a prefix of the write history. Entries whose sequence number
//!    a kept table already covers are skipped (memtables flush in sequence
//!    order, so a table holds every older entry).
//! 4. Merges the kept tables and the salvaged log entries into one sorted
//!    run of new tables through the engine's own compaction executor,
//!    keeping the newest version of every key (a table left twice by a crash
//!    during a compaction counts once).
//! 5. Moves every old table, log and manifest to `DIR/lost/` (never deletes
//!    anything; a name already there gets a `.1`, `.2`, … suffix) before it
//!    writes the new manifest and `CURRENT`, so that a crash at any point
//!    leaves a directory that repair can be run on again.
//!
//! Tables that only an LSbM compaction buffer holds (known when the
//! manifest can still be read) are not salvaged: they are older copies of
//! the tree's data and could bring back keys deleted since. With the
//! manifest lost they cannot be told apart, and a key deleted while such a
//! copy existed may come back (docs/reliability.md).
//!
//! Files with names lamina does not write are not touched.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::batch::decode_record;
use crate::clock::now_ms;
use crate::compaction::{execute, flush_memtable, CompactionContext, CompactionTask, OutputRun};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind, FileNumbers};
use crate::manifest::{Counters, Manifest};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::record::read_records;
use crate::sst::{Table, TableOptions};
use crate::stats::IoStats;
use crate::tables::TableCache;
use crate::version::{FileMeta, Version, VersionEdit};
use crate::vfs::Vfs;

/// The directory, under the database's, that receives every file repair
/// replaces or cannot use.
pub const LOST_DIR: &str = "lost";

/// What one write-ahead log gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalSalvage {
    /// File name.
    pub name: String,
    /// Records applied (or already covered by a kept table).
    pub records_kept: u64,
    /// Bytes of those records.
    pub bytes_kept: u64,
    /// Bytes not applied (after a damaged record, or the whole log after a
    /// hole in an earlier one).
    pub bytes_dropped: u64,
    /// Why the log was cut, if it was: the damage and its offset, or the
    /// earlier log whose hole ended the history.
    pub cut: Option<String>,
}

/// What [`repair`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// SSTs that verified and were merged: count, bytes, entries.
    pub tables_kept: (usize, u64, u64),
    /// SSTs that failed verification, with the problem.
    pub tables_lost: Vec<(String, String)>,
    /// Every log, oldest first.
    pub wals: Vec<WalSalvage>,
    /// Log entries applied to the rebuilt tree.
    pub wal_entries_applied: u64,
    /// The rebuilt tree: tables, bytes, entries.
    pub output: (usize, u64, u64),
    /// The new manifest.
    pub manifest: String,
    /// Largest sequence number kept.
    pub last_seq: u64,
    /// Files moved to `lost/` (old tables, logs, manifests, `CURRENT`).
    pub moved_to_lost: Vec<String>,
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, bytes, entries) = self.tables_kept;
        writeln!(
            f,
            "tables: {n} verified ({bytes} bytes, {entries} entries), {} damaged",
            self.tables_lost.len()
        )?;
        for (name, why) in &self.tables_lost {
            writeln!(f, "  dropped {name}: {why}")?;
        }
        for w in &self.wals {
            write!(
                f,
                "log {}: {} records kept ({} bytes)",
                w.name, w.records_kept, w.bytes_kept
            )?;
            match &w.cut {
                Some(why) => writeln!(f, ", {} bytes dropped: {why}", w.bytes_dropped)?,
                None => writeln!(f)?,
            }
        }
        let (n, bytes, entries) = self.output;
        writeln!(
            f,
            "rebuilt: {n} tables ({bytes} bytes, {entries} entries; {} from logs), {}, last sequence {}",
            self.wal_entries_applied, self.manifest, self.last_seq
        )?;
        write!(
            f,
            "moved {} old files to {LOST_DIR}/ (delete it once the database checks out)",
            self.moved_to_lost.len()
        )
    }
}

/// Tables that the manifest, if it can be read, lists only in compaction
/// buffers.
fn buffer_only_tables(vfs: &dyn Vfs, dir: &Path) -> HashSet<u64> {
    match crate::manifest::recover(vfs, dir) {
        Ok(Some((version, _, _))) => {
            let in_runs: HashSet<u64> = version.files().map(|(_, _, f)| f.id).collect();
            version
                .live_files()
                .map(|f| f.id)
                .filter(|id| !in_runs.contains(id))
                .collect()
        }
        _ => HashSet::new(),
    }
}

/// Rebuilds the database in `dir`; see the module docs. `opts` gives the
/// file system and the table format of the new files.
#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
pub fn repair(dir: &Path, opts: &Options) -> Result<RepairReport> {
    let vfs = Arc::clone(&opts.vfs);
    if !vfs.exists(dir) {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist",
            dir.display()
        )));
    }
    let _lock = vfs.lock(&dir.join(filename::LOCK))?;
    let mut tables = Vec::new();
    let mut wals = Vec::new();
    let mut manifests = Vec::new();
    let mut max_number = 0;
    for name in vfs.list(dir)? {
        if let Some((kind, n)) = filename::parse(&name) {
            max_number = max_number.max(n);
            match kind {
                FileKind::Table => tables.push(n),
                FileKind::Wal => wals.push(n),
                FileKind::Manifest => manifests.push(n),
                // Kept as they are: a repaired database reads them.
                FileKind::Options | FileKind::OptionsTemp => {}
            }
        }
    }
    tables.sort_unstable();
    wals.sort_unstable();
    let io = Arc::new(IoStats::default());
    let table_cache = Arc::new(TableCache::new(
        Arc::clone(&vfs),
        dir.to_path_buf(),
        None,
        io,
    ));
    let mut report = RepairReport::default();

    // Files only an LSbM compaction buffer holds are copies of data the
    // tree already has, some older than what the tree kept (a buffer can
    // hold a value whose tombstone the tree dropped): salvaged as data, they
    // could bring deleted keys back. A readable manifest names them; they go
    // to `lost/` with the other old files.
    let buffer_only = buffer_only_tables(vfs.as_ref(), dir);
    let mut kept: Vec<FileMeta> = Vec::new();
    for &n in tables.iter().filter(|n| !buffer_only.contains(n)) {
        match check_table(&table_cache, n) {
            Ok(meta) => kept.push(meta),
            // Damage drops the table; any other failure (an I/O error) stops
            // the repair before it changed anything: a table that could not
            // be read is not a damaged one.
            Err(e) if is_damage(&e) => report
                .tables_lost
                .push((filename::sst_name(n), e.to_string())),
            Err(e) => return Err(e),
        }
    }
    report.tables_kept = (
        kept.len(),
        kept.iter().map(|m| m.size).sum(),
        kept.iter().map(|m| m.entries).sum(),
    );
    let covered_seq = kept.iter().map(|m| m.largest_seq).max().unwrap_or(0);

    let mem = Arc::new(MemTable::new(0));
    let now = now_ms();
    let mut hole: Option<String> = None;
    let mut last_seq = covered_seq;
    for &n in &wals {
        let name = filename::wal_name(n);
        let data = vfs.read_all(&dir.join(&name))?;
        let mut salvage = WalSalvage {
            name: name.clone(),
            ..WalSalvage::default()
        };
        if let Some(earlier) = &hole {
            salvage.bytes_dropped = data.len() as u64;
            salvage.cut = Some(format!("after the damage in {earlier}"));
            report.wals.push(salvage);
            continue;
        }
        let mut applied = 0u64;
        let end = salvage_prefix(&data, &name, |payload| {
            decode_record(payload, |seq, e| {
                if seq > covered_seq {
                    mem.add_entry(seq, &e, now);
                    applied += 1;
                    last_seq = last_seq.max(seq);
                }
            })
            .is_some()
        });
        report.wal_entries_applied += applied;
        salvage.records_kept = end.records;
        salvage.bytes_kept = end.valid_len;
        salvage.bytes_dropped = data.len() as u64 - end.valid_len;
        if let Some(why) = end.damage {
            salvage.cut = Some(format!("{why} at offset {}", end.valid_len));
            hole = Some(name);
        } else if salvage.bytes_dropped > 0 {
            salvage.cut = Some(format!("torn tail at offset {}", end.valid_len));
        }
        report.wals.push(salvage);
    }

    // The kept tables and the log entries as level-0 runs, merged into one.
    let numbers = FileNumbers {
        next: AtomicU64::new(max_number + 1),
        reserved: Vec::new(),
    };
    let alloc = || numbers.alloc();
    let ctx = CompactionContext {
        table_cache: &table_cache,
        table_options: TableOptions {
            block_size: opts.block_size,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            // The rebuilt tree is one level-0 run.
            compression: opts.compression_for(0),
            ..TableOptions::default()
        },
        alloc_id: &alloc,
        smallest_snapshot: last_seq,
        fill_cache: false,
        readahead: opts.compaction_readahead_bytes,
        now_ms: now,
    };
    let mut edit = VersionEdit::default();
    kept.sort_by_key(|m| m.largest_seq);
    for meta in kept {
        edit.add_flushed_run(alloc(), vec![meta]);
    }
    if !mem.is_empty() {
        let files = flush_memtable(&ctx, &mem, None)?;
        edit.add_flushed_run(alloc(), files);
    }
    let mut version = Version::default().apply(&edit)?;
    if let Some(level) = version.levels.first() {
        let task = CompactionTask {
            inputs: level
                .runs
                .iter()
                .map(|r| crate::compaction::TaskInput {
                    level: 0,
                    run_id: r.id,
                    file_ids: r.files.iter().map(|f| f.id).collect(),
                })
                .collect(),
            output_level: 0,
            output_run: OutputRun::New,
            target_file_size: opts.target_file_size,
            partitioning: None,
            buffer: None,
            reason: "repair: merge every salvaged table".into(),
        };
        version = version.apply(&execute(&ctx, &version, &task)?.edit)?;
    }
    let live: HashSet<u64> = version.files().map(|(_, _, f)| f.id).collect();
    report.output = (
        live.len(),
        version.files().map(|(_, _, f)| f.size).sum(),
        version.files().map(|(_, _, f)| f.entries).sum(),
    );
    report.last_seq = last_seq;

    // Everything old leaves before the new manifest names the new tree.
    let lost = dir.join(LOST_DIR);
    vfs.create_dir_all(&lost)?;
    let old_data = tables
        .iter()
        .filter(|n| !live.contains(n))
        .map(|&n| filename::sst_name(n))
        .chain(wals.iter().map(|&n| filename::wal_name(n)));
    for name in old_data.collect::<Vec<_>>() {
        report
            .moved_to_lost
            .push(move_to_lost(vfs.as_ref(), dir, &lost, &name)?);
    }
    vfs.sync_dir(&lost)?;
    vfs.sync_dir(dir)?;
    let manifest_number = alloc();
    let counters = Counters {
        log_number: numbers.peek(),
        next_file_number: numbers.peek(),
        last_seq,
    };
    Manifest::create(vfs.as_ref(), dir, manifest_number, &version, counters)?;
    report.manifest = filename::manifest_name(manifest_number);
    for name in manifests
        .iter()
        .map(|&n| filename::manifest_name(n))
        .chain([filename::CURRENT_TMP.to_string()])
    {
        if vfs.exists(&dir.join(&name)) {
            report
                .moved_to_lost
                .push(move_to_lost(vfs.as_ref(), dir, &lost, &name)?);
        }
    }
    vfs.sync_dir(&lost)?;
    vfs.sync_dir(dir)?;
    Ok(report)
}

/// Opens and fully checks table `n`; its metadata comes from its properties.
fn check_table(table_cache: &TableCache, n: u64) -> Result<FileMeta> {
    let name = filename::sst_name(n);
    let file = table_cache.vfs.open_read(&table_cache.path(n))?;
    let table = Table::open(file, n, name, None, Arc::clone(&table_cache.stats))?;
    table.verify()?;
    let meta = FileMeta::from_properties(n, table.properties(), now_ms());
    Ok(meta)
}

/// Whether `e` says a file's bytes are bad (a checksum, a structure, a
/// file shorter than its own footer says), rather than that reading failed.
fn is_damage(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::UnexpectedEof,
        e => e.is_corruption(),
    }
}

/// Renames `dir/name` into `lost`, under a free name; returns the name used.
fn move_to_lost(vfs: &dyn Vfs, dir: &Path, lost: &Path, name: &str) -> Result<String> {
    let mut target: PathBuf = lost.join(name);
    let mut used = name.to_string();
    let mut i = 0;
    while vfs.exists(&target) {
        i += 1;
        used = format!("{name}.{i}");
        target = lost.join(&used);
    }
    vfs.rename(&dir.join(name), &target)?;
    Ok(format!("{LOST_DIR}/{used}"))
}

/// Where the salvageable prefix of a log ends.
struct Prefix {
    valid_len: u64,
    records: u64,
    /// Why reading stopped before the end, unless it was a torn tail.
    damage: Option<String>,
}

/// Calls `apply` on the payload of every record of `data` up to the first
/// damaged one (a checksum mismatch, or a payload `apply` rejects). A torn
/// tail (the file ends inside a record, or in zeros) is no damage: it is
/// where an interrupted append stopped.
fn salvage_prefix(data: &[u8], name: &str, mut apply: impl FnMut(&[u8]) -> bool) -> Prefix {
    let mut records = 0;
    let read = read_records(data, name, |offset, payload| {
        if !apply(payload) {
            return Err(Error::corruption(name, offset, "malformed write batch"));
        }
        records += 1;
        Ok(())
    });
    match read {
        Ok(end) => Prefix {
            valid_len: end.valid_len,
            records,
            damage: None,
        },
        Err(Error::Corruption { offset, reason, .. }) => Prefix {
            valid_len: offset,
            records,
            damage: Some(reason),
        },
        // read_records reports nothing else; keep the records read so far.
        Err(e) => Prefix {
            valid_len: 0,
            records,
            damage: Some(e.to_string()),
        },
    }
}
