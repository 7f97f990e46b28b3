//! Helpers for the end-to-end tests: spawn `lamina serve` / `client` /
//! `exec`, generate workloads and check replies against a BTreeMap oracle.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "a test may panic on a failed setup; each test binary compiles this shared module and uses a different part of it"
)]

pub mod clients;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use lamina_workload::{write_dsl, Generator, Op, WorkloadSpec};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_lamina")
}

/// Asserts that `lamina verify DIR` finds every block and record intact.
pub fn assert_verifies(dir: &Path) {
    let out = Command::new(bin()).arg("verify").arg(dir).output().unwrap();
    assert!(out.status.success(), "lamina verify: {out:?}");
}

/// A DSL connection to a server on loopback `port`, reads timing out
/// after 20 s.
pub fn connect(port: u16) -> std::net::TcpStream {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends DSL `lines` and `@sync`; the replies before the `@sync`.
pub fn ask(s: &mut std::net::TcpStream, lines: &str) -> Vec<String> {
    s.write_all(format!("{lines}@sync\n").as_bytes()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "connection closed");
        let line = line.trim_end_matches('\n').to_string();
        if line == "@sync" {
            return out;
        }
        out.push(line);
    }
}

/// A running `lamina serve` on a free loopback port.
pub struct ServerProc {
    pub child: Child,
    pub port: u16,
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    pub log: PathBuf,
}

impl ServerProc {
    /// Starts a server on `dir` (stderr goes to `dir`'s sibling log file).
    pub fn start(dir: &Path, extra: &[&str]) -> ServerProc {
        let log = dir.with_extension("log");
        let mut child = Command::new(bin())
            .arg("serve")
            .args(["--port", "0", "--host", "127.0.0.1", "--dir"])
            .arg(dir)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut port = None;
        let mut line = String::new();
        for _ in 0..10 {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            if let Some(addr) = line.trim().strip_prefix("lamina: listening on ") {
                port = addr.rsplit(':').next().and_then(|p| p.parse().ok());
                break;
            }
        }
        let Some(port) = port else {
            let _ = child.kill();
            panic!(
                "server did not start: {line:?}; log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        ServerProc {
            child,
            port,
            stdin,
            stdout,
            log,
        }
    }

    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// Waits (bounded) for the server to exit.
    pub fn wait(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            if start.elapsed() > Duration::from_secs(120) {
                let _ = self.child.kill();
                panic!("server did not exit");
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then asserts a clean exit.
    pub fn stop(mut self) {
        self.signal("TERM");
        let st = self.wait();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(st.success(), "server exit {st:?}; log: {log}");
        assert!(log.contains("shut down cleanly"), "{log}");
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs a binary with `input` on stdin.
pub fn run_with_input(args: &[&str], input: Vec<u8>) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// `lamina client --quiet` against `port`; asserts success, returns stdout.
pub fn client(port: u16, input: Vec<u8>) -> String {
    let port = port.to_string();
    let out = run_with_input(&["client", "--quiet", "--port", &port], input);
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `lamina exec` on `dir`; asserts success, returns stdout.
pub fn exec(dir: &Path, extra: &[&str], input: Vec<u8>) -> String {
    let mut args = vec!["exec", "--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run_with_input(&args, input);
    assert!(
        out.status.success(),
        "exec failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The reply expected for one line.
#[derive(Debug)]
pub enum Expect {
    Line(String),
    Range(Vec<(i32, i32)>),
}

/// A generated workload: its DSL text and the replies it must produce.
pub struct Workload {
    pub dsl: Vec<u8>,
    pub expect: Vec<Expect>,
}

/// Generates `spec` (load files go to `files_dir`) and advances `oracle`.
pub fn workload(
    spec: &WorkloadSpec,
    files_dir: &Path,
    oracle: &mut BTreeMap<i32, i32>,
) -> Workload {
    let mut dsl = Vec::new();
    let prefix = format!("w{}-", spec.seed);
    write_dsl(spec, &mut dsl, files_dir, &prefix).unwrap();
    let mut expect = Vec::new();
    for op in Generator::new(spec.clone()).unwrap() {
        match op {
            Op::Put { key, value } => {
                oracle.insert(key, value);
            }
            Op::Load(pairs) => oracle.extend(pairs),
            Op::Delete(k) => {
                oracle.remove(&k);
            }
            Op::Get(k) => expect.push(Expect::Line(
                oracle.get(&k).map(|v| v.to_string()).unwrap_or_default(),
            )),
            Op::Range { lo, hi } => expect.push(Expect::Range(
                oracle.range(lo..hi).map(|(k, v)| (*k, *v)).collect(),
            )),
        }
    }
    Workload { dsl, expect }
}

fn parse_pairs(line: &str) -> Vec<(i32, i32)> {
    line.split_whitespace()
        .map(|kv| {
            let (k, v) = kv
                .split_once(':')
                .unwrap_or_else(|| panic!("bad pair {kv:?}"));
            (k.parse().unwrap(), v.parse().unwrap())
        })
        .collect()
}

/// Checks `output` line by line; ranges are compared as sets of pairs (and
/// must come in key order).
pub fn check(output: &str, expect: &[Expect]) {
    let lines: Vec<&str> = output.split_terminator('\n').collect();
    assert_eq!(lines.len(), expect.len(), "number of reply lines");
    for (i, (got, want)) in lines.iter().zip(expect).enumerate() {
        match want {
            Expect::Line(w) => assert_eq!(got, w, "reply {i}"),
            Expect::Range(w) => {
                let pairs = parse_pairs(got);
                assert!(
                    pairs.windows(2).all(|p| p[0].0 < p[1].0),
                    "reply {i}: range not in key order"
                );
                let got: BTreeSet<_> = pairs.into_iter().collect();
                let want: BTreeSet<_> = w.iter().copied().collect();
                assert_eq!(got, want, "reply {i}: range");
            }
        }
    }
}

/// DSL that reads back every key of `keys` and the whole `[lo, hi)` range,
/// with the expected replies from `oracle`.
pub fn readback(
    oracle: &BTreeMap<i32, i32>,
    keys: impl IntoIterator<Item = i32>,
    lo: i32,
    hi: i32,
) -> Workload {
    let mut dsl = String::new();
    let mut expect = Vec::new();
    for k in keys {
        dsl.push_str(&format!("g {k}\n"));
        expect.push(Expect::Line(
            oracle.get(&k).map(|v| v.to_string()).unwrap_or_default(),
        ));
    }
    dsl.push_str(&format!("r {lo} {hi}\n"));
    expect.push(Expect::Range(
        oracle.range(lo..hi).map(|(k, v)| (*k, *v)).collect(),
    ));
    Workload {
        dsl: dsl.into_bytes(),
        expect,
    }
}
