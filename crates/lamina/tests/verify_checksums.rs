//! `Options::verify_checksums` (RocksDB's and LevelDB's
//! `ReadOptions::verify_checksums`) against a `BTreeMap` model: with it
//! off, queries read a block with a flipped value byte as data (the model
//! with that byte flipped), never panicking on damage anywhere; with it on,
//! they report a typed corruption; a compaction always verifies, even a
//! block a query cached unverified, and refuses to merge the damage.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{dump, flip_random_bit, key};
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Db, Options};
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Keys of the older run; the newer one overwrites the even ones.
const N: u64 = 400;

fn options(fs: &MemFs, verify: bool) -> Options {
    Options::builder()
        .vfs(Arc::new(fs.clone()))
        .write_buffer_size(1 << 20)
        .block_size(512)
        .block_cache_bytes(1 << 20)
        .verify_checksums(verify)
        .build()
        .unwrap()
}

fn value(run: &str, i: u64) -> Vec<u8> {
    format!("{run}-value-{i:06}-payload").into_bytes()
}

/// Two overlapping level-0 runs, uncompressed: "A" holds keys `0..N`, the
/// newer "B" overwrites the even ones. Returns the file system and the
/// model.
fn two_runs() -> (MemFs, BTreeMap<Vec<u8>, Vec<u8>>) {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, true)).unwrap();
    let mut model = BTreeMap::new();
    for (run, step) in [("A", 1), ("B", 2)] {
        for i in (0..N).step_by(step) {
            db.put(&key(i), &value(run, i)).unwrap();
            model.insert(key(i), value(run, i));
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    (fs, model)
}

fn ssts(fs: &MemFs) -> Vec<PathBuf> {
    fs.file_names(Path::new("/db"))
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| Path::new("/db").join(n))
        .collect()
}

/// Flips a letter's case in the one place an SST stores `v`; returns the
/// value as the file now holds it.
fn flip_value_byte(fs: &MemFs, v: &[u8]) -> Vec<u8> {
    let mut holding = ssts(fs).into_iter().filter_map(|path| {
        let bytes = fs.read_all(&path).unwrap();
        let at = bytes.windows(v.len()).position(|w| w == v)?;
        Some((path, at))
    });
    let (path, at) = holding.next().unwrap();
    assert!(holding.next().is_none(), "the value is stored once");
    fs.corrupt_byte(&path, at as u64 + 2, 0x20).unwrap();
    let mut flipped = v.to_vec();
    flipped[2] ^= 0x20;
    flipped
}

#[test]
fn unverified_reads_take_a_flipped_value_byte_for_data_verified_reads_and_compaction_refuse_it() {
    let (fs, model) = two_runs();
    let k = key(101);
    let flipped = flip_value_byte(&fs, &model[&k]);
    assert_eq!(flipped, b"A-Value-000101-payload");
    let mut damaged = model.clone();
    damaged.insert(k.clone(), flipped.clone());

    // Unverified: the damage passes for data, read from the file and then
    // from the cache, in gets and in scans.
    let db = Db::open("/db", options(&fs, false)).unwrap();
    for _ in 0..2 {
        assert_eq!(db.get(&k).unwrap(), Some(flipped.clone()));
    }
    for (k, v) in &damaged {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(dump(&db), damaged);
    // A compaction merges both runs and verifies every block it reads, the
    // one cached unverified included: it refuses the damaged file.
    let err = db.compact_range(None, None).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    drop(db);

    // Verified: the damaged block is a corruption error for the gets of
    // its keys (the others read as the model) and for a scan over it; the
    // failed compaction lost nothing.
    let db = Db::open("/db", options(&fs, true)).unwrap();
    let err = db.get(&k).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let mut errors = 0;
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => assert_eq!(got.as_ref(), Some(v)),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                errors += 1;
            }
        }
    }
    assert!(
        (1..N as usize / 8).contains(&errors),
        "{errors} keys in one block"
    );
    let scanned: lamina::Result<Vec<_>> = db
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect();
    assert!(scanned.unwrap_err().is_corruption());
    db.close().unwrap();
}

/// Any byte of any SST flipped, read without checksums: every get, scan
/// and compaction either succeeds or fails with a typed corruption; no
/// panic, whatever the block decoders are handed.
#[test]
fn unverified_reads_of_flipped_bytes_never_panic() {
    let (fs, model) = two_runs();
    let mut rng = StdRng::seed_from_u64(19);
    let (mut detected, mut opened, mut flips) = (0, 0, 0);
    for path in ssts(&fs) {
        let len = fs.read_all(&path).unwrap().len() as u64;
        for _ in 0..40 {
            let (clone, offset) = flip_random_bit(&fs, &mut rng, &path, len);
            flips += 1;
            let what = format!("{}@{offset}", path.display());
            let db = match Db::open("/db", options(&clone, false)) {
                Ok(db) => db,
                Err(e) => {
                    assert!(e.is_corruption(), "{what}: {e}");
                    detected += 1;
                    continue;
                }
            };
            opened += 1;
            for k in model.keys() {
                if let Err(e) = db.get(k) {
                    assert!(e.is_corruption(), "{what}: {e}");
                    detected += 1;
                }
            }
            let scanned: lamina::Result<Vec<_>> = db
                .scan(Bound::Unbounded, Bound::Unbounded)
                .and_then(|it| it.collect());
            if let Err(e) = scanned {
                assert!(e.is_corruption(), "{what}: {e}");
            }
            if let Err(e) = db.compact_range(None, None) {
                assert!(e.is_corruption(), "{what}: {e}");
                detected += 1;
            }
        }
    }
    // Most flips land in data blocks (most of a table), which only the
    // reads and the compaction meet.
    assert!(opened > flips / 2, "{opened} of {flips} flips opened");
    assert!(detected > 0);
}

/// A compaction verifies whatever the queries do, also when it reads its
/// inputs block by block (no readahead) or fills the cache with them: both
/// go through the queries' block path, and both refuse the damaged file
/// with checks off. Its keys still read as the model afterwards (nothing
/// was lost), the damaged one as the file holds it.
#[test]
fn compactions_without_readahead_or_filling_the_cache_verify_too() {
    for (readahead, fills) in [(0, false), (2 << 20, true)] {
        let (fs, model) = two_runs();
        let k = key(101);
        let flipped = flip_value_byte(&fs, &model[&k]);
        let mut opts = options(&fs, false);
        opts.compaction_readahead_bytes = readahead;
        opts.compaction_fills_cache = fills;
        let db = Db::open("/db", opts).unwrap();
        let err = db.compact_range(None, None).unwrap_err();
        assert!(
            err.is_corruption(),
            "readahead {readahead}, fills {fills}: {err}"
        );
        let mut damaged = model.clone();
        damaged.insert(k.clone(), flipped.clone());
        assert_eq!(dump(&db), damaged);
        db.close().unwrap();
    }
}
