//! Hostile clients of the line protocols (DSL, spatial, Redis) and the
//! `/metrics` endpoint, as issue 39 found them: an HTTP request (what a
//! web page makes a browser send) executed as commands; requests left
//! unfinished holding the connection cap forever; slow clients holding
//! every scrape slot; a `SCAN ... MATCH` pattern costing minutes of CPU,
//! spent even after the client hung up.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test may panic on a failed setup"
)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use lamina::{Db, Options};
use lamina_dataset::{Dataset, DatasetOptions};
use lamina_server::metrics::{self, MetricsServer, ServerCounters};
use lamina_server::{Server, ServerConfig, ShutdownHandle};

mod common;
use common::{connect, redis_get, request};

/// A server running on its own thread.
struct Up {
    addr: SocketAddr,
    handle: ShutdownHandle,
    thread: thread::JoinHandle<()>,
}

impl Up {
    fn stop(self) {
        self.handle.trigger();
        self.thread.join().unwrap();
    }
}

fn up(server: Server) -> Up {
    let addr = server.local_addr();
    let handle = server.shutdown_handle();
    let thread = thread::spawn(move || server.run().unwrap());
    Up {
        addr,
        handle,
        thread,
    }
}

fn open_db(dir: &std::path::Path) -> Arc<Db> {
    Arc::new(Db::open(dir, Options::default()).unwrap())
}

fn dsl(db: &Arc<Db>, config: ServerConfig) -> Up {
    up(Server::bind(Arc::clone(db), "127.0.0.1:0")
        .unwrap()
        .with_config(config))
}

fn redis(db: &Arc<Db>, config: ServerConfig) -> Up {
    up(Server::bind_resp(Arc::clone(db), "127.0.0.1:0", false)
        .unwrap()
        .with_config(config))
}

fn spatial(ds: &Arc<Dataset>, config: ServerConfig) -> Up {
    up(Server::bind_spatial(Arc::clone(ds), "127.0.0.1:0")
        .unwrap()
        .with_config(config))
}

fn open_dataset(dir: &std::path::Path) -> Arc<Dataset> {
    Arc::new(Dataset::open(dir, DatasetOptions::default()).unwrap())
}

/// Everything the server sends until it closes, and how long that took;
/// `None` if it still had not closed after `limit`.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> Option<(Vec<u8>, Duration)> {
    let start = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some((got, start.elapsed())),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            // A reset is a close too.
            Err(_) => return Some((got, start.elapsed())),
        }
        if start.elapsed() > limit {
            return None;
        }
    }
}

/// A DSL (or spatial) session's replies: `input` then `@end`.
fn session(addr: SocketAddr, input: &str) -> String {
    let mut s = connect(addr);
    s.write_all(input.as_bytes()).unwrap();
    s.write_all(b"@end\n").unwrap();
    let (got, _) = read_until_closed(&mut s, Duration::from_secs(20)).unwrap();
    String::from_utf8(got).unwrap()
}

/// A text/plain POST (no preflight: any web page can send it to
/// 127.0.0.1) whose body is `body`.
fn post(body: &str) -> String {
    format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Sends `bytes` in one write and returns what came back before the
/// server closed (it must, within 10 s).
fn sent_and_closed(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = connect(addr);
    s.write_all(bytes).unwrap();
    let (got, _) = read_until_closed(&mut s, Duration::from_secs(10))
        .expect("the connection is closed at the HTTP request");
    String::from_utf8(got).unwrap()
}

#[test]
fn http_requests_execute_nothing_on_the_dsl_port() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(tmp.path());
    let server = dsl(&db, ServerConfig::default());
    let addr = server.addr;
    // A write before the request in the same read stays applied; the
    // body after it is never executed, and no `@bye` comes.
    let attack = format!("p 5 50\ng 5\n{}", post("p 1 1\ng 1\n@end\n"));
    assert_eq!(sent_and_closed(addr, attack.as_bytes()), "50\n");
    // A request line of another method, and a Host line alone.
    for attack in [
        "GET / HTTP/1.1\r\np 2 2\n@end\n",
        "p 6 60\nhost: evil.example\np 3 3\n@end\n",
    ] {
        assert_eq!(sent_and_closed(addr, attack.as_bytes()), "");
    }
    assert_eq!(
        session(addr, "g 1\ng 2\ng 3\ng 5\ng 6\n"),
        "\n\n\n50\n60\n@bye\n"
    );
    server.stop();
}

#[test]
fn http_requests_execute_nothing_on_the_redis_port() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(tmp.path());
    let server = redis(&db, ServerConfig::default());
    let addr = server.addr;
    let before = request(&[b"SET", b"before", b"1"]);
    // Inline: the POST line closes the connection; the SET before it was
    // applied and answered.
    let attack = [before.clone(), post("SET evil 1\r\n").into_bytes()].concat();
    assert_eq!(sent_and_closed(addr, &attack), "+OK\r\n");
    // The same commands as RESP arrays: `POST` and `Host:` close it, as
    // in Redis.
    for name in [&b"POST"[..], b"Host:"] {
        let attack = [request(&[name, b"/"]), request(&[b"SET", b"evil", b"2"])].concat();
        assert_eq!(sent_and_closed(addr, &attack), "");
    }
    assert_eq!(redis_get(addr, b"evil"), None);
    assert_eq!(redis_get(addr, b"before").as_deref(), Some(&b"1"[..]));
    server.stop();
}

#[test]
fn http_requests_execute_nothing_on_the_spatial_port() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = open_dataset(tmp.path());
    let server = spatial(&ds, ServerConfig::default());
    let addr = server.addr;
    let attack = format!("i 2 1 1\n{}", post("i 1 1 1\nc 0 0 2 2\n@end\n"));
    assert_eq!(sent_and_closed(addr, attack.as_bytes()), "");
    assert_eq!(session(addr, "w 0 0 2 2\n"), "1 2\n@bye\n");
    server.stop();
}

/// The deadline these tests give an unfinished request.
const DEADLINE: Duration = Duration::from_secs(2);

fn with_deadline(max_connections: usize) -> ServerConfig {
    ServerConfig {
        max_connections,
        request_timeout: Some(DEADLINE),
        ..ServerConfig::default()
    }
}

/// Slowloris against a port: 64 connections (the cap) that each sent 30
/// bytes of a request lock everyone out until the deadline closes them,
/// after which a new client is served; a client trickling a byte at a
/// time is cut off by the same deadline; a pipelining client whose every
/// piece completes a request, and an idle client with nothing unfinished,
/// are not.
fn slowloris(addr: SocketAddr, partial: &[u8], served: impl Fn(SocketAddr) -> bool) {
    assert_eq!(partial.len(), 30);
    let started = Instant::now();
    let mut held: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut s = connect(addr);
            s.write_all(partial).unwrap();
            s
        })
        .collect();
    // The 65th is over the cap while they are held.
    thread::sleep(Duration::from_millis(200));
    let mut refused = connect(addr);
    let (refusal, _) = read_until_closed(&mut refused, Duration::from_secs(10)).unwrap();
    assert!(!refusal.is_empty(), "refused with a message");
    for s in &mut held {
        let left = (DEADLINE * 4).saturating_sub(started.elapsed());
        let closed = read_until_closed(s, left.max(Duration::from_millis(100)));
        assert!(
            closed.is_some(),
            "an unfinished request still open {:?} after it began",
            started.elapsed()
        );
    }
    let closed = started.elapsed();
    // Their threads end right after closing them.
    let served_after = (0..50).find(|_| {
        served(addr) || {
            thread::sleep(Duration::from_millis(100));
            false
        }
    });
    assert!(
        served_after.is_some(),
        "a new client is served once they are closed"
    );
    eprintln!(
        "64 unfinished requests closed {closed:?} after they began, a new client served after {:?}",
        started.elapsed()
    );

    // One byte every 100 ms of a request that never ends: cut off at the
    // deadline, not kept alive by each byte.
    let mut trickler = connect(addr);
    let w = trickler.try_clone().unwrap();
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_writing = Arc::clone(&stop);
    let writer = thread::spawn(move || {
        let mut w = w;
        let mut i = 0;
        while !stop_writing.load(Ordering::Relaxed) && i < 200 {
            if w.write_all(&partial_byte(i)).is_err() {
                break;
            }
            i += 1;
            thread::sleep(Duration::from_millis(100));
        }
    });
    let closed = read_until_closed(&mut trickler, DEADLINE * 4);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let (_, took) = closed.expect("a trickling client is cut off");
    assert!(took >= DEADLINE / 2, "cut off after {took:?}");
    eprintln!("a byte every 100 ms: cut off after {:?}", started.elapsed());
}

/// The trickler's `i`-th byte: never a newline.
fn partial_byte(i: usize) -> [u8; 1] {
    [b'a' + (i % 26) as u8]
}

/// A client whose pieces each finish the line before and start the next
/// one, past the deadline in all (one piece each half deadline): not cut
/// off.
fn pipelined_pieces_are_not_cut_off(addr: SocketAddr, pieces: &[&[u8]], end: &[u8]) {
    let mut s = connect(addr);
    for p in pieces {
        s.write_all(p).unwrap();
        thread::sleep(DEADLINE / 2);
    }
    s.write_all(end).unwrap();
    let (got, _) = read_until_closed(&mut s, Duration::from_secs(10)).unwrap();
    let got = String::from_utf8(got).unwrap();
    assert!(!got.contains("timeout"), "{got:?}");
}

#[test]
fn unfinished_lines_on_the_dsl_port_are_closed_at_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(tmp.path());
    let server = dsl(&db, with_deadline(64));
    let served = |addr| session(addr, "p 9 9\ng 9\n") == "9\n@bye\n";
    slowloris(server.addr, b"p 1 2 3 4 5 6 7 8 9 10 11 12 1", served);
    pipelined_pieces_are_not_cut_off(
        server.addr,
        &[b"p 1 1\np 2", b" 2\np 3", b" 3\ng 2\n"],
        b"@end\n",
    );
    // Idle past the deadline with nothing unfinished: still served.
    let mut idle = connect(server.addr);
    idle.write_all(b"p 4 4\n").unwrap();
    thread::sleep(DEADLINE + DEADLINE / 2);
    idle.write_all(b"g 4\n@end\n").unwrap();
    let (got, _) = read_until_closed(&mut idle, Duration::from_secs(10)).unwrap();
    assert_eq!(String::from_utf8(got).unwrap(), "4\n@bye\n");
    server.stop();
}

#[test]
fn unfinished_requests_on_the_redis_port_are_closed_at_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(tmp.path());
    let server = redis(&db, with_deadline(64));
    let served = |addr| {
        let mut s = connect(addr);
        s.write_all(b"PING\r\n").unwrap();
        let mut pong = [0u8; 7];
        s.read_exact(&mut pong).is_ok() && &pong == b"+PONG\r\n"
    };
    // A SET whose value never comes (30 bytes), as a slowloris sends.
    slowloris(
        server.addr,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$99\r\nabcde",
        served,
    );
    let set = request(&[b"SET", b"piece", b"wise"]);
    let (a, b) = set.split_at(20);
    let get = request(&[b"GET", b"piece"]);
    let (c, d) = get.split_at(10);
    pipelined_pieces_are_not_cut_off(
        server.addr,
        &[a, &[b, c].concat()],
        &[d, b"QUIT\r\n"].concat(),
    );
    assert_eq!(
        redis_get(server.addr, b"piece").as_deref(),
        Some(&b"wise"[..])
    );
    server.stop();
}

#[test]
fn unfinished_lines_on_the_spatial_port_are_closed_at_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = open_dataset(tmp.path());
    let server = spatial(&ds, with_deadline(64));
    let served = |addr| session(addr, "c 0 0 1 1\n") == "0\n@bye\n";
    slowloris(server.addr, b"i 1 2.000000000000000000000000", served);
    server.stop();
}

#[test]
fn redis_over_cap_refusal_is_a_resp_error() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(tmp.path());
    let server = redis(&db, with_deadline(1));
    let mut held = connect(server.addr);
    held.write_all(b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    held.read_exact(&mut pong).unwrap();
    let mut over = connect(server.addr);
    let (got, _) = read_until_closed(&mut over, Duration::from_secs(10)).unwrap();
    // One RESP error: `-`, one line, CRLF.
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    drop(held);
    server.stop();
}

/// Metrics: 24 clients that keep sending a request head slowly (each
/// reconnects as soon as it is cut off) do not keep 5 real scrapes from
/// being answered.
#[test]
fn metrics_scrapes_are_answered_among_slow_clients() {
    let server = MetricsServer::bind("127.0.0.1:0", Box::new(|| "up 1\n".to_string())).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.stop_flag();
    let endpoint = thread::spawn(move || server.run());
    let attacking = Arc::new(AtomicBool::new(true));
    let attackers: Vec<_> = (0..24)
        .map(|_| {
            let attacking = Arc::clone(&attacking);
            thread::spawn(move || {
                let mut cut_off = 0;
                while attacking.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(addr) else {
                        continue;
                    };
                    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n");
                    while attacking.load(Ordering::Relaxed) {
                        if s.write_all(b"X").is_err() {
                            cut_off += 1;
                            break;
                        }
                        thread::sleep(Duration::from_millis(100));
                    }
                }
                cut_off
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let mut answered = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let mut s = connect(addr);
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let reply = read_until_closed(&mut s, Duration::from_secs(10));
        let ok = reply.is_some_and(|(r, _)| r.starts_with(b"HTTP/1.1 200 OK"));
        eprintln!("scrape: 200 {ok} after {:?}", started.elapsed());
        answered += usize::from(ok);
        thread::sleep(Duration::from_millis(400));
    }
    attacking.store(false, Ordering::Relaxed);
    let cut_off: usize = attackers.into_iter().map(|a| a.join().unwrap()).sum();
    eprintln!("slow clients were cut off {cut_off} times");
    assert_eq!(answered, 5);
    assert!(
        cut_off >= 24,
        "the slow clients were cut off {cut_off} times"
    );
    stop.store(true, Ordering::Release);
    endpoint.join().unwrap();
}

/// The scrape slots still bound the renders at once: with a render that
/// takes a second, 24 scrapes at once get 16 answers and 503s.
#[test]
fn metrics_scrape_slots_still_bound_renders() {
    let render = Box::new(|| {
        thread::sleep(Duration::from_secs(1));
        "up 1\n".to_string()
    });
    let server = MetricsServer::bind("127.0.0.1:0", render).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.stop_flag();
    let endpoint = thread::spawn(move || server.run());
    let scrapes: Vec<_> = (0..24)
        .map(|_| {
            thread::spawn(move || {
                let mut s = connect(addr);
                s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
                let (r, _) = read_until_closed(&mut s, Duration::from_secs(10)).unwrap();
                String::from_utf8(r).unwrap()
            })
        })
        .collect();
    let replies: Vec<String> = scrapes.into_iter().map(|t| t.join().unwrap()).collect();
    let ok = replies
        .iter()
        .filter(|r| r.starts_with("HTTP/1.1 200"))
        .count();
    let busy = replies
        .iter()
        .filter(|r| r.starts_with("HTTP/1.1 503"))
        .count();
    eprintln!("24 scrapes of a 1 s render at once: {ok} answered, {busy} 503");
    assert_eq!(ok + busy, 24, "{replies:?}");
    assert!(ok >= 1 && busy >= 1, "{ok} answered, {busy} 503");
    stop.store(true, Ordering::Release);
    endpoint.join().unwrap();
}

/// A Redis client on `addr` for a few requests.
struct Resp {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Resp {
    fn new(addr: SocketAddr) -> Resp {
        let w = connect(addr);
        Resp {
            r: BufReader::new(w.try_clone().unwrap()),
            w,
        }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l
    }

    fn bulk(&mut self) -> Vec<u8> {
        let l = self.line();
        let n: usize = l[1..].trim_end().parse().unwrap();
        let mut b = vec![0u8; n + 2];
        self.r.read_exact(&mut b).unwrap();
        b.truncate(n);
        b
    }

    fn set(&mut self, k: &[u8], v: &[u8]) {
        self.w.write_all(&request(&[b"SET", k, v])).unwrap();
        assert_eq!(self.line(), "+OK\r\n");
    }

    /// `SCAN cursor MATCH pattern COUNT count`: the next cursor and the
    /// keys, or the error line.
    fn scan(
        &mut self,
        cursor: &[u8],
        pattern: &[u8],
        count: &[u8],
    ) -> Result<(Vec<u8>, Vec<Vec<u8>>), String> {
        self.w
            .write_all(&request(&[
                b"SCAN", cursor, b"MATCH", pattern, b"COUNT", count,
            ]))
            .unwrap();
        let head = self.line();
        if head.starts_with('-') {
            return Err(head);
        }
        assert_eq!(head, "*2\r\n");
        let next = self.bulk();
        let n: usize = self.line()[1..].trim_end().parse().unwrap();
        Ok((next, (0..n).map(|_| self.bulk()).collect()))
    }
}

/// `SCAN ... MATCH` with patterns that made the old matcher backtrack:
/// 1.5 MB of pattern against long keys is answered at once; a pattern
/// costly for every key ends each call early with a cursor (and the scan
/// is complete and exact over the calls); one too costly for a single key
/// is an error.
#[test]
fn scan_match_patterns_cost_bounded_work() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(tmp.path());
    let server = redis(&db, ServerConfig::default());
    let mut c = Resp::new(server.addr);
    let long = vec![b'a'; 64 << 10];
    for i in 0..40u8 {
        let mut k = long.clone();
        k.push(i);
        c.set(&k, b"v");
    }
    let mut matching = long.clone();
    matching.extend_from_slice(b"b");
    c.set(&matching, b"v");

    // An unclosed class of 1.5 MB after a star (the old matcher read the
    // class again at each byte of each key), and `*a*a*a...`.
    let class_bomb = [&b"*["[..], &vec![b'x'; 1_500_000]].concat();
    let stars = b"*a".repeat(750_000);
    for pattern in [&class_bomb, &stars] {
        let started = Instant::now();
        assert_eq!(c.scan(b"0", pattern, b"100"), Ok((b"0".to_vec(), vec![])));
        eprintln!("1.5 MB pattern: answered in {:?}", started.elapsed());
    }

    // A long run without a star that nearly matches at every place: about
    // 64 Ki x 64 steps per key, so a call examines a few keys and returns
    // a cursor; the calls together find exactly the matching key.
    let costly = [&b"*"[..], &[b'a'; 64], b"b*"].concat();
    let (mut cursor, mut found, mut calls) = (b"0".to_vec(), Vec::new(), 0);
    loop {
        let (next, keys) = c.scan(&cursor, &costly, b"1000").unwrap();
        found.extend(keys);
        calls += 1;
        if next == b"0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(found, vec![matching.clone()]);
    assert!(calls > 2, "{calls} calls");
    eprintln!("a costly pattern over 41 keys of 64 KiB: {calls} SCAN calls");

    // Too costly for one key on its own: an error, not minutes of work.
    let hopeless = [&b"*"[..], &vec![b'a'; 4096], b"c*"].concat();
    let err = c.scan(b"0", &hopeless, b"10").unwrap_err();
    assert!(err.starts_with("-ERR MATCH pattern too costly"), "{err}");
    drop(c);
    server.stop();
}

/// A client pipelines costly SCANs and hangs up: the server stops working
/// for it within a few of them, not after all of them.
#[test]
fn a_hung_up_clients_scans_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(tmp.path());
    let counters = Arc::new(ServerCounters::default());
    let server = up(Server::bind_resp(Arc::clone(&db), "127.0.0.1:0", false)
        .unwrap()
        .with_counters(Arc::clone(&counters)));
    let mut c = Resp::new(server.addr);
    for i in 0..16u8 {
        let mut key = vec![b'a'; 1 << 20];
        key.push(i);
        c.set(&key, b"v");
    }
    drop(c);
    let active = || {
        metrics::render(&db.stats(), &counters)
            .lines()
            .find_map(|l| l.strip_prefix("lamina_server_connections_active{protocol=\"resp\"} "))
            .map(|n| n.parse::<u64>().unwrap())
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while active() > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(active(), 0);

    // 60 SCANs of about 220 bytes (a read holds many), each worth 1 MiB
    // x 200 steps per key examined (seconds of a core for 16 keys), then
    // gone.
    let pattern = format!("*{}c*", "a".repeat(200));
    let scan = format!("SCAN 0 MATCH {pattern} COUNT 16\r\n");
    let mut s = connect(server.addr);
    s.write_all(scan.repeat(60).as_bytes()).unwrap();
    drop(s);
    let started = Instant::now();
    while active() > 0 && started.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    eprintln!("the hung-up client's connection ended after {took:?}");
    assert_eq!(active(), 0, "still working after {took:?}");
    let scans = metrics::render(&db.stats(), &counters)
        .lines()
        .find_map(|l| {
            l.strip_prefix("lamina_server_commands_total{protocol=\"resp\",command=\"scan\"} ")
        })
        .map(|n| n.parse::<u64>().unwrap())
        .unwrap_or(0);
    eprintln!("{scans} of the 60 SCANs ran");
    assert!(scans < 10, "{scans} of the 60 SCANs ran");
    server.stop();
}
