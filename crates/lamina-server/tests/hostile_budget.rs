//! What connections may take from the process as a whole: descriptors
//! (one per connection) and the memory of unfinished requests (a budget
//! shared by every connection of every port).
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use lamina::{Db, Options};
use lamina_server::lines::READ_CHUNK;
use lamina_server::request_budget::RequestBudget;
use lamina_server::{Server, ServerConfig};

mod common;
use common::{connect, request, serve, start_resp, stop, Running};

/// The tests of this file count the process's descriptors and memory,
/// which the others' sockets would disturb: they run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
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

/// The server's resident memory (the whole test process), KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A Redis port and a DSL port on one database, sharing `budget`.
fn start_both(dir: &std::path::Path, budget: &Arc<RequestBudget>) -> (Running, Running) {
    let db = Arc::new(Db::open(dir, Options::default()).unwrap());
    let config = ServerConfig {
        request_budget: Arc::clone(budget),
        ..ServerConfig::default()
    };
    let resp = Server::bind_resp(Arc::clone(&db), "127.0.0.1:0", false)
        .unwrap()
        .with_config(config.clone());
    let dsl = Server::bind(Arc::clone(&db), "127.0.0.1:0")
        .unwrap()
        .with_config(config);
    (serve(Arc::clone(&db), resp), serve(db, dsl))
}

/// Stops both servers, then closes their database.
fn stop_both(resp: Running, dsl: Running) {
    drop(resp.stop_sharing());
    stop(dsl);
}

/// What arrives on `s` within `wait`: the first reply line, or `None`.
fn first_line(s: &TcpStream, wait: Duration) -> Option<String> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut r = BufReader::new(s);
    let mut l = String::new();
    match r.read_line(&mut l) {
        Ok(_) => Some(l),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn unfinished_requests_share_one_budget_across_connections() {
    let _serial = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let limit = 20 << 20;
    let budget = Arc::new(RequestBudget::new(limit));
    let (resp, dsl) = start_both(tmp.path(), &budget);
    // 16 connections each send 6 MiB of a SET announced at 8 MiB: 96 MiB
    // of unfinished requests against a 20 MiB budget.
    let (n, sent) = (16, 6 << 20);
    let mut head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n".to_vec();
    head.extend_from_slice(format!("${}\r\n", 8 << 20).as_bytes());
    let body = Arc::new(vec![b'x'; sent]);
    let base = rss_kib();
    let senders: Vec<_> = (0..n)
        .map(|_| {
            let s = connect(resp.addr);
            let (mut w, head, body) = (s.try_clone().unwrap(), head.clone(), Arc::clone(&body));
            // A refused connection's writes fail once the server closes it.
            let sender =
                thread::spawn(move || w.write_all(&head).and_then(|()| w.write_all(&body)));
            (s, sender)
        })
        .collect();
    let clients: Vec<TcpStream> = senders
        .into_iter()
        .map(|(s, sender)| {
            let _ = sender.join().unwrap();
            s
        })
        .collect();
    // Refused connections have an error line waiting; kept ones nothing.
    let outcomes: Vec<Option<String>> = thread::scope(|scope| {
        let waits: Vec<_> = clients
            .iter()
            .map(|s| scope.spawn(move || first_line(s, Duration::from_secs(3))))
            .collect();
        waits.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let kept = outcomes.iter().filter(|o| o.is_none()).count();
    let refused: Vec<&String> = outcomes.iter().flatten().collect();
    let grown = rss_kib().saturating_sub(base);
    eprintln!(
        "{n} unfinished requests of 6 MiB, budget 20 MiB: {kept} kept, {} refused, {} bytes held, RSS +{grown} KiB",
        refused.len(),
        budget.held()
    );
    assert!(kept >= 1 && kept * sent <= limit, "{kept} kept");
    assert_eq!(kept + refused.len(), n);
    for line in &refused {
        assert!(
            line.starts_with("-ERR unfinished request of ") && line.contains("closing"),
            "{line:?}"
        );
    }
    assert!(budget.held() <= limit);
    assert!(budget.held() >= kept * sent, "{} held", budget.held());
    // What the server holds is about the budget, not what was sent.
    assert!(grown < 48 << 10, "RSS grew {grown} KiB");

    // The DSL port shares the budget: a line left unfinished past what
    // is left of it is refused with an ERROR line.
    let left = limit - budget.held();
    let mut long = connect(dsl.addr);
    long.write_all(b"p 1 ").unwrap();
    let partial = vec![b'7'; left.min(1 << 20) - 3];
    // Up to what is left (or a DSL line's bound) the line waits for its end ...
    long.write_all(&partial[..partial.len() / 2]).unwrap();
    assert_eq!(first_line(&long, Duration::from_millis(500)), None);
    // ... and a complete request fits beside it.
    let mut short = connect(dsl.addr);
    short.write_all(b"p 5 6\ng 5\n@sync\n").unwrap();
    let mut r = BufReader::new(short.try_clone().unwrap());
    assert_eq!(line(&mut r), "6\n");
    assert_eq!(line(&mut r), "@sync\n");
    // The kept Redis connections go away: their bytes are given back.
    drop(clients);
    eventually("the Redis connections' bytes are released", || {
        budget.held() <= left
    });
    drop((long, short, r));
    eventually("every byte is released", || budget.held() == 0);

    // With the crowd gone, a whole 8 MiB request is served.
    let mut s = connect(resp.addr);
    s.write_all(&head).unwrap();
    s.write_all(&vec![b'y'; 8 << 20]).unwrap();
    s.write_all(b"\r\n").unwrap();
    assert_eq!(line(&mut BufReader::new(&s)), "+OK\r\n");
    stop_both(resp, dsl);
}

#[test]
fn an_announced_bulk_string_counts_its_room_before_it_is_made() {
    let _serial = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let limit = 4 << 20;
    let budget = Arc::new(RequestBudget::new(limit));
    let (resp, dsl) = start_both(tmp.path(), &budget);
    // The most the budget ever counts, watched throughout.
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (budget, watching) = (Arc::clone(&budget), Arc::clone(&watching));
        thread::spawn(move || {
            let mut most = 0;
            while watching.load(Ordering::Relaxed) {
                most = most.max(budget.held());
                thread::sleep(Duration::from_millis(1));
            }
            most
        })
    };
    // 8 connections each announce a 1 MiB value (four read chunks) and
    // send 2 bytes of it: 8 MiB announced against a 4 MiB budget. The
    // server makes room for a request's bytes and a read at once.
    let (n, size) = (8, 1 << 20);
    let head = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${size}\r\n");
    let room = head.len() + size + 2 + READ_CHUNK;
    let clients: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut s = connect(resp.addr);
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(b"ab").unwrap();
            s
        })
        .collect();
    let outcomes: Vec<Option<String>> = thread::scope(|scope| {
        let waits: Vec<_> = clients
            .iter()
            .map(|s| scope.spawn(move || first_line(s, Duration::from_secs(3))))
            .collect();
        waits.into_iter().map(|w| w.join().unwrap()).collect()
    });
    // As many as their rooms fit are kept (3); the others are refused
    // before the room is made (every one was kept, holding a few bytes
    // each, while 8 MiB of room was made).
    let kept = outcomes.iter().filter(|o| o.is_none()).count();
    assert_eq!(kept, limit / room, "{outcomes:?}");
    for refusal in outcomes.iter().flatten() {
        assert!(
            refusal.starts_with(&format!("-ERR unfinished request of {room} bytes")),
            "{refusal:?}"
        );
    }
    assert_eq!(budget.held(), kept * room);
    // A kept request ends and is served; its room is given back.
    let mut done = clients
        .iter()
        .zip(&outcomes)
        .find_map(|(s, o)| o.is_none().then_some(s))
        .unwrap();
    done.write_all(&vec![b'c'; size - 2]).unwrap();
    done.write_all(b"\r\n").unwrap();
    assert_eq!(line(&mut BufReader::new(done)), "+OK\r\n");
    eventually("the finished request's room is given back", || {
        budget.held() == (kept - 1) * room
    });
    drop(clients);
    eventually("every byte is released", || budget.held() == 0);
    watching.store(false, Ordering::Relaxed);
    let most = watcher.join().unwrap();
    assert!(most <= limit, "the budget counted {most} bytes of {limit}");
    stop_both(resp, dsl);
}

#[test]
fn a_dsl_line_over_the_budget_is_refused() {
    let _serial = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let budget = Arc::new(RequestBudget::new(1 << 20));
    let (resp, dsl) = start_both(tmp.path(), &budget);
    // Two unfinished lines of 700 KB: the second goes past the 1 MiB
    // budget.
    let mut first = connect(dsl.addr);
    first.write_all(b"p 1 2\ng 1\n@sync\np 3 ").unwrap();
    first.write_all(&vec![b'4'; 700_000]).unwrap();
    let mut r = BufReader::new(first.try_clone().unwrap());
    assert_eq!(line(&mut r), "2\n");
    assert_eq!(line(&mut r), "@sync\n");
    eventually("the first line is held", || budget.held() > 700_000);
    let mut second = connect(dsl.addr);
    second.write_all(b"p 5 ").unwrap();
    // The server may close before every byte is written.
    let _ = second.write_all(&vec![b'6'; 700_000]);
    let refusal = first_line(&second, Duration::from_secs(20)).unwrap();
    assert!(
        refusal.starts_with("ERROR unfinished request of ") && refusal.contains("closing"),
        "{refusal:?}"
    );
    assert_eq!(
        first_line(&second, Duration::from_secs(20)).as_deref(),
        Some("")
    );
    // The first line was not disturbed: it ends, and its session goes on.
    first.write_all(b"\np 3 4\ng 3\n@sync\n").unwrap();
    let mut got = line(&mut r);
    if got.starts_with("ERROR") {
        // The 700 KB number is out of range: its own error, not the budget's.
        assert!(!got.contains("unfinished"), "{got:?}");
        got = line(&mut r);
    }
    assert_eq!(got, "4\n");
    assert_eq!(line(&mut r), "@sync\n");
    drop((first, r));
    eventually("every byte is released", || budget.held() == 0);
    stop_both(resp, dsl);
}
