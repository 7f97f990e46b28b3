//! Shared helpers for the engine's integration tests.
#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "a test may panic on a failed setup; each test binary compiles this shared module and uses a different part of it"
)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};
use rand::rngs::StdRng;
use rand::Rng;

/// Options that make flushes and compactions happen after a few hundred writes.
pub fn tiny_options(fs: &MemFs) -> Options {
    tiny_builder()
        .vfs(Arc::new(fs.clone()))
        .block_cache_bytes(64 * 1024)
        .build()
        .unwrap()
}

/// `tiny_options` on the real file system, for tests that look at the
/// directory's files.
pub fn disk_options() -> Options {
    tiny_builder()
        .vfs(Arc::new(lamina::vfs::OsFs))
        .build()
        .unwrap()
}

fn tiny_builder() -> lamina::OptionsBuilder {
    Options::builder()
        .write_buffer_size(8 * 1024)
        .target_file_size(4 * 1024)
        .block_size(512)
        .compaction(lamina::Compaction::parse("leveling:T=3,l0=2").unwrap())
        .level0_stop_runs(0)
}

/// Every live pair of the database, by a full scan.
pub fn dump(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// The test key of `i`: `key` and `i` in six digits, so keys sort as numbers.
pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Every key `0..space` by `get`, and full scans both ways, equal to
/// `model`.
pub fn check_against(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, space: u64) {
    for i in 0..space {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            model.get(&key(i)).cloned(),
            "key {i}"
        );
    }
    let all: BTreeMap<_, _> = db
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(&all, model);
    let rev: Vec<_> = db
        .scan_rev(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    expected.reverse();
    assert_eq!(rev, expected);
}

// Independent parsers of the formats of docs/format.md, for oracles.

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    v
}

/// A block's contents from its stored bytes and trailer type byte
/// (docs/format.md, "Block compression"), decoded by the codecs' own
/// size-prepended readers.
pub fn uncompressed(stored: &[u8], kind: u8) -> Vec<u8> {
    match kind {
        0 => stored.to_vec(),
        4 => lz4_flex::block::decompress_size_prepended(stored).unwrap(),
        7 => {
            let len = u32_at(stored, 0) as usize;
            let out = zstd::bulk::decompress(&stored[4..], len).unwrap();
            assert_eq!(out.len(), len);
            out
        }
        other => panic!("unknown block type {other}"),
    }
}

/// An SST's parts as the footer and the index block describe them:
/// (data block handles, filter, index, footer offset), handles as
/// (offset, size without the 5-byte trailer).
pub struct SstLayout {
    /// Each data block's handle.
    pub data: Vec<(u64, u64)>,
    /// The filter block's handle.
    pub filter: (u64, u64),
    /// The index block's handle.
    pub index: (u64, u64),
    /// Where the footer starts.
    pub footer: u64,
}

/// Reads the block handles of an SST from its footer and index block.
pub fn sst_layout(bytes: &[u8]) -> SstLayout {
    let footer = bytes.len() - 64;
    let f = &bytes[footer..];
    let filter = (u64_at(f, 0), u64_at(f, 8));
    let index = (u64_at(f, 16), u64_at(f, 24));
    let stored = &bytes[index.0 as usize..(index.0 + index.1) as usize];
    let block = &uncompressed(stored, bytes[(index.0 + index.1) as usize]);
    let mut pos = 0;
    let count = varint(block, &mut pos);
    let mut data = Vec::new();
    for _ in 0..count {
        for _ in 0..2 {
            let len = varint(block, &mut pos) as usize;
            pos += len; // first key, last key
        }
        let offset = varint(block, &mut pos);
        let size = varint(block, &mut pos);
        data.push((offset, size));
    }
    SstLayout {
        data,
        filter,
        index,
        footer: footer as u64,
    }
}

/// Start offsets of the records of a WAL or manifest (12-byte header whose
/// bytes 4..8 are the payload length).
pub fn record_starts(bytes: &[u8]) -> Vec<u64> {
    let mut starts = Vec::new();
    let mut pos = 0;
    while pos + 12 <= bytes.len() {
        starts.push(pos as u64);
        pos += 12 + u32_at(bytes, pos + 4) as usize;
    }
    starts
}

/// The start of the record holding byte `offset`.
pub fn record_holding(bytes: &[u8], offset: u64) -> u64 {
    record_starts(bytes)
        .into_iter()
        .rev()
        .find(|&s| s <= offset)
        .unwrap()
}

/// Data blocks stored compressed in the SSTs of `/db`.
pub fn compressed_blocks(fs: &MemFs) -> u64 {
    let vfs: Arc<dyn lamina::vfs::Vfs> = Arc::new(fs.clone());
    let dir = std::path::Path::new("/db");
    fs.file_names(dir)
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| {
            lamina::inspect::sst(&vfs, &dir.join(n))
                .unwrap()
                .compressed_blocks
        })
        .sum()
}

/// A copy of `fs` with one random bit of `path` (`len` bytes long)
/// flipped, and the offset of the byte it flipped.
pub fn flip_random_bit(fs: &MemFs, rng: &mut StdRng, path: &Path, len: u64) -> (MemFs, u64) {
    let clone = fs.crash_clone(rng, 1.0);
    let offset = rng.gen_range(0..len);
    clone
        .corrupt_byte(path, offset, 1 << rng.gen_range(0..8))
        .unwrap();
    (clone, offset)
}
