//! `lamina tune`: its JSON names a design the engine's flags accept, TOML
//! workloads and calibration files are read, bad input is refused.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::process::{Command, Output};

fn lamina(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lamina"))
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-lamina-test-config")
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn tune_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["tune", "--format", "json", "--threads", "2"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(&lamina(&all))).unwrap()
}

#[test]
fn the_json_recommendation_runs_in_the_bench_with_its_flags() {
    let v = tune_json(&["--workload", "a", "--records", "20000", "--memory", "8M"]);
    let rec = &v["recommendation"];
    let spec = rec["compaction"].as_str().unwrap();
    assert!(rec["buffer_bytes"].as_u64().unwrap() >= 1 << 20);
    assert!(rec["bloom_bits_per_level"].is_array());
    let candidates = v["candidates"].as_array().unwrap();
    assert!(candidates.len() > 100);
    // Ranked best first, the recommendation on top.
    assert_eq!(candidates[0]["candidate"]["spec"].as_str().unwrap(), spec);
    let costs: Vec<f64> = candidates
        .iter()
        .map(|c| c["cost_ns"].as_f64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]));
    // The spec and the other flags, as printed, are what the bench takes.
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let mut args = vec!["bench", "--benchmarks=fillrandom", "--num=2000", &db];
    let flags = rec["bench_flags"].as_str().unwrap();
    args.extend(flags.split(' '));
    let out = ok(&lamina(&args));
    assert!(out.contains(&format!("compaction={spec}")), "{out}");
    // And the engine's own flags (`lamina exec`).
    let engine = rec["engine_flags"].as_str().unwrap();
    let dir2 = format!("--dir={}", dir.path().join("exec").display());
    let mut args = vec!["exec", &dir2];
    args.extend(engine.split(' '));
    let mut child = Command::new(env!("CARGO_BIN_EXE_lamina"))
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"p 1 2\ng 1\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_toml_workload_and_a_calibration_file_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("scans.toml");
    std::fs::write(
        &w,
        "records = 20000\nvalue_bytes = 200\noperations = 1000\nmemory_bytes = 4194304\n\
         scan_length = 500\n[mix]\nscan = 1\n[keys]\ndistribution = \"uniform\"\n",
    )
    .unwrap();
    let cal = dir.path().join("cal.toml");
    std::fs::write(&cal, "block_ns = 50000.0\n").unwrap();
    let v = tune_json(&[
        "--workload",
        w.to_str().unwrap(),
        "--calibration",
        cal.to_str().unwrap(),
    ]);
    assert_eq!(v["workload"]["name"], "scans");
    assert_eq!(v["workload"]["memory_bytes"], 4194304);
    assert_eq!(v["cost_model"], cal.to_str().unwrap());
    // Scans only: the best design keeps fewer runs than the worst.
    let c = v["candidates"].as_array().unwrap();
    let runs = |x: &serde_json::Value| x["runs"].as_f64().unwrap();
    assert!(runs(&c[0]) < runs(c.last().unwrap()));
    std::fs::write(&cal, "block_ns = -1.0\n").unwrap();
    let o = lamina(&[
        "tune",
        "--workload",
        w.to_str().unwrap(),
        "--calibration",
        cal.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
}

#[test]
fn uncertainty_adds_a_worst_case_and_the_drift() {
    let v = tune_json(&[
        "--workload",
        "c",
        "--records",
        "20000",
        "--memory",
        "8M",
        "--uncertainty",
        "0.5",
    ]);
    let c = &v["candidates"][0];
    assert!(c["worst_cost_ns"].as_f64().unwrap() >= c["cost_ns"].as_f64().unwrap());
    assert!(v["drift"]["nominal_best_loses_at_worst"].as_f64().unwrap() >= 0.0);
}

#[test]
fn bad_input_is_refused() {
    for args in [
        &["tune", "--workload", "g"][..],
        &["tune", "--workload", "a", "--memory", "1000"],
        &["tune", "--workload", "a", "--records", "0"],
        &["tune", "--workload", "a", "--uncertainty", "-1"],
        &["tune", "--workload", "/nonexistent/w.toml"],
        &["tune"],
    ] {
        let o = lamina(args);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("panicked"),
            "{args:?}"
        );
    }
}
