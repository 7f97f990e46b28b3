//! Seek-triggered compaction (`Options::seek_compaction`): a database at
//! rest whose level 0 holds runs beside level 1 reads one block per run per
//! seek; once reads have spent level 0's allowance the policy merges it
//! into level 1 and a seek reads one block, with every answer unchanged
//! (checked against a `BTreeMap`). With the option off, reads change
//! nothing.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::{check_against, key};
use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Keys in the database: run `r` (0: level 1, 1 and 2: level 0) holds the
/// keys `i` with `i % 3 == r`, so every run spans the whole key space and
/// no key has two versions.
const KEYS: u64 = 1_500;

/// No block cache, so every data block a read touches is read from its
/// file; room for all of a run in one memtable; level 0 merged by writes
/// only at four runs.
fn options(fs: &MemFs, seek_compaction: bool, bloom_bits: f64) -> Options {
    Options::builder()
        .vfs(Arc::new(fs.clone()))
        .write_buffer_size(1 << 20)
        .target_file_size(4 * 1024)
        .block_size(512)
        .block_cache_bytes(0)
        .bloom_bits_per_key(bloom_bits)
        .compaction(lamina::Compaction::parse("leveling:T=10,l0=4").unwrap())
        .level0_stop_runs(0)
        .seek_compaction(seek_compaction)
        .build()
        .unwrap()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i:08}").into_bytes()
}

/// Level 1 (one run, made by a full compaction) and two level-0 runs,
/// flushed and closed: the model of what it holds.
fn build(opts: &Options) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let db = Db::open("/db", opts.clone()).unwrap();
    for r in 0..3 {
        for i in (r..KEYS).step_by(3) {
            db.put(&key(i), &value(i)).unwrap();
            model.insert(key(i), value(i));
        }
        db.flush().unwrap();
        if r == 0 {
            db.compact_range(None, None).unwrap();
        }
    }
    db.wait_for_compactions().unwrap();
    let runs = runs_per_level(&db);
    assert_eq!(runs.first(), Some(&2), "level 0: {runs:?}");
    assert_eq!(runs.iter().sum::<usize>(), 3, "{runs:?}");
    db.close().unwrap();
    model
}

fn runs_per_level(db: &Db) -> Vec<usize> {
    db.stats().levels.iter().map(|l| l.runs).collect()
}

/// Data blocks read from files per seek (a cursor made and positioned,
/// one entry taken) over `n` random keys away from the edges, where every
/// run's range covers the key.
fn blocks_per_seek(db: &Db, rng: &mut StdRng, n: u64) -> f64 {
    let before = db.stats().blocks_read;
    for _ in 0..n {
        let i = rng.gen_range(3..KEYS - 3);
        let mut cursor = db.iter(Bound::Unbounded, Bound::Unbounded).unwrap();
        cursor.seek(&key(i)).unwrap();
        assert_eq!((cursor.key(), cursor.value()), (&key(i)[..], &value(i)[..]));
    }
    (db.stats().blocks_read - before) as f64 / n as f64
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    check_against(db, model, KEYS + 10);
}

#[test]
fn seeks_at_rest_merge_level_0_and_then_read_one_block() {
    let fs = MemFs::new();
    let opts = options(&fs, true, 10.0);
    let model = build(&opts);
    let db = Db::open("/db", opts).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    // Opens every table (its index and filter reads are not the seeks').
    check(&db, &model);
    // Model: each of the three runs spans the key, so a seek positions in
    // one block of each. 40 seeks stay within the allowance (100).
    assert_eq!(blocks_per_seek(&db, &mut rng, 40), 3.0);
    assert_eq!(runs_per_level(&db).first(), Some(&2));
    // Spend the rest of the allowance: the merge is due, and the settled
    // tree has it run.
    blocks_per_seek(&db, &mut rng, 100);
    db.wait_for_compactions().unwrap();
    let runs = runs_per_level(&db);
    assert_eq!(runs.first(), Some(&0), "{runs:?}");
    assert_eq!(runs.iter().sum::<usize>(), 1, "{runs:?}");
    check(&db, &model);
    // One run: one block per seek.
    assert_eq!(blocks_per_seek(&db, &mut rng, 40), 1.0);
    // Level 0 is empty: reads charge nothing and nothing more is merged.
    let compactions = db.stats().compactions;
    blocks_per_seek(&db, &mut rng, 300);
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().compactions, compactions);
    db.close().unwrap();
    // Reopened, the same data in one run.
    let db = Db::open("/db", options(&fs, true, 10.0)).unwrap();
    check(&db, &model);
    assert_eq!(runs_per_level(&db).iter().sum::<usize>(), 1);
}

#[test]
fn gets_that_read_level_0_in_vain_merge_it() {
    // Without filters a get for a level-1 key reads a block of each
    // level-0 run first: LevelDB's wasted seeks.
    let fs = MemFs::new();
    let opts = options(&fs, true, 0.0);
    let model = build(&opts);
    let db = Db::open("/db", opts).unwrap();
    let compactions = db.stats().compactions;
    // Gets that the newest run answers waste nothing.
    for i in (2..KEYS).step_by(3).take(200) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().compactions, compactions);
    assert_eq!(runs_per_level(&db).first(), Some(&2));
    // 100 gets of level-1 keys spend the allowance.
    for i in (0..KEYS).step_by(3).take(100) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
    }
    db.wait_for_compactions().unwrap();
    assert_eq!(runs_per_level(&db).first(), Some(&0));
    check(&db, &model);
}

#[test]
fn with_the_option_off_reads_merge_nothing() {
    let fs = MemFs::new();
    let opts = options(&fs, false, 10.0);
    let model = build(&opts);
    let db = Db::open("/db", opts).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    check(&db, &model);
    assert_eq!(blocks_per_seek(&db, &mut rng, 500), 3.0);
    db.wait_for_compactions().unwrap();
    assert_eq!(runs_per_level(&db).first(), Some(&2));
    assert_eq!(blocks_per_seek(&db, &mut rng, 40), 3.0);
    check(&db, &model);
}
