//! The read path's options: SSTs read through memory maps
//! (`Options::mmap_reads`) answer like a model, still detect a damaged
//! block, and leave file systems that do not map (the fault injector) on
//! `pread`, where injected errors reach the reader; and the scan-resistant
//! block cache (`Options::scan_resistant_cache`) keeps a point read's hot
//! block through a full scan, which the plain LRU evicts.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use common::{check_against, disk_options, key, sst_layout, tiny_options};
use lamina::vfs::fault::{FaultFs, OpKind};
use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// SST files of `dir` this process has mapped, from `/proc/self/maps`
/// (the kernel's account, independent of the engine's).
fn mapped_ssts(dir: &Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let dir = dir.to_str().unwrap();
    maps.lines()
        // An unlinked file still mapped shows as "NNNNNN.sst (deleted)".
        .filter(|l| l.contains(dir) && l.contains(".sst"))
        .count()
}

fn mmap_options(cache: usize) -> Options {
    let mut o = disk_options();
    o.mmap_reads = true;
    o.block_cache_bytes = cache;
    o
}

/// Random puts, overwrites and deletes with flushes and compactions, the
/// tree checked against a `BTreeMap` along the way, with and without a
/// block cache; the tables were really mapped (and unmapped once their
/// files were compacted away and closed).
#[test]
fn mmap_reads_answer_like_a_model() {
    for cache in [0, 64 * 1024] {
        let dir = tempfile::tempdir().unwrap();
        let space = 3_000u64;
        let db = Db::open(dir.path(), mmap_options(cache)).unwrap();
        let mut model = BTreeMap::new();
        let mut rng = StdRng::seed_from_u64(cache as u64);
        for round in 0..4 {
            for _ in 0..4_000 {
                let k = key(rng.gen_range(0..space));
                if rng.gen_bool(0.2) {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let v = format!("value-{round}-{}", rng.gen::<u32>()).into_bytes();
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
            }
            db.flush().unwrap();
            check_against(&db, &model, space);
        }
        db.wait_for_compactions().unwrap();
        check_against(&db, &model, space);
        assert!(db.stats().compactions > 0);
        assert!(mapped_ssts(dir.path()) > 0, "no SST was mapped");
        db.close().unwrap();
        assert_eq!(mapped_ssts(dir.path()), 0, "closing left SSTs mapped");
        // Reopened without mapping: the same data, through pread.
        let mut o = mmap_options(cache);
        o.mmap_reads = false;
        let db = Db::open(dir.path(), o).unwrap();
        check_against(&db, &model, space);
        assert_eq!(mapped_ssts(dir.path()), 0);
        db.close().unwrap();
    }
}

/// A byte flipped inside a data block on disk is reported as corruption
/// when the block is read through the mapping: the checksum is verified
/// when a block comes from the file, mapped or not.
#[test]
fn mmap_reads_detect_a_damaged_data_block() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), mmap_options(0)).unwrap();
    for i in 0..500 {
        db.put(&key(i), format!("value-{i}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
    let sst = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&sst).unwrap();
    let layout = sst_layout(&bytes);
    let (offset, size) = layout.data[layout.data.len() / 2];
    bytes[(offset + size / 2) as usize] ^= 0x40;
    std::fs::write(&sst, &bytes).unwrap();

    let db = Db::open(dir.path(), mmap_options(0)).unwrap();
    let err = db
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .find_map(Result::err)
        .expect("the scan read the damaged block without an error");
    assert!(err.is_corruption(), "{err}");
    let mut corrupt = 0;
    for i in 0..500 {
        match db.get(&key(i)) {
            Ok(v) => assert_eq!(v, Some(format!("value-{i}").into_bytes())),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                corrupt += 1;
            }
        }
    }
    assert!(corrupt > 0, "no get read the damaged block");
    assert!(mapped_ssts(dir.path()) > 0);
    db.close().unwrap();
}

/// The fault injector does not map files, so with `mmap_reads` every table
/// read still goes through its `read_exact_at`, where an injected error
/// reaches the reader as an I/O error.
#[test]
fn injected_read_errors_reach_reads_with_mmap_reads_on() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let mut o = tiny_options(&mem);
    o.vfs = Arc::new(fs.clone());
    o.mmap_reads = true;
    o.block_cache_bytes = 0;
    let db = Db::open("/db", o).unwrap();
    for i in 0..300 {
        db.put(&key(i), b"value").unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.get(&key(7)).unwrap(), Some(b"value".to_vec()));
    fs.fail_kinds(&[OpKind::Read]);
    fs.fail_from(fs.ops_matching());
    let err = db.get(&key(7)).unwrap_err();
    assert!(!err.is_corruption(), "{err}");
    assert!(fs.injected() > 0);
    let scan_err = db
        .scan(Bound::Unbounded, Bound::Unbounded)
        .and_then(|mut it| it.find_map(Result::err).map_or(Ok(()), Err));
    assert!(scan_err.is_err());
    fs.clear();
    assert_eq!(db.get(&key(7)).unwrap(), Some(b"value".to_vec()));
    db.close().unwrap();
}

/// Data-block hits and misses of every level so far.
fn hits_misses(db: &Db) -> (u64, u64) {
    let s = db.stats();
    s.levels
        .iter()
        .fold((0, 0), |(h, m), l| (h + l.cache_hits, m + l.cache_misses))
}

/// A point read's block, then a full scan of a database many times the
/// cache: with the scan-resistant cache the block is still cached (the next
/// read of it is a hit); with the plain LRU the scan evicted it (a miss).
#[test]
fn a_full_scan_leaves_a_hot_block_resident() {
    for resistant in [true, false] {
        let fs = MemFs::new();
        let mut o = tiny_options(&fs);
        o.block_cache_bytes = 32 * 1024;
        o.scan_resistant_cache = resistant;
        let db = Db::open("/db", o).unwrap();
        for i in 0..5_000 {
            db.put(&key(i), &[b'v'; 40]).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let hot = key(2_500);
        db.get(&hot).unwrap();
        let before = hits_misses(&db);
        db.get(&hot).unwrap();
        let after = hits_misses(&db);
        assert_eq!(after.1, before.1, "the second read of the block missed");
        let mut scanned = 0;
        for entry in db.scan(Bound::Unbounded, Bound::Unbounded).unwrap() {
            entry.unwrap();
            scanned += 1;
        }
        assert_eq!(scanned, 5_000);
        let before = hits_misses(&db);
        db.get(&hot).unwrap();
        let after = hits_misses(&db);
        if resistant {
            assert_eq!(after.1, before.1, "the scan evicted the hot block");
            assert!(after.0 > before.0);
        } else {
            assert!(after.1 > before.1, "plain LRU: the scan should evict it");
        }
        db.close().unwrap();
    }
}
