//! What connections may take from the process as a whole: descriptors
//! (one per connection) and the memory of unfinished requests (a budget
//! shared by every connection of every port).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{request, start_resp, stop};

/// The tests of this file count the process's descriptors and memory,
/// which the others' sockets would disturb: they run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Descriptors this process has open.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Waits (bounded) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_connection_holds_one_descriptor() {
    let _serial = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(tmp.path(), false);
    let n = 200;
    let before = open_descriptors();
    let mut clients = Vec::new();
    for _ in 0..n {
        let mut s = connect(running.addr);
        s.write_all(b"PING\r\n").unwrap();
        clients.push(s);
    }
    // Every connection has been accepted and served once.
    for s in &mut clients {
        let mut pong = [0u8; 7];
        s.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"+PONG\r\n");
    }
    // The test process holds both ends: the client's socket and the
    // server's, which was two descriptors (the socket and the registry's
    // clone of it).
    let added = open_descriptors() - before;
    assert!(
        (2 * n..2 * n + 20).contains(&added),
        "{n} connections added {added} descriptors to the process (client and server ends)"
    );
    drop(clients);
    eventually("the server closes its ends", || {
        open_descriptors() <= before + 5
    });
    stop(running);
}

/// Reads one reply line.
fn line(r: &mut impl BufRead) -> String {
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    l
}

#[test]
fn shutdown_still_closes_every_connection() {
    let _serial = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(tmp.path(), false);
    let mut clients: Vec<_> = (0..20)
        .map(|_| {
            let mut s = connect(running.addr);
            s.write_all(&request(&[b"PING"])).unwrap();
            BufReader::new(s)
        })
        .collect();
    for c in &mut clients {
        assert_eq!(line(c), "+PONG\r\n");
    }
    stop(running);
    // Each client sees its connection end.
    for c in &mut clients {
        assert_eq!(line(c), "");
    }
}
