//! `lamina sim`: output formats, several policies, plots and bad input.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lamina"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn wa_paper_counts_each_steps_new_sstables() {
    // Binomial k=4, unit flushes: step 2 merges flushes 1-2 (new SSTable of
    // 2), step 4 merges 3-4 (2), step 5 merges everything (5). Seed 003's
    // W(σ) by hand: 1/1, 3/2, 4/3, 6/4, 11/5; the engine count of the test
    // above is 1, 4/2, 5/3, 8/4, 14/5.
    let o = stdout(&sim(&[
        "--policy",
        "binomial:k=4",
        "--flushes",
        "5",
        "--flush-size",
        "1",
        "--wa",
        "paper",
    ]));
    let wa: Vec<&str> = o
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap())
        .collect();
    assert_eq!(
        wa,
        ["1.000000", "1.500000", "1.333333", "1.500000", "2.200000"]
    );
}

#[test]
fn transient_column_is_the_peak_during_each_flushs_merges() {
    // Binomial k=4, unit flushes (merges as in the test above): flush 2
    // merges 1 + 1 while both exist, 4 bytes over 2 flushed; flush 3 none,
    // 3/3; flush 4 merges 1 + 1 beside the run of 2, 6/4; flush 5 merges
    // everything, 10/5.
    let o = stdout(&sim(&[
        "--policy",
        "binomial:k=4",
        "--flushes",
        "5",
        "--flush-size",
        "1",
        "--transient",
    ]));
    let mut lines = o.lines();
    assert_eq!(
        lines.next(),
        Some("flush,write_amplification,sorted_runs,avg_sorted_runs,transient_space_amplification")
    );
    let transient: Vec<&str> = lines.map(|l| l.rsplit(',').next().unwrap()).collect();
    assert_eq!(
        transient,
        ["1.000000", "2.000000", "1.000000", "1.500000", "2.000000"]
    );
}

#[test]
fn csv_has_one_line_per_flush_or_every_n() {
    let o = stdout(&sim(&[
        "--policy",
        "binomial:k=4",
        "--flushes",
        "5",
        "--flush-size",
        "1",
    ]));
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(
        lines,
        vec![
            "flush,write_amplification,sorted_runs,avg_sorted_runs",
            "1,1.000000,1,1.000000",
            "2,2.000000,1,1.000000",
            "3,1.666667,2,1.333333",
            "4,2.000000,2,1.500000",
            "5,2.800000,1,1.400000",
        ]
    );
    let o = stdout(&sim(&[
        "--policy",
        "binomial:k=4",
        "--flushes",
        "120",
        "--every",
        "50",
    ]));
    let flushes: Vec<&str> = o
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(flushes, vec!["50", "100", "120"]);
}

#[test]
fn several_policies_get_a_policy_column_and_a_json_array() {
    let o = stdout(&sim(&[
        "--policy",
        "tiered:b=4",
        "--policy",
        "exploring:k=4",
        "--flushes",
        "10",
        "--every",
        "10",
    ]));
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(
        lines[0],
        "policy,flush,write_amplification,sorted_runs,avg_sorted_runs"
    );
    assert!(lines[1].starts_with("tiered:b=4,10,"), "{o}");
    assert!(
        lines[2].starts_with("\"exploring:k=4,lambda=1.2,c=2,d=10\",10,"),
        "{o}"
    );
    let o = stdout(&sim(&[
        "--policy",
        "binomial:k=4",
        "--policy",
        "minlatency:k=4",
        "--flushes",
        "120",
        "--flush-size",
        "1",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    let a = v.as_array().unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(a[0]["policy"], "binomial:k=4");
    assert_eq!(a[0]["runs"], serde_json::json!([[1, 3, 10, 106]]));
    assert_eq!(a[1]["max_sorted_runs"], 4);
}

#[test]
fn flush_files_uniform_sizes_and_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sizes.txt");
    std::fs::write(&path, "# sizes\n100\n300\n600\n").unwrap();
    let o = stdout(&sim(&[
        "--policy",
        "constant:k=2",
        "--flush-file",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["flushes"], 3);
    assert_eq!(v["write_amplification"], 2.0);
    let o = stdout(&sim(&[
        "--policy",
        "constant:k=1",
        "--flushes",
        "2",
        "--flush-size",
        "100",
        "--dup-ratio",
        "0.5",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["runs"], serde_json::json!([[150]]));
    let o = stdout(&sim(&[
        "--policy",
        "bigtable:k=5",
        "--flushes",
        "1000",
        "--flush-uniform",
        "500,1500",
        "--seed",
        "3",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert!(v["max_sorted_runs"].as_u64().unwrap() <= 5);
}

#[test]
fn plots_are_svg_with_titled_axes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wa.svg");
    let args = |plot: &str| -> Vec<String> {
        [
            "--policy",
            "binomial:k=4",
            "--policy",
            "tiered:b=4",
            "--flushes",
            "500",
            "--format",
            "none",
            "--plot",
            plot,
        ]
        .map(String::from)
        .to_vec()
    };
    let path_str = path.to_str().unwrap();
    let a = args(path_str);
    let o = sim(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("<svg") && text.contains("binomial:k=4"));
    let titles = lamina_experiment::plot::axis_titles(&text);
    for t in [
        "flushes",
        "write amplification",
        "sorted runs (mean per point)",
    ] {
        assert!(titles.iter().any(|x| x == t), "{t} in {titles:?}");
    }
    // PNG is not drawn (no font is bundled): refused before simulating.
    let png = dir.path().join("wa.png");
    let a = args(png.to_str().unwrap());
    let o = sim(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(".svg"));
    assert!(!png.exists());
}

#[test]
fn bad_input_is_an_error_before_any_output() {
    for args in [
        &["--policy", "binomial", "--flushes", "3"][..],
        &["--policy", "nosuch:k=3", "--flushes", "3"],
        &[
            "--policy",
            "binomial:k=3",
            "--flushes",
            "3",
            "--dup-ratio",
            "1",
        ],
        &["--policy", "binomial:k=3", "--flush-uniform", "5"],
        &["--policy", "binomial:k=3"],
        &["--policy", "binomial:k=3", "--flushes", "3", "--every", "0"],
        &[
            "--policy",
            "binomial:k=3",
            "--flushes",
            "3",
            "--plot",
            "x.jpg",
        ],
        &[
            "--policy",
            "binomial:k=3",
            "--flush-file",
            "/nonexistent/sizes",
        ],
    ] {
        let o = sim(args);
        assert!(!o.status.success(), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        // Our own errors, or clap's for a flag whose value does not parse
        // (a compaction spec is checked as the flag is read).
        assert!(
            err.starts_with("lamina: ") || err.starts_with("error: invalid value"),
            "{args:?}: {err}"
        );
    }
}
