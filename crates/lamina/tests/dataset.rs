//! Datasets with a primary and a spatial secondary index (seed 000
//! §4.3.1): eager and lazy maintenance answer window queries exactly as a
//! brute-force scan of the live records, through moves, deletes, budget
//! flushes, restarts and power losses; a write is atomic across indexes.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lamina::index::{Dataset, DatasetOptions, Maintenance, Record};
use lamina::spatial::{Comparator, Point, Rect};
use lamina::vfs::mem::MemFs;
use lamina::{Options, SyncMode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn options(fs: &MemFs, c: Comparator, m: Maintenance, sync: SyncMode) -> DatasetOptions {
    DatasetOptions {
        base: Options {
            vfs: Arc::new(fs.clone()),
            target_file_size: 4 * 1024,
            block_size: 512,
            block_cache_bytes: 64 * 1024,
            level0_stop_runs: 0,
            sync,
            ..Options::default()
        },
        memory_budget: 16 * 1024,
        comparator: c,
        maintenance: m,
        primary_compaction: "binomial:k=8".parse().unwrap(),
        index_compaction: "tiered:b=3".parse().unwrap(),
    }
}

fn point(rng: &mut StdRng) -> Point {
    Point::new(rng.gen_range(-180.0..180.0), rng.gen_range(-90.0..90.0))
}

fn window(rng: &mut StdRng) -> Rect {
    let c = point(rng);
    let sigma: i32 = rng.gen_range(0..3);
    let (w, h) = (360.0 * 10f64.powi(-sigma), 180.0 * 10f64.powi(-sigma));
    Rect::new(c.x - w / 2.0, c.y - h / 2.0, c.x + w / 2.0, c.y + h / 2.0)
}

fn expected(model: &BTreeMap<u64, Point>, w: Rect) -> Vec<u64> {
    model
        .iter()
        .filter(|(_, p)| w.contains(**p))
        .map(|(id, _)| *id)
        .collect()
}

/// Applies a random write to the dataset and the model.
fn random_write(rng: &mut StdRng, ds: &Dataset, model: &mut BTreeMap<u64, Point>, ids: u64) {
    let id = rng.gen_range(0..ids);
    if rng.gen_bool(0.15) {
        ds.delete(id).unwrap();
        model.remove(&id);
    } else {
        let p = point(rng);
        let payload = vec![id as u8; rng.gen_range(0..64)];
        ds.upsert(&Record {
            id,
            point: p,
            payload,
        })
        .unwrap();
        model.insert(id, p);
    }
}

#[test]
fn eager_and_lazy_equal_a_brute_force_scan() {
    for m in [Maintenance::Eager, Maintenance::Lazy] {
        for c in [Comparator::Hilbert, Comparator::Simple] {
            let fs = MemFs::new();
            let mut ds = Dataset::open("/ds", options(&fs, c, m, SyncMode::None)).unwrap();
            let mut rng = StdRng::seed_from_u64(3);
            let mut model = BTreeMap::new();
            for i in 0..3_000 {
                random_write(&mut rng, &ds, &mut model, 800);
                if i % 50 == 0 {
                    let w = window(&mut rng);
                    assert_eq!(
                        ds.window(w).unwrap().ids,
                        expected(&model, w),
                        "{m:?} {c:?} op {i}"
                    );
                    assert_eq!(ds.count(w).unwrap().0, expected(&model, w).len() as u64);
                }
                if i == 1_500 {
                    ds.close().unwrap();
                    ds = Dataset::open("/ds", options(&fs, c, m, SyncMode::None)).unwrap();
                }
            }
            for (&id, &p) in model.iter().take(50) {
                assert_eq!(ds.get(id).unwrap().map(|r| r.point), Some(p));
            }
            let s = ds.stats();
            assert!(s.checkpoints > 2, "{m:?}: the budget never flushed: {s:?}");
            match m {
                Maintenance::Eager => {
                    assert!(
                        s.antimatter > 0 && s.write_lookups > 0 && s.validations == 0,
                        "{s:?}"
                    );
                }
                Maintenance::Lazy => {
                    assert!(
                        s.antimatter == 0 && s.write_lookups == 0 && s.validations > 0,
                        "{s:?}"
                    );
                    assert!(s.stale_candidates > 0, "{s:?}");
                }
            }
        }
    }
}

#[test]
fn power_loss_keeps_every_synced_write_and_both_indexes_agree() {
    for m in [Maintenance::Eager, Maintenance::Lazy] {
        for seed in 0..6u64 {
            let fs = MemFs::new();
            let c = Comparator::Hilbert;
            let ds = Dataset::open("/ds", options(&fs, c, m, SyncMode::Always)).unwrap();
            let mut rng = StdRng::seed_from_u64(seed);
            let mut model = BTreeMap::new();
            for i in 0..1_200 {
                random_write(&mut rng, &ds, &mut model, 300);
                if i % 200 == 199 {
                    let keep = rng.gen_range(0.0..=1.0);
                    let clone = fs.crash_clone(&mut rng, keep);
                    let back = Dataset::open("/ds", options(&clone, c, m, SyncMode::Always))
                        .unwrap_or_else(|e| panic!("{m:?} seed {seed} op {i}: {e}"));
                    // Every acknowledged write was synced before it was
                    // acknowledged: the state is the model's, in both indexes.
                    assert_eq!(
                        back.window(Rect::ALL).unwrap().ids,
                        expected(&model, Rect::ALL)
                    );
                    for _ in 0..5 {
                        let w = window(&mut rng);
                        assert_eq!(back.window(w).unwrap().ids, expected(&model, w));
                    }
                    for (&id, &p) in &model {
                        assert_eq!(back.get(id).unwrap().map(|r| r.point), Some(p));
                    }
                    back.close().unwrap();
                }
            }
        }
    }
}

#[test]
fn unsynced_power_loss_leaves_the_indexes_consistent() {
    // Without sync a crash may lose recent writes, but never half of one:
    // under eager maintenance the secondary index holds exactly one entry,
    // at the primary's point, for every record, and nothing else.
    for seed in 0..8u64 {
        let fs = MemFs::new();
        let c = Comparator::Simple;
        let opts = |fs: &MemFs| options(fs, c, Maintenance::Eager, SyncMode::None);
        let ds = Dataset::open("/ds", opts(&fs)).unwrap();
        let mut rng = StdRng::seed_from_u64(100 + seed);
        let mut model = BTreeMap::new();
        for _ in 0..1_000 {
            random_write(&mut rng, &ds, &mut model, 200);
        }
        let keep = rng.gen_range(0.0..=1.0);
        let clone = fs.crash_clone(&mut rng, keep);
        let back = Dataset::open("/ds", opts(&clone)).unwrap();
        let mut entries: Vec<(Point, u64)> = back
            .index()
            .window(Rect::ALL)
            .unwrap()
            .map(|r| c.decode(&r.unwrap().0).unwrap())
            .collect();
        entries.sort_by_key(|e| e.1);
        let ids: Vec<u64> = entries.iter().map(|e| e.1).collect();
        let mut dedup = ids.clone();
        dedup.dedup();
        assert_eq!(ids, dedup, "seed {seed}: an id indexed twice");
        for (p, id) in &entries {
            assert_eq!(
                back.get(*id).unwrap().map(|r| r.point),
                Some(*p),
                "seed {seed}"
            );
        }
        let primary = back
            .primary()
            .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
            .unwrap()
            .count();
        assert_eq!(
            primary,
            entries.len(),
            "seed {seed}: records without an index entry"
        );
        back.close().unwrap();
    }
}

#[test]
fn refuses_other_directories_and_other_settings() {
    let fs = MemFs::new();
    let c = Comparator::Hilbert;
    let ds = Dataset::open("/ds", options(&fs, c, Maintenance::Eager, SyncMode::None)).unwrap();
    ds.close().unwrap();
    let err = Dataset::open(
        "/ds",
        options(&fs, Comparator::Simple, Maintenance::Eager, SyncMode::None),
    )
    .unwrap_err();
    assert!(err.to_string().contains("comparator hilbert"), "{err}");
    assert!(Dataset::open("/ds", options(&fs, c, Maintenance::Lazy, SyncMode::None)).is_err());
    // A directory with a file that is not ours is left alone.
    lamina::vfs::Vfs::create_dir_all(&fs, std::path::Path::new("/other")).unwrap();
    lamina::vfs::Vfs::create(&fs, std::path::Path::new("/other/notes.txt")).unwrap();
    let err = Dataset::open(
        "/other",
        options(&fs, c, Maintenance::Eager, SyncMode::None),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not a dataset"), "{err}");
    assert!(fs
        .file_names(std::path::Path::new("/other"))
        .contains(&"notes.txt".to_string()));
}

#[test]
fn readme_example() {
    // README.md's "The library" spatial example, on a temporary directory.
    let tmp = tempfile::tempdir().unwrap();
    let ds = Dataset::open(tmp.path().join("places"), DatasetOptions::default()).unwrap();
    ds.upsert(&Record {
        id: 7,
        point: Point::new(2.35, 48.85),
        payload: b"Paris".to_vec(),
    })
    .unwrap();
    let hits = ds.window(Rect::new(2.0, 48.0, 3.0, 49.0)).unwrap();
    assert_eq!(hits.ids, vec![7]);
    assert_eq!(ds.get(7).unwrap().unwrap().payload, b"Paris");
    ds.close().unwrap();
}
