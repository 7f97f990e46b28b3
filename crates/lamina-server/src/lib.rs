//! The network front ends of a lamina database: the servers behind
//! `lamina serve`, their client, and what bounds and observes them.
//!
//! # Protocols
//!
//! One [`Server`] serves up to three ports over the same database, each a
//! [`protocol::Protocol`]:
//!
//! * The CS265 DSL ([`parse`]r, [`exec`]utor; keys are `i32`s stored by
//!   the key codec [`dsl_key`]), driven from any byte stream by [`stream`]
//!   (TCP connections, `lamina exec`, the server console). Its framing is
//!   described below; [`client`] is the pipelined client.
//! * The spatial commands ([`spatial`]): point records in a
//!   [`lamina_dataset::Dataset`], window and count queries.
//! * The Redis protocol, RESP2 and RESP3 ([`resp`]), so `redis-cli`,
//!   `redis-benchmark` and client libraries can use the database.
//!
//! Every line protocol closes a connection at a line of an HTTP request
//! ([`sniff`]).
//!
//! # The server
//!
//! [`server`] runs one thread per connection with a cap on connections
//! (sized to the process's descriptors by [`fd_limit`]), an optional idle
//! time-out, loads confined to a directory, and a bounded shutdown
//! ([`ShutdownHandle`]).
//!
//! # Budgets
//!
//! Each connection's unfinished request is bounded by its protocol (a DSL
//! line by [`lines::MAX_LINE`], a Redis request by [`resp::MAX_REQUEST`])
//! and must complete within [`ServerConfig::request_timeout`]; the memory of
//! unfinished requests across all connections is bounded by one
//! [`request_budget::RequestBudget`]. Refusals are logged at most once a
//! minute per kind ([`log_limit`]).
//!
//! # Metrics
//!
//! [`metrics`] counts connections, commands by name and error replies per
//! protocol ([`metrics::ServerCounters`]) and serves them, with the
//! engine's statistics, in the Prometheus text format at `GET /metrics`
//! (`lamina serve --metrics ADDR`).
//!
//! # Wire protocol
//!
//! The client sends DSL lines (`\n`-terminated, at most 1 MiB each) and the
//! server answers with reply lines in order; commands without a reply (`p`,
//! `d`, `l`) send nothing, so a client streams its input without waiting.
//! See [`exec`] for every command's reply.
//!
//! Two marker commands frame a session, and replies starting with `@` are
//! only ever these markers (no data reply starts with `@`):
//!
//! * `@end` — the client has no more input. The server executes everything
//!   before it, replies `@bye` and closes the connection. `quit` does the
//!   same. A client that sees `@bye` knows every reply has arrived; a
//!   connection that ends without `@bye` was dropped.
//! * `@sync` — the server replies `@sync` (after the replies of everything
//!   before it). The interactive client sends it after each line to know
//!   when to show the next prompt.
//!
//! A connection that drops mid-line has its unterminated last line
//! discarded; every complete line before it has been executed.
//!
//! The server closes a connection without a reply at a line of an HTTP
//! request ([`sniff::is_http`]: what a web page can make a browser send
//! to any local port), executing neither it nor anything after it; and,
//! after an `ERROR request timeout ...` line, one whose unfinished line is
//! still incomplete after [`ServerConfig::request_timeout`] of waiting for
//! it, however slowly its bytes trickle in.

pub mod client;
pub mod dsl_key;
pub mod exec;
pub mod fd_limit;
#[doc(hidden)]
pub mod fuzzing;
mod glob;
pub mod lines;
pub mod log_limit;
pub mod metrics;
pub mod parse;
pub mod password;
pub mod protocol;
pub mod request_budget;
pub mod resp;
pub mod server;
pub mod sniff;
pub mod spatial;
pub mod stream;

pub use client::{run_client, ClientError, ClientOptions};
pub use exec::{Control, LoadAccess, Mode, Session};
pub use server::{run_console, Server, ServerConfig, ShutdownHandle};
pub use stream::{run_local, run_session, serve_connection, ConnectionConfig};

/// Sent by the client after its last line.
pub const END_MARKER: &[u8] = b"@end\n";
/// The server's answer to [`END_MARKER`] (and to `quit`), right before it closes.
pub const BYE_REPLY: &[u8] = b"@bye\n";
/// Sent by the interactive client after each line.
pub const SYNC_MARKER: &[u8] = b"@sync\n";
/// The server's answer to [`SYNC_MARKER`].
pub const SYNC_REPLY: &[u8] = b"@sync\n";
