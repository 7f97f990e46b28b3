//! The HTTP side of `/metrics`: the least a scraper needs. One request per
//! connection, answered and closed; a request head bounded to 8 KiB (431
//! beyond) and to 1 s from the connection; at most 16 scrapes answered at
//! once (503 beyond), each reply written within 2 s; `GET /metrics` gets
//! the exposition and `HEAD /metrics` its headers alone; another path is a
//! 404 (405 for another method, 400 for a malformed request line).
//!
//! Request heads are read by the accepting thread itself, from up to 256
//! connections at once (the oldest is dropped for a new one beyond), and
//! a connection takes one of the 16 scrape slots only once its head is
//! whole: clients that connect and send slowly, or nothing, hold no slot,
//! and a real scrape is answered among hundreds of them.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

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
            let busy = Reply {
                status: "503 Service Unavailable",
                body: "too many scrapes at once\n".into(),
                kind: "text/plain",
                allow: false,
            };
            let _ = busy.send(&stream, true);
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

/// Answers one scrape: `GET /metrics` gets the exposition, `HEAD
/// /metrics` the same headers without it; a bad request line 400, another
/// method 405 (with `Allow`), another path 404, a head over
/// [`MAX_REQUEST`] 431. One request per connection, always closed after
/// it (`Connection: close`): whatever follows the head (a body, a second
/// request) is never read as a request, so nothing can be smuggled
/// behind it.
fn answer(
    stream: &TcpStream,
    head: Head,
    render: &(dyn Fn() -> String + Send + Sync),
) -> io::Result<()> {
    let plain = |status, body: &str| Reply {
        status,
        body: body.to_string(),
        kind: "text/plain",
        allow: false,
    };
    let head = match head {
        Head::Complete(head) => head,
        Head::TooLarge => {
            return plain(
                "431 Request Header Fields Too Large",
                "request head over 8 KiB\n",
            )
            .send(stream, true)
        }
    };
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let bad = plain("400 Bad Request", "bad request line\n");
    let [method, target, version] = words.as_slice() else {
        return bad.send(stream, true);
    };
    if !version.starts_with(b"HTTP/1.") {
        return bad.send(stream, true);
    }
    let with_body = *method != b"HEAD";
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let reply = if *method != b"GET" && with_body {
        Reply {
            allow: true,
            ..plain("405 Method Not Allowed", "only GET and HEAD\n")
        }
    } else if path == b"/metrics" {
        Reply {
            status: "200 OK",
            body: render(),
            kind: "text/plain; version=0.0.4; charset=utf-8",
            allow: false,
        }
    } else {
        plain("404 Not Found", "try /metrics\n")
    };
    reply.send(stream, with_body)
}

/// A response.
struct Reply {
    status: &'static str,
    body: String,
    kind: &'static str,
    /// Say `Allow: GET, HEAD` (a 405).
    allow: bool,
}

impl Reply {
    /// Writes the response (its body only `with_body`: a `HEAD` gets the
    /// headers a `GET` would, `Content-Length` included) within
    /// [`IO_TIMEOUT`], and closes the connection.
    fn send(&self, mut stream: &TcpStream, with_body: bool) -> io::Result<()> {
        let head =
            format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
            self.status,
            self.kind,
            self.body.len(),
            if self.allow { "Allow: GET, HEAD\r\n" } else { "" }
        );
        stream.set_nonblocking(false)?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.write_all(head.as_bytes())?;
        if with_body {
            stream.write_all(self.body.as_bytes())?;
        }
        stream.flush()?;
        // Whatever else the client sent stays unread: shut our side down
        // first, so the reply is delivered before the close resets.
        let _ = stream.shutdown(Shutdown::Write);
        Ok(())
    }
}
