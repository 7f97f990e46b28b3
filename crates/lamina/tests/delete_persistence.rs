//! `Db::deletes_persisted_within` and `DbStats::tombstone_purge_age`: every
//! tombstone a merge drops counts once, at the age of its merge's oldest
//! input tombstone (seed 001's delete persistence, from file metadata).
//! `nomerge` keeps background merges out, so only the two manual full
//! compactions drop tombstones, at ages the test controls.

mod common;

use std::time::{Duration, Instant};

use common::{key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::Db;

#[test]
fn each_dropped_tombstone_counts_at_its_merges_oldest_tombstone_age() {
    let fs = MemFs::new();
    let db = Db::open("/db", {
        let mut o = tiny_options(&fs);
        o.compaction = "nomerge".parse().unwrap();
        o
    })
    .unwrap();
    for i in 0..1_000 {
        db.put(&key(i), b"value").unwrap();
    }
    db.flush().unwrap();
    // 300 deletes dropped at once.
    let started = Instant::now();
    for i in 0..300 {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let first = started.elapsed();
    // 200 more, dropped 1.5 s after they were written.
    for i in 500..700 {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    db.compact_range(None, None).unwrap();

    let st = db.stats();
    assert_eq!(st.tombstone_purge_age.count, 500);
    assert_eq!(st.levels.iter().map(|l| l.tombstones).sum::<u64>(), 0);
    assert_eq!(db.deletes_persisted_within(Duration::from_secs(3_600)), 500);
    // The second batch was at least 1.5 s old when dropped.
    assert!(db.deletes_persisted_within(Duration::from_millis(1_400)) <= 300);
    if first < Duration::from_millis(1_000) {
        assert_eq!(
            db.deletes_persisted_within(Duration::from_millis(1_000)),
            300
        );
    }
    assert!(st.tombstone_purge_age.max_us >= 1_500_000.0);
}
