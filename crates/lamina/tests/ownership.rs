//! File ownership: opening never destroys what the manifest does not prove
//! to be lamina's garbage (docs/reliability.md, "File ownership").
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{dump, key};
use lamina::{Db, Error, Options};

/// Every file of `dir` (recursively) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(name, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn options() -> Options {
    common::disk_options()
}

/// A database with flushed tables, compactions behind it and a live log.
fn populated(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..3_000u64 {
        db.put(&key(i % 1_000), format!("v{i}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.put(b"in-the-log", b"only").unwrap();
    let model = dump(&db);
    drop(db);
    model
}

fn assert_needs_repair(err: Error, dir: &Path) {
    let msg = err.to_string();
    assert!(matches!(err, Error::NeedsRepair { .. }), "{msg}");
    assert!(
        msg.contains(&format!("lamina repair {}", dir.display())),
        "{msg}"
    );
}

#[test]
fn a_missing_current_is_refused_and_nothing_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    populated(&dir);
    std::fs::remove_file(dir.join("CURRENT")).unwrap();
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    let before = snapshot(&dir);
    assert!(before.keys().any(|n| n.ends_with(".sst")));
    assert!(before.keys().any(|n| n.ends_with(".log")));
    assert!(before.keys().any(|n| n.starts_with("MANIFEST-")));
    for _ in 0..2 {
        assert_needs_repair(Db::open(&dir, options()).unwrap_err(), &dir);
        // Not a byte changed, no file created (not even LOCK).
        assert_eq!(snapshot(&dir), before);
    }
    // The offline check says the same, and a read-only open too.
    let vfs = options().vfs;
    assert_needs_repair(lamina::verify(vfs, &dir).unwrap_err(), &dir);
    let mut read_only = options();
    read_only.read_only = true;
    assert_needs_repair(Db::open(&dir, read_only.clone()).unwrap_err(), &dir);
    assert_eq!(snapshot(&dir), before);
    // No directory at all: no database, and nothing is created.
    let nothing = tmp.path().join("nothing");
    let err = Db::open(&nothing, read_only).unwrap_err();
    assert!(err.to_string().contains("no database"), "{err}");
    assert!(!nothing.exists());
}

#[test]
fn current_naming_a_missing_manifest_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    populated(&dir);
    let current = std::fs::read_to_string(dir.join("CURRENT")).unwrap();
    std::fs::remove_file(dir.join(current.trim())).unwrap();
    let before = snapshot(&dir);
    assert_needs_repair(Db::open(&dir, options()).unwrap_err(), &dir);
    assert_eq!(snapshot(&dir), before);
}

#[test]
fn a_new_database_is_refused_among_lamina_files_but_not_among_others() {
    let tmp = tempfile::tempdir().unwrap();
    // A stray log of an earlier database: creating over it would lose it.
    let stray = tmp.path().join("stray");
    std::fs::create_dir(&stray).unwrap();
    std::fs::write(stray.join("000007.log"), b"someone's data").unwrap();
    let before = snapshot(&stray);
    assert_needs_repair(Db::open(&stray, options()).unwrap_err(), &stray);
    assert_eq!(snapshot(&stray), before);

    // Files lamina does not write are no reason to refuse.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"hello").unwrap();
    let db = Db::open(&other, options()).unwrap();
    db.put(b"k", b"v").unwrap();
    drop(db);
    assert_eq!(std::fs::read(other.join("notes.txt")).unwrap(), b"hello");
}

#[test]
fn files_lamina_did_not_write_survive_open_flushes_and_compactions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    std::fs::create_dir(&dir).unwrap();
    let foreign: &[(&str, &[u8])] = &[
        ("notes.txt", b"notes"),
        ("12.sst", b"not ours: two digits"),
        ("000012.sst.bak", b"a backup"),
        ("MANIFEST-x", b"not a number"),
        ("CURRENT.bak", b"MANIFEST-000001\n"),
    ];
    for (name, bytes) in foreign {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let model = populated(&dir);
    // Reopen twice (recovery runs its garbage collection each time).
    for _ in 0..2 {
        let db = Db::open(&dir, options()).unwrap();
        assert_eq!(dump(&db), model);
        db.compact_range(None, None).unwrap();
        db.close().unwrap();
    }
    for (name, bytes) in foreign {
        assert_eq!(&std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
}

#[test]
fn a_table_numbered_beyond_the_manifest_is_kept_and_never_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = populated(&dir);
    // A table-named file no manifest ever issued (say, copied in by hand).
    let any_sst = snapshot(&dir)
        .into_iter()
        .find(|(n, _)| n.ends_with(".sst"))
        .unwrap();
    std::fs::write(dir.join("900000.sst"), &any_sst.1).unwrap();
    let db = Db::open(&dir, options()).unwrap();
    assert_eq!(dump(&db), model);
    for i in 0..2_000u64 {
        db.put(&key(i), b"new").unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
    assert_eq!(std::fs::read(dir.join("900000.sst")).unwrap(), any_sst.1);
    // New files were numbered around it, so none replaced it.
    let db = Db::open(&dir, options()).unwrap();
    assert_eq!(db.get(&key(5)).unwrap().as_deref(), Some(&b"new"[..]));
    drop(db);
    assert_eq!(std::fs::read(dir.join("900000.sst")).unwrap(), any_sst.1);
}
