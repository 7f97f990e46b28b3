//! lamina: an LSM-tree key-value storage engine and compaction laboratory.
//!
//! The public API is what this page lists: [`Db`] (open, read, write,
//! iterate, snapshot, flush, compact, statistics) with its [`Options`] and
//! [`WriteBatch`]; the offline tools [`verify()`] and [`repair()`]; the
//! [`compaction`] laboratory (policies, [`compaction::CompactionSpec`], the
//! registry of strategies; the `lamina-compaction` crate re-exported); the
//! [`vfs`] trait every file operation goes through, with the in-memory and
//! fault-injecting file systems tests use; [`filename`], the names of a
//! database's files, for tools that must tell them apart from others; and
//! [`log`], the log's record framing, for clients that keep a log of their
//! own (the `lamina-dataset` crate's datasets).
//!
//! Inside, the crate is organised as the tree is: `sst` (the table format
//! and its block cache), `record` and `batch` (the write-ahead log),
//! `manifest` and `version` (levels → sorted runs → files), `memtable`,
//! `tables` (open tables), `compaction` (the executor of plans), `db`.
//! `docs/architecture.md` maps them.

mod batch;
mod clock;
mod coding;
pub mod compaction;
mod compression;
mod db;
mod error;
pub mod filename;
#[doc(hidden)]
pub mod fuzzing;
mod info_log;
pub mod inspect;
mod iter;
mod key;
mod key_filter;
pub mod log;
mod lru;
mod manifest;
mod memtable;
#[doc(hidden)]
pub mod microbench;
mod options;
pub mod options_file;
mod range_del;
mod record;
mod repair;
mod row_cache;
mod scan_pool;
pub mod spatial;
mod sst;
mod stats;
mod tables;
mod verify;
mod version;
pub mod vfs;
mod wal;

pub use batch::WriteBatch;
pub use compression::Compression;
pub use db::{
    CheckpointReport, Cursor, Db, DbIterator, DbRevIterator, LevelEntry, LevelIter, Snapshot,
    WindowIter,
};
pub use error::{Error, Result};
pub use options::{Compaction, InvalidOption, Options, OptionsBuilder, SyncMode, MAX_SCAN_THREADS};
pub use repair::{repair, RepairReport};
pub use stats::{
    compaction_stats_table, BlockCounts, BufferLevelStats, BufferStats, DbStats, LatencyHistogram,
    LatencyHistograms, LatencySummary, LevelStats, WindowStats, LATENCY_BUCKETS_NS,
};
pub use verify::{verify, VerifyReport};
