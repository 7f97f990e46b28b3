//! The fault test (`lamina cluster-test`, issue 22) in a small variant:
//! three `lamina cluster` processes behind the test's proxy, concurrent
//! clients, kills and partitions, then the linearizability and lost-write
//! checks, unsharded and with two shards. The checker itself is tested against hand-made histories and a
//! brute-force oracle in `lamina_cluster::linearizability`; the long run
//! is `scripts/cluster-test.sh --faults 200`.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test may panic on a failed setup"
)]

mod common;

use std::process::Command;

use common::bin;

/// Runs `lamina cluster-test` with `args`; the numbers of its summary line
/// (faults, lost, violations, ops).
fn cluster_test(args: &[&str]) -> [u64; 4] {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .arg("cluster-test")
        .arg("--dir")
        .arg(tmp.path().join("run"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // The run keeps its members' data and logs for a failure: so must
        // the test, or the directory it names is gone.
        let kept = tmp.keep();
        panic!("{stdout}\n{stderr}\n(kept in {})", kept.display());
    }
    let last = stdout.lines().last().expect("a summary line");
    let words: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(
        [words[1], words[3], words[5], words[7]],
        ["faults,", "lost,", "violations,", "ops"],
        "{last}"
    );
    [0, 2, 4, 6].map(|i| words[i].parse().unwrap())
}

#[test]
fn ten_faults_lose_no_acknowledged_write_and_stay_linearizable() {
    let [faults, lost, violations, ops] = cluster_test(&["--faults", "10"]);
    assert_eq!((faults, lost, violations), (10, 0, 0));
    assert!(ops > 100, "{ops} ops");
}

#[test]
fn forwarding_followers_under_faults() {
    let [faults, lost, violations, ops] =
        cluster_test(&["--faults", "5", "--forward-writes", "--seed", "2"]);
    assert_eq!((faults, lost, violations), (5, 0, 0));
    assert!(ops > 50, "{ops} ops");
}

#[test]
fn two_shards_over_four_members_under_faults() {
    // Shard 1 on members 1-3, shard 2 on members 2-4: members 1 and 4
    // route the other shard's keys, and ranges cross the shard bound.
    let [faults, lost, violations, ops] =
        cluster_test(&["--faults", "5", "--shards", "2", "--seed", "3"]);
    assert_eq!((faults, lost, violations), (5, 0, 0));
    assert!(ops > 50, "{ops} ops");
}

/// `lamina cluster` refuses a cluster file of several members without a
/// `secret_file` (unless `--insecure`), and a secret shorter than 16
/// bytes, which it finds beside the cluster file whatever the working
/// directory.
#[test]
fn several_members_need_a_secret_of_sixteen_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let nodes = (1..=3)
        .map(|i| format!("[[node]]\nid = {i}\nraft = \"127.0.0.1:0\"\nclient = \"127.0.0.1:0\"\n"))
        .collect::<String>();
    let run = |file: &str, text: &str| {
        let path = tmp.path().join(file);
        std::fs::write(&path, text).unwrap();
        let out = Command::new(bin())
            .current_dir(std::env::temp_dir())
            .args(["cluster", "--node-id", "1", "--config"])
            .arg(&path)
            .arg("--dir")
            .arg(tmp.path().join("n1"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{file} started");
        String::from_utf8(out.stderr).unwrap()
    };
    let err = run("open.toml", &nodes);
    assert!(
        err.contains("3 members and no secret_file") && err.contains("--insecure"),
        "{err}"
    );
    std::fs::write(tmp.path().join("short.secret"), b"12345").unwrap();
    let err = run(
        "short.toml",
        &format!("secret_file = \"short.secret\"\n{nodes}"),
    );
    let want = format!(
        "secret_file {} holds 5 bytes",
        tmp.path().join("short.secret").display()
    );
    assert!(err.contains(&want), "{err}");
}
