//! Nonsensical settings are refused at start with one line naming the flag;
//! an OS error is shown once; `--read-only` serves reads and refuses writes.

mod common;

use common::*;

fn refused(args: &[&str], needle: &str) {
    let out = run_with_input(args, b"g 1\n".to_vec());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was accepted");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.contains(needle), "{args:?}: {stderr}");
}

#[test]
fn bad_settings_are_refused_with_the_flag_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = dir.to_str().unwrap();
    let exec = |extra: &[&'static str]| -> Vec<String> {
        ["exec", "--dir", d]
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().map(|s| s.to_string()))
            .collect()
    };
    let cases: &[(&[&str], &str)] = &[
        (&["--threads", "0"], "--threads"),
        (&["--threads", "-2"], "--threads"),
        (&["--size-ratio", "1"], "--size-ratio"),
        (&["--buffer-bytes", "0"], "--buffer-bytes"),
        (&["--buffer-bytes", "100"], "--buffer-bytes"),
        (&["--buffer-bytes", "-5"], "--buffer-bytes"),
        (&["--buffer-pages", "0"], "--buffer-pages"),
        (&["--bloom-bits", "65"], "--bloom-bits"),
        (&["--bloom-bits", "-1"], "--bloom-bits"),
        (&["--bloom-fpr", "1.5"], "--bloom-fpr"),
        (
            &["--bloom-bits-per-level", "8,-3"],
            "--bloom-bits-per-level",
        ),
        (&["--memtable-bloom-bits", "100"], "--memtable-bloom-bits"),
        (&["--block-cache-bytes", "-1"], "--block-cache-bytes"),
    ];
    for (extra, flag) in cases {
        let args = exec(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, flag);
    }
    refused(
        &["sim", "--policy", "binomial:k=4", "--flushes", "-3"],
        "--flushes",
    );
    refused(&["gen", "--puts", "-4"], "--puts");
    // Nothing was created by the refused starts.
    assert!(!dir.exists());
}

#[test]
fn an_os_error_is_shown_once() {
    let out = run_with_input(&["exec", "--dir", "/dev/null/db"], Vec::new());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.matches("os error 20").count(), 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn read_only_serves_reads_and_refuses_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    exec(&dir, &[], b"p 1 10\np 2 20\n".to_vec());
    let out = exec(&dir, &["--read-only"], b"g 1\np 3 30\ng 2\ng 3\n".to_vec());
    // `g 3` depends on the refused `p 3 30`: its ERROR comes first, and the
    // get shows what is stored (nothing), never the refused value.
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(&lines[..2], ["10", "20"], "{out}");
    assert!(
        lines[2].starts_with("ERROR") && lines[2].contains("read-only"),
        "{out}"
    );
    assert_eq!(lines[3], "", "{out}");
    assert_eq!(lines.len(), 4, "{out}");
}
