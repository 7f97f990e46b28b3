//! A connection's own state and the commands that change it: the protocol
//! version (`HELLO`), authentication (`AUTH`), its name (`CLIENT`), and
//! its transaction (`MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH`).
//!
//! A transaction's commands are checked when queued (unknown, wrong
//! arity, or not one `MULTI` may queue: an error, and `EXEC` then answers
//! `EXECABORT`, as in Redis) and run by `EXEC` against one snapshot with
//! the port's write lock held exclusively; their writes become one
//! [`lamina::WriteBatch`], so another client sees all of them or none. A
//! command's read inside the transaction sees the database as `EXEC`
//! found it plus the transaction's own earlier writes (Redis runs the
//! queued commands one after the other, with the same effect).

use std::net::SocketAddr;

use super::auth;
use super::keys::{self, KeyError, Keys};
use super::reply::{array, bulk, error, integer, map, maybe_bulk, null_array, simple, Proto};
use super::table::lookup;
use super::{lower, RespState};
use crate::password::Password;
use crate::request_budget::Share;

/// Commands `MULTI` queues at most.
pub const MAX_QUEUED: usize = 100_000;
/// Bytes of replies `EXEC` gathers at most (they leave only once the
/// transaction is written); past it the transaction is discarded.
pub const MAX_EXEC_REPLY: usize = super::MAX_REQUEST;

/// A connection's state.
#[derive(Debug, Default)]
pub(crate) struct Conn {
    pub(super) proto: Proto,
    /// Whether commands other than `AUTH`, `HELLO` and `QUIT` may run.
    pub(super) authed: bool,
    name: Option<Vec<u8>>,
    pub(super) id: u64,
    pub(super) peer: Option<SocketAddr>,
    /// The password it must give, if any.
    password: Option<Password>,
    /// Set by `MULTI`: the commands queued.
    pub(super) txn: Option<Txn>,
    /// `WATCH`ed keys and their values when watched.
    watched: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// The commands `MULTI` queued.
#[derive(Debug, Default)]
pub(super) struct Txn {
    queued: Vec<Vec<Vec<u8>>>,
    bytes: usize,
    /// A command was refused when queued: `EXEC` answers `EXECABORT`.
    failed: bool,
}

impl Conn {
    /// A connection to `state`'s port, from `peer`, that must give
    /// `password` (if any) before other commands.
    pub(crate) fn new(
        state: &RespState,
        peer: Option<SocketAddr>,
        password: Option<Password>,
    ) -> Conn {
        Conn {
            authed: password.is_none(),
            id: state.next_client_id(),
            peer,
            password,
            ..Conn::default()
        }
    }

    /// Bytes this connection holds besides its unfinished request: queued
    /// commands and watched values (counted against the request budget).
    pub(super) fn held(&self) -> usize {
        let queued = self.txn.as_ref().map_or(0, |t| t.bytes);
        queued
            + self
                .watched
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }

    /// Queues `args` (a command inside `MULTI`), replying `QUEUED`, or an
    /// error that makes `EXEC` abort.
    pub(super) fn queue(&mut self, args: &[&[u8]], share: &mut Share, out: &mut Vec<u8>) {
        let held = self.held();
        let Some(txn) = self.txn.as_mut() else {
            return;
        };
        let Some((name, rest)) = args.split_first() else {
            return;
        };
        let cmd = lower(name);
        let bytes: usize = args.iter().map(|a| a.len() + 16).sum();
        let refusal = match lookup(&cmd) {
            None => Some(super::unknown_command(&cmd, rest)),
            Some(c) if !c.arity_fits(args.len()) => Some(super::arity_message(&cmd)),
            Some(c) if !c.queueable => Some(format!(
                "ERR '{cmd}' cannot be queued inside MULTI on lamina (only commands on keys, PING and ECHO)"
            )),
            Some(_) if txn.queued.len() >= MAX_QUEUED => Some(format!(
                "ERR MULTI queues at most {MAX_QUEUED} commands"
            )),
            Some(_) => share
                .hold(held + bytes)
                .err()
                .map(|e| {
                    format!(
                        "ERR MULTI queue over the request budget ({} bytes for all connections); command not queued",
                        e.limit
                    )
                }),
        };
        match refusal {
            Some(msg) => {
                txn.failed = true;
                error(out, &msg);
            }
            None => {
                txn.queued.push(args.iter().map(|a| a.to_vec()).collect());
                txn.bytes += bytes;
                simple(out, "QUEUED");
            }
        }
    }
}

/// Runs a command on the connection's state (its arity already checked):
/// `HELLO`, `AUTH`, `CLIENT`, `SELECT`, `MULTI`, `EXEC`, `DISCARD`,
/// `WATCH`, `UNWATCH`. `Ok(false)` when `cmd` is none of them.
pub(super) fn run(
    state: &RespState,
    conn: &mut Conn,
    share: &mut Share,
    cmd: &str,
    a: &[&[u8]],
    out: &mut Vec<u8>,
) -> lamina::Result<bool> {
    match cmd {
        "hello" => hello(conn, a, out),
        "auth" => {
            let (user, pass) = match a {
                [pass] => (None, *pass),
                [user, pass] => (Some(*user), *pass),
                _ => {
                    error(out, "ERR syntax error");
                    return Ok(true);
                }
            };
            match auth::check(conn.password.as_ref(), user, pass, conn.peer) {
                Ok(()) => {
                    conn.authed = true;
                    simple(out, "OK");
                }
                Err(msg) => error(out, msg),
            }
        }
        "client" => client(conn, a, out),
        "select" => match keys::parse_i64(a[0]) {
            Some(0) => simple(out, "OK"),
            Some(_) => error(out, "ERR DB index is out of range"),
            None => error(out, "ERR value is not an integer or out of range"),
        },
        "multi" => {
            if conn.txn.is_some() {
                error(out, "ERR MULTI calls can not be nested");
            } else {
                conn.txn = Some(Txn::default());
                simple(out, "OK");
            }
        }
        "discard" => {
            if conn.txn.take().is_some() {
                conn.watched.clear();
                simple(out, "OK");
            } else {
                error(out, "ERR DISCARD without MULTI");
            }
        }
        "watch" => {
            if conn.txn.is_some() {
                error(out, "ERR WATCH inside MULTI is not allowed");
            } else {
                for k in a {
                    let value = state.db.get(k)?;
                    conn.watched.push((k.to_vec(), value));
                }
                match share.hold(conn.held()) {
                    Ok(()) => simple(out, "OK"),
                    Err(e) => {
                        conn.watched.clear();
                        error(
                            out,
                            &format!(
                                "ERR WATCH over the request budget ({} bytes for all connections); nothing watched",
                                e.limit
                            ),
                        );
                    }
                }
            }
        }
        "unwatch" => {
            conn.watched.clear();
            simple(out, "OK");
        }
        "exec" => exec(state, conn, share, out)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`: switches the
/// connection's protocol, authenticates and names it, then replies with
/// the server's description (a map, in the protocol switched to).
fn hello(conn: &mut Conn, a: &[&[u8]], out: &mut Vec<u8>) {
    let mut proto = conn.proto;
    let mut auth_args = None;
    let mut name = None;
    if let Some((ver, mut opts)) = a.split_first() {
        proto = match keys::parse_i64(ver) {
            Some(2) => Proto::Resp2,
            Some(3) => Proto::Resp3,
            Some(_) => {
                error(out, "NOPROTO unsupported protocol version");
                return;
            }
            None => {
                error(
                    out,
                    "ERR Protocol version is not an integer or out of range",
                );
                return;
            }
        };
        while let Some((opt, rest)) = opts.split_first() {
            match (lower(opt).as_str(), rest) {
                ("auth", [user, pass, more @ ..]) => {
                    auth_args = Some((*user, *pass));
                    opts = more;
                }
                ("setname", [n, more @ ..]) => {
                    name = Some(*n);
                    opts = more;
                }
                (o, _) => {
                    error(out, &format!("ERR Syntax error in HELLO option '{o}'"));
                    return;
                }
            }
        }
    }
    if let Some((user, pass)) = auth_args {
        match auth::check(conn.password.as_ref(), Some(user), pass, conn.peer) {
            Ok(()) => conn.authed = true,
            Err(msg) => {
                error(out, msg);
                return;
            }
        }
    }
    if !conn.authed {
        error(out, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        return;
    }
    if let Some(n) = name {
        if let Err(msg) = set_name(conn, n) {
            error(out, msg);
            return;
        }
    }
    conn.proto = proto;
    map(out, 7, proto);
    for (k, v) in [("server", "redis"), ("version", "7.0.0")] {
        bulk(out, k.as_bytes());
        bulk(out, v.as_bytes());
    }
    bulk(out, b"proto");
    integer(out, proto.number());
    bulk(out, b"id");
    integer(out, conn.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        bulk(out, k.as_bytes());
        bulk(out, v.as_bytes());
    }
    bulk(out, b"modules");
    array(out, 0);
}

fn set_name(conn: &mut Conn, name: &[u8]) -> Result<(), &'static str> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    conn.name = (!name.is_empty()).then(|| name.to_vec());
    Ok(())
}

fn client(conn: &mut Conn, a: &[&[u8]], out: &mut Vec<u8>) {
    let sub = lower(a[0]);
    match (sub.as_str(), &a[1..]) {
        ("id", []) => integer(out, conn.id as i64),
        ("getname", []) => maybe_bulk(out, conn.name.as_deref(), conn.proto),
        ("setname", [name]) => match set_name(conn, name) {
            Ok(()) => simple(out, "OK"),
            Err(msg) => error(out, msg),
        },
        // What client libraries send at start-up; nothing to keep.
        ("setinfo", [_, _]) | ("no-evict" | "no-touch", [_]) => simple(out, "OK"),
        _ => error(
            out,
            &format!(
                "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."
            ),
        ),
    }
}

/// `EXEC`: the queued commands against one snapshot, their writes applied
/// as one batch; `EXECABORT` if one was refused when queued, a null reply
/// if a watched key's value changed since `WATCH`.
fn exec(
    state: &RespState,
    conn: &mut Conn,
    share: &mut Share,
    out: &mut Vec<u8>,
) -> lamina::Result<()> {
    let Some(txn) = conn.txn.take() else {
        error(out, "ERR EXEC without MULTI");
        return Ok(());
    };
    let watched = std::mem::take(&mut conn.watched);
    if txn.failed {
        error(
            out,
            "EXECABORT Transaction discarded because of previous errors.",
        );
        return Ok(());
    }
    let _exclusive = state.write_exclusive();
    for (k, v) in &watched {
        if state.db.get(k)? != *v {
            null_array(out, conn.proto);
            return Ok(());
        }
    }
    let start = out.len();
    let mut keys = Keys::snapshot(&state.db);
    array(out, txn.queued.len());
    for args in &txn.queued {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        // A queued command has its name (an empty request is not queued).
        let Some((name, rest)) = args.split_first() else {
            continue;
        };
        let refused = match keys::run(&mut keys, &lower(name), rest, out, conn.proto, None) {
            Err(KeyError::Db(e)) => Some(format!("ERR {e}")),
            Err(KeyError::Sink(e)) => Some(format!("ERR {e}")),
            Ok(()) if out.len() - start > MAX_EXEC_REPLY => {
                Some(format!("ERR EXEC reply over {MAX_EXEC_REPLY} bytes"))
            }
            Ok(()) => share.hold(txn.bytes + (out.len() - start)).err().map(|e| {
                format!(
                    "ERR EXEC reply over the request budget ({} bytes for all connections)",
                    e.limit
                )
            }),
        };
        if let Some(msg) = refused {
            out.truncate(start);
            error(
                out,
                &format!("{msg} (transaction discarded, nothing written)"),
            );
            return Ok(());
        }
    }
    if let Some(batch) = keys.into_batch() {
        if let Err(e) = state.db.write(batch) {
            out.truncate(start);
            error(
                out,
                &format!("ERR {e} (transaction discarded, nothing written)"),
            );
        }
    }
    Ok(())
}

/// Whether `cmd` is run by [`run`] (the commands `MULTI` does not queue
/// but runs at once: they act on the transaction itself, or end the
/// connection).
pub(super) fn acts_on_transaction(cmd: &str) -> bool {
    matches!(cmd, "exec" | "discard" | "multi" | "watch" | "quit")
}
