//! `lamina completions SHELL` and `lamina man`: shell completion scripts
//! and man pages, generated from the command line's own definition, so
//! they list exactly the commands and flags there are.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Command, ValueEnum};
use clap_complete::Shell;

/// The shells `lamina completions` writes for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompletionShell {
    /// bash: `source <(lamina completions bash)`, or save it as
    /// `/usr/share/bash-completion/completions/lamina`.
    Bash,
    /// zsh: save it as `_lamina` in a directory of `$fpath`.
    Zsh,
    /// fish: save it as `~/.config/fish/completions/lamina.fish`.
    Fish,
}

/// Flags of `lamina completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// Flags of `lamina man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `lamina.1` and one page per subcommand (`lamina-serve.1`, ...)
    /// into DIR (created if missing) instead of printing `lamina.1` on
    /// stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell` on stdout.
pub fn completions(args: &CompletionsArgs, mut cmd: Command) -> Result<()> {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut out = io::stdout().lock();
    clap_complete::generate(shell, &mut cmd, "lamina", &mut out);
    out.flush().context("cannot write the completion script")
}

/// Prints `lamina(1)` on stdout, or writes every page to `args.dir`.
pub fn man(args: &ManArgs, cmd: Command) -> Result<()> {
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the man pages to {}", dir.display()))
        }
        None => {
            let mut out = io::stdout().lock();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .context("cannot write the man page")?;
            out.flush().context("cannot write the man page")
        }
    }
}
