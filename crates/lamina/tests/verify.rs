//! `lamina::verify`: a clean database verifies, and a flipped byte in an SST
//! data block, index block or footer, in the manifest or in a WAL is reported
//! naming the damaged file and the offset of the block or record holding the
//! byte. The oracle parses the formats of `docs/format.md` independently
//! (footer, index block, record framing) to find where each block or record
//! lies.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{key, record_holding, record_starts, sst_layout, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{verify, Db, Error, SyncMode};

const FLUSHED: u64 = 1_200;
const IN_WAL: u64 = 40;

/// A database with several SSTs and `IN_WAL` puts only in the WAL, left as
/// after a process crash (dropped without `close`). Every file is synced,
/// so a crash clone is an exact copy.
fn populated() -> MemFs {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.sync = SyncMode::Always;
    let db = Db::open("/db", opts).unwrap();
    for i in 0..FLUSHED {
        db.put(&key(i * 7 % FLUSHED), format!("value-{i}").as_bytes())
            .unwrap();
    }
    db.flush().unwrap();
    for i in 0..IN_WAL {
        db.put(&key(i), b"in the wal").unwrap();
    }
    drop(db);
    fs
}

fn names(fs: &MemFs, pred: impl Fn(&str) -> bool) -> Vec<String> {
    fs.file_names(Path::new("/db"))
        .into_iter()
        .filter(|n| pred(n))
        .collect()
}

/// SSTs the manifest references (a compaction interrupted by the drop may
/// leave an unreferenced output behind).
fn live_ssts(fs: &MemFs) -> Vec<String> {
    let report = check(fs).unwrap();
    names(fs, |n| {
        n.ends_with(".sst") && !report.unreferenced_tables.iter().any(|u| u == n)
    })
}

fn check(fs: &MemFs) -> lamina::Result<lamina::VerifyReport> {
    verify(Arc::new(fs.clone()), Path::new("/db"))
}

/// Verifies a copy of `fs` with the byte at `offset` of `name` flipped;
/// returns the reported (file, offset).
fn corrupt_and_verify(fs: &MemFs, name: &str, offset: u64) -> (String, u64) {
    let clone = fs.crash_clone(&mut rand::thread_rng(), 1.0);
    clone
        .corrupt_byte(&Path::new("/db").join(name), offset, 0x10)
        .unwrap();
    match check(&clone) {
        Err(Error::Corruption { file, offset, .. }) => (file, offset),
        other => panic!("{name}@{offset}: expected corruption, got {other:?}"),
    }
}

#[test]
fn a_clean_database_verifies_and_counts_what_it_checked() {
    let fs = populated();
    let report = check(&fs).unwrap();
    let ssts = live_ssts(&fs);
    assert!(ssts.len() >= 3, "{ssts:?}");
    assert_eq!(report.tables, ssts.len());
    let blocks: u64 = ssts
        .iter()
        .map(|n| {
            sst_layout(&fs.read_all(&Path::new("/db").join(n)).unwrap())
                .data
                .len() as u64
        })
        .sum();
    assert_eq!(report.data_blocks, blocks);
    // Single-threaded puts: one WAL record, one entry each.
    assert_eq!(report.wal_records, IN_WAL);
    assert_eq!(report.wal_entries, IN_WAL);
    assert!(report.torn_wal_tails.is_empty());
    assert!(report.to_string().ends_with("OK"));
    assert!(names(&fs, |n| n == report.manifest).len() == 1);
}

#[test]
fn a_flipped_byte_in_an_sst_is_reported_in_its_block() {
    let fs = populated();
    for name in live_ssts(&fs).iter().take(3) {
        let bytes = fs.read_all(&Path::new("/db").join(name)).unwrap();
        let layout = sst_layout(&bytes);
        // Data blocks: the first, a middle and the last, at several bytes.
        let picks = [0, layout.data.len() / 2, layout.data.len() - 1];
        for &(offset, size) in picks.iter().map(|&i| &layout.data[i]) {
            for flipped in [offset, offset + size / 2, offset + size + 4] {
                let (file, reported) = corrupt_and_verify(&fs, name, flipped);
                assert_eq!(&file, name);
                assert_eq!(reported, offset, "byte {flipped} of block at {offset}");
            }
        }
        let (index, size) = layout.index;
        for flipped in [index, index + size / 2] {
            let (file, reported) = corrupt_and_verify(&fs, name, flipped);
            assert_eq!(&file, name);
            assert_eq!(reported, index, "byte {flipped} of the index at {index}");
        }
        let (filter, size) = layout.filter;
        let (file, reported) = corrupt_and_verify(&fs, name, filter + size / 2);
        assert_eq!((file.as_str(), reported), (name.as_str(), filter));
        for flipped in [layout.footer + 3, layout.footer + 50, layout.footer + 60] {
            let (file, reported) = corrupt_and_verify(&fs, name, flipped);
            assert_eq!(&file, name);
            assert_eq!(reported, layout.footer, "byte {flipped} of the footer");
        }
    }
}

#[test]
fn a_flipped_byte_in_the_manifest_or_a_wal_is_reported_in_its_record() {
    let fs = populated();
    let report = check(&fs).unwrap();
    let wals = names(&fs, |n| n.ends_with(".log"));
    let mut logs = vec![report.manifest.clone()];
    logs.extend(
        wals.iter()
            .filter(|n| {
                fs.read_all(&Path::new("/db").join(n))
                    .is_ok_and(|b| !b.is_empty())
            })
            .cloned(),
    );
    assert!(logs.len() >= 2, "no WAL with records: {wals:?}");
    for name in &logs {
        let bytes = fs.read_all(&Path::new("/db").join(name)).unwrap();
        let len = bytes.len() as u64;
        // A byte of the first record's checksum, length and payload, and
        // bytes in the middle and at the very end of the file.
        for flipped in [0, 5, 9, 12, len / 2, len - 1] {
            let (file, reported) = corrupt_and_verify(&fs, name, flipped);
            assert_eq!(&file, name, "byte {flipped}");
            assert_eq!(
                reported,
                record_holding(&bytes, flipped),
                "{name}: byte {flipped}"
            );
        }
    }
}

#[test]
fn a_missing_or_resized_sst_is_reported() {
    let fs = populated();
    let name = live_ssts(&fs).remove(0);
    let clone = fs.crash_clone(&mut rand::thread_rng(), 1.0);
    clone.remove(&Path::new("/db").join(&name)).unwrap();
    match check(&clone) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, name),
        other => panic!("expected corruption, got {other:?}"),
    }
    let clone = fs.crash_clone(&mut rand::thread_rng(), 1.0);
    let path = Path::new("/db").join(&name);
    let mut f = clone.open_append(&path).unwrap();
    f.append(b"extra").unwrap();
    f.sync().unwrap();
    match check(&clone) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, name),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_torn_wal_tail_and_an_unreferenced_sst_are_notes_not_problems() {
    let fs = populated();
    let wal = names(&fs, |n| n.ends_with(".log"))
        .into_iter()
        .find(|n| {
            fs.read_all(&Path::new("/db").join(n))
                .is_ok_and(|b| !b.is_empty())
        })
        .unwrap();
    let path = Path::new("/db").join(&wal);
    let bytes = fs.read_all(&path).unwrap();
    let last = *record_starts(&bytes).last().unwrap();
    // Cut the last record in half, as a crash during its append would.
    fs.truncate(&path, last + 7).unwrap();
    let stray = fs.create(&Path::new("/db").join("999999.sst")).unwrap();
    drop(stray);
    let report = check(&fs).unwrap();
    assert_eq!(report.torn_wal_tails, vec![(wal, last)]);
    assert_eq!(report.unreferenced_tables, vec!["999999.sst".to_string()]);
    assert_eq!(report.wal_records, IN_WAL - 1);
}
