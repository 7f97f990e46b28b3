//! `lamina serve`: the TCP server.

use std::io::{self, IsTerminal, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use lamina::compaction::CompactionSpec;
use lamina::Db;
use lamina_dataset::Dataset;
use lamina_server::fd_limit;
use lamina_server::metrics::{self, MetricsServer, ServerCounters};
use lamina_server::password::Password;
use lamina_server::request_budget::RequestBudget;
use lamina_server::server::DEFAULT_REQUEST_TIMEOUT;
use lamina_server::{run_console, LoadAccess, Server, ServerConfig, ShutdownHandle};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::engine_opts::{parse_count, parse_size, EngineOpts};
use crate::spatial::dataset_options;

/// How long shutdown waits for the last user of the database (the console,
/// a connection still finishing a long command) to let go of it.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// Flags of `lamina serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Read flags from a TOML file: each key a flag of `lamina serve`
    /// without its `--` (`port = 7878`, `buffer_bytes = "64M"`,
    /// `read_only = true`, `bloom_bits_per_level = [12, 8]`); a flag given
    /// on the command line overrides the file's (deploy/lamina.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Port to listen on (0 picks a free one; the start-up line shows it).
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Directory `l "PATH"` may load from: paths resolve inside it and may
    /// not leave it (no `..`, no absolute path or symlink out of it); only
    /// regular files. `none` disables `l` for clients [default: the
    /// server's working directory].
    #[arg(long, value_name = "DIR|none")]
    pub load_dir: Option<String>,
    /// Largest file `l` loads, in bytes (K, M, G suffixes).
    #[arg(long, value_name = "N", default_value = "16G", value_parser = parse_size)]
    pub load_max_bytes: usize,
    /// Connections served at once on each port; one more gets an ERROR
    /// line (on the Redis port `-ERR max number of clients reached`) and
    /// is closed. Lowered to fit the descriptor limit (raised to the hard
    /// limit at start), with a warning.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = parse_count)]
    pub max_connections: usize,
    /// Bytes of unfinished requests all connections of the DSL, spatial and
    /// Redis ports may hold together (K, M, G suffixes); a connection whose
    /// unfinished request would pass it gets an error and is closed
    /// [default: a quarter of physical memory, 1G if unknown].
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub max_request_bytes_total: Option<usize>,
    /// Close a connection that sends nothing for SECS seconds (0: never).
    #[arg(long, value_name = "SECS", default_value_t = 0, value_parser = parse_count)]
    pub idle_timeout: usize,
    /// Close a connection whose line (Redis port: request) is still
    /// unfinished SECS seconds after its first byte arrived, however
    /// slowly the rest trickles in (0: never).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = DEFAULT_REQUEST_TIMEOUT.as_secs() as usize,
        value_parser = parse_count
    )]
    pub request_timeout: usize,
    /// Also serve the database to Redis clients on PORT (RESP2, and RESP3
    /// after HELLO 3: GET, SET, INCR, DEL, EXISTS, MGET, MSET, MULTI/EXEC,
    /// SCAN, DBSIZE, PING, INFO, ...: docs/redis.md; 0 picks a free port).
    /// Keys are the same as the DSL's.
    #[arg(long, value_name = "PORT")]
    pub resp: Option<u16>,
    /// Let Redis clients' FLUSHALL delete every key of the database.
    #[arg(long, requires = "resp")]
    pub allow_flushall: bool,
    /// Redis clients must first give the password in FILE (AUTH; one
    /// trailing line break ignored). Without it, the environment variable
    /// LAMINA_REQUIREPASS, if set, is the password. Never a flag's value:
    /// anyone can read those in `ps`.
    #[arg(long, value_name = "FILE", requires = "resp")]
    pub requirepass_file: Option<std::path::PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics: ADDR is HOST:PORT
    /// (e.g. 127.0.0.1:9187) or a bare PORT on --host, like --resp (port 0
    /// picks a free one): the engine's statistics, per level, the latency
    /// percentiles, and each server's connections, commands by kind and
    /// error replies.
    #[arg(long, value_name = "[HOST:]PORT")]
    pub metrics: Option<String>,
    #[command(flatten)]
    pub engine: EngineOpts,
    #[command(flatten)]
    pub spatial: SpatialServeArgs,
}

/// Flags of `lamina serve` for the spatial dataset it may also serve.
#[derive(Debug, Args)]
pub struct SpatialServeArgs {
    /// Also serve a spatial dataset (a primary index and an LSM R-tree,
    /// created if missing) from DIR: the commands of `lamina spatial exec`
    /// on `--spatial-port`, framed like the DSL, so `lamina client --port`
    /// speaks them. The engine flags (sync, caches, bloom bits) apply to it
    /// too.
    #[arg(long, value_name = "DIR")]
    pub spatial_dir: Option<PathBuf>,
    /// Port of the spatial commands (0 picks a free one).
    #[arg(long, value_name = "PORT", default_value_t = 7879)]
    pub spatial_port: u16,
    /// The spatial index's key order: hilbert, zorder or simple (fixed at
    /// creation).
    #[arg(long, value_name = "C", default_value = "hilbert")]
    pub spatial_comparator: String,
    /// eager (anti-matter on writes) or lazy (queries validate); fixed at
    /// creation.
    #[arg(long, value_name = "M", default_value = "eager")]
    pub spatial_maintenance: String,
    /// The spatial index's merge policy.
    #[arg(long, value_name = "SPEC", default_value = "binomial:k=4")]
    pub spatial_compaction: CompactionSpec,
    /// Cut a leveled spatial index's merges by size, str or rstar-grove.
    #[arg(long, value_name = "P")]
    pub spatial_partition: Option<String>,
    /// The dataset's primary index's merge policy.
    #[arg(long, value_name = "SPEC", default_value = "binomial:k=8")]
    pub spatial_primary_compaction: CompactionSpec,
    /// Memory the dataset's indexes share before they flush together (K,
    /// M, G suffixes).
    #[arg(long, value_name = "N", default_value = "4M", value_parser = parse_size)]
    pub spatial_budget: usize,
}

impl SpatialServeArgs {
    /// Opens the dataset, if one is asked for.
    fn open(&self, engine: &EngineOpts) -> Result<Option<(PathBuf, Dataset)>> {
        let Some(dir) = &self.spatial_dir else {
            return Ok(None);
        };
        let mut base = engine.to_options()?;
        base.write_buffer_size = self.spatial_budget;
        base.compaction = self.spatial_compaction.clone();
        let opts = dataset_options(
            base,
            &self.spatial_comparator,
            &self.spatial_maintenance,
            self.spatial_primary_compaction.clone(),
            self.spatial_partition.as_deref(),
        )
        .context("--spatial-dir")?;
        let ds = Dataset::open(dir, opts)
            .with_context(|| format!("cannot open the dataset in {}", dir.display()))?;
        Ok(Some((dir.clone(), ds)))
    }
}

/// Serves until SIGINT, SIGTERM or `quit` on the console, then closes the
/// database cleanly.
///
/// Start-up prints two lines on stdout:
/// `lamina: data directory <DIR>` and `lamina: listening on <IP>:<PORT>`;
/// with `--spatial-dir`, two more: `lamina: spatial dataset <DIR>` and
/// `lamina: spatial commands on <IP>:<PORT>`; with `--resp`, `lamina: redis
/// protocol on <IP>:<PORT>`; with `--metrics`, `lamina: metrics on
/// http://<IP>:<PORT>/metrics`.
#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
pub fn run(args: ServeArgs) -> Result<()> {
    let mut config = server_config(&args)?;
    let descriptor_limit = fd_limit::raise_nofile_limit().context("cannot read RLIMIT_NOFILE")?;
    // Counted only when someone can read the counts: counting costs every
    // command a lookup.
    let counters = args
        .metrics
        .as_ref()
        .map(|_| Arc::new(ServerCounters::default()));
    // Every port first: one that cannot be had stops the start before the
    // database or the dataset is opened (or created).
    let listeners = Listeners::bind(&args, counters.as_ref())?;
    let db = Arc::new(args.engine.open()?);
    let spatial = args
        .spatial
        .open(&args.engine)?
        .map(|(dir, ds)| (dir, Arc::new(ds)));
    let tables = Tables {
        db: Arc::downgrade(&db),
        dataset: spatial.as_ref().map(|(_, ds)| Arc::downgrade(ds)),
    };
    let ports = 1 + usize::from(args.resp.is_some()) + usize::from(spatial.is_some());
    let metrics_connections = if args.metrics.is_some() {
        metrics::MAX_CONNECTIONS
    } else {
        0
    };
    let budget = DescriptorBudget {
        limit: descriptor_limit,
        reserve: tables.reserve().unwrap_or(RESERVED_DESCRIPTORS),
        ports,
        metrics: metrics_connections,
    };
    let (cap, warning) = budget.connection_cap(args.max_connections)?;
    if let Some(w) = warning {
        eprintln!("lamina: {w}");
    }
    config.max_connections = cap;
    let counted = |s: Server| match &counters {
        Some(c) => s.with_counters(Arc::clone(c)),
        None => s,
    };
    let Listeners {
        dsl,
        resp,
        spatial: spatial_listener,
        metrics,
    } = listeners;
    let server = counted(
        Server::dsl_on(Arc::clone(&db), dsl)
            .context("cannot serve the DSL port")?
            .with_config(config.clone()),
    );
    let metrics = metrics.map(|(server, slot)| {
        // A scrape reads the statistics of a database still open; the
        // endpoint never keeps it open.
        let _ = slot.set(Arc::downgrade(&db));
        server
    });
    let resp = match resp {
        Some(listener) => Some(counted(
            Server::resp_on(Arc::clone(&db), listener, args.allow_flushall)
                .context("cannot serve the redis port")?
                .with_config(config.clone()),
        )),
        None => None,
    };
    let spatial = match (spatial, spatial_listener) {
        (Some((dir, ds)), Some(listener)) => {
            let server = Server::spatial_on(Arc::clone(&ds), listener)
                .context("cannot serve the spatial port")?
                .with_config(config);
            Some((dir, ds, counted(server)))
        }
        _ => None,
    };
    let dir = std::fs::canonicalize(&args.engine.dir).unwrap_or_else(|_| args.engine.dir.clone());
    {
        let mut out = io::stdout().lock();
        writeln!(out, "lamina: data directory {}", dir.display())?;
        writeln!(out, "lamina: listening on {}", server.local_addr())?;
        if let Some((dir, _, server)) = &spatial {
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            writeln!(out, "lamina: spatial dataset {}", dir.display())?;
            writeln!(out, "lamina: spatial commands on {}", server.local_addr())?;
        }
        if let Some(server) = &resp {
            writeln!(out, "lamina: redis protocol on {}", server.local_addr())?;
        }
        if let Some(m) = &metrics {
            writeln!(out, "lamina: metrics on http://{}/metrics", m.local_addr()?)?;
        }
        out.flush()?;
    }

    let handle = server.shutdown_handle();
    if descriptor_limit.is_some() {
        let caps = std::iter::once(&server)
            .chain(&resp)
            .chain(spatial.as_ref().map(|(_, _, s)| s))
            .map(Server::connection_cap)
            .collect();
        let watch = (budget, args.max_connections, cap, handle.clone());
        thread::Builder::new()
            .name("lamina-descriptors".into())
            .spawn(move || watch_descriptors(tables, caps, watch))
            .context("cannot start the descriptor watch")?;
    }
    // The other servers run on their own threads and stop with the main one.
    let spatial = match spatial {
        Some((_, ds, server)) => Some((ds, spawn(server, "lamina-spatial")?)),
        None => None,
    };
    let resp = resp.map(|s| spawn(s, "lamina-resp")).transpose()?;
    let metrics = match metrics {
        Some(m) => {
            let stop = m.stop_flag();
            let thread = thread::Builder::new()
                .name("lamina-metrics".into())
                .spawn(move || m.run())
                .context("cannot start the metrics endpoint")?;
            Some((stop, thread))
        }
        None => None,
    };
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("cannot install signal handlers")?;
    let on_signal = handle.clone();
    thread::Builder::new()
        .name("lamina-signals".into())
        .spawn(move || {
            let mut seen = 0;
            for sig in signals.forever() {
                seen += 1;
                if seen == 1 {
                    eprintln!("lamina: signal {sig}, shutting down");
                    on_signal.trigger();
                } else {
                    eprintln!("lamina: second signal, exiting without a clean shutdown");
                    std::process::exit(130);
                }
            }
        })
        .context("cannot start the signal thread")?;

    let console_db = Arc::downgrade(&db);
    let on_quit = handle.clone();
    thread::Builder::new()
        .name("lamina-console".into())
        .spawn(move || {
            if let Err(e) = run_console(console_db, on_quit, ForegroundStdin, io::stdout()) {
                eprintln!("lamina: console: {e}");
            }
        })
        .context("cannot start the console thread")?;

    let served = server.run().context("server failed");
    let resp_stopped = resp.map_or(Ok(()), |r| stop(r, "redis protocol server"));
    if let Some((flag, thread)) = metrics {
        flag.store(true, std::sync::atomic::Ordering::Release);
        let _ = thread.join();
    }
    let spatial_closed = match spatial {
        Some(s) => close_spatial(s),
        None => Ok(()),
    };
    served?;
    resp_stopped?;
    eprintln!("lamina: closing the database");
    let db = release(db, Db::flush)?;
    db.close().context("closing the database failed")?;
    spatial_closed?;
    eprintln!("lamina: shut down cleanly");
    Ok(())
}

/// The database of a metrics endpoint bound before the database opened:
/// set once it is open (a scrape before that answers nothing).
type DbSlot = Arc<OnceLock<Weak<Db>>>;

/// Every port `lamina serve` listens on, bound before anything is opened.
struct Listeners {
    dsl: TcpListener,
    resp: Option<TcpListener>,
    spatial: Option<TcpListener>,
    metrics: Option<(MetricsServer, DbSlot)>,
}

impl Listeners {
    /// Binds the DSL port, then `--resp`, `--spatial-dir`'s port and
    /// `--metrics`; the first that fails is the error.
    fn bind(args: &ServeArgs, counters: Option<&Arc<ServerCounters>>) -> Result<Listeners> {
        let listen = |port: u16| {
            TcpListener::bind((args.host.as_str(), port))
                .with_context(|| format!("cannot listen on {}:{port}", args.host))
        };
        let dsl = listen(args.port)?;
        let resp = args.resp.map(listen).transpose()?;
        let spatial = match &args.spatial.spatial_dir {
            Some(_) => Some(listen(args.spatial.spatial_port)?),
            None => None,
        };
        let metrics = match (&args.metrics, counters) {
            (Some(addr), Some(counters)) => {
                let addr = metrics_addr(addr, &args.host);
                let slot = DbSlot::default();
                let (db, counters) = (Arc::clone(&slot), Arc::clone(counters));
                let render = Box::new(move || {
                    db.get()
                        .and_then(Weak::upgrade)
                        .map_or_else(String::new, |db| metrics::render(&db.stats(), &counters))
                });
                let server = MetricsServer::bind(addr.as_str(), render)
                    .with_context(|| format!("--metrics {addr}: cannot listen"))?;
                Some((server, slot))
            }
            _ => None,
        };
        Ok(Listeners {
            dsl,
            resp,
            spatial,
            metrics,
        })
    }
}

/// `--metrics`'s address: `HOST:PORT`, or a bare port on `--host` (as
/// `--resp` and `--spatial-port` take theirs).
fn metrics_addr(value: &str, host: &str) -> String {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        if host.contains(':') {
            format!("[{host}]:{value}")
        } else {
            format!("{host}:{value}")
        }
    } else {
        value.to_string()
    }
}

/// A server running on its own thread.
type Running = (ShutdownHandle, thread::JoinHandle<io::Result<()>>);

fn spawn(server: Server, name: &str) -> Result<Running> {
    let stop = server.shutdown_handle();
    let thread = thread::Builder::new()
        .name(name.into())
        .spawn(move || server.run())
        .with_context(|| format!("cannot start {name}"))?;
    Ok((stop, thread))
}

/// Stops a server started by [`spawn`] and waits for its connections.
fn stop((handle, thread): Running, what: &str) -> Result<()> {
    handle.trigger();
    match thread.join() {
        Ok(r) => r.with_context(|| format!("{what} failed")),
        Err(_) => Err(anyhow::anyhow!("the {what} thread panicked")),
    }
}

/// Stops the spatial server and closes its dataset.
fn close_spatial((ds, running): (Arc<Dataset>, Running)) -> Result<()> {
    let served = stop(running, "spatial server");
    eprintln!("lamina: closing the spatial dataset");
    let ds = release(ds, Dataset::flush)?;
    ds.close().context("closing the spatial dataset failed")?;
    served
}

/// Descriptors `lamina serve` keeps besides its connections and tables:
/// the WAL, the manifest, LOG, LOCK, compaction outputs, the listeners,
/// stdio and the signal pipe (a fresh server holds 14).
const RESERVED_DESCRIPTORS: u64 = 64;

/// How often the descriptor reserve follows the databases' tables.
const DESCRIPTOR_WATCH: Duration = Duration::from_secs(5);

/// The databases whose tables the descriptor reserve covers, held weakly.
struct Tables {
    db: Weak<Db>,
    dataset: Option<Weak<Dataset>>,
}

impl Tables {
    /// [`RESERVED_DESCRIPTORS`] and twice the tables (every table stays
    /// open once read; a merge's outputs open beside its inputs); `None`
    /// once the database is closed.
    fn reserve(&self) -> Option<u64> {
        let count = |db: &Db| {
            let stats = db.sample_stats();
            stats.levels.iter().map(|l| l.files as u64).sum::<u64>() + stats.buffer.files
        };
        let mut tables = count(&*self.db.upgrade()?);
        if let Some(ds) = &self.dataset {
            let ds = ds.upgrade()?;
            tables += count(ds.primary()) + count(ds.index());
        }
        Some(RESERVED_DESCRIPTORS + 2 * tables)
    }
}

/// Every [`DESCRIPTOR_WATCH`] until shutdown: sizes the reserve to the
/// tables the databases have now and sets every port's connection cap
/// (`caps`) to fit, saying so when the cap changes. `watch`: the budget,
/// the cap asked for, the cap in force and the server's shutdown handle.
fn watch_descriptors(
    tables: Tables,
    caps: Vec<Arc<AtomicUsize>>,
    watch: (DescriptorBudget, usize, usize, ShutdownHandle),
) {
    let (mut budget, requested, mut cap, stop) = watch;
    let step = Duration::from_millis(100);
    loop {
        let start = Instant::now();
        while start.elapsed() < DESCRIPTOR_WATCH {
            if stop.is_triggered() {
                return;
            }
            thread::sleep(step);
        }
        let Some(reserve) = tables.reserve() else {
            return;
        };
        if reserve == budget.reserve {
            continue;
        }
        budget.reserve = reserve;
        let (now, message) = match budget.connection_cap(requested) {
            Ok(fit) => fit,
            Err(e) => (0, Some(format!("{e}; refusing new connections"))),
        };
        if now != cap {
            cap = now;
            for c in &caps {
                c.store(now, Ordering::Relaxed);
            }
            let message = message.unwrap_or_else(|| {
                format!("the database's tables leave room for --max-connections {requested} again")
            });
            eprintln!("lamina: {message}");
        }
    }
}

/// What the process's descriptors must cover.
#[derive(Debug, Clone, Copy)]
struct DescriptorBudget {
    /// The soft `RLIMIT_NOFILE` (`None`: unlimited).
    limit: Option<u64>,
    /// Kept for the databases: [`Tables::reserve`].
    reserve: u64,
    /// Ports serving connections under `--max-connections` each.
    ports: usize,
    /// Connections the metrics endpoint holds at most (heads being read
    /// and scrapes being answered: [`metrics::MAX_CONNECTIONS`]).
    metrics: usize,
}

impl DescriptorBudget {
    /// The connection cap per port: `requested`, or less (with the
    /// warning to log) so that every port's connections, the metrics
    /// endpoint's and the reserve fit the limit; an error if not even one connection per
    /// port fits.
    fn connection_cap(&self, requested: usize) -> Result<(usize, Option<String>)> {
        let Some(limit) = self.limit else {
            return Ok((requested, None));
        };
        let (ports, metrics) = (self.ports as u64, self.metrics as u64);
        let needed = (requested as u64)
            .saturating_mul(ports)
            .saturating_add(metrics)
            .saturating_add(self.reserve);
        if needed <= limit {
            return Ok((requested, None));
        }
        let what = format!(
            "--max-connections {requested} on {ports} port(s){}, and {} kept for the database need {needed} descriptors; the limit (ulimit -n) is {limit}",
            if metrics > 0 {
                format!(", {metrics} for /metrics")
            } else {
                String::new()
            },
            self.reserve
        );
        let cap = limit.saturating_sub(self.reserve + metrics) / ports.max(1);
        if cap == 0 {
            bail!("{what}: not even one connection per port fits; raise the limit");
        }
        let cap = usize::try_from(cap).unwrap_or(requested).min(requested);
        Ok((
            cap,
            Some(format!(
                "{what}: serving at most {cap} connections per port"
            )),
        ))
    }
}

/// The client-facing settings, checked before the database is opened.
fn server_config(args: &ServeArgs) -> Result<ServerConfig> {
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    if args.max_request_bytes_total == Some(0) {
        bail!("--max-request-bytes-total must be at least 1");
    }
    let loads = match args.load_dir.as_deref() {
        Some("none") => LoadAccess::Disabled,
        dir => {
            let dir = dir.unwrap_or(".");
            let canonical =
                std::fs::canonicalize(dir).with_context(|| format!("--load-dir {dir}"))?;
            if !canonical.is_dir() {
                bail!("--load-dir {dir} is not a directory");
            }
            LoadAccess::Within {
                dir: canonical,
                max_bytes: args.load_max_bytes as u64,
            }
        }
    };
    Ok(ServerConfig {
        loads,
        max_connections: args.max_connections,
        idle_timeout: seconds(args.idle_timeout),
        request_timeout: seconds(args.request_timeout),
        request_budget: Arc::new(
            args.max_request_bytes_total
                .map_or_else(RequestBudget::default, RequestBudget::new),
        ),
        requirepass: Password::configured(args.requirepass_file.as_deref())?,
    })
}

/// A time-out flag's value: `None` for 0.
fn seconds(secs: usize) -> Option<Duration> {
    (secs > 0).then(|| Duration::from_secs(secs as u64))
}

/// Stdin that, when it is a terminal, only reads while this process is in
/// the terminal's foreground process group: a read from the background
/// (`lamina serve &`) would stop the whole server with SIGTTIN.
struct ForegroundStdin;

impl Read for ForegroundStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let stdin = io::stdin();
        if stdin.is_terminal() {
            while in_background() {
                thread::sleep(Duration::from_millis(250));
            }
        }
        stdin.lock().read(buf)
    }
}

/// Whether this process is in the background of its controlling terminal
/// (Linux: from /proc/self/stat; elsewhere always false).
fn in_background() -> bool {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    // Fields after the parenthesised command name: state ppid pgrp session tty_nr tpgid.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    match (fields.get(2), fields.get(5)) {
        (Some(pgrp), Some(tpgid)) => pgrp != tpgid && *tpgid != "-1",
        _ => false,
    }
}

/// Waits until this is the last reference to the database (or dataset).
fn release<T>(mut db: Arc<T>, flush: impl Fn(&T) -> lamina::Result<()>) -> Result<T> {
    let start = Instant::now();
    loop {
        match Arc::try_unwrap(db) {
            Ok(db) => return Ok(db),
            Err(shared) => {
                if start.elapsed() > RELEASE_TIMEOUT {
                    // Last resort: make the data durable even if we cannot close.
                    flush(&shared).context("final flush failed")?;
                    bail!("the database is still in use; flushed it but could not close it");
                }
                db = shared;
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: Option<u64>, ports: usize, metrics: usize) -> DescriptorBudget {
        DescriptorBudget {
            limit,
            reserve: 100,
            ports,
            metrics,
        }
    }

    #[test]
    fn connection_caps_fit_the_descriptor_limit() {
        // The metrics endpoint: 256 heads being read, 16 scrapes, one
        // just accepted.
        let m = metrics::MAX_CONNECTIONS;
        assert_eq!(m, 273);
        // Enough descriptors, or no limit: the cap asked for.
        assert_eq!(
            budget(Some(10_000), 3, m).connection_cap(1024).unwrap(),
            (1024, None)
        );
        assert_eq!(
            budget(None, 3, m).connection_cap(1 << 40).unwrap().0,
            1 << 40
        );
        // 1024 descriptors, two ports: (1024 - 100) / 2 each.
        let (cap, warning) = budget(Some(1024), 2, 0).connection_cap(1024).unwrap();
        assert_eq!(cap, 462);
        let warning = warning.unwrap();
        assert!(
            warning.contains("need 2148 descriptors")
                && warning.contains("the limit (ulimit -n) is 1024")
                && warning.contains("at most 462 connections per port"),
            "{warning}"
        );
        // The metrics endpoint's connections count: (1024 - 100 - 273) / 3;
        // all of it fits exactly at the limit.
        let (cap, warning) = budget(Some(1024), 3, m).connection_cap(1024).unwrap();
        assert_eq!(cap, 217);
        assert!(warning.unwrap().contains(", 273 for /metrics"));
        assert_eq!(
            budget(Some(1024), 3, m).connection_cap(217).unwrap(),
            (217, None)
        );
        // Not one connection per port left: refused.
        let err = budget(Some(374), 2, m).connection_cap(1024).unwrap_err();
        assert!(err.to_string().contains("not even one connection"), "{err}");
        assert_eq!(budget(Some(375), 2, m).connection_cap(1024).unwrap().0, 1);
    }
}
