//! Flipped bytes in SSTs, the WAL and the manifest give clean errors (or,
//! where a crash could have produced the damage, a valid prefix): never a
//! panic, never a wrong value.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use common::{flip_random_bit, key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Db, SyncMode};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn files(fs: &MemFs, suffix: &str) -> Vec<String> {
    fs.file_names(Path::new("/db"))
        .into_iter()
        .filter(|n| n.ends_with(suffix) || n.starts_with(suffix))
        .collect()
}

fn populated(n: u64) -> (MemFs, BTreeMap<Vec<u8>, Vec<u8>>) {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..n {
        let (k, v) = (key(i * 7 % n), format!("value-{i}").into_bytes());
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.close().unwrap();
    (fs, model)
}

#[test]
fn flipped_sst_bytes_never_yield_a_wrong_value() {
    let (fs, model) = populated(1_500);
    let mut rng = StdRng::seed_from_u64(3);
    let ssts = files(&fs, ".sst");
    assert!(ssts.len() > 3);
    let mut detected = 0;
    for name in &ssts {
        let path = Path::new("/db").join(name);
        let len = fs.read_all(&path).unwrap().len() as u64;
        for _ in 0..6 {
            let (clone, offset) = flip_random_bit(&fs, &mut rng, &path, len);
            let db = match Db::open("/db", tiny_options(&clone)) {
                Ok(db) => db,
                Err(e) => {
                    assert!(e.is_corruption(), "{name}@{offset}: open failed with {e}");
                    detected += 1;
                    continue;
                }
            };
            for (k, v) in &model {
                match db.get(k) {
                    Ok(got) => assert_eq!(got.as_ref(), Some(v), "{name}@{offset}: wrong value"),
                    Err(e) => {
                        assert!(e.is_corruption(), "{name}@{offset}: {e}");
                        detected += 1;
                    }
                }
            }
            let it = match db.scan(Bound::Unbounded, Bound::Unbounded) {
                Ok(it) => it,
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    detected += 1;
                    continue;
                }
            };
            let mut expect = model.iter();
            for item in it {
                match item {
                    Ok((k, v)) => {
                        assert_eq!(Some((&k, &v)), expect.next(), "{name}@{offset}: scan")
                    }
                    Err(e) => {
                        assert!(e.is_corruption(), "{e}");
                        detected += 1;
                        break;
                    }
                }
            }
            drop(db);
        }
    }
    assert!(detected > 0, "no flip was ever detected");
}

/// The filesystem, the WAL's name and the writes it holds.
type WalOnly = (MemFs, String, Vec<(Vec<u8>, Vec<u8>)>);

fn wal_only(n: u64) -> WalOnly {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.sync = SyncMode::Always;
    let mut opts = opts;
    opts.write_buffer_size = 1 << 20;
    let db = Db::open("/db", opts).unwrap();
    let writes: Vec<_> = (0..n)
        .map(|i| (key(i), format!("v{i}").into_bytes()))
        .collect();
    for (k, v) in &writes {
        db.put(k, v).unwrap();
    }
    drop(db); // no flush: the writes live only in the WAL
    let wal = files(&fs, ".log").pop().unwrap();
    (fs, wal, writes)
}

#[test]
fn wal_tail_damage_recovers_a_valid_prefix_or_errors_cleanly() {
    let (fs, wal, writes) = wal_only(50);
    let path = Path::new("/db").join(&wal);
    let len = fs.read_all(&path).unwrap().len() as u64;
    // A truncated tail (what a crash leaves) recovers every earlier write.
    for cut in [len - 1, len - 5, len - 20] {
        let clone = fs.crash_clone(&mut StdRng::seed_from_u64(1), 1.0);
        clone.truncate(&path, cut).unwrap();
        let db = Db::open("/db", tiny_options(&clone)).unwrap();
        let got = common::dump(&db);
        assert_eq!(got.len(), 49, "cut at {cut}");
        for (k, v) in &writes[..49] {
            assert_eq!(got.get(k), Some(v));
        }
    }
    // A flipped byte in the last record is reported, not silently dropped.
    let clone = fs.crash_clone(&mut StdRng::seed_from_u64(1), 1.0);
    clone.corrupt_byte(&path, len - 1, 0x10).unwrap();
    let err = Db::open("/db", tiny_options(&clone)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn wal_middle_damage_is_reported_with_file_and_offset() {
    let (fs, wal, _) = wal_only(50);
    let path = Path::new("/db").join(&wal);
    let clone = fs.crash_clone(&mut StdRng::seed_from_u64(1), 1.0);
    clone.corrupt_byte(&path, 40, 0x01).unwrap();
    match Db::open("/db", tiny_options(&clone)) {
        Err(lamina::Error::Corruption { file, .. }) => assert_eq!(file, wal),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn every_flipped_manifest_byte_is_a_clean_error() {
    let (fs, _) = populated(800);
    let manifest = files(&fs, "MANIFEST-").pop().unwrap();
    let path = Path::new("/db").join(&manifest);
    let len = fs.read_all(&path).unwrap().len() as u64;
    for offset in 0..len {
        let clone = fs.crash_clone(&mut StdRng::seed_from_u64(1), 1.0);
        clone.corrupt_byte(&path, offset, 0x04).unwrap();
        let err = Db::open("/db", tiny_options(&clone)).unwrap_err();
        assert!(err.is_corruption(), "flip at {offset}: {err}");
    }
}
