//! A full manual compaction (`compact_range(None, None)`, the DSL's
//! `compact`) drops every tombstone no snapshot needs, whatever the
//! strategy: it takes every file, so nothing older can hold a deleted key.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;

use common::{dump, key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::Db;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SPECS: &[&str] = &[
    "leveling:T=3,l0=2",
    "tiered:b=3",
    "leveled:b0=2,b=3",
    "binomial:k=3",
    "bigtable:k=3",
    "concurrent",
    "nomerge",
    "lo1:T=3",
    "blsm:T=3",
    "lsbm:T=3",
    "tiered:b=3,partition=size",
    "tier:T=3",
    "lazy-leveling:T=3",
];

fn open(fs: &MemFs, spec: &str) -> Db {
    Db::open("/db", {
        let mut o = tiny_options(fs);
        o.compaction = spec.parse().unwrap();
        o
    })
    .unwrap()
}

fn tombstones(db: &Db) -> u64 {
    db.stats().levels.iter().map(|l| l.tombstones).sum()
}

#[test]
fn full_compaction_drops_every_tombstone_under_every_strategy() {
    for spec in SPECS {
        let fs = MemFs::new();
        let db = open(&fs, spec);
        let mut rng = StdRng::seed_from_u64(11);
        let mut model = BTreeMap::new();
        for step in 0..6_000u64 {
            let k = key(rng.gen_range(0..1_500));
            if rng.gen_bool(0.3) {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = step.to_le_bytes().repeat(4);
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            if step % 700 == 0 {
                db.flush().unwrap();
            }
        }
        db.wait_for_compactions().unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(dump(&db), model, "{spec}");
        assert_eq!(tombstones(&db), 0, "{spec}: {:?}", db.stats().levels);
    }
}

/// The case: a run holding only deletes (`10:DEL:L3` in `s`) was
/// moved to the last level untouched.
#[test]
fn deletes_alone_do_not_survive_a_full_compaction() {
    for spec in SPECS {
        let fs = MemFs::new();
        let db = open(&fs, spec);
        db.put(&key(10), b"v").unwrap();
        db.delete(&key(10)).unwrap();
        db.delete(&key(11)).unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(tombstones(&db), 0, "{spec}: {:?}", db.stats().levels);
        assert!(dump(&db).is_empty(), "{spec}");
    }
}

/// Several runs in the last level (tiering): the older ones are inputs
/// too, so they do not keep the newer runs' tombstones alive.
#[test]
fn tombstones_over_older_input_runs_are_dropped() {
    let fs = MemFs::new();
    let db = open(&fs, "tier:T=3");
    let mut model = BTreeMap::new();
    for round in 0..40u64 {
        for i in 0..150 {
            let (k, v) = (key(round * 50 + i), round.to_le_bytes().to_vec());
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        // Settled after every flush, so the tree's shape does not depend
        // on how merges and flushes interleave on a loaded machine.
        db.wait_for_compactions().unwrap();
    }
    let levels = db.stats().levels;
    assert!(levels.last().is_some_and(|l| l.runs > 1), "{levels:?}");
    for i in (0..2_000).step_by(3) {
        db.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
    db.compact_range(None, None).unwrap();
    assert_eq!(tombstones(&db), 0, "{:?}", db.stats().levels);
    assert_eq!(dump(&db), model);
}

/// A tombstone a snapshot still needs stays: the snapshot keeps reading
/// the value it saw.
#[test]
fn a_snapshot_keeps_the_tombstones_it_needs() {
    for spec in SPECS {
        let fs = MemFs::new();
        let db = open(&fs, spec);
        db.put(&key(1), b"old").unwrap();
        db.flush().unwrap();
        let snap = db.snapshot();
        db.delete(&key(1)).unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(
            snap.get(&key(1)).unwrap().as_deref(),
            Some(&b"old"[..]),
            "{spec}"
        );
        assert_eq!(db.get(&key(1)).unwrap(), None, "{spec}");
        drop(snap);
        db.compact_range(None, None).unwrap();
        assert_eq!(tombstones(&db), 0, "{spec}");
    }
}
