//! The Redis protocol (RESP2, and RESP3 after `HELLO 3`) on a lamina
//! database, so Redis clients (`redis-cli`, `redis-benchmark`, redis-py,
//! redis-rs, go-redis) can use it: `lamina serve --resp PORT`. Every
//! command, its replies and what is refused: `docs/redis.md`; the command
//! table, with Redis 7's documentation of each, is `table`'s (`COMMAND
//! DOCS`).
//!
//! | command | reply |
//! |---|---|
//! | `GET key` | the value, or null |
//! | `SET key value [NX\|XX] [GET]` | `OK`; null if `NX`/`XX` refused it; with `GET` the old value |
//! | `INCR`, `DECR`, `INCRBY`, `DECRBY` | the new value (a missing key counts as 0) |
//! | `DEL key...`, `EXISTS key...` | how many of the keys existed |
//! | `MGET key...` | the values (null where missing), from one snapshot |
//! | `MSET key value...` | `OK`, all written in one atomic batch |
//! | `MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH` | a transaction applied as one atomic batch (`session`) |
//! | `SCAN cursor [MATCH pattern] [COUNT n] [TYPE string]` | the next cursor and the keys matching `pattern` (Redis's glob, case-sensitive) among up to `n` (10) examined, in key order (at most about [`SCAN_REPLY`] bytes of keys, and [`SCAN_WORK`] steps of matching) |
//! | `DBSIZE` | the number of keys (a full scan) |
//! | `FLUSHALL [SYNC\|ASYNC]` | deletes every key; refused unless the server runs with `--allow-flushall` |
//! | `HELLO [2\|3 [AUTH user pass] [SETNAME name]]`, `AUTH [user] pass` | the protocol version, the password ([`crate::password`]) |
//! | `PING [msg]`, `ECHO msg`, `QUIT`, `SELECT 0`, `INFO [section]`, `COMMAND [COUNT\|LIST\|INFO\|DOCS]`, `CONFIG GET`, `CLIENT ID\|GETNAME\|SETNAME\|SETINFO` | what `redis-cli`, `redis-benchmark` and client libraries ask at start-up |
//!
//! Requests are RESP arrays of bulk strings or inline commands (a line of
//! words, as typed into `telnet`), pipelined freely: replies go out in order
//! once a read's commands are done, or sooner when [`crate::exec::STREAM_CHUNK`]
//! bytes are pending, and at once after a command that walks the key space
//! (`SCAN`, `DBSIZE`, `FLUSHALL`, `INFO`), so a client that hung up is noticed
//! there (the write fails) and the rest of what it sent is not run. Errors
//! follow Redis's wording (`ERR unknown command`, `ERR wrong number of
//! arguments for 'get' command`). A malformed request is answered with
//! `-ERR Protocol error: ...` and the connection closed, as Redis does.
//! With a password, every command but `AUTH`, `HELLO` and `QUIT` is
//! answered `-NOAUTH Authentication required.` until the connection
//! authenticates.
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
//! more than [`SCAN_WORK`] steps on one key alone is an error. A `MULTI`
//! queue holds at most [`MAX_QUEUED`] commands and its bytes (with the
//! values `WATCH` keeps) count against the request budget too; `EXEC`'s
//! reply, gathered until the batch is written, at most [`MAX_EXEC_REPLY`]
//! bytes (and the budget), else the transaction is discarded.
//!
//! Atomicity: the commands that read then write (`SET` with options,
//! `DEL`, `INCR`..., `FLUSHALL`, `EXEC`) hold this port's write lock
//! exclusively from their first read to their write; plain `SET`s and
//! `MSET`s, which only write, hold it shared while their batch is written.
//! So an `INCR` is never lost to another client of this port, and no
//! write of this port lands between an `EXEC`'s reads and its batch. The
//! lock does not order the DSL port's writers.
//!
//! Differences from Redis, by design: keys share the database with the DSL
//! port (a DSL key `k` is the 4-byte key the DSL encodes it to); there are
//! no expiries (`EX`, `PX`, ... are refused) and only strings; `SCAN`
//! cursors are issued by the server (a table of the last [`MAX_CURSORS`]
//! positions; an evicted one is an error, restart from 0); `WATCH` compares
//! values (a key written back to the value it had is not a change);
//! durability is the engine's `--sync` setting.

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use lamina::{Db, WriteBatch};

use crate::exec::STREAM_CHUNK;
use crate::lines::{LineReader, READ_CHUNK};
use crate::metrics::ServerCounters;
use crate::protocol::Protocol;
use crate::request_budget::Share;
use crate::sniff::is_http;
use crate::stream::{close_after, refuse_http, ConnectionConfig, ReadClock, Reading};

mod admin;
mod auth;
mod keys;
mod reply;
mod request;
mod scan;
mod session;
mod table;

use keys::{KeyError, Keys};
use reply::{error, simple, Proto};
use request::MAX_INLINE;
use scan::Cursors;

pub use request::{parse_request, Args, Request, RequestParser, MAX_ARGS, MAX_REQUEST};
pub use scan::{MAX_CURSORS, SCAN_REPLY, SCAN_WORK};
pub(crate) use session::Conn;
pub use session::{MAX_EXEC_REPLY, MAX_QUEUED};

/// What the Redis port shares between its connections.
pub struct RespState {
    db: Arc<Db>,
    allow_flushall: bool,
    /// Orders this port's writes (see the module docs): held exclusively
    /// by a command that reads then writes, shared by a batch of plain
    /// writes.
    writes: RwLock<()>,
    cursors: Mutex<Cursors>,
    client_ids: AtomicU64,
}

impl RespState {
    /// State for serving `db`; `FLUSHALL` only if `allow_flushall`.
    pub fn new(db: Arc<Db>, allow_flushall: bool) -> Self {
        RespState {
            db,
            allow_flushall,
            writes: RwLock::new(()),
            cursors: Mutex::new(Cursors::default()),
            client_ids: AtomicU64::new(0),
        }
    }

    fn write_exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.writes.write().unwrap_or_else(|e| e.into_inner())
    }

    fn write_shared(&self) -> RwLockReadGuard<'_, ()> {
        self.writes.read().unwrap_or_else(|e| e.into_inner())
    }

    fn next_client_id(&self) -> u64 {
        self.client_ids.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// A lock whose holder cannot leave its data inconsistent (a cursor table,
/// a unit): a panicked holder's poison is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What to do after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Close the connection once the replies are out.
    Close,
}

fn arity_message(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

fn arity(out: &mut Vec<u8>, name: &str) {
    error(out, &arity_message(name));
}

fn unknown_command(name: &str, args: &[&[u8]]) -> String {
    let mut msg = format!("ERR unknown command '{name}', with args beginning with:");
    for arg in args.iter().take(8) {
        msg.push_str(&format!(" '{}'", String::from_utf8_lossy(arg)));
    }
    msg
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
    /// Writes the gathered batch (holding the port's write lock shared).
    /// If the write fails, every `+OK` given for it is replaced by the
    /// error: no client is told a lost write landed.
    pub fn apply(&mut self, state: &RespState, out: &mut Vec<u8>) {
        if self.replies == 0 {
            return;
        }
        let written = {
            let _shared = state.write_shared();
            state.db.write(std::mem::take(&mut self.batch))
        };
        if let Err(e) = written {
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

/// Executes one command of a connection (`conn`, holding `share` of the
/// request budget), appending its reply to `out` (a long `MGET` reply
/// leaves through `sink` in chunks as it is read, and `out` leaves
/// through it after a command that walks the key space); plain `SET` and
/// `MSET` join `pending`, every other command first writes it. What to do
/// next, and whether the reply was an error; `Err` only when `sink`
/// failed.
fn execute(
    state: &RespState,
    conn: &mut Conn,
    share: &mut Share,
    pending: &mut Pending,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    sink: &mut Sink<'_>,
) -> io::Result<(After, bool)> {
    let Some((name, rest)) = args.split_first() else {
        return Ok((After::Continue, false));
    };
    let cmd = lower(name);
    if !conn.authed && !matches!(cmd.as_str(), "auth" | "hello" | "quit") {
        error(out, "NOAUTH Authentication required.");
        return Ok((After::Continue, true));
    }
    if conn.txn.is_some() && !session::acts_on_transaction(&cmd) {
        let start = out.len();
        conn.queue(args, share, out);
        return Ok((After::Continue, out.get(start) == Some(&b'-')));
    }
    let plain_set = cmd == "set" && rest.len() == 2;
    let mset = cmd == "mset" && !rest.is_empty() && rest.len() % 2 == 0;
    if plain_set || mset {
        pending.gather(out, rest);
        return Ok((After::Continue, false));
    }
    pending.apply(state, out);
    let start = out.len();
    let after = match run(state, conn, share, &cmd, rest, out, sink) {
        Ok(after) => after,
        Err(KeyError::Sink(e)) => return Err(e),
        Err(KeyError::Db(e)) => {
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
const KEY_SPACE_WALKS: [&str; 5] = ["scan", "dbsize", "flushall", "flushdb", "info"];

/// Runs a command (anything but a gathered plain write) by its table
/// entry: unknown and wrong-arity commands are refused here.
fn run(
    state: &RespState,
    conn: &mut Conn,
    share: &mut Share,
    cmd: &str,
    a: &[&[u8]],
    out: &mut Vec<u8>,
    sink: &mut Sink<'_>,
) -> Result<After, KeyError> {
    let Some(entry) = table::lookup(cmd) else {
        error(out, &unknown_command(cmd, a));
        return Ok(After::Continue);
    };
    if !entry.arity_fits(a.len() + 1) {
        arity(out, cmd);
        return Ok(After::Continue);
    }
    if cmd == "quit" {
        simple(out, "OK");
        return Ok(After::Close);
    }
    if keys::handles(cmd) {
        run_on_keys(state, conn.proto, entry.writes(), cmd, a, out, sink)?;
    } else if !session::run(state, conn, share, cmd, a, out)? {
        admin::run(state, cmd, a, out, conn.proto)?;
    }
    Ok(After::Continue)
}

/// A command on keys alone: a read on the live database (an `MGET` on a
/// snapshot, streamed); a write with the port's write lock held
/// exclusively from its first read to its batch.
fn run_on_keys(
    state: &RespState,
    proto: Proto,
    writes: bool,
    cmd: &str,
    a: &[&[u8]],
    out: &mut Vec<u8>,
    sink: &mut Sink<'_>,
) -> Result<(), KeyError> {
    if !writes {
        let mut view = if cmd == "mget" {
            Keys::snapshot(&state.db)
        } else {
            Keys::live(&state.db)
        };
        return keys::run(&mut view, cmd, a, out, proto, Some(sink));
    }
    let _exclusive = state.write_exclusive();
    let mut view = Keys::live(&state.db);
    let start = out.len();
    keys::run(&mut view, cmd, a, out, proto, None)?;
    if let Some(batch) = view.into_batch() {
        if let Err(e) = state.db.write(batch) {
            out.truncate(start);
            error(out, &format!("ERR {e}"));
        }
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
    conn: Conn,
}

impl Incoming {
    /// A new connection, `conn`, reading into `input`.
    pub(crate) fn new(input: LineReader, share: Share, conn: Conn) -> Self {
        Incoming {
            input,
            parser: RequestParser::default(),
            share,
            conn,
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
        conn,
    } = incoming;
    loop {
        let (args, used) = match parser.parse(input.buffered()) {
            Ok((Request::Incomplete, _)) => {
                let unfinished = input.buffered().len();
                if unfinished > MAX_REQUEST {
                    pending.apply(state, out);
                    error(out, "ERR Protocol error: request too large");
                    return Ok(Drained::Close);
                }
                // The room for the announced length is counted before
                // it is made: past the budget, nothing is allocated.
                let awaited = parser.awaited().min(MAX_REQUEST);
                let refused = match share.hold(input.holding(awaited) + conn.held()) {
                    Ok(()) => input
                        .reserve(awaited)
                        .err()
                        .map(|e| format!("ERR cannot buffer the request: {e}")),
                    Err(e) => Some(format!("ERR {e}")),
                };
                if let Some(reason) = refused {
                    pending.apply(state, out);
                    error(out, &reason);
                    return Ok(Drained::Close);
                }
                return Ok(Drained::More);
            }
            Ok((Request::Command(args), used)) => (args, used),
            Err(e) => {
                pending.apply(state, out);
                error(out, &format!("ERR Protocol error: {e}"));
                return Ok(Drained::Close);
            }
        };
        let raw = input.buffered().get(..used).unwrap_or_default();
        let args = args.resolve(raw);
        if is_http_request(raw, &args) {
            return Ok(Drained::Http);
        }
        let (after, failed) = execute(state, conn, share, pending, &args, out, sink)?;
        if let (Some(c), Some(name)) = (counters, args.first()) {
            c.command(Protocol::Resp, name, failed);
        }
        input.consume(used);
        if after == After::Close {
            return Ok(Drained::Close);
        }
        if out.len() >= STREAM_CHUNK {
            pending.apply(state, out);
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
        Conn::new(state, stream.peer_addr().ok(), config.requirepass.clone()),
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
        pending.apply(state, &mut out);
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
