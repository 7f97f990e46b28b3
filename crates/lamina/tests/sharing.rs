//! Opening and sharing a database directory: an open that may not create
//! creates nothing; a lock held in this process is told apart from one
//! held by another; read-only opens take no lock, so several run beside
//! each other and beside a writer, each reading one consistent version
//! (checked against a BTreeMap model) however the writer flushes and
//! compacts meanwhile.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{disk_options, dump, key};
use lamina::{Db, Error, Options};

fn read_only() -> Options {
    let mut o = disk_options();
    o.read_only = true;
    // Every read goes to the files, not to blocks cached before the writer
    // deleted them.
    o.block_cache_bytes = 0;
    o
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn tables(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

#[test]
fn an_open_that_may_not_create_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    // A missing path, nested: no directory is made.
    let missing = tmp.path().join("a").join("b");
    for read_only in [false, true] {
        let mut o = disk_options();
        o.create_if_missing = false;
        o.read_only = read_only;
        let err = Db::open(&missing, o.clone()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("nothing was created"), "{err}");
        assert!(!tmp.path().join("a").exists());
        // An empty directory stays empty: no LOCK.
        let empty = tmp.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(Db::open(&empty, o).is_err());
        assert!(names(&empty).is_empty(), "{:?}", names(&empty));
    }
    // With create_if_missing (the default) the same path is created.
    let db = Db::open(&missing, disk_options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let mut o = disk_options();
    o.create_if_missing = false;
    let db = Db::open(&missing, o).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
}

#[test]
fn a_lock_held_in_this_process_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), disk_options()).unwrap();
    let err = Db::open(tmp.path(), disk_options()).unwrap_err();
    assert!(matches!(err, Error::LockedInProcess(_)), "{err}");
    assert!(err.to_string().contains("in this process"), "{err}");
    assert!(!err.to_string().contains("another process"), "{err}");
    // A snapshot keeps a closed database's lock (documented on `close`).
    let snap = db.snapshot();
    db.close().unwrap();
    assert!(matches!(
        Db::open(tmp.path(), disk_options()),
        Err(Error::LockedInProcess(_))
    ));
    drop(snap);
    Db::open(tmp.path(), disk_options())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn a_lock_held_by_another_process_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    Db::open(tmp.path(), disk_options())
        .unwrap()
        .close()
        .unwrap();
    // flock(1) takes the same kind of lock (flock(2)) as the engine.
    let mut holder = Command::new("flock")
        .arg(tmp.path().join("LOCK"))
        .args(["-c", "echo held; exec sleep 60"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("flock(1) from util-linux");
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "held\n");
    let err = Db::open(tmp.path(), disk_options()).unwrap_err();
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    assert!(err.to_string().contains("another process"), "{err}");
}

#[test]
fn read_only_opens_share_with_each_other_and_the_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = Db::open(tmp.path(), disk_options()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..3000 {
        let v = format!("v{i}").into_bytes();
        writer.put(&key(i % 1000), &v).unwrap();
        model.insert(key(i % 1000), v);
    }
    // Several readers at once, beside the writer: each sees every write
    // acknowledged before it opened (the logged ones too).
    let readers: Vec<Db> = (0..3)
        .map(|_| Db::open(tmp.path(), read_only()).unwrap())
        .collect();
    for r in &readers {
        assert_eq!(dump(r), model);
        assert!(matches!(r.put(b"x", b"y"), Err(Error::ReadOnly)));
    }
    // A second writer is still refused.
    assert!(matches!(
        Db::open(tmp.path(), disk_options()),
        Err(Error::LockedInProcess(_))
    ));
    for r in readers {
        r.close().unwrap();
    }
    writer.close().unwrap();
}

#[test]
fn a_reader_keeps_its_version_while_the_writer_compacts_its_tables_away() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = Db::open(tmp.path(), disk_options()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..4000 {
        let v = format!("first-{i}").into_bytes();
        writer.put(&key(i % 1500), &v).unwrap();
        model.insert(key(i % 1500), v);
    }
    writer.flush().unwrap();
    // Some writes only in the log.
    for i in 0..50 {
        writer.delete(&key(i * 7)).unwrap();
        model.remove(&key(i * 7));
    }
    let reader = Db::open(tmp.path(), read_only()).unwrap();
    let before = tables(tmp.path());
    assert!(before.len() > 3, "{before:?}");
    // The writer replaces everything and compacts every old table away.
    let mut later = BTreeMap::new();
    for i in 0..1500 {
        let v = format!("second-{i}").into_bytes();
        writer.put(&key(i), &v).unwrap();
        later.insert(key(i), v);
    }
    writer.compact_range(None, None).unwrap();
    writer.wait_for_compactions().unwrap();
    let after = tables(tmp.path());
    assert!(
        before.iter().all(|t| !after.contains(t)),
        "every table the reader opened is deleted: {before:?} {after:?}"
    );
    // The reader reads its unlinked files: the database as of its open.
    assert_eq!(dump(&reader), model);
    for (k, v) in &model {
        assert_eq!(reader.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(reader.get(&key(7)).unwrap(), None);
    reader.close().unwrap();
    // A new reader sees the writer's present.
    let fresh = Db::open(tmp.path(), read_only()).unwrap();
    assert_eq!(dump(&fresh), later);
    fresh.close().unwrap();
    writer.close().unwrap();
}

/// The writer's history in this test: write `i` puts `key(i % KEYS)` →
/// `i`, so the state after the first `n` writes is known for every `n`.
const KEYS: u64 = 400;

fn history_prefix(n: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    (n.saturating_sub(KEYS)..n)
        .map(|i| (key(i % KEYS), i.to_be_bytes().to_vec()))
        .collect()
}

#[test]
fn readers_opened_during_flushes_and_compactions_see_a_prefix_of_the_history() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = disk_options();
    o.write_buffer_size = 32 * 1024;
    let writer = Arc::new(Db::open(tmp.path(), o).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let w = Arc::clone(&writer);
    let stop = Arc::clone(&done);
    let progress = Arc::clone(&written);
    let writing = std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            w.put(&key(i % KEYS), &i.to_be_bytes()).unwrap();
            i += 1;
            progress.store(i, Ordering::Relaxed);
            if i.is_multiple_of(5000) {
                w.compact_range(None, None).unwrap();
            }
        }
        i
    });
    let mut last = 0;
    for round in 1..=30 {
        // Each reader opens after the writer went on by 700 writes (a few
        // flushes of 32 KiB), whatever the machine's speed.
        while written.load(Ordering::Relaxed) < round * 700 {
            std::thread::yield_now();
        }
        let reader = Db::open(tmp.path(), read_only()).unwrap();
        let seen = dump(&reader);
        reader.close().unwrap();
        // The newest write it holds says which prefix it must be.
        let n = seen
            .values()
            .map(|v| u64::from_be_bytes(v.as_slice().try_into().unwrap()) + 1)
            .max()
            .unwrap_or(0);
        assert_eq!(seen, history_prefix(n), "after {n} writes");
        assert!(n >= last, "a later open never sees less");
        last = n;
    }
    done.store(true, Ordering::Relaxed);
    let total = writing.join().unwrap();
    assert!(last > 0 && total >= last);
    let writer = Arc::into_inner(writer).unwrap();
    assert_eq!(dump(&writer), history_prefix(total));
    writer.close().unwrap();
}
