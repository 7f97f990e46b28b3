//! Datasets with a primary index, a spatial secondary index and field
//! indexes (seed 000 §4.3.1): eager and lazy maintenance answer window
//! queries, field lookups and field ranges exactly as a brute-force scan of
//! the live records, through moves, field changes, deletes, budget flushes,
//! restarts and power losses; a write is atomic across indexes.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::collections::BTreeMap;
use std::sync::Arc;

use lamina::spatial::{Comparator, Point, Rect};
use lamina::vfs::mem::MemFs;
use lamina::{Options, SyncMode};
use lamina_dataset::{Dataset, DatasetOptions, FieldIndex, Maintenance, Record};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn options(fs: &MemFs, c: Comparator, m: Maintenance, sync: SyncMode) -> DatasetOptions {
    DatasetOptions {
        base: {
            let mut o = Options::default();
            o.vfs = Arc::new(fs.clone());
            o.target_file_size = 4 * 1024;
            o.block_size = 512;
            o.block_cache_bytes = 64 * 1024;
            o.level0_stop_runs = 0;
            o.sync = sync;
            o
        },
        memory_budget: 16 * 1024,
        comparator: c,
        maintenance: m,
        primary_compaction: "binomial:k=8".parse().unwrap(),
        index_compaction: "tiered:b=3".parse().unwrap(),
        fields: vec![
            FieldIndex {
                name: "kind".into(),
                compaction: "binomial:k=4".parse().unwrap(),
            },
            FieldIndex {
                name: "tag".into(),
                compaction: "leveled:b0=2,b=3".parse().unwrap(),
            },
        ],
    }
}

type Model = BTreeMap<u64, Record>;

/// A field value from a small domain with zero bytes and prefixes of each
/// other, where the key escaping matters.
fn value(rng: &mut StdRng) -> Vec<u8> {
    const DOMAIN: [&[u8]; 7] = [b"", b"a", b"a\0", b"a\0b", b"ab", b"\0", b"\xff"];
    DOMAIN[rng.gen_range(0..DOMAIN.len())].to_vec()
}

/// Field lookups and ranges against a brute-force scan of the model.
fn check_fields(ds: &Dataset, model: &Model, rng: &mut StdRng, what: &str) {
    for (i, field) in ["kind", "tag"].into_iter().enumerate() {
        let v = value(rng);
        let want: Vec<u64> = model
            .values()
            .filter(|r| r.fields[i] == v)
            .map(|r| r.id)
            .collect();
        assert_eq!(ds.lookup(field, &v).unwrap(), want, "{what} {field}={v:?}");
        let (mut lo, mut hi) = (value(rng), value(rng));
        if lo > hi {
            std::mem::swap(&mut lo, &mut hi);
        }
        let limit = rng.gen_range(1..400);
        let mut want: Vec<(Vec<u8>, u64)> = model
            .values()
            .filter(|r| lo <= r.fields[i] && r.fields[i] < hi)
            .map(|r| (r.fields[i].clone(), r.id))
            .collect();
        want.sort();
        want.truncate(limit);
        assert_eq!(
            ds.field_range(field, &lo, Some(&hi), limit).unwrap(),
            want,
            "{what} {field} in [{lo:?}, {hi:?})"
        );
        let all = ds.field_range(field, &lo, None, usize::MAX).unwrap();
        assert_eq!(
            all.len(),
            model.values().filter(|r| lo <= r.fields[i]).count(),
            "{what} {field} from {lo:?}"
        );
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

fn expected(model: &Model, w: Rect) -> Vec<u64> {
    model
        .values()
        .filter(|r| w.contains(r.point))
        .map(|r| r.id)
        .collect()
}

/// Applies a random write to the dataset and the model: a delete, a new
/// record, or a change of the point, of a field, or of both.
fn random_write(rng: &mut StdRng, ds: &Dataset, model: &mut Model, ids: u64) {
    let id = rng.gen_range(0..ids);
    if rng.gen_bool(0.15) {
        ds.delete(id).unwrap();
        model.remove(&id);
        return;
    }
    let mut record = model.get(&id).cloned().unwrap_or_else(|| Record {
        id,
        point: point(rng),
        fields: vec![value(rng), value(rng)],
        payload: Vec::new(),
    });
    match rng.gen_range(0..4) {
        0 => record.point = point(rng),
        1 => record.fields[rng.gen_range(0..2)] = value(rng),
        2 => {}
        _ => {
            record.point = point(rng);
            record.fields = vec![value(rng), value(rng)];
        }
    }
    record.payload = vec![id as u8; rng.gen_range(0..64)];
    ds.upsert(&record).unwrap();
    model.insert(id, record);
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
                    check_fields(&ds, &model, &mut rng, &format!("{m:?} {c:?} op {i}"));
                }
                if i == 1_500 {
                    ds.close().unwrap();
                    ds = Dataset::open("/ds", options(&fs, c, m, SyncMode::None)).unwrap();
                }
            }
            for (&id, r) in model.iter().take(50) {
                assert_eq!(ds.get(id).unwrap().as_ref(), Some(r));
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
                    for (&id, r) in &model {
                        assert_eq!(back.get(id).unwrap().as_ref(), Some(r));
                    }
                    check_fields(
                        &back,
                        &model,
                        &mut rng,
                        &format!("{m:?} seed {seed} op {i}"),
                    );
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
        // Each field index holds exactly ⟨value, id⟩ of every record.
        for (i, field) in ["kind", "tag"].into_iter().enumerate() {
            let mut want: Vec<(Vec<u8>, u64)> = entries
                .iter()
                .map(|&(_, id)| (back.get(id).unwrap().unwrap().fields[i].clone(), id))
                .collect();
            want.sort();
            assert_eq!(
                back.field_range(field, b"", None, usize::MAX).unwrap(),
                want,
                "seed {seed}: field {field}"
            );
        }
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
    let mut other_fields = options(&fs, c, Maintenance::Eager, SyncMode::None);
    other_fields.fields.pop();
    let err = Dataset::open("/ds", other_fields).unwrap_err();
    assert!(
        err.to_string().contains("field indexes [kind, tag]"),
        "{err}"
    );
    for bad in ["", "Kind", "a/b", &"x".repeat(33)] {
        let mut o = options(&fs, c, Maintenance::Eager, SyncMode::None);
        o.fields[0].name = bad.to_string();
        assert!(Dataset::open("/new", o).is_err(), "{bad:?}");
    }
    let mut twice = options(&fs, c, Maintenance::Eager, SyncMode::None);
    twice.fields[1].name = "kind".into();
    assert!(Dataset::open("/new", twice).is_err());
    assert!(!lamina::vfs::Vfs::exists(&fs, std::path::Path::new("/new")));
    let ds = Dataset::open("/ds", options(&fs, c, Maintenance::Eager, SyncMode::None)).unwrap();
    let wrong = Record {
        id: 1,
        point: Point::new(0.0, 0.0),
        fields: vec![b"one".to_vec()],
        payload: Vec::new(),
    };
    assert!(ds.upsert(&wrong).is_err());
    assert!(ds.lookup("nope", b"x").is_err());
    ds.close().unwrap();
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
    let country = FieldIndex {
        name: "country".into(),
        compaction: "binomial:k=4".parse().unwrap(),
    };
    let opts = DatasetOptions {
        fields: vec![country],
        ..DatasetOptions::default()
    };
    let ds = Dataset::open(tmp.path().join("places"), opts).unwrap();
    ds.upsert(&Record {
        id: 7,
        point: Point::new(2.35, 48.85),
        fields: vec![b"FR".to_vec()],
        payload: b"Paris".to_vec(),
    })
    .unwrap();
    let hits = ds.window(Rect::new(2.0, 48.0, 3.0, 49.0)).unwrap();
    assert_eq!(hits.ids, vec![7]);
    assert_eq!(ds.lookup("country", b"FR").unwrap(), vec![7]);
    assert_eq!(ds.get(7).unwrap().unwrap().payload, b"Paris");
    ds.close().unwrap();
}
