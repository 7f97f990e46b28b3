//! `lamina inspect` against what was written through the library: a
//! `BTreeMap` of the writes, the directory listing and the bytes on disk
//! are the oracles.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lamina::{Db, Options, SyncMode, WriteBatch};
use serde_json::Value;

fn inspect(args: &[&str], path: &Path) -> Output {
    let mut cmd = Command::new(common::bin());
    cmd.arg("inspect");
    for a in args {
        cmd.arg(a);
    }
    cmd.arg(path).output().unwrap()
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn options() -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 1 << 20;
    o.block_size = 256;
    o.sync = SyncMode::Always;
    o
}

/// Keys with the bytes escaping must handle, each written once: puts of
/// `keys[i]` for even i, deletes for odd i.
fn awkward_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0u32..300)
        .map(|i| {
            let mut k = format!("key{i:04}").into_bytes();
            k.push([0u8, 0xff, b'\\', b'"', b'\n'][i as usize % 5]);
            k
        })
        .collect();
    keys.push(Vec::from(&b"\x00"[..]));
    keys.push(Vec::from(&b"\xff\xff"[..]));
    keys
}

fn value_of(i: usize) -> Vec<u8> {
    format!("v{i}\\\x01").into_bytes()
}

fn sst_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    v.sort();
    v
}

/// Writes the awkward keys into one SST; returns the model (key → value,
/// `None` for a tombstone) and the table's path.
fn one_table(dir: &Path) -> (BTreeMap<Vec<u8>, Option<Vec<u8>>>, PathBuf) {
    let db = Db::open(dir, options()).unwrap();
    let mut model = BTreeMap::new();
    let mut batch = WriteBatch::new();
    for (i, k) in awkward_keys().into_iter().enumerate() {
        if i % 2 == 0 {
            batch.put(&k, &value_of(i));
            model.insert(k, Some(value_of(i)));
        } else {
            batch.delete(&k);
            model.insert(k, None);
        }
    }
    db.write(batch).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let tables = sst_files(dir);
    assert_eq!(tables.len(), 1);
    (model, tables[0].clone())
}

#[test]
fn sst_report_and_scan_equal_the_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (model, table) = one_table(&dir);
    let out = inspect(&["sst", "--scan", "--json"], &table);
    assert!(out.status.success(), "{out:?}");
    let lines = json_lines(&out);
    let report = &lines[0];
    let tombstones = model.values().filter(|v| v.is_none()).count();
    assert_eq!(report["entries"], model.len());
    assert_eq!(report["tombstones"], tombstones);
    assert_eq!(
        report["smallest_key"],
        hex(model.keys().next().unwrap()).as_str()
    );
    assert_eq!(
        report["largest_key"],
        hex(model.keys().last().unwrap()).as_str()
    );
    assert_eq!(
        report["file_size"],
        std::fs::metadata(&table).unwrap().len()
    );
    let blocks = report["blocks"].as_array().unwrap();
    assert!(blocks.len() > 5, "256-byte blocks: {}", blocks.len());
    assert!(blocks.iter().all(|b| b["problem"].is_null()));
    // Blocks tile the data region in order.
    let mut at = 0;
    for b in blocks {
        assert_eq!(b["offset"], at);
        at = b["offset"].as_u64().unwrap() + b["size"].as_u64().unwrap() + 5;
    }
    assert_eq!(report["data_bytes"], at);
    // The entries, in key order, are exactly the model's.
    let entries = &lines[1..];
    assert_eq!(entries.len(), model.len());
    let mut seqs = BTreeSet::new();
    for (e, (k, v)) in entries.iter().zip(&model) {
        assert_eq!(e["key"], hex(k).as_str());
        match v {
            Some(v) => {
                assert_eq!(e["kind"], "put");
                assert_eq!(e["value"], hex(v).as_str());
            }
            None => assert_eq!(e["kind"], "delete"),
        }
        seqs.insert(e["seq"].as_u64().unwrap());
    }
    assert_eq!(seqs.len(), model.len(), "one sequence number per write");
    assert_eq!(report["smallest_seq"], *seqs.first().unwrap());
    assert_eq!(report["largest_seq"], *seqs.last().unwrap());

    // Text: one line per entry, escaped.
    let text = inspect(&["sst", "--scan"], &table);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("\nkey0000\\x00 @"), "{text}");
    assert!(text.contains("\nkey0002\\\\ @"), "{text}");
    assert!(text.contains("\nkey0003\" @"), "{text}");
    assert!(text.contains("\nkey0004\\x0a @"), "{text}");
    let scanned = text.lines().filter(|l| l.contains(" @")).count();
    assert_eq!(scanned, model.len(), "one line per entry");
    let block_lines = text.lines().filter(|l| l.starts_with("block ")).count();
    assert_eq!(block_lines, blocks.len());
}

#[test]
fn a_damaged_block_is_named_and_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (_, table) = one_table(&dir);
    let report = &json_lines(&inspect(&["sst", "--json"], &table))[0];
    let third = report["blocks"][2]["offset"].as_u64().unwrap() as usize;
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[third + 3] ^= 0x40;
    std::fs::write(&table, &bytes).unwrap();
    let out = inspect(&["sst", "--json"], &table);
    assert!(!out.status.success());
    let report = &json_lines(&out)[0];
    for (i, b) in report["blocks"].as_array().unwrap().iter().enumerate() {
        if i == 2 {
            assert_eq!(b["problem"], "block checksum mismatch");
        } else {
            assert!(b["problem"].is_null(), "block {i}: {b}");
        }
    }
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("block 2 at {third}")), "{err}");
}

/// A key and its value, `None` for a delete.
type Op = (Vec<u8>, Option<Vec<u8>>);

#[test]
fn wal_records_are_the_batches_and_a_torn_tail_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).unwrap();
    let mut written: Vec<Vec<Op>> = Vec::new();
    for r in 0..6usize {
        let mut batch = WriteBatch::new();
        let mut ops = Vec::new();
        for j in 0..=r {
            let key = vec![b'k', r as u8, j as u8, 0];
            if j % 3 == 2 {
                batch.delete(&key);
                ops.push((key, None));
            } else {
                let value = vec![0xff; j];
                batch.put(&key, &value);
                ops.push((key, Some(value)));
            }
        }
        db.write(batch).unwrap();
        written.push(ops);
    }
    // A copy of the live WAL, every write synced into it.
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let copy = tmp.path().join("copy.log");
    std::fs::copy(&log, &copy).unwrap();
    drop(db);

    let out = inspect(&["wal", "--scan", "--json"], &copy);
    assert!(out.status.success(), "{out:?}");
    let lines = json_lines(&out);
    let end = lines.last().unwrap();
    assert_eq!(end["records"], 6);
    assert_eq!(end["entries"], 21);
    assert_eq!(end["torn"], false);
    assert_eq!(end["valid_len"], std::fs::metadata(&copy).unwrap().len());
    let mut it = lines[..lines.len() - 1].iter();
    let mut offsets = Vec::new();
    let mut next_seq = None;
    for ops in &written {
        let rec = it.next().unwrap();
        assert_eq!(rec["entries"], ops.len());
        offsets.push(rec["offset"].as_u64().unwrap());
        for (key, value) in ops {
            let e = it.next().unwrap();
            assert_eq!(e["key"], hex(key).as_str());
            let seq = e["seq"].as_u64().unwrap();
            if let Some(n) = next_seq {
                assert_eq!(seq, n, "consecutive sequence numbers");
            }
            next_seq = Some(seq + 1);
            match value {
                Some(v) => {
                    assert_eq!(e["kind"], "put");
                    assert_eq!(e["value"], hex(v).as_str());
                }
                None => assert_eq!(e["kind"], "delete"),
            }
        }
    }

    // Cut the last record short: the WAL ends torn where that record began.
    let len = std::fs::metadata(&copy).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    f.set_len(len - 3).unwrap();
    let out = inspect(&["wal", "--json"], &copy);
    assert!(out.status.success(), "{out:?}");
    let lines = json_lines(&out);
    let end = lines.last().unwrap();
    assert_eq!(end["records"], 5);
    assert_eq!(end["torn"], true);
    assert_eq!(end["valid_len"], offsets[5]);
}

#[test]
fn manifest_and_tree_list_the_live_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, {
        let mut o = options();
        o.write_buffer_size = 16 << 10;
        o
    })
    .unwrap();
    let mut model = BTreeMap::new();
    for i in 0u32..6000 {
        let key = format!("{:08}", (i * 7919) % 4000).into_bytes();
        db.put(&key, &i.to_le_bytes()).unwrap();
        model.insert(key, i);
    }
    db.wait_for_compactions().unwrap();
    db.close().unwrap();

    let out = inspect(&["tree", "--json"], &dir);
    assert!(out.status.success(), "{out:?}");
    let tree = &json_lines(&out)[0];
    let files: Vec<&Value> = tree["levels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["runs"].as_array().unwrap())
        .flat_map(|r| r["files"].as_array().unwrap())
        .collect();
    let ids: BTreeSet<String> = files
        .iter()
        .map(|f| format!("{:06}.sst", f["id"].as_u64().unwrap()))
        .collect();
    let on_disk: BTreeSet<String> = sst_files(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, on_disk);
    assert!(ids.len() > 1, "{ids:?}");
    for f in &files {
        let path = dir.join(format!("{:06}.sst", f["id"].as_u64().unwrap()));
        assert_eq!(f["size"], std::fs::metadata(path).unwrap().len());
    }
    // Every live key lies in some file's range.
    for key in model.keys() {
        let k = hex(key);
        assert!(
            files
                .iter()
                .any(|f| f["smallest"].as_str().unwrap() <= k.as_str()
                    && k.as_str() <= f["largest"].as_str().unwrap()),
            "{k}"
        );
    }

    let out = inspect(&["manifest", "--json"], &dir);
    assert!(out.status.success(), "{out:?}");
    let m = &json_lines(&out)[0];
    assert_eq!(&m["tree"], tree);
    assert_eq!(m["torn"], false);
    assert_eq!(m["valid_len"], m["bytes"]);
    assert!(m["edits"].as_array().unwrap().len() > 1);
    let text = inspect(&["tree"], &dir);
    assert!(String::from_utf8(text.stdout).unwrap().starts_with("L0:"));
}

#[test]
fn a_directory_without_a_database_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("empty");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    for what in ["tree", "manifest"] {
        let out = inspect(&[what], &dir);
        assert!(!out.status.success());
        assert!(String::from_utf8(out.stderr)
            .unwrap()
            .contains("no database"));
    }
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1);
    let missing = inspect(&["tree"], &tmp.path().join("missing"));
    assert!(!missing.status.success());
    assert!(!tmp.path().join("missing").exists());
}

#[test]
fn options_shows_what_the_database_was_opened_with() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = options();
    o.compaction = lamina::Compaction::tiered(3);
    Db::open(&dir, o).unwrap().close().unwrap();
    let out = inspect(&["options"], &dir);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("file: OPTIONS-"), "{text}");
    assert!(
        text.lines().any(|l| l == "compaction = tiered:T=3"),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "block_size = 256"), "{text}");
    assert!(text.lines().any(|l| l == "sync = always"), "{text}");
    let out = inspect(&["options", "--json"], &dir);
    let v = &json_lines(&out)[0];
    assert_eq!(v["options"]["write_buffer_size"], (1 << 20).to_string());
    assert_eq!(v["options"]["spatial"], "none");
    assert!(v["file"].as_str().unwrap().starts_with("OPTIONS-"));
    // A directory without one: a clear failure.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = inspect(&["options"], &empty);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no readable OPTIONS file"));
}
