//! `lamina serve` against hostile or careless clients: loads confined to the
//! load directory, the connection cap, the idle time-out, and a shutdown
//! that completes within seconds whatever the clients do
//! (docs/reliability.md, "Hostile clients").

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Little-endian (key, value) records.
fn records(pairs: &[(i32, i32)]) -> Vec<u8> {
    pairs
        .iter()
        .flat_map(|(k, v)| k.to_le_bytes().into_iter().chain(v.to_le_bytes()))
        .collect()
}

#[test]
fn loads_stay_inside_the_load_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let loads = tmp.path().join("loads");
    std::fs::create_dir(&loads).unwrap();
    std::fs::write(loads.join("good.dat"), records(&[(1, 10), (2, 20)])).unwrap();
    std::fs::write(tmp.path().join("secret.dat"), records(&[(666, 666)])).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret.dat"), loads.join("link.dat")).unwrap();
    let fifo = loads.join("fifo.dat");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::write(loads.join("big.dat"), vec![0u8; 8 * 1024]).unwrap();

    let srv = ServerProc::start(
        &tmp.path().join("db"),
        &[
            "--load-dir",
            loads.to_str().unwrap(),
            "--load-max-bytes",
            "4K",
        ],
    );
    let mut s = connect(srv.port);
    let root = tmp.path().to_str().unwrap();
    let cases = [
        ("l \"/proc/self/environ\"", "outside the load directory"),
        ("l \"../secret.dat\"", "outside the load directory"),
        (
            &*format!("l \"{root}/secret.dat\""),
            "outside the load directory",
        ),
        ("l \"link.dat\"", "outside the load directory"),
        ("l \"fifo.dat\"", "not a regular file"),
        ("l \"nothing.dat\"", "cannot open"),
        ("l \"big.dat\"", "more than this server loads"),
        ("l \".\"", "not a regular file"),
    ];
    for (line, why) in cases {
        let started = Instant::now();
        let reply = ask(&mut s, &format!("{line}\n"));
        assert_eq!(reply.len(), 1, "{line}: {reply:?}");
        assert!(
            reply[0].starts_with("ERROR") && reply[0].contains(why),
            "{line}: {reply:?}"
        );
        // No absolute server path beyond what the client sent.
        if !line.contains(root) {
            assert!(!reply[0].contains(root), "{line}: {reply:?}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{line} took long"
        );
    }
    assert_eq!(ask(&mut s, "g 666\n"), [""]);
    assert_eq!(ask(&mut s, "l \"good.dat\"\ng 1\ng 2\n"), ["10", "20"]);
    drop(s);
    srv.stop();

    // `--load-dir none`: no loads at all.
    let srv = ServerProc::start(&tmp.path().join("db2"), &["--load-dir", "none"]);
    let mut s = connect(srv.port);
    let reply = ask(&mut s, "l \"good.dat\"\n");
    assert!(reply[0].contains("loads are disabled"), "{reply:?}");
    drop(s);
    srv.stop();
}

#[test]
fn connections_over_the_cap_are_refused_and_service_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = ServerProc::start(&tmp.path().join("db"), &["--max-connections", "2"]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    assert_eq!(ask(&mut a, "p 1 1\ng 1\n"), ["1"]);
    assert_eq!(ask(&mut b, "g 1\n"), ["1"]);
    let mut c = connect(srv.port);
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("ERROR too many connections"), "{text:?}");
    assert_eq!(text.lines().count(), 1);
    drop(a);
    // Once a connection closes, a new one is served.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut d = connect(srv.port);
        d.write_all(b"g 1\n@sync\n").unwrap();
        let mut line = String::new();
        BufReader::new(d).read_line(&mut line).unwrap();
        if line == "1\n" {
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {line:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(b);
    srv.stop();
}

#[test]
fn idle_connections_are_closed_after_the_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = ServerProc::start(&tmp.path().join("db"), &["--idle-timeout", "1"]);
    let mut s = connect(srv.port);
    // A pending write before going idle is applied, not lost.
    s.write_all(b"p 5 50\n").unwrap();
    let started = Instant::now();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.contains("ERROR idle timeout"), "{text:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(started.elapsed() < Duration::from_secs(10));
    let mut s = connect(srv.port);
    assert_eq!(ask(&mut s, "g 5\n"), ["50"]);
    drop(s);
    srv.stop();
}

/// SIGTERM completes within seconds with a slow reader of a long reply, a
/// load of a large file in progress, idle and half-open connections; the
/// writes acknowledged before are there after a restart.
#[test]
fn shutdown_is_prompt_whatever_the_clients_do() {
    let tmp = tempfile::tempdir().unwrap();
    let loads = tmp.path().join("loads");
    std::fs::create_dir(&loads).unwrap();
    let big: Vec<(i32, i32)> = (0..8_000_000).map(|k| (k, k)).collect();
    std::fs::write(loads.join("big.dat"), records(&big)).unwrap();
    let dir = tmp.path().join("db");
    let srv = ServerProc::start(&dir, &["--load-dir", loads.to_str().unwrap()]);

    // Acknowledged writes.
    let mut w = connect(srv.port);
    assert_eq!(ask(&mut w, "p -1 -10\np -2 -20\ng -1\n"), ["-10"]);
    let mut filler = String::new();
    for k in 0..50_000 {
        filler.push_str(&format!("p {} 1\n", 10_000_000 + k));
    }
    assert_eq!(ask(&mut w, &format!("{filler}g -2\n")), ["-20"]);
    // A slow reader: asks for a long reply and never reads it.
    let mut slow = connect(srv.port);
    slow.write_all(b"r 10000000 10050000\nr 10000000 10050000\nr 10000000 10050000\n")
        .unwrap();
    // A load in progress.
    let mut loader = connect(srv.port);
    loader.write_all(b"l \"big.dat\"\n").unwrap();
    // Idle, and half-open (a partial line).
    let _idle = connect(srv.port);
    let mut half = connect(srv.port);
    half.write_all(b"p 12").unwrap();
    std::thread::sleep(Duration::from_millis(500));

    let mut srv = srv;
    let started = Instant::now();
    srv.signal("TERM");
    let status = srv.wait();
    let took = started.elapsed();
    let log = std::fs::read_to_string(&srv.log).unwrap_or_default();
    assert!(status.success(), "{status:?}: {log}");
    assert!(
        took < Duration::from_secs(8),
        "shutdown took {took:?}: {log}"
    );
    eprintln!("SIGTERM to exit: {took:?}");
    drop((w, slow, loader, half));
    // The acknowledged writes are there; the load was cut short (its last
    // record never arrived), not waited for.
    let out = exec(&dir, &[], b"g -1\ng -2\ng 7999999\n".to_vec());
    assert_eq!(out, "-10\n-20\n\n");
    assert_verifies(Path::new(&dir));
}
