//! The TCP server: one thread per connection over a shared [`Db`] (the
//! CS265 DSL) or [`Dataset`] (the spatial commands), with a cap on
//! connections, an optional idle time-out, confined loads and a bounded
//! shutdown.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{
    IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs,
};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use lamina::Db;
use lamina_dataset::Dataset;

use crate::exec::{Control, LoadAccess, Mode, Session};
use crate::lines::{LineReader, MAX_LINE, READ_CHUNK};
use crate::metrics::ServerCounters;
use crate::password::Password;
use crate::protocol::Protocol;
use crate::request_budget::RequestBudget;
use crate::resp::{serve_resp_connection, RespState};
use crate::spatial::serve_spatial_connection;
use crate::stream::{drain_lines, serve_connection, ConnectionConfig};

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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How a [`Server`] treats its clients.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Which files `l` may read (default: none).
    pub loads: LoadAccess,
    /// Connections served at once; one over the cap gets one `ERROR` line
    /// (on the Redis port `-ERR max number of clients reached`) and is
    /// closed (default 1024).
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed (default:
    /// never).
    pub idle_timeout: Option<Duration>,
    /// A connection whose unfinished line or request is still incomplete
    /// after the server waited this long for it, from its first byte and
    /// however slowly bytes trickle in meanwhile, is closed (default
    /// [`DEFAULT_REQUEST_TIMEOUT`]; `None`: never).
    pub request_timeout: Option<Duration>,
    /// Bytes of unfinished requests the connections may hold in all
    /// ([`crate::request_budget`]; default: a quarter of physical memory),
    /// shared with every server given the same budget.
    pub request_budget: Arc<RequestBudget>,
    /// The password Redis clients must give (`AUTH`) before any other
    /// command ([`crate::resp`]; default: none).
    pub requirepass: Option<Password>,
}

/// The default [`ServerConfig::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            loads: LoadAccess::Disabled,
            max_connections: 1024,
            idle_timeout: None,
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            request_budget: Arc::new(RequestBudget::default()),
            requirepass: None,
        }
    }
}

/// Stack of a connection thread: sessions run no deep recursion (merges
/// and flushes run on the engine's own threads), and only touched pages
/// cost memory.
const CONNECTION_STACK: usize = 256 * 1024;

/// How long shutdown waits for connection threads after closing their
/// sockets (a thread busy in a long command, say a `compact`, is left to
/// finish on its own).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Connections being served, for the cap and for shutdown.
#[derive(Default)]
struct Connections {
    /// Open sockets by id, shared with their threads (one descriptor per
    /// connection), shut down to unblock the threads on shutdown.
    sockets: Mutex<HashMap<u64, Arc<TcpStream>>>,
    done: Condvar,
}

impl Connections {
    fn count(&self) -> usize {
        lock(&self.sockets).len()
    }

    fn remove(&self, id: u64) {
        lock(&self.sockets).remove(&id);
        self.done.notify_all();
    }

    /// Shuts every socket down, then waits (bounded) for their threads.
    fn close_all(&self, grace: Duration) {
        let mut sockets = lock(&self.sockets);
        for s in sockets.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let deadline = Instant::now() + grace;
        while !sockets.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                tracing::warn!(
                    "{} connection(s) still busy after {} s; not waiting for them",
                    sockets.len(),
                    grace.as_secs()
                );
                return;
            };
            sockets = match self.done.wait_timeout(sockets, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// What a server's connections speak, and to what.
#[derive(Clone)]
enum Service {
    /// The CS265 DSL on a key-value database.
    Dsl(Arc<Db>),
    /// The spatial commands ([`crate::spatial`]) on a dataset.
    Spatial(Arc<Dataset>),
    /// The Redis protocol ([`crate::resp`]) on a key-value database.
    Resp(Arc<RespState>),
}

impl Service {
    fn protocol(&self) -> Protocol {
        match self {
            Service::Dsl(_) => Protocol::Dsl,
            Service::Spatial(_) => Protocol::Spatial,
            Service::Resp(_) => Protocol::Resp,
        }
    }
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    service: Service,
    shutdown: ShutdownHandle,
    local_addr: SocketAddr,
    config: ServerConfig,
    /// The connection cap in force: `config.max_connections` until
    /// changed through [`Server::connection_cap`].
    cap: Arc<AtomicUsize>,
    counters: Option<Arc<ServerCounters>>,
}

impl Server {
    /// Binds `addr` for DSL clients of `db` (port 0 picks a free port; see
    /// [`Server::local_addr`]).
    pub fn bind(db: Arc<Db>, addr: impl ToSocketAddrs) -> io::Result<Server> {
        Server::dsl_on(db, TcpListener::bind(addr)?)
    }

    /// Binds `addr` for spatial clients of `dataset`: the commands of
    /// [`crate::spatial`], framed like the DSL (`@end` / `quit` answered
    /// with `@bye`, `@sync` echoed), so [`crate::run_client`] speaks it too.
    pub fn bind_spatial(dataset: Arc<Dataset>, addr: impl ToSocketAddrs) -> io::Result<Server> {
        Server::spatial_on(dataset, TcpListener::bind(addr)?)
    }

    /// Binds `addr` for Redis clients of `db` ([`crate::resp`]);
    /// `FLUSHALL` is refused unless `allow_flushall`.
    pub fn bind_resp(
        db: Arc<Db>,
        addr: impl ToSocketAddrs,
        allow_flushall: bool,
    ) -> io::Result<Server> {
        Server::resp_on(db, TcpListener::bind(addr)?, allow_flushall)
    }

    /// [`Server::bind`] on a listener bound earlier: `lamina serve` binds
    /// every port before it opens (maybe creates) the database, so a port
    /// it cannot have leaves nothing behind.
    pub fn dsl_on(db: Arc<Db>, listener: TcpListener) -> io::Result<Server> {
        Server::on_listener(Service::Dsl(db), listener)
    }

    /// [`Server::bind_spatial`] on a listener bound earlier.
    pub fn spatial_on(dataset: Arc<Dataset>, listener: TcpListener) -> io::Result<Server> {
        Server::on_listener(Service::Spatial(dataset), listener)
    }

    /// [`Server::bind_resp`] on a listener bound earlier.
    pub fn resp_on(db: Arc<Db>, listener: TcpListener, allow_flushall: bool) -> io::Result<Server> {
        Server::on_listener(
            Service::Resp(Arc::new(RespState::new(db, allow_flushall))),
            listener,
        )
    }

    fn on_listener(service: Service, listener: TcpListener) -> io::Result<Server> {
        let local_addr = listener.local_addr()?;
        let wake_ip = match local_addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        Ok(Server {
            listener,
            service,
            shutdown: ShutdownHandle {
                flag: Arc::new(AtomicBool::new(false)),
                wake_addr: SocketAddr::new(wake_ip, local_addr.port()),
            },
            local_addr,
            cap: Arc::new(AtomicUsize::new(ServerConfig::default().max_connections)),
            config: ServerConfig::default(),
            counters: None,
        })
    }

    /// Serves clients as `config` says.
    pub fn with_config(mut self, config: ServerConfig) -> Server {
        self.cap.store(config.max_connections, Ordering::Relaxed);
        self.config = config;
        self
    }

    /// The connection cap, shared: a value stored here applies from the
    /// next connection accepted on (connections already served stay).
    /// `lamina serve` lowers it as its databases' tables take descriptors.
    pub fn connection_cap(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.cap)
    }

    /// Counts connections and commands in `counters` (shared with the
    /// metrics endpoint and the other servers of one `lamina serve`).
    pub fn with_counters(mut self, counters: Arc<ServerCounters>) -> Server {
        self.counters = Some(counters);
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle that stops this server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Accepts connections until shut down, serving each on its own thread
    /// (threads end on their own and are not joined). On shutdown every
    /// open connection's socket is shut down, which ends its thread's
    /// blocked reads and writes, and a load in progress stops at its next
    /// chunk; the threads get 5 s to finish.
    pub fn run(self) -> io::Result<()> {
        let conns = Arc::new(Connections::default());
        let conn_config = ConnectionConfig {
            loads: self.config.loads.clone(),
            idle_timeout: self.config.idle_timeout,
            request_timeout: self.config.request_timeout,
            request_budget: Arc::clone(&self.config.request_budget),
            cancel: Arc::clone(&self.shutdown.flag),
            counters: self.counters.clone(),
            requirepass: self.config.requirepass.clone(),
        };
        let protocol = self.service.protocol();
        let count = |f: fn(&ServerCounters, Protocol)| {
            if let Some(c) = &self.counters {
                f(c, protocol);
            }
        };
        let next_id = AtomicU64::new(0);
        for conn in self.listener.incoming() {
            if self.shutdown.is_triggered() {
                break;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: back off, keep serving.
                    tracing::error!("accept failed: {e}");
                    thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            let cap = self.cap.load(Ordering::Relaxed);
            if conns.count() >= cap {
                refuse(&stream, protocol, cap);
                count(ServerCounters::refused);
                continue;
            }
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            let stream = Arc::new(stream);
            lock(&conns.sockets).insert(id, Arc::clone(&stream));
            // Counted closed by its `Registered` guard.
            count(ServerCounters::accepted);
            // The registry is checked after insertion so a shutdown that raced
            // with this accept still closes the new connection.
            if self.shutdown.is_triggered() {
                let _ = stream.shutdown(Shutdown::Both);
                conns.remove(id);
                break;
            }
            let service = self.service.clone();
            let registered = Registered {
                registry: Arc::clone(&conns),
                id,
                counters: self.counters.clone(),
                protocol,
            };
            let config = conn_config.clone();
            let spawned = thread::Builder::new()
                .name(format!("lamina-conn-{id}"))
                .stack_size(CONNECTION_STACK)
                .spawn(move || {
                    let _ = stream.set_nodelay(true);
                    let _ = match &service {
                        Service::Dsl(db) => serve_connection(db, &stream, &config).map(drop),
                        Service::Spatial(ds) => serve_spatial_connection(ds, &stream, &config),
                        Service::Resp(state) => serve_resp_connection(state, &stream, &config),
                    };
                    // The socket closes once the registry lets go of it too.
                    drop(stream);
                    // The db reference goes before the thread counts as done.
                    drop(service);
                    drop(registered);
                });
            if let Err(e) = spawned {
                // The closure, its socket and its guard are dropped with the
                // error: the guard gives the registry's place back.
                tracing::error!("cannot spawn connection thread: {e}");
            }
        }
        conns.close_all(SHUTDOWN_GRACE);
        Ok(())
    }
}

/// A connection's place in the registry, given up when its thread ends,
/// even by a panic: the registry's share of the socket would otherwise
/// keep it open, the client waiting for replies that never come.
struct Registered {
    registry: Arc<Connections>,
    id: u64,
    counters: Option<Arc<ServerCounters>>,
    protocol: Protocol,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(c) = &self.counters {
            c.closed(self.protocol);
        }
        self.registry.remove(self.id);
    }
}

/// Tells a client over the connection cap so, in its protocol (Redis's
/// own words on the Redis port), and closes its connection.
fn refuse(stream: &TcpStream, protocol: Protocol, max: usize) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let message = match protocol {
        Protocol::Resp => "-ERR max number of clients reached\r\n".to_string(),
        Protocol::Dsl | Protocol::Spatial => format!(
            "ERROR too many connections (this server serves {max} at once); try again later\n"
        ),
    };
    let mut w = stream;
    let _ = w.write_all(message.as_bytes());
    let _ = stream.shutdown(Shutdown::Both);
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
            let ctl = drain_lines(&mut session, &mut lines, &mut out, &mut output, None)?;
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
            // A local session never sees an HTTP line as one.
            Control::End | Control::Http => return Ok(()),
        }
    }
}
