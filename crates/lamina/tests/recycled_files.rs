//! `Options::recycle_table_files`: new tables take over obsolete tables'
//! files (renamed and overwritten in place on the real file system), and
//! the database, its checkpoints and its directory stay exactly what they
//! would be without.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{dump, key};
use lamina::vfs::{DirLock, OsFs, RandomAccessFile, Vfs, WritableFile};
use lamina::{Db, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The real file system, counting the tables created anew and the files
/// taken over.
#[derive(Debug, Default)]
struct Counting {
    created: AtomicU64,
    reused: AtomicU64,
}

impl Vfs for Counting {
    fn create(&self, path: &Path) -> lamina::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            self.created.fetch_add(1, Ordering::Relaxed);
        }
        OsFs.create(path)
    }
    fn reuse(&self, from: &Path, to: &Path) -> lamina::Result<Box<dyn WritableFile>> {
        self.reused.fetch_add(1, Ordering::Relaxed);
        OsFs.reuse(from, to)
    }
    fn open_append(&self, path: &Path) -> lamina::Result<Box<dyn WritableFile>> {
        OsFs.open_append(path)
    }
    fn open_read(&self, path: &Path) -> lamina::Result<Arc<dyn RandomAccessFile>> {
        OsFs.open_read(path)
    }
    fn remove(&self, path: &Path) -> lamina::Result<()> {
        OsFs.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> lamina::Result<()> {
        OsFs.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> lamina::Result<()> {
        OsFs.hard_link(from, to)
    }
    fn truncate(&self, path: &Path, len: u64) -> lamina::Result<()> {
        OsFs.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> lamina::Result<Vec<String>> {
        OsFs.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> lamina::Result<()> {
        OsFs.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> lamina::Result<()> {
        OsFs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        OsFs.exists(path)
    }
    fn lock(&self, path: &Path) -> lamina::Result<Box<dyn DirLock>> {
        OsFs.lock(path)
    }
}

fn options(spec: &str, vfs: Arc<dyn Vfs>, recycle: usize) -> Options {
    Options::builder()
        .vfs(vfs)
        .write_buffer_size(8 * 1024)
        .target_file_size(4 * 1024)
        .block_size(512)
        .compaction(lamina::Compaction::parse(spec).unwrap())
        .level0_stop_runs(0)
        .recycle_table_files(recycle)
        .build()
        .unwrap()
}

fn sst_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sst")
        })
        .count()
}

/// Under leveling and under Global-Range partitioned merges, with and
/// without recycling: the database equals a `BTreeMap` model after
/// overwrites and deletes, again after a reopen; a checkpoint taken
/// half-way (its tables hard links to the source's, later obsolete in the
/// source) still holds the model of its moment; with recycling most new
/// tables take over an old file, and at close no kept file is left behind
/// (every SST in the directory is referenced).
#[test]
fn new_tables_take_over_obsolete_files_and_the_data_stays_the_models() {
    for spec in [
        "leveling:T=3,l0=2",
        "tiered:b=3,partition=global,theta=4096,subcompactions=2",
    ] {
        for recycle in [0, 8] {
            let tmp = tempfile::tempdir().unwrap();
            let (path, copy) = (tmp.path().join("db"), tmp.path().join("copy"));
            let fs = Arc::new(Counting::default());
            let db = Db::open(&path, options(spec, fs.clone(), recycle)).unwrap();
            let mut rng = StdRng::seed_from_u64(recycle as u64);
            let mut model = BTreeMap::new();
            let mut at_copy = BTreeMap::new();
            for i in 0..20_000u64 {
                let k = key(rng.gen_range(0..3_000));
                if rng.gen_ratio(1, 10) {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let v = format!("{i}-{}", "v".repeat(rng.gen_range(0..100))).into_bytes();
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                if i == 10_000 {
                    db.checkpoint(&copy).unwrap();
                    at_copy = model.clone();
                }
            }
            db.flush().unwrap();
            db.wait_for_compactions().unwrap();
            assert!(dump(&db) == model, "{spec} recycle={recycle}");
            db.close().unwrap();
            let (created, reused) = (
                fs.created.load(Ordering::Relaxed),
                fs.reused.load(Ordering::Relaxed),
            );
            if recycle == 0 {
                assert_eq!(reused, 0, "{spec}");
            } else {
                // Only the first tables, before any is obsolete, and those
                // written while the kept files run out are created.
                assert!(
                    reused > created,
                    "{spec}: {reused} reused, {created} created"
                );
            }
            let report = lamina::verify(Arc::new(OsFs), &path).unwrap();
            assert!(report.unreferenced_tables.is_empty(), "{spec}: {report:?}");
            assert_eq!(report.tables, sst_files(&path), "{spec}");
            let db = Db::open(&path, options(spec, Arc::new(OsFs), recycle)).unwrap();
            assert!(
                dump(&db) == model,
                "{spec} recycle={recycle}: after a reopen"
            );
            db.close().unwrap();
            let copy = Db::open(&copy, options(spec, Arc::new(OsFs), 0)).unwrap();
            assert!(
                dump(&copy) == at_copy,
                "{spec} recycle={recycle}: the checkpoint changed"
            );
        }
    }
}
