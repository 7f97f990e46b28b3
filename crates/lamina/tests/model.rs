//! Model-based test: long random sequences of every operation, checked
//! against a `BTreeMap` oracle, across flushes, compactions and reopens.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;

use common::{dump, key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Compression, Db, DbIterator, DbRevIterator, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..120);
    (0..len).map(|_| rng.gen()).collect()
}

/// Values for the compression runs: half of them random bytes (blocks of
/// those stay raw), half runs of letters (blocks of those compress).
fn mixed_value(rng: &mut StdRng) -> Vec<u8> {
    let v = value(rng);
    if rng.gen_bool(0.5) {
        return v;
    }
    (0..v.len()).map(|i| b'a' + v[i / 12] % 3).collect()
}

/// The block compression of one session (between two reopens): one type
/// for every level, and per-level overrides.
type Setting = (Compression, &'static [Compression]);

/// No compression, every session.
const UNCOMPRESSED: &[Setting] = &[(Compression::None, &[])];

fn bound(rng: &mut StdRng, space: u64) -> Bound<Vec<u8>> {
    match rng.gen_range(0..5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(key(rng.gen_range(0..space))),
        _ => Bound::Excluded(key(rng.gen_range(0..space))),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn expected_range(
    model: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| {
            let above = match lo {
                Bound::Included(l) => *k >= l,
                Bound::Excluded(l) => *k > l,
                Bound::Unbounded => true,
            };
            let below = match hi {
                Bound::Included(h) => *k <= h,
                Bound::Excluded(h) => *k < h,
                Bound::Unbounded => true,
            };
            above && below
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A range to delete: mostly short, sometimes long, sometimes starting or
/// ending between keys.
fn range(rng: &mut StdRng, space: u64) -> (Vec<u8>, Vec<u8>) {
    let start = rng.gen_range(0..space);
    let len = if rng.gen_bool(0.1) {
        rng.gen_range(0..space / 4 + 1)
    } else {
        rng.gen_range(0..8)
    };
    let mut lo = key(start);
    if rng.gen_bool(0.2) {
        lo.push(0);
    }
    (lo, key(start + len))
}

fn model_delete_range(model: &mut Model, lo: &[u8], hi: &[u8]) {
    model.retain(|k, _| !(lo <= k.as_slice() && k.as_slice() < hi));
}

const LEVELING: &str = "leveling:T=3,l0=2";

/// A scan's `next_ref`: the next pair, lent until the next call.
type NextRef<I> = fn(&mut I) -> Option<lamina::Result<(&[u8], &[u8])>>;

/// The pairs a scan lends through `next_ref`, each copied only here, after
/// the scan has produced it.
fn lent<I>(mut scan: I, next_ref: NextRef<I>) -> Entries {
    let mut pairs = Entries::new();
    while let Some(pair) = next_ref(&mut scan) {
        let (k, v) = pair.unwrap();
        pairs.push((k.to_vec(), v.to_vec()));
    }
    pairs
}

/// A scan of `[lo, hi]` both ways, owned and borrowed, equals the
/// oracle's range.
fn check_scans(db: &Db, model: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, what: &str) {
    let got: Vec<_> = db
        .scan(as_ref(lo), as_ref(hi))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut expected = expected_range(model, lo, hi);
    assert_eq!(got, expected, "{what} scan");
    let scan = db.scan(as_ref(lo), as_ref(hi)).unwrap();
    assert_eq!(
        lent(scan, DbIterator::next_ref),
        expected,
        "{what} scan, borrowed"
    );
    let rev: Vec<_> = db
        .scan_rev(as_ref(lo), as_ref(hi))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    expected.reverse();
    assert_eq!(rev, expected, "{what} scan_rev");
    let scan = db.scan_rev(as_ref(lo), as_ref(hi)).unwrap();
    assert_eq!(
        lent(scan, DbRevIterator::next_ref),
        expected,
        "{what} scan_rev, borrowed"
    );
}

fn run_model(seed: u64, ops: usize, space: u64, compaction: &str, threads: usize) {
    run_model_compressed(seed, ops, space, compaction, threads, UNCOMPRESSED);
}

/// [`run_model`] where the i-th session (reopens start new ones) writes
/// its files with `settings[i % len]`; values compress unless every
/// setting is none. Returns the compressions the live files had at the
/// end of each session.
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
fn run_model_compressed(
    seed: u64,
    ops: usize,
    space: u64,
    compaction: &str,
    threads: usize,
    settings: &[Setting],
) -> BTreeSet<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = MemFs::new();
    let mut session = 0;
    let options = |session: usize| {
        let mut o = tiny_options(&fs);
        o.compaction = compaction.parse().unwrap();
        o.compaction_threads = threads;
        let (all, per_level) = settings[session % settings.len()];
        o.compression = all;
        o.compression_per_level = per_level.to_vec();
        o
    };
    let value: fn(&mut StdRng) -> Vec<u8> = if settings == UNCOMPRESSED {
        value
    } else {
        mixed_value
    };
    let mut seen = BTreeSet::new();
    let mut db = Db::open("/db", options(session)).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(lamina::Snapshot, Model)> = Vec::new();
    // Counters restart at every open; sum them over the sessions.
    let (mut flushes, mut compactions, mut errors) = (0, 0, 0);
    for step in 0..ops {
        match rng.gen_range(0..100) {
            0..=37 => {
                let (k, v) = (key(rng.gen_range(0..space)), value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            38 | 39 => {
                let (lo, hi) = range(&mut rng, space);
                db.delete_range(&lo, &hi).unwrap();
                model_delete_range(&mut model, &lo, &hi);
            }
            40..=49 => {
                let k = key(rng.gen_range(0..space));
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            50..=54 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = key(rng.gen_range(0..space));
                    if rng.gen_bool(0.05) {
                        let (lo, hi) = range(&mut rng, space);
                        batch.delete_range(&lo, &hi);
                        model_delete_range(&mut model, &lo, &hi);
                    } else if rng.gen_bool(0.3) {
                        batch.delete(&k);
                        model.remove(&k);
                    } else {
                        let v = value(&mut rng);
                        batch.put(&k, &v);
                        model.insert(k, v);
                    }
                }
                db.write(batch).unwrap();
            }
            55..=79 => {
                let k = key(rng.gen_range(0..space));
                assert_eq!(
                    db.get(&k).unwrap(),
                    model.get(&k).cloned(),
                    "seed {seed} step {step} get"
                );
            }
            80..=89 => {
                let (lo, hi) = (bound(&mut rng, space), bound(&mut rng, space));
                check_scans(&db, &model, &lo, &hi, &format!("seed {seed} step {step}"));
            }
            90..=92 => {
                if snapshots.len() < 4 {
                    snapshots.push((db.snapshot(), model.clone()));
                } else {
                    let (snap, old) = snapshots.remove(rng.gen_range(0..snapshots.len()));
                    let k = key(rng.gen_range(0..space));
                    assert_eq!(
                        snap.get(&k).unwrap(),
                        old.get(&k).cloned(),
                        "seed {seed} step {step} snapshot get"
                    );
                    let all: Model = snap
                        .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    assert_eq!(all, old, "seed {seed} step {step} snapshot scan");
                    let rev: Vec<_> = snap
                        .scan_rev(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Vec<_> = old
                        .iter()
                        .rev()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(rev, want, "seed {seed} step {step} snapshot scan_rev");
                    let all = snap.scan(Bound::Unbounded, Bound::Unbounded).unwrap();
                    let all: Model = lent(all, DbIterator::next_ref).into_iter().collect();
                    assert_eq!(all, old, "seed {seed} step {step} snapshot scan, borrowed");
                    let rev = snap.scan_rev(Bound::Unbounded, Bound::Unbounded).unwrap();
                    assert_eq!(
                        lent(rev, DbRevIterator::next_ref),
                        want,
                        "seed {seed} step {step} snapshot scan_rev, borrowed"
                    );
                }
            }
            93..=95 => db.flush().unwrap(),
            96 => db.compact_range(None, None).unwrap(),
            97 => {
                let (a, b) = (key(rng.gen_range(0..space)), key(rng.gen_range(0..space)));
                let (lo, hi) = (a.clone().min(b.clone()), a.max(b));
                let lo = rng.gen_bool(0.8).then_some(lo);
                let hi = rng.gen_bool(0.8).then_some(hi);
                db.compact_range(lo.as_deref(), hi.as_deref())
                    .unwrap_or_else(|e| panic!("seed {seed} step {step} compact_range: {e}"));
            }
            _ => {
                snapshots.clear();
                let st = db.stats();
                flushes += st.flushes;
                compactions += st.compactions + st.trivial_moves;
                errors += st.compaction_errors;
                db.close().unwrap();
                seen.extend(live_compressions(&fs));
                session += 1;
                db = Db::open("/db", options(session)).unwrap();
                assert_eq!(dump(&db), model, "seed {seed} step {step} after reopen");
            }
        }
    }
    assert_eq!(dump(&db), model, "seed {seed} final");
    let st = db.stats();
    flushes += st.flushes;
    compactions += st.compactions + st.trivial_moves;
    errors += st.compaction_errors;
    assert!(
        flushes > 10 && compactions > 5,
        "{compaction}: flushes {flushes}, compactions {compactions}"
    );
    assert_eq!(
        errors,
        0,
        "{compaction}: compactions rejected or failed:\n{}",
        logged_failures(&fs)
    );
    db.close().unwrap();
    seen.extend(live_compressions(&fs));
    seen
}

/// The background failures the database in `/db` wrote to its LOG: what a
/// failing count of compaction errors needs beside it.
fn logged_failures(fs: &MemFs) -> String {
    ["/db/LOG.old", "/db/LOG"]
        .iter()
        .filter_map(|p| fs.read_all(Path::new(p)).ok())
        .flat_map(|bytes| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| l.contains("failed"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How the live files of the database in `/db` are compressed: each
/// file's compression, and `raw blocks` if some of its data blocks are
/// stored raw, `compressed blocks` if some are compressed.
fn live_compressions(fs: &MemFs) -> BTreeSet<String> {
    let vfs: std::sync::Arc<dyn lamina::vfs::Vfs> = std::sync::Arc::new(fs.clone());
    let dir = std::path::Path::new("/db");
    let mut seen = BTreeSet::new();
    for name in fs.file_names(dir).iter().filter(|n| n.ends_with(".sst")) {
        let r = lamina::inspect::sst(&vfs, &dir.join(name)).unwrap();
        assert_eq!(r.bad_blocks().count(), 0);
        seen.insert(r.compression.to_string());
        for b in &r.blocks {
            let raw = b.stored_as.as_deref() == Some("none");
            seen.insert(
                if raw {
                    "raw blocks"
                } else {
                    "compressed blocks"
                }
                .to_string(),
            );
        }
    }
    seen
}

/// Every compression against the oracle (puts, deletes, range deletes,
/// flushes, compactions, reopens), each session switching to another:
/// the tree mixes files of every type, each read by its own blocks' type
/// bytes, and files of one compression mix raw and compressed blocks.
#[test]
fn model_with_every_compression_changed_at_each_reopen() {
    use Compression::{Lz4, None as Raw, Zstd};
    let settings: &[Setting] = &[
        (Lz4, &[]),
        (Zstd(3), &[]),
        (Raw, &[]),
        // RocksDB's usual shape: the top levels raw, lz4 below.
        (Raw, &[Raw, Lz4]),
        (Raw, &[Lz4, Zstd(1)]),
    ];
    let mut seen = BTreeSet::new();
    for seed in 40..43 {
        seen.extend(run_model_compressed(
            seed, 6_000, 300, LEVELING, 2, settings,
        ));
    }
    for want in [
        "none",
        "lz4",
        "zstd:3",
        "zstd:1",
        "raw blocks",
        "compressed blocks",
    ] {
        assert!(seen.contains(want), "no {want} in {seen:?}");
    }
}

#[test]
fn model_small_key_space() {
    for seed in 0..3 {
        run_model(seed, 6_000, 300, LEVELING, 1);
    }
}

#[test]
fn model_large_key_space() {
    for seed in 10..12 {
        run_model(seed, 12_000, 5_000, LEVELING, 2);
    }
}

/// Every stack-based policy and both layouts of the default policy keep the
/// tree equal to the oracle; each also runs its merges without an executor
/// rejection (`run_model` asserts no compaction errors), with one compaction
/// thread and with two picking and running merges concurrently.
#[test]
fn model_under_every_policy() {
    let specs = [
        "leveling:T=4,l0=1",
        "blsm:T=3,l0=2,file=2048",
        "lsbm:T=3,l0=2,file=2048,trim=20",
        "lsbm:T=3,l0=2,file=1024,unit=3,trim=20",
        "leveled:b0=2,b=4,file=4096",
        "bigtable:k=4",
        "exploring:k=5",
        "constant:k=3",
        "minlatency:k=4",
        "binomial:k=4",
        "tiered:b=3",
        "concurrent",
    ];
    for (seed, spec) in specs.iter().enumerate() {
        for threads in [1, 2] {
            run_model(100 + seed as u64, 6_000, 2_000, spec, threads);
        }
    }
}

/// Every preset of the compaction design space (seeds 001 and 004) keeps
/// the tree equal to the oracle, with one and two compaction threads, and
/// the executor accepts every task it picks. Small T and short TTLs make
/// the tombstone and run triggers fire within a few thousand operations.
#[test]
fn model_under_every_design_preset() {
    let specs = [
        "full:T=3",
        "lo1:T=3",
        "lo2:T=3",
        "rr:T=3",
        "cold:T=3",
        "old:T=3",
        "tsd:T=3,threshold=0.1",
        "tsa:T=3,threshold=5",
        "tier:T=3",
        "tier:T=3,sa=0.5",
        "1-leveling:T=3,l0=2",
        "lazy-leveling:T=3",
        "tiered:T=3",
        "leveled:T=3",
        "lazy-leveled:T=3",
        "partial:T=3,c=0.2",
        "partial:T=4,c=0.5",
    ];
    for (seed, spec) in specs.iter().enumerate() {
        for threads in [1, 2] {
            run_model(300 + seed as u64, 4_000, 2_000, spec, threads);
        }
    }
}

/// A free TOML composition: a hybrid of a tiered first level, partial
/// leveling with staleness and tombstone triggers below, and a leveled
/// last level moved whole.
#[test]
fn model_under_a_toml_composition() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hybrid.toml");
    std::fs::write(
        &path,
        r#"
T = 3
[[level]]
layout = "tiering"
triggers = ["runs:3"]
granularity = "level"
[[level]]
layout = "leveling"
triggers = ["tombstone-density:0.2", "stale:50", "saturation-files"]
granularity = "files:2"
movement = ["tsd:0.2", "old", "lo1"]
[last]
layout = "leveling"
triggers = ["saturation"]
granularity = "fraction:0.5"
movement = ["rr"]
"#,
    )
    .unwrap();
    let spec = format!("toml:{}", path.display());
    for threads in [1, 2] {
        run_model(400, 4_000, 2_000, &spec, threads);
    }
}

#[test]
fn model_on_the_real_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        let mut o = lamina::Options::default();
        o.write_buffer_size = 16 * 1024;
        o.target_file_size = 8 * 1024;
        o.compaction = "leveling:T=3,l0=2".parse().unwrap();
        o
    };
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(99);
    let mut db = Db::open(dir.path(), opts()).unwrap();
    for round in 0..4 {
        for _ in 0..3_000 {
            let k = key(rng.gen_range(0..2_000));
            if rng.gen_bool(0.2) {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = value(&mut rng);
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if round % 2 == 0 {
            db.close().unwrap();
        } else {
            drop(db); // no flush: recovery replays the WAL
        }
        db = Db::open(dir.path(), opts()).unwrap();
        assert_eq!(dump(&db), model);
    }
    // A second open of a locked directory is refused, as open in this
    // process.
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(lamina::Error::LockedInProcess(_))
    ));
}

#[test]
fn deletes_are_eventually_purged_by_full_compaction() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    for i in 0..2_000 {
        db.put(&key(i), b"some value bytes").unwrap();
    }
    for i in 0..2_000 {
        db.delete(&key(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let stats = db.stats();
    let tombstones: u64 = stats.levels.iter().map(|l| l.tombstones).sum();
    let entries: u64 = stats.levels.iter().map(|l| l.entries).sum();
    assert_eq!((tombstones, entries), (0, 0), "{stats:?}");
    assert!(dump(&db).is_empty());
}

/// `compact_range` of part of the key space: files of other runs reaching
/// past the bounds are pulled in, so the output never overlaps a file left
/// out (it used to fail with "file N overlaps a file of run M").
#[test]
fn partial_compact_range_keeps_every_run_disjoint() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Model::new();
    for round in 0..40 {
        for _ in 0..200 {
            let (k, v) = (key(rng.gen_range(0..500)), value(&mut rng));
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        let lo = key(rng.gen_range(0..500));
        db.compact_range(Some(&lo), None)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let hi = key(rng.gen_range(0..500));
        db.compact_range(None, Some(&hi))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
    assert_eq!(dump(&db), model);
    db.close().unwrap();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    assert_eq!(dump(&db), model);
}

/// Seed 000 ch. 5: every partitioning rule under every stack policy
/// keeps the tree equal to the oracle (gets, scans both ways, snapshots,
/// reopen), with sub-merges on two threads, and the executor accepts
/// every partitioned plan.
#[test]
fn model_under_every_partitioner() {
    let policies = [
        "tiered:b=3",
        "binomial:k=3",
        "concurrent:k=4",
        "exploring:k=4",
    ];
    let mut seed = 300;
    for policy in policies {
        for partition in ["none", "size", "local", "global"] {
            let spec = format!("{policy},partition={partition},theta=2048,subcompactions=2");
            seed += 1;
            run_model(seed, 4_000, 2_000, &spec, 1 + (seed as usize % 2));
        }
    }
}

/// Partitioned merges move what does not overlap and sub-merge the rest:
/// flushes of disjoint key ranges (semi-sequential keys) are moved, not
/// rewritten; random keys give several sub-merges per merge. The contents
/// match the oracle either way.
#[test]
fn partitioned_merges_move_disjoint_files_and_split_the_rest() {
    for (name, semi_sequential) in [("semi-sequential", true), ("random", false)] {
        let fs = MemFs::new();
        let mut options = tiny_options(&fs);
        options.compaction = "tiered:b=3,partition=global,theta=4096,subcompactions=2"
            .parse()
            .unwrap();
        let db = Db::open("/db", options).unwrap();
        let mut model = Model::new();
        let mut rng = StdRng::seed_from_u64(9);
        for i in 0..6_000u64 {
            let n = if semi_sequential {
                i
            } else {
                rng.gen_range(0..1_000_000)
            };
            let (k, v) = (key(n), value(&mut rng));
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        assert_eq!(dump(&db), model, "{name}");
        let st = db.stats();
        // A merge whose every group moved is a trivial move.
        assert!(
            st.compactions + st.trivial_moves > 0,
            "{name}: no merge ran"
        );
        if semi_sequential {
            assert!(
                st.merge_moved_files > 0 && st.merge_moved_bytes > 0,
                "{name}: nothing moved: {st:?}"
            );
        } else {
            assert!(st.max_sub_merges >= 2, "{name}: one sub-merge per merge");
        }
        assert_eq!(st.compaction_errors, 0);
        // Every merge lands in one bucket of the sub-merge histogram.
        assert_eq!(st.sub_merges_per_merge.iter().sum::<u64>(), st.compactions);
        if !semi_sequential {
            assert!(st.merge_bytes_per_sec > 0.0);
        }
        db.close().unwrap();
    }
}

/// bLSM's split levels (seed 002 §4.1) settle into their shape: every
/// level at most its capacity `S_i = l0 × buffer × T^i` (the deepest may
/// hold anything), at most two runs below level 0 (`C_i` and `C'_i`), and
/// the contents equal the oracle.
#[test]
fn blsm_levels_settle_split_and_within_capacity() {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.compaction = "blsm:T=3,l0=2,file=2048".parse().unwrap();
    let buffer = opts.write_buffer_size as u64;
    let db = Db::open("/db", opts).unwrap();
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..20_000 {
        let (k, v) = (key(rng.gen_range(0..5_000)), value(&mut rng));
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(dump(&db), model);
    let st = db.stats();
    let deepest = st.levels.len() - 1;
    assert!(deepest >= 2, "{:?}", st.levels);
    for l in &st.levels {
        let capacity = 2 * buffer * 3u64.pow(l.level as u32);
        if l.level < deepest {
            assert!(
                l.bytes <= capacity,
                "level {}: {} > {capacity}",
                l.level,
                l.bytes
            );
        }
        if l.level > 0 {
            assert!(l.runs <= 2, "level {} has {} runs", l.level, l.runs);
        }
    }
    db.close().unwrap();
}

/// LSbM's compaction buffer (seed 002): with uniform updates and reads
/// on a hot range, the buffer keeps merged-down files, answers point
/// lookups and range scans, retires and trims files, and never changes an
/// answer: every get, scan (both ways) and snapshot read equals the oracle,
/// before and after a reopen that rebuilds the buffer from the manifest.
#[test]
fn lsbm_buffer_answers_reads_like_the_oracle() {
    let fs = MemFs::new();
    let opts = |trim_ms: u64| {
        let mut o = tiny_options(&fs);
        o.compaction = format!("lsbm:T=3,l0=2,file=2048,trim={trim_ms},keep=0.5")
            .parse()
            .unwrap();
        o.block_cache_bytes = 256 * 1024;
        o
    };
    let mut db = Db::open("/db", opts(5)).unwrap();
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(42);
    let space = 3_000u64;
    for k in 0..space {
        let (k, v) = (key(k), value(&mut rng));
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    let mut snapshot: Option<(lamina::Snapshot, Model)> = None;
    let hot = |rng: &mut StdRng| rng.gen_range(1_000..1_300);
    for step in 0..40_000 {
        match rng.gen_range(0..100) {
            0..=29 => {
                let (k, v) = (key(rng.gen_range(0..space)), value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            30..=32 => {
                let k = key(rng.gen_range(0..space));
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            33..=89 => {
                let k = key(hot(&mut rng));
                assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "step {step}");
            }
            90..=97 => {
                let lo = hot(&mut rng);
                let (lo, hi) = (
                    Bound::Included(key(lo)),
                    Bound::Excluded(key(lo + rng.gen_range(1..40))),
                );
                check_scans(&db, &model, &lo, &hi, &format!("step {step}"));
            }
            98 => {
                if let Some((snap, old)) = &snapshot {
                    let k = key(hot(&mut rng));
                    assert_eq!(snap.get(&k).unwrap(), old.get(&k).cloned(), "step {step}");
                }
                snapshot = Some((db.snapshot(), model.clone()));
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
    drop(snapshot);
    let st = db.stats().buffer;
    assert!(st.appended_files > 0, "{st:?}");
    assert!(st.gets > 0 && st.scans > 0, "{st:?}");
    assert!(st.retired_files + st.trimmed_files > 0, "{st:?}");
    // The buffer's share of the invalidations is a part of all of them.
    assert!(st.invalidated_blocks <= db.stats().cache_invalidated_blocks);
    // No trim pass from here on (one in flight finishes within the sleep),
    // so the buffer seen before the reopen is the one the manifest holds.
    db.set_compaction("lsbm:T=3,l0=2,file=2048,trim=600000,keep=0.5")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    db.wait_for_compactions().unwrap();
    let before = db.stats().buffer;
    assert_eq!(dump(&db), model);
    drop(db);
    db = Db::open("/db", opts(600_000)).unwrap();
    let after = db.stats().buffer;
    assert_eq!(
        (after.bytes, after.files, after.tables, after.markers),
        (before.bytes, before.files, before.tables, before.markers)
    );
    assert_eq!(dump(&db), model);
    for k in 0..space {
        let k = key(k);
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
    }
    db.close().unwrap();
}
