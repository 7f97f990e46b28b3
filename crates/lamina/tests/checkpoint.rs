//! `Db::checkpoint`: the copy opens, holds a prefix of the write order that
//! includes every write acknowledged before the call, is independent of the
//! source afterwards, survives a power loss once the call returned, and a
//! checkpoint interrupted by an I/O error never opens as a wrong database.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]
// Options are built by mutating a default, which also works once they are
// `#[non_exhaustive]`.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{dump, key};
use lamina::vfs::fault::{FaultFs, OpKind};
use lamina::vfs::mem::MemFs;
use lamina::vfs::{OsFs, Vfs};
use lamina::{Db, Error, Options};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn options(vfs: Arc<dyn Vfs>) -> Options {
    let mut o = Options::default();
    o.vfs = vfs;
    o.write_buffer_size = 16 * 1024;
    o.target_file_size = 8 * 1024;
    o.block_size = 512;
    o.compaction = "leveling:T=3,l0=2".parse().unwrap();
    o.level0_stop_runs = 0;
    o
}

fn thread_key(t: usize, i: u64) -> Vec<u8> {
    format!("t{t}-{i:08}").into_bytes()
}

fn value(t: usize, i: u64) -> Vec<u8> {
    format!("value-{t}-{i}-{}", "x".repeat((i % 40) as usize)).into_bytes()
}

/// Deleted and live keys written before the writers start: the copy must
/// keep the deletes.
fn preload(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..600 {
        db.put(&key(i), &value(9, i)).unwrap();
        model.insert(key(i), value(9, i));
    }
    db.flush().unwrap();
    for i in (0..600).step_by(3) {
        db.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
    model
}

#[test]
fn copy_taken_under_concurrent_writes_holds_every_acknowledged_write_as_a_prefix() {
    const THREADS: usize = 3;
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("db"), tmp.path().join("copy"));
    let db = Arc::new(Db::open(&src, options(Arc::new(OsFs))).unwrap());
    let preloaded = preload(&db);

    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, stop, acked) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&acked));
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    db.put(&thread_key(t, i), &value(t, i)).unwrap();
                    i += 1;
                    acked[t].store(i, Ordering::Release);
                }
            })
        })
        .collect();
    while acked.iter().any(|a| a.load(Ordering::Acquire) < 3_000) {
        std::thread::yield_now();
    }
    let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
    let report = db.checkpoint(&dst).unwrap();
    // Keep writing after the call, so anything leaking into the copy shows.
    let after_call: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
    while acked
        .iter()
        .zip(&after_call)
        .any(|(a, &n)| a.load(Ordering::Acquire) < n + 500)
    {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(report.files > 0);
    assert_eq!(report.copied, 0, "same file system: every SST is linked");

    // The source compacts everything and lets go of its files; the copy
    // must not depend on them.
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    drop(db);

    // The source's newest OPTIONS file travels with the copy.
    let options_files = |dir: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("OPTIONS-") && !n.contains('.'))
            .map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap()))
            .collect();
        v.sort();
        v
    };
    let copied = options_files(&dst);
    assert_eq!(copied.len(), 1, "{copied:?}");
    assert_eq!(options_files(&src).last(), copied.last());

    let copy = Db::open(&dst, options(Arc::new(OsFs))).unwrap();
    let got = dump(&copy);
    for (k, v) in &preloaded {
        assert_eq!(got.get(k), Some(v), "preloaded key {k:?}");
    }
    for i in (0..600).step_by(3) {
        assert!(!got.contains_key(&key(i)), "deleted key {i} is back");
    }
    for t in 0..THREADS {
        let prefix = format!("t{t}-").into_bytes();
        let mine: Vec<_> = got.iter().filter(|(k, _)| k.starts_with(&prefix)).collect();
        let n = mine.len() as u64;
        assert!(
            n >= before[t],
            "thread {t}: {n} writes in the copy, {} acknowledged before",
            before[t]
        );
        assert!(
            n <= after_call[t] + 1,
            "thread {t}: the copy holds writes made after the call returned"
        );
        for (i, (k, v)) in mine.into_iter().enumerate() {
            assert_eq!(*k, thread_key(t, i as u64), "thread {t}: not a prefix");
            assert_eq!(*v, value(t, i as u64));
        }
    }
    // The copy is a database of its own: it takes writes and reopens.
    copy.put(b"only-in-copy", b"1").unwrap();
    copy.close().unwrap();
    let copy = Db::open(&dst, options(Arc::new(OsFs))).unwrap();
    assert_eq!(copy.get(b"only-in-copy").unwrap(), Some(b"1".to_vec()));
    drop(copy);
    let db = Db::open(&src, options(Arc::new(OsFs))).unwrap();
    assert_eq!(db.get(b"only-in-copy").unwrap(), None);
}

#[test]
fn refuses_a_non_empty_target_and_a_read_only_database() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("db"), tmp.path().join("copy"));
    let db = Db::open(&src, options(Arc::new(OsFs))).unwrap();
    db.put(b"k", b"v").unwrap();
    std::fs::create_dir(&dst).unwrap();
    std::fs::write(dst.join("notes.txt"), b"mine").unwrap();
    let err = db.checkpoint(&dst).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(std::fs::read(dst.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(
        std::fs::read_dir(&dst).unwrap().count(),
        1,
        "nothing was added"
    );
    // Into the source directory itself: not empty either.
    assert!(db.checkpoint(&src).is_err());
    db.close().unwrap();

    let mut ro = options(Arc::new(OsFs));
    ro.read_only = true;
    let db = Db::open(&src, ro).unwrap();
    assert!(matches!(
        db.checkpoint(tmp.path().join("c2")),
        Err(Error::ReadOnly)
    ));
}

fn write_reference(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = preload(db);
    for i in 600..900 {
        db.put(&key(i), &value(1, i)).unwrap();
        model.insert(key(i), value(1, i));
    }
    model
}

#[test]
fn a_returned_checkpoint_survives_power_loss() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(Arc::new(fs.clone()))).unwrap();
    let model = write_reference(&db);
    db.checkpoint("/copy").unwrap();
    for seed in 0..8 {
        let crashed = fs.crash_clone(&mut StdRng::seed_from_u64(seed), 0.5);
        let copy = Db::open("/copy", options(Arc::new(crashed))).unwrap();
        assert_eq!(dump(&copy), model, "seed {seed}");
    }
}

#[test]
fn an_interrupted_checkpoint_never_opens_as_a_wrong_database() {
    // Count the operations of a clean checkpoint, then fail each one.
    let clean = FaultFs::new(Arc::new(MemFs::new()));
    let db = Db::open("/db", options(Arc::new(clean.clone()))).unwrap();
    let model = write_reference(&db);
    let start = clean.ops();
    db.checkpoint("/copy").unwrap();
    let ops = clean.ops() - start;
    assert!(clean.ops_of(OpKind::Link) > 0);
    drop(db);

    let mut refused = 0;
    for n in 0..ops {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        let db = Db::open("/db", options(Arc::new(fs.clone()))).unwrap();
        let model_n = write_reference(&db);
        assert_eq!(model_n, model);
        fs.fail_once_at(fs.ops() + n);
        let result = db.checkpoint("/copy");
        fs.clear();
        // The source is untouched either way.
        assert_eq!(dump(&db), model, "source after failing op {n}");
        drop(db);
        let mut existing = options(Arc::new(fs.clone()));
        existing.create_if_missing = false;
        match Db::open("/copy", existing) {
            Ok(copy) => {
                // A failure after CURRENT was written (or in the info log)
                // may leave a complete copy; it must then be right.
                assert_eq!(dump(&copy), model, "copy after failing op {n} ({result:?})");
            }
            Err(e) => {
                assert!(
                    result.is_err(),
                    "op {n}: checkpoint succeeded but the copy fails: {e}"
                );
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "some failure must leave an unopenable copy");
}
