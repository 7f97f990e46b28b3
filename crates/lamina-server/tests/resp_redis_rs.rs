//! A second client library, the Rust `redis` crate, unmodified, runs a
//! scripted session on the Redis port in RESP2 and in RESP3 (its `HELLO 3`
//! handshake), with a password and without: the values it reads back are
//! checked against a `BTreeMap` model kept here.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::collections::BTreeMap;
use std::sync::Arc;

use lamina::{Db, Options};
use lamina_server::password::Password;
use lamina_server::{Server, ServerConfig};
use redis::{Commands, ProtocolVersion, RedisResult, Value};

mod common;
use common::{serve, stop, Running};

fn start(dir: &std::path::Path, password: Option<&str>) -> Running {
    let db = Arc::new(Db::open(dir, Options::default()).unwrap());
    let config = ServerConfig {
        requirepass: password.map(|p| Password::new(p.as_bytes().to_vec(), "test").unwrap()),
        ..ServerConfig::default()
    };
    let server = Server::bind_resp(Arc::clone(&db), "127.0.0.1:0", false)
        .unwrap()
        .with_config(config);
    serve(db, server)
}

/// The scripted session: strings, counters, a transaction, a scan.
fn session(con: &mut redis::Connection, protocol: ProtocolVersion) {
    let mut model: BTreeMap<String, String> = BTreeMap::new();
    for i in 0..50 {
        let (k, v) = (format!("key:{i:02}"), format!("value {i}"));
        let _: () = con.set(&k, &v).unwrap();
        model.insert(k, v);
    }
    let got: Option<String> = con.get("key:07").unwrap();
    assert_eq!(got.as_deref(), Some("value 7"));
    let missing: Option<String> = con.get("nope").unwrap();
    assert_eq!(missing, None);
    let many: Vec<Option<String>> = con.mget(&["key:01", "nope", "key:02"]).unwrap();
    assert_eq!(many, [Some("value 1".into()), None, Some("value 2".into())]);
    let n: i64 = con.incr("counter", 5).unwrap();
    assert_eq!(n, 5);
    let n: i64 = con.decr("counter", 7).unwrap();
    assert_eq!(n, -2);
    model.insert("counter".into(), "-2".into());
    let removed: i64 = con.del(&["key:03", "nope"]).unwrap();
    assert_eq!(removed, 1);
    model.remove("key:03");
    // An atomic pipeline is MULTI ... EXEC.
    let (count, value): (i64, String) = redis::pipe()
        .atomic()
        .set("tx", "1")
        .ignore()
        .incr("tx", 41)
        .get("tx")
        .query(con)
        .unwrap();
    assert_eq!((count, value.as_str()), (42, "42"));
    model.insert("tx".into(), "42".into());
    // SCAN through the crate's iterator sees the model's keys.
    let mut keys: Vec<String> = con
        .scan_match("key:*")
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    keys.sort();
    let want: Vec<String> = model
        .keys()
        .filter(|k| k.starts_with("key:"))
        .cloned()
        .collect();
    assert_eq!(keys, want);
    let size: i64 = redis::cmd("DBSIZE").query(con).unwrap();
    assert_eq!(size as usize, model.len());
    // The protocol the handshake chose: HELLO's map says it.
    let hello: Value = redis::cmd("HELLO").query(con).unwrap();
    let proto = match (&hello, protocol) {
        (Value::Map(pairs), ProtocolVersion::RESP3) => pairs
            .iter()
            .find(|(k, _)| *k == Value::BulkString(b"proto".to_vec()))
            .map(|(_, v)| v.clone()),
        (Value::Array(flat), ProtocolVersion::RESP2) => flat
            .chunks(2)
            .find(|kv| kv[0] == Value::BulkString(b"proto".to_vec()))
            .map(|kv| kv[1].clone()),
        other => panic!("HELLO in {protocol:?}: {other:?}"),
    };
    let want = if protocol == ProtocolVersion::RESP3 {
        3
    } else {
        2
    };
    assert_eq!(proto, Some(Value::Int(want)));
    for (k, v) in &model {
        let got: String = con.get(k).unwrap();
        assert_eq!(&got, v);
    }
}

#[test]
fn the_redis_crate_runs_a_session_in_resp2_and_resp3() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, protocol) in [ProtocolVersion::RESP2, ProtocolVersion::RESP3]
        .into_iter()
        .enumerate()
    {
        let running = start(&tmp.path().join(format!("db{i}")), None);
        let p = if protocol == ProtocolVersion::RESP3 {
            3
        } else {
            2
        };
        let url = format!("redis://{}/?protocol={p}", running.addr);
        let client = redis::Client::open(url).unwrap();
        let mut con = client.get_connection().unwrap();
        session(&mut con, protocol);
        drop(con);
        stop(running);
    }
}

#[test]
fn the_redis_crate_authenticates_with_the_password() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start(&tmp.path().join("db"), Some("pa55"));
    for p in [2, 3] {
        let url = format!("redis://127.0.0.1:{}/?protocol={p}", running.addr.port());
        let refused: RedisResult<()> = redis::Client::open(url)
            .unwrap()
            .get_connection()
            .and_then(|mut c| c.set("k", "v"));
        assert!(refused.is_err(), "protocol {p}: no password");
        let url = format!(
            "redis://:pa55@127.0.0.1:{}/?protocol={p}",
            running.addr.port()
        );
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = con.set("k", p).unwrap();
        let got: i64 = con.get("k").unwrap();
        assert_eq!(got, p);
        let url = format!(
            "redis://:wrong@127.0.0.1:{}/?protocol={p}",
            running.addr.port()
        );
        assert!(redis::Client::open(url).unwrap().get_connection().is_err());
    }
    stop(running);
}
