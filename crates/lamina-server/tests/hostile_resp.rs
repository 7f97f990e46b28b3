//! Hostile clients of the Redis port's transactions and password: a
//! `MULTI` queue is bounded by a count and by the shared request budget,
//! `EXEC`'s reply by its cap and the budget (the transaction is then
//! discarded, nothing written), and a client without the password gets
//! `NOAUTH` for everything, writes nothing, and costs no more than that.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::io::{Read, Write};
use std::sync::Arc;

use lamina::{Db, Options};
use lamina_server::password::Password;
use lamina_server::request_budget::RequestBudget;
use lamina_server::resp::MAX_QUEUED;
use lamina_server::{Server, ServerConfig};

mod common;
use common::resp3::{bulk, ok, queued, Client, Reply};
use common::{request, serve, stop, Running};

fn start(dir: &std::path::Path, config: ServerConfig) -> Running {
    let db = Arc::new(Db::open(dir, Options::default()).unwrap());
    let server = Server::bind_resp(Arc::clone(&db), "127.0.0.1:0", false)
        .unwrap()
        .with_config(config);
    serve(db, server)
}

fn is_err(r: &Reply, prefix: &str) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with(prefix))
}

#[test]
fn a_multi_queue_stops_at_its_count_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start(&tmp.path().join("db"), ServerConfig::default());
    let mut c = Client::connect(running.addr);
    assert_eq!(c.words("MULTI"), ok());
    let mut wire = Vec::new();
    for _ in 0..MAX_QUEUED {
        wire.extend(request(&[b"INCR", b"n"]));
    }
    wire.extend(request(&[b"INCR", b"n"]));
    wire.extend(request(&[b"EXEC"]));
    let sender = {
        let mut w = c.w.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&wire).unwrap())
    };
    for _ in 0..MAX_QUEUED {
        assert_eq!(c.read(), queued());
    }
    assert!(is_err(&c.read(), "ERR MULTI queues at most"));
    assert!(is_err(&c.read(), "EXECABORT"));
    sender.join().unwrap();
    assert_eq!(c.words("GET n"), Reply::Bulk(None));
    stop(running);
}

/// A small budget: the queue's bytes count against it, and once past it
/// the transaction is refused (or the connection closed, when the next
/// request itself no longer fits); either way nothing is written and the
/// budget is whole again afterwards.
#[test]
fn a_multi_queue_and_an_exec_reply_count_against_the_request_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let budget = 4 << 20;
    let config = ServerConfig {
        request_budget: Arc::new(RequestBudget::new(budget)),
        ..ServerConfig::default()
    };
    let running = start(&tmp.path().join("db"), config);
    let value = vec![b'v'; 700 << 10];
    let mut c = Client::connect(running.addr);
    assert_eq!(c.words("MULTI"), ok());
    let mut refused = false;
    for i in 0..10 {
        // The server may close while this is sent: the write may fail.
        let _ =
            c.w.write_all(&request(&[b"SET", format!("k{i}").as_bytes(), &value]));
        match c.read() {
            r if r == queued() => {}
            r => {
                // Refused: the queue (the command is not queued), or the
                // request itself (the connection closes).
                assert!(
                    is_err(&r, "ERR MULTI queue over the request budget")
                        || is_err(&r, "ERR unfinished request"),
                    "{r:?}"
                );
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "ten 700 KiB commands queued within a 4 MiB budget");
    drop(c);
    let mut d = Client::connect(running.addr);
    assert_eq!(d.words("EXISTS k0 k1 k2"), Reply::Int(0));
    // The budget is whole again: a 3 MiB request fits.
    assert_eq!(d.cmd(&[b"SET", b"big", &vec![b'b'; 3 << 20]]), ok());

    // EXEC's reply, gathered before the batch is written, is held against
    // the budget too: six reads of a 1 MiB value do not fit in 4 MiB.
    assert_eq!(d.cmd(&[b"SET", b"one", &vec![b'1'; 1 << 20]]), ok());
    assert_eq!(d.words("MULTI"), ok());
    assert_eq!(d.words("SET marker 1"), queued());
    for _ in 0..6 {
        assert_eq!(d.words("GET one"), queued());
    }
    let reply = d.words("EXEC");
    assert!(is_err(&reply, "ERR EXEC reply"), "{reply:?}");
    assert!(matches!(&reply, Reply::Error(e) if e.contains("nothing written")));
    assert_eq!(d.words("GET marker"), Reply::Bulk(None));
    // A transaction that fits runs.
    assert_eq!(d.words("MULTI"), ok());
    assert_eq!(d.words("SET marker 2"), queued());
    assert_eq!(d.words("GET marker"), queued());
    assert_eq!(d.words("EXEC"), Reply::Array(Some(vec![ok(), bulk(b"2")])));
    stop(running);
}

#[test]
fn without_the_password_a_flood_gets_noauth_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        requirepass: Some(Password::new(b"correct horse".to_vec(), "test").unwrap()),
        ..ServerConfig::default()
    };
    let running = start(&tmp.path().join("db"), config);
    let mut c = Client::connect(running.addr);
    let mut wire = Vec::new();
    for i in 0..5_000u32 {
        let k = i.to_be_bytes();
        wire.extend(request(&[b"SET", &k, b"v"]));
        wire.extend(request(&[b"MULTI"]));
        wire.extend(request(&[b"AUTH", &k]));
        wire.extend(request(&[b"HELLO", b"3", b"AUTH", b"default", &k]));
    }
    wire.extend(request(&[b"QUIT"]));
    let sender = {
        let mut w = c.w.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&wire).unwrap())
    };
    for _ in 0..5_000 {
        assert_eq!(
            c.read(),
            Reply::Error("NOAUTH Authentication required.".into())
        );
        assert_eq!(
            c.read(),
            Reply::Error("NOAUTH Authentication required.".into())
        );
        assert!(is_err(&c.read(), "WRONGPASS"));
        assert!(is_err(&c.read(), "WRONGPASS"));
    }
    assert_eq!(c.read(), ok());
    let mut rest = Vec::new();
    c.r.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    sender.join().unwrap();
    let mut d = Client::connect(running.addr);
    assert_eq!(d.cmd(&[b"AUTH", b"correct horse"]), ok());
    assert_eq!(d.words("DBSIZE"), Reply::Int(0));
    stop(running);
}
