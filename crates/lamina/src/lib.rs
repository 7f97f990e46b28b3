//! lamina: an LSM-tree key-value storage engine and compaction laboratory.
//!
//! The crate is organised as the tree is: [`vfs`] (all file I/O), [`sst`]
//! (the on-disk sorted-string-table format), the write-ahead log ([`record`],
//! [`batch`]) and [`manifest`], the [`memtable`], the [`version`] (levels →
//! sorted runs → files), pure [`compaction`] policies and the executor that
//! runs their tasks, [`Db`] tying them together, and [`verify()`], the offline
//! integrity check of a database directory.

pub mod batch;
mod clock;
pub mod coding;
pub mod compaction;
mod db;
pub mod error;
pub mod filename;
#[doc(hidden)]
pub mod fuzzing;
pub mod iter;
pub mod key;
pub mod manifest;
pub mod memtable;
pub mod options;
pub mod record;
pub mod repair;
pub mod sst;
pub mod stats;
pub mod tables;
pub mod verify;
pub mod version;
pub mod vfs;
mod wal;

pub use batch::WriteBatch;
pub use db::{Db, DbIterator, DbRevIterator, LevelEntry, LevelIter, Snapshot};
pub use error::{Error, Result};
pub use options::{InvalidOption, Options, SyncMode};
pub use repair::{repair, RepairReport};
pub use stats::{DbStats, LevelStats};
pub use verify::{verify, VerifyReport};
