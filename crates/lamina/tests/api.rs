//! The public API added for applications: `multi_get`, `property`, `close`
//! reporting what `Drop` can only log.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{key, tiny_options};
use lamina::vfs::fault::{FaultFs, OpKind};
use lamina::vfs::mem::MemFs;
use lamina::vfs::{DirLock, RandomAccessFile, Vfs, WritableFile};
use lamina::{Compaction, Db, Error, Options, Result};
use parking_lot::{Condvar, Mutex};
use rand::{Rng, SeedableRng};

/// A file system whose table creations wait while the gate is shut: the
/// flush thread blocks, so switched memtables stay immutable until opened.
#[derive(Debug, Clone)]
struct GatedTables {
    inner: MemFs,
    shut: Arc<(Mutex<bool>, Condvar)>,
}

impl GatedTables {
    fn set_shut(&self, shut: bool) {
        *self.shut.0.lock() = shut;
        self.shut.1.notify_all();
    }
}

impl Vfs for GatedTables {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            let mut shut = self.shut.0.lock();
            while *shut {
                self.shut.1.wait(&mut shut);
            }
        }
        self.inner.create(path)
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.open_append(path)
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_read(path)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.hard_link(from, to)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.inner.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        self.inner.lock(path)
    }
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: &[Vec<u8>]) {
    let got = db.multi_get(keys).unwrap();
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
    assert_eq!(got, want);
}

#[test]
fn multi_get_matches_a_model_in_memtables_and_every_level() {
    let gate = GatedTables {
        inner: MemFs::new(),
        shut: Arc::new((Mutex::new(false), Condvar::new())),
    };
    let mut opts = tiny_options(&MemFs::new());
    opts.vfs = Arc::new(gate.clone());
    opts.max_immutable_memtables = 8;
    let db = Db::open("/db", opts.clone()).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    // Keys 0..600 are asked for; only some are ever written.
    let keys: Vec<Vec<u8>> = (0..600).map(key).collect();
    let mut write_some = |db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, n: usize| {
        for _ in 0..n {
            let k = key(rng.gen_range(0..500));
            if rng.gen_bool(0.2) {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{:?}-{}", k, rng.gen::<u32>())
                    .repeat(3)
                    .into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
    };
    // Several levels: enough flushes for leveling (T=3) to push data down.
    write_some(&db, &mut model, 4000);
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert!(db.num_levels() >= 3, "levels: {}", db.num_levels());
    check(&db, &model, &keys);
    // A level-0 run over the deeper ones, then unflushed memtables.
    write_some(&db, &mut model, 100);
    db.flush().unwrap();
    gate.set_shut(true);
    write_some(&db, &mut model, 120);
    let imms: usize = db
        .property("lamina.num-immutable-memtables")
        .unwrap()
        .parse()
        .unwrap();
    assert!(imms >= 1, "the flush is held, so switched memtables wait");
    check(&db, &model, &keys);
    // One sequence number for all keys: a snapshot taken before more
    // writes answers with the old model.
    let old = model.clone();
    let snap = db.snapshot();
    write_some(&db, &mut model, 30);
    let got = snap.multi_get(&keys).unwrap();
    let want: Vec<_> = keys.iter().map(|k| old.get(k).cloned()).collect();
    assert_eq!(got, want);
    drop(snap);
    check(&db, &model, &keys);
    gate.set_shut(false);
    db.wait_for_compactions().unwrap();
    check(&db, &model, &keys);
    assert!(db.multi_get::<&[u8]>(&[]).unwrap().is_empty());
    db.close().unwrap();
    let db = Db::open("/db", opts).unwrap();
    check(&db, &model, &keys);
    db.close().unwrap();
}

/// Sizes of the `.sst` files in the directory, read from the file system.
fn sst_bytes(fs: &MemFs) -> u64 {
    fs.file_names(Path::new("/db"))
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| fs.open_read(&Path::new("/db").join(n)).unwrap().len())
        .sum()
}

#[test]
fn properties_agree_with_what_the_test_wrote() {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    // Nothing flushes or merges unless asked: three flushes, three files.
    opts.write_buffer_size = 1 << 20;
    opts.target_file_size = 1 << 20;
    opts.compaction = Compaction::nomerge();
    let mut db = Db::open("/db", opts.clone()).unwrap();
    for flush in 0..3u64 {
        // 100 new keys per flush, and 20 overwrites of the previous ones.
        for i in flush * 100..flush * 100 + 100 {
            db.put(&key(i), b"value").unwrap();
        }
        for i in 0..20 {
            db.put(&key(i), b"newer").unwrap();
        }
        db.flush().unwrap();
    }
    let prop = |db: &Db, name: &str| db.property(name);
    let num = |db: &Db, name: &str| -> u64 { prop(db, name).unwrap().parse().unwrap() };
    let levels = db.num_levels();
    let sum = |what: &str| -> u64 { (0..levels).map(|l| num(&db, &format!("{what}{l}"))).sum() };
    assert_eq!(sum("lamina.num-files-at-level"), 3);
    assert_eq!(sum("lamina.num-runs-at-level"), 3);
    assert_eq!(num(&db, "lamina.num-files-at-level99"), 0);
    assert_eq!(num(&db, "lamina.total-sst-size"), sst_bytes(&fs));
    assert_eq!(num(&db, "lamina.num-immutable-memtables"), 0);
    assert_eq!(
        prop(&db, "lamina.compaction-spec").as_deref(),
        Some("nomerge")
    );
    // A flush keeps one version of each key: 100 in the first file (its
    // overwrites replaced keys of the same memtable), 120 in each other.
    // None deleted: the estimate counts every copy.
    assert_eq!(num(&db, "lamina.estimate-num-keys"), 340);

    // A full compaction leaves each of the 300 keys once, in one file of
    // the deepest level.
    db.compact_range(None, None).unwrap();
    // Reopened, the directory holds only live tables (the replaced ones are
    // deleted once no reader pins them; an open deletes any left).
    db.close().unwrap();
    db = Db::open("/db", opts).unwrap();
    let last = db.num_levels() - 1;
    assert_eq!(num(&db, &format!("lamina.num-files-at-level{last}")), 1);
    assert_eq!(num(&db, &format!("lamina.num-runs-at-level{last}")), 1);
    let levels = db.num_levels();
    let sum = |what: &str| -> u64 { (0..levels).map(|l| num(&db, &format!("{what}{l}"))).sum() };
    assert_eq!(sum("lamina.num-files-at-level"), 1);
    assert_eq!(num(&db, "lamina.estimate-num-keys"), 300);
    assert_eq!(num(&db, "lamina.total-sst-size"), sst_bytes(&fs));
    let empty = num(&db, "lamina.cur-size-active-mem-table");
    for i in 1000..1010 {
        db.put(&key(i), b"in the memtable").unwrap();
    }
    assert!(num(&db, "lamina.cur-size-active-mem-table") > empty);
    assert_eq!(num(&db, "lamina.estimate-num-keys"), 310);

    // The text tables: a row per level, as `lamina bench` prints them.
    let stats = prop(&db, "lamina.stats").unwrap();
    assert!(stats.starts_with("** Compaction Stats **\n"), "{stats}");
    assert_eq!(
        stats.lines().filter(|l| l.starts_with('L')).count(),
        levels + 1
    );
    assert!(stats.lines().any(|l| l.starts_with("Sum")));
    let levelstats = prop(&db, "lamina.levelstats").unwrap();
    let rows: Vec<Vec<&str>> = levelstats
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), levels);
    assert_eq!(rows[last][..2], [last.to_string().as_str(), "1"]);

    for unknown in [
        "lamina.no-such-thing",
        "lamina.num-files-at-level",
        "lamina.num-files-at-levelx",
        "lamina.num-files-at-level-1",
        "rocksdb.stats",
    ] {
        assert_eq!(prop(&db, unknown), None, "{unknown}");
    }
    db.close().unwrap();
}

#[test]
fn close_reports_a_failed_sync() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let mut opts = tiny_options(&MemFs::new());
    opts.vfs = Arc::new(fault.clone());
    let db = Db::open("/db", opts).unwrap();
    db.put(b"k", b"v").unwrap();
    fault.fail_kinds(&[OpKind::Sync]);
    fault.fail_from(fault.ops_matching());
    let err = db.close().unwrap_err();
    assert!(fault.injected() > 0);
    let io = match &err {
        Error::Background(e) => e.as_ref(),
        e => e,
    };
    assert!(
        matches!(
            io,
            Error::Io { op: "sync", .. } | Error::Io { op: "fsync", .. }
        ),
        "{err}"
    );
}

#[test]
fn drop_without_close_logs_the_failure_close_would_report() {
    let fs = MemFs::new();
    let fault = FaultFs::new(Arc::new(fs.clone()));
    let mut opts = tiny_options(&MemFs::new());
    opts.vfs = Arc::new(fault.clone());
    let db = Db::open("/db", opts.clone()).unwrap();
    db.put(b"k", b"v").unwrap();
    fault.fail_kinds(&[OpKind::Sync]);
    fault.fail_from(fault.ops_matching());
    drop(db);
    assert!(fault.injected() > 0, "drop syncs the log");
    let log = String::from_utf8(fs.read_all(Path::new("/db/LOG")).unwrap()).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("dropped without close; failed:")),
        "{log}"
    );
    // A clean drop says so too, and the write survives either way.
    fault.clear();
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    drop(db);
    let log = String::from_utf8(fs.read_all(Path::new("/db/LOG")).unwrap()).unwrap();
    assert!(log
        .lines()
        .any(|l| l.contains("dropped without close; log synced")));
}

#[test]
fn builder_options_open_a_database() {
    let fs = MemFs::new();
    let opts = Options::builder()
        .vfs(Arc::new(fs.clone()))
        .write_buffer_size(8 * 1024)
        .compaction(Compaction::tiered(3))
        .build()
        .unwrap();
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(db.compaction_spec(), "tiered:T=3");
    db.close().unwrap();
}
