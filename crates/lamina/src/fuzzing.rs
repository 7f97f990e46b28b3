//! Entry points for fuzzing the decoders of bytes read from disk (used by
//! the `fuzz/` cargo-fuzz targets and by the corpus replay test). Each
//! feeds arbitrary bytes through the engine's real code path, the way the
//! engine meets them on disk, and returns normally whatever the bytes are:
//! an error is a correct answer, a panic, hang or overflow is a bug.
//! Not part of the engine's API.

use std::path::Path;
use std::sync::Arc;

use crate::db::replay_wal;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, parse_internal_key, ValueKind, MAX_SEQ};
use crate::manifest::{self, manifest_name, CURRENT};
use crate::memtable::MemTable;
use crate::sst::{Block, BlockIter, Table};
use crate::stats::IoStats;
use crate::version::VersionEdit;
use crate::vfs::mem::MemFs;
use crate::vfs::Vfs;

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
/// entry, and sought to probe keys and to every key seen.
pub fn block(data: &[u8]) {
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
    for key in probe_keys(data).iter().chain(seen.iter().take(64)) {
        let mut it = BlockIter::new(Arc::clone(&block));
        let _ = it.seek(key);
    }
}

/// A whole SST file: opened from an in-memory file, fully iterated, probed
/// with point lookups and seeks, then verified block by block.
pub fn sst(data: &[u8]) {
    let _ = sst_inner(data);
}

fn sst_inner(data: &[u8]) -> Result<()> {
    let fs = MemFs::new();
    let path = Path::new("/fuzz.sst");
    let mut file = fs.create(path)?;
    file.append(data)?;
    file.sync()?;
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
    for key in probe_keys(data) {
        let _ = table.get(&key, MAX_SEQ);
        let _ = table.iter().seek(&key);
    }
    table.verify()
}

/// A WAL file, replayed as recovery does (torn tail cut, batches decoded
/// into a memtable).
pub fn wal(data: &[u8]) {
    let _ = wal_inner(data);
}

fn wal_inner(data: &[u8]) -> Result<()> {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir)?;
    let mut file = fs.create(&dir.join("000001.log"))?;
    file.append(data)?;
    file.sync()?;
    let mem = MemTable::new(1);
    replay_wal(&fs, dir, 1, &mem)?;
    Ok(())
}

/// A manifest, recovered as `Db::open` does (`CURRENT` names it), and the
/// input decoded as a single version edit.
pub fn manifest(data: &[u8]) {
    let _ = VersionEdit::decode(data).map(|edit| edit.encode());
    let _ = manifest_inner(data);
}

fn manifest_inner(data: &[u8]) -> Result<()> {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir)?;
    let name = manifest_name(1);
    let mut current = fs.create(&dir.join(CURRENT))?;
    current.append(format!("{name}\n").as_bytes())?;
    current.sync()?;
    let mut file = fs.create(&dir.join(&name))?;
    file.append(data)?;
    file.sync()?;
    if let Some((version, _, _)) = manifest::recover(&fs, dir)? {
        let _ = version.files().count();
        let _ = VersionEdit::snapshot_of(&version).encode();
    }
    Ok(())
}
