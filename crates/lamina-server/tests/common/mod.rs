//! A Redis-port server on a fresh database, for the integration tests.

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

/// Serves the Redis protocol on a free loopback port over the database
/// in `dir`.
pub fn start_resp(dir: &std::path::Path, allow_flushall: bool) -> Running {
    let db = Arc::new(Db::open(dir, Options::default()).unwrap());
    let server = Server::bind_resp(Arc::clone(&db), "127.0.0.1:0", allow_flushall).unwrap();
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

/// Shuts the server down and closes its database cleanly.
pub fn stop(r: Running) {
    r.handle.trigger();
    r.thread.join().unwrap();
    Arc::try_unwrap(r.db).ok().unwrap().close().unwrap();
}
