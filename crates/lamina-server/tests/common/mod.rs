//! Servers on fresh databases and a Redis request encoder, shared by the
//! integration tests (each test file uses part of it).
#![allow(
    dead_code,
    reason = "each test binary compiles this shared module and uses a different part of it"
)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use lamina::{Db, Options};
use lamina_server::{Server, ShutdownHandle};

pub mod resp3;

pub struct Running {
    pub addr: SocketAddr,
    pub handle: ShutdownHandle,
    thread: thread::JoinHandle<()>,
    pub db: Arc<Db>,
}

impl Running {
    /// Shuts the server down and hands back its database.
    pub fn stop(self) -> Db {
        match Arc::try_unwrap(self.stop_sharing()) {
            Ok(db) => db,
            Err(_) => panic!("the server still holds the db"),
        }
    }

    /// Shuts the server down; its database may have other users.
    pub fn stop_sharing(self) -> Arc<Db> {
        self.handle.trigger();
        self.thread.join().unwrap();
        self.db
    }
}

/// Runs `server` (bound over `db`) on its own thread.
pub fn serve(db: Arc<Db>, server: Server) -> Running {
    let addr = server.local_addr();
    let handle = server.shutdown_handle();
    let thread = thread::spawn(move || server.run().unwrap());
    Running {
        addr,
        handle,
        thread,
        db,
    }
}

/// Serves the Redis protocol on a free loopback port over the database
/// in `dir`.
pub fn start_resp(dir: &std::path::Path, allow_flushall: bool) -> Running {
    let db = Arc::new(Db::open(dir, Options::default()).unwrap());
    let server = Server::bind_resp(Arc::clone(&db), "127.0.0.1:0", allow_flushall).unwrap();
    serve(db, server)
}

/// Shuts the server down and closes its database cleanly.
pub fn stop(r: Running) {
    r.stop().close().unwrap();
}

/// A RESP request, encoded here (not by the server's code).
pub fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A connection to `addr`, reads timing out after 20 s.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// One bulk-string reply (`None` for nil), read off `r`.
pub fn read_bulk(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let n: i64 = line
        .strip_prefix('$')
        .and_then(|l| l.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("not a bulk reply: {line:?}"));
    if n < 0 {
        return None;
    }
    let mut b = vec![0u8; n as usize + 2];
    r.read_exact(&mut b).unwrap();
    b.truncate(n as usize);
    Some(b)
}

/// What a fresh Redis client reads for `GET key`: the value, or `None`
/// for nil.
pub fn redis_get(addr: SocketAddr, key: &[u8]) -> Option<Vec<u8>> {
    let mut s = connect(addr);
    s.write_all(&request(&[b"GET", key])).unwrap();
    read_bulk(&mut BufReader::new(s))
}
