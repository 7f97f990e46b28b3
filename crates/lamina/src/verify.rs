//! Offline integrity check of a database directory (`lamina verify DIR`).
//!
//! [`verify`] walks `CURRENT` → the manifest (every record's checksum and
//! every edit's validity) → every SST the manifest references (its size
//! against the manifest, then every block: checksums, structure, key order,
//! fence keys, filter, properties, and the properties against the manifest's
//! file metadata) → every WAL that recovery would replay (every record's
//! checksum and every batch's encoding). It only reads: it takes no lock,
//! truncates nothing and opens files through the [`Vfs`]. The first problem
//! is returned as [`Error::Corruption`] naming the file and the byte offset
//! of the bad record or block; a clean directory yields a [`VerifyReport`].

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::batch::decode_record;
use crate::error::{Error, Result};
use crate::filename::{self, wal_name, FileKind};
use crate::manifest::{self, manifest_name};
use crate::record::read_records;
use crate::stats::IoStats;
use crate::tables::{sst_name, TableCache};
use crate::version::FileMeta;
use crate::vfs::Vfs;

/// What a successful verification checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Name of the live manifest.
    pub manifest: String,
    /// Its length in bytes.
    pub manifest_bytes: u64,
    /// Live SSTs checked.
    pub tables: usize,
    /// Their data blocks, each read and checksummed.
    pub data_blocks: u64,
    /// Their entries (all versions, tombstones included).
    pub entries: u64,
    /// Their total size in bytes.
    pub sst_bytes: u64,
    /// WALs checked (those recovery would replay).
    pub wals: usize,
    /// Their records.
    pub wal_records: u64,
    /// Their batch entries.
    pub wal_entries: u64,
    /// Their total size in bytes.
    pub wal_bytes: u64,
    /// WALs ending in a torn tail (a crash during an append, which recovery
    /// cuts off without loss of any acknowledged write): name and the length
    /// of the valid prefix.
    pub torn_wal_tails: Vec<(String, u64)>,
    /// SSTs in the directory that the manifest does not reference (outputs
    /// of an interrupted flush or compaction, which the next open deletes
    /// when the manifest issued their numbers, or files lamina did not write).
    pub unreferenced_tables: Vec<String>,
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "manifest {}: {} bytes, every record valid",
            self.manifest, self.manifest_bytes
        )?;
        writeln!(
            f,
            "{} tables, {} data blocks, {} entries, {} bytes: every block valid",
            self.tables, self.data_blocks, self.entries, self.sst_bytes
        )?;
        writeln!(
            f,
            "{} WAL files, {} records, {} entries, {} bytes: every record valid",
            self.wals, self.wal_records, self.wal_entries, self.wal_bytes
        )?;
        for (name, valid) in &self.torn_wal_tails {
            writeln!(
                f,
                "note: {name} ends in a torn record after byte {valid} (recovery drops it)"
            )?;
        }
        for name in &self.unreferenced_tables {
            writeln!(
                f,
                "note: {name} is not in the manifest (the next open deletes it if the manifest issued its number, else leaves it alone)"
            )?;
        }
        write!(f, "OK")
    }
}

/// Checks every file of the database in `dir`; see the module docs.
pub fn verify(vfs: Arc<dyn Vfs>, dir: &Path) -> Result<VerifyReport> {
    let Some((version, counters, number)) = manifest::recover(vfs.as_ref(), dir)? else {
        // Lamina's files without a CURRENT need repair; nothing at all is
        // no database.
        crate::manifest::refuse_orphaned_files(vfs.as_ref(), dir)?;
        return Err(Error::InvalidArgument(format!(
            "no database in {}",
            dir.display()
        )));
    };
    let mut report = VerifyReport {
        manifest: manifest_name(number),
        manifest_bytes: vfs.open_read(&dir.join(manifest_name(number)))?.len(),
        ..VerifyReport::default()
    };

    let table_cache = TableCache::new(
        Arc::clone(&vfs),
        dir.to_path_buf(),
        None,
        Arc::new(IoStats::default()),
    );
    let mut live = HashSet::new();
    for meta in version.live_files() {
        if !live.insert(meta.id) {
            continue;
        }
        report.data_blocks += verify_table(&table_cache, meta)?;
        report.tables += 1;
        report.entries += meta.entries;
        report.sst_bytes += meta.size;
    }

    let names = vfs.list(dir)?;
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some((FileKind::Wal, n)) if n >= counters.log_number => Some(n),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    for n in wals {
        let name = wal_name(n);
        let data = vfs.read_all(&dir.join(&name))?;
        let end = read_records(&data, &name, |offset, payload| {
            let count = decode_record(payload, |_, _| {})
                .ok_or_else(|| Error::corruption(name.as_str(), offset, "malformed write batch"))?;
            report.wal_records += 1;
            report.wal_entries += u64::from(count);
            Ok(())
        })?;
        if end.torn {
            report.torn_wal_tails.push((name, end.valid_len));
        }
        report.wals += 1;
        report.wal_bytes += data.len() as u64;
    }
    report.unreferenced_tables = names
        .into_iter()
        .filter(
            |n| matches!(filename::parse(n), Some((FileKind::Table, id)) if !live.contains(&id)),
        )
        .collect();
    report.unreferenced_tables.sort();
    Ok(report)
}

/// Checks one live SST: present, of the size the manifest records, every
/// block valid, and its properties equal to the manifest's metadata.
/// Returns its number of data blocks.
fn verify_table(table_cache: &TableCache, meta: &FileMeta) -> Result<u64> {
    let name = sst_name(meta.id);
    let path = table_cache.path(meta.id);
    if !table_cache.vfs.exists(&path) {
        return Err(Error::corruption(
            name,
            0,
            "referenced by the manifest but missing",
        ));
    }
    let len = table_cache.vfs.open_read(&path)?.len();
    if len != meta.size {
        return Err(Error::corruption(
            name,
            len.min(meta.size),
            format!("file is {len} bytes, the manifest says {}", meta.size),
        ));
    }
    let table = table_cache.table(meta)?;
    table.verify()?;
    let p = table.properties();
    let agrees = p.entries == meta.entries
        && p.tombstones == meta.tombstones
        && p.smallest_key == meta.smallest
        && p.largest_key == meta.largest;
    if !agrees {
        // The properties block sits after the data, range-deletion, filter
        // and index blocks.
        let offset = table.footer().properties.offset;
        return Err(Error::corruption(
            name,
            offset,
            "table properties disagree with the manifest",
        ));
    }
    Ok(table.num_data_blocks() as u64)
}
