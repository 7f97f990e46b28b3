//! The `design_space` example (experiments/design-space) at a CI-sized
//! scale, with the knobs `run-all.sh --quick` adds for seed 001's Figs. 6–8
//! and appendix sweeps: every run has the shape `summarize.py` and
//! `sweep.py` read, its counts agree with the operations issued (the
//! example itself checks every lookup against its model of the live keys),
//! and `sweep.py --check` accepts a sweep of such runs and refuses one with
//! a strategy missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "a test may panic on a failed setup; each test binary compiles this shared module and uses a different part of it"
)]

#[path = "../examples/design_space.rs"]
mod design_space;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const OPS: u64 = 2_000;

/// One small run: 4 KiB buffers and files, so a few thousand entries make a
/// tree of several levels.
fn run(strategy: &str, scratch: &Path, knobs: &[&str]) -> Value {
    let mut all = vec![
        "buffer=4096".to_string(),
        "cache=65536".to_string(),
        "priority=1".to_string(),
    ];
    all.extend(knobs.iter().map(|k| k.to_string()));
    let dir = scratch.join(format!("{strategy}-{}", knobs.join("-")));
    let stats = design_space::run(&format!("{strategy}:T=4,file=4096"), OPS, &dir, &all);
    assert!(!dir.exists(), "the run removes the directory it created");
    stats
}

/// Scratch space on tmpfs where there is one: the engine fsyncs every file
/// it writes, which on a shared disk makes these runs take seconds of
/// waiting for under a second of CPU.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn every_distribution_ingests_unique_keys_and_answers_lookups_by_its_model() {
    let scratch = scratch();
    for (ingest, lookup) in [
        ("uniform", "uniform"),
        ("zipf", "uniform"),
        ("normal", "uniform"),
        ("uniform", "zipf"),
        ("uniform", "normal"),
    ] {
        let s = run(
            "lo1",
            scratch.path(),
            &[
                &format!("ingest={ingest}"),
                &format!("lookup={lookup}"),
                "lookups=200",
            ],
        );
        let what = format!("ingest={ingest} lookup={lookup}");
        // Unique inserts only: every operation adds a live key of 4 + 124
        // bytes.
        assert_eq!(f(&s, "live_keys"), OPS as f64, "{what}");
        assert_eq!(f(&s, "bytes_ingested"), (OPS * 128) as f64, "{what}");
        assert!(f(&s, "disk_levels") >= 2.0, "{what}: {}", s["disk_levels"]);
        assert_eq!(s["knobs"]["ingest"], ingest);
        assert_eq!(s["knobs"]["lookup"], lookup);
        let rows = s["lookups"].as_array().unwrap();
        assert_eq!(rows.len(), 6, "{what}: one row per alpha");
        for r in rows {
            let alpha = f(r, "alpha");
            let found = r["found"]["count"].as_u64().unwrap();
            let empty = r["empty"]["count"].as_u64().unwrap();
            assert_eq!(found + empty, 200, "{what}");
            if alpha == 0.0 {
                assert_eq!(empty, 0, "{what}");
            }
            if alpha == 1.0 {
                assert_eq!(found, 0, "{what}");
            }
        }
    }
}

#[test]
fn entry_page_and_filter_knobs_reach_the_engine() {
    let scratch = scratch();
    let small = run("tier", scratch.path(), &["value=4"]);
    let large = run("tier", scratch.path(), &["value=252"]);
    assert_eq!(f(&small, "bytes_ingested"), (OPS * 8) as f64);
    assert_eq!(f(&large, "bytes_ingested"), (OPS * 256) as f64);
    // Smaller blocks mean more of them for the same data: a larger index
    // and more block reads per byte, i.e. more bytes on disk per entry.
    let pages = |block: &str| f(&run("lo1", scratch.path(), &[block]), "disk_bytes");
    assert!(pages("block=256") > pages("block=16384"));
    // Bloom bits are stored with the tables.
    let bits = |bpk: &str| f(&run("lo1", scratch.path(), &[bpk]), "disk_bytes");
    assert!(bits("bpk=20") > bits("bpk=2"));
}

#[test]
fn sweep_tabulates_points_and_checks_their_shape() {
    let scratch = scratch();
    let mut points = Vec::new();
    for value in [4, 28] {
        let dir = scratch.path().join(format!("entry-{value}"));
        std::fs::create_dir(&dir).unwrap();
        for strategy in ["full", "tier"] {
            let s = run(strategy, scratch.path(), &[&format!("value={value}")]);
            std::fs::write(dir.join(format!("{strategy}.json")), s.to_string()).unwrap();
        }
        points.push(format!("{value}={}", dir.display()));
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/design-space/sweep.py");
    let sweep = |strategies: &str| {
        let out = scratch.path().join("entry.md");
        let status = Command::new("python3")
            .arg(&script)
            .arg(&out)
            .args(["entry", "value", "--check", strategies])
            .args(&points)
            .output()
            .expect("python3 runs sweep.py");
        (
            status.status.success(),
            std::fs::read_to_string(out).unwrap_or_default(),
        )
    };
    let (ok, table) = sweep("full tier");
    assert!(ok, "{table}");
    // One row per strategy and point, in the strategies' order.
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| full |") || l.starts_with("| tier |"))
        .collect();
    assert_eq!(rows.len(), 4, "{table}");
    assert!(
        rows[0].starts_with("| full | 4 |") && rows[3].starts_with("| tier | 28 |"),
        "{table}"
    );
    let (ok, _) = sweep("full lo1 tier");
    assert!(!ok, "lo1 is in no point: the check must fail");
}
