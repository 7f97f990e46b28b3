//! An injected I/O error at every operation index of a reference workload:
//! each failure surfaces as an error (never a panic, never silent loss), and
//! reopening shows every acknowledged write.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::sync::Arc;

use common::{compressed_blocks, dump, key};
use lamina::vfs::fault::FaultFs;
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Compression, Db, Error, Options};

const LEVELING: &str = "leveling:T=2,l0=2";

fn options(vfs: Arc<dyn lamina::vfs::Vfs>) -> Options {
    options_with(vfs, LEVELING)
}

fn options_with(vfs: Arc<dyn lamina::vfs::Vfs>, compaction: &str) -> Options {
    options_compressed(vfs, compaction, Compression::None)
}

fn options_compressed(
    vfs: Arc<dyn lamina::vfs::Vfs>,
    compaction: &str,
    compression: Compression,
) -> Options {
    let mut o = Options::default();
    o.compression = compression;
    o.vfs = vfs;
    o.write_buffer_size = 2 * 1024;
    o.target_file_size = 2 * 1024;
    o.block_size = 256;
    o.compaction = compaction.parse().unwrap();
    o.level0_stop_runs = 0;
    o
}

const WRITES: u64 = 120;

/// Runs the reference workload; returns which writes were acknowledged and
/// which may have been applied despite an error.
fn workload(fs: &FaultFs, compaction: &str, compression: Compression) -> (Vec<u64>, Vec<u64>) {
    let (mut acked, mut unknown) = (Vec::new(), Vec::new());
    let opts = options_compressed(Arc::new(fs.clone()), compaction, compression);
    let Ok(db) = Db::open("/db", opts) else {
        return (acked, unknown);
    };
    for i in 0..WRITES {
        match db.put(&key(i), format!("value-{i}").as_bytes()) {
            Ok(()) => acked.push(i),
            // Refused before the WAL was touched: certainly not applied.
            Err(Error::Background(_)) | Err(Error::Closed) => {}
            Err(_) => unknown.push(i),
        }
        if i % 40 == 39 {
            let _ = db.flush();
        }
    }
    let _ = db.compact_range(None, None);
    let _ = db.close();
    (acked, unknown)
}

/// Fails operation N of the workload for every N of a clean run; returns
/// the indices tried and the failures that fired.
fn error_at_every_index(compaction: &str) -> (u64, u64) {
    error_at_every_index_compressed(compaction, Compression::None)
}

/// [`error_at_every_index`] with the tables written with `compression`.
fn error_at_every_index_compressed(compaction: &str, compression: Compression) -> (u64, u64) {
    // Count the operations of a clean run.
    let clean_mem = MemFs::new();
    let clean = FaultFs::new(Arc::new(clean_mem.clone()));
    let (acked, _) = workload(&clean, compaction, compression);
    assert_eq!(acked.len() as u64, WRITES);
    if compression != Compression::None {
        let compressed = compressed_blocks(&clean_mem);
        assert!(compressed > 0, "{compression}: no block stored compressed");
    }
    let total = clean.ops();
    assert!(total > 100, "only {total} operations");

    let mut failures_seen = 0;
    for n in 0..total {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.fail_once_at(n);
        let (acked, unknown) = workload(&fs, compaction, compression);
        failures_seen += fs.injected();
        let db = Db::open(
            "/db",
            options_compressed(Arc::new(mem.clone()), compaction, compression),
        )
        .unwrap_or_else(|e| panic!("failure at op {n}: reopen failed: {e}"));
        let got = dump(&db);
        for i in &acked {
            assert_eq!(
                got.get(&key(*i)),
                Some(&format!("value-{i}").into_bytes()),
                "failure at op {n}: write {i} lost"
            );
        }
        for k in got.keys() {
            let known = acked.iter().chain(&unknown).any(|i| &key(*i) == k);
            assert!(known, "failure at op {n}: unexpected key {k:?}");
        }
        db.close().unwrap();
    }
    assert!(
        failures_seen >= total / 2,
        "{compaction}: {failures_seen} failures injected over {total} runs"
    );
    println!("{compaction}: {total} operation indices tried, {failures_seen} failures injected");
    (total, failures_seen)
}

#[test]
fn an_io_error_at_any_operation_loses_no_acknowledged_write() {
    error_at_every_index(LEVELING);
}

/// The same with LZ4 tables: a failure while a compressed table is being
/// written (or read back) loses no acknowledged write either.
#[test]
fn an_io_error_at_any_operation_with_lz4_tables() {
    error_at_every_index_compressed(LEVELING, Compression::Lz4);
}

#[test]
fn an_io_error_at_any_operation_under_stack_policies() {
    for spec in [
        "tiered:b=2",
        "bigtable:k=3",
        "leveled:b0=2,b=2,file=2048",
        // LSbM's compaction buffer (seed 002): its records in the manifest.
        "lsbm:T=2,l0=1,file=2048,trim=1",
        // Partitioned merges (seed 000 ch. 5): moves, parallel sub-merges.
        "tiered:b=2,partition=global,theta=1024,subcompactions=2",
        "binomial:k=2,partition=local,theta=1024,subcompactions=2",
    ] {
        error_at_every_index(spec);
    }
}

#[test]
fn a_full_disk_fails_writes_keeps_reads_and_recovers_when_space_returns() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", options(Arc::new(fs.clone()))).unwrap();
    for i in 0..50 {
        db.put(&key(i), b"before").unwrap();
    }
    fs.set_space_budget(Some(fs.bytes_appended() + 3_000));
    let mut first_error = None;
    for i in 50..400 {
        if let Err(e) = db.put(&key(i), b"during the full disk") {
            first_error = Some(e);
            break;
        }
    }
    let err = first_error.expect("the disk never filled");
    assert!(
        err.is_no_space() || matches!(err, Error::Background(_)),
        "{err}"
    );
    assert_eq!(db.get(&key(1)).unwrap().as_deref(), Some(&b"before"[..]));
    fs.set_space_budget(None);
    // Without a restart, writes work again once the flush retry succeeds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match db.put(b"after", b"space returned") {
            Ok(()) => break,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => panic!("writes did not resume: {e}"),
        }
    }
    // A flush attempt that began while the disk was full may still report
    // its failure after a write got in; the retry that follows succeeds.
    while let Err(e) = db.flush() {
        assert!(
            std::time::Instant::now() < deadline,
            "flush did not resume: {e}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        db.get(b"after").unwrap().as_deref(),
        Some(&b"space returned"[..])
    );
    db.close().unwrap();
}

fn big_buffer_options(fs: &FaultFs, compaction: &str) -> Options {
    let mut o = options(Arc::new(fs.clone()));
    // No flush unless asked: each test chooses which write hits the wall.
    o.write_buffer_size = 1 << 20;
    o.compaction = compaction.parse().unwrap();
    o
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat(40)).into_bytes()
}

/// Polls `f` until it succeeds; the deadline only turns a hang into a failure.
fn eventually<T>(what: &str, mut f: impl FnMut() -> lamina::Result<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// A failed append abandons the WAL: the next write switches to a new WAL
/// and memtable, and the old memtable's flush, on the still-full disk,
/// fails too, so later writes may get `Error::Background` until it is
/// retried after space returns.
#[test]
fn enospc_on_a_wal_append_fails_that_write_and_writes_resume_once_space_returns() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", big_buffer_options(&fs, "leveling:T=2,l0=2")).unwrap();
    for i in 0..20 {
        db.put(&key(i), &value(i)).unwrap();
    }
    // Less than a record header: the append fails whole.
    fs.set_space_budget(Some(fs.bytes_appended() + 10));
    let err = db.put(&key(20), &value(20)).unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert!(err.to_string().contains(".log"), "{err}");
    for i in 21..25 {
        let err = db.put(&key(i), &value(i)).unwrap_err();
        let refused =
            matches!(err, Error::Background(_)) && err.to_string().contains("os error 28");
        assert!(err.is_no_space() || refused, "{err}");
    }
    assert_eq!(db.get(&key(3)).unwrap(), Some(value(3)));
    assert_eq!(db.get(&key(21)).unwrap(), None);
    fs.set_space_budget(None);
    // No restart: the next write, or the flush retry, goes through.
    eventually("writes did not resume", || db.put(&key(100), &value(100)));
    drop(db); // a crash: recovery replays the WALs
    let db = Db::open("/db", options(Arc::new(mem))).unwrap();
    let got = dump(&db);
    let expected: Vec<u64> = (0..20).chain([100]).collect();
    assert_eq!(got.len(), expected.len());
    for i in expected {
        assert_eq!(got.get(&key(i)), Some(&value(i)), "key {i}");
    }
    db.close().unwrap();
}

#[test]
fn enospc_during_a_flush_refuses_writes_keeps_reads_and_resumes_when_space_returns() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", big_buffer_options(&fs, "leveling:T=2,l0=2")).unwrap();
    for i in 0..300 {
        db.put(&key(i), &value(i)).unwrap();
    }
    // The WAL is written; the SST (some 20 KB) cannot be.
    fs.set_space_budget(Some(fs.bytes_appended() + 2_000));
    let err = db.flush().unwrap_err();
    assert!(matches!(err, Error::Background(_)), "{err}");
    assert!(err.to_string().contains("os error 28"), "{err}");
    assert!(matches!(
        db.put(&key(1_000), b"refused"),
        Err(Error::Background(_))
    ));
    for i in [0, 150, 299] {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
    fs.set_space_budget(None);
    eventually("writes did not resume", || db.put(&key(1_001), b"after"));
    db.flush().unwrap();
    let got = dump(&db);
    assert_eq!(got.len(), 301);
    assert!(!got.contains_key(&key(1_000)));
    db.close().unwrap();
    let db = Db::open("/db", options(Arc::new(mem))).unwrap();
    assert_eq!(dump(&db), got);
    db.close().unwrap();
}

#[test]
fn enospc_during_a_compaction_keeps_the_tree_and_the_compaction_succeeds_once_space_returns() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    // No background merges: the manual compaction is the only one.
    let db = Db::open("/db", big_buffer_options(&fs, "nomerge")).unwrap();
    let mut model = std::collections::BTreeMap::new();
    for round in 0..4u64 {
        for i in 0..200 {
            let k = key((i * 7 + round * 3) % 500);
            db.put(&k, &value(round * 1_000 + i)).unwrap();
            model.insert(k, value(round * 1_000 + i));
        }
        db.flush().unwrap();
    }
    let ssts = |m: &MemFs| -> Vec<String> {
        m.file_names(std::path::Path::new("/db"))
            .into_iter()
            .filter(|n| n.ends_with(".sst"))
            .collect()
    };
    let before = ssts(&mem);
    assert_eq!(before.len(), 4);
    fs.set_space_budget(Some(fs.bytes_appended() + 3_000));
    let err = db.compact_range(None, None).unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert_eq!(dump(&db), model, "reads after the failed compaction");
    assert_eq!(ssts(&mem), before, "partial output left behind");
    fs.set_space_budget(None);
    db.compact_range(None, None).unwrap(); // no restart
    assert_eq!(dump(&db), model);
    db.put(b"after", b"compaction").unwrap();
    model.insert(b"after".to_vec(), b"compaction".to_vec());
    db.close().unwrap();
    let db = Db::open("/db", options(Arc::new(mem.clone()))).unwrap();
    assert_eq!(dump(&db), model);
    db.close().unwrap();
    // The merge replaced its inputs (deleted once unpinned, at the latest
    // by the open above).
    let after = ssts(&mem);
    assert!(
        before.iter().all(|f| !after.contains(f)),
        "inputs not replaced: {before:?} -> {after:?}"
    );
}

/// A database on a full disk cannot be opened for writing (recovery writes a
/// new log and manifest), but opens read-only: every key readable, nothing
/// written, writes refused.
#[test]
fn a_full_disk_still_opens_read_only() {
    let mem = MemFs::new();
    let model = {
        let db = Db::open("/db", options_with(Arc::new(mem.clone()), LEVELING)).unwrap();
        for i in 0..400u64 {
            db.put(&key(i), format!("value-{i}").as_bytes()).unwrap();
            if i == 300 {
                db.flush().unwrap();
            }
        }
        db.delete(&key(7)).unwrap();
        let model = dump(&db);
        drop(db); // keys 301.. stay in the log only
        model
    };
    let fs = FaultFs::new(Arc::new(mem.clone()));
    fs.set_space_budget(Some(0));
    let err = Db::open("/db", options_with(Arc::new(fs.clone()), LEVELING)).unwrap_err();
    assert!(err.is_no_space(), "{err}");
    let files_before: Vec<(String, u64)> = listing(&mem);
    let db = Db::open("/db", {
        let mut o = options_with(Arc::new(fs.clone()), LEVELING);
        o.read_only = true;
        o
    })
    .unwrap();
    assert_eq!(dump(&db), model);
    assert_eq!(
        db.get(&key(350)).unwrap().as_deref(),
        Some(&b"value-350"[..])
    );
    assert!(matches!(db.put(b"x", b"y"), Err(Error::ReadOnly)));
    assert!(matches!(db.flush(), Err(Error::ReadOnly)));
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
    assert_eq!(listing(&mem), files_before);
}

/// Names and sizes of the files of `/db`.
fn listing(mem: &MemFs) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = mem
        .list(std::path::Path::new("/db"))
        .unwrap()
        .into_iter()
        .map(|n| {
            let len = mem
                .open_read(&std::path::Path::new("/db").join(&n))
                .map_or(u64::MAX, |f| f.len());
            (n, len)
        })
        .collect();
    v.sort();
    v
}
