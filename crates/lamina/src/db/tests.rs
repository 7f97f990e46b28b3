//! Reverse scans and the merged iterator of a live tree against a
//! `BTreeMap` oracle, across memtables, flushes and compactions.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use rand::SeedableRng;

use super::*;
use crate::iter::tests::{check_moves, random_moves};
use crate::sst::monkey;
use crate::stats::BufferLevelStats;
use crate::vfs::mem::MemFs;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Debug, Clone)]
enum Op {
    Put(u8),
    Delete(u8),
    Flush,
    CompactAll,
    Snapshot,
    /// Reverse scan between two bounds (kind 0 = unbounded, 1 = included,
    /// 2 = excluded, with a key).
    ScanRev((u8, u8), (u8, u8)),
    /// Random moves on the merged internal iterator.
    Moves(u64),
}

fn key(k: u8) -> Vec<u8> {
    format!("k{k:03}").into_bytes()
}

fn bound((kind, k): (u8, u8)) -> Bound<Vec<u8>> {
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(k)),
        _ => Bound::Excluded(key(k)),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// The model's pairs within the bounds, in descending key order.
fn expected_rev(
    model: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let empty = match (lo, hi) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
            l > h
                || (l == h
                    && !(matches!(lo, Bound::Included(_)) && matches!(hi, Bound::Included(_))))
        }
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    model
        .range((lo.clone(), hi.clone()))
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn op() -> impl Strategy<Value = Op> {
    let b = || (0u8..3, 0u8..64);
    prop_oneof![
        30 => (0u8..60).prop_map(Op::Put),
        8 => (0u8..60).prop_map(Op::Delete),
        3 => Just(Op::Flush),
        1 => Just(Op::CompactAll),
        1 => Just(Op::Snapshot),
        4 => (b(), b()).prop_map(|(lo, hi)| Op::ScanRev(lo, hi)),
        2 => any::<u64>().prop_map(Op::Moves),
    ]
}

fn options(fs: &MemFs) -> Options {
    Options {
        vfs: Arc::new(fs.clone()),
        write_buffer_size: 4 * 1024,
        target_file_size: 2 * 1024,
        block_size: 256,
        block_cache_bytes: 64 * 1024,
        compaction: "leveling:T=3,l0=2".parse().unwrap(),
        level0_stop_runs: 0,
        ..Options::default()
    }
}

/// Every internal entry of the tree through the merged iterator, checked to
/// reduce (newest version per user key, tombstones dropped) to `model`.
fn internal_entries(db: &Db, model: &Model) -> (MergingIterator, Entries) {
    let sv = Arc::clone(&db.inner.sv.read());
    let mut merged = db.inner.merged(&sv, &[], None, u64::MAX, None).unwrap().0;
    merged.seek_to_first().unwrap();
    let mut entries = Entries::new();
    let mut live = Model::new();
    let mut last: Option<Vec<u8>> = None;
    while merged.valid() {
        let p = parse_internal_key(merged.key()).unwrap();
        if last.as_deref() != Some(p.user_key) {
            if p.kind == ValueKind::Put {
                live.insert(p.user_key.to_vec(), merged.value().to_vec());
            }
            last = Some(p.user_key.to_vec());
        }
        entries.push((merged.key().to_vec(), merged.value().to_vec()));
        merged.next().unwrap();
    }
    assert_eq!(&live, model, "forward merge disagrees with the model");
    // A flushed memtable and its file are never installed together.
    assert!(
        entries.windows(2).all(|w| w[0].0 != w[1].0),
        "an internal key appears twice in the tree"
    );
    (
        db.inner.merged(&sv, &[], None, u64::MAX, None).unwrap().0,
        entries,
    )
}

/// Runs `ops`; returns the number of levels of the final tree.
fn run(ops: &[Op]) -> usize {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Put(k) => {
                // Long values: a few dozen puts fill the memtable.
                let v = format!("{step:0>120}").into_bytes();
                db.put(&key(*k), &v).unwrap();
                model.insert(key(*k), v);
            }
            Op::Delete(k) => {
                db.delete(&key(*k)).unwrap();
                model.remove(&key(*k));
            }
            Op::Flush => db.flush().unwrap(),
            Op::CompactAll => db.compact_range(None, None).unwrap(),
            Op::Snapshot => snapshots.push((db.snapshot(), model.clone())),
            Op::ScanRev(lo, hi) => {
                let (lo, hi) = (bound(*lo), bound(*hi));
                let got: Vec<_> = db
                    .scan_rev(as_ref(&lo), as_ref(&hi))
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                assert_eq!(
                    got,
                    expected_rev(&model, &lo, &hi),
                    "step {step} {lo:?}..{hi:?}"
                );
            }
            Op::Moves(seed) => {
                let (mut merged, entries) = internal_entries(&db, &model);
                let mut rng = rand::rngs::StdRng::seed_from_u64(*seed);
                check_moves(
                    &mut merged,
                    &entries,
                    &random_moves(&mut rng, &entries, 300),
                );
            }
        }
    }
    for (snap, old) in &snapshots {
        let got: Model = snap
            .scan_rev(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(&got, old, "snapshot {}", snap.sequence());
        let rev: Vec<_> = snap
            .scan_rev(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        assert!(rev.windows(2).all(|w| w[0] > w[1]), "not descending");
    }
    let all: Vec<_> = db
        .scan_rev(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        all,
        expected_rev(&model, &Bound::Unbounded, &Bound::Unbounded)
    );
    db.num_levels()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn scan_rev_and_merged_moves_match_the_oracle(ops in proptest::collection::vec(op(), 1..400)) {
        run(&ops);
    }
}

/// A fixed history spanning the memtable, an immutable-free L0 and deeper
/// levels, with overwrites and deletes in each.
#[test]
fn scan_rev_over_memtable_and_levels() {
    let mut ops = Vec::new();
    for round in 0..4u8 {
        for k in 0..60u8 {
            if (k + round) % 5 == 0 {
                ops.push(Op::Delete(k));
            } else if (k + round) % 2 == 0 {
                ops.push(Op::Put(k));
            }
        }
        ops.push(if round == 1 {
            Op::CompactAll
        } else {
            Op::Flush
        });
        ops.push(Op::Snapshot);
    }
    for k in (0..60u8).step_by(7) {
        ops.push(Op::Put(k));
        ops.push(Op::Delete(k + 1));
    }
    for lo in [(0, 0), (1, 10), (2, 10), (1, 59), (2, 63)] {
        for hi in [(0, 0), (1, 10), (2, 10), (1, 40), (2, 41), (1, 0)] {
            ops.push(Op::ScanRev(lo, hi));
        }
    }
    ops.push(Op::Moves(1));
    ops.push(Op::Moves(2));
    let levels = run(&ops);
    // Besides the memtable (not a level: `Db::num_levels` counts disk
    // levels from 0).
    assert!(levels >= 2, "two disk levels expected, got {levels}");
}

/// Monkey sizes filters from the policy's own level ratio (`leveling:T=4`
/// with `Options::size_ratio` 10 uses 4), and follows `set_compaction`.
#[test]
fn monkey_follows_the_policys_size_ratio() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            vfs: Arc::new(fs),
            compaction: "leveling:T=4".parse().unwrap(),
            size_ratio: 10,
            bloom_monkey: true,
            bloom_bits_per_key: 8.0,
            ..Options::default()
        },
    )
    .unwrap();
    let expect = |t: f64| monkey::allocate(8.0, &monkey::geometric_entries(3, t));
    let got = |db: &Db| -> Vec<f64> { (0..3).map(|l| db.inner.bloom_bits_for(l, 3)).collect() };
    assert_eq!(got(&db), expect(4.0));
    assert_ne!(expect(4.0), expect(10.0));
    db.set_compaction("leveling:T=8").unwrap();
    assert_eq!(got(&db), expect(8.0));
    // A stack keeps no level ratio: the engine's default applies.
    db.set_compaction("binomial:k=4").unwrap();
    assert_eq!(got(&db), expect(10.0));
}

#[test]
fn file_numbers_skip_reserved_ones() {
    let n = FileNumbers {
        next: AtomicU64::new(2),
        reserved: vec![3, 4, 7],
    };
    let got: Vec<u64> = (0..4).map(|_| n.alloc()).collect();
    assert_eq!(got, [2, 5, 6, 8]);
    assert_eq!(n.peek(), 9);
}

/// A writer waiting for compactions to go first
/// (`Options::writes_wait_for_compactions`) is released by shutdown with
/// `Error::Closed`, while a merge is still reading its slow inputs.
#[test]
fn shutdown_ends_the_wait_of_compaction_priority() {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.vfs = Arc::new(crate::vfs::SlowReads::new(
        Arc::new(fs.clone()),
        Duration::from_millis(200),
    ));
    o.writes_wait_for_compactions = true;
    let db = Db::open("/db", o).unwrap();
    let written = AtomicU64::new(0);
    let outcome = std::thread::scope(|s| {
        let writer = s.spawn(|| loop {
            let n = written.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = db.put(format!("key{n:08}").as_bytes(), &[7; 100]) {
                return e;
            }
        });
        // Stalled: no write for a while.
        let mut last = u64::MAX;
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = written.load(Ordering::Relaxed);
            if now == last {
                break;
            }
            last = now;
        }
        db.inner.shutdown.store(true, Ordering::SeqCst);
        db.inner.cv.notify_all();
        writer.join().unwrap()
    });
    assert!(matches!(outcome, Error::Closed), "{outcome:?}");
}

/// `sample_stats` opens no table (no read reaches the file system) and
/// counts filter figures of the open tables only; `stats` opens them all.
/// Everything but the filter figures agrees between the two.
#[test]
fn sample_stats_opens_no_table() {
    let fs = MemFs::new();
    let slow = Arc::new(crate::vfs::SlowReads::new(
        Arc::new(fs.clone()),
        Duration::ZERO,
    ));
    let mut o = options(&fs);
    o.vfs = slow.clone();
    {
        let db = Db::open("/db", o.clone()).unwrap();
        for n in 0..2_000u32 {
            db.put(format!("key{n:06}").as_bytes(), &[7; 50]).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
    }
    let db = Db::open("/db", o).unwrap();
    db.wait_for_compactions().unwrap();
    let before = slow.seeks();
    let sampled = db.sample_stats();
    assert_eq!(slow.seeks(), before, "sample_stats read a file");
    let full = db.stats();
    assert!(slow.seeks() > before, "stats opened no table");
    let files: usize = full.levels.iter().map(|l| l.files).sum();
    assert!(files > 1, "{files}");
    assert!(sampled.levels.iter().all(|l| l.filter_files == 0));
    for (s, f) in sampled.levels.iter().zip(&full.levels) {
        assert_eq!(f.filter_files, f.files);
        assert_eq!((s.files, s.bytes, s.entries), (f.files, f.bytes, f.entries));
    }
    // Now every table is open: the two agree on the filters too.
    let again = db.sample_stats();
    for (s, f) in again.levels.iter().zip(&full.levels) {
        assert_eq!(
            (s.filter_files, s.filter_bytes),
            (f.filter_files, f.filter_bytes)
        );
    }
}

/// Seed 002 §5's four-component lookup against an oracle: a `BTreeMap` of
/// what the database holds answers every get, and for keys it does not
/// hold (so no component answers and the lookup passes every level) the
/// buffers consulted are exactly those the paper's gates open, counted
/// from the version by a direct scan: `B_i` (and `B'_i`) when the run's own
/// file covers the key, and `B'_i` of a draining run `C'_i` when a file
/// drained from it into the level below (`B_{i+1}^0`, the newest table of
/// a host there whose source is `C'_i`) covers it. No filters, so a
/// file's range is its gate; no trim passes, so the version holds still.
#[test]
fn lsbm_lookups_consult_b_prime_through_the_drained_unit() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            compaction: "lsbm:T=3,l0=1,file=1024,trim=600000,freeze=2"
                .parse()
                .unwrap(),
            bloom_bits_per_key: 0.0,
            ..options(&fs)
        },
    )
    .unwrap();
    let mut model = Model::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let key = |k: u32| format!("k{k:05}").into_bytes();
    let mut unit_gated = 0;
    for _ in 0..12 {
        for _ in 0..400 {
            let k = 2 * rand::Rng::gen_range(&mut rng, 0..1_500u32);
            let v = format!("v{}", rand::Rng::gen::<u32>(&mut rng)).into_bytes();
            db.put(&key(k), &v).unwrap();
            model.insert(key(k), v);
        }
        db.wait_for_compactions().unwrap();
        let sv = Arc::clone(&db.inner.sv.read());
        let v = &sv.version;
        let covers = |lo: &[u8], hi: &[u8], k: &[u8]| lo <= k && k <= hi;
        // The paper's gates, by scan: per run with a buffer, open or not.
        let gates = |k: &[u8]| -> (u64, u64) {
            let (mut open, mut through_unit) = (0, 0);
            for (level, run) in v.runs_newest_first() {
                if !v.buffers.contains_key(&run.id) {
                    continue;
                }
                if run.files.iter().any(|f| covers(&f.smallest, &f.largest, k)) {
                    open += 1;
                    continue;
                }
                let drained = v.levels.get(level + 1).is_some_and(|l| {
                    l.runs.iter().any(|host| {
                        v.buffers.get(&host.id).is_some_and(|b| {
                            b.tables()
                                .iter()
                                .take_while(|t| t.source == run.id)
                                .flat_map(|t| t.slots())
                                .any(|s| covers(s.smallest(), s.largest(), k))
                        })
                    })
                });
                if drained {
                    open += 1;
                    through_unit += 1;
                }
            }
            (open, through_unit)
        };
        for k in 0..3_000u32 {
            let k = key(k);
            let probes = || {
                let p = &db.inner.stats.buffer_level_probes;
                p.iter().map(crate::stats::Counter::get).sum::<u64>()
            };
            let before = probes();
            assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
            if !model.contains_key(&k) {
                let (open, through_unit) = gates(&k);
                assert_eq!(
                    probes() - before,
                    open,
                    "key {:?}",
                    String::from_utf8_lossy(&k)
                );
                unit_gated += through_unit;
            }
        }
    }
    assert!(
        unit_gated > 0,
        "no lookup reached B'_i through the drained unit"
    );
    // The per-level statistics against the totals and a scan of the
    // version: each level's buffer files and bytes are its hosts'; the
    // counters add up to the engine-wide ones; nothing froze (freeze=2).
    db.wait_for_compactions().unwrap();
    let st = db.stats().buffer;
    let sv = Arc::clone(&db.inner.sv.read());
    let v = &sv.version;
    for l in &st.levels {
        let live = v.levels[l.level]
            .runs
            .iter()
            .filter_map(|r| v.buffers.get(&r.id))
            .flat_map(|b| b.live_files());
        let (files, bytes) = live.fold((0, 0), |(n, b), f| (n + 1, b + f.size));
        assert_eq!((l.files, l.bytes), (files, bytes), "level {}", l.level);
        assert_eq!((l.appended_frozen, l.frozen_ms, l.frozen), (0, 0, false));
    }
    let sum = |f: fn(&BufferLevelStats) -> u64| st.levels.iter().map(f).sum::<u64>();
    assert_eq!(sum(|l| l.files), st.files);
    assert_eq!(sum(|l| l.appended_live), st.appended_files);
    assert_eq!(sum(|l| l.gets), st.gets);
    assert_eq!(sum(|l| l.invalidated_blocks), st.invalidated_blocks);
    assert!(st.appended_files > 0 && st.gets > 0);
    db.close().unwrap();
}

/// Frozen units are counted per level: with `freeze=0` every unit after a
/// round's first goes in as a marker, so every level's markers are units
/// counted frozen or files the pace rule retired, and each level that
/// froze also kept its rounds' first units live.
#[test]
fn frozen_units_are_counted_per_level() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            compaction: "lsbm:T=3,l0=1,file=1024,trim=600000,freeze=0"
                .parse()
                .unwrap(),
            ..options(&fs)
        },
    )
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    for _ in 0..4_000 {
        let k = rand::Rng::gen_range(&mut rng, 0..1_500u32);
        db.put(format!("k{k:05}").as_bytes(), &[b'v'; 40]).unwrap();
    }
    db.wait_for_compactions().unwrap();
    let st = db.stats().buffer;
    assert!(st.levels.iter().any(|l| l.appended_frozen > 0), "{st:?}");
    let sv = Arc::clone(&db.inner.sv.read());
    let v = &sv.version;
    for l in &st.levels {
        let markers: u64 = v.levels[l.level]
            .runs
            .iter()
            .filter_map(|r| v.buffers.get(&r.id))
            .map(|b| b.removed_count() as u64)
            .sum();
        assert!(markers <= l.appended_frozen + st.retired_files);
        // A round's first unit is measured by nothing yet: kept live.
        if l.appended_frozen > 0 {
            assert!(l.appended_live > 0, "level {}", l.level);
        }
    }
    db.close().unwrap();
}
