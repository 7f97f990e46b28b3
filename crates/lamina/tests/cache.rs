//! Block-cache accounting (seed 002 §4.2 needs it): per-level hits and
//! misses of point lookups, per-file cached block counts, and compaction
//! reads that leave the cache to queries unless asked otherwise.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use common::{key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};

fn options(fs: &MemFs, fills: bool) -> Options {
    let mut o = tiny_options(fs);
    o.compaction = "leveling:T=3,l0=2".parse().unwrap();
    o.compaction_fills_cache = fills;
    o.block_cache_bytes = 1 << 20;
    o
}

#[test]
fn point_lookups_count_hits_and_misses_per_level() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, false)).unwrap();
    for i in 0..50 {
        db.put(&key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    let level0 = |db: &Db| {
        let s = db.stats();
        let l = s.levels.iter().find(|l| l.level == 0).cloned().unwrap();
        (l.cache_hits, l.cache_misses, l.cached_blocks)
    };
    assert_eq!(level0(&db), (0, 0, 0));
    db.get(&key(7)).unwrap();
    // The block was read from the file and is cached now.
    assert_eq!(level0(&db), (0, 1, 1));
    db.get(&key(7)).unwrap();
    assert_eq!(level0(&db), (1, 1, 1));
    db.close().unwrap();
}

/// Compaction inputs read from disk enter the cache only with
/// `compaction_fills_cache`: then their blocks are dropped when the merged
/// files are deleted (counted as invalidations); without it, nothing was
/// cached to drop. Either way, read ahead or block by block, a merge's
/// reads are not queries: the data-block hit and miss counts (the hit
/// ratio seed 002 plots) stay at zero when no query ran.
#[test]
fn compaction_reads_fill_the_cache_only_when_asked() {
    for (fills, readahead) in [(false, 0), (false, 2 << 20), (true, 0)] {
        let fs = MemFs::new();
        let mut opts = options(&fs, fills);
        opts.compaction_readahead_bytes = readahead;
        let db = Db::open("/db", opts).unwrap();
        for round in 0..6u64 {
            for i in 0..200 {
                db.put(&key(i * 7 % 1000 + round), b"value").unwrap();
            }
            db.flush().unwrap();
        }
        db.wait_for_compactions().unwrap();
        let s = db.stats();
        assert!(s.compactions > 0);
        assert_eq!(s.gets, 0);
        assert!(s.blocks_read > 0, "the merges read their inputs: {s:?}");
        assert_eq!((s.cache_hits.data, s.cache_misses.data), (0, 0), "{s:?}");
        if fills {
            assert!(s.cache_invalidated_blocks > 0, "{s:?}");
        } else {
            assert_eq!(s.cache_invalidated_blocks, 0);
            assert!(s.levels.iter().all(|l| l.cached_blocks == 0));
        }
        db.close().unwrap();
    }
}

/// Incremental warm-up (seed 002's baseline): after a compaction, reading
/// the same hot keys again hits the cache, because the merged blocks that
/// overlap the cached ones were loaded before the inputs were dropped.
/// Without warm-up the same reads miss. Either way they return the values
/// a model holds.
#[test]
fn warm_up_loads_the_merged_blocks_of_cached_ranges() {
    let mut misses_after = Vec::new();
    for warm in [false, true] {
        let fs = MemFs::new();
        let db = Db::open("/db", {
            let mut o = options(&fs, false);
            o.compaction_warm_up = warm;
            o
        })
        .unwrap();
        let mut model = std::collections::BTreeMap::new();
        for round in 0..2u64 {
            for i in 0..400 {
                let v = format!("v{round}-{i}").into_bytes();
                db.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
            db.flush().unwrap();
        }
        db.wait_for_compactions().unwrap();
        let hot: Vec<u64> = (100..140).step_by(2).collect();
        for &i in &hot {
            assert_eq!(db.get(&key(i)).unwrap().as_ref(), model.get(&key(i)));
        }
        // New versions of the cold keys between the hot ones: the merge
        // rewrites the hot blocks.
        for i in (101..140).step_by(2) {
            let v = format!("v2-{i}").into_bytes();
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let before = db.stats();
        for &i in &hot {
            assert_eq!(db.get(&key(i)).unwrap().as_ref(), model.get(&key(i)));
        }
        let after = db.stats();
        if warm {
            assert!(after.warm_up_blocks > 0);
        } else {
            assert_eq!(after.warm_up_blocks, 0);
        }
        misses_after.push(after.cache_misses.data - before.cache_misses.data);
        db.close().unwrap();
    }
    assert!(misses_after[0] > 0, "without warm-up the hot reads miss");
    assert_eq!(misses_after[1], 0, "with warm-up every hot read hits");
}

/// The row cache answers repeated gets without the block cache and never
/// serves a value older than the last write: random puts, deletes, gets,
/// flushes and compactions against a model.
#[test]
fn row_cache_answers_like_the_model() {
    let fs = MemFs::new();
    let db = Db::open("/db", {
        let mut o = options(&fs, false);
        o.row_cache_bytes = 16 * 1024;
        o
    })
    .unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for step in 0..20_000u64 {
        let k = key(rnd(300));
        match rnd(20) {
            0..=5 => {
                let v = format!("v{step}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            6 => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            7 if step % 50 == 0 => db.flush().unwrap(),
            _ => assert_eq!(db.get(&k).unwrap().as_ref(), model.get(&k), "step {step}"),
        }
    }
    let s = db.stats();
    assert!(s.row_cache_hits > 0 && s.row_cache_misses > 0, "{s:?}");
    assert!(s.row_cache_usage > 0 && s.row_cache_usage <= 16 * 1024);
    assert!(s.compactions > 0);
    db.close().unwrap();
}

/// A reader racing a writer never sees a key go back to an older value,
/// and once the writer is done every reader sees its last value: a stale
/// row filled during a write would break one or the other.
#[test]
fn row_cache_reads_never_go_back_in_time() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let fs = MemFs::new();
    let db = Arc::new(
        Db::open("/db", {
            let mut o = options(&fs, false);
            o.row_cache_bytes = 1 << 20;
            o
        })
        .unwrap(),
    );
    const KEYS: u64 = 4;
    const WRITES: u64 = 3_000;
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (db, done) = (Arc::clone(&db), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut seen = [0u64; KEYS as usize];
                while !done.load(Ordering::Acquire) {
                    for (k, last) in seen.iter_mut().enumerate() {
                        let v = db.get(&key(k as u64)).unwrap().map_or(0, |v| {
                            std::str::from_utf8(&v).unwrap().parse::<u64>().unwrap()
                        });
                        assert!(v >= *last, "key {k} went back from {last} to {v}");
                        *last = v;
                    }
                }
            })
        })
        .collect();
    for n in 1..=WRITES {
        db.put(&key(n % KEYS), n.to_string().as_bytes()).unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    for k in 0..KEYS {
        let last = (1..=WRITES).filter(|n| n % KEYS == k).max().unwrap();
        assert_eq!(
            db.get(&key(k)).unwrap(),
            Some(last.to_string().into_bytes())
        );
    }
    assert!(db.stats().row_cache_hits > 0);
}

/// Options with tables' index and filter blocks in a block cache so small
/// (8 KiB, a few blocks) that nearly every lookup evicts one.
fn meta_in_cache(vfs: std::sync::Arc<dyn lamina::vfs::Vfs>) -> Options {
    let mut o = Options::default();
    o.vfs = vfs;
    o.write_buffer_size = 8 * 1024;
    o.target_file_size = 4 * 1024;
    o.block_size = 512;
    o.compaction = "leveling:T=3,l0=2".parse().unwrap();
    o.level0_stop_runs = 0;
    o.block_cache_bytes = 8 * 1024;
    o.cache_index_and_filter_blocks = true;
    o.pin_l0_filter_and_index_blocks_in_cache = true;
    o
}

/// `cache_index_and_filter_blocks` under a cache that evicts constantly:
/// gets and scans return what a `BTreeMap` holds; the index and filter
/// blocks are missed again and again (far more misses than tables ever
/// opened) and read back; level-0 tables pin theirs; the options are
/// stored in the OPTIONS file and come back on reopen.
#[test]
fn index_and_filter_blocks_in_a_tiny_cache_read_like_a_model() {
    use rand::{Rng, SeedableRng};
    let fs = MemFs::new();
    let db = Db::open("/db", meta_in_cache(std::sync::Arc::new(fs.clone()))).unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for op in 0..8000u64 {
        let k = key(rng.gen_range(0..3000));
        match rng.gen_range(0..10) {
            0 => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            1..=5 => {
                let v = format!("value-{op:-<40}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            _ => assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "op {op}"),
        }
        if op % 2000 == 1999 {
            assert_eq!(common::dump(&db), model, "scan after op {op}");
        }
    }
    db.wait_for_compactions().unwrap();
    for i in 0..3000 {
        assert_eq!(db.get(&key(i)).unwrap(), model.get(&key(i)).cloned());
    }
    let lo = key(100);
    let got: Vec<Vec<u8>> = db
        .scan(
            std::ops::Bound::Included(&lo[..]),
            std::ops::Bound::Unbounded,
        )
        .unwrap()
        .take(50)
        .map(|r| r.unwrap().0)
        .collect();
    let want: Vec<Vec<u8>> = model.range(lo..).take(50).map(|(k, _)| k.clone()).collect();
    assert_eq!(got, want);
    let s = db.stats();
    let files: u64 = s.levels.iter().map(|l| l.files as u64).sum();
    assert!(files > 10, "{s:?}");
    assert!(
        s.cache_misses.index > 5 * files,
        "{:?} {files}",
        s.cache_misses
    );
    assert!(
        s.cache_misses.filter > 5 * files,
        "{:?} {files}",
        s.cache_misses
    );
    assert!(s.index_bytes_read > 0 && s.filter_bytes_read > 0);
    // One write and a flush leave a level-0 table; a get pins its blocks.
    db.put(b"pinned", b"v").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"pinned").unwrap(), Some(b"v".to_vec()));
    let s = db.stats();
    if s.levels.first().is_some_and(|l| l.files > 0) {
        assert!(s.block_cache_pinned_usage > 0, "{s:?}");
    }
    db.wait_for_compactions().unwrap();
    let pinned = db.stats().block_cache_pinned_usage.to_string();
    assert_eq!(db.property("lamina.block-cache-pinned-usage"), Some(pinned));
    db.close().unwrap();
    let stored = lamina::options_file::load(&fs, std::path::Path::new("/db"))
        .unwrap()
        .unwrap();
    let entries: std::collections::BTreeMap<String, String> =
        stored.entries().into_iter().collect();
    assert_eq!(entries["cache_index_and_filter_blocks"], "true");
    assert_eq!(entries["pin_l0_filter_and_index_blocks_in_cache"], "true");
    // Reopened with the stored options: the blocks are missed again.
    let reopened = Db::open(
        "/db",
        Options::builder()
            .vfs(std::sync::Arc::new(fs.clone()))
            .from_stored_options()
            .build()
            .unwrap(),
    )
    .unwrap();
    for _ in 0..3000 {
        let k = key(rng.gen_range(0..3000));
        assert_eq!(reopened.get(&k).unwrap(), model.get(&k).cloned());
    }
    let s = reopened.stats();
    assert!(s.cache_misses.index > 2 * files, "{:?}", s.cache_misses);
    reopened.close().unwrap();
}

/// A read of an index or filter block that fails (an evicted block read
/// back from a failing disk) fails the get or scan with an I/O error, not a
/// panic; once reads work again, so do gets.
#[test]
fn a_failed_read_of_an_evicted_index_or_filter_block_is_an_error() {
    use lamina::vfs::fault::{FaultFs, OpKind};
    let mem = MemFs::new();
    let fs = FaultFs::new(std::sync::Arc::new(mem.clone()));
    let db = Db::open("/db", meta_in_cache(std::sync::Arc::new(fs.clone()))).unwrap();
    for i in 0..2000 {
        db.put(&key(i), b"some value").unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    // Evicts the index and filter of most tables.
    for i in (0..2000).step_by(3) {
        assert!(db.get(&key(i)).unwrap().is_some());
    }
    let before = db.stats().cache_misses;
    fs.fail_kinds(&[OpKind::Read]);
    fs.fail_from(fs.ops_matching());
    let mut failed = 0;
    for i in (1..2000).step_by(97) {
        match db.get(&key(i)) {
            Err(lamina::Error::Io { .. }) => failed += 1,
            Ok(Some(_)) => {}
            other => panic!("{i}: {other:?}"),
        }
    }
    assert!(db
        .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .and_then(|it| it
            .map(|r| r.map(|_| ()))
            .collect::<lamina::Result<Vec<()>>>())
        .is_err());
    let after = db.stats().cache_misses;
    assert!(failed > 0 && after.index + after.filter > before.index + before.filter);
    fs.clear();
    for i in (1..2000).step_by(97) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"some value".to_vec()));
    }
    db.close().unwrap();
}
