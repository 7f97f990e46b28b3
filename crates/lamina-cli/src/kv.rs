//! `lamina kv`: ldb-like access to the byte keys of any lamina database,
//! including those written through the library rather than the DSL.
//!
//! Keys and values are given and shown escaped or, with `--hex`, as hex
//! ([`crate::bytefmt`]). `get`, `scan` and `count` open the database read
//! only, which takes no lock, so they run beside a server or any writer of
//! the database and read it as of their open; `put`, `delete` and
//! `delete-range` sync their write; `checkpoint` writes a copy.
//! No action creates a database: a directory without one is refused
//! untouched.

use std::io::{self, BufWriter, Write};
use std::ops::Bound;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lamina::{Db, SyncMode};

use crate::bytefmt::ByteFormat;
use crate::dbdir;
use crate::engine_opts::EngineOpts;
use lamina_experiment::kvops::visit_first;

/// Exit status of `get` when the key is absent (1 is an error, 2 a usage
/// error).
pub const NOT_FOUND: u8 = 3;

/// Flags of `lamina kv`.
#[derive(Debug, Args)]
#[command(
    mut_arg("dir", |a| a.help("Database directory (an existing database; never created)")),
    mut_arg("sync", |a| a.help("WAL sync mode: ignored, writes always sync")),
    mut_arg("read_only", |a| a.help("Refuse put, delete and delete-range (get, scan and count always open the database read only, which takes no lock: they run beside a server)")),
    after_help = "Keys and values are escaped: printable ASCII as is, `\\\\` for a backslash, \
                  `\\xNN` for any other byte (input also takes upper-case hex digits and any \
                  other character as its UTF-8 bytes); with --hex, two hex digits per byte \
                  (input may start with 0x). Put `--` before a key that starts with `-`.\n\
                  Exit status: 0 done, 1 error, 2 bad usage, 3 `get` of an absent key."
)]
pub struct KvArgs {
    #[command(flatten)]
    pub engine: EngineOpts,
    /// Keys and values as hex, two digits per byte, instead of escaped.
    #[arg(long, global = true)]
    pub hex: bool,
    #[command(subcommand)]
    pub action: Action,
}

/// What `lamina kv` does.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Print KEY's value; if KEY is absent, print nothing and exit with status 3.
    Get {
        /// The key.
        key: String,
    },
    /// Store KEY -> VALUE, synced to the log before returning.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Delete KEY (absent or not), synced to the log before returning.
    Delete {
        /// The key.
        key: String,
    },
    /// Delete every key in [FROM, TO) with one range tombstone (like
    /// `ldb deleterange`), synced to the log before returning; an empty
    /// range (FROM >= TO) deletes nothing.
    DeleteRange {
        /// First key deleted (inclusive).
        from: String,
        /// End of the range (exclusive).
        to: String,
    },
    /// Print the live entries of a key range in key order, one per line:
    /// KEY, a tab, VALUE.
    Scan {
        #[command(flatten)]
        range: Range,
        /// Descending key order (--limit then takes the largest keys).
        #[arg(long)]
        reverse: bool,
    },
    /// Print the number of live entries in a key range.
    Count {
        #[command(flatten)]
        range: Range,
    },
    /// Write an openable copy of the database to OUT, a new or empty
    /// directory: SSTs hard-linked (copied across file systems), a fresh
    /// manifest (like `ldb checkpoint`).
    Checkpoint {
        /// The new directory.
        out: std::path::PathBuf,
    },
}

/// A key range and how many of its entries to take.
#[derive(Debug, Args)]
pub struct Range {
    /// First key of the range (inclusive) [default: the smallest].
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// End of the range (exclusive) [default: past the largest key].
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// At most N entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

/// Runs the action; `get` of an absent key exits with [`NOT_FOUND`].
pub fn run(args: KvArgs) -> Result<ExitCode> {
    let fmt = ByteFormat::new(args.hex);
    // Inputs are parsed before the database is opened: a typo costs nothing.
    match args.action {
        Action::Get { key } => {
            let key = fmt.parse(&key).context("bad KEY")?;
            let db = open(&args.engine, false)?;
            let value = db.get(&key).context("get failed");
            db.close().context("closing the database failed")?;
            let Some(value) = value? else {
                return Ok(ExitCode::from(NOT_FOUND));
            };
            let mut line = Vec::with_capacity(value.len() + 1);
            fmt.push(&mut line, &value);
            line.push(b'\n');
            print_all(|out| out.write_all(&line))?;
        }
        Action::Put { key, value } => {
            let key = fmt.parse(&key).context("bad KEY")?;
            let value = fmt.parse(&value).context("bad VALUE")?;
            write(&args.engine, |db| db.put(&key, &value))?;
        }
        Action::Delete { key } => {
            let key = fmt.parse(&key).context("bad KEY")?;
            write(&args.engine, |db| db.delete(&key))?;
        }
        Action::DeleteRange { from, to } => {
            let from = fmt.parse(&from).context("bad FROM")?;
            let to = fmt.parse(&to).context("bad TO")?;
            write(&args.engine, |db| db.delete_range(&from, &to))?;
        }
        Action::Scan { range, reverse } => {
            let span = range.parse(fmt)?;
            let db = open(&args.engine, false)?;
            let scanned = scan(&db, fmt, &span, reverse);
            db.close().context("closing the database failed")?;
            scanned?;
        }
        Action::Count { range } => {
            let span = range.parse(fmt)?;
            let db = open(&args.engine, false)?;
            let (lo, hi) = span.bounds();
            let n = db
                .scan(lo, hi)
                .map_err(anyhow::Error::from)
                .and_then(|entries| visit_first(entries, span.limit, &mut |_, _| {}))
                .context("count failed");
            db.close().context("closing the database failed")?;
            let line = format!("{}\n", n?);
            print_all(|out| out.write_all(line.as_bytes()))?;
        }
        Action::Checkpoint { out } => {
            let db = open(&args.engine, true)?;
            let report = db
                .checkpoint(&out)
                .with_context(|| format!("checkpoint to {} failed", out.display()));
            db.close().context("closing the database failed")?;
            let r = report?;
            let line = format!(
                "checkpoint {}: {} files ({} copied), {} bytes, sequence {}\n",
                out.display(),
                r.files,
                r.copied,
                r.bytes,
                r.sequence
            );
            print_all(|out| out.write_all(line.as_bytes()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A [`Range`] with its keys parsed.
struct Span {
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
    /// `u64::MAX` without `--limit`.
    limit: u64,
}

impl Range {
    fn parse(&self, fmt: ByteFormat) -> Result<Span> {
        let key = |k: &Option<String>, flag| {
            k.as_deref()
                .map(|k| fmt.parse(k).with_context(|| format!("bad {flag}")))
                .transpose()
        };
        Ok(Span {
            from: key(&self.from, "--from")?,
            to: key(&self.to, "--to")?,
            limit: self.limit.unwrap_or(u64::MAX),
        })
    }
}

impl Span {
    /// `--from` (inclusive) and `--to` (exclusive) as scan bounds.
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            self.from
                .as_deref()
                .map_or(Bound::Unbounded, Bound::Included),
            self.to.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
        )
    }
}

/// Entries in either direction.
type Entries = Box<dyn Iterator<Item = lamina::Result<(Vec<u8>, Vec<u8>)>>>;

/// Opens the existing database in `--dir`: read only unless `write`, and
/// then with every write synced whatever `--sync` says.
fn open(engine: &EngineOpts, write: bool) -> Result<Db> {
    let mut opts = engine.to_options()?;
    dbdir::require_database(&engine.dir)?;
    // A second guard, should the directory change after the check.
    opts.create_if_missing = false;
    if write {
        opts.sync = SyncMode::Always;
    } else {
        opts.read_only = true;
    }
    engine.open_with(opts)
}

/// Applies one write and closes the database.
fn write(engine: &EngineOpts, op: impl FnOnce(&Db) -> lamina::Result<()>) -> Result<()> {
    let db = open(engine, true)?;
    let written = op(&db).context("write failed");
    db.close().context("closing the database failed")?;
    written
}

/// Streams the entries of `span` to stdout.
fn scan(db: &Db, fmt: ByteFormat, span: &Span, reverse: bool) -> Result<()> {
    let (lo, hi) = span.bounds();
    let entries: Entries = if reverse {
        Box::new(db.scan_rev(lo, hi)?)
    } else {
        Box::new(db.scan(lo, hi)?)
    };
    let mut failed = None;
    let mut line = Vec::new();
    print_all(|out| {
        for entry in entries.take(usize::try_from(span.limit).unwrap_or(usize::MAX)) {
            let (k, v) = match entry {
                Ok(kv) => kv,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            line.clear();
            fmt.push(&mut line, &k);
            line.push(b'\t');
            fmt.push(&mut line, &v);
            line.push(b'\n');
            out.write_all(&line)?;
        }
        Ok(())
    })?;
    match failed {
        Some(e) => Err(e).context("scan failed"),
        None => Ok(()),
    }
}

/// Runs `print` on buffered stdout. A reader that stops early (`| head`)
/// ends the output without an error, as it does for other Unix tools.
fn print_all(print: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    match print(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout failed"),
    }
}
