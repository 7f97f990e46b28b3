//! The table of the Redis commands served: arity (checked before any
//! command runs, and when `MULTI` queues one), flags, key positions and
//! Redis 7's documentation (summary, group, arguments), from which
//! `COMMAND`, `COMMAND COUNT|LIST|INFO|DOCS` reply, so `redis-cli`'s `HELP`
//! and its argument hints describe what this server does.

use super::reply::{array, bulk, integer, map, null, set, simple, Proto};

/// An argument's type, as `COMMAND DOCS` names it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Key,
    Str,
    Int,
    Pattern,
    /// A keyword alone (its token).
    Token,
    /// One of the arguments inside.
    OneOf,
    /// All of the arguments inside, in order.
    Block,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Key => "key",
            Kind::Str => "string",
            Kind::Int => "integer",
            Kind::Pattern => "pattern",
            Kind::Token => "pure-token",
            Kind::OneOf => "oneof",
            Kind::Block => "block",
        }
    }
}

/// One argument of a command's documentation.
#[derive(Debug)]
pub(super) struct Arg {
    name: &'static str,
    kind: Kind,
    token: Option<&'static str>,
    optional: bool,
    multiple: bool,
    inner: &'static [Arg],
}

const fn arg(name: &'static str, kind: Kind) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
        inner: &[],
    }
}

impl Arg {
    const fn token(mut self, t: &'static str) -> Arg {
        self.token = Some(t);
        self
    }
    const fn optional(mut self) -> Arg {
        self.optional = true;
        self
    }
    const fn multiple(mut self) -> Arg {
        self.multiple = true;
        self
    }
    const fn of(mut self, inner: &'static [Arg]) -> Arg {
        self.inner = inner;
        self
    }
}

const fn token(name: &'static str, t: &'static str) -> Arg {
    arg(name, Kind::Token).token(t)
}

/// One command served.
#[derive(Debug)]
pub(super) struct Command {
    /// Lower case.
    pub(super) name: &'static str,
    /// Redis's arity: `n` arguments with the name exactly, `-n` at least.
    arity: i64,
    flags: &'static [&'static str],
    /// First key, last key (-1: the last argument), step between keys.
    keys: (i64, i64, i64),
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    args: &'static [Arg],
    /// Whether `MULTI` may queue it (the commands on keys, and `PING`,
    /// `ECHO`); any other is refused at queue time.
    pub(super) queueable: bool,
}

impl Command {
    /// Whether it writes.
    pub(super) fn writes(&self) -> bool {
        self.flags.contains(&"write")
    }

    /// Whether `argc` words (the name included) fit the arity.
    pub(super) fn arity_fits(&self, argc: usize) -> bool {
        let argc = argc as i64;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "a table row: every column named where the row is"
)]
const fn cmd(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    args: &'static [Arg],
) -> Command {
    Command {
        name,
        arity,
        flags,
        keys,
        group,
        since,
        summary,
        args,
        queueable: false,
    }
}

impl Command {
    const fn queueable(mut self) -> Command {
        self.queueable = true;
        self
    }
}

const NO_KEYS: (i64, i64, i64) = (0, 0, 0);
const ONE_KEY: (i64, i64, i64) = (1, 1, 1);
const ALL_KEYS: (i64, i64, i64) = (1, -1, 1);
const KEY: Arg = arg("key", Kind::Key);
const KEYS: Arg = arg("key", Kind::Key).multiple();
const RO: &[&str] = &["readonly", "fast"];
const WRITE: &[&str] = &["write", "denyoom"];
const WRITE_FAST: &[&str] = &["write", "denyoom", "fast"];
const CONN: &[&str] = &["noscript", "loading", "stale", "fast"];
const NO_AUTH: &[&str] = &["noscript", "loading", "stale", "fast", "no-auth"];
const TXN: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
const ADMIN: &[&str] = &["loading", "stale"];

/// Every command served, in the order `COMMAND` lists them.
#[rustfmt::skip]
pub(super) static COMMANDS: &[Command] = &[
    cmd("get", 2, RO, ONE_KEY, "string", "1.0.0", "Returns the string value of a key.", &[KEY]).queueable(),
    cmd("set", -3, WRITE, ONE_KEY, "string", "1.0.0",
        "Sets the string value of a key, ignoring its type (lamina: no expiry options).",
        &[KEY, arg("value", Kind::Str),
          arg("condition", Kind::OneOf).optional().of(&[token("nx", "NX"), token("xx", "XX")]),
          token("get", "GET").optional()]).queueable(),
    cmd("mget", -2, RO, ALL_KEYS, "string", "1.0.0", "Atomically returns the string values of one or more keys.", &[KEYS]).queueable(),
    cmd("mset", -3, WRITE, (1, -1, 2), "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.",
        &[arg("data", Kind::Block).multiple().of(&[KEY, arg("value", Kind::Str)])]).queueable(),
    cmd("incr", 2, WRITE_FAST, ONE_KEY, "string", "1.0.0",
        "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", &[KEY]).queueable(),
    cmd("incrby", 3, WRITE_FAST, ONE_KEY, "string", "1.0.0",
        "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        &[KEY, arg("increment", Kind::Int)]).queueable(),
    cmd("decr", 2, WRITE_FAST, ONE_KEY, "string", "1.0.0",
        "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", &[KEY]).queueable(),
    cmd("decrby", 3, WRITE_FAST, ONE_KEY, "string", "1.0.0",
        "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.",
        &[KEY, arg("decrement", Kind::Int)]).queueable(),
    cmd("del", -2, &["write"], ALL_KEYS, "generic", "1.0.0", "Deletes one or more keys.", &[KEYS]).queueable(),
    cmd("unlink", -2, &["write", "fast"], ALL_KEYS, "generic", "4.0.0", "Deletes one or more keys (as DEL: lamina deletes in the background anyway).", &[KEYS]).queueable(),
    cmd("exists", -2, RO, ALL_KEYS, "generic", "1.0.0", "Determines whether one or more keys exist.", &[KEYS]).queueable(),
    cmd("scan", -2, &["readonly"], NO_KEYS, "generic", "2.8.0", "Iterates over the key names in the database.",
        &[arg("cursor", Kind::Int), arg("pattern", Kind::Pattern).token("MATCH").optional(),
          arg("count", Kind::Int).token("COUNT").optional(), arg("type", Kind::Str).token("TYPE").optional()]),
    cmd("dbsize", 1, &["readonly"], NO_KEYS, "server", "1.0.0", "Returns the number of keys in the database (a full scan).", &[]),
    cmd("flushall", -1, &["write"], NO_KEYS, "server", "1.0.0",
        "Removes all keys from all databases (refused unless the server runs with --allow-flushall).",
        &[arg("flush-type", Kind::OneOf).optional().of(&[token("async", "ASYNC"), token("sync", "SYNC")])]),
    cmd("flushdb", -1, &["write"], NO_KEYS, "server", "1.0.0", "Remove all keys from the current database (as FLUSHALL).",
        &[arg("flush-type", Kind::OneOf).optional().of(&[token("async", "ASYNC"), token("sync", "SYNC")])]),
    cmd("multi", 1, TXN, NO_KEYS, "transactions", "1.2.0", "Starts a transaction.", &[]),
    cmd("exec", 1, &["noscript", "loading", "stale"], NO_KEYS, "transactions", "1.2.0",
        "Executes all commands in a transaction, applied as one atomic write batch.", &[]),
    cmd("discard", 1, TXN, NO_KEYS, "transactions", "2.0.0", "Discards a transaction.", &[]),
    cmd("watch", -2, TXN, ALL_KEYS, "transactions", "2.2.0",
        "Monitors changes to keys to determine the execution of a transaction (lamina: by their values).", &[KEYS]),
    cmd("unwatch", 1, TXN, NO_KEYS, "transactions", "2.2.0", "Forgets about watched keys of a transaction.", &[]),
    cmd("ping", -1, &["fast"], NO_KEYS, "connection", "1.0.0", "Returns the server's liveliness response.",
        &[arg("message", Kind::Str).optional()]).queueable(),
    cmd("echo", 2, &["fast"], NO_KEYS, "connection", "1.0.0", "Returns the given string.", &[arg("message", Kind::Str)]).queueable(),
    cmd("quit", -1, NO_AUTH, NO_KEYS, "connection", "1.0.0", "Closes the connection.", &[]),
    cmd("auth", -2, NO_AUTH, NO_KEYS, "connection", "1.0.0", "Authenticates the connection.",
        &[arg("username", Kind::Str).optional(), arg("password", Kind::Str)]),
    cmd("hello", -1, NO_AUTH, NO_KEYS, "connection", "6.0.0", "Handshakes with the server: protocol version (2 or 3), authentication, name.",
        &[arg("arguments", Kind::Block).optional().of(&[
            arg("protover", Kind::Int),
            arg("auth", Kind::Block).token("AUTH").optional().of(&[arg("username", Kind::Str), arg("password", Kind::Str)]),
            arg("clientname", Kind::Str).token("SETNAME").optional()])]),
    cmd("select", 2, CONN, NO_KEYS, "connection", "1.0.0", "Changes the selected database (only 0 exists).", &[arg("index", Kind::Int)]),
    cmd("client", -2, CONN, NO_KEYS, "connection", "2.4.0", "CLIENT ID, GETNAME, SETNAME, SETINFO, NO-EVICT, NO-TOUCH.",
        &[arg("subcommand", Kind::Str), arg("arg", Kind::Str).optional().multiple()]),
    cmd("info", -1, ADMIN, NO_KEYS, "server", "1.0.0", "Returns information and statistics about the server (sections server, stats, keyspace).",
        &[arg("section", Kind::Str).optional().multiple()]),
    cmd("command", -1, ADMIN, NO_KEYS, "server", "2.8.13", "Returns detailed information about all commands (COMMAND COUNT, LIST, INFO, DOCS).",
        &[arg("subcommand", Kind::Str).optional(), arg("command-name", Kind::Str).optional().multiple()]),
    cmd("config", -2, ADMIN, NO_KEYS, "server", "2.0.0", "CONFIG GET parameter: save and appendonly.",
        &[token("get", "GET"), arg("parameter", Kind::Str).multiple()]),
];

/// The entry of `name` (lower case).
pub(super) fn lookup(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

fn acl_categories(c: &Command) -> Vec<String> {
    let mut cats = Vec::new();
    for f in c.flags {
        match *f {
            "readonly" => cats.push("@read".to_string()),
            "write" => cats.push("@write".to_string()),
            "fast" => cats.push("@fast".to_string()),
            _ => {}
        }
    }
    if !c.flags.contains(&"fast") {
        cats.push("@slow".to_string());
    }
    cats.push(format!("@{}", c.group));
    cats
}

/// `COMMAND INFO`'s entry for one command (Redis 7's ten fields).
fn info(out: &mut Vec<u8>, c: &Command, proto: Proto) {
    array(out, 10);
    bulk(out, c.name.as_bytes());
    integer(out, c.arity);
    set(out, c.flags.len(), proto);
    for f in c.flags {
        simple(out, f);
    }
    integer(out, c.keys.0);
    integer(out, c.keys.1);
    integer(out, c.keys.2);
    let cats = acl_categories(c);
    set(out, cats.len(), proto);
    for cat in &cats {
        simple(out, cat);
    }
    array(out, 0); // tips
    array(out, 0); // key specifications
    array(out, 0); // subcommands
}

fn doc_arg(out: &mut Vec<u8>, a: &Arg, proto: Proto) {
    let flags: Vec<&str> = [(a.optional, "optional"), (a.multiple, "multiple")]
        .into_iter()
        .filter_map(|(on, f)| on.then_some(f))
        .collect();
    let fields = 3
        + usize::from(a.token.is_some())
        + usize::from(!flags.is_empty())
        + usize::from(!a.inner.is_empty());
    map(out, fields, proto);
    bulk(out, b"name");
    bulk(out, a.name.as_bytes());
    bulk(out, b"type");
    bulk(out, a.kind.name().as_bytes());
    bulk(out, b"display_text");
    bulk(out, a.token.unwrap_or(a.name).as_bytes());
    if let Some(t) = a.token {
        bulk(out, b"token");
        bulk(out, t.as_bytes());
    }
    if !flags.is_empty() {
        bulk(out, b"flags");
        set(out, flags.len(), proto);
        for f in flags {
            simple(out, f);
        }
    }
    if !a.inner.is_empty() {
        bulk(out, b"arguments");
        array(out, a.inner.len());
        for inner in a.inner {
            doc_arg(out, inner, proto);
        }
    }
}

/// `COMMAND DOCS`'s entry for one command: its name, then its doc map.
fn docs(out: &mut Vec<u8>, c: &Command, proto: Proto) {
    bulk(out, c.name.as_bytes());
    map(out, 3 + usize::from(!c.args.is_empty()), proto);
    for (k, v) in [
        ("summary", c.summary),
        ("since", c.since),
        ("group", c.group),
    ] {
        bulk(out, k.as_bytes());
        bulk(out, v.as_bytes());
    }
    if !c.args.is_empty() {
        bulk(out, b"arguments");
        array(out, c.args.len());
        for a in c.args {
            doc_arg(out, a, proto);
        }
    }
}

/// The commands `names` asks for (lower-cased), all of them when empty;
/// an unknown name is `None`.
fn selected(names: &[&[u8]]) -> Vec<Option<&'static Command>> {
    if names.is_empty() {
        COMMANDS.iter().map(Some).collect()
    } else {
        names
            .iter()
            .map(|n| lookup(&String::from_utf8_lossy(n).to_ascii_lowercase()))
            .collect()
    }
}

/// `COMMAND [COUNT | LIST | INFO [name...] | DOCS [name...]]`.
pub(super) fn command(out: &mut Vec<u8>, a: &[&[u8]], proto: Proto) -> Result<(), String> {
    let sub = a
        .first()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    let rest = a.get(1..).unwrap_or_default();
    match sub.as_deref() {
        None => {
            array(out, COMMANDS.len());
            for c in COMMANDS {
                info(out, c, proto);
            }
        }
        Some("count") if rest.is_empty() => integer(out, COMMANDS.len() as i64),
        Some("list") if rest.is_empty() => {
            array(out, COMMANDS.len());
            for c in COMMANDS {
                bulk(out, c.name.as_bytes());
            }
        }
        Some("info") => {
            let cs = selected(rest);
            array(out, cs.len());
            for c in cs {
                match c {
                    Some(c) => info(out, c, proto),
                    None => null(out, proto),
                }
            }
        }
        Some("docs") => {
            let cs: Vec<&Command> = selected(rest).into_iter().flatten().collect();
            map(out, cs.len(), proto);
            for c in cs {
                docs(out, c, proto);
            }
        }
        Some(s) => {
            return Err(format!(
                "ERR unknown subcommand or wrong number of arguments for '{s}'. Try COMMAND HELP."
            ))
        }
    }
    Ok(())
}
