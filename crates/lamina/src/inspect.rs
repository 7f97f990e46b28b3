//! Read-only views of a database's files for `lamina inspect`: an SST's
//! properties and blocks (and, streamed, its entries), the manifest's edits
//! and the tree they build, and a WAL's records with where it is torn.
//!
//! Everything here only reads, through the [`Vfs`]. Reports are plain
//! structs that serialize to JSON (keys as lowercase hex strings); a damaged
//! block or record is reported where it is (its offset and what is wrong)
//! rather than hidden behind the first error when the rest can still be
//! shown. Entry and record listings are streamed to a callback, so a large
//! file never has to fit in memory.

use std::path::Path;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::batch::{decode_entries, decode_header, BatchOp};
use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::key::ValueKind;
use crate::manifest::CURRENT;
use crate::record::read_records;
use crate::sst::Table;
use crate::stats::IoStats;
use crate::version::{FileMeta, Version, VersionEdit};
use crate::vfs::Vfs;

fn hex<S: Serializer>(bytes: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&to_hex(bytes))
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A rectangle as `[min_x, min_y, max_x, max_y]`.
pub type RectArray = [f64; 4];

fn rect_array(r: crate::spatial::Rect) -> RectArray {
    [r.min.x, r.min.y, r.max.x, r.max.y]
}

/// A block's place in the file.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Extent {
    /// Offset of the first byte.
    pub offset: u64,
    /// Bytes of contents (the 5-byte trailer excluded).
    pub size: u64,
}

/// One data block of an SST.
#[derive(Debug, Clone, Serialize)]
pub struct DataBlock {
    /// Position in the table, from 0.
    pub block: usize,
    /// Where it is.
    #[serde(flatten)]
    pub extent: Extent,
    /// The masked CRC32C in its trailer.
    pub checksum: Option<u32>,
    /// How it is stored, from its trailer's type byte: `none` (raw),
    /// `lz4`, `zstd` (`extent.size` counts the compressed bytes).
    pub stored_as: Option<String>,
    /// Why it does not check out (`None`: it does).
    pub problem: Option<String>,
    /// First user key (the index's fence) and its sequence number.
    #[serde(serialize_with = "hex")]
    pub first_key: Vec<u8>,
    /// Sequence number of the first entry.
    pub first_seq: u64,
    /// Last user key.
    #[serde(serialize_with = "hex")]
    pub last_key: Vec<u8>,
    /// Sequence number of the last entry.
    pub last_seq: u64,
    /// MBR of the block's points (spatial tables).
    pub mbr: Option<RectArray>,
}

/// An SST: its properties, metadata blocks and data blocks.
#[derive(Debug, Clone, Serialize)]
pub struct SstReport {
    /// File name.
    pub file: String,
    /// File length in bytes.
    pub file_size: u64,
    /// Entries (all versions, tombstones included).
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Range tombstones (not counted in `entries`).
    pub range_tombstones: u64,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// When the table was written (unix ms).
    pub created_ms: u64,
    /// When its oldest tombstone was written (unix ms).
    pub oldest_tombstone_ms: Option<u64>,
    /// Bytes of all data blocks, trailers included, as stored.
    pub data_bytes: u64,
    /// The compression the table was written with (`none`, `lz4`, `zstd:N`).
    pub compression: Compression,
    /// What `data_bytes` would be with every data block stored raw.
    pub uncompressed_data_bytes: u64,
    /// Data blocks stored compressed (the others did not shrink by 1/8).
    pub compressed_blocks: u64,
    /// Sum of the internal key lengths (user key + 8-byte trailer).
    pub raw_key_bytes: u64,
    /// Sum of the value lengths.
    pub raw_value_bytes: u64,
    /// The filter budget the table was written with (bits per key).
    pub bloom_bits_per_key: f64,
    /// Smallest user key.
    #[serde(serialize_with = "hex")]
    pub smallest_key: Vec<u8>,
    /// Largest user key.
    #[serde(serialize_with = "hex")]
    pub largest_key: Vec<u8>,
    /// Filter bits per entry as written (filter bytes without the trailer ×
    /// 8 / entries; 0 without a filter).
    pub filter_bits_per_entry: f64,
    /// The filter block.
    pub filter: Extent,
    /// The index (fence pointer) block.
    pub index: Extent,
    /// The properties block.
    pub properties_block: Extent,
    /// The range-deletion block, if the table has one.
    pub range_deletions: Option<Extent>,
    /// MBR of the table's points (spatial tables).
    pub mbr: Option<RectArray>,
    /// The data blocks, in key order.
    pub blocks: Vec<DataBlock>,
}

impl SstReport {
    /// Data blocks that do not check out.
    pub fn bad_blocks(&self) -> impl Iterator<Item = &DataBlock> {
        self.blocks.iter().filter(|b| b.problem.is_some())
    }
}

/// One entry of an SST or a WAL record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// User key.
    pub key: &'a [u8],
    /// Sequence number.
    pub seq: u64,
    /// False for a tombstone.
    pub put: bool,
    /// The value (empty for a tombstone; the end key for a range
    /// tombstone).
    pub value: &'a [u8],
    /// For a range tombstone, which deletes `[key, end)`: its end.
    pub range_end: Option<&'a [u8]>,
}

fn open_table(vfs: &Arc<dyn Vfs>, path: &Path) -> Result<Arc<Table>> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let id = match filename::parse(&name) {
        Some((FileKind::Table, id)) => id,
        _ => 0,
    };
    Table::open(
        vfs.open_read(path)?,
        id,
        name,
        None,
        Arc::new(IoStats::default()),
    )
}

/// Describes the SST at `path`. A file whose footer, index, filter or
/// properties do not decode is an error; a bad data block is reported in
/// [`DataBlock::problem`].
pub fn sst(vfs: &Arc<dyn Vfs>, path: &Path) -> Result<SstReport> {
    let table = open_table(vfs, path)?;
    let p = table.properties();
    let footer = table.footer();
    let extent = |h: crate::sst::BlockHandle| Extent {
        offset: h.offset,
        size: h.size,
    };
    let blocks = table
        .block_reports()?
        .into_iter()
        .enumerate()
        .map(|(block, b)| DataBlock {
            block,
            extent: Extent {
                offset: b.offset,
                size: b.size,
            },
            checksum: b.stored_checksum,
            stored_as: b.stored_type.map(crate::compression::type_name),
            problem: b.problem.map(str::to_string),
            first_key: b.first_key,
            first_seq: b.first_seq,
            last_key: b.last_key,
            last_seq: b.last_seq,
            mbr: b.mbr.map(rect_array),
        })
        .collect();
    let filter_bits_per_entry = if p.entries == 0 || footer.filter.size == 0 {
        0.0
    } else {
        footer.filter.size as f64 * 8.0 / p.entries as f64
    };
    Ok(SstReport {
        file: path.display().to_string(),
        file_size: p.file_size,
        entries: p.entries,
        tombstones: p.tombstones,
        range_tombstones: p.range_tombstones,
        smallest_seq: p.smallest_seq,
        largest_seq: p.largest_seq,
        created_ms: p.creation_time,
        oldest_tombstone_ms: p.oldest_tombstone_time,
        data_bytes: p.data_bytes,
        compression: p.compression,
        uncompressed_data_bytes: p.uncompressed_data_bytes,
        compressed_blocks: p.compressed_blocks,
        raw_key_bytes: p.raw_key_bytes,
        raw_value_bytes: p.raw_value_bytes,
        bloom_bits_per_key: p.bloom_bits_per_key,
        smallest_key: p.smallest_key.clone(),
        largest_key: p.largest_key.clone(),
        mbr: p.mbr.map(rect_array),
        filter_bits_per_entry,
        filter: extent(footer.filter),
        index: extent(footer.index),
        properties_block: extent(footer.properties),
        range_deletions: p.range_del.map(extent),
        blocks,
    })
}

/// Calls `f` with every entry of the SST at `path`, in key order, then
/// with each of its range tombstones (sorted by start; `range_end` set); a
/// bad block ends the scan with its [`Error::Corruption`].
pub fn sst_entries(
    vfs: &Arc<dyn Vfs>,
    path: &Path,
    mut f: impl FnMut(Entry<'_>) -> Result<()>,
) -> Result<()> {
    let table = open_table(vfs, path)?;
    table.for_each_entry(|key, seq, kind, value| {
        f(Entry {
            key,
            seq,
            put: kind == ValueKind::Put,
            value,
            range_end: None,
        })
    })?;
    for t in table.range_tombstones() {
        f(Entry {
            key: &t.start,
            seq: t.seq,
            put: false,
            value: &t.end,
            range_end: Some(&t.end),
        })?;
    }
    Ok(())
}

/// One file of the tree.
#[derive(Debug, Clone, Serialize)]
pub struct TreeFile {
    /// File number (`{id:06}.sst`).
    pub id: u64,
    /// Bytes.
    pub size: u64,
    /// Entries (all versions).
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Smallest user key.
    #[serde(serialize_with = "hex")]
    pub smallest: Vec<u8>,
    /// Largest user key.
    #[serde(serialize_with = "hex")]
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// MBR (spatial indexes).
    pub mbr: Option<RectArray>,
}

impl From<&FileMeta> for TreeFile {
    fn from(m: &FileMeta) -> Self {
        TreeFile {
            id: m.id,
            size: m.size,
            entries: m.entries,
            tombstones: m.tombstones,
            smallest: m.smallest.clone(),
            largest: m.largest.clone(),
            smallest_seq: m.smallest_seq,
            largest_seq: m.largest_seq,
            mbr: m.mbr.map(rect_array),
        }
    }
}

/// One sorted run.
#[derive(Debug, Clone, Serialize)]
pub struct TreeRun {
    /// Run id.
    pub id: u64,
    /// Recency rank (larger is newer).
    pub order: u64,
    /// Files in key order.
    pub files: Vec<TreeFile>,
}

/// One level: runs, newest first. Levels are numbered from 0 everywhere
/// (level 0 receives flushes).
#[derive(Debug, Clone, Serialize)]
pub struct TreeLevel {
    /// Level number.
    pub level: usize,
    /// Runs, newest first.
    pub runs: Vec<TreeRun>,
}

/// The tree a manifest describes, plus the files of compaction buffers.
#[derive(Debug, Clone, Serialize)]
pub struct Tree {
    /// Levels, shallowest first.
    pub levels: Vec<TreeLevel>,
    /// Files kept in LSbM compaction buffers (readable, not in any run).
    pub buffer_files: Vec<TreeFile>,
}

impl From<&Version> for Tree {
    fn from(v: &Version) -> Self {
        Tree {
            levels: v
                .levels
                .iter()
                .enumerate()
                .map(|(level, l)| TreeLevel {
                    level,
                    runs: l
                        .runs
                        .iter()
                        .map(|r| TreeRun {
                            id: r.id,
                            order: r.order,
                            files: r.files.iter().map(|f| TreeFile::from(f.as_ref())).collect(),
                        })
                        .collect(),
                })
                .collect(),
            buffer_files: {
                // Buffers may hold a file a run holds too (LSbM keeps the
                // merged-down unit readable); list only the others, once.
                let in_runs: std::collections::HashSet<u64> =
                    v.files().map(|(_, _, f)| f.id).collect();
                let mut seen = std::collections::HashSet::new();
                v.live_files()
                    .filter(|f| !in_runs.contains(&f.id) && seen.insert(f.id))
                    .map(|f| TreeFile::from(f.as_ref()))
                    .collect()
            },
        }
    }
}

/// A run a manifest edit creates.
#[derive(Debug, Clone, Serialize)]
pub struct EditRun {
    /// Its level.
    pub level: usize,
    /// Run id.
    pub run: u64,
    /// Recency rank.
    pub order: u64,
}

/// A file a manifest edit adds.
#[derive(Debug, Clone, Serialize)]
pub struct EditAdd {
    /// Level of the receiving run.
    pub level: usize,
    /// The run.
    pub run: u64,
    /// The file.
    pub file: TreeFile,
}

/// A file a manifest edit removes.
#[derive(Debug, Clone, Serialize)]
pub struct EditRemove {
    /// Level of the run.
    pub level: usize,
    /// The run.
    pub run: u64,
    /// The file's number.
    pub file: u64,
}

/// One manifest record.
#[derive(Debug, Clone, Serialize)]
pub struct Edit {
    /// Offset of the record in the manifest.
    pub offset: u64,
    /// WALs below this number are obsolete.
    pub log_number: Option<u64>,
    /// Next file number.
    pub next_file_number: Option<u64>,
    /// Largest sequence number in SSTs.
    pub last_seq: Option<u64>,
    /// Runs created.
    pub new_runs: Vec<EditRun>,
    /// Files removed (applied first).
    pub removed: Vec<EditRemove>,
    /// Files added.
    pub added: Vec<EditAdd>,
    /// Changes to LSbM compaction buffers.
    pub buffer_changes: usize,
}

impl Edit {
    fn new(offset: u64, e: &VersionEdit) -> Self {
        Edit {
            offset,
            log_number: e.log_number,
            next_file_number: e.next_file_number,
            last_seq: e.last_seq,
            new_runs: e
                .new_runs
                .iter()
                .map(|r| EditRun {
                    level: r.level,
                    run: r.run_id,
                    order: r.order,
                })
                .collect(),
            removed: e
                .removed_files
                .iter()
                .map(|r| EditRemove {
                    level: r.level,
                    run: r.run_id,
                    file: r.file_id,
                })
                .collect(),
            added: e
                .added_files
                .iter()
                .map(|a| EditAdd {
                    level: a.level,
                    run: a.run_id,
                    file: TreeFile::from(&a.meta),
                })
                .collect(),
            buffer_changes: e.buffer.len(),
        }
    }
}

/// The live manifest of a database directory.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestReport {
    /// The manifest `CURRENT` names.
    pub manifest: String,
    /// Its length in bytes.
    pub bytes: u64,
    /// Every record, in order.
    pub edits: Vec<Edit>,
    /// Where the valid records end.
    pub valid_len: u64,
    /// True if a torn last record follows (an append whose fsync never
    /// completed; opening the database ignores it).
    pub torn: bool,
    /// The tree after every edit.
    pub tree: Tree,
}

/// The manifest `CURRENT` names in `dir`.
fn current_manifest(vfs: &dyn Vfs, dir: &Path) -> Result<String> {
    let path = dir.join(CURRENT);
    if !vfs.exists(&path) {
        return Err(Error::InvalidArgument(format!(
            "no database in {} (no {CURRENT} file)",
            dir.display()
        )));
    }
    let current = vfs.read_all(&path)?;
    std::str::from_utf8(&current)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .filter(|s| matches!(filename::parse(s), Some((FileKind::Manifest, _))))
        .map(str::to_string)
        .ok_or_else(|| Error::corruption(CURRENT, 0, "CURRENT does not name a manifest"))
}

/// Reads the manifest of the database in `dir`: its edits and the tree.
pub fn manifest(vfs: &Arc<dyn Vfs>, dir: &Path) -> Result<ManifestReport> {
    let name = current_manifest(vfs.as_ref(), dir)?;
    let data = vfs.read_all(&dir.join(&name))?;
    let mut version = Version::default();
    let mut edits = Vec::new();
    let end = read_records(&data, &name, |offset, payload| {
        let edit = VersionEdit::decode(payload)
            .ok_or_else(|| Error::corruption(name.as_str(), offset, "undecodable version edit"))?;
        version = version
            .apply(&edit)
            .map_err(|e| Error::corruption(name.as_str(), offset, e.to_string()))?;
        edits.push(Edit::new(offset, &edit));
        Ok(())
    })?;
    Ok(ManifestReport {
        manifest: name,
        bytes: data.len() as u64,
        edits,
        valid_len: end.valid_len,
        torn: end.torn,
        tree: Tree::from(&version),
    })
}

/// One WAL record: a write batch.
#[derive(Debug, Clone, Copy)]
pub struct WalRecord<'a> {
    /// Offset of the record in the file.
    pub offset: u64,
    /// Sequence number of its first entry.
    pub first_seq: u64,
    /// Its entries.
    pub count: u32,
    /// The encoded entries ([`wal_record_entries`] decodes them).
    entries: &'a [u8],
}

/// How a WAL ends.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct WalEnd {
    /// File length.
    pub bytes: u64,
    /// Records read.
    pub records: u64,
    /// Entries in them.
    pub entries: u64,
    /// Where the valid records end.
    pub valid_len: u64,
    /// True if the bytes after `valid_len` are a torn record (a crash during
    /// an append; recovery drops them, losing no acknowledged write).
    pub torn: bool,
}

/// Calls `f` with every record of the WAL at `path`; a record whose
/// checksum or batch does not decode before the tail is an error at its
/// offset.
pub fn wal(
    vfs: &Arc<dyn Vfs>,
    path: &Path,
    mut f: impl FnMut(WalRecord<'_>) -> Result<()>,
) -> Result<WalEnd> {
    let name = path.display().to_string();
    let data = vfs.read_all(path)?;
    let (mut records, mut entries) = (0u64, 0u64);
    let end = read_records(&data, &name, |offset, payload| {
        let (first_seq, count, encoded) = decode_header(payload)
            .ok_or_else(|| Error::corruption(name.as_str(), offset, "malformed write batch"))?;
        let rec = WalRecord {
            offset,
            first_seq,
            count,
            entries: encoded,
        };
        // Decode once here so a malformed batch is caught even when the
        // caller does not list entries.
        if wal_record_entries(rec, |_| Ok(()))? != count {
            return Err(Error::corruption(
                name.as_str(),
                offset,
                "batch count disagrees with its entries",
            ));
        }
        records += 1;
        entries += u64::from(count);
        f(rec)
    })?;
    Ok(WalEnd {
        bytes: data.len() as u64,
        records,
        entries,
        valid_len: end.valid_len,
        torn: end.torn,
    })
}

/// Calls `f` with every entry of a WAL record; returns how many there were.
pub fn wal_record_entries(
    rec: WalRecord<'_>,
    mut f: impl FnMut(Entry<'_>) -> Result<()>,
) -> Result<u32> {
    let mut n = 0u32;
    for e in decode_entries(rec.entries) {
        let e = e.ok_or_else(|| Error::corruption("WAL", rec.offset, "malformed batch entry"))?;
        f(Entry {
            key: e.key,
            seq: rec.first_seq.saturating_add(u64::from(n)),
            put: e.op == BatchOp::Point(ValueKind::Put),
            value: e.value,
            range_end: (e.op == BatchOp::DeleteRange).then_some(e.value),
        })?;
        n = n.saturating_add(1);
    }
    Ok(n)
}

/// The options stored in a database directory (`OPTIONS-NNNNNN`).
#[derive(Debug, Clone, Serialize)]
pub struct OptionsReport {
    /// The newest OPTIONS file that decodes.
    pub file: String,
    /// Newer OPTIONS files that did not decode, with why.
    pub skipped: Vec<String>,
    /// Every stored option, `(name, value)` in the order of `Options`.
    pub options: Vec<(String, String)>,
}

/// The options the database in `dir` was last opened with.
pub fn options(vfs: &Arc<dyn Vfs>, dir: &Path) -> Result<OptionsReport> {
    let stored = crate::options_file::load(vfs.as_ref(), dir)?.ok_or_else(|| {
        Error::InvalidArgument(format!("no readable OPTIONS file in {}", dir.display()))
    })?;
    Ok(OptionsReport {
        options: stored.entries(),
        file: stored.file,
        skipped: stored.skipped,
    })
}
