//! The invariants `DbStats` documents hold in every snapshot taken while
//! writers, readers, flushes and compactions run, and the settled snapshot
//! counts exactly the lookups the threads saw.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::{key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::{Db, DbStats};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn counters(s: &DbStats) -> [u64; 9] {
    [
        s.gets,
        s.get_hits,
        s.get_misses,
        s.writes,
        s.bytes_ingested,
        s.flushes,
        s.flush_bytes_written,
        s.compactions,
        s.compaction_bytes_written,
    ]
}

fn check_snapshot(s: &DbStats, before: &[u64; 9]) {
    assert_eq!(s.gets, s.get_hits + s.get_misses, "{s:?}");
    let now = counters(s);
    for (i, (a, b)) in before.iter().zip(&now).enumerate() {
        assert!(b >= a, "counter {i} went back from {a} to {b}");
    }
    let level_bytes: u64 = s.levels.iter().map(|l| l.bytes).sum();
    assert_eq!(s.disk_bytes, level_bytes + s.buffer.bytes);
    assert_eq!(
        s.sorted_runs,
        s.levels.iter().map(|l| l.runs).sum::<usize>()
    );
    assert_eq!(
        s.tombstones,
        s.levels.iter().map(|l| l.tombstones).sum::<u64>()
    );
}

#[test]
fn snapshots_keep_the_documented_invariants_under_concurrent_writes() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", tiny_options(&fs)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        thread::spawn(move || {
            let mut last = counters(&db.stats());
            let mut taken = 0u64;
            while !stop.load(Ordering::Acquire) {
                let s = db.stats();
                check_snapshot(&s, &last);
                last = counters(&s);
                taken += 1;
            }
            taken
        })
    };
    // Each worker owns its keys, so its own model says whether a get hits.
    let workers: Vec<_> = (0..3u64)
        .map(|w| {
            let db = Arc::clone(&db);
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(w);
                let mut live = std::collections::BTreeSet::new();
                let (mut hits, mut misses) = (0u64, 0u64);
                for _ in 0..6_000 {
                    let k = w * 1_000_000 + rng.gen_range(0..400);
                    match rng.gen_range(0..4) {
                        0 | 1 => {
                            db.put(&key(k), &[7; 64]).unwrap();
                            live.insert(k);
                        }
                        2 => {
                            db.delete(&key(k)).unwrap();
                            live.remove(&k);
                        }
                        _ => {
                            let found = db.get(&key(k)).unwrap().is_some();
                            assert_eq!(found, live.contains(&k));
                            if found {
                                hits += 1;
                            } else {
                                misses += 1;
                            }
                        }
                    }
                }
                (hits, misses)
            })
        })
        .collect();
    let (mut hits, mut misses) = (0, 0);
    for w in workers {
        let (h, m) = w.join().unwrap();
        hits += h;
        misses += m;
    }
    stop.store(true, Ordering::Release);
    assert!(watcher.join().unwrap() > 0);
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(
        s.flushes > 0 && s.compactions + s.trivial_moves > 0,
        "{s:?}"
    );
    assert_eq!(
        (s.get_hits, s.get_misses, s.gets),
        (hits, misses, hits + misses)
    );
    // Settled: a latency histogram agrees with its counters.
    assert_eq!(s.get_found_latency.count, hits);
    assert_eq!(s.get_empty_latency.count, misses);
}

/// The per-level compaction figures add up to the engine's totals, for a
/// leveled, a tiered and a partitioned stack layout, once compactions
/// settle (a compaction records its level's figures and the totals in one
/// step).
#[test]
fn per_level_compaction_figures_add_up_to_the_totals() {
    for spec in [
        "leveling:T=3,l0=2",
        "tiered:b=3",
        "binomial:k=3,partition=size,theta=4096",
    ] {
        let fs = MemFs::new();
        let mut opts = tiny_options(&fs);
        opts.compaction = spec.parse().unwrap();
        let db = Db::open("/db", opts).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        for i in 0..20_000u64 {
            db.put(&key(rng.gen_range(0..5_000)), &i.to_le_bytes())
                .unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let s = db.stats();
        let sum = |f: fn(&lamina::LevelStats) -> u64| s.levels.iter().map(f).sum::<u64>();
        assert!(s.compactions > 0, "{spec}");
        assert_eq!(sum(|l| l.compactions), s.compactions, "{spec}");
        assert_eq!(
            sum(|l| l.bytes_written),
            s.flush_bytes_written + s.compaction_bytes_written,
            "{spec}"
        );
        // Level 0 takes in the flushes, and nothing lies above it; every
        // merge's reads count in the level it wrote.
        assert_eq!(s.levels[0].bytes_read, s.flush_bytes_written, "{spec}");
        assert_eq!(
            sum(|l| l.bytes_read) + sum(|l| l.bytes_read_level),
            s.flush_bytes_written + s.compaction_bytes_read,
            "{spec}"
        );
        assert!(sum(|l| l.bytes_moved) >= s.merge_moved_bytes, "{spec}");
        let secs: f64 = s.levels.iter().map(|l| l.compaction_seconds).sum();
        assert!(secs > 0.0, "{spec}");
        db.close().unwrap();
    }
}
