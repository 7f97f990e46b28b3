//! A dataset of point records with a primary index, a spatial secondary
//! index and secondary indexes on fields, kept consistent as AsterixDB
//! keeps them (seed 000 §4.3.1).
//!
//! * The **primary index** maps a record's id to its point, fields and
//!   payload; the **spatial index** is an LSM R-tree
//!   ([`lamina::Options::spatial`]) keyed by the composite ⟨point, id⟩ in a
//!   [`Comparator`](lamina::spatial::Comparator)'s order; a **field index**
//!   ([`FieldIndex`]) is keyed by the composite ⟨field value, id⟩ in byte
//!   order. Each is its own [`Db`](lamina::Db) with its own compaction
//!   policy.
//! * **Eager** maintenance: an upsert looks up the old record through the
//!   primary index and writes anti-matter ⟨old key, id⟩ into every
//!   secondary index whose key changed, so queries need no validation.
//!   **Lazy**: no lookup and no anti-matter on writes; queries validate
//!   each candidate against the primary index.
//! * **One log, one budget.** The indexes keep no logs of their own
//!   (`write_ahead_log: false`); every write is one record of the dataset's
//!   log holding all of its index operations, so a crash applies all or
//!   none of them. The indexes' memtables share one memory budget and are
//!   flushed together; then a checkpoint starts a new log, and logs before
//!   it are deleted. Replaying a log applies operations already in flushed
//!   tables again, in order, which leaves the same state.
//!
//! The layout on disk is in `docs/format.md`, "Dataset".
//!
//! The crate is a client of the engine's public API, as fjall's keyspace is
//! of `lsm-tree`: `dataset` opens, replays, writes and queries; `log` is the
//! dataset log's records (framed by [`lamina::log`]) and how one is
//! applied; `descriptor` the directory's names and its `DATASET` file;
//! `options`, `record` (the primary index's value) and `keys` (the primary
//! and field indexes' key codecs).

mod dataset;
mod descriptor;
mod keys;
mod log;
mod options;
mod record;

pub use dataset::{Dataset, DatasetStats, WindowAnswer};
pub use options::{DatasetOptions, FieldIndex, Maintenance};
pub use record::Record;
