//! The engine's typed errors.
//!
//! Every fallible operation of the library returns [`Result`]. Bytes read from
//! disk never cause a panic: they either decode or produce [`Error::Corruption`]
//! naming the file and the offset where decoding failed.

use std::path::PathBuf;
use std::sync::Arc;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned by the engine. New kinds may be added
/// (`#[non_exhaustive]`): match the ones you handle and keep a catch-all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error during {op} on {path}: {source}")]
    Io {
        /// What the engine was doing (`append`, `sync`, `rename`, ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Stored bytes failed a checksum or could not be decoded.
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption {
        /// The file holding the bad bytes.
        file: String,
        /// Byte offset of the bad record or block.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// Another process holds the directory lock (a writing `Db` of it,
    /// a server, `lamina repair`).
    #[error("database directory {0} is locked by another process")]
    Locked(PathBuf),
    /// This process already holds the directory lock: another writing `Db`
    /// of the directory is open here, or a closed one is still held by a
    /// [`Snapshot`](crate::Snapshot) or an iterator of it (the lock goes
    /// with the last of them). Read-only opens take no lock
    /// ([`Options::read_only`](crate::Options::read_only)).
    #[error("database directory {0} is already open in this process (another Db of it, or the snapshots and iterators of one, are alive)")]
    LockedInProcess(PathBuf),
    /// A version edit names a run or file the version does not hold, or
    /// adds a file overlapping one of its run. Read from a manifest, that
    /// is damage (replay reports it as [`Error::Corruption`] at the edit's
    /// offset); made by the running engine, it is a bug, and the edit was
    /// neither logged nor installed.
    #[error("version edit does not apply to the current version: {0}")]
    EditRefused(String),
    /// A caller passed an argument the engine cannot honour.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The directory holds a database that cannot be opened as it is (its
    /// `CURRENT` or manifest is missing); nothing was changed. `lamina
    /// repair DIR` rebuilds it from the files that are intact.
    #[error("{} cannot be opened: {reason}; nothing was changed. Run `lamina repair {}` to rebuild the database from its intact files", .dir.display(), .dir.display())]
    NeedsRepair {
        /// The database directory.
        dir: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// An option differs from the value the database was created with, and
    /// the change would make the engine misread its files (the spatial
    /// comparator sets the key order). Nothing was changed.
    #[error("option {option} cannot change from the stored {stored} to {requested}: the data on disk is ordered by the stored value. Open with {option} = {stored} (or build the options with `Options::builder().from_stored_options()`), or copy the data into a new database")]
    IncompatibleOption {
        /// The `Options` field.
        option: &'static str,
        /// The value in the database's newest OPTIONS file.
        stored: String,
        /// The value the caller asked for.
        requested: String,
    },
    /// The database has been closed.
    #[error("database is closed")]
    Closed,
    /// A write to a database opened with `Options::read_only`.
    #[error("the database was opened read-only")]
    ReadOnly,
    /// A background flush failed; writes are refused while it persists
    /// (reads keep working). The flush is retried every 500 ms, and writes
    /// resume without a reopen once it succeeds (say, after space was freed).
    /// [`Db::wait_for_compactions`](crate::Db::wait_for_compactions) also
    /// reports a failed compaction this way. The failure is the source.
    #[error("background flush or compaction failed: {0}")]
    Background(#[source] Arc<Error>),
}

impl Error {
    /// Builds an [`Error::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<String>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// True when the error is an out-of-space condition (ENOSPC).
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                source.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error())
            }
            Error::Background(e) => e.is_no_space(),
            _ => false,
        }
    }

    /// A copy suitable for reporting the same failure to several waiters.
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::LockedInProcess(p) => Error::LockedInProcess(p.clone()),
            Error::NeedsRepair { dir, reason } => Error::NeedsRepair {
                dir: dir.clone(),
                reason: reason.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::IncompatibleOption {
                option,
                stored,
                requested,
            } => Error::IncompatibleOption {
                option,
                stored: stored.clone(),
                requested: requested.clone(),
            },
            Error::EditRefused(s) => Error::EditRefused(s.clone()),
            Error::Closed => Error::Closed,
            Error::ReadOnly => Error::ReadOnly,
            Error::Background(e) => Error::Background(Arc::clone(e)),
        }
    }
}

impl From<lamina_compaction::Error> for Error {
    fn from(e: lamina_compaction::Error) -> Self {
        match e {
            lamina_compaction::Error::InvalidArgument(s) => Error::InvalidArgument(s),
            e @ lamina_compaction::Error::UnknownParameter { .. } => {
                Error::InvalidArgument(e.to_string())
            }
        }
    }
}
