//! Range deletes (`Db::delete_range`, `WriteBatch::delete_range`): reads,
//! snapshots, recovery and what compaction leaves on disk, each checked
//! against a `BTreeMap` oracle or against the files themselves.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use common::{dump, key, tiny_options};
use lamina::vfs::fault::FaultFs;
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Db, Error, Options, WriteBatch};
use rand::SeedableRng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn model_delete_range(m: &mut Model, lo: &[u8], hi: &[u8]) {
    m.retain(|k, _| !(lo <= k.as_slice() && k.as_slice() < hi));
}

fn rev(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan_rev(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn check(db: &Db, model: &Model, what: &str) {
    assert_eq!(&dump(db), model, "{what}: scan");
    let want: Vec<_> = model
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(rev(db), want, "{what}: scan_rev");
    for i in 0..220 {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            model.get(&key(i)).cloned(),
            "{what}: get {i}"
        );
    }
}

#[test]
fn range_delete_hides_keys_in_memtable_tables_and_across_reopen() {
    let fs = MemFs::new();
    let opts = || {
        let mut o = tiny_options(&fs);
        o.row_cache_bytes = 1 << 20;
        o
    };
    let db = Db::open("/db", opts()).unwrap();
    let mut model = Model::new();
    for i in 0..200 {
        let v = format!("v{i}").into_bytes();
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    // Fill the row cache, then delete from the memtable: no stale row.
    for i in 0..200 {
        db.get(&key(i)).unwrap();
    }
    let before = db.snapshot();
    let old = model.clone();
    db.delete_range(&key(10), &key(20)).unwrap();
    model_delete_range(&mut model, &key(10), &key(20));
    check(&db, &model, "memtable");
    db.flush().unwrap();
    check(&db, &model, "after flush");
    // Deleted in tables, rewritten later: the new version is live.
    db.delete_range(&key(50), &key(150)).unwrap();
    model_delete_range(&mut model, &key(50), &key(150));
    db.put(&key(60), b"again").unwrap();
    model.insert(key(60), b"again".to_vec());
    let mut b = WriteBatch::new();
    b.put(&key(151), b"in batch");
    b.delete_range(&key(150), &key(160));
    b.put(&key(155), b"after the range delete");
    b.delete_range(&key(30), &key(30)); // empty: nothing
    db.write(b).unwrap();
    model_delete_range(&mut model, &key(150), &key(160));
    model.insert(key(155), b"after the range delete".to_vec());
    check(&db, &model, "mixed");
    db.compact_range(None, None).unwrap();
    check(&db, &model, "after full compaction");
    // The snapshot taken before any range delete still sees everything.
    let all: Model = before
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(all, old, "snapshot scan");
    assert_eq!(before.get(&key(15)).unwrap(), old.get(&key(15)).cloned());
    assert_eq!(before.get(&key(100)).unwrap(), old.get(&key(100)).cloned());
    drop(before);
    // Bounded scans that start or end inside a deleted range.
    let got: Vec<_> = db
        .scan(Bound::Included(&key(15)), Bound::Excluded(&key(55)))
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    let want: Vec<_> = model
        .range(key(15)..key(55))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(got, want);
    db.close().unwrap();
    let db = Db::open("/db", opts()).unwrap();
    check(&db, &model, "after reopen");
    db.close().unwrap();
}

#[test]
fn a_range_delete_only_in_the_log_survives_reopen() {
    let fs = MemFs::new();
    let opts = || {
        let mut o = tiny_options(&fs);
        o.write_buffer_size = 1 << 20;
        o
    };
    let db = Db::open("/db", opts()).unwrap();
    for i in 0..100 {
        db.put(&key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    db.delete_range(&key(20), &key(80)).unwrap();
    // Dropped without close: the range delete is only in the WAL.
    drop(db);
    let db = Db::open("/db", opts()).unwrap();
    let keys: Vec<_> = dump(&db).into_keys().collect();
    let want: Vec<_> = (0..20).chain(80..100).map(key).collect();
    assert_eq!(keys, want);
    db.close().unwrap();
}

/// Every SST of `dir`, read through `lamina::inspect` (independent of the
/// read path): point entries and range tombstones.
fn on_disk(fs: &MemFs, dir: &str) -> (u64, u64) {
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let (mut points, mut ranges) = (0, 0);
    for name in fs.file_names(Path::new(dir)) {
        if !name.ends_with(".sst") {
            continue;
        }
        lamina::inspect::sst_entries(&vfs, &Path::new(dir).join(&name), |e| {
            if e.range_end.is_some() {
                ranges += 1;
            } else {
                points += 1;
            }
            Ok(())
        })
        .unwrap();
    }
    (points, ranges)
}

#[test]
fn full_compaction_leaves_no_range_tombstone_and_no_covered_entry() {
    let fs = MemFs::new();
    // No background merge: the flushed tombstones stay until asked.
    let opts = {
        let mut o = tiny_options(&fs);
        o.compaction = "nomerge".parse().unwrap();
        o
    };
    let db = Db::open("/db", opts).unwrap();
    for round in 0..3 {
        for i in 0..300 {
            db.put(&key(i), format!("v{round}.{i}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    db.delete_range(&key(100), &key(250)).unwrap();
    db.delete_range(&key(0), &key(10)).unwrap();
    db.flush().unwrap();
    let (_, ranges) = on_disk(&fs, "/db");
    assert!(ranges >= 2, "the flush wrote the range tombstones");
    // A snapshot older than the tombstones keeps what it sees.
    let snap = db.snapshot();
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(snap.get(&key(5)).unwrap(), None, "taken after the deletes");
    drop(snap);
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let live: Vec<u64> = (10..100).chain(250..300).collect();
    let (points, ranges) = on_disk(&fs, "/db");
    assert_eq!(ranges, 0, "range tombstones left after a full compaction");
    assert_eq!(points, live.len() as u64, "covered or stale entries left");
    let keys: Vec<_> = dump(&db).into_keys().collect();
    assert_eq!(keys, live.into_iter().map(key).collect::<Vec<_>>());
    db.close().unwrap();
}

#[test]
fn a_snapshot_keeps_covered_versions_through_compaction() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    for i in 0..200 {
        db.put(&key(i), b"old").unwrap();
    }
    let snap = db.snapshot();
    db.delete_range(&key(0), &key(200)).unwrap();
    db.compact_range(None, None).unwrap();
    assert!(dump(&db).is_empty());
    for i in 0..200 {
        assert_eq!(snap.get(&key(i)).unwrap().as_deref(), Some(&b"old"[..]));
    }
    assert_eq!(
        snap.scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count(),
        200
    );
    db.close().unwrap();
}

#[test]
fn spatial_databases_refuse_range_deletes() {
    let fs = MemFs::new();
    let opts = {
        let mut o = tiny_options(&fs);
        o.spatial = Some(lamina::spatial::Comparator::Hilbert);
        o
    };
    let db = Db::open("/db", opts).unwrap();
    let err = db.delete_range(b"a", b"b").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    db.close().unwrap();
}

#[test]
fn verify_and_repair_understand_range_tombstones() {
    let fs = MemFs::new();
    // No background merges: with `l0=2` the two flushed tables could be
    // merged into one before the drop (a CI run saw 1 table), and verify
    // must meet the range-deletion table as it was flushed.
    let db = Db::open("/db", {
        let mut o = tiny_options(&fs);
        o.compaction = "nomerge".parse().unwrap();
        o
    })
    .unwrap();
    let mut model = Model::new();
    for i in 0..200 {
        db.put(&key(i), b"v").unwrap();
        model.insert(key(i), b"v".to_vec());
    }
    db.flush().unwrap();
    db.delete_range(&key(30), &key(60)).unwrap();
    model_delete_range(&mut model, &key(30), &key(60));
    db.flush().unwrap();
    // One more only in the log, for the repair's salvage.
    db.delete_range(&key(100), &key(110)).unwrap();
    model_delete_range(&mut model, &key(100), &key(110));
    drop(db);
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    // Verify re-reads every table, range-deletion blocks included.
    let report = lamina::verify(Arc::clone(&vfs), Path::new("/db")).unwrap();
    assert!(report.tables >= 2 && report.wal_entries >= 1, "{report}");
    vfs.remove(Path::new("/db/CURRENT")).unwrap();
    lamina::repair(Path::new("/db"), &tiny_options(&fs)).unwrap();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    check(&db, &model, "after repair");
    db.close().unwrap();
}

/// Puts keys 0..100, then range deletes (with flushes and a full
/// compaction between them) through `fs`; returns which puts and which
/// range deletes were acknowledged, and which may have been applied
/// despite an error.
#[expect(
    clippy::type_complexity,
    reason = "the model's tuple type is spelled once, in this test"
)]
fn range_workload(fs: &FaultFs) -> (Vec<u64>, Vec<(u64, u64)>, Vec<(u64, u64)>) {
    let (mut puts, mut acked, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    let opts = {
        let mut o = Options::default();
        o.vfs = Arc::new(fs.clone());
        o.write_buffer_size = 2 * 1024;
        o.target_file_size = 2 * 1024;
        o.block_size = 256;
        o.level0_stop_runs = 0;
        o
    };
    let Ok(db) = Db::open("/db", opts) else {
        return (puts, acked, unknown);
    };
    for i in 0..100 {
        if db.put(&key(i), b"v").is_ok() {
            puts.push(i);
        }
    }
    let _ = db.flush();
    for (n, r) in [(20, 40), (60, 70), (35, 65), (90, 200)]
        .into_iter()
        .enumerate()
    {
        match db.delete_range(&key(r.0), &key(r.1)) {
            Ok(()) => acked.push(r),
            Err(Error::Background(_)) | Err(Error::Closed) => {}
            Err(_) => unknown.push(r),
        }
        if n % 2 == 1 {
            let _ = db.flush();
        }
    }
    let _ = db.compact_range(None, None);
    let _ = db.close();
    (puts, acked, unknown)
}

#[test]
fn an_io_error_at_any_operation_loses_no_acknowledged_range_delete() {
    let clean = FaultFs::new(Arc::new(MemFs::new()));
    let (puts, acked, _) = range_workload(&clean);
    assert_eq!((puts.len(), acked.len()), (100, 4));
    let total = clean.ops();
    let inside = |rs: &[(u64, u64)], i: u64| rs.iter().any(|&(a, b)| a <= i && i < b);
    for n in 0..total {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.fail_once_at(n);
        let (puts, acked, unknown) = range_workload(&fs);
        let db = Db::open("/db", tiny_options(&mem))
            .unwrap_or_else(|e| panic!("failure at op {n}: reopen failed: {e}"));
        let got = dump(&db);
        for i in 0..100 {
            let present = got.contains_key(&key(i));
            if inside(&acked, i) {
                assert!(
                    !present,
                    "failure at op {n}: key {i} survived its range delete"
                );
            } else if puts.contains(&i) && !inside(&unknown, i) {
                assert!(present, "failure at op {n}: acknowledged key {i} lost");
            }
        }
        db.close().unwrap();
    }
}

#[test]
fn a_synced_range_delete_survives_power_loss() {
    let fs = MemFs::new();
    let opts = |fs: &MemFs| {
        let mut o = tiny_options(fs);
        o.sync = lamina::SyncMode::Always;
        o
    };
    let db = Db::open("/db", opts(&fs)).unwrap();
    for i in 0..150 {
        db.put(&key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    db.delete_range(&key(10), &key(140)).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    // Unsynced bytes lost, whatever the fraction kept of them.
    for keep in [0.0, 0.5, 1.0] {
        let clone = fs.crash_clone(&mut rng, keep);
        let db = Db::open("/db", opts(&clone)).unwrap();
        let keys: Vec<_> = dump(&db).into_keys().collect();
        let want: Vec<_> = (0..10).chain(140..150).map(key).collect();
        assert_eq!(keys, want, "kept {keep} of the unsynced bytes");
        db.close().unwrap();
    }
    drop(db);
}
