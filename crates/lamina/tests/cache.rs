//! Block-cache accounting (seed 002 §4.2 needs it): per-level hits and
//! misses of point lookups, per-file cached block counts, and compaction
//! reads that leave the cache to queries unless asked otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
