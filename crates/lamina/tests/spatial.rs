//! The LSM R-tree (seed 000 ch. 4): window queries over a spatial index
//! equal a brute-force scan of the live points, for every comparator and
//! every compaction policy, through upserts that move points, deletes,
//! flushes, merges, restarts and crashes; and the MBRs actually prune.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use lamina::spatial::{Comparator, Point, Rect};
use lamina::vfs::mem::MemFs;
use lamina::{Db, Options, SyncMode, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const POLICIES: &[&str] = &[
    "leveling:T=3,l0=2",
    "tiered:b=3",
    "binomial:k=4",
    "concurrent",
    "leveled:b0=2,b=3",
    "leveled:b0=2,b=3,partition=str",
    "leveled:b0=2,b=3,partition=rstar-grove",
];

fn options(fs: &MemFs, comparator: Comparator, spec: &str) -> Options {
    let mut o = Options::default();
    o.vfs = Arc::new(fs.clone());
    o.write_buffer_size = 8 * 1024;
    o.target_file_size = 4 * 1024;
    o.block_size = 512;
    o.block_cache_bytes = 64 * 1024;
    o.compaction = spec.parse().unwrap();
    o.level0_stop_runs = 0;
    o.spatial = Some(comparator);
    o
}

/// A point of a clustered world: most points near a few centres, as real
/// data, so that files' MBRs differ in size.
fn point(rng: &mut StdRng) -> Point {
    if rng.gen_bool(0.7) {
        let (cx, cy) = [(-74.0, 40.7), (2.3, 48.9), (139.7, 35.7)][rng.gen_range(0..3)];
        Point::new(cx + rng.gen_range(-2.0..2.0), cy + rng.gen_range(-2.0..2.0))
    } else {
        Point::new(rng.gen_range(-180.0..180.0), rng.gen_range(-90.0..90.0))
    }
}

fn window(rng: &mut StdRng, model: &BTreeMap<u64, Point>) -> Rect {
    // Centred on a live point (as the seed's queries) or anywhere.
    let centre = match model.values().nth(rng.gen_range(0..model.len().max(1))) {
        Some(p) if rng.gen_bool(0.8) => *p,
        _ => Point::new(rng.gen_range(-180.0..180.0), rng.gen_range(-90.0..90.0)),
    };
    let sigma: i32 = rng.gen_range(0..4);
    let (w, h) = (360.0 * 10f64.powi(-sigma), 180.0 * 10f64.powi(-sigma));
    Rect::new(
        centre.x - w / 2.0,
        centre.y - h / 2.0,
        centre.x + w / 2.0,
        centre.y + h / 2.0,
    )
}

/// Writes `id` at `p`, removing its old key in the same batch (the eager
/// strategy's anti-matter, applied by the caller that knows the old point).
fn upsert(db: &Db, c: Comparator, model: &mut BTreeMap<u64, Point>, id: u64, p: Point) {
    let mut batch = WriteBatch::new();
    if let Some(old) = model.insert(id, p) {
        batch.delete(&c.encode(old, id).unwrap());
    }
    batch.put(&c.encode(p, id).unwrap(), &id.to_le_bytes());
    db.write(batch).unwrap();
}

fn check(db: &Db, c: Comparator, model: &BTreeMap<u64, Point>, w: Rect, what: &str) {
    let mut expected: Vec<u64> = model
        .iter()
        .filter(|(_, p)| w.contains(**p))
        .map(|(id, _)| *id)
        .collect();
    expected.sort_unstable();
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.window(w).unwrap().map(|r| r.unwrap()).collect();
    // Keys come back in the comparator's (bytewise) order.
    assert!(
        got.windows(2).all(|p| p[0].0 < p[1].0),
        "{what}: not in key order"
    );
    let mut ids: Vec<u64> = got
        .iter()
        .map(|(k, v)| {
            let (p, id) = c.decode(k).unwrap();
            assert_eq!(v, &id.to_le_bytes(), "{what}: value of {id}");
            assert_eq!(model.get(&id), Some(&p), "{what}: stale point of {id}");
            id
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, expected, "{what}: window {w:?}");
}

#[test]
fn window_queries_equal_a_brute_force_scan() {
    for (ci, c) in [Comparator::Hilbert, Comparator::ZOrder, Comparator::Simple]
        .into_iter()
        .enumerate()
    {
        for (pi, spec) in POLICIES.iter().enumerate() {
            let seed = (ci * 10 + pi) as u64;
            let mut rng = StdRng::seed_from_u64(seed);
            let fs = MemFs::new();
            let mut db = Db::open("/db", options(&fs, c, spec)).unwrap();
            let mut model = BTreeMap::new();
            for i in 0..4_000u64 {
                let roll = rng.gen_range(0..100);
                if roll < 15 && !model.is_empty() {
                    // Move a live point.
                    let id = *model.keys().nth(rng.gen_range(0..model.len())).unwrap();
                    let p = point(&mut rng);
                    upsert(&db, c, &mut model, id, p);
                } else if roll < 22 && !model.is_empty() {
                    let id = *model.keys().nth(rng.gen_range(0..model.len())).unwrap();
                    let p = model.remove(&id).unwrap();
                    db.delete(&c.encode(p, id).unwrap()).unwrap();
                } else {
                    let p = point(&mut rng);
                    upsert(&db, c, &mut model, i, p);
                }
                if i % 97 == 0 {
                    let w = window(&mut rng, &model);
                    check(&db, c, &model, w, &format!("{} {spec} op {i}", c.name()));
                }
                if i == 2_000 {
                    db.close().unwrap();
                    db = Db::open("/db", options(&fs, c, spec)).unwrap();
                }
            }
            db.wait_for_compactions().unwrap();
            for _ in 0..30 {
                let w = window(&mut rng, &model);
                check(&db, c, &model, w, &format!("{} {spec} settled", c.name()));
            }
            let s = db.stats();
            assert!(s.window.queries > 0 && s.window.results > 0);
            assert!(
                s.window.files_pruned > 0 && s.window.blocks_pruned > 0,
                "{} {spec}: MBRs pruned nothing: {:?}",
                c.name(),
                s.window
            );
        }
    }
}

#[test]
fn mbrs_survive_restart_and_match_the_points() {
    let fs = MemFs::new();
    let c = Comparator::Hilbert;
    let db = Db::open("/db", options(&fs, c, "leveling:T=3,l0=2")).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = BTreeMap::new();
    for id in 0..3_000u64 {
        upsert(&db, c, &mut model, id, point(&mut rng));
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    // A window around nothing but one point scans at most the files whose
    // MBR holds it, before and after a restart (MBRs come back from the
    // manifest, not recomputed).
    let (&id, &p) = model.iter().next().unwrap();
    let w = Rect::of_point(p);
    let before: Vec<_> = db.window(w).unwrap().map(|r| r.unwrap()).collect();
    let scanned_before = db.window(w).unwrap().components();
    db.close().unwrap();
    let db = Db::open("/db", options(&fs, c, "leveling:T=3,l0=2")).unwrap();
    let after: Vec<_> = db.window(w).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(before, after);
    assert!(after.iter().any(|(k, _)| c.decode(k) == Some((p, id))));
    assert_eq!(db.window(w).unwrap().components(), scanned_before);
    let files = db
        .stats()
        .levels
        .iter()
        .map(|l| l.files as u64)
        .sum::<u64>();
    assert!(
        scanned_before < files,
        "a one-point window scanned {scanned_before} of {files} files"
    );
}

#[test]
fn window_needs_a_spatial_index() {
    let fs = MemFs::new();
    let db = Db::open("/db", common::tiny_options(&fs)).unwrap();
    assert!(db.window(Rect::ALL).is_err());
}

#[test]
fn crash_keeps_windows_consistent_with_a_prefix() {
    // With sync on every write, every acknowledged upsert (a delete of the
    // old key and a put of the new one in one batch) survives a power loss
    // whole: no window ever sees a point twice or a half-moved point.
    let c = Comparator::Simple;
    for seed in 0..6u64 {
        let fs = MemFs::new();
        // Stacks, and leveled tiles (whose merges make several runs in one
        // manifest edit).
        let spec = ["binomial:k=4", "leveled:b0=2,b=3,partition=str"][seed as usize % 2];
        let opts = |fs: &MemFs| {
            let mut o = options(fs, c, spec);
            o.sync = SyncMode::Always;
            o
        };
        let db = Db::open("/db", opts(&fs)).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model = BTreeMap::new();
        for i in 0..1_500u64 {
            let id = rng.gen_range(0..300);
            upsert(&db, c, &mut model, id, point(&mut rng));
            if i % 250 == 249 {
                let keep = rng.gen_range(0.0..=1.0);
                let clone = fs.crash_clone(&mut rng, keep);
                let reopened = Db::open("/db", opts(&clone)).unwrap();
                // Every acknowledged write was synced: the state is exactly
                // the model's.
                for _ in 0..10 {
                    let w = window(&mut rng, &model);
                    check(
                        &reopened,
                        c,
                        &model,
                        w,
                        &format!("seed {seed} crash at {i}"),
                    );
                }
                check(&reopened, c, &model, Rect::ALL, "whole plane");
                reopened.close().unwrap();
            }
        }
    }
}

#[test]
fn leveled_spatial_partitions_make_one_file_tiles() {
    for spec in [
        "leveled:b0=2,b=3,partition=str",
        "leveled:b0=2,b=3,partition=rstar-grove",
    ] {
        let fs = MemFs::new();
        let c = Comparator::Hilbert;
        let db = Db::open("/db", options(&fs, c, spec)).unwrap();
        let mut rng = StdRng::seed_from_u64(11);
        let mut model = BTreeMap::new();
        for id in 0..6_000u64 {
            upsert(&db, c, &mut model, id, point(&mut rng));
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let s = db.stats();
        let deep: Vec<_> = s.levels.iter().filter(|l| l.level >= 1).collect();
        assert!(!deep.is_empty(), "{spec}: nothing below level 0");
        for l in &deep {
            // Every run below level 0 is a tile: one file.
            assert_eq!(l.runs, l.files, "{spec}: level {}", l.level);
        }
        assert!(
            deep.iter().any(|l| l.runs > 1),
            "{spec}: no level was cut into tiles: {:?}",
            deep.iter().map(|l| l.runs).collect::<Vec<_>>()
        );
        // A one-point window scans a few tiles, not the level.
        let (_, &p) = model.iter().next().unwrap();
        let scanned = db.window(Rect::of_point(p)).unwrap().components();
        let files = s.levels.iter().map(|l| l.files as u64).sum::<u64>();
        assert!(scanned * 2 < files, "{spec}: {scanned} of {files} files");
        check(&db, c, &model, Rect::ALL, spec);
    }
}
