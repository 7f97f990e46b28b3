//! The TCP server: one thread per connection over a shared [`Db`].

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{
    IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use lamina::Db;

use crate::exec::{Control, Mode, Session};
use crate::lines::{LineReader, MAX_LINE, READ_CHUNK};
use crate::stream::{drain_lines, serve_connection};

/// Asks a running [`Server`] to stop; cheap to clone, usable from any thread.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    flag: Arc<AtomicBool>,
    wake_addr: SocketAddr,
}

impl ShutdownHandle {
    /// Starts the shutdown (idempotent): the accept loop ends, open
    /// connections are closed, [`Server::run`] returns.
    pub fn trigger(&self) {
        if !self.flag.swap(true, Ordering::SeqCst) {
            // Wake the blocking accept().
            let _ = TcpStream::connect_timeout(&self.wake_addr, Duration::from_secs(1));
        }
    }

    /// Whether a shutdown was requested.
    pub fn is_triggered(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

type Registry = Arc<Mutex<HashMap<u64, TcpStream>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    db: Arc<Db>,
    shutdown: ShutdownHandle,
    local_addr: SocketAddr,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`Server::local_addr`]).
    pub fn bind(db: Arc<Db>, addr: impl ToSocketAddrs) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let local_addr = listener.local_addr()?;
        let wake_ip = match local_addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        Ok(Server {
            listener,
            db,
            shutdown: ShutdownHandle {
                flag: Arc::new(AtomicBool::new(false)),
                wake_addr: SocketAddr::new(wake_ip, local_addr.port()),
            },
            local_addr,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle that stops this server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Accepts connections until shut down, serving each on its own thread.
    /// On shutdown every open connection is closed and its thread joined, so
    /// when this returns the server holds no reference to the [`Db`].
    pub fn run(self) -> io::Result<()> {
        let registry: Registry = Arc::new(Mutex::new(HashMap::new()));
        let next_id = AtomicU64::new(0);
        let mut workers: Vec<JoinHandle<()>> = Vec::new();
        for conn in self.listener.incoming() {
            if self.shutdown.is_triggered() {
                break;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: back off, keep serving.
                    eprintln!("lamina: accept failed: {e}");
                    thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            workers.retain(|w| !w.is_finished());
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            match stream.try_clone() {
                Ok(clone) => {
                    lock(&registry).insert(id, clone);
                }
                Err(e) => {
                    eprintln!("lamina: cannot register connection: {e}");
                    continue;
                }
            }
            // The registry is checked after insertion so a shutdown that raced
            // with this accept still closes the new connection.
            if self.shutdown.is_triggered() {
                let _ = stream.shutdown(Shutdown::Both);
                lock(&registry).remove(&id);
                break;
            }
            let db = Arc::clone(&self.db);
            let reg = Arc::clone(&registry);
            let spawned = thread::Builder::new()
                .name(format!("lamina-conn-{id}"))
                .spawn(move || {
                    let _ = stream.set_nodelay(true);
                    let _ = serve_connection(&db, &stream);
                    lock(&reg).remove(&id);
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    eprintln!("lamina: cannot spawn connection thread: {e}");
                    if let Some(s) = lock(&registry).remove(&id) {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                }
            }
        }
        for (_, s) in lock(&registry).drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        for w in workers {
            let _ = w.join();
        }
        Ok(())
    }
}

/// Runs the server console: DSL lines from `input` are executed against the
/// db (replies to `output`) while the server runs; `quit` triggers the
/// server's shutdown. The console only holds the db while executing a chunk
/// of input, so it never keeps a shut-down server's db alive. Returns at end
/// of input, at `quit`/`@end`, or once the db is gone.
pub fn run_console<R: Read, W: Write>(
    db: Weak<Db>,
    shutdown: ShutdownHandle,
    mut input: R,
    mut output: W,
) -> io::Result<()> {
    let mut lines = LineReader::new(MAX_LINE, READ_CHUNK);
    let mut out = Vec::new();
    loop {
        let n = match lines.fill(&mut input) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => r?,
        };
        if n == 0 || shutdown.is_triggered() {
            return Ok(());
        }
        let Some(db) = db.upgrade() else {
            return Ok(());
        };
        let ctl = {
            let mut session = Session::new(&db, Mode::Local);
            let ctl = drain_lines(&mut session, &mut lines, &mut out, &mut output)?;
            session.apply_pending(&mut out);
            ctl
        };
        drop(db);
        output.write_all(&out)?;
        output.flush()?;
        out.clear();
        match ctl {
            Control::Continue => {}
            Control::Quit => {
                shutdown.trigger();
                return Ok(());
            }
            Control::End => return Ok(()),
        }
    }
}
