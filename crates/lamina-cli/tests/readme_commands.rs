//! Every shell command of README.md and bench/README.md, run: the `lamina`
//! ones with the sizes cut down (`--num=1000000` runs 2,000 operations, an
//! experiment's workloads a hundredth), in a scratch directory as a fresh
//! clone would, checking that none writes into the repository; peer
//! engines (a feature this build lacks) must be refused by name; scripts
//! must exist and parse. What a command needs that a test cannot give it
//! here (a server for `client`, `redis-cli`, cargo itself) is run by the
//! test named beside it in `covered_elsewhere`.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::bin;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The shell commands of a Markdown file's `sh` and plain fenced blocks:
/// `$ ` prompts and `# ` comments stripped, `\` continuations joined,
/// output lines of `$`-prompted blocks left out.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in text.lines() {
        match (&mut block, line.strip_prefix("```")) {
            (None, Some(info)) => {
                block = ["", "sh", "console"].contains(&info.trim()).then(Vec::new);
                if block.is_none() {
                    // Skip to the end of a block of another language.
                    block = Some(vec!["\u{0}skip"]);
                }
            }
            (Some(lines), Some(_)) => {
                if lines.first() != Some(&"\u{0}skip") {
                    out.extend(block_commands(lines));
                }
                block = None;
            }
            (Some(lines), None) => lines.push(line),
            (None, None) => {}
        }
    }
    out
}

/// The command with its leading `VAR=value` assignments left out.
fn program(cmd: &str) -> &str {
    let mut rest = cmd.trim_start();
    while let Some((word, tail)) = rest.split_once(' ') {
        if !word.contains('=') || word.starts_with('-') {
            break;
        }
        rest = tail.trim_start();
    }
    rest
}

/// Whether a line of a plain block is a command (and not output shown
/// in it, such as `fillrandom   :  4.274 micros/op`).
fn is_command(line: &str) -> bool {
    let first = program(line).split_whitespace().next().unwrap_or("");
    first.starts_with("target/")
        || first.ends_with(".sh")
        || [
            "cargo",
            "for",
            "redis-cli",
            "printf",
            "head",
            "echo",
            "done",
        ]
        .contains(&first)
}

fn block_commands(lines: &[&str]) -> Vec<String> {
    let prompted = lines.iter().any(|l| l.starts_with("$ "));
    let mut out = Vec::new();
    let mut current = String::new();
    for line in lines {
        if !prompted && current.is_empty() && !is_command(line) {
            continue;
        }
        let line = match (prompted, line.strip_prefix("$ ")) {
            (true, Some(l)) => l,
            (true, None) if current.is_empty() => continue, // output
            _ => line,
        };
        let line = match line.find(" #") {
            Some(i) if !line.contains('\'') => &line[..i],
            _ => line,
        };
        let line = line.trim_end();
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head);
            continue;
        }
        current.push_str(line);
        // A loop over several lines is one command.
        if current.starts_with("for ") && !line.trim_end().ends_with("done") {
            current.push('\n');
            continue;
        }
        let cmd = current.trim().to_string();
        if !cmd.is_empty() && !cmd.starts_with('#') {
            out.push(cmd);
        }
        current.clear();
    }
    out
}

/// A command's sizes cut down for a test run.
fn cheap(cmd: &str) -> String {
    let mut out = Vec::new();
    for word in cmd.split(' ') {
        out.push(match word.split_once('=') {
            Some(("--num", _)) => "--num=2000".to_string(),
            Some(("--reads", _)) => "--reads=1000".to_string(),
            _ => word.to_string(),
        });
    }
    out.join(" ")
}

/// Commands a test here cannot run, each with the test that runs it.
fn covered_elsewhere(cmd: &str) -> Option<&'static str> {
    let table: [(&str, &str); 14] = [
        ("cargo run --release -p lamina-cli -- serve", "readme.rs: the quick start's client session (a server, then `client`)"),
        ("cargo run --release -p lamina-cli -- tune", "tune.rs: the same options on fewer records (a million simulates every design for seconds, and --validate runs the bench per design)"),
        ("cargo test --release -p lamina-cli --features", "nothing in CI: the peer build needs cmake, a C++ compiler and libclang (bench/README.md)"),
        ("cargo test", "this test, running"),
        ("cargo build --release -p lamina-cli --features", "nothing in CI: the peer builds need cmake, a C++ compiler and libclang; their `lamina bench --engine` commands are run here and refused by name"),
        ("cargo build", "this test's own build of the binary"),
        ("cargo clippy", ".ci/run"),
        ("redis-cli", "scripts/redis-tools-test.sh"),
        ("printf 'p 10", "readme.rs: the quick start's client session"),
        ("printf 'p 1 10", "ops.rs: a_normal_cluster_election_logs_no_warnings (the README's three members)"),
        ("for n in 1 2 3", "ops.rs: a_normal_cluster_election_logs_no_warnings"),
        ("head -c 32 /dev/urandom", "ops.rs: a_normal_cluster_election_logs_no_warnings"),
        ("echo 'secret_file", "ops.rs: a_normal_cluster_election_logs_no_warnings"),
        ("printf '[[node]]", "ops.rs: a_normal_cluster_election_logs_no_warnings"),
    ];
    let cmd = program(cmd);
    table
        .iter()
        .find(|(prefix, _)| cmd.starts_with(prefix))
        .map(|(_, by)| *by)
}

/// The experiment spec of bench/README's example, its workloads cut to a
/// hundredth, as `DIR/buffer-vs-strategy/spec.toml`.
fn cheap_spec(dir: &Path, spec: &Path) -> PathBuf {
    let text = std::fs::read_to_string(spec).unwrap();
    let mut table: toml::Table = text.parse().unwrap();
    for w in table["workload"].as_array_mut().unwrap() {
        let w = w.as_table_mut().unwrap();
        for key in ["records", "operations"] {
            if let Some(toml::Value::Integer(n)) = w.get_mut(key) {
                *n /= 100;
            }
        }
        if let Some(toml::Value::Table(kv)) = w.get_mut("kv") {
            for key in ["inserts", "point_lookups"] {
                if let Some(toml::Value::Integer(n)) = kv.get_mut(key) {
                    *n /= 100;
                }
            }
        }
    }
    let out = dir.join("buffer-vs-strategy");
    std::fs::create_dir_all(&out).unwrap();
    let path = out.join("spec.toml");
    std::fs::write(&path, toml::to_string(&table).unwrap()).unwrap();
    path
}

/// Runs one `lamina` command (the binary's path already in place) in
/// `cwd` with bash; asserts what it must do.
fn run_lamina(cmd: &str, cwd: &Path) {
    let peer = ["fjall", "rocksdb", "leveldb"]
        .into_iter()
        .find(|e| cmd.contains(&format!("--engine {e}")) || cmd.contains("$eng"));
    let out = Command::new("bash")
        .args(["-c", &format!("set -e\n{cmd}")])
        .current_dir(cwd)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    match peer {
        // This build has no peers: refused, naming the feature to build.
        Some(_) => assert!(
            !out.status.success() && err.contains("peer-"),
            "{cmd}: {err}"
        ),
        None => assert!(out.status.success(), "{cmd}: {err}"),
    }
}

/// The files under `dir` tracked by git, with their modification times.
fn tracked_state(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        out.push((
            p.clone(),
            std::fs::metadata(&p).unwrap().modified().unwrap(),
        ));
    }
    out.sort();
    out
}

#[test]
fn every_command_of_the_readmes_runs() {
    let repo = repo();
    let experiments = repo.join("experiments/buffer-vs-strategy");
    let before = tracked_state(&experiments);
    let tmp = tempfile::tempdir().unwrap();
    let spec = cheap_spec(tmp.path(), &experiments.join("spec.toml"));
    let mut ran = 0;
    for file in ["README.md", "bench/README.md"] {
        let text = std::fs::read_to_string(repo.join(file)).unwrap();
        for cmd in commands(&text) {
            if let Some(by) = covered_elsewhere(&cmd) {
                eprintln!("{file}: `{cmd}`: run by {by}");
                continue;
            }
            if cmd.contains("bench/compare.sh") {
                // The peer comparison builds RocksDB and LevelDB: its
                // script must exist and parse.
                let st = Command::new("bash")
                    .arg("-n")
                    .arg(repo.join("bench/compare.sh"))
                    .status()
                    .unwrap();
                assert!(st.success(), "{file}: {cmd}");
                continue;
            }
            assert!(
                cmd.contains("target/release/lamina"),
                "{file}: `{cmd}` is neither run here nor listed as run elsewhere"
            );
            // Scratch paths first (the scratch directory may be in /tmp),
            // and a scratch database for a bench without --db.
            let mut cmd = cheap(&cmd)
                .replace("/tmp/", &format!("{}/", tmp.path().display()))
                .replace(
                    "experiments/buffer-vs-strategy/spec.toml",
                    spec.to_str().unwrap(),
                );
            if cmd.contains("lamina bench") && !cmd.contains("--db=") {
                cmd = cmd.replace(
                    "lamina bench",
                    &format!("lamina bench --db={}/bench-db", tmp.path().display()),
                );
            }
            let cmd = cmd.replace("target/release/lamina", bin());
            // A fresh clone's working directory: the scratch one.
            run_lamina(&cmd, tmp.path());
            ran += 1;
        }
    }
    assert!(ran >= 4, "only {ran} lamina commands found");
    // The experiment wrote to an untracked directory of the working
    // directory, named after the spec's, and not beside the spec.
    let results = tmp
        .path()
        .join("lamina-experiments/buffer-vs-strategy/results.csv");
    let rows = std::fs::read_to_string(&results).unwrap();
    assert_eq!(rows.lines().count(), 1 + 18, "{rows}");
    assert!(!spec.with_file_name("results.csv").exists());
    assert_eq!(
        tracked_state(&experiments),
        before,
        "the committed results changed"
    );
    let ignored = std::fs::read_to_string(repo.join(".gitignore")).unwrap();
    assert!(
        ignored.lines().any(|l| l == "/lamina-experiments"),
        "{ignored}"
    );
}
