//! `lamina experiment`: a tiny sweep end to end, resuming an interrupted
//! sweep, and specs rejected before anything runs.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output};

const SPEC: &str = r#"
title = "tiny"
strategies = ["leveling", "tiered:b=4"]
[engine]
block_cache_bytes = 1048576
[grid]
write_buffer_size = [32768, 131072]
[[workload]]
name = "inserts"
kv = { inserts = 3000, update_ratio = 0.5, point_lookups = 500, key_size = 8, entry_size = 40 }
[[plot]]
file = "wa-ratio.svg"
x = "write_buffer_size"
y = "write_amplification"
[[plot]]
file = "wa.svg"
x = "write_buffer_size"
y = "compaction_bytes_written"
"#;

fn experiment(dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lamina"))
        .arg("experiment")
        .arg(dir.join("spec.toml"))
        .arg("--work-dir")
        .arg(dir.join("work"))
        .arg("--out")
        .arg(dir)
        .args(extra)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "stderr: {err}");
    err
}

/// The data rows of results.csv as (run_id without its fingerprint, full
/// line).
fn rows(dir: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let id = l.split(',').next().unwrap();
            let (named, fingerprint) = id.rsplit_once('|').unwrap();
            assert_eq!(fingerprint.len(), 16, "{id}");
            (named.to_string(), l.to_string())
        })
        .collect()
}

fn column(dir: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let mut lines = text.lines();
    let i = lines
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == name)
        .unwrap();
    lines
        .map(|l| l.split(',').nth(i).unwrap().to_string())
        .collect()
}

fn expected_ids() -> HashSet<String> {
    let mut ids = HashSet::new();
    for s in ["leveling", "tiered:b=4"] {
        for b in [32768, 131072] {
            ids.insert(format!("{s}|write_buffer_size={b}|inserts|0"));
        }
    }
    ids
}

#[test]
fn tiny_sweep_writes_one_row_per_run_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.toml"), SPEC).unwrap();
    // The work directory's other contents are not the experiment's.
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("someone-else")).unwrap();
    std::fs::write(
        work.join("someone-else").join("CURRENT"),
        b"MANIFEST-000001\n",
    )
    .unwrap();
    ok(&experiment(dir.path(), &[]));
    // Every scratch database it made is gone; what it found is intact.
    let left: Vec<String> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["someone-else"]);
    assert_eq!(
        std::fs::read(work.join("someone-else").join("CURRENT")).unwrap(),
        b"MANIFEST-000001\n"
    );
    let rows = rows(dir.path());
    let ids: HashSet<String> = rows.iter().map(|r| r.0.clone()).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(ids, expected_ids());
    // Every run ingests the workload's writes: 3000 inserts + 1500 updates
    // of 40-byte entries.
    for b in column(dir.path(), "bytes_ingested") {
        assert_eq!(b, (4500 * 40).to_string());
    }
    // Lookups all target live keys (α = 0): all found.
    assert_eq!(column(dir.path(), "found"), vec!["500"; 4]);
    let json = std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap();
    assert_eq!(json.lines().count(), 4);
    for line in json.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["stats"]["levels"].is_array());
    }
    for (file, y_title) in [
        ("wa-ratio.svg", "write_amplification (ratio)"),
        ("wa.svg", "compaction_bytes_written"),
    ] {
        let svg = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("tiered:b=4"));
        let titles = lamina_experiment::plot::axis_titles(&svg);
        assert!(
            titles.contains(&"write_buffer_size (bytes)".to_string())
                && titles.contains(&y_title.to_string()),
            "{file}: {titles:?}"
        );
    }
}

#[test]
fn an_interrupted_sweep_resumes_without_rerunning_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.toml"), SPEC).unwrap();
    ok(&experiment(dir.path(), &[]));
    let full = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    // Keep the header, the first row and half of the second, as a kill in
    // the middle of a write would.
    let lines: Vec<&str> = full.lines().collect();
    let cut = format!(
        "{}\n{}\n{}",
        lines[0],
        lines[1],
        &lines[2][..lines[2].len() / 2]
    );
    std::fs::write(dir.path().join("results.csv"), cut).unwrap();
    let err = ok(&experiment(dir.path(), &[]));
    assert!(err.contains("4 runs: 1 done already, 3 to run"), "{err}");
    let after = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    // The finished row is untouched (a re-run would have new timings).
    assert_eq!(after.lines().nth(1), Some(lines[1]));
    let finished: Vec<String> = rows(dir.path())
        .into_iter()
        .filter(|r| r.1.split(',').count() == lines[0].split(',').count())
        .map(|r| r.0)
        .collect();
    assert_eq!(finished.len(), 4);
    assert_eq!(finished.into_iter().collect::<HashSet<_>>(), expected_ids());
    // Nothing left to do.
    let err = ok(&experiment(dir.path(), &[]));
    assert!(err.contains("4 runs: 4 done already, 0 to run"), "{err}");
}

#[test]
fn a_changed_spec_is_not_resumed_from_rows_measured_under_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.toml"), SPEC).unwrap();
    ok(&experiment(dir.path(), &[]));
    let before = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    // Same names, another workload: the old rows do not answer it.
    let changed = SPEC.replace("inserts = 3000", "inserts = 2000");
    std::fs::write(dir.path().join("spec.toml"), &changed).unwrap();
    let out = experiment(dir.path(), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("holds 4 runs this spec no longer produces"),
        "{err}"
    );
    assert!(err.contains("--fresh"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("results.csv")).unwrap(),
        before,
        "nothing written"
    );
    let err = ok(&experiment(dir.path(), &["--fresh"]));
    assert!(err.contains("4 runs: 0 done already, 4 to run"), "{err}");
    // Engine options count too.
    let engine = changed.replace("block_cache_bytes = 1048576", "block_cache_bytes = 2097152");
    std::fs::write(dir.path().join("spec.toml"), engine).unwrap();
    assert!(!experiment(dir.path(), &[]).status.success());
}

#[test]
fn bad_specs_fail_before_running() {
    let dir = tempfile::tempdir().unwrap();
    for (bad, message) in [
        (SPEC.replace("tiered:b=4", "nosuch"), "nosuch"),
        (
            SPEC.replace("write_buffer_size = [", "buffer = ["),
            "unknown engine parameter",
        ),
        (SPEC.replace("wa.svg", "wa.png"), "wa.png"),
        (
            SPEC.replace("update_ratio = 0.5", "update_ratio = -1.0"),
            "update_ratio",
        ),
    ] {
        std::fs::write(dir.path().join("spec.toml"), bad).unwrap();
        let o = experiment(dir.path(), &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains(message), "{message}: {err}");
        assert!(!dir.path().join("results.csv").exists());
    }
}
