//! `lamina bench`: db_bench-style lines, found counts and statistics that
//! follow from the benchmarks' definitions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn bench(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_lamina"))
        .arg("bench")
        .arg(format!("--db={}", dir.join("db").display()))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// The line of benchmark `name`.
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} line in {out}"))
}

#[test]
fn lines_found_counts_and_stats_follow_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats.json");
    let (ok, out, err) = bench(
        dir.path(),
        &[
            "--benchmarks=fillseq,readrandom,seekrandom,readseq,readreverse,ycsb-load,ycsb-c,ycsb-e,stats",
            "--num=3000",
            "--reads=1000",
            "--write_buffer_size=65536",
            &format!("--stats-json={}", stats.display()),
        ],
    );
    assert!(ok, "{err}");
    // fillseq writes every key of [0, num): every read and seek finds it.
    assert!(line(&out, "readrandom").ends_with("(1000 of 1000 found)"));
    assert!(line(&out, "seekrandom").ends_with("(1000 of 1000 found)"));
    for name in [
        "fillseq",
        "readrandom",
        "seekrandom",
        "readseq",
        "readreverse",
        "ycsb-load",
        "ycsb-c",
    ] {
        let l = line(&out, name);
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!((f[1], f[3], f[5]), (":", "micros/op", "ops/sec;"), "{l}");
    }
    // readreverse is a real scan now (it used to print "skipped").
    for name in ["readseq", "readreverse"] {
        let ops_sec = line(&out, name).split_whitespace().nth(4).unwrap();
        assert!(ops_sec.parse::<u64>().unwrap() > 0, "{name}");
        assert!(line(&out, name).contains("MB/s"), "{name}");
    }
    // YCSB C only reads loaded records.
    assert!(line(&out, "ycsb-c").ends_with("(1000 of 1000 found)"));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    // Writes: fillseq (3000) + ycsb-load (3000) + ycsb-e inserts; e's reads
    // are scans. Every write ingests 16 + 100 bytes.
    let writes = s["writes"].as_u64().unwrap();
    assert!(writes > 6000 && writes < 6000 + 1000, "{writes}");
    assert_eq!(s["bytes_ingested"].as_u64().unwrap(), writes * 116);
    for key in [
        "write_amplification",
        "flush_bytes_written",
        "compaction_bytes_read",
        "compaction_bytes_written",
        "compactions",
        "trivial_moves",
        "space_amplification",
    ] {
        assert!(s[key].is_number(), "{key}");
    }
    let levels = s["levels"].as_array().unwrap();
    assert!(levels
        .iter()
        .all(|l| l["runs"].is_number() && l["files"].is_number() && l["bytes"].is_number()));
}

#[test]
fn unknown_benchmarks_and_engines_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = bench(dir.path(), &["--benchmarks=fillrandom,nosuch"]);
    assert!(!ok && err.contains("nosuch"), "{err}");
    let (ok, _, err) = bench(dir.path(), &["--engine=other", "--num=10"]);
    assert!(!ok && err.contains("other"), "{err}");
}
