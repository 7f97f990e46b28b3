//! Entry points for fuzzing the decoders of bytes read from disk (used by
//! the `fuzz/` cargo-fuzz targets and by the corpus replay test). Each
//! feeds arbitrary bytes through the engine's real code path, the way the
//! engine meets them on disk, and returns normally whatever the bytes are:
//! an error is a correct answer, a panic, hang or overflow is a bug.
//! Not part of the engine's API.
//!
//! Checksums would stop almost every mutated input at the first check, so
//! each target also runs a variant of the input with valid checksums: the
//! SST with its footer and block trailers recomputed, the logs framed as
//! records (`u16` length, then payload) with valid CRCs. That variant
//! reaches the decoders behind the checksums.

use std::path::Path;
use std::sync::Arc;

use crate::compression::{decompress_into, COMPRESSION_LZ4, COMPRESSION_ZSTD};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, parse_internal_key, ValueKind, MAX_SEQ};
use crate::manifest::{self, manifest_name, CURRENT};
use crate::memtable::MemTable;
use crate::record::append_record;
use crate::sst::{
    block_trailer, decode_index, decode_properties, Block, BlockHandle, BlockIter, BloomFilter,
    Footer, Table, FOOTER_LEN,
};
use crate::stats::IoStats;
use crate::version::VersionEdit;
use crate::vfs::mem::MemFs;
use crate::vfs::{Vfs, WritableFile};
use crate::wal::replay_wal;

/// Upper bound on entries walked per input, so a valid but huge input
/// cannot stall the fuzzer.
const MAX_STEPS: usize = 100_000;

/// Keys to seek to: the first bytes of the input and a few fixed ones.
fn probe_keys(data: &[u8]) -> Vec<Vec<u8>> {
    let head = data.get(..data.len().min(12)).unwrap_or_default();
    vec![
        head.to_vec(),
        make_internal_key(head, MAX_SEQ, ValueKind::Put),
        make_internal_key(b"", 0, ValueKind::Delete),
        make_internal_key(b"\xff\xff\xff\xff", MAX_SEQ, ValueKind::Put),
    ]
}

/// A data block's contents (no trailer): decoded, walked from the first
/// entry and back from the last, and sought to probe keys and to every key
/// seen (with a step back and forth after each seek). The input is also
/// taken as the stored bytes of an LZ4 and of a zstd block (length prefix,
/// payload): decompressed, and walked if it decodes.
pub fn block(data: &[u8]) {
    walk_block(data);
    for kind in [COMPRESSION_LZ4, COMPRESSION_ZSTD] {
        let mut contents = Vec::new();
        if let Ok(true) = decompress_into(kind, data, &mut contents) {
            walk_block(&contents);
        }
    }
}

fn walk_block(data: &[u8]) {
    let Ok(block) = Block::new(data.to_vec()) else {
        return;
    };
    let block = Arc::new(block);
    let mut it = BlockIter::new(Arc::clone(&block));
    let mut seen = Vec::new();
    if it.seek_to_first().is_ok() {
        while it.valid() && seen.len() < MAX_STEPS {
            seen.push(it.key().to_vec());
            let _ = parse_internal_key(it.key());
            let _ = it.value().len();
            if it.next().is_err() {
                break;
            }
        }
    }
    // Backward from the last entry, then a turn after a seek.
    let mut steps = 0;
    if it.seek_to_last().is_ok() {
        while it.valid() && steps < MAX_STEPS {
            let _ = parse_internal_key(it.key());
            let _ = it.value().len();
            steps += 1;
            if it.prev().is_err() {
                break;
            }
        }
    }
    for key in probe_keys(data).iter().chain(seen.iter().take(64)) {
        let mut it = BlockIter::new(Arc::clone(&block));
        if it.seek(key).is_ok() {
            let _ = it.prev();
            let _ = it.next();
        }
    }
}

/// A whole SST file: opened from an in-memory file, fully iterated both
/// ways, probed with point lookups, seeks and seeks for prev, then verified
/// block by block.
/// The metadata decoders also get the raw input.
pub fn sst(data: &[u8]) {
    let _ = decode_index(data, data.len() as u64);
    let _ = decode_properties(data);
    let _ = BloomFilter::decode(data);
    let _ = sst_inner(data);
    let _ = sst_inner(&with_valid_checksums(data));
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut le = [0u8; 8];
    if let Some(src) = bytes.get(at..at + 8) {
        le.copy_from_slice(src);
    }
    u64::from_le_bytes(le)
}

/// Rewrites the trailer after `handle`'s contents, if it lies within `limit`,
/// keeping its type byte (so compressed blocks reach the decompressor).
fn fix_trailer(bytes: &mut [u8], handle: BlockHandle, limit: usize) {
    let Some(end) = handle.end().and_then(|e| usize::try_from(e).ok()) else {
        return;
    };
    let (Ok(start), Ok(size)) = (usize::try_from(handle.offset), usize::try_from(handle.size))
    else {
        return;
    };
    if end > limit {
        return;
    }
    let split = start + size;
    let trailer = block_trailer(&bytes[start..split], bytes[split]);
    bytes[split..end].copy_from_slice(&trailer);
}

/// `data` with a valid footer (its three handles kept) and valid trailers
/// after the metadata blocks and the data blocks the index names.
fn with_valid_checksums(data: &[u8]) -> Vec<u8> {
    let mut bytes = data.to_vec();
    let Some(footer_at) = bytes.len().checked_sub(FOOTER_LEN) else {
        return bytes;
    };
    let handle = |i: usize| BlockHandle {
        offset: u64_at(data, footer_at + 16 * i),
        size: u64_at(data, footer_at + 16 * i + 8),
    };
    let footer = Footer {
        filter: handle(0),
        index: handle(1),
        properties: handle(2),
        // Both versions read: version 1, or 2 (range deletions possible).
        version: 1 + u32::from(data.get(footer_at + 48).is_some_and(|b| b & 1 == 1)),
    };
    for h in [footer.filter, footer.index, footer.properties] {
        fix_trailer(&mut bytes, h, footer_at);
    }
    let props = usize::try_from(footer.properties.offset)
        .ok()
        .zip(usize::try_from(footer.properties.size).ok())
        .and_then(|(start, size)| bytes.get(start..start.checked_add(size)?))
        .and_then(|c| crate::sst::decode_properties(c).ok());
    let range_del = props.and_then(|p| p.range_del);
    if let Some(h) = range_del {
        fix_trailer(&mut bytes, h, footer_at);
    }
    let data_end = range_del.map_or(footer.filter.offset, |h| h.offset);
    let index_contents = usize::try_from(footer.index.offset)
        .ok()
        .zip(usize::try_from(footer.index.size).ok())
        .and_then(|(start, size)| bytes.get(start..start.checked_add(size)?));
    if let Some(Ok(index)) = index_contents.map(|c| decode_index(c, data_end)) {
        for i in 0..index.len() {
            if let Some(h) = index.handle(i) {
                fix_trailer(&mut bytes, h, footer_at);
            }
        }
    }
    bytes[footer_at..].copy_from_slice(&footer.encode());
    bytes
}

/// Writes `data` to `path`, as is or framed as log records.
fn write_file(fs: &MemFs, path: &Path, data: &[u8], framed: bool) -> Result<()> {
    let mut file = fs.create(path)?;
    if framed {
        append_framed(file.as_mut(), data)?;
    } else {
        file.append(data)?;
    }
    file.sync()
}

/// Appends records with valid checksums: each a `u16` LE length, then up
/// to that many payload bytes.
fn append_framed(file: &mut dyn WritableFile, mut data: &[u8]) -> Result<()> {
    while let [lo, hi, rest @ ..] = data {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(rest.len());
        let (payload, tail) = rest.split_at(len);
        append_record(file, payload)?;
        data = tail;
    }
    Ok(())
}

fn sst_inner(data: &[u8]) -> Result<()> {
    let fs = MemFs::new();
    let path = Path::new("/fuzz.sst");
    write_file(&fs, path, data, false)?;
    let table = Table::open(
        fs.open_read(path)?,
        1,
        "fuzz.sst".into(),
        None,
        Arc::new(IoStats::default()),
    )?;
    let mut it = table.iter();
    it.seek_to_first()?;
    let mut keys = Vec::new();
    while it.valid() && keys.len() < MAX_STEPS {
        if let Some(parsed) = parse_internal_key(it.key()) {
            keys.push(parsed.user_key.to_vec());
        }
        it.next()?;
    }
    for key in keys.iter().take(64) {
        table.get(key, MAX_SEQ)?;
    }
    let mut steps = 0;
    if it.seek_to_last().is_ok() {
        while it.valid() && steps < MAX_STEPS {
            steps += 1;
            if it.prev().is_err() {
                break;
            }
        }
    }
    for key in probe_keys(data) {
        let _ = table.get(&key, MAX_SEQ);
        let _ = table.iter().seek(&key);
        let mut it = table.iter();
        if it.seek_for_prev(&key).is_ok() {
            let _ = it.next();
            let _ = it.prev();
        }
    }
    table.verify()
}

/// A WAL file, replayed as recovery does (torn tail cut, batches decoded
/// into a memtable).
pub fn wal(data: &[u8]) {
    let _ = wal_inner(data, false);
    let _ = wal_inner(data, true);
}

fn wal_inner(data: &[u8], framed: bool) -> Result<()> {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir)?;
    write_file(&fs, &dir.join("000001.log"), data, framed)?;
    let mem = MemTable::new(1);
    replay_wal(&fs, dir, 1, &mem, true)?;
    Ok(())
}

/// A manifest, recovered as `Db::open` does (`CURRENT` names it), and the
/// input decoded as a single version edit.
pub fn manifest(data: &[u8]) {
    let _ = VersionEdit::decode(data).map(|edit| edit.encode());
    let _ = manifest_inner(data, false);
    let _ = manifest_inner(data, true);
}

fn manifest_inner(data: &[u8], framed: bool) -> Result<()> {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir)?;
    let name = manifest_name(1);
    let mut current = fs.create(&dir.join(CURRENT))?;
    current.append(format!("{name}\n").as_bytes())?;
    current.sync()?;
    write_file(&fs, &dir.join(&name), data, framed)?;
    if let Some((version, _, _)) = manifest::recover(&fs, dir)? {
        let _ = version.files().count();
        let _ = VersionEdit::snapshot_of(&version).encode();
    }
    Ok(())
}
