//! The names of the files in a database directory (LevelDB's `filename.h`).
//!
//! | file | name |
//! |---|---|
//! | write-ahead log `n` | `NNNNNN.log` (at least six digits) |
//! | SST `n` | `NNNNNN.sst` |
//! | manifest `n` | `MANIFEST-NNNNNN` |
//! | options the database was opened with, `n` | `OPTIONS-NNNNNN` (written as `OPTIONS-NNNNNN.dbtmp`, then renamed) |
//! | pointer to the live manifest | `CURRENT` (and `CURRENT.tmp` while it is replaced) |
//! | the directory lock | `LOCK` |
//! | the info log (events, for operators) | `LOG`, and `LOG.old` once it grew past 16 MiB |
//!
//! Every numbered file takes its number from one counter, so numbers never
//! repeat across kinds. [`parse`] recognises exactly the names the engine
//! writes: `12.sst`, `000012.sst.bak` or `MANIFEST-x` are not lamina's, and
//! nothing in the engine ever deletes them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Name of the file pointing at the live manifest.
pub const CURRENT: &str = "CURRENT";
/// Name of the file a new `CURRENT` is written to before it is renamed.
pub const CURRENT_TMP: &str = "CURRENT.tmp";
/// Name of the directory lock.
pub const LOCK: &str = "LOCK";
/// Name of the info log (`DIR/LOG`: events for operators).
pub const INFO_LOG: &str = "LOG";
/// Name the info log is rotated to.
pub const INFO_LOG_OLD: &str = "LOG.old";

/// The kinds of numbered files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A write-ahead log.
    Wal,
    /// A sorted-string table.
    Table,
    /// A manifest.
    Manifest,
    /// An OPTIONS file (docs/format.md).
    Options,
    /// An OPTIONS file being written, renamed to its final name once synced.
    OptionsTemp,
}

/// Name of WAL number `n`.
pub fn wal_name(n: u64) -> String {
    format!("{n:06}.log")
}

/// Name of SST number `n`.
pub fn sst_name(n: u64) -> String {
    format!("{n:06}.sst")
}

/// Name of manifest number `n`.
pub fn manifest_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}

/// Name of OPTIONS file number `n`.
pub fn options_name(n: u64) -> String {
    format!("OPTIONS-{n:06}")
}

/// Name OPTIONS file number `n` is written under before its rename.
pub fn options_temp_name(n: u64) -> String {
    format!("OPTIONS-{n:06}.dbtmp")
}

/// The name of numbered file `n` of `kind`.
pub fn name_of(kind: FileKind, n: u64) -> String {
    match kind {
        FileKind::Wal => wal_name(n),
        FileKind::Table => sst_name(n),
        FileKind::Manifest => manifest_name(n),
        FileKind::Options => options_name(n),
        FileKind::OptionsTemp => options_temp_name(n),
    }
}

/// The kind and number of a numbered file, if `name` is exactly a name the
/// engine writes.
pub fn parse(name: &str) -> Option<(FileKind, u64)> {
    let (kind, digits) = if let Some(d) = name.strip_suffix(".log") {
        (FileKind::Wal, d)
    } else if let Some(d) = name.strip_suffix(".sst") {
        (FileKind::Table, d)
    } else if let Some(d) = name.strip_prefix("OPTIONS-") {
        match d.strip_suffix(".dbtmp") {
            Some(d) => (FileKind::OptionsTemp, d),
            None => (FileKind::Options, d),
        }
    } else {
        (FileKind::Manifest, name.strip_prefix("MANIFEST-")?)
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    // Round trip: `12.sst` or `0000012.sst` are not names we write.
    (name_of(kind, n) == name).then_some((kind, n))
}

/// Hands out file numbers: one counter for logs, tables and manifests,
/// skipping the numbers of lamina-named files the database does not own.
#[derive(Debug)]
pub(crate) struct FileNumbers {
    pub(crate) next: AtomicU64,
    /// Sorted; usually empty.
    pub(crate) reserved: Vec<u64>,
}

impl FileNumbers {
    pub(crate) fn alloc(&self) -> u64 {
        loop {
            let n = self.next.fetch_add(1, Ordering::SeqCst);
            if self.reserved.binary_search(&n).is_err() {
                return n;
            }
        }
    }

    /// The next number to hand out: what the manifest records as issued.
    pub(crate) fn peek(&self) -> u64 {
        self.next.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_engines_own_names_parse() {
        assert_eq!(parse("000012.sst"), Some((FileKind::Table, 12)));
        assert_eq!(parse("000007.log"), Some((FileKind::Wal, 7)));
        assert_eq!(parse("MANIFEST-000003"), Some((FileKind::Manifest, 3)));
        assert_eq!(parse("OPTIONS-000004"), Some((FileKind::Options, 4)));
        assert_eq!(
            parse("OPTIONS-000004.dbtmp"),
            Some((FileKind::OptionsTemp, 4))
        );
        assert_eq!(parse("1234567.sst"), Some((FileKind::Table, 1_234_567)));
        for not_ours in [
            "12.sst",
            "0000012.sst",
            "000012.sst.bak",
            "+00012.sst",
            "MANIFEST-",
            "MANIFEST-x",
            "MANIFEST-12",
            "OPTIONS-12",
            "OPTIONS-000012.tmp",
            "OPTIONS-000012.dbtmp.old",
            "OPTIONS",
            "CURRENT",
            "LOCK",
            "notes.txt",
            ".log",
            "99999999999999999999999.log",
        ] {
            assert_eq!(parse(not_ours), None, "{not_ours}");
        }
        for kind in [
            FileKind::Wal,
            FileKind::Table,
            FileKind::Manifest,
            FileKind::Options,
            FileKind::OptionsTemp,
        ] {
            for n in [0, 1, 999_999, 1_000_000, u64::MAX] {
                assert_eq!(parse(&name_of(kind, n)), Some((kind, n)));
            }
        }
    }
}
