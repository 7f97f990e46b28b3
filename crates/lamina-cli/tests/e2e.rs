//! End-to-end tests of the `lamina` binary: generated workloads through
//! `client` → `serve` and through `exec`, checked against a BTreeMap oracle.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use common::*;
use lamina_workload::{RangeDist, WorkloadSpec};

/// A small buffer so workloads flush and compact.
const SMALL_BUFFER: &[&str] = &["--buffer-bytes", "64K"];

const KEY_MIN: i32 = -100_000;
const KEY_MAX: i32 = 100_000;

fn mixed(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        puts: 20_000,
        gets: 8_000,
        gets_skewness: 0.3,
        gets_misses_ratio: 0.3,
        ranges: 300,
        max_range_size: 3_000,
        deletes: 2_000,
        update_ratio: 0.2,
        key_min: KEY_MIN,
        key_max: KEY_MAX,
        seed,
        ..Default::default()
    }
}

fn with_loads(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        puts: 12_000,
        gets: 3_000,
        gets_misses_ratio: 0.5,
        ranges: 100,
        max_range_size: 5_000,
        range_dist: RangeDist::Gaussian,
        deletes: 1_000,
        update_ratio: 0.3,
        external_puts: true,
        puts_per_file: 2_500,
        key_min: KEY_MIN,
        key_max: KEY_MAX,
        seed,
        ..Default::default()
    }
}

/// Every key of the key space that was ever touched, plus some never put.
fn sample_keys(oracle: &BTreeMap<i32, i32>) -> Vec<i32> {
    let mut keys: Vec<i32> = oracle.keys().copied().collect();
    keys.extend((KEY_MIN..KEY_MAX).step_by(997));
    keys
}

#[test]
fn workloads_through_client_and_server_survive_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut oracle = BTreeMap::new();

    // The load files are written under tmp: that is the load directory.
    let tmp_dir = tmp.path().to_str().unwrap();
    let load_dir = [SMALL_BUFFER, &["--load-dir", tmp_dir]].concat();
    let srv = ServerProc::start(&dir, &load_dir);
    let w = workload(&mixed(1), tmp.path(), &mut oracle);
    check(&client(srv.port, w.dsl), &w.expect);
    let w = workload(&with_loads(2), tmp.path(), &mut oracle);
    assert!(String::from_utf8_lossy(&w.dsl).contains("\nl \""));
    check(&client(srv.port, w.dsl), &w.expect);
    srv.stop();

    // Same directory, new process: everything is still there.
    let srv = ServerProc::start(&dir, SMALL_BUFFER);
    let r = readback(&oracle, sample_keys(&oracle), KEY_MIN, KEY_MAX + 1);
    check(&client(srv.port, r.dsl), &r.expect);
    // And it keeps taking writes.
    let w = workload(&mixed(3), tmp.path(), &mut oracle);
    check(&client(srv.port, w.dsl), &w.expect);
    srv.stop();

    // `exec` on the same directory sees the same data.
    let r = readback(&oracle, sample_keys(&oracle), KEY_MIN, KEY_MAX + 1);
    check(&exec(&dir, SMALL_BUFFER, r.dsl), &r.expect);
}

#[test]
fn workloads_through_exec_survive_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut oracle = BTreeMap::new();
    let w = workload(&mixed(11), tmp.path(), &mut oracle);
    check(&exec(&dir, SMALL_BUFFER, w.dsl), &w.expect);
    let w = workload(&with_loads(12), tmp.path(), &mut oracle);
    check(&exec(&dir, SMALL_BUFFER, w.dsl), &w.expect);
    let r = readback(&oracle, sample_keys(&oracle), KEY_MIN, KEY_MAX + 1);
    check(&exec(&dir, &[], r.dsl), &r.expect);
}

/// Seed 002's systems answer the CS265 workloads as the oracle says (as
/// leveling does), across restarts: bLSM, LSbM (its compaction buffer
/// trimmed every 10 ms) and SM-tree.
#[test]
fn workloads_through_exec_under_seed_002_strategies() {
    for spec in [
        "blsm:T=3,l0=2,file=8192",
        "lsbm:T=3,l0=2,file=8192,trim=10",
        "smtree:T=3",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        let args = [SMALL_BUFFER, &["--compaction", spec]].concat();
        let mut oracle = BTreeMap::new();
        let w = workload(&mixed(21), tmp.path(), &mut oracle);
        check(&exec(&dir, &args, w.dsl), &w.expect);
        let w = workload(&with_loads(22), tmp.path(), &mut oracle);
        check(&exec(&dir, &args, w.dsl), &w.expect);
        let r = readback(&oracle, sample_keys(&oracle), KEY_MIN, KEY_MAX + 1);
        check(&exec(&dir, &args, r.dsl), &r.expect);
    }
}

#[test]
fn concurrent_clients_with_disjoint_key_sets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let srv = ServerProc::start(&dir, SMALL_BUFFER);
    let port = srv.port;
    let mut handles = Vec::new();
    for c in 0..4i32 {
        let files = tmp.path().to_path_buf();
        handles.push(thread::spawn(move || {
            let spec = WorkloadSpec {
                puts: 8_000,
                gets: 4_000,
                gets_misses_ratio: 0.25,
                gets_skewness: 0.5,
                ranges: 100,
                max_range_size: 2_000,
                deletes: 800,
                update_ratio: 0.2,
                key_min: c * 1_000_000,
                key_max: c * 1_000_000 + 50_000,
                seed: 100 + c as u64,
                ..Default::default()
            };
            let mut oracle = BTreeMap::new();
            let w = workload(&spec, &files, &mut oracle);
            check(&client(port, w.dsl), &w.expect);
            oracle
        }));
    }
    let oracles: Vec<BTreeMap<i32, i32>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Nothing leaked between the key sets.
    for (c, oracle) in oracles.iter().enumerate() {
        let lo = c as i32 * 1_000_000;
        let r = readback(oracle, [], lo, lo + 1_000_000);
        check(&client(port, r.dsl), &r.expect);
    }
    srv.stop();
}

fn error_lines(out: &str) -> usize {
    out.lines().filter(|l| l.starts_with("ERROR")).count()
}

#[test]
fn bad_input_gets_one_error_each_and_the_server_keeps_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let srv = ServerProc::start(&dir, &[]);
    let bad_len = tmp.path().join("bad.dat");
    std::fs::write(&bad_len, [5u8, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0]).unwrap();
    let mut cases: Vec<Vec<u8>> = vec![
        b"hello".to_vec(),
        b"p 1".to_vec(),
        b"p 1 2 3".to_vec(),
        b"g".to_vec(),
        b"r 1".to_vec(),
        b"d x".to_vec(),
        b"p 99999999999 1".to_vec(),
        b"g -2147483649".to_vec(),
        b"s nope".to_vec(),
        b"\xff\xfe\x80 \xc0".to_vec(),
        b"l \"/definitely/not/here.dat\"".to_vec(),
        format!("l \"{}\"", bad_len.display()).into_bytes(),
        b"info please".to_vec(),
    ];
    cases.push(vec![b'7'; 1024 * 1024 + 10]);
    let mut input = b"p 5 55\n".to_vec();
    for c in &cases {
        input.extend_from_slice(c);
        input.extend_from_slice(b"\ng 5\n");
    }
    // A concurrent, well-behaved client is unaffected.
    let port = srv.port;
    let good = thread::spawn(move || {
        let mut dsl = String::new();
        for i in 0..5_000 {
            dsl.push_str(&format!("p {} {}\ng {}\n", 1000 + i, i, 1000 + i));
        }
        let out = client(port, dsl.into_bytes());
        let want: String = (0..5_000).map(|i| format!("{i}\n")).collect();
        assert_eq!(out, want);
    });
    let out = client(srv.port, input);
    good.join().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2 * cases.len(), "{out:.3000}");
    assert_eq!(error_lines(&out), cases.len());
    for pair in lines.chunks(2) {
        assert!(pair[0].starts_with("ERROR "), "{pair:?}");
        assert_eq!(pair[1], "55");
    }
    // Nothing of the bad-length file was loaded (its first key is 5 → 6).
    assert_eq!(client(srv.port, b"g 5\n".to_vec()), "55\n");

    // A connection dropped mid-line applies nothing partial.
    {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(b"p 20 200\np 21 21").unwrap();
    }
    thread::sleep(Duration::from_millis(200));
    assert_eq!(client(srv.port, b"g 20\ng 21\n".to_vec()), "200\n\n");
    srv.stop();
}

#[test]
fn console_quit_and_sigint_shut_down_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut srv = ServerProc::start(&dir, &[]);
    assert_eq!(client(srv.port, b"p 1 11\np 2 22\ng 1\n".to_vec()), "11\n");
    // The console runs DSL too, then `quit` stops the server.
    let mut stdin = srv.stdin.take().unwrap();
    stdin.write_all(b"g 2\nquit\n").unwrap();
    drop(stdin);
    let st = srv.wait();
    assert!(st.success(), "{st:?}");
    let mut console = String::new();
    srv.stdout.read_to_string(&mut console).unwrap();
    assert!(console.starts_with("22\n"), "{console:?}");

    let srv = ServerProc::start(&dir, &[]);
    assert_eq!(client(srv.port, b"g 1\ng 2\np 3 33\n".to_vec()), "11\n22\n");
    srv.signal("INT");
    let mut srv = srv;
    assert!(srv.wait().success());
    assert_eq!(exec(&dir, &[], b"r 0 10\n".to_vec()), "1:11 2:22 3:33\n");
}

#[test]
fn acknowledged_writes_survive_sigkill_with_sync_always() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut oracle = BTreeMap::new();
    let mut srv = ServerProc::start(&dir, &["--sync", "always", "--buffer-bytes", "256K"]);
    let spec = WorkloadSpec {
        puts: 5_000,
        gets: 500,
        deletes: 500,
        key_min: KEY_MIN,
        key_max: KEY_MAX,
        seed: 21,
        ..Default::default()
    };
    let w = workload(&spec, tmp.path(), &mut oracle);
    check(&client(srv.port, w.dsl), &w.expect);
    srv.signal("KILL");
    srv.wait();
    let srv = ServerProc::start(&dir, &[]);
    let r = readback(&oracle, sample_keys(&oracle), KEY_MIN, KEY_MAX + 1);
    check(&client(srv.port, r.dsl), &r.expect);
    srv.stop();
}

#[test]
fn client_exits_nonzero_when_the_connection_drops() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"1\n");
        // Closed without the end-of-session marker.
    });
    let out = run_with_input(
        &["client", "--quiet", "--port", &port.to_string()],
        b"g 1\ng 2\n".to_vec(),
    );
    fake.join().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("connection"), "{err}");

    // Nobody listening at all.
    drop(TcpListener::bind("127.0.0.1:0").unwrap());
    let out = run_with_input(&["client", "--port", &port.to_string()], Vec::new());
    assert!(!out.status.success());
}

#[test]
fn gen_is_deterministic_and_shaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let args = |seed: &str| {
        vec![
            "gen",
            "--puts",
            "3000",
            "--gets",
            "1000",
            "--gets-misses-ratio",
            "0.5",
            "--gets-skewness",
            "0.2",
            "--ranges",
            "50",
            "--max-range-size",
            "100",
            "--gaussian-ranges",
            "--deletes",
            "200",
            "--seed",
            seed,
            "--output-dir",
            dir,
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = run_with_input(&a, Vec::new());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let a = run(args("7"));
    assert_eq!(a, run(args("7")));
    assert_ne!(a, run(args("8")));
    let count = |p: &str| a.lines().filter(|l| l.starts_with(p)).count();
    assert_eq!(
        (count("p "), count("g "), count("r "), count("d ")),
        (3000, 1000, 50, 200)
    );

    let mut ext = args("7");
    ext.extend(["--external-puts", "--puts-per-file", "1000"].map(String::from));
    let e = run(ext);
    let loads: Vec<&str> = e.lines().filter(|l| l.starts_with("l \"")).collect();
    assert_eq!(loads.len(), 3);
    for l in loads {
        let path = l.trim_start_matches("l \"").trim_end_matches('"');
        assert_eq!(std::fs::metadata(path).unwrap().len(), 8000);
    }
    let bad = run_with_input(&["gen", "--gets-misses-ratio", "2"], Vec::new());
    assert!(!bad.status.success());
    let bad = run_with_input(
        &["gen", "--uniform-ranges", "--gaussian-ranges"],
        Vec::new(),
    );
    assert!(!bad.status.success());
}
