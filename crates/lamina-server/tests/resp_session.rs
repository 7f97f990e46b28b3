//! The Redis port's handshakes, transactions, counters and password,
//! through the RESP2/RESP3 client of `common::resp3` (written here, not the
//! server's encoder), against Redis's documented replies and models kept by
//! the test.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use lamina::{Db, Options};
use lamina_server::password::Password;
use lamina_server::{Server, ServerConfig};

mod common;
use common::resp3::{array, bulk, ok, queued, Client, Reply};
use common::{serve, start_resp, stop, Running};

fn err_starts(r: &Reply, prefix: &str) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with(prefix))
}

/// Regression: `HELLO 3` was answered `NOPROTO`, so redis-py 8 (protocol
/// 3 by default) could not connect.
#[test]
fn hello_switches_the_connection_to_resp3_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), false);
    let mut c = Client::connect(running.addr);
    // HELLO without a version: the server's description, in RESP2 a flat
    // array of pairs.
    let hello = c.words("HELLO");
    assert!(
        matches!(&hello, Reply::Array(Some(a)) if a.len() == 14),
        "{hello:?}"
    );
    assert_eq!(hello.get("proto"), Some(&Reply::Int(2)));
    assert_eq!(c.words("GET missing"), Reply::Bulk(None));

    let hello = c.words("HELLO 3 SETNAME worker-1");
    assert!(matches!(&hello, Reply::Map(m) if m.len() == 7), "{hello:?}");
    assert_eq!(hello.get("proto"), Some(&Reply::Int(3)));
    assert_eq!(hello.get("server"), Some(&bulk(b"redis")));
    assert_eq!(hello.get("modules"), Some(&array(vec![])));
    let Some(Reply::Int(id)) = hello.get("id").cloned() else {
        panic!("{hello:?}")
    };
    assert_eq!(c.words("CLIENT ID"), Reply::Int(id));
    assert_eq!(c.words("CLIENT GETNAME"), bulk(b"worker-1"));
    // RESP3's types: null, maps, sets, verbatim strings.
    assert_eq!(c.words("GET missing"), Reply::Null);
    assert_eq!(c.words("SET k v"), ok());
    assert_eq!(
        c.words("MGET k missing"),
        array(vec![bulk(b"v"), Reply::Null])
    );
    assert_eq!(c.words("SET k w NX"), Reply::Null);
    assert_eq!(
        c.words("CONFIG GET appendonly"),
        Reply::Map(vec![(bulk(b"appendonly"), bulk(b"yes"))])
    );
    let Reply::Verbatim(format, text) = c.words("INFO keyspace") else {
        panic!("INFO is a verbatim string in RESP3")
    };
    assert_eq!(format, "txt");
    assert!(String::from_utf8(text).unwrap().contains("db0:keys=1,"));
    let Reply::Array(Some(info)) = c.words("COMMAND INFO get") else {
        panic!()
    };
    let Reply::Array(Some(fields)) = &info[0] else {
        panic!()
    };
    assert!(
        matches!(&fields[2], Reply::Set(flags) if flags.contains(&Reply::Simple("readonly".into())))
    );
    // Back to RESP2, and versions that do not exist.
    assert_eq!(c.words("HELLO 2").get("proto"), Some(&Reply::Int(2)));
    assert_eq!(c.words("GET missing"), Reply::Bulk(None));
    assert!(err_starts(&c.words("HELLO 4"), "NOPROTO"));
    assert!(err_starts(&c.words("HELLO x"), "ERR Protocol version"));
    assert!(err_starts(
        &c.words("HELLO 3 SETNAME"),
        "ERR Syntax error in HELLO option 'setname'"
    ));
    assert!(err_starts(
        &c.words("HELLO 3 AUTH default"),
        "ERR Syntax error"
    ));
    // A refused HELLO changes nothing.
    assert_eq!(c.words("GET missing"), Reply::Bulk(None));
    assert!(err_starts(
        &c.cmd(&[b"CLIENT", b"SETNAME", b"a b"]),
        "ERR Client names cannot contain spaces"
    ));
    stop(running);
}

/// Regression: `MULTI` ... `EXEC` ran each command when it arrived, so
/// another client saw a half-applied transaction.
#[test]
fn multi_queues_until_exec_and_applies_everything_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), false);
    let mut c = Client::connect(running.addr);
    let mut other = Client::connect(running.addr);
    assert_eq!(c.words("SET n 10"), ok());
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("SET a 1"), queued());
    assert_eq!(c.words("INCRBY n 5"), queued());
    assert_eq!(c.words("GET a"), queued());
    assert_eq!(c.words("DEL n missing"), queued());
    assert_eq!(c.words("MSET b 2 c 3"), queued());
    // Nothing is applied yet.
    assert_eq!(
        other.words("MGET a n b"),
        array(vec![Reply::Bulk(None), bulk(b"10"), Reply::Bulk(None)])
    );
    assert!(err_starts(
        &c.words("MULTI"),
        "ERR MULTI calls can not be nested"
    ));
    assert!(err_starts(&c.words("WATCH a"), "ERR WATCH inside MULTI"));
    // Reads inside the transaction see its own earlier writes.
    assert_eq!(
        c.words("EXEC"),
        array(vec![ok(), Reply::Int(15), bulk(b"1"), Reply::Int(1), ok()])
    );
    assert_eq!(
        other.words("MGET a n b c"),
        array(vec![bulk(b"1"), Reply::Bulk(None), bulk(b"2"), bulk(b"3")])
    );
    // DISCARD drops the queue; EXEC and DISCARD need a MULTI.
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("SET a discarded"), queued());
    assert_eq!(c.words("DISCARD"), ok());
    assert_eq!(c.words("GET a"), bulk(b"1"));
    assert!(err_starts(&c.words("EXEC"), "ERR EXEC without MULTI"));
    assert!(err_starts(&c.words("DISCARD"), "ERR DISCARD without MULTI"));
    // An error at queue time (unknown command, wrong arity, a command
    // MULTI does not queue) aborts the whole transaction, as in Redis.
    for bad in ["NOPE x", "GET", "SCAN 0"] {
        assert_eq!(c.words("MULTI"), ok());
        assert_eq!(c.words("SET a aborted"), queued());
        assert!(err_starts(&c.words(bad), "ERR"), "{bad}");
        assert!(err_starts(&c.words("EXEC"), "EXECABORT"), "{bad}");
        assert_eq!(c.words("GET a"), bulk(b"1"), "{bad}");
    }
    // An error when run (INCR of a non-integer) is that command's reply;
    // the others are applied, as in Redis.
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("INCR b"), queued());
    assert_eq!(c.words("INCR a"), queued());
    assert_eq!(c.words("SET b text"), queued());
    assert_eq!(c.words("INCR b"), queued());
    let Reply::Array(Some(replies)) = c.words("EXEC") else {
        panic!()
    };
    assert_eq!(replies[..3], [Reply::Int(3), Reply::Int(2), ok()]);
    assert!(err_starts(&replies[3], "ERR value is not an integer"));
    assert_eq!(
        other.words("MGET a b"),
        array(vec![bulk(b"2"), bulk(b"text")])
    );
    // QUIT inside MULTI closes at once; nothing queued is applied.
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("SET a never"), queued());
    assert_eq!(c.words("QUIT"), ok());
    assert_eq!(other.words("GET a"), bulk(b"2"));
    stop(running);
}

#[test]
fn watch_aborts_exec_when_a_watched_value_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), false);
    let mut c = Client::connect(running.addr);
    let mut other = Client::connect(running.addr);
    assert_eq!(c.words("SET balance 100"), ok());
    assert_eq!(c.words("WATCH balance"), ok());
    assert_eq!(other.words("SET balance 50"), ok());
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("SET balance 90"), queued());
    assert_eq!(c.words("EXEC"), Reply::Array(None));
    assert_eq!(c.words("GET balance"), bulk(b"50"));
    // Unchanged (and after EXEC, nothing is watched any more).
    assert_eq!(c.words("WATCH balance missing"), ok());
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("DECRBY balance 10"), queued());
    assert_eq!(c.words("EXEC"), array(vec![Reply::Int(40)]));
    assert_eq!(other.words("SET balance 7"), ok());
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("INCR balance"), queued());
    assert_eq!(c.words("EXEC"), array(vec![Reply::Int(8)]));
    // UNWATCH forgets; a watched key created meanwhile aborts (RESP3: null).
    assert_eq!(c.words("WATCH balance"), ok());
    assert_eq!(other.words("SET balance 1"), ok());
    assert_eq!(c.words("UNWATCH"), ok());
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("EXEC"), array(vec![]));
    assert_eq!(c.words("HELLO 3").get("proto"), Some(&Reply::Int(3)));
    assert_eq!(c.words("WATCH fresh"), ok());
    assert_eq!(other.words("SET fresh 1"), ok());
    assert_eq!(c.words("MULTI"), ok());
    assert_eq!(c.words("DEL fresh"), queued());
    assert_eq!(c.words("EXEC"), Reply::Null);
    assert_eq!(c.words("EXISTS fresh"), Reply::Int(1));
    stop(running);
}

/// A reader never sees half of a transaction: every MGET of the two keys
/// a writer's transactions set together reads equal values, and so does a
/// transaction that reads them.
#[test]
fn a_transaction_is_seen_whole_or_not_at_all() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), false);
    let addr = running.addr;
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let done = Arc::clone(&done);
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                let mut seen = 0;
                while !done.load(Ordering::Relaxed) {
                    let reply = if r == 0 {
                        c.words("MULTI");
                        c.words("GET from");
                        c.words("GET to");
                        c.words("EXEC")
                    } else {
                        c.words("MGET from to")
                    };
                    let Reply::Array(Some(v)) = reply else {
                        panic!("{reply:?}")
                    };
                    assert_eq!(v[0], v[1], "a half-applied transaction");
                    seen += 1;
                }
                seen
            })
        })
        .collect();
    let mut w = Client::connect(addr);
    for i in 0..400 {
        let i = i.to_string();
        w.words("MULTI");
        w.cmd(&[b"SET", b"from", i.as_bytes()]);
        w.cmd(&[b"SET", b"to", i.as_bytes()]);
        assert_eq!(w.words("EXEC"), array(vec![ok(), ok()]));
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    stop(running);
}

/// INCR and its kin are read-modify-writes under the port's write lock:
/// many clients incrementing one key lose no increment.
#[test]
fn concurrent_increments_from_many_clients_add_up_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), false);
    let addr = running.addr;
    let clients: Vec<_> = (0..8i64)
        .map(|t| {
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                // Pipelined, mixing the four commands; returns its net sum.
                let mut sum = 0;
                let mut wire = Vec::new();
                for i in 0..500i64 {
                    let by = (t * 7 + i) % 5 - 1;
                    let req = match i % 4 {
                        0 => vec!["INCR".to_string(), "counter".into()],
                        1 => vec!["DECR".to_string(), "counter".into()],
                        2 => vec!["INCRBY".to_string(), "counter".into(), by.to_string()],
                        _ => vec!["DECRBY".to_string(), "counter".into(), by.to_string()],
                    };
                    sum += match i % 4 {
                        0 => 1,
                        1 => -1,
                        2 => by,
                        _ => -by,
                    };
                    let args: Vec<&[u8]> = req.iter().map(|s| s.as_bytes()).collect();
                    wire.extend(common::request(&args));
                }
                std::io::Write::write_all(&mut c.w, &wire).unwrap();
                for _ in 0..500 {
                    assert!(matches!(c.read(), Reply::Int(_)));
                }
                sum
            })
        })
        .collect();
    let total: i64 = clients.into_iter().map(|t| t.join().unwrap()).sum();
    let mut c = Client::connect(addr);
    assert_eq!(c.words("GET counter"), bulk(total.to_string().as_bytes()));
    // Redis's integer rules.
    assert_eq!(c.words("INCRBY fresh -3"), Reply::Int(-3));
    for (value, cmd) in [
        ("007", "INCR"),
        (" 1", "INCR"),
        ("+1", "INCR"),
        ("1.5", "DECR"),
        ("", "INCR"),
    ] {
        c.cmd(&[b"SET", b"v", value.as_bytes()]);
        assert!(
            err_starts(
                &c.cmd(&[cmd.as_bytes(), b"v"]),
                "ERR value is not an integer"
            ),
            "{value:?}"
        );
    }
    assert!(err_starts(
        &c.words("INCRBY v x"),
        "ERR value is not an integer"
    ));
    c.words(&format!("SET big {}", i64::MAX));
    assert!(err_starts(
        &c.words("INCR big"),
        "ERR increment or decrement would overflow"
    ));
    assert!(err_starts(
        &c.words(&format!("DECRBY v {}", i64::MIN)),
        "ERR decrement would overflow"
    ));
    assert_eq!(c.words("GET big"), bulk(i64::MAX.to_string().as_bytes()));
    stop(running);
}

fn start_with_password(dir: &std::path::Path, password: &str) -> Running {
    let db = Arc::new(Db::open(dir, Options::default()).unwrap());
    let config = ServerConfig {
        requirepass: Some(Password::new(password.as_bytes().to_vec(), "test").unwrap()),
        ..ServerConfig::default()
    };
    let server = Server::bind_resp(Arc::clone(&db), "127.0.0.1:0", false)
        .unwrap()
        .with_config(config);
    serve(db, server)
}

#[test]
fn a_password_gates_every_command_but_auth_hello_and_quit() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_with_password(&tmp.path().join("db"), "open sesame");
    let mut c = Client::connect(running.addr);
    for cmd in [
        "PING",
        "GET k",
        "SET k v",
        "MULTI",
        "COMMAND COUNT",
        "INFO",
        "SELECT 0",
        "NOPE",
    ] {
        assert_eq!(
            c.words(cmd),
            Reply::Error("NOAUTH Authentication required.".into()),
            "{cmd}"
        );
    }
    assert!(err_starts(
        &c.words("HELLO 3"),
        "NOAUTH HELLO must be called"
    ));
    assert!(err_starts(&c.words("AUTH wrong"), "WRONGPASS"));
    assert!(err_starts(&c.cmd(&[b"AUTH", b"open sesame!"]), "WRONGPASS"));
    assert!(err_starts(
        &c.cmd(&[b"AUTH", b"someone", b"open sesame"]),
        "WRONGPASS"
    ));
    assert!(err_starts(
        &c.cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"nope"]),
        "WRONGPASS"
    ));
    assert!(err_starts(&c.words("GET k"), "NOAUTH"));
    // HELLO's AUTH lets it in and switches protocol at once.
    let hello = c.cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"open sesame"]);
    assert_eq!(hello.get("proto"), Some(&Reply::Int(3)));
    assert_eq!(c.words("GET k"), Reply::Null);
    // AUTH password and AUTH default password, on other connections.
    let mut d = Client::connect(running.addr);
    assert_eq!(d.cmd(&[b"AUTH", b"open sesame"]), ok());
    assert_eq!(d.words("SET k v"), ok());
    let mut e = Client::connect(running.addr);
    assert_eq!(e.cmd(&[b"AUTH", b"default", b"open sesame"]), ok());
    assert_eq!(e.words("GET k"), bulk(b"v"));
    // QUIT needs no password.
    let mut f = Client::connect(running.addr);
    assert_eq!(f.words("QUIT"), ok());
    stop(running);

    // Without a password, AUTH is an error, as in Redis.
    let running = start_resp(&tmp.path().join("db2"), false);
    let mut c = Client::connect(running.addr);
    assert!(err_starts(
        &c.words("AUTH x"),
        "ERR AUTH <password> called without any password configured"
    ));
    assert_eq!(c.words("PING"), Reply::Simple("PONG".into()));
    stop(running);
}

#[test]
fn info_keyspace_and_command_docs_describe_this_server() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), false);
    let mut c = Client::connect(running.addr);
    // As Redis: an empty database has no db0 line.
    let empty = c.words("INFO keyspace").text();
    assert_eq!(empty, "# Keyspace\r\n");
    assert_eq!(c.words("MSET a 1 b 2 c 3"), ok());
    assert_eq!(c.words("DEL b"), Reply::Int(1));
    let info = c.words("INFO keyspace").text();
    assert_eq!(info, "# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n");
    let all = c.words("INFO").text();
    for section in ["# Server", "# Stats", "# Keyspace", "db0:keys=2,"] {
        assert!(all.contains(section), "{section}: {all}");
    }
    assert!(!c.words("INFO server").text().contains("Keyspace"));
    // COMMAND COUNT, LIST and INFO agree; every command listed answers
    // something other than "unknown command".
    let Reply::Int(count) = c.words("COMMAND COUNT") else {
        panic!()
    };
    let Reply::Array(Some(names)) = c.words("COMMAND LIST") else {
        panic!()
    };
    assert_eq!(names.len() as i64, count);
    for n in [
        "get", "set", "incr", "incrby", "decr", "decrby", "multi", "exec", "discard", "watch",
        "auth", "hello",
    ] {
        assert!(names.contains(&bulk(n.as_bytes())), "{n}");
    }
    for n in names.iter().filter(|n| n.text() != "quit") {
        let reply = c.cmd(&[n.text().as_bytes(), b"x", b"y", b"z"]);
        assert!(
            !matches!(&reply, Reply::Error(e) if e.contains("unknown command")),
            "{n:?}"
        );
        if n.text() == "multi" {
            // Left in MULTI by the probe? (MULTI x y z is an arity error.)
            assert!(err_starts(&reply, "ERR wrong number"));
        }
    }
    let Reply::Array(Some(all_info)) = c.words("COMMAND") else {
        panic!()
    };
    assert_eq!(all_info.len() as i64, count);
    let Reply::Array(Some(info)) = c.words("COMMAND INFO get nope") else {
        panic!()
    };
    let Reply::Array(Some(get)) = &info[0] else {
        panic!()
    };
    assert_eq!(get[..2], [bulk(b"get"), Reply::Int(2)]);
    assert_eq!(get[3..6], [Reply::Int(1), Reply::Int(1), Reply::Int(1)]);
    assert_eq!(info[1], Reply::Bulk(None));
    // COMMAND DOCS: Redis 7's doc maps (what redis-cli's HELP and hints
    // read).
    let docs = c.words("COMMAND DOCS set incrby");
    let set = docs.get("set").unwrap();
    assert_eq!(set.get("group").unwrap().text(), "string");
    assert!(set
        .get("summary")
        .unwrap()
        .text()
        .starts_with("Sets the string value"));
    let Some(Reply::Array(Some(args))) = set.get("arguments") else {
        panic!("{set:?}")
    };
    let names: Vec<String> = args.iter().map(|a| a.get("name").unwrap().text()).collect();
    assert_eq!(names, ["key", "value", "condition", "get"]);
    assert_eq!(args[2].get("type").unwrap().text(), "oneof");
    assert_eq!(args[3].get("token").unwrap().text(), "GET");
    assert!(docs.get("incrby").is_some());
    assert!(err_starts(
        &c.words("COMMAND GETKEYS get a"),
        "ERR unknown subcommand"
    ));
    stop(running);
}
