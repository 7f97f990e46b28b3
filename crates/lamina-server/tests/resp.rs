//! The Redis protocol port against a `BTreeMap` model, through a RESP
//! client written here (independent of the server's parser and encoder).
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

use Reply::*;

fn ok() -> Reply {
    Simple("OK".into())
}

fn bulk(b: &[u8]) -> Reply {
    Bulk(Some(b.to_vec()))
}

struct Client {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let w = TcpStream::connect(addr).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        Client { w, r }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        assert!(l.ends_with("\r\n"), "{l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> Reply {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => Simple(rest.into()),
            "-" => Error(rest.into()),
            ":" => Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Bulk(None);
                }
                let mut b = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut b).unwrap();
                assert_eq!(&b[n as usize..], b"\r\n");
                b.truncate(n as usize);
                Bulk(Some(b))
            }
            "*" => {
                let n: usize = rest.parse().unwrap();
                Array((0..n).map(|_| self.read()).collect())
            }
            other => panic!("bad reply type {other:?}"),
        }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Reply {
        self.w.write_all(&request(args)).unwrap();
        self.read()
    }
}

mod common;
use common::{request, start_resp, stop};

fn key(rng: &mut StdRng) -> Vec<u8> {
    // A small domain with the bytes a text protocol would trip on.
    let mut k = vec![b'k', rng.gen_range(0..40u8)];
    if rng.gen_bool(0.3) {
        k.extend_from_slice(b"\r\n\x00");
    }
    k
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let n = rng.gen_range(0..40);
    (0..n).map(|_| rng.gen()).collect()
}

/// Builds a random command, its expected reply from the model, and applies
/// it to the model.
fn random_command(
    rng: &mut StdRng,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> (Vec<Vec<u8>>, Reply) {
    let k = key(rng);
    match rng.gen_range(0..9) {
        0 | 1 => {
            let v = value(rng);
            model.insert(k.clone(), v.clone());
            (vec![b"SET".to_vec(), k, v], ok())
        }
        2 => {
            let v = value(rng);
            let (opt, write, reply) = match rng.gen_range(0..3) {
                0 => ("NX", !model.contains_key(&k), None),
                1 => ("XX", model.contains_key(&k), None),
                _ => ("GET", true, Some(Bulk(model.get(&k).cloned()))),
            };
            let reply = reply.unwrap_or(if write { ok() } else { Bulk(None) });
            if write {
                model.insert(k.clone(), v.clone());
            }
            (vec![b"set".to_vec(), k, v, opt.as_bytes().to_vec()], reply)
        }
        3 => (
            vec![b"GET".to_vec(), k.clone()],
            Bulk(model.get(&k).cloned()),
        ),
        4 => {
            let ks: Vec<Vec<u8>> = (0..rng.gen_range(1..4)).map(|_| key(rng)).collect();
            let mut n = 0;
            for k in &ks {
                if model.remove(k).is_some() {
                    n += 1;
                }
            }
            let mut args = vec![b"DEL".to_vec()];
            args.extend(ks);
            (args, Int(n))
        }
        5 => {
            let ks: Vec<Vec<u8>> = (0..rng.gen_range(1..4)).map(|_| key(rng)).collect();
            let n = ks.iter().filter(|k| model.contains_key(*k)).count() as i64;
            let mut args = vec![b"exists".to_vec()];
            args.extend(ks);
            (args, Int(n))
        }
        6 => {
            let ks: Vec<Vec<u8>> = (0..rng.gen_range(1..5)).map(|_| key(rng)).collect();
            let reply = Array(ks.iter().map(|k| Bulk(model.get(k).cloned())).collect());
            let mut args = vec![b"MGET".to_vec()];
            args.extend(ks);
            (args, reply)
        }
        7 => {
            let mut args = vec![b"MSET".to_vec()];
            for _ in 0..rng.gen_range(1..4) {
                let (k, v) = (key(rng), value(rng));
                model.insert(k.clone(), v.clone());
                args.push(k);
                args.push(v);
            }
            (args, ok())
        }
        _ => (vec![b"DBSIZE".to_vec()], Int(model.len() as i64)),
    }
}

/// Every key SCAN returns from cursor 0 to 0, with `extra` arguments.
fn scan_all(c: &mut Client, extra: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut cursor = b"0".to_vec();
    let mut keys = Vec::new();
    loop {
        let mut args: Vec<&[u8]> = vec![b"SCAN", &cursor];
        args.extend_from_slice(extra);
        let Array(parts) = c.cmd(&args) else {
            panic!("scan reply")
        };
        let [Bulk(Some(next)), Array(found)] = parts.as_slice() else {
            panic!("{parts:?}")
        };
        for k in found {
            let Bulk(Some(k)) = k else { panic!("{k:?}") };
            keys.push(k.clone());
        }
        if next == b"0" {
            return keys;
        }
        cursor = next.clone();
    }
}

#[test]
fn pipelined_commands_equal_the_model_and_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut model = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(7);
    let running = start_resp(&dir, false);
    let mut c = Client::connect(running.addr);
    for round in 0..60 {
        // Pipelines of 1 to 80 commands, written at once, then read.
        let n = if round % 10 == 0 {
            1
        } else {
            rng.gen_range(2..80)
        };
        let mut wire = Vec::new();
        let mut want = Vec::new();
        for _ in 0..n {
            let (args, reply) = random_command(&mut rng, &mut model);
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            wire.extend(request(&refs));
            want.push((args, reply));
        }
        c.w.write_all(&wire).unwrap();
        for (args, reply) in want {
            assert_eq!(c.read(), reply, "round {round}: {args:?}");
        }
    }
    assert!(model.len() > 20, "{}", model.len());
    // SCAN in small steps sees every key once, in order.
    let keys = scan_all(&mut c, &[b"COUNT", b"3"]);
    assert_eq!(keys, model.keys().cloned().collect::<Vec<_>>());
    // MATCH filters (a glob on the key bytes).
    let want: Vec<Vec<u8>> = model
        .keys()
        .filter(|k| k.len() == 2 && (b'\x05'..=b'\x09').contains(&k[1]))
        .cloned()
        .collect();
    let got = scan_all(&mut c, &[b"MATCH", b"k[\x05-\x09]", b"COUNT", b"7"]);
    assert_eq!(got, want);
    assert_eq!(scan_all(&mut c, &[b"TYPE", b"hash"]), Vec::<Vec<u8>>::new());
    assert_eq!(c.cmd(&[b"QUIT"]), ok());
    let mut rest = Vec::new();
    c.r.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "the server closes after QUIT");
    stop(running);

    let running = start_resp(&dir, false);
    let mut c = Client::connect(running.addr);
    for (k, v) in &model {
        assert_eq!(c.cmd(&[b"GET", k]), bulk(v));
    }
    assert_eq!(c.cmd(&[b"DBSIZE"]), Int(model.len() as i64));
    stop(running);
}

#[test]
fn errors_read_like_redis_and_bad_framing_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), false);
    let mut c = Client::connect(running.addr);
    assert_eq!(c.cmd(&[b"PING"]), Simple("PONG".into()));
    assert_eq!(c.cmd(&[b"ECHO", b"a\r\nb"]), bulk(b"a\r\nb"));
    assert_eq!(
        c.cmd(&[b"NOPE", b"x"]),
        Error("ERR unknown command 'nope', with args beginning with: 'x'".into())
    );
    assert_eq!(
        c.cmd(&[b"GET"]),
        Error("ERR wrong number of arguments for 'get' command".into())
    );
    assert_eq!(
        c.cmd(&[b"MSET", b"a"]),
        Error("ERR wrong number of arguments for 'mset' command".into())
    );
    assert!(matches!(c.cmd(&[b"SET", b"k", b"v", b"EX", b"10"]), Error(e) if e.contains("expiry")));
    assert!(matches!(c.cmd(&[b"SET", b"k", b"v", b"NX", b"XX"]), Error(e) if e.contains("syntax")));
    assert!(matches!(c.cmd(&[b"SCAN", b"12345"]), Error(e) if e.contains("invalid cursor")));
    assert!(matches!(c.cmd(&[b"FLUSHALL"]), Error(e) if e.contains("--allow-flushall")));
    assert!(matches!(c.cmd(&[b"HELLO", b"4"]), Error(e) if e.starts_with("NOPROTO")));
    assert_eq!(c.cmd(&[b"SELECT", b"0"]), ok());
    assert!(matches!(c.cmd(&[b"SELECT", b"1"]), Error(_)));
    // Inline commands, as typed into telnet.
    c.w.write_all(b"set \"in line\" 'v v'\r\nget \"in line\"\r\n")
        .unwrap();
    assert_eq!(c.read(), ok());
    assert_eq!(c.read(), bulk(b"v v"));
    // A malformed bulk length: an error, then the server closes.
    c.w.write_all(b"*1\r\n$abc\r\n").unwrap();
    assert!(matches!(c.read(), Error(e) if e.starts_with("ERR Protocol error")));
    let mut rest = Vec::new();
    c.r.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    stop(running);
}

#[test]
fn flushall_when_allowed_deletes_every_key() {
    let tmp = tempfile::tempdir().unwrap();
    let running = start_resp(&tmp.path().join("db"), true);
    let mut c = Client::connect(running.addr);
    let mut wire = Vec::new();
    let mut keys = BTreeSet::new();
    for i in 0..25_000u32 {
        let k = i.to_be_bytes();
        keys.insert(k.to_vec());
        wire.extend(request(&[b"SET", &k, b"v"]));
    }
    c.w.write_all(&wire).unwrap();
    for _ in 0..25_000 {
        assert_eq!(c.read(), ok());
    }
    assert_eq!(c.cmd(&[b"DBSIZE"]), Int(25_000));
    assert_eq!(c.cmd(&[b"FLUSHALL"]), ok());
    assert_eq!(c.cmd(&[b"DBSIZE"]), Int(0));
    assert_eq!(c.cmd(&[b"EXISTS", b"\x00\x00\x00\x07"]), Int(0));
    stop(running);
}
