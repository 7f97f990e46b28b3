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
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test may panic on a failed setup"
)]

use std::path::Path;
use std::process::Command;

/// Bytes of the table files in `dir` (RocksDB's and lamina's `*.sst`,
/// LevelDB's `*.ldb`).
fn table_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".sst") || name.ends_with(".ldb")
        })
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// `--compression_type=lz4` stores `engine`'s tables in fewer bytes than
/// `none` (values compress to about half at db_bench's default
/// `--compression_ratio=0.5`), and a peer's mapping names `mapped`.
fn lz4_shrinks_the_tables(engine: &str, mapped: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    for kind in ["none", "lz4"] {
        let db = dir.path().join(kind);
        let (ok, out, err) = bench(
            &db,
            &[
                &format!("--engine={engine}"),
                "--benchmarks=fillseq",
                "--num=20000",
                "--compression_ratio=0.5",
                &format!("--compression_type={kind}"),
                // Small buffers: the keys go to several flushed tables.
                "--write_buffer_size=65536",
            ],
        );
        assert!(ok, "{engine} {kind}: {err}\n{out}");
        if let (Some(mapped), "lz4") = (mapped, kind) {
            let line = out
                .lines()
                .find(|l| l.contains("--compression_type=lz4"))
                .unwrap_or_else(|| panic!("no compression in the mapping:\n{out}"));
            assert!(line.contains(mapped), "{line}");
        }
        bytes.push(table_bytes(&db));
    }
    let (none, lz4) = (bytes[0], bytes[1]);
    // 20,000 entries of 116 bytes: most of them in tables.
    assert!(none > 1_000_000, "{engine}: {none} bytes uncompressed");
    assert!(
        lz4 * 4 < none * 3,
        "{engine}: {lz4} bytes with lz4 against {none} without"
    );
}

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
            "--benchmarks=fillseq,readrandom,seekrandom,readseq,readreverse,overwrite,readrandom,readwhilewriting,stats",
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
    // The readers of readwhilewriting find every key too: the writer only
    // overwrites keys of [0, num).
    assert!(
        fields(&out, "readwhilewriting").ends_with(&["(2000", "of", "2000", "found)"]),
        "{out}"
    );
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
            "ReadOptions::verify_checksums=true",
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
            "ReadOptions::verify_checksums=true",
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
    let (ok, _, err) = bench(
        &dir.path().join("zstd"),
        &["--engine=leveldb", "--num=10", "--compression_type=zstd"],
    );
    assert!(!ok && err.contains("LevelDB 1.22 has no zstd"), "{err}");
}

#[cfg(feature = "peer-rocksdb")]
#[test]
fn rocksdb_compresses_with_lz4() {
    lz4_shrinks_the_tables("rocksdb", Some("compression=kLZ4Compression"));
}

#[cfg(feature = "peer-leveldb")]
#[test]
fn leveldb_compresses_with_snappy_for_lz4() {
    lz4_shrinks_the_tables("leveldb", Some("compression=kSnappyCompression"));
}

/// The same check on lamina, the reference the peers are held to.
#[test]
fn lamina_compresses_with_lz4() {
    lz4_shrinks_the_tables("lamina", None);
}
