//! Durability under crashes: simulated power loss on the in-memory
//! filesystem (thousands of crash points), and real SIGKILLs of a child
//! process writing with `sync=always`.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{compressed_blocks, dump, key};
use lamina::vfs::mem::MemFs;
use lamina::vfs::{DirLock, RandomAccessFile, Vfs, WritableFile};
use lamina::{Compression, Db, Options, SyncMode, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Operation `i` of a deterministic history: a put, a delete or a batch.
#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    DeleteRange(Vec<u8>, Vec<u8>),
}

fn op(seed: u64, i: u64, space: u64) -> Op {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(i));
    match rng.gen_range(0..20) {
        0 => {
            let start = rng.gen_range(0..space);
            Op::DeleteRange(key(start), key(start + rng.gen_range(1..40)))
        }
        1..=11 => Op::Put(
            key(rng.gen_range(0..space)),
            format!("v{i}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes(),
        ),
        12..=15 => Op::Delete(key(rng.gen_range(0..space))),
        _ => Op::Batch(
            (0..rng.gen_range(1..6))
                .map(|j| {
                    let k = key(rng.gen_range(0..space));
                    (k, (j % 3 != 2).then(|| format!("b{i}.{j}").into_bytes()))
                })
                .collect(),
        ),
    }
}

fn apply_db(db: &Db, op: &Op) -> lamina::Result<()> {
    match op {
        Op::Put(k, v) => db.put(k, v),
        Op::Delete(k) => db.delete(k),
        Op::DeleteRange(lo, hi) => db.delete_range(lo, hi),
        Op::Batch(items) => {
            let mut b = WriteBatch::new();
            for (k, v) in items {
                match v {
                    Some(v) => b.put(k, v),
                    None => b.delete(k),
                }
            }
            db.write(b)
        }
    }
}

/// Applies `op` to the model; returns the keys it touched.
fn apply_model(m: &mut Model, op: &Op) -> Vec<Vec<u8>> {
    match op {
        Op::Put(k, v) => {
            m.insert(k.clone(), v.clone());
            vec![k.clone()]
        }
        Op::Delete(k) => {
            m.remove(k);
            vec![k.clone()]
        }
        Op::DeleteRange(lo, hi) => {
            let gone: Vec<Vec<u8>> = m
                .range(lo.clone()..hi.clone())
                .map(|(k, _)| k.clone())
                .collect();
            for k in &gone {
                m.remove(k);
            }
            gone
        }
        Op::Batch(items) => {
            for (k, v) in items {
                match v {
                    Some(v) => m.insert(k.clone(), v.clone()),
                    None => m.remove(k),
                };
            }
            items.iter().map(|(k, _)| k.clone()).collect()
        }
    }
}

/// The number `m` in `lo..=hi` such that the state after the first `m`
/// operations equals `got`, if any. Walks the history once, tracking the set
/// of keys where the model and `got` differ.
fn matching_prefix(history: &[Op], lo: usize, hi: usize, got: &Model) -> Option<usize> {
    let mut model = Model::new();
    for o in &history[..lo] {
        apply_model(&mut model, o);
    }
    let keys: HashSet<&Vec<u8>> = model.keys().chain(got.keys()).collect();
    let mut differ: HashSet<Vec<u8>> = keys
        .into_iter()
        .filter(|k| model.get(*k) != got.get(*k))
        .cloned()
        .collect();
    if differ.is_empty() {
        return Some(lo);
    }
    for (m, o) in history.iter().enumerate().take(hi).skip(lo) {
        for k in apply_model(&mut model, o) {
            if model.get(&k) == got.get(&k) {
                differ.remove(&k);
            } else {
                differ.insert(k);
            }
        }
        if differ.is_empty() {
            return Some(m + 1);
        }
    }
    None
}

fn crash_options_compressed(
    fs: &MemFs,
    sync: SyncMode,
    compaction: &str,
    compression: Compression,
) -> Options {
    let mut o = Options::default();
    o.compression = compression;
    o.vfs = Arc::new(fs.clone());
    o.write_buffer_size = 4 * 1024;
    o.target_file_size = 2 * 1024;
    o.block_size = 256;
    o.compaction = compaction.parse().unwrap();
    o.level0_stop_runs = 0;
    o.sync = sync;
    o
}

/// Runs a history with background flushes and compactions, cloning the disk
/// as after a power loss at `crashes` random moments, and checks each clone.
/// Returns the crash points checked and the merges (compactions and trivial
/// moves) the database ran meanwhile.
fn power_loss(seed: u64, sync: SyncMode, spec: &str, ops: usize, crashes: usize) -> (usize, u64) {
    power_loss_compressed(seed, sync, spec, ops, crashes, Compression::None, 0)
}

/// [`power_loss`] with the tables written with `compression`, and up to
/// `recycle` obsolete tables' files kept for new tables to take over
/// (`Options::recycle_table_files`).
fn power_loss_compressed(
    seed: u64,
    sync: SyncMode,
    spec: &str,
    ops: usize,
    crashes: usize,
    compression: Compression,
    recycle: usize,
) -> (usize, u64) {
    let crash_options = |fs: &MemFs, sync: SyncMode, spec: &str| {
        let mut o = crash_options_compressed(fs, sync, spec, compression);
        o.recycle_table_files = recycle;
        o
    };
    let fs = MemFs::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let history: Vec<Op> = (0..ops as u64).map(|i| op(seed, i, 400)).collect();
    let db = Db::open("/db", crash_options(&fs, sync, spec)).unwrap();
    let mut crash_at: Vec<usize> = (0..crashes).map(|_| rng.gen_range(0..ops)).collect();
    crash_at.sort_unstable();
    let mut durable = 0; // every op before this is durable (sync or flush)
    let mut checked = 0;
    let mut next_crash = crash_at.iter().peekable();
    for (i, o) in history.iter().enumerate() {
        apply_db(&db, o).unwrap();
        if sync == SyncMode::Always {
            durable = i + 1;
        } else if rng.gen_ratio(1, 200) {
            db.flush().unwrap();
            durable = i + 1;
        }
        while next_crash.next_if(|&&c| c == i).is_some() {
            let keep = rng.gen_range(0.0..=1.0);
            let clone = fs.crash_clone(&mut rng, keep);
            let reopened = Db::open("/db", crash_options(&clone, sync, spec)).unwrap_or_else(|e| {
                panic!("seed {seed} {spec}: crash clone after op {i} does not open: {e}")
            });
            let got = dump(&reopened);
            let m = matching_prefix(&history, durable, i + 1, &got);
            assert!(
                m.is_some(),
                "seed {seed} {spec}: state after a crash at op {i} is no prefix of the history in {durable}..={}",
                i + 1
            );
            reopened.close().unwrap();
            checked += 1;
        }
    }
    let stats = db.stats();
    drop(db);
    if compression != Compression::None {
        assert!(
            compressed_blocks(&fs) > 0,
            "seed {seed}: no block was stored compressed"
        );
    }
    (checked, stats.compactions + stats.trivial_moves)
}

/// Both sync modes with LZ4 tables: flushes and compactions write
/// compressed blocks (the values compress), and every crash clone opens to
/// a prefix of the history as without compression.
#[test]
fn power_loss_with_lz4_tables() {
    let mut points = 0;
    for seed in 200..204 {
        points += power_loss_compressed(
            seed,
            SyncMode::Always,
            LEVELING,
            1_500,
            60,
            Compression::Lz4,
            0,
        )
        .0;
        points += power_loss_compressed(
            seed + 100,
            SyncMode::None,
            LEVELING,
            1_500,
            60,
            Compression::Lz4,
            0,
        )
        .0;
    }
    assert!(points >= 400, "only {points} crash points");
}

/// With obsolete tables' files taken over by new tables
/// (`recycle_table_files`), under leveling and under Global-Range
/// partitioned merges (many small files), in both sync modes: every crash
/// clone opens to a prefix of the history.
#[test]
fn power_loss_with_recycled_table_files() {
    let mut points = 0;
    let mut merges = 0;
    for (i, spec) in [
        LEVELING,
        "tiered:b=3,partition=global,theta=2048,subcompactions=2",
    ]
    .into_iter()
    .enumerate()
    {
        for seed in 0..3u64 {
            let seed = 500 + 10 * i as u64 + seed;
            for sync in [SyncMode::Always, SyncMode::None] {
                let (p, m) =
                    power_loss_compressed(seed, sync, spec, 1_500, 60, Compression::None, 8);
                points += p;
                merges += m;
            }
        }
    }
    assert!(points >= 600, "only {points} crash points");
    assert!(merges >= 50, "only {merges} merges");
}

#[test]
fn power_loss_with_sync_always_keeps_every_acknowledged_write() {
    let mut points = 0;
    for seed in 0..12 {
        points += power_loss(seed, SyncMode::Always, LEVELING, 1_500, 100).0;
    }
    assert!(points >= 1_000, "only {points} crash points");
    println!("{points} crash points with sync=always");
}

#[test]
fn power_loss_without_sync_recovers_a_prefix_at_least_up_to_the_last_flush() {
    let mut points = 0;
    for seed in 100..110 {
        points += power_loss(seed, SyncMode::None, LEVELING, 1_500, 100).0;
    }
    assert!(points >= 1_000, "only {points} crash points");
    println!("{points} crash points with sync=none");
}

const LEVELING: &str = "leveling:T=3,l0=2";

/// Every strategy `compaction::policy_from_spec` accepts (the default one is
/// covered above at more crash points), each with both sync modes.
const EVERY_OTHER_STRATEGY: [&str; 13] = [
    "leveled:b0=2,b=3,file=2048",
    "blsm:T=3,l0=2,file=2048",
    "lsbm:T=3,l0=2,file=2048,trim=20",
    "tiered:b=3",
    "bigtable:k=3",
    "exploring:k=4",
    "constant:k=3",
    "minlatency:k=3",
    "binomial:k=3",
    "concurrent",
    "nomerge",
    // Partitioned merges (seed 000 ch. 5): moves, parallel sub-merges.
    "tiered:b=3,partition=global,theta=2048,subcompactions=2",
    "binomial:k=3,partition=size,theta=2048,subcompactions=2",
];

#[test]
fn power_loss_under_every_compaction_strategy() {
    // LAMINA_CRASH_SCALE multiplies the crash points (a long session run).
    let scale: usize = std::env::var("LAMINA_CRASH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut points = 0;
    for (i, spec) in EVERY_OTHER_STRATEGY.iter().enumerate() {
        let mut merges = 0;
        for r in 0..scale as u64 {
            let seed = 200 + 10 * i as u64 + 1_000 * r;
            for (seed, sync) in [(seed, SyncMode::Always), (seed + 1, SyncMode::None)] {
                let (checked, merged) = power_loss(seed, sync, spec, 3_000, 150);
                points += checked;
                merges += merged;
            }
        }
        // Crash points must fall among merges, not only flushes.
        assert!(*spec == "nomerge" || merges > 0, "{spec} never merged");
    }
    assert!(points >= 2_500 * scale, "only {points} crash points");
    println!(
        "{points} crash points over {} strategies",
        EVERY_OTHER_STRATEGY.len()
    );
}

// ------------------------------------------- a merge's outputs synced together

/// What [`SyncWatch`] saw: the SSTs created since it was armed, those
/// synced since, and the disk at the first SST sync after arming (crash
/// clones keeping none, half and all of the unsynced data) with the SSTs
/// then created but not yet synced.
#[derive(Debug, Default)]
struct Watch {
    armed: bool,
    created: Vec<PathBuf>,
    synced: HashSet<PathBuf>,
    at_first_sync: Option<(Vec<MemFs>, Vec<PathBuf>)>,
}

/// A `MemFs` that lets a test lose power at the first SST sync after it is
/// armed: the instant a merge's outputs are written and about to be made
/// durable.
#[derive(Debug, Clone)]
struct SyncWatch {
    fs: MemFs,
    watch: Arc<parking_lot::Mutex<Watch>>,
}

#[derive(Debug)]
struct WatchedFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    watch: SyncWatch,
}

impl WritableFile for WatchedFile {
    fn append(&mut self, data: &[u8]) -> lamina::Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> lamina::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> lamina::Result<()> {
        let is_sst = self.path.extension().is_some_and(|e| e == "sst");
        {
            let mut w = self.watch.watch.lock();
            if w.armed && is_sst && w.at_first_sync.is_none() {
                let mut rng = StdRng::seed_from_u64(w.created.len() as u64);
                let clones = [0.0, 0.5, 1.0]
                    .map(|keep| self.watch.fs.crash_clone(&mut rng, keep))
                    .to_vec();
                let unsynced = w
                    .created
                    .iter()
                    .filter(|p| !w.synced.contains(*p))
                    .cloned()
                    .collect();
                w.at_first_sync = Some((clones, unsynced));
            }
        }
        self.inner.sync()?;
        if is_sst {
            self.watch.watch.lock().synced.insert(self.path.clone());
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Vfs for SyncWatch {
    fn create(&self, path: &Path) -> lamina::Result<Box<dyn WritableFile>> {
        let inner = self.fs.create(path)?;
        let mut w = self.watch.lock();
        if w.armed && path.extension().is_some_and(|e| e == "sst") {
            w.created.push(path.to_path_buf());
        }
        Ok(Box::new(WatchedFile {
            inner,
            path: path.to_path_buf(),
            watch: self.clone(),
        }))
    }
    fn open_append(&self, path: &Path) -> lamina::Result<Box<dyn WritableFile>> {
        self.fs.open_append(path)
    }
    fn open_read(&self, path: &Path) -> lamina::Result<Arc<dyn RandomAccessFile>> {
        self.fs.open_read(path)
    }
    fn remove(&self, path: &Path) -> lamina::Result<()> {
        self.fs.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> lamina::Result<()> {
        self.fs.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> lamina::Result<()> {
        self.fs.hard_link(from, to)
    }
    fn truncate(&self, path: &Path, len: u64) -> lamina::Result<()> {
        self.fs.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> lamina::Result<Vec<String>> {
        self.fs.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> lamina::Result<()> {
        self.fs.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> lamina::Result<()> {
        self.fs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.fs.exists(path)
    }
    fn lock(&self, path: &Path) -> lamina::Result<Box<dyn DirLock>> {
        self.fs.lock(path)
    }
}

/// A merge writes all its output files before it syncs any (then syncs
/// them together, `vfs::sync_all`), and a power loss at that instant loses
/// nothing: the recovered manifest references none of the written but
/// unsynced outputs, every file it does reference verifies (each data
/// block read and checksummed), and the database holds every write.
#[test]
fn power_loss_before_a_merges_outputs_are_synced_leaves_them_unreferenced() {
    for spec in [
        "leveling:T=3,l0=2",
        "tiered:b=3,partition=global,theta=2048,subcompactions=2",
    ] {
        let watch = SyncWatch {
            fs: MemFs::new(),
            watch: Arc::default(),
        };
        let mut opts =
            crash_options_compressed(&watch.fs, SyncMode::Always, spec, Compression::None);
        opts.vfs = Arc::new(watch.clone());
        let db = Db::open("/db", opts).unwrap();
        let mut model = Model::new();
        for i in 0..2_000u64 {
            let (k, v) = (key(i * 7_919 % 2_000), format!("value-{i}").into_bytes());
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        watch.watch.lock().armed = true;
        db.compact_range(None, None).unwrap();
        db.close().unwrap();

        let w = watch.watch.lock();
        let (clones, unsynced) = w.at_first_sync.as_ref().expect("the merge synced no SST");
        // Every output of the merge was written before the first was synced.
        assert!(unsynced.len() >= 3, "{spec}: {unsynced:?}");
        assert_eq!(unsynced, &w.created, "{spec}");
        for clone in clones {
            let report = lamina::verify(Arc::new(clone.clone()), Path::new("/db"))
                .unwrap_or_else(|e| panic!("{spec}: the crash clone does not verify: {e}"));
            assert!(report.tables > 0, "{spec}");
            for path in unsynced {
                let name = path.file_name().unwrap().to_str().unwrap();
                assert!(
                    !clone.exists(path) || report.unreferenced_tables.iter().any(|u| u == name),
                    "{spec}: {name}, written but unsynced, is referenced after the power loss"
                );
            }
            let opts = crash_options_compressed(clone, SyncMode::Always, spec, Compression::None);
            let reopened = Db::open("/db", opts).unwrap();
            assert!(
                dump(&reopened) == model,
                "{spec}: writes lost after the power loss"
            );
            reopened.close().unwrap();
        }
    }
}

// ---------------------------------------------------------------- SIGKILL

const CHILD_DIR: &str = "LAMINA_CRASH_CHILD_DIR";
const CHILD_SEED: &str = "LAMINA_CRASH_CHILD_SEED";

/// The child half of `sigkill_loses_no_acknowledged_write`: writes the
/// history with `sync=always`, printing the index of every acknowledged op.
/// It runs only when that test starts it.
#[test]
#[ignore = "started as a child process by sigkill_loses_no_acknowledged_write"]
fn crash_child_writer() {
    let (Ok(dir), Ok(seed)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_SEED)) else {
        return;
    };
    let seed: u64 = seed.parse().unwrap();
    let mut opts = Options::default();
    opts.write_buffer_size = 16 * 1024;
    opts.target_file_size = 8 * 1024;
    opts.compaction = "leveling:T=3,l0=2".parse().unwrap();
    opts.sync = SyncMode::Always;
    // Every other round takes obsolete tables' files over for new ones
    // (renamed and overwritten in place on the real file system).
    opts.recycle_table_files = if seed % 2 == 1 { 8 } else { 0 };
    let db = Db::open(&dir, opts).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        apply_db(&db, &op(seed, i, 500)).unwrap();
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write() {
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for round in 0..20u64 {
        let dir = tempfile::tempdir().unwrap();
        let seed = 1_000 + round;
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_writer",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_SEED, seed.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acked: Option<u64> = None;
            for line in BufReader::new(stdout).lines() {
                match line.ok().and_then(|l| l.trim().parse::<u64>().ok()) {
                    Some(i) => acked = Some(i),
                    None => continue,
                }
            }
            acked
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..600)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acked = reader.join().unwrap().map_or(0, |i| i as usize + 1);
        let history: Vec<Op> = (0..acked as u64 + 1).map(|i| op(seed, i, 500)).collect();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let got = dump(&db);
        assert!(
            matching_prefix(&history, acked, acked + 1, &got).is_some(),
            "round {round}: after {acked} acknowledged ops the state is not a prefix that includes them"
        );
        db.close().unwrap();
    }
}
