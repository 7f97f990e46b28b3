//! `Options::writes_wait_for_compactions`, seed 001's "compactions have
//! priority over writes", for every strategy: a memtable becomes a flush
//! only once the tree is settled, so a writer never sees more than one
//! flushed run beyond the shape the strategy defines, however slow the
//! merges are. Without the option the same slow merges let flushed runs
//! pile up (the control), which shows the check can fail.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{dump, key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::vfs::SlowReads;
use lamina::Db;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const T: usize = 3;

fn open(fs: &MemFs, spec: &str, wait: bool) -> Db {
    let mut o = tiny_options(fs);
    // Merges read their inputs through a 2 ms seek per file: much slower
    // than the writer fills an 8 KiB memtable.
    o.vfs = Arc::new(SlowReads::new(
        Arc::new(fs.clone()),
        Duration::from_millis(2),
    ));
    o.compaction = spec.parse().unwrap();
    o.size_ratio = T;
    o.writes_wait_for_compactions = wait;
    Db::open("/db", o).unwrap()
}

/// Writes puts and deletes, checking the tree's runs per level after every
/// write against `bound(level)`; returns the oracle and the most runs seen
/// above the bound (0 when it always held).
fn write_checked(
    db: &Db,
    n: u64,
    bound: &dyn Fn(usize) -> usize,
) -> (BTreeMap<Vec<u8>, Vec<u8>>, usize) {
    let mut rng = StdRng::seed_from_u64(5);
    let mut model = BTreeMap::new();
    let mut excess = 0;
    for step in 0..n {
        let k = key(rng.gen_range(0..3_000));
        if rng.gen_bool(0.1) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = step.to_le_bytes().repeat(12);
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        for (i, l) in db.stats().levels.iter().enumerate() {
            excess = excess.max(l.runs.saturating_sub(bound(i)));
        }
    }
    (model, excess)
}

/// Leveled strategies settle at one run per level (`design.rs`); a flush
/// adds one run to level 0.
fn leveled(level: usize) -> usize {
    if level == 0 {
        2
    } else {
        1
    }
}

/// Tiering settles below T runs per level; a flush makes T in level 0,
/// and a merge of a full level makes at most T in the next.
fn tiered(_: usize) -> usize {
    T
}

#[test]
fn writes_never_overtake_pending_compactions() {
    let cases: [(&str, &dyn Fn(usize) -> usize); 6] = [
        ("lo1", &leveled),
        ("rr", &leveled),
        ("old", &leveled),
        ("tsd", &leveled),
        ("full", &leveled),
        ("tier", &tiered),
    ];
    for (spec, bound) in cases {
        let fs = MemFs::new();
        let db = open(&fs, spec, true);
        let (model, excess) = write_checked(&db, 2_000, bound);
        assert_eq!(excess, 0, "{spec}: a flush overtook a pending compaction");
        assert_eq!(dump(&db), model, "{spec}");
        let st = db.stats();
        assert!(st.levels.len() >= 3, "{spec}: {:?}", st.levels);
        assert!(st.stalls > 0, "{spec}: the writer never waited");
        assert_eq!(st.compaction_errors, 0, "{spec}");
        // Shutdown with compactions still owed: `close` waits its turn
        // too and ends; the data survive a reopen.
        db.close().unwrap();
        let db = open(&fs, spec, true);
        assert_eq!(dump(&db), model, "{spec} after reopening");
    }
}

/// The control: the same slow merges without the option let flushed runs
/// accumulate in level 0 (`lo1` does not hold writes by itself).
#[test]
fn without_the_option_flushes_pile_up_behind_slow_merges() {
    let fs = MemFs::new();
    let db = open(&fs, "lo1", false);
    let (model, excess) = write_checked(&db, 3_000, &leveled);
    assert!(excess > 0, "{:?}", db.stats().levels);
    assert_eq!(dump(&db), model);
}

/// Dropping a database while a writer would wait for compactions ends the
/// wait: the writer's next switch sees the shutdown, and the background
/// threads stop.
#[test]
fn a_database_with_compactions_owed_closes() {
    let fs = MemFs::new();
    let db = open(&fs, "lo1", true);
    let (model, _) = write_checked(&db, 1_000, &leveled);
    drop(db);
    let db = open(&fs, "lo1", true);
    assert_eq!(dump(&db), model);
}
