//! `Db::wait_for_compactions`: returns once the strategy has nothing left to
//! do, and reports a compaction that fails meanwhile.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{dump, key, tiny_options};
use lamina::vfs::fault::{FaultFs, OpKind};
use lamina::vfs::mem::MemFs;
use lamina::{Db, Error};

/// Six flushed runs of overlapping keys under `nomerge`; returns the oracle.
fn six_runs(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut oracle = BTreeMap::new();
    for flush in 0..6u64 {
        for i in 0..50u64 {
            let k = key((i * 7 + flush) % 120);
            let v = format!("v{flush}-{i}").into_bytes();
            db.put(&k, &v).unwrap();
            oracle.insert(k, v);
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().sorted_runs, 6);
    oracle
}

#[test]
fn returns_once_the_strategy_is_satisfied() {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.compaction = "nomerge".parse().unwrap();
    let db = Db::open("/db", opts).unwrap();
    let oracle = six_runs(&db);
    // Constant merges everything into one run once there are more than k.
    db.set_compaction("constant:k=2").unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert_eq!((s.sorted_runs, s.compactions), (1, 1));
    assert_eq!(dump(&db), oracle);
    // Nothing to do: returns at once, changes nothing.
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().compactions, 1);
    db.close().unwrap();
}

#[test]
fn reports_a_failing_compaction_and_recovers_after() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let mut opts = tiny_options(&MemFs::new());
    opts.vfs = Arc::new(fault.clone());
    opts.compaction = "nomerge".parse().unwrap();
    let db = Db::open("/db", opts).unwrap();
    let oracle = six_runs(&db);
    // Every file creation fails from now on: the merge cannot write output.
    fault.fail_kinds(&[OpKind::Create]);
    fault.fail_from(fault.ops_matching());
    db.set_compaction("constant:k=2").unwrap();
    assert!(matches!(
        db.wait_for_compactions(),
        Err(Error::Background(_))
    ));
    assert_eq!(db.stats().sorted_runs, 6, "a failed merge changes nothing");
    assert_eq!(dump(&db), oracle);
    // Space back: the background thread retries and the wait succeeds.
    fault.clear();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().sorted_runs, 1);
    assert_eq!(dump(&db), oracle);
    db.close().unwrap();
}
