//! The protocols a server speaks and the command names each counts: the
//! table the servers ([`crate::stream`], [`crate::spatial`],
//! [`crate::resp`]) and the metrics ([`crate::metrics`]) share.

/// The protocols a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The CS265 DSL.
    Dsl,
    /// The spatial commands.
    Spatial,
    /// The Redis protocol.
    Resp,
}

impl Protocol {
    pub(crate) const ALL: [Protocol; 3] = [Protocol::Dsl, Protocol::Spatial, Protocol::Resp];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Dsl => "dsl",
            Protocol::Spatial => "spatial",
            Protocol::Resp => "resp",
        }
    }

    /// The command names counted one by one; any other is `other`.
    pub(crate) fn commands(self) -> &'static [&'static str] {
        match self {
            Protocol::Dsl => &[
                "p",
                "g",
                "r",
                "d",
                "l",
                "s",
                "info",
                "bloom",
                "misses",
                "io",
                "stats-json",
                "flush",
                "compact",
                "quit",
                "@end",
                "@sync",
            ],
            Protocol::Spatial => &["i", "x", "w", "c", "stats-json", "quit", "@end", "@sync"],
            Protocol::Resp => RESP_COMMANDS,
        }
    }
}

/// Every Redis command served, counted by name in the metrics: the names
/// of the Redis port's command table (a unit test of [`crate::resp`]
/// checks it).
pub(crate) const RESP_COMMANDS: &[&str] = &[
    "ping", "echo", "quit", "get", "set", "del", "unlink", "exists", "mget", "mset", "incr",
    "incrby", "decr", "decrby", "scan", "dbsize", "flushall", "flushdb", "select", "info",
    "command", "config", "client", "hello", "auth", "multi", "exec", "discard", "watch", "unwatch",
];

/// The first word of a command line.
pub(crate) fn first_word(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let rest = &line[start..];
    let end = rest
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    &rest[..end]
}
