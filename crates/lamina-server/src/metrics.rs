//! Prometheus metrics (`lamina serve --metrics ADDR`): the servers' counts
//! of connections, commands by kind and error replies ([`ServerCounters`]),
//! and the engine's statistics, in the text exposition format (version
//! 0.0.4) at `GET /metrics` ([`MetricsServer`]).
//!
//! The HTTP side is the least a scraper needs: one request per connection,
//! answered and closed; a request head bounded to 8 KiB (431 beyond) and
//! to 1 s from the connection; at most 16 scrapes answered at once (503
//! beyond), each reply written within 2 s; anything but `GET /metrics` is
//! a 404 (405 for another method, 400 for a malformed request line).
//!
//! Request heads are read by the accepting thread itself, from up to 256
//! connections at once (the oldest is dropped for a new one beyond), and
//! a connection takes one of the 16 scrape slots only once its head is
//! whole: clients that connect and send slowly, or nothing, hold no slot,
//! and a real scrape is answered among hundreds of them.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use lamina::{DbStats, LatencySummary};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use crate::protocol::Protocol;

/// Counters of one protocol's server.
#[derive(Debug)]
struct ProtocolCounters {
    accepted: AtomicU64,
    refused: AtomicU64,
    closed: AtomicU64,
    errors: AtomicU64,
    /// By [`Protocol::commands`], then `other`.
    commands: Box<[AtomicU64]>,
}

/// What the servers of one `lamina serve` count; shared by them and the
/// metrics endpoint.
#[derive(Debug)]
pub struct ServerCounters {
    by_protocol: [ProtocolCounters; 3],
}

impl Default for ServerCounters {
    fn default() -> Self {
        ServerCounters {
            by_protocol: Protocol::ALL.map(|p| ProtocolCounters {
                accepted: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                closed: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                commands: (0..=p.commands().len())
                    .map(|_| AtomicU64::new(0))
                    .collect(),
            }),
        }
    }
}

impl ServerCounters {
    fn of(&self, p: Protocol) -> &ProtocolCounters {
        match p {
            Protocol::Dsl => &self.by_protocol[0],
            Protocol::Spatial => &self.by_protocol[1],
            Protocol::Resp => &self.by_protocol[2],
        }
    }

    /// A connection was accepted.
    pub fn accepted(&self, p: Protocol) {
        self.of(p).accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was refused (the server was full).
    pub fn refused(&self, p: Protocol) {
        self.of(p).refused.fetch_add(1, Ordering::Relaxed);
    }

    /// An accepted connection ended.
    pub fn closed(&self, p: Protocol) {
        self.of(p).closed.fetch_add(1, Ordering::Relaxed);
    }

    /// A command named `name` (its first word, any case) ran; `error` if
    /// its reply was an error.
    pub fn command(&self, p: Protocol, name: &[u8], error: bool) {
        let c = self.of(p);
        let i = p
            .commands()
            .iter()
            .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
            .unwrap_or(p.commands().len());
        if let Some(n) = c.commands.get(i) {
            n.fetch_add(1, Ordering::Relaxed);
        }
        if error {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One metric family being written.
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn new<'a>(out: &'a mut String, name: &str, kind: &str, help: &str) -> Family<'a> {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out }
    }

    /// A sample: `labels` are `(name, value)` pairs (values escaped here).
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }
}

/// A sample value: integers without a fraction, `NaN` and infinities as
/// the format spells them.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The exposition of `stats` and `counters`.
#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
pub fn render(stats: &DbStats, counters: &ServerCounters) -> String {
    let mut out = String::new();
    let engine: [(&str, &str, &str, f64); 20] = [
        (
            "lamina_writes_total",
            "counter",
            "Writes (puts and deletes) applied.",
            stats.writes as f64,
        ),
        (
            "lamina_bytes_ingested_total",
            "counter",
            "Key and value bytes written by users.",
            stats.bytes_ingested as f64,
        ),
        (
            "lamina_gets_total",
            "counter",
            "Point lookups.",
            stats.gets as f64,
        ),
        (
            "lamina_get_hits_total",
            "counter",
            "Point lookups that found the key.",
            stats.get_hits as f64,
        ),
        (
            "lamina_flushes_total",
            "counter",
            "Memtable flushes.",
            stats.flushes as f64,
        ),
        (
            "lamina_flush_bytes_written_total",
            "counter",
            "Bytes written by flushes.",
            stats.flush_bytes_written as f64,
        ),
        (
            "lamina_compactions_total",
            "counter",
            "Merges (trivial moves excluded).",
            stats.compactions as f64,
        ),
        (
            "lamina_trivial_moves_total",
            "counter",
            "Files moved to another level unchanged.",
            stats.trivial_moves as f64,
        ),
        (
            "lamina_compaction_bytes_read_total",
            "counter",
            "Bytes read by merges.",
            stats.compaction_bytes_read as f64,
        ),
        (
            "lamina_compaction_bytes_written_total",
            "counter",
            "Bytes written by merges.",
            stats.compaction_bytes_written as f64,
        ),
        (
            "lamina_compaction_errors_total",
            "counter",
            "Merges that failed.",
            stats.compaction_errors as f64,
        ),
        (
            "lamina_stalls_total",
            "counter",
            "Times writes waited for flushes or compactions.",
            stats.stalls as f64,
        ),
        (
            "lamina_stall_seconds_total",
            "counter",
            "Time writes waited.",
            stats.stall_micros as f64 / 1e6,
        ),
        (
            "lamina_write_amplification",
            "gauge",
            "Bytes written by flushes and merges per byte flushed.",
            stats.write_amplification,
        ),
        (
            "lamina_space_amplification",
            "gauge",
            "Bytes on disk per byte of the oldest sorted run.",
            stats.space_amplification,
        ),
        (
            "lamina_disk_bytes",
            "gauge",
            "Bytes of all tables (compaction buffers included).",
            stats.disk_bytes as f64,
        ),
        (
            "lamina_memtable_bytes",
            "gauge",
            "Bytes in memtables.",
            stats.memtable_bytes as f64,
        ),
        (
            "lamina_sorted_runs",
            "gauge",
            "Sorted runs in the tree.",
            stats.sorted_runs as f64,
        ),
        (
            "lamina_block_cache_bytes",
            "gauge",
            "Bytes held by the block cache.",
            stats.block_cache_usage as f64,
        ),
        (
            "lamina_blocks_read_total",
            "counter",
            "Blocks read from table files.",
            stats.blocks_read as f64,
        ),
    ];
    for (name, kind, help, value) in engine {
        Family::new(&mut out, name, kind, help).sample(name, &[], value);
    }
    let kinds =
        |c: &lamina::BlockCounts| [("data", c.data), ("index", c.index), ("filter", c.filter)];
    // Counters by block kind.
    let cache = [
        (
            "lamina_block_cache_hits_total",
            "Queries' block cache hits by block kind (index and filter blocks held by their tables count as hits).",
            kinds(&stats.cache_hits).to_vec(),
        ),
        (
            "lamina_block_cache_misses_total",
            "Queries' block cache misses by block kind (index and filter: also one per table opened).",
            kinds(&stats.cache_misses).to_vec(),
        ),
        (
            "lamina_block_cache_read_bytes_total",
            "Bytes of index and filter blocks read from table files (at open and on misses).",
            vec![
                ("index", stats.index_bytes_read),
                ("filter", stats.filter_bytes_read),
            ],
        ),
    ];
    for (name, help, values) in cache {
        let mut f = Family::new(&mut out, name, "counter", help);
        for (k, v) in values {
            f.sample(name, &[("kind", k)], v as f64);
        }
    }
    Family::new(
        &mut out,
        "lamina_block_cache_pinned_bytes",
        "gauge",
        "Bytes of index and filter blocks level-0 tables pin in the block cache.",
    )
    .sample(
        "lamina_block_cache_pinned_bytes",
        &[],
        stats.block_cache_pinned_usage as f64,
    );
    type LevelField = fn(&lamina::LevelStats) -> f64;
    let levels: [(&str, &str, &str, LevelField); 9] = [
        (
            "lamina_level_runs",
            "gauge",
            "Sorted runs of the level.",
            |l| l.runs as f64,
        ),
        ("lamina_level_files", "gauge", "Files of the level.", |l| {
            l.files as f64
        }),
        (
            "lamina_level_bytes",
            "gauge",
            "Bytes of the level's files.",
            |l| l.bytes as f64,
        ),
        (
            "lamina_level_compactions_total",
            "counter",
            "Merges into the level.",
            |l| l.compactions as f64,
        ),
        (
            "lamina_level_compaction_seconds_total",
            "counter",
            "Wall time of merges into the level.",
            |l| l.compaction_seconds,
        ),
        (
            "lamina_level_bytes_in_total",
            "counter",
            "Bytes that came into the level from above (flushes for level 0).",
            |l| l.bytes_read as f64,
        ),
        (
            "lamina_level_bytes_written_total",
            "counter",
            "Bytes written into the level.",
            |l| l.bytes_written as f64,
        ),
        (
            "lamina_level_bytes_moved_total",
            "counter",
            "Bytes moved into the level unchanged.",
            |l| l.bytes_moved as f64,
        ),
        (
            "lamina_level_write_amplification",
            "gauge",
            "Bytes written into the level per byte that came in.",
            |l| l.write_amplification,
        ),
    ];
    for (name, kind, help, field) in levels {
        let mut f = Family::new(&mut out, name, kind, help);
        for l in &stats.levels {
            f.sample(name, &[("level", &l.level.to_string())], field(l));
        }
    }
    let mut f = Family::new(
        &mut out,
        "lamina_latency_seconds",
        "summary",
        "Operation latency (percentiles within 0.8%).",
    );
    let ops: [(&str, &LatencySummary); 4] = [
        ("put", &stats.put_latency),
        ("get", &stats.get_latency),
        ("scan", &stats.scan_latency),
        ("compaction", &stats.compaction_latency),
    ];
    for (op, l) in ops {
        for (q, v) in [
            ("0.5", l.p50_us),
            ("0.9", l.p90_us),
            ("0.99", l.p99_us),
            ("0.999", l.p999_us),
        ] {
            f.sample(
                "lamina_latency_seconds",
                &[("op", op), ("quantile", q)],
                v / 1e6,
            );
        }
        f.sample(
            "lamina_latency_seconds_sum",
            &[("op", op)],
            l.mean_us * l.count as f64 / 1e6,
        );
        f.sample(
            "lamina_latency_seconds_count",
            &[("op", op)],
            l.count as f64,
        );
    }
    type ProtocolField = fn(&ProtocolCounters) -> f64;
    let per_protocol: [(&str, &str, &str, ProtocolField); 5] = [
        (
            "lamina_server_connections_total",
            "counter",
            "Connections accepted.",
            |c| c.accepted.load(Ordering::Relaxed) as f64,
        ),
        (
            "lamina_server_connections_refused_total",
            "counter",
            "Connections refused at the connection cap.",
            |c| c.refused.load(Ordering::Relaxed) as f64,
        ),
        (
            "lamina_server_connections_active",
            "gauge",
            "Connections open now.",
            |c| {
                c.accepted
                    .load(Ordering::Relaxed)
                    .saturating_sub(c.closed.load(Ordering::Relaxed)) as f64
            },
        ),
        (
            "lamina_server_errors_total",
            "counter",
            "Commands answered with an error.",
            |c| c.errors.load(Ordering::Relaxed) as f64,
        ),
        (
            "lamina_server_commands_seen_total",
            "counter",
            "Commands received.",
            |c| {
                c.commands
                    .iter()
                    .map(|n| n.load(Ordering::Relaxed))
                    .sum::<u64>() as f64
            },
        ),
    ];
    for (name, kind, help, field) in per_protocol {
        let mut f = Family::new(&mut out, name, kind, help);
        for p in Protocol::ALL {
            f.sample(name, &[("protocol", p.name())], field(counters.of(p)));
        }
    }
    let name = "lamina_server_commands_total";
    let mut f = Family::new(&mut out, name, "counter", "Commands received, by kind.");
    for p in Protocol::ALL {
        let c = counters.of(p);
        let names = p.commands().iter().copied().chain(std::iter::once("other"));
        for (cmd, n) in names.zip(c.commands.iter()) {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                f.sample(name, &[("protocol", p.name()), ("command", cmd)], n as f64);
            }
        }
    }
    out
}

/// Largest HTTP request head read; a longer one is answered 431.
const MAX_REQUEST: usize = 8 << 10;
/// Longest time from accepting a connection to its whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest time to write a reply.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections whose request head is being read, at most; a new one
/// beyond drops the oldest.
pub const MAX_PENDING: usize = 256;
/// Scrapes answered at once; a whole request over it is answered 503.
pub const MAX_SCRAPES: usize = 16;
/// Descriptors the endpoint's connections hold at most: the heads being
/// read, the scrapes being answered, and for a moment one just accepted
/// before the oldest head is dropped.
pub const MAX_CONNECTIONS: usize = MAX_PENDING + MAX_SCRAPES + 1;
/// Stack of a scrape's thread (it renders a few KiB of text).
const SCRAPE_STACK: usize = 128 * 1024;
/// Longest wait of the accepting thread between looks at the stop flag.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The `/metrics` endpoint.
pub struct MetricsServer {
    listener: TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    stop: Arc<AtomicBool>,
}

/// A connection whose request head is still arriving.
struct Unread {
    stream: TcpStream,
    head: Vec<u8>,
    deadline: Instant,
}

impl MetricsServer {
    /// Binds `addr`; each scrape calls `render` for the body.
    pub fn bind(
        addr: impl ToSocketAddrs,
        render: Box<dyn Fn() -> String + Send + Sync>,
    ) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        // Polled, so the stop flag ends the loop within one interval.
        listener.set_nonblocking(true)?;
        Ok(MetricsServer {
            listener,
            render: Arc::from(render),
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A flag that stops [`MetricsServer::run`] when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Answers scrapes until the stop flag is set: this thread accepts
    /// connections and reads their request heads (without blocking on
    /// any); each whole head is answered on its own thread (at most 16 at
    /// once). A client that sends its request slowly, or never, holds up
    /// only itself, for 1 s at most.
    pub fn run(self) {
        let busy = Arc::new(AtomicUsize::new(0));
        let mut unread: VecDeque<Unread> = VecDeque::new();
        while !self.stop.load(Ordering::Acquire) {
            let ready = match self.wait(&unread) {
                Ok(ready) => ready,
                Err(e) => {
                    tracing::warn!("metrics: poll failed: {e}");
                    thread::sleep(POLL_INTERVAL);
                    continue;
                }
            };
            let now = Instant::now();
            // Oldest first; a finished or expired one leaves the queue.
            let mut kept = VecDeque::with_capacity(unread.len());
            for (mut u, ready) in unread.into_iter().zip(ready.iter().skip(1)) {
                let outcome = if *ready { read_more(&mut u) } else { None };
                match outcome {
                    Some(Some(head)) => self.dispatch(u.stream, head, &busy),
                    // The client closed, or sent what is not a request.
                    Some(None) => {}
                    None if u.deadline <= now => {}
                    None => kept.push_back(u),
                }
            }
            unread = kept;
            if ready.first() == Some(&true) {
                self.accept(&mut unread, now);
            }
        }
    }

    /// Waits until the listener or an unread connection is readable, or the
    /// next head deadline, or [`POLL_INTERVAL`]: which are readable (the
    /// listener first).
    fn wait(&self, unread: &VecDeque<Unread>) -> io::Result<Vec<bool>> {
        let mut fds: Vec<PollFd<'_>> = std::iter::once(&self.listener as &dyn AsFd)
            .chain(unread.iter().map(|u| &u.stream as &dyn AsFd))
            .map(|fd| PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::IN))
            .collect();
        let next_deadline = unread.iter().map(|u| u.deadline).min();
        let wait = next_deadline.map_or(POLL_INTERVAL, |d| {
            d.saturating_duration_since(Instant::now())
                .min(POLL_INTERVAL)
        });
        let timeout = Timespec::try_from(wait).unwrap_or(Timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        });
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(fds.iter().map(|f| !f.revents().is_empty()).collect())
    }

    /// Accepts every waiting connection, to have its head read.
    fn accept(&self, unread: &mut VecDeque<Unread>, now: Instant) {
        for _ in 0..MAX_PENDING {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = stream.set_nonblocking(true) {
                        tracing::warn!("metrics: {e}");
                        continue;
                    }
                    if unread.len() >= MAX_PENDING {
                        unread.pop_front();
                    }
                    unread.push_back(Unread {
                        stream,
                        head: Vec::new(),
                        deadline: now + HEAD_TIMEOUT,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of descriptors and the like: try again later.
                    tracing::warn!("metrics: accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Answers a whole request on a thread of its own, in one of the
    /// scrape slots; 503 when all are taken.
    fn dispatch(&self, stream: TcpStream, head: Head, busy: &Arc<AtomicUsize>) {
        if busy.fetch_add(1, Ordering::AcqRel) >= MAX_SCRAPES {
            busy.fetch_sub(1, Ordering::AcqRel);
            let _ = reply(
                &stream,
                "503 Service Unavailable",
                "too many scrapes at once\n",
                "text/plain",
            );
            return;
        }
        let render = Arc::clone(&self.render);
        let done = Arc::clone(busy);
        let spawned = thread::Builder::new()
            .name("lamina-metrics".into())
            .stack_size(SCRAPE_STACK)
            .spawn(move || {
                let _ = answer(&stream, head, render.as_ref());
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            busy.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("metrics: cannot spawn a scrape thread: {e}");
        }
    }
}

/// A whole request head, or one too large to read.
enum Head {
    /// The head, up to its blank line.
    Complete(Vec<u8>),
    /// Longer than [`MAX_REQUEST`].
    TooLarge,
}

/// Reads what `u`'s client sent (without blocking): `Some(Some(head))`
/// once a whole head (or too much) arrived, `Some(None)` if the client
/// closed or failed before, `None` to wait for more.
fn read_more(u: &mut Unread) -> Option<Option<Head>> {
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&u.head) {
            u.head.truncate(end);
            return Some(Some(Head::Complete(std::mem::take(&mut u.head))));
        }
        if u.head.len() > MAX_REQUEST {
            return Some(Some(Head::TooLarge));
        }
        match (&u.stream).read(&mut buf) {
            Ok(0) => return Some(None),
            Ok(n) => u.head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(_) => return Some(None),
        }
    }
}

/// Where a request head ends (after `\r\n\r\n`, or `\n\n` from a client
/// that sends bare newlines).
fn head_end(req: &[u8]) -> Option<usize> {
    let crlf = req.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = req.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Answers one scrape: `GET /metrics` gets the exposition; a bad request
/// line 400, another method 405, another path 404, a head over
/// [`MAX_REQUEST`] 431. One request per connection, always closed after
/// it (`Connection: close`): whatever follows the head (a body, a second
/// request) is never read as a request, so nothing can be smuggled
/// behind it.
fn answer(
    stream: &TcpStream,
    head: Head,
    render: &(dyn Fn() -> String + Send + Sync),
) -> io::Result<()> {
    let head = match head {
        Head::Complete(head) => head,
        Head::TooLarge => {
            return reply(
                stream,
                "431 Request Header Fields Too Large",
                "request head over 8 KiB\n",
                "text/plain",
            )
        }
    };
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let [method, target, version] = words.as_slice() else {
        return reply(
            stream,
            "400 Bad Request",
            "bad request line\n",
            "text/plain",
        );
    };
    if !version.starts_with(b"HTTP/1.") {
        return reply(
            stream,
            "400 Bad Request",
            "bad request line\n",
            "text/plain",
        );
    }
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    if *method != b"GET" {
        reply(stream, "405 Method Not Allowed", "only GET\n", "text/plain")
    } else if path == b"/metrics" {
        reply(
            stream,
            "200 OK",
            &render(),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    } else {
        reply(stream, "404 Not Found", "try /metrics\n", "text/plain")
    }
}

/// Writes a whole response (within [`IO_TIMEOUT`]) and closes the
/// connection.
fn reply(mut stream: &TcpStream, status: &str, body: &str, kind: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()?;
    // Whatever else the client sent stays unread: shut our side down
    // first, so the reply is delivered before the close resets.
    let _ = stream.shutdown(Shutdown::Write);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block cache's hits, misses and index/filter bytes appear by
    /// kind, with the values of the stats they are rendered from.
    #[test]
    fn block_cache_counters_by_kind() {
        let stats = DbStats {
            cache_hits: lamina::BlockCounts {
                data: 1,
                index: 2,
                filter: 3,
            },
            cache_misses: lamina::BlockCounts {
                data: 4,
                index: 5,
                filter: 6,
            },
            index_bytes_read: 700,
            filter_bytes_read: 800,
            block_cache_pinned_usage: 900,
            ..DbStats::default()
        };
        let text = render(&stats, &ServerCounters::default());
        for line in [
            "lamina_block_cache_hits_total{kind=\"data\"} 1",
            "lamina_block_cache_hits_total{kind=\"filter\"} 3",
            "lamina_block_cache_misses_total{kind=\"index\"} 5",
            "lamina_block_cache_misses_total{kind=\"filter\"} 6",
            "lamina_block_cache_read_bytes_total{kind=\"index\"} 700",
            "lamina_block_cache_read_bytes_total{kind=\"filter\"} 800",
            "lamina_block_cache_pinned_bytes 900",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}
