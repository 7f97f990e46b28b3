//! `lamina spatial exec` end to end: every reply equals a brute-force
//! oracle's, across restarts, for each comparator, maintenance strategy
//! and merge policy; bad lines answer `ERROR` and change nothing.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn run(dir: &Path, flags: &[&str], input: &str) -> String {
    let mut child = Command::new(common::bin())
        .args(["spatial", "exec", "--dir"])
        .arg(dir)
        .args(["--buffer-bytes", "16K"])
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{flags:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A script of writes and queries, with the replies a brute-force scan of
/// the live points gives.
fn script(rng: &mut StdRng, model: &mut BTreeMap<u64, (f64, f64)>, n: usize) -> (String, String) {
    let (mut input, mut expect) = (String::new(), String::new());
    for _ in 0..n {
        let id = rng.gen_range(0..400u64);
        match rng.gen_range(0..10) {
            0 => {
                input.push_str(&format!("x {id}\n"));
                model.remove(&id);
            }
            1..=6 => {
                // Two decimals, so the text is the exact point.
                let x = f64::from(rng.gen_range(-18000..18000)) / 100.0;
                let y = f64::from(rng.gen_range(-9000..9000)) / 100.0;
                input.push_str(&format!("i {id} {x} {y}\n"));
                model.insert(id, (x, y));
            }
            _ => {
                let (cx, cy) = (rng.gen_range(-180.0..180.0), rng.gen_range(-90.0..90.0));
                let (w, h) = (rng.gen_range(1.0..120.0), rng.gen_range(1.0..60.0));
                let (x1, y1, x2, y2) = (cx - w, cy - h, cx + w, cy + h);
                let ids: Vec<u64> = model
                    .iter()
                    .filter(|(_, &(x, y))| x1 <= x && x <= x2 && y1 <= y && y <= y2)
                    .map(|(id, _)| *id)
                    .collect();
                if rng.gen_bool(0.5) {
                    input.push_str(&format!("w {x1} {y1} {x2} {y2}\n"));
                    expect.push_str(&ids.len().to_string());
                    for id in &ids {
                        expect.push_str(&format!(" {id}"));
                    }
                    expect.push('\n');
                } else {
                    input.push_str(&format!("c {x1} {y1} {x2} {y2}\n"));
                    expect.push_str(&format!("{}\n", ids.len()));
                }
            }
        }
    }
    (input, expect)
}

#[test]
fn replies_equal_a_brute_force_scan_across_restarts() {
    let configs: &[&[&str]] = &[
        &["--comparator", "hilbert", "--compaction", "binomial:k=4"],
        &[
            "--comparator",
            "simple",
            "--compaction",
            "leveling:T=3,l0=2",
        ],
        &["--comparator", "zorder", "--compaction", "tiered:b=3"],
        &[
            "--comparator",
            "simple",
            "--compaction",
            "leveled:b0=2,b=3",
            "--partition",
            "str",
        ],
        &[
            "--comparator",
            "hilbert",
            "--compaction",
            "leveled:b0=2,b=3",
            "--partition",
            "rstar-grove",
        ],
        &[
            "--comparator",
            "hilbert",
            "--maintenance",
            "lazy",
            "--compaction",
            "concurrent",
        ],
    ];
    for (i, flags) in configs.iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        let mut rng = StdRng::seed_from_u64(i as u64);
        let mut model = BTreeMap::new();
        for round in 0..3 {
            let (input, expect) = script(&mut rng, &mut model, 1_500);
            assert_eq!(run(&dir, flags, &input), expect, "{flags:?} round {round}");
        }
        for index in ["primary", "spatial"] {
            common::assert_verifies(&dir.join(index));
        }
    }
}

#[test]
fn bad_lines_answer_error_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let input = "i 1 1 1\ni 2 nan 0\ni x 1 1\nw 5 5 1 1\nnope\ni 1 2\nx\nw -10 -10 10 10\n";
    let out = run(&dir, &[], input);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "{out}");
    assert!(lines[..6].iter().all(|l| l.starts_with("ERROR ")), "{out}");
    assert_eq!(lines[6], "1 1");
    // The dataset remembers its comparator and refuses another.
    let out = Command::new(common::bin())
        .args(["spatial", "exec", "--comparator", "simple", "--dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("comparator hilbert"));
}

/// Runs `lamina spatial bench` on a small clustered workload where half of
/// the rounds' writes move an existing record; returns its JSON report.
fn bench_with_updates(dir: &std::path::Path, maintenance: &str) -> serde_json::Value {
    let out = Command::new(common::bin())
        .args(["spatial", "bench", "--dir"])
        .arg(dir)
        .args([
            "--maintenance",
            maintenance,
            "--update-fraction",
            "0.5",
            "--buffer-bytes",
            "64K",
            "--compaction",
            "binomial:k=3",
            "--data",
            "clusters",
            "--load",
            "1500",
            "--rounds",
            "3",
            "--inserts",
            "400",
            "--queries",
            "15",
            "--record-bytes",
            "120",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn bench_updates_cost_eager_writes_and_lazy_reads_with_equal_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let eager = bench_with_updates(&tmp.path().join("eager"), "eager");
    let lazy = bench_with_updates(&tmp.path().join("lazy"), "lazy");
    for r in [&eager, &lazy] {
        assert_eq!(r["writes"], 2700);
        // About 600 of the 1,200 round writes moved an earlier record.
        let records = r["records"].as_u64().unwrap();
        assert!((1900..2300).contains(&records), "{records}");
    }
    // The same seed gives both the same points and windows, so the same
    // counts: lazy validation removes exactly what anti-matter cancels.
    for (e, l) in eager["sigmas"]
        .as_array()
        .unwrap()
        .iter()
        .zip(lazy["sigmas"].as_array().unwrap())
    {
        assert_eq!(e["mean_results"], l["mean_results"], "{e} {l}");
    }
    let (e, l) = (&eager["dataset"], &lazy["dataset"]);
    assert_eq!(e["write_lookups"], 2700);
    assert!(e["antimatter"].as_u64().unwrap() > 0, "{e}");
    assert_eq!(e["validations"], 0);
    assert_eq!(l["write_lookups"], 0);
    assert_eq!(l["antimatter"], 0);
    assert!(l["validations"].as_u64().unwrap() > 0, "{l}");
    assert!(l["stale_candidates"].as_u64().unwrap() > 0, "{l}");
}

#[test]
fn bench_reports_every_selectivity() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bench");
    let out = Command::new(common::bin())
        .args(["spatial", "bench", "--dir"])
        .arg(&dir)
        .args([
            "--buffer-bytes",
            "64K",
            "--compaction",
            "tiered:b=3",
            "--data",
            "clusters",
            "--load",
            "2000",
            "--rounds",
            "2",
            "--inserts",
            "300",
            "--queries",
            "10",
            "--record-bytes",
            "200",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["records"], 2600);
    assert!(r["index_write_amplification"].as_f64().unwrap() >= 1.0);
    let sigmas = r["sigmas"].as_array().unwrap();
    assert_eq!(sigmas.len(), 3);
    for (s, want) in sigmas.iter().zip([3, 4, 5]) {
        assert_eq!(s["sigma"], want);
        assert_eq!(s["queries"], 20);
        // Every window is centred on a stored point, so it finds one.
        assert!(s["mean_results"].as_f64().unwrap() >= 1.0, "{s}");
        assert!(s["read_amplification"].as_f64().unwrap() >= 1.0, "{s}");
    }
    // The bench never reuses a directory.
    let again = Command::new(common::bin())
        .args(["spatial", "bench", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!again.status.success());
}

/// The spatial port of a server started with `--spatial-dir`, from its
/// start-up lines.
fn spatial_port(server: &mut common::ServerProc) -> u16 {
    use std::io::BufRead;
    let mut line = String::new();
    for _ in 0..4 {
        line.clear();
        server.stdout.read_line(&mut line).unwrap();
        if let Some(addr) = line.trim().strip_prefix("lamina: spatial commands on ") {
            return addr.rsplit(':').next().unwrap().parse().unwrap();
        }
    }
    panic!("no spatial port in the start-up lines: {line:?}");
}

#[test]
fn served_spatial_commands_equal_a_brute_force_scan_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let ds = tmp.path().join("ds");
    let flags = [
        "--spatial-dir",
        ds.to_str().unwrap(),
        "--spatial-port",
        "0",
        "--spatial-compaction",
        "leveled:b0=2,b=3",
        "--spatial-partition",
        "rstar-grove",
        "--spatial-budget",
        "16K",
        "--load-dir",
        "none",
    ];
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = BTreeMap::new();
    for round in 0..2 {
        let mut server = common::ServerProc::start(&db, &flags);
        let port = spatial_port(&mut server);
        let (input, expect) = script(&mut rng, &mut model, 1_500);
        assert_eq!(
            common::client(port, input.into_bytes()),
            expect,
            "round {round}"
        );
        // The DSL port serves the key-value database beside it.
        assert_eq!(common::client(server.port, b"p 1 2\ng 1\n".to_vec()), "2\n");
        // Bad lines get one ERROR each; @sync is echoed.
        let out = common::client(port, b"i 1 nan 0\nw 1 1 0 0\nnope\n".to_vec());
        assert_eq!(
            out.lines().filter(|l| l.starts_with("ERROR ")).count(),
            3,
            "{out}"
        );
        server.stop();
    }
    for index in ["primary", "spatial"] {
        common::assert_verifies(&ds.join(index));
    }
}
