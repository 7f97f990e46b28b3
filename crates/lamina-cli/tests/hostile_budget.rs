//! `lamina serve` under a low descriptor limit and against unfinished
//! requests: the engine keeps the descriptors it needs whatever the
//! clients hold, and an unfinished request costs its size once, within a
//! budget shared by every connection (docs/reliability.md, "Hostile
//! clients").
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{ask, bin, connect};

/// A `lamina serve --resp 0` started through `sh` with `ulimit -n`
/// (soft and hard) set to `nofile` if given.
struct Served {
    child: Child,
    /// The DSL and Redis ports.
    dsl: u16,
    redis: u16,
    log: std::path::PathBuf,
    /// Kept open: the server's console reads stdin.
    _stdout: BufReader<ChildStdout>,
}

impl Served {
    fn start(dir: &Path, nofile: Option<u32>, extra: &[&str]) -> Served {
        let log = dir.with_extension("log");
        let limit = nofile.map_or(String::new(), |n| format!("ulimit -n {n} && "));
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("{limit}exec \"$0\" \"$@\""))
            .arg(bin())
            .args(["serve", "--port", "0", "--resp", "0", "--dir"])
            .arg(dir)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (mut dsl, mut redis) = (None, None);
        let port = |l: &str| l.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        for _ in 0..10 {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            if line.starts_with("lamina: listening on ") {
                dsl = port(&line);
            } else if line.starts_with("lamina: redis protocol on ") {
                redis = port(&line);
            }
            if dsl.is_some() && redis.is_some() {
                break;
            }
        }
        let (Some(dsl), Some(redis)) = (dsl, redis) else {
            let _ = child.kill();
            panic!(
                "server did not start; log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        Served {
            child,
            dsl,
            redis,
            log,
            _stdout: stdout,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// SIGTERM, then the exit status must be success.
    fn stop(mut self) {
        let st = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "exit {status}; log: {}", self.log());
                return;
            }
            assert!(Instant::now() < deadline, "no exit; log: {}", self.log());
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis client's first reply line to a PING (empty if the connection
/// is closed without one); a panic if none comes within 10 s, as when the
/// server has no descriptor left to accept the connection with.
fn ping(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut line = String::new();
    if s.write_all(b"PING\r\n").is_ok() {
        if let Err(e) = BufReader::new(s).read_line(&mut line) {
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset,
                "no answer: {e}"
            );
        }
    }
    line
}

/// The last connection cap the server's log announced.
fn last_cap(log: &str) -> usize {
    log.rsplit("serving at most ")
        .next()
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

#[test]
fn a_low_descriptor_limit_leaves_the_engine_its_files() {
    let tmp = tempfile::tempdir().unwrap();
    // 256 descriptors, soft and hard: the server cannot raise them.
    let srv = Served::start(
        &tmp.path().join("db"),
        Some(256),
        &["--buffer-bytes", "64K"],
    );
    // More idle Redis clients than the limit allows (with two descriptors
    // a connection, 120 of them exhausted it).
    let mut crowd = Vec::new();
    let (mut served, mut refused) = (0, 0);
    for _ in 0..300 {
        let mut s = connect(srv.redis);
        match ping(&mut s).as_str() {
            "+PONG\r\n" => served += 1,
            // Refused in Redis's words (or reset, the refusal unread).
            "-ERR max number of clients reached\r\n" | "" => refused += 1,
            other => panic!("neither served nor refused: {other:?}"),
        }
        crowd.push(s);
    }
    // The cap: (256 - 64 kept for the database) / 2 ports.
    assert_eq!((served, refused), (96, 204));
    let log = srv.log();
    assert!(
        log.contains("the limit (ulimit -n) is 256")
            && log.contains("serving at most 96 connections per port"),
        "{log}"
    );
    // While the crowd holds its connections, the engine writes logs and
    // tables: flushes of a 64 KiB buffer, a compaction.
    let mut s = connect(srv.dsl);
    let puts: String = (0..20_000).map(|i| format!("p {i} {}\n", i * 3)).collect();
    assert_eq!(ask(&mut s, &puts), Vec::<String>::new());
    assert_eq!(ask(&mut s, "flush\ncompact\n"), ["OK", "OK"]);
    assert_eq!(
        ask(&mut s, "g 0\ng 12345\ng 19999\n"),
        ["0", "37035", "59997"]
    );
    drop(s);
    // The reserve follows the tables the database now has: within seconds
    // the cap is lowered to leave two descriptors for each.
    let deadline = Instant::now() + Duration::from_secs(20);
    while last_cap(&srv.log()) >= 96 {
        assert!(
            Instant::now() < deadline,
            "cap never lowered: {}",
            srv.log()
        );
        thread::sleep(Duration::from_millis(100));
    }
    // With the crowd gone, a new client is served.
    drop(crowd);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut s = connect(srv.redis);
        if ping(&mut s) == "+PONG\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "never served again");
        thread::sleep(Duration::from_millis(50));
    }
    let log = srv.log();
    assert!(!log.contains("Too many open files"), "{log}");
    srv.stop();
}

#[test]
fn an_unfinished_request_costs_its_size_once_within_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = Served::start(
        &tmp.path().join("db"),
        None,
        &["--max-request-bytes-total", "64M"],
    );
    thread::sleep(Duration::from_millis(300));
    let base = srv.rss_kib();
    // A SET whose 56 MiB value never finishes.
    let size = 56 << 20;
    let mut big = connect(srv.redis);
    big.write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", size + 1).as_bytes())
        .unwrap();
    big.write_all(&vec![b'x'; size]).unwrap();
    // Until the server has read it all: its memory stops growing.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = 0;
    loop {
        thread::sleep(Duration::from_millis(300));
        let now = srv.rss_kib();
        if now.saturating_sub(base) > 50 << 10 && now == last {
            break;
        }
        assert!(Instant::now() < deadline, "RSS {base} -> {now} KiB");
        last = now;
    }
    let held = srv.rss_kib().saturating_sub(base);
    eprintln!(
        "an unfinished 56 MiB request: server RSS +{} MiB",
        held >> 10
    );
    // About its size, once (it was 121 MiB: a buffer doubling as it
    // grew, the old buffers kept by the allocator).
    assert!(
        held < 72 << 10,
        "RSS +{held} KiB for an unfinished 56 MiB request"
    );
    // A second unfinished request of 16 MiB goes past the 64 MiB budget.
    let mut second = connect(srv.redis);
    second
        .write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nj\r\n${}\r\n", 16 << 20).as_bytes())
        .unwrap();
    // The server may close before every byte is written.
    let _ = second.write_all(&vec![b'y'; 16 << 20]);
    let mut reply = String::new();
    BufReader::new(&second).read_line(&mut reply).unwrap();
    assert!(
        reply.starts_with("-ERR unfinished request of ") && reply.contains("67108864"),
        "{reply:?}"
    );
    let mut rest = Vec::new();
    let _ = second.read_to_end(&mut rest);
    // The first request, finished, is served.
    big.write_all(b"y\r\n").unwrap();
    let mut ok = String::new();
    BufReader::new(&big).read_line(&mut ok).unwrap();
    assert_eq!(ok, "+OK\r\n");
    srv.stop();
}

#[test]
fn a_limit_too_low_for_the_database_and_one_connection_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    // 64 kept for the database and one connection on each of two ports
    // need 66.
    let log = tmp.path().join("log");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 65 && exec \"$0\" \"$@\"")
        .arg(bin())
        .args(["serve", "--port", "0", "--resp", "0", "--dir"])
        .arg(tmp.path().join("db"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("the limit (ulimit -n) is 65")
            && err.contains("not even one connection per port fits"),
        "{err}"
    );
}
