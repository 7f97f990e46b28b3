//! An injected I/O error at every operation index of a reference workload:
//! each failure surfaces as an error (never a panic, never silent loss), and
//! reopening shows every acknowledged write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{dump, key};
use lamina::vfs::fault::FaultFs;
use lamina::vfs::mem::MemFs;
use lamina::{Db, Error, Options};

fn options(vfs: Arc<dyn lamina::vfs::Vfs>) -> Options {
    Options {
        vfs,
        write_buffer_size: 2 * 1024,
        target_file_size: 2 * 1024,
        block_size: 256,
        compaction: "leveling:T=2,l0=2".into(),
        level0_stop_runs: 0,
        ..Options::default()
    }
}

const WRITES: u64 = 120;

/// Runs the reference workload; returns which writes were acknowledged and
/// which may have been applied despite an error.
fn workload(fs: &FaultFs) -> (Vec<u64>, Vec<u64>) {
    let (mut acked, mut unknown) = (Vec::new(), Vec::new());
    let Ok(db) = Db::open("/db", options(Arc::new(fs.clone()))) else {
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

#[test]
fn an_io_error_at_any_operation_loses_no_acknowledged_write() {
    // Count the operations of a clean run.
    let clean = FaultFs::new(Arc::new(MemFs::new()));
    let (acked, _) = workload(&clean);
    assert_eq!(acked.len() as u64, WRITES);
    let total = clean.ops();
    assert!(total > 100, "only {total} operations");

    let mut failures_seen = 0;
    for n in 0..total {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.fail_once_at(n);
        let (acked, unknown) = workload(&fs);
        failures_seen += fs.injected();
        let db = Db::open("/db", options(Arc::new(mem.clone())))
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
        "{failures_seen} failures injected over {total} runs"
    );
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
    db.flush().unwrap();
    assert_eq!(
        db.get(b"after").unwrap().as_deref(),
        Some(&b"space returned"[..])
    );
    db.close().unwrap();
}
