//! Executor, server and client tests against a real `lamina::Db`.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use lamina::{Db, Options};
use lamina_server::{run_client, run_local, ClientError, ClientOptions, Control, Server};

fn small_opts() -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 16 * 1024;
    o
}

fn open(dir: &Path) -> Db {
    Db::open(dir, small_opts()).unwrap()
}

/// Runs `input` through `lamina exec`'s code path.
fn exec(db: &Db, input: &[u8]) -> (String, Control) {
    let mut out = Vec::new();
    let ctl = run_local(db, input, &mut out).unwrap();
    (String::from_utf8(out).unwrap(), ctl)
}

#[test]
fn basic_commands() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (out, ctl) = exec(
        &db,
        b"p 1 10\np -2 -20\np 3 30\ng 1\ng 2\ng -2\nr -5 5\nr 5 -5\nr 1 1\nd 1\ng 1\nr -5 5\np 3 33\ng 3",
    );
    assert_eq!(ctl, Control::Continue);
    assert_eq!(out, "10\n\n-20\n-2:-20 1:10 3:30\n\n\n\n-2:-20 3:30\n33\n");
}

/// Gets interleaved with puts and deletes of few keys, so that they read
/// keys written earlier in the same pending batch as well as keys in the
/// memtable and on disk, against a `BTreeMap` oracle; `misses` counts
/// every one of them, those answered after applying the batch included.
#[test]
fn gets_see_the_sessions_own_pending_writes() {
    use rand::{Rng, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut oracle = std::collections::BTreeMap::new();
    let (mut input, mut expected) = (String::new(), String::new());
    let (mut hits, mut misses) = (0, 0);
    for i in 0..20_000 {
        let k: i32 = rng.gen_range(-50..50);
        match rng.gen_range(0..10) {
            0..=3 => {
                let v: i32 = rng.gen();
                input += &format!("p {k} {v}\n");
                oracle.insert(k, v);
            }
            4 => {
                input += &format!("d {k}\n");
                oracle.remove(&k);
            }
            _ => {
                input += &format!("g {k}\n");
                if let Some(v) = oracle.get(&k) {
                    expected += &v.to_string();
                    hits += 1;
                } else {
                    misses += 1;
                }
                expected.push('\n');
            }
        }
        if i % 5000 == 4999 {
            input += "flush\n";
            expected += "OK\n";
        }
    }
    input += "misses\n";
    expected += &format!("gets={} hits={hits} misses={misses}\n", hits + misses);
    assert_eq!(exec(&db, input.as_bytes()).0, expected);
}

#[test]
fn extremes_and_overwrites_across_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let input = format!(
        "p {min} 1\np {max} 2\nflush\np {min} 3\ng {min}\ng {max}\nr {min} {max}\ncompact\nd {max}\ng {max}\n",
        min = i32::MIN,
        max = i32::MAX
    );
    let (out, _) = exec(&db, input.as_bytes());
    assert_eq!(
        out,
        format!("OK\n3\n2\n{}:3\nOK\n\n", i32::MIN),
        "range excludes its upper bound"
    );
}

#[test]
fn every_bad_input_gives_exactly_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut bad: Vec<Vec<u8>> = [
        "x",
        "P 1 2",
        "p",
        "p 1",
        "p 1 2 3",
        "p a 1",
        "p 1 b",
        "p 2147483648 1",
        "p 1 -2147483649",
        "g",
        "g 1 2",
        "g 1.5",
        "g 0x1",
        "d",
        "d 1 2",
        "r 1",
        "r 1 2 3",
        "r a b",
        "s x",
        "s -1",
        "s 1 2",
        "l",
        "l \"unterminated",
        "l \"\"",
        "l \"/nonexistent/lamina/file.dat\"",
        "info 1",
        "bloom x",
        "flush 1",
        "quit now",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    bad.push(b"\xff\xfe\xfd garbage".to_vec());
    bad.push(b"p \xc3\xa9 1".to_vec());
    bad.push(b"\x00\x01\x02".to_vec());
    bad.push(vec![b'p'; 2 * 1024 * 1024]); // longer than 1 MiB
    let mut input = Vec::new();
    for b in &bad {
        input.extend_from_slice(b);
        input.extend_from_slice(b"\ng 7\n");
    }
    // The store keeps working between errors.
    let mut pre = b"p 7 70\n".to_vec();
    pre.extend_from_slice(&input);
    let (out, _) = exec(&db, &pre);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2 * bad.len(), "{out:.2000}");
    for (i, pair) in lines.chunks(2).enumerate() {
        assert!(pair[0].starts_with("ERROR "), "input {i}: {:?}", pair[0]);
        assert_eq!(pair[1], "70", "input {i}");
    }
}

#[test]
fn load_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let good = dir.path().join("good file.dat");
    let pairs: Vec<(i32, i32)> = (0..50_000).map(|i| (i * 3 - 70_000, -i)).collect();
    lamina_workload::write_load_file(&good, &pairs).unwrap();
    let bad = dir.path().join("bad.dat");
    std::fs::write(&bad, [1u8, 0, 0, 0, 2, 0, 0, 0, 9]).unwrap();
    let empty = dir.path().join("empty.dat");
    std::fs::write(&empty, []).unwrap();
    let input = format!(
        "l \"{bad}\"\ng 1\nl \"{good}\"\nl {empty}\nl \"{dir}\"\ng -70000\ng {last}\nr -70000 -69990\nl \"{missing}\"\n",
        bad = bad.display(),
        good = good.display(),
        empty = empty.display(),
        dir = dir.path().display(),
        last = 49_999 * 3 - 70_000,
        missing = dir.path().join("missing.dat").display(),
    );
    let (out, _) = exec(&db, input.as_bytes());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "{out}");
    assert!(
        lines[0].starts_with("ERROR ") && lines[0].contains("8-byte"),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "", "nothing of the bad file was loaded");
    assert!(
        lines[2].starts_with("ERROR "),
        "a directory is not loadable"
    );
    assert_eq!(lines[3], "0");
    assert_eq!(lines[4], "-49999");
    assert_eq!(lines[5], "-70000:0 -69997:-1 -69994:-2 -69991:-3");
    assert!(lines[6].starts_with("ERROR "));
    let (out, _) = exec(&db, b"s 0");
    assert!(out.starts_with("Logical Pairs: 50000\n"), "{out}");
}

#[test]
fn stats_format() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (out, _) = exec(&db, b"s");
    assert_eq!(out, "Logical Pairs: 0\n\n");
    let (out, _) = exec(
        &db,
        b"p 1 10\np 2 20\np 3 30\nflush\np 3 31\nd 2\np 4 40\ns\ns 1",
    );
    assert_eq!(
        out,
        "OK\n\
         Logical Pairs: 3\n\
         LVL1: 3, LVL2: 3\n\
         2:DEL:L1 3:31:L1 4:40:L1\n\
         \n\
         1:10:L2 2:20:L2 3:30:L2\n\
         \n\
         Logical Pairs: 3\n\
         LVL1: 3, LVL2: 3\n\
         2:DEL:L1\n\
         \n\
         1:10:L2\n\
         \n"
    );
    let (out, _) = exec(
        &db,
        b"info\nbloom\nmisses\nio\nstats-json\ng 1\ng 99\nmisses",
    );
    let lines: Vec<&str> = out.lines().collect();
    // One numbering outside `s`: the buffer by name, disk levels from L0
    // as `stats-json` (and inspect, metrics, bench) number them.
    assert!(lines[0].starts_with("buffer bytes="), "{out}");
    assert!(!out.contains("LVL"), "{out}");
    assert!(
        lines.iter().any(|l| l.starts_with("L0 runs=1 files=1 ")),
        "{out}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("L0 filter_bytes=")),
        "{out}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("L0 bytes_read=")),
        "{out}"
    );
    assert!(lines.iter().any(|l| l.starts_with("probes=")), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("ingested=")), "{out}");
    let json = lines.iter().find(|l| l.starts_with('{')).unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let levels = v["levels"].as_array().unwrap();
    assert!(!levels.is_empty());
    for l in levels {
        let (n, files) = (&l["level"], &l["files"]);
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with(&format!("L{n} runs={} files={files} ", l["runs"]))),
            "stats-json level {n} is not `L{n}` in info: {out}"
        );
    }
    assert_eq!(lines.last(), Some(&"gets=2 hits=1 misses=1"));
}

#[test]
fn quit_and_end_stop_local_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (out, ctl) = exec(&db, b"p 1 1\nquit\np 2 2\n");
    assert_eq!((out.as_str(), ctl), ("", Control::Quit));
    let (out, ctl) = exec(&db, b"g 1\n@sync\n@end\ng 1\n");
    assert_eq!((out.as_str(), ctl), ("1\n", Control::End));
    let (out, _) = exec(&db, b"g 2\n");
    assert_eq!(out, "\n");
}

mod common;
use common::{serve, Running};

fn start(dir: &Path) -> Running {
    let db = Arc::new(open(dir));
    let server = Server::bind(Arc::clone(&db), "127.0.0.1:0").unwrap();
    serve(db, server)
}

fn client(addr: std::net::SocketAddr, input: &[u8]) -> Result<String, ClientError> {
    let stream = TcpStream::connect(addr).unwrap();
    let mut out = Vec::new();
    let input = std::io::Cursor::new(input.to_vec());
    run_client(stream, input, &mut out, ClientOptions::default())?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn client_server_round_trip_and_markers() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path());
    let out = client(srv.addr, b"p 1 10\np 2 20\ng 1\nr 0 5\nbad\n@sync\ng 2").unwrap();
    assert_eq!(out, "10\n1:10 2:20\nERROR unknown command \"bad\"\n20\n");
    // `quit` ends the session cleanly; later lines are not executed.
    let out = client(srv.addr, b"g 1\nquit\np 1 99\n").unwrap();
    assert_eq!(out, "10\n");
    let out = client(srv.addr, b"g 1\n").unwrap();
    assert_eq!(out, "10\n");
    // Empty input is a clean, empty session.
    assert_eq!(client(srv.addr, b"").unwrap(), "");
    srv.stop().close().unwrap();
}

#[test]
fn quit_in_the_middle_of_a_big_stream_still_ends_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path());
    let mut input = b"p 1 10\ng 1\nquit\n".to_vec();
    for i in 0..300_000 {
        input.extend_from_slice(format!("p {} 2\n", i + 2).as_bytes());
    }
    assert_eq!(client(srv.addr, &input).unwrap(), "10\n");
    assert_eq!(client(srv.addr, b"g 1\ng 2\n").unwrap(), "10\n\n");
    srv.stop().close().unwrap();
}

#[test]
fn disconnect_mid_line_applies_nothing_partial() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path());
    {
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.write_all(b"p 1 1\np 2 2\nd 1\np 3 3").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "no replies, no @bye: {rest:?}");
    }
    {
        // Half a number: "p 4 4" must not become "p 4 4".
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.write_all(b"p 4 4").unwrap();
        drop(s);
    }
    thread::sleep(Duration::from_millis(100));
    let out = client(srv.addr, b"g 1\ng 2\ng 3\ng 4\n").unwrap();
    assert_eq!(out, "\n2\n\n\n");
    srv.stop().close().unwrap();
}

#[test]
fn overlong_line_over_the_network() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path());
    let mut input = b"p 5 50\n".to_vec();
    input.extend(std::iter::repeat_n(b'9', 3 * 1024 * 1024));
    input.extend_from_slice(b"\ng 5\n");
    let out = client(srv.addr, &input).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out:.200}");
    assert!(lines[0].starts_with("ERROR line longer than"));
    assert_eq!(lines[1], "50");
    srv.stop().close().unwrap();
}

#[test]
fn client_reports_a_dropped_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 16];
        let _ = s.read(&mut buf);
        s.write_all(b"1\n2\n").unwrap();
        // Close without @bye.
    });
    let err = client(addr, b"g 1\ng 2\ng 3\n").unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::ConnectionClosed | ClientError::Connection(_)
        ),
        "{err}"
    );
    fake.join().unwrap();
}

#[test]
fn concurrent_clients_with_disjoint_keys() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path());
    let workers: Vec<_> = (0..4)
        .map(|c| {
            let addr = srv.addr;
            thread::spawn(move || {
                let base = c * 1_000_000;
                let mut input = String::new();
                let mut expect = String::new();
                for i in 0..3000 {
                    input.push_str(&format!("p {} {}\n", base + i, i * 7 + c));
                    if i % 3 == 0 {
                        input.push_str(&format!("g {}\n", base + i));
                        expect.push_str(&format!("{}\n", i * 7 + c));
                    }
                    if i % 10 == 9 {
                        input.push_str(&format!("d {}\n", base + i - 1));
                    }
                }
                input.push_str(&format!("r {} {}\n", base, base + 20));
                let pairs: Vec<String> = (0..20)
                    .filter(|i| i % 10 != 8)
                    .map(|i| format!("{}:{}", base + i, i * 7 + c))
                    .collect();
                expect.push_str(&pairs.join(" "));
                expect.push('\n');
                let out = client(addr, input.as_bytes()).unwrap();
                assert_eq!(out, expect, "client {c}");
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let db = srv.stop();
    let (out, _) = exec(&db, b"s 0");
    assert!(
        out.starts_with(&format!("Logical Pairs: {}\n", 4 * 2700)),
        "{out}"
    );
    db.close().unwrap();
}

#[test]
fn shutdown_closes_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path());
    let mut idle = TcpStream::connect(srv.addr).unwrap();
    idle.write_all(b"p 1 1\n").unwrap();
    thread::sleep(Duration::from_millis(100));
    let db = srv.stop();
    let mut rest = Vec::new();
    let _ = idle.read_to_end(&mut rest);
    let (out, _) = exec(&db, b"g 1");
    assert_eq!(out, "1\n");
    db.close().unwrap();
}

/// A reply of any size goes out in chunks of about `STREAM_CHUNK` while it
/// is produced: the session never holds more than one chunk (plus one
/// entry), and the bytes that reach the sink are the reply a `BTreeMap`
/// predicts.
#[test]
fn long_replies_stream_in_bounded_chunks() {
    use lamina_server::exec::STREAM_CHUNK;
    use lamina_server::{Mode, Session};
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut model = BTreeMap::new();
    let mut load = String::new();
    for k in 0..60_000i32 {
        let v = k.wrapping_mul(7);
        load.push_str(&format!("p {k} {v}\n"));
        model.insert(k, v);
    }
    exec(&db, load.as_bytes());
    db.flush().unwrap();

    let sent = RefCell::new(Vec::<u8>::new());
    let largest = RefCell::new(0usize);
    let mut session = Session::new(&db, Mode::Network).streaming(Box::new(|chunk: &[u8]| {
        let mut l = largest.borrow_mut();
        *l = (*l).max(chunk.len());
        sent.borrow_mut().extend_from_slice(chunk);
        Ok(())
    }));
    let mut out = Vec::new();
    session.execute_line(b"r 0 60000", &mut out);
    session.execute_line(b"s 100000", &mut out);
    let largest_out = out.len();
    drop(session);
    let mut all = sent.into_inner();
    all.extend_from_slice(&out);
    let text = String::from_utf8(all).unwrap();
    let mut lines = text.lines();
    let expected: Vec<String> = model.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    assert_eq!(lines.next().unwrap(), expected.join(" "));
    assert_eq!(lines.next().unwrap(), "Logical Pairs: 60000");
    // Every level's entries were listed, 60,000 in all.
    let listed: usize = lines
        .filter(|l| l.contains(":L"))
        .map(|l| l.split(' ').count())
        .sum();
    assert!(listed >= 60_000, "{listed}");
    // Bounded: a chunk is at most STREAM_CHUNK plus the entry that crossed it.
    assert!(
        *largest.borrow() < STREAM_CHUNK + 64,
        "{}",
        largest.borrow()
    );
    assert!(largest_out < STREAM_CHUNK + 64, "{largest_out}");
    assert!(text.len() > 10 * STREAM_CHUNK);
}
