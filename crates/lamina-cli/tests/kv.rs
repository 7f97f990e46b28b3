//! `lamina kv` on a database written through the library with binary keys
//! and values: `get`, `scan` and `count` against a BTreeMap model, escaped
//! and hex; `put` and `delete` read back through the library; directories
//! without a database refused and left exactly as they were.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::process::{Command, Output};

use common::bin;
use lamina::{Db, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// `--from` and `--to`, if given.
type KeyRange<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The test's own rendering of the documented formats (the oracle the
/// binary's output is compared with).
fn show(bytes: &[u8], hex: bool) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            _ if hex => format!("{b:02x}"),
            b'\\' => "\\\\".to_string(),
            0x20..=0x7E => char::from(b).to_string(),
            _ => format!("\\x{b:02x}"),
        })
        .collect()
}

fn kv(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("kv")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = kv(dir, args);
    assert!(out.status.success(), "kv {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Bytes biased towards the awkward ones.
fn bytes(rng: &mut StdRng, max_len: usize) -> Vec<u8> {
    const AWKWARD: &[u8] = b"\x00\xff\n\\\t x0";
    (0..rng.gen_range(0..=max_len))
        .map(|_| {
            if rng.gen_bool(0.5) {
                AWKWARD[rng.gen_range(0..AWKWARD.len())]
            } else {
                rng.gen()
            }
        })
        .collect()
}

/// A database of binary keys written through the library (several tables,
/// overwrites and deletes), and its model.
fn build(dir: &Path) -> Model {
    let mut rng = StdRng::seed_from_u64(20);
    let mut opts = Options::default();
    opts.write_buffer_size = 16 << 10;
    let db = Db::open(dir, opts).unwrap();
    let mut model = Model::new();
    let mut keys: Vec<Vec<u8>> = vec![b"".to_vec(), b"\\".to_vec(), b"\n".to_vec()];
    for i in 0..3000 {
        let key = if i % 5 == 0 && !keys.is_empty() {
            keys[rng.gen_range(0..keys.len())].clone()
        } else {
            bytes(&mut rng, 6)
        };
        if i % 7 == 3 {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = bytes(&mut rng, 12);
            db.put(&key, &value).unwrap();
            model.insert(key.clone(), value);
        }
        keys.push(key);
    }
    for key in [b"".as_slice(), b"\\", b"\n", b"\x00", b"\xff\xff"] {
        db.put(key, b"v\x00\\\n\xff").unwrap();
        model.insert(key.to_vec(), b"v\x00\\\n\xff".to_vec());
    }
    db.close().unwrap();
    model
}

/// The model's entries of `[from, to)`, in the asked order, at most `limit`.
fn expected(
    model: &Model,
    from: Option<&[u8]>,
    to: Option<&[u8]>,
    limit: Option<usize>,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let lo = from.map_or(Bound::Unbounded, Bound::Included);
    let hi = to.map_or(Bound::Unbounded, Bound::Excluded);
    if matches!((lo, hi), (Bound::Included(a), Bound::Excluded(b)) if a >= b) {
        return Vec::new(); // BTreeMap::range panics on such bounds
    }
    let range = model.range::<[u8], _>((lo, hi));
    let entries: Box<dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>> = if reverse {
        Box::new(range.rev())
    } else {
        Box::new(range)
    };
    entries
        .take(limit.unwrap_or(usize::MAX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn get_scan_count_match_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = build(&dir);
    assert!(model.len() > 1000, "{}", model.len());
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let absent = [b"\x00\x00\x00\x00\x00\x00\x00".to_vec(), b"zz\xff".to_vec()];
    assert!(absent.iter().all(|k| !model.contains_key(k)));
    let some = |i: usize| Some(keys[i * keys.len() / 10].as_slice());
    let ranges: Vec<KeyRange> = vec![
        (None, None),
        (some(2), None),
        (None, some(7)),
        (some(3), some(6)),
        (some(6), some(3)), // empty: from past to
        (some(4), some(4)), // empty
        (Some(&absent[0]), Some(&absent[1])),
        (Some(b""), Some(b"\x01")),
        (Some(b"\\"), Some(b"\\\x00")),
    ];
    for hex in [false, true] {
        let h: &[&str] = if hex { &["--hex"] } else { &[] };
        for (from, to) in &ranges {
            let mut flags: Vec<String> = Vec::new();
            if let Some(k) = from {
                flags.extend(["--from".into(), show(k, hex)]);
            }
            if let Some(k) = to {
                flags.extend(["--to".into(), show(k, hex)]);
            }
            for limit in [None, Some(0), Some(1), Some(17)] {
                let mut f = flags.clone();
                if let Some(n) = limit {
                    f.extend(["--limit".into(), n.to_string()]);
                }
                let f: Vec<&str> = f
                    .iter()
                    .map(String::as_str)
                    .chain(h.iter().copied())
                    .collect();
                for reverse in [false, true] {
                    let mut args = vec!["scan"];
                    args.extend(&f);
                    if reverse {
                        args.push("--reverse");
                    }
                    let want: String = expected(&model, *from, *to, limit, reverse)
                        .iter()
                        .map(|(k, v)| format!("{}\t{}\n", show(k, hex), show(v, hex)))
                        .collect();
                    assert_eq!(ok(&dir, &args), want, "{args:?}");
                }
                let mut args = vec!["count"];
                args.extend(&f);
                let n = expected(&model, *from, *to, limit, false).len();
                assert_eq!(ok(&dir, &args), format!("{n}\n"), "{args:?}");
            }
        }
        for (i, (k, v)) in model.iter().enumerate().filter(|(i, _)| i % 97 == 0) {
            let key = show(k, hex);
            let mut args = vec!["get"];
            args.extend(h);
            args.extend(["--", &key]); // an escaped key may start with `-`
            assert_eq!(
                ok(&dir, &args),
                format!("{}\n", show(v, hex)),
                "{i}: {args:?}"
            );
        }
        for k in &absent {
            let key = show(k, hex);
            let mut args = vec!["get", &key];
            args.extend(h);
            let out = kv(&dir, &args);
            assert_eq!(out.status.code(), Some(3), "{out:?}");
            assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
        }
    }
    // Reads opened the database read only: the files are as they were.
    let reopened = Db::open(&dir, Options::default()).unwrap();
    let all: Model = reopened
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(all, model);
    reopened.close().unwrap();
}

#[test]
fn put_and_delete_are_read_back_by_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut model = build(&dir);
    let present = model.keys().nth(100).unwrap().clone();
    ok(&dir, &["put", r"k\x00\\\xff\x0a", r"v\x0a\x00 \\"]);
    model.insert(b"k\x00\\\xff\n".to_vec(), b"v\n\x00 \\".to_vec());
    ok(&dir, &["put", "--hex", "0x00FF0a5c", ""]);
    model.insert(b"\x00\xff\n\\".to_vec(), Vec::new());
    ok(&dir, &["delete", "--hex", &show(&present, true)]);
    model.remove(&present);
    ok(&dir, &["delete", "never-there"]);
    // One range tombstone over [from, to): a slice of the model's keys.
    let from = model.keys().nth(200).unwrap().clone();
    let to = model.keys().nth(260).unwrap().clone();
    ok(
        &dir,
        &[
            "delete-range",
            "--hex",
            &show(&from, true),
            &show(&to, true),
        ],
    );
    model.retain(|k, _| *k < from || *k >= to);
    // An empty range deletes nothing.
    ok(
        &dir,
        &[
            "delete-range",
            "--hex",
            &show(&to, true),
            &show(&from, true),
        ],
    );
    // A key starting with `-` after `--`.
    ok(&dir, &["put", "--", "-k", "-v"]);
    model.insert(b"-k".to_vec(), b"-v".to_vec());
    assert_eq!(ok(&dir, &["get", "--", "-k"]), "-v\n");

    let db = Db::open(&dir, Options::default()).unwrap();
    assert_eq!(db.get(b"k\x00\\\xff\n").unwrap().unwrap(), b"v\n\x00 \\");
    assert_eq!(db.get(&present).unwrap(), None);
    let all: Model = db
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(all, model);
    db.close().unwrap();

    // Bad input is refused before anything is opened.
    for args in [
        &["put", r"\q", "v"][..],
        &["get", "--hex", "abc"],
        &["scan", "--from", r"\x1"],
    ] {
        let out = kv(&dir, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
    }
}

#[test]
fn checkpoint_writes_a_copy_the_library_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let copy = tmp.path().join("copy");
    let model = build(&dir);
    let out = ok(&dir, &["checkpoint", copy.to_str().unwrap()]);
    assert!(out.starts_with("checkpoint "), "{out}");
    // The source keeps its data and takes writes the copy does not see.
    ok(&dir, &["put", "after", "1"]);
    let db = Db::open(&copy, Options::default()).unwrap();
    assert_eq!(db.get(b"after").unwrap(), None);
    let all: Model = db
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(all, model);
    db.close().unwrap();
    // A second checkpoint into the same, now non-empty, directory is refused.
    let again = kv(&dir, &["checkpoint", copy.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
}

/// Every entry under `dir` (path, and contents for files), sorted.
fn listing(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.push((path.display().to_string(), None));
            out.extend(listing(&path));
        } else {
            out.push((
                path.display().to_string(),
                Some(std::fs::read(&path).unwrap()),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn directories_without_a_database_are_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let other = tmp.path().join("other");
    std::fs::create_dir_all(other.join("sub")).unwrap();
    std::fs::write(other.join("notes.txt"), "not a database").unwrap();
    std::fs::write(other.join("sub").join("000001.log"), "").unwrap();
    // Lamina's names but no CURRENT: a database to repair, not to open.
    let orphans = tmp.path().join("orphans");
    std::fs::create_dir(&orphans).unwrap();
    std::fs::write(orphans.join("000007.sst"), "junk").unwrap();
    let before = listing(tmp.path());
    let actions: [&[&str]; 6] = [
        &["get", "k"],
        &["put", "k", "v"],
        &["delete", "k"],
        &["delete-range", "a", "b"],
        &["scan"],
        &["count", "--from", "a"],
    ];
    for dir in [&missing, &empty, &other, &orphans] {
        for args in actions {
            let out = kv(dir, args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?} in {dir:?}: {out:?}");
            assert!(stderr.contains("no database in"), "{stderr}");
            assert!(out.stdout.is_empty(), "{out:?}");
            assert_eq!(listing(tmp.path()), before, "{args:?} in {dir:?}");
        }
    }
    assert!(!missing.exists());
}

/// `get`, `scan` and `count` open read-only, which takes no lock: they run
/// beside a writer holding the database (a server, here a `Db` of the
/// test) and see everything it acknowledged, also after it compacted the
/// tables they would have read away; a write is still refused with the
/// lock's holder named.
#[test]
fn reads_run_beside_a_writer_that_holds_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut model = build(&dir);
    let mut opts = Options::default();
    opts.write_buffer_size = 16 << 10;
    let writer = Db::open(&dir, opts).unwrap();
    writer.compact_range(None, None).unwrap();
    let mut rng = StdRng::seed_from_u64(44);
    for _ in 0..500 {
        let key = bytes(&mut rng, 6);
        writer.delete(&key).unwrap();
        model.remove(&key);
        let key = bytes(&mut rng, 6);
        let value = bytes(&mut rng, 12);
        writer.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    let line = |(k, v): &(Vec<u8>, Vec<u8>)| format!("{}\t{}\n", show(k, false), show(v, false));
    for (args, reverse) in [
        (&["--read-only", "scan"][..], false),
        (&["scan", "--reverse"], true),
    ] {
        let want: String = expected(&model, None, None, None, reverse)
            .iter()
            .map(line)
            .collect();
        assert_eq!(ok(&dir, args), want, "{args:?}");
    }
    assert_eq!(ok(&dir, &["count"]), format!("{}\n", model.len()));
    let (k, v) = model.iter().next().unwrap();
    assert_eq!(
        ok(&dir, &["--hex", "get", &show(k, true)]),
        format!("{}\n", show(v, true))
    );
    let refused = kv(&dir, &["put", "x", "y"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("locked by another process"), "{stderr}");
    writer.close().unwrap();
}
