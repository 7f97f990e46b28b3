//! Concurrent writers, readers and scanners while flushes and compactions
//! run; the result equals the per-thread oracles.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{dump, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::Db;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn writers_readers_and_scanners_agree_with_the_oracle() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", tiny_options(&fs)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // Scanners check every scan is sorted, duplicate-free and well-formed,
    // and that a snapshot reads the same pairs forward and backward.
    let scanners: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut scans = 0;
                while !stop.load(Ordering::Relaxed) {
                    let items: Vec<_> = db
                        .scan(Bound::Unbounded, Bound::Unbounded)
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    assert!(items.windows(2).all(|w| w[0].0 < w[1].0));
                    for (k, v) in &items {
                        // Values name their key: a mixed-up pair would show.
                        assert!(v.starts_with(k), "{k:?} -> {v:?}");
                    }
                    // Both directions at one snapshot see the same pairs.
                    let snap = db.snapshot();
                    let all = |rev: bool| -> Vec<_> {
                        let (lo, hi) = (Bound::Unbounded, Bound::Unbounded);
                        let it: Box<dyn Iterator<Item = _>> = if rev {
                            Box::new(snap.scan_rev(lo, hi).unwrap())
                        } else {
                            Box::new(snap.scan(lo, hi).unwrap())
                        };
                        it.map(|r: lamina::Result<_>| r.unwrap()).collect()
                    };
                    let (mut fwd, rev) = (all(false), all(true));
                    fwd.reverse();
                    assert!(fwd == rev, "scan and scan_rev differ at one snapshot");
                    scans += 1;
                }
                scans
            })
        })
        .collect();
    let writers: Vec<_> = (0..4u8)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(u64::from(t));
                let mut model = BTreeMap::new();
                for i in 0..6_000u32 {
                    let k = format!("t{t}-{:04}", rng.gen_range(0..800)).into_bytes();
                    match rng.gen_range(0..10) {
                        0..=5 => {
                            let mut v = k.clone();
                            v.extend_from_slice(format!("={i}").as_bytes());
                            db.put(&k, &v).unwrap();
                            model.insert(k, v);
                        }
                        6 => {
                            db.delete(&k).unwrap();
                            model.remove(&k);
                        }
                        _ => assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned()),
                    }
                }
                model
            })
        })
        .collect();
    let mut expected = BTreeMap::new();
    for w in writers {
        expected.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let scans: usize = scanners.into_iter().map(|s| s.join().unwrap()).sum();
    assert!(scans > 0);
    assert_eq!(dump(&db), expected);
    let stats = db.stats();
    assert!(stats.flushes > 5 && stats.compactions > 0, "{stats:?}");
    assert_eq!(stats.compaction_errors, 0, "{stats:?}");
    Arc::try_unwrap(db).unwrap().close().unwrap();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    assert_eq!(dump(&db), expected);
}
