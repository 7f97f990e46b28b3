//! `lamina bench`'s db_bench benchmarks and flags beyond the basic ones
//! (fillsync, readmissing, updaterandom, readrandomwriterandom, compact,
//! levelstats; --histogram, --statistics, --report_interval_seconds),
//! each checked by its effect on the database against what its definition
//! implies (the keys a fill wrote, counted by the test), never by timings.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::process::Command;

/// db_bench's key of `k`: big-endian bytes padded with '0' to 16.
fn key(k: u64) -> Vec<u8> {
    let mut key = k.to_be_bytes().to_vec();
    key.resize(16, b'0');
    key
}

/// The lines after `header` up to the next blank one.
fn block<'a>(out: &'a str, header: &str) -> Vec<&'a str> {
    out.lines()
        .skip_while(|l| *l != header)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

/// The line of benchmark `name` and what follows it up to the next
/// benchmark's line.
fn section<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = out
        .lines()
        .skip_while(|l| l.split_whitespace().next() != Some(name));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no {name} line in {out}"));
    std::iter::once(first)
        .chain(lines.take_while(|l| !l.contains(" micros/op ") && !l.starts_with("STATISTICS")))
        .collect()
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one bench run, each benchmark's effect checked in order"
)]
fn db_bench_benchmarks_change_the_database_as_defined() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let report = dir.path().join("report.csv");
    let num = 3000u64;
    let o = Command::new(env!("CARGO_BIN_EXE_lamina"))
        .arg("bench")
        .arg(format!("--db={}", db.display()))
        .args([
            "--benchmarks=fillseq,readmissing,updaterandom,readrandomwriterandom,fillsync,levelstats,compact,levelstats",
            "--num=3000",
            "--reads=1000",
            "--write_buffer_size=65536",
            "--target_file_size=65536",
            "--compaction=leveling:T=4",
            "--histogram",
            "--statistics",
            "--report_interval_seconds=1",
        ])
        .arg(format!("--report_file={}", report.display()))
        .output()
        .unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // readmissing reads keys one byte longer than any written.
    let missing = section(&out, "readmissing");
    assert!(missing[0].ends_with("(0 of 1000 found)"), "{}", missing[0]);
    // fillseq wrote every key of [0, num): every update finds its key,
    // and so does every read of readrandomwriterandom (90% of 1000).
    let update = section(&out, "updaterandom");
    assert!(
        update[0].ends_with("( updates:1000 found:1000)"),
        "{}",
        update[0]
    );
    let rw = section(&out, "readrandomwriterandom");
    assert!(
        rw[0].ends_with("( reads:900 writes:100 total:1000 found:900)"),
        "{}",
        rw[0]
    );
    // fillsync writes num / 1000 keys.
    let sync = section(&out, "fillsync");
    assert!(sync[0].ends_with("(3 ops)"), "{}", sync[0]);

    // --histogram: per operation type, as many observations as operations.
    let count = |lines: &[&str], op: &str| -> u64 {
        let at = lines
            .iter()
            .position(|l| *l == format!("Microseconds per {op}:"))
            .unwrap_or_else(|| panic!("no {op} histogram in {lines:#?}"));
        let c = lines[at + 1].strip_prefix("Count: ").unwrap();
        c.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(count(&missing, "read"), 1000);
    assert_eq!(count(&update, "update"), 1000);
    assert_eq!(count(&rw, "read"), 900);
    assert_eq!(count(&rw, "write"), 100);
    assert_eq!(count(&sync, "write"), 3);
    for lines in [&missing, &update] {
        let pct = lines
            .iter()
            .find(|l| l.starts_with("Percentiles: P50: "))
            .unwrap();
        assert!(pct.contains(" P99.99: "), "{pct}");
        // Bucket lines' cumulative percentages end at 100.
        let last = lines
            .iter()
            .rev()
            .find(|l| l.starts_with(['[', '(']))
            .unwrap();
        assert!(last.contains("100.000%"), "{last}");
    }

    // levelstats before and after compact: after it, one level holds
    // every file.
    let tables: Vec<Vec<(u64, u64)>> = out
        .split("Level Files Size(MB)\n--------------------\n")
        .skip(1)
        .map(|t| {
            t.lines()
                .take_while(|l| !l.is_empty())
                .map(|l| {
                    let f: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
                    (f[0], f[1])
                })
                .collect()
        })
        .collect();
    assert_eq!(tables.len(), 2, "{out}");
    let holding = |t: &[(u64, u64)]| t.iter().filter(|(_, files)| *files > 0).count();
    assert!(holding(&tables[0]) >= 1);
    assert_eq!(holding(&tables[1]), 1, "{:?}", tables[1]);
    assert!(section(&out, "compact")[0].contains(" micros/op "));

    // --statistics: writes and reads the test can count from the flags.
    let stats = block(&out, "STATISTICS:");
    let ticker = |name: &str| -> u64 {
        let prefix = format!("{name} COUNT : ");
        stats
            .iter()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {name} in {stats:#?}"))
            .parse()
            .unwrap()
    };
    // fillseq 3000 + updaterandom 1000 + readrandomwriterandom 100 +
    // fillsync 3; gets: readmissing 1000 + updaterandom 1000 + 900.
    assert_eq!(ticker("rocksdb.number.keys.written"), 4103);
    assert_eq!(ticker("rocksdb.number.keys.read"), 2900);
    assert_eq!(ticker("lamina.number.keys.found"), 1900);
    assert_eq!(ticker("rocksdb.bytes.written"), 4103 * 116);
    assert!(ticker("rocksdb.compact.write.bytes") > 0);
    let get = stats
        .iter()
        .find(|l| l.starts_with("rocksdb.db.get.micros P50 : "))
        .unwrap();
    assert!(get.contains(" COUNT : 2900 SUM : "), "{get}");

    // --report_interval_seconds: the file has db_bench's header.
    let text = std::fs::read_to_string(&report).unwrap();
    assert_eq!(text.lines().next(), Some("secs_elapsed,interval_qps"));

    // The database: the key set fillseq wrote, unchanged by updates,
    // overwrites and fillsync (keys of [0, num)), each value 100 bytes.
    let opened = lamina::Db::open(&db, lamina::Options::default()).unwrap();
    let want: BTreeSet<Vec<u8>> = (0..num).map(key).collect();
    let mut got = BTreeSet::new();
    for entry in opened.scan(Bound::Unbounded, Bound::Unbounded).unwrap() {
        let (k, v) = entry.unwrap();
        assert_eq!(v.len(), 100);
        got.insert(k.to_vec());
    }
    assert_eq!(got, want);
    opened.close().unwrap();
}

/// A peer-only or unsupported combination is refused before anything runs.
#[test]
fn readwritepercent_is_a_percentage() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lamina"))
        .arg("bench")
        .arg(format!("--db={}", dir.path().join("db").display()))
        .args([
            "--benchmarks=readrandomwriterandom",
            "--readwritepercent=101",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("readwritepercent"));
}
