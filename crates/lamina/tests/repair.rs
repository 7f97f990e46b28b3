//! `lamina::repair` against an oracle of what was written: a missing
//! `CURRENT`, a damaged manifest, a damaged table, a log damaged in the
//! middle (the result must be a prefix of the history), a healthy database,
//! and files lamina does not own.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{dump, key};
use lamina::vfs::OsFs;
use lamina::{repair, Db, Options, SyncMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    common::disk_options()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// Tables (with overwrites and deletes, so versions shadow each other
/// across them), then writes that stay in the log.
fn populated(dir: &Path) -> Model {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..4_000u64 {
        db.put(&key(i % 1_500), format!("v{i}").as_bytes()).unwrap();
        if i % 7 == 0 {
            db.delete(&key((i * 13) % 1_500)).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    for i in 0..50u64 {
        db.put(&key(10_000 + i), b"in the log").unwrap();
    }
    db.delete(&key(3)).unwrap();
    let model = dump(&db);
    drop(db);
    model
}

fn reopened(dir: &Path) -> Model {
    let db = Db::open(dir, options()).unwrap();
    let got = dump(&db);
    db.close().unwrap();
    got
}

#[test]
fn a_missing_current_is_rebuilt_with_every_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = populated(&dir);
    std::fs::remove_file(dir.join("CURRENT")).unwrap();
    let report = repair(&dir, &options()).unwrap();
    assert!(report.tables_lost.is_empty(), "{report}");
    assert!(report.wal_entries_applied >= 51, "{report}");
    assert_eq!(reopened(&dir), model);
    // Nothing was deleted: the old files are in lost/.
    let lost = names(&dir.join("lost"));
    assert!(lost.iter().any(|n| n.ends_with(".sst")), "{lost:?}");
    assert!(lost.iter().any(|n| n.ends_with(".log")), "{lost:?}");
    assert!(lost.iter().any(|n| n.starts_with("MANIFEST-")), "{lost:?}");
    // The repaired database verifies.
    lamina::verify(Arc::new(OsFs), &dir).unwrap();
}

#[test]
fn a_damaged_manifest_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = populated(&dir);
    let current = std::fs::read_to_string(dir.join("CURRENT")).unwrap();
    let manifest = dir.join(current.trim());
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes[20] ^= 0x01;
    std::fs::write(&manifest, bytes).unwrap();
    assert!(Db::open(&dir, options()).unwrap_err().is_corruption());
    repair(&dir, &options()).unwrap();
    assert_eq!(reopened(&dir), model);
}

#[test]
fn a_damaged_table_goes_to_lost_and_the_rest_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = populated(&dir);
    let sst = names(&dir)
        .into_iter()
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    let mut bytes = std::fs::read(dir.join(&sst)).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(dir.join(&sst), &bytes).unwrap();
    let report = repair(&dir, &options()).unwrap();
    assert_eq!(report.tables_lost.len(), 1, "{report}");
    assert_eq!(report.tables_lost[0].0, sst);
    assert_eq!(std::fs::read(dir.join("lost").join(&sst)).unwrap(), bytes);
    // Every key left is right (a key whose newest version sat in the lost
    // table may show an older version, or be gone); most keys survive.
    let got = reopened(&dir);
    let log_keys = (0..50u64).map(|i| key(10_000 + i));
    for k in log_keys {
        assert_eq!(got.get(&k), model.get(&k));
    }
    assert!(
        got.len() * 2 > model.len(),
        "{} of {}",
        got.len(),
        model.len()
    );
}

#[test]
fn a_log_damaged_in_the_middle_keeps_exactly_the_records_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    // Everything stays in the log: one put per record, in key order.
    let n = 2_000u64;
    {
        let db = Db::open(&dir, {
            let mut o = options();
            o.write_buffer_size = 64 << 20;
            o.sync = SyncMode::Always;
            o
        })
        .unwrap();
        for i in 0..n {
            db.put(&key(i), format!("value-{i}").as_bytes()).unwrap();
        }
    }
    let log = names(&dir)
        .into_iter()
        .find(|n| n.ends_with(".log"))
        .unwrap();
    let mut bytes = std::fs::read(dir.join(&log)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(dir.join(&log), &bytes).unwrap();
    assert!(Db::open(&dir, options()).unwrap_err().is_corruption());
    // A later, intact log (written elsewhere, numbered after the damaged
    // one): after the hole it must not be applied either.
    let other = tmp.path().join("other");
    {
        let db = Db::open(&other, options()).unwrap();
        db.put(b"later", b"must not appear").unwrap();
    }
    let later_log = names(&other)
        .into_iter()
        .find(|n| n.ends_with(".log"))
        .unwrap();
    let later_name = format!("{:06}.log", 900_000);
    std::fs::copy(other.join(&later_log), dir.join(&later_name)).unwrap();

    let report = repair(&dir, &options()).unwrap();
    let wal = &report.wals[0];
    assert!(wal.cut.as_deref().unwrap().contains("checksum"), "{report}");
    assert_eq!(wal.bytes_kept + wal.bytes_dropped, bytes.len() as u64);
    let got = reopened(&dir);
    // A prefix of the history: keys 0..k with their values, nothing after.
    let k = got.len() as u64;
    assert_eq!(k, wal.records_kept);
    assert!(k > n / 3 && k < n, "{k} of {n} kept");
    let expected: Model = (0..k)
        .map(|i| (key(i), format!("value-{i}").into_bytes()))
        .collect();
    assert_eq!(got, expected);
    let later = report.wals.iter().find(|w| w.name == later_name).unwrap();
    assert_eq!(later.records_kept, 0, "{report}");
    assert!(later.cut.as_deref().unwrap().contains(&log), "{report}");
    // The damaged log itself is kept, byte for byte.
    assert_eq!(std::fs::read(dir.join("lost").join(&log)).unwrap(), bytes);
}

#[test]
fn a_healthy_database_keeps_everything_and_foreign_files_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = populated(&dir);
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    std::fs::write(dir.join("12.sst"), b"not lamina's").unwrap();
    repair(&dir, &options()).unwrap();
    assert_eq!(reopened(&dir), model);
    // Twice in a row: lost/ keeps both generations.
    repair(&dir, &options()).unwrap();
    assert_eq!(reopened(&dir), model);
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(std::fs::read(dir.join("12.sst")).unwrap(), b"not lamina's");
}

#[test]
fn a_locked_database_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    populated(&dir);
    let db = Db::open(&dir, options()).unwrap();
    // The open database may still flush its recovered log and compact; the
    // listing is compared only once it has settled, so any change after it
    // is repair's.
    db.wait_for_compactions().unwrap();
    let before = names(&dir);
    assert!(matches!(
        repair(&dir, &options()),
        Err(lamina::Error::LockedInProcess(_))
    ));
    assert_eq!(names(&dir), before);
    drop(db);
}

/// An I/O error at any operation of a repair never costs data: the failed
/// repair leaves a directory that repair can be run on again, and the
/// second run rebuilds every key (nothing is deleted, the old files wait in
/// `lost/` or in place).
#[test]
fn an_io_error_at_any_operation_of_repair_loses_nothing() {
    use lamina::vfs::fault::FaultFs;
    use lamina::vfs::mem::MemFs;
    use lamina::vfs::Vfs;

    let options = |vfs: Arc<dyn Vfs>| {
        let mut o = common::tiny_options(&MemFs::new());
        o.vfs = vfs;
        // Every write durable, so that copies of the disk are exact.
        o.sync = SyncMode::Always;
        o
    };
    // A database with tables and a live log, and no CURRENT.
    let base = MemFs::new();
    let model = {
        let db = Db::open("/db", options(Arc::new(base.clone()))).unwrap();
        for i in 0..600u64 {
            db.put(&key(i % 250), format!("v{i}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        for i in 0..30u64 {
            db.put(&key(1_000 + i), b"log").unwrap();
        }
        let model = dump(&db);
        drop(db);
        model
    };
    base.remove(Path::new("/db/CURRENT")).unwrap();
    base.sync_dir(Path::new("/db")).unwrap();
    // With everything durable, a power-loss copy is an exact copy.
    let copy = || base.crash_clone(&mut rand::rngs::mock::StepRng::new(0, 1), 0.0);

    let clean = FaultFs::new(Arc::new(copy()));
    repair(Path::new("/db"), &options(Arc::new(clean.clone()))).unwrap();
    let total = clean.ops();
    let mut fired = 0;
    for n in 0..total {
        let mem = copy();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.fail_once_at(n);
        // Whether this run fails or not, a second one must rebuild it all.
        let _ = repair(Path::new("/db"), &options(Arc::new(fs.clone())));
        fired += fs.injected();
        let again = repair(Path::new("/db"), &options(Arc::new(mem.clone())));
        again.unwrap_or_else(|e| panic!("failure at op {n}: repair again: {e}"));
        let db = Db::open("/db", options(Arc::new(mem.clone())))
            .unwrap_or_else(|e| panic!("failure at op {n}: open: {e}"));
        assert_eq!(dump(&db), model, "failure at op {n}");
    }
    assert!(
        fired * 2 >= total,
        "{fired} failures over {total} operations"
    );
    println!("repair: {total} operation indices tried, {fired} failures injected");
}

/// A power loss at any point of a repair (every operation from the N-th on
/// fails, then the disk keeps its synced state and a random share of the
/// rest) leaves a directory that a second repair rebuilds with every key.
#[test]
fn a_power_loss_at_any_point_of_repair_loses_nothing() {
    use lamina::vfs::fault::FaultFs;
    use lamina::vfs::mem::MemFs;
    use lamina::vfs::Vfs;
    use rand::{Rng, SeedableRng};

    let options = |vfs: Arc<dyn Vfs>| {
        let mut o = common::tiny_options(&MemFs::new());
        o.vfs = vfs;
        o.sync = SyncMode::Always;
        o
    };
    let base = MemFs::new();
    let model = {
        let db = Db::open("/db", options(Arc::new(base.clone()))).unwrap();
        for i in 0..600u64 {
            db.put(&key(i % 250), format!("v{i}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        for i in 0..30u64 {
            db.put(&key(1_000 + i), b"log").unwrap();
        }
        let model = dump(&db);
        drop(db);
        model
    };
    base.remove(Path::new("/db/CURRENT")).unwrap();
    base.sync_dir(Path::new("/db")).unwrap();
    let copy = || base.crash_clone(&mut rand::rngs::mock::StepRng::new(0, 1), 0.0);
    let clean = FaultFs::new(Arc::new(copy()));
    repair(Path::new("/db"), &options(Arc::new(clean.clone()))).unwrap();
    let total = clean.ops();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for n in 0..=total {
        for _ in 0..3 {
            let mem = copy();
            let fs = FaultFs::new(Arc::new(mem.clone()));
            fs.fail_from(n);
            let _ = repair(Path::new("/db"), &options(Arc::new(fs)));
            let keep: f64 = rng.gen_range(0.0..=1.0);
            let after = mem.crash_clone(&mut rng, keep);
            repair(Path::new("/db"), &options(Arc::new(after.clone())))
                .unwrap_or_else(|e| panic!("crash at op {n}: repair again: {e}"));
            let db = Db::open("/db", options(Arc::new(after)))
                .unwrap_or_else(|e| panic!("crash at op {n}: open: {e}"));
            assert_eq!(dump(&db), model, "crash at op {n}");
        }
    }
    println!("repair: {} crash points", 3 * (total + 1));
}

/// Under `lsbm`, with tables that only a compaction buffer holds (older
/// copies of the tree's data), repair rebuilds the database equal to the
/// oracle, deleted keys included, and moves the copies to `lost/`. (The
/// case where a copy holds a value whose tombstone is gone everywhere is
/// not constructed here: it needs a trim that keeps the value's file and
/// removes the tombstone's.)
#[test]
fn repair_leaves_buffer_copies_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = || {
        let mut o = options();
        o.compaction = "lsbm:T=2,l0=1,file=2048,trim=600000".parse().unwrap();
        o
    };
    let db = Db::open(&dir, opts()).unwrap();
    for round in 0..6u64 {
        for i in 0..1_500u64 {
            db.put(&key(i), format!("v{round}.{i}").as_bytes()).unwrap();
        }
        // Deletes whose tombstones the deepest level drops while a buffer
        // still holds an older value.
        for i in (0..1_500u64).filter(|i| i % 5 == round % 5) {
            db.delete(&key(i)).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
    }
    let buffered = db.stats().buffer.files;
    assert!(buffered > 0, "the buffer kept nothing");
    let model = dump(&db);
    db.close().unwrap();
    let report = repair(&dir, &opts()).unwrap();
    assert_eq!(reopened(&dir), model, "{report}");
    let lost_tables = names(&dir.join("lost"))
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .count();
    // Every old table went to lost/; the buffer's copies were not salvaged.
    assert!(
        lost_tables > report.tables_kept.0,
        "{lost_tables} tables in lost/, {} salvaged",
        report.tables_kept.0
    );
}
