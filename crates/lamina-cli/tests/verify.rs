//! `lamina verify DIR`: a summary and exit 0 on a clean database; exit 1 with
//! the damaged file and offset on a flipped byte; exit 1 on a directory
//! without a database.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::process::Command;

use common::*;

fn verify(dir: &std::path::Path) -> std::process::Output {
    Command::new(bin()).arg("verify").arg(dir).output().unwrap()
}

#[test]
fn verify_reports_clean_and_damaged_databases() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut dsl = String::new();
    for k in 0..20_000 {
        dsl.push_str(&format!("p {k} {}\n", k * 3));
    }
    exec(&dir, &["--buffer-bytes", "64K"], dsl.into_bytes());

    let out = verify(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.trim_end().ends_with("OK"), "{stdout}");
    assert!(stdout.contains("every block valid"), "{stdout}");

    // Flip a byte inside the first data block of one table.
    let sst = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    let path = dir.join(&sst);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let out = verify(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr.contains(&format!("corruption in {sst} at offset 0")),
        "{stderr}"
    );

    let out = verify(&tmp.path().join("nothing-here"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no database"));
}

#[test]
fn verify_points_to_repair_which_rebuilds_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut dsl = String::new();
    for k in 0..5_000 {
        dsl.push_str(&format!("p {k} {}\n", k + 1));
    }
    exec(&dir, &["--buffer-bytes", "64K"], dsl.into_bytes());
    std::fs::remove_file(dir.join("CURRENT")).unwrap();

    // Opening refuses and names the way out.
    let out = run_with_input(&["exec", "--dir", dir.to_str().unwrap()], b"g 1\n".to_vec());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("lamina repair {}", dir.display())),
        "{stderr}"
    );

    let out = Command::new(bin())
        .arg("repair")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("moved"), "{stdout}");
    assert!(verify(&dir).status.success());
    assert_eq!(exec(&dir, &[], b"g 1\ng 4999\n".to_vec()), "2\n5000\n");
}
