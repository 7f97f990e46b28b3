//! The quick run of `experiments/partitioned-merges` (the example
//! `partitioned_merges`) writes a summary of the documented shape, and its
//! figures say what partitioning must do.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "a test may panic on a failed setup; each test binary compiles this shared module and uses a different part of it"
)]

#[path = "../examples/partitioned_merges.rs"]
mod partitioned_merges;

use serde_json::Value;

#[test]
fn quick_partitioned_merges_summary_has_every_row() {
    let out = tempfile::tempdir().unwrap();
    partitioned_merges::run_experiment(
        out.path(),
        true,
        None,
        partitioned_merges::DEFAULT_RECYCLE,
        &partitioned_merges::KEY_SETS,
    )
    .unwrap();
    assert!(out.path().join("results.md").exists());
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["quick"], Value::Bool(true));
    let rows = v["rows"].as_array().unwrap();
    let keys = [
        "write_seconds",
        "merges",
        "merge_bytes_per_sec",
        "files",
        "files_written",
        "trivial_moves",
        "sub_merges",
        "get_us",
        "scan_us",
    ];
    for set in ["random", "semiseq", "zipf", "str"] {
        for p in ["none", "size", "local", "global", "leveling"] {
            let mine: Vec<&Value> = rows
                .iter()
                .filter(|r| r["keys"] == set && r["partitioner"] == p)
                .collect();
            let styles = if p == "leveling" { 1 } else { 2 };
            assert_eq!(mine.len(), styles, "{set}/{p}");
            for r in mine {
                for k in keys {
                    let x = r[k].as_f64().unwrap_or_else(|| panic!("{set}/{p}: {k}"));
                    assert!(x >= 0.0, "{set}/{p}: {k} = {x}");
                }
                assert!(r["write_seconds"].as_f64().unwrap() > 0.0);
                assert!(r["files"].as_u64().unwrap() > 0);
            }
        }
    }
    let row = |set: &str, p: &str, style: &str| {
        rows.iter()
            .find(|r| r["keys"] == set && r["partitioner"] == p && r["style"] == style)
            .unwrap()
    };
    // No-partition writes one file per merge and moves nothing; on
    // semi-sequential keys every other rule moves files instead of
    // rewriting them; range rules cut more files than Size.
    let none = row("semiseq", "none", "similar");
    assert_eq!(none["trivial_moves"], 0);
    for p in ["size", "local", "global"] {
        assert!(
            row("semiseq", p, "similar")["trivial_moves"]
                .as_u64()
                .unwrap()
                > 0,
            "{p}"
        );
    }
    let files = |p: &str| row("random", p, "similar")["files"].as_u64().unwrap();
    assert!(files("none") < files("size"));
    assert!(files("size") < files("global"));
}
