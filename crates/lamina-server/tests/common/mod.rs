//! Servers on fresh databases and a Redis request encoder, shared by the
//! integration tests (each test file uses part of it).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;

use lamina::{Db, Options};
use lamina_server::{Server, ShutdownHandle};

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
