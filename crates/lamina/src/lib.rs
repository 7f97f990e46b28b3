//! lamina: an LSM-tree key-value storage engine and compaction laboratory.
//!
//! The crate is organised as the tree is: [`vfs`] (all file I/O), [`sst`]
//! (the on-disk sorted-string-table format), the write-ahead log and manifest,
//! the memtable, the version (levels → sorted runs → files), pure compaction
//! policies and the executor that runs their tasks.

pub mod cache;
pub mod coding;
pub mod error;
pub mod iter;
pub mod key;
pub mod sst;
pub mod stats;
pub mod vfs;

pub use error::{Error, Result};
