//! `lamina client`: pipes DSL from stdin to a server.

use std::io::{self, BufWriter, IsTerminal};
use std::net::TcpStream;

use anyhow::{Context, Result};
use clap::Args;
use lamina_server::{run_client, ClientOptions};

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
    let interactive = io::stdin().is_terminal();
    if interactive && !args.quiet {
        eprintln!(
            "connected to {}:{}; type DSL commands, Ctrl-D or quit to end",
            args.host, args.port
        );
    }
    let out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let opts = ClientOptions {
        interactive,
        prompt: !args.quiet,
    };
    run_client(stream, io::stdin(), out, opts).context("client session failed")?;
    Ok(())
}
