//! The Redis protocol (RESP2) on a lamina database, so Redis clients
//! (`redis-cli`, `redis-benchmark`, client libraries) can use it:
//! `lamina serve --resp PORT`.
//!
//! | command | reply |
//! |---|---|
//! | `GET key` | the value, or nil |
//! | `SET key value [NX\|XX] [GET]` | `OK`; nil if `NX`/`XX` refused it; with `GET` the old value |
//! | `DEL key...`, `EXISTS key...` | how many of the keys existed |
//! | `MGET key...` | the values (nil where missing) |
//! | `MSET key value...` | `OK`, all written in one atomic batch |
//! | `SCAN cursor [MATCH pattern] [COUNT n] [TYPE string]` | the next cursor and the keys matching `pattern` (Redis's glob, case-sensitive) among up to `n` (10) examined, in key order (at most about [`SCAN_REPLY`] bytes of keys, and [`SCAN_WORK`] steps of matching) |
//! | `DBSIZE` | the number of keys (a full scan) |
//! | `FLUSHALL [SYNC\|ASYNC]` | deletes every key; refused unless the server runs with `--allow-flushall` |
//! | `PING [msg]`, `ECHO msg`, `QUIT`, `SELECT 0`, `INFO`, `COMMAND`, `CONFIG GET`, `CLIENT ...` | what `redis-cli`, `redis-benchmark` and client libraries ask at start-up |
//!
//! Requests are RESP arrays of bulk strings or inline commands (a line of
//! words, as typed into `telnet`), pipelined freely: replies go out in order
//! once a read's commands are done, or sooner when [`crate::exec::STREAM_CHUNK`]
//! bytes are pending, and at once after a command that walks the key space
//! (`SCAN`, `DBSIZE`, `FLUSHALL`), so a client that hung up is noticed
//! there (the write fails) and the rest of what it sent is not run. Errors
//! follow Redis's wording (`ERR unknown command`, `ERR wrong number of
//! arguments for 'get' command`). A malformed request is answered with
//! `-ERR Protocol error: ...` and the connection closed, as Redis does.
//!
//! Like Redis, the port closes a connection, without a reply and without
//! running it or anything after it, at a request that belongs to an HTTP
//! request, which a web page can make a browser send here: an inline
//! command that [`crate::sniff::is_http`] says is an HTTP line (`POST ...`,
//! `GET /x HTTP/1.1`, `Host: ...`), or an array whose command is `POST` or
//! `Host:`. A connection over the server's cap is answered `-ERR max number
//! of clients reached` and closed.
//!
//! Limits bound each connection's memory and time: a request of at most
//! [`MAX_REQUEST`] bytes and [`MAX_ARGS`] arguments, its arguments read
//! in place in the read buffer, its unfinished bytes (or the room made at
//! once for the bulk string it announced, if more) counted against the
//! [`crate::request_budget`] all connections share, complete within the
//! server's request time-out (`lamina serve --request-timeout`, 10 s) of
//! waiting for it from its first byte, however slowly its bytes trickle in
//! (else the connection is closed); replies leave in chunks of
//! [`STREAM_CHUNK`] bytes (a huge `MGET` too, as it is read); a `SCAN`
//! reply ends after [`SCAN_REPLY`] bytes of keys or [`SCAN_WORK`] steps of
//! examining keys, with a cursor to go on from. Matching a `MATCH` pattern
//! never backtracks (its work grows as the pattern's length plus the key's
//! times the pattern's longest run without a `*`); a pattern that takes
//! more than [`SCAN_WORK`] steps on one key alone is an error.
//!
//! Differences from Redis, by design: keys share the database with the DSL
//! port (a DSL key `k` is the 4-byte key the DSL encodes it to); there are
//! no expiries (`EX`, `PX`, ... are refused) and only strings; `SCAN`
//! cursors are issued by the server (a table of the last [`MAX_CURSORS`]
//! positions; an evicted one is an error, restart from 0); `DEL`, `EXISTS`
//! and conditional `SET`s read then write, so their counts are exact only
//! among clients of this port (one lock orders them), not against DSL
//! writers; durability is the engine's `--sync` setting.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use lamina::{Db, WriteBatch};

use crate::exec::STREAM_CHUNK;
use crate::glob::{Glob, OutOfBudget};
use crate::lines::{LineReader, READ_CHUNK};
use crate::metrics::ServerCounters;
use crate::protocol::{Protocol, RESP_COMMANDS};
use crate::request_budget::Share;
use crate::sniff::is_http;
use crate::stream::{close_after, refuse_http, ConnectionConfig, ReadClock, Reading};

mod request;

use request::MAX_INLINE;
pub use request::{parse_request, Args, Request, RequestParser, MAX_ARGS, MAX_REQUEST};

/// Key bytes after which a `SCAN` reply ends early (with a cursor).
pub const SCAN_REPLY: usize = 1 << 20;
/// SCAN cursors remembered.
pub const MAX_CURSORS: usize = 4096;
/// Steps of work (a key examined, a byte of a `MATCH` pattern or key
/// compared) after which a `SCAN` reply ends early (with a cursor): tens
/// of milliseconds of one core.
pub const SCAN_WORK: u64 = 1 << 24;
/// Deletes per batch of `FLUSHALL`.
const FLUSH_BATCH: usize = 10_000;

/// What the Redis port shares between its connections.
pub struct RespState {
    db: Arc<Db>,
    allow_flushall: bool,
    /// Orders the read-then-write commands of this port.
    check_and_write: Mutex<()>,
    cursors: Mutex<Cursors>,
}

impl RespState {
    /// State for serving `db`; `FLUSHALL` only if `allow_flushall`.
    pub fn new(db: Arc<Db>, allow_flushall: bool) -> Self {
        RespState {
            db,
            allow_flushall,
            check_and_write: Mutex::new(()),
            cursors: Mutex::new(Cursors::default()),
        }
    }
}

/// A lock whose holder cannot leave its data inconsistent (a cursor table,
/// a unit): a panicked holder's poison is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// SCAN positions by cursor number: the key to resume at.
#[derive(Default)]
struct Cursors {
    next: u64,
    live: VecDeque<(u64, Vec<u8>)>,
}

impl Cursors {
    fn issue(&mut self, resume_at: Vec<u8>) -> u64 {
        self.next = self.next.wrapping_add(1).max(1);
        if self.live.len() >= MAX_CURSORS {
            self.live.pop_front();
        }
        self.live.push_back((self.next, resume_at));
        self.next
    }

    fn get(&self, id: u64) -> Option<Vec<u8>> {
        self.live
            .iter()
            .find(|(c, _)| *c == id)
            .map(|(_, k)| k.clone())
    }
}

fn simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn error(out: &mut Vec<u8>, s: &str) {
    out.push(b'-');
    out.extend(
        s.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(b.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn nil(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

fn array(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn maybe_bulk(out: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(v) => bulk(out, v),
        None => nil(out),
    }
}

/// What to do after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Close the connection once the replies are out.
    Close,
}

fn arity(out: &mut Vec<u8>, name: &str) {
    error(
        out,
        &format!("ERR wrong number of arguments for '{name}' command"),
    );
}

fn lower(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_lowercase()
}

/// Plain `SET`s and `MSET`s of a pipeline, gathered into one write batch
/// (one WAL record and one group commit instead of one per command) until
/// another command, or the end of what was read, needs them written.
#[derive(Default)]
pub struct Pending {
    batch: WriteBatch,
    /// Where in `out` the first gathered command's reply starts.
    replies_from: usize,
    /// Replies (`+OK`) given for them.
    replies: usize,
}

impl Pending {
    /// Writes the gathered batch. If the write fails, every `+OK` given for
    /// it is replaced by the error: no client is told a lost write landed.
    pub fn apply(&mut self, db: &Db, out: &mut Vec<u8>) {
        if self.replies == 0 {
            return;
        }
        if let Err(e) = db.write(std::mem::take(&mut self.batch)) {
            out.truncate(self.replies_from);
            for _ in 0..self.replies {
                error(out, &format!("ERR {e}"));
            }
        }
        self.replies = 0;
    }

    fn gather(&mut self, out: &mut Vec<u8>, pairs: &[&[u8]]) {
        if self.replies == 0 {
            self.replies_from = out.len();
        }
        for kv in pairs.chunks_exact(2) {
            self.batch.put(kv[0], kv[1]);
        }
        self.replies += 1;
        simple(out, "OK");
    }
}

/// Where a reply goes while it is produced, once `out` holds
/// [`STREAM_CHUNK`] bytes: the client's socket.
pub type Sink<'a> = dyn FnMut(&[u8]) -> io::Result<()> + 'a;

/// Executes one command, appending its reply to `out` (a long `MGET`
/// reply leaves through `sink` in chunks as it is read, and `out` leaves
/// through it after a command that walks the key space); plain `SET` and
/// `MSET` join `pending`, every other command first writes it. What to do
/// next, and whether the reply was an error; `Err` only when `sink`
/// failed.
pub fn execute(
    state: &RespState,
    pending: &mut Pending,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    sink: &mut Sink<'_>,
) -> io::Result<(After, bool)> {
    let Some((name, rest)) = args.split_first() else {
        return Ok((After::Continue, false));
    };
    let cmd = lower(name);
    let plain_set = cmd == "set" && rest.len() == 2;
    let mset = cmd == "mset" && !rest.is_empty() && rest.len() % 2 == 0;
    if plain_set || mset {
        pending.gather(out, rest);
        return Ok((After::Continue, false));
    }
    pending.apply(&state.db, out);
    if cmd == "mget" && !rest.is_empty() {
        mget(&state.db, rest, out, sink)?;
        return Ok((After::Continue, false));
    }
    let start = out.len();
    let after = match run(state, &cmd, rest, out) {
        Ok(after) => after,
        Err(e) => {
            out.truncate(start);
            error(out, &format!("ERR {e}"));
            After::Continue
        }
    };
    let failed = out.get(start) == Some(&b'-');
    if KEY_SPACE_WALKS.contains(&cmd.as_str()) {
        // After that much work the replies leave at once: a client that
        // hung up is noticed by the failed write, before the next one.
        sink(out)?;
        out.clear();
    }
    Ok((after, failed))
}

/// Commands that read through the key space; their replies are sent at
/// once.
const KEY_SPACE_WALKS: [&str; 4] = ["scan", "dbsize", "flushall", "flushdb"];

/// `MGET`: the values go to `sink` in chunks as they are read, so a reply
/// of any size takes bounded memory. A key whose read fails gets an error
/// element where its value would be (RESP2 allows errors in arrays): the
/// array's start is already sent.
fn mget(db: &Db, keys: &[&[u8]], out: &mut Vec<u8>, sink: &mut Sink<'_>) -> io::Result<()> {
    array(out, keys.len());
    for k in keys {
        match db.get(k) {
            Ok(v) => maybe_bulk(out, v.as_deref()),
            Err(e) => error(out, &format!("ERR {e}")),
        }
        if out.len() >= STREAM_CHUNK {
            sink(out)?;
            out.clear();
        }
    }
    Ok(())
}

#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
fn run(state: &RespState, cmd: &str, a: &[&[u8]], out: &mut Vec<u8>) -> lamina::Result<After> {
    let db = &state.db;
    match (cmd, a.len()) {
        ("ping", 0) => simple(out, "PONG"),
        ("ping", 1) | ("echo", 1) => bulk(out, a[0]),
        ("quit", _) => {
            simple(out, "OK");
            return Ok(After::Close);
        }
        ("get", 1) => maybe_bulk(out, db.get(a[0])?.as_deref()),
        ("set", n) if n >= 2 => set(state, a, out)?,
        ("del", n) | ("unlink", n) if n >= 1 => {
            let _order = lock(&state.check_and_write);
            let mut batch = WriteBatch::new();
            let mut existed = 0;
            // A key named twice is deleted once, as in Redis.
            let mut seen = std::collections::HashSet::new();
            for k in a {
                if seen.insert(*k) && db.get(k)?.is_some() {
                    existed += 1;
                }
                batch.delete(k);
            }
            db.write(batch)?;
            integer(out, existed);
        }
        ("exists", n) if n >= 1 => {
            let mut n = 0;
            for k in a {
                if db.get(k)?.is_some() {
                    n += 1;
                }
            }
            integer(out, n);
        }
        ("scan", n) if n >= 1 => scan(state, a, out)?,
        ("dbsize", 0) => {
            let mut n = 0i64;
            for kv in db.scan(Bound::Unbounded, Bound::Unbounded)? {
                kv?;
                n += 1;
            }
            integer(out, n);
        }
        ("flushall", n) | ("flushdb", n) if n <= 1 => {
            if !state.allow_flushall {
                error(
                    out,
                    "ERR FLUSHALL is disabled on this server (start lamina serve with --allow-flushall)",
                );
            } else {
                let _order = lock(&state.check_and_write);
                let mut batch = WriteBatch::new();
                for kv in db.scan(Bound::Unbounded, Bound::Unbounded)? {
                    batch.delete(&kv?.0);
                    if batch.len() >= FLUSH_BATCH {
                        db.write(std::mem::take(&mut batch))?;
                    }
                }
                if !batch.is_empty() {
                    db.write(batch)?;
                }
                simple(out, "OK");
            }
        }
        ("select", 1) => {
            if a[0] == b"0" {
                simple(out, "OK");
            } else {
                error(out, "ERR DB index is out of range");
            }
        }
        ("info", _) => {
            let s = db.stats();
            let text = format!(
                "# Server\r\nredis_version:7.0.0\r\nlamina_version:{}\r\n# Stats\r\nlamina_writes:{}\r\nlamina_gets:{}\r\nlamina_flushes:{}\r\nlamina_compactions:{}\r\nlamina_write_amplification:{:.3}\r\n# Keyspace\r\n",
                env!("CARGO_PKG_VERSION"),
                s.writes,
                s.gets,
                s.flushes,
                s.compactions,
                s.write_amplification,
            );
            bulk(out, text.as_bytes());
        }
        ("command", 0) => array(out, 0),
        ("command", _) => match lower(a[0]).as_str() {
            "count" => integer(out, RESP_COMMANDS.len() as i64),
            _ => array(out, 0),
        },
        ("config", n) if n >= 2 && lower(a[0]) == "get" => {
            // redis-benchmark reads these two at start-up.
            let param = lower(a[1]);
            let value = match param.as_str() {
                "save" => Some(String::new()),
                "appendonly" => Some("yes".to_string()),
                _ => None,
            };
            match value {
                Some(v) => {
                    array(out, 2);
                    bulk(out, param.as_bytes());
                    bulk(out, v.as_bytes());
                }
                None => array(out, 0),
            }
        }
        ("client", n) if n >= 1 => match lower(a[0]).as_str() {
            "getname" => nil(out),
            "id" => integer(out, 1),
            _ => simple(out, "OK"),
        },
        ("hello", _) => error(out, "NOPROTO sorry, this protocol version is not supported"),
        (c, _) if RESP_COMMANDS.contains(&c) => arity(out, c),
        (c, _) => {
            let mut msg = format!("ERR unknown command '{c}', with args beginning with:");
            for arg in a.iter().take(8) {
                msg.push_str(&format!(" '{}'", String::from_utf8_lossy(arg)));
            }
            error(out, &msg);
        }
    }
    Ok(After::Continue)
}

fn set(state: &RespState, a: &[&[u8]], out: &mut Vec<u8>) -> lamina::Result<()> {
    let (key, value) = (a[0], a[1]);
    let (mut nx, mut xx, mut get) = (false, false, false);
    for opt in &a[2..] {
        match lower(opt).as_str() {
            "nx" => nx = true,
            "xx" => xx = true,
            "get" => get = true,
            "ex" | "px" | "exat" | "pxat" | "keepttl" => {
                error(
                    out,
                    "ERR lamina keeps no expiry times (EX, PX, EXAT, PXAT, KEEPTTL)",
                );
                return Ok(());
            }
            _ => {
                error(out, "ERR syntax error");
                return Ok(());
            }
        }
    }
    if nx && xx {
        error(out, "ERR syntax error");
        return Ok(());
    }
    let _order = lock(&state.check_and_write);
    let old = state.db.get(key)?;
    let write = (!nx || old.is_none()) && (!xx || old.is_some());
    if write {
        state.db.put(key, value)?;
    }
    if get {
        maybe_bulk(out, old.as_deref());
    } else if write {
        simple(out, "OK");
    } else {
        nil(out);
    }
    Ok(())
}

fn scan(state: &RespState, a: &[&[u8]], out: &mut Vec<u8>) -> lamina::Result<()> {
    let Some(cursor) = std::str::from_utf8(a[0])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        error(out, "ERR invalid cursor");
        return Ok(());
    };
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 1;
    while i < a.len() {
        let Some(v) = a.get(i + 1) else {
            error(out, "ERR syntax error");
            return Ok(());
        };
        match lower(a[i]).as_str() {
            "count" => match std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()) {
                Some(n) if n >= 1 => count = n,
                _ => {
                    error(out, "ERR value is not an integer or out of range");
                    return Ok(());
                }
            },
            "match" => pattern = Some(v),
            "type" => {
                if lower(v) != "string" {
                    // Every key is a string: another type matches none.
                    array(out, 2);
                    bulk(out, b"0");
                    array(out, 0);
                    return Ok(());
                }
            }
            _ => {
                error(out, "ERR syntax error");
                return Ok(());
            }
        }
        i += 2;
    }
    let from = if cursor == 0 {
        Vec::new()
    } else {
        match lock(&state.cursors).get(cursor) {
            Some(k) => k,
            None => {
                error(
                    out,
                    "ERR invalid cursor (expired: this server keeps the last 4096; start again from 0)",
                );
                return Ok(());
            }
        }
    };
    // Like Redis, COUNT bounds the keys examined, not the keys returned.
    // The reply is also cut at SCAN_REPLY bytes of keys, and after
    // SCAN_WORK steps of examining keys (SCAN may always return fewer
    // keys; the cursor goes on from there), so a huge COUNT does not gather
    // the whole key space in memory, nor a costly pattern hold the thread.
    let glob = pattern.map(Glob::new);
    let mut budget = SCAN_WORK;
    let mut keys = Vec::new();
    let mut key_bytes = 0;
    let mut next = None;
    for (examined, kv) in state
        .db
        .scan(Bound::Included(&from), Bound::Unbounded)?
        .enumerate()
    {
        let (k, _) = kv?;
        if examined == count || key_bytes >= SCAN_REPLY || budget == 0 {
            next = Some(k);
            break;
        }
        budget = budget.saturating_sub(1);
        let matched = match &glob {
            None => true,
            Some(g) => match g.matches(&k, &mut budget) {
                Ok(m) => m,
                // Examined first in the next call, with a whole budget.
                Err(OutOfBudget) if examined > 0 => {
                    next = Some(k);
                    break;
                }
                Err(OutOfBudget) => {
                    error(
                        out,
                        &format!("ERR MATCH pattern too costly: more than {SCAN_WORK} steps to match one key"),
                    );
                    return Ok(());
                }
            },
        };
        if matched {
            key_bytes += k.len();
            keys.push(k);
        }
    }
    let cursor = next.map_or(0, |k| lock(&state.cursors).issue(k));
    array(out, 2);
    bulk(out, cursor.to_string().as_bytes());
    array(out, keys.len());
    for k in &keys {
        bulk(out, k);
    }
    Ok(())
}

/// Why [`drain_requests`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drained {
    /// Every complete request buffered was executed.
    More,
    /// `QUIT`, a protocol error or an unfinished request over the request
    /// budget (its reply is in `out`): close once the replies are out.
    Close,
    /// A request that is part of an HTTP request ([`is_http_request`]):
    /// close without executing it or anything after it.
    Http,
}

/// A connection's incoming requests: the buffer they are read into, the
/// parser that resumes in it across reads, and the connection's share of
/// the request budget, which its unfinished request holds.
pub(crate) struct Incoming {
    pub(crate) input: LineReader,
    parser: RequestParser,
    share: Share,
}

impl Incoming {
    pub(crate) fn new(input: LineReader, share: Share) -> Self {
        Incoming {
            input,
            parser: RequestParser::default(),
            share,
        }
    }
}

/// Executes every complete request buffered in `incoming`, in order,
/// their replies appended to `out`, which leaves through `sink` once it
/// holds [`STREAM_CHUNK`] bytes (and see [`execute`]); stops at `QUIT`, a
/// protocol error or an HTTP request. The unfinished request left is
/// counted in the connection's share of the request budget, as its bytes
/// or the room made for the bulk string it announced
/// ([`LineReader::reserve`]), whichever is larger; past the budget it is
/// an error (nothing allocated) and the connection closes. The caller
/// applies `pending` before sending `out`.
pub(crate) fn drain_requests(
    state: &RespState,
    incoming: &mut Incoming,
    pending: &mut Pending,
    out: &mut Vec<u8>,
    sink: &mut Sink<'_>,
    counters: Option<&ServerCounters>,
) -> io::Result<Drained> {
    let Incoming {
        input,
        parser,
        share,
    } = incoming;
    loop {
        let (args, used) = match parser.parse(input.buffered()) {
            Ok((Request::Incomplete, _)) => {
                let unfinished = input.buffered().len();
                if unfinished > MAX_REQUEST {
                    pending.apply(&state.db, out);
                    error(out, "ERR Protocol error: request too large");
                    return Ok(Drained::Close);
                }
                // The room for the announced length is counted before
                // it is made: past the budget, nothing is allocated.
                let awaited = parser.awaited().min(MAX_REQUEST);
                let refused = match share.hold(input.holding(awaited)) {
                    Ok(()) => input
                        .reserve(awaited)
                        .err()
                        .map(|e| format!("ERR cannot buffer the request: {e}")),
                    Err(e) => Some(format!("ERR {e}")),
                };
                if let Some(reason) = refused {
                    pending.apply(&state.db, out);
                    error(out, &reason);
                    return Ok(Drained::Close);
                }
                return Ok(Drained::More);
            }
            Ok((Request::Command(args), used)) => (args, used),
            Err(e) => {
                pending.apply(&state.db, out);
                error(out, &format!("ERR Protocol error: {e}"));
                return Ok(Drained::Close);
            }
        };
        let raw = input.buffered().get(..used).unwrap_or_default();
        let args = args.resolve(raw);
        if is_http_request(raw, &args) {
            return Ok(Drained::Http);
        }
        let (after, failed) = execute(state, pending, &args, out, sink)?;
        if let (Some(c), Some(name)) = (counters, args.first()) {
            c.command(Protocol::Resp, name, failed);
        }
        input.consume(used);
        if after == After::Close {
            return Ok(Drained::Close);
        }
        if out.len() >= STREAM_CHUNK {
            pending.apply(&state.db, out);
            sink(out)?;
            out.clear();
        }
    }
}

/// Whether a request (its bytes `raw`, parsed into `args`) is part of an
/// HTTP request, which a web page can make a browser send here: an inline
/// command that [`is_http`] says is a line of one, or an array whose
/// command is `POST` or `Host:` (the commands Redis closes a connection
/// at).
fn is_http_request(raw: &[u8], args: &[&[u8]]) -> bool {
    if raw.first() == Some(&b'*') {
        args.first().is_some_and(|name| {
            name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
        })
    } else {
        is_http(raw.strip_suffix(b"\n").unwrap_or(raw))
    }
}

/// Serves one connection (see the module docs) until `QUIT`, a protocol
/// error, an HTTP request, a disconnect or a time-out (idle, or a request
/// unfinished past the request time-out): those close it without a reply.
pub fn serve_resp_connection(
    state: &RespState,
    stream: &TcpStream,
    config: &ConnectionConfig,
) -> io::Result<()> {
    // The line reader's buffer and reads, parsed as RESP.
    let mut incoming = Incoming::new(
        LineReader::new(MAX_INLINE, READ_CHUNK),
        config.request_budget.share(),
    );
    let mut out = Vec::new();
    let mut pending = Pending::default();
    let mut reader = stream;
    let mut writer = stream;
    let mut clock = ReadClock::new(stream, config)?;
    loop {
        let n = match clock.read(&mut incoming.input, &mut reader, &mut out)? {
            Reading::Bytes(n) => n,
            Reading::TimedOut(_) => {
                let _ = stream.shutdown(Shutdown::Both);
                return Ok(());
            }
        };
        if n == 0 {
            return Ok(());
        }
        let mut sink = |bytes: &[u8]| (&mut writer).write_all(bytes);
        let drained = drain_requests(
            state,
            &mut incoming,
            &mut pending,
            &mut out,
            &mut sink,
            config.counters.as_deref(),
        )?;
        pending.apply(&state.db, &mut out);
        match drained {
            Drained::More => {
                if !out.is_empty() {
                    writer.write_all(&out)?;
                    out.clear();
                }
            }
            Drained::Close => {
                // The buffered bytes go before the lingering close.
                drop(incoming);
                return close_after(stream, &out);
            }
            Drained::Http => {
                drop(incoming);
                refuse_http(stream, &out);
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests;
