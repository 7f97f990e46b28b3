//! The commands about the server and the whole key space: `INFO`,
//! `CONFIG GET`, `COMMAND`, `DBSIZE`, `FLUSHALL`/`FLUSHDB`, `SCAN`.

use std::ops::Bound;

use lamina::{Db, WriteBatch};

use super::reply::{bulk, error, integer, map, simple, verbatim, Proto};
use super::{lower, scan, table, RespState};
use crate::glob::Glob;

/// Deletes per batch of `FLUSHALL`.
const FLUSH_BATCH: usize = 10_000;

/// Runs one of this module's commands (its arity already checked).
/// `Ok(false)` when `cmd` is none of them.
pub(super) fn run(
    state: &RespState,
    cmd: &str,
    a: &[&[u8]],
    out: &mut Vec<u8>,
    proto: Proto,
) -> lamina::Result<bool> {
    let db = &state.db;
    match cmd {
        "scan" => scan::scan(state, a, out)?,
        "dbsize" => integer(out, count_keys(db)? as i64),
        "flushall" | "flushdb" => flush(state, a, out)?,
        "info" => info(db, a, out, proto)?,
        "command" => {
            if let Err(msg) = table::command(out, a, proto) {
                error(out, &msg);
            }
        }
        "config" => config(a, out, proto),
        _ => return Ok(false),
    }
    Ok(true)
}

/// The number of keys (a full scan of a snapshot).
fn count_keys(db: &Db) -> lamina::Result<u64> {
    let mut n = 0;
    for kv in db.snapshot().scan(Bound::Unbounded, Bound::Unbounded)? {
        kv?;
        n += 1;
    }
    Ok(n)
}

fn flush(state: &RespState, a: &[&[u8]], out: &mut Vec<u8>) -> lamina::Result<()> {
    if a.len() > 1
        || a.first()
            .is_some_and(|m| !matches!(lower(m).as_str(), "sync" | "async"))
    {
        error(out, "ERR syntax error");
        return Ok(());
    }
    if !state.allow_flushall {
        error(
            out,
            "ERR FLUSHALL is disabled on this server (start lamina serve with --allow-flushall)",
        );
        return Ok(());
    }
    let _exclusive = state.write_exclusive();
    let db = &state.db;
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
    Ok(())
}

/// `INFO [section...]`: sections `server`, `stats`, `keyspace` (all of
/// them without arguments, or for `default`, `all`, `everything`).
fn info(db: &Db, a: &[&[u8]], out: &mut Vec<u8>, proto: Proto) -> lamina::Result<()> {
    let asked: Vec<String> = a.iter().map(|s| lower(s)).collect();
    let all = asked.is_empty()
        || asked
            .iter()
            .any(|s| matches!(s.as_str(), "default" | "all" | "everything"));
    let wants = |section: &str| all || asked.iter().any(|s| s == section);
    let mut text = String::new();
    if wants("server") {
        text.push_str(&format!(
            "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nlamina_version:{}\r\n",
            env!("CARGO_PKG_VERSION")
        ));
    }
    if wants("stats") {
        let s = db.stats();
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&format!(
            "# Stats\r\nlamina_writes:{}\r\nlamina_gets:{}\r\nlamina_flushes:{}\r\nlamina_compactions:{}\r\nlamina_write_amplification:{:.3}\r\n",
            s.writes, s.gets, s.flushes, s.compactions, s.write_amplification,
        ));
    }
    if wants("keyspace") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str("# Keyspace\r\n");
        // As Redis, an empty database has no line.
        let keys = count_keys(db)?;
        if keys > 0 {
            text.push_str(&format!("db0:keys={keys},expires=0,avg_ttl=0\r\n"));
        }
    }
    verbatim(out, &text, proto);
    Ok(())
}

/// The parameters `CONFIG GET` answers (what `redis-benchmark` and client
/// libraries read at start-up); `requirepass` is never among them.
const CONFIG: [(&str, &str); 3] = [("save", ""), ("appendonly", "yes"), ("databases", "1")];

/// `CONFIG GET parameter...` (each a name or a glob): a map of the
/// parameters matched.
fn config(a: &[&[u8]], out: &mut Vec<u8>, proto: Proto) {
    let sub = lower(a[0]);
    if sub != "get" || a.len() < 2 {
        error(
            out,
            &format!(
                "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CONFIG HELP."
            ),
        );
        return;
    }
    let patterns: Vec<Vec<u8>> = a[1..].iter().map(|p| p.to_ascii_lowercase()).collect();
    let globs: Vec<Glob> = patterns.iter().map(|p| Glob::new(p)).collect();
    let matched: Vec<(&str, &str)> = CONFIG
        .into_iter()
        .filter(|(name, _)| {
            globs.iter().any(|g| {
                // A parameter name is a few bytes: a pattern over the budget
                // matches nothing.
                let mut budget = scan::SCAN_WORK;
                g.matches(name.as_bytes(), &mut budget).unwrap_or(false)
            })
        })
        .collect();
    map(out, matched.len(), proto);
    for (name, value) in matched {
        bulk(out, name.as_bytes());
        bulk(out, value.as_bytes());
    }
}
