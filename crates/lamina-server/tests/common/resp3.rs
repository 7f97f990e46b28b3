//! A RESP2/RESP3 client written here, independent of the server's encoder:
//! the reply types of both versions, read off a socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

use super::{connect, request};

/// One reply, in either version's types.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    /// A bulk string (`None`: RESP2's nil).
    Bulk(Option<Vec<u8>>),
    /// An array (`None`: RESP2's nil array).
    Array(Option<Vec<Reply>>),
    /// RESP3's null.
    Null,
    /// RESP3's map, in the order sent.
    Map(Vec<(Reply, Reply)>),
    /// RESP3's set.
    Set(Vec<Reply>),
    /// RESP3's verbatim string: format and text.
    Verbatim(String, Vec<u8>),
}

impl Reply {
    /// A bulk string's or simple string's text.
    pub fn text(&self) -> String {
        match self {
            Reply::Bulk(Some(b)) | Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into(),
            Reply::Simple(s) => s.clone(),
            other => panic!("not text: {other:?}"),
        }
    }

    /// A map's value for `key` (a RESP3 map, or a RESP2 flat array of pairs).
    pub fn get(&self, key: &str) -> Option<&Reply> {
        match self {
            Reply::Map(pairs) => pairs.iter().find(|(k, _)| k.text() == key).map(|(_, v)| v),
            Reply::Array(Some(flat)) => flat
                .chunks(2)
                .find(|kv| kv[0].text() == key)
                .map(|kv| &kv[1]),
            other => panic!("not a map: {other:?}"),
        }
    }
}

pub fn ok() -> Reply {
    Reply::Simple("OK".into())
}

pub fn queued() -> Reply {
    Reply::Simple("QUEUED".into())
}

pub fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Some(b.to_vec()))
}

pub fn array(items: Vec<Reply>) -> Reply {
    Reply::Array(Some(items))
}

pub struct Client {
    pub w: TcpStream,
    pub r: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let w = connect(addr);
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

    fn blob(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n + 2];
        self.r.read_exact(&mut b).unwrap();
        assert_eq!(&b[n..], b"\r\n");
        b.truncate(n);
        b
    }

    pub fn read(&mut self) -> Reply {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        let n = || rest.parse::<i64>().unwrap();
        match t {
            "+" => Reply::Simple(rest.into()),
            "-" => Reply::Error(rest.into()),
            ":" => Reply::Int(n()),
            "_" => Reply::Null,
            "$" if n() < 0 => Reply::Bulk(None),
            "$" => Reply::Bulk(Some(self.blob(n() as usize))),
            "*" if n() < 0 => Reply::Array(None),
            "*" => Reply::Array(Some((0..n()).map(|_| self.read()).collect())),
            "~" => Reply::Set((0..n()).map(|_| self.read()).collect()),
            "%" => Reply::Map((0..n()).map(|_| (self.read(), self.read())).collect()),
            "=" => {
                let b = self.blob(n() as usize);
                assert_eq!(b[3], b':', "verbatim format");
                Reply::Verbatim(String::from_utf8_lossy(&b[..3]).into(), b[4..].to_vec())
            }
            other => panic!("bad reply type {other:?}"),
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        self.w.write_all(&request(args)).unwrap();
    }

    pub fn cmd(&mut self, args: &[&[u8]]) -> Reply {
        self.send(args);
        self.read()
    }

    /// A command of words.
    pub fn words(&mut self, line: &str) -> Reply {
        let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
        self.cmd(&words)
    }
}
