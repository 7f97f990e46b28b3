//! `DIR/LOG`: the events of a database's life, appended across opens,
//! rotated when long, and never written by a read-only open.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::Db;

fn log_text(fs: &MemFs, name: &str) -> String {
    String::from_utf8(fs.read_all(&Path::new("/db").join(name)).unwrap()).unwrap()
}

/// The event names of the LOG's lines, in order.
fn events(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let (_, rest) = l.split_once(' ').unwrap();
            rest.split_once(':').unwrap().0.to_string()
        })
        .collect()
}

#[test]
fn flushes_merges_and_opens_are_logged_and_reopens_append() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    for i in 0..4000u64 {
        db.put(&key(i % 1500), &i.to_le_bytes()).unwrap();
    }
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    db.close().unwrap();
    let text = log_text(&fs, "LOG");
    let ev = events(&text);
    assert_eq!(ev.first().map(String::as_str), Some("open"), "{text}");
    assert!(text.lines().next().unwrap().contains(" created "), "{text}");
    assert_eq!(ev.last().map(String::as_str), Some("close"), "{text}");
    assert!(text.ends_with("close: clean\n"), "{text}");
    // One line per flush and per merge, as the statistics count them.
    let count = |e: &str| ev.iter().filter(|x| *x == e).count() as u64;
    assert_eq!(
        count("flush"),
        s.flushes + 1,
        "the close flushes once more: {text}"
    );
    // Close's flush may start merges after the statistics were taken.
    assert!(count("compaction") >= s.compactions, "{text}");
    assert!(count("move") >= s.trivial_moves, "{text}");
    assert!(s.compactions > 0);
    // Flush lines carry the sorted runs, merge lines their microseconds
    // (seed 000 Figs. 3.6-3.11 read them back).
    for line in text.lines() {
        if line.contains(" flush: ") {
            assert!(line.contains(" runs=") && line.contains(" us="), "{line}");
        }
        if line.contains(" compaction: ") {
            assert!(line.contains(" us=") && line.contains(" cpu_us="), "{line}");
        }
    }
    // Every line starts with a time in unix ms.
    assert!(text
        .lines()
        .all(|l| l.split(' ').next().unwrap().parse::<u64>().is_ok()));

    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    db.close().unwrap();
    let again = log_text(&fs, "LOG");
    assert!(again.starts_with(&text), "a reopen appends");
    assert!(again[text.len()..].contains(" recovered "), "{again}");
}

#[test]
fn a_read_only_open_writes_no_log_and_a_long_log_rotates() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let before = log_text(&fs, "LOG");
    let ro = Db::open("/db", {
        let mut o = tiny_options(&fs);
        o.read_only = true;
        o
    })
    .unwrap();
    assert_eq!(ro.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    ro.close().unwrap();
    assert_eq!(log_text(&fs, "LOG"), before);

    // A LOG past 16 MiB becomes LOG.old at the next open.
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let mut f = vfs.open_append(Path::new("/db/LOG")).unwrap();
    f.append(&vec![b'x'; 16 << 20]).unwrap();
    f.sync().unwrap();
    drop(f);
    let db = Db::open("/db", tiny_options(&fs)).unwrap();
    db.close().unwrap();
    let old = log_text(&fs, "LOG.old");
    assert!(old.starts_with(&before));
    let new = log_text(&fs, "LOG");
    assert_eq!(events(&new), ["open", "close"], "{new}");
}
