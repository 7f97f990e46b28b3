//! `lamina bench --engine rocksdb|leveldb`: a small run on each peer built
//! in reads back what it wrote, prints its option mapping first, and keeps
//! the directory rule. Only with the peers' features (they build C++):
//!
//! ```text
//! cargo test --release -p lamina-cli --features peer-rocksdb,peer-leveldb --bin lamina --test peers
//! ```
//!
//! (`--bin lamina` adds the peer modules' unit tests, which check each
//! peer's `Store` against a model.)
#![cfg(any(feature = "peer-rocksdb", feature = "peer-leveldb"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn bench(db: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_lamina"))
        .arg("bench")
        .arg(format!("--db={}", db.display()))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// The result line of benchmark `name`, split on whitespace.
fn fields<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} line in {out}"))
        .split_whitespace()
        .collect()
}

/// Runs every benchmark the comparison uses on `engine` and checks what the
/// reads found against what the writes wrote.
fn reads_find_what_was_written(engine: &str, mapped: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(engine);
    let num = 5000;
    let (ok, out, err) = bench(
        &db,
        &[
            &format!("--engine={engine}"),
            "--benchmarks=fillseq,readrandom,seekrandom,readseq,readreverse,overwrite,readrandom,stats",
            &format!("--num={num}"),
            "--reads=2000",
            "--seek_nexts=10",
            // Small buffers, so that the reads cross flushed tables too.
            "--write_buffer_size=65536",
        ],
    );
    assert!(ok, "{engine}: {err}\n{out}");
    // The mapping comes first, naming each flag and the peer's option.
    let mapping = out
        .find(&format!("Option mapping (lamina -> {engine}):"))
        .unwrap_or_else(|| panic!("no mapping in {out}"));
    assert!(mapping < out.find("fillseq").unwrap());
    for m in mapped {
        assert!(out.contains(m), "{engine}: no {m:?} in the mapping:\n{out}");
    }
    // fillseq wrote every key of [0, num), so every read and seek finds its
    // key, before and after overwrite.
    assert!(
        out.lines()
            .filter(|l| l.starts_with("readrandom"))
            .all(|l| l.ends_with("(2000 of 2000 found)")),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("readrandom")).count(),
        2
    );
    assert!(fields(&out, "seekrandom").ends_with(&["(2000", "of", "2000", "found)"]));
    // One full scan each way (the entries they visit are checked against a
    // model by the peer modules' unit tests).
    for scan in ["readseq", "readreverse"] {
        let f = fields(&out, scan);
        assert_eq!(
            (f[3], f[5], f[7]),
            ("micros/op", "ops/sec;", "MB/s"),
            "{f:?}"
        );
    }
    assert!(out.contains(&format!("** {engine} stats **")), "{out}");
    // The bench's directory may be reused or destroyed, and only that one.
    let (ok, _, err) = bench(&db, &[&format!("--engine={engine}"), "--num=10"]);
    assert!(!ok && err.contains("pass --destroy_db"), "{err}");
    let (ok, _, err) = bench(
        &db,
        &[
            &format!("--engine={engine}"),
            "--benchmarks=readrandom",
            &format!("--num={num}"),
            "--reads=100",
            "--use_existing_db",
        ],
    );
    assert!(ok, "{err}");
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("keep"), b"x").unwrap();
    let (ok, _, err) = bench(
        &foreign,
        &[&format!("--engine={engine}"), "--num=10", "--destroy_db"],
    );
    assert!(!ok && err.contains("not created by lamina bench"), "{err}");
    assert!(foreign.join("keep").is_file());
}

#[cfg(feature = "peer-rocksdb")]
#[test]
fn rocksdb_reads_find_what_was_written() {
    reads_find_what_was_written(
        "rocksdb",
        &[
            "write_buffer_size=65536",
            "bloom(10) full filters",
            "block_cache=NewLRUCache(8388608)",
            "cache_index_and_filter_blocks=false",
            "block_size=4096",
            "compression=kNoCompression",
            "WriteOptions::sync=false",
            "WriteOptions::disableWAL=false",
            "max_background_jobs=2",
            "level0_file_num_compaction_trigger=4",
            "max_bytes_for_level_base=655360",
            "memtable_whole_key_filtering=true",
        ],
    );
}

#[cfg(feature = "peer-leveldb")]
#[test]
fn leveldb_reads_find_what_was_written() {
    reads_find_what_was_written(
        "leveldb",
        &[
            "write_buffer_size=65536",
            "NewBloomFilterPolicy(10)",
            "block_cache=NewLRUCache(8388608)",
            "block_size=4096",
            "compression=kNoCompression",
            "WriteOptions::sync=false",
            "kL0_CompactionTrigger=4",
        ],
    );
}

#[cfg(feature = "peer-leveldb")]
#[test]
fn leveldb_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = bench(
        &dir.path().join("db"),
        &["--engine=leveldb", "--num=10", "--disable_wal"],
    );
    assert!(!ok && err.contains("always writes its log"), "{err}");
}
