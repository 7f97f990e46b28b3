//! `lamina client`: pipes DSL from stdin to a server, or, on a terminal,
//! reads it line by line with editing and history.

use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use lamina_server::client::PROMPT;
use lamina_server::{run_client, ClientOptions, BYE_REPLY, END_MARKER, SYNC_MARKER, SYNC_REPLY};
use rustyline::error::ReadlineError;
use rustyline::history::{DefaultHistory, History};
use rustyline::{Config, Editor};

/// The commands and what each replies: `lamina client --help` and the
/// `help` command at the prompt.
pub const COMMANDS: &str = "\
Commands (one per line; keys and values are 32-bit integers):
  p K V         put: no reply from `lamina serve` (the CS265 protocol has
                none); `OK` from a `lamina cluster` member once a majority
                committed the write (a client waits for it)
  g K           get: the value, or an empty line
  r LO HI       range [LO, HI): `k:v k:v ...`, or an empty line
  d K           delete: no reply from serve, `OK` from a cluster member
  l \"PATH\"      load a file of little-endian (i32, i32) pairs (serve only;
                inside its --load-dir)
  s [N]         stats in the CS265 course's format: LVL1 is the buffer,
                LVL2 the first on-disk level (L0), LVLn level L(n-2)
  info, bloom, io, misses, stats-json
                the tree, filters, I/O and lookups; levels numbered from L0
                (the first on-disk level) as in inspect, metrics and bench
  flush, compact
                `OK` once done
  quit          end the session
  help          this text (answered by the client, never sent)
Ctrl-D ends the session; Ctrl-C clears the line. On a terminal, the arrow
keys edit the line and walk the history, kept in $LAMINA_HISTORY
[default: ~/.lamina_history].";

/// Lines of history kept.
const HISTORY_LINES: usize = 1000;

/// Flags of `lamina client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    /// No banner and no prompt.
    #[arg(long)]
    pub quiet: bool,
}

/// Exits 0 once the input ended and every reply arrived; fails if the
/// connection drops first.
pub fn run(args: ClientArgs) -> Result<()> {
    let stream = TcpStream::connect((args.host.as_str(), args.port))
        .with_context(|| format!("cannot connect to {}:{}", args.host, args.port))?;
    if io::stdin().is_terminal() {
        return terminal_session(stream, &args);
    }
    let out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let opts = ClientOptions {
        interactive: false,
        prompt: false,
    };
    run_client(stream, io::stdin(), out, opts).context("client session failed")?;
    Ok(())
}

/// A person at a terminal: each line is edited with rustyline, sent with an
/// `@sync` behind it, and its replies printed before the next prompt.
fn terminal_session(stream: TcpStream, args: &ClientArgs) -> Result<()> {
    if !args.quiet {
        eprintln!(
            "connected to {}:{}; type DSL commands, `help` for the list, Ctrl-D or quit to end",
            args.host, args.port
        );
    }
    let _ = stream.set_nodelay(true);
    let config = Config::builder()
        .max_history_size(HISTORY_LINES)
        .context("history size")?
        .history_ignore_dups(true)
        .context("history")?
        .auto_add_history(true)
        .build();
    let mut editor: Editor<(), DefaultHistory> =
        Editor::with_config(config).context("cannot set up the terminal")?;
    let history = history_path();
    if let Some(path) = &history {
        // A first session has no history yet.
        let _ = editor.load_history(path);
    }
    let mut replies = BufReader::new(stream.try_clone().context("connection")?);
    let mut requests = stream;
    let prompt = if args.quiet { "" } else { PROMPT };
    let ended = loop {
        match editor.readline(prompt) {
            Ok(line) => {
                let command = line.trim();
                if command.is_empty() {
                    continue;
                }
                if command == "help" {
                    println!("{COMMANDS}");
                    continue;
                }
                let mut request = Vec::with_capacity(command.len() + 1 + SYNC_MARKER.len());
                request.extend_from_slice(command.as_bytes());
                request.push(b'\n');
                request.extend_from_slice(SYNC_MARKER);
                requests.write_all(&request).context("connection lost")?;
                if print_replies(&mut replies)? == Reply::Bye {
                    break Reply::Bye;
                }
            }
            Err(ReadlineError::Interrupted) => {}
            Err(ReadlineError::Eof) => break Reply::Sync,
            Err(e) => return Err(e).context("cannot read the terminal"),
        }
    };
    if let Some(path) = &history {
        if let Err(e) = save_history(&mut editor, path) {
            eprintln!(
                "lamina: cannot save the history to {}: {e:#}",
                path.display()
            );
        }
    }
    if ended == Reply::Sync {
        requests.write_all(END_MARKER).context("connection lost")?;
        if print_replies(&mut replies)? != Reply::Bye {
            bail!("the server did not end the session");
        }
    }
    Ok(())
}

/// The marker that ended a run of replies.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    /// `@sync`: every reply to the line sent has arrived.
    Sync,
    /// `@bye`: the session is over.
    Bye,
}

/// Prints reply lines until `@sync` or `@bye` (neither printed).
fn print_replies(replies: &mut impl BufRead) -> Result<Reply> {
    let (sync, bye) = (trim_newline(SYNC_REPLY), trim_newline(BYE_REPLY));
    let mut out = io::stdout().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        if replies
            .read_until(b'\n', &mut line)
            .context("connection lost")?
            == 0
        {
            bail!("connection closed by the server before the end of the session");
        }
        let text = trim_newline(&line);
        if text == sync {
            out.flush()?;
            return Ok(Reply::Sync);
        }
        if text == bye {
            out.flush()?;
            return Ok(Reply::Bye);
        }
        out.write_all(text)?;
        out.write_all(b"\n")?;
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `$LAMINA_HISTORY`, else `~/.lamina_history`; none without a home.
fn history_path() -> Option<PathBuf> {
    match std::env::var_os("LAMINA_HISTORY") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".lamina_history")),
    }
}

/// Saves the history, readable by its owner only (it may hold data).
fn save_history(editor: &mut Editor<(), DefaultHistory>, path: &PathBuf) -> Result<()> {
    if editor.history().is_empty() {
        return Ok(());
    }
    editor.save_history(path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}
