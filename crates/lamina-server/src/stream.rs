//! Drives a [`Session`] from a byte stream: shared by the TCP server's
//! connections, `lamina exec` and the server console, so command logic exists
//! once.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lamina::Db;

use crate::exec::{push_error, Control, LoadAccess, Mode, Session, STREAM_CHUNK};
use crate::lines::{Line, LineReader, MAX_LINE, READ_CHUNK};
use crate::log_limit::{self, LogLimit};
use crate::metrics::ServerCounters;
use crate::password::Password;
use crate::protocol::{first_word, Protocol};
use crate::request_budget::{RequestBudget, Share};

/// Longest wait for a peer to close after `@bye`.
const LINGER: Duration = Duration::from_secs(2);

/// Replies buffered beyond this size are written out mid-chunk.
const OUT_FLUSH: usize = STREAM_CHUNK;

/// Executes every complete line buffered in `lines`. Replies accumulate in
/// `out`; when `out` grows past a threshold the pending batch is applied and
/// `out` is written to `w`. Stops early at `quit` / `@end`, and (network
/// sessions) at a line of an HTTP request ([`Control::Http`], not counted).
/// Network connections count each command in `counters`.
pub fn drain_lines<W: Write + ?Sized>(
    session: &mut Session<'_>,
    lines: &mut LineReader,
    out: &mut Vec<u8>,
    w: &mut W,
    counters: Option<&ServerCounters>,
) -> io::Result<Control> {
    while let Some(line) = lines.next_line() {
        let mark = out.len();
        let ctl = match line {
            Line::Complete(b) => {
                let name = first_word(b);
                let ctl = session.execute_line(b, out);
                if ctl == Control::Http {
                    return Ok(ctl);
                }
                if let (Some(c), false) = (counters, name.is_empty()) {
                    // A streamed reply (a long range) may have left `out`
                    // already; an error reply never streams.
                    let error = out.get(mark..).is_some_and(|r| r.starts_with(b"ERROR"));
                    c.command(Protocol::Dsl, name, error);
                }
                ctl
            }
            Line::TooLong => {
                session.line_too_long(out, MAX_LINE);
                if let Some(c) = counters {
                    c.command(Protocol::Dsl, b"", true);
                }
                Control::Continue
            }
        };
        if let Some(e) = session.take_broken() {
            return Err(e);
        }
        if ctl != Control::Continue {
            return Ok(ctl);
        }
        if out.len() >= OUT_FLUSH {
            session.apply_pending(out);
            w.write_all(out)?;
            out.clear();
        }
    }
    Ok(Control::Continue)
}

fn read_some<R: Read + ?Sized>(lines: &mut LineReader, r: &mut R) -> io::Result<usize> {
    loop {
        match lines.fill(r) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// How the server serves a network connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Which files `l` may read.
    pub loads: LoadAccess,
    /// A connection that sends nothing for this long is closed (`None`:
    /// never).
    pub idle_timeout: Option<Duration>,
    /// A connection whose unfinished line (or request) is still not
    /// complete after its reads waited this long for it, from its first
    /// byte, is closed (`None`: never).
    pub request_timeout: Option<Duration>,
    /// What the connections may hold for unfinished requests, in all.
    pub request_budget: Arc<RequestBudget>,
    /// Set when the server shuts down: a load in progress stops.
    pub cancel: Arc<AtomicBool>,
    /// Where connections count their commands (`lamina serve --metrics`).
    pub counters: Option<Arc<ServerCounters>>,
    /// The password Redis clients must give first ([`crate::resp`]).
    pub requirepass: Option<Password>,
}

/// After this long without input a connection gives its buffers back: an
/// idle connection costs a few KiB, not the 256 KiB read chunk.
const IDLE_RELEASE: Duration = Duration::from_secs(1);

/// Serves one network connection until the peer ends the session (`@end`
/// or `quit`, answered with [`crate::BYE_REPLY`]), disconnects, stays
/// idle past the configured time-out, leaves a line unfinished past the
/// request time-out, or sends a line of an HTTP request
/// ([`crate::sniff::is_http`]: the connection is closed without a reply,
/// that line and everything after it unexecuted).
///
/// Every complete line received is executed; an unterminated last line of a
/// connection that drops or times out is discarded, so nothing partial is
/// applied.
/// Coalesced writes are applied at the end of every read chunk, before its
/// replies are sent. Replies stream out in chunks of [`STREAM_CHUNK`] as
/// they are produced, so a reply of any size takes bounded memory and a
/// slow reader holds back only its own session. Returns the control that
/// ended the session ([`Control::Continue`] for a disconnect or time-out).
pub fn serve_connection(
    db: &Db,
    stream: &TcpStream,
    config: &ConnectionConfig,
) -> io::Result<Control> {
    let mut session = Session::new(db, Mode::Network)
        .with_loads(config.loads.clone())
        .with_cancel(Arc::clone(&config.cancel))
        .streaming(Box::new(move |bytes: &[u8]| {
            let mut w = stream;
            w.write_all(bytes)
        }));
    let mut lines = LineReader::new(MAX_LINE, READ_CHUNK);
    let mut share = config.request_budget.share();
    let mut out = Vec::new();
    let mut reader = stream;
    let mut writer = stream;
    let mut clock = ReadClock::new(stream, config)?;
    loop {
        let n = match clock.read(&mut lines, &mut reader, &mut out) {
            Ok(Reading::Bytes(n)) => n,
            Ok(Reading::TimedOut(why)) => {
                // What was received whole is executed; a partial line is not.
                session.apply_pending(&mut out);
                push_error(&mut out, &why.message(config));
                let _ = writer.write_all(&out);
                let _ = stream.shutdown(Shutdown::Both);
                return Ok(Control::Continue);
            }
            Err(e) => {
                // A reset connection: what was executed stays executed.
                let mut ignored = Vec::new();
                session.apply_pending(&mut ignored);
                return Err(e);
            }
        };
        if n == 0 {
            // Peer closed without `@end`: the partial line (if any) is dropped.
            session.apply_pending(&mut out);
            return Ok(Control::Continue);
        }
        let ctl = drain_lines(
            &mut session,
            &mut lines,
            &mut out,
            &mut writer,
            config.counters.as_deref(),
        )?;
        session.apply_pending(&mut out);
        if ctl == Control::Http {
            refuse_http(stream, &out);
            return Ok(ctl);
        }
        if ctl != Control::Continue {
            out.extend_from_slice(crate::BYE_REPLY);
            writer.write_all(&out)?;
            writer.flush()?;
            let _ = stream.shutdown(Shutdown::Write);
            linger(stream);
            return Ok(ctl);
        }
        if !hold_unfinished_line(&mut share, &mut lines, stream, &mut out) {
            return Ok(Control::Continue);
        }
        if !out.is_empty() {
            writer.write_all(&out)?;
            out.clear();
        }
    }
}

/// Refused HTTP requests' log lines.
static HTTP_REFUSALS: LogLimit = LogLimit::new();

/// Closes a connection at a line of an HTTP request: the replies of what
/// came before it go out, then nothing more (what the peer still sends is
/// read and dropped for a bounded time, so the close does not reset the
/// replies away). The attempt is logged with the peer's address, at most
/// once a minute (as Redis does: a web page can send thousands).
pub(crate) fn refuse_http(stream: &TcpStream, out: &[u8]) {
    if let Some(n) = HTTP_REFUSALS.allow() {
        let peer = stream
            .peer_addr()
            .map(|a| format!(" (from {a})"))
            .unwrap_or_default();
        tracing::warn!(
            "{}{peer}{}",
            crate::sniff::HTTP_REFUSED,
            log_limit::held_back(n)
        );
    }
    let _ = close_after(stream, out);
}

/// What a [`ReadClock`] read brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Bytes read (0 at end of input).
    Bytes(usize),
    /// A deadline passed first.
    TimedOut(Timeout),
}

/// Why a connection's read gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timeout {
    /// Nothing arrived for the idle time-out.
    Idle,
    /// Reads waited the request time-out for the rest of an unfinished
    /// line (request).
    Unfinished,
}

impl Timeout {
    /// The line protocols' `ERROR` message before closing.
    pub(crate) fn message(self, config: &ConnectionConfig) -> String {
        match self {
            Timeout::Idle => "idle timeout: closing the connection".into(),
            Timeout::Unfinished => format!(
                "request timeout: a line still unfinished after waiting {} s for it; closing the connection",
                config.request_timeout.map_or(0, |t| t.as_secs())
            ),
        }
    }
}

/// Reads for a connection: after [`IDLE_RELEASE`] without input the
/// buffers are given back; the read gives up once nothing arrived for the
/// idle time-out, or once its reads have waited the request time-out for
/// the rest of an unfinished line (request), from its first byte and
/// whatever arrives meanwhile (a client trickling a byte at a time is cut
/// off too). Time the server spends executing what came before it, or
/// writing replies the client is slow to read, is not counted.
pub(crate) struct ReadClock<'s> {
    stream: &'s TcpStream,
    idle_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    /// The read time-out now set on the socket.
    armed: Option<Duration>,
    /// The unfinished line being waited for ([`LineReader::unfinished`])
    /// and how long reads have waited for it.
    waiting: Option<(u64, Duration)>,
}

impl<'s> ReadClock<'s> {
    pub(crate) fn new(stream: &'s TcpStream, config: &ConnectionConfig) -> io::Result<Self> {
        let mut clock = ReadClock {
            stream,
            idle_timeout: config.idle_timeout,
            request_timeout: config.request_timeout,
            armed: None,
            waiting: None,
        };
        clock.arm(Some(IDLE_RELEASE))?;
        Ok(clock)
    }

    fn arm(&mut self, t: Option<Duration>) -> io::Result<()> {
        if self.armed != t {
            self.stream.set_read_timeout(t)?;
            self.armed = t;
        }
        Ok(())
    }

    /// Reads once into `lines`; gives back the buffers (`lines`, `out`)
    /// once idle for [`IDLE_RELEASE`].
    pub(crate) fn read(
        &mut self,
        lines: &mut LineReader,
        reader: &mut &TcpStream,
        out: &mut Vec<u8>,
    ) -> io::Result<Reading> {
        let start = Instant::now();
        let unfinished = lines.unfinished();
        let waited = match (self.waiting, unfinished) {
            (Some((was, waited)), Some(now)) if was == now => waited,
            _ => Duration::ZERO,
        };
        let reading = self.wait_and_read(lines, reader, out, start, waited);
        self.waiting = unfinished.map(|u| (u, waited + start.elapsed()));
        reading
    }

    fn wait_and_read(
        &mut self,
        lines: &mut LineReader,
        reader: &mut &TcpStream,
        out: &mut Vec<u8>,
        start: Instant,
        waited: Duration,
    ) -> io::Result<Reading> {
        let idle_end = self.idle_timeout.map(|t| (start + t, Timeout::Idle));
        let request_end = self
            .request_timeout
            .filter(|_| lines.has_partial())
            .map(|t| (start + t.saturating_sub(waited), Timeout::Unfinished));
        // The earlier deadline; the request's on a tie.
        let deadline = match (idle_end, request_end) {
            (Some(idle), Some(request)) => Some(if idle.0 < request.0 { idle } else { request }),
            (idle, request) => request.or(idle),
        };
        let mut released = false;
        loop {
            let left = match deadline {
                Some((at, why)) => match at.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(Reading::TimedOut(why)),
                },
                None => None,
            };
            // Until the buffers are given back, wake after IDLE_RELEASE at
            // most; the usual value, so the socket is rarely re-armed.
            let wait = match (released, left) {
                (false, Some(left)) => Some(left.min(IDLE_RELEASE)),
                (false, None) => Some(IDLE_RELEASE),
                (true, left) => left,
            };
            self.arm(wait)?;
            match read_some(lines, reader) {
                Ok(n) => return Ok(Reading::Bytes(n)),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if !released && start.elapsed() >= IDLE_RELEASE {
                        lines.release();
                        *out = Vec::new();
                        released = true;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sends the last replies and closes: our side first, then what the
/// client still sends is read and dropped for a bounded time. Closing with
/// unread input would reset the connection, and a reset can destroy the
/// replies (a protocol error's reason) before the client reads them.
pub(crate) fn close_after(stream: &TcpStream, out: &[u8]) -> io::Result<()> {
    let mut writer = stream;
    writer.write_all(out)?;
    let _ = stream.shutdown(Shutdown::Write);
    linger(stream);
    Ok(())
}

/// Counts in `share` the unfinished line `lines` holds after a read.
/// Over the budget, the line is dropped, `out` goes out with an `ERROR`
/// line and the connection is closed: `false`.
pub(crate) fn hold_unfinished_line(
    share: &mut Share,
    lines: &mut LineReader,
    stream: &TcpStream,
    out: &mut Vec<u8>,
) -> bool {
    let Err(over) = share.hold(lines.buffered().len()) else {
        return true;
    };
    lines.consume(usize::MAX);
    lines.release();
    let _ = share.hold(0);
    push_error(out, &over.to_string());
    let _ = close_after(stream, out);
    false
}

/// After `@bye`, reads and discards what the peer still sends (after a
/// `quit`, a pipelining client may be mid-stream) until it closes, for a
/// bounded time. Closing a socket with unread input makes the kernel send a
/// reset, which can destroy the `@bye` before the peer reads it.
pub(crate) fn linger(stream: &TcpStream) {
    let deadline = Instant::now() + LINGER;
    let mut sink = vec![0u8; 64 * 1024];
    let mut reader = stream;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match reader.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Runs DSL from `input` to `output` (as `lamina exec` does) until end of
/// input, `quit` or `@end`. An unterminated last line is executed.
pub fn run_local<R: Read, W: Write>(db: &Db, input: R, output: W) -> io::Result<Control> {
    run_session(Session::new(db, Mode::Local), input, output)
}

/// [`run_local`] with a session set up by the caller (e.g. with a load
/// progress hook).
pub fn run_session<R: Read, W: Write>(
    mut session: Session<'_>,
    mut input: R,
    mut output: W,
) -> io::Result<Control> {
    let mut lines = LineReader::new(MAX_LINE, READ_CHUNK);
    let mut out = Vec::with_capacity(64 * 1024);
    let result = run_local_inner(&mut session, &mut lines, &mut out, &mut input, &mut output);
    session.apply_pending(&mut out);
    output.write_all(&out)?;
    output.flush()?;
    result
}

fn run_local_inner<R: Read, W: Write>(
    session: &mut Session<'_>,
    lines: &mut LineReader,
    out: &mut Vec<u8>,
    input: &mut R,
    output: &mut W,
) -> io::Result<Control> {
    loop {
        let n = read_some(lines, input)?;
        if n == 0 {
            let ctl = match lines.take_rest() {
                Some(Line::Complete(b)) => session.execute_line(b, out),
                Some(Line::TooLong) => {
                    session.line_too_long(out, MAX_LINE);
                    Control::Continue
                }
                None => Control::Continue,
            };
            return Ok(ctl);
        }
        let ctl = drain_lines(session, lines, out, output, None)?;
        session.apply_pending(out);
        output.write_all(out)?;
        out.clear();
        if ctl != Control::Continue {
            return Ok(ctl);
        }
    }
}
