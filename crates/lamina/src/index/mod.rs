//! A dataset of point records with a primary index and a spatial secondary
//! index, kept consistent as AsterixDB keeps them (seed 000 §4.3.1).
//!
//! * The **primary index** maps a record's id to its point and payload; the
//!   **secondary index** is an LSM R-tree ([`crate::Options::spatial`])
//!   keyed by the composite ⟨point, id⟩ in a [`Comparator`]'s order. Each is
//!   its own [`Db`] with its own compaction policy.
//! * **Eager** maintenance: an upsert looks up the old record through the
//!   primary index and writes anti-matter ⟨old point, id⟩ into the
//!   secondary index, so queries need no validation. **Lazy**: no lookup
//!   and no anti-matter on writes; queries validate each candidate against
//!   the primary index.
//! * **One log, one budget.** The indexes keep no logs of their own
//!   (`write_ahead_log: false`); every write is one record of the dataset's
//!   log holding all of its index operations, so a crash applies all or
//!   none of them. The indexes' memtables share one memory budget and are
//!   flushed together; then a checkpoint starts a new log, and logs before
//!   it are deleted. Replaying a log applies operations already in flushed
//!   tables again, in order, which leaves the same state.
//!
//! The layout on disk is in `docs/format.md`, "Dataset".

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::coding::{get_bytes, get_varint, put_bytes, put_varint};
use crate::compaction::CompactionSpec;
use crate::error::{Error, Result};
use crate::record::{append_record, read_records};
use crate::spatial::{Comparator, Point, Rect};
use crate::vfs::{DirLock, WritableFile};
use crate::{Db, Options, SyncMode, WriteBatch};

/// How the secondary index is kept consistent with the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maintenance {
    /// Anti-matter on every upsert and delete; queries trust the index.
    Eager,
    /// No cleanup on writes; queries validate against the primary index.
    Lazy,
}

impl Maintenance {
    /// `eager` or `lazy`.
    pub fn name(self) -> &'static str {
        match self {
            Maintenance::Eager => "eager",
            Maintenance::Lazy => "lazy",
        }
    }

    /// Inverse of [`Maintenance::name`].
    pub fn parse(s: &str) -> Option<Maintenance> {
        [Maintenance::Eager, Maintenance::Lazy]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

/// How a dataset is opened.
#[derive(Debug, Clone)]
pub struct DatasetOptions {
    /// Options shared by both indexes (file system, block size, caches,
    /// sync mode, `create_if_missing`); their `compaction`,
    /// `write_buffer_size`, `spatial` and `write_ahead_log` are set per
    /// index from the fields below.
    pub base: Options,
    /// Bytes the indexes' memtables may hold together before all of them
    /// are flushed (AsterixDB's global budget).
    pub memory_budget: usize,
    /// The secondary index's key order; fixed when the dataset is created.
    pub comparator: Comparator,
    /// Fixed when the dataset is created.
    pub maintenance: Maintenance,
    /// The primary index's merge policy (the seed uses `binomial:k=8`).
    pub primary_compaction: CompactionSpec,
    /// The spatial index's merge policy.
    pub index_compaction: CompactionSpec,
}

impl Default for DatasetOptions {
    fn default() -> Self {
        DatasetOptions {
            base: Options::default(),
            memory_budget: 4 << 20,
            comparator: Comparator::Hilbert,
            maintenance: Maintenance::Eager,
            primary_compaction: CompactionSpec::default(),
            index_compaction: CompactionSpec::default(),
        }
    }
}

/// A record: an id, a point and an opaque payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Primary key.
    pub id: u64,
    /// The indexed location.
    pub point: Point,
    /// The rest of the record.
    pub payload: Vec<u8>,
}

/// The answer of a window query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowAnswer {
    /// Ids of the records inside the window, ascending.
    pub ids: Vec<u64>,
    /// Operational components of the secondary index scanned (its read
    /// amplification, seed 000 §4.4).
    pub components: u64,
}

/// Write and read costs of the maintenance strategy.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DatasetStats {
    /// Upserts and deletes applied.
    pub writes: u64,
    /// Primary-index lookups made by writes (eager only).
    pub write_lookups: u64,
    /// Anti-matter entries written into the secondary index (eager only).
    pub antimatter: u64,
    /// Primary-index lookups made by queries to validate candidates (lazy).
    pub validations: u64,
    /// Candidates a validation rejected (stale secondary entries).
    pub stale_candidates: u64,
    /// Times all indexes were flushed together and the log restarted.
    pub checkpoints: u64,
}

#[derive(Default)]
struct Counters {
    writes: AtomicU64,
    write_lookups: AtomicU64,
    antimatter: AtomicU64,
    validations: AtomicU64,
    stale_candidates: AtomicU64,
    checkpoints: AtomicU64,
}

const DESCRIPTOR: &str = "DATASET";
const DESCRIPTOR_TMP: &str = "DATASET.tmp";
const LOCK: &str = "LOCK";
const PRIMARY_DIR: &str = "primary";
const INDEX_DIR: &str = "spatial";
const FORMAT_LINE: &str = "lamina-dataset 1";

/// The name of dataset log `n`.
fn log_name(n: u64) -> String {
    format!("dlog-{n:06}.log")
}

/// The number of a dataset log's name, `None` for any other name.
fn parse_log_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("dlog-")?.strip_suffix(".log")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What `DATASET` records: the fixed choices and the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Descriptor {
    comparator: Comparator,
    maintenance: Maintenance,
    /// Logs numbered below this are no longer needed.
    checkpoint: u64,
}

impl Descriptor {
    fn encode(&self) -> String {
        format!(
            "{FORMAT_LINE}\ncomparator {}\nmaintenance {}\ncheckpoint {}\n",
            self.comparator.name(),
            self.maintenance.name(),
            self.checkpoint
        )
    }

    fn decode(text: &str) -> Option<Descriptor> {
        let mut lines = text.lines();
        if lines.next()? != FORMAT_LINE {
            return None;
        }
        let mut field = |name: &str| {
            lines
                .next()?
                .strip_prefix(name)?
                .strip_prefix(' ')
                .map(str::to_string)
        };
        let comparator = Comparator::parse(&field("comparator")?)?;
        let maintenance = Maintenance::parse(&field("maintenance")?)?;
        let checkpoint = field("checkpoint")?.parse().ok()?;
        Some(Descriptor {
            comparator,
            maintenance,
            checkpoint,
        })
    }
}

/// Which index an operation of a log record goes to.
const PRIMARY: u8 = 0;
const SECONDARY: u8 = 1;
const PUT: u8 = 0;
const DELETE: u8 = 1;

/// One write's operations on both indexes, as logged and as applied.
#[derive(Default)]
struct Ops {
    log: Vec<u8>,
    count: u64,
    primary: WriteBatch,
    secondary: WriteBatch,
}

impl Ops {
    fn add(&mut self, index: u8, kind: u8, key: &[u8], value: &[u8]) {
        self.log.push(index);
        self.log.push(kind);
        put_bytes(&mut self.log, key);
        put_bytes(&mut self.log, value);
        self.count += 1;
        let batch = if index == PRIMARY {
            &mut self.primary
        } else {
            &mut self.secondary
        };
        if kind == PUT {
            batch.put(key, value);
        } else {
            batch.delete(key);
        }
    }

    /// The log record: a varint count, then per operation the index byte,
    /// the kind byte, the key and the value (varint-length-prefixed).
    fn record(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.log.len() + 10);
        put_varint(&mut out, self.count);
        out.extend_from_slice(&self.log);
        out
    }

    fn decode(mut rec: &[u8]) -> Option<Ops> {
        let count = get_varint(&mut rec)?;
        let mut ops = Ops::default();
        for _ in 0..count {
            let (&index, rest) = rec.split_first()?;
            let (&kind, rest) = rest.split_first()?;
            rec = rest;
            if index > SECONDARY || kind > DELETE {
                return None;
            }
            let key = get_bytes(&mut rec)?;
            let value = get_bytes(&mut rec)?;
            ops.add(index, kind, key, value);
        }
        rec.is_empty().then_some(ops)
    }
}

fn primary_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// The primary index's value: x and y (f64 little-endian), then the payload.
fn encode_record(point: Point, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + payload.len());
    v.extend_from_slice(&point.x.to_le_bytes());
    v.extend_from_slice(&point.y.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn decode_record(id: u64, value: &[u8]) -> Option<Record> {
    let x = f64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    let y = f64::from_le_bytes(value.get(8..16)?.try_into().ok()?);
    Some(Record {
        id,
        point: Point::new(x, y),
        payload: value.get(16..)?.to_vec(),
    })
}

struct Writer {
    log: Box<dyn WritableFile>,
    number: u64,
    /// A write reached the log but not both indexes: refuse further writes
    /// (a reopen replays the log and repairs the indexes).
    broken: bool,
}

/// Records with a primary and a spatial secondary index (see the module
/// docs).
pub struct Dataset {
    dir: PathBuf,
    opts: DatasetOptions,
    primary: Db,
    index: Db,
    writer: Mutex<Writer>,
    counters: Counters,
    _lock: Box<dyn DirLock>,
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("dir", &self.dir)
            .field("comparator", &self.opts.comparator)
            .field("maintenance", &self.opts.maintenance)
            .finish()
    }
}

impl Dataset {
    /// Opens (or, with `base.create_if_missing`, creates) the dataset in
    /// `dir`, replaying its log. A directory that holds something other than
    /// a dataset, or a dataset created with another comparator or
    /// maintenance strategy, is refused and left untouched.
    pub fn open(dir: impl AsRef<Path>, opts: DatasetOptions) -> Result<Dataset> {
        let dir = dir.as_ref().to_path_buf();
        let vfs = std::sync::Arc::clone(&opts.base.vfs);
        if opts.base.read_only {
            return Err(Error::InvalidArgument(
                "a dataset cannot be opened read-only yet".into(),
            ));
        }
        let descriptor_path = dir.join(DESCRIPTOR);
        let existing = vfs.exists(&descriptor_path);
        if !existing {
            let entries = if vfs.exists(&dir) {
                vfs.list(&dir)?
            } else {
                Vec::new()
            };
            if !entries.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{} is not empty and holds no {DESCRIPTOR}: not a dataset; nothing was changed",
                    dir.display()
                )));
            }
            if !opts.base.create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "no dataset in {} (create_if_missing is off)",
                    dir.display()
                )));
            }
            vfs.create_dir_all(&dir)?;
        }
        let lock = vfs.lock(&dir.join(LOCK))?;
        let descriptor = if existing {
            let text = vfs.read_all(&descriptor_path)?;
            let d = std::str::from_utf8(&text)
                .ok()
                .and_then(Descriptor::decode)
                .ok_or_else(|| Error::corruption(DESCRIPTOR, 0, "malformed dataset descriptor"))?;
            if d.comparator != opts.comparator || d.maintenance != opts.maintenance {
                return Err(Error::InvalidArgument(format!(
                    "{} was created with comparator {} and {} maintenance; open it with those",
                    dir.display(),
                    d.comparator.name(),
                    d.maintenance.name()
                )));
            }
            d
        } else {
            let d = Descriptor {
                comparator: opts.comparator,
                maintenance: opts.maintenance,
                checkpoint: 1,
            };
            write_descriptor(&opts.base, &dir, &d)?;
            d
        };
        let index_options = |compaction: &CompactionSpec, spatial| Options {
            compaction: compaction.clone(),
            write_buffer_size: opts.memory_budget.max(1),
            write_ahead_log: false,
            spatial,
            ..opts.base.clone()
        };
        let primary = Db::open(
            dir.join(PRIMARY_DIR),
            index_options(&opts.primary_compaction, None),
        )?;
        let index = Db::open(
            dir.join(INDEX_DIR),
            index_options(&opts.index_compaction, Some(opts.comparator)),
        )?;

        // Replay every log from the checkpoint on, oldest first.
        let mut logs: Vec<u64> = vfs
            .list(&dir)?
            .iter()
            .filter_map(|n| parse_log_name(n))
            .filter(|&n| n >= descriptor.checkpoint)
            .collect();
        logs.sort_unstable();
        for &n in &logs {
            let name = log_name(n);
            let data = vfs.read_all(&dir.join(&name))?;
            read_records(&data, &name, |offset, rec| {
                let ops = Ops::decode(rec)
                    .ok_or_else(|| Error::corruption(name.as_str(), offset, "malformed record"))?;
                apply(&primary, &index, ops)
            })?;
        }
        let number = logs.last().map_or(descriptor.checkpoint, |&n| n + 1);
        let log = vfs.create(&dir.join(log_name(number)))?;
        vfs.sync_dir(&dir)?;
        let dataset = Dataset {
            dir,
            opts,
            primary,
            index,
            writer: Mutex::new(Writer {
                log,
                number,
                broken: false,
            }),
            counters: Counters::default(),
            _lock: lock,
        };
        // What was replayed goes to tables now, and the logs before the new
        // one are no longer needed.
        dataset.checkpoint(&mut dataset.writer.lock())?;
        Ok(dataset)
    }

    /// Inserts `record`, or replaces the record with its id (moving it).
    pub fn upsert(&self, record: &Record) -> Result<()> {
        let new_key = self.opts.comparator.encode(record.point, record.id)?;
        let pk = primary_key(record.id);
        let mut writer = self.writer.lock();
        let mut ops = Ops::default();
        if self.opts.maintenance == Maintenance::Eager {
            self.counters.write_lookups.fetch_add(1, Ordering::Relaxed);
            if let Some(old) = self.get(record.id)? {
                if old.point.x.to_bits() != record.point.x.to_bits()
                    || old.point.y.to_bits() != record.point.y.to_bits()
                {
                    let old_key = self.opts.comparator.encode(old.point, record.id)?;
                    ops.add(SECONDARY, DELETE, &old_key, &[]);
                    self.counters.antimatter.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        ops.add(
            PRIMARY,
            PUT,
            &pk,
            &encode_record(record.point, &record.payload),
        );
        ops.add(SECONDARY, PUT, &new_key, &[]);
        self.commit(&mut writer, ops)
    }

    /// Deletes the record with id `id`; returns whether it existed (lazy
    /// maintenance does not look, and returns `true`).
    pub fn delete(&self, id: u64) -> Result<bool> {
        let mut writer = self.writer.lock();
        let mut ops = Ops::default();
        let existed = match self.opts.maintenance {
            Maintenance::Eager => {
                self.counters.write_lookups.fetch_add(1, Ordering::Relaxed);
                match self.get(id)? {
                    Some(old) => {
                        let old_key = self.opts.comparator.encode(old.point, id)?;
                        ops.add(SECONDARY, DELETE, &old_key, &[]);
                        self.counters.antimatter.fetch_add(1, Ordering::Relaxed);
                        true
                    }
                    None => return Ok(false),
                }
            }
            Maintenance::Lazy => true,
        };
        ops.add(PRIMARY, DELETE, &primary_key(id), &[]);
        self.commit(&mut writer, ops)?;
        Ok(existed)
    }

    /// The record with id `id`.
    pub fn get(&self, id: u64) -> Result<Option<Record>> {
        match self.primary.get(&primary_key(id))? {
            Some(v) => decode_record(id, &v)
                .map(Some)
                .ok_or_else(|| Error::corruption(PRIMARY_DIR, 0, "malformed record value")),
            None => Ok(None),
        }
    }

    /// Ids of the records whose point lies in the closed rectangle `window`.
    pub fn window(&self, window: Rect) -> Result<WindowAnswer> {
        let mut ids = Vec::new();
        let components = self.scan_window(window, |id| ids.push(id))?;
        ids.sort_unstable();
        Ok(WindowAnswer { ids, components })
    }

    /// How many records lie in `window`, without collecting their ids;
    /// with the components scanned.
    pub fn count(&self, window: Rect) -> Result<(u64, u64)> {
        let mut n = 0u64;
        let components = self.scan_window(window, |_| n += 1)?;
        Ok((n, components))
    }

    /// Calls `found` with each record id in `window` (validated against the
    /// primary index under lazy maintenance); returns the components read.
    fn scan_window(&self, window: Rect, mut found: impl FnMut(u64)) -> Result<u64> {
        let iter = self.index.window(window)?;
        let components = iter.components();
        for item in iter {
            let (key, _) = item?;
            let (point, id) = self
                .opts
                .comparator
                .decode(&key)
                .ok_or_else(|| Error::corruption(INDEX_DIR, 0, "malformed spatial key"))?;
            if self.opts.maintenance == Maintenance::Lazy {
                self.counters.validations.fetch_add(1, Ordering::Relaxed);
                let current = self.get(id)?;
                let valid = current.is_some_and(|r| {
                    r.point.x.to_bits() == point.x.to_bits()
                        && r.point.y.to_bits() == point.y.to_bits()
                });
                if !valid {
                    self.counters
                        .stale_candidates
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            found(id);
        }
        Ok(components)
    }

    /// Flushes both indexes' memtables together and restarts the log.
    pub fn flush(&self) -> Result<()> {
        self.checkpoint(&mut self.writer.lock())
    }

    /// The primary index (its statistics, compaction settings).
    pub fn primary(&self) -> &Db {
        &self.primary
    }

    /// The spatial secondary index.
    pub fn index(&self) -> &Db {
        &self.index
    }

    /// The maintenance strategy's costs so far.
    pub fn stats(&self) -> DatasetStats {
        let c = &self.counters;
        DatasetStats {
            writes: c.writes.load(Ordering::Relaxed),
            write_lookups: c.write_lookups.load(Ordering::Relaxed),
            antimatter: c.antimatter.load(Ordering::Relaxed),
            validations: c.validations.load(Ordering::Relaxed),
            stale_candidates: c.stale_candidates.load(Ordering::Relaxed),
            checkpoints: c.checkpoints.load(Ordering::Relaxed),
        }
    }

    /// Flushes everything and closes both indexes.
    pub fn close(self) -> Result<()> {
        let flushed = self.flush();
        let primary = self.primary.close();
        let index = self.index.close();
        flushed.and(primary).and(index)
    }

    /// Logs `ops` as one record, then applies them to both indexes.
    fn commit(&self, writer: &mut Writer, ops: Ops) -> Result<()> {
        if writer.broken {
            return Err(Error::InvalidArgument(
                "an earlier write failed half-applied; reopen the dataset to replay its log".into(),
            ));
        }
        append_record(writer.log.as_mut(), &ops.record())?;
        match self.opts.base.sync {
            SyncMode::Always => writer.log.sync()?,
            _ => writer.log.flush()?,
        }
        if let Err(e) = apply(&self.primary, &self.index, ops) {
            writer.broken = true;
            return Err(e);
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        // An index must never flush on its own: its table would hold writes
        // whose log record may not be durable yet. Each index switches
        // memtables at the budget, checked before its next write, so
        // flushing all of them as soon as their sum reaches it keeps every
        // flush here, behind a synced log.
        let held = self.primary.active_memtable_bytes() + self.index.active_memtable_bytes();
        if held >= self.opts.memory_budget {
            self.checkpoint(writer)?;
        }
        Ok(())
    }

    /// Flushes both indexes, starts log `number + 1`, records it as the
    /// checkpoint and deletes the logs before it (all of them created by
    /// this dataset: only names of its log pattern are touched).
    fn checkpoint(&self, writer: &mut Writer) -> Result<()> {
        // The tables about to be written must not hold a write the log
        // could still lose.
        writer.log.sync()?;
        self.primary.flush()?;
        self.index.flush()?;
        let vfs = &self.opts.base.vfs;
        let next = writer.number + 1;
        let log = vfs.create(&self.dir.join(log_name(next)))?;
        vfs.sync_dir(&self.dir)?;
        write_descriptor(
            &self.opts.base,
            &self.dir,
            &Descriptor {
                comparator: self.opts.comparator,
                maintenance: self.opts.maintenance,
                checkpoint: next,
            },
        )?;
        writer.log = log;
        writer.number = next;
        writer.broken = false;
        for name in vfs.list(&self.dir)? {
            if parse_log_name(&name).is_some_and(|n| n < next) {
                vfs.remove(&self.dir.join(&name))?;
            }
        }
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Applies one logged write to both indexes.
fn apply(primary: &Db, index: &Db, ops: Ops) -> Result<()> {
    if !ops.secondary.is_empty() {
        index.write(ops.secondary)?;
    }
    if !ops.primary.is_empty() {
        primary.write(ops.primary)?;
    }
    Ok(())
}

/// Writes `DATASET` durably: a temporary file, synced, renamed over it.
fn write_descriptor(base: &Options, dir: &Path, d: &Descriptor) -> Result<()> {
    let vfs = &base.vfs;
    let tmp = dir.join(DESCRIPTOR_TMP);
    let mut f = vfs.create(&tmp)?;
    f.append(d.encode().as_bytes())?;
    f.sync()?;
    drop(f);
    vfs.rename(&tmp, &dir.join(DESCRIPTOR))?;
    vfs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_and_log_names_roundtrip() {
        let d = Descriptor {
            comparator: Comparator::Simple,
            maintenance: Maintenance::Lazy,
            checkpoint: 42,
        };
        assert_eq!(Descriptor::decode(&d.encode()), Some(d));
        assert_eq!(
            d.encode(),
            "lamina-dataset 1\ncomparator simple\nmaintenance lazy\ncheckpoint 42\n"
        );
        assert!(Descriptor::decode("lamina-dataset 2\n").is_none());
        assert_eq!(parse_log_name(&log_name(7)), Some(7));
        assert_eq!(log_name(7), "dlog-000007.log");
        for bad in [
            "dlog-7.log",
            "dlog-00000x.log",
            "000007.log",
            "dlog-000007.log.tmp",
        ] {
            assert_eq!(parse_log_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn ops_roundtrip_and_reject_garbage() {
        let mut ops = Ops::default();
        ops.add(SECONDARY, DELETE, b"old", b"");
        ops.add(PRIMARY, PUT, b"pk", b"value");
        let rec = ops.record();
        // count 2, then (1, 1, "old", ""), (0, 0, "pk", "value").
        assert_eq!(
            rec,
            [
                &[2u8, 1, 1, 3][..],
                b"old",
                &[0, 0, 0, 2],
                b"pk",
                &[5],
                b"value"
            ]
            .concat()
        );
        let back = Ops::decode(&rec).unwrap();
        assert_eq!(back.record(), rec);
        assert_eq!((back.primary.len(), back.secondary.len()), (1, 1));
        assert!(Ops::decode(&rec[..rec.len() - 1]).is_none());
        let mut bad = rec.clone();
        bad[1] = 2;
        assert!(Ops::decode(&bad).is_none());
        assert!(Ops::decode(&[rec.as_slice(), &[0]].concat()).is_none());
    }
}
