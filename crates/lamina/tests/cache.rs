//! Block-cache accounting (seed 002 §4.2 needs it): per-level hits and
//! misses of point lookups, per-file cached block counts, and compaction
//! reads that leave the cache to queries unless asked otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};

fn options(fs: &MemFs, fills: bool) -> Options {
    Options {
        compaction: "leveling:T=3,l0=2".parse().unwrap(),
        compaction_fills_cache: fills,
        block_cache_bytes: 1 << 20,
        ..tiny_options(fs)
    }
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
/// cached to drop.
#[test]
fn compaction_reads_fill_the_cache_only_when_asked() {
    for fills in [false, true] {
        let fs = MemFs::new();
        let db = Db::open("/db", options(&fs, fills)).unwrap();
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
        if fills {
            assert!(s.cache_invalidated_blocks > 0, "{s:?}");
        } else {
            assert_eq!(s.cache_invalidated_blocks, 0);
            assert!(s.levels.iter().all(|l| l.cached_blocks == 0));
        }
        db.close().unwrap();
    }
}
