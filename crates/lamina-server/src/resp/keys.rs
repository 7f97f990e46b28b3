//! The commands on keys (`GET`, `SET`, `MGET`, `MSET`, `DEL`, `EXISTS`,
//! `INCR`...) and the two that `MULTI` also queues (`PING`, `ECHO`), run
//! against a [`Keys`] view: the database (or a snapshot of it) under the
//! writes made so far, which become one [`WriteBatch`] at the end of the
//! command, or of the whole transaction for `EXEC`.

use std::collections::BTreeMap;
use std::io;

use lamina::{Db, Snapshot, WriteBatch};

use super::reply::{array, bulk, error, integer, maybe_bulk, null, simple, Proto};
use super::Sink;
use crate::exec::STREAM_CHUNK;

/// Where a [`Keys`] view reads what it has not written.
enum Source<'a> {
    /// The live database (a single command, ordered by the port's lock).
    Db(&'a Db),
    /// A consistent view (`MGET`, a transaction).
    Snapshot(Snapshot),
}

/// The database as a command (or a transaction) sees it: its own writes
/// over what it reads.
pub(super) struct Keys<'a> {
    source: Source<'a>,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a> Keys<'a> {
    /// Reads of the live database.
    pub(super) fn live(db: &'a Db) -> Self {
        Keys {
            source: Source::Db(db),
            writes: BTreeMap::new(),
        }
    }

    /// Reads of a snapshot of `db` taken now.
    pub(super) fn snapshot(db: &'a Db) -> Self {
        Keys {
            source: Source::Snapshot(db.snapshot()),
            writes: BTreeMap::new(),
        }
    }

    fn get(&self, key: &[u8]) -> lamina::Result<Option<Vec<u8>>> {
        if let Some(w) = self.writes.get(key) {
            return Ok(w.clone());
        }
        match &self.source {
            Source::Db(db) => db.get(key),
            Source::Snapshot(s) => s.get(key),
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
    }

    fn delete(&mut self, key: &[u8]) {
        self.writes.insert(key.to_vec(), None);
    }

    /// The writes made, as one batch (`None`: nothing written).
    pub(super) fn into_batch(self) -> Option<WriteBatch> {
        if self.writes.is_empty() {
            return None;
        }
        let mut batch = WriteBatch::new();
        for (k, v) in self.writes {
            match v {
                Some(v) => batch.put(&k, &v),
                None => batch.delete(&k),
            }
        }
        Some(batch)
    }
}

/// Runs one of the commands of this module (its arity already checked),
/// its reply appended to `out` (an `MGET` reply leaving through `sink` in
/// chunks when there is one). `Err` only when the database or the sink
/// failed; whatever it wrote is in `keys`.
pub(super) fn run(
    keys: &mut Keys<'_>,
    cmd: &str,
    a: &[&[u8]],
    out: &mut Vec<u8>,
    proto: Proto,
    sink: Option<&mut Sink<'_>>,
) -> Result<(), KeyError> {
    match cmd {
        "get" => maybe_bulk(out, keys.get(a[0])?.as_deref(), proto),
        "set" => set(keys, a, out, proto)?,
        "mget" => mget(keys, a, out, proto, sink)?,
        "mset" => {
            if !a.len().is_multiple_of(2) {
                super::arity(out, cmd);
                return Ok(());
            }
            for kv in a.chunks_exact(2) {
                keys.put(kv[0], kv[1]);
            }
            simple(out, "OK");
        }
        "del" | "unlink" => {
            let mut existed = 0;
            for k in a {
                // A key named twice is deleted once, as in Redis.
                if keys.get(k)?.is_some() {
                    existed += 1;
                }
                keys.delete(k);
            }
            integer(out, existed);
        }
        "exists" => {
            let mut n = 0;
            for k in a {
                if keys.get(k)?.is_some() {
                    n += 1;
                }
            }
            integer(out, n);
        }
        "incr" | "decr" | "incrby" | "decrby" => incr(keys, cmd, a, out)?,
        "ping" if a.is_empty() => simple(out, "PONG"),
        "ping" if a.len() == 1 => bulk(out, a[0]),
        "ping" => super::arity(out, cmd),
        "echo" => bulk(out, a[0]),
        other => error(out, &format!("ERR unknown command '{other}'")),
    }
    Ok(())
}

/// Why a command on keys stopped.
#[derive(Debug)]
pub(super) enum KeyError {
    /// The database failed: the command's reply is this error.
    Db(lamina::Error),
    /// The client's socket failed (a streamed `MGET`).
    Sink(io::Error),
}

impl From<lamina::Error> for KeyError {
    fn from(e: lamina::Error) -> Self {
        KeyError::Db(e)
    }
}

/// Whether `cmd` is run by [`run`].
pub(super) fn handles(cmd: &str) -> bool {
    matches!(
        cmd,
        "get"
            | "set"
            | "mget"
            | "mset"
            | "del"
            | "unlink"
            | "exists"
            | "incr"
            | "decr"
            | "incrby"
            | "decrby"
            | "ping"
            | "echo"
    )
}

fn set(keys: &mut Keys<'_>, a: &[&[u8]], out: &mut Vec<u8>, proto: Proto) -> lamina::Result<()> {
    let (key, value) = (a[0], a[1]);
    let (mut nx, mut xx, mut get) = (false, false, false);
    for opt in &a[2..] {
        match super::lower(opt).as_str() {
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
    let old = if nx || xx || get {
        keys.get(key)?
    } else {
        None
    };
    let write = (!nx || old.is_none()) && (!xx || old.is_some());
    if write {
        keys.put(key, value);
    }
    if get {
        maybe_bulk(out, old.as_deref(), proto);
    } else if write {
        simple(out, "OK");
    } else {
        null(out, proto);
    }
    Ok(())
}

/// `MGET`: with a `sink`, the values leave in chunks as they are read, so
/// a reply of any size takes bounded memory. A key whose read fails gets an
/// error element where its value would be (RESP allows errors in arrays):
/// the array's start may be sent already.
fn mget(
    keys: &Keys<'_>,
    a: &[&[u8]],
    out: &mut Vec<u8>,
    proto: Proto,
    mut sink: Option<&mut Sink<'_>>,
) -> Result<(), KeyError> {
    array(out, a.len());
    for k in a {
        match keys.get(k) {
            Ok(v) => maybe_bulk(out, v.as_deref(), proto),
            Err(e) => error(out, &format!("ERR {e}")),
        }
        if let Some(sink) = sink.as_mut().filter(|_| out.len() >= STREAM_CHUNK) {
            sink(out).map_err(KeyError::Sink)?;
            out.clear();
        }
    }
    Ok(())
}

/// An integer as Redis reads one (`string2ll`): `0`, or an optional `-`
/// then digits without a leading zero, within `i64`.
pub(super) fn parse_i64(b: &[u8]) -> Option<i64> {
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    let canonical = b == b"0"
        || (digits.first().is_some_and(|d| (b'1'..=b'9').contains(d))
            && digits.iter().all(u8::is_ascii_digit));
    if !canonical {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

fn incr(keys: &mut Keys<'_>, cmd: &str, a: &[&[u8]], out: &mut Vec<u8>) -> lamina::Result<()> {
    let by = match (cmd, a.get(1)) {
        ("incr", _) => 1,
        ("decr", _) => -1,
        (_, Some(n)) => match parse_i64(n) {
            Some(n) if cmd == "incrby" => n,
            Some(n) => match n.checked_neg() {
                Some(n) => n,
                None => {
                    error(out, "ERR decrement would overflow");
                    return Ok(());
                }
            },
            None => {
                error(out, NOT_AN_INTEGER);
                return Ok(());
            }
        },
        (_, None) => {
            super::arity(out, cmd);
            return Ok(());
        }
    };
    let old = match keys.get(a[0])? {
        None => 0,
        Some(v) => match parse_i64(&v) {
            Some(n) => n,
            None => {
                error(out, NOT_AN_INTEGER);
                return Ok(());
            }
        },
    };
    match old.checked_add(by) {
        Some(new) => {
            keys.put(a[0], itoa::Buffer::new().format(new).as_bytes());
            integer(out, new);
        }
        None => error(out, "ERR increment or decrement would overflow"),
    }
    Ok(())
}
