//! `lamina bench`: db_bench-style lines, found counts and statistics that
//! follow from the benchmarks' definitions.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

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

/// Names and bytes of every file directly in `dir`.
fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

const SMALL: &[&str] = &[
    "--benchmarks=fillrandom",
    "--num=2000",
    "--write_buffer_size=16384",
];

#[test]
fn bench_never_touches_a_database_a_server_has_open() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let server = common::ServerProc::start(&db, &[]);
    let before = files(&db);
    for flags in [&[][..], &["--destroy_db"], &["--use_existing_db"]] {
        let (ok, _, err) = bench(tmp.path(), &[SMALL, flags].concat());
        assert!(!ok, "{flags:?}");
        assert!(err.contains("in use by another lamina process"), "{err}");
        assert_eq!(files(&db), before, "{flags:?}");
    }
    server.stop();
}

#[test]
fn bench_refuses_an_existing_database_unless_told_and_deletes_only_lamina_files() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (ok, _, err) = bench(tmp.path(), SMALL);
    assert!(ok, "{err}");
    std::fs::write(db.join("notes.txt"), b"keep me").unwrap();
    std::fs::create_dir(db.join("lost")).unwrap();
    std::fs::write(db.join("lost").join("000001.sst"), b"kept by repair").unwrap();
    let before = files(&db);

    // A second run over the database is refused, nothing changed.
    let (ok, _, err) = bench(tmp.path(), SMALL);
    assert!(!ok);
    assert!(err.contains("--destroy_db"), "{err}");
    assert_eq!(files(&db), before);

    // --destroy_db deletes the database's files, and nothing else.
    let (ok, out, err) = bench(tmp.path(), &[SMALL, &["--destroy_db", "--seed=7"]].concat());
    assert!(ok, "{err}");
    assert!(line(&out, "fillrandom").contains("ops/sec"));
    assert_eq!(std::fs::read(db.join("notes.txt")).unwrap(), b"keep me");
    assert_eq!(
        std::fs::read(db.join("lost").join("000001.sst")).unwrap(),
        b"kept by repair"
    );
    let old_tables: Vec<&String> = before.keys().filter(|n| n.ends_with(".sst")).collect();
    assert!(!old_tables.is_empty());
    let after = files(&db);
    // Fresh database: none of the old tables' bytes survive under their names.
    for t in old_tables {
        assert_ne!(after.get(t), before.get(t), "{t} survived --destroy_db");
    }

    // --use_existing_db reuses it: the keys written before are found.
    let (ok, out, err) = bench(
        tmp.path(),
        &["--use_existing_db", "--benchmarks=readseq", "--num=2000"],
    );
    assert!(ok, "{err}");
    assert!(line(&out, "readseq").contains("ops/sec"), "{out}");
}

#[test]
fn bench_runs_in_a_directory_of_other_files_and_leaves_them() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    std::fs::create_dir(&db).unwrap();
    std::fs::write(db.join("README"), b"mine").unwrap();
    let (ok, _, err) = bench(tmp.path(), SMALL);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(db.join("README")).unwrap(), b"mine");
}

/// `mixedhot` (seed 002's mixed workload): a paced writer, readers on
/// RangeHot, a per-second series whose write column follows the rate and
/// whose hit ratios (block cache and row cache) are ratios.
#[test]
fn mixedhot_writes_a_per_second_series() {
    let dir = tempfile::tempdir().unwrap();
    let series = dir.path().join("series.csv");
    let (ok, out, err) = bench(
        dir.path(),
        &[
            "--benchmarks=fillseq,mixedhot",
            "--num=5000",
            "--write_buffer_size=65536",
            "--cache_size=262144",
            "--row_cache_size=65536",
            "--duration=3",
            "--write_rate=500",
            "--read_dist=rangehot:0.1:0.9",
            // Misses wait 100 µs: an emulated slower device.
            "--read_miss_latency_us=100",
            &format!("--timeseries={}", series.display()),
        ],
    );
    assert!(ok, "{err}");
    let l = line(&out, "mixedhot");
    assert!(l.contains("ops/sec"), "{l}");
    let text = std::fs::read_to_string(&series).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("second,read_qps,write_qps,hit_ratio,row_cache_hit_ratio,cache_bytes,db_bytes,buffer_bytes,compactions,compaction_bytes_written,cache_invalidated_blocks,interval_s,cache_lookups,buffer_levels")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // One line per second; a sampler held up past a second skips it.
    assert!((2..=3).contains(&rows.len()), "{text}");
    let mut writes = 0.0;
    let mut last_second = 0;
    for r in &rows {
        assert_eq!(r.len(), 14, "{text}");
        // Per level below 0: ten numbers `level:files:bytes:...`.
        for level in r[13].split(';').filter(|l| !l.is_empty()) {
            let fields: Vec<&str> = level.split(':').collect();
            assert_eq!(fields.len(), 10, "{text}");
            assert!(fields.iter().all(|f| f.parse::<u64>().is_ok()), "{text}");
        }
        let second: u64 = r[0].parse().unwrap();
        assert!(second > last_second && second <= 3, "{text}");
        last_second = second;
        assert!(r[1].parse::<u64>().unwrap() > 0, "no reads: {text}");
        let interval: f64 = r[11].parse().unwrap();
        assert!(interval > 0.5, "{text}");
        writes += r[2].parse::<f64>().unwrap() * interval;
        for ratio in [r[3], r[4]] {
            let ratio: f64 = ratio.parse().unwrap();
            assert!((0.0..=1.0).contains(&ratio), "{text}");
        }
        // The block-cache ratio has lookups behind it.
        assert!(r[12].parse::<u64>().unwrap() > 0, "{text}");
    }
    let writes = writes.round() as u64;
    // Paced at 500 writes per second for 3 seconds.
    assert!((1_200..=1_600).contains(&writes), "{writes} writes: {text}");
    // Refused: a nonsense distribution.
    let (ok, _, err) = bench(
        dir.path(),
        &[
            "--benchmarks=mixedhot",
            "--read_dist=rangehot:2:1",
            "--use_existing_db",
        ],
    );
    assert!(!ok && err.contains("rangehot"), "{err}");
}

/// `--warm_up_seconds` runs `mixedhot` unrecorded first, with the emulated disk's
/// latency off: the series covers the recorded seconds only, and with a
/// cache that holds every block and no writer, the recorded part reads
/// nothing from the emulated disk, where the same run without a warm-up
/// pays for its cold cache.
#[test]
fn mixedhot_warm_up_is_unrecorded_and_warms_the_cache() {
    let run = |warm_up: &str| {
        let dir = tempfile::tempdir().unwrap();
        let series = dir.path().join("series.csv");
        let (ok, out, err) = bench(
            dir.path(),
            &[
                "--benchmarks=fillseq,mixedhot",
                "--num=2000",
                "--write_buffer_size=65536",
                "--cache_size=8388608",
                "--duration=1",
                &format!("--warm_up_seconds={warm_up}"),
                "--write_rate=0",
                "--threads=2",
                "--read_miss_latency_us=100",
                &format!("--timeseries={}", series.display()),
            ],
        );
        assert!(ok, "{err}");
        let paid = line(&out, "emulated");
        let paid: u64 = paid.split(' ').nth(2).unwrap().parse().unwrap();
        let rows = std::fs::read_to_string(&series).unwrap().lines().count() - 1;
        (paid, rows, err)
    };
    let (paid, rows, err) = run("2");
    assert!(err.contains("mixedhot warm-up (not recorded"), "{err}");
    assert_eq!(paid, 0, "a warm cache read from the emulated disk");
    assert_eq!(rows, 1, "the series has the recorded second only");
    let (paid, rows, err) = run("0");
    assert!(!err.contains("warm-up"), "{err}");
    assert!(paid > 0, "a cold cache read nothing from the emulated disk");
    assert_eq!(rows, 1);
}

/// readwhilewriting's writer writes as fast as it can, or at most
/// `--benchmark_write_rate_limit` bytes of keys and values per second: the
/// paced writer's count stays within the rate times its own running time
/// (plus the one write a pace allows ahead), where the unpaced one goes far
/// beyond it. The readers find every key (the writer only overwrites).
#[test]
fn readwhilewriting_paces_its_writer() {
    let run = |limit: &str| -> (f64, f64) {
        let dir = tempfile::tempdir().unwrap();
        let (ok, out, err) = bench(
            dir.path(),
            &[
                "--benchmarks=fillseq,readwhilewriting",
                "--num=2000",
                "--reads=200000",
                "--write_buffer_size=65536",
                &format!("--benchmark_write_rate_limit={limit}"),
            ],
        );
        assert!(ok, "{err}");
        assert!(
            line(&out, "readwhilewriting").ends_with("(200000 of 200000 found)"),
            "{out}"
        );
        // "readwhilewriting: the writer did N writes meanwhile, in S s"
        let said = err
            .lines()
            .find(|l| l.starts_with("readwhilewriting: the writer did"))
            .unwrap_or_else(|| panic!("{err}"));
        let words: Vec<&str> = said.split_whitespace().collect();
        (words[4].parse().unwrap(), words[8].parse().unwrap())
    };
    // 116 bytes a write (16-byte keys, 100-byte values): 100 writes/s.
    let (writes, seconds) = run("11600");
    assert!(
        writes <= 100.0 * seconds + 1.0,
        "{writes} writes in {seconds} s"
    );
    let (writes, seconds) = run("0");
    assert!(
        writes > 100.0 * seconds + 1.0,
        "{writes} writes in {seconds} s"
    );
}

/// `--direct_io` reads through O_DIRECT and finds what it wrote; the
/// header says so.
#[test]
fn direct_io_reads_find_every_key() {
    // Under the target directory: a tmpfs /tmp would refuse O_DIRECT.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (ok, out, err) = bench(
        dir.path(),
        &[
            "--benchmarks=fillseq,readrandom",
            "--num=3000",
            "--reads=1000",
            "--write_buffer_size=65536",
            "--cache_size=0",
            "--direct_io",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("direct_io=true"), "{out}");
    assert!(line(&out, "readrandom").ends_with("(1000 of 1000 found)"));
}

/// `--mmap_read` reads the tables through memory maps, and
/// `--verify_checksums=false` lets queries skip block checksums: both are
/// applied and printed, and every read, mapped or not, checked or not,
/// finds its key (fillseq writes every key of [0, num)). The mapped run
/// has no block cache, so every block comes from the mapping.
#[test]
fn mapped_and_unchecked_reads_find_every_key() {
    for (mmap, verify, cache) in [
        ("true", "true", "0"),
        ("false", "false", "8388608"),
        ("true", "false", "0"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (ok, out, err) = bench(
            dir.path(),
            &[
                "--benchmarks=fillseq,readrandom,seekrandom,readseq",
                "--num=3000",
                "--reads=1000",
                "--write_buffer_size=65536",
                &format!("--cache_size={cache}"),
                &format!("--verify_checksums={verify}"),
                &format!("--mmap_read={mmap}"),
            ],
        );
        assert!(ok, "{err}");
        assert!(out.contains(&format!("mmap_read={mmap}")), "{out}");
        assert!(out.contains(&format!("verify_checksums={verify}")), "{out}");
        assert!(line(&out, "readrandom").ends_with("(1000 of 1000 found)"));
        assert!(line(&out, "seekrandom").ends_with("(1000 of 1000 found)"));
    }
}

/// `--compression_type`: the files are written so (`lamina inspect sst`
/// reports the type, compressed blocks and fewer stored than uncompressed
/// bytes, db_bench's 0.5 ratio values halving the data), and every read
/// finds its key, through copies and through a mapping.
#[test]
fn compressed_tables_find_every_key() {
    for (compression, mmap) in [("lz4", "false"), ("zstd", "true"), ("zstd:1", "false")] {
        let dir = tempfile::tempdir().unwrap();
        let (ok, out, err) = bench(
            dir.path(),
            &[
                "--benchmarks=fillseq,readrandom,seekrandom,readseq",
                "--num=3000",
                "--reads=1000",
                "--write_buffer_size=65536",
                &format!("--compression_type={compression}"),
                &format!("--mmap_read={mmap}"),
            ],
        );
        assert!(ok, "{err}");
        assert!(
            out.contains(&format!("Compression: {compression}")),
            "{out}"
        );
        let sst = std::fs::read_dir(dir.path().join("db"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "sst"))
            .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_lamina"))
            .args(["inspect", "--json", "sst"])
            .arg(&sst)
            .output()
            .unwrap();
        assert!(o.status.success());
        let first = String::from_utf8(o.stdout).unwrap();
        let r: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        let want = if compression == "zstd" {
            "zstd:3"
        } else {
            compression
        };
        assert_eq!(r["compression"], want, "{r}");
        assert!(r["compressed_blocks"].as_u64().unwrap() > 0);
        let (stored, raw) = (
            r["data_bytes"].as_u64().unwrap() as f64,
            r["uncompressed_data_bytes"].as_u64().unwrap() as f64,
        );
        assert!(stored < raw * 0.8, "{stored} of {raw}");
        let kind = want.split(':').next().unwrap();
        assert!(r["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["stored_as"] == kind));
        // fillseq writes every key of [0, num): every read and seek finds it.
        assert!(line(&out, "readrandom").ends_with("(1000 of 1000 found)"));
        assert!(line(&out, "seekrandom").ends_with("(1000 of 1000 found)"));
    }
}
