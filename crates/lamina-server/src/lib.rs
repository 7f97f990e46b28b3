//! The server side of lamina: the CS265 DSL [`parse`]r, the command
//! executor ([`exec`]), the TCP [`server`] and the pipelined [`client`].
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
mod dsl_key;
pub mod exec;
pub mod fd_limit;
#[doc(hidden)]
pub mod fuzzing;
mod glob;
pub mod lines;
pub mod log_limit;
pub mod metrics;
pub mod parse;
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
