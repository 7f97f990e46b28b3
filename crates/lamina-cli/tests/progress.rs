//! Progress bars draw only on a terminal: with stdout and stderr piped (as
//! in tests, scripts and CI) the long commands print exactly what they
//! printed before there were bars, with no escape codes or redraws.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::process::{Command, Output};

fn lamina(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lamina"))
        .args(args)
        .output()
        .unwrap()
}

fn clean(what: &str, bytes: &[u8]) {
    assert!(
        !bytes.contains(&0x1b) && !bytes.contains(&b'\r'),
        "{what}: {:?}",
        String::from_utf8_lossy(bytes)
    );
}

#[test]
fn piped_output_carries_no_progress() {
    // sim: the CSV alone on stdout, nothing on stderr.
    let o = lamina(&[
        "sim",
        "--policy",
        "tiered:b=4",
        "--flushes",
        "3000",
        "--every",
        "1000",
    ]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8(o.stdout.clone()).unwrap().lines().count(),
        4,
        "header and three rows"
    );
    clean("sim stdout", &o.stdout);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // bench: db_bench lines on stdout, no bar on stderr.
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let o = lamina(&[
        "bench",
        &db,
        "--benchmarks=fillrandom,readrandom",
        "--num=20000",
        "--reads=5000",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    clean("bench stdout", &o.stdout);
    clean("bench stderr", &o.stderr);

    // repair: its report, no spinner.
    let o = lamina(&["repair", &dir.path().join("db").display().to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    clean("repair stdout", &o.stdout);
    clean("repair stderr", &o.stderr);
}
