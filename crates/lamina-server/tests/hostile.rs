//! Hostile clients of the Redis (RESP) port and the `/metrics` endpoint:
//! absurd lengths, garbage, nesting, floods to a reader that does not
//! read, idle and half-closed and reset connections, slow and oversized
//! HTTP requests, requests smuggled behind a scrape. Each must get a clear
//! error or a closed connection, never a panic, in bounded memory, and
//! the server must go on serving other clients the values they wrote.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use lamina_server::metrics::MetricsServer;
use lamina_server::resp::SCAN_REPLY;

mod common;
use common::{connect, read_bulk, redis_get, request, start_resp, stop};

fn set(addr: SocketAddr, key: &[u8], value: &[u8]) {
    let mut s = connect(addr);
    s.write_all(&request(&[b"SET", key, value])).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    assert_eq!(line, "+OK\r\n");
}

/// The server's resident memory (the whole test process), KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn resp_garbage_gets_a_protocol_error_and_a_close() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(tmp.path(), false);
    set(running.addr, b"canary", b"still here");
    let endless_inline = vec![b'a'; 70 << 10];
    let mut endless_count = b"*".to_vec();
    endless_count.extend(vec![b'7'; 70 << 10]);
    let nested: Vec<u8> = b"*1\r\n".repeat(100_000);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "bulk length u64::MAX",
            b"*1\r\n$18446744073709551615\r\n".to_vec(),
            "invalid count",
        ),
        (
            "bulk length i64::MAX",
            b"*1\r\n$9223372036854775807\r\n".to_vec(),
            "invalid bulk length",
        ),
        (
            "bulk length u32::MAX + 1",
            b"*1\r\n$4294967296\r\n".to_vec(),
            "invalid bulk length",
        ),
        (
            "negative bulk length",
            b"*1\r\n$-1\r\n".to_vec(),
            "invalid bulk length",
        ),
        (
            "argument count i64::MAX",
            b"*9223372036854775807\r\n".to_vec(),
            "invalid multibulk length",
        ),
        (
            "garbage length",
            b"*1\r\n$12abc\r\n".to_vec(),
            "invalid count",
        ),
        (
            "bulk not ended by CRLF",
            b"*1\r\n$3\r\nabcXY".to_vec(),
            "not terminated by CRLF",
        ),
        (
            "a nested array",
            b"*2\r\n*1\r\n$1\r\na\r\n".to_vec(),
            "expected '$', got '*'",
        ),
        ("100,000 nested arrays", nested, "expected '$', got '*'"),
        ("an endless inline line", endless_inline, "too big inline"),
        ("an endless count", endless_count, "too big count"),
    ];
    for (what, bytes, why) in cases {
        let mut s = connect(running.addr);
        // The server may close before reading everything: a failed write
        // is fine, the reply is what counts.
        let _ = s.write_all(&bytes);
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        let reply = String::from_utf8_lossy(&reply);
        assert!(
            reply.starts_with("-ERR Protocol error: ") && reply.contains(why),
            "{what}: {reply:?}"
        );
        assert_eq!(reply.matches("\r\n").count(), 1, "{what}: {reply:?}");
        assert_eq!(
            redis_get(running.addr, b"canary").as_deref(),
            Some(&b"still here"[..]),
            "{what}"
        );
    }

    // Not errors: an empty or negative count is an empty request Redis
    // skips, and non-UTF-8 names an unknown command; the connection goes on.
    let mut s = connect(running.addr);
    s.write_all(b"*0\r\n*-5\r\n\xff\xfe \xc0\r\nPING\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("-ERR unknown command"), "{line:?}");
    line.clear();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "+PONG\r\n");
    stop(running);
}

#[test]
fn resp_requests_split_anywhere_parse_as_one() {
    use lamina_server::resp::{parse_request, Request, RequestParser};
    // A request of many arguments, arriving in pieces of every size: the
    // parser resumes where it stopped and ends with the same command as a
    // one-shot parse of the whole.
    let args: Vec<Vec<u8>> = (0..300u32)
        .map(|i| format!("arg-{i}-{}", "x".repeat((i % 17) as usize)).into_bytes())
        .collect();
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let mut bytes = request(&refs);
    bytes.extend_from_slice(b"PING\r\n");
    let whole = parse_request(&bytes).unwrap();
    let Request::Command(parsed) = &whole.0 else {
        panic!("incomplete: {whole:?}");
    };
    assert_eq!(parsed.resolve(&bytes), refs);
    for piece in [1, 2, 3, 7, 64, 1000] {
        let mut parser = RequestParser::default();
        let mut got = None;
        for end in (piece..bytes.len() + piece).step_by(piece) {
            let seen = &bytes[..end.min(bytes.len())];
            match parser.parse(seen).unwrap() {
                (Request::Incomplete, _) => {}
                done => {
                    got = Some(done);
                    break;
                }
            }
        }
        assert_eq!(got.as_ref(), Some(&whole), "pieces of {piece}");
        // The parser starts afresh after a command: the inline PING.
        let rest = &bytes[whole.1..];
        let (Request::Command(ping), used) = parser.parse(rest).unwrap() else {
            panic!("PING incomplete");
        };
        assert_eq!((ping.resolve(rest), used), (vec![&b"PING"[..]], rest.len()));
    }
}

/// Memory figures share one test: tests of one binary run in parallel
/// threads of one process, whose RSS is what is measured.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
fn resp_floods_idle_crowds_and_huge_scans_take_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(tmp.path(), false);
    let addr = running.addr;
    let value = vec![b'v'; 1024];
    set(addr, b"big", &value);

    // A pipeline of 60,000 GETs of a 1 KiB value (60 MB of replies) from a
    // client that reads nothing for a second: the server stops reading
    // once its socket is full; its memory does not grow with the replies.
    let base = rss_kib();
    let s = connect(addr);
    let flood = request(&[b"GET", b"big"]).repeat(60_000);
    let mut w = s.try_clone().unwrap();
    let sender = thread::spawn(move || w.write_all(&flood).unwrap());
    thread::sleep(Duration::from_secs(1));
    let grown = rss_kib().saturating_sub(base);
    eprintln!("stalled flood of 60 MB of replies: RSS +{grown} KiB");
    assert!(grown < 24 << 10, "RSS grew {grown} KiB for a stalled flood");
    let mut r = BufReader::new(s.try_clone().unwrap());
    for i in 0..60_000 {
        assert_eq!(read_bulk(&mut r).as_deref(), Some(&value[..]), "reply {i}");
    }
    sender.join().unwrap();
    s.shutdown(Shutdown::Both).unwrap();
    drop((r, s));

    // One MGET of 64 values of 256 KiB (a 16 MiB reply) from a client
    // that reads nothing for a second: the reply streams as it is read,
    // so the server holds a chunk of it, not all of it.
    let big: Vec<Vec<u8>> = (0..64u8).map(|i| vec![i; 256 << 10]).collect();
    let mut w = connect(addr);
    let mut sets = Vec::new();
    for (i, v) in big.iter().enumerate() {
        sets.extend_from_slice(&request(&[b"SET", format!("m{i}").as_bytes(), v]));
    }
    w.write_all(&sets).unwrap();
    let mut r = BufReader::new(w.try_clone().unwrap());
    for _ in 0..64 {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert_eq!(l, "+OK\r\n");
    }
    let names: Vec<Vec<u8>> = (0..64).map(|i| format!("m{i}").into_bytes()).collect();
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(names.iter().map(|n| n.as_slice()));
    let base = rss_kib();
    w.write_all(&request(&mget)).unwrap();
    thread::sleep(Duration::from_secs(1));
    let grown = rss_kib().saturating_sub(base);
    eprintln!("a stalled MGET of 16 MiB: RSS +{grown} KiB");
    assert!(grown < 8 << 10, "RSS grew {grown} KiB for a stalled MGET");
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    assert_eq!(l, "*64\r\n");
    for (i, v) in big.iter().enumerate() {
        assert_eq!(read_bulk(&mut r).as_ref(), Some(v), "value {i}");
    }
    drop((r, w));

    // A SCAN with an absurd COUNT returns at most about SCAN_REPLY bytes
    // of keys and a cursor; following it yields every key exactly once.
    let mut batch = connect(addr);
    let mut keys = BTreeSet::new();
    let mut writes = Vec::new();
    for i in 0..4_000u32 {
        let k = format!("{i:0>8}-{}", "k".repeat(500)).into_bytes();
        writes.extend_from_slice(&request(&[b"SET", &k, b"1"]));
        keys.insert(k);
    }
    batch.write_all(&writes).unwrap();
    let mut r = BufReader::new(batch.try_clone().unwrap());
    for _ in 0..4_000 {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert_eq!(l, "+OK\r\n");
    }
    keys.insert(b"big".to_vec());
    keys.extend(names.iter().cloned());
    let mut seen = BTreeSet::new();
    let mut cursor = b"0".to_vec();
    let mut rounds = 0;
    loop {
        batch
            .write_all(&request(&[b"SCAN", &cursor, b"COUNT", b"999999999999"]))
            .unwrap();
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert_eq!(l, "*2\r\n");
        cursor = read_bulk(&mut r).unwrap();
        l.clear();
        r.read_line(&mut l).unwrap();
        let n: usize = l.trim_end().strip_prefix('*').unwrap().parse().unwrap();
        let mut bytes = 0;
        for _ in 0..n {
            let k = read_bulk(&mut r).unwrap();
            bytes += k.len();
            assert!(seen.insert(k), "a key returned twice");
        }
        assert!(
            bytes < SCAN_REPLY + 1024,
            "{bytes} bytes of keys in one reply"
        );
        rounds += 1;
        if cursor == b"0" {
            break;
        }
    }
    assert!(
        seen == keys,
        "SCAN saw {} keys of {}",
        seen.len(),
        keys.len()
    );
    assert!(rounds >= 2, "2 MB of keys fit one reply?");
    drop((r, batch));

    // 1,000 connections that each ask once and then stay idle: their
    // threads give their buffers back after a second of silence.
    let base = rss_kib();
    let mut idle = Vec::new();
    for _ in 0..1_000 {
        let mut s = connect(addr);
        s.write_all(b"PING\r\n").unwrap();
        idle.push(s);
    }
    for s in &mut idle {
        let mut pong = [0u8; 7];
        s.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"+PONG\r\n");
    }
    thread::sleep(Duration::from_secs(2));
    let per = rss_kib().saturating_sub(base) / 1_000;
    eprintln!("1,000 idle connections: {per} KiB each");
    assert!(per < 96, "{per} KiB per idle connection");
    // Half of them half-close (the server sees end of input and closes),
    // half reset abruptly in the middle of a request: closing a socket
    // with unread input (the PONG) sends a reset, not a FIN.
    for (i, mut s) in idle.into_iter().enumerate() {
        if i % 2 == 0 {
            s.shutdown(Shutdown::Write).unwrap();
        } else {
            s.write_all(b"PING\r\n*2\r\n$3\r\nGET\r\n$100\r\nabc")
                .unwrap();
        }
    }
    thread::sleep(Duration::from_millis(200));
    assert_eq!(redis_get(addr, b"big").as_deref(), Some(&value[..]));
    stop(running);
}

struct Metrics {
    addr: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: thread::JoinHandle<()>,
}

const BODY: &str = "lamina_test_metric 42\n";

fn start_metrics() -> Metrics {
    let server = MetricsServer::bind("127.0.0.1:0", Box::new(|| BODY.to_string())).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.stop_flag();
    let thread = thread::spawn(move || server.run());
    Metrics { addr, stop, thread }
}

/// Sends `bytes`, half-closes, and returns everything the server sent
/// before it closed.
fn http(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = connect(addr);
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

fn scrape(addr: SocketAddr) -> String {
    http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
}

fn status(reply: &str) -> &str {
    reply.lines().next().unwrap_or_default()
}

#[test]
fn metrics_endpoint_survives_slow_huge_and_smuggled_requests() {
    let m = start_metrics();
    let ok = scrape(m.addr);
    assert_eq!(status(&ok), "HTTP/1.1 200 OK");
    assert!(ok.ends_with(BODY));

    // A slowloris client trickles a header a byte at a time, never ending
    // it: scrapes are answered meanwhile, and it is cut off after 2 s.
    let mut slow = connect(m.addr);
    let started = Instant::now();
    let trickler = thread::spawn(move || {
        slow.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
        for _ in 0..100 {
            if slow.write_all(b"X").is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let mut rest = Vec::new();
        let _ = slow.read_to_end(&mut rest);
        (rest, started.elapsed())
    });
    thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        assert_eq!(status(&scrape(m.addr)), "HTTP/1.1 200 OK");
    }
    let (rest, took) = trickler.join().unwrap();
    assert!(rest.is_empty(), "a reply to an unfinished request");
    assert!(took < Duration::from_secs(4), "cut off after {took:?}");

    // Oversized, malformed, smuggled, non-UTF-8, half-closed.
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20 << 10)
    );
    assert_eq!(
        status(&http(m.addr, huge.as_bytes())),
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    assert_eq!(
        status(&http(m.addr, b"\xff\xfe\x00garbage\r\n\r\n")),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        status(&http(m.addr, b"GET /metrics\r\n\r\n")),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        status(&http(m.addr, b"POST /metrics HTTP/1.1\r\n\r\n")),
        "HTTP/1.1 405 Method Not Allowed"
    );
    assert_eq!(
        status(&http(m.addr, b"GET /admin HTTP/1.1\r\n\r\n")),
        "HTTP/1.1 404 Not Found"
    );
    for smuggled in [
        &b"GET /metrics HTTP/1.1\r\nContent-Length: 26\r\n\r\nGET /admin HTTP/1.1\r\n\r\n"[..],
        b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n",
    ] {
        let reply = http(m.addr, smuggled);
        assert_eq!(status(&reply), "HTTP/1.1 200 OK");
        assert_eq!(reply.matches("HTTP/1.1 ").count(), 1, "{reply}");
        assert!(reply.ends_with(BODY));
    }
    // HEAD: the headers a GET gets, its Content-Length included, and no
    // body; a request behind it is never read.
    let head = http(
        m.addr,
        b"HEAD /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n",
    );
    assert_eq!(status(&head), "HTTP/1.1 200 OK");
    assert_eq!(head.matches("HTTP/1.1 ").count(), 1, "{head}");
    assert!(head.ends_with("\r\n\r\n"), "a body after HEAD: {head}");
    assert!(head.contains(&format!("Content-Length: {}\r\n", BODY.len())));
    assert_eq!(
        status(&http(m.addr, b"HEAD /admin HTTP/1.1\r\n\r\n")),
        "HTTP/1.1 404 Not Found"
    );
    // Half-closed before the blank line: no whole request, no reply.
    assert_eq!(http(m.addr, b"GET /metrics HTTP/1.1\r\n"), "");

    // More stalled clients than the endpoint answers at once: they hold
    // no scrape slot (`hostile_proto.rs` has the crowd), so a scrape is
    // answered meanwhile.
    let stalled: Vec<TcpStream> = (0..16).map(|_| connect(m.addr)).collect();
    thread::sleep(Duration::from_millis(300));
    assert_eq!(status(&scrape(m.addr)), "HTTP/1.1 200 OK");
    drop(stalled);

    m.stop.store(true, Ordering::Release);
    m.thread.join().unwrap();
}
